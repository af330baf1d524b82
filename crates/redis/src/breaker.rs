//! [`SharedBreaker`]: a circuit breaker whose state lives in Redis, shared by every replica.
//!
//! Keys (all with TTLs): `ripcord:v1:{link}:breaker:fails` (consecutive counted failures of
//! logical calls), `…:breaker:open` (the open-until instant, Redis server time in ms; it
//! outlives open-until by `state_ttl` so replicas see half-open), `…:breaker:trips` (trip
//! count) and `…:breaker:probe` (the single half-open probe permit, taken with
//! `SET probe token NX PX probe_timeout` inside the admission script, so a dead prober cannot
//! wedge the breaker: the permit expires).
//!
//! Semantics mirror `ripcord_resilience::Breaker` with a consecutive-failure policy: counted
//! failures trip it after `consecutive_failures`; open refuses with
//! [`ErrorKind::CircuitOpen`] and a `retry_after` until open-until; then ONE caller across all
//! replicas probes (bounded by `probe_timeout`) while the others are refused; a successful
//! probe closes it, a failed one re-opens it. Caller-side kinds never count; `Auth` trips at
//! once for 5 minutes (resilience's defaults, overridable per kind).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use redis::Script;
use ripcord_core::{
    Capabilities, ChatModel, ChatRequest, ChatResponse, ChatStream, Context, Error, ErrorKind,
    ModelId, Result, TimeoutPhase,
};
use ripcord_resilience::{Breaker, BreakerLayer, KindAction};

use crate::state::{RedisState, config_error, key, tag};

const NOW_MS: &str = "local t = redis.call('TIME')\n\
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n";

/// KEYS: open, probe, fails. ARGV: token, probe_timeout_ms.
/// Returns {0,n} closed with n counted failures, {1,ms} open for ms, {2,0} probe permit
/// taken, {3,ms} probe running.
const ADMIT: &str = "local open = redis.call('GET', KEYS[1])\n\
if not open then return {0, tonumber(redis.call('GET', KEYS[3]) or 0)} end\n\
open = tonumber(open)\n\
if now < open then return {1, open - now} end\n\
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return {2, 0} end\n\
local ttl = redis.call('PTTL', KEYS[2])\n\
if ttl < 0 then ttl = 0 end\n\
return {3, ttl}\n";

/// KEYS: fails, open, trips, probe. ARGV: threshold, open_ms, state_ttl_ms, token, trip_now_ms.
/// Returns 1 when this failure tripped the breaker.
const FAILURE: &str = "local function trip(ms)\n\
  redis.call('SET', KEYS[2], now + ms, 'PX', ms + tonumber(ARGV[3]))\n\
  redis.call('INCR', KEYS[3])\n\
  redis.call('PEXPIRE', KEYS[3], 86400000)\n\
  redis.call('DEL', KEYS[1])\n\
  return 1\n\
end\n\
if ARGV[4] ~= '' then\n\
  if redis.call('GET', KEYS[4]) == ARGV[4] then\n\
    redis.call('DEL', KEYS[4])\n\
    local ms = tonumber(ARGV[5])\n\
    if ms == 0 then ms = tonumber(ARGV[2]) end\n\
    return trip(ms)\n\
  end\n\
  return 0\n\
end\n\
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end\n\
if tonumber(ARGV[5]) > 0 then return trip(tonumber(ARGV[5])) end\n\
local n = redis.call('INCR', KEYS[1])\n\
redis.call('PEXPIRE', KEYS[1], ARGV[3])\n\
if n >= tonumber(ARGV[1]) then return trip(tonumber(ARGV[2])) end\n\
return 0\n";

/// KEYS: fails, open, probe. ARGV: token. Returns 1 when a probe closed the breaker.
const SUCCESS: &str = "if ARGV[1] ~= '' then\n\
  if redis.call('GET', KEYS[3]) == ARGV[1] then\n\
    redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])\n\
    return 1\n\
  end\n\
  return 0\n\
end\n\
redis.call('DEL', KEYS[1])\n\
return 0\n";

/// KEYS: probe. ARGV: token. Gives a probe permit back without a verdict.
const RELEASE: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end\n\
return 0\n";

#[derive(Debug)]
struct Scripts {
    admit: Script,
    failure: Script,
    success: Script,
    release: Script,
}

