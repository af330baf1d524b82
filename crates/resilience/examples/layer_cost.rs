//! Per-call cost of each policy around a model that waits once (as a network call does), for
//! running under a profiler: `valgrind --tool=callgrind target/release/examples/layer_cost
//! <config> <calls>`; run two call counts and divide the difference in instructions by the
//! difference in calls. Unlike the criterion bench (an instant model), the model here returns
//! `Pending` once, so every timer and cancellation waiter on the path is really registered.
//!
//! Configs: `bare`, `ctx_run`, `chain1`, `retry`, `breaker`, `rate_limit`, `bulkhead`, `link`
//! (all four), `chain3` (three decorated links, link 1 serves), `link1` (a chain of one decorated
//! link), `skip` (the same behind a decorated link whose breaker is open: the difference
//! is what skipping costs), `pool` (a pool of three deployments, each behind its own breaker,
//! inside the link's rate limit, bulkhead and breaker, and no retry: the pool makes the link's
//! attempts, as `ripcord-cli` builds a pooled provider; compare with `link`) and `chain3_pool`
//! (`chain3` with link 1 that pool; compare with `chain3`). `RIPCORD_POOL_BALANCE` picks the
//! pool's strategy (default `p2c_peak_ewma`).

#![allow(clippy::expect_used, clippy::print_stdout, clippy::print_stderr)]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ripcord_core::{
    Capabilities, Chain, ChatModel, ChatRequest, ChatResponse, Context, ModelId, Result, Usage,
};
use ripcord_resilience::*;

/// Answers after yielding to the scheduler once. Like the HTTP adapters it claims to bound
/// itself by the context (it answers long before any deadline), unless `RIPCORD_UNBOUNDED` is
/// set, to measure the timers layers add around a model that does not.
#[derive(Debug)]
struct YieldOnce {
    id: ModelId,
    caps: Capabilities,
    bounded: bool,
}

#[async_trait]
impl ChatModel for YieldOnce {
    fn id(&self) -> &ModelId {
        &self.id
    }
    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }
    async fn chat(&self, _req: &ChatRequest, _ctx: &Context) -> Result<ChatResponse> {
        tokio::task::yield_now().await;
        if self.id.name.as_ref() == "down" {
            return Err(ripcord_core::Error::new(
                ripcord_core::ErrorKind::Overloaded,
                "overloaded",
            ));
        }
        Ok(ChatResponse::new("ok").with_usage(Usage::new(10, 1)))
    }
    fn bounds_itself(&self) -> bool {
        self.bounded
    }
}

fn model(name: &str) -> YieldOnce {
    YieldOnce {
        id: ModelId::new(name, "yield-once"),
        caps: Capabilities::new(128_000, 4096),
        bounded: std::env::var_os("RIPCORD_UNBOUNDED").is_none(),
    }
}

/// Limits far above what the run reaches: the cost of checking them, never a wait.
fn limits() -> RateLimitPolicy {
    RateLimitPolicy::builder()
        .rpm(1_000_000_000)
        .tpm(4_000_000_000)
        .build()
        .expect("limits")
}

/// A bulkhead wide enough that no call queues.
fn bulkhead() -> BulkheadPolicy {
    BulkheadPolicy::builder()
        .max_in_flight(256)
        .max_queue(1024)
        .build()
        .expect("bulkhead")
}

fn link(name: &str) -> Arc<dyn ChatModel> {
    let breaker = if name == "down" {
        BreakerPolicy::builder()
            .consecutive_failures(1)
            .open_for(Duration::from_secs(24 * 3600))
            .build()
            .expect("breaker")
    } else {
        BreakerPolicy::default()
    };
    Arc::new(
        model(name)
            .with_rate_limit(limits())
            .with_retry(RetryPolicy::default())
            .with_bulkhead(bulkhead())
            .with_breaker(breaker),
    )
}

/// A pool of three deployments of one model, as the bench's `chain_pool` row builds link 1.
fn pool(name: &str) -> Arc<dyn ChatModel> {
    let deployments = ["east", "west", "north"]
        .into_iter()
        .map(|region| {
            let d: Arc<dyn ChatModel> =
                Arc::new(model(name).with_breaker(BreakerPolicy::default()));
            Deployment::from_arc(region, d).region(region)
        })
        .collect();
    let strategy = std::env::var("RIPCORD_POOL_BALANCE")
        .ok()
        .map_or(Balance::default(), |s| {
            s.parse().expect("RIPCORD_POOL_BALANCE")
        });
    let policy = PoolPolicy::builder()
        .strategy(strategy)
        .build()
        .expect("pool policy");
    Arc::new(
        Pool::new(name, deployments, policy)
            .expect("pool")
            .with_rate_limit(limits())
            .with_bulkhead(bulkhead())
            .with_breaker(BreakerPolicy::default()),
    )
}

fn main() {
    let mut args = std::env::args().skip(1);
    let config = args.next().unwrap_or_else(|| "bare".into());
    let calls: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(10_000);
    let chain = |links: Vec<Arc<dyn ChatModel>>| -> Arc<dyn ChatModel> {
        let mut b = Chain::builder().deadline(Duration::from_secs(30));
        for l in links {
            b = b.link_arc(l);
        }
        Arc::new(b.build().expect("chain"))
    };
    let m: Arc<dyn ChatModel> = match config.as_str() {
        "bare" | "ctx_run" => Arc::new(model("a")),
        "chain1" => chain(vec![Arc::new(model("a"))]),
        "retry" => Arc::new(model("a").with_retry(RetryPolicy::default())),
        "breaker" => Arc::new(model("a").with_breaker(BreakerPolicy::default())),
        "rate_limit" => Arc::new(model("a").with_rate_limit(limits())),
        "bulkhead" => Arc::new(model("a").with_bulkhead(bulkhead())),
        "link" => link("a"),
        "chain3" => chain(vec![link("a"), link("b"), link("c")]),
        "link1" => chain(vec![link("b")]),
        "skip" => chain(vec![link("down"), link("b")]),
        "pool" => pool("a"),
        "chain3_pool" => chain(vec![pool("a"), link("b"), link("c")]),
        other => {
            eprintln!("unknown config {other:?}");
            std::process::exit(2);
        }
    };
    let run_ctx = config == "ctx_run";
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .expect("runtime");
    let req = ChatRequest::user("Why is the sky blue?").with_max_tokens(64);
    rt.block_on(async move {
        tokio::spawn(async move {
            let ctx = Context::new().with_timeout(Duration::from_secs(3600));
            for _ in 0..calls {
                let r = if run_ctx {
                    ctx.run(m.chat(&req, &ctx)).await
                } else {
                    m.chat(&req, &ctx).await
                };
                std::hint::black_box(r.expect("answer"));
            }
        })
        .await
        .expect("task");
    });
}
