//! A fake vendor status page: Atlassian Statuspage's public API and its incident feeds, on
//! `127.0.0.1:0`, scripted by the test.
//!
//! It serves what OpenAI's and Anthropic's status pages serve, in the same shapes (see
//! `crates/providers/tests/fixtures/status_page/README.md` for where the shapes come from):
//!
//! - `GET /api/v2/summary.json`: `page`, `components[]` (`id`, `name`, `status`, …), the
//!   unresolved `incidents[]` (with their `impact` and affected `components`),
//!   `scheduled_maintenances`, `status.indicator`;
//! - `GET /api/v2/incidents/unresolved.json` and `GET /api/v2/components.json`;
//! - `GET /history.rss` and `GET /history.atom`: every incident, newest first, its updates in
//!   the body as `<strong>Status</strong> - text`.
//!
//! The test sets a component's status ([`FakeStatusPage::set_component`]), opens and resolves
//! incidents ([`FakeStatusPage::open_incident`], [`FakeStatusPage::resolve_incident`]) and
//! makes the page fail ([`PageMode`]: reset every connection, hang, answer an error status or
//! garbage). Every request is counted ([`FakeStatusPage::hits`]).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use ripcord_chaos::status_page::FakeStatusPage;
//! let page = FakeStatusPage::start(&["API", "ChatGPT"]).await?;
//! page.set_component("API", "major_outage");
//! let id = page.open_incident("Elevated errors on the API", "major", &["API"]);
//! let body: serde_json::Value = reqwest::get(page.summary_url()).await?.json().await?;
//! assert_eq!(body["components"][0]["status"], "major_outage");
//! assert_eq!(body["incidents"][0]["impact"], "major");
//! page.resolve_incident(&id);
//! let body: serde_json::Value = reqwest::get(page.unresolved_url()).await?.json().await?;
//! assert_eq!(body["incidents"].as_array().map(Vec::len), Some(0));
//! # Ok(()) }
//! ```

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::http::{Conn, Framing, accept_loop, write_head};

/// How the page answers.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PageMode {
    /// The page as scripted (the default).
    Serve,
    /// Every connection is reset at once: the page cannot be reached.
    Unreachable,
    /// Requests are read and never answered.
    Hang,
    /// This status, with an HTML body (a CDN's error page).
    Status(u16),
    /// `200` with a body that is neither JSON nor a feed.
    Garbage,
}

#[derive(Debug, Clone)]
struct Component {
    id: String,
    name: String,
    status: String,
}

#[derive(Debug, Clone)]
struct Incident {
    id: String,
    name: String,
    impact: String,
    components: Vec<String>,
    resolved: bool,
    /// Seconds after the page's epoch at which it was opened (for ordering and times).
    opened: u64,
}

#[derive(Debug)]
struct State {
    components: Vec<Component>,
    incidents: Vec<Incident>,
    mode: PageMode,
    next_id: u64,
}

#[derive(Debug)]
struct Shared {
    listener: Mutex<Option<TcpListener>>,
    state: Mutex<State>,
    hits: AtomicU64,
}

/// The fake status page. Dropping it stops the server.
#[derive(Debug)]
pub struct FakeStatusPage {
    shared: Arc<Shared>,
    addr: SocketAddr,
    accept: JoinHandle<()>,
}

