//! From the file as written to the resolved [`Config`]: providers, `[chain]` and `[[routes]]`.

use ripcord_providers::Vendor;
use std::collections::BTreeMap;

use super::ConfigError;
use super::Strategy;
use super::defaults;
use super::env::Ctx;
use super::model::{ChainSpec, Config, Provider, Route};
use super::raw::{ChainConfig, ProviderConfig, ProviderKind, RawConfig};
use super::resolve_gateway::{resolve_budget, resolve_keys, resolve_server, resolve_state};
use super::resolve_provider::resolve_provider;
use super::route_table::RouteConfig;

pub(super) fn resolve(
    cx: &Ctx<'_>,
    raw: RawConfig,
    lenient_keys: bool,
) -> Result<Config, ConfigError> {
    let mut notes = Vec::new();
    let mut by_name: BTreeMap<String, &ProviderConfig> = BTreeMap::new();
    for p in &raw.providers {
        let name = p.name.get_ref();
        if name.is_empty() {
            return Err(cx.err(
                Some(&p.name.span()),
                "name",
                "provider names must not be empty",
            ));
        }
        if by_name.insert(name.clone(), p).is_some() {
            return Err(cx.err(
                Some(&p.name.span()),
                "name",
                format!("provider {name:?} is defined twice"),
            ));
        }
    }
    let mut used = Used {
        by_name,
        resolved: BTreeMap::new(),
        order: Vec::new(),
        lenient_keys,
    };
    let (routes, any_model) = match (&raw.chain, raw.routes.is_empty()) {
        (Some(_), false) => {
            let span = raw.routes.first().map(|r| r.name.span());
            return Err(cx.err(
                span.as_ref(),
                "routes",
                "a config has either one `[chain]` or named `[[routes]]`, not both: move the \
                 [chain] settings into a [[routes]] entry",
            ));
        }
        (None, true) => {
            return Err(cx.err(
                None,
                "chain",
                "the config needs a `[chain]` (one chain) or `[[routes]]` (named chains)",
            ));
        }
        (Some(chain), true) => {
            let spec = resolve_chain(cx, chain, "chain", None, &mut used, &mut notes)?;
            let route = Route {
                name: "ripcord".to_owned(),
                aliases: Vec::new(),
                spec,
            };
            (vec![route], true)
        }
        (None, false) => (
            resolve_routes(cx, &raw.routes, &mut used, &mut notes)?,
            false,
        ),
    };
    let gateway_keys = resolve_keys(cx, &raw.server, &routes, any_model)?;
    let embeddings = match &raw.embeddings {
        None => None,
        Some(e) => {
            let model = cx.interpolate(&e.model, "embeddings.model")?;
            let mut providers = Vec::new();
            for name in &e.providers {
                let Some(p) = used.by_name.get(name.get_ref()) else {
                    return Err(cx.err(
                        Some(&name.span()),
                        "embeddings.providers",
                        format!("unknown provider {:?}", name.get_ref()),
                    ));
                };
                if matches!(
                    p.kind,
                    ProviderKind::Vendor(Vendor::Anthropic)
                        | ProviderKind::LocalOnnx
                        | ProviderKind::Vendor(Vendor::VertexAnthropic)
                        | ProviderKind::Vendor(Vendor::Bedrock)
                ) {
                    return Err(cx.err(
                        Some(&name.span()),
                        "embeddings.providers",
                        format!(
                            "provider {:?} ({}) has no embeddings endpoint",
                            name.get_ref(),
                            p.kind.as_str()
                        ),
                    ));
                }
                if let Some(provider) = resolve_provider(cx, p, lenient_keys)? {
                    providers.push(provider);
                }
            }
            if providers.is_empty() {
                return Err(cx.err(None, "embeddings.providers", "no usable embedding provider"));
            }
            Some((providers, model))
        }
    };
    // A hedge partner is built even when no route names it (it serves only as the hedge).
    let mut i = 0;
    while let Some(p) = used.order.get(i) {
        if let Some((with, _)) = &p.policies.hedge {
            let with = with.clone();
            let Some(&partner) = used.by_name.get(&with) else {
                let span = used
                    .by_name
                    .get(&p.name)
                    .and_then(|raw| raw.hedge.as_ref())
                    .map(|h| h.with.span());
                return Err(cx.err(
                    span.as_ref(),
                    "hedge.with",
                    format!(
                        "provider {:?} hedges with {with:?}, which the config does not define",
                        p.name
                    ),
                ));
            };
            used.get(cx, partner, &mut notes)?;
        }
        i += 1;
    }
    let state = resolve_state(cx, &raw.state)?;
    if matches!(state, super::model::StateBackend::Redis(_)) {
        refuse_unshared_breaker_rules(cx, &raw)?;
    }
    let budget = raw
        .budget
        .as_ref()
        .map(|b| resolve_budget(cx, b))
        .transpose()?;
    let alerts = raw
        .alerts
        .as_ref()
        .map(|a| super::resolve_alerts::resolve_alerts(cx, a))
        .transpose()?;
    let admin =
        super::resolve_policies::resolve_admin(cx, raw.server.admin.as_ref(), &gateway_keys)?;
    let store = super::resolve_store::resolve_store(cx, raw.store.as_ref())?;
    Ok(Config {
        alerts,
        admin,
        state,
        budget,
        store,
        redaction: raw.redaction,
        embeddings,
        source: cx.file.to_owned(),
        chain: used.order,
        routes,
        any_model,
        listen: cx.opt(&raw.server.listen, "server.listen")?,
        gateway_keys,
        max_body_bytes: raw
            .server
            .max_body_bytes
            .unwrap_or(super::defaults::MAX_BODY_BYTES),
        server: resolve_server(cx, &raw.server)?,
        notes,
    })
}

