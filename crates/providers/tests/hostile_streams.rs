//! Streams that misbehave, over real HTTP against both fake vendor wires: a clean end after the
//! stop reason is a complete answer (usage included), and unparseable events are skipped up to
//! the stream's limit, then fail it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod support;

use ripcord_chaos::{Behavior, FakeVendor, Script};
use ripcord_core::{ChatModel, ChatRequest, ErrorKind, StreamEvent};
use support::*;

fn models(openai_fake: &FakeVendor, anthropic_fake: &FakeVendor) -> Vec<Box<dyn ChatModel>> {
    vec![
        Box::new(openai(openai_fake)),
        Box::new(anthropic(anthropic_fake)),
    ]
}

#[tokio::test]
async fn a_clean_end_after_the_stop_reason_completes_with_usage_on_both_wires() {
    let (o, a) = (openai_fake().await, anthropic_fake().await);
    for f in [&o, &a] {
        f.set_script(Script::Always(Behavior::StopWithoutDone));
    }
    for m in models(&o, &a) {
        let (events, err) = drain_stream(&m, &ChatRequest::user("hi")).await;
        let who = &m.id().name;
        assert!(err.is_none(), "{who}: {err:?}");
        assert!(!text_of(&events).is_empty(), "{who}");
        assert!(
            matches!(events.last(), Some(StreamEvent::Finish { .. })),
            "{who}: {events:?}"
        );
        assert!(
            events
                .iter()
                .any(|e| matches!(e, StreamEvent::Usage { usage } if usage.output_tokens > 0)),
            "{who}: the usage must survive: {events:?}"
        );
    }
    // Without the stop reason the same clean end is still a truncation.
    for f in [&o, &a] {
        f.set_script(Script::Always(Behavior::TruncatedStream {
            after_chunks: 1,
        }));
    }
    for m in models(&o, &a) {
        let (_, err) = drain_stream(&m, &ChatRequest::user("hi")).await;
        assert_eq!(err.expect("truncated").kind(), ErrorKind::Network);
    }
}

#[tokio::test]
async fn unparseable_events_are_skipped_up_to_the_limit_then_fail_the_stream() {
    let (o, a) = (openai_fake().await, anthropic_fake().await);
    for f in [&o, &a] {
        f.set_script(Script::Always(Behavior::MalformedEvents { count: 3 }));
    }
    for m in models(&o, &a) {
        let (events, err) = drain_stream(&m, &ChatRequest::user("hi")).await;
        assert!(err.is_none(), "{}: {err:?}", m.id().name);
        assert!(matches!(events.last(), Some(StreamEvent::Finish { .. })));
    }
    for f in [&o, &a] {
        f.set_script(Script::Always(Behavior::MalformedEvents { count: 4 }));
    }
    for m in models(&o, &a) {
        let (_, err) = drain_stream(&m, &ChatRequest::user("hi")).await;
        let e = err.expect("past the limit");
        assert_eq!(e.kind(), ErrorKind::InvalidResponse, "{e}");
        assert!(e.message().contains("4 unparseable stream events"), "{e}");
    }
}
