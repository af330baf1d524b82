//! Helpers shared by the adapter tests: providers pointed at chaos fakes, short limits, and a
//! stream collector that keeps every event.
#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use ripcord_chaos::{Behavior, FakeVendor, Script, VendorError, Wire};
use ripcord_core::{
    ChatModel, ChatRequest, ChatResponse, ChatStream, Context, Error, ErrorKind, StatusCode,
    StreamEvent, TimeoutPhase,
};
use ripcord_providers::Timeouts;
#[cfg(feature = "anthropic")]
use ripcord_providers::{Anthropic, AnthropicConfig};
#[cfg(feature = "openai")]
use ripcord_providers::{OpenAi, OpenAiConfig};

#[path = "../../src/test_support/requests.rs"]
mod requests;
#[allow(
    unused_imports,
    reason = "only the tests that build these requests use them"
)]
pub(crate) use requests::*;

/// The key every test configures; no output may ever contain it.
pub(crate) const KEY: &str = "sk-test-5f3c9a1d7e2b4c6a8f0e";

/// Limits short enough for tests, long enough for a loaded 2-core machine.
pub(crate) fn timeouts() -> Timeouts {
    Timeouts::default()
        .with_connect(Duration::from_secs(2))
        .with_first_token(Duration::from_secs(5))
        .with_stream_idle(Duration::from_secs(5))
}

pub(crate) async fn openai_fake() -> FakeVendor {
    FakeVendor::start(Wire::OpenAi).await.expect("fake openai")
}

pub(crate) async fn anthropic_fake() -> FakeVendor {
    FakeVendor::start(Wire::Anthropic)
        .await
        .expect("fake anthropic")
}

#[cfg(feature = "openai")]
pub(crate) fn openai_cfg(fake: &FakeVendor, model: &str) -> OpenAiConfig {
    OpenAiConfig::new(model, KEY)
        .with_base_url(format!("{}/v1", fake.base_url()))
        .with_timeouts(timeouts())
}

#[cfg(feature = "openai")]
pub(crate) fn openai(fake: &FakeVendor) -> OpenAi {
    OpenAi::new(openai_cfg(fake, "gpt-4o")).expect("openai provider")
}

#[cfg(feature = "anthropic")]
pub(crate) fn anthropic_cfg(fake: &FakeVendor, model: &str) -> AnthropicConfig {
    AnthropicConfig::new(model, KEY)
        .with_base_url(fake.base_url())
        .with_timeouts(timeouts())
}

#[cfg(feature = "anthropic")]
pub(crate) fn anthropic(fake: &FakeVendor) -> Anthropic {
    Anthropic::new(anthropic_cfg(fake, "claude-sonnet-4-5")).expect("anthropic provider")
}

pub(crate) async fn gemini_fake() -> FakeVendor {
    FakeVendor::start(Wire::Gemini).await.expect("fake gemini")
}

#[cfg(feature = "gemini")]
/// Gemini on AI Studio's paths of the fake.
pub(crate) fn gemini(fake: &FakeVendor) -> ripcord_providers::google::Gemini {
    ripcord_providers::google::Gemini::new(
        ripcord_providers::google::GeminiConfig::new("gemini-2.5-flash", KEY)
            .with_base_url(format!("{}/v1beta", fake.base_url()))
            .with_timeouts(timeouts()),
    )
    .expect("gemini provider")
}

#[cfg(any(feature = "vertex", feature = "vertex-anthropic"))]
/// A Vertex configuration on the fake, with a fixed access token.
pub(crate) fn vertex_cfg(
    fake: &FakeVendor,
    model: &str,
) -> ripcord_providers::google::VertexConfig {
    ripcord_providers::google::VertexConfig::new(
        model,
        "ripcord-fake",
        "us-central1",
        ripcord_providers::google::GoogleCredentials::access_token(KEY),
    )
    .with_base_url(format!("{}/v1", fake.base_url()))
    .with_timeouts(timeouts())
}