/// The providers routes refer to: each resolved once, on first use, and kept in that order.
struct Used<'a> {
    by_name: BTreeMap<String, &'a ProviderConfig>,
    /// name → the provider, or `None` when it was skipped (no key, built-in config only).
    resolved: BTreeMap<String, Option<usize>>,
    order: Vec<Provider>,
    lenient_keys: bool,
}

impl Used<'_> {
    /// Resolves `name` (once); `None` when it is skipped for lack of a key.
    fn get(
        &mut self,
        cx: &Ctx<'_>,
        p: &ProviderConfig,
        notes: &mut Vec<String>,
    ) -> Result<Option<usize>, ConfigError> {
        let name = p.name.get_ref();
        if let Some(r) = self.resolved.get(name) {
            return Ok(*r);
        }
        let r = match resolve_provider(cx, p, self.lenient_keys)? {
            Some(provider) => {
                self.order.push(provider);
                Some(self.order.len() - 1)
            }
            None => {
                notes.push(format!(
                    "skipping provider {name:?}: no API key ({})",
                    p.api_key_env
                        .as_ref()
                        .map_or("no key configured".to_owned(), |e| format!(
                            "{} is not set",
                            e.get_ref()
                        ))
                ));
                None
            }
        };
        self.resolved.insert(name.clone(), r);
        Ok(r)
    }
}

/// `[[routes]]`: unique names and aliases, each route's chain resolved.
fn resolve_routes(
    cx: &Ctx<'_>,
    raw: &[RouteConfig],
    used: &mut Used<'_>,
    notes: &mut Vec<String>,
) -> Result<Vec<Route>, ConfigError> {
    // Every name a client may send, and the route it belongs to.
    let mut names: BTreeMap<&str, &str> = BTreeMap::new();
    for r in raw {
        let name = r.name.get_ref();
        if name.trim().is_empty() {
            return Err(cx.err(
                Some(&r.name.span()),
                "routes.name",
                "route names must not be empty",
            ));
        }
        if let Some(owner) = names.insert(name, name) {
            let what = if owner == name {
                format!("route {name:?} is defined twice")
            } else {
                format!("route name {name:?} is already an alias of route {owner:?}")
            };
            return Err(cx.err(Some(&r.name.span()), "routes.name", what));
        }
    }
    for r in raw {
        let name = r.name.get_ref();
        for alias in &r.aliases {
            let a = alias.get_ref();
            if a.trim().is_empty() {
                return Err(cx.err(
                    Some(&alias.span()),
                    "routes.aliases",
                    format!("route {name:?}: aliases must not be empty"),
                ));
            }
            if let Some(owner) = names.insert(a, name) {
                let what = if owner == a {
                    format!("route {name:?}: alias {a:?} is the name of route {owner:?}")
                } else {
                    format!("route {name:?}: alias {a:?} is already an alias of route {owner:?}")
                };
                return Err(cx.err(Some(&alias.span()), "routes.aliases", what));
            }
        }
    }
    let mut routes = Vec::with_capacity(raw.len());
    for r in raw {
        let spec = resolve_chain(cx, &r.chain, "routes", Some(r.name.get_ref()), used, notes)?;
        routes.push(Route {
            name: r.name.get_ref().clone(),
            aliases: r.aliases.iter().map(|a| a.get_ref().clone()).collect(),
            spec,
        });
    }
    Ok(routes)
}

