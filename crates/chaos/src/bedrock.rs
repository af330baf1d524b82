//! The Bedrock wire: Converse (JSON) and ConverseStream (`application/vnd.amazon.eventstream`),
//! behind a real SigV4 check.
//!
//! Shapes follow <https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_Converse.html>
//! and <https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html>:
//! `POST /model/{modelId}/converse` answers `{"output":{"message":…},"stopReason","usage","metrics"}`;
//! `/converse-stream` answers binary event-stream messages (prelude, headers, payload, CRC32s,
//! written by the AWS SDK's own encoder) — `messageStart`, `contentBlockDelta` (text),
//! `contentBlockStart` / `contentBlockDelta` (`toolUse`), `contentBlockStop`, `messageStop`,
//! then `metadata` (usage) last. Errors carry their type in `x-amzn-ErrorType`; mid-stream they
//! are `:message-type: exception` frames.
//!
//! Every request is authenticated before anything else, as Bedrock does: a bearer token must
//! be [`TEST_API_KEY`]; a SigV4 `Authorization` must be signed with [`TEST_ACCESS_KEY_ID`] /
//! [`TEST_SECRET_ACCESS_KEY`] (or the temporary [`TEST_TEMP_ACCESS_KEY_ID`] with
//! [`TEST_SESSION_TOKEN`]), and the fake recomputes the signature from the request it received
//! — method, path, the signed headers' values, the body — with `aws-sigv4` and compares. A
//! request whose signed header, path or body changed after signing gets Bedrock's 403
//! `InvalidSignatureException`; an unknown key `UnrecognizedClientException`; the
//! [`EXPIRED_SESSION_TOKEN`] `ExpiredTokenException`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_eventstream::frame::write_message_to;
use aws_smithy_runtime_api::client::identity::Identity;
use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use serde_json::{Value, json};

use crate::anthropic;
use crate::http::{Frames, Incoming, broken_json};
use crate::openai::Ctx;
use crate::reply::{Reply, split_even};
use crate::vendor_error::{ErrorResponse, VendorError};

/// The long-term access key id the fake accepts.
pub const TEST_ACCESS_KEY_ID: &str = "AKIARIPCORDTEST00001";
/// The temporary access key id the fake accepts (with [`TEST_SESSION_TOKEN`]).
pub const TEST_TEMP_ACCESS_KEY_ID: &str = "ASIARIPCORDTEST00001";
/// The secret of both test keys.
pub const TEST_SECRET_ACCESS_KEY: &str = "ripcordTestSecretKey/K7MDENG+bPxRfiCYEXAMPLE";
/// The session token of [`TEST_TEMP_ACCESS_KEY_ID`].
pub const TEST_SESSION_TOKEN: &str = "IQoJb3JpZ2luX2VjEripcordTestSessionToken==";
/// A session token the fake reports as expired.
pub const EXPIRED_SESSION_TOKEN: &str = "IQoJb3JpZ2luX2VjEripcordExpiredToken==";
/// The Bedrock API key the fake accepts as `Authorization: Bearer …`.
pub const TEST_API_KEY: &str = "ABSKripcordTestBedrockApiKey0001";

/// The content type of a ConverseStream answer.
pub(crate) const EVENT_STREAM: &str = "application/vnd.amazon.eventstream";

/// Bedrock's error type namespace, as the `x-amzn-ErrorType` header spells it.
const NAMESPACE: &str = "http://internal.amazon.com/coral/com.amazon.bedrock/";

/// A refused request: status, error type, message.
#[derive(Debug)]
pub(crate) struct Denied {
    pub(crate) status: u16,
    pub(crate) error_type: &'static str,
    pub(crate) message: String,
}

fn denied(status: u16, error_type: &'static str, message: impl Into<String>) -> Denied {
    Denied {
        status,
        error_type,
        message: message.into(),
    }
}

/// `x-amzn-ErrorType` for an error type.
pub(crate) fn error_type_header(error_type: &str) -> String {
    format!("{error_type}:{NAMESPACE}")
}

/// A Bedrock error body.
pub(crate) fn error_body(message: &str) -> String {
    json!({ "message": message }).to_string()
}

const BAD_SIGNATURE: &str = "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.";

/// What the `Authorization` header of a SigV4 request says.
struct Authorization<'a> {
    access_key_id: &'a str,
    date: &'a str,
    region: &'a str,
    service: &'a str,
    signed_headers: &'a str,
    signature: &'a str,
}

