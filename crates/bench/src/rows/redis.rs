//! The rows with link 1's state on Redis.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use ripcord_core::{
    Capabilities, Chain, ChatModel, ChatRequest, ChatResponse, ChatStream, Context, ModelId,
};
use ripcord_redis::server::RedisServer;
use ripcord_redis::{
    RedisState, SharedBreakerConfig, SharedRateLimitConfig, StateOptions, shared_breaker,
    shared_rate_limit,
};
use ripcord_resilience::{
    BreakerListener, BreakerPolicy, BreakerState, ChatModelExt, RetryPolicy, Transition,
};

use super::chains::{behind, bulkhead, decorate};
use super::wire::{http_client, openai, request};
use ripcord_providers::HttpClient;

/// The Redis rows' options: the defaults but a 250 ms op timeout (default 50 ms). On a loaded
/// 2-core machine a reply now and then takes longer than 50 ms at c=64; the handle then
/// degrades to local state for a second and the row counts those calls as errors, so the
/// figures would say how loaded the machine was, not what Redis costs when it answers.
fn state_options() -> StateOptions {
    StateOptions {
        op_timeout: Duration::from_millis(250),
        ..StateOptions::default()
    }
}

/// Why the `chain_redis` row was skipped, once `build` has tried to start Redis.
pub(super) static REDIS_SKIPPED: OnceLock<String> = OnceLock::new();

/// The report's note when the `chain_redis` row was skipped (empty otherwise).
pub(crate) fn redis_skipped() -> Vec<String> {
    REDIS_SKIPPED
        .get()
        .map(|why| {
            vec![format!(
                "rows chain_redis and failover_redis, and the trip's spread, skipped: {why}"
            )]
        })
        .unwrap_or_default()
}

/// The `chain` row's chain with link 1's breaker and rate limit shared through Redis (same
/// limits, same retry and bulkhead in between); links 2 and 3 as in `chain`.
pub(super) async fn redis_chain(
    ok_url: &str,
    redis: &RedisServer,
) -> Result<(Chain, RedisState), String> {
    let (state, client) = connect(redis).await?;
    // GCRA intervals are whole microseconds: 60 M per minute is the largest limit that still
    // runs both cells (a larger one reads as "no limit" and skips the script's writes).
    let limits = SharedRateLimitConfig::default()
        .rpm(60_000_000)
        .tpm(60_000_000);
    let limited = shared_rate_limit(
        openai(ok_url, "primary", Some(&client))?,
        state.clone(),
        limits,
    )
    .map_err(|e| e.to_string())?;
    let inner = limited
        .with_retry(RetryPolicy::default())
        .with_bulkhead(bulkhead()?);
    let primary = shared_breaker(inner, state.clone(), SharedBreakerConfig::default())
        .map_err(|e| e.to_string())?;
    Ok((behind(Arc::new(primary), ok_url, &client)?, state))
}

/// The `failover` row's chain with link 1's breaker on Redis (never tripping, as there): every
/// failure of link 1 is queued for the shared count, which is what this row adds.
pub(super) async fn redis_failover(
    down_url: &str,
    ok_url: &str,
    redis: &RedisServer,
) -> Result<(Chain, RedisState), String> {
    let (state, client) = connect(redis).await?;
    let inner = openai(down_url, "primary", Some(&client))?
        .with_retry(RetryPolicy::default())
        .with_bulkhead(bulkhead()?);
    let config = SharedBreakerConfig::default().consecutive_failures(u32::MAX);
    let primary = shared_breaker(inner, state.clone(), config).map_err(|e| e.to_string())?;
    Ok((behind(Arc::new(primary), ok_url, &client)?, state))
}

/// A connection to `redis` for a row's shared state, and the row's HTTP client.
async fn connect(redis: &RedisServer) -> Result<(RedisState, HttpClient), String> {
    let state = RedisState::connect_with(&redis.url(), state_options())
        .await
        .map_err(|e| e.to_string())?;
    Ok((state, http_client()?))
}

