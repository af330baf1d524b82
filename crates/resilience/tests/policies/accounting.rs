//! What a call is charged: rate limits (TPM settlement, failed calls, 429 pauses, RPM after TPM,
//! FIFO waiters) and budgets. All on paused time.

use std::sync::Arc;

use ripcord_core::tokens::{estimate_request, estimate_text};
use ripcord_core::{ChatModel, ChatRequest, Context, Error, ErrorKind, TimeoutPhase, Usage};
use ripcord_resilience::{ChatModelExt, RateLimitPolicy};

use crate::support::{Recorder, ms, scripted, secs, tpm_waiting};

fn ask(text: &str, max_tokens: u32) -> ChatRequest {
    ChatRequest::user(text).with_max_tokens(max_tokens)
}

#[tokio::test(start_paused = true)]
async fn tpm_settles_with_the_estimate_when_the_vendor_reports_no_usage() {
    let m = Recorder::new("a", ms(0))
        .with_usage(Usage::default())
        .with_rate_limit(RateLimitPolicy::builder().tpm(10_000).build().unwrap());
    let r = ask("Why is the sky blue?", 300);
    let resp = m.chat(&r, &Context::new()).await.unwrap();
    let prompt = i64::from(estimate_request(&r));
    let generated = i64::from(estimate_text(resp.text()));
    let snap = m.snapshot();
    assert_eq!(snap.tokens_last_minute, prompt + generated);
    assert_eq!(snap.balance, prompt + generated - (prompt + 300));
}

#[tokio::test(start_paused = true)]
async fn a_failed_call_is_charged_the_prompt_only_when_the_vendor_may_have_processed_it() {
    let r = ask("Why is the sky blue?", 300);
    let prompt = i64::from(estimate_request(&r));
    let limit = || RateLimitPolicy::builder().tpm(10_000).build().unwrap();

    let m = scripted("a")
        .fail_with(Error::timeout(TimeoutPhase::FirstToken, "slow"), ms(0))
        .with_rate_limit(limit());
    m.chat(&r, &Context::new()).await.unwrap_err();
    assert_eq!(m.snapshot().tokens_last_minute, prompt);

    let m = scripted("b")
        .fail(ErrorKind::Overloaded)
        .with_rate_limit(limit());
    m.chat(&r, &Context::new()).await.unwrap_err();
    assert_eq!(m.snapshot().tokens_last_minute, 0);
    assert_eq!(
        m.snapshot().balance,
        -(prompt + 300),
        "the whole reservation is credited back"
    );
}

#[tokio::test(start_paused = true)]
async fn a_vendor_429_without_retry_after_pauses_the_link_for_the_default() {
    let m = scripted("a")
        .fail(ErrorKind::RateLimited)
        .reply("ok")
        .with_rate_limit(
            RateLimitPolicy::builder()
                .default_pause(ms(1500))
                .build()
                .unwrap(),
        );
    m.chat(&ask("hi", 10), &Context::new()).await.unwrap_err();
    assert_eq!(m.snapshot().paused_remaining_ms, Some(1500.0));
    let e = m
        .chat(&ask("hi", 10), &Context::new().with_timeout(secs(1)))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LocalRateLimited);
    assert_eq!(m.get_ref().calls(), 1, "the vendor was not hit again");
}

#[tokio::test(start_paused = true)]
async fn the_rpm_cell_is_taken_only_after_the_tokens_fit() {
    let m = Recorder::new("a", ms(0))
        .with_usage(Usage::new(5, 50))
        .with_rate_limit(RateLimitPolicy::builder().rpm(2).tpm(100).build().unwrap());
    m.chat(&ask("one", 50), &Context::new()).await.unwrap();
    // Too many tokens for what is left: refused for TPM, without spending a request.
    let e = m
        .chat(&ask("big", 95), &Context::new().with_timeout(secs(1)))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LocalRateLimited);
    assert!(e.message().contains("tokens-per-minute"), "{e}");
    // The second request cell is still there.
    m.chat(&ask("two", 10), &Context::new().with_timeout(secs(1)))
        .await
        .unwrap();
    assert_eq!(m.get_ref().seen(), ["one", "two"]);
}

