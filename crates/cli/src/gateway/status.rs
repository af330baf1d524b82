//! `GET /status`: the chain at a glance, for a person on call.
//!
//! One HTML page, no external assets and no scripts (it re-reads itself every 5 s with a
//! `<meta http-equiv="refresh">`), in the look of the chaos report: every route with its
//! links and who served its calls over the last minute and the last five; every provider with
//! its health, its breaker state and since when, its recent error kinds; and the last
//! fallbacks, newest first.
//!
//! Where the numbers come from:
//! - health and breakers: the same [`HealthHandle`]s `/readyz` reads (one per provider,
//!   however many routes share it);
//! - served-by shares, recent error kinds and fallbacks: a [`StatusBoard`] that sees the
//!   provenance of every call the gateway answers. [`Recorded`] wraps the gateway's models, so
//!   streamed calls count too (at their commit point, the first provenance the chain sends),
//!   and failed calls count with the attempts their error carries.
//!
//! Memory is bounded: calls older than [`WINDOW`] are dropped and at most [`MAX_CALLS`] are
//! kept; the fallback list keeps the last [`MAX_FALLBACKS`].

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use futures::StreamExt;
use ripcord_core::{
    Attempt, ChatModel, ChatRequest, ChatResponse, ChatStream, Context, Error, ErrorKind,
    Provenance, Result, StreamEvent,
};
use ripcord_resilience::{BreakerState, HealthHandle, HealthSnapshot, HealthStatus};
use tokio::time::Instant;

use crate::build::Built;
use crate::routing;

/// How far back the page looks for shares and error kinds.
pub const WINDOW: Duration = Duration::from_secs(5 * 60);
/// The most calls kept for the shares (the oldest go first).
pub const MAX_CALLS: usize = 20_000;
/// The fallbacks listed.
pub const MAX_FALLBACKS: usize = 20;

/// One call, as the page counts it.
#[derive(Debug, Clone)]
struct CallRecord {
    at: Instant,
    route: usize,
    /// The link that served, `static`, or `none` (the call failed).
    served: Arc<str>,
    /// Failed attempts: (link, kind).
    errors: Vec<(Arc<str>, ErrorKind)>,
}

/// A fallback: the chain moved from one link to the next (or to the static reply).
#[derive(Debug, Clone)]
struct FallbackRecord {
    at: SystemTime,
    route: usize,
    from: Arc<str>,
    to: Arc<str>,
    kind: ErrorKind,
}

#[derive(Debug, Default)]
struct Recent {
    calls: VecDeque<CallRecord>,
    fallbacks: VecDeque<FallbackRecord>,
}

/// A route as the page shows it.
#[derive(Debug, Clone)]
struct RouteInfo {
    name: String,
    links: Vec<String>,
    static_reply: bool,
}

/// What `/status` shows: the providers' health handles, the routes, and the recent calls.
#[derive(Debug)]
pub struct StatusBoard {
    started: SystemTime,
    links: Vec<HealthHandle>,
    pools: Vec<ripcord_resilience::PoolHandle>,
    routes: Vec<RouteInfo>,
    recent: Mutex<Recent>,
    /// The vendors' status page pollers, and the switches their declarations steer.
    vendors: Arc<Vec<Arc<crate::build::status_watch::VendorWatch>>>,
    switches: crate::build::admin::Switches,
}

impl StatusBoard {
    /// A board over the built routes and providers.
    pub fn from_built(built: &Built) -> Self {
        let routes = built
            .routes
            .iter()
            .map(|r| RouteInfo {
                name: r.name.clone(),
                links: r.links.clone(),
                static_reply: r.static_reply,
            })
            .collect();
        StatusBoard {
            started: SystemTime::now(),
            links: built.health.clone(),
            pools: built.pools.clone(),
            routes,
            recent: Mutex::new(Recent::default()),
            vendors: Arc::clone(&built.vendor_watches),
            switches: built.switches.clone(),
        }
    }

