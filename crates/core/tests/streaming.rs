//! Streaming through a chain: fallback before the first content event, end-with-error or
//! Restart after it, the deadline mid-stream, and the static reply as a stream.

mod support;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use ripcord_core::testing::{ScriptedModel, StreamItem, drain, text_stream};
use ripcord_core::{
    Chain, ChatModel, ChatRequest, ChatResponse, Context, Error, ErrorKind, FinishReason,
    StreamEvent, StreamPolicy, stream,
};
use tokio::time::Instant;

use support::{chain_of, collect_ok, ms};

fn ask() -> ChatRequest {
    ChatRequest::user("Tell me a story")
}

fn texts(events: &[Result<StreamEvent, Error>]) -> String {
    events
        .iter()
        .filter_map(|e| e.as_ref().ok()?.text_delta())
        .collect()
}

/// Link `name`, streaming `text` after 5 ms, then an error of `kind` saying `message` `gap`
/// later.
fn cut_stream(
    name: &str,
    text: &str,
    gap: Duration,
    kind: ErrorKind,
    message: &'static str,
) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::new(name).stream_items(vec![
        (ms(5), StreamItem::Event(StreamEvent::text(text))),
        (gap, StreamItem::Error(Error::new(kind, message))),
    ]))
}

#[tokio::test(start_paused = true)]
async fn an_error_as_the_first_stream_event_falls_back() {
    // A 429 delivered as the first SSE event is the attempt's error.
    let a = Arc::new(ScriptedModel::new("a").stream_items(vec![(
        ms(5),
        StreamItem::Error(Error::new(ErrorKind::RateLimited, "429 in-band")),
    )]));
    let b = Arc::new(ScriptedModel::new("b").stream_items(text_stream(&["Once ", "upon"], ms(10))));
    let chain = chain_of(&[&a, &b]).build().unwrap();
    let events = drain(chain.stream(&ask(), &Context::new()).await.unwrap()).await;
    assert_eq!(texts(&events), "Once upon");
    assert!(events.iter().all(Result::is_ok));
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Ok(StreamEvent::Restarted { .. })))
    );
    let r = collect_ok(&chain, &ask()).await;
    assert_eq!(r.provenance.served_by.as_deref(), Some("b"));
    assert_eq!(
        r.provenance.attempts[0].error_kind,
        Some(ErrorKind::RateLimited)
    );
}

#[tokio::test(start_paused = true)]
async fn a_stream_that_ends_before_any_content_falls_back() {
    let a = Arc::new(ScriptedModel::new("a").stream_items(vec![]));
    let b = Arc::new(ScriptedModel::new("b").stream_items(text_stream(&["fine"], ms(1))));
    let chain = chain_of(&[&a, &b]).build().unwrap();
    let r = collect_ok(&chain, &ask()).await;
    assert_eq!(r.text(), "fine");
    assert_eq!(
        r.provenance.attempts[0].error_kind,
        Some(ErrorKind::InvalidResponse)
    );
}

