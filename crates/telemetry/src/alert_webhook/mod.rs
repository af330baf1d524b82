//! Alerts without Prometheus: the chain's own alert events, sent to a webhook.
//!
//! [`AlertWebhook::start`] returns a `tracing` layer ([`AlertLayer`]) and spawns the task that
//! delivers. The layer turns four events into alerts named like the Prometheus rules of
//! `deploy/prometheus/alerts.yml`, so the runbook (`docs/operating.md`) serves both:
//!
//! | event | alert | severity | deduplicated per |
//! | --- | --- | --- | --- |
//! | `ripcord.alert` (auth, quota, permission, region) | `RipcordAlertKindError` | critical | link, kind |
//! | `ripcord.breaker_transition` to `open` (resolved by the one to `closed`) | `RipcordBreakerOpen` | critical | link |
//! | `ripcord.static_reply` | `RipcordStaticReply` | critical | route |
//! | `ripcord.chain_exhausted` | `RipcordEveryLinkFailed` | critical | route |
//!
//! A call is never blocked or slowed by the webhook: the layer checks the dedupe window under a
//! short lock and hands the alert to a bounded channel with `try_send`; a full channel drops it
//! and counts the drop ([`WebhookStats::dropped`]), which the task reports in the log once it
//! catches up. The task sends at most one POST per `min_interval` (alerts that arrive meanwhile
//! go in the same POST: Alertmanager takes an array, Slack one text), each with its own
//! `timeout`, retried `retries` times with doubling backoff on a network error, a 429 or a 5xx.
//!
//! The webhook URL is a secret (a Slack webhook's path is its credential): it is held as a
//! [`SecretString`], and logs, errors and `Debug` name only its host.
//!
//! The target can change while the process runs ([`AlertWebhook::retarget`], which
//! `ripcord serve` calls on a config reload): the layer stays installed and hands the next
//! alert to the new sender, while the old sender delivers what was already queued for the old
//! webhook and then stops. Removing the target stops delivery the same way; with no target the
//! layer ignores events at the cost of one atomic load.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use ripcord_core::telemetry::{attr, event};
use secrecy::{ExposeSecret, SecretString};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;

use crate::TelemetryError;

mod sender;
mod wire;

pub use wire::RUNBOOK;

/// The body a webhook receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebhookFormat {
    /// An array of alerts in the shape of Alertmanager's `POST /api/v2/alerts`.
    Alertmanager,
    /// `{"text": …}`, what a Slack incoming webhook takes.
    Slack,
}

impl WebhookFormat {
    /// The config spelling (`alertmanager` / `slack`).
    pub fn as_str(self) -> &'static str {
        match self {
            WebhookFormat::Alertmanager => "alertmanager",
            WebhookFormat::Slack => "slack",
        }
    }
}

/// The default least time between two POSTs.
pub const DEFAULT_MIN_INTERVAL: Duration = Duration::from_secs(10);
/// The default window in which a repeated alert is not sent again.
pub const DEFAULT_DEDUPE: Duration = Duration::from_secs(300);
/// The default timeout of one POST.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// The default number of retries of a failed POST.
pub const DEFAULT_RETRIES: u32 = 3;
/// The default capacity of the queue between the calls and the sender.
pub const DEFAULT_QUEUE: usize = 256;

/// Where and how alerts are sent.
#[derive(Clone)]
pub struct WebhookSettings {
    /// The webhook (`http://` or `https://`); a secret.
    pub url: SecretString,
    /// The body's shape.
    pub format: WebhookFormat,
    /// The least time between two POSTs.
    pub min_interval: Duration,
    /// A repeated alert (same name, link or route, kind) within this window is not sent again.
    pub dedupe: Duration,
    /// The timeout of one POST.
    pub timeout: Duration,
    /// Retries of a POST that failed with a network error, a 429 or a 5xx.
    pub retries: u32,
    /// Alerts queued for the sender at most; more are dropped and counted.
    pub queue: usize,
}

impl WebhookSettings {
    /// Settings with the defaults for everything but the URL and format.
    pub fn new(url: SecretString, format: WebhookFormat) -> Self {
        WebhookSettings {
            url,
            format,
            min_interval: DEFAULT_MIN_INTERVAL,
            dedupe: DEFAULT_DEDUPE,
            timeout: DEFAULT_TIMEOUT,
            retries: DEFAULT_RETRIES,
            queue: DEFAULT_QUEUE,
        }
    }

    /// The URL's scheme and host (and port), the only part of it ever shown.
    pub fn host(&self) -> String {
        url_host(self.url.expose_secret())
    }
}

