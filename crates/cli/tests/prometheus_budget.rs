//! A tenant's token budget, as operators see it: a REAL Prometheus (Debian's `prometheus`)
//! scrapes `[server] metrics_listen` of a real `ripcord serve` with `[budget]` and two tenant
//! keys, evaluating the shipped rules (`for:` cut to seconds). While both tenants have budget
//! left, no alert; once `acme` spends past nine tenths of its window (until the gateway refuses
//! it), `RipcordBudgetNearExhaustion` fires for `acme` and never for `globex`. (What a tenant's
//! own key reads of these series is held in `tenants.rs`.)
//!
//! Without Prometheus the test skips loudly, unless `CI` is set, where it fails (`cargo xtask
//! test` installs it).
#![allow(clippy::unwrap_used)] // test helpers fail the test by panicking

mod support;

use support::prom;

use ripcord_chaos::{FakeVendor, Wire};
use serde_json::Value;
use support::Fetch;

const ACME_KEY: &str = "rk-acme-budget-test-key-0123456789";
const GLOBEX_KEY: &str = "rk-globex-budget-test-key-0123456789";

/// One call as `key`'s tenant; its status.
async fn call(client: &reqwest::Client, url: &str, key: &str) -> u16 {
    support::call_route_with(client, url, "ripcord", Some(key), 10)
        .await
        .0
}

/// The value of `ripcord_budget_remaining_ratio` for `tenant` in a text exposition.
fn ratio(text: &str, tenant: &str) -> Option<f64> {
    text.lines()
        .find(|l| {
            l.starts_with("ripcord_budget_remaining_ratio{")
                && l.contains(&format!("ripcord_tenant=\"{tenant}\""))
        })
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_fires_budget_near_exhaustion_for_the_tenant_that_spent_it_only() {
    let (Some(prom_bin), Some(_)) = (prom::tool("prometheus"), prom::tool("promtool")) else {
        return;
    };
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let backup = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let dir = prom::tempdir("budget");
    let metrics_addr = format!("127.0.0.1:{}", prom::free_port());
    // Every answer of the fake vendor reports 21 tokens: `acme` (300 per window) runs out
    // after about fourteen calls; `globex` has the default 100,000.
    let extra = format!(
        "[server]\nmetrics_listen = \"{metrics_addr}\"\n\
         [[server.keys]]\ntenant = \"acme\"\nkey_env = \"ACME_KEY\"\n\
         [[server.keys]]\ntenant = \"globex\"\nkey_env = \"GLOBEX_KEY\"\n\
         [budget]\ntokens_per_window = 100000\nwindow_s = 3600\ntenants = {{ acme = 300 }}\n"
    );
    let config = support::two_link_config(&dir, &vendor.base_url(), &backup.base_url(), &extra);
    let served = support::serve_with_env(
        &config,
        &[("ACME_KEY", ACME_KEY), ("GLOBEX_KEY", GLOBEX_KEY)],
    );
    let prom = prom::start_prometheus(&prom_bin, &[&metrics_addr]);
    let client = reqwest::Client::new();
    let scrape = || {
        let client = client.clone();
        let url = format!("http://{metrics_addr}/metrics");
        async move { client.get(url).text_body().await }
    };

    // Healthy: both tenants spend a little.
    for key in [ACME_KEY, GLOBEX_KEY] {
        assert_eq!(call(&client, &served.url, key).await, 200);
    }
    let text = scrape().await;
    for tenant in ["acme", "globex"] {
        let r = ratio(&text, tenant).unwrap_or_else(|| panic!("no ratio for {tenant}:\n{text}"));
        assert!(r > 0.5 && r < 1.0, "{tenant}: {r}\n{text}");
    }
    assert!(
        text.contains("ripcord_budget_limit_tokens{ripcord_tenant=\"acme\"} 300"),
        "{text}"
    );
    // Once Prometheus holds both tenants' ratios and has evaluated the rules twice since, no
    // alert is pending or firing.
    let held = prom::alerts_once_scraped(
        &client,
        &prom.url,
        "Prometheus holding both tenants' budgets",
        "count(ripcord_budget_remaining_ratio > 0.5)",
        2.0,
    )
    .await;
    assert_eq!(
        held,
        Vec::<Value>::new(),
        "alerts while both tenants have budget"
    );

    // `acme` spends until the gateway refuses it (a 429: the next request no longer fits).
    let mut served_calls = 0;
    loop {
        match call(&client, &served.url, ACME_KEY).await {
            200 => served_calls += 1,
            429 => break,
            other => panic!("acme's call answered {other}"),
        }
        assert!(served_calls < 100, "acme's budget never ran out");
    }
    let text = scrape().await;
    let acme = ratio(&text, "acme").unwrap();
    assert!(
        acme < 0.1,
        "acme after {served_calls} calls: {acme}\n{text}"
    );
    assert!(ratio(&text, "globex").unwrap() > 0.9, "{text}");

    let (acme, warning) = ([("ripcord_tenant", "acme")], [("severity", "warning")]);
    let name = "RipcordBudgetNearExhaustion";
    let alert = prom::assert_fires(&client, &prom.url, name, &acme, &warning).await;
    assert!(
        support::text(&alert["annotations"]["runbook_url"])
            .ends_with("docs/operating.md#ripcordbudgetnearexhaustion"),
        "{alert}"
    );
    // Two more evaluations after it fired: still nothing about globex.
    prom::two_more_evaluations(&client, &prom.url).await;
    let held = prom::alerts(&client, &prom.url).await;
    assert!(
        held.iter().all(|a| a["labels"]["ripcord_tenant"] == "acme"
            && a["labels"]["alertname"] == "RipcordBudgetNearExhaustion"),
        "{held:#?}"
    );

    let _ = std::fs::remove_dir_all(&dir);
}
