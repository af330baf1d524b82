//! `[alerts]`: the chain's alert events sent to a webhook, without Prometheus.
//!
//! ```toml
//! [alerts]
//! webhook_url = "${SLACK_WEBHOOK_URL}"   # a secret: shown by its host only
//! format = "slack"                        # or "alertmanager" (default)
//! min_interval_ms = 10000                 # at most one POST per interval (default 10 s)
//! dedupe_ms = 300000                      # one alert per condition per window (default 5 min)
//! timeout_ms = 5000                       # per POST (default 5 s)
//! retries = 3                             # on a network error, a 429 or a 5xx (default 3)
//! queue = 256                             # alerts waiting for the sender; more are dropped
//! ```

use std::fmt;
use std::time::Duration;

use ripcord_telemetry::alert_webhook::{self, WebhookFormat, WebhookSettings};
use secrecy::SecretString;
use serde::Deserialize;
use toml::Spanned;

use super::ConfigError;
use super::env::Ctx;

/// `[alerts]` as written.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlertsConfig {
    /// The webhook (`http://` or `https://`; `${VAR}` is read from the environment).
    pub webhook_url: Spanned<String>,
    /// `"alertmanager"` (default) or `"slack"`.
    #[serde(default)]
    pub format: Option<Spanned<String>>,
    /// The least time between two POSTs, in milliseconds.
    #[serde(default)]
    pub min_interval_ms: Option<Spanned<u64>>,
    /// The window in which a repeated alert is not sent again, in milliseconds.
    #[serde(default)]
    pub dedupe_ms: Option<Spanned<u64>>,
    /// The timeout of one POST, in milliseconds.
    #[serde(default)]
    pub timeout_ms: Option<Spanned<u64>>,
    /// Retries of a failed POST.
    #[serde(default)]
    pub retries: Option<Spanned<u32>>,
    /// Alerts queued for the sender at most.
    #[serde(default)]
    pub queue: Option<Spanned<usize>>,
}

impl fmt::Debug for AlertsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AlertsConfig")
            .field("webhook_url", &"[redacted]")
            .field("format", &self.format.as_ref().map(Spanned::get_ref))
            .finish_non_exhaustive()
    }
}

/// The resolved `[alerts]` table: the telemetry crate's webhook settings.
#[derive(Clone)]
pub struct AlertsSettings(WebhookSettings);

impl AlertsSettings {
    /// The settings as resolved.
    pub fn settings(&self) -> &WebhookSettings {
        &self.0
    }

    /// A copy of the settings for the telemetry crate's sender, which takes them by value.
    pub fn webhook(&self) -> WebhookSettings {
        self.0.clone()
    }

    /// One line for `check-config`.
    pub fn describe(&self) -> String {
        let s = &self.0;
        format!(
            "alerts: webhook {} (path redacted), format {}, at most one POST per {} ms, one alert per condition per {} ms, timeout {} ms, {} retries, queue {}\n",
            s.host(),
            s.format.as_str(),
            s.min_interval.as_millis(),
            s.dedupe.as_millis(),
            s.timeout.as_millis(),
            s.retries,
            s.queue
        )
    }
}

impl fmt::Debug for AlertsSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("AlertsSettings").field(&self.0).finish()
    }
}

pub(super) fn resolve_alerts(
    cx: &Ctx<'_>,
    raw: &AlertsConfig,
) -> Result<AlertsSettings, ConfigError> {
    let key = "alerts.webhook_url";
    let span = raw.webhook_url.span();
    let url = cx.interpolate(&raw.webhook_url, key)?;
    // The value may be a secret: errors say what is wrong, never what it is.
    alert_webhook::check_url(&url).map_err(|why| cx.err(Some(&span), key, why))?;
    let format = match raw.format.as_ref() {
        None => WebhookFormat::Alertmanager,
        Some(f) => match f.get_ref().as_str() {
            "alertmanager" => WebhookFormat::Alertmanager,
            "slack" => WebhookFormat::Slack,
            other => {
                return Err(cx.err(
                    Some(&f.span()),
                    "alerts.format",
                    format!("unknown format {other:?} (expected \"alertmanager\" or \"slack\")"),
                ));
            }
        },
    };
    let ms = |v: &Option<Spanned<u64>>, name: &str, default: Duration, min: u64| {
        let message = format!("must be at least {min} (milliseconds)");
        let n = cx.at_least(v.as_ref(), min, &format!("alerts.{name}"), &message)?;
        Ok::<_, ConfigError>(n.map_or(default, Duration::from_millis))
    };
    let queue = cx
        .at_least(raw.queue.as_ref(), 1, "alerts.queue", "must be at least 1")?
        .unwrap_or(alert_webhook::DEFAULT_QUEUE);
    Ok(AlertsSettings(WebhookSettings {
        url: SecretString::from(url),
        format,
        min_interval: ms(
            &raw.min_interval_ms,
            "min_interval_ms",
            alert_webhook::DEFAULT_MIN_INTERVAL,
            0,
        )?,
        dedupe: ms(
            &raw.dedupe_ms,
            "dedupe_ms",
            alert_webhook::DEFAULT_DEDUPE,
            0,
        )?,
        timeout: ms(
            &raw.timeout_ms,
            "timeout_ms",
            alert_webhook::DEFAULT_TIMEOUT,
            1,
        )?,
        retries: raw
            .retries
            .as_ref()
            .map_or(alert_webhook::DEFAULT_RETRIES, |r| *r.get_ref()),
        queue,
    }))
}