    /// The health of every provider a caller limited to the routes `may_use` admits (by
    /// index) may see: those the routes use (every provider when it may use every route).
    fn snapshots_for(&self, may_use: &dyn Fn(usize) -> bool) -> Vec<HealthSnapshot> {
        let every_route = (0..self.routes.len()).all(may_use);
        let shown_links: Vec<&str> = self
            .routes
            .iter()
            .enumerate()
            .filter(|(i, _)| may_use(*i))
            .flat_map(|(_, r)| r.links.iter().map(String::as_str))
            .collect();
        self.links
            .iter()
            .map(HealthHandle::snapshot)
            .filter(|s| every_route || shown_links.contains(&&*s.link))
            .collect()
    }

    /// The page's data as JSON (`GET /status` with `Accept: application/json`): each
    /// provider's health and breaker, and what its vendor's status page declares.
    pub fn to_json(&self) -> serde_json::Value {
        self.to_json_for(&|_| true)
    }

    /// [`StatusBoard::to_json`] as a key limited to some routes sees it: only the providers
    /// those routes use.
    pub fn to_json_for(&self, may_use: &dyn Fn(usize) -> bool) -> serde_json::Value {
        let snaps = self.snapshots_for(may_use);
        serde_json::json!({
            "providers": snaps
                .iter()
                .map(|s| serde_json::to_value(s).unwrap_or(serde_json::Value::Null))
                .collect::<Vec<_>>(),
            "vendor_status": super::status_vendors::to_json(&self.vendors, &self.switches, &snaps),
        })
    }

