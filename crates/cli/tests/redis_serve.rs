//! Three `ripcord serve` processes with one config share their resilience state through one
//! REAL `redis-server`, in front of one fake vendor; driven over real HTTP on loopback.
//!
//! Each test starts its own `redis-server` child on a free loopback port. Without the binary
//! the tests skip loudly, unless `CI` is set, where they fail.
#![cfg(feature = "redis")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers fail the test by panicking

mod support;

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use ripcord_chaos::{Behavior, FakeVendor, Script, VendorError, Wire};
use ripcord_redis::server::RedisServer;
use serde_json::{Value, json};
use support::Fetch;

/// This file's tests: a real `redis-server` on loopback, or a loud skip without the binary
/// (an error under CI).
async fn start_redis() -> Option<RedisServer> {
    support::redis("the three-replica gateway tests").await
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap()
}

/// The one config all three replicas run, as a file in a fresh temp folder.
fn config_file(
    test: &str,
    vendor: &FakeVendor,
    redis_url: &str,
    deadline_ms: u64,
    extra: &str,
) -> PathBuf {
    let dir = support::temp_dir(&format!("redis-serve-{test}"));
    let path = dir.join("ripcord.toml");
    let text = format!(
        r#"
[chain]
order = ["vendor"]
deadline_ms = {deadline_ms}
static_reply = "busy"

[[providers]]
name = "vendor"
kind = "openai"
model = "gpt-4o"
base_url = "{base}/v1"
api_key = "sk-test"
[providers.retry]
max_attempts = 1
{extra}

[state]
backend = "redis"
url = "{redis_url}"
op_timeout_ms = 1000
retry_interval_ms = 200
replicas = 3
"#,
        base = vendor.base_url(),
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// A test's own `redis-server`, a fake vendor, and the [`config_file`] that points at both;
/// `None` (the test skips) without the binary.
async fn setup(
    test: &str,
    deadline_ms: u64,
    extra: &str,
) -> Option<(RedisServer, FakeVendor, PathBuf)> {
    let redis = start_redis().await?;
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let config = config_file(test, &vendor, &redis.url(), deadline_ms, extra);
    Some((redis, vendor, config))
}

/// Three `ripcord serve` processes with the same config, killed on drop.
fn three_replicas(config: &std::path::Path) -> Vec<support::Served> {
    (0..3).map(|_| support::serve(config)).collect()
}

/// One chat completion; `(status, x-ripcord-served-by)`.
async fn ask(client: &reqwest::Client, replica: &support::Served) -> (u16, String) {
    ask_as(client, replica, None, None, None).await
}

const ACME_KEY: &str = "acme-gateway-key-0123456789";
const GLOBEX_KEY: &str = "globex-gateway-key-0123456789";

/// Two tenant keys (acme may send 3 requests a minute), for `config_file`'s `extra`.
const KEYS: &str = "[[server.keys]]\ntenant = \"acme\"\nkey_env = \"RIPCORD_TEST_ACME_KEY\"\nrpm = 3\n\
                    [[server.keys]]\ntenant = \"globex\"\nkey_env = \"RIPCORD_TEST_GLOBEX_KEY\"\n";

/// Three replicas that know [`KEYS`].
fn three_keyed_replicas(config: &std::path::Path) -> Vec<support::Served> {
    let env = [
        ("RIPCORD_TEST_ACME_KEY", ACME_KEY),
        ("RIPCORD_TEST_GLOBEX_KEY", GLOBEX_KEY),
    ];
    (0..3)
        .map(|_| support::serve_with_env(config, &env))
        .collect()
}

/// [`ask`] with a gateway key, and a tenant claimed by the `x-ripcord-tenant` header and/or
/// the body's `user` (which a key without `sub_tenants` cannot make count).
async fn ask_as(
    client: &reqwest::Client,
    replica: &support::Served,
    key: Option<&str>,
    tenant: Option<&str>,
    user: Option<&str>,
) -> (u16, String) {
    let mut body = json!({
        "model": "ripcord",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}],
    });
    if let Some(u) = user {
        body["user"] = json!(u);
    }
    let mut req = client
        .post(format!("{}/v1/chat/completions", replica.url))
        .json(&body);
    if let Some(t) = tenant {
        req = req.header("x-ripcord-tenant", t);
    }
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let served = support::served_by(&resp);
    (status, served)
}

