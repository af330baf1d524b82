use super::*;

const SUMMARY: &[u8] = include_bytes!("../../tests/fixtures/status_page/summary.json");
const UNRESOLVED: &[u8] = include_bytes!("../../tests/fixtures/status_page/unresolved.json");
const RSS: &[u8] = include_bytes!("../../tests/fixtures/status_page/history.rss");
const ATOM: &[u8] = include_bytes!("../../tests/fixtures/status_page/history.atom");

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn summary_lists_components_without_groups_and_only_open_incidents() {
    let page = parse(Format::Statuspage, SUMMARY).unwrap();
    let listed: Vec<_> = page
        .components
        .iter()
        .map(|c| (c.name.as_str(), c.status))
        .collect();
    assert_eq!(
        listed,
        [
            ("API", ComponentStatus::MajorOutage),
            ("Fine-tuning", ComponentStatus::Degraded),
            ("ChatGPT", ComponentStatus::Operational),
            ("Batch", ComponentStatus::UnderMaintenance),
        ]
    );
    assert_eq!(page.incidents.len(), 2);
    assert_eq!(page.incidents[0].impact, Impact::Major);
    assert_eq!(page.incidents[1].impact, Impact::Minor);
}

#[test]
fn a_named_component_in_major_outage_is_declared_with_its_incident() {
    let page = parse(Format::Statuspage, SUMMARY).unwrap();
    let v = page.verdict(&names(&["API"]));
    assert_eq!(v.status, ComponentStatus::MajorOutage);
    assert_eq!(v.component, "API");
    assert_eq!(
        v.incident.as_deref(),
        Some("Elevated error rates on the API")
    );
    assert!(v.unknown.is_empty());
    // By id, the same.
    let by_id = page.verdict(&names(&["01jmq8yvb2ap"]));
    assert_eq!(by_id.status, ComponentStatus::MajorOutage);
    assert_eq!(by_id.component, "API");
}

#[test]
fn other_components_are_not_charged_with_the_outage() {
    let page = parse(Format::Statuspage, SUMMARY).unwrap();
    let chat = page.verdict(&names(&["chatgpt"]));
    assert_eq!(chat.status, ComponentStatus::Operational);
    assert_eq!(chat.incident, None);
    let ft = page.verdict(&names(&["Fine-tuning"]));
    assert_eq!(ft.status, ComponentStatus::Degraded);
    assert_eq!(ft.incident.as_deref(), Some("Slow fine-tuning jobs"));
    assert_eq!(ft.status.gauge(), 1);
}

#[test]
fn a_misspelt_component_is_reported_as_unknown() {
    let page = parse(Format::Statuspage, SUMMARY).unwrap();
    let v = page.verdict(&names(&["Chat Completions API", "ChatGPT"]));
    assert_eq!(v.unknown, names(&["Chat Completions API"]));
    assert_eq!(v.status, ComponentStatus::Operational);
}

#[test]
fn the_unresolved_endpoint_declares_by_incident_impact_and_skips_resolved_ones() {
    let page = parse(Format::Statuspage, UNRESOLVED).unwrap();
    assert!(page.components.is_empty());
    assert_eq!(page.incidents.len(), 1, "the resolved incident is dropped");
    let v = page.verdict(&names(&["Claude API (api.anthropic.com)"]));
    assert_eq!(v.status, ComponentStatus::MajorOutage);
    assert_eq!(v.incident.as_deref(), Some("Elevated errors on Claude API"));
    let console = page.verdict(&names(&["Claude Console"]));
    assert_eq!(console.status, ComponentStatus::Operational);
    // Without a component list nothing can be called unknown.
    assert!(console.unknown.is_empty());
}

