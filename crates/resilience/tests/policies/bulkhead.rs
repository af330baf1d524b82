//! Bulkhead and its priority queue.

use std::sync::Arc;

use ripcord_core::testing::ScriptedModel;
use ripcord_core::{ChatModel, ChatRequest, Context, ErrorKind, Priority};
use ripcord_resilience::{Bulkhead, BulkheadPolicy, ChatModelExt};
use tokio::time::Instant;

use crate::support::{
    Recorder, chat_err, chat_ok, chat_within, ms, open_stream, scripted, secs, spawn_chat,
};

/// A model answering "ok" after 1 s, behind `bulkhead(in_flight, queue)`, shared.
fn one_second_calls(in_flight: usize, queue: usize) -> Arc<Bulkhead<ScriptedModel>> {
    Arc::new(
        scripted("a")
            .reply_after("ok", secs(1))
            .with_bulkhead(bulkhead(in_flight, queue)),
    )
}

fn bulkhead(in_flight: usize, queue: usize) -> BulkheadPolicy {
    BulkheadPolicy::builder()
        .max_in_flight(in_flight)
        .max_queue(queue)
        .no_queue_wait_limit()
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn bounds_calls_in_flight() {
    let m = one_second_calls(2, 10);
    let start = Instant::now();
    let calls: Vec<_> = (0..5).map(|_| spawn_chat(&m, Context::new())).collect();
    for c in futures::future::join_all(calls).await {
        c.unwrap().unwrap();
    }
    assert_eq!(m.get_ref().peak_concurrency(), 2);
    assert_eq!(start.elapsed(), secs(3));
    let snap = m.snapshot();
    assert_eq!((snap.in_flight, snap.queued), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn serves_the_queue_by_priority_then_arrival_under_contention() {
    let m = Arc::new(Recorder::new("a", ms(100)).with_bulkhead(bulkhead(1, 16)));
    let arrivals = [
        ("busy", Priority::Normal),
        ("low-1", Priority::Low),
        ("normal-1", Priority::Normal),
        ("critical-1", Priority::Critical),
        ("high-1", Priority::High),
        ("low-2", Priority::Low),
        ("normal-2", Priority::Normal),
        ("high-2", Priority::High),
    ];
    let mut calls = Vec::new();
    for (name, priority) in arrivals {
        let m = m.clone();
        calls.push(tokio::spawn(async move {
            let ctx = Context::new().with_priority(priority);
            m.chat(&ChatRequest::user(name), &ctx).await
        }));
        // Let this caller reach the queue before the next arrives.
        tokio::time::sleep(ms(1)).await;
    }
    assert_eq!(m.snapshot().queued, 7);
    for c in futures::future::join_all(calls).await {
        c.unwrap().unwrap();
    }
    assert_eq!(
        m.get_ref().seen(),
        vec![
            "busy",
            "critical-1",
            "high-1",
            "high-2",
            "normal-1",
            "normal-2",
            "low-1",
            "low-2"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_full_queue_refuses_at_once_with_a_hint() {
    let m = one_second_calls(1, 1);
    let first = spawn_chat(&m, Context::new());
    let second = spawn_chat(&m, Context::new());
    tokio::time::sleep(ms(1)).await;
    let start = Instant::now();
    let err = chat_err(&m).await;
    assert_eq!(start.elapsed(), ms(0));
    assert_eq!(err.kind(), ErrorKind::BudgetExhausted);
    assert!(err.retry_after().is_some());
    first.await.unwrap().unwrap();
    second.await.unwrap().unwrap();
    assert_eq!(m.snapshot().rejected, 1);
}

#[tokio::test(start_paused = true)]
async fn queue_wait_is_bounded_by_the_deadline_and_max_queue_wait() {
    let policy = BulkheadPolicy::builder()
        .max_in_flight(1)
        .max_queue(10)
        .max_queue_wait(secs(3))
        .build()
        .unwrap();
    let m = Arc::new(
        scripted("a")
            .reply_after("ok", secs(10))
            .with_bulkhead(policy),
    );
    let busy = spawn_chat(&m, Context::new());
    tokio::time::sleep(ms(1)).await;

    let start = Instant::now();
    let err = chat_within(&m, secs(2)).await.unwrap_err();
    // A wait that ran out at the deadline is the bulkhead's own refusal, never a
    // `DeadlineExceeded` a breaker could take for a slow vendor.
    assert_eq!(
        (err.kind(), err.fault(), start.elapsed()),
        (
            ErrorKind::BudgetExhausted,
            ripcord_core::Fault::Local,
            secs(2)
        )
    );
    assert_eq!(m.snapshot().queued, 0, "the waiter left the queue");

    let start = Instant::now();
    let err = chat_err(&m).await;
    assert_eq!(
        (err.kind(), start.elapsed()),
        (ErrorKind::BudgetExhausted, secs(3))
    );
    busy.await.unwrap().unwrap();
    assert_eq!(m.get_ref().calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_stream_holds_its_slot_until_it_ends() {
    let m = scripted("a").with_bulkhead(bulkhead(1, 0));
    let s = open_stream(&m).await;
    assert_eq!(m.snapshot().in_flight, 1);
    let err = chat_err(&m).await;
    assert_eq!(err.kind(), ErrorKind::BudgetExhausted);
    ripcord_core::stream::collect(s).await.unwrap();
    assert_eq!(m.snapshot().in_flight, 0);
    chat_ok(&m).await;
}
