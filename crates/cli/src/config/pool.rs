//! A pooled provider: `deployments = [{ base_url, api_key_env, region, weight, rpm, tpm }, …]`
//! and `balance`, resolved and checked with the file, line and key of what is wrong.

use super::resolve_provider::Resolved;
use ripcord_providers::Vendor;
use std::fmt::Write as _;

use secrecy::SecretString;
use toml::Spanned;

use super::ConfigError;
use super::env::Ctx;
use super::raw::{ProviderConfig, ProviderKind};

/// A pool's resolved settings.
#[derive(Debug, Clone)]
pub struct PoolSettings {
    /// The balancing strategy.
    pub balance: ripcord_resilience::Balance,
    /// The deployments, in the file's order.
    pub deployments: Vec<DeploymentSettings>,
}

/// One deployment, resolved (its key never printed).
#[derive(Debug, Clone)]
pub struct DeploymentSettings {
    /// Its name (given, else its region, else `#n`).
    pub name: String,
    /// Its endpoint (`None`: the provider's).
    pub base_url: Option<String>,
    /// Its key (`None`: the provider's).
    pub api_key: Option<SecretString>,
    /// Where its key came from (`env AZURE_KEY_EAST`), never the key.
    pub key_source: Option<String>,
    /// Its region.
    pub region: Option<String>,
    /// azure-openai: its deployment name (`None`: the provider's).
    pub deployment: Option<String>,
    /// Its weight.
    pub weight: u32,
    /// Its requests-per-minute quota.
    pub rpm: Option<u32>,
    /// Its tokens-per-minute quota.
    pub tpm: Option<u32>,
}

impl PoolSettings {
    /// What `check-config` prints for the pool, in place of the provider's retry line (the
    /// pool's attempts replace the link's retry).
    pub fn describe(&self, retry: &str) -> String {
        let mut s = format!(
            "pool: balance {}, {} deployments; attempts go to another deployment first (the provider's retry settings do not apply: {retry})",
            self.balance,
            self.deployments.len()
        );
        for d in &self.deployments {
            let _ = write!(s, "\n  deployment {}:", d.name);
            if let Some(r) = &d.region {
                let _ = write!(s, " region={r}");
            }
            if let Some(u) = &d.base_url {
                let _ = write!(s, " base_url={}", super::raw::redact_url(u));
            }
            if let Some(dep) = &d.deployment {
                let _ = write!(s, " deployment={dep}");
            }
            match &d.key_source {
                Some(src) => {
                    let _ = write!(s, " key=[redacted] from {src}");
                }
                None => s.push_str(" key=the provider's"),
            }
            let _ = write!(s, " weight={}", d.weight);
            if let Some(n) = d.rpm {
                let _ = write!(s, " rpm={n}");
            }
            if let Some(n) = d.tpm {
                let _ = write!(s, " tpm={n}");
            }
        }
        s
    }
}

