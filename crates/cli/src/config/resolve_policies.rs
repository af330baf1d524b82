//! Resolution of the opt-in link policies (`[providers.cache]`, `[providers.validate]`,
//! `[providers.hedge]`), the breaker's extra rules (`failure_rate`, `success_threshold`,
//! `kinds`), a provider's facts (`data_region`, `data_use`, `price`), a key's per-request
//! controls and a route's notice settings.
//!
//! Every field left out is the library's default: the policies start from the library's own
//! builder (`CachePolicy::builder()`, `HedgePolicy::builder()`), which begins at its
//! `Default`, and only what the file sets is applied, so nothing is restated here. The
//! library's `build()` validates, and its complaint comes back with the file, line and key.

use std::time::Duration;

use ripcord_core::{ErrorKind, Price, Priority};
use ripcord_resilience::{CachePolicy, HedgeDelay, HedgePolicy, KindAction};

use super::ConfigError;
use super::env::Ctx;
use super::raw::{BreakerConfig, ProviderConfig};
use super::raw_policies::{KeyControlsConfig, KindActionConfig};

/// A provider's opt-in policies and facts, resolved.
#[derive(Debug, Clone, Default)]
pub struct LinkPolicies {
    /// The response cache (`None`: no cache).
    pub cache: Option<CachePolicy>,
    /// Check JSON answers ([`ripcord_resilience::JsonValidator`]).
    pub validate_json: bool,
    /// Hedge with this provider, with these settings.
    pub hedge: Option<(String, HedgePolicy)>,
    /// The breaker's extra rules.
    pub breaker: BreakerExtra,
    /// What the file says about the provider.
    pub facts: Facts,
}

/// The breaker's rules beyond [`super::BreakerSettings`], over the library's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct BreakerExtra {
    /// Trip when this share of the calls in the window failed, once it holds enough calls:
    /// (threshold, window in ms, least calls).
    pub failure_rate: Option<(f64, u64, u32)>,
    /// Successful probes needed to close from half-open.
    pub success_threshold: u32,
    /// Per-error-kind overrides.
    pub kinds: Vec<(ErrorKind, KindAction)>,
}

impl Default for BreakerExtra {
    /// The library's defaults ([`ripcord_resilience::BreakerPolicy::default`]).
    fn default() -> Self {
        let lib = ripcord_resilience::BreakerPolicy::default();
        BreakerExtra {
            failure_rate: lib
                .failure_rate()
                .map(|(t, w, n)| (t, super::defaults::ms(w), n)),
            success_threshold: lib.success_threshold(),
            kinds: Vec::new(),
        }
    }
}

/// What the file says about a provider's vendor.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Facts {
    /// The region its data is processed in (overrides the adapter's).
    pub data_region: Option<String>,
    /// Whether the vendor may train on the data (`None`: not stated).
    pub train: Option<bool>,
    /// How many days the vendor keeps the data (`None`: not stated).
    pub retain_days: Option<u32>,
    /// The price (overrides the built-in table).
    pub price: Option<Price>,
}

/// Which per-request control headers a key's clients may send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyControls {
    /// `x-ripcord-locality`.
    pub locality: bool,
    /// `x-ripcord-retry-safe` and `Idempotency-Key`.
    pub retry_safe: bool,
    /// `x-ripcord-priority`.
    pub priority: bool,
    /// `x-ripcord-intent`.
    pub intent: bool,
    /// The highest priority the client may ask for.
    pub max_priority: Priority,
}

impl Default for KeyControls {
    /// Every control allowed, up to `high`.
    fn default() -> Self {
        KeyControls {
            locality: true,
            retry_safe: true,
            priority: true,
            intent: true,
            max_priority: Priority::High,
        }
    }
}

/// The priorities a client may name, in the header's spelling.
pub fn parse_priority(s: &str) -> Option<Priority> {
    match s {
        "low" => Some(Priority::Low),
        "normal" => Some(Priority::Normal),
        "high" => Some(Priority::High),
        _ => None,
    }
}

/// The header's spelling of a priority.
pub fn priority_name(p: Priority) -> &'static str {
    match p {
        Priority::Low => "low",
        Priority::Normal => "normal",
        _ => "high",
    }
}

