//! Timeouts and stream guards: first token, idle and attempt limits apart.

use ripcord_core::testing::{StreamItem, text_stream};
use ripcord_core::{ErrorKind, StreamEvent, TimeoutPhase};
use ripcord_resilience::{ChatModelExt, TimeoutPolicy};
use tokio::time::Instant;

use crate::support::{chat_err, chat_within, ms, open_stream, scripted, secs, stream_all};

fn limits() -> TimeoutPolicy {
    TimeoutPolicy::builder()
        .attempt(secs(10))
        .first_token(secs(2))
        .idle(secs(1))
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn the_attempt_limit_and_the_deadline_are_told_apart() {
    let m = scripted("a").hang().with_timeout(limits());
    let start = Instant::now();
    let err = chat_err(&m).await;
    assert_eq!(
        (err.kind(), err.timeout_phase(), start.elapsed()),
        (ErrorKind::Timeout, Some(TimeoutPhase::Total), secs(10))
    );
    assert_eq!(err.provider(), Some("a"));

    let start = Instant::now();
    let err = chat_within(&m, secs(3)).await.unwrap_err();
    assert_eq!(
        (err.kind(), start.elapsed()),
        (ErrorKind::DeadlineExceeded, secs(3))
    );
}

#[tokio::test(start_paused = true)]
async fn a_stream_without_a_first_token_times_out() {
    let late = vec![(secs(5), StreamItem::Event(StreamEvent::text("late")))];
    let m = scripted("a").stream_items(late).with_timeout(limits());
    let start = Instant::now();
    let items = stream_all(&m).await;
    let err = items.last().unwrap().as_ref().unwrap_err();
    assert_eq!(err.timeout_phase(), Some(TimeoutPhase::FirstToken));
    assert_eq!(start.elapsed(), secs(2));
}

#[tokio::test(start_paused = true)]
async fn a_stalled_stream_times_out_on_the_idle_gap() {
    let stall = vec![
        (ms(100), StreamItem::Event(StreamEvent::text("Hel"))),
        (ms(900), StreamItem::Event(StreamEvent::text("lo"))),
        (ms(0), StreamItem::Stall),
    ];
    let m = scripted("a").stream_items(stall).with_timeout(limits());
    let start = Instant::now();
    let items = stream_all(&m).await;
    assert_eq!(items.len(), 3, "two deltas, then the idle timeout");
    let err = items[2].as_ref().unwrap_err();
    assert_eq!(err.timeout_phase(), Some(TimeoutPhase::StreamIdle));
    assert_eq!(start.elapsed(), ms(100 + 900 + 1000));
}

#[tokio::test(start_paused = true)]
async fn a_slow_but_steady_stream_passes_the_guards() {
    let chunks = ["a"; 30];
    let m = scripted("a")
        .stream_items(text_stream(&chunks, ms(900)))
        .with_timeout(
            TimeoutPolicy::builder()
                .attempt(secs(60))
                .first_token(secs(2))
                .idle(secs(1))
                .build()
                .unwrap(),
        );
    let resp = ripcord_core::stream::collect(open_stream(&m).await)
        .await
        .unwrap();
    assert_eq!(resp.text().len(), 30);
}

#[test]
fn invalid_limits_are_named() {
    let e = TimeoutPolicy::builder()
        .attempt(secs(0))
        .build()
        .unwrap_err();
    assert_eq!(e.setting(), "attempt");
    assert_eq!(
        TimeoutPolicy::builder()
            .idle(secs(0))
            .build()
            .unwrap_err()
            .setting(),
        "idle"
    );
}
