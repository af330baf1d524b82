//! Two `ripcord serve` replicas of one pooled provider share its cooldowns through one REAL
//! `redis-server`: a 429 with `Retry-After` seen by replica A keeps replica B off that
//! deployment until the wait ends, then B goes back to it. Real HTTP on loopback.
//!
//! Without the `redis-server` binary the test skips loudly, unless `CI` is set, where it fails.
#![cfg(feature = "redis")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers fail the test by panicking

mod support;

use std::time::{Duration, Instant};
use support::Fetch;

use ripcord_chaos::{Behavior, FakeVendor, Script, VendorError, Wire};
use serde_json::json;

/// One chat completion on `replica`; `(status, the deployment that served)`.
async fn ask(client: &reqwest::Client, replica: &support::Served) -> (u16, String) {
    let body = json!({
        "model": "ripcord",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}],
    });
    let resp = client
        .post(format!("{}/v1/chat/completions", replica.url))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let served = support::served_by(&resp);
    (status, served)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_on_replica_a_keeps_replica_b_off_the_deployment_until_it_ends() {
    let Some(redis) = support::redis("the two-replica pool test").await else {
        return;
    };
    let east = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let wait = Duration::from_secs(3);
    east.set_script(Script::Always(Behavior::Error(VendorError::RateLimited {
        retry_after: Some(wait),
    })));
    let west = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let dir = support::temp_dir("pools-replicas");
    let config = support::write_config(
        &dir,
        &format!(
            r#"
[chain]
order = ["gpt"]
deadline_ms = 2000
static_reply = "busy"

[[providers]]
name = "gpt"
kind = "openai"
model = "gpt-4o"
api_key = "sk-test"
balance = "round_robin"
deployments = [
  {{ region = "east", base_url = "{east}/v1" }},
  {{ region = "west", base_url = "{west}/v1" }},
]

[state]
backend = "redis"
url = "{redis}"
op_timeout_ms = 1000
replicas = 2
"#,
            east = east.base_url(),
            west = west.base_url(),
            redis = redis.url(),
        ),
    );
    let a = support::serve(&config);
    let b = support::serve(&config);
    let client = reqwest::Client::new();

    // Replica A's first attempt goes to east (round robin), which answers 429 Retry-After 3 s;
    // the pool retries on west.
    assert_eq!(ask(&client, &a).await, (200, "gpt".to_owned()));
    assert_eq!(east.hits(), 1);
    let ttl: u64 = redis
        .command("PTTL ripcord:v1:{gpt}:pool:east:cool")
        .and_then(|l| l.trim_start_matches(':').parse().ok())
        .unwrap();
    assert!(
        ttl > 1000 && ttl <= 3000,
        "the shared cooldown expires with the wait: {ttl}"
    );
    // When the cooldown ends (measured from here: the request to A took time of its own).
    let ends = Instant::now() + Duration::from_millis(ttl);

    // Replica B never saw that 429: while the wait lasts, none of its calls reaches east.
    let mut calls = 0;
    while Instant::now() + Duration::from_millis(400) < ends {
        assert_eq!(ask(&client, &b).await, (200, "gpt".to_owned()));
        calls += 1;
    }
    assert!(calls >= 2, "{calls}");
    assert_eq!(
        east.hits(),
        1,
        "replica B sent to the cooled deployment early"
    );
    assert_eq!(west.hits(), 1 + calls);

    // B's /metrics shows each deployment of the pool link: east cooling down (state 1) with
    // time left, west answering; labelled by link and deployment name, never a key.
    let text = client.get(format!("{}/metrics", b.url)).text_body().await;
    let sample = |series: &str, dep: &str, extra: &str| -> f64 {
        let head = format!("{series}{{ripcord_link=\"gpt\",ripcord_deployment=\"{dep}\"{extra}}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&head))
            .unwrap_or_else(|| panic!("no {head:?} in\n{text}"))
            .parse()
            .unwrap()
    };
    assert_eq!(sample("ripcord_pool_deployment_state", "east", ""), 1.0);
    assert_eq!(sample("ripcord_pool_deployment_state", "west", ""), 0.0);
    let left = sample("ripcord_pool_deployment_cooldown_seconds", "east", "");
    assert!(left > 0.0 && left <= 3.0, "{left}");
    assert_eq!(sample("ripcord_pool_deployment_in_flight", "west", ""), 0.0);
    assert!(sample("ripcord_pool_deployment_latency_ewma_seconds", "west", "") > 0.0);
    let ok = sample(
        "ripcord_pool_deployment_calls_total",
        "west",
        ",outcome=\"success\"",
    );
    assert_eq!(ok, calls as f64);
    assert!(
        text.contains("# TYPE ripcord_pool_deployment_calls_total counter"),
        "{text}"
    );
    assert!(!text.contains("sk-test"), "a key reached /metrics");

    // Once the wait is over, B tries east again (which still throttles: served by west).
    tokio::time::sleep(ends.saturating_duration_since(Instant::now()) + Duration::from_millis(150))
        .await;
    let before = east.hits();
    for _ in 0..2 {
        assert_eq!(ask(&client, &b).await, (200, "gpt".to_owned()));
    }
    assert_eq!(
        east.hits(),
        before + 1,
        "back on east after its Retry-After"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
