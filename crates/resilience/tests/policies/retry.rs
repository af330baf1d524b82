//! Retry: within the deadline, never on quota, with jitter and retry-after.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use ripcord_core::testing::{ScriptedModel, StreamItem, text_stream};
use ripcord_core::{
    CancellationToken, ChatModel, Context, Error, ErrorKind, StreamEvent, TimeoutPhase,
};
use ripcord_resilience::{ChatModelExt, Jitter, Retry, RetryBudget, RetryOn, RetryPolicy};
use tokio::time::Instant;

use crate::support::{
    attempt_kinds, chat_err, chat_ok, chat_within, last_err_kind, ms, open_stream, req, scripted,
    secs, spawn_chat, stream_all,
};

fn fixed(attempts: u32, base_ms: u64) -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(attempts)
        .base_delay(ms(base_ms))
        .max_delay(secs(20))
        .jitter(Jitter::None)
        .build()
        .unwrap()
}

/// `attempts` attempts, full jitter from a 1 s base drawn from `seed`, no budget.
fn jittered(attempts: u32, seed: u64) -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(attempts)
        .base_delay(secs(1))
        .seed(seed)
        .no_budget()
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn retries_retryable_kinds_and_records_every_attempt() {
    let m = scripted("a")
        .fail(ErrorKind::ServerError)
        .fail(ErrorKind::Network)
        .reply("done")
        .with_retry(fixed(3, 100));
    let start = Instant::now();
    let resp = chat_ok(&m).await;
    assert_eq!(resp.text(), "done");
    assert_eq!(
        start.elapsed(),
        ms(100 + 200),
        "exponential backoff without jitter"
    );
    let kinds = attempt_kinds(&resp);
    assert_eq!(
        kinds,
        vec![Some(ErrorKind::ServerError), Some(ErrorKind::Network), None]
    );
    assert!(resp.provenance.attempts.iter().all(|a| &*a.provider == "a"));
}

#[tokio::test(start_paused = true)]
async fn final_failure_carries_all_attempts() {
    let m = scripted("a")
        .fail(ErrorKind::Timeout)
        .with_retry(fixed(3, 10));
    let err = chat_err(&m).await;
    assert_eq!(err.kind(), ErrorKind::Timeout);
    assert_eq!(err.attempts().len(), 3);
    assert_eq!(m.get_ref().calls(), 3);
}

#[tokio::test(start_paused = true)]
async fn fallback_and_fail_fast_kinds_are_not_retried() {
    for kind in [
        ErrorKind::QuotaExhausted,
        ErrorKind::Auth,
        ErrorKind::ContentFiltered,
        ErrorKind::Overloaded,
    ] {
        let m = scripted("a").fail(kind).with_retry(fixed(5, 10));
        let err = chat_err(&m).await;
        assert_eq!((err.kind(), m.get_ref().calls()), (kind, 1), "{kind}");
        assert_eq!(err.attempts().len(), 1);
    }
}

/// A link that answers a 429 asking for `after` first, then "ok", behind `policy`.
fn slowed_down_once(after: Duration, policy: RetryPolicy) -> Retry<ScriptedModel> {
    let limited = Error::new(ErrorKind::RateLimited, "slow down").with_retry_after(after);
    scripted("a")
        .fail_with(limited, ms(0))
        .reply("ok")
        .with_retry(policy)
}

#[tokio::test(start_paused = true)]
async fn honours_the_vendors_retry_after() {
    let m = slowed_down_once(secs(3), fixed(3, 100));
    let start = Instant::now();
    chat_within(&m, secs(10)).await.unwrap();
    assert_eq!(start.elapsed(), secs(3));
}