#[tokio::test(start_paused = true)]
async fn waiters_are_served_first_come_first_served_so_large_requests_do_not_starve() {
    let m = Arc::new(
        Recorder::new("a", ms(0))
            .with_usage(Usage::new(10, 900))
            .with_rate_limit(tpm_waiting(1000, secs(120))),
    );
    m.chat(&ask("big1", 900), &Context::new()).await.unwrap();
    let big2 = {
        let m = m.clone();
        tokio::spawn(async move { m.chat(&ask("big2", 900), &Context::new()).await })
    };
    tokio::time::sleep(ms(1)).await;
    let small = {
        let m = m.clone();
        tokio::spawn(async move { m.chat(&ask("small", 20), &Context::new()).await })
    };
    small.await.unwrap().unwrap();
    big2.await.unwrap().unwrap();
    assert_eq!(m.get_ref().seen(), ["big1", "big2", "small"]);
}

fn budget() -> ripcord_resilience::BudgetPolicy {
    ripcord_resilience::BudgetPolicy::builder()
        .tokens_per_window(1_000_000)
        .window(secs(60))
        .build()
        .unwrap()
}

fn tenant() -> Context {
    Context::new().with_tenant("acme")
}

#[tokio::test(start_paused = true)]
async fn budgets_charge_the_estimate_when_usage_is_unknown_for_chat_and_streams_alike() {
    use futures::StreamExt;
    use ripcord_core::testing::{ScriptedModel, StreamItem};
    use ripcord_core::{FinishReason, StreamEvent};
    let r = ask("Tell me a story", 300);
    let prompt = u64::from(estimate_request(&r));

    let m = Recorder::new("a", ms(0))
        .with_usage(Usage::default())
        .with_budget(budget());
    let resp = m.chat(&r, &tenant()).await.unwrap();
    assert_eq!(
        m.used("acme"),
        prompt + u64::from(estimate_text(resp.text()))
    );

    // A stream that finishes without a usage report.
    let m = ScriptedModel::new("b")
        .stream_items(vec![
            (
                ms(1),
                StreamItem::Event(StreamEvent::text("Once upon a time")),
            ),
            (
                ms(1),
                StreamItem::Event(StreamEvent::finish(FinishReason::Stop)),
            ),
        ])
        .with_budget(budget());
    let s = m.stream(&r, &tenant()).await.unwrap();
    let _ = s.collect::<Vec<_>>().await;
    let story = u64::from(estimate_text("Once upon a time"));
    assert_eq!(m.used("acme"), prompt + story);

    // A stream that dies after content: the estimate of what was generated.
    let m = ScriptedModel::new("c")
        .stream_items(vec![
            (
                ms(1),
                StreamItem::Event(StreamEvent::text("Once upon a time")),
            ),
            (
                ms(1),
                StreamItem::Error(Error::new(ErrorKind::Network, "reset")),
            ),
        ])
        .with_budget(budget());
    let s = m.stream(&r, &tenant()).await.unwrap();
    let _ = s.collect::<Vec<_>>().await;
    assert_eq!(m.used("acme"), prompt + story);
}

#[tokio::test(start_paused = true)]
async fn a_restarted_stream_is_charged_the_first_links_share_too() {
    use futures::StreamExt;
    use ripcord_core::testing::{ScriptedModel, StreamItem, text_stream};
    use ripcord_core::{Chain, StreamEvent, StreamPolicy};
    let r = ask("Tell me a story", 300);
    let prompt = u64::from(estimate_request(&r));
    let chain = Chain::builder()
        .link(ScriptedModel::new("a").stream_items(vec![
            (
                ms(1),
                StreamItem::Event(StreamEvent::text("Once upon a time")),
            ),
            (
                ms(1),
                StreamItem::Error(Error::new(ErrorKind::Overloaded, "overloaded")),
            ),
        ]))
        .link(ScriptedModel::new("b").stream_items(text_stream(&["Long ", "ago"], ms(1))))
        .stream_policy(StreamPolicy::Restart)
        .build()
        .unwrap();
    let m = chain.with_budget(budget());
    let events: Vec<_> = m.stream(&r, &tenant()).await.unwrap().collect().await;
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Ok(StreamEvent::Restarted { .. })))
    );
    let first = prompt + u64::from(estimate_text("Once upon a time"));
    // b reports its usage: 5 in, 2 out (text_stream).
    assert_eq!(m.used("acme"), first + 7);
}
