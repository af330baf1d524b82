//! Resolution of the gateway's sections: `[server]`, its keys, `[budget]` and `[state]`.

use toml::Spanned;

use super::ConfigError;
use super::defaults;
use super::env::Ctx;
use super::model::{
    GatewayKey, MIN_KEY_CHARS, RedisSettings, Route, ServerSettings, StateBackend, TenantBudget,
};
use super::raw::{BudgetConfig, ServerConfig, StateConfig, redact_url};

pub(super) fn resolve_server(
    cx: &Ctx<'_>,
    raw: &ServerConfig,
) -> Result<ServerSettings, ConfigError> {
    use std::time::Duration;
    let d = ServerSettings::default();
    let ms = |v: Option<u64>, key: &str, default: Duration| match v {
        None => Ok(default),
        Some(0) => Err(cx.err(
            None,
            &format!("server.{key}"),
            "must be at least 1 (milliseconds)",
        )),
        Some(n) => Ok(Duration::from_millis(n)),
    };
    let count = |v: Option<usize>, key: &str, default: usize, min: usize| match v {
        None => Ok(default),
        Some(n) if n < min => Err(cx.err(
            None,
            &format!("server.{key}"),
            format!("must be at least {min}"),
        )),
        Some(n) => Ok(n),
    };
    Ok(ServerSettings {
        header_timeout: ms(raw.header_timeout_ms, "header_timeout_ms", d.header_timeout)?,
        body_timeout: ms(raw.body_timeout_ms, "body_timeout_ms", d.body_timeout)?,
        idle_timeout: ms(raw.idle_timeout_ms, "idle_timeout_ms", d.idle_timeout)?,
        max_connections: count(raw.max_connections, "max_connections", d.max_connections, 1)?,
        shutdown_grace: ms(raw.shutdown_grace_ms, "shutdown_grace_ms", d.shutdown_grace)?,
        max_concurrency: count(raw.max_concurrency, "max_concurrency", d.max_concurrency, 1)?,
        max_queue: count(raw.max_queue, "max_queue", d.max_queue, 0)?,
        expose_errors: raw.expose_errors,
        metrics_listen: cx.opt(&raw.metrics_listen, "server.metrics_listen")?,
        cors_origins: cors_origins(cx, &raw.cors_origins)?,
        first_byte_timeout: ms(
            raw.first_byte_timeout_ms,
            "first_byte_timeout_ms",
            d.first_byte_timeout,
        )?,
        max_connections_per_ip: count(
            raw.max_connections_per_ip,
            "max_connections_per_ip",
            d.max_connections_per_ip,
            1,
        )?,
        reserved_connections: count(
            raw.reserved_connections,
            "reserved_connections",
            d.reserved_connections,
            0,
        )?,
        backlog: match raw.backlog {
            None => d.backlog,
            Some(n) if n < 1 => {
                return Err(cx.err(None, "server.backlog", "must be at least 1"));
            }
            Some(n) => n,
        },
        write_timeout: ms(raw.write_timeout_ms, "write_timeout_ms", d.write_timeout)?,
        max_buffered_response_bytes: count(
            raw.max_buffered_response_bytes,
            "max_buffered_response_bytes",
            d.max_buffered_response_bytes,
            1024,
        )?,
    })
}

