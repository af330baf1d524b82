//! The `ripcord` binary end to end: check-config messages, and `chat --json` with no keys
//! answering from the local model.

#![allow(clippy::unwrap_used, clippy::panic)] // test helpers fail the test by panicking

mod support;

use std::io::Write;

#[test]
fn check_config_prints_the_resolved_chain_with_keys_redacted() {
    let path = support::write_config(
        &tempdir("check"),
        "[chain]\norder = [\"primary\"]\n[[providers]]\nname = \"primary\"\nkind = \"openai\"\nmodel = \"gpt-4o\"\napi_key_env = \"RIPCORD_TEST_KEY\"\n",
    );
    let stdout = support::check_config_ok(&path, &[("RIPCORD_TEST_KEY", "sk-very-secret-value")]);
    assert!(
        stdout.contains("1. primary (openai) model=gpt-4o"),
        "{stdout}"
    );
    assert!(
        stdout.contains("key=[redacted] from env RIPCORD_TEST_KEY"),
        "{stdout}"
    );
    assert!(!stdout.contains("sk-very-secret-value"));
}

#[test]
fn check_config_errors_name_file_line_and_key() {
    let path = support::write_config(
        &tempdir("bad"),
        "[chain]\norder = [\"primary\"]\n[[providers]]\nname = \"primary\"\nkind = \"gpt\"\nmodel = \"x\"\n",
    );
    let out = support::check_config(&path, &[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let expected = format!(
        "ripcord: config error: {}:5: key `kind`: unknown variant `gpt`",
        path.display()
    );
    assert!(stderr.contains(&expected), "{stderr}");
}

#[test]
fn chat_json_with_no_keys_answers_from_the_local_model() {
    let Some(_) = support::cached("models/smollm2-135m-instruct", "the SmolLM2 model") else {
        return;
    };
    let out = support::ripcord()
        .args(["chat", "--json", "--max-tokens", "24", "Say hi"])
        .output()
        .unwrap();
    let (v, stderr) = support::chat_json(&out);
    assert_eq!(v["served_by"], "local", "{v}");
    assert!(!v["content"].as_str().unwrap().trim().is_empty(), "{v}");
    assert_eq!(v["error"], serde_json::Value::Null);
    assert!(
        v["attempts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["provider"] == "local" && a["error_kind"].is_null())
    );
    assert!(stderr.contains("skipping provider \"openai\""), "{stderr}");
    assert!(stderr.contains("[ripcord] served by local"), "{stderr}");
}

#[test]
fn chat_reads_the_prompt_from_stdin_and_fails_cleanly_without_a_usable_link() {
    // A provider on a closed port and no static reply: the chain fails, the JSON still prints.
    let path = support::write_config(
        &tempdir("stdin"),
        "[chain]\norder = [\"dead\"]\ndeadline_ms = 3000\n[[providers]]\nname = \"dead\"\nkind = \"vllm\"\nmodel = \"m\"\nbase_url = \"http://127.0.0.1:9/v1\"\n[providers.retry]\nmax_attempts = 1\n",
    );
    let mut child = support::ripcord()
        .args(["chat", "--json", "--config"])
        .arg(&path)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"hello from stdin")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["kind"], "network", "{v}");
    assert_eq!(v["attempts"][0]["provider"], "dead");
    assert_eq!(v["served_by"], serde_json::Value::Null);
}

/// Two routes over one unreachable provider, each with its own static reply.
const TWO_ROUTES: &str = "[[routes]]\nname = \"smart\"\naliases = [\"gpt-4o\"]\norder = [\"dead\"]\ndeadline_ms = 3000\nstatic_reply = \"smart is busy\"\n\
[[routes]]\nname = \"fast\"\norder = [\"dead\"]\ndeadline_ms = 3000\nstatic_reply = \"fast is busy\"\n\
[[providers]]\nname = \"dead\"\nkind = \"vllm\"\nmodel = \"m\"\nbase_url = \"http://127.0.0.1:9/v1\"\n[providers.retry]\nmax_attempts = 1\n\
[[server.keys]]\ntenant = \"acme\"\nkey_env = \"RIPCORD_TEST_ACME_KEY\"\nroutes = [\"fast\"]\nrpm = 10\n";

#[test]
fn chat_route_picks_a_route_and_check_config_prints_every_route() {
    let path = support::write_config(&tempdir("routes"), TWO_ROUTES);
    for (route, reply) in [
        (None, "smart is busy"),
        (Some("fast"), "fast is busy"),
        (Some("gpt-4o"), "smart is busy"),
    ] {
        let mut cmd = support::ripcord();
        cmd.args(["chat", "--json", "--config"])
            .arg(&path)
            .arg("hi");
        if let Some(r) = route {
            cmd.args(["--route", r]);
        }
        let out = cmd
            .env("RIPCORD_TEST_ACME_KEY", "acme-key-0123456789abcdef")
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["content"], reply, "{route:?}: {v}");
        assert_eq!(v["static_reply"], true);
    }
    let out = support::ripcord()
        .args(["chat", "--route", "cheap", "--config"])
        .arg(&path)
        .arg("hi")
        .env("RIPCORD_TEST_ACME_KEY", "acme-key-0123456789abcdef")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--route \"cheap\": no such route (routes: smart, gpt-4o, fast)"),
        "{stderr}"
    );
    let stdout = support::check_config_ok(
        &path,
        &[("RIPCORD_TEST_ACME_KEY", "acme-key-0123456789abcdef")],
    );
    for line in [
        "route \"smart\" (aliases: gpt-4o) (deadline 3000 ms):",
        "route \"fast\" (deadline 3000 ms):",
        "  then static reply: \"fast is busy\"",
        "shared providers (one breaker, limiter and health record each): dead (smart, fast)",
        "key=[redacted] from env RIPCORD_TEST_ACME_KEY tenant=acme routes=fast rpm=10",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in\n{stdout}");
    }
    assert!(!stdout.contains("acme-key-0123456789abcdef"));
    // A short key stops the gateway at start, with the reason.
    let out = support::check_config(&path, &[("RIPCORD_TEST_ACME_KEY", "short")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("gateway keys need at least 16"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn tempdir(tag: &str) -> std::path::PathBuf {
    support::temp_dir(&format!("bin-{tag}"))
}

#[cfg(feature = "redis")]
#[test]
fn check_config_shows_the_redis_state_without_its_password() {
    let dir = tempdir("state");
    let path = dir.join("state.toml");
    std::fs::write(
        &path,
        "[chain]\norder = [\"primary\"]\n[[providers]]\nname = \"primary\"\nkind = \"openai\"\nmodel = \"gpt-4o\"\napi_key = \"sk-x\"\n\
         [state]\nbackend = \"redis\"\nurl = \"redis://:${RIPCORD_TEST_REDIS_PW}@127.0.0.1:6379\"\nreplicas = 2\n",
    )
    .unwrap();
    let stdout = support::check_config_ok(&path, &[("RIPCORD_TEST_REDIS_PW", "pw-very-secret")]);
    assert!(
        stdout.contains(
            "state: redis redis://[redacted]@127.0.0.1:6379 (op timeout 50 ms, 2 replica(s))"
        ),
        "{stdout}"
    );
    assert!(!stdout.contains("pw-very-secret"), "{stdout}");
}
