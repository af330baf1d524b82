//! Composed stacks: deadlines, chains and the extension trait.

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use ripcord_core::testing::ScriptedModel;
use ripcord_core::{Chain, ChatModel, ChatRequest, Context, Error, ErrorKind};
use ripcord_resilience::*;
use tokio::time::Instant;

use crate::support::{Honest, attempt_kinds, breaker, chat_ok, ms, scripted, secs, tripping};

#[derive(Debug, Clone)]
enum Step {
    Reply(u64),
    Fail(ErrorKind, u64, Option<u64>),
    Hang,
}

#[derive(Debug, Clone, Copy)]
enum Layer {
    Retry,
    Breaker,
    RateLimit,
    Bulkhead,
    Budget,
    Timeout,
    Validate,
    Health,
    Cache,
    Hedge,
}

fn step() -> impl Strategy<Value = Step> {
    let kinds = prop::sample::select(vec![
        ErrorKind::RateLimited,
        ErrorKind::ServerError,
        ErrorKind::Timeout,
        ErrorKind::Network,
        ErrorKind::Overloaded,
        ErrorKind::QuotaExhausted,
        ErrorKind::InvalidResponse,
    ]);
    prop_oneof![
        (0u64..3_000).prop_map(Step::Reply),
        (kinds, 0u64..2_000, prop::option::of(0u64..6_000))
            .prop_map(|(k, d, ra)| Step::Fail(k, d, ra)),
        Just(Step::Hang),
    ]
}

fn policy() -> impl Strategy<Value = Layer> {
    prop::sample::select(vec![
        Layer::Retry,
        Layer::Breaker,
        Layer::RateLimit,
        Layer::Bulkhead,
        Layer::Budget,
        Layer::Timeout,
        Layer::Validate,
        Layer::Health,
        Layer::Cache,
        Layer::Hedge,
    ])
}

fn model(name: &str, steps: &[Step]) -> ScriptedModel {
    steps.iter().fold(ScriptedModel::new(name), |m, s| match s {
        Step::Reply(d) => m.reply_after("{\"ok\": true}", ms(*d)),
        Step::Fail(kind, d, ra) => {
            let mut e = Error::new(*kind, "scripted");
            if let Some(ra) = ra {
                e = e.with_retry_after(ms(*ra));
            }
            m.fail_with(e, ms(*d))
        }
        Step::Hang => m.hang(),
    })
}