/// Whether `url` can be a webhook: an `http://` or `https://` URL with a host. The error says
/// what is wrong without repeating the URL (it may hold a secret).
///
/// # Errors
///
/// A sentence naming the problem.
pub fn check_url(url: &str) -> Result<(), String> {
    let parsed = reqwest::Url::parse(url)
        .map_err(|e| format!("not a URL ({e}); the value is not shown, it may hold a secret"))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(format!(
            "must be an http:// or https:// URL with a host (got a {}: URL)",
            parsed.scheme()
        ));
    }
    Ok(())
}

/// `scheme://host[:port]` of `url`, or a placeholder when it does not parse.
pub fn url_host(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(u) => match (u.host_str(), u.port()) {
            (Some(h), Some(p)) => format!("{}://{h}:{p}", u.scheme()),
            (Some(h), None) => format!("{}://{h}", u.scheme()),
            _ => "<a webhook without a host>".to_owned(),
        },
        Err(_) => "<an invalid webhook URL>".to_owned(),
    }
}

impl fmt::Debug for WebhookSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookSettings")
            .field("host", &self.host())
            .field("format", &self.format)
            .field("min_interval", &self.min_interval)
            .field("dedupe", &self.dedupe)
            .field("timeout", &self.timeout)
            .field("retries", &self.retries)
            .field("queue", &self.queue)
            .finish()
    }
}

/// What the webhook did so far.
#[derive(Debug, Default)]
pub struct WebhookStats {
    queued: AtomicU64,
    deduplicated: AtomicU64,
    dropped: AtomicU64,
    delivered: AtomicU64,
    failed: AtomicU64,
}

impl WebhookStats {
    /// Alerts handed to the sender.
    pub fn queued(&self) -> u64 {
        self.queued.load(Ordering::Relaxed)
    }
    /// Alerts not sent because the same one was sent within the dedupe window.
    pub fn deduplicated(&self) -> u64 {
        self.deduplicated.load(Ordering::Relaxed)
    }
    /// Alerts dropped because the sender's queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
    /// Alerts the webhook accepted (a 2xx).
    pub fn delivered(&self) -> u64 {
        self.delivered.load(Ordering::Relaxed)
    }
    /// Alerts given up on after every retry.
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }
}

/// One alert on its way to the webhook.
#[derive(Debug, Clone)]
pub(crate) struct Alert {
    pub(crate) name: &'static str,
    pub(crate) severity: &'static str,
    /// Labels besides `alertname` and `severity`.
    pub(crate) labels: Vec<(&'static str, String)>,
    /// The dedupe key (name, link or route, kind).
    pub(crate) key: String,
    pub(crate) summary: String,
    pub(crate) description: String,
    pub(crate) starts: SystemTime,
    /// Set on a resolution.
    pub(crate) ends: Option<SystemTime>,
}

/// A webhook sender and its `tracing` layer (add the layer to the subscriber once), whose
/// target can be changed while it runs ([`AlertWebhook::retarget`]: a config reload that adds,
/// changes or removes `[alerts]`). Clones share the target and the counters.
#[derive(Debug, Clone)]
pub struct AlertWebhook {
    layer: AlertLayer,
}

impl AlertWebhook {
    /// Spawns the sender on the current tokio runtime.
    ///
    /// # Errors
    ///
    /// No tokio runtime, a URL that is not `http(s)://host…`, a zero queue, or an HTTP client
    /// that cannot be built. The error names the host only.
    pub fn start(settings: WebhookSettings) -> Result<AlertWebhook, TelemetryError> {
        let w = AlertWebhook::idle();
        w.retarget(Some(settings))?;
        Ok(w)
    }

    /// A webhook without a target: its layer ignores every event (at the cost of one atomic
    /// load) until [`AlertWebhook::retarget`] gives it one.
    pub fn idle() -> AlertWebhook {
        AlertWebhook {
            layer: AlertLayer {
                slot: Arc::new(Slot {
                    active: AtomicBool::new(false),
                    current: RwLock::new(None),
                    stats: Arc::new(WebhookStats::default()),
                }),
            },
        }
    }

