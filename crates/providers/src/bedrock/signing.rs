//! SigV4 signing of each Bedrock request with the AWS SDK's own signer (`aws-sigv4`).
//!
//! The transport calls [`SigV4::sign`] with the method, URI, headers and body it is about to
//! send, after every other header is set, so the signature covers exactly the bytes on the
//! wire: the `host` (from the URI), `content-type`, `accept`, the `x-amz-date` the signer adds,
//! and the session token when there is one. `user-agent` is left unsigned, as the SDKs do
//! (proxies rewrite it). The model id in the path is already percent-encoded; the signer
//! encodes the path once more for the canonical request, which is what Bedrock (like every
//! AWS service but S3) expects.

use std::fmt;
use std::time::SystemTime;

use ::http::header::{HeaderMap, HeaderName, HeaderValue};
use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use ripcord_core::{Error, ErrorKind, Result};
use secrecy::ExposeSecret;

use super::credentials::Secret;
use crate::http::Sign;

/// The signing name of Bedrock's runtime API.
pub(crate) const SERVICE: &str = "bedrock";

/// Signs with access keys for one region.
pub(crate) struct SigV4 {
    identity: Identity,
    access_key_id: String,
    region: String,
}

impl fmt::Debug for SigV4 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigV4")
            .field("access_key_id", &self.access_key_id)
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

impl SigV4 {
    /// A signer for these keys (`None` for an API key, which is a plain bearer header).
    pub(crate) fn new(secret: &Secret, region: &str) -> Result<Option<SigV4>> {
        let Secret::Keys {
            access_key_id,
            secret_access_key,
            session_token,
        } = secret
        else {
            return Ok(None);
        };
        if access_key_id.trim().is_empty() || secret_access_key.expose_secret().trim().is_empty() {
            return Err(Error::new(
                ErrorKind::Auth,
                "bedrock: the access key id or the secret access key is empty",
            ));
        }
        let creds = Credentials::new(
            access_key_id.clone(),
            secret_access_key.expose_secret().to_owned(),
            session_token.as_ref().map(|t| t.expose_secret().to_owned()),
            None,
            "ripcord",
        );
        Ok(Some(SigV4 {
            identity: creds.into(),
            access_key_id: access_key_id.clone(),
            region: region.to_owned(),
        }))
    }

    /// The headers to add for a request signed at `time`.
    pub(crate) fn signature_headers(
        &self,
        method: &str,
        uri: &str,
        headers: &HeaderMap,
        body: &[u8],
        time: SystemTime,
    ) -> Result<Vec<(HeaderName, HeaderValue)>> {
        let mut pairs = Vec::with_capacity(headers.len());
        for (name, value) in headers {
            let value = value
                .to_str()
                .map_err(|_| signing_error(format!("the header {name} is not visible ASCII")))?;
            pairs.push((name.as_str(), value));
        }
        let params = v4::SigningParams::builder()
            .identity(&self.identity)
            .region(&self.region)
            .name(SERVICE)
            .time(time)
            .settings(SigningSettings::default())
            .build()
            .map_err(|e| signing_error(e.to_string()))?
            .into();
        let request =
            SignableRequest::new(method, uri, pairs.into_iter(), SignableBody::Bytes(body))
                .map_err(|e| signing_error(e.to_string()))?;
        let (instructions, _signature) = sign(request, &params)
            .map_err(|e| signing_error(e.to_string()))?
            .into_parts();
        let (added, _query) = instructions.into_parts();
        let mut out = Vec::with_capacity(added.len());
        for h in added {
            let name = HeaderName::from_static(h.name());
            let mut value = HeaderValue::from_str(h.value()).map_err(|_| {
                signing_error(format!(
                    "the signed header {} is not a valid value",
                    h.name()
                ))
            })?;
            // The signature and the session token never show in logs.
            if h.sensitive() || name == ::http::header::AUTHORIZATION {
                value.set_sensitive(true);
            }
            out.push((name, value));
        }
        Ok(out)
    }
}

