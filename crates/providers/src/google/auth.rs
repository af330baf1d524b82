//! Google credentials for Vertex AI: a service-account key exchanged for OAuth access tokens,
//! or a bearer token someone else minted.
//!
//! A service account signs a short JWT (RS256, <https://developers.google.com/identity/protocols/oauth2/service-account#authorizingrequests>)
//! with its private key and trades it at the key's `token_uri` for an access token of about an
//! hour. ripcord signs with `jsonwebtoken` (no hand-written crypto), caches the token, and
//! refreshes it *ahead* of expiry: once less than a quarter of its life (at most five minutes)
//! is left. Refreshes are single-flight — concurrent calls that find the token stale wait for
//! the one exchange in progress instead of each starting their own — and a failed refresh while
//! the old token is still valid keeps serving the old token. A failed exchange is classified:
//! `invalid_grant` / `invalid_client` (a wrong, revoked or disabled key) is `Auth`, a transport
//! failure is `Network` / `Timeout`, a 5xx a server error. The private key never leaves this
//! module: `Debug` prints `[redacted]`, and no error or log line carries it.
//!
//! The happy path takes no lock across an await: the cached token is read under a short
//! synchronous lock; only a refresh takes the async one.

use std::fmt;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ::http::header::{HeaderMap, HeaderValue};
use ripcord_core::{Context, Error, ErrorKind, Result, StatusCode};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::http::{self, Auth, HttpClient, Target, Timeouts, Transport};

/// The OAuth scope Vertex AI accepts.
pub const CLOUD_PLATFORM_SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// Google's token endpoint, when a key names none.
pub const GOOGLE_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";

/// How long the JWT assertion is valid (Google's maximum).
const ASSERTION_LIFETIME: u64 = 3600;

/// The most a token is refreshed ahead of its expiry.
const MAX_REFRESH_MARGIN: Duration = Duration::from_secs(300);

/// A service-account key file (the JSON Google Cloud issues), as far as signing needs it.
///
/// # Examples
///
/// ```
/// use ripcord_providers::google::ServiceAccountKey;
/// let e = ServiceAccountKey::from_json(r#"{"type":"service_account","client_email":"a@b"}"#).unwrap_err();
/// assert!(e.message().contains("private_key"), "{e}");
/// ```
#[derive(Clone)]
pub struct ServiceAccountKey {
    client_email: String,
    private_key: SecretString,
    private_key_id: Option<String>,
    token_uri: String,
    project_id: Option<String>,
}

impl fmt::Debug for ServiceAccountKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServiceAccountKey")
            .field("client_email", &self.client_email)
            .field("private_key", &"[redacted]")
            .field("private_key_id", &self.private_key_id)
            .field("token_uri", &self.token_uri)
            .field("project_id", &self.project_id)
            .finish()
    }
}

#[derive(Deserialize)]
struct KeyFile {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    client_email: Option<String>,
    #[serde(default)]
    private_key: Option<String>,
    #[serde(default)]
    private_key_id: Option<String>,
    #[serde(default)]
    token_uri: Option<String>,
    #[serde(default)]
    project_id: Option<String>,
}

fn auth_error(message: String) -> Error {
    Error::new(ErrorKind::Auth, message)
}

impl ServiceAccountKey {
    /// Reads a key from its JSON text.
    ///
    /// # Errors
    ///
    /// `Auth` naming what is wrong (not JSON — with the line and column only, never the text —,
    /// not a service-account key, a missing field).
    pub fn from_json(text: &str) -> Result<ServiceAccountKey> {
        let f: KeyFile = serde_json::from_str(text).map_err(|e| {
            // serde's message can quote a value; the position is all we repeat.
            auth_error(format!(
                "the service-account key is not valid JSON (line {}, column {})",
                e.line(),
                e.column()
            ))
        })?;
        if let Some(kind) = f.kind.as_deref()
            && kind != "service_account"
        {
            return Err(auth_error(format!(
                "the credentials are of type {kind:?}, not a service-account key"
            )));
        }
        let missing = |field: &str| auth_error(format!("the service-account key has no `{field}`"));
        let client_email = f
            .client_email
            .filter(|s| !s.trim().is_empty())
            .ok_or_else(|| missing("client_email"))?;
        let private_key = f
            .private_key
            .filter(|s| !s.trim().is_empty())
            .ok_or_else(|| missing("private_key"))?;
        Ok(ServiceAccountKey {
            client_email,
            private_key: SecretString::from(private_key),
            private_key_id: f.private_key_id.filter(|s| !s.is_empty()),
            token_uri: f
                .token_uri
                .filter(|s| !s.trim().is_empty())
                .unwrap_or_else(|| GOOGLE_TOKEN_URI.to_owned()),
            project_id: f.project_id.filter(|s| !s.is_empty()),
        })
    }