    fn recent(&self) -> std::sync::MutexGuard<'_, Recent> {
        match self.recent.lock() {
            Ok(r) => r,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// Records a call of route `route` (`None` = the default route) that got an answer.
    pub fn record_answer(&self, route: Option<usize>, p: &Provenance) {
        let served: Arc<str> = match (&p.served_by, p.static_reply) {
            (Some(s), _) => Arc::clone(s),
            (None, true) => Arc::from("static"),
            (None, false) => Arc::from("none"),
        };
        self.record(route.unwrap_or(0), &p.attempts, served);
    }

    /// Records a call of route `route` that failed with `e`.
    pub fn record_failure(&self, route: Option<usize>, e: &Error) {
        self.record(route.unwrap_or(0), e.attempts(), Arc::from("none"));
    }

    fn record(&self, route: usize, attempts: &[Attempt], served: Arc<str>) {
        let now = Instant::now();
        let wall = SystemTime::now();
        let errors: Vec<(Arc<str>, ErrorKind)> = attempts
            .iter()
            .filter_map(|a| a.error_kind.map(|k| (Arc::clone(&a.provider), k)))
            .collect();
        let mut fallbacks = Vec::new();
        for (i, a) in attempts.iter().enumerate() {
            let Some(kind) = a.error_kind else { continue };
            let to = match attempts.get(i + 1) {
                Some(next) if next.provider == a.provider => continue, // a retry, not a fallback
                Some(next) => Arc::clone(&next.provider),
                None if &*served == "static" => Arc::from("static"),
                None => continue,
            };
            fallbacks.push(FallbackRecord {
                at: wall,
                route,
                from: Arc::clone(&a.provider),
                to,
                kind,
            });
        }
        let mut r = self.recent();
        while r
            .calls
            .front()
            .is_some_and(|c| now.saturating_duration_since(c.at) > WINDOW)
            || r.calls.len() >= MAX_CALLS
        {
            r.calls.pop_front();
        }
        r.calls.push_back(CallRecord {
            at: now,
            route,
            served,
            errors,
        });
        for f in fallbacks {
            if r.fallbacks.len() >= MAX_FALLBACKS {
                r.fallbacks.pop_front();
            }
            r.fallbacks.push_back(f);
        }
    }

    /// The pools' deployments: state, calls in flight, peak-EWMA latency, cooldown left.
    fn render_pools(&self, out: &mut String) {
        if self.pools.is_empty() {
            return;
        }
        out.push_str(r#"<h2>Pools</h2><table><tr><th>provider</th><th class="l">deployment</th><th>region</th><th>state</th><th>in flight</th><th>latency (peak EWMA)</th><th>cooldown left</th><th>ejections</th></tr>"#);
        for pool in &self.pools {
            let snap = pool.snapshot();
            for d in &snap.deployments {
                let class = match d.state {
                    ripcord_resilience::DeploymentState::Available => "pass",
                    _ => "fail",
                };
                let state = match d.out_reason {
                    Some(k) => format!("{} ({})", d.state.as_str(), k.as_str()),
                    None => d.state.as_str().to_owned(),
                };
                let _ = write!(
                    out,
                    r#"<tr><td>{}</td><td class="l">{}</td><td>{}</td><td class="{class}">{state}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>"#,
                    esc(&snap.link),
                    esc(&d.name),
                    esc(d.region.as_deref().unwrap_or("—")),
                    d.in_flight,
                    d.latency_ewma_ms
                        .map_or("—".to_owned(), |ms| format!("{ms:.0} ms")),
                    if d.cooldown_left_ms == 0 {
                        "—".to_owned()
                    } else {
                        ago(Duration::from_millis(d.cooldown_left_ms))
                    },
                    d.ejections,
                );
            }
        }
        out.push_str("</table>");
    }

    /// The page, every route on it (for a caller that may use every route).
    pub fn render(&self) -> String {
        self.render_for(&|_| true)
    }

    /// The page as a caller sees it that may use only the routes `may_use` admits (by index):
    /// the other routes, their fallbacks, and the providers only they use are left out, and
    /// the badge and counts are over what is shown.
    pub fn render_for(&self, may_use: &dyn Fn(usize) -> bool) -> String {
        let now = Instant::now();
        let wall = SystemTime::now();
        let snaps = self.snapshots_for(may_use);
        let (calls, fallbacks) = {
            let r = self.recent();
            let calls: Vec<CallRecord> = r
                .calls
                .iter()
                .filter(|c| now.saturating_duration_since(c.at) <= WINDOW)
                .cloned()
                .collect();
            let fallbacks: Vec<FallbackRecord> = r
                .fallbacks
                .iter()
                .rev()
                .filter(|f| may_use(f.route))
                .cloned()
                .collect();
            (calls, fallbacks)
        };
        let mut out = String::with_capacity(16 * 1024);
        let any_open = snaps.iter().any(|s| {
            s.breaker
                .as_ref()
                .is_some_and(|b| b.state != BreakerState::Closed)
        });
        let any_unhealthy = snaps.iter().any(|s| s.status == HealthStatus::Unhealthy);
        let (badge, word) = if any_open || any_unhealthy {
            ("fail", "DEGRADED")
        } else {
            ("pass", "OK")
        };
        let _ = write!(
            out,
            r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"/><meta name="viewport" content="width=device-width, initial-scale=1"/><meta http-equiv="refresh" content="5"/><title>ripcord status</title><style>{STYLE}</style></head><body><h1>ripcord status <span class="badge {badge}">{word}</span></h1><p class="muted">{} · up {} · {} routes over {} providers · shares and error kinds over the last {} min · this page refreshes every 5 s</p>"#,
            utc(wall),
            ago(wall.duration_since(self.started).unwrap_or_default()),
            (0..self.routes.len()).filter(|i| may_use(*i)).count(),
            snaps.len(),
            WINDOW.as_secs() / 60,
        );

        out.push_str(r#"<h2>Routes</h2><table><tr><th>route</th><th class="l">links (breaker)</th><th>calls 1 min</th><th class="l">served by, last 1 min</th><th>calls 5 min</th><th class="l">served by, last 5 min</th></tr>"#);
        for (i, r) in self.routes.iter().enumerate() {
            if !may_use(i) {
                continue;
            }
            let links: Vec<String> = r
                .links
                .iter()
                .map(|l| {
                    let state = snaps
                        .iter()
                        .find(|s| &*s.link == l.as_str())
                        .and_then(|s| s.breaker.as_ref().map(|b| b.state));
                    match state {
                        Some(st) => format!(
                            r#"{} <span class="{}">{}</span>"#,
                            esc(l),
                            state_class(st),
                            st.as_str()
                        ),
                        None => esc(l),
                    }
                })
                .chain(r.static_reply.then(|| "static".to_owned()))
                .collect();
            let last = |w: Duration| {
                calls
                    .iter()
                    .filter(|c| c.route == i && now.saturating_duration_since(c.at) <= w)
                    .collect::<Vec<_>>()
            };
            let one = last(Duration::from_secs(60));
            let five = last(WINDOW);
            let _ = write!(
                out,
                r#"<tr><td>{}</td><td class="l">{}</td><td>{}</td><td class="l">{}</td><td>{}</td><td class="l">{}</td></tr>"#,
                esc(&r.name),
                links.join(" → "),
                one.len(),
                shares(&one),
                five.len(),
                shares(&five),
            );
        }
        out.push_str("</table>");

        out.push_str(r#"<h2>Providers</h2><table><tr><th>provider</th><th>health</th><th>breaker</th><th class="l">since</th><th>trips</th><th>error rate</th><th>latency</th><th class="l">recent error kinds (5 min)</th></tr>"#);
        for s in &snaps {
            let (state, since) = match &s.breaker {
                Some(b) => {
                    let since = b.history.last().map_or_else(
                        || format!("start ({})", utc(self.started)),
                        |t| {
                            let age = now.saturating_duration_since(t.at);
                            let at = wall.checked_sub(age).unwrap_or(wall);
                            let cause = t
                                .cause
                                .map(|k| format!(", after {}", k.as_str()))
                                .unwrap_or_default();
                            format!("{} ({} ago{cause})", utc(at), ago(age))
                        },
                    );
                    let mut state = format!(
                        r#"<span class="{}">{}</span>"#,
                        state_class(b.state),
                        b.state.as_str()
                    );
                    if let Some(ms) = b.open_remaining_ms {
                        let _ = write!(
                            state,
                            " (probes in {})",
                            ago(Duration::from_millis(ms as u64))
                        );
                    }
                    (state, since)
                }
                None => ("—".to_owned(), "—".to_owned()),
            };
            let mut kinds: BTreeMap<&str, u64> = BTreeMap::new();
            for c in &calls {
                for (link, k) in &c.errors {
                    if link == &s.link {
                        *kinds.entry(k.as_str()).or_default() += 1;
                    }
                }
            }
            let kinds = if kinds.is_empty() {
                "none".to_owned()
            } else {
                kinds
                    .iter()
                    .map(|(k, n)| {
                        let alert = ErrorKind::parse(k).is_some_and(ErrorKind::needs_alert);
                        if alert {
                            format!(r#"<span class="fail">{k} ×{n} (alert)</span>"#)
                        } else {
                            format!("{k} ×{n}")
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let _ = write!(
                out,
                r#"<tr><td>{}</td><td class="{}">{}</td><td>{state}</td><td class="l">{since}</td><td>{}</td><td>{:.0}%</td><td>{}</td><td class="l">{kinds}</td></tr>"#,
                esc(&s.link),
                health_class(s.status),
                health_word(s.status),
                s.breaker.as_ref().map_or(0, |b| b.trips),
                s.error_rate * 100.0,
                s.latency_ewma_ms
                    .map_or("—".to_owned(), |ms| format!("{ms:.0} ms")),
            );
        }
        out.push_str("</table>");
        self.render_pools(&mut out);
        super::status_vendors::render(&self.vendors, &self.switches, &snaps, &mut out);

        out.push_str(r#"<h2>Last fallbacks</h2>"#);
        if fallbacks.is_empty() {
            out.push_str(r#"<p class="muted">No fallback since the gateway started.</p>"#);
        } else {
            out.push_str(r#"<table><tr><th class="l">when</th><th class="l">route</th><th class="l">fallback</th><th class="l">because</th></tr>"#);
            for f in &fallbacks {
                let route = self.routes.get(f.route).map_or("", |r| r.name.as_str());
                let _ = write!(
                    out,
                    r#"<tr><td class="l">{} ({} ago)</td><td class="l">{}</td><td class="l">{} → {}</td><td class="l">{}</td></tr>"#,
                    utc(f.at),
                    ago(wall.duration_since(f.at).unwrap_or_default()),
                    esc(route),
                    esc(&f.from),
                    esc(&f.to),
                    f.kind.as_str(),
                );
            }
            out.push_str("</table>");
        }
        out.push_str(r#"<p class="muted">Machine-readable: <code>GET /readyz</code> (JSON), <code>GET /metrics</code> (Prometheus).</p></body></html>"#);
        out
    }
}

/// "primary 80% · static 20%", largest first.
fn shares(calls: &[&CallRecord]) -> String {
    if calls.is_empty() {
        return r#"<span class="muted">no calls</span>"#.to_owned();
    }
    let mut by: BTreeMap<&str, usize> = BTreeMap::new();
    for c in calls {
        *by.entry(&c.served).or_default() += 1;
    }
    let mut v: Vec<(&str, usize)> = by.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    v.iter()
        .map(|(s, n)| {
            let pct = *n as f64 * 100.0 / calls.len() as f64;
            let class = match *s {
                "static" | "none" => " class=\"fail\"",
                _ => "",
            };
            format!("<span{class}>{} {pct:.0}%</span>", esc(s))
        })
        .collect::<Vec<_>>()
        .join(" · ")
}

fn state_class(s: BreakerState) -> &'static str {
    match s {
        BreakerState::Closed => "pass",
        _ => "fail",
    }
}

fn health_class(s: HealthStatus) -> &'static str {
    match s {
        HealthStatus::Healthy => "pass",
        HealthStatus::Degraded | HealthStatus::Unhealthy => "fail",
        _ => "muted",
    }
}

fn health_word(s: HealthStatus) -> &'static str {
    match s {
        HealthStatus::Healthy => "healthy",
        HealthStatus::Degraded => "degraded",
        HealthStatus::Unhealthy => "unhealthy",
        _ => "unknown",
    }
}

/// `2026-12-01 09:41:02 UTC`.
fn utc(t: SystemTime) -> String {
    format!("{} UTC", ripcord_core::calendar::Utc::of(t).spaced())
}

/// `3 s`, `4 min 12 s`, `2 h 5 min`.
pub(super) fn ago(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{:.1} s", d.as_secs_f64())
    } else if s < 3600 {
        format!("{} min {} s", s / 60, s % 60)
    } else {
        format!("{} h {} min", s / 3600, s / 60 % 60)
    }
}

/// Escapes text for HTML.
pub(super) fn esc(s: &str) -> String {
    super::escaped(s, |c| match c {
        '&' => Some("&amp;"),
        '<' => Some("&lt;"),
        '>' => Some("&gt;"),
        '"' => Some("&quot;"),
        '\'' => Some("&#39;"),
        _ => None,
    })
}

/// The chaos report's look (xtask's HTML report), so both pages read alike.
const STYLE: &str = r#"
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px auto; max-width: 1100px; color: #1d232b; padding: 0 12px; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 18px; margin: 28px 0 4px; border-top: 1px solid #d8dde3; padding-top: 14px; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { padding: 3px 10px; text-align: right; border-bottom: 1px solid #eceff2; }
th:first-child, td:first-child { text-align: left; }
td.l, th.l { text-align: left; }
.pass { color: #1e7a3e; font-weight: 600; }
.fail { color: #b3261e; font-weight: 600; }
.muted { color: #5f6b77; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 9px; font-size: 12px; color: #fff; vertical-align: middle; }
.badge.pass { background: #1e7a3e; }
.badge.fail { background: #b3261e; }
code { background: #f3f5f7; padding: 0 4px; border-radius: 3px; }
"#;

/// Tells the metrics what an answer cost its tenant (`ripcord.tenant_usage`): the tenant of
/// the caller's key, `anonymous` for calls without one.
fn tenant_usage(ctx: &Context, usage: &ripcord_core::Usage) {
    let tenant = ctx.tenant().unwrap_or("anonymous");
    // A metrics feed, not a log line: the server log leaves this target
    // (`ripcord_telemetry::stderr_log::METRICS_ONLY_TARGET`) out; one line per request is the
    // access line's job.
    match usage.cost_usd {
        Some(cost) => tracing::event!(
            target: "ripcord::usage",
            tracing::Level::INFO,
            ripcord.tenant = tenant,
            gen_ai.usage.input_tokens = usage.input_tokens,
            gen_ai.usage.output_tokens = usage.output_tokens,
            ripcord.cost_usd = cost,
            message = ripcord_core::telemetry::event::TENANT_USAGE
        ),
        None => tracing::event!(
            target: "ripcord::usage",
            tracing::Level::INFO,
            ripcord.tenant = tenant,
            gen_ai.usage.input_tokens = usage.input_tokens,
            gen_ai.usage.output_tokens = usage.output_tokens,
            message = ripcord_core::telemetry::event::TENANT_USAGE
        ),
    }
}

/// The route index a call's context carries.
fn route_of(ctx: &Context) -> Option<usize> {
    routing::Route::of(ctx)
}

/// A model whose calls the [`StatusBoard`] sees: answers by their provenance, failures by the
/// attempts their error carries, streams at their commit point.
#[derive(Debug)]
pub struct Recorded {
    inner: Arc<dyn ChatModel>,
    board: Arc<StatusBoard>,
}

impl Recorded {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn ChatModel>, board: Arc<StatusBoard>) -> Self {
        Recorded { inner, board }
    }
}

#[async_trait]
impl ripcord_core::Decorator for Recorded {
    type Inner = dyn ChatModel;

    fn inner(&self) -> &Self::Inner {
        &*self.inner
    }

    async fn decorated_chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        let route = route_of(ctx);
        let r = self.inner.chat(req, ctx).await;
        match &r {
            Ok(resp) => {
                self.board.record_answer(route, &resp.provenance);
                tenant_usage(ctx, &resp.usage);
            }
            Err(e) => self.board.record_failure(route, e),
        }
        r
    }

    async fn decorated_stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        let route = route_of(ctx);
        let s = match self.inner.stream(req, ctx).await {
            Ok(s) => s,
            Err(e) => {
                self.board.record_failure(route, &e);
                return Err(e);
            }
        };
        let board = Arc::clone(&self.board);
        let tenant_ctx = ctx.clone();
        // Counted once: at the first provenance (the commit), or at an error before it.
        let mut counted = false;
        Ok(Box::pin(s.inspect(move |item| {
            if let Ok(StreamEvent::Usage { usage }) = item {
                tenant_usage(&tenant_ctx, usage);
            }
            if counted {
                return;
            }
            match item {
                Ok(StreamEvent::Provenance { provenance }) => {
                    board.record_answer(route, provenance);
                    counted = true;
                }
                Err(e) => {
                    board.record_failure(route, e);
                    counted = true;
                }
                Ok(_) => {}
            }
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    #[test]
    fn tenant_usage_goes_to_the_metrics_only_target() {
        // The macro needs a literal; it must stay the target the server log leaves out.
        let src = include_str!("status.rs");
        let literal = format!(
            "target: \"{}\"",
            ripcord_telemetry::stderr_log::METRICS_ONLY_TARGET
        );
        assert_eq!(src.matches(&literal).count(), 2, "{literal}");
    }

    #[test]
    fn dates_are_civil() {
        assert_eq!(utc(UNIX_EPOCH), "1970-01-01 00:00:00 UTC");
        let t = UNIX_EPOCH + Duration::from_secs(1_796_117_662); // 2026-12-01 09:34:22
        assert_eq!(utc(t), "2026-12-01 09:34:22 UTC");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(utc(leap), "2000-02-29 00:00:00 UTC");
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(
            esc(r#"<a href="x">&'"#),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }
}
