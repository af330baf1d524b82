//! Breakers recover by themselves: open spells start short and grow while the vendor keeps
//! failing, reset after a success, and while a breaker is open a background liveness check
//! (the vendor's model list) re-admits a vendor that came back without waiting for traffic.
//! All on tokio's paused clock (the breaker reads it through `TokioClock`).
#![allow(clippy::unwrap_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use ripcord_core::testing::FnModel;
use ripcord_core::{
    Capabilities, ChatModel, ChatRequest, ChatResponse, Context, Error, ErrorKind, Liveness,
    ModelId, Result, async_trait,
};
use ripcord_resilience::{BreakerPolicy, BreakerState, ChatModelExt};
use tokio::time::Instant;

/// What the vendor's two endpoints share: whether it is up, and the checks it got.
#[derive(Debug, Default)]
struct Vendor {
    up: AtomicBool,
    chats: AtomicUsize,
    checks: AtomicUsize,
}

#[derive(Debug)]
struct ListModels(Arc<Vendor>);

#[async_trait]
impl Liveness for ListModels {
    async fn check(&self, _ctx: &Context) -> Result<()> {
        self.0.checks.fetch_add(1, Ordering::SeqCst);
        if self.0.up.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err(Error::new(ErrorKind::Overloaded, "models: 503"))
        }
    }
}

/// The vendor, and its chat endpoint: it answers while the vendor is up. With `liveness`, its
/// model list is the liveness check.
fn vendor(liveness: bool) -> (Arc<Vendor>, impl ChatModel) {
    let v = Arc::new(Vendor::default());
    let chats = Arc::clone(&v);
    let chat = FnModel::new(
        ModelId::new("primary", "m"),
        Capabilities::new(8_192, 1_024),
        move |_: &ChatRequest, _: &Context| {
            chats.chats.fetch_add(1, Ordering::SeqCst);
            if chats.up.load(Ordering::SeqCst) {
                Ok(ChatResponse::new("pong"))
            } else {
                Err(Error::new(ErrorKind::ServerError, "500"))
            }
        },
    );
    let chat = if liveness {
        chat.with_liveness(Arc::new(ListModels(Arc::clone(&v))))
    } else {
        chat
    };
    (v, chat)
}

fn ask() -> ChatRequest {
    ChatRequest::user("ping")
}

/// One request per second from `from` to `to` (seconds since `t0`); the outcomes.
async fn steady(m: &impl ChatModel, t0: Instant, from: u64, to: u64) -> Vec<Result<ChatResponse>> {
    let mut out = Vec::new();
    for s in from..to {
        tokio::time::sleep_until(t0 + Duration::from_secs(s)).await;
        out.push(m.chat(&ask(), &Context::new()).await);
    }
    out
}

#[tokio::test(start_paused = true)]
async fn a_vendor_back_at_t_serves_the_first_request_after_t_plus_10s_with_default_settings() {
    let (v, chat) = vendor(true);
    let link = chat.with_breaker(BreakerPolicy::default());
    let t0 = Instant::now();
    // A long outage under steady traffic: the spells grow to the 60 s cap meanwhile.
    let outage = steady(&link, t0, 0, 100).await;
    assert!(outage.iter().all(Result::is_err));
    assert_eq!(link.snapshot().state, BreakerState::Open);
    let remaining = link.snapshot().open_remaining_ms.unwrap();
    assert!(
        remaining > 10_000.0,
        "the spell alone would keep the link out past t + 10 s ({remaining} ms left)"
    );
    let chats_in_outage = v.chats.load(Ordering::SeqCst);
    // The vendor is back at t = 100 s; nobody calls for 10 s.
    v.up.store(true, Ordering::SeqCst);
    tokio::time::sleep_until(t0 + Duration::from_secs(110)).await;
    let r = link.chat(&ask(), &Context::new()).await.unwrap();
    assert_eq!(r.text(), "pong");
    assert_eq!(link.snapshot().state, BreakerState::Closed);
    // Re-admitted by the model-list check (no chat call spent on it)...
    assert!(v.checks.load(Ordering::SeqCst) >= 1);
    assert_eq!(v.chats.load(Ordering::SeqCst), chats_in_outage + 1);
    // ... and the breaker did not let the outage's traffic through: a handful of probes.
    assert!(
        chats_in_outage < 15,
        "{chats_in_outage} chat calls reached a dead vendor"
    );
}