    /// Reads a key file.
    ///
    /// # Errors
    ///
    /// `Auth` when the file cannot be read (naming the path) or is not a key.
    pub fn from_file(path: impl AsRef<Path>) -> Result<ServiceAccountKey> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| {
            auth_error(format!(
                "cannot read the service-account key {}: {e}",
                path.display()
            ))
        })?;
        ServiceAccountKey::from_json(&text).map_err(|e| {
            let m = format!("{}: {}", path.display(), e.message());
            e.with_message(m)
        })
    }

    /// The service account's e-mail (the JWT's issuer).
    pub fn client_email(&self) -> &str {
        &self.client_email
    }

    /// Where tokens are minted.
    pub fn token_uri(&self) -> &str {
        &self.token_uri
    }

    /// The project the key belongs to, when the file names it.
    pub fn project_id(&self) -> Option<&str> {
        self.project_id.as_deref()
    }
}

/// How a Vertex AI provider authenticates.
///
/// # Examples
///
/// ```
/// use ripcord_providers::google::GoogleCredentials;
/// let c = GoogleCredentials::access_token("ya29.secret-token");
/// assert!(!format!("{c:?}").contains("ya29"));
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub enum GoogleCredentials {
    /// A service-account key: ripcord mints and refreshes access tokens itself.
    ServiceAccount(ServiceAccountKey),
    /// A ready access token (`gcloud auth print-access-token`, a metadata server, a sidecar),
    /// sent as `Authorization: Bearer …` and never refreshed.
    AccessToken(SecretString),
}

impl fmt::Debug for GoogleCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GoogleCredentials::ServiceAccount(k) => {
                f.debug_tuple("ServiceAccount").field(k).finish()
            }
            GoogleCredentials::AccessToken(_) => f.write_str("AccessToken([redacted])"),
        }
    }
}

impl GoogleCredentials {
    /// A ready access token.
    pub fn access_token(token: impl Into<SecretString>) -> GoogleCredentials {
        GoogleCredentials::AccessToken(token.into())
    }

    /// The service-account key file at `path`.
    ///
    /// # Errors
    ///
    /// As [`ServiceAccountKey::from_file`].
    pub fn key_file(path: impl AsRef<Path>) -> Result<GoogleCredentials> {
        Ok(GoogleCredentials::ServiceAccount(
            ServiceAccountKey::from_file(path)?,
        ))
    }

    /// The key file `GOOGLE_APPLICATION_CREDENTIALS` names.
    ///
    /// # Errors
    ///
    /// `Auth` when the variable is unset, or as [`ServiceAccountKey::from_file`].
    pub fn from_env() -> Result<GoogleCredentials> {
        let path = http::env("GOOGLE_APPLICATION_CREDENTIALS").ok_or_else(|| {
            auth_error("vertex: GOOGLE_APPLICATION_CREDENTIALS is not set".to_owned())
        })?;
        GoogleCredentials::key_file(path)
    }

    /// The project a service-account key belongs to.
    pub fn project_id(&self) -> Option<&str> {
        match self {
            GoogleCredentials::ServiceAccount(k) => k.project_id(),
            GoogleCredentials::AccessToken(_) => None,
        }
    }
}

#[derive(Serialize)]
struct Claims<'a> {
    iss: &'a str,
    scope: &'a str,
    aud: &'a str,
    iat: u64,
    exp: u64,
}

#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
    #[serde(default)]
    expires_in: Option<u64>,
}

#[derive(Deserialize)]
struct TokenError {
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    error_description: Option<String>,
}

/// A cached access token, as the header it is sent in.
#[derive(Clone)]
struct Cached {
    header: HeaderValue,
    refresh_at: Instant,
    expires_at: Instant,
}

struct Account {
    key: ServiceAccountKey,
    signing: jsonwebtoken::EncodingKey,
    transport: Transport,
    target: Target,
    cache: Mutex<Option<Cached>>,
    refresh: tokio::sync::Mutex<()>,
}

enum Source {
    Static(HeaderValue),
    Account(Box<Account>),
}

/// Where a Vertex provider gets its `Authorization` header: fixed, or minted and refreshed.
#[derive(Clone)]
pub(crate) struct TokenSource {
    source: Arc<Source>,
}

impl fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &*self.source {
            Source::Static(_) => f.write_str("authorization: Bearer [redacted] (fixed)"),
            Source::Account(a) => write!(
                f,
                "authorization: Bearer [redacted] (service account {}, token from {})",
                a.key.client_email, a.key.token_uri
            ),
        }
    }
}

fn bearer(token: &str, what: &str) -> Result<HeaderValue> {
    let mut v = HeaderValue::from_str(&format!("Bearer {}", token.trim())).map_err(|_| {
        auth_error(format!(
            "{what}: the access token contains characters that are not allowed in an HTTP header"
        ))
    })?;
    v.set_sensitive(true);
    Ok(v)
}

