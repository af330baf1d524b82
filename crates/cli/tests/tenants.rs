//! The gateway built from a config with routes and tenant keys, over chaos vendors on
//! loopback: who pays for a call (and who cannot make someone else pay), which route serves
//! it, what a key may use, and how a shared provider's breaker protects every route.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers fail the test by panicking

mod support;

use std::sync::Arc;

use reqwest::header::HeaderMap;
use ripcord_chaos::{FakeVendor, VendorError, Wire};
use ripcord_cli::build;
use ripcord_cli::config;
use ripcord_cli::gateway::{self, GatewayState};
use serde_json::{Value, json};
use support::Fetch;
use tokio::sync::oneshot;

const ACME: &str = "acme-gateway-key-0123456789";
const GLOBEX: &str = "globex-gateway-key-0123456789";
const APP: &str = "app-gateway-key-0123456789";

struct Gw {
    url: String,
    client: reqwest::Client,
    _stop: oneshot::Sender<()>,
}

/// Builds the config and serves it in-process on an ephemeral loopback port.
async fn start(text: &str) -> Gw {
    let env = |name: &str| match name {
        "ACME_KEY" => Some(ACME.to_owned()),
        "GLOBEX_KEY" => Some(GLOBEX.to_owned()),
        "APP_KEY" => Some(APP.to_owned()),
        _ => None,
    };
    let cfg = config::parse("tenants.toml", text, &env).unwrap();
    let built = build::build(&cfg).unwrap();
    let state = GatewayState::from_built(&cfg, &built);
    let g = support::start_gateway(state).await;
    Gw {
        url: g.url,
        client: reqwest::Client::new(),
        _stop: g.stop,
    }
}

struct Answer {
    status: u16,
    headers: HeaderMap,
    body: Value,
}

