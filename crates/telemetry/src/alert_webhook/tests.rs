use std::time::Duration;

use tracing_subscriber::layer::SubscriberExt;

use super::*;

fn layer(queue: usize, dedupe: Duration) -> (AlertLayer, mpsc::Receiver<Alert>, Arc<WebhookStats>) {
    let (tx, rx) = mpsc::channel(queue);
    let stats = Arc::new(WebhookStats::default());
    let settings = WebhookSettings::new(
        SecretString::from("http://127.0.0.1:9/hook"),
        WebhookFormat::Alertmanager,
    );
    let target = Target {
        inner: Arc::new(LayerInner {
            tx,
            dedupe,
            sent: Mutex::new(HashMap::new()),
            open: Mutex::new(HashMap::new()),
            stats: Arc::clone(&stats),
        }),
        settings: Fingerprint::of(&settings),
        host: settings.host(),
    };
    let layer = AlertLayer {
        slot: Arc::new(Slot {
            active: AtomicBool::new(true),
            current: RwLock::new(Some(target)),
            stats: Arc::clone(&stats),
        }),
    };
    (layer, rx, stats)
}

fn drain(rx: &mut mpsc::Receiver<Alert>) -> Vec<Alert> {
    let mut out = Vec::new();
    while let Ok(a) = rx.try_recv() {
        out.push(a);
    }
    out
}

fn alert_event(link: &str, kind: &str) {
    tracing::warn!(
        ripcord.link = link,
        error.type = kind,
        ripcord.alert.suppressed = 0u64,
        message = event::ALERT
    );
}

fn transition(link: &str, from: &str, to: &str) {
    tracing::info!(
        ripcord.link = link,
        from,
        to,
        message = event::BREAKER_TRANSITION
    );
}

#[tokio::test(start_paused = true)]
async fn one_alert_per_condition_within_the_dedupe_window() {
    let (layer, mut rx, stats) = layer(64, Duration::from_secs(60));
    let _g = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));
    for _ in 0..1000 {
        alert_event("primary", "quota_exhausted");
        tracing::warn!(ripcord.chain = %"faq", error.type = Some("server_error"), message = event::STATIC_REPLY);
        tracing::error!(ripcord.chain = %"bare", error.type = Some("overloaded"), message = event::CHAIN_EXHAUSTED);
    }
    // Another link or kind is another condition.
    alert_event("backup", "quota_exhausted");
    alert_event("primary", "auth");
    let got = drain(&mut rx);
    let names: Vec<(&str, String)> = got
        .iter()
        .map(|a| (a.name, a.labels[0].1.clone()))
        .collect();
    assert_eq!(
        names,
        vec![
            ("RipcordAlertKindError", "primary".to_owned()),
            ("RipcordStaticReply", "faq".to_owned()),
            ("RipcordEveryLinkFailed", "bare".to_owned()),
            ("RipcordAlertKindError", "backup".to_owned()),
            ("RipcordAlertKindError", "primary".to_owned()),
        ]
    );
    assert_eq!(got[1].labels[1], ("error_type", "server_error".to_owned()));
    assert_eq!(got[4].labels[1], ("error_type", "auth".to_owned()));
    assert_eq!(stats.deduplicated(), 2997);
    // Past the window the condition is told again.
    tokio::time::advance(Duration::from_secs(59)).await;
    alert_event("primary", "quota_exhausted");
    assert!(drain(&mut rx).is_empty());
    tokio::time::advance(Duration::from_secs(1)).await;
    alert_event("primary", "quota_exhausted");
    assert_eq!(drain(&mut rx).len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_breaker_opening_is_told_once_and_its_closing_resolves_it() {
    let (layer, mut rx, _) = layer(64, Duration::from_secs(300));
    let _g = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));
    // Closing a breaker whose opening was never told resolves nothing.
    transition("backup", "half_open", "closed");
    transition("primary", "closed", "open");
    transition("primary", "open", "half_open");
    transition("primary", "half_open", "open");
    let got = drain(&mut rx);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].name, "RipcordBreakerOpen");
    assert!(got[0].ends.is_none());
    transition("primary", "half_open", "closed");
    let got = drain(&mut rx);
    assert_eq!(got.len(), 1);
    assert!(got[0].ends.is_some(), "{:?}", got[0]);
    assert_eq!(got[0].labels, vec![("ripcord_link", "primary".to_owned())]);
}

