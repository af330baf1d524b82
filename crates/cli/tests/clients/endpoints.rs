//! Issue 33's endpoints and request fields through `ripcord serve`: base64 and token
//! embeddings, `models.retrieve`, `max_tokens` per link, CORS, parameters forwarded, mapped or
//! refused by name, and Messages structured output. Part of `clients.rs` (one test binary).

use super::*;

fn embeddings_config(dir: &std::path::Path, vendor: &str) -> std::path::PathBuf {
    support::write_config(
        dir,
        &format!(
            "{}{}{}{}routes = [\"ripcord\"]\n",
            support::route("ripcord", &["primary"]),
            support::route("private", &["primary"]),
            embeddings_of_primary(vendor),
            support::tenant_key("acme", "CLIENTS_ACME_KEY"),
        ),
    )
}

const EMBED_SCRIPT: &str = r#"
import json, sys, base64, struct
import openai, anthropic
client = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key=sys.argv[2], max_retries=0)
out = {}
# The SDK asks for base64 when the caller does not choose, and decodes it.
out["default"] = client.embeddings.create(model="text-embedding-3-small", input=["alpha", "beta"]).data[0].embedding
out["float"] = client.embeddings.create(model="text-embedding-3-small", input="alpha", encoding_format="float").data[0].embedding
raw = client.embeddings.create(model="text-embedding-3-small", input="alpha", encoding_format="base64").data[0].embedding
out["base64"] = list(struct.unpack("<%df" % (len(base64.b64decode(raw)) // 4), base64.b64decode(raw)))
out["tokens"] = len(client.embeddings.create(model="text-embedding-3-small", input=[[9906, 1917], [15339]]).data)
out["model"] = client.models.retrieve("ripcord").id
try:
    client.models.retrieve("private")
    out["private"] = "found"
except openai.NotFoundError as e:
    out["private"] = {"status": e.status_code, "type": e.body["type"]}
claude = anthropic.Anthropic(base_url=sys.argv[1], api_key=sys.argv[2], max_retries=0)
m = claude.models.retrieve("ripcord")
out["anthropic_model"] = {"id": m.id, "type": m.type}
try:
    claude.models.retrieve("nope")
    out["anthropic_missing"] = "found"
except anthropic.NotFoundError as e:
    out["anthropic_missing"] = {"status": e.status_code, "type": e.body["error"]["type"], "envelope": e.body["type"]}
out["anthropic_list"] = [m.id for m in claude.models.list()]
print(json.dumps(out))
"#;

#[tokio::test(flavor = "multi_thread")]
async fn embeddings_in_base64_and_tokens_and_models_retrieve_through_the_sdks() {
    let Some(python) = support::python() else {
        return;
    };
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let dir = support::temp_dir("clients-embed");
    let config = embeddings_config(&dir, &vendor.base_url());
    let key = "sk-acme-clients-0123456789";
    let served = support::serve_with_env(&config, &[("CLIENTS_ACME_KEY", key)]);
    let v = support::python_json(
        python,
        EMBED_SCRIPT,
        vec![served.url.clone(), key.to_owned()],
    )
    .await;
    println!("{v:#}");
    let float = v["float"].as_array().unwrap();
    assert!(float.len() >= 2, "{v}");
    // Base64 decodes to the very floats the float answer carries, by hand and by the SDK.
    assert_eq!(v["base64"], v["float"], "{v}");
    assert_eq!(v["default"], v["float"], "{v}");
    assert_eq!(v["tokens"], 2, "{v}");
    assert_eq!(v["model"], "ripcord", "{v}");
    assert_eq!(v["private"]["status"], 404, "{v}");
    assert_eq!(v["anthropic_model"]["id"], "ripcord", "{v}");
    assert_eq!(v["anthropic_model"]["type"], "model", "{v}");
    assert_eq!(v["anthropic_missing"]["status"], 404, "{v}");
    assert_eq!(v["anthropic_missing"]["type"], "not_found_error", "{v}");
    assert_eq!(v["anthropic_missing"]["envelope"], "error", "{v}");
    assert_eq!(v["anthropic_list"], json!(["ripcord"]), "{v}");
    // The token arrays reached the vendor as token arrays, and it was always asked for floats
    // (the gateway encodes base64 itself).
    let sent: Vec<Value> = vendor.requests().iter().filter_map(|r| r.json()).collect();
    assert!(
        sent.iter().all(|b| b["encoding_format"] == "float"),
        "{sent:?}"
    );
    assert!(
        sent.iter()
            .any(|b| b["input"] == json!([[9906, 1917], [15339]])),
        "{sent:?}"
    );
    // A format that is neither is refused naming the field.
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/embeddings", served.url))
        .bearer_auth(key)
        .json(&json!({"model": "text-embedding-3-small", "input": "a", "encoding_format": "int8"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let e = error_of(&resp.text().await.unwrap());
    assert_eq!(e["param"], "encoding_format", "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread")]
async fn max_tokens_is_lowered_to_each_links_known_cap_and_the_attempt_says_so() {
    // A Claude client asks for 64000 (the AI SDK's Anthropic default); Claude is down and the
    // backup is GPT-4o, which writes at most 16384.
    let claude = support::fake_failing(Wire::Anthropic, VendorError::Overloaded).await;
    let backup = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let dir = support::temp_dir("clients-clamp");
    let config = support::write_config(
        &dir,
        &format!(
            "[chain]\norder = [\"claude\", \"gpt\"]\ndeadline_ms = 5000\n{}{}{}{}\n\
             # The attempts are read by link and model.\n[server]\nexpose_errors = true\n",
            support::anthropic_link(
                "claude",
                "claude-sonnet-4-5",
                &claude.base_url(),
                "sk-ant-test"
            ),
            support::ONE_ATTEMPT,
            BREAKER_STAYS_CLOSED,
            support::openai_link("gpt", "gpt-4o", &backup.base_url(), "sk-test"),
        ),
    );
    let served = support::serve(&config);
    for stream in [false, true] {
        let resp = reqwest::Client::new()
            .post(format!("{}/v1/messages", served.url))
            .json(
                &json!({"model": "claude-sonnet-4-5", "max_tokens": 64000, "stream": stream,
                "messages": [{"role": "user", "content": "hi"}]}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        let attempts = support::header(&resp, "x-ripcord-attempts");
        let body = resp.text().await.unwrap();
        assert!(body.contains("Hello"), "{body}");
        // Claude's own cap is 64000: it was sent the client's value, unmarked.
        let parts: Vec<&str> = attempts.split(", ").collect();
        assert_eq!(parts.len(), 2, "{attempts}");
        assert!(
            parts[0].starts_with("claude/claude-sonnet-4-5=overloaded"),
            "{attempts}"
        );
        assert!(!parts[0].contains("max_tokens"), "{attempts}");
        assert!(parts[1].starts_with("gpt/gpt-4o=ok"), "{attempts}");
        assert!(parts[1].ends_with(";max_tokens=16384"), "{attempts}");
    }
    let sent = claude.requests()[0].json().unwrap();
    assert_eq!(sent["max_tokens"], 64000);
    for r in backup.requests() {
        let b = r.json().unwrap();
        assert_eq!(b["max_completion_tokens"], 16384, "{b}");
    }
    // Under the cap, the client's value goes as it is.
    let (status, headers, _) = post(
        &format!("{}/v1/chat/completions", served.url),
        json!({"model": "ripcord", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(status, 200);
    assert!(
        !headers["x-ripcord-attempts"]
            .to_str()
            .unwrap()
            .contains("max_tokens")
    );
    assert_eq!(support::last_sent(&backup)["max_completion_tokens"], 100);
    let _ = std::fs::remove_dir_all(&dir);
}

fn cors_config(dir: &std::path::Path, vendor: &str, cors: &str) -> std::path::PathBuf {
    support::write_config(
        dir,
        &format!(
            "[chain]\norder = [\"primary\"]\n{}\n[server]\n{cors}\n\n\
             [[server.keys]]\ntenant = \"acme\"\nkey_env = \"CLIENTS_CORS_KEY\"\n",
            support::openai_link("primary", "gpt-4o", vendor, "sk-a")
        ),
    )
}

async fn preflight(url: &str, origin: &str) -> reqwest::Response {
    reqwest::Client::new()
        .request(
            reqwest::Method::OPTIONS,
            format!("{url}/v1/chat/completions"),
        )
        .header("origin", origin)
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization, content-type, x-stainless-os",
        )
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn cors_answers_an_allowed_origins_preflight_before_authentication() {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let dir = support::temp_dir("clients-cors");
    let key = "sk-acme-cors-0123456789abcdef";
    // Off by default: a preflight is refused like any request without a key.
    let config = cors_config(&dir, &vendor.base_url(), "");
    let served = support::serve_with_env(&config, &[("CLIENTS_CORS_KEY", key)]);
    let r = preflight(&served.url, "https://app.example.com").await;
    assert_eq!(r.status(), 401);
    assert!(r.headers().get("access-control-allow-origin").is_none());
    drop(served);
    let config = cors_config(
        &dir,
        &vendor.base_url(),
        r#"cors_origins = ["https://app.example.com"]"#,
    );
    let served = support::serve_with_env(&config, &[("CLIENTS_CORS_KEY", key)]);
    let r = preflight(&served.url, "https://app.example.com").await;
    assert_eq!(r.status(), 204);
    let h = r.headers();
    assert_eq!(h["access-control-allow-origin"], "https://app.example.com");
    assert!(
        h["access-control-allow-methods"]
            .to_str()
            .unwrap()
            .contains("POST")
    );
    assert!(
        h["access-control-allow-headers"]
            .to_str()
            .unwrap()
            .contains("authorization")
    );
    // Another origin gets no CORS answer (and the front door asks it for a key).
    let r = preflight(&served.url, "https://evil.example").await;
    assert_eq!(r.status(), 401);
    assert!(r.headers().get("access-control-allow-origin").is_none());
    // The real call is still authenticated, and its answer readable by the page.
    let call = |auth: bool| {
        let mut b = reqwest::Client::new()
            .post(format!("{}/v1/chat/completions", served.url))
            .header("origin", "https://app.example.com")
            .json(&json!({"model": "ripcord", "messages": [{"role": "user", "content": "hi"}]}));
        if auth {
            b = b.bearer_auth(key);
        }
        b.send()
    };
    let r = call(false).await.unwrap();
    assert_eq!(r.status(), 401);
    let r = call(true).await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        "https://app.example.com"
    );
    assert!(support::header(&r, "access-control-expose-headers").contains("x-ripcord-served-by"));
    assert_eq!(
        vendor.hits(),
        1,
        "only the authenticated call reached the vendor"
    );
    drop(served);
    // A value that is not an origin is a config error naming it.
    let config = cors_config(
        &dir,
        &vendor.base_url(),
        r#"cors_origins = ["https://app.example.com/path"]"#,
    );
    let out = support::check_config(&config, &[("CLIENTS_CORS_KEY", key)]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("server.cors_origins[0]"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread")]
async fn parameters_are_forwarded_mapped_or_refused_by_name() {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let claude = FakeVendor::start(Wire::Anthropic).await.unwrap();
    let dir = support::temp_dir("clients-params");
    let config = support::two_routes_named(
        &dir,
        "ripcord",
        &vendor.base_url(),
        &claude.base_url(),
        "gpt-4o",
    );
    let served = support::serve(&config);
    let chat = format!("{}/v1/chat/completions", served.url);
    let hi = json!([{"role": "user", "content": "hi"}]);
    let tools = json!([{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}]);
    // Forwarded to the OpenAI-wire link as they came.
    let (s, _, body) = post(
        &chat,
        json!({"model": "ripcord", "messages": hi, "tools": tools, "parallel_tool_calls": false,
            "presence_penalty": 0.5, "frequency_penalty": -0.5, "seed": 7, "n": 1, "logprobs": false}),
    )
    .await;
    assert_eq!(s, 200, "{body}");
    let sent = support::last_sent(&vendor);
    assert_eq!(sent["parallel_tool_calls"], false, "{sent}");
    assert_eq!(sent["presence_penalty"], 0.5, "{sent}");
    assert_eq!(sent["frequency_penalty"], -0.5, "{sent}");
    assert_eq!(sent["seed"], 7, "{sent}");
    // Mapped: Anthropic's `disable_parallel_tool_use` is OpenAI's `parallel_tool_calls: false`,
    // both ways; the Responses door forwards its `parallel_tool_calls` the same way.
    for (url, body) in [
        (
            format!("{}/v1/messages", served.url),
            json!({"model": "ripcord", "max_tokens": 32, "messages": hi,
                "tools": [{"name": "weather", "input_schema": {"type": "object"}}],
                "tool_choice": {"type": "auto", "disable_parallel_tool_use": true}}),
        ),
        (
            format!("{}/v1/responses", served.url),
            json!({"model": "ripcord", "input": "hi", "store": false, "parallel_tool_calls": false,
                "tools": [{"type": "function", "name": "weather", "parameters": {"type": "object"}}]}),
        ),
    ] {
        let (s, _, body) = post(&url, body).await;
        assert_eq!(s, 200, "{body}");
        let sent = support::last_sent(&vendor);
        assert_eq!(sent["parallel_tool_calls"], false, "{sent}");
    }
    let (s, _, body) = post(
        &chat,
        json!({"model": "claude", "messages": hi, "tools": tools, "parallel_tool_calls": false}),
    )
    .await;
    assert_eq!(s, 200, "{body}");
    let sent = support::last_sent(&claude);
    assert_eq!(
        sent["tool_choice"],
        json!({"type": "auto", "disable_parallel_tool_use": true}),
        "{sent}"
    );
    // Mapped: the deprecated `function_call` / `role: "function"` turn is a tool call and
    // its result.
    let (s, _, body) = post(
        &chat,
        json!({"model": "ripcord", "messages": [
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": null, "function_call": {"name": "weather", "arguments": "{}"}},
            {"role": "function", "name": "weather", "content": "sunny"}]}),
    )
    .await;
    assert_eq!(s, 200, "{body}");
    let sent = support::last_sent(&vendor);
    let m = &sent["messages"];
    assert_eq!(
        m[1]["tool_calls"][0]["function"]["name"], "weather",
        "{sent}"
    );
    assert_eq!(m[2]["role"], "tool", "{sent}");
    assert_eq!(m[2]["tool_call_id"], m[1]["tool_calls"][0]["id"], "{sent}");
    let hits = vendor.hits() + claude.hits();
    // Refused, by name: what no link can give back, and what the serving vendor lacks.
    let refused = [
        (json!({"model": "ripcord", "messages": hi, "n": 2}), "n"),
        (
            json!({"model": "ripcord", "messages": hi, "logprobs": true}),
            "logprobs",
        ),
        (
            json!({"model": "ripcord", "messages": hi, "top_logprobs": 3}),
            "top_logprobs",
        ),
        (
            json!({"model": "ripcord", "messages": hi, "logit_bias": {"50256": -100}}),
            "logit_bias",
        ),
        (
            json!({"model": "ripcord", "messages": [{"role": "function", "name": "nope", "content": "x"}]}),
            "messages[0].name",
        ),
    ];
    for (body, param) in refused {
        let (s, _, text) = post(&chat, body).await;
        assert_eq!(s, 400, "{text}");
        assert_eq!(error_of(&text)["param"], param, "{text}");
    }
    assert_eq!(
        vendor.hits() + claude.hits(),
        hits,
        "refused before any vendor"
    );
    let (s, _, text) = post(
        &chat,
        json!({"model": "claude", "messages": hi, "presence_penalty": 0.5}),
    )
    .await;
    assert_eq!(s, 400, "{text}");
    let message = error_of(&text)["message"].as_str().unwrap().to_owned();
    assert!(message.starts_with("presence_penalty: "), "{text}");
    assert_eq!(
        claude.hits(),
        1,
        "the Anthropic link was not called with it"
    );
    // Reasoning: an effort goes to OpenAI as it is and to Claude as a thinking budget; a
    // thinking budget goes to OpenAI as the effort of its band.
    let to_openai = [
        (
            chat.clone(),
            json!({"model": "ripcord", "messages": hi, "reasoning_effort": "high"}),
            "high",
        ),
        (
            format!("{}/v1/messages", served.url),
            json!({"model": "ripcord", "max_tokens": 4096, "messages": hi,
                "thinking": {"type": "enabled", "budget_tokens": 3000}}),
            "medium",
        ),
        (
            format!("{}/v1/responses", served.url),
            json!({"model": "ripcord", "input": "hi", "store": false, "reasoning": {"effort": "minimal"}}),
            "minimal",
        ),
    ];
    for (url, body, effort) in to_openai {
        let (s, _, text) = post(&url, body).await;
        assert_eq!(s, 200, "{text}");
        assert_eq!(support::last_sent(&vendor)["reasoning_effort"], effort);
    }
    let (s, _, text) = post(
        &chat,
        json!({"model": "claude", "messages": hi, "reasoning_effort": "low", "max_tokens": 4000}),
    )
    .await;
    assert_eq!(s, 200, "{text}");
    let sent = support::last_sent(&claude);
    assert_eq!(
        sent["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048}),
        "{sent}"
    );
    let (s, _, text) = post(
        &chat,
        json!({"model": "ripcord", "messages": hi, "reasoning_effort": "maximal"}),
    )
    .await;
    assert_eq!(s, 400, "{text}");
    assert_eq!(error_of(&text)["param"], "reasoning_effort", "{text}");
    // A zero penalty asks for nothing and goes through.
    let (s, _, text) = post(
        &chat,
        json!({"model": "claude", "messages": hi, "presence_penalty": 0, "frequency_penalty": 0.0}),
    )
    .await;
    assert_eq!(s, 200, "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread")]
async fn messages_structured_output_goes_the_response_format_way() {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    vendor.set_script(Script::Always(Behavior::Reply(Reply::text(
        r#"{"city":"Oslo"}"#,
    ))));
    let dir = support::temp_dir("clients-structured");
    let config = chain_config(&dir, &vendor.base_url(), &vendor.base_url(), "");
    let served = support::serve(&config);
    let schema = json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
        "additionalProperties": false});
    for format_field in ["output_config", "output_format"] {
        let format = json!({"type": "json_schema", "schema": schema});
        let mut body = json!({"model": "ripcord", "max_tokens": 64,
            "messages": [{"role": "user", "content": "Where?"}]});
        body[format_field] = if format_field == "output_config" {
            json!({"format": format})
        } else {
            format
        };
        let (s, _, text) = post(&format!("{}/v1/messages", served.url), body).await;
        assert_eq!(s, 200, "{text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["content"][0]["text"], r#"{"city":"Oslo"}"#, "{text}");
        let sent = support::last_sent(&vendor);
        assert_eq!(sent["response_format"]["type"], "json_schema", "{sent}");
        assert_eq!(
            sent["response_format"]["json_schema"]["schema"], schema,
            "{sent}"
        );
    }
    let (s, _, text) = post(
        &format!("{}/v1/messages", served.url),
        json!({"model": "ripcord", "max_tokens": 64, "messages": [{"role": "user", "content": "x"}],
            "output_config": {"format": {"type": "regex", "pattern": "a+"}}}),
    )
    .await;
    assert_eq!(s, 400, "{text}");
    assert!(text.contains("output_config.format.type"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}
