//! The state of one chain call: which links were tried, what failed, where to go next.
//!
//! Shared by `chat` and `stream`, so both walk the links by the same rules.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::order::Order;
use super::{ChainInner, Link};
use crate::context::Context;
use crate::error::{Disposition, Error, ErrorKind, TimeoutPhase};
use crate::fault::Fault;
use crate::request::{ChatRequest, ContentPart, Needs};
use crate::response::{Attempt, Provenance, Skip, SkipReason};
use crate::tokens;

/// What to do next.
pub(crate) enum Next {
    /// Call this link.
    Link(usize),
    /// End the call with this error (fail fast, cancelled).
    Stop(Error),
    /// No link is left: static reply or the combined error.
    Exhausted,
}

pub(crate) struct Call {
    tried: u64,
    /// Links whose last error was a local refusal with a re-admission time.
    refused: u64,
    earliest_readmission: Option<Instant>,
    waited: bool,
    preferred: Option<usize>,
    /// The call's order of links; `None` for the configured order.
    order: Option<Order>,
    /// The failure domain of the link that failed last (vendor independence).
    avoid_domain: Option<u8>,
    /// Every failure domain a link failed in during this call, as bits (vendor independence).
    failed_domains: u64,
    /// The link that failed last and how, until the next link is called (for the fallback event).
    fell_from: Option<(usize, ErrorKind)>,
    errors: Vec<Error>,
    skipped: Vec<Skip>,
    stop: Option<Error>,
    deadline: Instant,
    /// The call's whole budget, from its start to its deadline.
    whole: Duration,
    /// A link was skipped because too little time was left.
    starved: bool,
    /// The window of a link that answered `ContextLengthExceeded` (its stated or known window):
    /// links judged by a window no larger cannot take the prompt either. Links with an unknown
    /// window are tried regardless.
    too_long_for: Option<u32>,
    /// The prompt's tokens as a vendor counted them in this call, when one stated it (or at
    /// least what its refusal implies): windows are scaled by estimate / this when the
    /// estimate undercounts.
    vendor_prompt: Option<u32>,
    /// Links retried trimmed after they said "too long" (each at most once).
    retrimmed: u64,
    /// A trimmed copy of the request for the link about to be called, and how many messages
    /// it lacks ([`super::Trim::Oldest`]).
    trimmed: Option<(usize, ChatRequest, u32)>,
    needs: Needs,
    /// Cheap upper bound of prompt tokens (bytes of text), or the estimate once computed.
    prompt_upper: u32,
    /// The prompt's token estimate, once computed.
    prompt_estimate: Option<u32>,
}

fn bit(i: usize) -> u64 {
    1u64 << i
}

/// The bit of a failure domain (domain ids are below [`super::MAX_LINKS`]).
fn domain_bit(d: u8) -> u64 {
    1u64.checked_shl(u32::from(d)).unwrap_or(0)
}

