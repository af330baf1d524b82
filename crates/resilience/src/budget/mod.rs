//! Per-tenant token budgets over a sliding window.
//!
//! One noisy tenant should not spend the whole organisation's vendor quota. Before a call,
//! the tenant's account reserves the request's tokens — prompt estimate plus `max_tokens` (or
//! the model's largest output) — and refuses with [`ErrorKind::BudgetExhausted`] when the window
//! cannot hold them; the error's `retry_after` says when enough of the window will have expired.
//! After the call the reservation is replaced by what the call cost, the same way for chat and
//! streams: the usage the vendor reported; when it reported none, the estimate (prompt plus the
//! text generated); for a stream that dies or is dropped after content, the estimate of what
//! was generated; for a call that failed before any content, the prompt when the vendor may
//! have processed it ([`Error::maybe_processed`]) and nothing otherwise. A stream that a chain
//! restarts on another link ([`ripcord_core::StreamPolicy::Restart`]) is charged the first
//! link's share too: what it generated before the restart.
//!
//! The accounts live in a [`BudgetStore`]: [`LocalBudgetStore`] in this process (the default),
//! [`PeriodBudgetStore`] for accounts that start again each UTC day or month,
//! or a shared store from `ripcord-redis` ([`Budget::with_store`]); the policy above is the
//! same code for both.
//!
//! The in-process store is deliberately not a `governor` bucket: a budget must be refundable and exact over its
//! window, which `governor` cannot do (it has no refunds), so it uses the crate's bucketed window.

mod period;
mod policy;
mod store;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use ripcord_core::{
    ChatModel, ChatRequest, ChatResponse, ChatStream, Context, Error, ErrorKind, Result, Usage,
    tokens,
};

pub use period::{BudgetPeriod, PeriodBudgetStore, WallClock, system_wall_clock};
pub use policy::{BudgetPolicy, BudgetPolicyBuilder};
pub use store::{
    BudgetAdmit, BudgetHold, BudgetRefusal, BudgetStore, DEFAULT_MAX_ACCOUNTS, LocalBudgetStore,
};

use crate::error::tag;
use crate::stream_util::{End, Settle, Tallied, Tally};

const ANONYMOUS: &str = "<anonymous>";

/// A model whose calls are charged to per-tenant token budgets.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use ripcord_core::testing::ScriptedModel;
/// use ripcord_core::{ChatModel, ChatRequest, Context, ErrorKind};
/// use ripcord_resilience::{BudgetPolicy, ChatModelExt};
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let model = ScriptedModel::new("primary")
///     .with_budget(BudgetPolicy::builder().tokens_per_window(100).window(Duration::from_secs(60)).build().unwrap());
/// let req = ChatRequest::user("hi").with_max_tokens(60);
/// let ctx = Context::new().with_tenant("acme");
/// model.chat(&req, &ctx).await.unwrap();            // reserves ~70, the model reports fewer
/// assert!(model.used("acme") < 70);
/// let big = ChatRequest::user("hi").with_max_tokens(90);
/// let err = model.chat(&big, &ctx).await.unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::BudgetExhausted);
/// assert!(err.retry_after().is_some());
/// # }
/// ```
#[derive(Debug)]
pub struct Budget<M> {
    inner: M,
    policy: BudgetPolicy,
    accounts: Arc<Accounts>,
}

#[derive(Debug)]
struct Accounts {
    store: Arc<dyn BudgetStore>,
    refused: AtomicU64,
}

impl Accounts {
    fn settle(&self, hold: &BudgetHold, used: u64) {
        self.store.settle(hold.clone(), used);
    }
}

impl<M: ChatModel> Budget<M> {
    /// Wraps `inner` with fresh accounts in this process.
    pub fn new(inner: M, policy: BudgetPolicy) -> Self {
        let store = Arc::new(LocalBudgetStore::new(policy.window, policy.clock.clone()));
        Budget::with_store(inner, policy, store)
    }

    /// Wraps `inner` with accounts kept in `store` (a shared store from `ripcord-redis`, say).
    /// `policy` decides the policy: who is charged, their limits, and what a call costs.
    pub fn with_store(inner: M, policy: BudgetPolicy, store: Arc<dyn BudgetStore>) -> Self {
        let accounts = Arc::new(Accounts {
            store,
            refused: AtomicU64::new(0),
        });
        Budget {
            inner,
            policy,
            accounts,
        }
    }

    /// The wrapped model.
    pub fn get_ref(&self) -> &M {
        &self.inner
    }

