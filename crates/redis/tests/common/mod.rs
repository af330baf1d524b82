//! What the Redis test crates share: a connection with a generous op timeout, running one case
//! against the local store and then against a fresh `redis-server`, and the one counting vendor
//! that several replicas call.
#![allow(
    dead_code,
    reason = "each test crate that includes this module uses a part of it"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use ripcord_core::{
    Capabilities, ChatModel, ChatRequest, ChatResponse, Context, Error, ErrorKind, ModelId, Result,
    Usage,
};
use ripcord_redis::server::RedisServer as Server;
use ripcord_redis::{RedisState, StateOptions};

/// `model` behind a breaker on `config`: local, or (on `redis`) over a Redis store, returned
/// with it.
pub(crate) async fn breaker_on(
    model: ripcord_core::testing::ScriptedModel,
    redis: Option<&Server>,
    config: &ripcord_redis::SharedBreakerConfig,
) -> (
    ripcord_resilience::Breaker<Arc<ripcord_core::testing::ScriptedModel>>,
    Option<Arc<ripcord_redis::RedisBreakerStore>>,
) {
    use ripcord_resilience::Breaker;
    let policy = config.policy().unwrap();
    let model = Arc::new(model);
    let Some(server) = redis else {
        return (Breaker::new(model, policy), None);
    };
    let state = connect(server).await;
    let store =
        ripcord_redis::RedisBreakerStore::new(&model.id().name, state, config, &policy).unwrap();
    (
        Breaker::with_store(model, policy, store.clone()),
        Some(store),
    )
}

/// Streams `req` through `model` to the end; the stream's first error, if any.
pub(crate) async fn stream_to_end<M: ChatModel>(
    model: &M,
    req: &ChatRequest,
    ctx: &Context,
) -> Result<()> {
    use futures::StreamExt;
    let mut s = model.stream(req, ctx).await?;
    while let Some(ev) = s.next().await {
        ev?;
    }
    Ok(())
}

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

/// A fresh `redis-server` for `what` (skipped loudly without one, an error under `CI`).
pub(crate) async fn start(what: &str) -> Option<Server> {
    Server::start_or_skip(what).await.unwrap()
}

/// Runs `case` on the local store, then on a fresh Redis (skipped loudly without
/// `redis-server`, an error under `CI`).
pub(crate) async fn both<F, Fut>(case: F)
where
    F: Fn(Option<Arc<Server>>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    case(None).await;
    let Some(server) = start("the shared policy suite").await else {
        return;
    };
    case(Some(Arc::new(server))).await;
}

/// The one vendor all replicas call: counts every call that reaches it.
#[derive(Debug)]
pub(crate) struct Vendor {
    id: ModelId,
    caps: Capabilities,
    pub(crate) down: AtomicBool,
    hits: AtomicUsize,
    delay: Duration,
}

impl Vendor {
    pub(crate) fn new(delay: Duration) -> Arc<Vendor> {
        Arc::new(Vendor {
            id: ModelId::new("vendor", "vendor-model"),
            caps: Capabilities::new(8_000, 100),
            down: AtomicBool::new(false),
            hits: AtomicUsize::new(0),
            delay,
        })
    }

    pub(crate) fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl ChatModel for Vendor {
    fn id(&self) -> &ModelId {
        &self.id
    }
    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }
    async fn chat(&self, _req: &ChatRequest, _ctx: &Context) -> Result<ChatResponse> {
        self.hits.fetch_add(1, Ordering::SeqCst);
        if self.down.load(Ordering::SeqCst) {
            return Err(Error::new(ErrorKind::ServerError, "vendor outage"));
        }
        // Only answers are slow: an outage fails fast.
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        Ok(ChatResponse::new("ok").with_usage(Usage::new(10, 20)))
    }
}

/// A request reserving its prompt estimate (a few tokens) plus 10.
pub(crate) fn req() -> ChatRequest {
    ChatRequest::user("hi").with_max_tokens(10)
}

/// One connection per replica. The op timeout is generous here: these tests pin the shared
/// semantics, and a loaded 2-core machine must not push them onto local state by accident.
pub(crate) async fn states(server: &Server) -> Vec<RedisState> {
    let mut v = Vec::new();
    for _ in 0..3 {
        v.push(connect(server).await);
    }
    v
}

/// Runs `f` once per replica, each in its own task, and collects the results in order.
pub(crate) async fn on_replicas<M, F, Fut, T>(replicas: &[Arc<M>], f: F) -> Vec<T>
where
    M: Send + Sync + 'static,
    F: Fn(Arc<M>) -> Fut,
    Fut: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let handles: Vec<_> = replicas
        .iter()
        .map(|r| tokio::spawn(f(r.clone())))
        .collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}
