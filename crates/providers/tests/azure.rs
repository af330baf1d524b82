//! Azure OpenAI against the chaos fake (OpenAI wire, deployment paths).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use ripcord_chaos::{Behavior, FakeVendor, Script, Wire};
use ripcord_core::{
    ChatModel, ChatRequest, Context, EmbeddingModel, EmbeddingRequest, ErrorKind, StatusCode,
};
use ripcord_providers::{AzureConfig, AzureOpenAi, MaxTokensField};
use serde_json::json;
use support::*;

fn azure(fake: &FakeVendor) -> AzureOpenAi {
    AzureOpenAi::from_config(
        AzureConfig::new(fake.base_url(), "prod-4o", KEY)
            .with_model("gpt-4o")
            .with_timeouts(timeouts()),
    )
    .unwrap()
}

#[tokio::test]
async fn deployment_urls_api_key_header_and_body() {
    let fake = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let m = azure(&fake);
    let r = m
        .chat(
            &ChatRequest::user("hi").with_max_tokens(10),
            &Context::new(),
        )
        .await
        .unwrap();
    assert_eq!(r.text(), "Hello! How can I help you today?");
    assert_eq!(r.served_by(), "azure");
    let sent = &fake.requests()[0];
    assert_eq!(
        sent.path,
        "/openai/deployments/prod-4o/chat/completions?api-version=2024-10-21"
    );
    assert_eq!(sent.header("api-key"), Some(KEY));
    assert_eq!(sent.header("authorization"), None);
    assert_eq!(
        sent.json().unwrap(),
        json!({"model":"prod-4o","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":10})
    );
    assert_eq!(m.capabilities().context_window, 128_000);

    // Older api-versions take max_tokens; streams work the same way.
    let old = AzureOpenAi::from_config(
        AzureConfig::new(fake.base_url(), "legacy", KEY)
            .with_api_version("2024-06-01")
            .with_max_tokens_field(MaxTokensField::MaxTokens)
            .with_timeouts(timeouts()),
    )
    .unwrap();
    let events = stream_ok(&old, &ChatRequest::user("hi").with_max_tokens(5)).await;
    assert_eq!(text_of(&events), "Hello! How can I help you today?");
    let sent = &fake.requests()[1];
    assert_eq!(
        sent.path,
        "/openai/deployments/legacy/chat/completions?api-version=2024-06-01"
    );
    assert_eq!(sent.json().unwrap()["max_tokens"], 5);
}

#[tokio::test]
async fn azure_errors_content_filter_and_rate_limits() {
    let fake = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let m = azure(&fake);
    check_error_rows(&fake, &m, "azure", false, |_, _| {}).await;
    // Azure's own shapes: the content filter, a 429 with its wait, a missing deployment.
    type Row = (u16, &'static str, Vec<(String, String)>, ErrorKind);
    let rows: &[Row] = &[
        (
            400,
            r#"{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy.","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation","content_filter_result":{"hate":{"filtered":true,"severity":"high"}}}}}"#,
            vec![],
            ErrorKind::ContentFiltered,
        ),
        (
            429,
            r#"{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 6 seconds."}}"#,
            vec![("retry-after".into(), "6".into())],
            ErrorKind::RateLimited,
        ),
        (
            404,
            r#"{"error":{"code":"DeploymentNotFound","message":"The API deployment for this resource does not exist."}}"#,
            vec![],
            ErrorKind::ModelNotFound,
        ),
    ];
    for (status, body, headers, kind) in rows {
        fake.set_script(Script::Always(Behavior::Status {
            status: *status,
            body: (*body).into(),
            headers: headers.clone(),
        }));
        let e = chat_err(&m, &ChatRequest::user("hi")).await;
        assert_eq!(e.kind(), *kind, "{e}");
        assert_eq!(e.status(), Some(StatusCode(*status)));
        if *status == 429 {
            assert_eq!(e.retry_after(), Some(std::time::Duration::from_secs(6)));
        }
    }
}

#[tokio::test]
async fn azure_embeddings() {
    let fake = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let m = AzureOpenAi::new(fake.base_url(), "embed-small", "2024-10-21", KEY).unwrap();
    let r = m
        .embed(
            &EmbeddingRequest::new(vec!["a".into(), "b".into()]),
            &Context::new(),
        )
        .await
        .unwrap();
    assert_eq!(r.vectors.len(), 2);
    assert_eq!(
        fake.requests()[0].path,
        "/openai/deployments/embed-small/embeddings?api-version=2024-10-21"
    );
    assert_no_key("azure Debug", &format!("{m:?}"));
}