/// Sends `per_replica` requests to every replica at once; every answer's `served-by`.
async fn burst(
    client: &reqwest::Client,
    replicas: &[support::Served],
    per_replica: usize,
) -> Vec<String> {
    let calls = replicas
        .iter()
        .flat_map(|r| (0..per_replica).map(move |_| ask(client, r)));
    futures::future::join_all(calls)
        .await
        .into_iter()
        .map(|(status, served)| {
            assert_eq!(status, 200, "served by {served:?}");
            served
        })
        .collect()
}

async fn readyz(client: &reqwest::Client, replica: &support::Served) -> Value {
    client
        .get(format!("{}/readyz", replica.url))
        .json_body()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_seen_by_one_replica_opens_the_breaker_for_all_and_one_probe_crosses() {
    // Refusals say when the link re-admits calls; the chain waits for that only when it
    // falls within the deadline, which these never do: open_ms and the half-open probe's
    // permit (one deadline) both outlast a call's deadline.
    let Some((redis, vendor, config)) = setup(
        "breaker",
        4000,
        "[providers.breaker]\nfailure_threshold = 3\nopen_ms = 5000",
    )
    .await
    else {
        return;
    };
    let replicas = three_replicas(&config);
    let client = reqwest::Client::new();

    // Replica 0 alone sees the outage: three failures trip the shared breaker.
    vendor.set_script(Script::Always(Behavior::Error(VendorError::ServerError)));
    let mut tripped = Instant::now();
    for _ in 0..3 {
        tripped = Instant::now();
        assert_eq!(ask(&client, &replicas[0]).await, (200, "static".to_owned()));
    }
    assert_eq!(vendor.hits(), 3);
    // A replica's own outcomes reach Redis from its background reporter, not inside the call
    // (docs/shared-state.md): the trip lands within a round trip or two, bounded here
    // generously for a loaded machine.
    let reported_by = Instant::now() + Duration::from_secs(3);
    while redis
        .command("EXISTS ripcord:v1:{vendor}:breaker:open")
        .as_deref()
        != Some(":1")
    {
        assert!(
            Instant::now() < reported_by,
            "the trip never reached Redis under the provider's configured name \
             (ripcord:v1:{{vendor}}:breaker:open)"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // The other two never saw a failure, yet fall back at once without calling the vendor.
    for served in burst(&client, &replicas[1..], 2).await {
        assert_eq!(served, "static");
    }
    assert_eq!(
        vendor.hits(),
        3,
        "an open shared breaker let a call through"
    );

    // The vendor is back; it holds the first request (the probe) for 3 s. Once open_ms has
    // passed, four requests to each replica at once: while the probe is out, no other call
    // crosses the wire (the others fall back, or wait for the link within their deadline).
    let hold = Duration::from_secs(3);
    vendor.set_script(Script::Sequence(vec![
        Behavior::SlowFirstToken(hold),
        Behavior::Ok,
    ]));
    let reopen = tripped + Duration::from_millis(5000 + 300);
    tokio::time::sleep(reopen.saturating_duration_since(Instant::now())).await;
    let served = burst(&client, &replicas, 4).await;
    let arrivals: Vec<Instant> = vendor.requests()[3..].iter().map(|r| r.at).collect();
    let probe = arrivals[0];
    let while_probing = arrivals.iter().filter(|&&at| at < probe + hold).count();
    assert_eq!(
        while_probing, 1,
        "more than one half-open probe crossed the wire: {arrivals:?}"
    );
    assert!(served.iter().any(|s| s == "vendor"), "{served:?}");
    assert!(served.iter().any(|s| s == "static"), "{served:?}");

    // The probe answered, so the shared breaker closed and every replica serves from the
    // vendor again at once. (Refused callers were told to retry in the half-open hint, not
    // after the probe permit's lifetime: none waited out its deadline for the link, timed out
    // on it and tripped the breaker again.)
    for r in &replicas {
        assert_eq!(
            ask(&client, r).await,
            (200, "vendor".to_owned()),
            "the breaker did not close for every replica after the probe"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_rpm_limit_holds_across_three_gateways() {
    // 6 requests a minute in total: a token every 10 s, a burst of 6. A refused request
    // cannot wait 10 s within its 5 s deadline, so it falls back to the static reply.
    let Some((_redis, vendor, config)) =
        setup("rpm", 5000, "[providers.rate_limit]\nrpm = 6").await
    else {
        return;
    };
    let replicas = three_replicas(&config);
    let client = reqwest::Client::new();

    let started = Instant::now();
    let served = burst(&client, &replicas, 4).await;
    let took = started.elapsed();
    let by_vendor = served.iter().filter(|s| *s == "vendor").count();
    // Each replica alone would let 6 through (18 with three); shared, 6 in all. A slow run
    // earns one more token per 10 s it takes.
    let earned = usize::try_from(took.as_secs() / 10).unwrap();
    assert!(
        (6..=6 + earned).contains(&by_vendor),
        "{by_vendor} reached the vendor in {took:?}: {served:?}"
    );
    assert_eq!(vendor.hits(), by_vendor);
    assert_eq!(
        served.iter().filter(|s| *s == "static").count(),
        12 - by_vendor
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_budget_is_spent_once_across_three_gateways_not_three_times() {
    // 100 tokens per tenant; every answer reports 12 + 9 = 21 tokens of usage.
    let Some((redis, vendor, config)) = setup(
        "budget",
        10_000,
        &format!(
            "[budget]\ntokens_per_window = 100\nwindow_s = 3600\n{}",
            KEYS.replace("rpm = 3", "")
        ),
    )
    .await
    else {
        return;
    };
    let replicas = three_keyed_replicas(&config);
    let client = reqwest::Client::new();

    // Twelve calls with acme's key (claiming to be globex), round robin over the replicas.
    let mut outcomes = Vec::new();
    for i in 0..12 {
        outcomes.push(
            ask_as(
                &client,
                &replicas[i % 3],
                Some(ACME_KEY),
                Some("globex"),
                None,
            )
            .await,
        );
    }
    let served = outcomes.iter().filter(|(s, _)| *s == 200).count();
    // One account: 100 tokens pay for at most five 21-token answers (the last one admitted
    // on its estimate), whichever replica serves them. Three accounts would serve all twelve.
    assert!((4..=5).contains(&served), "{outcomes:?}");
    assert!(
        outcomes[..served]
            .iter()
            .all(|o| o == &(200, "vendor".to_owned())),
        "{outcomes:?}"
    );
    assert!(
        outcomes[served..].iter().all(|(s, _)| *s == 429),
        "every replica refuses once the shared budget is spent: {outcomes:?}"
    );
    assert_eq!(vendor.hits(), served);
    assert_eq!(
        redis
            .command("EXISTS ripcord:v1:{chain}:budget:acme")
            .as_deref(),
        Some(":1")
    );

    // Globex (whose name acme claimed) has its own account, untouched.
    for r in &replicas {
        assert_eq!(
            ask_as(&client, r, Some(GLOBEX_KEY), None, Some("acme")).await,
            (200, "vendor".to_owned())
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keys_rpm_is_shared_by_three_gateways() {
    let Some((redis, vendor, config)) = setup("keyrpm", 10_000, KEYS).await else {
        return;
    };
    let replicas = three_keyed_replicas(&config);
    let client = reqwest::Client::new();
    // Nine calls with acme's key (rpm = 3), round robin: three in all, not three per replica.
    let mut outcomes = Vec::new();
    for i in 0..9 {
        outcomes.push(ask_as(&client, &replicas[i % 3], Some(ACME_KEY), None, None).await);
    }
    let statuses: Vec<u16> = outcomes.iter().map(|(s, _)| *s).collect();
    assert_eq!(statuses, [200, 200, 200, 429, 429, 429, 429, 429, 429]);
    assert_eq!(vendor.hits(), 3, "refusals never reach the vendor");
    assert_eq!(
        redis
            .command("EXISTS ripcord:v1:{gateway-key:acme@RIPCORD_TEST_ACME_KEY}:rl:rpm")
            .as_deref(),
        Some(":1")
    );
    // Globex's key has no limit of its own.
    for r in &replicas {
        assert_eq!(
            ask_as(&client, r, Some(GLOBEX_KEY), None, None).await.0,
            200
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_killed_mid_test_all_three_gateways_keep_answering_on_local_state() {
    let Some((mut redis, vendor, config)) = setup("killed", 10_000, "[providers.breaker]\nfailure_threshold = 3\nopen_ms = 2000\n[providers.rate_limit]\nrpm = 6000").await
    else {
        return;
    };
    let replicas = three_replicas(&config);
    let client = reqwest::Client::new();

    for served in burst(&client, &replicas, 2).await {
        assert_eq!(served, "vendor");
    }
    for r in &replicas {
        let v = readyz(&client, r).await;
        assert_eq!(v["state"]["backend"], "redis", "{v}");
        assert_eq!(v["state"]["degraded"], false, "{v}");
    }

    redis.kill();
    // A success does not touch Redis while the breaker's cached view (100 ms) and the rate
    // limit's leased block (1 s) hold: only the calls after them find Redis gone.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let started = Instant::now();
    for served in burst(&client, &replicas, 3).await {
        assert_eq!(
            served, "vendor",
            "a replica stopped answering from the vendor"
        );
    }
    // Redis refusing connections costs a failed round trip, never a hang.
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(vendor.hits(), 6 + 9);
    for r in &replicas {
        let v = readyz(&client, r).await;
        assert_eq!(v["state"]["degraded"], true, "{v}");
        assert_eq!(
            v["state"]["degradations"], 1,
            "the outage is reported once, not per request: {v}"
        );
        assert!(v["state"]["local_calls"].as_u64().unwrap() >= 3, "{v}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_starts_while_redis_is_down_and_answers_on_local_state() {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    // Nothing listens on this port.
    let url = format!("redis://:s3cret-pw@127.0.0.1:{}", free_port());
    let config = config_file("down", &vendor, &url, 10_000, "");
    let mut child = support::ripcord()
        .args(["serve", "--config"])
        .arg(&config)
        .args(["--listen", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // Killed on drop from here on.
    let mut replica = support::Served {
        child,
        url: String::new(),
        log: std::sync::mpsc::channel().1,
    };
    let mut lines = Vec::new();
    let url = loop {
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("ripcord serve did not start ({e}): {lines:?}"));
        if let Some(rest) = line.strip_prefix("ripcord: serving on ") {
            break rest.split_whitespace().next().unwrap().to_owned();
        }
        lines.push(line);
    };
    let warning = lines.join("\n");
    assert!(
        warning.contains("is unreachable; serving on local state"),
        "{warning}"
    );
    assert!(
        warning.contains("redis://[redacted]@127.0.0.1:"),
        "{warning}"
    );
    assert!(!warning.contains("s3cret-pw"), "{warning}");
    replica.url = url;
    let client = reqwest::Client::new();
    for _ in 0..3 {
        assert_eq!(ask(&client, &replica).await, (200, "vendor".to_owned()));
    }
    let v = readyz(&client, &replica).await;
    assert_eq!(v["state"]["degraded"], true, "{v}");
    assert_eq!(v["state"]["degradations"], 1, "{v}");
}
