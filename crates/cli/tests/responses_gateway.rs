//! The Responses door's edges through the real `ripcord serve`, over raw HTTP: malformed
//! requests are 400s naming the field path, stored responses belong to the tenant that made
//! them, unknown ids are 404s in OpenAI's shape, and with `[state] backend = "redis"` a second
//! replica continues a conversation the first one stored.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers fail the test by panicking

mod support;

use std::path::{Path, PathBuf};

use ripcord_chaos::{FakeVendor, Reply, Wire};
use serde_json::{Value, json};

const ACME_KEY: &str = "acme-gateway-key-0123456789";
const GLOBEX_KEY: &str = "globex-gateway-key-0123456789";

fn config(dir: &Path, vendor: &FakeVendor, extra: &str) -> PathBuf {
    support::write_config(
        dir,
        &format!(
            r#"
[chain]
order = ["vendor"]
deadline_ms = 10000
{}{}{}{extra}
"#,
            support::openai_link("vendor", "gpt-4o", &vendor.base_url(), "sk-test"),
            support::tenant_key("acme", "RIPCORD_TEST_ACME_KEY"),
            support::tenant_key("globex", "RIPCORD_TEST_GLOBEX_KEY"),
        ),
    )
}

fn serve(config: &Path) -> support::Served {
    support::serve_with_env(
        config,
        &[
            ("RIPCORD_TEST_ACME_KEY", ACME_KEY),
            ("RIPCORD_TEST_GLOBEX_KEY", GLOBEX_KEY),
        ],
    )
}

