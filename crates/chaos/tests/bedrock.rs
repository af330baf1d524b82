//! The Bedrock wire over real HTTP: the SigV4 check (a request altered after signing is
//! refused), API keys, session tokens, Converse JSON, ConverseStream frames with valid CRCs,
//! scripted errors and exception frames.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_eventstream::frame::read_message_from;
use aws_smithy_runtime_api::client::identity::Identity;
use ripcord_chaos::bedrock::{
    EXPIRED_SESSION_TOKEN, TEST_ACCESS_KEY_ID, TEST_API_KEY, TEST_SECRET_ACCESS_KEY,
    TEST_SESSION_TOKEN, TEST_TEMP_ACCESS_KEY_ID,
};
use ripcord_chaos::{Behavior, FakeOptions, FakeVendor, Reply, Script, VendorError, Wire};
use serde_json::{Value, json};

const MODEL_PATH: &str = "/model/us.anthropic.claude-3-haiku-20240307-v1%3A0";

fn body() -> Vec<u8> {
    json!({"messages":[{"role":"user","content":[{"text":"Why is the sky blue?"}]}],
        "inferenceConfig":{"maxTokens":64}})
    .to_string()
    .into_bytes()
}

/// The headers SigV4 adds for this request, signed with `key` (and `token`).
fn signed(
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    key: &str,
    token: Option<&str>,
    time: SystemTime,
) -> Vec<(String, String)> {
    let identity: Identity = Credentials::new(
        key,
        TEST_SECRET_ACCESS_KEY,
        token.map(str::to_owned),
        None,
        "test",
    )
    .into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region("us-east-1")
        .name("bedrock")
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .unwrap()
        .into();
    let req = SignableRequest::new(
        "POST",
        url,
        headers.iter().copied(),
        SignableBody::Bytes(body),
    )
    .unwrap();
    let (instructions, _) = sign(req, &params).unwrap().into_parts();
    instructions
        .headers()
        .map(|(n, v)| (n.to_owned(), v.to_owned()))
        .collect()
}

const BASE_HEADERS: [(&str, &str); 2] = [
    ("content-type", "application/json"),
    ("accept", "application/json"),
];

/// `headers` and the SigV4 headers of [`body`] to `url`, signed now with the test keys.
fn signed_now(url: &str, headers: &[(&str, &str)]) -> Vec<(String, String)> {
    let sig = signed(
        url,
        headers,
        &body(),
        TEST_ACCESS_KEY_ID,
        None,
        SystemTime::now(),
    );
    let mut all: Vec<(String, String)> = headers
        .iter()
        .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
        .collect();
    all.extend(sig);
    all
}

async fn send(url: &str, headers: &[(String, String)], body: Vec<u8>) -> reqwest::Response {
    let mut req = reqwest::Client::new().post(url).body(body);
    for (n, v) in headers {
        req = req.header(n, v);
    }
    req.send().await.unwrap()
}

fn all_headers(extra: Vec<(String, String)>) -> Vec<(String, String)> {
    let mut h: Vec<(String, String)> = BASE_HEADERS
        .iter()
        .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
        .collect();
    h.extend(extra);
    h
}

async fn error_of(resp: reqwest::Response) -> (u16, String, String) {
    let status = resp.status().as_u16();
    let t = resp
        .headers()
        .get("x-amzn-errortype")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let v: Value = resp.json().await.unwrap();
    (
        status,
        t.split(':').next().unwrap().to_owned(),
        v["message"].as_str().unwrap().to_owned(),
    )
}

