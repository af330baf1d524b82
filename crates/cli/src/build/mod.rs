//! Turns a resolved [`Config`] into decorated chains (one per route) and a health view of
//! their links.
//!
//! Each provider is decorated once, and every route that names it gets the same link: one
//! breaker, one rate limiter and one health record per provider, so an outage seen through one
//! route makes the others skip that provider too. The routes sit behind one
//! [`RouteSwitch`] (see [`routing`]), and the tenant budgets and each key's limits wrap that
//! switch, so they count a tenant's or a key's calls on every route.
//!
//! Every cloud link gets the recommended stack from `ripcord-resilience` (outermost first):
//! health → breaker → retry → rate limit → adapter. The local model gets a breaker but no retry
//! by default (its failures — a missing file, a shape mismatch — don't go away by waiting).
//!
//! `[budget]` puts per-tenant token budgets around the routes ([`Built::model`]): a call is
//! charged once, whichever link serves it.
//!
//! With `[state] backend = "redis"` (feature `redis`), each link's breaker and rate limit are
//! the shared ones from `ripcord-redis`, keyed by the provider's configured `name` so every
//! replica with the same config shares them, and so is the tenant budget (scope `chain`). The connection is opened lazily: building does no
//! I/O and succeeds while Redis is down (the links then run on local state until it is back).
//! The health snapshot of such a link carries no breaker (the breaker's state is in Redis, and
//! the local fallback breaker's would be misleading); `/readyz` reports the backend instead.
//! Local-model links keep local state (each replica runs its own model), a
//! [`BuildHooks::breaker_listener`] sees local breakers only, and an active prober of a shared
//! link updates its health but cannot move the shared breaker to half-open early.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ripcord_core::{
    Capabilities, Chain, ChatModel, ChatRequest, ChatResponse, Context, EmbeddingModel, Error,
    Locality, ModelId, Result, StaticReply, StreamPolicy,
};
use ripcord_resilience::{
    BreakerListener, BreakerState, HealthHandle, HealthStatus, Prober, RedactPolicy,
};
use serde_json::{Value, json};

use crate::config::{Config, GatewayKey, ProviderKind, Route};
use crate::routing::{self, RouteSwitch, SubTenants};

mod adapters;
pub mod admin;
pub mod budget_accounts;
mod decorate;
mod policies;
mod pool;
pub mod reuse;
mod state;
#[cfg(feature = "redis")]
mod state_redis;
pub mod status_watch;

use adapters::{Clients, adapter, embedding_chain, model_name};
use decorate::{decorate, key_limited};

/// A link that cannot be built (e.g. the local model's files are missing): every call fails
/// with the build error, so the chain moves on and the provenance says why.
#[derive(Debug)]
pub struct Unavailable {
    id: ModelId,
    caps: Capabilities,
    error: Error,
}

#[async_trait]
impl ChatModel for Unavailable {
    fn id(&self) -> &ModelId {
        &self.id
    }
    fn capabilities(&self) -> &Capabilities {
        &self.caps
    }
    async fn chat(&self, _req: &ChatRequest, _ctx: &Context) -> Result<ChatResponse> {
        Err(self.error.clone())
    }
}

/// One route, built: its chain over the shared links.
#[derive(Debug, Clone)]
pub struct BuiltRoute {
    /// Its name.
    pub name: String,
    /// More names for it.
    pub aliases: Vec<String>,
    /// Its chain (the links are shared with the other routes that name the same providers).
    pub chain: Chain,
    /// Its providers' names, in order.
    pub links: Vec<String>,
    /// Its deadline (to first content, and of whole non-streamed calls).
    pub deadline: Duration,
    /// The bound of its streams after their first content.
    pub stream_max: Duration,
    /// Whether it ends with a static reply.
    pub static_reply: bool,
}