fn stack(steps: &[Step], hedge_steps: &[Step], layers: &[Layer]) -> Box<dyn ChatModel> {
    let mut m: Box<dyn ChatModel> = Box::new(Honest(model("primary", steps)));
    for l in layers {
        m = match l {
            Layer::Retry => Box::new(
                m.with_retry(
                    RetryPolicy::builder()
                        .base_delay(ms(200))
                        .seed(3)
                        .build()
                        .unwrap(),
                ),
            ),
            Layer::Breaker => Box::new(
                m.with_breaker(tripping(2, ms(300)).probe_timeout(secs(1)).build().unwrap()),
            ),
            Layer::RateLimit => Box::new(
                m.with_rate_limit(
                    RateLimitPolicy::builder()
                        .rpm(30)
                        .rpm_burst(1)
                        .tpm(5_000)
                        .build()
                        .unwrap(),
                ),
            ),
            Layer::Bulkhead => Box::new(
                m.with_bulkhead(BulkheadPolicy::builder().max_in_flight(1).build().unwrap()),
            ),
            Layer::Budget => Box::new(
                m.with_budget(
                    BudgetPolicy::builder()
                        .tokens_per_window(20_000)
                        .budget_anonymous(true)
                        .build()
                        .unwrap(),
                ),
            ),
            Layer::Timeout => Box::new(
                m.with_timeout(
                    TimeoutPolicy::builder()
                        .attempt(ms(1_500))
                        .first_token(ms(1_000))
                        .build()
                        .unwrap(),
                ),
            ),
            Layer::Validate => Box::new(m.with_validation(JsonValidator)),
            Layer::Health => Box::new(m.with_health(HealthPolicy::default())),
            Layer::Cache => Box::new(m.with_cache(CachePolicy::default())),
            Layer::Hedge => Box::new(
                m.with_hedge(
                    Honest(model("backup", hedge_steps)),
                    HedgePolicy::builder()
                        .delay(HedgeDelay::Fixed(ms(400)))
                        .build()
                        .unwrap(),
                ),
            ),
        };
    }
    m
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// No composed stack returns after the deadline (plus 1 ms), however its layers are
    /// ordered and whatever the model does, with several callers at once.
    #[test]
    fn no_composed_stack_returns_after_the_deadline(
        steps in prop::collection::vec(step(), 1..6),
        hedge_steps in prop::collection::vec(step(), 1..3),
        layers in prop::collection::vec(policy(), 0..7),
        deadlines_ms in prop::collection::vec(1u64..6_000, 1..4),
        stream in any::<bool>(),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let late = rt.block_on(async {
            let m: Arc<dyn ChatModel> = Arc::from(stack(&steps, &hedge_steps, &layers));
            let mut worst = Duration::ZERO;
            for _round in 0..2 {
                let start = Instant::now();
                // Callers with different deadlines share the stack: a queued caller must leave
                // at its own deadline even when the caller ahead of it may take longer.
                let calls: Vec<_> = deadlines_ms
                    .iter()
                    .map(|&d| {
                        let deadline = start + ms(d);
                        let m = m.clone();
                        tokio::spawn(async move {
                            let ctx = Context::new().with_deadline(deadline);
                            let req = ChatRequest::user("Give me JSON");
                            if stream {
                                // Opening the stream must respect the deadline too.
                                let _ = m.stream(&req, &ctx).await;
                            } else {
                                let _ = m.chat(&req, &ctx).await;
                            }
                            Instant::now().saturating_duration_since(deadline)
                        })
                    })
                    .collect();
                for c in futures::future::join_all(calls).await {
                    worst = worst.max(c.unwrap());
                }
            }
            worst
        });
        prop_assert!(late <= ms(1), "returned {late:?} after the deadline; layers {layers:?}, steps {steps:?}");
    }
}