    /// The wrapped model, mutably.
    pub fn get_mut(&mut self) -> &mut M {
        &mut self.inner
    }

    /// Unwraps the model.
    pub fn into_inner(self) -> M {
        self.inner
    }

    /// Tokens a tenant used (or has reserved) in the current window, as the store knows it
    /// without waiting (a shared store: as this replica last saw it).
    pub fn used(&self, tenant: &str) -> u64 {
        self.accounts.store.used(tenant)
    }

    /// Tokens a tenant may still use in the current window.
    pub fn remaining(&self, tenant: &str) -> u64 {
        self.policy
            .limit_for(tenant)
            .saturating_sub(self.used(tenant))
    }

    /// Calls refused so far.
    pub fn refused(&self) -> u64 {
        self.accounts.refused.load(Ordering::Relaxed)
    }

    /// A handle that reads these accounts after the wrapper is type-erased (for gauges read
    /// at scrape time).
    pub fn view(&self) -> BudgetView {
        BudgetView {
            policy: self.policy.clone(),
            store: Arc::clone(&self.accounts.store),
        }
    }

    /// Reserves the request's tokens; returns the hold and the prompt estimate.
    async fn reserve(&self, req: &ChatRequest, ctx: &Context) -> Result<Option<(BudgetHold, u64)>> {
        let tenant = match (&self.policy.account, ctx.tenant()) {
            (Some(a), _) => &**a,
            (None, Some(t)) => t,
            (None, None) if self.policy.budget_anonymous => ANONYMOUS,
            (None, None) => return Ok(None),
        };
        let output = req
            .max_tokens
            .unwrap_or(self.inner.capabilities().max_output_tokens);
        let prompt = u64::from(tokens::estimate_request(req));
        let need = prompt + u64::from(output);
        let limit = self.policy.limit_for(tenant);
        if need > limit {
            return Err(self.refuse(
                tenant,
                format!(
                    "tenant {tenant:?}: the request needs {need} tokens, more than its whole budget of {limit}"
                ),
                None,
            ));
        }
        let store = &self.accounts.store;
        let admit = match store.try_reserve(tenant, limit, need) {
            BudgetAdmit::Ask => store.reserve(tenant, limit, need).await,
            a => a,
        };
        match admit {
            BudgetAdmit::Held(hold) => Ok(Some((hold, prompt))),
            BudgetAdmit::Refused(r) => Err(self.refuse(
                tenant,
                format!(
                    "tenant {tenant:?} used {} of {} tokens in the window; this request needs {need}",
                    r.used, r.limit
                ),
                r.retry_after,
            )),
            // A store must decide when awaited; refusing beats calling unaccounted.
            BudgetAdmit::Ask => Err(self.refuse(
                tenant,
                format!("tenant {tenant:?}: the budget store gave no answer"),
                None,
            )),
        }
    }

    fn refuse(
        &self,
        tenant: &str,
        message: String,
        retry_after: Option<std::time::Duration>,
    ) -> Error {
        self.accounts.refused.fetch_add(1, Ordering::Relaxed);
        tracing::info!(ripcord.link = %self.inner.id().name, tenant, message = ripcord_core::telemetry::event::BUDGET_EXHAUSTED);
        let mut e = Error::new(ErrorKind::BudgetExhausted, message);
        if let Some(after) = retry_after {
            e = e.with_retry_after(after);
        }
        tag(e, self.inner.id())
    }
}

/// Reads a [`Budget`]'s accounts: its limits and what each tenant used, without waiting (a
/// shared store: as this replica last saw it). Reading costs a lookup per tenant and records
/// nothing, so the calls pay nothing for a reader.
///
/// # Examples
///
/// ```
/// use ripcord_core::testing::ScriptedModel;
/// use ripcord_core::{ChatModel, ChatRequest, Context};
/// use ripcord_resilience::{BudgetPolicy, ChatModelExt};
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let model = ScriptedModel::new("primary")
///     .with_budget(BudgetPolicy::builder().tokens_per_window(100).build().unwrap());
/// let view = model.view();
/// model.chat(&ChatRequest::user("hi").with_max_tokens(5), &Context::new().with_tenant("acme")).await.unwrap();
/// assert_eq!(view.limit_for("acme"), 100);
/// assert!(view.remaining("acme") < 100);
/// assert_eq!(view.remaining("globex"), 100);
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct BudgetView {
    policy: BudgetPolicy,
    store: Arc<dyn BudgetStore>,
}

impl BudgetView {
    /// The store the accounts live in: hand it to the next build's [`Budget::with_store`] to
    /// keep what every account spent (a reload with the same window).
    pub fn store(&self) -> Arc<dyn BudgetStore> {
        Arc::clone(&self.store)
    }