/// The message never includes a credential: aws-sigv4's errors name what was wrong, not the
/// values.
fn signing_error(detail: String) -> Error {
    Error::new(
        ErrorKind::Auth,
        format!("bedrock: cannot sign the request: {detail}"),
    )
}

impl Sign for SigV4 {
    fn sign(
        &self,
        method: &http::Method,
        uri: &http::Uri,
        headers: &mut HeaderMap,
        body: &[u8],
    ) -> Result<()> {
        let added = self.signature_headers(
            method.as_str(),
            &uri.to_string(),
            headers,
            body,
            SystemTime::now(),
        )?;
        for (name, value) in added {
            headers.insert(name, value);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use secrecy::SecretString;

    use super::*;

    fn signer(token: Option<&str>) -> SigV4 {
        let secret = Secret::Keys {
            access_key_id: "AKIDEXAMPLE".to_owned(),
            secret_access_key: SecretString::from("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
            session_token: token.map(SecretString::from),
        };
        SigV4::new(&secret, "us-east-1").unwrap().unwrap()
    }

    fn headers() -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("content-type", HeaderValue::from_static("application/json"));
        h.insert("accept", HeaderValue::from_static("application/json"));
        h
    }

    #[test]
    fn the_signature_covers_body_path_and_headers() {
        let s = signer(None);
        let at = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let uri = "https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse";
        let auth = |body: &[u8], uri: &str, h: &HeaderMap| {
            let out = s.signature_headers("POST", uri, h, body, at).unwrap();
            out.into_iter()
                .find(|(n, _)| n == "authorization")
                .map(|(_, v)| v.to_str().unwrap().to_owned())
                .unwrap()
        };
        let a = auth(b"{}", uri, &headers());
        assert!(
            a.starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20231114/us-east-1/bedrock/aws4_request, SignedHeaders=accept;content-type;host;x-amz-date, Signature="),
            "{a}"
        );
        assert_eq!(
            a,
            auth(b"{}", uri, &headers()),
            "deterministic at one instant"
        );
        assert_ne!(a, auth(b"{ }", uri, &headers()), "the body is signed");
        assert_ne!(a, auth(b"{}", &uri.replace("haiku", "opus"), &headers()));
        let mut other = headers();
        other.insert(
            "accept",
            HeaderValue::from_static("application/vnd.amazon.eventstream"),
        );
        assert_ne!(a, auth(b"{}", uri, &other), "accept is signed");
        assert!(!a.contains("wJalr"));
    }

    #[test]
    fn a_session_token_is_sent_signed_and_sensitive() {
        let s = signer(Some("session-token-123"));
        let out = s
            .signature_headers(
                "POST",
                "https://bedrock-runtime.eu-west-1.amazonaws.com/model/x/converse",
                &headers(),
                b"{}",
                SystemTime::now(),
            )
            .unwrap();
        let token = out
            .iter()
            .find(|(n, _)| n == "x-amz-security-token")
            .map(|(_, v)| v.clone())
            .unwrap();
        assert!(token.is_sensitive());
        let auth = out.iter().find(|(n, _)| n == "authorization").unwrap();
        assert!(auth.1.is_sensitive());
        assert!(
            auth.1
                .to_str()
                .unwrap()
                .contains("host;x-amz-date;x-amz-security-token")
        );
        assert!(!format!("{s:?}").contains("wJalr"));
    }

    #[test]
    fn empty_keys_are_refused() {
        let secret = Secret::Keys {
            access_key_id: "AKID".to_owned(),
            secret_access_key: SecretString::from(" "),
            session_token: None,
        };
        assert_eq!(
            SigV4::new(&secret, "us-east-1").unwrap_err().kind(),
            ErrorKind::Auth
        );
        let api = Secret::ApiKey(SecretString::from("k"));
        assert!(SigV4::new(&api, "us-east-1").unwrap().is_none());
    }
}