#[tokio::test(start_paused = true)]
async fn a_failure_after_the_first_token_ends_the_stream_by_default() {
    let a = Arc::new(ScriptedModel::new("a").stream_items(vec![
        (ms(5), StreamItem::Event(StreamEvent::text("Once"))),
        (
            ms(5),
            StreamItem::Error(Error::new(
                ErrorKind::Overloaded,
                "overloaded_error mid-stream",
            )),
        ),
    ]));
    let b = Arc::new(ScriptedModel::new("b").stream_items(text_stream(&["never"], ms(1))));
    let chain = chain_of(&[&a, &b]).static_reply("busy").build().unwrap();
    let events = drain(chain.stream(&ask(), &Context::new()).await.unwrap()).await;
    assert_eq!(
        texts(&events),
        "Once",
        "never spliced with another model's text"
    );
    let err = events.last().unwrap().as_ref().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Overloaded);
    assert_eq!(err.provider(), Some("a"));
    assert_eq!(b.calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_failure_after_commit_carries_every_attempt_of_the_call() {
    // The first link fails before content (a fallback), the second commits and then fails:
    // the error lists both attempts, the committed one as a failure of the error's kind.
    let a = Arc::new(ScriptedModel::new("a").stream_items(vec![(
        ms(5),
        StreamItem::Error(Error::new(ErrorKind::ServerError, "500 in-band")),
    )]));
    let b = cut_stream("b", "Once", ms(20), ErrorKind::Network, "stream truncated");
    let chain = chain_of(&[&a, &b]).build().unwrap();
    let events = drain(chain.stream(&ask(), &Context::new()).await.unwrap()).await;
    assert_eq!(texts(&events), "Once");
    let err = events.last().unwrap().as_ref().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Network);
    let attempts = err.attempts();
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    assert_eq!(&*attempts[0].provider, "a");
    assert_eq!(attempts[0].error_kind, Some(ErrorKind::ServerError));
    assert_eq!(&*attempts[1].provider, "b");
    assert_eq!(attempts[1].error_kind, Some(ErrorKind::Network));
    // The committed attempt's latency runs to the failure, not to the first token.
    assert!(attempts[1].latency >= ms(25), "{:?}", attempts[1].latency);
    // The provenance announced at commit said the same first attempt.
    let announced = events.iter().find_map(|e| match e {
        Ok(StreamEvent::Provenance { provenance }) => Some(provenance.clone()),
        _ => None,
    });
    let announced = announced.expect("provenance at commit");
    assert!(announced.degraded);
    assert_eq!(announced.attempts[0], attempts[0]);
}

#[tokio::test(start_paused = true)]
async fn restart_policy_announces_itself_and_streams_the_whole_answer_again() {
    let a = Arc::new(ScriptedModel::new("a").stream_items(vec![
        (
            ms(5),
            StreamItem::Event(StreamEvent::text("Once upon a ti")),
        ),
        (
            ms(5),
            StreamItem::Error(Error::new(ErrorKind::Network, "connection reset")),
        ),
    ]));
    let b = Arc::new(
        ScriptedModel::new("b").stream_items(text_stream(&["A ", "new ", "story."], ms(5))),
    );
    let chain = chain_of(&[&a, &b])
        .stream_policy(StreamPolicy::Restart)
        .build()
        .unwrap();
    let events = drain(chain.stream(&ask(), &Context::new()).await.unwrap()).await;
    let restart_at = events
        .iter()
        .position(|e| {
            matches!(
                e,
                Ok(StreamEvent::Restarted {
                    reason: ErrorKind::Network,
                    ..
                })
            )
        })
        .expect("a Restarted event");
    assert_eq!(texts(&events[..restart_at]), "Once upon a ti");
    assert_eq!(texts(&events[restart_at..]), "A new story.");
    let r = stream::collect(Box::pin(futures::stream::iter(events)))
        .await
        .unwrap();
    assert_eq!(
        r.text(),
        "A new story.",
        "the collector discards what came before Restarted"
    );
    assert_eq!(r.provenance.served_by.as_deref(), Some("b"));
    let kinds: Vec<_> = r.provenance.attempts.iter().map(|a| a.error_kind).collect();
    assert_eq!(kinds, vec![Some(ErrorKind::Network), None]);
}

#[tokio::test(start_paused = true)]
async fn restart_with_nothing_left_ends_in_the_static_reply() {
    let a = cut_stream("a", "Half", ms(5), ErrorKind::ServerError, "boom");
    let b = Arc::new(ScriptedModel::new("b").fail(ErrorKind::Overloaded));
    let chain = chain_of(&[&a, &b])
        .stream_policy(StreamPolicy::Restart)
        .static_reply("The assistant is unavailable.")
        .build()
        .unwrap();
    let r = collect_ok(&chain, &ask()).await;
    assert_eq!(r.text(), "The assistant is unavailable.");
    assert!(r.provenance.static_reply && r.degraded());
}

/// Link "a": "Once" after 5 ms, then silence.
fn once_then_stall() -> ScriptedModel {
    ScriptedModel::new("a").stream_items(vec![
        (ms(5), StreamItem::Event(StreamEvent::text("Once"))),
        (ms(0), StreamItem::Stall),
    ])
}