    /// Sends the next alerts to `settings` (`None`: to nobody), and says what changed.
    ///
    /// Settings equal to the current ones change nothing. Otherwise a new sender starts (on
    /// the current tokio runtime) and the layer hands the next alert to it. The old sender is
    /// not cut off: the alerts already queued for it are still delivered to the old webhook,
    /// with its own interval and retries, and then it stops. When only the rate limits,
    /// timeout, retries or queue change (same URL and format), the new sender inherits what
    /// was already told (the dedupe window's memory and the open breakers awaiting their
    /// resolution), so the receiver is not told the same conditions again; a new URL or format
    /// starts with an empty memory, so the new receiver hears about conditions still going on
    /// the next time they occur.
    ///
    /// # Errors
    ///
    /// As [`AlertWebhook::start`]; the current target is then kept.
    pub fn retarget(&self, settings: Option<WebhookSettings>) -> Result<Retarget, TelemetryError> {
        let slot = &self.layer.slot;
        let Some(settings) = settings else {
            let old = write(&slot.current).take();
            slot.active.store(false, Ordering::Release);
            return Ok(match old {
                Some(t) => Retarget::Stopped { host: t.host },
                None => Retarget::Unchanged { host: None },
            });
        };
        let current = read(&slot.current).clone();
        if let Some(cur) = &current
            && cur.settings.same_as(&settings)
        {
            return Ok(Retarget::Unchanged {
                host: Some(cur.host.clone()),
            });
        }
        let carried = current
            .as_ref()
            .filter(|cur| cur.settings.same_receiver(&settings))
            .map(|cur| cur.inner.memory());
        let same_receiver = carried.is_some();
        let next = Target::start(settings, Arc::clone(&slot.stats), carried)?;
        let host = next.host.clone();
        let old = write(&slot.current).replace(next);
        slot.active.store(true, Ordering::Release);
        Ok(match old {
            None => Retarget::Started { host },
            Some(_) if same_receiver => Retarget::Retuned { host },
            Some(o) => Retarget::Moved {
                from: o.host,
                to: host,
            },
        })
    }

    /// The current webhook's scheme and host, if there is one.
    pub fn host(&self) -> Option<String> {
        read(&self.layer.slot.current)
            .as_ref()
            .map(|t| t.host.clone())
    }

    /// The `tracing` layer that feeds the sender.
    pub fn layer(&self) -> AlertLayer {
        self.layer.clone()
    }

    /// The counters (over every target this webhook had).
    pub fn stats(&self) -> Arc<WebhookStats> {
        Arc::clone(&self.layer.slot.stats)
    }
}

/// What [`AlertWebhook::retarget`] changed; its `Display` is one line naming hosts only.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Retarget {
    /// The settings were the current ones (`host: None`: no webhook before or after).
    Unchanged {
        /// The webhook's scheme and host.
        host: Option<String>,
    },
    /// Alerts now go to a webhook; there was none.
    Started {
        /// The webhook's scheme and host.
        host: String,
    },
    /// The same webhook, with other rate limits, timeout, retries or queue.
    Retuned {
        /// The webhook's scheme and host.
        host: String,
    },
    /// Alerts now go to another webhook (another URL or format).
    Moved {
        /// The old webhook's scheme and host (it still gets what was queued for it).
        from: String,
        /// The new webhook's scheme and host.
        to: String,
    },
    /// Alerts are no longer sent.
    Stopped {
        /// The old webhook's scheme and host (it still gets what was queued for it).
        host: String,
    },
}

impl fmt::Display for Retarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Retarget::Unchanged { host: None } => write!(f, "alerts: no webhook"),
            Retarget::Unchanged { host: Some(h) } => write!(f, "alerts: webhook {h} unchanged"),
            Retarget::Started { host } => write!(f, "alerts: now sent to the webhook at {host}"),
            Retarget::Retuned { host } => {
                write!(f, "alerts: webhook {host} kept, with its new settings")
            }
            Retarget::Moved { from, to } => write!(
                f,
                "alerts: now sent to the webhook at {to} (what was queued for {from} is still delivered there)"
            ),
            Retarget::Stopped { host } => write!(
                f,
                "alerts: no longer sent (what was queued for {host} is still delivered there)"
            ),
        }
    }
}

/// The `tracing_subscriber::Layer` of an [`AlertWebhook`]: turns alert events into queued
/// alerts (see the [module docs](self)) for the webhook's current target.
#[derive(Clone)]
pub struct AlertLayer {
    slot: Arc<Slot>,
}

impl fmt::Debug for AlertLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AlertLayer").finish_non_exhaustive()
    }
}

/// Where the layer's alerts go now.
struct Slot {
    /// Whether there is a target (read before anything else, so an idle layer costs a load).
    active: AtomicBool,
    current: RwLock<Option<Target>>,
    stats: Arc<WebhookStats>,
}

/// One webhook's sender: the layer's side of it, and the settings it was started with.
#[derive(Clone)]
struct Target {
    inner: Arc<LayerInner>,
    settings: Fingerprint,
    host: String,
}

