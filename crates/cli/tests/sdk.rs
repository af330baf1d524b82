//! `ripcord serve` against chaos vendor servers, driven by the official `openai` Python SDK,
//! through a primary outage: the SDK sees answers and the headers show the fallback.

#![allow(clippy::unwrap_used, clippy::panic, clippy::print_stdout)] // test helpers fail the test by panicking

mod support;

use ripcord_chaos::{Behavior, FakeVendor, Reply, Script, VendorError, Wire};

const SDK_SCRIPT: &str = r#"
import json, sys
from openai import OpenAI
client = OpenAI(base_url=sys.argv[1] + "/v1", api_key="not-checked-on-loopback", max_retries=0)
out = {}
raw = client.chat.completions.with_raw_response.create(
    model="ripcord", messages=[{"role": "user", "content": "Say hi"}])
c = raw.parse()
out["plain"] = {"content": c.choices[0].message.content, "served_by": raw.headers.get("x-ripcord-served-by"),
                "degraded": raw.headers.get("x-ripcord-degraded"), "finish": c.choices[0].finish_reason}
raw = client.chat.completions.with_raw_response.create(
    model="ripcord", messages=[{"role": "user", "content": "Say hi"}], stream=True,
    stream_options={"include_usage": True})
text, usage = "", None
for chunk in raw.parse():
    if chunk.choices and chunk.choices[0].delta.content:
        text += chunk.choices[0].delta.content
    if chunk.usage:
        usage = chunk.usage.completion_tokens
out["stream"] = {"content": text, "served_by": raw.headers.get("x-ripcord-served-by"),
                 "degraded": raw.headers.get("x-ripcord-degraded"), "usage": usage}
print(json.dumps(out))
"#;