/// `deployments` and `balance` of one provider.
pub(super) fn resolve_pool(
    cx: &Ctx<'_>,
    p: &ProviderConfig,
    lenient_keys: bool,
) -> Result<Resolved<PoolSettings>, ConfigError> {
    let name = p.name.get_ref();
    if p.deployments.is_empty() {
        if let Some(b) = &p.balance {
            return Err(cx.err(
                Some(&b.span()),
                "balance",
                format!("provider {name:?}: `balance` needs `deployments` to balance across"),
            ));
        }
        return Ok(Resolved::Settings(None));
    }
    if p.kind == ProviderKind::LocalOnnx {
        return Err(cx.err(
            Some(&p.name.span()),
            "deployments",
            format!("provider {name:?}: a local-onnx model has no deployments to pool"),
        ));
    }
    let balance = match &p.balance {
        None => ripcord_resilience::Balance::default(),
        Some(b) => b
            .get_ref()
            .parse()
            .map_err(|e: ripcord_resilience::UnknownBalance| {
                cx.err(Some(&b.span()), "balance", e.to_string())
            })?,
    };
    let provider_key = p.api_key.is_some() || p.api_key_env.is_some();
    let mut deployments: Vec<DeploymentSettings> = Vec::with_capacity(p.deployments.len());
    for (i, d) in p.deployments.iter().enumerate() {
        let n = i + 1;
        let at = |key: &str| format!("deployments[{n}].{key}");
        let region = cx.opt(&d.region, &at("region"))?;
        let dname = match (cx.opt(&d.name, &at("name"))?, &region) {
            (Some(n), _) => n,
            (None, Some(r)) => r.clone(),
            (None, None) => format!("#{n}"),
        };
        let span_of = |v: Option<std::ops::Range<usize>>| v.unwrap_or_else(|| p.name.span());
        if deployments.iter().any(|o| o.name == dname) {
            let span = span_of(d.name.as_ref().or(d.region.as_ref()).map(Spanned::span));
            return Err(cx.err(
                Some(&span),
                &at("name"),
                format!(
                    "provider {name:?}: two deployments are named {dname:?}; give each a distinct `name` or `region`"
                ),
            ));
        }
        let base_url = cx.opt(&d.base_url, &at("base_url"))?;
        if let (Some(u), Some(b)) = (&base_url, &d.base_url)
            && !(u.starts_with("http://") || u.starts_with("https://"))
        {
            return Err(cx.err(
                Some(&b.span()),
                &at("base_url"),
                format!("expected an http:// or https:// URL, got {u:?}"),
            ));
        }
        let (api_key, key_source) = match &d.api_key_env {
            Some(var) => match cx.env.var(var.get_ref()) {
                Some(v) => (
                    Some(SecretString::from(v)),
                    Some(format!("env {}", var.get_ref())),
                ),
                None if lenient_keys => return Ok(Resolved::Skip),
                None => {
                    return Err(cx.err(
                        Some(&var.span()),
                        &at("api_key_env"),
                        format!(
                            "environment variable {} is not set (provider {name:?}, deployment {dname:?})",
                            var.get_ref()
                        ),
                    ));
                }
            },
            None if provider_key || p.kind.key_optional() => (None, None),
            None => {
                return Err(cx.err(
                    Some(&p.name.span()),
                    &at("api_key_env"),
                    format!(
                        "provider {name:?}: deployment {dname:?} needs `api_key_env` (or the provider's `api_key_env`)"
                    ),
                ));
            }
        };
        let positive = |v: &Option<Spanned<u32>>, key: &str| {
            cx.at_least(v.as_ref(), 1, &at(key), "must be at least 1")
        };
        let deployment = cx.opt(&d.deployment, &at("deployment"))?;
        if deployment.is_some() && p.kind != ProviderKind::Vendor(Vendor::AzureOpenAi) {
            let span = span_of(d.deployment.as_ref().map(Spanned::span));
            return Err(cx.err(
                Some(&span),
                &at("deployment"),
                format!(
                    "`deployment` is an azure-openai setting; provider {name:?} is {}",
                    p.kind.as_str()
                ),
            ));
        }
        if p.kind == ProviderKind::Vendor(Vendor::AzureOpenAi)
            && ((base_url.is_none() && p.base_url.is_none())
                || (deployment.is_none() && p.deployment.is_none()))
        {
            return Err(cx.err(
                Some(&p.name.span()),
                &at("base_url"),
                format!(
                    "provider {name:?}: azure-openai deployment {dname:?} needs `base_url` (the resource endpoint) and `deployment`, its own or the provider's"
                ),
            ));
        }
        deployments.push(DeploymentSettings {
            name: dname,
            base_url,
            api_key,
            key_source,
            region,
            deployment,
            weight: d.weight.as_ref().map_or(1, |w| *w.get_ref()),
            rpm: positive(&d.rpm, "rpm")?,
            tpm: positive(&d.tpm, "tpm")?,
        });
    }
    // Where a balance that the deployments cannot serve is written (or the provider's name).
    let balance_span = || {
        p.balance
            .as_ref()
            .map_or_else(|| p.name.span(), Spanned::span)
    };
    if balance == ripcord_resilience::Balance::Weighted && deployments.iter().all(|d| d.weight == 0)
    {
        return Err(cx.err(
            Some(&balance_span()),
            "balance",
            format!("provider {name:?}: every deployment weighs 0; give one a weight"),
        ));
    }
    if balance == ripcord_resilience::Balance::Usage
        && let Some(d) = deployments
            .iter()
            .find(|d| d.rpm.is_none() && d.tpm.is_none())
    {
        return Err(cx.err(
            Some(&balance_span()),
            "balance",
            format!(
                "provider {name:?}: balance = \"usage\" divides each deployment's use by its quota; deployment {:?} states neither `rpm` nor `tpm`",
                d.name
            ),
        ));
    }
    if deployments.len() > ripcord_resilience::pool::MAX_DEPLOYMENTS {
        return Err(cx.err(
            Some(&p.name.span()),
            "deployments",
            format!(
                "provider {name:?} has {} deployments; at most {}",
                deployments.len(),
                ripcord_resilience::pool::MAX_DEPLOYMENTS
            ),
        ));
    }
    Ok(Resolved::Settings(Some(PoolSettings {
        balance,
        deployments,
    })))
}