impl Gw {
    /// One chat completion for `model` with `key`, optional `x-ripcord-tenant` and `user`.
    async fn ask(
        &self,
        key: Option<&str>,
        model: &str,
        tenant_header: Option<&str>,
        user: Option<&str>,
    ) -> Answer {
        let mut body = json!({
            "model": model,
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 20,
        });
        if let Some(u) = user {
            body["user"] = json!(u);
        }
        let mut req = self
            .client
            .post(format!("{}/v1/chat/completions", self.url))
            .json(&body);
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        if let Some(t) = tenant_header {
            req = req.header("x-ripcord-tenant", t);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.json().await.unwrap_or(Value::Null);
        Answer {
            status,
            headers,
            body,
        }
    }

    async fn get(&self, path: &str, key: Option<&str>) -> Value {
        let mut req = self.client.get(format!("{}{path}", self.url));
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        req.json_body().await
    }
}

fn provider(name: &str, vendor: &FakeVendor) -> String {
    format!(
        "[[providers]]\nname = \"{name}\"\nkind = \"openai\"\nmodel = \"gpt-4o\"\nbase_url = \"{}/v1\"\napi_key = \"sk-{name}-upstream\"\n[providers.retry]\nmax_attempts = 1\n[providers.breaker]\nfailure_threshold = 2\nopen_ms = 60000\n",
        vendor.base_url()
    )
}

/// Two routes over one vendor, three keys, and a budget small enough to run out: every answer
/// of the fake vendor reports 21 tokens, and a call reserves its prompt plus `max_tokens` (20).
async fn budgeted_gateway(vendor: &FakeVendor, budget: &str) -> Gw {
    start(&format!(
        "[[routes]]\nname = \"smart\"\naliases = [\"gpt-4o\"]\norder = [\"main\"]\n\
         [[routes]]\nname = \"fast\"\norder = [\"main\"]\n\
         {}\n\
         [[server.keys]]\ntenant = \"acme\"\nkey_env = \"ACME_KEY\"\nroutes = [\"smart\"]\n\
         [[server.keys]]\ntenant = \"globex\"\nkey_env = \"GLOBEX_KEY\"\n\
         [[server.keys]]\ntenant = \"app\"\nkey_env = \"APP_KEY\"\nsub_tenants = true\n\
         {budget}\n",
        provider("main", vendor)
    ))
    .await
}

/// Calls until the gateway refuses; returns how many were served and the refusal.
async fn drain(
    gw: &Gw,
    key: &str,
    model: &str,
    header: Option<&str>,
    user: Option<&str>,
) -> (usize, Answer) {
    for served in 0..20 {
        let a = gw.ask(Some(key), model, header, user).await;
        if a.status != 200 {
            return (served, a);
        }
    }
    panic!("the budget never ran out");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tenant_is_its_keys_never_what_the_client_claims() {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let gw = budgeted_gateway(&vendor, "[budget]\ntokens_per_window = 60").await;
    // Acme claims to be globex, by header and by `user`: it is still acme that pays.
    let (served, refusal) = drain(&gw, ACME, "smart", Some("globex"), Some("globex")).await;
    assert_eq!(
        served, 2,
        "21 + 21 tokens fit in 60, a third reservation does not"
    );
    assert_eq!(refusal.status, 429);
    assert_eq!(
        refusal.body["error"]["code"], "budget_exhausted",
        "{}",
        refusal.body
    );
    assert!(
        refusal.headers.contains_key("retry-after"),
        "{:?}",
        refusal.headers
    );
    assert_eq!(vendor.hits(), 2, "a refused call never reaches the vendor");
    // Without any claim acme is refused too: the account spent was acme's own.
    assert_eq!(gw.ask(Some(ACME), "smart", None, None).await.status, 429);
    // Globex never spent anything: its key is served, even when it claims to be acme.
    let a = gw
        .ask(Some(GLOBEX), "fast", Some("acme"), Some("acme"))
        .await;
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.headers["x-ripcord-route"], "fast");
}

#[tokio::test(flavor = "multi_thread")]
async fn sub_tenants_are_charged_at_both_levels() {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let gw = budgeted_gateway(
        &vendor,
        "[budget]\ntokens_per_window = 1000\ntenants = { app = 60, \"app/alice\" = 30 }",
    )
    .await;
    // Alice's own account (30) holds one answer, and the answer names who paid.
    let a = gw.ask(Some(APP), "smart", Some("alice"), None).await;
    assert_eq!(a.status, 200);
    assert_eq!(a.headers["x-ripcord-tenant"], "app/alice");
    let (served, refusal) = drain(&gw, APP, "smart", Some("alice"), None).await;
    assert_eq!(served, 0);
    assert!(
        support::error_message(&refusal.body).contains("app/alice"),
        "{}",
        refusal.body
    );
    // Bob (named by `user`) has 1000 of his own, but the app's account (60) already paid for
    // Alice: one more answer fits, then the app level refuses him.
    let (served, refusal) = drain(&gw, APP, "smart", None, Some("bob")).await;
    assert_eq!(served, 1);
    assert_eq!(refusal.status, 429);
    // The app itself, without a sub-tenant, is out too: both levels were charged.
    assert_eq!(gw.ask(Some(APP), "smart", None, None).await.status, 429);
    // Keys without `sub_tenants` cannot open sub-accounts: acme naming "alice" is plain acme,
    // and the answer says so.
    let a = gw.ask(Some(ACME), "smart", Some("alice"), None).await;
    assert_eq!(a.status, 200);
    assert_eq!(a.headers["x-ripcord-tenant"], "acme");
    assert_eq!(vendor.hits(), 3);
    // A sub-tenant name that could pass for another level is refused, naming where it was.
    let a = gw.ask(Some(APP), "smart", Some("alice/../bob"), None).await;
    assert_eq!(a.status, 400);
    assert_eq!(a.body["error"]["code"], "invalid_sub_tenant");
    assert!(
        support::error_message(&a.body).contains("x-ripcord-tenant header contains `/`"),
        "{}",
        a.body
    );
    assert_eq!(vendor.hits(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn anonymous_loopback_calls_share_one_budget_account() {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let gw = start(&format!(
        "[chain]\norder = [\"main\"]\n{}\n[budget]\ntokens_per_window = 60\n",
        provider("main", &vendor)
    ))
    .await;
    // No keys: every caller is anonymous, whatever tenant it names.
    let mut served = 0;
    for (i, claim) in ["a", "b", "c", "d", "e"].iter().enumerate() {
        let a = gw.ask(None, "anything", Some(claim), Some(claim)).await;
        if a.status == 200 {
            served += 1;
        } else {
            assert_eq!(a.status, 429, "call {i}: {}", a.body);
            assert_eq!(a.body["error"]["code"], "budget_exhausted");
        }
    }
    assert_eq!(served, 2, "five different claims, one anonymous account");
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_models_are_404_and_routes_outside_a_key_are_403() {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let gw = budgeted_gateway(&vendor, "").await;
    let a = gw.ask(Some(GLOBEX), "gpt-5-turbo", None, None).await;
    assert_eq!(a.status, 404);
    assert_eq!(a.body["error"]["code"], "model_not_found");
    assert_eq!(a.body["error"]["param"], "model");
    let msg = a.body["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("gpt-5-turbo") && msg.contains("smart, gpt-4o, fast"),
        "{msg}"
    );
    // Acme may use "smart" (also by its alias) but not "fast".
    assert_eq!(gw.ask(Some(ACME), "gpt-4o", None, None).await.status, 200);
    let a = gw.ask(Some(ACME), "fast", None, None).await;
    assert_eq!(a.status, 403);
    assert_eq!(a.body["error"]["code"], "route_not_allowed");
    assert_eq!(a.body["error"]["type"], "invalid_request_error");
    // No key, or a wrong one: 401 before anything else.
    assert_eq!(gw.ask(None, "smart", None, None).await.status, 401);
    assert_eq!(
        gw.ask(Some("acme-gateway-key-01234567"), "smart", None, None)
            .await
            .status,
        401
    );
    assert_eq!(vendor.hits(), 1, "refusals never reach a vendor");
    // /v1/models lists routes and aliases, only those the key may use.
    let ids = |v: Value| -> Vec<String> {
        v["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        ids(gw.get("/v1/models", Some(GLOBEX)).await),
        ["smart", "gpt-4o", "fast"]
    );
    assert_eq!(
        ids(gw.get("/v1/models", Some(ACME)).await),
        ["smart", "gpt-4o"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_keys_rpm_refuses_with_429_and_retry_after_before_any_vendor() {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let gw = start(&format!(
        "[[routes]]\nname = \"smart\"\norder = [\"main\"]\n[[routes]]\nname = \"fast\"\norder = [\"main\"]\n{}\n\
         [[server.keys]]\ntenant = \"acme\"\nkey_env = \"ACME_KEY\"\nrpm = 2\n\
         [[server.keys]]\ntenant = \"globex\"\nkey_env = \"GLOBEX_KEY\"\n",
        provider("main", &vendor)
    ))
    .await;
    // The limit is the key's, across routes.
    assert_eq!(gw.ask(Some(ACME), "smart", None, None).await.status, 200);
    assert_eq!(gw.ask(Some(ACME), "fast", None, None).await.status, 200);
    let a = gw.ask(Some(ACME), "smart", None, None).await;
    assert_eq!(a.status, 429, "{}", a.body);
    assert_eq!(a.body["error"]["code"], "rate_limit_exceeded");
    assert_eq!(a.body["error"]["type"], "requests");
    let secs: u64 = a.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&secs), "{secs}");
    assert!(a.headers.contains_key("retry-after-ms"));
    assert_eq!(
        vendor.hits(),
        2,
        "the refused call never reached the vendor"
    );
    // Another key is not limited by acme's rpm.
    assert_eq!(gw.ask(Some(GLOBEX), "smart", None, None).await.status, 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_keys_tpm_refuses_once_its_tokens_are_spent() {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let gw = start(&format!(
        "[[routes]]\nname = \"smart\"\norder = [\"main\"]\n{}\n\
         [[server.keys]]\ntenant = \"acme\"\nkey_env = \"ACME_KEY\"\ntpm = 60\n",
        provider("main", &vendor)
    ))
    .await;
    // Each call reserves its prompt and `max_tokens` (20) up front; 60 a minute hold two.
    let (served, refusal) = drain(&gw, ACME, "smart", None, None).await;
    assert!((1..=3).contains(&served), "{served}");
    assert_eq!(refusal.status, 429, "{}", refusal.body);
    assert_eq!(refusal.body["error"]["code"], "rate_limit_exceeded");
    assert_eq!(refusal.body["error"]["type"], "tokens");
    assert!(refusal.headers.contains_key("retry-after"));
    assert_eq!(vendor.hits(), served);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_shared_providers_breaker_tripped_through_one_route_protects_the_other() {
    let shared = support::fake_failing(Wire::OpenAi, VendorError::Overloaded).await;
    let backup_a = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let backup_b = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let gw = start(&format!(
        "[[routes]]\nname = \"a\"\norder = [\"shared\", \"backup_a\"]\n\
         [[routes]]\nname = \"b\"\norder = [\"shared\", \"backup_b\"]\n{}{}{}",
        provider("shared", &shared),
        provider("backup_a", &backup_a),
        provider("backup_b", &backup_b),
    ))
    .await;
    // Route A's traffic meets the outage twice: the shared breaker (threshold 2) opens.
    for _ in 0..2 {
        let a = gw.ask(None, "a", None, None).await;
        assert_eq!(a.status, 200);
        assert_eq!(a.headers["x-ripcord-served-by"], "backup_a");
        assert_eq!(a.headers["x-ripcord-route"], "a");
    }
    assert_eq!(shared.hits(), 2);
    // Route B skips the shared provider without calling it.
    let b = gw.ask(None, "b", None, None).await;
    assert_eq!(b.status, 200);
    assert_eq!(b.headers["x-ripcord-served-by"], "backup_b");
    assert_eq!(b.headers["x-ripcord-degraded"], "true");
    assert_eq!(
        shared.hits(),
        2,
        "route B never called the provider whose breaker is open"
    );
    // /readyz: the shared link once (its counters not doubled), and each route's view of it.
    let ready = gw.get("/readyz", None).await;
    let links = ready["links"].as_array().unwrap();
    assert_eq!(links.len(), 3, "{ready}");
    let shared_link = links.iter().find(|l| l["link"] == "shared").unwrap();
    assert_eq!(shared_link["failures"], 2, "{ready}");
    assert_eq!(shared_link["breaker"]["state"], "open", "{ready}");
    for (i, name) in ["a", "b"].iter().enumerate() {
        let r = &ready["routes"][i];
        assert_eq!(r["route"], *name, "{ready}");
        assert_eq!(r["status"], "degraded", "{ready}");
        assert_eq!(r["links"][0]["link"], "shared");
        assert_eq!(r["links"][0]["breaker"], "open", "{ready}");
        assert_eq!(r["links"][1]["status"], "healthy", "{ready}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_streamed_answer_names_its_route_and_link_and_is_charged_to_the_key() {
    let a_vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let b_vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let gw = start(&format!(
        "[[routes]]\nname = \"a\"\norder = [\"va\"]\n[[routes]]\nname = \"b\"\norder = [\"vb\"]\n{}{}\
         [[server.keys]]\ntenant = \"acme\"\nkey_env = \"ACME_KEY\"\n\
         [[server.keys]]\ntenant = \"globex\"\nkey_env = \"GLOBEX_KEY\"\n\
         [budget]\ntokens_per_window = 60\n",
        provider("va", &a_vendor),
        provider("vb", &b_vendor)
    ))
    .await;
    let stream = |key: &'static str, tenant: &'static str| {
        gw.client
            .post(format!("{}/v1/chat/completions", gw.url))
            .bearer_auth(key)
            .header("x-ripcord-tenant", tenant)
            .json(&json!({
                "model": "b",
                "stream": true,
                "max_tokens": 20,
                "messages": [{"role": "user", "content": "hi"}],
            }))
            .send()
    };
    for _ in 0..2 {
        let resp = stream(ACME, "globex").await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["x-ripcord-route"], "b");
        assert_eq!(resp.headers()["x-ripcord-served-by"], "vb");
        let text = resp.text().await.unwrap();
        assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    }
    // Streams are charged as they finish: acme's account is spent, globex's is not.
    assert_eq!(stream(ACME, "globex").await.unwrap().status(), 429);
    assert_eq!(stream(GLOBEX, "acme").await.unwrap().status(), 200);
    assert_eq!((a_vendor.hits(), b_vendor.hits()), (0, 3));
}

#[tokio::test(flavor = "multi_thread")]
async fn budget_gauges_show_configured_accounts_at_scrape_time_and_a_tenant_only_its_own() {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let text = format!(
        "[chain]\norder = [\"main\"]\n{}\n\
         [[server.keys]]\ntenant = \"acme\"\nkey_env = \"ACME_KEY\"\n\
         [[server.keys]]\ntenant = \"app\"\nkey_env = \"APP_KEY\"\nsub_tenants = true\n\
         [budget]\ntokens_per_window = 1000\ntenants = {{ acme = 200, \"app/alice\" = 30 }}\n",
        provider("main", &vendor)
    );
    let env = |name: &str| match name {
        "ACME_KEY" => Some(ACME.to_owned()),
        "APP_KEY" => Some(APP.to_owned()),
        _ => None,
    };
    let cfg = config::parse("tenants.toml", &text, &env).unwrap();
    let built = build::build(&cfg).unwrap();
    let export = ripcord_telemetry::PrometheusExport::new();
    let (_layer, _provider) = export.local_layer();
    ripcord_cli::otlp::set_budget_gauges(&export, &built);
    let mut state = GatewayState::from_built(&cfg, &built);
    state.metrics = Some(export.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (_stop, rx) = oneshot::channel::<()>();
    tokio::spawn(gateway::serve(listener, Arc::new(state), async move {
        let _ = rx.await;
    }));
    let gw = Gw {
        url,
        client: reqwest::Client::new(),
        _stop,
    };
    let metrics = |key: &'static str| {
        let req = gw
            .client
            .get(format!("{}/metrics", gw.url))
            .bearer_auth(key);
        async move { req.text_body().await }
    };
    // Configured accounts only: acme, app, and the sub-tenant [budget.tenants] names; a
    // sub-tenant a client names is charged but never becomes a series.
    assert_eq!(
        gw.ask(Some(APP), "ripcord", Some("alice"), None)
            .await
            .status,
        200
    );
    assert_eq!(
        gw.ask(Some(APP), "ripcord", Some("bob"), None).await.status,
        200
    );
    let all = export.render().unwrap();
    for line in [
        r#"ripcord_budget_limit_tokens{ripcord_tenant="acme"} 200"#,
        r#"ripcord_budget_remaining_tokens{ripcord_tenant="acme"} 200"#,
        r#"ripcord_budget_limit_tokens{ripcord_tenant="app"} 1000"#,
        r#"ripcord_budget_remaining_tokens{ripcord_tenant="app/alice"} 9"#,
    ] {
        assert!(all.contains(line), "{line} not in\n{all}");
    }
    assert!(
        !all.contains("app/bob") && !all.contains("<anonymous>"),
        "{all}"
    );
    // Read at scrape time: acme's call shows at the next scrape.
    assert_eq!(gw.ask(Some(ACME), "ripcord", None, None).await.status, 200);
    let mine = metrics(ACME).await;
    assert!(
        mine.contains(r#"ripcord_budget_remaining_tokens{ripcord_tenant="acme"} 179"#),
        "{mine}"
    );
    assert!(!mine.contains(r#"ripcord_tenant="app"#), "{mine}");
    let theirs = metrics(APP).await;
    assert!(theirs.contains(r#"ripcord_tenant="app/alice""#), "{theirs}");
    assert!(!theirs.contains(r#"ripcord_tenant="acme""#), "{theirs}");
}
