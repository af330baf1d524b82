//! Rate limits (reserved up front, reconciled after) and per-tenant budgets.

use std::sync::Arc;

use ripcord_core::{ChatModel, ChatRequest, Context, Error, ErrorKind, Usage};
use ripcord_resilience::{BudgetPolicy, ChatModelExt, RateLimitPolicy};
use tokio::time::Instant;

use crate::support::{
    Recorder, chat_err, chat_ok, chat_within, ms, req, scripted, secs, time_calls, tpm_waiting,
};

/// 60 requests a minute, no burst: one a second.
fn one_per_second() -> RateLimitPolicy {
    RateLimitPolicy::builder()
        .rpm(60)
        .rpm_burst(1)
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn rpm_waits_when_the_deadline_allows() {
    let m = scripted("a").with_rate_limit(one_per_second());
    assert_eq!(
        time_calls(&m, 3, &req(), secs(5)).await,
        secs(2),
        "one request per second"
    );
    assert_eq!(m.get_ref().calls(), 3);
}

#[tokio::test(start_paused = true)]
async fn rpm_refuses_without_calling_when_the_deadline_is_too_short() {
    let m = scripted("a").with_rate_limit(one_per_second());
    chat_ok(&m).await;
    let start = Instant::now();
    let err = chat_within(&m, ms(400)).await.unwrap_err();
    assert_eq!(start.elapsed(), ms(0));
    assert_eq!(err.kind(), ErrorKind::LocalRateLimited);
    assert_eq!(err.retry_after(), Some(secs(1)));
    assert_eq!(m.get_ref().calls(), 1);
    assert_eq!(m.snapshot().refused, 1);
}

#[tokio::test(start_paused = true)]
async fn max_wait_bounds_waiting_without_a_deadline() {
    let policy = RateLimitPolicy::builder()
        .rpm(1)
        .max_wait(secs(5))
        .build()
        .unwrap();
    let m = scripted("a").with_rate_limit(policy);
    chat_ok(&m).await;
    let err = chat_err(&m).await;
    assert_eq!(err.kind(), ErrorKind::LocalRateLimited);
    assert_eq!(err.retry_after(), Some(secs(60)));
}

/// The request reserves its estimate plus max_tokens (300); the model reports 9 tokens.
fn small_request() -> ChatRequest {
    ChatRequest::user("Why is the sky blue?").with_max_tokens(300)
}

#[tokio::test(start_paused = true)]
async fn tpm_reserves_up_front_and_reconciles_with_reported_usage() {
    let reported = Usage::new(8, 1);
    let tpm = || RateLimitPolicy::builder().tpm(1000).build().unwrap();

    // Reconciled: each call is charged what the vendor reported, so 20 calls fit in 1000 TPM.
    let m = Recorder::new("a", ms(0))
        .with_usage(reported)
        .with_rate_limit(tpm());
    assert_eq!(
        time_calls(&m, 20, &small_request(), secs(1)).await,
        ms(0),
        "no call waited"
    );
    let snap = m.snapshot();
    assert_eq!(snap.tokens_last_minute, 20 * 9);
    assert!(
        snap.balance < 0,
        "the last reservation is still a credit: {}",
        snap.balance
    );

    // Without the credit (usage as large as the reservation), the fourth call must wait.
    let estimate = u64::from(ripcord_core::tokens::estimate_request(&small_request()));
    let full = Usage::new(estimate, 300);
    let m = Recorder::new("b", ms(0))
        .with_usage(full)
        .with_rate_limit(tpm());
    for _ in 0..3 {
        m.chat(&small_request(), &Context::new().with_timeout(secs(1)))
            .await
            .unwrap();
    }
    let err = m
        .chat(&small_request(), &Context::new().with_timeout(secs(1)))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LocalRateLimited);
    assert!(err.retry_after().unwrap() > secs(1));
}

