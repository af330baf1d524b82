//! Resolution of one `[[providers]]` entry.

use std::path::PathBuf;

use toml::Spanned;

use super::defaults;
use super::env::Ctx;
use super::model::{BreakerSettings, Provider, RetrySettings};
use super::raw::{ProviderConfig, ProviderKind};
use super::{ConfigError, default_model_dir};

/// `variant` and `threads`, which only a local-onnx provider takes.
fn local_settings(
    cx: &Ctx<'_>,
    p: &ProviderConfig,
) -> Result<(Option<ripcord_local_onnx::Variant>, Option<usize>), ConfigError> {
    if p.kind != ProviderKind::LocalOnnx {
        for (key, span) in [
            ("variant", p.variant.as_ref().map(Spanned::span)),
            ("threads", p.threads.as_ref().map(Spanned::span)),
        ] {
            if let Some(span) = span {
                return Err(cx.err(
                    Some(&span),
                    key,
                    format!(
                        "`{key}` is a local-onnx setting; provider {:?} is {}",
                        p.name.get_ref(),
                        p.kind.as_str()
                    ),
                ));
            }
        }
        return Ok((None, None));
    }
    let variant = match &p.variant {
        Some(v) => Some(
            v.get_ref()
                .parse::<ripcord_local_onnx::Variant>()
                .map_err(|e| cx.err(Some(&v.span()), "variant", e.to_string()))?,
        ),
        None => None,
    };
    let threads = match &p.threads {
        Some(t) if *t.get_ref() == 0 => {
            return Err(cx.err(Some(&t.span()), "threads", "must be at least 1"));
        }
        Some(t) => Some(*t.get_ref() as usize),
        None => None,
    };
    Ok((variant, threads))
}

pub(super) fn resolve_provider(
    cx: &Ctx<'_>,
    p: &ProviderConfig,
    lenient_keys: bool,
) -> Result<Option<Provider>, ConfigError> {
    let kind = p.kind;
    let model = cx.opt(&p.model, "model")?;
    if model.is_none() && kind != ProviderKind::LocalOnnx && kind != ProviderKind::AzureOpenai {
        return Err(cx.err(
            Some(&p.name.span()),
            "model",
            format!(
                "provider {:?} ({}) needs a `model`",
                p.name.get_ref(),
                kind.as_str()
            ),
        ));
    }
    let (api_key, key_source) = match (&p.api_key, &p.api_key_env) {
        (Some(k), _) => (
            Some(cx.interpolate(k, "api_key")?),
            Some("config".to_owned()),
        ),
        (None, Some(var)) => match cx.env.var(var.get_ref()) {
            Some(v) => (Some(v), Some(format!("env {}", var.get_ref()))),
            None if lenient_keys => return Ok(None),
            None => {
                return Err(cx.err(
                    Some(&var.span()),
                    "api_key_env",
                    format!(
                        "environment variable {} is not set (provider {:?})",
                        var.get_ref(),
                        p.name.get_ref()
                    ),
                ));
            }
        },
        (None, None) if kind.key_optional() => (None, None),
        (None, None) => {
            return Err(cx.err(
                Some(&p.name.span()),
                "api_key_env",
                format!(
                    "provider {:?} ({}) needs `api_key_env` or `api_key`",
                    p.name.get_ref(),
                    kind.as_str()
                ),
            ));
        }
    };
    if kind == ProviderKind::AzureOpenai && (p.deployment.is_none() || p.base_url.is_none()) {
        return Err(cx.err(
            Some(&p.name.span()),
            "deployment",
            "azure-openai needs `base_url` (the resource endpoint) and `deployment`",
        ));
    }
    if kind == ProviderKind::Vllm && p.base_url.is_none() {
        return Err(cx.err(
            Some(&p.name.span()),
            "base_url",
            "vllm has no default host: set `base_url`",
        ));
    }
    let base_url = cx.opt(&p.base_url, "base_url")?;
    if let (Some(u), Some(span)) = (&base_url, p.base_url.as_ref().map(Spanned::span))
        && !(u.starts_with("http://") || u.starts_with("https://"))
    {
        return Err(cx.err(
            Some(&span),
            "base_url",
            format!("expected an http:// or https:// URL, got {u:?}"),
        ));
    }
    let model_dir = match cx.opt(&p.model_dir, "model_dir")? {
        Some(d) => Some(PathBuf::from(d)),
        None if kind == ProviderKind::LocalOnnx => Some(default_model_dir()),
        None => None,
    };
    let (variant, threads) = local_settings(cx, p)?;
    let bedrock = match super::resolve_bedrock::resolve_bedrock(
        cx,
        p,
        model.as_deref(),
        api_key.as_deref(),
        key_source.as_deref(),
        lenient_keys,
    )? {
        super::resolve_bedrock::Resolved::Settings(s) => s,
        super::resolve_bedrock::Resolved::Skip => return Ok(None),
    };
    let key_source = match &bedrock {
        Some(b) => Some(b.source.clone()),
        None => key_source,
    };
    let retry = resolve_retry(cx, p)?;
    let breaker = resolve_breaker(cx, p)?;
    Ok(Some(Provider {
        name: p.name.get_ref().clone(),
        kind,
        model,
        base_url,
        api_key: api_key.map(secrecy::SecretString::from),
        key_source,
        model_dir,
        variant,
        threads,
        deployment: cx.opt(&p.deployment, "deployment")?,
        api_version: cx.opt(&p.api_version, "api_version")?,
        reserve_ms: p.reserve_ms,
        retry,
        breaker,
        rate_limit: p.rate_limit.clone(),
        bulkhead: p.bulkhead.clone(),
        timeouts: p.timeouts.clone().unwrap_or_default(),
        probe: p.probe.clone(),
        bedrock,
    }))
}