impl Scripts {
    fn new() -> Self {
        Scripts {
            admit: Script::new(&format!("{NOW_MS}{ADMIT}")),
            failure: Script::new(&format!("{NOW_MS}{FAILURE}")),
            success: Script::new(SUCCESS),
            release: Script::new(RELEASE),
        }
    }
}

/// The settings of a [`SharedBreaker`]; see the module docs for the semantics.
#[derive(Debug, Clone)]
pub struct SharedBreakerConfig {
    consecutive_failures: u32,
    open_for: Duration,
    probe_timeout: Duration,
    half_open_retry_hint: Duration,
    state_ttl: Duration,
    kinds: BTreeMap<ErrorKind, KindAction>,
}

impl Default for SharedBreakerConfig {
    fn default() -> Self {
        SharedBreakerConfig {
            consecutive_failures: 5,
            open_for: Duration::from_secs(60),
            probe_timeout: Duration::from_secs(30),
            half_open_retry_hint: Duration::from_secs(1),
            state_ttl: Duration::from_secs(600),
            kinds: BTreeMap::new(),
        }
    }
}

impl SharedBreakerConfig {
    /// Trips after `n` consecutive counted failures across all replicas (default 5).
    pub fn consecutive_failures(mut self, n: u32) -> Self {
        self.consecutive_failures = n;
        self
    }

    /// How long the breaker stays open (default 60 s).
    pub fn open_for(mut self, d: Duration) -> Self {
        self.open_for = d;
        self
    }

    /// The longest a half-open probe may take; also the TTL of the probe permit (default 30 s).
    pub fn probe_timeout(mut self, d: Duration) -> Self {
        self.probe_timeout = d;
        self
    }

    /// The `retry_after` of a call refused because another replica's probe is out (default
    /// 1 s, as the local breaker's). Not the probe permit's remaining lifetime: a chain would
    /// wait that long for the link and then call it with its deadline nearly spent, time out,
    /// and trip the breaker again.
    pub fn half_open_retry_hint(mut self, d: Duration) -> Self {
        self.half_open_retry_hint = d;
        self
    }

    /// How long breaker state lingers without activity: the failure counter's TTL, and how
    /// long half-open is remembered after open-until (default 10 min; then it reads closed).
    pub fn state_ttl(mut self, d: Duration) -> Self {
        self.state_ttl = d;
        self
    }

    /// Overrides what failures of `kind` do (as in `ripcord_resilience::BreakerBuilder::kind`).
    pub fn kind(mut self, kind: ErrorKind, action: KindAction) -> Self {
        self.kinds.insert(kind, action);
        self
    }

    fn local_layer(&self) -> Result<BreakerLayer> {
        let mut b = BreakerLayer::builder()
            .consecutive_failures(self.consecutive_failures)
            .open_for(self.open_for)
            .probe_timeout(self.probe_timeout)
            .half_open_retry_hint(self.half_open_retry_hint);
        for (k, a) in &self.kinds {
            b = b.kind(*k, *a);
        }
        b.build().map_err(Error::from)
    }

    fn validate(&self) -> Result<()> {
        let bad = |s, r| Err(config_error("shared_breaker", s, r));
        if self.consecutive_failures == 0 {
            return bad("consecutive_failures", "must be at least 1");
        }
        if self.open_for < Duration::from_millis(1) {
            return bad("open_for", "must be at least 1 ms");
        }
        if self.probe_timeout < Duration::from_millis(1) {
            return bad("probe_timeout", "must be at least 1 ms");
        }
        if self.half_open_retry_hint < Duration::from_millis(1) {
            return bad("half_open_retry_hint", "must be at least 1 ms");
        }
        if self.state_ttl < Duration::from_millis(1) {
            return bad("state_ttl", "must be at least 1 ms");
        }
        Ok(())
    }
}

/// How a call was admitted.
#[derive(Debug, PartialEq, Eq)]
enum Admission {
    /// Closed, with `true` when failures were counted (a success must reset them).
    Closed(bool),
    Probe(String),
}

/// What a finished call tells the breaker.
enum Verdict {
    Success,
    Ignore,
    Failure(Duration),
}