#[tokio::test(start_paused = true)]
async fn usage_beyond_the_reservation_becomes_debt() {
    // Reserves ~308, reports 900: the 592 owed are charged to the next call, which waits.
    let m = Recorder::new("a", ms(0))
        .with_usage(Usage::new(600, 300))
        .with_rate_limit(tpm_waiting(1000, secs(60)));
    m.chat(&small_request(), &Context::new()).await.unwrap();
    assert!(m.snapshot().balance > 500);
    let start = Instant::now();
    m.chat(&small_request(), &Context::new().with_timeout(secs(60)))
        .await
        .unwrap();
    assert!(
        start.elapsed() > secs(10),
        "waited for the debt: {:?}",
        start.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn a_request_larger_than_the_burst_still_gets_through() {
    let m = scripted("a").with_rate_limit(RateLimitPolicy::builder().tpm(100).build().unwrap());
    let huge = ChatRequest::user("x").with_max_tokens(5000);
    m.chat(&huge, &Context::new()).await.unwrap();
    assert_eq!(m.get_ref().calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_vendor_429_with_retry_after_pauses_the_link() {
    let limited = Error::new(ErrorKind::RateLimited, "slow down").with_retry_after(secs(2));
    let m = scripted("a")
        .fail_with(limited, ms(0))
        .reply("ok")
        .with_rate_limit(RateLimitPolicy::builder().rpm(1000).build().unwrap());
    assert_eq!(chat_err(&m).await.kind(), ErrorKind::RateLimited);
    let snap = m.snapshot();
    assert_eq!(snap.paused_remaining_ms, Some(2000.0));
    // Refused locally while paused: the vendor is not hit again.
    let err = chat_within(&m, secs(1)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LocalRateLimited);
    assert_eq!(err.retry_after(), Some(secs(2)));
    assert_eq!(m.get_ref().calls(), 1);
    // With time to spare, the call waits out the pause.
    let start = Instant::now();
    chat_within(&m, secs(5)).await.unwrap();
    assert_eq!(start.elapsed(), secs(2));
}

#[test]
fn rate_limit_settings_are_validated() {
    assert_eq!(
        RateLimitPolicy::builder()
            .rpm(0)
            .build()
            .unwrap_err()
            .setting(),
        "rpm"
    );
    assert_eq!(
        RateLimitPolicy::builder()
            .tpm_burst(5)
            .build()
            .unwrap_err()
            .setting(),
        "tpm_burst"
    );
}

fn budget(limit: u64) -> BudgetPolicy {
    BudgetPolicy::builder()
        .tokens_per_window(limit)
        .window(secs(60))
        .tenant("vip", 100_000)
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn tenant_budgets_refuse_per_tenant_and_refill_with_the_window() {
    let m = Recorder::new("a", ms(0))
        .with_usage(Usage::new(200, 200))
        .with_budget(budget(1000));
    let acme = Context::new().with_tenant("acme");
    let req = ChatRequest::user("hi").with_max_tokens(400);
    m.chat(&req, &acme).await.unwrap();
    m.chat(&req, &acme).await.unwrap();
    assert_eq!(
        m.used("acme"),
        800,
        "reservations were replaced by reported usage"
    );
    let err = m.chat(&req, &acme).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BudgetExhausted);
    let wait = err.retry_after().unwrap();
    assert!(wait > secs(0) && wait <= secs(60), "{wait:?}");
    // Other tenants, the big tenant and calls without a tenant are unaffected.
    m.chat(&req, &Context::new().with_tenant("globex"))
        .await
        .unwrap();
    m.chat(&req, &Context::new().with_tenant("vip"))
        .await
        .unwrap();
    m.chat(&req, &Context::new()).await.unwrap();
    assert_eq!(m.get_ref().seen().len(), 5);
    tokio::time::sleep(wait).await;
    m.chat(&req, &acme).await.unwrap();
    assert_eq!(m.refused(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_failed_call_gives_its_reservation_back() {
    let m = scripted("a")
        .fail(ErrorKind::ServerError)
        .with_budget(budget(1000));
    let ctx = Context::new().with_tenant("acme");
    for _ in 0..5 {
        let _ = m
            .chat(&ChatRequest::user("hi").with_max_tokens(900), &ctx)
            .await;
    }
    assert_eq!(m.used("acme"), 0);
    assert_eq!(m.get_ref().calls(), 5);
    let err = m
        .chat(&ChatRequest::user("hi").with_max_tokens(5000), &ctx)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BudgetExhausted);
    assert_eq!(err.retry_after(), None, "it can never fit");
}

#[tokio::test(start_paused = true)]
async fn budgets_are_shared_by_concurrent_calls() {
    let m = Arc::new(
        Recorder::new("a", ms(100))
            .with_usage(Usage::new(50, 50))
            .with_budget(budget(1000)),
    );
    let calls: Vec<_> = (0..5)
        .map(|_| {
            let m = m.clone();
            tokio::spawn(async move {
                let ctx = Context::new().with_tenant("acme");
                m.chat(&ChatRequest::user("hi").with_max_tokens(300), &ctx)
                    .await
            })
        })
        .collect();
    let ok = futures::future::join_all(calls)
        .await
        .into_iter()
        .filter(|r| r.as_ref().unwrap().is_ok())
        .count();
    assert_eq!(
        ok, 3,
        "three reservations of ~308 fit in 1000 while they are in flight"
    );
}