/// `[providers.retry]` over the library's defaults (a local-onnx link without the section makes
/// one attempt: see [`super::defaults`]).
fn resolve_retry(cx: &Ctx<'_>, p: &ProviderConfig) -> Result<RetrySettings, ConfigError> {
    let mut retry = RetrySettings::default();
    let Some(raw) = &p.retry else {
        if p.kind == ProviderKind::LocalOnnx {
            retry.max_attempts = defaults::LOCAL_MAX_ATTEMPTS;
        }
        return Ok(retry);
    };
    if let Some(n) = raw.max_attempts {
        if n == 0 {
            return Err(cx.err(
                Some(&p.name.span()),
                "retry.max_attempts",
                "must be at least 1 (1 = no retry)",
            ));
        }
        retry.max_attempts = n;
    }
    if let Some(ms) = raw.base_delay_ms {
        retry.base_delay_ms = ms;
    }
    if let Some(ms) = raw.max_delay_ms {
        retry.max_delay_ms = ms;
    }
    if let Some(on) = &raw.retry_on {
        retry.retry_on = ripcord_resilience::RetryOn::parse(on)
            .map_err(|e| cx.err(Some(&p.name.span()), "retry.retry_on", e.to_string()))?;
    }
    Ok(retry)
}

/// `[providers.breaker]` over the library's defaults.
fn resolve_breaker(cx: &Ctx<'_>, p: &ProviderConfig) -> Result<BreakerSettings, ConfigError> {
    let mut breaker = BreakerSettings::default();
    let Some(raw) = &p.breaker else {
        return Ok(breaker);
    };
    if let Some(n) = raw.failure_threshold {
        if n == 0 {
            return Err(cx.err(
                Some(&p.name.span()),
                "breaker.failure_threshold",
                "must be at least 1",
            ));
        }
        breaker.failure_threshold = n;
    }
    if let Some(ms) = raw.open_ms {
        breaker.open_ms = ms;
    }
    if let Some(n) = raw.half_open_probes {
        breaker.half_open_probes = n;
    }
    Ok(breaker)
}