/// One chain's settings (`[chain]`, or a route's under key prefix `routes`).
fn resolve_chain(
    cx: &Ctx<'_>,
    raw: &ChainConfig,
    prefix: &str,
    route: Option<&str>,
    used: &mut Used<'_>,
    notes: &mut Vec<String>,
) -> Result<ChainSpec, ConfigError> {
    let key = |k: &str| format!("{prefix}.{k}");
    let msg = |m: String| match route {
        Some(r) => format!("route {r:?}: {m}"),
        None => m,
    };
    if raw.order.is_empty() {
        return Err(cx.err(
            None,
            &key("order"),
            msg("the chain needs at least one provider".to_owned()),
        ));
    }
    let (deadline_ms, stream_max_ms, min_attempt_ms) = defaults::chain_ms();
    let deadline_ms = raw.deadline_ms.unwrap_or(deadline_ms);
    let stream_max_ms = raw.stream_max_ms.unwrap_or(stream_max_ms);
    let min_attempt_ms = raw.min_attempt_ms.unwrap_or(min_attempt_ms);
    if deadline_ms == 0 {
        return Err(cx.err(
            None,
            &key("deadline_ms"),
            msg("must be greater than zero".to_owned()),
        ));
    }
    if stream_max_ms == 0 {
        return Err(cx.err(
            None,
            &key("stream_max_ms"),
            msg("must be greater than zero".to_owned()),
        ));
    }
    let mut order: Vec<String> = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for entry in &raw.order {
        let name = entry.get_ref();
        let Some(p) = used.by_name.get(name).copied() else {
            let known: Vec<_> = used.by_name.keys().map(String::as_str).collect();
            return Err(cx.err(
                Some(&entry.span()),
                &key("order"),
                msg(format!(
                    "unknown provider {name:?} (defined: {})",
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                )),
            ));
        };
        if seen.contains(&name.as_str()) {
            return Err(cx.err(
                Some(&entry.span()),
                &key("order"),
                msg(format!("provider {name:?} appears twice in the order")),
            ));
        }
        seen.push(name);
        if used.get(cx, p, notes)?.is_some() {
            order.push(name.clone());
        }
    }
    if order.is_empty() {
        return Err(cx.err(
            None,
            &key("order"),
            msg("no provider in the chain is usable (all lack API keys)".to_owned()),
        ));
    }
    let mut routes = Vec::new();
    for (kind, target) in &raw.routes {
        let k = ripcord_core::ErrorKind::parse(kind.get_ref()).ok_or_else(|| {
            cx.err(
                Some(&kind.span()),
                &key("routes"),
                msg(format!("unknown error kind {:?}", kind.get_ref())),
            )
        })?;
        if !used.by_name.contains_key(target.get_ref()) {
            return Err(cx.err(
                Some(&target.span()),
                &key("routes"),
                msg(format!("unknown provider {:?}", target.get_ref())),
            ));
        }
        routes.push((k, target.get_ref().clone()));
    }
    let (stream_restart, stream_continue) = match raw
        .stream_policy
        .as_ref()
        .map(|s| (s.get_ref().as_str(), s.span()))
    {
        None | Some(("end_with_error", _)) => (false, false),
        Some(("restart", _)) => (true, false),
        Some(("continue", _)) => (false, true),
        Some((other, span)) => {
            return Err(cx.err(
                Some(&span),
                &key("stream_policy"),
                msg(format!(
                    "expected \"end_with_error\", \"restart\" or \"continue\", got {other:?}"
                )),
            ));
        }
    };
    let trim_oldest = match raw.trim.as_ref().map(|s| (s.get_ref().as_str(), s.span())) {
        None | Some(("none", _)) => false,
        Some(("oldest", _)) => true,
        Some((other, span)) => {
            return Err(cx.err(
                Some(&span),
                &key("trim"),
                msg(format!("expected \"none\" or \"oldest\", got {other:?}")),
            ));
        }
    };
    let strategy = match raw
        .strategy
        .as_ref()
        .map(|s| (s.get_ref().as_str(), s.span()))
    {
        None | Some(("ordered", _)) => Strategy::Ordered,
        Some(("lowest_latency", _)) => Strategy::LowestLatency {
            min_samples: raw
                .min_samples
                .unwrap_or(defaults::LOWEST_LATENCY_MIN_SAMPLES),
        },
        Some(("lowest_cost", _)) => Strategy::LowestCost,
        Some(("demote_erroring", _)) => Strategy::DemoteErroring {
            threshold_pct: defaults::DEMOTE_ERRORING_THRESHOLD_PCT,
            min_calls: raw
                .min_samples
                .unwrap_or(defaults::DEMOTE_ERRORING_MIN_CALLS),
        },
        Some(("weighted", span)) => {
            if raw.weights.is_empty() {
                return Err(cx.err(
                    Some(&span),
                    &key("weights"),
                    msg(
                        "strategy \"weighted\" needs a weights table (provider = share)".to_owned(),
                    ),
                ));
            }
            let mut shares = Vec::new();
            for (name, share) in &raw.weights {
                if !order.iter().any(|p| p == name.get_ref()) {
                    return Err(cx.err(
                        Some(&name.span()),
                        &key("weights"),
                        msg(format!(
                            "{:?} is not a provider in the chain",
                            name.get_ref()
                        )),
                    ));
                }
                shares.push((name.get_ref().clone(), *share));
            }
            Strategy::Weighted(shares)
        }
        Some((other, span)) => {
            return Err(cx.err(
                Some(&span),
                &key("strategy"),
                msg(format!("expected \"ordered\", \"lowest_latency\", \"lowest_cost\", \"weighted\" or \"demote_erroring\", got {other:?}")),
            ));
        }
    };
    super::resolve_policies::notice_text_ok(cx, &raw.intent_notices, &key("intent_notices"), None)?;
    Ok(ChainSpec {
        order,
        deadline_ms,
        stream_max_ms,
        min_attempt_ms,
        stream_holdback_ms: raw.stream_holdback_ms,
        trim_oldest,
        static_reply: cx.opt(&raw.static_reply, &key("static_reply"))?,
        intent_replies: raw.intent_replies.clone(),
        routes,
        stream_restart,
        stream_continue,
        fallback_notice: raw.fallback_notice.clone(),
        strategy,
        independent_fallbacks: raw.independent_fallbacks,
        fallback_notice_in_text: raw.fallback_notice_in_text,
        intent_notices: raw.intent_notices.clone(),
    })
}

/// The breaker rules Redis cannot share yet: its store trips on consecutive failures and closes
/// on one probe's success, so `failure_rate` and `success_threshold` would hold only in each
/// replica's fallback view. Refused by name rather than accepted and half applied.
fn refuse_unshared_breaker_rules(
    cx: &Ctx<'_>,
    raw: &super::raw::RawConfig,
) -> Result<(), ConfigError> {
    for p in &raw.providers {
        if p.kind == ProviderKind::LocalOnnx {
            continue; // an in-process model keeps its breaker local
        }
        let Some(b) = &p.breaker else { continue };
        let rule = if b.failure_rate.is_some() {
            "breaker.failure_rate"
        } else if b.success_threshold.is_some() {
            "breaker.success_threshold"
        } else {
            continue;
        };
        return Err(cx.err(
            Some(&p.name.span()),
            rule,
            format!(
                "provider {:?}: `{rule}` is not shared through Redis yet ([state] backend = \"redis\" \
                 trips on consecutive failures and closes on one successful probe); remove it, or \
                 use the local state store",
                p.name.get_ref()
            ),
        ));
    }
    Ok(())
}
