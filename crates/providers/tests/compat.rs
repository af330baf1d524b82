//! The OpenAI-compatible presets against the chaos fake: each vendor's path, auth, wire details
//! and its own error codes in the body.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use ripcord_chaos::{Behavior, FakeVendor, Script, VendorError, Wire};
use ripcord_core::{ChatModel, ChatRequest, Context, ErrorKind, Locality, ResponseFormat};
use ripcord_providers::OpenAiConfig;
use ripcord_providers::compat::{self, OpenAiCompatible, Preset};
use serde_json::json;
use support::*;

async fn fake() -> FakeVendor {
    FakeVendor::start(Wire::OpenAi).await.unwrap()
}

fn with_key(preset: Preset, fake: &FakeVendor, path: &str, model: &str) -> OpenAiCompatible {
    OpenAiCompatible::from_config(
        preset,
        OpenAiConfig::new(model, KEY)
            .with_base_url(format!("{}{path}", fake.base_url()))
            .with_timeouts(timeouts()),
    )
    .unwrap()
}

/// Plays `(status, body) → kind` rows through real HTTP.
async fn rows(m: &OpenAiCompatible, fake: &FakeVendor, rows: &[(u16, &str, ErrorKind)]) {
    for (status, body, kind) in rows {
        fake.set_script(Script::Always(Behavior::Status {
            status: *status,
            body: (*body).to_owned(),
            headers: vec![("content-type".into(), "application/json".into())],
        }));
        let e = chat_err(m, &ChatRequest::user("hi")).await;
        assert_eq!(e.kind(), *kind, "{status} {body}: {e}");
        assert_error_clean(&e);
    }
}

