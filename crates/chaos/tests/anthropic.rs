//! The Anthropic wire over real HTTP: message shape, stream event order, tool_use blocks,
//! every vendor error, in-band `event: error`, and validation.

mod support;

use std::time::Duration;

use ripcord_chaos::{Behavior, FakeOptions, FakeVendor, Reply, Script, VendorError, Wire};
use serde_json::{Value, json};
use support::*;

#[tokio::test]
async fn message_json_shape() {
    let fake = FakeVendor::start(Wire::Anthropic).await.unwrap();
    let resp = chat(&fake, false).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(header(&resp, "request-id").starts_with("req_"));
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["type"], "message");
    assert_eq!(v["role"], "assistant");
    assert!(v["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(v["model"], "claude-sonnet-4-5");
    assert_eq!(
        v["content"],
        json!([{"type": "text", "text": "Hello! How can I help you today?"}])
    );
    assert_eq!(v["stop_reason"], "end_turn");
    assert!(v["stop_sequence"].is_null());
    assert_eq!(v["usage"]["input_tokens"], 12);
    assert_eq!(v["usage"]["output_tokens"], 9);
    assert_eq!(v["usage"]["cache_read_input_tokens"], 0);
}

#[tokio::test]
async fn stream_event_order_text_and_tool_use() {
    let reply = Reply::text("Let me check.")
        .with_chunks(3)
        .with_tool_call("toolu_01", "get_weather", r#"{"city":"Paris","unit":"c"}"#)
        .with_usage(30, 17);
    let fake = FakeVendor::start_with(Wire::Anthropic, FakeOptions::default().with_reply(reply))
        .await
        .unwrap();
    let resp = chat(&fake, true).await.unwrap();
    assert!(header(&resp, "content-type").starts_with("text/event-stream"));
    let (events, err) = SseReader::new(resp).collect().await;
    assert!(err.is_none());
    // Every event is named, and its data's `type` matches the name.
    for e in &events {
        assert_eq!(e.json()["type"].as_str(), e.event.as_deref(), "{e:?}");
    }
    let names: Vec<String> = events.iter().map(Sse::name).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "ping",
            "content_block_delta",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
    );
    let start = events[0].json();
    assert_eq!(start["message"]["usage"]["input_tokens"], 30);
    assert_eq!(start["message"]["content"], json!([]));
    assert!(start["message"]["stop_reason"].is_null());
    // Reassemble blocks like a client.
    let mut text = String::new();
    let mut tool_json = String::new();
    for e in &events {
        let v = e.json();
        if e.name() == "content_block_delta" {
            match v["delta"]["type"].as_str().unwrap() {
                "text_delta" => {
                    assert_eq!(v["index"], 0);
                    text.push_str(v["delta"]["text"].as_str().unwrap());
                }
                "input_json_delta" => {
                    assert_eq!(v["index"], 1);
                    tool_json.push_str(v["delta"]["partial_json"].as_str().unwrap());
                }
                other => panic!("unexpected delta {other}"),
            }
        }
    }
    assert_eq!(text, "Let me check.");
    assert_eq!(tool_json, r#"{"city":"Paris","unit":"c"}"#);
    let tool_start = events[7].json();
    assert_eq!(tool_start["content_block"]["type"], "tool_use");
    assert_eq!(tool_start["content_block"]["id"], "toolu_01");
    assert_eq!(tool_start["content_block"]["name"], "get_weather");
    let delta = events[12].json();
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    assert_eq!(delta["usage"]["output_tokens"], 17);
}

#[tokio::test]
async fn every_vendor_error_status_body_and_headers() {
    let fake = FakeVendor::start(Wire::Anthropic).await.unwrap();
    for error in VendorError::ALL {
        fake.set_script(Script::Always(Behavior::Error(error.clone())));
        let resp = chat(&fake, true).await.unwrap();
        let status = resp.status().as_u16();
        assert_eq!(status, error.status(Wire::Anthropic), "{error:?}");
        let should_retry = header(&resp, "x-should-retry");
        assert_eq!(
            should_retry,
            (status == 429 || status >= 500).to_string(),
            "{error:?}"
        );
        let retry_after = header(&resp, "retry-after");
        let rl_reset = header(&resp, "anthropic-ratelimit-requests-reset");
        let rl_remaining = header(&resp, "anthropic-ratelimit-requests-remaining");
        let body = resp.text().await.unwrap();
        let kind = || serde_json::from_str::<Value>(&body).unwrap()["error"]["type"].clone();
        match &error {
            VendorError::RateLimited { .. } => {
                assert_eq!(kind(), "rate_limit_error");
                assert_eq!(retry_after, "1");
                assert_eq!(rl_remaining, "0");
                // RFC 3339, e.g. 2026-01-02T03:04:05Z
                assert_eq!(rl_reset.len(), 20, "{rl_reset}");
                assert!(rl_reset.ends_with('Z') && rl_reset.as_bytes()[10] == b'T');
            }
            VendorError::QuotaExhausted => {
                assert_eq!(kind(), "invalid_request_error");
                assert!(body.contains("credit balance is too low"));
            }
            VendorError::PaymentRequired => assert_eq!(kind(), "billing_error"),
            VendorError::Overloaded => assert_eq!(kind(), "overloaded_error"),
            VendorError::ServerError => assert_eq!(kind(), "api_error"),
            VendorError::BadGateway | VendorError::GatewayTimeout => {
                assert!(body.starts_with("<html>"))
            }
            VendorError::EmptyServiceUnavailable => assert!(body.is_empty()),
            VendorError::Auth => assert_eq!(kind(), "authentication_error"),
            VendorError::PermissionDenied => assert_eq!(kind(), "permission_error"),
            VendorError::RegionBlocked => {
                let v: Value = serde_json::from_str(&body).unwrap();
                assert_eq!(
                    v,
                    json!({"error": {"type": "forbidden", "message": "Request not allowed"}})
                );
            }
            VendorError::ModelNotFound => {
                assert_eq!(kind(), "not_found_error");
                assert!(body.contains("claude-sonnet-4-5"));
            }
            VendorError::PayloadTooLarge | VendorError::TooLargeForRateLimit => {
                assert_eq!(kind(), "request_too_large")
            }
            VendorError::ContextTooLong => {
                assert_eq!(kind(), "invalid_request_error");
                assert!(body.contains("prompt is too long: 210000 tokens > 200000 maximum"));
            }
            VendorError::ContentFiltered => assert!(body.contains("content filtering policy")),
            _ => assert_eq!(kind(), "invalid_request_error"),
        }
        if !matches!(
            error,
            VendorError::BadGateway
                | VendorError::GatewayTimeout
                | VendorError::EmptyServiceUnavailable
                | VendorError::RegionBlocked
        ) {
            let v: Value = serde_json::from_str(&body).unwrap();
            assert_eq!(v["type"], "error");
            assert!(v["request_id"].as_str().unwrap().starts_with("req_"));
        }
    }
}

#[tokio::test]
async fn in_band_error_event_and_truncation() {
    let fake = FakeVendor::start(Wire::Anthropic).await.unwrap();
    fake.set_script(Script::Sequence(vec![
        Behavior::InBandError {
            after_chunks: 2,
            error: VendorError::Overloaded,
        },
        Behavior::InBandError {
            after_chunks: 0,
            error: VendorError::Overloaded,
        },
        Behavior::TruncatedStream { after_chunks: 1 },
        Behavior::InBandError {
            after_chunks: 0,
            error: VendorError::ServerError,
        },
    ]));

    let (events, err) = SseReader::new(chat(&fake, true).await.unwrap())
        .collect()
        .await;
    assert!(err.is_none());
    let names: Vec<String> = events.iter().map(Sse::name).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "ping",
            "content_block_delta",
            "content_block_delta",
            "error"
        ]
    );
    let e = events[5].json();
    assert_eq!(e["type"], "error");
    assert_eq!(e["error"]["type"], "overloaded_error");

    let (events, _) = SseReader::new(chat(&fake, true).await.unwrap())
        .collect()
        .await;
    assert_eq!(events.iter().map(Sse::name).collect::<Vec<_>>(), ["error"]);

    let (events, err) = SseReader::new(chat(&fake, true).await.unwrap())
        .collect()
        .await;
    assert!(
        err.is_none(),
        "a truncated stream ends cleanly at the HTTP level"
    );
    assert_eq!(
        events.last().map(Sse::name).as_deref(),
        Some("content_block_delta")
    );
    assert!(!events.iter().any(|e| e.name() == "message_stop"));

    // Non-stream in-band error: a 200 whose body is the error object.
    let resp = chat(&fake, false).await.unwrap();
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["type"], "api_error");
}

#[tokio::test]
async fn validation_requires_max_tokens_and_slow_first_token_holds_every_event() {
    let fake = FakeVendor::start(Wire::Anthropic).await.unwrap();
    let c = client();
    let resp = c
        .post(chat_url(&fake))
        .json(&json!({"model": "claude-x", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["message"], "max_tokens: Field required");
    let resp = c
        .post(format!("{}/v1/complete", fake.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["type"], "not_found_error");

    // Slow first token: headers at once, then not even message_start until the delay.
    // (Generous margins: the machine running this may be loaded.)
    fake.set_script(Script::Always(Behavior::SlowFirstToken(
        Duration::from_millis(600),
    )));
    let sent = tokio::time::Instant::now();
    let resp = chat(&fake, true).await.unwrap();
    let headers_after = sent.elapsed();
    assert!(
        headers_after < Duration::from_millis(450),
        "headers took {headers_after:?}"
    );
    let mut reader = SseReader::new(resp);
    let first = reader.next().await.unwrap().unwrap();
    assert_eq!(first.name(), "message_start");
    assert!(sent.elapsed() >= Duration::from_millis(600));
    let (rest, _) = reader.collect().await;
    assert_eq!(rest.last().map(Sse::name).as_deref(), Some("message_stop"));
}
