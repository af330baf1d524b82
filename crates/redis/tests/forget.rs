//! `RedisState::forget_link`: a harness running one scenario after another on one Redis
//! starts each from empty shared state, for exactly the links it names.
#![allow(clippy::unwrap_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use ripcord_core::testing::ScriptedModel;
use ripcord_core::{ChatModel, ChatRequest, Context, ErrorKind};
use ripcord_redis::server::RedisServer as Server;
use ripcord_redis::{RedisBreakerStore, SharedBreakerConfig};
use ripcord_resilience::{Breaker, BreakerState};

use common::connect;

/// A breaker on `link` whose model fails once then answers, tripping at the first failure.
async fn tripped(server: &Server, link: &str) -> Breaker<Arc<ScriptedModel>> {
    let config = SharedBreakerConfig::default()
        .consecutive_failures(1)
        .open_for(Duration::from_secs(3600));
    let policy = config.policy().unwrap();
    let model = Arc::new(
        ScriptedModel::new(link)
            .fail(ErrorKind::ServerError)
            .reply("ok"),
    );
    let store =
        RedisBreakerStore::new(&model.id().name, connect(server).await, &config, &policy).unwrap();
    let b = Breaker::with_store(model, policy, store.clone());
    let _ = b.chat(&ChatRequest::user("hi"), &Context::new()).await;
    assert!(store.sync().await);
    assert_eq!(b.handle().state(), BreakerState::Open, "{link}");
    b
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forgetting_a_link_resets_its_shared_state_and_no_other_links() {
    let Some(server) = common::start("the forget_link test").await else {
        return;
    };
    tripped(&server, "primary").await;
    tripped(&server, "backup").await;
    let state = connect(&server).await;
    // Glob characters in a name are literal: "pr*" is not "primary".
    assert_eq!(state.forget_link("pr*").await, Some(0));
    let gone = state.forget_link("primary").await.unwrap();
    assert!(gone >= 2, "deleted {gone} keys");
    assert_eq!(state.forget_link("primary").await, Some(0));
    // A new replica's breaker on "primary" starts closed; "backup" is still open for all.
    let fresh = |link: &str| {
        let config = SharedBreakerConfig::default();
        let policy = config.policy().unwrap();
        let model = Arc::new(ScriptedModel::new(link).reply("ok"));
        let store =
            RedisBreakerStore::new(&model.id().name, state.clone(), &config, &policy).unwrap();
        Breaker::with_store(model, policy, store)
    };
    let primary = fresh("primary");
    let r = primary
        .chat(&ChatRequest::user("hi"), &Context::new())
        .await;
    assert!(r.is_ok(), "{r:?}");
    let backup = fresh("backup");
    let e = backup
        .chat(&ChatRequest::user("hi"), &Context::new())
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::CircuitOpen);
}