#[tokio::test(start_paused = true)]
async fn retry_after_beyond_the_deadline_returns_at_once_without_sleeping() {
    let m = slowed_down_once(secs(5), RetryPolicy::default());
    let start = Instant::now();
    let err = chat_within(&m, secs(2)).await.unwrap_err();
    assert_eq!(start.elapsed(), ms(0), "no fake time passed: nothing slept");
    assert_eq!(err.kind(), ErrorKind::RateLimited);
    assert_eq!(err.retry_after(), Some(secs(5)));
    assert_eq!(m.get_ref().calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn backoff_beyond_the_deadline_returns_at_once_too() {
    let m = scripted("a")
        .fail(ErrorKind::ServerError)
        .with_retry(fixed(3, 1000));
    let start = Instant::now();
    let err = chat_within(&m, ms(500)).await.unwrap_err();
    assert_eq!(
        (start.elapsed(), err.kind()),
        (ms(0), ErrorKind::ServerError)
    );
}

#[tokio::test(start_paused = true)]
async fn a_vendor_retry_after_above_the_cap_falls_back() {
    let limited =
        Error::new(ErrorKind::RateLimited, "come back in 2 min").with_retry_after(secs(120));
    let m = scripted("a").fail_with(limited, ms(0)).with_retry(
        RetryPolicy::builder()
            .max_retry_after(secs(60))
            .build()
            .unwrap(),
    );
    let start = Instant::now();
    assert!(m.chat(&req(), &Context::new()).await.is_err());
    assert_eq!(start.elapsed(), ms(0));
}

#[tokio::test(start_paused = true)]
async fn not_retry_safe_requests_are_never_resent_after_an_ambiguous_failure() {
    let ctx = Context::new().with_retry_safe(false);
    for kind in [ErrorKind::Timeout, ErrorKind::Network] {
        let m = scripted("a")
            .fail(kind)
            .reply("ok")
            .with_retry(fixed(3, 10));
        assert_eq!(m.chat(&req(), &ctx).await.unwrap_err().kind(), kind);
        assert_eq!(m.get_ref().calls(), 1);
    }
    // A 500 is not ambiguous about whether the vendor acted: it is retried.
    let m = scripted("a")
        .fail(ErrorKind::ServerError)
        .reply("ok")
        .with_retry(fixed(3, 10));
    assert!(m.chat(&req(), &ctx).await.is_ok());
}

#[tokio::test(start_paused = true)]
async fn cancellation_stops_a_backoff_sleep() {
    let m = Arc::new(
        scripted("a")
            .fail(ErrorKind::ServerError)
            .with_retry(fixed(3, 10_000)),
    );
    let token = CancellationToken::new();
    let ctx = Context::new().with_cancellation(token.clone());
    let start = Instant::now();
    let call = spawn_chat(&m, ctx);
    tokio::time::sleep(ms(100)).await;
    token.cancel();
    let err = call.await.unwrap().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled);
    assert_eq!(start.elapsed(), ms(100));
    assert_eq!(err.attempts().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn seeded_jitter_is_reproducible_and_full_jitter_stays_under_the_ceiling() {
    async fn elapsed(seed: u64) -> std::time::Duration {
        let policy = jittered(4, seed);
        let m = scripted("a")
            .fail(ErrorKind::ServerError)
            .with_retry(policy);
        let start = Instant::now();
        let _ = m.chat(&req(), &Context::new()).await;
        start.elapsed()
    }
    let a = elapsed(42).await;
    assert_eq!(a, elapsed(42).await);
    assert_ne!(a, elapsed(43).await);
    assert!(a <= secs(1 + 2 + 4));
}

#[tokio::test(start_paused = true)]
async fn the_retry_budget_caps_retries_across_calls() {
    let policy = RetryPolicy::builder()
        .max_attempts(3)
        .base_delay(ms(10))
        .budget(RetryBudget {
            ratio: 0.0,
            min_retries: 2,
            window: secs(10),
        })
        .build()
        .unwrap();
    let m = scripted("a")
        .fail(ErrorKind::ServerError)
        .with_retry(policy);
    assert_eq!(chat_err(&m).await.attempts().len(), 3);
    assert_eq!(chat_err(&m).await.attempts().len(), 1);
    tokio::time::sleep(secs(11)).await;
    assert_eq!(chat_err(&m).await.attempts().len(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_stream_is_retried_until_its_first_content() {
    let early_429 = vec![(
        ms(0),
        StreamItem::Error(
            Error::new(ErrorKind::RateLimited, "429 as the first event").with_retry_after(ms(200)),
        ),
    )];
    let m = scripted("a")
        .stream_items(early_429)
        .stream_items(text_stream(&["Hel", "lo"], ms(5)))
        .with_retry(fixed(3, 10));
    let events: Vec<_> = open_stream(&m).await.map(|e| e.unwrap()).collect().await;
    let StreamEvent::Provenance { provenance } = &events[0] else {
        panic!("retries announce their attempts first: {events:?}")
    };
    assert_eq!(provenance.attempts.len(), 2);
    assert_eq!(
        provenance.attempts[0].error_kind,
        Some(ErrorKind::RateLimited)
    );
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Hello");
}

#[tokio::test(start_paused = true)]
async fn a_failure_after_the_first_content_is_not_retried() {
    let mid = vec![
        (ms(0), StreamItem::Event(StreamEvent::text("partial"))),
        (
            ms(0),
            StreamItem::Error(Error::new(ErrorKind::ServerError, "mid-stream")),
        ),
    ];
    let m = scripted("a")
        .stream_items(mid)
        .reply("never")
        .with_retry(fixed(3, 10));
    let items = stream_all(&m).await;
    assert_eq!(last_err_kind(&items), ErrorKind::ServerError);
    assert_eq!(m.get_ref().calls(), 1);
}

#[test]
fn invalid_settings_are_named() {
    assert_eq!(
        RetryPolicy::builder()
            .max_attempts(0)
            .build()
            .unwrap_err()
            .setting(),
        "max_attempts"
    );
    assert_eq!(
        RetryPolicy::builder()
            .base_delay(ms(0))
            .build()
            .unwrap_err()
            .setting(),
        "base_delay"
    );
    let e = RetryPolicy::builder()
        .budget(RetryBudget {
            ratio: f64::NAN,
            ..RetryBudget::default()
        })
        .build()
        .unwrap_err();
    assert_eq!(e.setting(), "budget.ratio");
}

#[tokio::test(start_paused = true)]
async fn attempts_share_one_deadline_instead_of_adding_up() {
    // Three attempts at a hanging link, each allowed 10 s, under a 2 s deadline: 2 s in total.
    let m = scripted("a")
        .hang()
        .with_timeout(
            ripcord_resilience::TimeoutPolicy::builder()
                .attempt(secs(10))
                .build()
                .unwrap(),
        )
        .with_retry(RetryPolicy::default());
    let start = Instant::now();
    let err = chat_within(&m, secs(2)).await.unwrap_err();
    assert_eq!(start.elapsed(), secs(2));
    assert_eq!(err.kind(), ErrorKind::DeadlineExceeded);
    assert_eq!(m.get_ref().get_ref().calls(), 1);
}

#[test]
fn defaults_are_what_production_wants() {
    let d = RetryPolicy::default();
    assert_eq!(d.max_attempts(), 3);
    let b = d.backoff();
    assert_eq!((b.base, b.cap, b.jitter), (secs(1), secs(20), Jitter::Full));
}

#[tokio::test(start_paused = true)]
async fn a_rate_limit_without_retry_after_never_waits_less_than_half_the_base_delay() {
    // Full jitter from 0: over many seeds some draw lands near zero without the floor.
    for seed in 0..64 {
        let policy = jittered(3, seed);
        let m = scripted("a")
            .fail(ErrorKind::RateLimited)
            .with_retry(policy);
        let start = Instant::now();
        let err = chat_err(&m).await;
        assert_eq!(
            (err.kind(), m.get_ref().calls()),
            (ErrorKind::RateLimited, 3)
        );
        // Two waits, each at least 500 ms.
        assert!(
            start.elapsed() >= ms(1000),
            "seed {seed}: {:?}",
            start.elapsed()
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_silent_link_falls_through_at_once_unless_retry_on_says_otherwise() {
    for phase in [TimeoutPhase::FirstByte, TimeoutPhase::Connect] {
        let silent = || Error::timeout(phase, "no response byte");
        let m = scripted("a")
            .fail_with(silent(), secs(30))
            .reply("late")
            .with_retry(fixed(3, 100));
        let err = chat_err(&m).await;
        assert_eq!((err.timeout_phase(), m.get_ref().calls()), (Some(phase), 1));
        // Opting in retries it.
        let on = RetryOn::parse(["silent"]).unwrap();
        let policy = RetryPolicy::builder()
            .max_attempts(3)
            .base_delay(ms(100))
            .jitter(Jitter::None)
            .retry_on(on)
            .build()
            .unwrap();
        let m = scripted("a")
            .fail_with(silent(), secs(30))
            .reply("late")
            .with_retry(policy);
        assert_eq!(chat_ok(&m).await.text(), "late");
        assert_eq!(m.get_ref().calls(), 2);
    }
    // A slow first token after the headers is still retried by default.
    let m = scripted("a")
        .fail_with(Error::timeout(TimeoutPhase::FirstToken, "slow"), ms(0))
        .reply("ok")
        .with_retry(fixed(3, 100));
    assert_eq!(chat_ok(&m).await.text(), "ok");
}

#[tokio::test(start_paused = true)]
async fn retry_on_can_retry_overloaded_and_stop_retrying_rate_limits() {
    let on = RetryOn::parse(["overloaded"]).unwrap();
    let policy = |on| {
        RetryPolicy::builder()
            .max_attempts(3)
            .base_delay(ms(10))
            .retry_on(on)
            .build()
            .unwrap()
    };
    let m = scripted("a")
        .fail(ErrorKind::Overloaded)
        .reply("ok")
        .with_retry(policy(on));
    assert_eq!(chat_ok(&m).await.text(), "ok");
    let m = scripted("a")
        .fail(ErrorKind::RateLimited)
        .reply("ok")
        .with_retry(policy(on));
    let err = chat_err(&m).await;
    assert_eq!(
        (err.kind(), m.get_ref().calls()),
        (ErrorKind::RateLimited, 1)
    );
}
