//! The pollers of the vendors' own status pages (`[providers.status_page]`).
//!
//! One background task per provider that names a page: every `interval` it fetches the page
//! (within `timeout`), parses it ([`ripcord_providers::status_page`]) and judges the
//! components the provider depends on. A declared **major outage** of one of them is said once
//! ([`event::VENDOR_DECLARED_OUTAGE`]) and, by `on_major_outage`, moves the link behind the
//! others in every chain that names it (`demote`, the chain's [`Demotion`] switch), holds it
//! refused as an open breaker would (`open`, the switch board's vendor switch: no call is sent)
//! or does nothing more (`alert`). When the page no longer declares it, the link is restored
//! ([`event::VENDOR_DECLARED_RESOLVED`]). Every new status is also the `ripcord_vendor_status`
//! gauge ([`event::VENDOR_STATUS`]).
//!
//! A page that cannot be read — unreachable, an error status, a body that does not parse —
//! changes **nothing**: the link keeps the state the last good poll gave it. The failure is
//! counted ([`event::VENDOR_STATUS_POLL_FAILED`], the `ripcord_vendor_poll_failures_total`
//! metric), kept for `/status`, and the next poll waits twice as long as the one before (up to
//! [`MAX_BACKOFF_FACTOR`] × the interval), so a dead page is neither hammered nor logged on
//! every tick.
//!
//! [`Demotion`]: ripcord_core::chain::Demotion

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use ripcord_core::telemetry::event;
use ripcord_core::{Error, Result};
use ripcord_providers::status_page::{self, ComponentStatus, Page};
use serde_json::{Value, json};

use super::admin::Switches;
use crate::config::Config;
use crate::config::resolve_status_page::{OutagePolicy, StatusPageSettings};

/// The longest wait after failures, as a multiple of the interval.
pub const MAX_BACKOFF_FACTOR: u32 = 16;

/// The largest status page body read.
const MAX_BODY: usize = 4 << 20;

/// What the last polls of one provider's status page found (what `/status` shows).
#[derive(Debug, Clone, Default)]
pub struct VendorState {
    /// The component in the worst declared state (the first named one when all are well).
    pub component: String,
    /// Its declared status (`None` until a poll succeeded).
    pub status: Option<ComponentStatus>,
    /// The worst unresolved incident affecting the named components.
    pub incident: Option<String>,
    /// When the page was last read successfully.
    pub last_poll: Option<SystemTime>,
    /// Why the last poll failed, while the page cannot be read (cleared by a good poll).
    pub last_error: Option<String>,
    /// Failed polls in a row.
    pub failures: u32,
    /// Whether the declared major outage is being acted on (the policy is applied).
    pub acting: bool,
    /// Named components the page does not list.
    pub unknown: Vec<String>,
}

/// One provider's status page poller. Dropping the last handle stops the poll (the link keeps
/// whatever state the last poll left it in until the build that replaces it).
#[derive(Debug)]
pub struct VendorWatch {
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for VendorWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Debug)]
struct Shared {
    link: String,
    settings: StatusPageSettings,
    switches: Switches,
    state: Mutex<VendorState>,
}

impl VendorWatch {
    /// The provider polled for.
    pub fn link(&self) -> &str {
        &self.shared.link
    }

    /// Its settings.
    pub fn settings(&self) -> &StatusPageSettings {
        &self.shared.settings
    }

    /// What the polls found so far.
    pub fn state(&self) -> VendorState {
        self.shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The state as JSON, for `/status`.
    pub fn to_json(&self) -> Value {
        let s = self.state();
        let since = |t: Option<SystemTime>| {
            t.and_then(|t| t.elapsed().ok())
                .map(|d| d.as_millis() as u64)
        };
        json!({
            "url": self.shared.settings.url,
            "format": self.shared.settings.format.as_str(),
            "components": self.shared.settings.components,
            "on_major_outage": self.shared.settings.on_major_outage.as_str(),
            "component": s.component,
            "status": s.status.map(ComponentStatus::as_str),
            "level": s.status.map(ComponentStatus::gauge),
            "incident": s.incident,
            "acting": s.acting,
            "last_poll_ms_ago": since(s.last_poll),
            "last_error": s.last_error,
            "failures": s.failures,
            "unknown_components": s.unknown,
        })
    }
}

/// Starts a poller for every provider with a status page. Without a tokio runtime (a build
/// outside `serve` / `chat`) nothing is polled and a note says so.
pub(super) fn start(
    config: &Config,
    switches: &Switches,
    notes: &mut Vec<String>,
) -> Result<Vec<Arc<VendorWatch>>> {
    let wanted: Vec<_> = config
        .chain
        .iter()
        .filter_map(|p| p.status_page.as_ref().map(|s| (p.name.clone(), s.clone())))
        .collect();
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        notes.push(
            "the vendors' status pages are not polled: no async runtime in this build".to_owned(),
        );
        return Ok(Vec::new());
    };
    let client = reqwest::Client::builder()
        .user_agent(concat!(
            "ripcord/",
            env!("CARGO_PKG_VERSION"),
            " (status page poller)"
        ))
        .build()
        .map_err(|e| {
            Error::new(
                ripcord_core::ErrorKind::InvalidRequest,
                format!("the status page client could not be built: {e}"),
            )
        })?;
    Ok(wanted
        .into_iter()
        .map(|(link, settings)| {
            let shared = Arc::new(Shared {
                state: Mutex::new(VendorState {
                    component: settings.components.first().cloned().unwrap_or_default(),
                    ..VendorState::default()
                }),
                link,
                settings,
                switches: switches.clone(),
            });
            let task = rt.spawn(run(Arc::clone(&shared), client.clone()));
            Arc::new(VendorWatch { shared, task })
        })
        .collect())
}