/// A circuit breaker shared through Redis by every replica (see the module docs).
///
/// When Redis is unreachable it serves calls through a local `ripcord_resilience::Breaker`
/// with the same settings around the same model.
#[derive(Debug)]
pub struct SharedBreaker<M> {
    inner: Arc<M>,
    local: Breaker<Arc<M>>,
    state: RedisState,
    config: SharedBreakerConfig,
    local_layer: BreakerLayer,
    scripts: Scripts,
    keys: [String; 4],
}

impl<M: ChatModel> SharedBreaker<M> {
    /// Wraps `inner`; its link name (`id().name`) names the shared state.
    ///
    /// # Errors
    ///
    /// `InvalidRequest` naming the setting when the config cannot work.
    pub fn new(inner: M, state: RedisState, config: SharedBreakerConfig) -> Result<Self> {
        config.validate()?;
        let local_layer = config.local_layer()?;
        let inner = Arc::new(inner);
        let link = inner.id().name.clone();
        Ok(SharedBreaker {
            local: local_layer.layer(inner.clone()),
            inner,
            state,
            config,
            local_layer,
            scripts: Scripts::new(),
            keys: [
                key(&link, "breaker:fails"),
                key(&link, "breaker:open"),
                key(&link, "breaker:trips"),
                key(&link, "breaker:probe"),
            ],
        })
    }

    /// The wrapped model.
    pub fn get_ref(&self) -> &M {
        &self.inner
    }

    /// The local fallback breaker (used while Redis is unreachable).
    pub fn local(&self) -> &Breaker<Arc<M>> {
        &self.local
    }

    fn refusal(&self, after: Duration, probing: bool) -> Error {
        let message = if probing {
            format!(
                "circuit breaker half-open (shared): another replica is probing; retry in {} ms",
                after.as_millis()
            )
        } else {
            format!(
                "circuit breaker open (shared); calls are re-admitted in {} ms",
                after.as_millis()
            )
        };
        tag(
            Error::new(ErrorKind::CircuitOpen, message).with_retry_after(after),
            self.inner.id(),
        )
    }

    /// `Ok(None)`: Redis is down, use the local breaker.
    async fn admit(&self, ctx: &Context) -> Result<Option<Admission>> {
        ctx.check().map_err(|e| tag(e, self.inner.id()))?;
        let token = format!("{:016x}", rand::random::<u64>());
        let probe_ms = ms(self.config.probe_timeout).to_string();
        let reply: Option<(i64, i64)> = self
            .state
            .eval(
                &self.scripts.admit,
                &[&self.keys[1], &self.keys[3], &self.keys[0]],
                &[&token, &probe_ms],
            )
            .await;
        let Some((code, wait)) = reply else {
            return Ok(None);
        };
        let after = Duration::from_millis(u64::try_from(wait).unwrap_or(0).max(1));
        match code {
            0 => Ok(Some(Admission::Closed(wait > 0))),
            2 => Ok(Some(Admission::Probe(token))),
            1 => Err(self.refusal(after, false)),
            _ => Err(self.refusal(after.min(self.config.half_open_retry_hint), true)),
        }
    }

    fn verdict(
        &self,
        result: &std::result::Result<(), &Error>,
        ctx: &Context,
        budget: Option<Duration>,
    ) -> Verdict {
        let e = match result {
            Ok(()) => return Verdict::Success,
            Err(e) => e,
        };
        // The same rule as the local breaker: only a failure charged to the vendor counts.
        if e.fault_in(ctx, budget, false) != ripcord_core::Fault::Vendor {
            return Verdict::Ignore;
        }
        let kind = match e.kind() {
            ErrorKind::Cancelled => return Verdict::Ignore,
            ErrorKind::DeadlineExceeded if ctx.is_cancelled() => return Verdict::Ignore,
            ErrorKind::DeadlineExceeded => ErrorKind::Timeout,
            k => k,
        };
        let action = self
            .config
            .kinds
            .get(&kind)
            .copied()
            .unwrap_or_else(|| self.local_layer.action(kind));
        match action {
            KindAction::Ignore => Verdict::Ignore,
            KindAction::TripFor(d) => Verdict::Failure(d.max(Duration::from_millis(1))),
            _ => Verdict::Failure(Duration::ZERO),
        }
    }