impl Target {
    fn start(
        settings: WebhookSettings,
        stats: Arc<WebhookStats>,
        carried: Option<Memory>,
    ) -> Result<Target, TelemetryError> {
        check_url(settings.url.expose_secret())
            .map_err(|why| TelemetryError::config("alerts.webhook_url", why))?;
        if settings.queue == 0 {
            return Err(TelemetryError::config("alerts.queue", "must be at least 1"));
        }
        let handle = tokio::runtime::Handle::try_current().map_err(|_| {
            TelemetryError::config("alerts", "the webhook sender needs a tokio runtime")
        })?;
        let client = reqwest::Client::builder()
            .timeout(settings.timeout)
            .build()
            .map_err(|e| TelemetryError::config("alerts", e.without_url().to_string()))?;
        let (tx, rx) = mpsc::channel(settings.queue);
        let (sent, open) = carried.unwrap_or_default();
        let inner = Arc::new(LayerInner {
            tx,
            dedupe: settings.dedupe,
            sent: Mutex::new(sent),
            open: Mutex::new(open),
            stats: Arc::clone(&stats),
        });
        let fingerprint = Fingerprint::of(&settings);
        let host = settings.host();
        // The task ends once every sender of its channel is gone (the target was replaced
        // and the events holding it are done) and it has delivered what was queued.
        handle.spawn(sender::run(rx, client, settings, stats));
        Ok(Target {
            inner,
            settings: fingerprint,
            host,
        })
    }
}

/// What a target was started with, to tell a reload that changes nothing from one that does.
#[derive(Clone)]
struct Fingerprint {
    url: SecretString,
    format: WebhookFormat,
    rest: (Duration, Duration, Duration, u32, usize),
}

impl Fingerprint {
    fn of(s: &WebhookSettings) -> Self {
        Fingerprint {
            url: s.url.clone(),
            format: s.format,
            rest: (s.min_interval, s.dedupe, s.timeout, s.retries, s.queue),
        }
    }

    /// Same URL and format: the same receiver hears the alerts.
    fn same_receiver(&self, s: &WebhookSettings) -> bool {
        self.format == s.format && self.url.expose_secret() == s.url.expose_secret()
    }

    fn same_as(&self, s: &WebhookSettings) -> bool {
        self.same_receiver(s)
            && self.rest == (s.min_interval, s.dedupe, s.timeout, s.retries, s.queue)
    }
}

/// What a target has told its receiver: when each dedupe key was queued, and the breakers
/// whose opening was sent.
type Memory = (HashMap<String, Instant>, HashMap<String, SystemTime>);

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}

struct LayerInner {
    tx: mpsc::Sender<Alert>,
    dedupe: Duration,
    /// When each dedupe key was last queued (bounded: alert names × links/routes × kinds).
    sent: Mutex<HashMap<String, Instant>>,
    /// Breakers whose opening was queued and not yet resolved, with when they opened.
    open: Mutex<HashMap<String, SystemTime>>,
    stats: Arc<WebhookStats>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

impl LayerInner {
    /// A copy of what this target has told (for a new sender to the same receiver).
    fn memory(&self) -> Memory {
        (lock(&self.sent).clone(), lock(&self.open).clone())
    }