#[cfg(feature = "vertex")]
/// Gemini on Vertex's paths of the fake.
pub(crate) fn vertex(fake: &FakeVendor) -> ripcord_providers::google::Gemini {
    ripcord_providers::google::Gemini::vertex(vertex_cfg(fake, "gemini-2.5-pro"))
        .expect("vertex provider")
}

#[cfg(feature = "vertex-anthropic")]
/// Claude on Vertex's paths of the (Anthropic-wire) fake.
pub(crate) fn vertex_anthropic(fake: &FakeVendor) -> ripcord_providers::google::VertexAnthropic {
    ripcord_providers::google::VertexAnthropic::new(vertex_cfg(fake, "claude-sonnet-4-5@20250929"))
        .expect("vertex-anthropic provider")
}

/// Reads a stream to its end: every event, and the error that ended it, if any.
pub(crate) async fn drain(s: ChatStream) -> (Vec<StreamEvent>, Option<Error>) {
    let mut events = Vec::new();
    let mut items = ripcord_core::testing::drain(s).await.into_iter();
    for item in items.by_ref() {
        match item {
            Ok(ev) => events.push(ev),
            Err(e) => {
                // Nothing may follow an error.
                assert!(items.next().is_none(), "events after an error");
                return (events, Some(e));
            }
        }
    }
    (events, None)
}

/// Streams `req` on a fresh context and reads it to its end (see [`drain`]).
pub(crate) async fn drain_stream(
    m: &impl ChatModel,
    req: &ChatRequest,
) -> (Vec<StreamEvent>, Option<Error>) {
    drain(m.stream(req, &Context::new()).await.unwrap()).await
}

/// Streams `req` on a fresh context and reads it to its end, which must be clean.
pub(crate) async fn stream_ok(m: &impl ChatModel, req: &ChatRequest) -> Vec<StreamEvent> {
    let (events, err) = drain_stream(m, req).await;
    assert!(err.is_none(), "{err:?}");
    events
}

/// The answer `chat` of `req` on a fresh context gives.
pub(crate) async fn chat_ok(m: &impl ChatModel, req: &ChatRequest) -> ChatResponse {
    m.chat(req, &Context::new()).await.unwrap()
}

/// The error `chat` of `req` on a fresh context fails with.
pub(crate) async fn chat_err(m: &impl ChatModel, req: &ChatRequest) -> Error {
    m.chat(req, &Context::new()).await.unwrap_err()
}

/// The error `stream` of `req` on a fresh context fails with before any event.
pub(crate) async fn stream_err(m: &impl ChatModel, req: &ChatRequest) -> Error {
    m.stream(req, &Context::new())
        .await
        .err()
        .expect("stream error")
}

/// For [`check_error_rows`]: the error keeps the HTTP status `wire` answers the row with.
pub(crate) fn keeps_status(wire: Wire) -> impl Fn(&VendorError, &Error) {
    move |ve, e| assert_eq!(e.status(), Some(StatusCode(ve.status(wire))), "{ve:?}")
}

/// Scripts every error row of the table on `fake` in turn and checks the error `chat` of `m`
/// fails with: its kind, its provider, and that it leaks no key; `also` checks what one adapter
/// adds. With `stream`, a stream request must fail the same way, before any event.
pub(crate) async fn check_error_rows(
    fake: &FakeVendor,
    m: &impl ChatModel,
    provider: &str,
    stream: bool,
    also: impl Fn(&VendorError, &Error),
) {
    for ve in VendorError::ALL {
        fake.set_script(Script::Always(Behavior::Error(ve.clone())));
        let e = chat_err(m, &ChatRequest::user("hi")).await;
        assert_eq!(e.kind(), ve.expected_kind(), "{ve:?}: {e}");
        assert_eq!(e.provider(), Some(provider));
        also(&ve, &e);
        assert_error_clean(&e);
        if stream {
            let e = stream_err(m, &ChatRequest::user("hi")).await;
            assert_eq!(e.kind(), ve.expected_kind(), "stream {ve:?}: {e}");
        }
    }
}

