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
//! This is deliberately not a `governor` bucket: a budget must be refundable and exact over its
//! window, which `governor` cannot do (it has no refunds), so it uses the crate's bucketed window.

mod layer;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use ripcord_core::{
    Capabilities, ChatModel, ChatRequest, ChatResponse, ChatStream, Context, Error, ErrorKind,
    ModelId, Result, StreamEvent, Usage, tokens,
};

pub use layer::{BudgetBuilder, BudgetLayer};

use crate::error::tag;
use crate::stream_util::{End, Observed, StreamObserver};
use crate::window::Window;

const ANONYMOUS: &str = "<anonymous>";
const BUCKETS: usize = 60;
const PRUNE_AT: usize = 4096;

/// A model whose calls are charged to per-tenant token budgets.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use ripcord_core::testing::ScriptedModel;
/// use ripcord_core::{ChatModel, ChatRequest, Context, ErrorKind};
/// use ripcord_resilience::{BudgetLayer, ChatModelExt};
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let model = ScriptedModel::new("primary")
///     .with_budget(BudgetLayer::builder().tokens_per_window(100).window(Duration::from_secs(60)).build().unwrap());
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
    layer: BudgetLayer,
    accounts: Arc<Accounts>,
}

#[derive(Debug)]
struct Accounts {
    layer: BudgetLayer,
    map: Mutex<HashMap<Arc<str>, Window>>,
    refused: AtomicU64,
}

/// A reservation in a tenant's account.
#[derive(Debug)]
struct Hold {
    tenant: Arc<str>,
    bucket: u64,
    reserved: i64,
}

impl Accounts {
    fn lock(&self) -> MutexGuard<'_, HashMap<Arc<str>, Window>> {
        match self.map.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    fn used(&self, tenant: &str) -> u64 {
        let now = self.layer.clock.now();
        self.lock()
            .get(tenant)
            .map_or(0, |w| u64::try_from(w.sum(now, 0)).unwrap_or(0))
    }

    /// Reserves `tokens` for `tenant`, or says why not (`Err((message, retry_after))`).
    fn reserve(
        &self,
        tenant: &str,
        tokens: u64,
    ) -> std::result::Result<Hold, (String, Option<std::time::Duration>)> {
        let now = self.layer.clock.now();
        let limit = i64::try_from(self.layer.limit_for(tenant)).unwrap_or(i64::MAX);
        let need = i64::try_from(tokens).unwrap_or(i64::MAX);
        let mut map = self.lock();
        if map.len() >= PRUNE_AT {
            map.retain(|_, w| w.sum(now, 0) > 0);
        }
        let key: Arc<str> = match map.get_key_value(tenant) {
            Some((k, _)) => k.clone(),
            None => Arc::from(tenant),
        };
        let w = map
            .entry(key.clone())
            .or_insert_with(|| Window::new(now, self.layer.window, BUCKETS));
        let used = w.sum(now, 0);
        if need > limit {
            return Err((
                format!(
                    "tenant {tenant:?}: the request needs {need} tokens, more than its whole budget of {limit}"
                ),
                None,
            ));
        }
        if used.saturating_add(need) > limit {
            let wait = w.time_until_at_most(now, 0, limit - need);
            return Err((
                format!(
                    "tenant {tenant:?} used {used} of {limit} tokens in the window; this request needs {need}"
                ),
                Some(wait),
            ));
        }
        let bucket = w.add(now, 0, need);
        Ok(Hold {
            tenant: key,
            bucket,
            reserved: need,
        })
    }

    /// Replaces a reservation with the tokens used.
    fn settle(&self, hold: &Hold, used: u64) {
        let used = i64::try_from(used).unwrap_or(i64::MAX);
        if let Some(w) = self.lock().get_mut(&hold.tenant) {
            w.add_at(hold.bucket, 0, used - hold.reserved);
        }
    }
}