    /// Queues `alert` unless the same key was queued within the window; never waits.
    fn offer(&self, alert: Alert) -> bool {
        let now = Instant::now();
        if alert.ends.is_none() {
            let mut sent = lock(&self.sent);
            if let Some(at) = sent.get(&alert.key)
                && now.saturating_duration_since(*at) < self.dedupe
            {
                self.stats.deduplicated.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            sent.insert(alert.key.clone(), now);
        }
        match self.tx.try_send(alert) {
            Ok(()) => {
                self.stats.queued.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(_) => {
                self.stats.dropped.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    fn on_fields(&self, name: &'static str, f: &Fields) {
        let now = SystemTime::now();
        let kind = f.error_type.clone().unwrap_or_default();
        match name {
            event::ALERT => {
                let link = f.link.clone().unwrap_or_default();
                self.offer(Alert {
                    name: "RipcordAlertKindError",
                    severity: "critical",
                    labels: vec![("ripcord_link", link.clone()), ("error_type", kind.clone())],
                    key: format!("RipcordAlertKindError\u{0}{link}\u{0}{kind}"),
                    summary: format!("ripcord: link {link} fails with {kind}"),
                    description: "auth: the key is wrong or revoked; quota_exhausted: the account is out of credit; permission_denied / region_blocked: the key or this region is refused. Waiting will not fix it.".to_owned(),
                    starts: now,
                    ends: None,
                });
            }
            event::BREAKER_TRANSITION => self.breaker(f, now),
            event::STATIC_REPLY | event::CHAIN_EXHAUSTED => {
                let chain = f.chain.clone().unwrap_or_default();
                let (alert, summary, description) = if name == event::STATIC_REPLY {
                    (
                        "RipcordStaticReply",
                        format!(
                            "ripcord: calls of {chain} got the static reply (last failure: {kind})"
                        ),
                        "Every link of the route failed or was skipped; users read the static reply. GET /status shows which and why.",
                    )
                } else {
                    (
                        "RipcordEveryLinkFailed",
                        format!(
                            "ripcord: calls of {chain} ended in an error — every link failed and there is no static reply (last failure: {kind})"
                        ),
                        "Users get errors. Every link of the route is failing or skipped. GET /status shows which and why.",
                    )
                };
                self.offer(Alert {
                    name: alert,
                    severity: "critical",
                    labels: vec![
                        ("ripcord_chain", chain.clone()),
                        ("error_type", kind.clone()),
                    ],
                    // One per route: the last kind changes as links open and are skipped,
                    // but it is the same outage.
                    key: format!("{alert}\u{0}{chain}"),
                    summary,
                    description: description.to_owned(),
                    starts: now,
                    ends: None,
                });
            }
            _ => {}
        }
    }

    fn breaker(&self, f: &Fields, now: SystemTime) {
        let (Some(link), Some(to)) = (&f.link, &f.to) else {
            return;
        };
        let alert = |starts, ends| {
            Alert {
            name: "RipcordBreakerOpen",
            severity: "critical",
            labels: vec![("ripcord_link", link.clone())],
            key: format!("RipcordBreakerOpen\u{0}{link}"),
            summary: format!("ripcord: the breaker of link {link} is open"),
            description: "Calls skip this link and fall back. Check the vendor's status page and the link's recent error kinds on GET /status.".to_owned(),
            starts,
            ends,
        }
        };
        match to.as_str() {
            // Told (not deduplicated or dropped): remember it, so the closing resolves it.
            "open" if self.offer(alert(now, None)) => {
                lock(&self.open).insert(link.clone(), now);
            }
            "closed" => {
                let opened = lock(&self.open).remove(link);
                if let Some(starts) = opened {
                    self.offer(alert(starts, Some(now)));
                }
            }
            _ => {}
        }
    }
}

const EVENTS: [&str; 4] = [
    event::ALERT,
    event::BREAKER_TRANSITION,
    event::STATIC_REPLY,
    event::CHAIN_EXHAUSTED,
];

/// The fields the layer reads from an alert event.
#[derive(Default)]
struct Fields {
    message: Option<&'static str>,
    link: Option<String>,
    chain: Option<String>,
    error_type: Option<String>,
    to: Option<String>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.message = EVENTS.into_iter().find(|n| *n == value),
            "link" | attr::LINK => self.link = Some(value.to_owned()),
            attr::CHAIN => self.chain = Some(value.to_owned()),
            attr::ERROR_TYPE => self.error_type = Some(value.to_owned()),
            "to" => self.to = Some(value.to_owned()),
            _ => {}
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        // `%value` fields (Display) arrive here; a message given as format arguments too.
        let text = format!("{value:?}");
        let text = match field.name() {
            attr::CHAIN | attr::LINK | "link" => text,
            "message" | attr::ERROR_TYPE | "to" => text.trim_matches('"').to_owned(),
            _ => return,
        };
        self.record_str(field, &text);
    }
}

impl<S: Subscriber> Layer<S> for AlertLayer {
    fn on_event(&self, ev: &Event<'_>, _ctx: Context<'_, S>) {
        if !ev.metadata().target().starts_with("ripcord") {
            return;
        }
        if !self.slot.active.load(Ordering::Acquire) {
            return;
        }
        let mut f = Fields::default();
        ev.record(&mut f);
        let Some(name) = f.message else { return };
        // The lock is held only to clone the target: a reload swapping it never waits on a
        // call, and an alert raised during the swap goes to one of the two senders.
        let target = read(&self.slot.current)
            .as_ref()
            .map(|t| Arc::clone(&t.inner));
        if let Some(inner) = target {
            inner.on_fields(name, &f);
        }
    }
}

/// `layer`, and the alert webhook's layer beside it when there is one.
pub(crate) fn with_alerts(
    layer: crate::TelemetryLayer,
    alerts: Option<AlertLayer>,
) -> crate::TelemetryLayer {
    match alerts {
        Some(a) => Box::new(layer.and_then(a)),
        None => layer,
    }
}

#[cfg(test)]
mod tests;