    /// True when both views read the same accounts.
    pub fn same_accounts(&self, other: &BudgetView) -> bool {
        Arc::ptr_eq(&self.store, &other.store)
    }

    /// The token limit per window for a tenant.
    pub fn limit_for(&self, tenant: &str) -> u64 {
        self.policy.limit_for(tenant)
    }

    /// Tokens a tenant used (or has reserved) in the current window.
    pub fn used(&self, tenant: &str) -> u64 {
        self.store.used(tenant)
    }

    /// Tokens a tenant may still use in the current window.
    pub fn remaining(&self, tenant: &str) -> u64 {
        self.limit_for(tenant).saturating_sub(self.used(tenant))
    }

    /// Charges `tokens` to `tenant`'s account now, whatever its limit (what a previous run
    /// spent in the window, read back from a ledger at start). Returns whether the store took
    /// it without waiting: a shared store that keeps its own accounts across restarts (Redis)
    /// is not charged again and answers `false`.
    pub fn charge(&self, tenant: &str, tokens: u64) -> bool {
        if tokens == 0 {
            return true;
        }
        matches!(
            self.store.try_reserve(tenant, u64::MAX, tokens),
            BudgetAdmit::Held(_)
        )
    }

    /// The tenant calls without one are charged to (`<anonymous>`), when they are budgeted
    /// ([`BudgetPolicyBuilder::budget_anonymous`]).
    pub fn anonymous(&self) -> Option<&'static str> {
        self.policy.budget_anonymous.then_some(ANONYMOUS)
    }
}

/// What a call cost: the vendor's count, or the estimate (prompt plus generated text) when it
/// reported none.
fn cost(usage: Option<&Usage>, prompt: u64, generated: u64) -> u64 {
    match usage.map(Usage::total_tokens) {
        Some(n) if n > 0 => n,
        _ => prompt + generated,
    }
}

/// What a call that failed before any content cost: its prompt if the vendor may have
/// processed it.
fn failed_cost(e: &Error, prompt: u64) -> u64 {
    if e.maybe_processed() { prompt } else { 0 }
}

/// Settles a stream's reservation when it ends.
struct BudgetSettlement {
    accounts: Arc<Accounts>,
    hold: BudgetHold,
    prompt: u64,
    /// What attempts before a restart cost.
    spent: u64,
}

impl Settle for BudgetSettlement {
    fn restarted(&mut self, t: &mut Tally) {
        // The first link's answer is thrown away, but its tokens were spent.
        self.spent += cost(t.usage.as_ref(), self.prompt, t.generated);
        t.usage = None;
        t.generated = 0;
    }

    fn settle(&mut self, t: &Tally, end: End<'_>) {
        let this = match end {
            End::Failed(e) if !t.content && t.usage.is_none() => failed_cost(e, self.prompt),
            _ => cost(t.usage.as_ref(), self.prompt, t.generated),
        };
        self.accounts.settle(&self.hold, self.spent + this);
    }
}

// `bounds_itself` and `refusal` forward (the defaults): a budget check adds no wait (a shared
// store's is bounded by its own short timeout), and a call the inner model refuses reaches no
// vendor and would be settled at zero, so the budget cannot turn that refusal into another
// outcome.
#[async_trait]
impl<M: ChatModel> ripcord_core::Decorator for Budget<M> {
    inner_model!(inner: M);

    async fn decorated_chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        let hold = self.reserve(req, ctx).await?;
        let result = self.inner.chat(req, ctx).await;
        if let Some((hold, prompt)) = &hold {
            let used = match &result {
                Ok(r) => cost(
                    Some(&r.usage),
                    *prompt,
                    u64::from(tokens::estimate_text(&r.content)),
                ),
                Err(e) => failed_cost(e, *prompt),
            };
            self.accounts.settle(hold, used);
        }
        result
    }

    async fn decorated_stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        let hold = self.reserve(req, ctx).await?;
        let stream = match self.inner.stream(req, ctx).await {
            Ok(s) => s,
            Err(e) => {
                if let Some((hold, prompt)) = &hold {
                    self.accounts.settle(hold, failed_cost(&e, *prompt));
                }
                return Err(e);
            }
        };
        Ok(match hold {
            Some((hold, prompt)) => Tallied::boxed(
                stream,
                BudgetSettlement {
                    accounts: self.accounts.clone(),
                    hold,
                    prompt,
                    spent: 0,
                },
            ),
            None => stream,
        })
    }
}
