//! Resolution of a `kind = "bedrock"` provider's own settings: the region and the
//! credentials, found when the config is read so `check-config` can say where they came from.
//!
//! Credentials, first match wins: `api_key` / `api_key_env` (a Bedrock API key, sent as a
//! bearer token); `access_key_id_env` + `secret_access_key_env` (+ `session_token_env`);
//! `profile` (a profile of the shared credentials file); else the AWS SDKs' environment chain
//! (`AWS_BEARER_TOKEN_BEDROCK`, `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` /
//! `AWS_SESSION_TOKEN`, the `AWS_PROFILE` or `default` profile).

#[cfg(feature = "bedrock")]
use ripcord_providers::BedrockCredentials;
use ripcord_providers::Vendor;
#[cfg(feature = "bedrock")]
use secrecy::SecretString;
use toml::Spanned;

#[cfg(feature = "bedrock")]
use super::resolve_provider::unset_var;
use super::resolve_provider::{Resolved, not_this_kind};

use super::ConfigError;
use super::env::Ctx;
use super::model::BedrockSettings;
use super::raw::{ProviderConfig, ProviderKind};

/// The Bedrock-only keys, with their spans, for "not a bedrock provider" errors.
fn bedrock_keys(p: &ProviderConfig) -> [(&'static str, Option<std::ops::Range<usize>>); 5] {
    [
        ("region", p.region.as_ref().map(Spanned::span)),
        ("profile", p.profile.as_ref().map(Spanned::span)),
        (
            "access_key_id_env",
            p.access_key_id_env.as_ref().map(Spanned::span),
        ),
        (
            "secret_access_key_env",
            p.secret_access_key_env.as_ref().map(Spanned::span),
        ),
        (
            "session_token_env",
            p.session_token_env.as_ref().map(Spanned::span),
        ),
    ]
}

/// A region from the file, the environment, or the model's ARN.
#[cfg(feature = "bedrock")]
fn region(cx: &Ctx<'_>, p: &ProviderConfig, model: Option<&str>) -> Result<String, ConfigError> {
    // The file's `region`, else the region an ARN model id names (requests for it must go
    // there), else the environment's default.
    let from_arn = || {
        let mut parts = model?.strip_prefix("arn:")?.split(':');
        let _partition = parts.next()?;
        let _service = parts.next()?;
        parts.next().filter(|r| !r.is_empty()).map(str::to_owned)
    };
    let from_env = || {
        cx.env
            .var("AWS_REGION")
            .or_else(|| cx.env.var("AWS_DEFAULT_REGION"))
            .filter(|r| !r.trim().is_empty())
    };
    let region = cx.opt(&p.region, "region")?;
    let Some(region) = region.or_else(from_arn).or_else(from_env) else {
        return Err(cx.err(
            Some(&p.name.span()),
            "region",
            format!(
                "provider {:?} (bedrock) needs a `region` (or AWS_REGION, or a model ARN)",
                p.name.get_ref()
            ),
        ));
    };
    let ok = !region.is_empty()
        && region
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !ok {
        let span = p.region.as_ref().map(Spanned::span);
        return Err(cx.err(
            span.as_ref(),
            "region",
            format!("{region:?} is not an AWS region name (e.g. us-east-1)"),
        ));
    }
    Ok(region)
}

/// The variable `var` names, or an error (or a lenient skip) naming it.
#[cfg(feature = "bedrock")]
fn var(
    cx: &Ctx<'_>,
    p: &ProviderConfig,
    var: &Spanned<String>,
    key: &str,
) -> Result<Option<String>, ConfigError> {
    match cx.env.var(var.get_ref()).filter(|v| !v.trim().is_empty()) {
        Some(v) => Ok(Some(v)),
        None => Err(unset_var(cx, p, var, key)),
    }
}

/// What a Bedrock link's region and credentials take from the provider's common settings.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(
    not(feature = "bedrock"),
    expect(
        dead_code,
        reason = "only a build with Bedrock reads them; without it the provider is refused by name"
    )
)]
pub(super) struct KeyInputs<'a> {
    /// The model (an ARN names its region).
    pub(super) model: Option<&'a str>,
    /// The value of `api_key` / `api_key_env`: a Bedrock API key.
    pub(super) api_key: Option<&'a str>,
    /// Where that key came from.
    pub(super) key_source: Option<&'a str>,
    /// A missing credential skips the provider instead of failing the config.
    pub(super) lenient_keys: bool,
}