/// The built routes and what `/readyz` and `check-config` show about them.
#[derive(Debug, Clone)]
pub struct Built {
    /// The default route's chain.
    pub chain: Chain,
    /// What callers call: every route behind one [`RouteSwitch`] (the route comes from the
    /// call's context, [`routing::Route`]; the default route otherwise), inside the tenant
    /// budgets when `[budget]` is configured.
    pub model: Arc<dyn ChatModel>,
    /// The routes, in config order.
    pub routes: Vec<BuiltRoute>,
    /// Per gateway key (in the config's order): the model behind the key's own `rpm`/`tpm`
    /// limits, or `None` for a key without limits.
    pub key_limits: Vec<Option<Arc<dyn ChatModel>>>,
    /// What the keys kept in the store are made into (their limits and budget).
    pub key_limiter: crate::gateway::store_keys::KeyLimiter,
    /// The accounts of the store keys' own budgets (`budget_tokens`), in this process, and the
    /// window (or period) they count over.
    pub key_budgets: (
        (u64, Option<ripcord_resilience::BudgetPeriod>),
        Arc<dyn ripcord_resilience::BudgetStore>,
    ),
    /// The embedding chain, when `[embeddings]` is configured.
    pub embeddings: Option<Arc<dyn EmbeddingModel>>,
    /// Health handles per provider (each once, however many routes use it), in the order of
    /// [`Config::chain`].
    pub health: Vec<HealthHandle>,
    /// The pooled providers' handles (each deployment's state, in flight, latency, cooldown),
    /// in the order of [`Config::chain`].
    pub pools: Vec<ripcord_resilience::PoolHandle>,
    /// Notes for stderr (links that could not be built, and why).
    pub notes: Vec<String>,
    /// Active health probers (`[providers.probe]`); probing stops when the last clone is dropped.
    pub probers: Arc<Vec<Arc<Prober>>>,
    /// Each provider's link as a reload may keep it ([`rebuild`]).
    pub kept: BTreeMap<String, reuse::KeptLink>,
    /// Each link's operator switches (breaker reset, disable / enable).
    pub switches: admin::Switches,
    /// The pollers of the vendors' status pages (`[providers.status_page]`), in the order of
    /// [`Config::chain`]; polling stops when the last clone is dropped.
    pub vendor_watches: Arc<Vec<Arc<status_watch::VendorWatch>>>,
    /// The tenants' budget accounts `/metrics` shows, when `[budget]` is configured.
    pub budget_accounts: Option<Arc<budget_accounts::BudgetAccounts>>,
    /// Where the policies keep their state (`[state]`).
    state: Arc<dyn state::StateStore>,
}

impl Built {
    /// Per-link health as JSON (breaker state, error rate, latency), each provider once, and
    /// per route the state of each of its links (by name, without the counters, so a link two
    /// routes share is not counted twice).
    pub fn readiness(&self) -> Value {
        let snapshots: Vec<_> = self.health.iter().map(HealthHandle::snapshot).collect();
        let links: Vec<Value> = snapshots
            .iter()
            .map(|s| serde_json::to_value(s).unwrap_or(Value::Null))
            .collect();
        let routes: Vec<Value> = self
            .routes
            .iter()
            .map(|r| {
                let mut usable = 0;
                let per_link: Vec<Value> = r
                    .links
                    .iter()
                    .map(|name| {
                        let snap = snapshots.iter().find(|s| &*s.link == name.as_str());
                        let status = snap.map(|s| s.status);
                        let breaker = snap.and_then(|s| s.breaker.as_ref()).map(|b| b.state);
                        if status != Some(HealthStatus::Unhealthy) {
                            usable += 1;
                        }
                        json!({"link": name, "status": status, "breaker": breaker})
                    })
                    .collect();
                let status = match (usable, r.static_reply) {
                    (0, true) => "static_only",
                    (0, false) => "unavailable",
                    (n, _) if n == r.links.len() => "ready",
                    _ => "degraded",
                };
                json!({"route": r.name, "aliases": r.aliases, "status": status, "links": per_link})
            })
            .collect();
        // Not ready when every link of every route is refused by its open breaker: nothing
        // this process could call would be tried.
        let all_open = self.routes.iter().all(|r| {
            r.links.iter().all(|name| {
                snapshots
                    .iter()
                    .find(|s| &*s.link == name.as_str())
                    .and_then(|s| s.breaker.as_ref())
                    .is_some_and(|b| b.state == BreakerState::Open)
            })
        }) && self.routes.iter().any(|r| !r.links.is_empty());
        let status = if all_open { "unavailable" } else { "ready" };
        let pools: Vec<Value> = self
            .pools
            .iter()
            .map(|p| serde_json::to_value(p.snapshot()).unwrap_or(Value::Null))
            .collect();
        json!({"status": status, "links": links, "routes": routes, "pools": pools, "state": self.state_report()})
    }

    /// The model for route number `index` (what `ripcord chat --route` calls): the shared
    /// model, pinned to that route.
    pub fn route_model(&self, index: usize) -> Option<Arc<dyn ChatModel>> {
        (index < self.routes.len())
            .then(|| Arc::new(routing::Pinned::new(Arc::clone(&self.model), index)) as _)
    }

