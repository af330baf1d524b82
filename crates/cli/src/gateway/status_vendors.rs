//! The `/status` section on the vendors' own status pages (`[providers.status_page]`): what
//! each vendor declares for the components a provider depends on (component, status, incident,
//! last poll, last error), beside ripcord's own view of that provider (its breaker, and whether
//! the declaration moved it: demoted or held open).

use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use ripcord_resilience::{BreakerState, HealthSnapshot};
use serde_json::{Value, json};

use super::status::{ago, esc};
use crate::build::admin::Switches;
use crate::build::status_watch::VendorWatch;

/// What ripcord does with the link now, because of the declaration.
fn effect(switches: &Switches, link: &str) -> &'static str {
    if switches.vendor_open(link) == Some(true) {
        "held open"
    } else if switches.demoted(link) == Some(true) {
        "demoted"
    } else {
        "in place"
    }
}

fn breaker_of(snaps: &[HealthSnapshot], link: &str) -> Option<BreakerState> {
    snaps
        .iter()
        .find(|s| &*s.link == link)
        .and_then(|s| s.breaker.as_ref())
        .map(|b| b.state)
}

/// The section as JSON: one object per provider with a status page.
pub(super) fn to_json(
    watches: &[std::sync::Arc<VendorWatch>],
    switches: &Switches,
    snaps: &[HealthSnapshot],
) -> Value {
    Value::Array(
        watches
            .iter()
            .map(|w| {
                json!({
                    "provider": w.link(),
                    "declared": w.to_json(),
                    "ripcord": {
                        "breaker": breaker_of(snaps, w.link()).map(|b| b.as_str()),
                        "effect": effect(switches, w.link()),
                    },
                })
            })
            .collect(),
    )
}

/// The section as HTML (nothing when no provider names a status page).
pub(super) fn render(
    watches: &[std::sync::Arc<VendorWatch>],
    switches: &Switches,
    snaps: &[HealthSnapshot],
    out: &mut String,
) {
    if watches.is_empty() {
        return;
    }
    out.push_str(r#"<h2>Vendor status pages</h2><table><tr><th>provider</th><th class="l">component</th><th>declared</th><th class="l">incident</th><th class="l">last poll</th><th class="l">last error</th><th>breaker (ripcord)</th><th>effect</th></tr>"#);
    let wall = SystemTime::now();
    for w in watches {
        let s = w.state();
        let (class, word) = match s.status {
            None => ("muted", "unknown".to_owned()),
            Some(st) if st.gauge() == 0 => ("pass", st.as_str().to_owned()),
            Some(st) => ("fail", st.as_str().to_owned()),
        };
        let polled = s.last_poll.map_or("never".to_owned(), |t| {
            format!(
                "{} ago",
                ago(wall.duration_since(t).unwrap_or(Duration::ZERO))
            )
        });
        let error = match &s.last_error {
            Some(e) => format!("{} ({} in a row)", esc(e), s.failures),
            None => "—".to_owned(),
        };
        let _ = write!(
            out,
            r#"<tr><td>{}</td><td class="l">{}</td><td class="{class}">{word}</td><td class="l">{}</td><td class="l">{polled}</td><td class="l">{error}</td><td>{}</td><td>{} <span class="muted">({})</span></td></tr>"#,
            esc(w.link()),
            esc(&s.component),
            esc(s.incident.as_deref().unwrap_or("—")),
            breaker_of(snaps, w.link()).map_or("—", |b| b.as_str()),
            effect(switches, w.link()),
            w.settings().on_major_outage.as_str(),
        );
    }
    out.push_str("</table>");
}
