//! `GET /status` of a real `ripcord serve` in front of two fake vendors, after a primary
//! outage: read over HTTP, and rendered by a real headless Chromium (Debian's `chromium`) whose
//! text must show the open breaker and the fallback. The screenshot is kept under
//! `target/test-artifacts/status.png`.
//!
//! Without Chromium the rendering test skips loudly, unless `CI` is set, where it fails
//! (`cargo xtask test` installs it).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)] // test helpers fail the test by panicking

mod support;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use ripcord_chaos::{Behavior, FakeVendor, Script, VendorError, Wire};
use serde_json::json;
use support::Fetch;

const KEY: &str = "status-page-gateway-key-0123456789";

/// Two OpenAI-wire links and a static reply; the primary's breaker trips after 2 failures and
/// stays open for 10 minutes. `extra` is appended (e.g. gateway keys).
fn config_file(test: &str, primary: &FakeVendor, backup: &FakeVendor, extra: &str) -> PathBuf {
    let dir = support::temp_dir(&format!("status-{test}"));
    support::two_link_config(&dir, &primary.base_url(), &backup.base_url(), extra)
}

async fn ask(client: &reqwest::Client, url: &str, key: Option<&str>) -> String {
    let mut req = client
        .post(format!("{url}/v1/chat/completions"))
        .json(&json!({
            "model": "ripcord",
            "max_tokens": 10,
            "messages": [{"role": "user", "content": "hi"}],
        }));
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 200);
    support::served_by(&resp)
}

/// Starts the vendors (primary down) and a gateway, and drives the outage: the first two calls
/// fail over, and trip the primary's breaker; the rest skip it.
async fn outage(
    test: &str,
    extra: &str,
    env: &[(&str, &str)],
) -> (support::Served, [FakeVendor; 2]) {
    let primary = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let backup = FakeVendor::start(Wire::OpenAi).await.unwrap();
    primary.set_script(Script::Always(Behavior::Error(VendorError::ServerError)));
    let config = config_file(test, &primary, &backup, extra);
    let served = support::serve_with_env(&config, env);
    let client = reqwest::Client::new();
    let key = (!env.is_empty()).then_some(KEY);
    for _ in 0..6 {
        assert_eq!(ask(&client, &served.url, key).await, "backup");
    }
    assert_eq!(
        primary.hits(),
        2,
        "the breaker did not open after 2 failures"
    );
    (served, [primary, backup])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_the_open_breaker_the_shares_and_the_fallbacks() {
    let (served, _vendors) = outage("http", "", &[]).await;
    let html = support::get_page(&format!("{}/status", served.url), "text/html").await;
    // No external assets and no scripts.
    for banned in ["<script", "src=", "href=\"http", "@import", "url("] {
        assert!(!html.contains(banned), "the page uses {banned}: {html}");
    }
    let text = strip_tags(&html);
    assert!(text.contains("ripcord status DEGRADED"), "{text}");
    assert!(text.contains("primary unhealthy open"), "{text}");
    assert!(text.contains("backup 100%"), "{text}");
    assert!(text.contains("primary → backup server_error"), "{text}");
    assert!(text.contains("primary → backup circuit_open"), "{text}");
    assert!(text.contains("server_error ×2"), "{text}");
    assert!(text.contains("circuit_open ×4"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_is_behind_the_gateway_keys_when_keys_are_configured() {
    let keys = "[[server.keys]]\ntenant = \"ops\"\nkey_env = \"RIPCORD_TEST_STATUS_KEY\"\n";
    let (served, _vendors) = outage("keys", keys, &[("RIPCORD_TEST_STATUS_KEY", KEY)]).await;
    let client = reqwest::Client::new();
    let url = format!("{}/status", served.url);
    let anonymous = client.get(&url).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    let wrong = client
        .get(&url)
        .bearer_auth("not-the-key-0123456789")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let keyed = client.get(&url).bearer_auth(KEY).send().await.unwrap();
    assert_eq!(keyed.status(), 200);
    assert!(strip_tags(&keyed.text().await.unwrap()).contains("primary → backup"));

    // The tokens of the answers count to the key's tenant.
    let metrics = client
        .get(format!("{}/metrics", served.url))
        .bearer_auth(KEY)
        .text_body()
        .await;
    let tenant_lines: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("ripcord_tenant_tokens_total{"))
        .collect();
    assert!(
        tenant_lines
            .iter()
            .any(|l| l.contains(r#"ripcord_tenant="ops""#)
                && l.contains(r#"gen_ai_token_type="input""#)),
        "{metrics}"
    );
    assert!(
        tenant_lines
            .iter()
            .all(|l| l.contains(r#"ripcord_tenant="ops""#)),
        "{tenant_lines:?}"
    );
}

/// Headless Chromium renders the page: its DOM text shows the open breaker and the fallback,
/// and its screenshot is kept as an artifact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_renders_the_open_breaker_and_the_fallback() {
    let Some(chromium) = chromium() else {
        return;
    };
    let (served, _vendors) = outage("chromium", "", &[]).await;
    let url = format!("{}/status", served.url);
    let artifacts = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../target/test-artifacts"
    ));
    std::fs::create_dir_all(&artifacts).unwrap();
    let shot = artifacts.join("status.png");
    let _ = std::fs::remove_file(&shot);

    let dom = run_chromium(&chromium, &["--dump-dom".to_owned(), url.clone()]).await;
    let text = strip_tags(&dom);
    assert!(text.contains("primary unhealthy open"), "{text}");
    assert!(text.contains("primary → backup circuit_open"), "{text}");
    assert!(text.contains("backup 100%"), "{text}");

    run_chromium(
        &chromium,
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1200,900".to_owned(),
            url,
        ],
    )
    .await;
    let png = std::fs::read(&shot).expect("chromium wrote no screenshot");
    assert!(png.starts_with(b"\x89PNG"), "the screenshot is not a PNG");
    assert!(png.len() > 10_000, "the screenshot is suspiciously small");
    eprintln!("status page screenshot: {}", shot.display());
}

/// Debian's `chromium`, or a loud skip (a failure under CI).
fn chromium() -> Option<PathBuf> {
    let found = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists());
    if found.is_none() {
        let msg = "chromium is missing — run `cargo xtask test`, which installs Debian's package";
        if std::env::var_os("CI").is_some() {
            panic!("{msg}");
        }
        eprintln!("SKIPPED: {msg}");
    }
    found
}

/// Runs headless Chromium on loopback only, with a fresh profile; returns its stdout. Bounded:
/// a Chromium that hangs fails the test after 60 s.
async fn run_chromium(bin: &PathBuf, args: &[String]) -> String {
    let profile = tempdir("chromium-profile");
    let child = tokio::process::Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start chromium");
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("chromium did not finish within 60 s")
        .unwrap();
    let _ = std::fs::remove_dir_all(&profile);
    support::stdout_of("chromium", &out)
}

fn tempdir(what: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "ripcord-status-{what}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The page's text: tags dropped, entities decoded, whitespace collapsed.
fn strip_tags(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut in_tag = false;
    let mut in_style = false;
    let lower = html.to_ascii_lowercase();
    let mut i = 0;
    for (pos, c) in html.char_indices() {
        if pos < i {
            continue;
        }
        if c == '<' {
            if lower[pos..].starts_with("<style") {
                in_style = true;
            } else if lower[pos..].starts_with("</style") {
                in_style = false;
            }
            in_tag = true;
            out.push(' ');
        } else if c == '>' {
            in_tag = false;
        } else if !in_tag && !in_style {
            out.push(c);
        }
        i = pos;
    }
    let out = out
        .replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'");
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}
