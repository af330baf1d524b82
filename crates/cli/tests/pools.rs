//! A pooled provider from config: `deployments` and `balance` validated with file, line and
//! key; `check-config` shows each deployment; the built link balances across three fake
//! vendors on loopback, one down and one throttled with `Retry-After`.
#![allow(clippy::unwrap_used, clippy::panic)] // test helpers fail the test by panicking

mod support;

use std::time::Duration;

use ripcord_chaos::{Behavior, FakeVendor, Script, VendorError, Wire};
use ripcord_cli::{build, config};
use ripcord_core::{ChatModel, ChatRequest, Context};

fn env(var: &str) -> Option<String> {
    match var {
        "KEY_EAST" => Some("sk-east-secret".to_owned()),
        "KEY_WEST" => Some("sk-west-secret".to_owned()),
        _ => None,
    }
}

/// What reading `text` as `pool.toml` is refused with.
fn pool_err(text: &str) -> String {
    config::parse("pool.toml", text, &env)
        .unwrap_err()
        .to_string()
}

fn pool_toml(urls: &[String], balance: &str) -> String {
    let mut s = format!(
        "[chain]\norder = [\"gpt\", \"backup\"]\n\
         [[providers]]\nname = \"gpt\"\nkind = \"openai\"\nmodel = \"gpt-4o\"\nbalance = \"{balance}\"\n\
         deployments = [\n"
    );
    for (i, u) in urls.iter().enumerate() {
        let key = if i % 2 == 0 { "KEY_EAST" } else { "KEY_WEST" };
        s.push_str(&format!(
            "  {{ region = \"r{i}\", base_url = \"{u}/v1\", api_key_env = \"{key}\", rpm = 600 }},\n"
        ));
    }
    s.push_str(
        "]\n[[providers]]\nname = \"backup\"\nkind = \"openai\"\nmodel = \"gpt-4o-mini\"\nbase_url = \"http://127.0.0.1:9/v1\"\napi_key = \"sk-b\"\n",
    );
    s
}

#[test]
fn check_config_shows_each_deployment_without_its_key() {
    let urls = [
        "http://127.0.0.1:1".to_owned(),
        "http://127.0.0.1:2".to_owned(),
    ];
    let cfg = config::parse("pool.toml", &pool_toml(&urls, "round_robin"), &env).unwrap();
    let text = cfg.describe();
    assert!(
        text.contains("pool: balance round_robin, 2 deployments"),
        "{text}"
    );
    assert!(text.contains("deployment r0: region=r0 base_url=http://127.0.0.1:1/v1 key=[redacted] from env KEY_EAST weight=1 rpm=600"), "{text}");
    assert!(text.contains("deployment r1: region=r1"), "{text}");
    assert!(
        !text.contains("sk-east-secret") && !text.contains("sk-west-secret"),
        "{text}"
    );
}