/// Makes sure `jsonwebtoken` has a crypto provider: its own choice when exactly one backend is
/// compiled in (ours, RustCrypto), else ours installed explicitly — with two backends in one
/// build it would otherwise refuse to pick one.
fn ensure_crypto_provider() {
    use jsonwebtoken::crypto::CryptoProvider;
    if CryptoProvider::try_get_default().is_none() {
        let _ = jsonwebtoken::crypto::rust_crypto::DEFAULT_PROVIDER.install_default();
    }
}

/// What went wrong in `jsonwebtoken`, without anything it may quote from the key.
fn jwt_reason(e: &jsonwebtoken::errors::Error) -> &'static str {
    use jsonwebtoken::errors::ErrorKind as K;
    match e.kind() {
        K::InvalidKeyFormat => "not a PEM key of the expected format",
        K::InvalidRsaKey(_) => "not a valid RSA key",
        K::RsaFailedSigning | K::Signing(_) => "signing failed",
        K::Base64(_) => "bad base64 in the PEM body",
        _ => "unusable key",
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl TokenSource {
    /// Prepares the credentials: parses and checks the private key now, so a bad key fails
    /// when the provider is built, not on its first call.
    pub(crate) fn new(
        creds: GoogleCredentials,
        client: Option<HttpClient>,
        timeouts: Timeouts,
        what: &str,
    ) -> Result<TokenSource> {
        let source = match creds {
            GoogleCredentials::AccessToken(t) => {
                if t.expose_secret().trim().is_empty() {
                    return Err(auth_error(format!("{what}: the access token is empty")));
                }
                Source::Static(bearer(t.expose_secret(), what)?)
            }
            GoogleCredentials::ServiceAccount(key) => {
                ensure_crypto_provider();
                let signing = jsonwebtoken::EncodingKey::from_rsa_pem(
                    key.private_key.expose_secret().as_bytes(),
                )
                .map_err(|e| {
                    auth_error(format!(
                        "{what}: the private key of service account {} is not an RSA PEM key ({})",
                        key.client_email,
                        jwt_reason(&e)
                    ))
                })?;
                let url = http::endpoint(&key.token_uri, "", what)?;
                let target = Target::new(url, what)?;
                let transport =
                    Transport::new(client, Auth::none(), HeaderMap::new(), timeouts, what)?.form();
                Source::Account(Box::new(Account {
                    key,
                    signing,
                    transport,
                    target,
                    cache: Mutex::new(None),
                    refresh: tokio::sync::Mutex::new(()),
                }))
            }
        };
        Ok(TokenSource {
            source: Arc::new(source),
        })
    }

    /// The `Authorization` header for a request now: the cached token while it is fresh, else
    /// one refresh (shared by every caller that needs it at the same time).
    ///
    /// # Errors
    ///
    /// The failed exchange, classified, when there is no valid token to fall back on.
    pub(crate) async fn authorization(&self, ctx: &Context) -> Result<HeaderValue> {
        let a = match &*self.source {
            Source::Static(h) => return Ok(h.clone()),
            Source::Account(a) => a,
        };
        if let Some(c) = a.fresh(Instant::now()) {
            return Ok(c.header);
        }
        let _one_refresh = a.refresh.lock().await;
        // Whoever held the lock before may have refreshed already.
        let now = Instant::now();
        if let Some(c) = a.fresh(now) {
            return Ok(c.header);
        }
        match a.exchange(ctx).await {
            Ok(c) => {
                let header = c.header.clone();
                *a.cache.lock().unwrap_or_else(PoisonError::into_inner) = Some(c);
                Ok(header)
            }
            Err(e) => match a.cached().filter(|c| Instant::now() < c.expires_at) {
                Some(old) => {
                    // The old token still works until it expires: serve it, and say so once.
                    tracing::warn!(
                        error.type = e.kind().as_str(),
                        error.message = %e.message(),
                        ripcord.token_still_valid = true,
                        message = ripcord_core::telemetry::event::VENDOR_ERROR
                    );
                    Ok(old.header)
                }
                None => Err(e),
            },
        }
    }
}

impl Account {
    fn cached(&self) -> Option<Cached> {
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn fresh(&self, now: Instant) -> Option<Cached> {
        self.cached().filter(|c| now < c.refresh_at)
    }

    /// Signs an assertion and trades it for an access token.
    async fn exchange(&self, ctx: &Context) -> Result<Cached> {
        let what = "google token exchange";
        let iat = unix_now();
        let claims = Claims {
            iss: &self.key.client_email,
            scope: CLOUD_PLATFORM_SCOPE,
            aud: &self.key.token_uri,
            iat,
            exp: iat + ASSERTION_LIFETIME,
        };
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
        header.kid = self.key.private_key_id.clone();
        let assertion = jsonwebtoken::encode(&header, &claims, &self.signing).map_err(|e| {
            auth_error(format!(
                "{what}: cannot sign the assertion for {} ({})",
                self.key.client_email,
                jwt_reason(&e)
            ))
        })?;
        let body = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer")
            .append_pair("assertion", &assertion)
            .finish()
            .into_bytes();
        let sent_at = Instant::now();
        let (mut resp, started) = self
            .transport
            .send(ctx, &self.target, body, false, token_error)
            .await
            .map_err(|e| {
                let m = format!("{what}: {}", e.message());
                e.with_message(m)
            })?;
        let raw = self.transport.body(ctx, started, &mut resp).await?;
        let t: TokenResponse = serde_json::from_slice(&raw).map_err(|e| {
            Error::new(
                ErrorKind::InvalidResponse,
                format!("{what}: the token endpoint's answer is not a token ({e})"),
            )
        })?;
        let lifetime = Duration::from_secs(t.expires_in.unwrap_or(ASSERTION_LIFETIME).max(1));
        let margin = (lifetime / 4).min(MAX_REFRESH_MARGIN);
        Ok(Cached {
            header: bearer(&t.access_token, what)?,
            refresh_at: sent_at + (lifetime - margin),
            expires_at: sent_at + lifetime,
        })
    }
}

/// A failed token exchange (RFC 6749 §5.2 errors): a key Google refuses is `Auth`.
fn token_error(status: u16, _headers: &HeaderMap, body: &[u8]) -> Error {
    let parsed: Option<TokenError> = serde_json::from_slice(body).ok();
    let code = parsed.as_ref().and_then(|t| t.error.clone());
    let description = parsed.as_ref().and_then(|t| t.error_description.clone());
    let kind = match (status, code.as_deref()) {
        (
            _,
            Some(
                "invalid_grant"
                | "invalid_client"
                | "unauthorized_client"
                | "access_denied"
                | "invalid_scope",
            ),
        ) => ErrorKind::Auth,
        (429, _) => ErrorKind::RateLimited,
        (500..=599, _) => ErrorKind::ServerError,
        (401 | 403, _) => ErrorKind::Auth,
        _ => ErrorKind::InvalidResponse,
    };
    let detail = match (&code, &description) {
        (Some(c), Some(d)) => format!("{c}: {d}"),
        (Some(c), None) => c.clone(),
        _ => format!("HTTP {status}"),
    };
    let mut e = Error::new(kind, format!("the token endpoint refused: {detail}"))
        .with_status(StatusCode(status));
    if let Some(c) = code {
        e = e.with_vendor_code(c);
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_files_are_checked_and_never_printed() {
        let e =
            ServiceAccountKey::from_json("{\"private_key\": \"-----BEGIN PRIVATE KEY-----\nSECRET")
                .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Auth);
        assert!(!e.message().contains("SECRET"), "{e}");
        let e = ServiceAccountKey::from_json(r#"{"type":"authorized_user"}"#).unwrap_err();
        assert!(e.message().contains("authorized_user"), "{e}");
        let k = ServiceAccountKey::from_json(
            r#"{"type":"service_account","client_email":"sa@p.iam.gserviceaccount.com","private_key":"SECRET-PEM","project_id":"p"}"#,
        )
        .unwrap();
        assert_eq!(k.token_uri(), GOOGLE_TOKEN_URI);
        assert_eq!(k.project_id(), Some("p"));
        assert!(!format!("{k:?}").contains("SECRET"));
        // A key that is not a PEM fails when the provider is built, without echoing it.
        let e = TokenSource::new(
            GoogleCredentials::ServiceAccount(k),
            None,
            Timeouts::default(),
            "vertex",
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Auth);
        assert!(!e.to_string().contains("SECRET"), "{e}");
        let e = GoogleCredentials::key_file("/nonexistent/key.json").unwrap_err();
        assert!(e.message().contains("/nonexistent/key.json"), "{e}");
    }

    #[test]
    fn token_errors_are_classified() {
        let h = HeaderMap::new();
        let e = token_error(
            400,
            &h,
            br#"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#,
        );
        assert_eq!(e.kind(), ErrorKind::Auth);
        assert_eq!(e.vendor_code(), Some("invalid_grant"));
        assert!(e.message().contains("Invalid JWT Signature."), "{e}");
        assert_eq!(token_error(503, &h, b"").kind(), ErrorKind::ServerError);
        assert_eq!(token_error(429, &h, b"{}").kind(), ErrorKind::RateLimited);
        assert_eq!(token_error(401, &h, b"").kind(), ErrorKind::Auth);
    }
}
