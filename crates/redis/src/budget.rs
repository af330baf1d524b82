//! [`SharedBudget`]: per-tenant token budgets over a fixed window, shared through Redis.
//!
//! Each tenant has one hash `ripcord:v1:{scope}:budget:<tenant>` holding the current window's
//! index and the tokens used in it, expiring two windows after its last use. A call reserves
//! its nominal tokens (prompt estimate + `max_tokens`, or the model's largest output) in a Lua
//! script that refuses with [`ErrorKind::BudgetExhausted`] (and a `retry_after` until the window
//! turns) when they do not fit; afterwards the reservation is replaced by the usage the vendor
//! reported (HINCRBY of the difference; a failed call gives it back). Windows are fixed, aligned
//! on Redis server time (resilience's local budget slides; the fallback uses it).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use redis::Script;
use ripcord_core::{
    Capabilities, ChatModel, ChatRequest, ChatResponse, ChatStream, Context, Error, ErrorKind,
    ModelId, Result, tokens,
};
use ripcord_resilience::{Budget, BudgetLayer};

use crate::state::{RedisState, config_error, key, tag};

const ANONYMOUS: &str = "<anonymous>";

/// KEYS: tenant. ARGV: window_ms, limit, need.
/// Returns {0,window} reserved, {1,wait_ms} exhausted, {2,used} larger than the whole budget.
const RESERVE: &str = "local t = redis.call('TIME')\n\
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n\
local window = tonumber(ARGV[1])\n\
local idx = math.floor(now / window)\n\
local limit = tonumber(ARGV[2])\n\
local need = tonumber(ARGV[3])\n\
if need > limit then return {2, 0} end\n\
local used = 0\n\
if tonumber(redis.call('HGET', KEYS[1], 'w') or -1) == idx then\n\
  used = tonumber(redis.call('HGET', KEYS[1], 'used') or 0)\n\
else\n\
  redis.call('HSET', KEYS[1], 'w', string.format('%.0f', idx), 'used', 0)\n\
end\n\
redis.call('PEXPIRE', KEYS[1], window * 2)\n\
if used + need > limit then return {1, (idx + 1) * window - now} end\n\
redis.call('HINCRBY', KEYS[1], 'used', need)\n\
return {0, idx}\n";

/// KEYS: tenant. ARGV: window index, delta. Applies the delta if the window is still current.
const SETTLE: &str = "if redis.call('HGET', KEYS[1], 'w') == ARGV[1] then\n\
  local u = redis.call('HINCRBY', KEYS[1], 'used', ARGV[2])\n\
  if u < 0 then redis.call('HSET', KEYS[1], 'used', 0) end\n\
end\n\
return 0\n";

/// The settings of a [`SharedBudget`].
#[derive(Debug, Clone)]
pub struct SharedBudgetConfig {
    default_limit: u64,
    window: Duration,
    per_tenant: Vec<(String, u64)>,
    budget_anonymous: bool,
    scope: Option<String>,
    replicas: u32,
}

impl Default for SharedBudgetConfig {
    fn default() -> Self {
        SharedBudgetConfig {
            default_limit: 1_000_000,
            window: Duration::from_secs(3600),
            per_tenant: Vec::new(),
            budget_anonymous: false,
            scope: None,
            replicas: 1,
        }
    }
}

impl SharedBudgetConfig {
    /// Tokens each tenant may use per window (default 1,000,000).
    pub fn tokens_per_window(mut self, n: u64) -> Self {
        self.default_limit = n;
        self
    }

    /// The window (default one hour; at least 1 s).
    pub fn window(mut self, d: Duration) -> Self {
        self.window = d;
        self
    }

    /// A different limit for one tenant.
    pub fn tenant(mut self, tenant: impl Into<String>, tokens_per_window: u64) -> Self {
        self.per_tenant.push((tenant.into(), tokens_per_window));
        self
    }

    /// Also budget calls without a tenant, as one shared anonymous tenant (default: not).
    pub fn budget_anonymous(mut self, yes: bool) -> Self {
        self.budget_anonymous = yes;
        self
    }

    /// The namespace of the accounts (default: the link name). Give several links the same
    /// scope to charge a tenant once across them.
    pub fn scope(mut self, scope: impl Into<String>) -> Self {
        self.scope = Some(scope.into());
        self
    }

    /// How many replicas share the budget (default 1): while Redis is unreachable each
    /// replica grants `limit / replicas` locally.
    pub fn replicas(mut self, n: u32) -> Self {
        self.replicas = n;
        self
    }

    /// The token limit per window for a tenant.
    pub fn limit_for(&self, tenant: &str) -> u64 {
        self.per_tenant
            .iter()
            .rev()
            .find(|(t, _)| t == tenant)
            .map_or(self.default_limit, |(_, n)| *n)
    }

    fn validate(&self) -> Result<()> {
        if self.window < Duration::from_secs(1) {
            return Err(config_error(
                "shared_budget",
                "window",
                "must be at least 1 s",
            ));
        }
        if self.replicas == 0 {
            return Err(config_error(
                "shared_budget",
                "replicas",
                "must be at least 1",
            ));
        }
        Ok(())
    }

    fn local_layer(&self) -> Result<BudgetLayer> {
        let share = |n: u64| n / u64::from(self.replicas);
        let mut b = BudgetLayer::builder()
            .tokens_per_window(share(self.default_limit))
            .window(self.window)
            .budget_anonymous(self.budget_anonymous);
        for (t, n) in &self.per_tenant {
            b = b.tenant(t.clone(), share(*n));
        }
        b.build().map_err(Error::from)
    }
}