impl<M: ChatModel> Budget<M> {
    /// Wraps `inner` with fresh accounts.
    pub fn new(inner: M, layer: BudgetLayer) -> Self {
        let accounts = Arc::new(Accounts {
            layer: layer.clone(),
            map: Mutex::new(HashMap::new()),
            refused: AtomicU64::new(0),
        });
        Budget {
            inner,
            layer,
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

    /// Tokens a tenant used (or has reserved) in the current window.
    pub fn used(&self, tenant: &str) -> u64 {
        self.accounts.used(tenant)
    }

    /// Tokens a tenant may still use in the current window.
    pub fn remaining(&self, tenant: &str) -> u64 {
        self.layer
            .limit_for(tenant)
            .saturating_sub(self.used(tenant))
    }

    /// Calls refused so far.
    pub fn refused(&self) -> u64 {
        self.accounts.refused.load(Ordering::Relaxed)
    }

    /// Reserves the request's tokens; returns the hold and the prompt estimate.
    fn reserve(&self, req: &ChatRequest, ctx: &Context) -> Result<Option<(Hold, u64)>> {
        let tenant = match ctx.tenant() {
            Some(t) => t,
            None if self.layer.budget_anonymous => ANONYMOUS,
            None => return Ok(None),
        };
        let output = req
            .max_tokens
            .unwrap_or(self.inner.capabilities().max_output_tokens);
        let prompt = u64::from(tokens::estimate_request(req));
        let tokens = prompt + u64::from(output);
        match self.accounts.reserve(tenant, tokens) {
            Ok(hold) => Ok(Some((hold, prompt))),
            Err((message, retry_after)) => {
                self.accounts.refused.fetch_add(1, Ordering::Relaxed);
                tracing::info!(link = %self.inner.id().name, tenant, "ripcord.budget_exhausted");
                let mut e = Error::new(ErrorKind::BudgetExhausted, message);
                if let Some(after) = retry_after {
                    e = e.with_retry_after(after);
                }
                Err(tag(e, self.inner.id()))
            }
        }
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
struct BudgetObserver {
    accounts: Arc<Accounts>,
    hold: Hold,
    prompt: u64,
    usage: Option<Usage>,
    generated: u64,
    content: bool,
    /// What attempts before a restart cost.
    spent: u64,
}

impl StreamObserver for BudgetObserver {
    fn on_item(&mut self, item: Result<StreamEvent>) -> Result<StreamEvent> {
        match &item {
            Ok(StreamEvent::Usage { usage }) => self.usage = Some(*usage),
            Ok(StreamEvent::TextDelta { text }) => {
                self.generated += u64::from(tokens::estimate_text(text));
            }
            Ok(StreamEvent::Restarted { .. }) => {
                // The first link's answer is thrown away, but its tokens were spent.
                self.spent += cost(self.usage.as_ref(), self.prompt, self.generated);
                self.usage = None;
                self.generated = 0;
            }
            _ => {}
        }
        item
    }

    fn on_content(&mut self) {
        self.content = true;
    }

    fn on_end(&mut self, end: End<'_>) {
        let this = match end {
            End::Failed(e) if !self.content && self.usage.is_none() => failed_cost(e, self.prompt),
            _ => cost(self.usage.as_ref(), self.prompt, self.generated),
        };
        self.accounts.settle(&self.hold, self.spent + this);
    }
}

#[async_trait]
impl<M: ChatModel> ChatModel for Budget<M> {
    fn id(&self) -> &ModelId {
        self.inner.id()
    }

    fn capabilities(&self) -> &Capabilities {
        self.inner.capabilities()
    }

    /// As the inner model: a budget check adds no wait.
    fn bounds_itself(&self) -> bool {
        self.inner.bounds_itself()
    }

    async fn chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        let hold = self.reserve(req, ctx)?;
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

    async fn stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        let hold = self.reserve(req, ctx)?;
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
            Some((hold, prompt)) => Observed::boxed(
                stream,
                BudgetObserver {
                    accounts: self.accounts.clone(),
                    hold,
                    prompt,
                    usage: None,
                    generated: 0,
                    content: false,
                    spent: 0,
                },
            ),
            None => stream,
        })
    }
}