/// Scripts every error row of the table in band — as the first event and after two chunks —
/// and then in a 200 JSON body, and checks each is classified as its HTTP twin. Text arrives
/// only when the error follows content; `also` checks what one adapter adds, given the row,
/// the events before the error (none when the stream failed before it began) and the error.
pub(crate) async fn assert_in_band_errors(
    fake: &FakeVendor,
    m: &impl ChatModel,
    also: impl Fn(&VendorError, &[StreamEvent], &Error),
) {
    for ve in VendorError::ALL {
        for after in [0, 2] {
            fake.set_script(Script::Always(Behavior::InBandError {
                after_chunks: after,
                error: ve.clone(),
            }));
            let (events, e) = match m.stream(&ChatRequest::user("hi"), &Context::new()).await {
                Ok(s) => {
                    let (events, err) = drain(s).await;
                    assert_eq!(
                        text_of(&events).is_empty(),
                        after == 0,
                        "{ve:?} after {after}: content only before a later error"
                    );
                    (events, err.expect("the stream ends with the error"))
                }
                Err(e) => (Vec::new(), e),
            };
            assert_eq!(
                e.kind(),
                ve.expected_kind(),
                "in-band after {after}: {ve:?}: {e}"
            );
            also(&ve, &events, &e);
        }
        let e = chat_err(m, &ChatRequest::user("hi")).await;
        assert_eq!(e.kind(), ve.expected_kind(), "200 body {ve:?}: {e}");
    }
}

/// Scripts a stream cut after two chunks: its text arrives, then a network error after the
/// vendor had the request, whose message names `word`.
pub(crate) async fn assert_truncated_stream(fake: &FakeVendor, m: &impl ChatModel, word: &str) {
    fake.set_script(Script::Always(Behavior::TruncatedStream {
        after_chunks: 2,
    }));
    let (events, err) = drain_stream(m, &ChatRequest::user("hi")).await;
    assert!(!text_of(&events).is_empty());
    let e = err.expect("truncated");
    assert_eq!(e.kind(), ErrorKind::Network);
    assert!(e.request_delivered(), "{e:?}");
    assert!(e.message().contains(word), "{e}");
}

/// Scripts a 200 whose JSON is broken on `fake`: `chat` of `m` fails with `InvalidResponse`,
/// while a stream with one unparseable event skips it and still completes.
pub(crate) async fn assert_malformed_json(fake: &FakeVendor, m: &impl ChatModel) {
    fake.set_script(Script::Always(Behavior::MalformedJson));
    assert_eq!(
        chat_err(m, &ChatRequest::user("hi")).await.kind(),
        ErrorKind::InvalidResponse
    );
    let events = stream_ok(m, &ChatRequest::user("hi")).await;
    assert!(
        events
            .iter()
            .any(|e| matches!(e, StreamEvent::Finish { .. }))
    );
}

/// Scripts a connection reset after one chunk on `fake`: the stream of `m` ends with a
/// `Network` error.
pub(crate) async fn assert_reset_mid_stream(fake: &FakeVendor, m: &impl ChatModel) {
    fake.set_script(Script::Always(Behavior::ResetMidStream { after_chunks: 1 }));
    let (_, err) = drain_stream(m, &ChatRequest::user("hi")).await;
    assert_eq!(err.expect("reset").kind(), ErrorKind::Network);
}

/// The limits of the phase tests: 300 ms to the first token and between events.
pub(crate) fn short_phases() -> Timeouts {
    Timeouts::default()
        .with_first_token(Duration::from_millis(300))
        .with_stream_idle(Duration::from_millis(300))
}