#[tokio::test(start_paused = true)]
async fn without_the_background_probe_the_grown_spell_keeps_the_link_out() {
    // The same outage, probe off: the check above is the probe's doing, not the spells'.
    let (v, chat) = vendor(true);
    let policy = BreakerPolicy::builder()
        .background_probe(None)
        .build()
        .unwrap();
    let link = chat.with_breaker(policy);
    let t0 = Instant::now();
    steady(&link, t0, 0, 100).await;
    v.up.store(true, Ordering::SeqCst);
    tokio::time::sleep_until(t0 + Duration::from_secs(110)).await;
    let e = link.chat(&ask(), &Context::new()).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::CircuitOpen);
    assert_eq!(v.checks.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn spells_start_at_5s_double_to_60s_while_failing_and_reset_after_a_success() {
    let (v, chat) = vendor(false);
    let policy = BreakerPolicy::builder()
        .consecutive_failures(1)
        .background_probe(None)
        .build()
        .unwrap();
    let link = chat.with_breaker(policy);
    let mut spells = Vec::new();
    for _ in 0..7 {
        // Each call either trips (closed) or is the half-open probe that fails again.
        assert_eq!(
            link.chat(&ask(), &Context::new()).await.unwrap_err().kind(),
            ErrorKind::ServerError
        );
        let s = link.snapshot();
        let open = s.history.last().unwrap().open_for_ms.unwrap();
        spells.push((open / 1000.0).round() as u64);
        tokio::time::sleep(Duration::from_secs_f64(open / 1000.0)).await;
    }
    assert_eq!(spells, [5, 10, 20, 40, 60, 60, 60]);
    // A success closes it; the next trip opens for the first spell again.
    v.up.store(true, Ordering::SeqCst);
    link.chat(&ask(), &Context::new()).await.unwrap();
    assert_eq!(link.snapshot().state, BreakerState::Closed);
    v.up.store(false, Ordering::SeqCst);
    link.chat(&ask(), &Context::new()).await.unwrap_err();
    let again = link.snapshot().history.last().unwrap().open_for_ms.unwrap();
    assert_eq!(again, 5_000.0);
}

#[tokio::test(start_paused = true)]
async fn the_probe_re_admits_through_half_open_and_stops_when_dropped() {
    let (v, chat) = vendor(true);
    // A long spell, so only the background check can end it early.
    let policy = BreakerPolicy::builder()
        .consecutive_failures(1)
        .open_for(Duration::from_secs(300))
        .build()
        .unwrap();
    let link = Arc::new(chat.with_breaker(policy));
    v.up.store(false, Ordering::SeqCst);
    link.chat(&ask(), &Context::new()).await.unwrap_err();
    assert_eq!(link.snapshot().state, BreakerState::Open);
    // Down: the checks fail and change nothing.
    tokio::time::sleep(Duration::from_millis(4_900)).await;
    assert_eq!(
        v.checks.load(Ordering::SeqCst),
        0,
        "the first check waits one interval"
    );
    v.up.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(v.checks.load(Ordering::SeqCst), 1);
    // Half-open, not closed: a synthetic check never closes a breaker.
    assert_eq!(link.snapshot().state, BreakerState::HalfOpen);
    // The next call is the half-open probe (under its permit, as always) and closes it.
    assert_eq!(link.snapshot().probes_in_flight, 0);
    link.chat(&ask(), &Context::new()).await.unwrap();
    assert_eq!(link.snapshot().state, BreakerState::Closed);

    // A new outage starts a new task; dropping the breaker stops it.
    v.up.store(false, Ordering::SeqCst);
    link.chat(&ask(), &Context::new()).await.unwrap_err();
    let checks = v.checks.load(Ordering::SeqCst);
    drop(link);
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(v.checks.load(Ordering::SeqCst), checks);
}

#[tokio::test(start_paused = true)]
async fn a_link_without_a_liveness_check_is_never_probed_in_the_background() {
    let (v, chat) = vendor(false);
    let link = chat.with_breaker(
        BreakerPolicy::builder()
            .consecutive_failures(1)
            .build()
            .unwrap(),
    );
    link.chat(&ask(), &Context::new()).await.unwrap_err();
    v.up.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(link.snapshot().state, BreakerState::Open);
    tokio::time::sleep(Duration::from_secs(2)).await;
    // The 5 s spell passed: the next call is the half-open probe.
    assert!(link.chat(&ask(), &Context::new()).await.is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_model_list_that_answers_while_chat_fails_is_trusted_less_and_less() {
    // The vendor's model list answers; its chat calls keep failing.
    let (v, chat) = vendor(true);
    #[derive(Debug)]
    struct Up;
    #[async_trait]
    impl Liveness for Up {
        async fn check(&self, _ctx: &Context) -> Result<()> {
            Ok(())
        }
    }
    #[derive(Debug)]
    struct ChatDown<M>(M);
    impl<M: ChatModel> ripcord_core::Decorator for ChatDown<M> {
        type Inner = M;
        fn inner(&self) -> &M {
            &self.0
        }
        fn decorated_liveness(&self) -> Option<Arc<dyn Liveness>> {
            Some(Arc::new(Up))
        }
    }
    let link = ChatDown(chat).with_breaker(
        BreakerPolicy::builder()
            .consecutive_failures(1)
            .open_for(Duration::from_secs(600))
            .build()
            .unwrap(),
    );
    let t0 = Instant::now();
    link.chat(&ask(), &Context::new()).await.unwrap_err();
    // One request every 100 ms for 100 s: each re-admission by the check costs one chat call.
    let outcomes = steady_every(&link, t0, Duration::from_millis(100), 1_000).await;
    assert!(outcomes.iter().all(Result::is_err));
    let chats = v.chats.load(Ordering::SeqCst);
    // Without backing off: one re-admission every 5 s, 20 chat calls; with it: 5, 10, 20, 40 s
    // apart, then 80 s.
    assert!(
        chats <= 7,
        "{chats} chat calls reached a vendor whose chat is down"
    );
    assert!(
        chats >= 3,
        "the check still re-admits now and then ({chats})"
    );
}

/// One request every `gap` from `t0`, `n` of them.
async fn steady_every(
    m: &impl ChatModel,
    t0: Instant,
    gap: Duration,
    n: u32,
) -> Vec<Result<ChatResponse>> {
    let mut out = Vec::new();
    for i in 1..=n {
        tokio::time::sleep_until(t0 + gap * i).await;
        out.push(m.chat(&ask(), &Context::new()).await);
    }
    out
}
