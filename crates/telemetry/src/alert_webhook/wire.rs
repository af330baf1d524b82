//! The webhook bodies: Alertmanager's `POST /api/v2/alerts` array, or Slack's `{"text": …}`.

use std::time::SystemTime;

use serde_json::{Map, Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::{Alert, WebhookFormat};

/// Where the rules' `runbook_url`s point (the workspace's `repository`); the webhook's alerts
/// carry the same links, so `docs/operating.md` serves both.
pub const RUNBOOK: &str = "https://example.invalid/ripcord/blob/main/docs/operating.md";

/// RFC 3339 in UTC, as Alertmanager reads `startsAt` / `endsAt`.
pub(super) fn rfc3339(t: SystemTime) -> String {
    OffsetDateTime::from(t)
        .format(&Rfc3339)
        .unwrap_or_else(|_| "1970-01-01T00:00:00Z".to_owned())
}

/// The runbook section of an alert (the anchor is its name in lower case).
pub(super) fn runbook_url(name: &str) -> String {
    format!("{RUNBOOK}#{}", name.to_ascii_lowercase())
}

/// The body of one POST carrying `alerts`.
pub(super) fn body(format: WebhookFormat, alerts: &[Alert]) -> Value {
    match format {
        WebhookFormat::Alertmanager => Value::Array(alerts.iter().map(alertmanager).collect()),
        WebhookFormat::Slack => {
            let lines: Vec<String> = alerts.iter().map(slack_line).collect();
            json!({ "text": lines.join("\n") })
        }
    }
}

fn alertmanager(a: &Alert) -> Value {
    let mut labels = Map::new();
    labels.insert("alertname".to_owned(), Value::from(a.name));
    labels.insert("severity".to_owned(), Value::from(a.severity));
    for (k, v) in &a.labels {
        labels.insert((*k).to_owned(), Value::from(v.as_str()));
    }
    let mut out = json!({
        "labels": labels,
        "annotations": {
            "summary": a.summary,
            "description": a.description,
            "runbook_url": runbook_url(a.name),
        },
        "startsAt": rfc3339(a.starts),
        "generatorURL": RUNBOOK,
    });
    if let (Some(ends), Some(obj)) = (a.ends, out.as_object_mut()) {
        obj.insert("endsAt".to_owned(), Value::from(rfc3339(ends)));
    }
    out
}

fn slack_line(a: &Alert) -> String {
    let state = if a.ends.is_some() {
        "RESOLVED"
    } else {
        match a.severity {
            "critical" => "CRITICAL",
            _ => "WARNING",
        }
    };
    format!(
        "[{state}] {}: {} — {} (runbook: {})",
        a.name,
        a.summary,
        a.description,
        runbook_url(a.name)
    )
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    fn alert(ends: Option<SystemTime>) -> Alert {
        Alert {
            name: "RipcordBreakerOpen",
            severity: "critical",
            labels: vec![("ripcord_link", "primary".to_owned())],
            key: String::new(),
            summary: "the breaker of link primary opened".to_owned(),
            description: "calls skip it".to_owned(),
            starts: UNIX_EPOCH + Duration::from_secs(1_764_649_800),
            ends,
        }
    }

    #[test]
    fn alertmanager_bodies_have_the_api_v2_shape() {
        let firing = body(WebhookFormat::Alertmanager, &[alert(None)]);
        assert_eq!(
            firing,
            json!([{
                "labels": {"alertname": "RipcordBreakerOpen", "severity": "critical", "ripcord_link": "primary"},
                "annotations": {
                    "summary": "the breaker of link primary opened",
                    "description": "calls skip it",
                    "runbook_url": format!("{RUNBOOK}#ripcordbreakeropen"),
                },
                "startsAt": "2025-12-02T04:30:00Z",
                "generatorURL": RUNBOOK,
            }])
        );
        let resolved = body(
            WebhookFormat::Alertmanager,
            &[alert(Some(UNIX_EPOCH + Duration::from_secs(1_764_649_860)))],
        );
        assert_eq!(resolved[0]["endsAt"], "2025-12-02T04:31:00Z");
    }

    #[test]
    fn slack_bodies_are_one_text_line_per_alert() {
        let b = body(
            WebhookFormat::Slack,
            &[alert(None), alert(Some(UNIX_EPOCH))],
        );
        let text = b["text"].as_str().unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0].starts_with("[CRITICAL] RipcordBreakerOpen: the breaker of link primary"),
            "{text}"
        );
        assert!(lines[1].starts_with("[RESOLVED] "), "{text}");
        assert!(lines[0].ends_with("#ripcordbreakeropen)"), "{text}");
        assert_eq!(b.as_object().map(|o| o.len()), Some(1));
    }
}
