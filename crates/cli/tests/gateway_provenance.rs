//! The gateway's provenance headers for streamed calls that fall back or fail: the same
//! attempts `ripcord chat --json` lists, in `x-ripcord-attempts`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers fail the test by panicking

mod support;

use std::sync::Arc;
use std::time::Duration;

use ripcord_cli::gateway::GatewayState;
use ripcord_core::testing::{ScriptedModel, StreamItem, text_stream};
use ripcord_core::{Chain, ChatModel, Error, ErrorKind, StatusCode};
use serde_json::json;
use tokio::sync::oneshot;

async fn start(model: Arc<dyn ChatModel>) -> (String, oneshot::Sender<()>) {
    // These tests read the attempts by link and model: the detail `expose_errors` shows
    // (off, they are `link1`, `link2`, …).
    let mut state = GatewayState::new(model);
    state.server.expose_errors = true;
    let g = support::start_gateway(state).await;
    (g.url, g.stop)
}

fn failing_first(name: &str, kind: ErrorKind, status: u16) -> ScriptedModel {
    ScriptedModel::new(name).stream_items(vec![(
        Duration::from_millis(2),
        StreamItem::Error(Error::new(kind, "in-band").with_status(StatusCode(status))),
    )])
}

async fn stream(url: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{url}/v1/chat/completions"))
        .json(&json!({
            "model": "ripcord",
            "messages": [{"role": "user", "content": "Say hi"}],
            "stream": true,
        }))
        .send()
        .await
        .unwrap()
}

/// A gateway in front of `chain`, and its 200 answer to one streamed request.
async fn stream_ok(chain: Chain) -> (reqwest::Response, oneshot::Sender<()>) {
    let (url, stop) = start(Arc::new(chain)).await;
    let r = stream(&url).await;
    assert_eq!(r.status(), 200);
    (r, stop)
}

fn header<'a>(r: &'a reqwest::Response, name: &str) -> &'a str {
    r.headers()
        .get(name)
        .unwrap_or_else(|| panic!("no {name} header"))
        .to_str()
        .unwrap()
}

#[tokio::test]
async fn a_stream_that_fell_back_lists_every_attempt_in_its_headers() {
    let chain = Chain::builder()
        .link(failing_first("primary", ErrorKind::Overloaded, 529))
        .link(
            ScriptedModel::new("backup")
                .stream_items(text_stream(&["Hi", "!"], Duration::from_millis(2))),
        )
        .build()
        .unwrap();
    let (r, _stop) = stream_ok(chain).await;
    assert_eq!(header(&r, "x-ripcord-served-by"), "backup");
    assert_eq!(header(&r, "x-ripcord-degraded"), "true");
    let attempts = header(&r, "x-ripcord-attempts").to_owned();
    let parts: Vec<&str> = attempts.split(", ").collect();
    assert_eq!(parts.len(), 2, "{attempts}");
    assert!(
        parts[0].starts_with("primary/primary-model=overloaded(529):"),
        "{attempts}"
    );
    assert!(
        parts[1].starts_with("backup/backup-model=ok:"),
        "{attempts}"
    );
    assert!(r.text().await.unwrap().contains("data: [DONE]"));
}

#[tokio::test]
async fn a_stream_that_failed_before_content_says_who_was_tried() {
    let chain = Chain::builder()
        .link(failing_first("primary", ErrorKind::Overloaded, 529))
        .link(failing_first("backup", ErrorKind::ServerError, 500))
        .build()
        .unwrap();
    let (url, _stop) = start(Arc::new(chain)).await;
    let r = stream(&url).await;
    assert!(r.status().is_server_error(), "{}", r.status());
    assert_eq!(header(&r, "x-ripcord-served-by"), "none");
    assert_eq!(header(&r, "x-ripcord-degraded"), "true");
    let attempts = header(&r, "x-ripcord-attempts").to_owned();
    assert_eq!(attempts.split(", ").count(), 2, "{attempts}");
    assert!(
        attempts.starts_with("primary/primary-model=overloaded(529):"),
        "{attempts}"
    );
    assert!(
        attempts.contains(", backup/backup-model=server_error(500):"),
        "{attempts}"
    );
}

#[tokio::test]
async fn a_stream_that_fails_after_commit_sends_its_record_with_the_error_event() {
    let chain = Chain::builder()
        .link(failing_first("primary", ErrorKind::Overloaded, 529))
        .link(ScriptedModel::new("backup").stream_items(vec![
            (
                Duration::from_millis(2),
                StreamItem::Event(ripcord_core::StreamEvent::text("Hel")),
            ),
            (
                Duration::from_millis(2),
                StreamItem::Error(Error::new(ErrorKind::Network, "stream truncated")),
            ),
        ]))
        .build()
        .unwrap();
    let (r, _stop) = stream_ok(chain).await;
    // At commit: the backup was serving after the primary's failure.
    assert_eq!(header(&r, "x-ripcord-served-by"), "backup");
    assert!(
        header(&r, "x-ripcord-attempts").starts_with("primary/primary-model=overloaded(529):"),
        "{:?}",
        r.headers()
    );
    let body = r.text().await.unwrap();
    let last = body
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("data: "))
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(last).unwrap();
    assert_eq!(v["ripcord"]["degraded"], true, "{v}");
    let attempts = v["ripcord"]["attempts"].as_str().unwrap();
    assert!(
        attempts.starts_with("primary/primary-model=overloaded(529):"),
        "{attempts}"
    );
    assert!(
        attempts.contains(", backup/backup-model=network:"),
        "{attempts}"
    );
    assert!(!body.contains("[DONE]"));
}
