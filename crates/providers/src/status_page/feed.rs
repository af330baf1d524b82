//! RSS 2.0 and Atom status feeds (Statuspage's `history.rss` / `history.atom`, and any other
//! status page's feed), parsed by `feed-rs`.
//!
//! A feed carries no component status and no impact, only entries of text, so the reading is a
//! heuristic, kept deliberately conservative (a feed that cannot be judged declares nothing):
//!
//! 1. **Is the entry unresolved?** Statuspage writes each update as `<strong>Status</strong> -
//!    text`, newest first. The entry's state is the first `<strong>` label that is a known
//!    status word; without one, the first known status word of its plain text. `Resolved`,
//!    `Postmortem` and `Completed` close an entry; `Investigating`, `Identified`, `Monitoring`
//!    and `Update` keep an incident open; `Scheduled`, `In progress` and `Verifying` are a
//!    maintenance. An entry with no status word at all is taken as resolved: an old post, a
//!    note, nothing to act on.
//! 2. **Which component?** A feed lists none, so an open entry affects a component whose name
//!    appears in its title or body as a whole word (case-insensitive): "Elevated errors on the
//!    API" affects `API`, not `APIs`.
//! 3. **How bad?** An open incident counts as a **major** outage ([`Impact::Major`]): vendors
//!    post to the feed for incidents, and the policy that acts on it is the operator's choice
//!    (`on_major_outage`); an open maintenance counts as maintenance.

use super::{Impact, Incident, Page, ParseError};

/// Status words that close an entry.
const CLOSED: [&str; 3] = ["resolved", "postmortem", "completed"];
/// Status words of an open incident.
const OPEN: [&str; 4] = ["investigating", "identified", "monitoring", "update"];
/// Status words of a maintenance under way.
const MAINTENANCE: [&str; 3] = ["scheduled", "in progress", "verifying"];

pub(super) fn parse(body: &[u8]) -> Result<Page, ParseError> {
    let feed = feed_rs::parser::parse(body)
        .map_err(|e| ParseError::new(format!("the status feed is not RSS or Atom: {e}")))?;
    let mut page = Page::default();
    for entry in feed.entries {
        let title = entry.title.map(|t| t.content).unwrap_or_default();
        let html = entry
            .content
            .and_then(|c| c.body)
            .or_else(|| entry.summary.map(|s| s.content))
            .unwrap_or_default();
        let Some(impact) = state(&html) else { continue };
        let text = format!("{title}\n{}", strip_tags(&html));
        page.incidents.push(Incident {
            id: entry.id,
            name: title,
            impact,
            components: Vec::new(),
            text,
        });
    }
    Ok(page)
}

/// The impact of an open entry, `None` when it is closed or states nothing.
fn state(html: &str) -> Option<Impact> {
    let word = first_strong_label(html).or_else(|| first_status_word(&strip_tags(html)))?;
    if CLOSED.contains(&word.as_str()) {
        None
    } else if MAINTENANCE.contains(&word.as_str()) {
        Some(Impact::Maintenance)
    } else {
        Some(Impact::Major)
    }
}

fn known(word: &str) -> bool {
    CLOSED.contains(&word) || OPEN.contains(&word) || MAINTENANCE.contains(&word)
}

/// The first `<strong>…</strong>` whose text is a known status word, lowercased.
fn first_strong_label(html: &str) -> Option<String> {
    let lower = html.to_ascii_lowercase();
    let mut rest = lower.as_str();
    while let Some(start) = rest.find("<strong>") {
        let after = &rest[start + "<strong>".len()..];
        let end = after.find("</strong>")?;
        let label = after[..end].trim();
        if known(label) {
            return Some(label.to_owned());
        }
        rest = &after[end..];
    }
    None
}

/// The known status word that comes first in `text`, lowercased.
fn first_status_word(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    CLOSED
        .iter()
        .chain(&OPEN)
        .chain(&MAINTENANCE)
        .filter_map(|w| word_at(&lower, w).map(|at| (at, *w)))
        .min_by_key(|(at, _)| *at)
        .map(|(_, w)| w.to_owned())
}

/// Where `word` (lowercase) first occurs in `lower` as a whole word.
fn word_at(lower: &str, word: &str) -> Option<usize> {
    let bytes = lower.as_bytes();
    let mut from = 0;
    while let Some(i) = lower[from..].find(word) {
        let at = from + i;
        let end = at + word.len();
        let before = at == 0 || !bytes[at - 1].is_ascii_alphanumeric();
        let after = end >= bytes.len() || !bytes[end].is_ascii_alphanumeric();
        if before && after {
            return Some(at);
        }
        from = at + 1;
        while !lower.is_char_boundary(from) {
            from += 1;
        }
    }
    None
}

/// Whether `text` names `component` as a whole word, without case.
pub(super) fn mentions(text: &str, component: &str) -> bool {
    !component.is_empty()
        && word_at(&text.to_ascii_lowercase(), &component.to_ascii_lowercase()).is_some()
}

/// The text of an HTML fragment: tags dropped (each becomes a space), common entities decoded.
fn strip_tags(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut in_tag = false;
    for ch in html.chars() {
        match ch {
            '<' => in_tag = true,
            '>' if in_tag => {
                in_tag = false;
                out.push(' ');
            }
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&nbsp;", " ")
}