fn parse_authorization(value: &str) -> Option<Authorization<'_>> {
    let rest = value.strip_prefix("AWS4-HMAC-SHA256 ")?;
    let (mut credential, mut signed, mut signature) = (None, None, None);
    for part in rest.split(',') {
        let (k, v) = part.trim().split_once('=')?;
        match k {
            "Credential" => credential = Some(v),
            "SignedHeaders" => signed = Some(v),
            "Signature" => signature = Some(v),
            _ => return None,
        }
    }
    let mut scope = credential?.split('/');
    let a = Authorization {
        access_key_id: scope.next()?,
        date: scope.next()?,
        region: scope.next()?,
        service: scope.next()?,
        signed_headers: signed?,
        signature: signature?,
    };
    (scope.next()? == "aws4_request").then_some(a)
}

/// `YYYYMMDDTHHMMSSZ` as a time.
fn parse_amz_date(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    if b.len() != 16 || b[8] != b'T' || b[15] != b'Z' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (num(0..4)?, num(4..6)?, num(6..8)?);
    let (hh, mm, ss) = (num(9..11)?, num(11..13)?, num(13..15)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hh * 3600 + mm * 60 + ss;
    Some(UNIX_EPOCH + Duration::from_secs(u64::try_from(secs).ok()?))
}

fn header<'r>(req: &'r Incoming, name: &str) -> Option<&'r str> {
    req.headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// Authenticates a request as Bedrock would (see the module docs).
pub(crate) fn authenticate(req: &Incoming) -> Result<(), Denied> {
    let Some(auth) = header(req, "authorization") else {
        return Err(denied(
            403,
            "MissingAuthenticationTokenException",
            "Missing Authentication Token",
        ));
    };
    if let Some(token) = auth.strip_prefix("Bearer ") {
        return if token == TEST_API_KEY {
            Ok(())
        } else {
            Err(denied(
                403,
                "UnrecognizedClientException",
                "The security token included in the request is invalid.",
            ))
        };
    }
    let Some(a) = parse_authorization(auth) else {
        return Err(denied(
            403,
            "IncompleteSignatureException",
            format!(
                "Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' parameters. Authorization={auth}"
            ),
        ));
    };
    let session_token = match a.access_key_id {
        TEST_ACCESS_KEY_ID => None,
        TEST_TEMP_ACCESS_KEY_ID => match header(req, "x-amz-security-token") {
            Some(EXPIRED_SESSION_TOKEN) => {
                return Err(denied(
                    403,
                    "ExpiredTokenException",
                    "The security token included in the request is expired",
                ));
            }
            Some(TEST_SESSION_TOKEN) => Some(TEST_SESSION_TOKEN.to_owned()),
            _ => {
                return Err(denied(
                    403,
                    "UnrecognizedClientException",
                    "The security token included in the request is invalid.",
                ));
            }
        },
        _ => {
            return Err(denied(
                403,
                "UnrecognizedClientException",
                "The security token included in the request is invalid.",
            ));
        }
    };
    if a.service != "bedrock" {
        return Err(denied(
            403,
            "InvalidSignatureException",
            "Credential should be scoped to correct service: 'bedrock'. ",
        ));
    }
    let signed: Vec<&str> = a.signed_headers.split(';').collect();
    let Some(time) = header(req, "x-amz-date").and_then(parse_amz_date) else {
        return Err(denied(
            400,
            "IncompleteSignatureException",
            "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.",
        ));
    };
    if !signed.contains(&"host") || !signed.contains(&"x-amz-date") {
        return Err(denied(403, "InvalidSignatureException", BAD_SIGNATURE));
    }
    let skew = SystemTime::now()
        .duration_since(time)
        .unwrap_or_else(|e| e.duration());
    if skew > Duration::from_secs(15 * 60)
        || !header(req, "x-amz-date").is_some_and(|d| d.starts_with(a.date))
    {
        return Err(denied(
            403,
            "InvalidSignatureException",
            "Signature expired: the request time is more than 15 minutes from the current time.",
        ));
    }
    // Recompute from what arrived: the listed headers (the signer adds the date and the
    // token itself), the path as sent, the body.
    let mut headers: Vec<(&str, &str)> = Vec::with_capacity(signed.len());
    for name in &signed {
        if matches!(*name, "x-amz-date" | "x-amz-security-token") {
            continue;
        }
        for (n, v) in &req.headers {
            if n == name {
                headers.push((n.as_str(), v.as_str()));
            }
        }
    }
    let host = header(req, "host").unwrap_or("localhost");
    let uri = format!("http://{host}{}", req.path);
    let identity: Identity = Credentials::new(
        a.access_key_id,
        TEST_SECRET_ACCESS_KEY,
        session_token,
        None,
        "ripcord-chaos",
    )
    .into();
    let params = match v4::SigningParams::builder()
        .identity(&identity)
        .region(a.region)
        .name(a.service)
        .time(time)
        .settings(SigningSettings::default())
        .build()
    {
        Ok(p) => p.into(),
        Err(_) => return Err(denied(403, "InvalidSignatureException", BAD_SIGNATURE)),
    };
    let expected = SignableRequest::new(
        &req.method,
        uri,
        headers.into_iter(),
        SignableBody::Bytes(&req.body),
    )
    .ok()
    .and_then(|r| sign(r, &params).ok())
    .map(|out| {
        let signature = out.signature().to_owned();
        let (instructions, _) = out.into_parts();
        let signed_headers = instructions
            .headers()
            .find(|(n, _)| *n == "authorization")
            .and_then(|(_, v)| {
                v.split("SignedHeaders=")
                    .nth(1)
                    .and_then(|s| s.split(',').next())
                    .map(str::to_owned)
            });
        (signature, signed_headers)
    });
    match expected {
        Some((signature, Some(list))) if signature == a.signature && list == a.signed_headers => {
            Ok(())
        }
        _ => Err(denied(403, "InvalidSignatureException", BAD_SIGNATURE)),
    }
}

