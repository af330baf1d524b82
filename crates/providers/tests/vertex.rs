//! Vertex AI against loopback fakes: Gemini and Claude on Vertex's paths, and Google auth for
//! real — a service-account key signs an RS256 assertion that the fake token endpoint verifies
//! against the test key's public half, the token is cached, refreshed once under 50 concurrent
//! calls, refreshed again when it expires, and a refused or unreachable exchange is classified
//! without the key in sight.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::time::Duration;

use ripcord_chaos::google_token::{
    GoogleTokenServer, TEST_PRIVATE_KEY_PEM, TokenBehavior, WRONG_PRIVATE_KEY_PEM,
};
use ripcord_chaos::{Behavior, Script, VendorError};
use ripcord_core::{ChatModel, ChatRequest, Context, ErrorKind, TimeoutPhase};
use ripcord_providers::google::{
    Gemini, GoogleCredentials, ServiceAccountKey, VertexAnthropic, VertexConfig,
};
use support::*;

/// The PEM body line that must never show up anywhere.
fn key_fragment() -> &'static str {
    TEST_PRIVATE_KEY_PEM.lines().nth(3).unwrap()
}

fn service_account(tokens: &GoogleTokenServer) -> GoogleCredentials {
    GoogleCredentials::ServiceAccount(
        ServiceAccountKey::from_json(&tokens.key_file_json()).unwrap(),
    )
}

/// A token server whose tokens live `life`, and `fake` made to accept only the tokens it
/// minted.
async fn token_guarded(
    fake: ripcord_chaos::FakeVendor,
    life: Duration,
) -> (GoogleTokenServer, ripcord_chaos::FakeVendor) {
    let tokens = GoogleTokenServer::start(life).await.unwrap();
    fake.require_tokens(tokens.registry());
    (tokens, fake)
}

/// `model` on the fake, authorised by the token server's service account.
fn vertex_sa(
    fake: &ripcord_chaos::FakeVendor,
    tokens: &GoogleTokenServer,
    model: &str,
) -> VertexConfig {
    vertex_with(fake, service_account(tokens), model)
}

fn vertex_with(
    fake: &ripcord_chaos::FakeVendor,
    creds: GoogleCredentials,
    model: &str,
) -> VertexConfig {
    VertexConfig::new(model, "ripcord-fake", "us-central1", creds)
        .with_base_url(format!("{}/v1", fake.base_url()))
        .with_timeouts(timeouts())
}