/// A key's `controls`, resolved.
pub(super) fn resolve_controls(
    cx: &Ctx<'_>,
    raw: Option<&KeyControlsConfig>,
) -> Result<KeyControls, ConfigError> {
    let mut c = KeyControls::default();
    let Some(raw) = raw else {
        return Ok(c);
    };
    if let Some(list) = &raw.allow {
        c = KeyControls {
            locality: false,
            retry_safe: false,
            priority: false,
            intent: false,
            ..c
        };
        for name in list {
            match name.get_ref().as_str() {
                "locality" => c.locality = true,
                "retry_safe" => c.retry_safe = true,
                "priority" => c.priority = true,
                "intent" => c.intent = true,
                _ => {
                    return Err(cx.err(
                        Some(&name.span()),
                        "server.keys.controls.allow",
                        format!(
                            "expected \"locality\", \"retry_safe\", \"priority\" or \"intent\", got {:?}",
                            name.get_ref()
                        ),
                    ));
                }
            }
        }
    }
    if let Some(p) = &raw.max_priority {
        c.max_priority = parse_priority(p.get_ref()).ok_or_else(|| {
            cx.err(
                Some(&p.span()),
                "server.keys.controls.max_priority",
                format!(
                    "expected \"low\", \"normal\" or \"high\", got {:?}",
                    p.get_ref()
                ),
            )
        })?;
    }
    Ok(c)
}

/// A provider's policies and facts, over the library's defaults.
pub(super) fn resolve_policies(
    cx: &Ctx<'_>,
    p: &ProviderConfig,
) -> Result<LinkPolicies, ConfigError> {
    let span = p.name.span();
    let lib_err =
        |key: &str, e: ripcord_resilience::ConfigError| cx.err(Some(&span), key, e.to_string());
    let cache = match &p.cache {
        None => None,
        Some(c) => {
            let mut b = CachePolicy::builder();
            if let Some(ms) = c.ttl_ms {
                b = b.ttl(Duration::from_millis(ms));
            }
            if let Some(n) = c.capacity {
                b = b.capacity(n);
            }
            if let Some(yes) = c.per_tenant {
                b = b.per_tenant(yes);
            }
            Some(b.build().map_err(|e| lib_err("cache", e))?)
        }
    };
    let validate_json = p.validate.as_ref().is_some_and(|v| v.json.unwrap_or(true));
    let hedge = match &p.hedge {
        None => None,
        Some(h) => {
            let with = h.with.get_ref();
            if with == p.name.get_ref() {
                return Err(cx.err(
                    Some(&h.with.span()),
                    "hedge.with",
                    "a provider cannot hedge with itself",
                ));
            }
            let mut b = HedgePolicy::builder();
            if let Some(ms) = h.delay_ms {
                if h.initial_delay_ms.is_some() || h.min_samples.is_some() {
                    return Err(cx.err(
                        Some(&span),
                        "hedge.delay_ms",
                        "a fixed delay_ms excludes initial_delay_ms and min_samples (the p95 delay's settings)",
                    ));
                }
                b = b.delay(HedgeDelay::Fixed(Duration::from_millis(ms)));
            } else if h.initial_delay_ms.is_some() || h.min_samples.is_some() {
                let (initial, samples) = match HedgePolicy::default().hedge_delay() {
                    HedgeDelay::P95 {
                        initial,
                        min_samples,
                    } => (initial, min_samples),
                    // The library's default is a fixed delay: the p95 settings start from it.
                    HedgeDelay::Fixed(d) => (d, 1),
                    _ => (Duration::from_secs(1), 1),
                };
                b = b.delay(HedgeDelay::P95 {
                    initial: h.initial_delay_ms.map_or(initial, Duration::from_millis),
                    min_samples: h.min_samples.unwrap_or(samples),
                });
            }
            if let Some(pct) = h.max_extra_percent {
                b = b.max_extra_percent(pct);
            }
            Some((with.clone(), b.build().map_err(|e| lib_err("hedge", e))?))
        }
    };
    let breaker = resolve_breaker_extra(cx, p, p.breaker.as_ref())?;
    let data_region = match &p.data_region {
        Some(r) if r.get_ref().trim().is_empty() => {
            return Err(cx.err(Some(&r.span()), "data_region", "must not be empty"));
        }
        Some(r) => Some(r.get_ref().trim().to_ascii_lowercase()),
        None => None,
    };
    let price = match &p.price {
        None => None,
        Some(pr) => {
            let all = [
                Some(pr.input_per_mtok),
                Some(pr.output_per_mtok),
                pr.cached_input_per_mtok,
            ];
            if all.iter().flatten().any(|v| !v.is_finite() || *v < 0.0) {
                return Err(cx.err(
                    Some(&span),
                    "price",
                    "prices are USD per million tokens: finite and not negative",
                ));
            }
            let mut price = Price::per_million(pr.input_per_mtok, pr.output_per_mtok);
            if let Some(c) = pr.cached_input_per_mtok {
                price = price.with_cached_input(c);
            }
            Some(price)
        }
    };
    let data_use = p.data_use.clone().unwrap_or_default();
    Ok(LinkPolicies {
        cache,
        validate_json,
        hedge,
        breaker,
        facts: Facts {
            data_region,
            train: data_use.train,
            retain_days: data_use.retain_days,
            price,
        },
    })
}