/// The events a chain of `a` alone streams under a 3 s deadline and a `stream_max` bound,
/// checked to end exactly at that bound.
#[allow(clippy::unwrap_used)] // a test helper fails the test by panicking
async fn stall_after_once(
    a: ScriptedModel,
    stream_max: Duration,
) -> Vec<Result<StreamEvent, Error>> {
    let chain = Chain::builder()
        .link(a)
        .deadline(Duration::from_secs(3))
        .stream_max(stream_max)
        .build()
        .unwrap();
    let t0 = Instant::now();
    let events = drain(chain.stream(&ask(), &Context::new()).await.unwrap()).await;
    assert_eq!(t0.elapsed(), stream_max);
    events
}

#[tokio::test(start_paused = true)]
async fn a_stalled_stream_after_first_content_ends_at_the_stream_bound_not_the_deadline() {
    let events = stall_after_once(once_then_stall(), Duration::from_secs(20)).await;
    assert_eq!(
        events.last().unwrap().as_ref().unwrap_err().fault(),
        ripcord_core::Fault::Caller
    );
    assert_eq!(
        events.last().unwrap().as_ref().unwrap_err().kind(),
        ErrorKind::DeadlineExceeded
    );
}

#[tokio::test(start_paused = true)]
async fn a_stalled_stream_of_a_link_that_bounds_itself_ends_with_its_own_timeout() {
    // No per-event timer in the chain: the link's own limit ends the stream, at the stream
    // bound (past the deadline, which only bounded the first content), with its own error —
    // charged to the caller, not the link.
    let events =
        stall_after_once(once_then_stall().bounding_itself(), Duration::from_secs(30)).await;
    let e = events.last().unwrap().as_ref().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
    assert_eq!(e.provider(), Some("a"));
    assert_eq!(e.fault(), ripcord_core::Fault::Caller);
}

/// Link `a` stalls before its first token, link `b` streams "quick"; 4 s of a 10 s deadline
/// are reserved for `b`: the answer is b's, 6.01 s in. Both bound themselves, or neither.
#[allow(clippy::unwrap_used)] // a test helper: a failure fails the test
async fn stalled_then_quick(bounding: bool) -> ChatResponse {
    let a = ScriptedModel::new("a").stream_items(vec![(ms(0), StreamItem::Stall)]);
    let b = ScriptedModel::new("b").stream_items(text_stream(&["quick"], ms(10)));
    let (a, b) = if bounding {
        (a.bounding_itself(), b.bounding_itself())
    } else {
        (a, b)
    };
    let chain = Chain::builder()
        .link_arc(Arc::new(a))
        .reserve(Duration::from_secs(4))
        .link_arc(Arc::new(b))
        .deadline(Duration::from_secs(10))
        .build()
        .unwrap();
    let t0 = Instant::now();
    let r = collect_ok(&chain, &ask()).await;
    assert_eq!(r.text(), "quick");
    assert_eq!(t0.elapsed(), Duration::from_millis(6_010));
    r
}

#[tokio::test(start_paused = true)]
async fn a_slow_first_token_of_a_link_that_bounds_itself_still_falls_back_in_time() {
    let r = stalled_then_quick(true).await;
    assert_eq!(
        r.provenance.attempts[0].error_kind,
        Some(ErrorKind::Timeout),
        "link a's own timeout is what the chain recorded"
    );
}

#[tokio::test(start_paused = true)]
async fn a_slow_first_token_is_abandoned_for_the_next_link_within_the_deadline() {
    stalled_then_quick(false).await;
}

#[tokio::test(start_paused = true)]
async fn every_link_failing_before_content_streams_the_static_reply() {
    let a = Arc::new(ScriptedModel::new("a").fail(ErrorKind::Overloaded));
    let b = Arc::new(ScriptedModel::new("b").fail(ErrorKind::Auth));
    let chain = chain_of(&[&a, &b]).static_reply("busy").build().unwrap();
    let events = drain(chain.stream(&ask(), &Context::new()).await.unwrap()).await;
    assert_eq!(texts(&events), "busy");
    assert!(matches!(
        events.iter().rev().nth(1),
        Some(Ok(StreamEvent::Finish {
            reason: FinishReason::Stop,
            ..
        }))
    ));
    assert_eq!(chain.stats().static_replies, 1);
}

