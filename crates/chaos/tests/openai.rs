//! The OpenAI wire over real HTTP: success shapes, stream framing, embeddings, Azure paths,
//! every vendor error, and the stream faults' wire form.

mod support;

use std::time::Duration;

use ripcord_chaos::{Behavior, FakeOptions, FakeVendor, Reply, Script, VendorError, Wire};
use serde_json::{Value, json};
use support::*;

#[tokio::test]
async fn chat_completion_json_shape() {
    let fake = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let resp = chat(&fake, false).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(header(&resp, "content-type"), "application/json");
    assert!(header(&resp, "x-request-id").starts_with("req_"));
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["object"], "chat.completion");
    assert!(v["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert!(v["created"].as_u64().unwrap() > 1_700_000_000);
    assert_eq!(v["model"], "gpt-4o", "echoes the requested model");
    let choice = &v["choices"][0];
    assert_eq!(choice["index"], 0);
    assert_eq!(choice["message"]["role"], "assistant");
    assert_eq!(
        choice["message"]["content"],
        "Hello! How can I help you today?"
    );
    assert!(choice["message"].get("tool_calls").is_none());
    assert_eq!(choice["finish_reason"], "stop");
    assert_eq!(v["usage"]["prompt_tokens"], 12);
    assert_eq!(v["usage"]["completion_tokens"], 9);
    assert_eq!(v["usage"]["total_tokens"], 21);
    assert_eq!(v["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
}

#[tokio::test]
async fn chat_completion_with_tool_calls_and_fixed_model() {
    let reply = Reply::text("")
        .with_tool_call("call_a", "get_weather", r#"{"city":"Paris"}"#)
        .with_tool_call("call_b", "get_time", r#"{"tz":"CET"}"#)
        .with_usage(40, 5)
        .with_model("gpt-4o-2024-08-06");
    let fake = FakeVendor::start_with(Wire::OpenAi, FakeOptions::default().with_reply(reply))
        .await
        .unwrap();
    let v: Value = chat(&fake, false).await.unwrap().json().await.unwrap();
    assert_eq!(v["model"], "gpt-4o-2024-08-06");
    let msg = &v["choices"][0]["message"];
    assert!(
        msg["content"].is_null(),
        "tool-only answers have null content"
    );
    assert_eq!(msg["tool_calls"][0]["id"], "call_a");
    assert_eq!(msg["tool_calls"][0]["type"], "function");
    assert_eq!(msg["tool_calls"][0]["function"]["name"], "get_weather");
    assert_eq!(
        msg["tool_calls"][0]["function"]["arguments"],
        r#"{"city":"Paris"}"#
    );
    assert_eq!(msg["tool_calls"][1]["function"]["name"], "get_time");
    assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(v["usage"]["total_tokens"], 45);
}

#[tokio::test]
async fn stream_framing_without_and_with_include_usage() {
    let fake = FakeVendor::start(Wire::OpenAi).await.unwrap();

    // Without stream_options: role, 4 content deltas, finish, [DONE]; no usage anywhere.
    let resp = chat(&fake, true).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(header(&resp, "content-type").starts_with("text/event-stream"));
    assert_eq!(header(&resp, "transfer-encoding"), "chunked");
    let (events, err) = SseReader::new(resp).collect().await;
    assert!(err.is_none());
    assert!(
        events.iter().all(|e| e.event.is_none()),
        "chat completions use unnamed events"
    );
    assert_eq!(events.len(), 7, "{events:#?}");
    assert_eq!(events.last().unwrap().data, "[DONE]");
    let chunks: Vec<Value> = events[..6].iter().map(Sse::json).collect();
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk")
    );
    assert!(chunks.iter().all(|c| c["id"] == chunks[0]["id"]));
    assert!(chunks.iter().all(|c| c.get("usage").is_none()));
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let text: String = chunks[1..5]
        .iter()
        .map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(text, "Hello! How can I help you today?");
    assert!(
        chunks[1..5]
            .iter()
            .all(|c| c["choices"][0]["finish_reason"].is_null())
    );
    assert_eq!(chunks[5]["choices"][0]["finish_reason"], "stop");
    assert_eq!(chunks[5]["choices"][0]["delta"], json!({}));

    // With include_usage: every chunk carries "usage": null, then a usage chunk with no choices.
    let mut body = chat_body(Wire::OpenAi, true);
    body["stream_options"] = json!({"include_usage": true});
    let resp = client()
        .post(chat_url(&fake))
        .json(&body)
        .send()
        .await
        .unwrap();
    let (events, _) = SseReader::new(resp).collect().await;
    assert_eq!(events.len(), 8);
    let chunks: Vec<Value> = events[..7].iter().map(Sse::json).collect();
    assert!(
        chunks[..6]
            .iter()
            .all(|c| c["usage"].is_null() && c.get("usage").is_some())
    );
    assert_eq!(
        chunks[5]["choices"][0]["finish_reason"], "stop",
        "finish comes before usage"
    );
    assert_eq!(chunks[6]["choices"], json!([]));
    assert_eq!(chunks[6]["usage"]["prompt_tokens"], 12);
    assert_eq!(chunks[6]["usage"]["completion_tokens"], 9);
    assert_eq!(events[7].data, "[DONE]");
}

#[tokio::test]
async fn stream_tool_call_deltas_by_index() {
    let reply = Reply::text("")
        .with_chunks(2)
        .with_tool_call("call_1", "lookup", r#"{"q":"sky"}"#)
        .with_tool_call("call_2", "add", r#"{"a":1,"b":2}"#);
    let fake = FakeVendor::start_with(Wire::OpenAi, FakeOptions::default().with_reply(reply))
        .await
        .unwrap();
    let (events, _) = SseReader::new(chat(&fake, true).await.unwrap())
        .collect()
        .await;
    let chunks: Vec<Value> = events
        .iter()
        .filter(|e| e.data != "[DONE]")
        .map(Sse::json)
        .collect();
    assert!(chunks[0]["choices"][0]["delta"]["content"].is_null());
    // Reassemble like a client: by index, id+name from the first piece, arguments appended.
    let mut calls: Vec<(String, String, String)> = Vec::new();
    for c in &chunks {
        for tc in c["choices"][0]["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let i = tc["index"].as_u64().unwrap() as usize;
            if i == calls.len() {
                assert!(
                    tc["id"].is_string() && tc["function"]["name"].is_string(),
                    "first piece names the call"
                );
                calls.push((
                    tc["id"].as_str().unwrap().to_owned(),
                    tc["function"]["name"].as_str().unwrap().to_owned(),
                    String::new(),
                ));
            } else {
                assert!(tc.get("id").is_none(), "later pieces carry only arguments");
            }
            calls[i]
                .2
                .push_str(tc["function"]["arguments"].as_str().unwrap());
        }
    }
    assert_eq!(
        calls,
        vec![
            ("call_1".into(), "lookup".into(), r#"{"q":"sky"}"#.into()),
            ("call_2".into(), "add".into(), r#"{"a":1,"b":2}"#.into()),
        ]
    );
    let finish = chunks.last().unwrap();
    assert_eq!(finish["choices"][0]["finish_reason"], "tool_calls");
}

#[tokio::test]
async fn embeddings_models_and_azure_paths() {
    let fake = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let c = client();
    let emb = |body: Value, path: &str| {
        c.post(format!("{}{path}", fake.base_url()))
            .json(&body)
            .send()
    };
    // A successful `/v1/embeddings` call's JSON.
    let emb_json = async |body: Value| -> Value {
        let resp = emb(body, "/v1/embeddings").await.unwrap();
        resp.json().await.unwrap()
    };

    let v = emb_json(json!({"model": "text-embedding-3-small", "input": ["a b c", "a b c", "x"]}))
        .await;
    assert_eq!(v["object"], "list");
    assert_eq!(v["model"], "text-embedding-3-small");
    let data = v["data"].as_array().unwrap();
    assert_eq!(data.len(), 3);
    assert_eq!(data[2]["index"], 2);
    assert_eq!(data[0]["object"], "embedding");
    let vec0: Vec<f64> = serde_json::from_value(data[0]["embedding"].clone()).unwrap();
    assert_eq!(vec0.len(), 8, "default dimension");
    assert_eq!(
        data[0]["embedding"], data[1]["embedding"],
        "same text, same vector"
    );
    assert_ne!(data[0]["embedding"], data[2]["embedding"]);
    assert_eq!(v["usage"]["prompt_tokens"], 3 + 3 + 1);

    let v = emb_json(json!({"model": "m", "input": "hello", "dimensions": 3})).await;
    assert_eq!(v["data"][0]["embedding"].as_array().unwrap().len(), 3);

    // base64: little-endian f32s, 4 bytes each -> 8 dims = 32 bytes = 44 base64 chars.
    let v = emb_json(json!({"model": "m", "input": "hello", "encoding_format": "base64"})).await;
    assert_eq!(v["data"][0]["embedding"].as_str().unwrap().len(), 44);

    let bad = emb(
        json!({"model": "m", "input": "x", "dimensions": 0}),
        "/v1/embeddings",
    )
    .await
    .unwrap();
    assert_eq!(bad.status(), 400);
    let e: Value = bad.json().await.unwrap();
    assert_eq!(e["error"]["param"], "dimensions");

    // Azure: deployment in the URL, no model in the body, same bodies.
    let azure = emb(
        json!({"input": "hello"}),
        "/openai/deployments/my-embed/embeddings?api-version=2024-10-21",
    )
    .await
    .unwrap();
    assert_eq!(azure.status(), 200);
    let chat = c
        .post(format!(
            "{}/openai/deployments/my-gpt/chat/completions?api-version=2024-10-21",
            fake.base_url()
        ))
        .header("api-key", "azure-key")
        .json(&json!({"messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(chat.status(), 200);
    let v: Value = chat.json().await.unwrap();
    assert_eq!(v["object"], "chat.completion");
    let seen = fake.requests();
    let last = seen.last().unwrap();
    assert_eq!(
        last.path_only(),
        "/openai/deployments/my-gpt/chat/completions"
    );
    assert_eq!(last.query("api-version"), Some("2024-10-21"));
    assert_eq!(last.header("api-key"), Some("azure-key"));

    let models = get_json(&fake, "/v1/models").await;
    assert_eq!(models["object"], "list");
    assert_eq!(models["data"][0]["object"], "model");
    assert_eq!(fake.hits(), 6, "5 embeddings + 1 chat; models is not a hit");
}

#[tokio::test]
async fn every_vendor_error_status_body_and_headers() {
    let fake = FakeVendor::start(Wire::OpenAi).await.unwrap();
    for error in VendorError::ALL {
        fake.set_script(Script::Always(Behavior::Error(error.clone())));
        for stream in [false, true] {
            let resp = chat(&fake, stream).await.unwrap();
            assert_eq!(
                resp.status().as_u16(),
                error.status(Wire::OpenAi),
                "{error:?}"
            );
            let ct = header(&resp, "content-type");
            let rl_reset = header(&resp, "x-ratelimit-reset-requests");
            let retry_after = header(&resp, "retry-after");
            let retry_after_ms = header(&resp, "retry-after-ms");
            let body = resp.text().await.unwrap();
            let code = || serde_json::from_str::<Value>(&body).unwrap()["error"]["code"].clone();
            match &error {
                VendorError::RateLimited { .. } => {
                    assert_eq!(code(), "rate_limit_exceeded");
                    assert_eq!(retry_after, "1");
                    assert_eq!(retry_after_ms, "1000");
                    assert_eq!(rl_reset, "1s");
                }
                VendorError::QuotaExhausted => {
                    assert_eq!(code(), "insufficient_quota");
                    assert!(
                        retry_after.is_empty(),
                        "no wait hint: waiting does not help"
                    );
                }
                VendorError::BadGateway | VendorError::GatewayTimeout => {
                    assert_eq!(ct, "text/html");
                    assert!(body.contains("<html>"));
                }
                VendorError::EmptyServiceUnavailable => {
                    assert!(ct.is_empty() && body.is_empty());
                }
                VendorError::RegionBlocked => {
                    assert_eq!(code(), "unsupported_country_region_territory");
                    let v: Value = serde_json::from_str(&body).unwrap();
                    assert_eq!(v["error"]["type"], "request_forbidden");
                }
                VendorError::Auth => assert_eq!(code(), "invalid_api_key"),
                VendorError::ModelNotFound => {
                    assert_eq!(code(), "model_not_found");
                    assert!(body.contains("gpt-4o"), "names the requested model");
                }
                VendorError::PayloadTooLarge => assert_eq!(code(), "request_too_large"),
                VendorError::TooLargeForRateLimit => {
                    // Reads like a rate limit; only the message says it can never fit.
                    assert_eq!(code(), "rate_limit_exceeded");
                    assert!(body.contains("Request too large for gpt-4o"), "{body}");
                }
                VendorError::ContextTooLong => assert_eq!(code(), "context_length_exceeded"),
                VendorError::ContentFiltered => assert_eq!(code(), "content_policy_violation"),
                _ => {
                    assert_eq!(ct, "application/json", "{error:?}");
                    let v: Value = serde_json::from_str(&body).unwrap();
                    for field in ["message", "type", "param", "code"] {
                        assert!(
                            v["error"].get(field).is_some(),
                            "{error:?} lacks {field}: {body}"
                        );
                    }
                }
            }
        }
    }
    assert_eq!(fake.hits(), 2 * VendorError::ALL.len());
}

#[tokio::test]
async fn rate_limited_without_hint_and_with_sub_second_hint() {
    let fake = FakeVendor::start(Wire::OpenAi).await.unwrap();
    fake.set_script(Script::Sequence(vec![
        Behavior::Error(VendorError::RateLimited { retry_after: None }),
        Behavior::Error(VendorError::RateLimited {
            retry_after: Some(Duration::from_millis(250)),
        }),
    ]));
    let none = chat(&fake, false).await.unwrap();
    assert_eq!(none.status(), 429);
    for h in [
        "retry-after",
        "retry-after-ms",
        "x-ratelimit-reset-requests",
    ] {
        assert!(none.headers().get(h).is_none(), "{h} must be absent");
    }
    assert_eq!(header(&none, "x-ratelimit-remaining-requests"), "0");
    let short = chat(&fake, false).await.unwrap();
    assert_eq!(
        header(&short, "retry-after"),
        "1",
        "rounded up to whole seconds"
    );
    assert_eq!(header(&short, "retry-after-ms"), "250");
    assert_eq!(header(&short, "x-ratelimit-reset-tokens"), "250ms");
}

#[tokio::test]
async fn in_band_error_malformed_truncated_and_raw_status() {
    let fake = FakeVendor::start(Wire::OpenAi).await.unwrap();

    // In-band error after 2 chunks: role + 2 deltas + data: {"error":...}, no [DONE].
    fake.set_script(Script::Always(Behavior::InBandError {
        after_chunks: 2,
        error: VendorError::QuotaExhausted,
    }));
    let resp = chat(&fake, true).await.unwrap();
    assert_eq!(resp.status(), 200);
    let (events, err) = SseReader::new(resp).collect().await;
    assert!(err.is_none(), "ends cleanly");
    assert_eq!(events.len(), 4, "{events:#?}");
    let last = events[3].json();
    assert_eq!(last["error"]["code"], "insufficient_quota");
    assert!(events.iter().all(|e| e.data != "[DONE]"));

    // As the first event: nothing before it.
    fake.set_script(Script::Always(Behavior::InBandError {
        after_chunks: 0,
        error: VendorError::RateLimited { retry_after: None },
    }));
    let (events, _) = SseReader::new(chat(&fake, true).await.unwrap())
        .collect()
        .await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].json()["error"]["code"], "rate_limit_exceeded");

    // Non-stream: a 200 whose body is an error object.
    let resp = chat(&fake, false).await.unwrap();
    assert_eq!(resp.status(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error"]["type"], "requests");

    // Malformed: a 200 that is not JSON; a stream whose first delta is broken.
    fake.set_script(Script::Always(Behavior::MalformedJson));
    let resp = chat(&fake, false).await.unwrap();
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.unwrap();
    assert!(text.starts_with('{') && serde_json::from_str::<Value>(&text).is_err());
    let (events, _) = SseReader::new(chat(&fake, true).await.unwrap())
        .collect()
        .await;
    assert!(
        serde_json::from_str::<Value>(&events[0].data).is_ok(),
        "role chunk intact"
    );
    assert!(
        serde_json::from_str::<Value>(&events[1].data).is_err(),
        "first delta broken"
    );

    // Truncated: role + 1 delta, then a clean end with no finish and no [DONE].
    fake.set_script(Script::Always(Behavior::TruncatedStream {
        after_chunks: 1,
    }));
    let (events, err) = SseReader::new(chat(&fake, true).await.unwrap())
        .collect()
        .await;
    assert!(err.is_none());
    assert_eq!(events.len(), 2);
    assert!(
        events
            .iter()
            .all(|e| e.json()["choices"][0]["finish_reason"].is_null())
    );

    // Raw status: exactly the body and headers given.
    fake.set_script(Script::Always(Behavior::Status {
        status: 418,
        body: "short and stout".into(),
        headers: vec![("x-teapot".into(), "yes".into())],
    }));
    let resp = chat(&fake, false).await.unwrap();
    assert_eq!(resp.status(), 418);
    assert_eq!(header(&resp, "x-teapot"), "yes");
    assert!(resp.headers().get("content-type").is_none());
    assert_eq!(resp.text().await.unwrap(), "short and stout");
}

#[tokio::test]
async fn invalid_requests_get_vendor_400s_without_consuming_the_script() {
    let fake = FakeVendor::start(Wire::OpenAi).await.unwrap();
    fake.set_script(Script::Sequence(vec![
        Behavior::Error(VendorError::Overloaded),
        Behavior::Ok,
    ]));
    let c = client();
    let url = chat_url(&fake);
    let not_json = c.post(&url).body("{nope").send().await.unwrap();
    assert_eq!(not_json.status(), 400);
    let v: Value = not_json.json().await.unwrap();
    assert_eq!(v["error"]["type"], "invalid_request_error");
    let no_messages = c
        .post(&url)
        .json(&json!({"model": "gpt-4o"}))
        .send()
        .await
        .unwrap();
    assert_eq!(no_messages.status(), 400);
    let v: Value = no_messages.json().await.unwrap();
    assert_eq!(v["error"]["param"], "messages");
    let no_model = c
        .post(&url)
        .json(&json!({"messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(no_model.status(), 400);
    // The script still starts at its first step.
    assert_eq!(chat(&fake, false).await.unwrap().status(), 503);
    assert_eq!(chat(&fake, false).await.unwrap().status(), 200);
    // Unknown route: vendor-style 404, not a hit.
    let unknown = c
        .post(format!("{}/v1/nope", fake.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    let v: Value = unknown.json().await.unwrap();
    assert!(v["error"]["message"].as_str().unwrap().contains("/v1/nope"));
    assert_eq!(fake.hits(), 5);
}