/// The position (1-based) within the call of the last attempt of `e`, for telemetry.
fn attempt_number(earlier: &[Error], e: &Error) -> i64 {
    let n: usize = earlier.iter().map(|x| x.attempts().len()).sum::<usize>() + e.attempts().len();
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Call {
    pub(crate) fn new(inner: &ChainInner, req: &ChatRequest, deadline: Instant) -> Self {
        // Every token is at least one byte of text, so the byte count bounds the estimate from
        // above without reading the text; the real estimate is computed only when this bound
        // does not fit some link's window.
        let mut upper: u64 = 3;
        for m in &req.messages {
            upper += u64::from(tokens::PER_MESSAGE_OVERHEAD);
            for p in &m.content {
                upper += match p {
                    ContentPart::Text { text } => text.len() as u64,
                    ContentPart::Image { .. } => u64::from(tokens::PER_IMAGE),
                    ContentPart::File { file, .. } => u64::from(tokens::estimate_file(file)),
                    ContentPart::Audio { data, .. } => data.len() as u64,
                };
            }
            for c in &m.tool_calls {
                upper += (c.name.len() + c.arguments.len()) as u64;
            }
        }
        if !req.tools.is_empty() {
            upper += req
                .tools
                .iter()
                .map(|t| {
                    (t.name.len() + t.description.as_ref().map_or(0, String::len)) as u64
                        + t.parameters.to_string().len() as u64
                })
                .sum::<u64>();
        }
        let needs = req.needs();
        Call {
            order: super::order::demoted(inner.plan.order(&inner.links, req, needs), &inner.links),
            avoid_domain: None,
            failed_domains: 0,
            tried: 0,
            refused: 0,
            earliest_readmission: None,
            waited: false,
            preferred: None,
            fell_from: None,
            errors: Vec::new(),
            skipped: Vec::new(),
            stop: None,
            deadline,
            whole: deadline.saturating_duration_since(Instant::now()),
            starved: false,
            too_long_for: None,
            vendor_prompt: None,
            retrimmed: 0,
            trimmed: None,
            needs,
            prompt_upper: u32::try_from(upper).unwrap_or(u32::MAX),
            prompt_estimate: None,
        }
    }

    pub(crate) fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Moves the call's deadline to `at` (a continuation's fresh budget to its first content).
    pub(crate) fn extend_deadline(&mut self, at: Instant) {
        if at > self.deadline {
            self.whole = at.saturating_duration_since(Instant::now());
            self.deadline = at;
        }
    }

    /// The prompt's token estimate (computed once per call, only when a window is judged).
    fn estimate(&mut self, req: &ChatRequest) -> u32 {
        *self
            .prompt_estimate
            .get_or_insert_with(|| tokens::estimate_request(req))
    }

    /// `window` in units of ripcord's estimate: when a vendor counted this prompt larger than
    /// the estimate, the window shrinks by the same ratio, so a trim sized by the estimate
    /// fits the vendor's count.
    fn calibrated(&mut self, req: &ChatRequest, window: u32) -> u32 {
        let Some(counted) = self.vendor_prompt else {
            return window;
        };
        let est = self.estimate(req);
        if counted <= est || est == 0 {
            return window;
        }
        u32::try_from(u64::from(window) * u64::from(est) / u64::from(counted)).unwrap_or(window)
    }

    pub(crate) fn into_parts(self) -> (Vec<Error>, Vec<Skip>) {
        (self.errors, self.skipped)
    }

    /// Every failed attempt so far, with room for one more (the one that ends the call).
    fn all_attempts(&self) -> Vec<Attempt> {
        let n: usize = self.errors.iter().map(|e| e.attempts().len()).sum();
        let mut all = Vec::with_capacity(n + 1);
        for e in &self.errors {
            all.extend_from_slice(e.attempts());
        }
        all
    }

    /// The trimmed request prepared for link `i`, if the chain trimmed one for it.
    pub(crate) fn take_trimmed(&mut self, i: usize) -> Option<(ChatRequest, u32)> {
        match self.trimmed.take() {
            Some((j, r, n)) if j == i => Some((r, n)),
            _ => None,
        }
    }

    /// Why link `link` (number `i`) cannot take this request, if it cannot. A link whose
    /// window is unknown is never judged by it; one judged too small is trimmed for instead
    /// under [`super::Trim::Oldest`] when trimming makes the prompt fit.
    fn skip_for(
        &mut self,
        link: &Link,
        i: usize,
        req: &ChatRequest,
        ctx: &Context,
        trim: bool,
    ) -> Option<Skip> {
        let caps = link.model.capabilities();
        let name = || link.model.id().name.clone();
        if self.needs.tools && !caps.tools {
            return Some(Skip::new(name(), SkipReason::NoTools));
        }
        if self.needs.vision && !caps.vision {
            return Some(Skip::new(name(), SkipReason::NoVision));
        }
        if self.needs.json && !caps.json_mode {
            return Some(Skip::new(name(), SkipReason::NoJson));
        }
        if !ctx.locality().allows(&caps.locality) {
            return Some(Skip::new(name(), SkipReason::Locality));
        }
        let Some(stated) = link.judged_window() else {
            // Unknown: tried, and its vendor's refusal (if any) tells the real window.
            return None;
        };
        let output = req.max_tokens.unwrap_or(0).min(caps.max_output_tokens);
        let refused_larger = self.too_long_for.is_some_and(|w| stated <= w);
        if !refused_larger && self.prompt_upper.saturating_add(output) <= stated {
            return None;
        }
        let window = self.calibrated(req, stated);
        let estimate = self.estimate(req);
        let lower = tokens::lower_bound(estimate);
        if !refused_larger && lower.saturating_add(output) <= window {
            return None;
        }
        if trim && let Some((r, n)) = super::trim::oldest(req, window, output) {
            tracing::info!(
                trimmed_messages = n,
                message = crate::telemetry::event::TRIMMED
            );
            self.trimmed = Some((i, r, n));
            return None;
        }
        let prompt = estimate.max(self.vendor_prompt.unwrap_or(0));
        Some(Skip::window(name(), prompt, output, stated))
    }

    fn first_untried(&self, inner: &ChainInner) -> Option<usize> {
        match &self.order {
            None => (0..inner.links.len()).find(|&i| self.tried & bit(i) == 0),
            Some(order) => order.iter().find(|&i| self.tried & bit(i) == 0),
        }
    }

    /// After a failure, under vendor independence: the first untried link in a domain where
    /// nothing failed yet in this call, else the first one outside the domain that just failed.
    fn first_independent(&self, inner: &ChainInner) -> Option<usize> {
        let avoid = self.avoid_domain?;
        let domains = inner.domains.as_ref()?;
        let domain = |i: usize| domains.get(i).copied().unwrap_or(avoid);
        let untried = |i: usize| self.tried & bit(i) == 0;
        let fresh = |i: usize| untried(i) && self.failed_domains & domain_bit(domain(i)) == 0;
        let other = |i: usize| untried(i) && domain(i) != avoid;
        match &self.order {
            None => {
                let n = inner.links.len();
                (0..n)
                    .find(|&i| fresh(i))
                    .or_else(|| (0..n).find(|&i| other(i)))
            }
            Some(order) => order
                .iter()
                .find(|&i| fresh(i))
                .or_else(|| order.iter().find(|&i| other(i))),
        }
    }

    /// Picks the next link to call, applying skip rules; may wait once for a cooling-down link.
    pub(crate) async fn next_link(
        &mut self,
        inner: &ChainInner,
        req: &ChatRequest,
        ctx: &Context,
    ) -> Next {
        if let Some(stop) = self.take_stop() {
            return stop;
        }
        if ctx.is_cancelled() {
            let attempts = self.all_attempts();
            return Next::Stop(Error::cancelled().with_attempts(attempts));
        }
        loop {
            if Instant::now() >= self.deadline {
                if self.errors.last().map(Error::kind) != Some(ErrorKind::DeadlineExceeded) {
                    self.errors.push(Error::deadline_exceeded());
                }
                return Next::Exhausted;
            }
            let candidate = self
                .preferred
                .take()
                .filter(|&i| self.tried & bit(i) == 0)
                .or_else(|| self.first_independent(inner))
                .or_else(|| self.first_untried(inner));
            let Some(i) = candidate else {
                if self.wait_for_readmission(inner, ctx).await {
                    continue;
                }
                if self.starved
                    && self.errors.last().map(Error::kind) != Some(ErrorKind::DeadlineExceeded)
                {
                    self.errors.push(
                        Error::new(
                            ErrorKind::DeadlineExceeded,
                            "too little of the deadline was left to try the remaining links",
                        )
                        .with_fault(Fault::Local),
                    );
                }
                return Next::Exhausted;
            };
            self.tried |= bit(i);
            let link = &inner.links[i];
            let trim = inner.trim == super::Trim::Oldest;
            if let Some(skip) = self.skip_for(link, i, req, ctx, trim) {
                tracing::info!(
                    ripcord.link = %link.model.id().name,
                    ripcord.skip.reason = skip.reason.as_str(),
                    prompt_tokens = skip.prompt_tokens,
                    window = skip.window,
                    message = crate::telemetry::event::LINK_SKIPPED
                );
                self.skipped.push(skip);
                continue;
            }
            // A link reached with less than a useful budget is passed over rather than
            // attempted and failed: no vendor answers in that time, and its breaker must not
            // hear of a failure it did not cause.
            let left = self.deadline.saturating_duration_since(Instant::now());
            if left < inner.min_attempt_for(i, self.whole) {
                tracing::info!(
                    ripcord.link = %link.model.id().name,
                    ripcord.skip.reason = SkipReason::Deadline.as_str(),
                    left_ms = left.as_secs_f64() * 1000.0,
                    message = crate::telemetry::event::LINK_SKIPPED
                );
                self.starved = true;
                self.skipped.push(Skip::new(
                    link.model.id().name.clone(),
                    SkipReason::Deadline,
                ));
                continue;
            }
            // A link that would refuse at once (its breaker is open) is skipped without a call:
            // its refusal is recorded as if the call had returned it.
            if let Some(e) = link.model.refusal(ctx) {
                self.failed(inner, i, e, Duration::ZERO, req, ctx);
                if let Some(stop) = self.take_stop() {
                    return stop;
                }
                continue;
            }
            if let Some((from, kind)) = self.fell_from.take() {
                tracing::info!(
                    ripcord.fallback.from = %inner.links[from].model.id().name,
                    ripcord.fallback.to = %link.model.id().name,
                    error.type = kind.as_str(),
                    message = crate::telemetry::event::FALLBACK
                );
            }
            self.avoid_domain = None;
            return Next::Link(i);
        }
    }

    /// The call's end when a failure stopped it, with every attempt made.
    fn take_stop(&mut self) -> Option<Next> {
        let e = self.stop.take()?;
        let mut attempts = self.all_attempts();
        attempts.extend_from_slice(e.attempts());
        let skipped = self.skipped.clone();
        Some(Next::Stop(e.with_attempts(attempts).with_skipped(skipped)))
    }

    /// Pitfall 8: when links refused only because they are cooling down and the earliest
    /// re-admission falls within the deadline, wait for it (once) and let them be tried again.
    async fn wait_for_readmission(&mut self, inner: &ChainInner, ctx: &Context) -> bool {
        if !inner.wait_for_readmission || self.waited || self.refused == 0 {
            return false;
        }
        let Some(at) = self.earliest_readmission else {
            return false;
        };
        if at >= self.deadline {
            return false;
        }
        self.waited = true;
        tracing::info!(
            wait_ms = i64::try_from(at.saturating_duration_since(Instant::now()).as_millis())
                .unwrap_or(i64::MAX),
            message = crate::telemetry::event::READMISSION_WAIT
        );
        if ctx
            .sleep(at.saturating_duration_since(Instant::now()))
            .await
            .is_err()
        {
            return false;
        }
        self.tried &= !self.refused;
        self.refused = 0;
        self.earliest_readmission = None;
        true
    }

    /// A context with a tighter deadline when the link reserves time for later links and is not
    /// the last untried one; `None` when the call's context applies as it is.
    pub(crate) fn attempt_context(
        &self,
        inner: &ChainInner,
        i: usize,
        ctx: &Context,
    ) -> Option<Context> {
        let link = &inner.links[i];
        let min = inner.min_attempt_for(i, self.whole);
        let own_min = ctx.min_attempt().is_some_and(|m| min < m);
        let reserve = link.reserve;
        if (reserve.is_zero() || self.first_untried(inner).is_none()) && !own_min {
            return None;
        }
        let mut actx = ctx.clone();
        if own_min {
            actx = actx.with_min_attempt(min);
        }
        if !reserve.is_zero() && self.first_untried(inner).is_some() {
            let cut = self
                .deadline
                .checked_sub(reserve)
                .unwrap_or(self.deadline)
                .max(Instant::now());
            actx = actx.with_deadline(cut);
        }
        Some(actx)
    }

    /// A link said the prompt is too long: remembers the window its vendor stated (for later
    /// calls too), lets links judged by no larger a window be skipped, and says whether to
    /// retry this link trimmed ([`super::Trim::Oldest`], once per link, when its vendor stated
    /// the window it must fit).
    fn too_long(&mut self, inner: &ChainInner, i: usize, e: &Error, req: &ChatRequest) -> bool {
        let link = &inner.links[i];
        let limit = e.context_limit();
        if let Some(l) = limit {
            link.learn_window(l.window);
            // What the refusal implies the prompt counts at least, in the vendor's tokens:
            // its own count if it gave one, else just over what fits beside the output.
            let output = req
                .max_tokens
                .unwrap_or(0)
                .min(link.model.capabilities().max_output_tokens);
            let implied = l.window.saturating_sub(output).saturating_add(1);
            let counted = l.prompt_tokens.unwrap_or(0).max(implied);
            self.vendor_prompt = Some(self.vendor_prompt.map_or(counted, |x| x.max(counted)));
        }
        if let Some(w) = limit.map(|l| l.window).or_else(|| link.judged_window()) {
            self.too_long_for = Some(self.too_long_for.map_or(w, |x| x.max(w)));
        }
        let retry = inner.trim == super::Trim::Oldest
            && limit.is_some()
            && self.retrimmed & bit(i) == 0
            && req.messages.len() > 1;
        if retry {
            self.retrimmed |= bit(i);
        }
        retry
    }

    /// Marks the failure just recorded for link `name` ([`Call::failed`]) with the
    /// `max_tokens` it was sent, when the chain lowered it (see `clamp`).
    pub(crate) fn mark_clamped(&mut self, name: &str, clamped: Option<u32>) {
        if clamped.is_none() {
            return;
        }
        if let Some(e) = self.stop.as_mut().or(self.errors.last_mut()) {
            super::clamp::record(e.attempts_mut(), name, clamped);
        }
    }

    /// Records a failed attempt at link `i` and decides where to go next.
    pub(crate) fn failed(
        &mut self,
        inner: &ChainInner,
        i: usize,
        e: Error,
        latency: Duration,
        req: &ChatRequest,
        ctx: &Context,
    ) {
        let id = inner.links[i].model.id();
        let mut e = if e.kind() == ErrorKind::DeadlineExceeded && Instant::now() < self.deadline {
            // The link's share of the budget ran out (a reserve for later links), not the call's.
            Error::timeout(
                TimeoutPhase::Total,
                "the link's share of the deadline ran out",
            )
        } else {
            e
        };
        if e.provider().is_none() {
            e = e.with_provider(id.name.clone(), id.model.clone());
        }
        if e.attempts().is_empty() {
            let a = Attempt::failure(id.name.clone(), id.model.clone(), &e, latency);
            e = e.with_attempts(vec![a]);
        }
        let kind = e.kind();
        tracing::info!(
            ripcord.link = %id.name,
            error.type = kind.as_str(),
            ripcord.attempt = attempt_number(&self.errors, &e),
            latency_ms = latency.as_secs_f64() * 1000.0,
            message = crate::telemetry::event::LINK_FAILED
        );
        inner.alerts.observe(&id.name, kind);
        if e.counts_against_link() {
            inner.observe_outcome(i, true);
        }
        match (kind, e.disposition()) {
            (ErrorKind::DeadlineExceeded, _) => {
                if ctx.is_cancelled() {
                    self.stop = Some(Error::cancelled());
                }
                self.errors.push(e);
            }
            (ErrorKind::Cancelled, _) | (_, Disposition::FailFast) => self.stop = Some(e),
            // The vendor may have acted on a request the caller marked not retry-safe: sending
            // it to another link could do its side effect twice.
            _ if e.forbids_resend(ctx) => {
                tracing::info!(
                    ripcord.link = %id.name,
                    error.type = kind.as_str(),
                    message = crate::telemetry::event::FALLBACK_UNSAFE_SKIPPED
                );
                self.stop = Some(e);
            }
            _ => {
                if let Some(after) = e.retry_after().filter(|_| kind.is_local_refusal()) {
                    self.refused |= bit(i);
                    let at = Instant::now() + after;
                    self.earliest_readmission =
                        Some(self.earliest_readmission.map_or(at, |x| x.min(at)));
                }
                let retry_trimmed =
                    kind == ErrorKind::ContextLengthExceeded && self.too_long(inner, i, &e, req);
                self.fell_from = Some((i, kind));
                if let Some(&d) = inner.domains.as_ref().and_then(|d| d.get(i)) {
                    self.avoid_domain = Some(d);
                    self.failed_domains |= domain_bit(d);
                }
                self.preferred = inner
                    .routes
                    .iter()
                    .find(|(k, _)| *k == kind)
                    .map(|&(_, target)| target);
                if retry_trimmed && self.preferred.is_none() {
                    // Trimming can make the prompt fit the window this link stated: call it
                    // again (once) with the trimmed request before moving on.
                    self.tried &= !bit(i);
                    self.preferred = Some(i);
                }
                self.errors.push(e);
            }
        }
    }

    /// The provenance of an answer served by link `i`.
    pub(crate) fn served(
        &mut self,
        inner: &ChainInner,
        i: usize,
        link: Provenance,
        latency: Duration,
    ) -> Provenance {
        let id = inner.links[i].model.id();
        let attempts = if self.errors.is_empty() && !link.attempts.is_empty() {
            // Served by the first link tried (the usual case): its own record is the call's.
            link.attempts
        } else {
            let mut attempts = self.all_attempts();
            if link.attempts.is_empty() {
                attempts.push(Attempt::success(id.name.clone(), id.model.clone(), latency));
            } else {
                attempts.extend(link.attempts);
            }
            attempts
        };
        let first = self.order.as_ref().map_or(0, Order::first);
        let fell_back = i != first;
        if fell_back {
            inner.count_fallback();
        }
        let mut skipped = std::mem::take(&mut self.skipped);
        if skipped.is_empty() {
            skipped = link.skipped;
        } else {
            skipped.extend(link.skipped);
        }
        Provenance {
            served_by: Some(link.served_by.unwrap_or_else(|| Arc::clone(&id.name))),
            attempts,
            skipped,
            degraded: fell_back || link.degraded,
            static_reply: link.static_reply,
            trimmed_messages: link.trimmed_messages,
            continued_by: link.continued_by,
            continuations: link.continuations,
            notice: link
                .notice
                .or_else(|| fell_back.then(|| inner.fallback_notice.clone()).flatten()),
        }
    }
}