/// Scripts three silences on `fake` and checks that `m` (with [`short_phases`]) names each
/// one's phase: no response byte at all is `FirstByte`; a stall after one chunk is `StreamIdle`,
/// after that chunk's text; a stall before any content is `FirstToken` with no event (the
/// vendor's preamble — Anthropic's `message_start` and `ping`, Bedrock's `messageStart` — is not
/// a first token).
pub(crate) async fn assert_phase_timeouts(fake: &FakeVendor, m: &impl ChatModel) {
    fake.set_script(Script::Always(Behavior::HangBeforeHeaders));
    let e = chat_err(m, &ChatRequest::user("hi")).await;
    assert_eq!(e.timeout_phase(), Some(TimeoutPhase::FirstByte), "{e}");

    fake.set_script(Script::Always(Behavior::StallMidStream { after_chunks: 1 }));
    let (events, err) = drain_stream(m, &ChatRequest::user("hi")).await;
    assert!(!text_of(&events).is_empty());
    assert_eq!(
        err.expect("stall").timeout_phase(),
        Some(TimeoutPhase::StreamIdle)
    );

    fake.set_script(Script::Always(Behavior::StallMidStream { after_chunks: 0 }));
    let (events, err) = drain_stream(m, &ChatRequest::user("hi")).await;
    assert!(
        events.is_empty(),
        "the preamble is not a first token: {events:?}"
    );
    assert_eq!(
        err.expect("stall").timeout_phase(),
        Some(TimeoutPhase::FirstToken)
    );
}

/// The text of the text deltas.
pub(crate) fn text_of(events: &[StreamEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// Asserts no text anywhere contains the key.
pub(crate) fn assert_no_key(what: &str, text: &str) {
    assert!(!text.contains(KEY), "{what} leaks the API key: {text}");
}

/// Builds a provider from `cfg` with `build`; neither the configuration's `Debug` nor the
/// provider's shows the key.
pub(crate) fn build_keeping_the_key<C: std::fmt::Debug, M: std::fmt::Debug>(
    cfg: C,
    build: impl FnOnce(C) -> ripcord_core::Result<M>,
) -> M {
    assert_no_key("config Debug", &format!("{cfg:?}"));
    let m = build(cfg).unwrap();
    assert_no_key("provider Debug", &format!("{m:?}"));
    m
}

/// Scripts an answer with `status`, `body` and `headers` on `fake` (a vendor or proxy that
/// echoes the key): `chat` of `m` fails with `kind`, and the error never shows the key.
pub(crate) async fn assert_status_error_clean(
    fake: &FakeVendor,
    m: &impl ChatModel,
    (status, body, headers): (u16, String, Vec<(String, String)>),
    kind: ErrorKind,
) -> Error {
    fake.set_script(Script::Always(Behavior::Status {
        status,
        body,
        headers,
    }));
    let e = chat_err(m, &ChatRequest::user("hi")).await;
    assert_eq!(e.kind(), kind);
    assert_error_clean(&e);
    e
}

/// Asserts an error's Display and Debug never contain the key.
pub(crate) fn assert_error_clean(e: &Error) {
    assert_no_key("error Display", &e.to_string());
    assert_no_key("error Debug", &format!("{e:?}"));
}

pub(crate) async fn bedrock_fake() -> FakeVendor {
    FakeVendor::start(Wire::Bedrock)
        .await
        .expect("fake bedrock")
}

/// The Claude model id the Bedrock tests ask for (an inference profile: `:` in the path).
pub(crate) const BEDROCK_MODEL: &str = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";

#[cfg(feature = "bedrock")]
/// The fake's long-term test keys.
pub(crate) fn bedrock_keys() -> ripcord_providers::BedrockCredentials {
    ripcord_providers::BedrockCredentials::keys(
        ripcord_chaos::bedrock::TEST_ACCESS_KEY_ID,
        ripcord_chaos::bedrock::TEST_SECRET_ACCESS_KEY,
        None,
    )
}

#[cfg(feature = "bedrock")]
pub(crate) fn bedrock_cfg(fake: &FakeVendor, model: &str) -> ripcord_providers::BedrockConfig {
    ripcord_providers::BedrockConfig::new(model, "us-east-1")
        .with_credentials(bedrock_keys())
        .with_base_url(fake.base_url())
        .with_timeouts(timeouts())
}

#[cfg(feature = "bedrock")]
pub(crate) fn bedrock(fake: &FakeVendor) -> ripcord_providers::Bedrock {
    ripcord_providers::Bedrock::new(bedrock_cfg(fake, BEDROCK_MODEL)).expect("bedrock provider")
}