    /// Where the links' breaker and rate-limit state lives, and whether Redis is reachable.
    pub fn state_report(&self) -> Value {
        self.state.report()
    }

    /// Whether the shared state answers (waiting for its first connection); `None` when the
    /// state is this process's.
    pub async fn state_ready(&self) -> Option<bool> {
        self.state.ready().await
    }

    /// The Redis state underneath, under `[state] backend = "redis"`.
    #[cfg(feature = "redis")]
    pub fn redis(&self) -> Option<&ripcord_redis::RedisState> {
        self.state.redis()
    }
}

fn config_error(e: impl std::fmt::Display) -> Error {
    Error::new(ripcord_core::ErrorKind::InvalidRequest, e.to_string())
}

/// Wraps a link's model at one point of its decoration stack (link name, model) → model.
pub type Wrap = Arc<dyn Fn(&str, Arc<dyn ChatModel>) -> Arc<dyn ChatModel> + Send + Sync>;

/// Optional hooks into the chain being built, for tools that observe or perturb it
/// (`cargo xtask chaos`, benchmarks). The default adds nothing.
#[derive(Clone, Default)]
pub struct BuildHooks {
    /// Receives every breaker's transitions and rejections.
    pub breaker_listener: Option<Arc<dyn BreakerListener>>,
    /// Wraps each adapter before any policy (sees every wire attempt).
    pub around_adapter: Option<Wrap>,
    /// Wraps each link just inside its breaker (sees every call the breaker admits).
    pub inside_breaker: Option<Wrap>,
}

impl std::fmt::Debug for BuildHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuildHooks")
            .field("breaker_listener", &self.breaker_listener.is_some())
            .field("around_adapter", &self.around_adapter.is_some())
            .field("inside_breaker", &self.inside_breaker.is_some())
            .finish()
    }
}

/// Builds the chain. Links that cannot be built become [`Unavailable`] links with a note, so the
/// rest of the chain (and the static reply) still serve.
///
/// # Errors
///
/// Invalid policy settings, or a chain that cannot be assembled.
pub fn build(config: &Config) -> Result<Built> {
    build_with(config, &BuildHooks::default())
}

/// [`build`] with hooks.
///
/// # Errors
///
/// As [`build`].
pub fn build_with(config: &Config, hooks: &BuildHooks) -> Result<Built> {
    build_reusing(config, hooks, None)
}

/// [`build`] for a reload: every provider whose settings are unchanged since `previous` was
/// built keeps its link, with its breaker, limiter, health record, cache and prober, so a
/// reload does not forget an outage; changed and new providers are built afresh, and removed
/// ones go when the last call holding them ends.
///
/// # Errors
///
/// As [`build`].
pub fn rebuild(config: &Config, previous: &Built) -> Result<Built> {
    build_reusing(config, &BuildHooks::default(), Some(previous))
}

/// [`rebuild`] with hooks: the links it builds afresh get the same hooks the first build's got
/// (`cargo xtask chaos` reloads a chain it observes); kept links keep the hooks they were built
/// with.
///
/// # Errors
///
/// As [`build`].
pub fn rebuild_with(config: &Config, hooks: &BuildHooks, previous: &Built) -> Result<Built> {
    build_reusing(config, hooks, Some(previous))
}