/// `[server] cors_origins`: each `*` or an origin (`scheme://host[:port]`, no path), the way a
/// browser writes its `Origin` header.
fn cors_origins(cx: &Ctx<'_>, raw: &[Spanned<String>]) -> Result<Vec<String>, ConfigError> {
    raw.iter()
        .enumerate()
        .map(|(i, o)| {
            let v = o.get_ref().trim_end_matches('/');
            let ok = v == "*"
                || v.split_once("://").is_some_and(|(scheme, rest)| {
                    matches!(scheme, "http" | "https")
                        && !rest.is_empty()
                        && !rest.contains(['/', '?', '#', ' '])
                });
            if ok {
                Ok(v.to_owned())
            } else {
                Err(cx.err(
                    Some(&o.span()),
                    &format!("server.cors_origins[{i}]"),
                    format!(
                        "{:?} is not an origin: write `*` or `scheme://host[:port]` (no path), e.g. \"https://app.example.com\"",
                        o.get_ref()
                    ),
                ))
            }
        })
        .collect()
}
/// `[[server.keys]]` and `api_keys_env`: every key set, long enough, and distinct.
pub(super) fn resolve_keys(
    cx: &Ctx<'_>,
    server: &ServerConfig,
    routes: &[Route],
    any_model: bool,
) -> Result<Vec<GatewayKey>, ConfigError> {
    let mut keys: Vec<GatewayKey> = Vec::new();
    // The span each key was declared at, for the duplicate check.
    let mut spans = Vec::new();
    let short = |var: &str, n: usize| {
        format!(
            "the key in {var} is {n} characters long; gateway keys need at least {MIN_KEY_CHARS} \
             (generate one with `openssl rand -hex 32`)"
        )
    };
    for k in &server.keys {
        let tenant = k.tenant.get_ref().trim();
        if tenant.is_empty() || tenant.len() > 256 {
            return Err(cx.err(
                Some(&k.tenant.span()),
                "server.keys.tenant",
                "a tenant is 1 to 256 characters",
            ));
        }
        let var = k.key_env.get_ref();
        let Some(secret) = cx.env.var(var) else {
            return Err(cx.err(
                Some(&k.key_env.span()),
                "server.keys.key_env",
                format!("environment variable {var} is not set (the key of tenant {tenant:?})"),
            ));
        };
        let secret = secret.trim().to_owned();
        let n = secret.chars().count();
        if n < MIN_KEY_CHARS {
            return Err(cx.err(
                Some(&k.key_env.span()),
                "server.keys.key_env",
                short(var, n),
            ));
        }
        let allowed = match &k.routes {
            None => None,
            Some(_) if any_model => {
                return Err(cx.err(
                    Some(&k.tenant.span()),
                    "server.keys.routes",
                    "`routes` on a key needs named [[routes]] in the config (this one has a single [chain])",
                ));
            }
            Some(list) => {
                let mut idx = Vec::new();
                for r in list {
                    let Some(i) = routes.iter().position(|x| x.answers_to(r.get_ref())) else {
                        let known: Vec<&str> = routes.iter().map(|x| x.name.as_str()).collect();
                        return Err(cx.err(
                            Some(&r.span()),
                            "server.keys.routes",
                            format!(
                                "unknown route {:?} (routes: {})",
                                r.get_ref(),
                                known.join(", ")
                            ),
                        ));
                    };
                    if !idx.contains(&i) {
                        idx.push(i);
                    }
                }
                Some(idx)
            }
        };
        let positive = |v: &Option<Spanned<u32>>, key: &str| {
            cx.at_least(v.as_ref(), 1, key, "must be at least 1")
        };
        keys.push(GatewayKey {
            tenant: Some(tenant.to_owned()),
            source: format!("env {var}"),
            secret: secrecy::SecretString::from(secret),
            routes: allowed,
            sub_tenants: k.sub_tenants,
            rpm: positive(&k.rpm, "server.keys.rpm")?,
            tpm: positive(&k.tpm, "server.keys.tpm")?,
            controls: super::resolve_policies::resolve_controls(cx, k.controls.as_ref())?,
        });
        spans.push(k.key_env.span());
    }
    if let Some(var) = &server.api_keys_env {
        let name = var.get_ref();
        let Some(v) = cx.env.var(name) else {
            return Err(cx.err(
                Some(&var.span()),
                "server.api_keys_env",
                format!("environment variable {name} is not set"),
            ));
        };
        for (i, k) in v
            .split(',')
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .enumerate()
        {
            let n = k.chars().count();
            if n < MIN_KEY_CHARS {
                return Err(cx.err(
                    Some(&var.span()),
                    "server.api_keys_env",
                    short(&format!("{name} (key {} of the list)", i + 1), n),
                ));
            }
            keys.push(GatewayKey {
                tenant: None,
                source: format!("env {name}"),
                secret: secrecy::SecretString::from(k.to_owned()),
                routes: None,
                sub_tenants: false,
                rpm: None,
                tpm: None,
                controls: super::resolve_policies::KeyControls::default(),
            });
            spans.push(var.span());
        }
    }
    {
        use secrecy::ExposeSecret;
        for (i, k) in keys.iter().enumerate() {
            if let Some(j) = keys[..i]
                .iter()
                .position(|o| o.secret.expose_secret() == k.secret.expose_secret())
            {
                let other = &keys[j];
                return Err(cx.err(
                    spans.get(i),
                    "server.keys.key_env",
                    format!(
                        "the key in {} is the same secret as the key in {} (tenant {}); every \
                         gateway key must be distinct, or the tenant of a request is ambiguous",
                        k.source.trim_start_matches("env "),
                        other.source.trim_start_matches("env "),
                        other.tenant.as_deref().unwrap_or("none"),
                    ),
                ));
            }
        }
    }
    Ok(keys)
}