#[tokio::test]
async fn deepseek_wire_and_errors() {
    let fake = fake().await;
    let m = with_key(compat::deepseek(), &fake, "", "deepseek-chat");
    let schema = json!({"type":"object","properties":{"a":{"type":"integer"}}});
    let req = ChatRequest::user("json please")
        .with_max_tokens(64)
        .with_response_format(ResponseFormat::JsonSchema {
            name: "a".into(),
            schema: schema.clone(),
            strict: false,
        });
    chat_ok(&m, &req).await;
    let sent = &fake.requests()[0];
    assert_eq!(sent.path, "/chat/completions");
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let body = sent.json().unwrap();
    assert_eq!(body["max_tokens"], 64);
    assert!(body.get("max_completion_tokens").is_none());
    // DeepSeek only knows json_object: the schema travels in a system message.
    assert_eq!(body["response_format"], json!({"type":"json_object"}));
    assert!(
        body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains(&schema.to_string())
    );
    assert_eq!(m.id().to_string(), "deepseek/deepseek-chat");
    assert_eq!(
        m.capabilities().locality,
        Locality::cloud_in("deepseek", "cn")
    );

    fake.set_script(Script::Always(Behavior::Error(
        VendorError::PaymentRequired,
    )));
    let e = chat_err(&m, &ChatRequest::user("hi")).await;
    assert_eq!(e.kind(), ErrorKind::QuotaExhausted);
    rows(&m, &fake, &[
        (402, r#"{"error":{"message":"Insufficient Balance","type":"unknown_error","param":null,"code":"invalid_request_error"}}"#, ErrorKind::QuotaExhausted),
        (422, r#"{"error":{"message":"Invalid top_p","type":"invalid_request_error"}}"#, ErrorKind::InvalidRequest),
        (503, r#"{"error":{"message":"Server overloaded, please try again later","type":"server_error"}}"#, ErrorKind::Overloaded),
        (429, r#"{"error":{"message":"Rate Limit Reached","type":"rate_limit_error"}}"#, ErrorKind::RateLimited),
    ])
    .await;
}

#[tokio::test]
async fn zhipu_wire_and_business_codes() {
    let fake = fake().await;
    let m = with_key(compat::zhipu(), &fake, "/api/paas/v4", "glm-4.6");
    let events = stream_ok(&m, &ChatRequest::user("你好")).await;
    assert_eq!(text_of(&events), "Hello! How can I help you today?");
    let sent = &fake.requests()[0];
    assert_eq!(sent.path, "/api/paas/v4/chat/completions");
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(m.capabilities().context_window, 200_000);
    rows(&m, &fake, &[
        (429, r#"{"error":{"code":"1113","message":"您的账户已欠费，请充值后重试"}}"#, ErrorKind::QuotaExhausted),
        (400, r#"{"error":{"code":"1301","message":"系统检测到输入或生成内容可能包含不安全或敏感内容"}}"#, ErrorKind::ContentFiltered),
        (429, r#"{"error":{"code":"1302","message":"您当前使用该API的并发数过高"}}"#, ErrorKind::RateLimited),
        (429, r#"{"error":{"code":"1305","message":"该模型当前访问量过大，请您稍后再试"}}"#, ErrorKind::Overloaded),
        (400, r#"{"error":{"code":"1261","message":"Prompt 超长"}}"#, ErrorKind::ContextLengthExceeded),
        (400, r#"{"error":{"code":"1211","message":"模型不存在，请检查模型代码"}}"#, ErrorKind::ModelNotFound),
    ])
    .await;
    // A business code inside a stream.
    fake.set_script(Script::Always(Behavior::Status {
        status: 200,
        body: "data: {\"error\":{\"code\":\"1301\",\"message\":\"敏感内容\"}}\n\n".into(),
        headers: vec![("content-type".into(), "text/event-stream".into())],
    }));
    let e = match m.stream(&ChatRequest::user("hi"), &Context::new()).await {
        Ok(s) => drain(s).await.1.expect("in-band"),
        Err(e) => e,
    };
    assert_eq!(e.kind(), ErrorKind::ContentFiltered);
    assert_eq!(e.vendor_code(), Some("1301"));
}

#[tokio::test]
async fn qwen_wire_and_dashscope_codes() {
    let fake = fake().await;
    let m = with_key(compat::qwen(), &fake, "/compatible-mode/v1", "qwen-plus");
    chat_ok(&m, &ChatRequest::user("hi")).await;
    assert_eq!(
        fake.requests()[0].path,
        "/compatible-mode/v1/chat/completions"
    );
    rows(&m, &fake, &[
        (400, r#"{"error":{"code":"Arrearage","param":null,"message":"Access denied, please make sure your account is in good standing.","type":"Arrearage"}}"#, ErrorKind::QuotaExhausted),
        (400, r#"{"error":{"code":"data_inspection_failed","param":null,"message":"Input data may contain inappropriate content.","type":"data_inspection_failed"}}"#, ErrorKind::ContentFiltered),
        (429, r#"{"error":{"code":"Throttling.RateQuota","message":"Requests rate limit exceeded, please try again later.","type":"Throttling.RateQuota"}}"#, ErrorKind::RateLimited),
        (400, r#"{"error":{"code":"invalid_parameter_error","message":"Range of input length should be [1, 129024]","type":"invalid_request_error"}}"#, ErrorKind::ContextLengthExceeded),
    ])
    .await;
}

#[tokio::test]
async fn moonshot_wire_and_error_types() {
    let fake = fake().await;
    let m = with_key(compat::moonshot(), &fake, "/v1", "kimi-k2-0905-preview");
    chat_ok(&m, &ChatRequest::user("hi")).await;
    assert_eq!(fake.requests()[0].path, "/v1/chat/completions");
    assert!(m.capabilities().tools);
    rows(&m, &fake, &[
        (429, r#"{"error":{"message":"Your account org-1 is suspended, please check your plan and billing details","type":"exceeded_current_quota_error"}}"#, ErrorKind::QuotaExhausted),
        (429, r#"{"error":{"message":"The engine is currently overloaded, please try again later","type":"engine_overloaded_error"}}"#, ErrorKind::Overloaded),
        (429, r#"{"error":{"message":"Your account org-1 request reached max RPM: 3, please try again after 1 seconds","type":"rate_limit_reached_error"}}"#, ErrorKind::RateLimited),
        (400, r#"{"error":{"message":"The request was rejected because it was considered high risk","type":"content_filter"}}"#, ErrorKind::ContentFiltered),
        (400, r#"{"error":{"message":"Invalid request: Your request exceeded model token limit: 8192","type":"invalid_request_error"}}"#, ErrorKind::ContextLengthExceeded),
    ])
    .await;
    // The rate-limit message names the wait; it becomes the retry-after.
    fake.set_script(Script::Always(Behavior::Status {
        status: 429,
        body: r#"{"error":{"message":"Your account org-1 request reached max RPM: 3, please try again after 2 seconds","type":"rate_limit_reached_error"}}"#.into(),
        headers: vec![],
    }));
    let e = chat_err(&m, &ChatRequest::user("hi")).await;
    assert_eq!(e.kind(), ErrorKind::RateLimited);
    assert_eq!(e.retry_after(), Some(std::time::Duration::from_secs(2)));
}

#[tokio::test]
async fn qianfan_wire_and_codes() {
    let fake = fake().await;
    let m = with_key(compat::qianfan(), &fake, "/v2", "ernie-4.5-turbo-128k");
    m.chat(
        &ChatRequest::user("hi").with_max_tokens(32),
        &Context::new(),
    )
    .await
    .unwrap();
    let sent = &fake.requests()[0];
    assert_eq!(sent.path, "/v2/chat/completions");
    assert_eq!(sent.json().unwrap()["max_completion_tokens"], 32);
    rows(&m, &fake, &[
        (400, r#"{"error":{"code":"tokens_too_long","message":"Prompt tokens too long","type":"invalid_request_error"},"id":"as-1"}"#, ErrorKind::ContextLengthExceeded),
        (429, r#"{"error":{"code":"rpm_rate_limit_exceeded","message":"Rate limit reached for RPM","type":"rate_limit_exceeded"},"id":"as-2"}"#, ErrorKind::RateLimited),
        (400, r#"{"error":{"code":"prompt_unsafe","message":"the content of prompt field is unsafe","type":"unsafe_request"},"id":"as-3"}"#, ErrorKind::ContentFiltered),
    ])
    .await;
}

#[tokio::test]
async fn ollama_is_local_keyless_and_maps_its_messages() {
    let fake = fake().await;
    let m = OpenAiCompatible::new(
        compat::ollama().with_base_url(format!("{}/v1", fake.base_url())),
        "llama3.2",
        None,
    )
    .unwrap();
    assert_eq!(m.capabilities().locality, Locality::Local);
    assert_eq!(m.capabilities().price.map(|p| p.input_per_mtok), Some(0.0));
    let r = chat_ok(&m, &ChatRequest::user("hi")).await;
    assert_eq!(r.usage.cost_usd, Some(0.0));
    let sent = &fake.requests()[0];
    assert_eq!(sent.header("authorization"), None);
    // Ollama understands json_schema.
    m.chat(
        &ChatRequest::user("x").with_response_format(ResponseFormat::JsonSchema {
            name: "s".into(),
            schema: json!({"type":"object"}),
            strict: true,
        }),
        &Context::new(),
    )
    .await
    .unwrap();
    assert_eq!(
        fake.requests()[1].json().unwrap()["response_format"]["type"],
        "json_schema"
    );
    rows(&m, &fake, &[
        (404, r#"{"error":{"message":"model \"llama9\" not found, try pulling it first","type":"api_error","param":null,"code":null}}"#, ErrorKind::ModelNotFound),
        (500, r#"{"error":{"message":"model requires more system memory (8.0 GiB) than is available (3.1 GiB)","type":"api_error"}}"#, ErrorKind::Overloaded),
    ])
    .await;
}

#[tokio::test]
async fn vllm_needs_a_base_url_and_takes_an_optional_key() {
    let fake = fake().await;
    let base = format!("{}/v1", fake.base_url());
    let keyless = OpenAiCompatible::new(
        compat::vllm().with_base_url(&base),
        "Qwen/Qwen2.5-7B-Instruct",
        None,
    )
    .unwrap();
    chat_ok(&keyless, &ChatRequest::user("hi")).await;
    assert_eq!(fake.requests()[0].header("authorization"), None);
    assert_eq!(keyless.capabilities().locality, Locality::Local);
    let keyed =
        OpenAiCompatible::new(compat::vllm().with_base_url(&base), "m", Some(KEY.into())).unwrap();
    chat_ok(&keyed, &ChatRequest::user("hi")).await;
    assert_eq!(
        fake.requests()[1].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_no_key("vllm Debug", &format!("{keyed:?}"));
    rows(&keyless, &fake, &[
        (404, r#"{"object":"error","message":"The model `x` does not exist.","type":"NotFoundError","param":null,"code":404}"#, ErrorKind::ModelNotFound),
        (400, r#"{"object":"error","message":"This model's maximum context length is 32768 tokens. However, you requested 40000 tokens.","type":"BadRequestError","param":null,"code":400}"#, ErrorKind::ContextLengthExceeded),
    ])
    .await;
}

/// Every preset still gets the shared rows right (HTML 502, empty 503, 401, …).
#[tokio::test]
async fn every_preset_maps_the_shared_rows() {
    let fake = fake().await;
    let presets = [
        (compat::deepseek(), ""),
        (compat::zhipu(), "/api/paas/v4"),
        (compat::qwen(), "/compatible-mode/v1"),
        (compat::moonshot(), "/v1"),
        (compat::qianfan(), "/v2"),
        (compat::ollama(), "/v1"),
        (compat::vllm(), "/v1"),
    ];
    for (preset, path) in presets {
        let vendor = preset.vendor;
        let m = with_key(preset, &fake, path, "some-model");
        for ve in VendorError::ALL {
            fake.set_script(Script::Always(Behavior::Error(ve.clone())));
            let e = chat_err(&m, &ChatRequest::user("hi")).await;
            assert_eq!(e.kind(), ve.expected_kind(), "{vendor} {ve:?}: {e}");
            assert_eq!(e.provider(), Some(vendor));
        }
    }
}

/// The presets added with the Bedrock issue: each one's path, bearer key, locality, defaults,
/// and what its hook decides over real HTTP.
#[tokio::test]
async fn the_newer_presets_speak_their_wire_and_read_their_own_errors() {
    let fake = fake().await;
    for (preset, model, region, vendor) in [
        (
            compat::mistral(),
            "mistral-large-latest",
            Some("eu"),
            "mistral",
        ),
        (
            compat::groq(),
            "llama-3.3-70b-versatile",
            Some("us"),
            "groq",
        ),
        (compat::xai(), "grok-4", Some("us"), "xai"),
        (
            compat::openrouter(),
            "anthropic/claude-sonnet-4.5",
            None,
            "openrouter",
        ),
        (
            compat::together(),
            "meta-llama/Llama-3.3-70B-Instruct-Turbo",
            Some("us"),
            "together",
        ),
        (
            compat::fireworks(),
            "accounts/fireworks/models/llama-v3p3-70b-instruct",
            Some("us"),
            "fireworks",
        ),
        (compat::cerebras(), "llama-3.3-70b", Some("us"), "cerebras"),
    ] {
        let base = preset.base_url.clone().unwrap();
        assert!(base.starts_with("https://"), "{vendor}: {base}");
        assert!(preset.key_required && preset.key_env.is_some(), "{vendor}");
        fake.clear();
        fake.set_script(Script::Always(Behavior::Ok));
        let m = with_key(preset, &fake, "/v1", model);
        let want = match region {
            Some(r) => Locality::cloud_in(vendor, r),
            None => Locality::cloud(vendor),
        };
        assert_eq!(m.capabilities().locality, want, "{vendor}");
        assert_eq!(m.id().to_string(), format!("{vendor}/{model}"));
        let events = stream_ok(&m, &ChatRequest::user("hi")).await;
        assert!(!text_of(&events).is_empty(), "{vendor}");
        let sent = &fake.requests()[0];
        assert_eq!(sent.path, "/v1/chat/completions", "{vendor}");
        assert_eq!(
            sent.header("authorization"),
            Some(format!("Bearer {KEY}").as_str())
        );
        let body = sent.json().unwrap();
        // Mistral refuses `stream_options`; the others get usage on streams.
        assert_eq!(
            body.get("stream_options").is_some(),
            vendor != "mistral",
            "{vendor}: {body}"
        );
    }

    let groq = with_key(compat::groq(), &fake, "/v1", "llama-3.3-70b-versatile");
    rows(
        &groq,
        &fake,
        &[(
            498,
            r#"{"error":{"message":"Flex tier capacity exceeded.","type":"capacity_exceeded","code":"capacity_exceeded"}}"#,
            ErrorKind::Overloaded,
        )],
    )
    .await;
    let xai = with_key(compat::xai(), &fake, "/v1", "grok-4");
    rows(
        &xai,
        &fake,
        &[
            (
                400,
                r#"{"code":"Client specified an invalid argument","error":"Incorrect API key provided: xa***yz. You can obtain an API key from https://console.x.ai."}"#,
                ErrorKind::Auth,
            ),
            (
                403,
                r#"{"code":"The caller does not have permission to execute the specified operation","error":"You have run out of credits or need a Grok subscription."}"#,
                ErrorKind::QuotaExhausted,
            ),
        ],
    )
    .await;
    let fireworks = with_key(
        compat::fireworks(),
        &fake,
        "/v1",
        "accounts/fireworks/models/x",
    );
    rows(
        &fireworks,
        &fake,
        &[(
            412,
            r#"{"error":{"object":"error","type":"invalid_request_error","message":"Account is suspended"}}"#,
            ErrorKind::QuotaExhausted,
        )],
    )
    .await;
}
