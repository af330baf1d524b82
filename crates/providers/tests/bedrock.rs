//! The Bedrock adapter against the fake Bedrock, which checks every SigV4 signature: the
//! Converse body on the wire, answers (JSON and event stream, tool use included), every
//! scripted error, exception frames, faults by phase, and each credential source.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use ripcord_chaos::bedrock::{
    EXPIRED_SESSION_TOKEN, TEST_ACCESS_KEY_ID, TEST_API_KEY, TEST_SECRET_ACCESS_KEY,
    TEST_SESSION_TOKEN, TEST_TEMP_ACCESS_KEY_ID,
};
use ripcord_chaos::{Behavior, FakeOptions, FakeVendor, Reply, Script, VendorError, Wire};
use ripcord_core::stream::Collector;
use ripcord_core::{
    ChatModel, ChatRequest, Context, ErrorKind, FinishReason, Message, StreamEvent, ToolCall,
    ToolSpec,
};
use ripcord_providers::{Bedrock, BedrockConfig, BedrockCredentials, CredentialSource};
use secrecy::SecretString;
use serde_json::{Value, json};
use support::*;

fn weather_request() -> ChatRequest {
    ChatRequest::new(vec![
        Message::system("Be brief."),
        Message::user("Weather in Oslo?"),
    ])
    .with_max_tokens(200)
    .with_tool(ToolSpec::new(
        "get_weather",
        "The weather in a city",
        json!({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}),
    ))
}

#[tokio::test]
async fn a_signed_converse_call_sends_the_exact_body_to_the_encoded_path() {
    let fake = bedrock_fake().await;
    let m = bedrock(&fake);
    let r = chat_ok(&m, &weather_request()).await;
    assert_eq!(r.content, "Hello! How can I help you today?");
    assert_eq!(r.finish_reason, FinishReason::Stop);
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (12, 9));
    assert_eq!(r.model, BEDROCK_MODEL);
    let req = &fake.requests()[0];
    assert_eq!(
        req.path,
        "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse"
    );
    let auth = req.header("authorization").unwrap();
    assert!(
        auth.starts_with(&format!(
            "AWS4-HMAC-SHA256 Credential={TEST_ACCESS_KEY_ID}/"
        )),
        "{auth}"
    );
    assert!(auth.contains("/us-east-1/bedrock/aws4_request"), "{auth}");
    assert!(
        auth.contains("SignedHeaders=accept;content-type;host;x-amz-date,"),
        "{auth}"
    );
    assert!(req.header("x-amz-date").is_some());
    assert_eq!(req.header("accept"), Some("application/json"));
    let v = req.json().unwrap();
    assert_eq!(v["system"], json!([{"text":"Be brief."}]));
    assert_eq!(
        v["messages"],
        json!([{"role":"user","content":[{"text":"Weather in Oslo?"}]}])
    );
    assert_eq!(v["inferenceConfig"], json!({"maxTokens":200}));
    assert_eq!(
        v["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"]["json"]["required"],
        json!(["city"])
    );
    // The secret never leaves the process, not even in a header.
    for (_, value) in &req.headers {
        assert!(!value.contains(TEST_SECRET_ACCESS_KEY));
    }
}