#[test]
fn malformed_statuspage_bodies_are_errors_that_say_what_is_wrong() {
    let e = parse(Format::Statuspage, b"<html>502 Bad Gateway</html>").unwrap_err();
    assert!(e.to_string().contains("not Statuspage JSON"), "{e}");
    let e = parse(Format::Statuspage, br#"{"page":{}}"#).unwrap_err();
    assert!(
        e.to_string()
            .contains("neither `components` nor `incidents`"),
        "{e}"
    );
    let e = parse(
        Format::Statuspage,
        br#"{"components":[{"id":"a","name":"API","status":"on_fire"}]}"#,
    )
    .unwrap_err();
    assert!(e.to_string().contains("\"on_fire\""), "{e}");
    let e = parse(
        Format::Statuspage,
        br#"{"incidents":[{"id":"i","name":"X","status":"investigating","impact":"huge"}]}"#,
    )
    .unwrap_err();
    assert!(e.to_string().contains("\"huge\""), "{e}");
}

#[test]
fn rss_open_incident_naming_the_component_is_a_major_outage() {
    let page = parse(Format::Rss, RSS).unwrap();
    // The resolved item is dropped; the maintenance stays as maintenance.
    let titles: Vec<_> = page.incidents.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(
        titles,
        [
            "Elevated error rates on the API",
            "Scheduled database maintenance"
        ]
    );
    let v = page.verdict(&names(&["API"]));
    assert_eq!(v.status, ComponentStatus::MajorOutage);
    assert_eq!(
        v.incident.as_deref(),
        Some("Elevated error rates on the API")
    );
    let batch = page.verdict(&names(&["Batch"]));
    assert_eq!(batch.status, ComponentStatus::UnderMaintenance);
}

#[test]
fn a_component_name_matches_whole_words_only() {
    let page = parse(Format::Rss, RSS).unwrap();
    // "APIs" appears only in the resolved item; "Fine-tuning" nowhere.
    assert_eq!(
        page.verdict(&names(&["APIs"])).status,
        ComponentStatus::Operational
    );
    assert!(feed::mentions("Elevated errors on the API.", "api"));
    assert!(!feed::mentions("Elevated errors on the APIs", "API"));
    assert!(!feed::mentions("RAPID rollout", "API"));
}

#[test]
fn atom_feeds_are_read_the_same_way() {
    let page = parse(Format::Atom, ATOM).unwrap();
    assert_eq!(page.incidents.len(), 1);
    let v = page.verdict(&names(&["Claude API"]));
    assert_eq!(v.status, ComponentStatus::MajorOutage);
    assert_eq!(
        page.verdict(&names(&["Console"])).status,
        ComponentStatus::Operational
    );
}

#[test]
fn a_feed_entry_without_status_words_declares_nothing() {
    let rss = br#"<?xml version="1.0"?><rss version="2.0"><channel><title>t</title>
        <item><title>Welcome to our new status page for the API</title>
        <description>Subscribe for news.</description><guid>x</guid></item>
        </channel></rss>"#;
    let page = parse(Format::Rss, rss).unwrap();
    assert!(page.incidents.is_empty());
    assert_eq!(
        page.verdict(&names(&["API"])).status,
        ComponentStatus::Operational
    );
}

#[test]
fn a_body_that_is_no_feed_is_an_error() {
    let e = parse(Format::Rss, br#"{"components":[]}"#).unwrap_err();
    assert!(e.to_string().contains("not RSS or Atom"), "{e}");
}

#[test]
fn formats_are_inferred_from_the_url() {
    let f = Format::infer;
    assert_eq!(
        f("https://status.openai.com/api/v2/summary.json"),
        Some(Format::Statuspage)
    );
    assert_eq!(
        f("http://127.0.0.1:9/api/v2/incidents/unresolved.json?x=1"),
        Some(Format::Statuspage)
    );
    assert_eq!(
        f("https://status.anthropic.com/history.rss"),
        Some(Format::Rss)
    );
    assert_eq!(
        f("https://status.anthropic.com/history.atom"),
        Some(Format::Atom)
    );
    assert_eq!(f("https://status.example.com/"), None);
    assert_eq!(Format::from_name("atom"), Some(Format::Atom));
    assert_eq!(Format::from_name("json"), None);
}

#[test]
fn the_gauge_orders_statuses() {
    let all = [
        ComponentStatus::Operational,
        ComponentStatus::UnderMaintenance,
        ComponentStatus::Degraded,
        ComponentStatus::PartialOutage,
        ComponentStatus::MajorOutage,
    ];
    let gauges: Vec<_> = all.iter().map(|s| s.gauge()).collect();
    assert_eq!(gauges, [0, 1, 1, 2, 3]);
    for s in all {
        assert_eq!(ComponentStatus::from_name(s.as_str()), Some(s));
    }
}