#[tokio::test(start_paused = true)]
async fn provenance_is_announced_at_commit_before_content() {
    let a = Arc::new(ScriptedModel::new("a").fail(ErrorKind::Overloaded));
    let b = Arc::new(ScriptedModel::new("b").stream_items(text_stream(&["x"], ms(1))));
    let chain = chain_of(&[&a, &b]).build().unwrap();
    let events = drain(chain.stream(&ask(), &Context::new()).await.unwrap()).await;
    match &events[0] {
        Ok(StreamEvent::Provenance { provenance }) => {
            assert_eq!(provenance.served_by.as_deref(), Some("b"));
            assert!(provenance.degraded);
        }
        other => panic!("expected provenance first, got {other:?}"),
    }
    assert!(matches!(
        events.last(),
        Some(Ok(StreamEvent::Provenance { .. }))
    ));
}

#[tokio::test(start_paused = true)]
async fn fail_fast_before_content_is_returned_when_the_stream_opens() {
    let a = Arc::new(ScriptedModel::new("a").stream_items(vec![(
        ms(1),
        StreamItem::Error(Error::new(ErrorKind::ContentFiltered, "policy")),
    )]));
    let b = Arc::new(ScriptedModel::new("b"));
    let chain = chain_of(&[&a, &b]).build().unwrap();
    let e = chain.stream(&ask(), &Context::new()).await.err().unwrap();
    assert_eq!(e.kind(), ErrorKind::ContentFiltered);
    assert_eq!(b.calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn nested_chains_stream_through() {
    let a = Arc::new(ScriptedModel::new("a").fail(ErrorKind::ServerError));
    let b = Arc::new(ScriptedModel::new("b").stream_items(text_stream(&["inner"], ms(1))));
    let inner = chain_of(&[&a, &b]).name("inner").build().unwrap();
    let outer = Chain::builder()
        .link(inner)
        .link(ScriptedModel::new("c"))
        .build()
        .unwrap();
    let r = collect_ok(&outer, &ask()).await;
    assert_eq!(r.text(), "inner");
    assert!(
        r.degraded(),
        "the inner chain's fallback shows in the outer provenance"
    );
}

#[test]
fn a_collected_tool_call_index_beyond_the_bound_is_an_invalid_response() {
    let mut c = ripcord_core::stream::Collector::new();
    c.push(StreamEvent::ToolCallDelta {
        index: u32::MAX,
        id: Some("c".into()),
        name: Some("f".into()),
        arguments: String::new(),
    });
    c.push(StreamEvent::finish(FinishReason::ToolCalls));
    assert_eq!(c.finish().unwrap_err().kind(), ErrorKind::InvalidResponse);
}

#[tokio::test(start_paused = true)]
async fn a_stream_cut_by_the_callers_budget_is_not_restarted_elsewhere() {
    // The caller's budget is spent: under Restart the chain goes to the static reply, as it
    // does whenever the deadline has passed, and never sends the request to another link.
    // Forty seconds of one "x" a second.
    let items = || -> Vec<_> {
        (0..40)
            .map(|_| {
                (
                    Duration::from_secs(1),
                    StreamItem::Event(StreamEvent::text("x")),
                )
            })
            .collect()
    };
    let a = Arc::new(ScriptedModel::new("a").stream_items(items()));
    let b = Arc::new(ScriptedModel::new("b"));
    let chain = chain_of(&[&a, &b])
        .stream_policy(StreamPolicy::Restart)
        .static_reply("unavailable")
        .build()
        .unwrap();
    let ctx = Context::new().with_timeout(Duration::from_secs(20));
    let r = stream::collect(chain.stream(&ask(), &ctx).await.unwrap())
        .await
        .unwrap();
    assert!(r.provenance.static_reply);
    assert_eq!(b.calls(), 0);
    // Without a static reply the stream ends with the cut.
    let chain = Chain::builder()
        .link(ScriptedModel::new("a").stream_items(items()))
        .link_arc(b.clone())
        .stream_policy(StreamPolicy::Restart)
        .build()
        .unwrap();
    let ctx = Context::new().with_timeout(Duration::from_secs(20));
    let events = drain(chain.stream(&ask(), &ctx).await.unwrap()).await;
    let e = events.last().unwrap().as_ref().unwrap_err();
    assert!(e.is_deadline_cut(), "{e}");
    assert_eq!(b.calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_cut_within_the_holdback_falls_over_and_the_caller_sees_only_the_backup() {
    for (what, failure) in [
        (
            "error",
            StreamItem::Error(Error::new(ErrorKind::Network, "reset mid-stream")),
        ),
        ("stall", StreamItem::Stall),
    ] {
        let a = Arc::new(ScriptedModel::new("a").stream_items(vec![
            (ms(5), StreamItem::Event(StreamEvent::text("Primary half "))),
            (ms(50), failure),
        ]));
        let b = Arc::new(
            ScriptedModel::new("b").stream_items(text_stream(&["Backup ", "answer"], ms(10))),
        );
        let chain = chain_of(&[&a, &b])
            .stream_holdback(ms(200))
            .deadline(Duration::from_secs(10))
            .build()
            .unwrap();
        let events = drain(chain.stream(&ask(), &Context::new()).await.unwrap()).await;
        if what == "error" {
            assert_eq!(texts(&events), "Backup answer", "{what}");
            assert!(events.iter().all(Result::is_ok), "{what}: {events:?}");
            assert!(
                !events
                    .iter()
                    .any(|e| matches!(e, Ok(StreamEvent::Restarted { .. }))),
                "{what}"
            );
            assert_eq!(b.calls(), 1);
        } else {
            // A stall shorter than the hold-back is no failure: what came is committed.
            assert!(texts(&events).starts_with("Primary half"), "{what}");
            assert_eq!(b.calls(), 0);
        }
    }
}

#[tokio::test(start_paused = true)]
async fn without_a_holdback_the_same_cut_ends_the_committed_stream() {
    let a = cut_stream("a", "Primary half ", ms(50), ErrorKind::Network, "reset");
    let b = Arc::new(ScriptedModel::new("b").stream_items(text_stream(&["Backup"], ms(10))));
    let chain = chain_of(&[&a, &b]).build().unwrap();
    let events = drain(chain.stream(&ask(), &Context::new()).await.unwrap()).await;
    assert_eq!(texts(&events), "Primary half ");
    assert!(events.last().unwrap().is_err());
    assert_eq!(b.calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_holdback_commits_after_its_time_and_a_later_cut_is_not_spliced() {
    let a = Arc::new(ScriptedModel::new("a").stream_items(vec![
        (ms(5), StreamItem::Event(StreamEvent::text("one "))),
        (ms(50), StreamItem::Event(StreamEvent::text("two "))),
        (
            ms(500),
            StreamItem::Error(Error::new(ErrorKind::Network, "reset")),
        ),
    ]));
    let b = Arc::new(ScriptedModel::new("b").stream_items(text_stream(&["Backup"], ms(10))));
    let chain = chain_of(&[&a, &b])
        .stream_holdback(ms(100))
        .build()
        .unwrap();
    let start = Instant::now();
    let mut s = chain.stream(&ask(), &Context::new()).await.unwrap();
    // Nothing reaches the caller before the hold-back ends (5 ms to first content + 100 ms).
    let first_text = loop {
        match s.next().await.unwrap().unwrap() {
            StreamEvent::TextDelta { text } => break text,
            _ => continue,
        }
    };
    assert_eq!(first_text, "one ");
    assert_eq!(start.elapsed(), ms(105));
    let rest = drain(s).await;
    assert_eq!(texts(&rest), "two ");
    assert_eq!(
        rest.last().unwrap().as_ref().unwrap_err().kind(),
        ErrorKind::Network
    );
    assert_eq!(b.calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn an_answer_that_finishes_within_the_holdback_is_delivered_whole_at_once() {
    let a =
        Arc::new(ScriptedModel::new("a").stream_items(text_stream(&["Short ", "answer"], ms(5))));
    let chain = Chain::builder()
        .link_arc(a)
        .stream_holdback(ms(1000))
        .build()
        .unwrap();
    let start = Instant::now();
    let r = collect_ok(&chain, &ask()).await;
    assert_eq!(r.text(), "Short answer");
    assert!(start.elapsed() < ms(100), "{:?}", start.elapsed());
}
