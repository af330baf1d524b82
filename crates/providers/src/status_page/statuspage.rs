//! Atlassian Statuspage's JSON API (v2): `summary.json`, `incidents/unresolved.json`,
//! `incidents.json` and `components.json` all share these field names.

use serde::Deserialize;

use super::{Component, ComponentStatus, Impact, Incident, Page, ParseError};

#[derive(Deserialize)]
struct Body {
    components: Option<Vec<RawComponent>>,
    incidents: Option<Vec<RawIncident>>,
}

#[derive(Deserialize)]
struct RawComponent {
    id: String,
    name: String,
    status: String,
    /// A component group only gathers others; its status is theirs, rolled up.
    #[serde(default)]
    group: bool,
}

#[derive(Deserialize)]
struct RawIncident {
    id: String,
    name: String,
    /// `investigating`, `identified`, `monitoring`, `resolved`, `postmortem` (and for
    /// maintenances `scheduled`, `in_progress`, `verifying`, `completed`).
    status: String,
    impact: String,
    #[serde(default)]
    components: Vec<IncidentComponent>,
}

#[derive(Deserialize)]
struct IncidentComponent {
    id: String,
    name: String,
}

/// The incident states that mean it is over (`incidents.json` lists these too).
const RESOLVED: [&str; 3] = ["resolved", "postmortem", "completed"];

pub(super) fn parse(body: &[u8]) -> Result<Page, ParseError> {
    let raw: Body = serde_json::from_slice(body).map_err(|e| {
        ParseError::new(format!(
            "the status page is not Statuspage JSON (summary.json): {e}"
        ))
    })?;
    if raw.components.is_none() && raw.incidents.is_none() {
        return Err(ParseError::new(
            "the status page JSON has neither `components` nor `incidents` \
             (expected Statuspage's /api/v2/summary.json or /api/v2/incidents/unresolved.json)",
        ));
    }
    let mut page = Page::default();
    for c in raw.components.unwrap_or_default() {
        let status = ComponentStatus::from_name(&c.status).ok_or_else(|| {
            ParseError::new(format!(
                "component {:?} has an unknown status {:?} (expected operational, \
                 degraded_performance, partial_outage, major_outage or under_maintenance)",
                c.name, c.status
            ))
        })?;
        if !c.group {
            page.components.push(Component {
                id: c.id,
                name: c.name,
                status,
            });
        }
    }
    for i in raw.incidents.unwrap_or_default() {
        if RESOLVED.contains(&i.status.as_str()) {
            continue;
        }
        let impact = match i.impact.as_str() {
            "none" => Impact::None,
            "maintenance" => Impact::Maintenance,
            "minor" => Impact::Minor,
            "major" => Impact::Major,
            "critical" => Impact::Critical,
            other => {
                return Err(ParseError::new(format!(
                    "incident {:?} has an unknown impact {other:?} (expected none, minor, \
                     major, critical or maintenance)",
                    i.name
                )));
            }
        };
        let mut components = Vec::with_capacity(i.components.len() * 2);
        for c in i.components {
            components.push(c.id);
            components.push(c.name);
        }
        page.incidents.push(Incident {
            id: i.id,
            text: i.name.clone(),
            name: i.name,
            impact,
            components,
        });
    }
    Ok(page)
}