/// The wait before the next poll after `failures` failed polls in a row.
pub fn next_wait(interval: Duration, failures: u32) -> Duration {
    let factor = 1u32
        .checked_shl(failures.min(31))
        .unwrap_or(u32::MAX)
        .min(MAX_BACKOFF_FACTOR);
    interval.saturating_mul(factor)
}

async fn run(shared: Arc<Shared>, client: reqwest::Client) {
    loop {
        let outcome = fetch(&client, &shared.settings).await;
        let failures = match outcome {
            Ok(page) => {
                apply(&shared, &page);
                0
            }
            Err(why) => failed(&shared, why),
        };
        tokio::time::sleep(next_wait(shared.settings.interval, failures)).await;
    }
}

async fn fetch(
    client: &reqwest::Client,
    s: &StatusPageSettings,
) -> std::result::Result<Page, String> {
    let get = async {
        let mut resp = client
            .get(&s.url)
            .header(
                reqwest::header::ACCEPT,
                "application/json, application/rss+xml, application/atom+xml;q=0.9, */*;q=0.1",
            )
            .send()
            .await
            .map_err(|e| format!("the status page could not be reached: {e}"))?;
        let status = resp.status();
        if !status.is_success() {
            return Err(format!("the status page answered HTTP {}", status.as_u16()));
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| format!("the status page's body broke off: {e}"))?
        {
            if body.len() + chunk.len() > MAX_BODY {
                return Err(format!(
                    "the status page's body is larger than {} MiB",
                    MAX_BODY >> 20
                ));
            }
            body.extend_from_slice(&chunk);
        }
        status_page::parse(s.format, &body).map_err(|e| e.to_string())
    };
    match tokio::time::timeout(s.timeout, get).await {
        Ok(r) => r,
        Err(_) => Err(format!(
            "the status page did not answer within {} ms",
            s.timeout.as_millis()
        )),
    }
}

/// A failed poll: counted and kept; nothing else changes. The failures in a row.
fn failed(shared: &Shared, why: String) -> u32 {
    let mut st = shared.state.lock().unwrap_or_else(PoisonError::into_inner);
    st.failures = st.failures.saturating_add(1);
    st.last_error = Some(why.clone());
    let failures = st.failures;
    drop(st);
    // Once per poll, and polls back off: at most one line per interval, then fewer.
    tracing::warn!(
        ripcord.link = %shared.link,
        error.message = %why,
        failures,
        next_poll_ms = next_wait(shared.settings.interval, failures).as_millis() as u64,
        url = %shared.settings.url,
        message = event::VENDOR_STATUS_POLL_FAILED,
    );
    failures
}

fn apply(shared: &Shared, page: &Page) {
    let v = page.verdict(&shared.settings.components);
    let policy = shared.settings.on_major_outage;
    let major = v.status == ComponentStatus::MajorOutage;
    let mut st = shared.state.lock().unwrap_or_else(PoisonError::into_inner);
    let changed = st.status != Some(v.status) || st.component != v.component;
    if v.unknown != st.unknown && !v.unknown.is_empty() {
        tracing::warn!(
            ripcord.link = %shared.link,
            unknown = ?v.unknown,
            url = %shared.settings.url,
            "the status page lists no component by these names (components = [...] in [providers.status_page])"
        );
    }
    let start = major && !st.acting;
    let end = !major && st.acting;
    *st = VendorState {
        component: v.component.clone(),
        status: Some(v.status),
        incident: v.incident.clone(),
        last_poll: Some(SystemTime::now()),
        last_error: None,
        failures: 0,
        acting: major,
        unknown: v.unknown,
    };
    drop(st);
    if changed {
        tracing::info!(
            ripcord.link = %shared.link,
            vendor_component = %v.component,
            ripcord.vendor_status.level = v.status.gauge(),
            status = v.status.as_str(),
            message = event::VENDOR_STATUS,
        );
    }
    // Set on every good poll, not only on a change: a poller started by a reload finds the
    // switches as the previous build left them and puts them right at its first poll.
    match policy {
        OutagePolicy::Demote => {
            shared.switches.set_demoted(&shared.link, major);
        }
        OutagePolicy::Open => {
            shared.switches.set_vendor_open(&shared.link, major);
        }
        OutagePolicy::Alert => {}
    }
    if start {
        tracing::warn!(
            ripcord.link = %shared.link,
            vendor_component = %v.component,
            incident = v.incident.as_deref().unwrap_or(""),
            policy = policy.as_str(),
            message = event::VENDOR_DECLARED_OUTAGE,
        );
    }
    if end {
        tracing::warn!(
            ripcord.link = %shared.link,
            vendor_component = %v.component,
            policy = policy.as_str(),
            message = event::VENDOR_DECLARED_RESOLVED,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_back_off_doubling_up_to_the_cap() {
        let i = Duration::from_millis(200);
        let waits: Vec<u128> = (0..7).map(|f| next_wait(i, f).as_millis()).collect();
        assert_eq!(waits, [200, 400, 800, 1600, 3200, 3200, 3200]);
        assert_eq!(next_wait(i, u32::MAX), i * MAX_BACKOFF_FACTOR);
    }
}