/// The model id of a `/model/{id}/converse[-stream]` path, percent-decoded.
pub(crate) fn model_of(path: &str) -> Option<String> {
    let rest = path.strip_prefix("/model/")?;
    let (id, _) = rest.rsplit_once('/')?;
    let bytes = id.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn usage(reply: &Reply) -> Value {
    json!({
        "inputTokens": reply.input_tokens,
        "outputTokens": reply.output_tokens,
        "totalTokens": reply.input_tokens + reply.output_tokens,
    })
}

/// The Converse JSON body.
pub(crate) fn converse(reply: &Reply) -> Vec<u8> {
    let mut content = Vec::with_capacity(1 + reply.tool_calls.len());
    if !reply.text.is_empty() {
        content.push(json!({ "text": reply.text }));
    }
    for (id, name, arguments) in &reply.tool_calls {
        let input = serde_json::from_str::<Value>(arguments)
            .unwrap_or_else(|_| Value::String(arguments.clone()));
        content.push(json!({ "toolUse": { "toolUseId": id, "name": name, "input": input } }));
    }
    json!({
        "output": { "message": { "role": "assistant", "content": content } },
        "stopReason": anthropic::stop_reason(reply),
        "usage": usage(reply),
        "metrics": { "latencyMs": 1 },
    })
    .to_string()
    .into_bytes()
}

/// One event-stream message with the given headers.
pub(crate) fn message(headers: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
    let mut m = Message::new(payload.to_vec());
    for (name, value) in headers {
        m = m.add_header(Header::new(
            (*name).to_owned(),
            HeaderValue::String((*value).to_owned().into()),
        ));
    }
    let mut out = Vec::with_capacity(payload.len() + 96);
    // Writing into a Vec fails only for a header or payload over the format's limits.
    let _ = write_message_to(&m, &mut out);
    out
}

/// An `event` message named `name` with a JSON payload.
pub(crate) fn event(name: &str, payload: &[u8]) -> Vec<u8> {
    message(
        &[
            (":event-type", name),
            (":content-type", "application/json"),
            (":message-type", "event"),
        ],
        payload,
    )
}

/// One `event` message with its CRCs, as the fake sends it: for tests that need to corrupt or
/// replay frames byte for byte.
pub fn event_frame(name: &str, payload: &[u8]) -> Vec<u8> {
    event(name, payload)
}

/// An `exception` message.
pub(crate) fn exception(exception_type: &str, text: &str) -> Vec<u8> {
    message(
        &[
            (":exception-type", exception_type),
            (":content-type", "application/json"),
            (":message-type", "exception"),
        ],
        error_body(text).as_bytes(),
    )
}

/// Builds the frames, breaking the JSON of the first content event when asked.
struct Builder {
    f: Frames,
    break_next: bool,
}

impl Builder {
    fn push(&mut self, name: &str, value: &Value, is_content: bool) {
        let json = value.to_string();
        let data = if is_content && std::mem::take(&mut self.break_next) {
            broken_json(json.as_bytes()).to_vec()
        } else {
            json.into_bytes()
        };
        self.f.push_raw(&event(name, &data), is_content);
    }

    /// Closes the content block at `index`.
    fn block_stop(&mut self, index: usize) {
        let stop = json!({ "contentBlockIndex": index });
        self.push("contentBlockStop", &stop, false);
    }
}

/// The event-stream messages of a streamed answer, one chunk each.
pub(crate) fn stream_frames(_ctx: Ctx<'_>, reply: &Reply, broken: bool) -> Frames {
    let mut b = Builder {
        f: Frames::new(false),
        break_next: broken,
    };
    b.push(
        "messageStart",
        &json!({ "p": "abcdefghij", "role": "assistant" }),
        false,
    );
    let mut index = 0;
    if !reply.text.is_empty() {
        for piece in reply.text_pieces() {
            let d = json!({ "contentBlockIndex": index, "delta": { "text": piece }, "p": "abcd" });
            b.push("contentBlockDelta", &d, true);
        }
        b.block_stop(index);
        index += 1;
    }
    for (id, name, arguments) in &reply.tool_calls {
        let start = json!({
            "contentBlockIndex": index,
            "start": { "toolUse": { "toolUseId": id, "name": name } },
        });
        b.push("contentBlockStart", &start, true);
        for piece in split_even(arguments, reply.chunks) {
            let d =
                json!({ "contentBlockIndex": index, "delta": { "toolUse": { "input": piece } } });
            b.push("contentBlockDelta", &d, true);
        }
        b.block_stop(index);
        index += 1;
    }
    b.f.start_tail();
    b.push(
        "messageStop",
        &json!({ "stopReason": anthropic::stop_reason(reply) }),
        false,
    );
    b.push(
        "metadata",
        &json!({ "usage": usage(reply), "metrics": { "latencyMs": 1 } }),
        false,
    );
    b.f
}

/// The status of a [`VendorError`] on the Bedrock wire.
pub(crate) const fn error_status(e: &VendorError) -> u16 {
    match e {
        VendorError::RateLimited { .. } | VendorError::QuotaExhausted => 429,
        VendorError::PaymentRequired
        | VendorError::ContextTooLong
        | VendorError::ContentFiltered
        | VendorError::InvalidRequest => 400,
        VendorError::Overloaded | VendorError::EmptyServiceUnavailable => 503,
        VendorError::ServerError => 500,
        VendorError::BadGateway => 502,
        VendorError::GatewayTimeout => 504,
        VendorError::Auth | VendorError::PermissionDenied | VendorError::RegionBlocked => 403,
        VendorError::ModelNotFound => 404,
        VendorError::PayloadTooLarge | VendorError::TooLargeForRateLimit => 413,
    }
}

/// Bedrock's error type and message for a [`VendorError`] (the type is empty for answers a
/// proxy gives, which carry none).
pub(crate) const fn error_parts(e: &VendorError) -> (&'static str, &'static str) {
    match e {
        VendorError::RateLimited { .. } => (
            "ThrottlingException",
            "Too many requests, please wait before trying again.",
        ),
        VendorError::QuotaExhausted => (
            "ThrottlingException",
            "Too many tokens per day, please wait before trying again.",
        ),
        VendorError::PaymentRequired => (
            "ServiceQuotaExceededException",
            "Your request exceeds the service quota for your account. You can view your quotas at https://docs.aws.amazon.com/servicequotas/latest/userguide/gs-request-quota.html",
        ),
        VendorError::Overloaded => (
            "ServiceUnavailableException",
            "Bedrock is unable to process your request.",
        ),
        VendorError::ServerError => (
            "InternalServerException",
            "The system encountered an unexpected error during processing. Try your request again.",
        ),
        VendorError::BadGateway
        | VendorError::GatewayTimeout
        | VendorError::EmptyServiceUnavailable => ("", ""),
        VendorError::Auth => (
            "UnrecognizedClientException",
            "The security token included in the request is invalid.",
        ),
        VendorError::PermissionDenied => (
            "AccessDeniedException",
            "You don't have access to the model with the specified model ID.",
        ),
        VendorError::RegionBlocked => (
            "AccessDeniedException",
            "This model is not available in your region.",
        ),
        VendorError::ModelNotFound => (
            "ResourceNotFoundException",
            "Model not found: the model identifier does not exist or is not available to this account.",
        ),
        VendorError::PayloadTooLarge | VendorError::TooLargeForRateLimit => {
            ("", "Request entity too large")
        }
        VendorError::ContextTooLong => (
            "ValidationException",
            "Input is too long for requested model.",
        ),
        VendorError::ContentFiltered => (
            "ValidationException",
            "Output blocked by content filtering policy",
        ),
        VendorError::InvalidRequest => (
            "ValidationException",
            "Malformed input request: #: extraneous key [foo] is not permitted, please reformat your input and try again.",
        ),
    }
}

/// The whole HTTP error response of a [`VendorError`] on the Bedrock wire.
pub(crate) fn error_response(e: &VendorError, status: u16) -> ErrorResponse {
    let (content_type, body) = match e {
        VendorError::BadGateway | VendorError::GatewayTimeout => {
            let r = e.response(crate::Wire::OpenAi, "", "");
            (r.content_type, r.body)
        }
        VendorError::EmptyServiceUnavailable => (None, String::new()),
        _ => (Some("application/json"), error_body(error_parts(e).1)),
    };
    let mut headers = Vec::new();
    let error_type = error_parts(e).0;
    if !error_type.is_empty() {
        headers.push(("x-amzn-errortype", error_type_header(error_type)));
    }
    ErrorResponse {
        status,
        content_type,
        headers,
        body,
    }
}

/// The exception frame type a [`VendorError`] arrives as mid-stream: the HTTP type with a
/// lower-case first letter (`throttlingException`), as ConverseStream names its exceptions.
pub(crate) fn exception_type(e: &VendorError) -> String {
    let t = match (e, error_parts(e).0) {
        (VendorError::PayloadTooLarge | VendorError::TooLargeForRateLimit, _) => {
            "ValidationException"
        }
        (_, "") => "InternalServerException",
        (_, t) => t,
    };
    let mut c = t.chars();
    match c.next() {
        Some(first) => first.to_ascii_lowercase().to_string() + c.as_str(),
        None => String::new(),
    }
}

/// The error type Bedrock gives the fake's own refusals (bad JSON, wrong route).
pub(crate) const fn refusal_type(status: u16) -> &'static str {
    match status {
        404 => "UnknownOperationException",
        405 => "UnknownOperationException",
        _ => "ValidationException",
    }
}