#[tokio::test]
async fn gemini_on_vertex_with_a_service_account() {
    let (tokens, fake) = token_guarded(gemini_fake().await, Duration::from_secs(3600)).await;
    let g = Gemini::vertex(vertex_sa(&fake, &tokens, "gemini-2.5-pro")).unwrap();
    assert!(!format!("{g:?}").contains(key_fragment()));
    let r = chat_ok(&g, &ChatRequest::user("Hi")).await;
    assert_eq!(r.content, "Hello! How can I help you today?");
    let events = stream_ok(&g, &ChatRequest::user("Hi")).await;
    assert_eq!(text_of(&events), "Hello! How can I help you today?");
    let sent = fake.requests();
    assert_eq!(
        sent[0].path,
        "/v1/projects/ripcord-fake/locations/us-central1/publishers/google/models/gemini-2.5-pro:generateContent"
    );
    assert_eq!(
        sent[1].path,
        "/v1/projects/ripcord-fake/locations/us-central1/publishers/google/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
    );
    assert!(
        sent[0]
            .header("authorization")
            .unwrap()
            .starts_with("Bearer ya29.")
    );
    assert!(sent[0].header("x-goog-api-key").is_none());
    // One exchange served both calls; its assertion verified against the public key.
    assert_eq!((tokens.exchanges(), tokens.minted()), (1, 1));
    let log = tokens.log();
    assert!(log[0].verified, "{log:?}");
    assert_eq!(
        log[0].issuer.as_deref(),
        Some(ripcord_chaos::google_token::TEST_CLIENT_EMAIL)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_calls_share_one_token_exchange() {
    let (tokens, fake) = token_guarded(gemini_fake().await, Duration::from_secs(3600)).await;
    let g = Gemini::vertex(vertex_sa(&fake, &tokens, "gemini-2.5-flash")).unwrap();
    let calls = (0..50).map(|_| {
        let g = g.clone();
        async move { g.chat(&ChatRequest::user("Hi"), &Context::new()).await }
    });
    let results = futures::future::join_all(calls).await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert_eq!(fake.hits(), 50);
    assert_eq!(
        tokens.exchanges(),
        1,
        "single-flight: one exchange for 50 callers"
    );
}

#[tokio::test]
async fn an_expired_token_is_refreshed_and_a_fresh_one_is_not() {
    let (tokens, fake) = token_guarded(gemini_fake().await, Duration::from_secs(1)).await;
    let g = Gemini::vertex(vertex_sa(&fake, &tokens, "gemini-2.5-flash")).unwrap();
    chat_ok(&g, &ChatRequest::user("1")).await;
    chat_ok(&g, &ChatRequest::user("2")).await;
    assert_eq!(tokens.exchanges(), 1, "a fresh token is reused");
    // Past the token's life: the fake would refuse the old token, so success means a new one.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    chat_ok(&g, &ChatRequest::user("3")).await;
    assert_eq!(tokens.exchanges(), 2);
    let auth: Vec<String> = fake
        .requests()
        .iter()
        .map(|r| r.header("authorization").unwrap_or_default().to_owned())
        .collect();
    assert_eq!(auth[0], auth[1]);
    assert_ne!(auth[1], auth[2]);
}

#[tokio::test]
async fn a_bad_signature_is_refused_at_the_token_endpoint_as_auth() {
    let (tokens, fake) = token_guarded(gemini_fake().await, Duration::from_secs(3600)).await;
    let wrong =
        ServiceAccountKey::from_json(&tokens.key_file_json_with(WRONG_PRIVATE_KEY_PEM)).unwrap();
    let g = Gemini::vertex(vertex_with(
        &fake,
        GoogleCredentials::ServiceAccount(wrong),
        "gemini-2.5-flash",
    ))
    .unwrap();
    let e = chat_err(&g, &ChatRequest::user("Hi")).await;
    assert_eq!(e.kind(), ErrorKind::Auth);
    assert_eq!(e.vendor_code(), Some("invalid_grant"));
    assert!(e.message().contains("Invalid JWT Signature."), "{e}");
    assert_eq!(e.provider(), Some("vertex"));
    let shown = format!("{e} {e:?}");
    assert!(
        !shown.contains(key_fragment()) && !shown.contains("PRIVATE KEY"),
        "{shown}"
    );
    let log = tokens.log();
    assert!(!log[0].verified);
    assert!(
        log[0]
            .rejection
            .as_deref()
            .unwrap_or("")
            .contains("InvalidSignature"),
        "{log:?}"
    );
    assert_eq!(fake.hits(), 0, "no model call without a token");
}

#[tokio::test]
async fn a_failed_exchange_is_network_or_timeout_and_a_valid_token_survives_it() {
    let tokens = GoogleTokenServer::start(Duration::from_secs(3600))
        .await
        .unwrap();
    let fake = gemini_fake().await;
    let short = timeouts().with_first_token(Duration::from_millis(300));
    let cfg = vertex_sa(&fake, &tokens, "gemini-2.5-flash").with_timeouts(short);
    let g = Gemini::vertex(cfg).unwrap();
    tokens.set_behavior(TokenBehavior::Reset);
    assert_eq!(
        chat_err(&g, &ChatRequest::user("Hi")).await.kind(),
        ErrorKind::Network
    );
    tokens.set_behavior(TokenBehavior::Hang);
    let e = chat_err(&g, &ChatRequest::user("Hi")).await;
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    assert!(matches!(
        e.timeout_phase(),
        Some(TimeoutPhase::FirstByte | TimeoutPhase::FirstToken)
    ));
    tokens.set_behavior(TokenBehavior::Status {
        status: 503,
        body: "{}".into(),
    });
    assert_eq!(
        chat_err(&g, &ChatRequest::user("Hi")).await.kind(),
        ErrorKind::ServerError
    );
    assert_eq!(fake.hits(), 0);
    tokens.set_behavior(TokenBehavior::Verify);
    chat_ok(&g, &ChatRequest::user("Hi")).await;
    assert_eq!(tokens.minted(), 1);
}

#[tokio::test]
async fn a_token_vertex_refuses_is_auth() {
    let (_tokens, fake) = token_guarded(gemini_fake().await, Duration::from_secs(3600)).await;
    let g = vertex(&fake); // a fixed bearer token the registry never minted
    let e = chat_err(&g, &ChatRequest::user("Hi")).await;
    assert_eq!(e.kind(), ErrorKind::Auth);
    assert_eq!(e.vendor_code(), Some("UNAUTHENTICATED"));
    assert_error_clean(&e);
    assert_eq!(
        fake.requests()[0].header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
}

#[tokio::test]
async fn vertex_errors_are_classified() {
    let fake = gemini_fake().await;
    let g = vertex(&fake);
    check_error_rows(&fake, &g, "vertex", true, |_, _| {}).await;
}

#[tokio::test]
async fn claude_on_vertex_json_and_stream_with_a_service_account() {
    let (tokens, fake) = token_guarded(anthropic_fake().await, Duration::from_secs(3600)).await;
    let c = VertexAnthropic::new(vertex_sa(&fake, &tokens, "claude-sonnet-4-5@20250929")).unwrap();
    let r = chat_ok(&c, &ChatRequest::user("Hi")).await;
    assert_eq!(r.content, "Hello! How can I help you today?");
    assert_eq!(r.provenance.served_by.as_deref(), Some("vertex-anthropic"));
    let events = stream_ok(&c, &ChatRequest::user("Hi")).await;
    assert_eq!(text_of(&events), "Hello! How can I help you today?");
    let sent = fake.requests();
    let base = "/v1/projects/ripcord-fake/locations/us-central1/publishers/anthropic/models/claude-sonnet-4-5@20250929";
    assert_eq!(sent[0].path, format!("{base}:rawPredict"));
    assert_eq!(sent[1].path, format!("{base}:streamRawPredict"));
    for s in &sent {
        let body = s.json().unwrap();
        assert_eq!(body["anthropic_version"], "vertex-2023-10-16");
        assert!(body.get("model").is_none(), "{body}");
        assert!(s.header("anthropic-version").is_none());
        assert!(s.header("x-api-key").is_none());
        assert!(
            s.header("authorization")
                .unwrap()
                .starts_with("Bearer ya29.")
        );
    }
    assert_eq!(sent[1].json().unwrap()["stream"], true);
    assert_eq!(tokens.exchanges(), 1);
}

#[tokio::test]
async fn claude_on_vertex_keeps_the_anthropic_classification() {
    let fake = anthropic_fake().await;
    let c = vertex_anthropic(&fake);
    check_error_rows(&fake, &c, "vertex-anthropic", true, |_, _| {}).await;
    fake.set_script(Script::Always(Behavior::InBandError {
        after_chunks: 1,
        error: VendorError::Overloaded,
    }));
    let (events, err) = drain_stream(&c, &ChatRequest::user("hi")).await;
    assert!(!text_of(&events).is_empty());
    assert_eq!(err.unwrap().kind(), ErrorKind::Overloaded);
    assert_truncated_stream(&fake, &c, "truncated").await;
}

#[tokio::test]
async fn vertex_embeddings_go_to_predict_with_a_minted_token() {
    use ripcord_core::{EmbeddingModel, EmbeddingRequest};
    let (tokens, fake) = token_guarded(gemini_fake().await, Duration::from_secs(3600)).await;
    let cfg = vertex_sa(&fake, &tokens, "text-embedding-005").with_task_type("RETRIEVAL_DOCUMENT");
    let g = Gemini::vertex(cfg).unwrap().named("vertex-embed");
    let mut req = EmbeddingRequest::new(vec!["blue sky".into(), "green grass here".into()]);
    req.dimensions = Some(16);
    let r = g.embed(&req, &Context::new()).await.unwrap();
    assert_eq!(r.vectors.len(), 2);
    assert!(r.vectors.iter().all(|v| v.len() == 16));
    assert_ne!(r.vectors[0], r.vectors[1]);
    assert_eq!(
        r.usage.input_tokens, 5,
        "the predictions' token counts, added up"
    );
    assert_eq!(r.model, "text-embedding-005");
    assert_eq!(r.served_by.as_deref(), Some("vertex-embed"));
    let sent = fake.requests().pop().unwrap();
    assert_eq!(
        sent.path,
        "/v1/projects/ripcord-fake/locations/us-central1/publishers/google/models/text-embedding-005:predict"
    );
    assert!(
        sent.header("authorization")
            .unwrap()
            .starts_with("Bearer ya29.ripcord-fake-")
    );
    assert_eq!(
        sent.json().unwrap(),
        serde_json::json!({
            "instances": [{"content": "blue sky", "task_type": "RETRIEVAL_DOCUMENT"},
                          {"content": "green grass here", "task_type": "RETRIEVAL_DOCUMENT"}],
            "parameters": {"outputDimensionality": 16}
        })
    );
    // One text, the same wire (Vertex has no separate single-text method).
    let one = g
        .embed(
            &EmbeddingRequest::new(vec!["blue sky".into()]),
            &Context::new(),
        )
        .await
        .unwrap();
    assert_eq!(one.vectors.len(), 1);
    assert!(fake.requests().pop().unwrap().path.ends_with(":predict"));
    assert_eq!(tokens.exchanges(), 1);
    // Errors keep Google's classification; an empty request never leaves.
    fake.set_script(Script::Always(Behavior::Error(VendorError::QuotaExhausted)));
    let e = g.embed(&req, &Context::new()).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::QuotaExhausted);
    let hits = fake.hits();
    let e = g
        .embed(&EmbeddingRequest::new(vec![]), &Context::new())
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidRequest);
    assert_eq!(fake.hits(), hits);
}

/// A custom header reaches Vertex beside the minted bearer token, which it may not replace.
#[tokio::test]
async fn custom_headers_reach_vertex() {
    let fake = gemini_fake().await;
    let g = Gemini::vertex(vertex_cfg(&fake, "gemini-2.5-pro").with_header("x-team", "search"))
        .unwrap();
    chat_ok(&g, &ChatRequest::user("Hi")).await;
    assert_eq!(fake.requests()[0].header("x-team"), Some("search"));
    let e = Gemini::vertex(vertex_cfg(&fake, "gemini-2.5-pro").with_header("Authorization", "x"))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidRequest, "{e}");
}
