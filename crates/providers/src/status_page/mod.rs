//! What a vendor declares on its own status page, parsed: the components it lists with their
//! status, and its unresolved incidents.
//!
//! Two shapes are read:
//!
//! - **Atlassian Statuspage JSON** (OpenAI and Anthropic publish theirs): `/api/v2/summary.json`
//!   (`components[].{id,name,status}` and the unresolved `incidents[]`),
//!   `/api/v2/incidents/unresolved.json` (incidents only) and `/api/v2/components.json`
//!   (components only). A component's status is one of `operational`, `degraded_performance`,
//!   `partial_outage`, `major_outage`, `under_maintenance`; an incident's `impact` one of
//!   `none`, `minor`, `major`, `critical` (`maintenance` for scheduled work), with the
//!   `components` it affects.
//! - **RSS 2.0 / Atom feeds** (any status page that publishes one), parsed by `feed-rs`; see
//!   [`feed`] for how an entry becomes an unresolved incident.
//!
//! This module only parses and judges; fetching the page on an interval is the caller's
//! (`ripcord serve` polls it). A page that does not parse is an [`Err`], never a page that says
//! "all operational": the caller keeps what it knew before.
//!
//! # Examples
//!
//! ```
//! use ripcord_providers::status_page::{ComponentStatus, Format, parse};
//! let body = br#"{"components":[{"id":"c1","name":"API","status":"major_outage"}],"incidents":[]}"#;
//! let page = parse(Format::Statuspage, body).unwrap();
//! let v = page.verdict(&["API".to_owned()]);
//! assert_eq!(v.status, ComponentStatus::MajorOutage);
//! ```

pub mod feed;
mod statuspage;

use std::fmt;

/// The format of a status page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Format {
    /// Atlassian Statuspage's JSON API (`/api/v2/summary.json` and friends).
    Statuspage,
    /// An RSS 2.0 feed.
    Rss,
    /// An Atom feed.
    Atom,
}

impl Format {
    /// The config name: `statuspage`, `rss` or `atom`.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Statuspage => "statuspage",
            Format::Rss => "rss",
            Format::Atom => "atom",
        }
    }

    /// The format a config name stands for.
    pub fn from_name(name: &str) -> Option<Format> {
        match name {
            "statuspage" => Some(Format::Statuspage),
            "rss" => Some(Format::Rss),
            "atom" => Some(Format::Atom),
            _ => None,
        }
    }

    /// The format a URL's path implies: `.json` is Statuspage JSON, `.rss` / `.xml` RSS, `.atom`
    /// Atom; `None` when the path says nothing (the config must then name the format).
    pub fn infer(url: &str) -> Option<Format> {
        let path = url
            .split(['?', '#'])
            .next()
            .unwrap_or(url)
            .to_ascii_lowercase();
        if path.ends_with(".json") {
            Some(Format::Statuspage)
        } else if path.ends_with(".rss") || path.ends_with(".xml") || path.ends_with("/rss") {
            Some(Format::Rss)
        } else if path.ends_with(".atom") || path.ends_with("/atom") {
            Some(Format::Atom)
        } else {
            None
        }
    }
}

/// A component's declared status, from best to worst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum ComponentStatus {
    /// `operational`.
    Operational,
    /// `under_maintenance`: planned work, counted beside a degradation.
    UnderMaintenance,
    /// `degraded_performance`.
    Degraded,
    /// `partial_outage`.
    PartialOutage,
    /// `major_outage`.
    MajorOutage,
}

impl ComponentStatus {
    /// The Statuspage name of the status.
    pub fn as_str(self) -> &'static str {
        match self {
            ComponentStatus::Operational => "operational",
            ComponentStatus::UnderMaintenance => "under_maintenance",
            ComponentStatus::Degraded => "degraded_performance",
            ComponentStatus::PartialOutage => "partial_outage",
            ComponentStatus::MajorOutage => "major_outage",
        }
    }

    /// The status a Statuspage name stands for.
    pub fn from_name(name: &str) -> Option<ComponentStatus> {
        Some(match name {
            "operational" => ComponentStatus::Operational,
            "under_maintenance" => ComponentStatus::UnderMaintenance,
            "degraded_performance" => ComponentStatus::Degraded,
            "partial_outage" => ComponentStatus::PartialOutage,
            "major_outage" => ComponentStatus::MajorOutage,
            _ => return None,
        })
    }

    /// The value of the `ripcord_vendor_status` gauge: 0 operational, 1 degraded (or under
    /// maintenance), 2 partial outage, 3 major outage.
    pub fn gauge(self) -> i64 {
        match self {
            ComponentStatus::Operational => 0,
            ComponentStatus::UnderMaintenance | ComponentStatus::Degraded => 1,
            ComponentStatus::PartialOutage => 2,
            ComponentStatus::MajorOutage => 3,
        }
    }
}