fn build_reusing(config: &Config, hooks: &BuildHooks, previous: Option<&Built>) -> Result<Built> {
    let clients = Clients::default();
    let state = state::open(config)?;
    let shared = &*state;
    let mut health = Vec::new();
    let mut pools = Vec::new();
    let mut notes = Vec::new();
    let mut probers = Vec::new();
    let mut switches = admin::SwitchBoard::default();
    let redact = match &config.redaction {
        None => None,
        Some(r) => {
            let mut b = RedactPolicy::builder();
            if let Some(restore) = r.restore {
                b = b.restore(restore);
            }
            for c in &r.custom {
                b = b.custom(c.label.clone(), c.pattern.clone());
            }
            Some(b.build().map_err(config_error)?)
        }
    };
    // Each provider is decorated once and the same link goes into every route that names it:
    // one breaker, one rate limiter and one health record, so an outage seen through one route
    // protects the others.
    let mut links: BTreeMap<&str, Arc<dyn ChatModel>> = BTreeMap::new();
    let mut kept = BTreeMap::new();
    for p in &config.chain {
        // A half-open probe is bounded by the longest deadline among the routes using it.
        let deadline_ms = config
            .routes
            .iter()
            .filter(|r| r.spec.order.contains(&p.name))
            .map(|r| r.spec.deadline_ms)
            .max()
            .unwrap_or(ripcord_core::chain::DEFAULT_DEADLINE.as_millis() as u64);
        let fingerprint = reuse::fingerprint(config, p, deadline_ms);
        if let Some(k) = previous
            .and_then(|b| b.kept.get(&p.name))
            .filter(|k| k.fingerprint == fingerprint)
        {
            health.push(k.health.clone());
            probers.extend(k.prober.clone());
            switches.keep(&p.name, k.switch.clone());
            links.insert(p.name.as_str(), Arc::clone(&k.link));
            pools.extend(k.pool.clone());
            kept.insert(p.name.clone(), k.clone());
            continue;
        }
        let mut pool_handle = None;
        let built = match &p.pool {
            Some(settings) => pool::pooled(p, settings, &clients, shared).map(|(m, h)| {
                pools.push(h.clone());
                pool_handle = Some(h);
                m
            }),
            None => adapter(p, &clients),
        };
        let base = match built {
            Ok(m) => m,
            Err(e) => {
                notes.push(format!("provider {:?} is unavailable: {e}", p.name));
                let locality = if p.kind == ProviderKind::LocalOnnx {
                    Locality::Local
                } else {
                    Locality::cloud(p.kind.as_str())
                };
                Arc::new(Unavailable {
                    id: ModelId::new(p.name.clone(), model_name(p)),
                    caps: Capabilities::new(u32::MAX, u32::MAX).with_locality(locality),
                    error: e.with_provider(p.name.clone(), model_name(p)),
                })
            }
        };
        let base = policies::with_facts(p, base);
        let (link, h, prober, breaker) =
            decorate(p, base, hooks, redact.as_ref(), shared, deadline_ms)?;
        let (link, switch) = switches.switched(&p.name, breaker, link);
        let prober = prober.map(Arc::new);
        kept.insert(
            p.name.clone(),
            reuse::KeptLink {
                fingerprint,
                link: Arc::clone(&link),
                health: h.clone(),
                prober: prober.clone(),
                switch,
                pool: pool_handle,
            },
        );
        health.push(h);
        probers.extend(prober);
        links.insert(p.name.as_str(), link);
    }
    policies::hedged(config, &mut links)?;
    let switches = switches.done();
    let mut routes = Vec::with_capacity(config.routes.len());
    for route in &config.routes {
        routes.push(build_route(config, route, &links, &switches)?);
    }
    let vendor_watches = status_watch::start(config, &switches, &mut notes)?;
    let switch: Arc<dyn ChatModel> = Arc::new(RouteSwitch::new(
        routes
            .iter()
            .map(|r| Arc::new(r.chain.clone()) as Arc<dyn ChatModel>)
            .collect(),
    )?);
    let (model, budget_accounts) = match &config.budget {
        None => (switch, None),
        Some(budget) => {
            // A reload keeps what every account spent while the window stays the same.
            let kept = previous
                .and_then(|p| p.budget_accounts.as_ref())
                .and_then(|a| a.kept_for(budget));
            let (keep, keep_subs) = match kept {
                Some((tenants, subs)) => (Some(tenants), subs),
                None => (None, None),
            };
            // Sub-tenants (named by keys with `sub_tenants = true`) pay into their own account
            // inside their tenant's; other calls skip that inner account.
            let (inner, sub_view) = if config.gateway_keys.iter().any(|k| k.sub_tenants) {
                let (sub, view) =
                    shared.budgeted(Arc::clone(&switch), budget, "sub", None, keep_subs)?;
                (
                    Arc::new(SubTenants::new(sub, switch)) as Arc<dyn ChatModel>,
                    Some(view),
                )
            } else {
                (switch, None)
            };
            let (model, view) = shared.budgeted(inner, budget, "chain", None, keep)?;
            let accounts = budget_accounts::BudgetAccounts::new(config, view, sub_view);
            (model, Some(Arc::new(accounts)))
        }
    };
    let key_limits = config
        .gateway_keys
        .iter()
        .map(|k| key_limited(k, &model, shared))
        .collect::<Result<Vec<_>>>()?;
    // The accounts of the store keys' own budgets (in this process; under Redis they are shared
    // there instead).
    // A reload keeps them (what each key spent) while the window stays the same.
    let key_window = config.budget.as_ref().map_or(
        (
            ripcord_resilience::BudgetPolicy::default()
                .window()
                .as_secs(),
            None,
        ),
        |b| (b.window_s, b.period),
    );
    let key_budgets: Arc<dyn ripcord_resilience::BudgetStore> = match (previous, key_window) {
        (Some(p), w) if p.key_budgets.0 == w => Arc::clone(&p.key_budgets.1),
        (_, (_, Some(p))) => Arc::new(ripcord_resilience::PeriodBudgetStore::new(
            p,
            ripcord_resilience::system_wall_clock(),
        )),
        (_, (window_s, None)) => Arc::new(ripcord_resilience::LocalBudgetStore::new(
            Duration::from_secs(window_s),
            Arc::new(ripcord_resilience::TokioClock),
        )),
    };
    let key_limiter: crate::gateway::store_keys::KeyLimiter = {
        let model = Arc::clone(&model);
        let window = key_window;
        let accounts = Arc::clone(&key_budgets);
        let state = Arc::clone(&state);
        crate::gateway::store_keys::KeyLimiter::new(move |k: &GatewayKey, budget: Option<u64>| {
            decorate::store_key_limited(k, budget, window, &model, &*state, &accounts)
                .map_err(|e| e.to_string())
        })
    };
    let embeddings = match &config.embeddings {
        None => None,
        Some((providers, emb_model)) => Some(embedding_chain(
            providers,
            emb_model,
            &clients,
            config.default_route().map_or(
                ripcord_core::chain::DEFAULT_DEADLINE.as_millis() as u64,
                |r| r.spec.deadline_ms,
            ),
        )?),
    };
    let chain = routes
        .first()
        .map(|r| r.chain.clone())
        .ok_or_else(|| config_error("the config has no route"))?;
    Ok(Built {
        chain,
        model,
        routes,
        key_limits,
        key_limiter,
        key_budgets: (key_window, key_budgets),
        embeddings,
        health,
        pools,
        notes,
        probers: Arc::new(probers),
        switches,
        vendor_watches: Arc::new(vendor_watches),
        budget_accounts,
        kept,
        state,
    })
}