    async fn record(&self, admission: &Admission, verdict: Verdict) {
        let token = match admission {
            // The success path stays one round trip when nothing needs resetting.
            Admission::Closed(false) if matches!(verdict, Verdict::Success) => return,
            Admission::Closed(_) => "",
            Admission::Probe(t) => t.as_str(),
        };
        let k = &self.keys;
        match verdict {
            Verdict::Success => {
                let closed: Option<i64> = self
                    .state
                    .eval(&self.scripts.success, &[&k[0], &k[1], &k[3]], &[token])
                    .await;
                if closed == Some(1) {
                    tracing::info!(link = %self.inner.id().name, "ripcord.shared_breaker_closed");
                }
            }
            Verdict::Ignore => {
                if !token.is_empty() {
                    let _: Option<i64> = self
                        .state
                        .eval(&self.scripts.release, &[&k[3]], &[token])
                        .await;
                }
            }
            Verdict::Failure(trip_now) => {
                let args = [
                    self.config.consecutive_failures.to_string(),
                    ms(self.config.open_for).to_string(),
                    ms(self.config.state_ttl).to_string(),
                    token.to_owned(),
                    ms(trip_now).to_string(),
                ];
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let tripped: Option<i64> = self
                    .state
                    .eval(&self.scripts.failure, &[&k[0], &k[1], &k[2], &k[3]], &args)
                    .await;
                if tripped == Some(1) {
                    tracing::warn!(link = %self.inner.id().name, "ripcord.shared_breaker_opened");
                }
            }
        }
    }

    async fn guarded<T, F>(&self, admission: &Admission, ctx: &Context, fut: F) -> Result<T>
    where
        F: std::future::Future<Output = Result<T>>,
    {
        let budget = ctx.remaining();
        let result = match admission {
            Admission::Probe(_) => {
                let limit = self.config.probe_timeout;
                match tokio::time::timeout(limit, fut).await {
                    Ok(r) => r,
                    Err(_) => Err(tag(
                        Error::timeout(
                            TimeoutPhase::Total,
                            "the half-open probe outlasted probe_timeout",
                        ),
                        self.inner.id(),
                    )),
                }
            }
            Admission::Closed(_) => fut.await,
        };
        let verdict = self.verdict(&result.as_ref().map(|_| ()), ctx, budget);
        self.record(admission, verdict).await;
        result
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[async_trait]
impl<M: ChatModel> ChatModel for SharedBreaker<M> {
    fn id(&self) -> &ModelId {
        self.inner.id()
    }

    fn capabilities(&self) -> &Capabilities {
        self.inner.capabilities()
    }

    async fn chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        match self.admit(ctx).await? {
            Some(admission) => {
                self.guarded(&admission, ctx, self.inner.chat(req, ctx))
                    .await
            }
            None => {
                self.state.note_local_call();
                self.local.chat(req, ctx).await
            }
        }
    }

    /// Streams are judged on opening: a stream that opens counts as a success.
    async fn stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        match self.admit(ctx).await? {
            Some(admission) => {
                self.guarded(&admission, ctx, self.inner.stream(req, ctx))
                    .await
            }
            None => {
                self.state.note_local_call();
                self.local.stream(req, ctx).await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_settings_are_refused_naming_the_setting() {
        let e = SharedBreakerConfig::default()
            .consecutive_failures(0)
            .validate()
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidRequest);
        assert!(
            e.message().contains("shared_breaker.consecutive_failures"),
            "{e}"
        );
        let e = SharedBreakerConfig::default()
            .probe_timeout(Duration::ZERO)
            .validate()
            .unwrap_err();
        assert!(e.message().contains("probe_timeout"), "{e}");
        assert!(SharedBreakerConfig::default().validate().is_ok());
    }

    #[test]
    fn the_local_fallback_mirrors_the_kind_actions() {
        let c = SharedBreakerConfig::default().kind(ErrorKind::RateLimited, KindAction::Ignore);
        let local = c.local_layer().unwrap();
        assert_eq!(local.action(ErrorKind::RateLimited), KindAction::Ignore);
        assert_eq!(local.action(ErrorKind::ServerError), KindAction::Count);
        assert_eq!(local.action(ErrorKind::InvalidRequest), KindAction::Ignore);
    }
}
