//! An operator's switches on each built link: reset its breaker, or take the link out of
//! service and back without a restart (what `POST /admin/…` calls).
//!
//! A disabled link stays in every chain that names it and keeps its breaker, limiter and
//! health state; it refuses each call at once, before anything reaches its vendor, with a
//! `circuit_open` error that names the switch, so the chain moves on to the next link as it
//! does for an open breaker (a local refusal, never counted against the vendor). The switch
//! sits outside the whole link, so a cached answer is not served either.
//!
//! The vendor's status page (`[providers.status_page]`, see `status_watch`) steers a link
//! through the same switch board, with switches of its own so an operator's enable never undoes
//! it (nor it an operator's disable): `on_major_outage = "open"` holds the link refused as an
//! open breaker would, `"demote"` sets the link's [`Demotion`] in every chain that names it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use ripcord_core::chain::Demotion;
use ripcord_core::{
    ChatModel, ChatRequest, ChatResponse, ChatStream, Context, Error, ErrorKind, Result,
};
use ripcord_resilience::{BreakerHandle, BreakerState};

/// One link's switches.
#[derive(Debug, Clone)]
pub(super) struct LinkSwitch {
    breaker: BreakerHandle,
    disabled: Arc<AtomicBool>,
    /// Held open because the vendor declares a major outage (`on_major_outage = "open"`).
    vendor_open: Arc<AtomicBool>,
    /// Tried after the other links (`on_major_outage = "demote"`).
    demotion: Demotion,
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

    /// Holds provider `name` refused (`open = true`) because its vendor declares a major
    /// outage, or lets it take calls again; whether it was held before, `None` for an unknown
    /// name. Independent of the operator's [`Switches::set_enabled`].
    pub fn set_vendor_open(&self, name: &str, open: bool) -> Option<bool> {
        let s = self.0.get(name)?;
        Some(s.vendor_open.swap(open, Ordering::SeqCst))
    }

    /// Whether provider `name` is held refused for its vendor's declared outage.
    pub fn vendor_open(&self, name: &str) -> Option<bool> {
        self.0
            .get(name)
            .map(|s| s.vendor_open.load(Ordering::SeqCst))
    }

    /// Moves provider `name` behind the other links of every chain (`demoted = true`) or back;
    /// whether it was demoted before, `None` for an unknown name.
    pub fn set_demoted(&self, name: &str, demoted: bool) -> Option<bool> {
        Some(self.0.get(name)?.demotion.set(demoted))
    }

    /// Whether provider `name` is demoted.
    pub fn demoted(&self, name: &str) -> Option<bool> {
        self.0.get(name).map(|s| s.demotion.is_demoted())
    }

    /// Provider `name`'s demotion switch, which its chains watch.
    pub(super) fn demotion(&self, name: &str) -> Option<Demotion> {
        self.0.get(name).map(|s| s.demotion.clone())
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
        let vendor_open = Arc::new(AtomicBool::new(false));
        let switch = LinkSwitch {
            breaker,
            disabled: Arc::clone(&disabled),
            vendor_open: Arc::clone(&vendor_open),
            demotion: Demotion::default(),
        };
        self.0.insert(name.to_owned(), switch.clone());
        let link = Arc::new(Switchable {
            inner: link,
            disabled,
            vendor_open,
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
    vendor_open: Arc<AtomicBool>,
}

impl Switchable {
    fn switched_off(&self) -> Option<Error> {
        let id = self.inner.id();
        if self.vendor_open.load(Ordering::SeqCst) && !self.disabled.load(Ordering::SeqCst) {
            return Some(
                Error::new(
                    ErrorKind::CircuitOpen,
                    format!(
                        "provider {:?} is held open: its vendor's status page declares a major \
                         outage (on_major_outage = \"open\"); it takes calls again when the \
                         incident resolves",
                        id.name
                    ),
                )
                .with_provider(id.name.clone(), id.model.clone()),
            );
        }
        if !self.disabled.load(Ordering::SeqCst) {
            return None;
        }
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

    /// A switched-off link is refused before the chain calls it (so it is skipped as an open
    /// breaker is); otherwise the inner link answers.
    fn decorated_refusal(&self, ctx: &Context) -> Option<Error> {
        self.switched_off().or_else(|| self.inner.refusal(ctx))
    }

    async fn decorated_chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        match self.switched_off() {
            Some(e) => Err(e),
            None => self.inner.chat(req, ctx).await,
        }
    }

    async fn decorated_stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        match self.switched_off() {
            Some(e) => Err(e),
            None => self.inner.stream(req, ctx).await,
        }
    }
}