/// One route's chain over the shared links.
fn build_route(
    config: &Config,
    route: &Route,
    links: &BTreeMap<&str, Arc<dyn ChatModel>>,
    switches: &admin::Switches,
) -> Result<BuiltRoute> {
    let spec = &route.spec;
    let mut b = Chain::builder()
        .name(route.name.clone())
        .deadline(Duration::from_millis(spec.deadline_ms))
        .stream_max(Duration::from_millis(spec.stream_max_ms))
        .min_attempt(Duration::from_millis(spec.min_attempt_ms));
    for name in &spec.order {
        let link = links.get(name.as_str()).ok_or_else(|| {
            config_error(format!(
                "route {:?} names provider {name:?}, which the config does not define",
                route.name
            ))
        })?;
        b = b.link_arc(Arc::clone(link));
        if let Some(d) = switches.demotion(name) {
            b = b.demotion(d);
        }
        if let Some(p) = config.provider(name) {
            if let Some(ms) = p.timeouts.first_token_ms {
                b = b.first_token_limit(Duration::from_millis(ms));
            }
            if p.reserve_ms > 0 {
                b = b.reserve(Duration::from_millis(p.reserve_ms));
            }
        }
    }
    if let Some(text) = &spec.static_reply {
        let mut reply = StaticReply::new(text.clone());
        for (intent, t) in &spec.intent_replies {
            reply = reply.with_intent(intent.clone(), t.clone());
        }
        b = b.static_replies(reply);
    }
    for (kind, target) in &spec.routes {
        b = b.route(*kind, target.clone());
    }
    if spec.stream_restart {
        b = b.stream_policy(StreamPolicy::Restart);
    }
    if spec.stream_continue {
        b = b.stream_policy(StreamPolicy::Continue);
    }
    if spec.stream_holdback_ms > 0 {
        b = b.stream_holdback(Duration::from_millis(spec.stream_holdback_ms));
    }
    if spec.trim_oldest {
        b = b.trim(ripcord_core::chain::Trim::Oldest);
    }
    if let Some(n) = &spec.fallback_notice {
        b = b.fallback_notice(n.clone());
    }
    b = b
        .strategy(spec.strategy.clone())
        .prefer_independent_fallbacks(spec.independent_fallbacks);
    Ok(BuiltRoute {
        name: route.name.clone(),
        aliases: route.aliases.clone(),
        chain: b.build().map_err(Error::from)?,
        links: spec.order.clone(),
        deadline: Duration::from_millis(spec.deadline_ms),
        stream_max: Duration::from_millis(spec.stream_max_ms),
        static_reply: spec.static_reply.is_some(),
    })
}