/// Request fields the fake needs from a Converse request.
#[derive(serde::Deserialize, Default)]
#[serde(default)]
pub(crate) struct ConverseProbe {
    pub(crate) messages: Option<serde::de::IgnoredAny>,
}

/// A 400 for a request body that is not JSON.
pub(crate) fn invalid_json_error() -> String {
    error_body("Malformed input request, please reformat your input and try again.")
}

/// A 400 for a missing `messages`.
pub(crate) fn missing_messages_error() -> String {
    error_body(
        "1 validation error detected: Value null at 'messages' failed to satisfy constraint: Member must not be null",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amz_dates_and_model_paths() {
        assert_eq!(
            parse_amz_date("20231114T221320Z"),
            Some(UNIX_EPOCH + Duration::from_secs(1_700_000_000))
        );
        assert_eq!(parse_amz_date("20231314T221320Z"), None);
        assert_eq!(parse_amz_date("2023-11-14"), None);
        assert_eq!(
            model_of("/model/us.anthropic.claude-3-haiku-20240307-v1%3A0/converse").as_deref(),
            Some("us.anthropic.claude-3-haiku-20240307-v1:0")
        );
        assert_eq!(
            model_of("/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fus.x/converse-stream").as_deref(),
            Some("arn:aws:bedrock:us-east-1:1:inference-profile/us.x")
        );
        assert_eq!(model_of("/v1/messages"), None);
    }

    #[test]
    fn stream_frames_are_real_event_stream_messages() {
        let ctx = Ctx::new("x", "m", 0);
        let reply = Reply::text_then_tool("t1");
        let f = stream_frames(ctx, &reply, false);
        // messageStart, 2 text deltas, stop, tool start, 2 argument deltas, stop, messageStop, metadata
        assert_eq!(f.len(), 10);
        assert_eq!(f.content(), &[1, 2, 4, 5, 6]);
        assert_eq!(f.tail_start(), 8);
    }
}