#[tokio::test]
async fn tool_use_in_json_and_in_the_event_stream() {
    let reply = Reply::text("Checking.")
        .with_chunks(3)
        .with_tool_call("tooluse_1", "get_weather", r#"{"city":"Oslo"}"#)
        .with_usage(40, 17);
    let fake = FakeVendor::start_with(Wire::Bedrock, FakeOptions::default().with_reply(reply))
        .await
        .unwrap();
    let m = bedrock(&fake);
    let want = vec![ToolCall::new(
        "tooluse_1",
        "get_weather",
        r#"{"city":"Oslo"}"#,
    )];
    let r = chat_ok(&m, &weather_request()).await;
    assert_eq!(r.content, "Checking.");
    assert_eq!(r.tool_calls, want);
    assert_eq!(r.finish_reason, FinishReason::ToolCalls);

    let events = stream_ok(&m, &weather_request()).await;
    assert!(matches!(
        events.last(),
        Some(StreamEvent::Finish {
            reason: FinishReason::ToolCalls,
            ..
        })
    ));
    let mut c = Collector::new();
    events.into_iter().for_each(|e| c.push(e));
    let r = c.finish().unwrap();
    assert_eq!(r.content, "Checking.");
    assert_eq!(r.tool_calls, want);
    assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (40, 17));
    let req = &fake.requests()[1];
    assert!(req.path.ends_with("v1%3A0/converse-stream"));
    assert_eq!(
        req.header("accept"),
        Some("application/vnd.amazon.eventstream")
    );

    // The answer goes back as toolUse / toolResult blocks, and the fake still accepts the
    // signature over that body.
    let follow_up = ChatRequest::new(vec![
        Message::user("Weather in Oslo?"),
        Message::assistant_tool_calls(want.clone()),
        Message::tool_result("tooluse_1", "12°C, rain"),
    ])
    .with_tool(ToolSpec::new("get_weather", "", json!({"type":"object"})));
    chat_ok(&m, &follow_up).await;
    let v: Value = fake.requests()[2].json().unwrap();
    assert_eq!(
        v["messages"][1]["content"][0]["toolUse"],
        json!({"toolUseId":"tooluse_1","name":"get_weather","input":{"city":"Oslo"}})
    );
    assert_eq!(
        v["messages"][2]["content"][0]["toolResult"],
        json!({"toolUseId":"tooluse_1","content":[{"text":"12°C, rain"}]})
    );
}

#[tokio::test]
async fn every_scripted_error_is_classified() {
    let fake = bedrock_fake().await;
    let m = bedrock(&fake);
    check_error_rows(&fake, &m, "bedrock", true, keeps_status(Wire::Bedrock)).await;
}

#[tokio::test]
async fn exception_frames_mid_stream_are_classified() {
    let fake = bedrock_fake().await;
    let m = bedrock(&fake);
    for ve in VendorError::ALL {
        for after in [0, 2] {
            fake.set_script(Script::Always(Behavior::InBandError {
                after_chunks: after,
                error: ve.clone(),
            }));
            let (events, err) = drain_stream(&m, &ChatRequest::user("hi")).await;
            assert_eq!(
                text_of(&events).is_empty(),
                after == 0,
                "{ve:?} after {after}"
            );
            let e = err.expect("the stream ends with the exception");
            // Proxy pages have no exception type: they arrive as an internal server exception.
            let want = match ve {
                VendorError::BadGateway
                | VendorError::GatewayTimeout
                | VendorError::EmptyServiceUnavailable => ErrorKind::ServerError,
                _ => ve.expected_kind(),
            };
            assert_eq!(e.kind(), want, "exception after {after}: {ve:?}: {e}");
            assert!(e.request_delivered());
        }
    }
}

#[tokio::test]
async fn truncation_corruption_and_resets() {
    let fake = bedrock_fake().await;
    let m = bedrock(&fake);
    assert_truncated_stream(&fake, &m, "messageStop").await;

    // One event with broken JSON inside a valid frame is skipped; the answer completes.
    assert_malformed_json(&fake, &m).await;

    // Without metadata (usage) after messageStop the answer is still complete.
    fake.set_script(Script::Always(Behavior::StopWithoutDone));
    let events = stream_ok(&m, &ChatRequest::user("hi")).await;
    assert_eq!(text_of(&events), "Hello! How can I help you today?");

    assert_reset_mid_stream(&fake, &m).await;

    // A frame whose checksum is wrong: an invalid response, not a short answer.
    let mut frame = ripcord_chaos_frame();
    let n = frame.len();
    frame[n - 1] ^= 0xff;
    fake.set_script(Script::Always(Behavior::Raw(
        ripcord_chaos::RawResponse::new(
            200,
            vec![(
                "content-type".into(),
                "application/vnd.amazon.eventstream".into(),
            )],
            frame,
            ripcord_chaos::RawEnd::Chunked,
        ),
    )));
    let (_, err) = drain_stream(&m, &ChatRequest::user("hi")).await;
    let e = err.expect("bad crc");
    assert_eq!(e.kind(), ErrorKind::InvalidResponse);
    assert!(e.message().contains("corrupt event-stream frame"), "{e}");
}

