//! `[providers.status_page]`: the vendor's own status page a provider listens to (issue 43).
//!
//! ```toml
//! [providers.status_page]
//! url = "https://status.openai.com/api/v2/summary.json"   # or "preset" for openai / anthropic
//! components = ["API"]          # ids or names of the components this provider depends on
//! format = "statuspage"         # "statuspage" | "rss" | "atom"; inferred from the URL
//! interval_ms = 60000
//! timeout_ms = 5000
//! on_major_outage = "alert"     # "demote" | "open" | "alert"
//! ```
//!
//! Nothing is polled unless the section is written: the presets only spare typing the URL of
//! the vendors whose page is known, they never switch polling on.

use ripcord_providers::Vendor;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use super::ConfigError;
use super::env::Ctx;
use super::raw::{ProviderConfig, ProviderKind};
use ripcord_providers::status_page::Format;

/// The default time between two polls.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);
/// The default time limit of one poll.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// The shortest interval accepted (tests poll at ~200 ms; a vendor's page deserves more).
pub const MIN_INTERVAL: Duration = Duration::from_millis(50);

/// `[providers.status_page]` as written.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatusPageConfig {
    /// The page to poll: a Statuspage JSON endpoint, an RSS or an Atom feed; `"preset"` for the
    /// vendor's known page (openai, anthropic).
    #[serde(default)]
    pub url: Option<Spanned<String>>,
    /// Ids or names of the components this provider depends on.
    #[serde(default)]
    pub components: Vec<Spanned<String>>,
    /// `statuspage`, `rss` or `atom` (inferred from the URL when absent).
    #[serde(default)]
    pub format: Option<Spanned<String>>,
    /// Time between polls.
    #[serde(default)]
    pub interval_ms: Option<Spanned<u64>>,
    /// Time limit of one poll.
    #[serde(default)]
    pub timeout_ms: Option<Spanned<u64>>,
    /// What a declared major outage does: `demote`, `open` or `alert` (the default).
    #[serde(default)]
    pub on_major_outage: Option<Spanned<String>>,
}

/// What a declared major outage of a provider's component does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutagePolicy {
    /// The link moves behind the route's other links (before the static reply) until the
    /// incident resolves.
    Demote,
    /// The link is skipped as if its breaker were open (no call sent) until it resolves.
    Open,
    /// Only the event and the metric.
    Alert,
}

impl OutagePolicy {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            OutagePolicy::Demote => "demote",
            OutagePolicy::Open => "open",
            OutagePolicy::Alert => "alert",
        }
    }
}

/// `[providers.status_page]`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusPageSettings {
    /// The page polled.
    pub url: String,
    /// How it is read.
    pub format: Format,
    /// The components the provider depends on (ids or names).
    pub components: Vec<String>,
    /// Time between polls (the backoff after failures starts here).
    pub interval: Duration,
    /// Time limit of one poll.
    pub timeout: Duration,
    /// What a declared major outage does.
    pub on_major_outage: OutagePolicy,
}

/// The status page a kind's vendor publishes, for `url = "preset"`.
pub fn preset_url(kind: ProviderKind) -> Option<&'static str> {
    match kind {
        ProviderKind::Vendor(Vendor::OpenAi) | ProviderKind::Vendor(Vendor::AzureOpenAi) => {
            Some("https://status.openai.com/api/v2/summary.json")
        }
        ProviderKind::Vendor(Vendor::Anthropic) => {
            Some("https://status.anthropic.com/api/v2/summary.json")
        }
        _ => None,
    }
}

/// Resolves provider `p`'s `[providers.status_page]`, if written.
pub(super) fn resolve_status_page(
    cx: &Ctx<'_>,
    p: &ProviderConfig,
) -> Result<Option<StatusPageSettings>, ConfigError> {
    let Some(raw) = &p.status_page else {
        return Ok(None);
    };
    let key = |k: &str| format!("status_page.{k}");
    let Some(url_raw) = &raw.url else {
        let hint = preset_url(p.kind).map_or_else(String::new, |u| {
            format!(
                " (for {} links, url = \"preset\" polls {u})",
                p.kind.as_str()
            )
        });
        return Err(cx.err(
            None,
            &key("url"),
            format!(
                "provider {:?}: [providers.status_page] needs `url`, the status page to poll{hint}",
                p.name.get_ref()
            ),
        ));
    };
    let url = if url_raw.get_ref() == "preset" {
        preset_url(p.kind).map(str::to_owned).ok_or_else(|| {
            cx.err(
                Some(&url_raw.span()),
                &key("url"),
                format!(
                    "there is no status page preset for {} links; give the page's URL",
                    p.kind.as_str()
                ),
            )
        })?
    } else {
        cx.opt(&raw.url, &key("url"))?.unwrap_or_default()
    };
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(cx.err(
            Some(&url_raw.span()),
            &key("url"),
            format!("must be an http:// or https:// URL, not {url:?}"),
        ));
    }
    let format = match &raw.format {
        Some(f) => Format::from_name(f.get_ref()).ok_or_else(|| {
            cx.err(
                Some(&f.span()),
                &key("format"),
                format!(
                    "unknown format {:?}: expected \"statuspage\", \"rss\" or \"atom\"",
                    f.get_ref()
                ),
            )
        })?,
        None => Format::infer(&url).ok_or_else(|| {
            cx.err(
                Some(&url_raw.span()),
                &key("format"),
                format!(
                    "cannot tell the format of {url:?} from its path; set format = \
                     \"statuspage\", \"rss\" or \"atom\""
                ),
            )
        })?,
    };
    if raw.components.is_empty() {
        return Err(cx.err(
            Some(&url_raw.span()),
            &key("components"),
            format!(
                "provider {:?}: name the components it depends on (ids or names as the page \
                 lists them, e.g. components = [\"API\"]); without them every incident on the \
                 page would count against it",
                p.name.get_ref()
            ),
        ));
    }
    let mut components = Vec::with_capacity(raw.components.len());
    for c in &raw.components {
        let name = c.get_ref().trim();
        if name.is_empty() {
            return Err(cx.err(
                Some(&c.span()),
                &key("components"),
                "a component name is empty",
            ));
        }
        components.push(name.to_owned());
    }
    let ms = |v: &Option<Spanned<u64>>, k: &str, default: Duration, min: Duration| match v {
        None => Ok(default),
        Some(n) if Duration::from_millis(*n.get_ref()) < min => Err(cx.err(
            Some(&n.span()),
            &key(k),
            format!("must be at least {} ms", min.as_millis()),
        )),
        Some(n) => Ok(Duration::from_millis(*n.get_ref())),
    };
    let interval = ms(
        &raw.interval_ms,
        "interval_ms",
        DEFAULT_INTERVAL,
        MIN_INTERVAL,
    )?;
    let timeout = ms(
        &raw.timeout_ms,
        "timeout_ms",
        DEFAULT_TIMEOUT.min(interval),
        Duration::from_millis(1),
    )?;
    let on_major_outage = match &raw.on_major_outage {
        None => OutagePolicy::Alert,
        Some(s) => match s.get_ref().as_str() {
            "demote" => OutagePolicy::Demote,
            "open" => OutagePolicy::Open,
            "alert" => OutagePolicy::Alert,
            other => {
                return Err(cx.err(
                    Some(&s.span()),
                    &key("on_major_outage"),
                    format!("unknown policy {other:?}: expected \"demote\", \"open\" or \"alert\""),
                ));
            }
        },
    };
    Ok(Some(StatusPageSettings {
        url,
        format,
        components,
        interval,
        timeout,
        on_major_outage,
    }))
}