impl fmt::Display for ComponentStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An incident's declared impact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Impact {
    /// `none`.
    None,
    /// `maintenance` (scheduled work).
    Maintenance,
    /// `minor`.
    Minor,
    /// `major`.
    Major,
    /// `critical`.
    Critical,
}

impl Impact {
    /// The status an unresolved incident of this impact declares for the components it
    /// affects: `major` and `critical` are a major outage, `minor` a degradation, `maintenance`
    /// maintenance, `none` nothing.
    pub fn status(self) -> ComponentStatus {
        match self {
            Impact::None => ComponentStatus::Operational,
            Impact::Maintenance => ComponentStatus::UnderMaintenance,
            Impact::Minor => ComponentStatus::Degraded,
            Impact::Major | Impact::Critical => ComponentStatus::MajorOutage,
        }
    }
}

/// One component as the page lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Component {
    /// The page's id of the component (empty in feeds).
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its status.
    pub status: ComponentStatus,
}

/// One unresolved incident.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incident {
    /// The page's id of the incident.
    pub id: String,
    /// Its title.
    pub name: String,
    /// Its impact.
    pub impact: Impact,
    /// The ids and names of the components it affects (Statuspage JSON).
    pub components: Vec<String>,
    /// The text to search for component names when it lists none (feeds: title and body).
    pub text: String,
}

impl Incident {
    /// Whether the incident affects component `wanted` (an id or a name, names compared
    /// without case; in feeds, a word of its title or text).
    fn affects(&self, wanted: &str) -> bool {
        if self
            .components
            .iter()
            .any(|c| c == wanted || c.eq_ignore_ascii_case(wanted))
        {
            return true;
        }
        self.components.is_empty() && feed::mentions(&self.text, wanted)
    }
}

/// A parsed status page.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Page {
    /// The components listed (empty for an incidents-only endpoint or a feed).
    pub components: Vec<Component>,
    /// The unresolved incidents.
    pub incidents: Vec<Incident>,
}

/// What a page declares for the components one provider depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// The worst status of those components, from their listed status and the impact of the
    /// unresolved incidents affecting them.
    pub status: ComponentStatus,
    /// The component that is in that state (the first named one when all are operational).
    pub component: String,
    /// The name of the worst unresolved incident affecting them, if any.
    pub incident: Option<String>,
    /// Named components the page did not list (ids or names that match nothing), so an
    /// operator can see a misspelt name.
    pub unknown: Vec<String>,
}

impl Page {
    /// What the page declares for the components named in `wanted` (ids or names). An empty
    /// `wanted` means every component and incident on the page.
    pub fn verdict(&self, wanted: &[String]) -> Verdict {
        let all = wanted.is_empty();
        let matches = |c: &Component| {
            all || wanted
                .iter()
                .any(|w| *w == c.id || c.name.eq_ignore_ascii_case(w))
        };
        let mut best = Verdict {
            status: ComponentStatus::Operational,
            component: wanted.first().cloned().unwrap_or_default(),
            incident: None,
            unknown: Vec::new(),
        };
        for c in self.components.iter().filter(|c| matches(c)) {
            if c.status > best.status {
                best.status = c.status;
                best.component = c.name.clone();
            }
        }
        // The worst unresolved incident affecting a named component (the first one on ties).
        let mut worst: Option<(ComponentStatus, &Incident, String)> = None;
        for i in &self.incidents {
            let hit = if all {
                Some(i.components.first().cloned().unwrap_or_default())
            } else {
                wanted.iter().find(|w| i.affects(w)).map(|w| {
                    // Report the component by the page's own name when it lists it.
                    self.components
                        .iter()
                        .find(|c| c.id == **w || c.name.eq_ignore_ascii_case(w))
                        .map_or_else(|| w.clone(), |c| c.name.clone())
                })
            };
            let Some(component) = hit else { continue };
            let s = i.impact.status();
            if worst.as_ref().is_none_or(|(w, _, _)| s > *w) {
                worst = Some((s, i, component));
            }
        }
        if let Some((s, i, component)) = worst {
            best.incident = Some(i.name.clone());
            if s > best.status {
                best.status = s;
                best.component = component;
            }
        }
        if !self.components.is_empty() {
            best.unknown = wanted
                .iter()
                .filter(|w| {
                    !self
                        .components
                        .iter()
                        .any(|c| c.id == **w || c.name.eq_ignore_ascii_case(w))
                })
                .cloned()
                .collect();
        }
        best
    }
}

/// Why a status page could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError(String);

impl ParseError {
    pub(crate) fn new(msg: impl Into<String>) -> Self {
        ParseError(msg.into())
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParseError {}

/// Parses a status page's body in `format`.
pub fn parse(format: Format, body: &[u8]) -> Result<Page, ParseError> {
    match format {
        Format::Statuspage => statuspage::parse(body),
        Format::Rss | Format::Atom => feed::parse(body),
    }
}

#[cfg(test)]
mod tests;