#[tokio::test(flavor = "multi_thread")]
async fn openai_sdk_through_a_primary_outage() {
    let Some(python) = support::python() else {
        return;
    };
    let primary = support::fake_failing(Wire::OpenAi, VendorError::Overloaded).await;
    let backup = support::fake(
        Wire::Anthropic,
        Reply::text("Hello from the backup!").with_chunks(3),
    )
    .await;
    let dir = support::temp_dir("sdk");
    let config = support::openai_then_anthropic(&dir, &primary.base_url(), &backup.base_url());
    let served = support::serve(&config);
    let url = served.url.clone();
    let v = support::python_json(python, SDK_SCRIPT, vec![url]).await;
    for mode in ["plain", "stream"] {
        assert_eq!(v[mode]["content"], "Hello from the backup!", "{mode}: {v}");
        assert_eq!(v[mode]["served_by"], "backup", "{mode}: {v}");
        assert_eq!(v[mode]["degraded"], "true", "{mode}: {v}");
    }
    assert_eq!(v["plain"]["finish"], "stop");
    assert!(v["stream"]["usage"].as_u64().unwrap() > 0, "{v}");
    // The primary was tried on both calls, and the upstream keys went only to their vendors.
    assert_eq!(primary.hits(), 2);
    assert_eq!(backup.hits(), 2);
    let sent = backup.requests();
    assert_eq!(
        sent[0].header("x-api-key"),
        Some("sk-ant-backup-upstream-key")
    );
    assert_eq!(
        primary.requests()[0].header("authorization"),
        Some("Bearer sk-primary-upstream-key")
    );
    assert!(!v.to_string().contains("upstream-key"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A config whose `[embeddings]` go to `primary`, then `backup` (both OpenAI fakes), with
/// `primary_extra` after primary's entry; its folder (`ripcord-<name>-<pid>`) and path.
fn embeddings_config(
    name: &str,
    primary: &FakeVendor,
    backup: &FakeVendor,
    primary_extra: &str,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = support::temp_dir(name);
    let config = support::write_config(
        &dir,
        &format!(
            "[chain]\norder = [\"primary\", \"backup\"]\n\n[embeddings]\n\
             providers = [\"primary\", \"backup\"]\nmodel = \"text-embedding-3-small\"\n{}{primary_extra}{}",
            support::openai_link("primary", "gpt-4o", &primary.base_url(), "sk-a"),
            support::openai_link("backup", "gpt-4o", &backup.base_url(), "sk-b"),
        ),
    );
    (dir, config)
}

/// An embedding link is retried under its provider's `[providers.retry]` before the chain
/// falls back: a 500 then an answer is served by the same provider, on its second attempt.
#[tokio::test(flavor = "multi_thread")]
async fn an_embedding_link_is_retried_before_it_falls_back() {
    let primary = FakeVendor::start(Wire::OpenAi).await.unwrap();
    primary.set_script(Script::Sequence(vec![
        Behavior::Error(VendorError::ServerError),
        Behavior::Ok,
    ]));
    let backup = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let (dir, config) = embeddings_config(
        "emb-retry",
        &primary,
        &backup,
        "[providers.retry]\nmax_attempts = 2\nbase_delay_ms = 10\n",
    );
    let served = support::serve(&config);
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/embeddings", served.url))
        .json(&serde_json::json!({"model": "text-embedding-3-small", "input": ["alpha"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-ripcord-served-by"], "primary");
    assert_eq!(primary.requests().len(), 2, "the 500 was not retried");
    assert!(backup.requests().is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread")]
async fn embeddings_fall_back_across_endpoints_of_one_model() {
    let primary = support::fake_failing(Wire::OpenAi, VendorError::Overloaded).await;
    let backup = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let (dir, config) = embeddings_config("emb", &primary, &backup, "");
    let served = support::serve(&config);
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/embeddings", served.url))
        .json(&serde_json::json!({"model": "text-embedding-3-small", "input": ["alpha", "beta"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-ripcord-served-by"], "backup");
    let v: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(v["data"].as_array().unwrap().len(), 2);
    assert!(!v["data"][0]["embedding"].as_array().unwrap().is_empty());
    assert_eq!(
        backup.requests()[0].json().unwrap()["model"],
        "text-embedding-3-small"
    );
    assert_eq!(primary.hits(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread")]
async fn probe_formats_finds_the_link_that_wraps_json_in_prose() {
    let primary = support::fake(
        Wire::OpenAi,
        Reply::text(r#"{"id": 42, "status": "shipped"}"#),
    )
    .await;
    let backup = support::fake(
        Wire::Anthropic,
        Reply::text(r#"Sure! Here is the order: {"id": 42, "status": "shipped"}"#),
    )
    .await;
    let dir = support::temp_dir("probe");
    let cases = dir.join("cases");
    std::fs::create_dir_all(&cases).unwrap();
    std::fs::write(
        cases.join("order.toml"),
        "name = \"order as JSON\"\nprompt = \"Give order 42 as JSON.\"\nresponse_format = \"json\"\n[expect]\njson_schema = { type = \"object\", required = [\"id\", \"status\"] }\n",
    )
    .unwrap();
    std::fs::write(
        cases.join("status.toml"),
        "prompt = \"Order status?\"\n[expect]\nregex = '.*shipped.*'\n",
    )
    .unwrap();
    let config = support::write_config(
        &dir,
        &format!(
            "[chain]\norder = [\"primary\", \"backup\"]\n{}{}",
            support::openai_link("primary", "gpt-4o", &primary.base_url(), "sk-a"),
            support::anthropic_link("backup", "claude-sonnet-4-5", &backup.base_url(), "sk-b"),
        ),
    );
    let out = tokio::task::spawn_blocking(move || {
        support::ripcord()
            .arg("probe-formats")
            .arg("--config")
            .arg(&config)
            .arg("--cases")
            .arg(&cases)
            .output()
    })
    .await
    .unwrap()
    .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    println!("{table}");
    assert_eq!(
        out.status.code(),
        Some(1),
        "a link breaks the format: {table}"
    );
    let row = |case: &str, link: &str| {
        table
            .lines()
            .find(|l| l.starts_with(case) && l.contains(&format!(" {link} ")))
            .unwrap_or_else(|| panic!("no row for {case} / {link} in\n{table}"))
            .to_owned()
    };
    assert!(row("order as JSON", "primary").contains("PASS"));
    let wrapped = row("order as JSON", "backup");
    assert!(
        wrapped.contains("FAIL") && wrapped.contains("not valid JSON"),
        "{wrapped}"
    );
    assert!(row("status", "primary").contains("PASS"));
    assert!(row("status", "backup").contains("PASS"));
    assert!(
        table.contains("3/4 case×link checks keep the format"),
        "{table}"
    );
    // Each link was asked directly, once per case: no fallback between them.
    assert_eq!((primary.hits(), backup.hits()), (2, 2));
    let _ = std::fs::remove_dir_all(&dir);
}

const ROUTES_SCRIPT: &str = r#"
import json, sys
import openai
from openai import OpenAI
base = sys.argv[1] + "/v1"
acme = OpenAI(base_url=base, api_key=sys.argv[2], max_retries=0)
globex = OpenAI(base_url=base, api_key=sys.argv[3], max_retries=0)
out = {}
def ask(client, model, **kw):
    try:
        raw = client.chat.completions.with_raw_response.create(
            model=model, messages=[{"role": "user", "content": "Say hi"}], max_tokens=20, **kw)
        c = raw.parse()
        return {"status": raw.status_code, "content": c.choices[0].message.content,
                "served_by": raw.headers.get("x-ripcord-served-by"),
                "route": raw.headers.get("x-ripcord-route")}
    except openai.APIStatusError as e:
        return {"status": e.status_code, "code": (e.body or {}).get("code"),
                "error": type(e).__name__, "retry_after": e.response.headers.get("retry-after")}
out["smart"] = ask(acme, "smart")
out["alias"] = ask(acme, "gpt-4o")
out["fast"] = ask(globex, "fast")
out["unknown"] = ask(acme, "gpt-5-turbo")
out["forbidden"] = ask(globex, "smart")
out["models_acme"] = [m.id for m in acme.models.list()]
out["models_globex"] = [m.id for m in globex.models.list()]
# Acme claims to be globex (header and `user`) until its budget runs out.
claims = []
for _ in range(8):
    r = ask(acme, "fast", user="globex", extra_headers={"x-ripcord-tenant": "globex"})
    claims.append(r)
    if r["status"] != 200:
        break
out["claims"] = claims
out["globex_after"] = ask(globex, "fast")
print(json.dumps(out))
"#;

/// Two routes over chaos vendors and two tenant keys, driven by the official `openai` SDK.
#[tokio::test(flavor = "multi_thread")]
async fn openai_sdk_against_two_routes_and_two_tenant_keys() {
    let Some(python) = support::python() else {
        return;
    };
    let primary = support::fake_failing(Wire::OpenAi, VendorError::Overloaded).await;
    let backup = support::fake(Wire::Anthropic, Reply::text("Hello from the backup!")).await;
    let quick = support::fake(Wire::OpenAi, Reply::text("Quick hello!")).await;
    let dir = support::temp_dir("sdk-routes");
    let config = support::write_config(
        &dir,
        &format!(
            r#"
[[routes]]
name = "smart"
aliases = ["gpt-4o"]
order = ["primary", "backup"]
deadline_ms = 10000

[[routes]]
name = "fast"
order = ["quick"]
{}{}{}{}routes = ["fast"]

[budget]
tokens_per_window = 90
"#,
            support::openai_then_anthropic_links(&primary.base_url(), &backup.base_url()),
            support::openai_link(
                "quick",
                "gpt-4o-mini",
                &quick.base_url(),
                "sk-quick-upstream-key"
            ),
            support::tenant_key("acme", "SDK_ACME_KEY"),
            support::tenant_key("globex", "SDK_GLOBEX_KEY"),
        ),
    );
    let acme_key = "sk-acme-gateway-0123456789";
    let globex_key = "sk-globex-gateway-0123456789";
    let served = support::serve_with_env(
        &config,
        &[("SDK_ACME_KEY", acme_key), ("SDK_GLOBEX_KEY", globex_key)],
    );
    let url = served.url.clone();
    let v = support::python_json(
        python,
        ROUTES_SCRIPT,
        vec![url, acme_key.to_owned(), globex_key.to_owned()],
    )
    .await;
    println!("{v:#}");
    // Each route is served by its own chain.
    for (call, content, by, route) in [
        ("smart", "Hello from the backup!", "backup", "smart"),
        ("alias", "Hello from the backup!", "backup", "smart"),
        ("fast", "Quick hello!", "quick", "fast"),
    ] {
        assert_eq!(v[call]["status"], 200, "{call}: {v}");
        assert_eq!(v[call]["content"], content, "{call}: {v}");
        assert_eq!(v[call]["served_by"], by, "{call}: {v}");
        assert_eq!(v[call]["route"], route, "{call}: {v}");
    }
    // An unknown model is the SDK's NotFoundError with OpenAI's code.
    assert_eq!(v["unknown"]["status"], 404, "{v}");
    assert_eq!(v["unknown"]["error"], "NotFoundError", "{v}");
    assert_eq!(v["unknown"]["code"], "model_not_found", "{v}");
    // A key outside its routes is the SDK's PermissionDeniedError.
    assert_eq!(v["forbidden"]["status"], 403, "{v}");
    assert_eq!(v["forbidden"]["error"], "PermissionDeniedError", "{v}");
    assert_eq!(v["forbidden"]["code"], "route_not_allowed", "{v}");
    assert_eq!(
        v["models_acme"],
        serde_json::json!(["smart", "gpt-4o", "fast"])
    );
    assert_eq!(v["models_globex"], serde_json::json!(["fast"]));
    // Acme is charged for its calls although it claims to be globex: its account runs out
    // (two answers so far, 21 tokens each, and 90 in all), and globex's is untouched.
    let claims = v["claims"].as_array().unwrap();
    let last = claims.last().unwrap();
    assert_eq!(last["status"], 429, "{v}");
    assert_eq!(last["error"], "RateLimitError", "{v}");
    assert_eq!(last["code"], "budget_exhausted", "{v}");
    assert!(last["retry_after"].is_string(), "{v}");
    assert_eq!(claims.len(), 3, "{v}");
    assert_eq!(v["globex_after"]["status"], 200, "{v}");
    assert_eq!(v["globex_after"]["served_by"], "quick", "{v}");
    // The vendors saw only what was served: no refusal reached any of them.
    assert_eq!(primary.hits(), 2);
    assert_eq!(backup.hits(), 2);
    assert_eq!(quick.hits(), 4);
    let _ = std::fs::remove_dir_all(&dir);
}
