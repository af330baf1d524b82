//! The background task: batches queued alerts, at most one POST per `min_interval`, retried
//! with doubling backoff.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use secrecy::ExposeSecret;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::{Alert, WebhookSettings, WebhookStats, wire};

/// The most alerts in one POST (more wait for the next one).
const MAX_BATCH: usize = 100;
/// The first backoff after a failed POST; it doubles per retry, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
const TARGET: &str = "ripcord_telemetry::alert_webhook";

pub(super) async fn run(
    mut rx: mpsc::Receiver<Alert>,
    client: reqwest::Client,
    settings: WebhookSettings,
    stats: Arc<WebhookStats>,
) {
    let host = settings.host();
    let mut last_post: Option<Instant> = None;
    let mut dropped_seen = 0;
    while let Some(first) = rx.recv().await {
        if let Some(at) = last_post {
            tokio::time::sleep_until(at + settings.min_interval).await;
        }
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(a) => batch.push(a),
                Err(_) => break,
            }
        }
        let n = batch.len() as u64;
        let body = wire::body(settings.format, &batch);
        last_post = Some(Instant::now());
        if post(&client, &settings, &host, &body).await {
            stats.delivered.fetch_add(n, Ordering::Relaxed);
        } else {
            stats.failed.fetch_add(n, Ordering::Relaxed);
            tracing::warn!(
                target: TARGET,
                webhook = %host,
                alerts = n,
                retries = settings.retries,
                "alert webhook: gave up on a delivery"
            );
        }
        let dropped = stats.dropped.load(Ordering::Relaxed);
        if dropped > dropped_seen {
            tracing::warn!(
                target: TARGET,
                webhook = %host,
                dropped = dropped - dropped_seen,
                "alert webhook: alerts dropped because the queue was full"
            );
            dropped_seen = dropped;
        }
    }
}

/// One delivery with its retries; true on a 2xx.
async fn post(
    client: &reqwest::Client,
    settings: &WebhookSettings,
    host: &str,
    body: &serde_json::Value,
) -> bool {
    let mut backoff = FIRST_BACKOFF;
    for attempt in 0..=settings.retries {
        if attempt > 0 {
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
        let sent = client
            .post(settings.url.expose_secret())
            .json(body)
            .send()
            .await;
        match sent {
            Ok(resp) if resp.status().is_success() => return true,
            Ok(resp) => {
                let status = resp.status();
                tracing::warn!(
                    target: TARGET,
                    webhook = %host,
                    status = status.as_u16(),
                    attempt = attempt + 1,
                    "alert webhook: the receiver refused a delivery"
                );
                // A refusal other than "slow down" or a server fault will not change.
                if !(status.is_server_error() || status.as_u16() == 429) {
                    return false;
                }
            }
            Err(e) => {
                // `without_url`: the URL may hold the webhook's secret.
                tracing::warn!(
                    target: TARGET,
                    webhook = %host,
                    error = %e.without_url(),
                    attempt = attempt + 1,
                    "alert webhook: a delivery failed"
                );
            }
        }
    }
    false
}