#[tokio::test]
async fn a_correct_signature_is_accepted_and_any_alteration_refused() {
    let fake = FakeVendor::start(Wire::Bedrock).await.unwrap();
    let url = format!("{}{MODEL_PATH}/converse", fake.base_url());
    let now = SystemTime::now();
    let sig = signed(&url, &BASE_HEADERS, &body(), TEST_ACCESS_KEY_ID, None, now);

    let ok = send(&url, &all_headers(sig.clone()), body()).await;
    assert_eq!(ok.status(), 200);
    assert!(ok.headers().contains_key("x-amzn-requestid"));
    let v: Value = ok.json().await.unwrap();
    assert_eq!(
        v["output"]["message"]["content"][0]["text"],
        "Hello! How can I help you today?"
    );
    assert_eq!(v["stopReason"], "end_turn");
    assert_eq!(v["usage"]["inputTokens"], 12);

    // One signed header changed after signing.
    let mut altered = all_headers(sig.clone());
    for (n, v) in &mut altered {
        if n == "accept" {
            *v = "application/vnd.amazon.eventstream".to_owned();
        }
    }
    let (status, t, message) = error_of(send(&url, &altered, body()).await).await;
    assert_eq!((status, t.as_str()), (403, "InvalidSignatureException"));
    assert!(
        message.starts_with(
            "The request signature we calculated does not match the signature you provided."
        ),
        "{message}"
    );
    // The body changed.
    let mut other_body = body();
    other_body[3] = b'M';
    let (status, t, _) = error_of(send(&url, &all_headers(sig.clone()), other_body).await).await;
    assert_eq!((status, t.as_str()), (403, "InvalidSignatureException"));
    // The path changed (another model).
    let other = url.replace("haiku", "opus");
    let (status, t, _) = error_of(send(&other, &all_headers(sig.clone()), body()).await).await;
    assert_eq!((status, t.as_str()), (403, "InvalidSignatureException"));
    // The date changed.
    let mut redated = all_headers(sig);
    for (n, v) in &mut redated {
        if n == "x-amz-date" {
            v.replace_range(13..15, if v.ends_with("00Z") { "01" } else { "00" });
        }
    }
    let (status, t, _) = error_of(send(&url, &redated, body()).await).await;
    assert_eq!((status, t.as_str()), (403, "InvalidSignatureException"));
    // A signature from long ago has expired.
    let old = SystemTime::now() - Duration::from_secs(3600);
    let stale = signed(&url, &BASE_HEADERS, &body(), TEST_ACCESS_KEY_ID, None, old);
    let (status, _, message) = error_of(send(&url, &all_headers(stale), body()).await).await;
    assert_eq!(status, 403);
    assert!(message.contains("Signature expired"), "{message}");
    // Every request was a model hit; only the first was answered.
    assert_eq!(fake.hits(), 6);
}

#[tokio::test]
async fn unknown_keys_session_tokens_and_api_keys() {
    let fake = FakeVendor::start(Wire::Bedrock).await.unwrap();
    let url = format!("{}{MODEL_PATH}/converse", fake.base_url());
    let now = SystemTime::now();

    // (access key, session token, the refusal's type and message; `None`: answered)
    let cases = [
        (
            "AKIAUNKNOWN000000000",
            None,
            Some((
                "UnrecognizedClientException",
                "The security token included in the request is invalid.",
            )),
        ),
        (TEST_TEMP_ACCESS_KEY_ID, Some(TEST_SESSION_TOKEN), None),
        (
            TEST_TEMP_ACCESS_KEY_ID,
            Some(EXPIRED_SESSION_TOKEN),
            Some((
                "ExpiredTokenException",
                "The security token included in the request is expired",
            )),
        ),
    ];
    for (key, token, refusal) in cases {
        let headers = signed(&url, &BASE_HEADERS, &body(), key, token, now);
        let resp = send(&url, &all_headers(headers), body()).await;
        match refusal {
            None => assert_eq!(resp.status(), 200, "{key} {token:?}"),
            Some((want_type, want_message)) => {
                let (status, t, message) = error_of(resp).await;
                assert_eq!(
                    (status, t.as_str(), message.as_str()),
                    (403, want_type, want_message),
                    "{key} {token:?}"
                );
            }
        }
    }

    let bearer = vec![("authorization".to_owned(), format!("Bearer {TEST_API_KEY}"))];
    assert_eq!(send(&url, &all_headers(bearer), body()).await.status(), 200);
    let wrong = vec![("authorization".to_owned(), "Bearer ABSKnope".to_owned())];
    let (status, t, _) = error_of(send(&url, &all_headers(wrong), body()).await).await;
    assert_eq!((status, t.as_str()), (403, "UnrecognizedClientException"));
    let (status, t, _) = error_of(send(&url, &all_headers(Vec::new()), body()).await).await;
    assert_eq!(
        (status, t.as_str()),
        (403, "MissingAuthenticationTokenException")
    );
}