#[test]
fn bad_pool_settings_name_the_file_line_and_key() {
    let urls = ["http://127.0.0.1:1".to_owned()];
    let msg = pool_err(&pool_toml(&urls, "fastest"));
    assert!(
        msg.starts_with("pool.toml:7: key `balance`: unknown balance strategy \"fastest\""),
        "{msg}"
    );
    assert!(msg.contains("p2c_peak_ewma"), "{msg}");

    let text = pool_toml(&urls, "p2c_peak_ewma").replace("KEY_EAST", "KEY_NORTH");
    let msg = pool_err(&text);
    assert!(
        msg.contains("key `deployments[1].api_key_env`: environment variable KEY_NORTH is not set"),
        "{msg}"
    );

    let text = pool_toml(&urls, "p2c_peak_ewma").replace("rpm = 600", "rpm = 0");
    let msg = pool_err(&text);
    assert!(
        msg.contains("key `deployments[1].rpm`: must be at least 1"),
        "{msg}"
    );

    let text = pool_toml(&urls, "p2c_peak_ewma").replace("base_url = \"http", "base_url = \"ftp");
    let msg = pool_err(&text);
    assert!(
        msg.contains("key `deployments[1].base_url`: expected an http:// or https:// URL"),
        "{msg}"
    );

    let two = [
        "http://127.0.0.1:1".to_owned(),
        "http://127.0.0.1:2".to_owned(),
    ];
    let text = pool_toml(&two, "p2c_peak_ewma").replace("region = \"r1\"", "region = \"r0\"");
    let msg = pool_err(&text);
    assert!(msg.contains("two deployments are named \"r0\""), "{msg}");

    let text = pool_toml(&urls, "usage").replace(", rpm = 600", "");
    let msg = pool_err(&text);
    assert!(msg.contains("states neither `rpm` nor `tpm`"), "{msg}");

    let text = "[chain]\norder = [\"gpt\"]\n[[providers]]\nname = \"gpt\"\nkind = \"openai\"\nmodel = \"gpt-4o\"\napi_key = \"sk\"\nbalance = \"usage\"\n";
    let msg = pool_err(text);
    assert!(msg.contains("`balance` needs `deployments`"), "{msg}");

    let text = "[chain]\norder = [\"az\"]\n[[providers]]\nname = \"az\"\nkind = \"azure-openai\"\nmodel = \"gpt-4o\"\napi_key = \"k\"\ndeployment = \"gpt-4o\"\ndeployments = [{ region = \"east\" }]\n";
    let msg = pool_err(text);
    assert!(
        msg.contains(
            "needs `base_url` (the resource endpoint) and `deployment`, its own or the provider's"
        ),
        "{msg}"
    );
    let ok = text.replace(
        "{ region = \"east\" }",
        "{ region = \"east\", base_url = \"https://east.example\" }",
    );
    let cfg = config::parse("pool.toml", &ok, &env).unwrap();
    assert!(
        cfg.describe()
            .contains("deployment east: region=east base_url=https://east.example")
    );

    let text = pool_toml(&urls, "round_robin").replace("rpm = 600", "rpm = 600, colour = \"red\"");
    assert!(
        config::parse("pool.toml", &text, &env).is_err(),
        "unknown keys are refused"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_pool_serves_from_the_healthy_deployment_and_keeps_off_the_throttled_one() {
    let down = support::fake_failing(Wire::OpenAi, VendorError::ServerError).await;
    let throttled = FakeVendor::start(Wire::OpenAi).await.unwrap();
    throttled.set_script(Script::Always(Behavior::Error(VendorError::RateLimited {
        retry_after: Some(Duration::from_secs(30)),
    })));
    let healthy = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let urls = [down.base_url(), throttled.base_url(), healthy.base_url()];
    let cfg = config::parse("pool.toml", &pool_toml(&urls, "round_robin"), &env).unwrap();
    let built = build::build(&cfg).unwrap();
    for _ in 0..6 {
        let r = built
            .chain
            .chat(
                &ChatRequest::user("hi"),
                &Context::new().with_timeout(Duration::from_secs(5)),
            )
            .await
            .unwrap();
        assert_eq!(r.served_by(), "gpt", "nothing fell to the next link");
        assert_eq!(r.provenance.deployment(), Some("r2"));
        assert!(!r.provenance.degraded);
    }
    assert_eq!(healthy.hits(), 6);
    assert_eq!(
        throttled.hits(),
        1,
        "cooled for its Retry-After after the first 429"
    );
    // The keys went to their own deployments.
    let auth = |v: &FakeVendor| {
        v.requests()[0]
            .header("authorization")
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(auth(&throttled), "Bearer sk-west-secret");
    assert_eq!(auth(&healthy), "Bearer sk-east-secret");

    // /readyz's view and the status page show each deployment.
    let view = built.readiness();
    let deployments = view["pools"][0]["deployments"].as_array().unwrap();
    assert_eq!(view["pools"][0]["link"], "gpt");
    assert_eq!(deployments.len(), 3);
    assert_eq!(deployments[1]["name"], "r1");
    assert_eq!(deployments[1]["state"], "cooling_down");
    assert!(deployments[1]["cooldown_left_ms"].as_u64().unwrap() > 20_000);
    assert_eq!(deployments[2]["state"], "available");
    assert_eq!(deployments[2]["in_flight"], 0);
    assert!(deployments[2]["latency_ewma_ms"].as_f64().unwrap() > 0.0);
    let page = ripcord_cli::gateway::status::StatusBoard::from_built(&built).render();
    assert!(page.contains("<h2>Pools</h2>"), "{page}");
    assert!(page.contains("cooling_down"), "{page}");
}

#[test]
fn the_chain_strategy_demote_erroring_is_configurable() {
    let text = "[chain]\norder = [\"a\", \"b\"]\nstrategy = \"demote_erroring\"\nmin_samples = 4\n\
                [[providers]]\nname = \"a\"\nkind = \"openai\"\nmodel = \"gpt-4o\"\napi_key = \"k\"\n\
                [[providers]]\nname = \"b\"\nkind = \"openai\"\nmodel = \"gpt-4o-mini\"\napi_key = \"k\"\n";
    let cfg = config::parse("chain.toml", text, &env).unwrap();
    let built = build::build(&cfg).unwrap();
    assert_eq!(
        built.chain.strategy(),
        &ripcord_core::chain::Strategy::DemoteErroring {
            threshold_pct: 30,
            min_calls: 4
        }
    );
}