/// How one replica's trip of link 1's shared breaker reached the other replicas.
#[derive(Debug, Clone)]
pub(crate) struct TripSpread {
    /// Replicas sharing link 1's breaker.
    pub(crate) replicas: usize,
    /// The stated bound (docs/shared-state.md): calls admitted from the cached view after a
    /// trip elsewhere, and how long after it.
    pub(crate) lease_calls: u64,
    pub(crate) lease_ttl: Duration,
    /// Per other replica: calls its link 1 admitted after the first replica saw the trip.
    pub(crate) admitted_after: Vec<u64>,
    /// Per other replica: from the first replica seeing the trip to its own view opening.
    pub(crate) reach: Vec<Duration>,
    /// Per other replica: from the first replica seeing the trip to its last admitted call
    /// (zero when it admitted none after it).
    pub(crate) last_admitted: Vec<Duration>,
}

/// The calls a breaker admitted, and when the last one was.
#[derive(Debug, Default)]
struct Admissions {
    count: AtomicU64,
    last: Mutex<Option<Instant>>,
}

/// Counts the calls a breaker admitted (it sits right inside the breaker).
#[derive(Debug)]
struct Counted<M> {
    inner: M,
    calls: Arc<Admissions>,
}

impl<M> Counted<M> {
    fn admitted(&self) {
        *lock(&self.calls.last) = Some(Instant::now());
        self.calls.count.fetch_add(1, Ordering::Relaxed);
    }
}

#[async_trait]
impl<M: ChatModel> ChatModel for Counted<M> {
    fn id(&self) -> &ModelId {
        self.inner.id()
    }

    fn capabilities(&self) -> &Capabilities {
        self.inner.capabilities()
    }

    async fn chat(&self, req: &ChatRequest, ctx: &Context) -> ripcord_core::Result<ChatResponse> {
        self.admitted();
        self.inner.chat(req, ctx).await
    }

    async fn stream(&self, req: &ChatRequest, ctx: &Context) -> ripcord_core::Result<ChatStream> {
        self.admitted();
        self.inner.stream(req, ctx).await
    }

    fn bounds_itself(&self) -> bool {
        self.inner.bounds_itself()
    }
}

/// When each replica's view of the shared breaker opened, with every replica's admitted
/// calls at the first opening.
#[derive(Debug)]
struct Openings {
    calls: Vec<Arc<Admissions>>,
    first: Mutex<Option<(Instant, Vec<u64>)>>,
    opened: Mutex<Vec<Option<(Instant, u64)>>>,
}