/// A reservation in a tenant's shared account.
#[derive(Debug)]
struct Hold {
    key: String,
    window: i64,
    reserved: u64,
}

/// Per-tenant token budgets shared through Redis by every replica (see the module docs).
///
/// While Redis is unreachable it serves calls through a local `ripcord_resilience::Budget`
/// granting each replica its share.
#[derive(Debug)]
pub struct SharedBudget<M> {
    inner: Arc<M>,
    local: Budget<Arc<M>>,
    state: RedisState,
    config: SharedBudgetConfig,
    scope: String,
    reserve: Script,
    settle: Script,
}

impl<M: ChatModel> SharedBudget<M> {
    /// Wraps `inner`.
    ///
    /// # Errors
    ///
    /// `InvalidRequest` naming the setting when the config cannot work.
    pub fn new(inner: M, state: RedisState, config: SharedBudgetConfig) -> Result<Self> {
        config.validate()?;
        let local = config.local_layer()?;
        let inner = Arc::new(inner);
        let scope = config
            .scope
            .clone()
            .unwrap_or_else(|| inner.id().name.to_string());
        Ok(SharedBudget {
            local: local.layer(inner.clone()),
            inner,
            state,
            config,
            scope,
            reserve: Script::new(RESERVE),
            settle: Script::new(SETTLE),
        })
    }

    /// The wrapped model.
    pub fn get_ref(&self) -> &M {
        &self.inner
    }

    /// The local fallback budget (used while Redis is unreachable).
    pub fn local(&self) -> &Budget<Arc<M>> {
        &self.local
    }

    /// `Ok(Err(()))`: Redis is down, use the local budget.
    async fn take(
        &self,
        req: &ChatRequest,
        ctx: &Context,
    ) -> Result<std::result::Result<Option<Hold>, ()>> {
        let tenant = match ctx.tenant() {
            Some(t) => t,
            None if self.config.budget_anonymous => ANONYMOUS,
            None => return Ok(Ok(None)),
        };
        let output = req
            .max_tokens
            .unwrap_or(self.inner.capabilities().max_output_tokens);
        let need = u64::from(tokens::estimate_request(req)) + u64::from(output);
        let limit = self.config.limit_for(tenant);
        let key = key(&self.scope, &format!("budget:{tenant}"));
        let args = [
            u64::try_from(self.config.window.as_millis())
                .unwrap_or(u64::MAX)
                .to_string(),
            limit.to_string(),
            need.to_string(),
        ];
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let reply: Option<(i64, i64)> = self.state.eval(&self.reserve, &[&key], &args).await;
        let Some((code, value)) = reply else {
            return Ok(Err(()));
        };
        let refuse = |message: String, after: Option<Duration>| {
            tracing::info!(link = %self.inner.id().name, tenant, "ripcord.shared_budget_exhausted");
            let mut e = Error::new(ErrorKind::BudgetExhausted, message);
            if let Some(after) = after {
                e = e.with_retry_after(after);
            }
            tag(e, self.inner.id())
        };
        match code {
            0 => Ok(Ok(Some(Hold {
                key,
                window: value,
                reserved: need,
            }))),
            1 => Err(refuse(
                format!(
                    "tenant {tenant:?} has no room for {need} more tokens of its shared budget of {limit}"
                ),
                Some(Duration::from_millis(
                    u64::try_from(value).unwrap_or(0).max(1),
                )),
            )),
            _ => Err(refuse(
                format!(
                    "tenant {tenant:?}: the request needs {need} tokens, more than its whole budget of {limit}"
                ),
                None,
            )),
        }
    }

    async fn settle(&self, hold: &Hold, used: u64) {
        let delta = i128::from(used) - i128::from(hold.reserved);
        let args = [hold.window.to_string(), delta.to_string()];
        let _: Option<i64> = self
            .state
            .eval(&self.settle, &[&hold.key], &[&args[0], &args[1]])
            .await;
    }
}

#[async_trait]
impl<M: ChatModel> ChatModel for SharedBudget<M> {
    fn id(&self) -> &ModelId {
        self.inner.id()
    }

    fn capabilities(&self) -> &Capabilities {
        self.inner.capabilities()
    }

    async fn chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        let Ok(hold) = self.take(req, ctx).await? else {
            self.state.note_local_call();
            return self.local.chat(req, ctx).await;
        };
        let result = self.inner.chat(req, ctx).await;
        if let Some(hold) = &hold {
            let used = result.as_ref().map_or(0, |r| r.usage.total_tokens());
            self.settle(hold, used).await;
        }
        result
    }

    /// A stream keeps its reservation (its usage is not settled); a stream that fails to open
    /// gives it back.
    async fn stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        let Ok(hold) = self.take(req, ctx).await? else {
            self.state.note_local_call();
            return self.local.stream(req, ctx).await;
        };
        let result = self.inner.stream(req, ctx).await;
        if let (Err(_), Some(hold)) = (&result, &hold) {
            self.settle(hold, 0).await;
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_settings_are_refused_naming_the_setting() {
        let e = SharedBudgetConfig::default()
            .window(Duration::from_millis(10))
            .validate()
            .unwrap_err();
        assert!(e.message().contains("shared_budget.window"), "{e}");
    }

    #[test]
    fn per_tenant_limits_and_the_local_share() {
        let c = SharedBudgetConfig::default()
            .tokens_per_window(900)
            .tenant("free", 90)
            .replicas(3);
        assert_eq!(c.limit_for("free"), 90);
        assert_eq!(c.limit_for("acme"), 900);
        let local = c.local_layer().unwrap();
        assert_eq!(local.limit_for("free"), 30);
        assert_eq!(local.limit_for("acme"), 300);
    }
}
