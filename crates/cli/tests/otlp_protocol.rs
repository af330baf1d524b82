//! `--otlp` with `OTEL_EXPORTER_OTLP_PROTOCOL`: the variable beats the port-based guess (a
//! gRPC receiver on a port other than 4317 gets the run's spans), and an export that fails is
//! reported once on stderr with the endpoint and the protocol.
//!
//! The receiver is rotel, as in the telemetry crate's end-to-end test: from `cargo xtask test`
//! (environment variables), or started here when installed in the project venv; under `CI` a
//! missing receiver fails the test, elsewhere the test is skipped with a loud message.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)] // test code: a failure is the test failing; the skip notice goes to stderr

mod support;

use std::path::PathBuf;
use std::time::Duration;

use ripcord_chaos::{FakeVendor, Wire, otlp};

/// A one-link config on the fake vendor, with a link name to find in the receiver's log.
fn config(tag: &str, fake: &FakeVendor, link: &str) -> PathBuf {
    let dir = support::temp_dir(&format!("otlp-{tag}"));
    let path = dir.join("chain.toml");
    std::fs::write(
        &path,
        format!(
            "[chain]\norder = [\"{link}\"]\ndeadline_ms = 10000\n[[providers]]\nname = \"{link}\"\nkind = \"openai\"\nmodel = \"gpt-4o\"\napi_key = \"sk-test-otlp\"\nbase_url = \"{}/v1\"\n",
            fake.base_url()
        ),
    )
    .unwrap();
    path
}

/// Runs `ripcord chat --json --otlp <endpoint>` with `OTEL_EXPORTER_OTLP_PROTOCOL=grpc`.
async fn chat_with_otlp(config: PathBuf, endpoint: String) -> (Option<i32>, String) {
    let out = tokio::task::spawn_blocking(move || {
        support::ripcord()
            .args(["chat", "--json", "--config"])
            .arg(&config)
            .args(["--otlp", &endpoint, "Why is the sky blue?"])
            .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .env_remove("OTEL_SDK_DISABLED")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_is_down_is_reported_once_with_endpoint_and_protocol() {
    let fake = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let endpoint = format!("http://127.0.0.1:{closed}");
    let (code, stderr) = chat_with_otlp(config("down", &fake, "primary"), endpoint.clone()).await;
    // Telemetry trouble never fails the call.
    assert_eq!(code, Some(0), "{stderr}");
    let reports: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("ripcord: telemetry exporting"))
        .collect();
    assert_eq!(reports.len(), 1, "exactly one report: {stderr}");
    assert!(
        reports[0].contains(&format!("to {endpoint} over OTLP/grpc failed: ")),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_protocol_variable_is_named() {
    let fake = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let cfg = config("bad", &fake, "primary");
    let out = tokio::task::spawn_blocking(move || {
        support::ripcord()
            .args(["chat", "--json", "--config"])
            .arg(&cfg)
            .args(["--otlp", "http://127.0.0.1:9", "hi"])
            .env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(
            "ripcord: telemetry export disabled: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=\"http/json\" is not an OTLP protocol"
        ),
        "{stderr}"
    );
}

/// The gRPC endpoint and log of a receiver, and the receiver itself when started here.
fn grpc_receiver() -> Option<(String, PathBuf, Option<otlp::ReceiverInfo>)> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    if let (Some(grpc), Some(query)) =
        (env("RIPCORD_OTLP_GRPC_ENDPOINT"), env("RIPCORD_OTLP_QUERY"))
    {
        let log = query.strip_prefix("rotel-log:").map(PathBuf::from)?;
        return Some((grpc, log, None));
    }
    let ci = std::env::var_os("CI").is_some();
    let got = if ci {
        otlp::ensure_receiver().map(Some)
    } else {
        otlp::start_if_installed()
    };
    match got {
        Ok(Some(info)) => Some((info.grpc_endpoint.clone(), info.log.clone(), Some(info))),
        Ok(None) if ci => panic!("CI is set but no OTLP receiver is available"),
        Err(e) if ci => panic!("CI is set but the OTLP receiver could not start: {e}"),
        _ => {
            eprintln!(
                "\n!!! SKIPPED: the gRPC export test needs rotel: run `cargo xtask test`, or set \
                 RIPCORD_OTLP_GRPC_ENDPOINT and RIPCORD_OTLP_QUERY.\n"
            );
            None
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_protocol_variable_beats_the_port_guess_for_a_grpc_receiver() {
    let Some((grpc, log, _receiver)) = grpc_receiver() else {
        return;
    };
    // The point of the test: a gRPC receiver that is not on 4317, which the port guess would
    // have sent OTLP/HTTP to.
    assert!(!grpc.trim_end_matches('/').ends_with(":4317"), "{grpc}");
    let fake = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let link = format!("grpc-probe-{}", std::process::id());
    let (code, stderr) = chat_with_otlp(config("grpc", &fake, &link), grpc.clone()).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        !stderr.contains("telemetry exporting"),
        "the export to {grpc} failed: {stderr}"
    );
    // The receiver logs what it got; the run's chain span names the link that served.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains(&link) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the receiver at {grpc} did not log a span naming {link} within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