impl Openings {
    fn all_open(&self) -> bool {
        lock(&self.opened).iter().all(Option::is_some)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The shared breaker's default lease (docs/shared-state.md), set explicitly so the bound the
/// report prints is the one measured.
const LEASE_CALLS: u64 = 32;
const LEASE_TTL: Duration = Duration::from_millis(100);

/// One replica's listener.
#[derive(Debug)]
struct Opened {
    replica: usize,
    all: Arc<Openings>,
}

impl BreakerListener for Opened {
    fn on_transition(&self, t: &Transition) {
        if t.to != BreakerState::Open {
            return;
        }
        let now = Instant::now();
        let mine = self.all.calls[self.replica].count.load(Ordering::Relaxed);
        let mut first = lock(&self.all.first);
        if first.is_none() {
            let counts = self
                .all
                .calls
                .iter()
                .map(|c| c.count.load(Ordering::Relaxed))
                .collect();
            *first = Some((now, counts));
        }
        drop(first);
        let mut opened = lock(&self.all.opened);
        if opened[self.replica].is_none() {
            opened[self.replica] = Some((now, mine));
        }
    }
}

/// Link 1 down for `replicas` chains (each with its own Redis connection, as separate
/// processes would have) sharing link 1's breaker (5 consecutive failures, open for an hour,
/// the default lease); `tasks` callers per replica send until every replica's view of the
/// breaker is open (or 10 s pass). Measures, for the replicas that did not see the trip first,
/// the calls their link 1 admitted after it, when the last of them was, and when their own
/// view opened.
pub(crate) async fn trip_spread(
    down_url: &str,
    ok_url: &str,
    replicas: usize,
    tasks: usize,
) -> Result<TripSpread, String> {
    let redis = RedisServer::start().await.map_err(|e| e.to_string())?;
    let calls: Vec<Arc<Admissions>> = (0..replicas).map(|_| Arc::default()).collect();
    let all = Arc::new(Openings {
        calls: calls.clone(),
        first: Mutex::new(None),
        opened: Mutex::new(vec![None; replicas]),
    });
    let config = SharedBreakerConfig::default()
        .consecutive_failures(5)
        .open_for(Duration::from_secs(3600))
        .lease_calls(LEASE_CALLS)
        .lease_ttl(LEASE_TTL);
    let client = http_client()?;
    let mut chains = Vec::with_capacity(replicas);
    for (i, counter) in calls.iter().enumerate() {
        let state = RedisState::connect_with(&redis.url(), state_options())
            .await
            .map_err(|e| e.to_string())?;
        let inner = Counted {
            inner: openai(down_url, "primary", Some(&client))?,
            calls: Arc::clone(counter),
        };
        let listener = Arc::new(Opened {
            replica: i,
            all: Arc::clone(&all),
        });
        let primary = shared_breaker(inner, state, config.clone().listener(listener))
            .map_err(|e| e.to_string())?;
        let (secondary, _) = decorate(
            openai(ok_url, "secondary", Some(&client))?,
            BreakerPolicy::default(),
        )?;
        let chain = Chain::builder()
            .link(primary)
            .link_arc(secondary)
            .deadline(Duration::from_secs(30))
            .build()
            .map_err(|e| format!("chain: {e}"))?;
        chains.push(chain);
    }
    let stop_at = Instant::now() + Duration::from_secs(10);
    let mut set = tokio::task::JoinSet::new();
    for chain in &chains {
        for _ in 0..tasks {
            let chain = chain.clone();
            let all = Arc::clone(&all);
            set.spawn(async move {
                let req = request();
                while !all.all_open() && Instant::now() < stop_at {
                    let r = chain
                        .chat(&req, &Context::new())
                        .await
                        .map_err(|e| format!("trip spread: {e}"))?;
                    if r.served_by() != "secondary" {
                        return Err(format!(
                            "trip spread: served by {:?}, expected \"secondary\"",
                            r.served_by()
                        ));
                    }
                }
                Ok::<_, String>(())
            });
        }
    }
    while let Some(done) = set.join_next().await {
        done.map_err(|e| format!("trip spread task: {e}"))??;
    }
    let Some((t0, at_first)) = lock(&all.first).clone() else {
        return Err("trip spread: no replica's breaker opened within 10 s".into());
    };
    let opened = lock(&all.opened).clone();
    let mut admitted_after = Vec::new();
    let mut reach = Vec::new();
    let mut last_admitted = Vec::new();
    for (i, o) in opened.iter().enumerate() {
        let Some((at, n)) = *o else {
            return Err(format!(
                "trip spread: replica {i}'s breaker did not open within 10 s of the trip"
            ));
        };
        if at == t0 {
            continue; // the replica that saw the trip first
        }
        admitted_after.push(n.saturating_sub(at_first[i]));
        reach.push(at.saturating_duration_since(t0));
        let last = *lock(&calls[i].last);
        last_admitted.push(last.map_or(Duration::ZERO, |l| l.saturating_duration_since(t0)));
    }
    Ok(TripSpread {
        replicas,
        lease_calls: LEASE_CALLS,
        lease_ttl: LEASE_TTL,
        admitted_after,
        reach,
        last_admitted,
    })
}
