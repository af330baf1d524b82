//! Resolution of one `[[providers]]` entry.

use ripcord_providers::Vendor;
use std::path::PathBuf;

use toml::Spanned;

use super::defaults;
use super::env::Ctx;
#[cfg(any(feature = "vertex", feature = "vertex-anthropic"))]
use super::model::VertexCredentials;
use super::model::{BreakerSettings, Provider, RetrySettings, VertexSettings};
use super::raw::{ProviderConfig, ProviderKind};
use super::{ConfigError, default_model_dir};

/// The settings only a local-onnx provider takes.
#[derive(Default)]
struct LocalSettings {
    variant: Option<ripcord_local_onnx::Variant>,
    threads: Option<usize>,
    max_batch: Option<usize>,
    device: Option<ripcord_local_onnx::Device>,
}

/// The error for `key`, set at `span` on provider `p`, whose kind does not take it: it is
/// `owners`' setting (e.g. "a bedrock").
pub(super) fn not_this_kind(
    cx: &Ctx<'_>,
    p: &ProviderConfig,
    span: &std::ops::Range<usize>,
    key: &str,
    owners: &str,
) -> ConfigError {
    let (name, kind) = (p.name.get_ref(), p.kind.as_str());
    cx.err(
        Some(span),
        key,
        format!("`{key}` is {owners} setting; provider {name:?} is {kind}"),
    )
}

/// The error for the environment variable `var` that provider `p`'s `key` names, unset.
pub(super) fn unset_var(
    cx: &Ctx<'_>,
    p: &ProviderConfig,
    var: &Spanned<String>,
    key: &str,
) -> ConfigError {
    let (var_name, name) = (var.get_ref(), p.name.get_ref());
    let message = format!("environment variable {var_name} is not set (provider {name:?})");
    cx.err(Some(&var.span()), key, message)
}

/// The error for provider `p`, which lacks `what` (its `key`).
fn needs(cx: &Ctx<'_>, p: &ProviderConfig, key: &str, what: &str) -> ConfigError {
    let (name, kind) = (p.name.get_ref(), p.kind.as_str());
    cx.err(
        Some(&p.name.span()),
        key,
        format!("provider {name:?} ({kind}) needs {what}"),
    )
}

/// `variant`, `threads`, `max_batch` and `device`, which only a local-onnx provider takes.
fn local_settings(cx: &Ctx<'_>, p: &ProviderConfig) -> Result<LocalSettings, ConfigError> {
    if p.kind != ProviderKind::LocalOnnx {
        for (key, span) in [
            ("variant", p.variant.as_ref().map(Spanned::span)),
            ("threads", p.threads.as_ref().map(Spanned::span)),
            ("max_batch", p.max_batch.as_ref().map(Spanned::span)),
            ("device", p.device.as_ref().map(Spanned::span)),
        ] {
            if let Some(span) = span {
                return Err(not_this_kind(cx, p, &span, key, "a local-onnx"));
            }
        }
        return Ok(LocalSettings::default());
    }
    // A word the library parses (`variant`, `device`); its error names the key.
    fn parsed<T: std::str::FromStr<Err: std::fmt::Display>>(
        cx: &Ctx<'_>,
        v: Option<&Spanned<String>>,
        key: &str,
    ) -> Result<Option<T>, ConfigError> {
        v.map(|v| {
            v.get_ref()
                .parse::<T>()
                .map_err(|e| cx.err(Some(&v.span()), key, e.to_string()))
        })
        .transpose()
    }
    let variant = parsed(cx, p.variant.as_ref(), "variant")?;
    let threads = cx
        .at_least(p.threads.as_ref(), 1, "threads", "must be at least 1")?
        .map(|t| t as usize);
    let max_batch = cx
        .at_least(p.max_batch.as_ref(), 1, "max_batch", "must be at least 1")?
        .map(|t| t as usize);
    let device = parsed(cx, p.device.as_ref(), "device")?;
    Ok(LocalSettings {
        variant,
        threads,
        max_batch,
        device,
    })
}