/// A chain of `primary`, then a backup that answers "backup", under a 5 s deadline.
fn with_backup(primary: Arc<dyn ChatModel>) -> Chain {
    Chain::builder()
        .link_arc(primary)
        .link(scripted("backup").reply("backup"))
        .deadline(secs(5))
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_chain_skips_an_open_breaker_and_waits_for_re_admission_when_all_cool_down() {
    let breaker = || breaker(1, ms(500));
    let primary = Arc::new(
        scripted("primary")
            .fail(ErrorKind::ServerError)
            .reply("primary is back")
            .with_breaker(breaker()),
    );
    let chain = with_backup(primary.clone());
    assert_eq!(chat_ok(&chain).await.served_by(), "backup");
    // The breaker is open: the chain skips the primary without calling it.
    let resp = chat_ok(&chain).await;
    assert_eq!(resp.served_by(), "backup");
    assert_eq!(
        resp.provenance.attempts[0].error_kind,
        Some(ErrorKind::CircuitOpen)
    );
    assert_eq!(primary.get_ref().calls(), 1);

    // Alone in a chain, a cooling-down link is waited for when the deadline allows.
    let lone = Chain::builder()
        .link_arc(primary.clone())
        .deadline(secs(5))
        .build()
        .unwrap();
    let start = Instant::now();
    let resp = chat_ok(&lone).await;
    assert_eq!(resp.text(), "primary is back");
    assert!(start.elapsed() <= ms(500), "{:?}", start.elapsed());
}

#[tokio::test(start_paused = true)]
async fn a_local_rate_limit_sends_the_chain_to_the_next_link() {
    let limited =
        scripted("primary").with_rate_limit(RateLimitPolicy::builder().rpm(1).build().unwrap());
    let chain = Chain::builder()
        .link(limited)
        .link(scripted("backup").reply("backup"))
        .deadline(secs(2))
        .build()
        .unwrap();
    assert_eq!(chat_ok(&chain).await.served_by(), "primary");
    let start = Instant::now();
    let resp = chat_ok(&chain).await;
    assert_eq!((resp.served_by(), start.elapsed()), ("backup", ms(0)));
    assert_eq!(
        resp.provenance.attempts[0].error_kind,
        Some(ErrorKind::LocalRateLimited)
    );
}

#[tokio::test(start_paused = true)]
async fn the_full_stack_recovers_and_reports_every_attempt_to_the_chain() {
    let primary = scripted("primary")
        .fail(ErrorKind::ServerError)
        .reply("{\"answer\": 42}")
        .with_validation(JsonValidator)
        .with_timeout(TimeoutPolicy::default())
        .with_rate_limit(
            RateLimitPolicy::builder()
                .rpm(100)
                .tpm(100_000)
                .build()
                .unwrap(),
        )
        .with_retry(
            RetryPolicy::builder()
                .base_delay(ms(100))
                .seed(9)
                .build()
                .unwrap(),
        )
        .with_bulkhead(BulkheadPolicy::default())
        .with_budget(BudgetPolicy::default())
        .with_breaker(BreakerPolicy::default())
        .with_health(HealthPolicy::default())
        .with_cache(CachePolicy::default());
    let chain = Chain::builder().link(primary).build().unwrap();
    let json = ChatRequest::user("?").with_response_format(ripcord_core::ResponseFormat::Json);
    let resp = chain
        .chat(&json, &Context::new().with_tenant("acme"))
        .await
        .unwrap();
    assert_eq!(resp.served_by(), "primary");
    assert!(!resp.degraded());
    let kinds = attempt_kinds(&resp);
    assert_eq!(kinds, vec![Some(ErrorKind::ServerError), None]);
}

#[test]
fn decorated_models_are_object_safe_and_forward_identity() {
    let m = scripted("openai")
        .with_retry(RetryPolicy::default())
        .with_breaker(BreakerPolicy::default())
        .with_rate_limit(RateLimitPolicy::default())
        .with_bulkhead(BulkheadPolicy::default())
        .with_timeout(TimeoutPolicy::default())
        .with_budget(BudgetPolicy::default())
        .with_validation(JsonValidator)
        .with_cache(CachePolicy::default())
        .with_health(HealthPolicy::default())
        .with_hedge(scripted("backup"), HedgePolicy::default());
    let boxed: Box<dyn ChatModel> = Box::new(m);
    assert_eq!(&*boxed.id().name, "openai");
    assert!(boxed.capabilities().json_mode);
    let _: Arc<dyn ChatModel> = Arc::from(boxed);
}

#[test]
fn layers_unwrap_to_the_inner_model() {
    let mut m = scripted("a")
        .with_retry(RetryPolicy::default())
        .with_breaker(BreakerPolicy::default());
    assert_eq!(m.get_mut().policy().max_attempts(), 3);
    let inner: ScriptedModel = m.into_inner().into_inner();
    assert_eq!(inner.calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_link_skipped_for_its_open_breaker_still_counts_in_its_health() {
    let breaker = breaker(1, secs(60));
    let primary = Arc::new(
        scripted("primary")
            .fail(ErrorKind::ServerError)
            .with_breaker(breaker)
            .with_health(HealthPolicy::default()),
    );
    let health = primary.handle();
    let chain = with_backup(primary.clone());
    for _ in 0..3 {
        let r = chat_ok(&chain).await;
        assert_eq!(r.served_by(), "backup");
    }
    // One call reached the primary; the two refusals up front are booked as refused calls,
    // as they were when the chain called through the breaker (ripcord's own refusals say
    // nothing about the vendor, so they are not failures).
    assert_eq!(primary.get_ref().get_ref().calls(), 1);
    let snap = health.snapshot();
    assert_eq!((snap.calls, snap.failures), (3, 1));
    assert_eq!(snap.last_error, Some(ErrorKind::ServerError));
    assert_eq!(snap.breaker, None);
}