impl Drop for FakeStatusPage {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl FakeStatusPage {
    /// A page listing `components` (all operational, ids `cmp0`, `cmp1`, …) and no incident.
    ///
    /// # Errors
    ///
    /// Binding the socket failed.
    ///
    /// # Panics
    ///
    /// Outside a Tokio runtime.
    pub async fn start(components: &[&str]) -> std::io::Result<FakeStatusPage> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            listener: Mutex::new(Some(listener)),
            state: Mutex::new(State {
                components: components
                    .iter()
                    .enumerate()
                    .map(|(i, n)| Component {
                        id: format!("cmp{i}"),
                        name: (*n).to_owned(),
                        status: "operational".to_owned(),
                    })
                    .collect(),
                incidents: Vec::new(),
                mode: PageMode::Serve,
                next_id: 1,
            }),
            hits: AtomicU64::new(0),
        });
        let accept = tokio::spawn(accept_loop(Arc::clone(&shared), |s| &s.listener, serve));
        Ok(FakeStatusPage {
            shared,
            addr,
            accept,
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The summary endpoint.
    pub fn summary_url(&self) -> String {
        format!("{}/api/v2/summary.json", self.base_url())
    }

    /// The unresolved-incidents endpoint.
    pub fn unresolved_url(&self) -> String {
        format!("{}/api/v2/incidents/unresolved.json", self.base_url())
    }

    /// The RSS feed.
    pub fn rss_url(&self) -> String {
        format!("{}/history.rss", self.base_url())
    }

    /// The Atom feed.
    pub fn atom_url(&self) -> String {
        format!("{}/history.atom", self.base_url())
    }

    /// Sets component `name`'s status (`operational`, `degraded_performance`,
    /// `partial_outage`, `major_outage`, `under_maintenance`, or anything else to test a
    /// parser); a name not listed is added.
    pub fn set_component(&self, name: &str, status: &str) {
        let mut st = lock(&self.shared.state);
        if let Some(c) = st.components.iter_mut().find(|c| c.name == name) {
            c.status = status.to_owned();
            return;
        }
        let id = format!("cmp{}", st.components.len());
        st.components.push(Component {
            id,
            name: name.to_owned(),
            status: status.to_owned(),
        });
    }

    /// Opens an incident of `impact` (`none`, `minor`, `major`, `critical`) affecting the
    /// listed components (by name); its id.
    pub fn open_incident(&self, name: &str, impact: &str, components: &[&str]) -> String {
        let mut st = lock(&self.shared.state);
        let n = st.next_id;
        st.next_id += 1;
        let id = format!("inc{n}");
        st.incidents.push(Incident {
            id: id.clone(),
            name: name.to_owned(),
            impact: impact.to_owned(),
            components: components.iter().map(|c| (*c).to_owned()).collect(),
            resolved: false,
            opened: n * 60,
        });
        id
    }

    /// Resolves incident `id`; whether it was open.
    pub fn resolve_incident(&self, id: &str) -> bool {
        let mut st = lock(&self.shared.state);
        match st.incidents.iter_mut().find(|i| i.id == id && !i.resolved) {
            Some(i) => {
                i.resolved = true;
                true
            }
            None => false,
        }
    }

    /// Sets every component operational and resolves every incident.
    pub fn all_clear(&self) {
        let mut st = lock(&self.shared.state);
        for c in &mut st.components {
            c.status = "operational".to_owned();
        }
        for i in &mut st.incidents {
            i.resolved = true;
        }
    }

    /// Changes how the page answers from the next request on.
    pub fn set_mode(&self, mode: PageMode) {
        lock(&self.shared.state).mode = mode;
    }

    /// Requests received (every connection reset by [`PageMode::Unreachable`] counts too).
    pub fn hits(&self) -> u64 {
        self.shared.hits.load(Ordering::SeqCst)
    }
}

async fn serve(shared: Arc<Shared>, stream: TcpStream) {
    let mut conn = Conn::new(stream);
    if lock(&shared.state).mode == PageMode::Unreachable {
        shared.hits.fetch_add(1, Ordering::SeqCst);
        conn.reset();
        return;
    }
    let mut out = Vec::with_capacity(4096);
    while let Ok(Some(req)) = conn.read_request(false).await {
        shared.hits.fetch_add(1, Ordering::SeqCst);
        let mode = lock(&shared.state).mode.clone();
        let path = req.path.split('?').next().unwrap_or("").to_owned();
        let (status, ctype, body): (u16, &str, Vec<u8>) = match mode {
            PageMode::Unreachable => {
                conn.reset();
                return;
            }
            PageMode::Hang => {
                conn.wait_until_client_gone().await;
                return;
            }
            PageMode::Status(code) => (
                code,
                "text/html",
                format!("<html><body><h1>{code}</h1>upstream unavailable</body></html>")
                    .into_bytes(),
            ),
            PageMode::Garbage => (
                200,
                "application/json",
                b"<!DOCTYPE html><html>maintenance".to_vec(),
            ),
            PageMode::Serve => {
                let st = lock(&shared.state);
                match path.as_str() {
                    "/api/v2/summary.json" => (200, "application/json", summary(&st).into()),
                    "/api/v2/incidents/unresolved.json" => {
                        (200, "application/json", unresolved(&st).into())
                    }
                    "/api/v2/components.json" => {
                        let body = json!({"page": page(), "components": components(&st)});
                        (200, "application/json", body.to_string().into())
                    }
                    "/history.rss" => (200, "application/rss+xml", rss(&st).into()),
                    "/history.atom" => (200, "application/atom+xml", atom(&st).into()),
                    _ => (
                        404,
                        "application/json",
                        br#"{"error":"Not found"}"#.to_vec(),
                    ),
                }
            }
        };
        out.clear();
        write_head(
            &mut out,
            status,
            Some(ctype),
            &[("cache-control", "max-age=0, private, must-revalidate")],
            Framing::Length(body.len()),
            !req.keep_alive,
        );
        out.extend_from_slice(&body);
        if !conn.send(&out).await || !req.keep_alive {
            return;
        }
    }
}

const EPOCH: &str = "2026-12-02T03:00:00.000Z";

fn at(secs: u64) -> String {
    format!(
        "2026-12-02T{:02}:{:02}:00.000Z",
        3 + secs / 3600,
        (secs / 60) % 60
    )
}

fn page() -> Value {
    json!({
        "id": "fakepage0001",
        "name": "Fake Vendor",
        "url": "https://status.example.invalid",
        "time_zone": "Etc/UTC",
        "updated_at": EPOCH,
    })
}

fn component_json(c: &Component, position: usize) -> Value {
    json!({
        "id": c.id,
        "name": c.name,
        "status": c.status,
        "created_at": EPOCH,
        "updated_at": EPOCH,
        "position": position + 1,
        "description": null,
        "showcase": true,
        "start_date": null,
        "group_id": null,
        "page_id": "fakepage0001",
        "group": false,
        "only_show_if_degraded": false,
    })
}

fn components(st: &State) -> Vec<Value> {
    st.components
        .iter()
        .enumerate()
        .map(|(i, c)| component_json(c, i))
        .collect()
}

fn incident_json(st: &State, i: &Incident) -> Value {
    let status = if i.resolved {
        "resolved"
    } else {
        "investigating"
    };
    let affected: Vec<Value> = i
        .components
        .iter()
        .filter_map(|name| {
            st.components
                .iter()
                .enumerate()
                .find(|(_, c)| &c.name == name)
                .map(|(p, c)| component_json(c, p))
        })
        .collect();
    json!({
        "id": i.id,
        "name": i.name,
        "status": status,
        "created_at": at(i.opened),
        "updated_at": at(i.opened),
        "monitoring_at": null,
        "resolved_at": if i.resolved { Value::from(at(i.opened + 60)) } else { Value::Null },
        "impact": i.impact,
        "shortlink": format!("https://stspg.io/{}", i.id),
        "started_at": at(i.opened),
        "page_id": "fakepage0001",
        "incident_updates": [{
            "id": format!("{}u1", i.id),
            "status": status,
            "body": "We are investigating this issue.",
            "incident_id": i.id,
            "created_at": at(i.opened),
            "updated_at": at(i.opened),
            "display_at": at(i.opened),
            "affected_components": null,
            "deliver_notifications": true,
        }],
        "components": affected,
    })
}

fn open_incidents(st: &State) -> Vec<Value> {
    st.incidents
        .iter()
        .filter(|i| !i.resolved)
        .rev()
        .map(|i| incident_json(st, i))
        .collect()
}

fn summary(st: &State) -> String {
    let worst = st
        .incidents
        .iter()
        .filter(|i| !i.resolved)
        .map(|i| i.impact.as_str())
        .max_by_key(|i| match *i {
            "critical" => 3,
            "major" => 2,
            "minor" => 1,
            _ => 0,
        })
        .unwrap_or("none");
    json!({
        "page": page(),
        "components": components(st),
        "incidents": open_incidents(st),
        "scheduled_maintenances": [],
        "status": {"indicator": worst, "description": if worst == "none" { "All Systems Operational" } else { "Partial System Outage" }},
    })
    .to_string()
}

fn unresolved(st: &State) -> String {
    json!({"page": page(), "incidents": open_incidents(st)}).to_string()
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// An entry's body as Statuspage writes it (HTML, newest update first), XML-escaped.
fn entry_body(i: &Incident) -> String {
    let mut html = String::new();
    if i.resolved {
        html.push_str("<p><small>Dec 2, UTC</small><br><strong>Resolved</strong> - This incident has been resolved.</p>");
    }
    html.push_str(&format!(
        "<p><small>Dec 2, UTC</small><br><strong>Investigating</strong> - We are investigating: {}.</p>",
        i.components.join(", ")
    ));
    xml_escape(&html)
}

fn rss(st: &State) -> String {
    let mut out = String::from(
        r#"<?xml version="1.0" encoding="UTF-8"?><rss version="2.0"><channel><title>Fake Vendor Status - Incident History</title><link>https://status.example.invalid</link><description>Statuspage</description>"#,
    );
    for i in st.incidents.iter().rev() {
        out.push_str(&format!(
            "<item><title>{}</title><description>{}</description><guid>https://status.example.invalid/incidents/{}</guid></item>",
            xml_escape(&i.name),
            entry_body(i),
            i.id
        ));
    }
    out.push_str("</channel></rss>");
    out
}

fn atom(st: &State) -> String {
    let mut out = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?><feed xmlns="http://www.w3.org/2005/Atom"><id>tag:status.example.invalid,2005:/history</id><title>Fake Vendor Status - Incident History</title><updated>{EPOCH}</updated>"#
    );
    for i in st.incidents.iter().rev() {
        out.push_str(&format!(
            r#"<entry><id>tag:status.example.invalid,2005:Incident/{}</id><updated>{}</updated><title>{}</title><content type="html">{}</content></entry>"#,
            i.id,
            at(i.opened),
            xml_escape(&i.name),
            entry_body(i)
        ));
    }
    out.push_str("</feed>");
    out
}
