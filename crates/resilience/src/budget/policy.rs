//! [`BudgetPolicy`]: per-tenant token budgets, and the constructor of [`Budget`] wrappers.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ripcord_core::ChatModel;

use super::Budget;
use crate::clock::{SharedClock, default_clock};
use crate::error::ConfigError;

/// Per-tenant token budgets over a sliding window.
///
/// Defaults ([`BudgetPolicy::default`]): 1,000,000 tokens per tenant per hour; calls without a
/// tenant ([`ripcord_core::Context::tenant`]) are not budgeted.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use ripcord_resilience::BudgetPolicy;
/// let policy = BudgetPolicy::builder()
///     .tokens_per_window(200_000)
///     .window(Duration::from_secs(24 * 3600))
///     .tenant("free-tier", 20_000)
///     .build()?;
/// assert_eq!(policy.limit_for("free-tier"), 20_000);
/// assert_eq!(policy.limit_for("acme"), 200_000);
/// # Ok::<(), ripcord_resilience::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct BudgetPolicy {
    pub(crate) default_limit: u64,
    pub(crate) window: Duration,
    pub(crate) per_tenant: Arc<HashMap<String, u64>>,
    pub(crate) budget_anonymous: bool,
    /// Every call is charged to this one account, whatever its tenant.
    pub(crate) account: Option<Arc<str>>,
    pub(crate) clock: SharedClock,
}

impl Default for BudgetPolicy {
    fn default() -> Self {
        BudgetPolicy {
            default_limit: 1_000_000,
            window: Duration::from_secs(3600),
            per_tenant: Arc::new(HashMap::new()),
            budget_anonymous: false,
            account: None,
            clock: default_clock(),
        }
    }
}

impl BudgetPolicy {
    /// A builder starting from the defaults.
    pub fn builder() -> BudgetPolicyBuilder {
        BudgetPolicyBuilder {
            policy: BudgetPolicy::default(),
            per_tenant: HashMap::new(),
        }
    }

    /// Wraps a model; every wrapper keeps its own accounts.
    pub fn wrap<M: ChatModel>(&self, model: M) -> Budget<M> {
        Budget::new(model, self.clone())
    }

    /// The token limit per window for a tenant.
    pub fn limit_for(&self, tenant: &str) -> u64 {
        self.per_tenant
            .get(tenant)
            .copied()
            .unwrap_or(self.default_limit)
    }

    /// The window.
    pub fn window(&self) -> Duration {
        self.window
    }
}

/// Builds a [`BudgetPolicy`]; validation happens in [`BudgetPolicyBuilder::build`].
#[derive(Debug, Clone)]
pub struct BudgetPolicyBuilder {
    policy: BudgetPolicy,
    per_tenant: HashMap<String, u64>,
}

impl BudgetPolicyBuilder {
    ripcord_core::setters! {
        /// Tokens each tenant may use per window (default 1,000,000).
        tokens_per_window(n: u64) => policy.default_limit = n;

        /// The window (default one hour).
        window(d: Duration) => policy.window = d;
    }

    /// A different limit for one tenant.
    pub fn tenant(mut self, tenant: impl Into<String>, tokens_per_window: u64) -> Self {
        self.per_tenant.insert(tenant.into(), tokens_per_window);
        self
    }

    ripcord_core::setters! {
        /// Also budget calls without a tenant, as one shared anonymous tenant (default: not).
        budget_anonymous(yes: bool) => policy.budget_anonymous = yes;

        /// Charges every call to the one account `name`, whatever the call's tenant (a budget of
        /// its own for one gateway key, say, inside the tenants' budget). Default: each call's
        /// tenant.
        ///
        /// ```
        /// use ripcord_core::testing::ScriptedModel;
        /// use ripcord_core::{ChatModel, ChatRequest, Context, ErrorKind};
        /// use ripcord_resilience::{BudgetPolicy, ChatModelExt};
        /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
        /// let policy = BudgetPolicy::builder().tokens_per_window(100).account("key:a");
        /// let key = ScriptedModel::new("primary").with_budget(policy.build().unwrap());
        /// let req = ChatRequest::user("hi").with_max_tokens(40);
        /// key.chat(&req, &Context::new().with_tenant("acme")).await.unwrap();
        /// key.chat(&req, &Context::new()).await.unwrap();     // no tenant: charged all the same
        /// assert!(key.used("key:a") > 0);
        /// assert_eq!(key.used("acme"), 0);
        /// let big = ChatRequest::user("hi").with_max_tokens(95);
        /// let err = key.chat(&big, &Context::new().with_tenant("globex")).await.unwrap_err();
        /// assert_eq!(err.kind(), ErrorKind::BudgetExhausted);
        /// # }
        /// ```
        account(name: impl Into<Arc<str>>) => policy.account = Some(name.into());

        /// Uses this clock (default [`crate::TokioClock`]).
        clock(clock: SharedClock) => policy.clock = clock;
    }

    /// Validates the settings.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] for a zero window.
    pub fn build(self) -> Result<BudgetPolicy, ConfigError> {
        let mut l = self.policy;
        if l.window.is_zero() {
            return Err(ConfigError::new(
                "budget",
                "window",
                "must be greater than zero",
            ));
        }
        l.per_tenant = Arc::new(self.per_tenant);
        Ok(l)
    }
}
