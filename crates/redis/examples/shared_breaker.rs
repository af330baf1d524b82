//! A circuit breaker shared through Redis: two replicas of a service call the same vendor;
//! replica A sees it fail and opens the breaker, and replica B stops calling it within the
//! staleness bound (one 100 ms lease) — without failing three times itself first.
//!
//! Needs a Redis: `RIPCORD_REDIS_URL=redis://127.0.0.1:6379 cargo run -p ripcord-redis --example
//! shared_breaker` (`cargo xtask test` starts a throwaway one and runs this example against it).
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "an example reports on the terminal"
)]

use std::time::Duration;

use ripcord_core::testing::ScriptedModel;
use ripcord_core::{ChatModel, ChatRequest, Context, ErrorKind};
use ripcord_redis::{RedisState, SharedBreakerConfig, shared_breaker};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("RIPCORD_REDIS_URL")
        .map_err(|_| "set RIPCORD_REDIS_URL to a Redis, e.g. redis://127.0.0.1:6379")?;
    // Both replicas name the link alike, so they share its breaker; the process id keeps this
    // run's key apart from other runs against the same Redis.
    let link = format!("example-vendor-{}", std::process::id());
    let config = SharedBreakerConfig::default()
        .consecutive_failures(3)
        .open_for(Duration::from_secs(30));

    let state_a = RedisState::connect(&url).await?;
    let failing = ScriptedModel::new(&link)
        .fail(ErrorKind::ServerError)
        .fail(ErrorKind::ServerError)
        .fail(ErrorKind::ServerError);
    let replica_a = shared_breaker(failing, state_a, config.clone())?;

    let state_b = RedisState::connect(&url).await?;
    let healthy = ScriptedModel::new(&link).reply("hello from B");
    let replica_b = shared_breaker(healthy, state_b, config)?;

    let req = ChatRequest::user("hi");
    for i in 1..=3 {
        let e = replica_a.chat(&req, &Context::new()).await.err();
        println!("replica A, call {i}: {:?}", e.map(|e| e.kind()));
    }
    // A replica may admit from its cached view for one lease after another replica trips —
    // at most 32 calls or 100 ms by default (the staleness bound, docs/shared-state.md).
    // Past it, replica B knows without calling its vendor.
    tokio::time::sleep(Duration::from_millis(150)).await;
    let refused = replica_b.chat(&req, &Context::new()).await;
    println!(
        "replica B: {:?} after {} calls of its own vendor",
        refused
            .as_ref()
            .map(|r| r.text().to_owned())
            .map_err(|e| e.kind()),
        replica_b.get_ref().calls()
    );
    match refused {
        Err(e) if e.kind() == ErrorKind::CircuitOpen && replica_b.get_ref().calls() == 0 => Ok(()),
        other => {
            Err(format!("replica B should be refused by the shared breaker: {other:?}").into())
        }
    }
}