pub(super) fn resolve_bedrock(
    cx: &Ctx<'_>,
    p: &ProviderConfig,
    keys: KeyInputs<'_>,
) -> Result<Resolved<BedrockSettings>, ConfigError> {
    if p.kind != ProviderKind::Vendor(Vendor::Bedrock) {
        if let Some((key, Some(span))) = bedrock_keys(p).into_iter().find(|(_, s)| s.is_some()) {
            return Err(not_this_kind(cx, p, &span, key, "a bedrock"));
        }
        return Ok(Resolved::Settings(None));
    }
    #[cfg(not(feature = "bedrock"))]
    {
        let _ = keys;
        Err(super::resolve_provider::not_built(cx, p, Vendor::Bedrock))
    }
    #[cfg(feature = "bedrock")]
    signing(cx, p, keys)
}

/// A bedrock provider's region and credentials.
#[cfg(feature = "bedrock")]
fn signing(
    cx: &Ctx<'_>,
    p: &ProviderConfig,
    keys: KeyInputs<'_>,
) -> Result<Resolved<BedrockSettings>, ConfigError> {
    let KeyInputs {
        model,
        api_key,
        key_source,
        lenient_keys,
    } = keys;
    let region = region(cx, p, model)?;
    let env = |name: &str| cx.env.var(name);
    let mut source = None;
    let credentials = if let Some(key) = api_key {
        source = Some(format!(
            "Bedrock API key from {}",
            key_source.unwrap_or("config")
        ));
        BedrockCredentials::api_key(SecretString::from(key.to_owned()))
    } else if let (Some(id_var), Some(secret_var)) =
        (&p.access_key_id_env, &p.secret_access_key_env)
    {
        let id = match var(cx, p, id_var, "access_key_id_env") {
            Ok(v) => v,
            Err(_) if lenient_keys => return Ok(Resolved::Skip),
            Err(e) => return Err(e),
        };
        let secret = match var(cx, p, secret_var, "secret_access_key_env") {
            Ok(v) => v,
            Err(_) if lenient_keys => return Ok(Resolved::Skip),
            Err(e) => return Err(e),
        };
        let token = match &p.session_token_env {
            Some(t) => var(cx, p, t, "session_token_env")?,
            None => None,
        };
        source = Some(format!(
            "env {} / {}",
            id_var.get_ref(),
            secret_var.get_ref()
        ));
        match (id, secret) {
            (Some(id), Some(secret)) => BedrockCredentials::keys(
                id.trim(),
                SecretString::from(secret.trim().to_owned()),
                token.map(|t| SecretString::from(t.trim().to_owned())),
            ),
            _ => return Ok(Resolved::Skip),
        }
    } else if p.access_key_id_env.is_some() || p.secret_access_key_env.is_some() {
        return Err(cx.err(
            Some(&p.name.span()),
            "access_key_id_env",
            "`access_key_id_env` and `secret_access_key_env` go together",
        ));
    } else {
        let profile = cx.opt(&p.profile, "profile")?;
        match BedrockCredentials::from_env_with(&env, profile.as_deref()) {
            Ok(c) => c,
            Err(_) if lenient_keys => return Ok(Resolved::Skip),
            Err(e) => {
                let span = p
                    .profile
                    .as_ref()
                    .map(Spanned::span)
                    .unwrap_or(p.name.span());
                return Err(cx.err(
                    Some(&span),
                    "profile",
                    format!("provider {:?}: {}", p.name.get_ref(), e.message()),
                ));
            }
        }
    };
    let source = source.unwrap_or_else(|| credentials.source().to_string());
    Ok(Resolved::Settings(Some(BedrockSettings {
        region,
        credentials,
        source,
    })))
}