fn resolve_breaker_extra(
    cx: &Ctx<'_>,
    p: &ProviderConfig,
    raw: Option<&BreakerConfig>,
) -> Result<BreakerExtra, ConfigError> {
    let mut extra = BreakerExtra::default();
    let Some(raw) = raw else {
        return Ok(extra);
    };
    let span = p.name.span();
    if let Some(r) = &raw.failure_rate {
        if !(r.threshold > 0.0 && r.threshold <= 1.0) {
            return Err(cx.err(
                Some(&span),
                "breaker.failure_rate.threshold",
                format!("must be in (0, 1], got {}", r.threshold),
            ));
        }
        if r.window_ms == 0 {
            return Err(cx.err(
                Some(&span),
                "breaker.failure_rate.window_ms",
                "must be at least 1 ms",
            ));
        }
        extra.failure_rate = Some((r.threshold, r.window_ms, r.min_calls));
    }
    if let Some(n) = raw.success_threshold {
        if n == 0 {
            return Err(cx.err(
                Some(&span),
                "breaker.success_threshold",
                "must be at least 1",
            ));
        }
        extra.success_threshold = n;
    }
    for (kind, action) in &raw.kinds {
        let k = ErrorKind::parse(kind.get_ref()).ok_or_else(|| {
            cx.err(
                Some(&kind.span()),
                "breaker.kinds",
                format!("{:?} is not an error kind", kind.get_ref()),
            )
        })?;
        let a = match action {
            KindActionConfig::Word(w) if w == "ignore" => KindAction::Ignore,
            KindActionConfig::Word(w) if w == "count" => KindAction::Count,
            KindActionConfig::Trip { trip_for_ms } if *trip_for_ms > 0 => {
                KindAction::TripFor(Duration::from_millis(*trip_for_ms))
            }
            other => {
                return Err(cx.err(
                    Some(&kind.span()),
                    "breaker.kinds",
                    format!(
                        "{}: expected \"ignore\", \"count\" or {{ trip_for_ms = N }} with N ≥ 1, got {other:?}",
                        kind.get_ref()
                    ),
                ));
            }
        };
        extra.kinds.push((k, a));
    }
    Ok(extra)
}

/// Refuses an empty per-intent notice (it would announce nothing).
pub(super) fn notice_text_ok(
    cx: &Ctx<'_>,
    notices: &std::collections::BTreeMap<String, String>,
    key: &str,
    span: Option<&std::ops::Range<usize>>,
) -> Result<(), ConfigError> {
    if let Some((intent, _)) = notices.iter().find(|(_, t)| t.trim().is_empty()) {
        return Err(cx.err(
            span,
            key,
            format!("the notice for intent {intent:?} is empty"),
        ));
    }
    Ok(())
}

