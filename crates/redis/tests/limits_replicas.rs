//! Several replicas of the shared limiter and budget on one Redis (a REAL `redis-server`
//! child on loopback): what only a shared store has — the limits hold across replicas, leased
//! blocks never overshoot the shared RPM, settlements are charged once and summed per
//! replica, a vendor 429 pauses the link for all. The bounds are in `docs/shared-state.md`.
//!
//! These run on real time (Redis keeps time by its own clock) with short limits. Without
//! `redis-server` they skip loudly (an error under `CI`).
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::{Vendor, on_replicas, req, states};
use ripcord_core::{ChatModel, Context, Error, ErrorKind};
use ripcord_redis::{
    RedisLimitStore, SharedBudget, SharedBudgetConfig, SharedRateLimit, SharedRateLimitConfig,
    shared_budget, shared_rate_limit,
};
use ripcord_resilience::RateLimit;

// ---- Several replicas on one Redis --------------------------------------------------------

/// A real `redis-server` on loopback, or a loud skip without the binary (an error under CI).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leased_blocks_never_overshoot_the_shared_rpm() {
    let Some(server) = common::start("the shared limiter and budget tests").await else {
        return;
    };
    let vendor = Vendor::new(Duration::ZERO);
    // 320 per minute, burst 320: each Redis call leases a block of 20 cells.
    let config = SharedRateLimitConfig::default()
        .rpm(320)
        .max_wait(Duration::ZERO);
    let replicas: Vec<Arc<SharedRateLimit<Arc<Vendor>>>> = states(&server)
        .await
        .into_iter()
        .map(|s| Arc::new(shared_rate_limit(vendor.clone(), s, config.clone()).unwrap()))
        .collect();
    let started = Instant::now();
    let admitted = on_replicas(&replicas, |r| async move {
        let mut ok = 0usize;
        for _ in 0..200 {
            match r.chat(&req(), &Context::new()).await {
                Ok(_) => ok += 1,
                Err(e) => assert_eq!(e.kind(), ErrorKind::LocalRateLimited, "{e}"),
            }
        }
        ok
    })
    .await;
    let total: usize = admitted.iter().sum();
    assert_eq!(total, vendor.hits());
    // Cells are charged in Redis before they are spent: never more than the burst plus what
    // refilled meanwhile (one cell per 187.5 ms); at most the cells a replica holds (the rest
    // of its block and the next one asked ahead: 20 + 20 / 4) are left over per replica.
    let refilled = (started.elapsed().as_secs_f64() * 320.0 / 60.0).ceil() as usize;
    assert!(
        total <= 320 + refilled,
        "{total} calls admitted against a burst of 320 (+{refilled} refilled)"
    );
    assert!(total >= 320 - 3 * 25, "only {total} calls admitted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_rpm_limit_holds_across_replicas() {
    let Some(server) = common::start("the shared limiter and budget tests").await else {
        return;
    };
    let vendor = Vendor::new(Duration::ZERO);
    let config = SharedRateLimitConfig::default().rpm(6).replicas(3);
    let replicas: Vec<Arc<SharedRateLimit<Arc<Vendor>>>> = states(&server)
        .await
        .into_iter()
        .map(|s| Arc::new(shared_rate_limit(vendor.clone(), s, config.clone()).unwrap()))
        .collect();
    // Each replica tries 4 calls (12 in all); the cells refill every 10 s, longer than the
    // callers' 200 ms deadlines can wait.
    let outcomes = on_replicas(&replicas, |r| async move {
        let mut v = Vec::new();
        for _ in 0..4 {
            let ctx = Context::new().with_timeout(Duration::from_millis(200));
            v.push(r.chat(&req(), &ctx).await.map(|_| ()));
        }
        v
    })
    .await;
    let all: Vec<_> = outcomes.into_iter().flatten().collect();
    let ok = all.iter().filter(|r| r.is_ok()).count();
    assert_eq!(ok, 6, "6 RPM across three replicas, not 6 each");
    assert_eq!(vendor.hits(), 6);
    for e in all.iter().filter_map(|r| r.as_ref().err()) {
        assert_eq!(e.kind(), ErrorKind::LocalRateLimited, "{e}");
        let after = e.retry_after().unwrap();
        assert!(
            after > Duration::from_secs(1) && after <= Duration::from_secs(10),
            "{after:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_waits_for_a_shared_cell_when_its_deadline_allows() {
    let Some(server) = common::start("the shared limiter and budget tests").await else {
        return;
    };
    let vendor = Vendor::new(Duration::ZERO);
    // 60 RPM, burst 1: one cell a second.
    let config = SharedRateLimitConfig::default().rpm(60).rpm_burst(1);
    let mut states = states(&server).await;
    let a = shared_rate_limit(vendor.clone(), states.remove(0), config.clone()).unwrap();
    let b = shared_rate_limit(vendor.clone(), states.remove(0), config).unwrap();
    a.chat(&req(), &Context::new()).await.unwrap();
    let started = Instant::now();
    b.chat(&req(), &Context::new().with_timeout(Duration::from_secs(5)))
        .await
        .unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "b did not wait for a's cell"
    );
    let e = a
        .chat(
            &req(),
            &Context::new().with_timeout(Duration::from_millis(20)),
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LocalRateLimited);
    assert_eq!(vendor.hits(), 2);
}

/// Three replicas of one shared budget of `config` in front of `vendor`.
async fn budget_replicas(
    server: &ripcord_redis::server::RedisServer,
    vendor: &Arc<Vendor>,
    config: &SharedBudgetConfig,
) -> Vec<SharedBudget<Arc<Vendor>>> {
    states(server)
        .await
        .into_iter()
        .map(|s| shared_budget(vendor.clone(), s, config.clone()).unwrap())
        .collect()
}

/// Three rounds of a call of tenant `acme` on every replica: the calls answered and the
/// refusals.
async fn three_rounds_of_acme(replicas: &[SharedBudget<Arc<Vendor>>]) -> (usize, Vec<Error>) {
    let acme = Context::new().with_tenant("acme");
    let mut ok = 0;
    let mut refused = Vec::new();
    for _ in 0..3 {
        for r in replicas {
            match r.chat(&req(), &acme).await {
                Ok(_) => ok += 1,
                Err(e) => refused.push(e),
            }
        }
    }
    (ok, refused)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_budget_is_spent_once_not_three_times() {
    let Some(server) = common::start("the shared limiter and budget tests").await else {
        return;
    };
    let vendor = Vendor::new(Duration::ZERO);
    // Each call uses 30 tokens (the vendor reports 10 + 20); 150 tokens = 5 calls.
    let config = SharedBudgetConfig::default()
        .tokens_per_window(150)
        .window(Duration::from_secs(600));
    let replicas = budget_replicas(&server, &vendor, &config).await;
    let (ok, refused) = three_rounds_of_acme(&replicas).await;
    assert_eq!(ok, 5, "the tenant's budget was spent more than once");
    assert_eq!(vendor.hits(), 5);
    assert_eq!(refused.len(), 4);
    for e in &refused {
        assert_eq!(e.kind(), ErrorKind::BudgetExhausted, "{e}");
        assert!(e.retry_after().unwrap() <= Duration::from_secs(600));
    }
    // Another tenant has its own account; calls without a tenant are not budgeted.
    replicas[1]
        .chat(&req(), &Context::new().with_tenant("globex"))
        .await
        .unwrap();
    replicas[2].chat(&req(), &Context::new()).await.unwrap();
    // A failed call gives its reservation back.
    vendor.down.store(true, Ordering::SeqCst);
    let g = Context::new().with_tenant("initech");
    for _ in 0..8 {
        assert_eq!(
            replicas[0].chat(&req(), &g).await.unwrap_err().kind(),
            ErrorKind::ServerError
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_monthly_budget_is_shared_and_refuses_until_the_month_turns() {
    let Some(server) = common::start("the shared limiter and budget tests").await else {
        return;
    };
    let vendor = Vendor::new(Duration::ZERO);
    // 30 tokens a call, 150 a month: five calls whichever replica takes them.
    let config = SharedBudgetConfig::default()
        .tokens_per_window(150)
        .period(ripcord_resilience::BudgetPeriod::Month);
    let replicas = budget_replicas(&server, &vendor, &config).await;
    let (ok, refused) = three_rounds_of_acme(&replicas).await;
    assert_eq!(ok, 5, "the month's budget was spent more than once");
    let now = ripcord_resilience::system_wall_clock()();
    let until = ripcord_resilience::BudgetPeriod::Month.until_next(now);
    for e in &refused {
        assert_eq!(e.kind(), ErrorKind::BudgetExhausted, "{e}");
        let after = e.retry_after().unwrap();
        // Until the 1st of next month, 00:00 UTC (the replica's clock against this one).
        assert!(
            after <= until + Duration::from_secs(5) && after + Duration::from_secs(5) >= until,
            "retry after {after:?}, the month turns in {until:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_tpm_limit_charges_reported_tokens_across_replicas() {
    let Some(server) = common::start("the shared limiter and budget tests").await else {
        return;
    };
    let vendor = Vendor::new(Duration::ZERO);
    // Each call reserves its prompt estimate + max_tokens (10) and the vendor reports 30:
    // a 100-token minute holds three calls whichever replica sends them, and no fourth.
    let config = SharedRateLimitConfig::default().tpm(100);
    let mut replicas = Vec::new();
    for s in states(&server).await {
        let store = RedisLimitStore::new("vendor", s, &config).unwrap();
        let limited =
            RateLimit::with_store(vendor.clone(), config.policy().unwrap(), store.clone());
        replicas.push((limited, store));
    }
    let ctx = || Context::new().with_timeout(Duration::from_millis(200));
    for (r, store) in &replicas {
        r.chat(&req(), &ctx()).await.unwrap();
        // The settlement (30 used, ~13 reserved) is sent without making the call wait.
        store.sync().await;
    }
    let e = replicas[0].0.chat(&req(), &ctx()).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LocalRateLimited, "{e}");
    assert!(e.message().contains("tokens-per-minute"), "{e}");
    assert!(e.retry_after().is_some());
    assert_eq!(vendor.hits(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vendor_429_seen_by_one_replica_pauses_the_link_for_all() {
    let Some(server) = common::start("the shared limiter and budget tests").await else {
        return;
    };
    let vendor = Arc::new(
        ripcord_core::testing::ScriptedModel::new("vendor")
            .fail_with(
                Error::new(ErrorKind::RateLimited, "slow down")
                    .with_retry_after(Duration::from_millis(800)),
                Duration::ZERO,
            )
            .reply("ok"),
    );
    let config = SharedRateLimitConfig::default().rpm(6000);
    let replicas: Vec<SharedRateLimit<Arc<ripcord_core::testing::ScriptedModel>>> = states(&server)
        .await
        .into_iter()
        .map(|s| shared_rate_limit(vendor.clone(), s, config.clone()).unwrap())
        .collect();
    let e = replicas[0].chat(&req(), &Context::new()).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::RateLimited);
    // The pause is written without making the call wait: bounded by one Redis write.
    let client = redis::Client::open(server.url()).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let until = Instant::now() + Duration::from_secs(1);
    loop {
        let ttl: i64 = redis::cmd("PTTL")
            .arg("ripcord:v1:{vendor}:rl:pause")
            .query_async(&mut con)
            .await
            .unwrap();
        if ttl > 0 {
            break;
        }
        assert!(Instant::now() < until, "the pause never reached Redis");
        tokio::task::yield_now().await;
    }
    // Another replica, in a hurry, is refused locally with the rest of the pause.
    let e = replicas[1]
        .chat(
            &req(),
            &Context::new().with_timeout(Duration::from_millis(100)),
        )
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LocalRateLimited, "{e}");
    let after = e.retry_after().unwrap();
    assert!(
        after > Duration::from_millis(100) && after <= Duration::from_millis(800),
        "{after:?}"
    );
    assert_eq!(vendor.calls(), 1);
    // A third one with time to spare waits the pause out, then passes.
    let started = Instant::now();
    replicas[2]
        .chat(
            &req(),
            &Context::new().with_timeout(Duration::from_secs(10)),
        )
        .await
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(vendor.calls(), 2);
}

/// Settlements are summed in-process, not written per call: they ride with the next ask for
/// cells, and what is left lands within `settle_every` with no call and no `sync`. The TPM
/// cell ends charged what the vendor reported, not what the calls reserved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settlements_ride_with_the_next_ask_and_the_rest_lands_within_settle_every() {
    let Some(server) = common::start("the shared limiter and budget tests").await else {
        return;
    };
    let vendor = Vendor::new(Duration::ZERO);
    // No RPM: no leases, so every call asks Redis for its own tokens. A call reserves its
    // prompt estimate + 1000 and the vendor reports 30, so each settles a credit of ~975.
    let every = Duration::from_millis(200);
    let config = SharedRateLimitConfig::default()
        .tpm(2_000)
        .max_wait(Duration::ZERO)
        .settle_every(every);
    let mut replicas = Vec::new();
    for s in states(&server).await.into_iter().take(2) {
        let store = RedisLimitStore::new("vendor", s, &config).unwrap();
        let limited =
            RateLimit::with_store(vendor.clone(), config.policy().unwrap(), store.clone());
        replicas.push((limited, store));
    }
    let big = || req().with_max_tokens(1_000);
    let before = server.script_calls().await.unwrap();
    // Twenty calls of ~1005 reserved on a 2000-token burst: each fits only because the
    // credits of the ones before it rode with its ask.
    let (a, a_store) = &replicas[0];
    for i in 0..20 {
        a.chat(&big(), &Context::new())
            .await
            .unwrap_or_else(|e| panic!("call {i}: {e}"));
    }
    let asked = server.script_calls().await.unwrap() - before;
    // One script per call, and no settlement written on its own (the last one is waiting):
    // the per-call settlement writes were as many again. A first EVALSHA may be retried as
    // EVAL once, when the script is not loaded yet.
    assert!(
        (20..=21).contains(&asked),
        "{asked} scripts for 20 calls: settlements were not coalesced"
    );
    // The last credit lands without a sync: another replica's call that fits only with it.
    let (b, _) = &replicas[1];
    let sent = Instant::now();
    let limit = sent + every + Duration::from_secs(1);
    loop {
        match b.chat(&big(), &Context::new()).await {
            Ok(_) => break,
            Err(e) => {
                assert_eq!(e.kind(), ErrorKind::LocalRateLimited, "{e}");
                assert!(
                    Instant::now() < limit,
                    "the last settlement did not land within settle_every + the op timeout"
                );
                tokio::task::yield_now().await;
            }
        }
    }
    a_store.sync().await;
    assert_eq!(vendor.hits(), 21);
}