pub(super) fn resolve_budget(
    cx: &Ctx<'_>,
    raw: &BudgetConfig,
) -> Result<TenantBudget, ConfigError> {
    let tokens = &raw.tokens_per_window;
    if *tokens.get_ref() == 0 {
        return Err(cx.err(
            Some(&tokens.span()),
            "budget.tokens_per_window",
            "must be at least 1",
        ));
    }
    let window_s = match &raw.window_s {
        Some(w) if *w.get_ref() == 0 => {
            return Err(cx.err(Some(&w.span()), "budget.window_s", "must be at least 1"));
        }
        Some(w) => *w.get_ref(),
        None => defaults::budget_window_s(),
    };
    let period = match &raw.period {
        None => None,
        Some(p) => {
            if let Some(w) = &raw.window_s {
                return Err(cx.err(
                    Some(&w.span()),
                    "budget.window_s",
                    "a budget has a `period` or a `window_s`, not both",
                ));
            }
            Some(match p.get_ref().as_str() {
                "day" => ripcord_resilience::BudgetPeriod::Day,
                "month" => ripcord_resilience::BudgetPeriod::Month,
                other => {
                    return Err(cx.err(
                        Some(&p.span()),
                        "budget.period",
                        format!("{other:?} is not \"day\" or \"month\" (UTC)"),
                    ));
                }
            })
        }
    };
    Ok(TenantBudget {
        tokens_per_window: *tokens.get_ref(),
        window_s,
        period,
        tenants: raw.tenants.iter().map(|(t, n)| (t.clone(), *n)).collect(),
        anonymous: raw.anonymous.unwrap_or(defaults::BUDGET_ANONYMOUS),
    })
}

pub(super) fn resolve_state(cx: &Ctx<'_>, raw: &StateConfig) -> Result<StateBackend, ConfigError> {
    let backend = raw.backend.as_ref();
    // Redis's own defaults for what the section leaves out; `None` for the local backend.
    let redis_defaults = match backend.map(|b| (b.get_ref().as_str(), b.span())) {
        None | Some(("local", _)) => None,
        Some(("redis", span)) => {
            let Some(d) = defaults::redis_ms() else {
                return Err(cx.err(
                    Some(&span),
                    "state.backend",
                    "this ripcord was built without the `redis` feature; rebuild with \
                     `--features redis` (it is on by default) or use backend = \"local\"",
                ));
            };
            Some(d)
        }
        Some((other, span)) => {
            return Err(cx.err(
                Some(&span),
                "state.backend",
                format!("expected \"local\" or \"redis\", got {other:?}"),
            ));
        }
    };
    let positive = |v: &Option<Spanned<u64>>, key: &str| {
        cx.at_least(v.as_ref(), 1, key, "must be greater than zero")
    };
    let op_timeout_ms = positive(&raw.op_timeout_ms, "state.op_timeout_ms")?;
    let connect_timeout_ms = positive(&raw.connect_timeout_ms, "state.connect_timeout_ms")?;
    let retry_interval_ms = positive(&raw.retry_interval_ms, "state.retry_interval_ms")?;
    let replicas = match &raw.replicas {
        Some(n) if *n.get_ref() == 0 => {
            return Err(cx.err(Some(&n.span()), "state.replicas", "must be at least 1"));
        }
        Some(n) => *n.get_ref(),
        None => 1,
    };
    let Some((op_default, connect_default, retry_default)) = redis_defaults else {
        if let Some(url) = &raw.url {
            return Err(cx.err(
                Some(&url.span()),
                "state.url",
                "a Redis URL needs backend = \"redis\" (the backend is \"local\")",
            ));
        }
        return Ok(StateBackend::Local);
    };
    let Some(url_raw) = &raw.url else {
        return Err(cx.err(
            backend.map(Spanned::span).as_ref(),
            "state.url",
            "backend \"redis\" needs `url = \"redis://host:port\"`",
        ));
    };
    let url = cx.interpolate(url_raw, "state.url")?;
    let redacted_url = redact_url(&url);
    let scheme = url.split_once("://").map(|(s, _)| s);
    match scheme {
        Some("redis" | "redis+unix" | "unix") => {}
        Some("rediss") => {
            return Err(cx.err(
                Some(&url_raw.span()),
                "state.url",
                "TLS (rediss://) is not supported by this build; use redis:// on a private \
                 network or a TLS-terminating proxy",
            ));
        }
        _ => {
            return Err(cx.err(
                Some(&url_raw.span()),
                "state.url",
                format!("expected a redis://host:port URL, got {redacted_url:?}"),
            ));
        }
    }
    Ok(StateBackend::Redis(RedisSettings {
        url: secrecy::SecretString::from(url),
        redacted_url,
        op_timeout_ms: op_timeout_ms.unwrap_or(op_default),
        connect_timeout_ms: connect_timeout_ms.unwrap_or(connect_default),
        retry_interval_ms: retry_interval_ms.unwrap_or(retry_default),
        replicas,
    }))
}