#[tokio::test]
async fn a_full_queue_drops_and_counts_without_waiting() {
    let (layer, mut rx, stats) = layer(2, Duration::from_secs(60));
    let _g = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));
    for link in ["a", "b", "c", "d", "e"] {
        alert_event(link, "auth");
    }
    assert_eq!(stats.queued(), 2);
    assert_eq!(stats.dropped(), 3);
    assert_eq!(drain(&mut rx).len(), 2);
}

#[test]
fn debug_and_host_never_show_the_url_path() {
    let s = WebhookSettings::new(
        SecretString::from("https://hooks.slack.com/services/T000/B000/XXXXSECRET"),
        WebhookFormat::Slack,
    );
    let shown = format!("{s:?}");
    assert!(
        !shown.contains("XXXXSECRET") && !shown.contains("services"),
        "{shown}"
    );
    assert!(shown.contains("https://hooks.slack.com"), "{shown}");
    assert_eq!(
        url_host("http://127.0.0.1:9/x?token=1"),
        "http://127.0.0.1:9"
    );
}

#[tokio::test]
async fn start_refuses_a_url_without_http_and_a_host_without_showing_it() {
    for bad in [
        "ftp://example.org/secret-path",
        "not a url secret-path",
        "mailto:secret-path@example.org",
    ] {
        let e = AlertWebhook::start(WebhookSettings::new(
            SecretString::from(bad),
            WebhookFormat::Alertmanager,
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("alerts.webhook_url"), "{e}");
        assert!(!e.contains("secret-path"), "{e}");
    }
}

/// A loopback URL nothing listens on, with a secret-looking path.
fn nobody(path: &str) -> SecretString {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    SecretString::from(format!("http://127.0.0.1:{port}/hook/{path}"))
}

#[tokio::test]
async fn retargeting_swaps_the_receiver_keeps_the_memory_only_for_the_same_one_and_stops() {
    let w = AlertWebhook::idle();
    let _g = tracing::subscriber::set_default(tracing_subscriber::registry().with(w.layer()));
    let stats = w.stats();
    // Idle: events are ignored.
    alert_event("primary", "auth");
    assert_eq!((stats.queued(), stats.deduplicated()), (0, 0));
    assert_eq!(
        w.retarget(None).unwrap(),
        Retarget::Unchanged { host: None }
    );

    let a = nobody("s3cr3t-a");
    let settings = |url: &SecretString, min_ms: u64| WebhookSettings {
        min_interval: Duration::from_millis(min_ms),
        dedupe: Duration::from_secs(600),
        ..WebhookSettings::new(url.clone(), WebhookFormat::Alertmanager)
    };
    let host_a = url_host(a.expose_secret());
    assert_eq!(
        w.retarget(Some(settings(&a, 10))).unwrap(),
        Retarget::Started {
            host: host_a.clone()
        }
    );
    alert_event("primary", "auth");
    assert_eq!(stats.queued(), 1);
    // The same settings: nothing restarts, the condition stays told.
    assert_eq!(
        w.retarget(Some(settings(&a, 10))).unwrap(),
        Retarget::Unchanged {
            host: Some(host_a.clone())
        }
    );
    // Same receiver, another interval: a new sender that remembers what was told.
    assert_eq!(
        w.retarget(Some(settings(&a, 50))).unwrap(),
        Retarget::Retuned {
            host: host_a.clone()
        }
    );
    alert_event("primary", "auth");
    assert_eq!((stats.queued(), stats.deduplicated()), (1, 1));
    // Another receiver has heard nothing: the next occurrence is told to it.
    let b = nobody("s3cr3t-b");
    let moved = w.retarget(Some(settings(&b, 10))).unwrap();
    let host_b = url_host(b.expose_secret());
    assert_eq!(
        moved,
        Retarget::Moved {
            from: host_a.clone(),
            to: host_b.clone()
        }
    );
    assert_eq!(w.host(), Some(host_b.clone()));
    alert_event("primary", "auth");
    assert_eq!(stats.queued(), 2);
    // A bad target is refused and the current one kept.
    let bad = WebhookSettings::new(SecretString::from("ftp://x/s3cr3t-c"), WebhookFormat::Slack);
    assert!(w.retarget(Some(bad)).is_err());
    assert_eq!(w.host(), Some(host_b.clone()));
    // Removed: nothing is queued any more.
    let stopped = w.retarget(None).unwrap();
    assert_eq!(stopped, Retarget::Stopped { host: host_b });
    alert_event("backup", "quota_exhausted");
    assert_eq!(stats.queued(), 2);
    for said in [moved.to_string(), stopped.to_string()] {
        assert!(
            !said.contains("s3cr3t") && !said.contains("/hook"),
            "{said}"
        );
    }
}
