//! A continued stream is counted in `ripcord.stream.continuations` (by from-link, continuing
//! link, mode and reason) and carried on the chain span.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers: a failure is the test failing

mod support;

use std::sync::Arc;
use std::time::Duration;

use ripcord_core::testing::{ScriptedModel, StreamItem, text_stream};
use ripcord_core::{
    Capabilities, Chain, ChatModel, ChatRequest, Context, Error, ErrorKind, StreamEvent,
    StreamPolicy, TimeoutPhase, stream,
};
use support::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Two words, then `end` (none: the stream just stops, without its finish).
fn first_part(end: Option<Error>) -> Vec<(Duration, StreamItem)> {
    let mut items = vec![
        (ms(1), StreamItem::Event(StreamEvent::text("The sky "))),
        (ms(1), StreamItem::Event(StreamEvent::text("is "))),
    ];
    if let Some(e) = end {
        items.push((ms(1), StreamItem::Error(e)));
    }
    items
}

async fn continued(name: &str, end: Option<Error>, prefill: bool) -> String {
    let a = ScriptedModel::new("a").stream_items(first_part(end));
    let mut b = ScriptedModel::new("b").stream_items(text_stream(&["blue."], ms(1)));
    if prefill {
        b = b.with_caps(Capabilities::new(8_192, 1_024).with_assistant_prefill(true));
    }
    let chain = Chain::builder()
        .name(name)
        .link_arc(Arc::new(a) as Arc<dyn ChatModel>)
        .link_arc(Arc::new(b) as Arc<dyn ChatModel>)
        .stream_policy(StreamPolicy::Continue)
        .build()
        .unwrap();
    let s = chain
        .stream(&ChatRequest::user("Why?"), &Context::new())
        .await
        .unwrap();
    stream::collect(s).await.unwrap().text().to_owned()
}

#[tokio::test]
async fn continuations_are_counted_by_links_mode_and_reason_and_sit_on_the_chain_span() {
    let cap = capture(|b| b);
    assert_eq!(continued("cut", None, false).await, "The sky is blue.");
    let stall = Error::timeout(TimeoutPhase::StreamIdle, "no event for 5 s");
    assert_eq!(
        continued("stall", Some(stall), true).await,
        "The sky is blue."
    );
    let in_band = Error::new(ErrorKind::Overloaded, "overloaded_error");
    assert_eq!(
        continued("in_band", Some(in_band), false).await,
        "The sky is blue."
    );

    let m = cap.metrics();
    let points = points(&m, "ripcord.stream.continuations");
    assert_eq!(points.len(), 3, "{points:?}");
    for (chain, mode, reason) in [
        ("cut", "instruction", "cut"),
        ("stall", "prefill", "stall"),
        ("in_band", "instruction", "in_band"),
    ] {
        let p = point_with(
            &points,
            &[
                ("ripcord.chain", chain),
                ("ripcord.fallback.from", "a"),
                ("ripcord.continued_by", "b"),
                ("ripcord.continuation.mode", mode),
                ("ripcord.continuation.reason", reason),
            ],
        )
        .unwrap_or_else(|| panic!("no point for {chain}: {points:?}"));
        assert_eq!(p.value, 1.0);
    }
    assert_eq!(
        unit(&m, "ripcord.stream.continuations").as_deref(),
        Some("{continuation}")
    );

    let spans = cap.spans();
    let span = named(&spans, "chain stall")[0];
    assert_eq!(attr_str(span, "ripcord.continued_by").as_deref(), Some("b"));
    assert_eq!(
        attr_str(span, "ripcord.continuation.offset").as_deref(),
        Some("11"),
        "\"The sky is \" is 11 bytes"
    );
    assert_attrs(
        span,
        &[
            ("ripcord.continuation.mode", "prefill"),
            ("ripcord.continuation.reason", "stall"),
            ("ripcord.continuations", "1"),
        ],
    );
    let event = event_attrs(span, "ripcord.stream_continued");
    assert_eq!(event.len(), 1, "{event:?}");
    assert_eq!(event[0]["ripcord.continuation.reason"], "stall");
}