/// One real `messageStart` frame, from the fake's own encoder.
fn ripcord_chaos_frame() -> Vec<u8> {
    ripcord_chaos::bedrock::event_frame("messageStart", br#"{"role":"assistant"}"#)
}

#[tokio::test]
async fn timeouts_by_phase() {
    let fake = bedrock_fake().await;
    // Limits changed after construction apply to the next call.
    let m = bedrock(&fake).with_timeouts(short_phases()).unwrap();
    assert_phase_timeouts(&fake, &m).await;
}

fn with_creds(fake: &FakeVendor, creds: BedrockCredentials) -> Bedrock {
    Bedrock::new(bedrock_cfg(fake, BEDROCK_MODEL).with_credentials(creds)).unwrap()
}

#[tokio::test]
async fn credential_sources_each_sign_requests_the_fake_accepts() {
    let fake = bedrock_fake().await;
    let req = ChatRequest::user("hi");
    // Temporary keys with their session token, from the environment.
    let env = |n: &str| {
        match n {
            "AWS_ACCESS_KEY_ID" => Some(TEST_TEMP_ACCESS_KEY_ID),
            "AWS_SECRET_ACCESS_KEY" => Some(TEST_SECRET_ACCESS_KEY),
            "AWS_SESSION_TOKEN" => Some(TEST_SESSION_TOKEN),
            _ => None,
        }
        .map(str::to_owned)
    };
    let creds = BedrockCredentials::from_env_with(&env, None).unwrap();
    assert_eq!(creds.source(), &CredentialSource::Environment);
    with_creds(&fake, creds)
        .chat(&req, &Context::new())
        .await
        .unwrap();
    let sent = fake.requests().pop().unwrap();
    assert_eq!(
        sent.header("x-amz-security-token"),
        Some(TEST_SESSION_TOKEN)
    );
    assert!(
        sent.header("authorization")
            .unwrap()
            .contains("x-amz-security-token")
    );

    // A named profile of a shared credentials file.
    let dir = std::env::temp_dir().join(format!("ripcord-bedrock-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("credentials");
    std::fs::write(
        &file,
        format!(
            "[default]\naws_access_key_id = AKIAWRONG\naws_secret_access_key = wrong\n\n[bedrock-prod]\naws_access_key_id = {TEST_ACCESS_KEY_ID}\naws_secret_access_key = {TEST_SECRET_ACCESS_KEY}\n"
        ),
    )
    .unwrap();
    let env_file =
        |n: &str| (n == "AWS_SHARED_CREDENTIALS_FILE").then(|| file.to_str().unwrap().to_owned());
    let creds = BedrockCredentials::from_env_with(&env_file, Some("bedrock-prod")).unwrap();
    assert!(
        matches!(creds.source(), CredentialSource::Profile { profile, .. } if profile == "bedrock-prod")
    );
    with_creds(&fake, creds)
        .chat(&req, &Context::new())
        .await
        .unwrap();
    // The default profile's keys are unknown to the vendor: auth, never retried.
    let creds = BedrockCredentials::from_env_with(&env_file, None).unwrap();
    let e = with_creds(&fake, creds)
        .chat(&req, &Context::new())
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Auth);
    assert_eq!(e.vendor_code(), Some("UnrecognizedClientException"));
    let _ = std::fs::remove_dir_all(&dir);

    // A Bedrock API key from AWS_BEARER_TOKEN_BEDROCK.
    let env_key = |n: &str| (n == "AWS_BEARER_TOKEN_BEDROCK").then(|| TEST_API_KEY.to_owned());
    let creds = BedrockCredentials::from_env_with(&env_key, None).unwrap();
    let m = with_creds(&fake, creds);
    chat_ok(&m, &req).await;
    let sent = fake.requests().pop().unwrap();
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {TEST_API_KEY}").as_str())
    );
    assert!(
        sent.header("x-amz-date").is_none(),
        "an API key is not signed"
    );
    assert!(!format!("{m:?}").contains(TEST_API_KEY));
}

#[tokio::test]
async fn bad_credentials_are_auth_errors_that_leak_nothing() {
    let fake = bedrock_fake().await;
    let req = ChatRequest::user("hi");
    let expired = BedrockCredentials::keys(
        TEST_TEMP_ACCESS_KEY_ID,
        TEST_SECRET_ACCESS_KEY,
        Some(SecretString::from(EXPIRED_SESSION_TOKEN)),
    );
    let e = with_creds(&fake, expired)
        .chat(&req, &Context::new())
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Auth);
    assert_eq!(e.vendor_code(), Some("ExpiredTokenException"));
    assert_eq!(
        e.message(),
        "The security token included in the request is expired"
    );

    // The right key id with the wrong secret: the fake's recomputed signature differs.
    let wrong = BedrockCredentials::keys(TEST_ACCESS_KEY_ID, "not-the-secret-0000", None);
    let m = with_creds(&fake, wrong);
    let e = m.chat(&req, &Context::new()).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Auth);
    assert_eq!(e.vendor_code(), Some("InvalidSignatureException"));
    for text in [format!("{e}"), format!("{e:?}"), format!("{m:?}")] {
        assert!(!text.contains("not-the-secret"), "{text}");
    }
    let api = BedrockCredentials::api_key("ABSKwrong-key-0000");
    let e = with_creds(&fake, api)
        .stream(&req, &Context::new())
        .await
        .err()
        .unwrap();
    assert_eq!(e.kind(), ErrorKind::Auth);
    assert!(!format!("{e:?}").contains("ABSKwrong"));
}

