//! What the store suites share: a connection with a generous op timeout, and running one
//! case against the local store and then against a fresh `redis-server`.

use std::sync::Arc;
use std::time::Duration;

use ripcord_redis::server::RedisServer as Server;
use ripcord_redis::{RedisState, StateOptions};

/// A connection whose op timeout is generous: these tests pin the shared semantics, and a
/// loaded 2-core machine must not push them onto local state by accident.
pub(crate) async fn connect(server: &Server) -> RedisState {
    let options = StateOptions {
        op_timeout: Duration::from_secs(1),
        ..StateOptions::default()
    };
    RedisState::connect_with(&server.url(), options)
        .await
        .unwrap()
}

/// Runs `case` on the local store, then on a fresh Redis (skipped loudly without
/// `redis-server`, an error under `CI`).
pub(crate) async fn both<F, Fut>(case: F)
where
    F: Fn(Option<Arc<Server>>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    case(None).await;
    let Some(server) = Server::start_or_skip("the shared policy suite")
        .await
        .unwrap()
    else {
        return;
    };
    case(Some(Arc::new(server))).await;
}