fn frames(bytes: &[u8]) -> Vec<(String, String, Value)> {
    let mut out = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        let m = read_message_from(&rest[..len]).unwrap();
        let h = |name: &str| {
            m.headers()
                .iter()
                .find(|h| h.name().as_str() == name)
                .map(|h| h.value().as_string().unwrap().as_str().to_owned())
                .unwrap_or_default()
        };
        let kind = h(":message-type");
        let name = if kind == "event" {
            h(":event-type")
        } else {
            h(":exception-type")
        };
        out.push((kind, name, serde_json::from_slice(m.payload()).unwrap()));
        rest = &rest[len..];
    }
    out
}

#[tokio::test]
async fn converse_stream_frames_carry_valid_checksums_in_order() {
    let reply = Reply::text("Let me check.")
        .with_chunks(2)
        .with_tool_call("tooluse_1", "get_weather", r#"{"city":"Paris"}"#)
        .with_usage(30, 17);
    let fake = FakeVendor::start_with(Wire::Bedrock, FakeOptions::default().with_reply(reply))
        .await
        .unwrap();
    let url = format!("{}{MODEL_PATH}/converse-stream", fake.base_url());
    let headers = [
        ("content-type", "application/json"),
        ("accept", "application/vnd.amazon.eventstream"),
    ];
    let all = signed_now(&url, &headers);
    let resp = send(&url, &all, body()).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()["content-type"],
        "application/vnd.amazon.eventstream"
    );
    let bytes = resp.bytes().await.unwrap();
    let f = frames(&bytes);
    let names: Vec<&str> = f.iter().map(|(_, n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "messageStart",
            "contentBlockDelta",
            "contentBlockDelta",
            "contentBlockStop",
            "contentBlockStart",
            "contentBlockDelta",
            "contentBlockDelta",
            "contentBlockStop",
            "messageStop",
            "metadata",
        ]
    );
    assert_eq!(f[4].2["start"]["toolUse"]["name"], "get_weather");
    assert_eq!(f[8].2["stopReason"], "tool_use");
    assert_eq!(f[9].2["usage"]["outputTokens"], 17);

    // A throttling exception after the first chunk.
    fake.set_script(Script::Always(Behavior::InBandError {
        after_chunks: 1,
        error: VendorError::RateLimited { retry_after: None },
    }));
    let all = signed_now(&url, &headers);
    let f = frames(&send(&url, &all, body()).await.bytes().await.unwrap());
    let last = f.last().unwrap();
    assert_eq!(
        (last.0.as_str(), last.1.as_str()),
        ("exception", "throttlingException")
    );
    assert_eq!(
        last.2["message"],
        "Too many requests, please wait before trying again."
    );
}

#[tokio::test]
async fn scripted_errors_carry_the_bedrock_error_type() {
    let fake = FakeVendor::start(Wire::Bedrock).await.unwrap();
    let url = format!("{}{MODEL_PATH}/converse", fake.base_url());
    for (e, status, t) in [
        (
            VendorError::RateLimited { retry_after: None },
            429,
            "ThrottlingException",
        ),
        (VendorError::QuotaExhausted, 429, "ThrottlingException"),
        (VendorError::Overloaded, 503, "ServiceUnavailableException"),
        (VendorError::ServerError, 500, "InternalServerException"),
        (VendorError::Auth, 403, "UnrecognizedClientException"),
        (VendorError::PermissionDenied, 403, "AccessDeniedException"),
        (VendorError::ModelNotFound, 404, "ResourceNotFoundException"),
        (VendorError::ContextTooLong, 400, "ValidationException"),
    ] {
        fake.set_script(Script::Always(Behavior::Error(e.clone())));
        assert_eq!(e.status(Wire::Bedrock), status);
        let bearer = vec![("authorization".to_owned(), format!("Bearer {TEST_API_KEY}"))];
        let (got, got_t, message) = error_of(send(&url, &all_headers(bearer), body()).await).await;
        assert_eq!((got, got_t.as_str()), (status, t), "{e:?}");
        assert!(!message.is_empty());
    }
    // A body without `messages` is refused as the service would, before the script.
    fake.set_script(Script::Always(Behavior::Ok));
    let bearer = vec![("authorization".to_owned(), format!("Bearer {TEST_API_KEY}"))];
    let (status, t, _) = error_of(send(&url, &all_headers(bearer), b"{}".to_vec()).await).await;
    assert_eq!((status, t.as_str()), (400, "ValidationException"));
}