/// The Google settings: only the Vertex kinds take `project`, `location`, `credentials_file`,
/// `token_env`; only Gemini kinds take `thinking_budget`.
fn google_settings_allowed(cx: &Ctx<'_>, p: &ProviderConfig) -> Result<(), ConfigError> {
    let vertex_only = [
        ("project", p.project.as_ref().map(Spanned::span)),
        ("location", p.location.as_ref().map(Spanned::span)),
        (
            "credentials_file",
            p.credentials_file.as_ref().map(Spanned::span),
        ),
        ("token_env", p.token_env.as_ref().map(Spanned::span)),
    ];
    for (key, span) in vertex_only {
        if let Some(span) = span
            && !p.kind.is_vertex()
        {
            return Err(not_this_kind(
                cx,
                p,
                &span,
                key,
                "a vertex / vertex-anthropic",
            ));
        }
    }
    if let Some(t) = &p.thinking_budget
        && !matches!(
            p.kind,
            ProviderKind::Vendor(Vendor::Gemini) | ProviderKind::Vendor(Vendor::Vertex)
        )
    {
        let key = "thinking_budget";
        return Err(not_this_kind(cx, p, &t.span(), key, "a gemini / vertex"));
    }
    if p.kind.is_vertex() {
        for (key, span) in [
            ("api_key", p.api_key.as_ref().map(Spanned::span)),
            ("api_key_env", p.api_key_env.as_ref().map(Spanned::span)),
        ] {
            if let Some(span) = span {
                return Err(cx.err(
                    Some(&span),
                    key,
                    format!(
                        "provider {:?} ({}) authenticates with Google credentials: use \
                         `credentials_file` (a service-account key) or `token_env` (an access \
                         token), not `{key}`",
                        p.name.get_ref(),
                        p.kind.as_str()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// A provider's settings of one kind (Bedrock's, Vertex's, a pool's), or why it has none.
pub(super) enum Resolved<T> {
    /// The settings, or `None` when the provider is not of that kind.
    Settings(Option<T>),
    /// A credential variable is unset and keys are resolved leniently: leave the provider out.
    Skip,
}

/// A provider whose vendor this build of ripcord left out, naming the feature that adds it.
pub(super) fn not_built(cx: &Ctx<'_>, p: &ProviderConfig, v: Vendor) -> ConfigError {
    cx.err(
        Some(&p.name.span()),
        "kind",
        format!(
            "provider {:?}: kind `{v}` is not in this build of ripcord (it was built without \
             the `{}` feature; `cargo install ripcord-cli --features {}`, or the default \
             features, include it)",
            p.name.get_ref(),
            v.feature(),
            v.feature()
        ),
    )
}

/// `project`, `location` and the credentials of a Vertex provider.
#[cfg(not(any(feature = "vertex", feature = "vertex-anthropic")))]
fn resolve_vertex(
    cx: &Ctx<'_>,
    p: &ProviderConfig,
    _lenient_keys: bool,
) -> Result<Resolved<VertexSettings>, ConfigError> {
    match p.kind.vendor() {
        Some(v) if v.is_vertex() => Err(not_built(cx, p, v)),
        _ => Ok(Resolved::Settings(None)),
    }
}

/// `project`, `location` and the credentials of a Vertex provider.
#[cfg(any(feature = "vertex", feature = "vertex-anthropic"))]
fn resolve_vertex(
    cx: &Ctx<'_>,
    p: &ProviderConfig,
    lenient_keys: bool,
) -> Result<Resolved<VertexSettings>, ConfigError> {
    if !p.kind.is_vertex() {
        return Ok(Resolved::Settings(None));
    }
    let name = p.name.get_ref();
    let mut key_project = None;
    let credentials = match (&p.token_env, &p.credentials_file) {
        (Some(_), Some(f)) => {
            return Err(cx.err(
                Some(&f.span()),
                "credentials_file",
                format!("provider {name:?}: set `credentials_file` or `token_env`, not both"),
            ));
        }
        (Some(var), None) => match cx.env.var(var.get_ref()) {
            Some(t) => VertexCredentials::Token(secrecy::SecretString::from(t)),
            None if lenient_keys => return Ok(Resolved::Skip),
            None => {
                return Err(unset_var(cx, p, var, "token_env"));
            }
        },
        (None, file) => {
            let (path, span) = match file {
                Some(f) => (Some(cx.interpolate(f, "credentials_file")?), Some(f.span())),
                None => (cx.env.var("GOOGLE_APPLICATION_CREDENTIALS"), None),
            };
            let Some(path) = path else {
                if lenient_keys {
                    return Ok(Resolved::Skip);
                }
                return Err(cx.err(
                    Some(&p.name.span()),
                    "credentials_file",
                    format!(
                        "provider {name:?} ({}) needs `credentials_file` (a service-account \
                         key), `token_env`, or GOOGLE_APPLICATION_CREDENTIALS",
                        p.kind.as_str()
                    ),
                ));
            };
            let key = ripcord_providers::google::ServiceAccountKey::from_file(&path)
                .map_err(|e| cx.err(span.as_ref(), "credentials_file", e.message().to_owned()))?;
            key_project = key.project_id().map(str::to_owned);
            VertexCredentials::KeyFile(PathBuf::from(path))
        }
    };
    let project = match cx.opt(&p.project, "project")? {
        Some(pr) => pr,
        None => match key_project.or_else(|| cx.env.var("GOOGLE_CLOUD_PROJECT")) {
            Some(pr) => pr,
            None => {
                return Err(cx.err(
                    Some(&p.name.span()),
                    "project",
                    format!(
                        "provider {name:?} ({}) needs a `project` (the key file names none and \
                         GOOGLE_CLOUD_PROJECT is not set)",
                        p.kind.as_str()
                    ),
                ));
            }
        },
    };
    let location = cx
        .opt(&p.location, "location")?
        .unwrap_or_else(|| ripcord_providers::google::DEFAULT_VERTEX_LOCATION.to_owned());
    Ok(Resolved::Settings(Some(VertexSettings {
        project,
        location,
        credentials,
    })))
}

/// `wire`, which only openai and azure-openai providers take.
fn resolve_wire(
    cx: &Ctx<'_>,
    p: &ProviderConfig,
) -> Result<ripcord_providers::OpenAiWire, ConfigError> {
    use ripcord_providers::OpenAiWire;
    let Some(w) = &p.wire else {
        return Ok(OpenAiWire::ChatCompletions);
    };
    if !matches!(
        p.kind,
        ProviderKind::Vendor(Vendor::OpenAi) | ProviderKind::Vendor(Vendor::AzureOpenAi)
    ) {
        return Err(not_this_kind(
            cx,
            p,
            &w.span(),
            "wire",
            "an openai / azure-openai",
        ));
    }
    match w.get_ref().as_str() {
        "chat" => Ok(OpenAiWire::ChatCompletions),
        "responses" => Ok(OpenAiWire::Responses),
        other => Err(cx.err(
            Some(&w.span()),
            "wire",
            format!("expected \"chat\" or \"responses\", got {other:?}"),
        )),
    }
}

pub(super) fn resolve_provider(
    cx: &Ctx<'_>,
    p: &ProviderConfig,
    lenient_keys: bool,
) -> Result<Option<Provider>, ConfigError> {
    let kind = p.kind;
    if let Some(v) = kind.vendor().filter(|v| !v.is_built()) {
        return Err(not_built(cx, p, v));
    }
    google_settings_allowed(cx, p)?;
    let model = cx.opt(&p.model, "model")?;
    if model.is_none()
        && kind != ProviderKind::LocalOnnx
        && kind != ProviderKind::Vendor(Vendor::AzureOpenAi)
    {
        return Err(needs(cx, p, "model", "a `model`"));
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
                return Err(unset_var(cx, p, var, "api_key_env"));
            }
        },
        (None, None) if kind.key_optional() || !p.deployments.is_empty() => (None, None),
        (None, None) => {
            return Err(needs(cx, p, "api_key_env", "`api_key_env` or `api_key`"));
        }
    };
    // A pool's deployments may each bring their own (checked in `pool`).
    if kind == ProviderKind::Vendor(Vendor::AzureOpenAi)
        && p.deployments.is_empty()
        && (p.deployment.is_none() || p.base_url.is_none())
    {
        return Err(cx.err(
            Some(&p.name.span()),
            "deployment",
            "azure-openai needs `base_url` (the resource endpoint) and `deployment`",
        ));
    }
    if kind == ProviderKind::Vendor(Vendor::Vllm) && p.base_url.is_none() {
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
    let LocalSettings {
        variant,
        threads,
        max_batch,
        device,
    } = local_settings(cx, p)?;
    let keys = super::resolve_bedrock::KeyInputs {
        model: model.as_deref(),
        api_key: api_key.as_deref(),
        key_source: key_source.as_deref(),
        lenient_keys,
    };
    let bedrock = match super::resolve_bedrock::resolve_bedrock(cx, p, keys)? {
        Resolved::Settings(s) => s,
        Resolved::Skip => return Ok(None),
    };
    let key_source = match &bedrock {
        Some(b) => Some(b.source.clone()),
        None => key_source,
    };
    let wire = resolve_wire(cx, p)?;
    let vertex = match resolve_vertex(cx, p, lenient_keys)? {
        Resolved::Settings(s) => s,
        Resolved::Skip => return Ok(None),
    };
    let retry = resolve_retry(cx, p)?;
    let breaker = resolve_breaker(cx, p)?;
    let positive = |v: &Option<Spanned<u32>>, key: &str| {
        let unknown = "must be at least 1 token (leave it out when the window is unknown)";
        cx.at_least(v.as_ref(), 1, key, unknown)
    };
    let policies = super::resolve_policies::resolve_policies(cx, p)?;
    let pool = match super::pool::resolve_pool(cx, p, lenient_keys)? {
        Resolved::Settings(pool) => pool,
        Resolved::Skip => return Ok(None),
    };
    let context_window = positive(&p.context_window, "context_window")?;
    let max_output_tokens = positive(&p.max_output_tokens, "max_output_tokens")?;
    let status_page = super::resolve_status_page::resolve_status_page(cx, p)?;
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
        max_batch,
        device,
        deployment: cx.opt(&p.deployment, "deployment")?,
        api_version: cx.opt(&p.api_version, "api_version")?,
        vertex,
        thinking_budget: p.thinking_budget.as_ref().map(|t| *t.get_ref()),
        reserve_ms: p.reserve_ms,
        retry,
        breaker,
        rate_limit: p.rate_limit.clone(),
        bulkhead: p.bulkhead.clone(),
        timeouts: p.timeouts.clone().unwrap_or_default(),
        probe: p.probe.clone(),
        wire,
        context_window,
        max_output_tokens,
        policies,
        bedrock,
        pool,
        status_page,
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
    let name = Some(p.name.span());
    if let Some(n) = raw.max_attempts {
        let no_retry = "must be at least 1 (1 = no retry)";
        retry.max_attempts = cx.floor(name.as_ref(), n, 1, "retry.max_attempts", no_retry)?;
    }
    if let Some(ms) = raw.base_delay_ms {
        retry.base_delay_ms = ms;
    }
    if let Some(ms) = raw.max_delay_ms {
        retry.max_delay_ms = ms;
    }
    if let Some(on) = &raw.retry_on {
        retry.retry_on = ripcord_resilience::RetryOn::parse(on)
            .map_err(|e| cx.err(name.as_ref(), "retry.retry_on", e.to_string()))?;
    }
    Ok(retry)
}

/// `[providers.breaker]` over the library's defaults.
fn resolve_breaker(cx: &Ctx<'_>, p: &ProviderConfig) -> Result<BreakerSettings, ConfigError> {
    let mut breaker = BreakerSettings::default();
    let Some(raw) = &p.breaker else {
        return Ok(breaker);
    };
    let name = Some(p.name.span());
    let name = name.as_ref();
    if let Some(n) = raw.failure_threshold {
        let key = "breaker.failure_threshold";
        breaker.failure_threshold = cx.floor(name, n, 1, key, "must be at least 1")?;
    }
    if let Some(ms) = raw.open_ms {
        breaker.open_ms = cx.floor(name, ms, 1, "breaker.open_ms", "must be at least 1 ms")?;
    }
    if let Some(ms) = raw.open_max_ms {
        let open = breaker.open_ms;
        let constant =
            format!("must be at least open_ms ({open} ms); equal to it for a constant spell");
        breaker.open_max_ms = cx.floor(name, ms, open, "breaker.open_max_ms", constant)?;
    } else {
        // A first spell set above the default cap is a constant spell.
        breaker.open_max_ms = breaker.open_max_ms.max(breaker.open_ms);
    }
    if let Some(ms) = raw.background_probe_ms {
        breaker.background_probe_ms = (ms > 0).then_some(ms);
    }
    if let Some(n) = raw.half_open_probes {
        breaker.half_open_probes = n;
    }
    Ok(breaker)
}
