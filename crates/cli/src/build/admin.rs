//! An operator's switches on each built link: reset its breaker, or take the link out of
//! service and back without a restart (what `POST /admin/…` calls).
//!
//! A disabled link stays in every chain that names it and keeps its breaker, limiter and
//! health state; it refuses each call at once, before anything reaches its vendor, with a
//! `circuit_open` error that names the switch, so the chain moves on to the next link as it
//! does for an open breaker (a local refusal, never counted against the vendor). The switch
//! sits outside the whole link, so a cached answer is not served either.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use ripcord_core::{
    ChatModel, ChatRequest, ChatResponse, ChatStream, Context, Error, ErrorKind, Result,
};
use ripcord_resilience::{BreakerHandle, BreakerState};

/// One link's switches.
#[derive(Debug, Clone)]
pub(super) struct LinkSwitch {
    breaker: BreakerHandle,
    disabled: Arc<AtomicBool>,
}

/// Every link's switches, by provider name; cloning shares them.
#[derive(Debug, Clone, Default)]
pub struct Switches(Arc<BTreeMap<String, LinkSwitch>>);

impl Switches {
    /// Closes provider `name`'s breaker; the state it was in, or `None` for an unknown name.
    pub fn reset_breaker(&self, name: &str) -> Option<BreakerState> {
        let s = self.0.get(name)?;
        let was = s.breaker.state();
        s.breaker.reset();
        Some(was)
    }

    /// Takes provider `name` out of service (`enabled = false`) or back; whether it was
    /// enabled before, or `None` for an unknown name.
    pub fn set_enabled(&self, name: &str, enabled: bool) -> Option<bool> {
        let s = self.0.get(name)?;
        Some(!s.disabled.swap(!enabled, Ordering::SeqCst))
    }

    /// Whether provider `name` takes calls (`None` for an unknown name).
    pub fn enabled(&self, name: &str) -> Option<bool> {
        self.0.get(name).map(|s| !s.disabled.load(Ordering::SeqCst))
    }

    /// The providers' names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }
}

/// Collects the switches while the links are built.
#[derive(Debug, Default)]
pub(super) struct SwitchBoard(BTreeMap<String, LinkSwitch>);

impl SwitchBoard {
    /// `link` (provider `name`, with `breaker`) behind its on/off switch, and the switch.
    pub(super) fn switched(
        &mut self,
        name: &str,
        breaker: BreakerHandle,
        link: Arc<dyn ChatModel>,
    ) -> (Arc<dyn ChatModel>, LinkSwitch) {
        let disabled = Arc::new(AtomicBool::new(false));
        let switch = LinkSwitch {
            breaker,
            disabled: Arc::clone(&disabled),
        };
        self.0.insert(name.to_owned(), switch.clone());
        let link = Arc::new(Switchable {
            inner: link,
            disabled,
        });
        (link, switch)
    }

    /// Keeps a link's switch from an earlier build (a reload that kept the link).
    pub(super) fn keep(&mut self, name: &str, switch: LinkSwitch) {
        self.0.insert(name.to_owned(), switch);
    }

    /// The finished switches.
    pub(super) fn done(self) -> Switches {
        Switches(Arc::new(self.0))
    }
}

/// A link an operator can take out of service.
#[derive(Debug)]
struct Switchable {
    inner: Arc<dyn ChatModel>,
    disabled: Arc<AtomicBool>,
}

impl Switchable {
    fn refusal(&self) -> Option<Error> {
        if !self.disabled.load(Ordering::SeqCst) {
            return None;
        }
        let id = self.inner.id();
        Some(
            Error::new(
                ErrorKind::CircuitOpen,
                format!(
                    "provider {:?} is disabled by an operator (POST /admin/providers/{}/enable)",
                    id.name, id.name
                ),
            )
            .with_provider(id.name.clone(), id.model.clone()),
        )
    }
}

#[async_trait]
impl ripcord_core::Decorator for Switchable {
    type Inner = Arc<dyn ChatModel>;

    fn inner(&self) -> &Arc<dyn ChatModel> {
        &self.inner
    }

    async fn chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        match self.refusal() {
            Some(e) => Err(e),
            None => self.inner.chat(req, ctx).await,
        }
    }

    async fn stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        match self.refusal() {
            Some(e) => Err(e),
            None => self.inner.stream(req, ctx).await,
        }
    }
}