async fn post(url: &str, key: &str, body: &Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(format!("{url}/v1/responses"))
        .bearer_auth(key)
        .json(body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

async fn get(url: &str, path: &str, key: &str) -> (u16, Value) {
    let r = support::get_keyed(&format!("{url}{path}"), key).await;
    (r.status().as_u16(), r.json().await.unwrap())
}

/// `GET /v1/responses/{id}` at `url` as `key`.
async fn get_response(url: &str, id: &str, key: &str) -> (u16, Value) {
    get(url, &format!("/v1/responses/{id}"), key).await
}

/// Asks "Why blue?" at `url` as acme: the stored response (its 200 checked).
async fn ask_why_blue(url: &str) -> Value {
    let (status, r) = post(url, ACME_KEY, &json!({"model": "m", "input": "Why blue?"})).await;
    assert_eq!(status, 200, "{r}");
    r
}

/// Continues the response `id` at `url` as acme (its 200 checked): the messages `vendor` got.
async fn continue_it(url: &str, id: &str, vendor: &FakeVendor) -> Value {
    let (status, next) = post(
        url,
        ACME_KEY,
        &json!({"model": "m", "input": "And red sunsets?", "previous_response_id": id}),
    )
    .await;
    assert_eq!(status, 200, "{next}");
    support::last_sent(vendor)["messages"].clone()
}

async fn vendor() -> FakeVendor {
    support::fake(Wire::OpenAi, Reply::text("Rayleigh scattering.")).await
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_responses_requests_are_400s_naming_the_field_path() {
    let v = vendor().await;
    let dir = std::env::temp_dir().join(format!("ripcord-resp-bad-{}", std::process::id()));
    let served = serve(&config(&dir, &v, ""));
    let cases = [
        (
            json!({"model": "m", "input": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"},
                {"role": "user", "content": [{"type": "input_text", "text": "c"}, {"type": "input_audio", "data": "x"}]}]}),
            "input[2].content[1].type",
        ),
        (
            json!({"model": "m", "input": [{"type": "function_call", "name": "f", "arguments": "{}"}]}),
            "input[0]",
        ),
        (
            json!({"model": "m", "input": "hi", "tools": [{"type": "function", "name": "f"}, {"type": "file_search", "vector_store_ids": ["vs_1"]}]}),
            "tools[1].type",
        ),
        (
            json!({"model": "m", "input": [{"type": "item_reference", "id": "msg_1"}]}),
            "input[0]",
        ),
        (
            json!({"model": "m", "input": [{"role": "user", "content": [{"type": "input_image", "file_id": "file-1"}]}]}),
            "input[0].content[0].file_id",
        ),
        (
            json!({"model": "m", "input": "hi", "text": {"format": {"type": "json_schema"}}}),
            "text.format",
        ),
        (
            json!({"model": "m", "input": "hi", "background": true}),
            "background",
        ),
        (
            json!({"model": "m", "input": "hi", "max_output_tokens": 0}),
            "max_output_tokens",
        ),
        (json!({"model": "m", "input": 42}), "input"),
        (json!({"model": "m"}), "input"),
    ];
    for (body, path) in cases {
        let (status, err) = post(&served.url, ACME_KEY, &body).await;
        assert_eq!(status, 400, "{body} -> {err}");
        let param = err["error"]["param"].as_str().unwrap_or_default();
        let message = err["error"]["message"].as_str().unwrap_or_default();
        assert!(
            param.starts_with(path) || message.starts_with(path),
            "{body}: expected the path {path}, got {err}"
        );
        assert_eq!(err["error"]["type"], "invalid_request_error", "{err}");
    }
    // Nulls are absent: every optional field may be `null`.
    let (status, ok) = post(
        &served.url,
        ACME_KEY,
        &json!({"model": "m", "input": "hi", "tools": null, "tool_choice": null, "text": null,
                "instructions": null, "temperature": null, "stream": null, "store": null,
                "metadata": null, "reasoning": null, "include": null, "previous_response_id": null}),
    )
    .await;
    assert_eq!(status, 200, "{ok}");
    assert_eq!(ok["output_text"], "Rayleigh scattering.");
    assert_eq!(v.hits(), 1, "no malformed request reached the vendor");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stored_response_belongs_to_the_tenant_that_made_it() {
    let v = vendor().await;
    let dir = std::env::temp_dir().join(format!("ripcord-resp-tenant-{}", std::process::id()));
    let served = serve(&config(&dir, &v, ""));
    let r = ask_why_blue(&served.url).await;
    let id = r["id"].as_str().unwrap().to_owned();
    assert_eq!(r["store"], true);
    assert_eq!(r["model"], "gpt-4o");

    // Its own tenant reads it back, continues it, lists its input.
    let (status, back) = get_response(&served.url, &id, ACME_KEY).await;
    assert_eq!((status, back["id"].as_str()), (200, Some(id.as_str())));
    let (status, items) = get(
        &served.url,
        &format!("/v1/responses/{id}/input_items"),
        ACME_KEY,
    )
    .await;
    assert_eq!(status, 200, "{items}");
    assert_eq!(items["object"], "list");
    assert_eq!(items["data"][0]["content"], "Why blue?", "{items}");
    let msgs = continue_it(&served.url, &id, &v).await;
    assert_eq!(msgs.as_array().unwrap().len(), 3, "{msgs}");
    assert_eq!(msgs[1]["content"], "Rayleigh scattering.", "{msgs}");

    // Another tenant sees nothing: not by id, not as a previous response, not to delete.
    let (status, e) = get_response(&served.url, &id, GLOBEX_KEY).await;
    assert_eq!(status, 404, "{e}");
    assert_eq!(e["error"]["type"], "invalid_request_error");
    let (status, e) = post(
        &served.url,
        GLOBEX_KEY,
        &json!({"model": "m", "input": "hi", "previous_response_id": id}),
    )
    .await;
    assert_eq!(status, 404, "{e}");
    assert_eq!(e["error"]["param"], "previous_response_id");
    assert_eq!(e["error"]["code"], "previous_response_not_found");
    let client = reqwest::Client::new();
    let del = |key: &'static str| {
        client
            .delete(format!("{}/v1/responses/{id}", served.url))
            .bearer_auth(key)
            .send()
    };
    assert_eq!(del(GLOBEX_KEY).await.unwrap().status(), 404);
    let d = del(ACME_KEY).await.unwrap();
    assert_eq!(d.status(), 200);
    assert_eq!(d.json::<Value>().await.unwrap()["deleted"], true);
    let (status, _) = get_response(&served.url, &id, ACME_KEY).await;
    assert_eq!(status, 404);

    // `store: false` keeps nothing.
    let (_, r) = post(
        &served.url,
        ACME_KEY,
        &json!({"model": "m", "input": "hi", "store": false}),
    )
    .await;
    let (status, _) = get_response(&served.url, r["id"].as_str().unwrap(), ACME_KEY).await;
    assert_eq!(status, 404);
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread")]
async fn a_second_replica_continues_a_conversation_through_redis() {
    let Some(redis) = support::redis("the shared response store").await else {
        return;
    };
    let v = vendor().await;
    let dir = std::env::temp_dir().join(format!("ripcord-resp-redis-{}", std::process::id()));
    let extra = format!(
        "[state]\nbackend = \"redis\"\nurl = \"{}\"\nop_timeout_ms = 1000\nreplicas = 2\n",
        redis.url()
    );
    let cfg = config(&dir, &v, &extra);
    let a = serve(&cfg);
    let b = serve(&cfg);
    let r = ask_why_blue(&a.url).await;
    let id = r["id"].as_str().unwrap();
    let (status, back) = get_response(&b.url, id, ACME_KEY).await;
    assert_eq!(status, 200, "replica b reads what a stored: {back}");
    let msgs = continue_it(&b.url, id, &v).await;
    assert_eq!(msgs.as_array().unwrap().len(), 3, "{msgs}");
    // Still the tenant's own on the other replica.
    let (status, _) = get_response(&b.url, id, GLOBEX_KEY).await;
    assert_eq!(status, 404);
    let _ = std::fs::remove_dir_all(&dir);
}