#[tokio::test]
async fn a_guardrail_stop_is_content_filtered() {
    let fake = bedrock_fake().await;
    let m = Bedrock::new(
        bedrock_cfg(&fake, BEDROCK_MODEL)
            .with_guardrail(ripcord_providers::Guardrail::new("gr-1", "DRAFT")),
    )
    .unwrap();
    let body = r#"{"output":{"message":{"role":"assistant","content":[{"text":"Sorry, the model cannot answer this question."}]}},"stopReason":"guardrail_intervened","usage":{"inputTokens":9,"outputTokens":0,"totalTokens":9},"metrics":{"latencyMs":80}}"#;
    fake.set_script(Script::Always(Behavior::Status {
        status: 200,
        body: body.to_owned(),
        headers: vec![("content-type".into(), "application/json".into())],
    }));
    let e = chat_err(&m, &ChatRequest::user("hi")).await;
    assert_eq!(e.kind(), ErrorKind::ContentFiltered);
    let v = fake.requests()[0].json().unwrap();
    assert_eq!(
        v["guardrailConfig"],
        json!({"guardrailIdentifier":"gr-1","guardrailVersion":"DRAFT"})
    );
}

#[tokio::test]
async fn config_errors_name_what_is_wrong() {
    let e = Bedrock::new(
        BedrockConfig::new("m", "us-east-1")
            .with_credentials(BedrockCredentials::keys("AKID", "", None)),
    )
    .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Auth);
    let e = Bedrock::new(
        BedrockConfig::new("m", "us-east-1")
            .with_credentials(bedrock_keys())
            .with_base_url("ftp://x"),
    )
    .unwrap_err();
    assert!(e.message().contains("http or https"), "{e}");
}

/// A custom header reaches Bedrock and is signed with the rest: the fake, which checks the
/// SigV4 signature over the signed headers, still accepts the call.
#[tokio::test]
async fn custom_headers_reach_bedrock_inside_the_signature() {
    let fake = bedrock_fake().await;
    let m =
        Bedrock::new(bedrock_cfg(&fake, BEDROCK_MODEL).with_header("x-team", "search")).unwrap();
    chat_ok(&m, &ChatRequest::user("hi")).await;
    let sent = fake.requests().pop().unwrap();
    assert_eq!(sent.header("x-team"), Some("search"));
    let signed = sent.header("authorization").unwrap_or_default();
    assert!(
        signed.contains("x-team"),
        "x-team is not among the signed headers: {signed}"
    );
}