impl LinkPolicies {
    /// What `check-config` prints about them, one line each (the breaker's extra rules and
    /// the facts always, so the defaults in effect are visible).
    pub fn describe(&self) -> Vec<String> {
        let mut out = Vec::new();
        let b = &self.breaker;
        let mut line = format!(
            "breaker: closes after {} probe success(es)",
            b.success_threshold
        );
        match b.failure_rate {
            Some((t, w, n)) => line.push_str(&format!(
                "; also trips at {:.0}% failed calls over {w} ms (at least {n} calls)",
                t * 100.0
            )),
            None => line.push_str("; no failure-rate rule"),
        }
        for (k, a) in &b.kinds {
            let what = match a {
                KindAction::Ignore => "ignored".to_owned(),
                KindAction::Count => "counted".to_owned(),
                KindAction::TripFor(d) => format!("trips for {} ms", super::defaults::ms(*d)),
                _ => format!("{a:?}"),
            };
            line.push_str(&format!("; {k}: {what}"));
        }
        out.push(line);
        match &self.cache {
            Some(c) => out.push(format!(
                "cache: {} entries, ttl {} ms, {}",
                c.capacity(),
                super::defaults::ms(c.ttl()),
                if c.per_tenant() {
                    "per tenant"
                } else {
                    "shared by all tenants"
                }
            )),
            None => out.push("cache: off".to_owned()),
        }
        out.push(format!(
            "validate: {}",
            if self.validate_json {
                "JSON answers (json / json_schema requests, tool-call arguments)"
            } else {
                "off"
            }
        ));
        if let Some((with, h)) = &self.hedge {
            let delay = match h.hedge_delay() {
                HedgeDelay::Fixed(d) => format!("after {} ms", super::defaults::ms(d)),
                HedgeDelay::P95 {
                    initial,
                    min_samples,
                } => format!(
                    "after the p95 latency ({} ms until {min_samples} samples)",
                    super::defaults::ms(initial)
                ),
                other => format!("{other:?}"),
            };
            out.push(format!(
                "hedge: with {with} {delay}, at most {}% extra calls",
                h.max_extra_percent()
            ));
        }
        let f = &self.facts;
        let mut facts = Vec::new();
        if let Some(r) = &f.data_region {
            facts.push(format!("data_region={r}"));
        }
        if let Some(t) = f.train {
            facts.push(format!("train={t}"));
        }
        if let Some(d) = f.retain_days {
            facts.push(format!("retain_days={d}"));
        }
        if let Some(p) = &f.price {
            facts.push(format!(
                "price=${}/${} per Mtok in/out (configured)",
                p.input_per_mtok, p.output_per_mtok
            ));
        }
        if !facts.is_empty() {
            out.push(format!("facts: {}", facts.join(" ")));
        }
        out
    }
}

impl KeyControls {
    /// What `check-config` prints: the control headers the key's clients may send.
    pub fn describe(&self) -> String {
        let mut on = Vec::new();
        if self.locality {
            on.push("locality");
        }
        if self.retry_safe {
            on.push("retry_safe");
        }
        if self.priority {
            on.push("priority");
        }
        if self.intent {
            on.push("intent");
        }
        if on.is_empty() {
            "controls=none".to_owned()
        } else {
            format!(
                "controls={} max_priority={}",
                on.join(","),
                priority_name(self.max_priority)
            )
        }
    }
}

/// The operator endpoints' key (`[server.admin]`), resolved. The secret is never printed.
#[derive(Clone)]
pub struct AdminKey {
    /// Where it came from (`env RIPCORD_ADMIN_KEY`).
    pub source: String,
    /// The secret.
    pub secret: secrecy::SecretString,
    /// Their own address (`None`: the gateway's port).
    pub listen: Option<std::net::SocketAddr>,
}

impl std::fmt::Debug for AdminKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminKey")
            .field("source", &self.source)
            .field("secret", &"[redacted]")
            .field("listen", &self.listen)
            .finish()
    }
}

/// `[server.admin]`: its key, from the environment, at least [`super::MIN_KEY_CHARS`] long and
/// unlike every gateway key (a tenant's key must never open the admin endpoints).
pub(super) fn resolve_admin(
    cx: &Ctx<'_>,
    raw: Option<&super::raw_policies::AdminConfig>,
    gateway_keys: &[super::GatewayKey],
) -> Result<Option<AdminKey>, ConfigError> {
    use secrecy::ExposeSecret;
    let Some(raw) = raw else {
        return Ok(None);
    };
    let var = raw.key_env.get_ref();
    let span = raw.key_env.span();
    let Some(secret) = cx.env.var(var) else {
        return Err(cx.err(
            Some(&span),
            "server.admin.key_env",
            format!("environment variable {var} is not set"),
        ));
    };
    if secret.chars().count() < super::MIN_KEY_CHARS {
        return Err(cx.err(
            Some(&span),
            "server.admin.key_env",
            format!(
                "the admin key in {var} is shorter than {} characters",
                super::MIN_KEY_CHARS
            ),
        ));
    }
    if let Some(k) = gateway_keys
        .iter()
        .find(|k| k.secret.expose_secret() == secret)
    {
        return Err(cx.err(
            Some(&span),
            "server.admin.key_env",
            format!(
                "the admin key in {var} is the same secret as the gateway key in {}: the admin endpoints need a key of their own",
                k.source
            ),
        ));
    }
    let listen = match &raw.listen {
        None => None,
        Some(l) => Some(l.get_ref().parse().map_err(|e| {
            cx.err(
                Some(&l.span()),
                "server.admin.listen",
                format!(
                    "{:?} is not an address like 127.0.0.1:9091: {e}",
                    l.get_ref()
                ),
            )
        })?),
    };
    Ok(Some(AdminKey {
        source: format!("env {var}"),
        secret: secrecy::SecretString::from(secret),
        listen,
    }))
}
