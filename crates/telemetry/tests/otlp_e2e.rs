//! End to end: a chain with a fallback through the real OpenAI adapter against fake vendor
//! servers (the first answers 503, the second serves), exported over real OTLP — gRPC on a
//! current-thread runtime, HTTP/protobuf on a multi-thread one — to a real receiver on
//! loopback (rotel), then read back from the receiver.
//!
//! The receiver comes from `cargo xtask test` (environment variables, see
//! `ripcord_chaos::otlp`), or is started here: under `CI` it is installed first if needed (and a
//! receiver that cannot be had fails the tests); elsewhere only when rotel is already installed
//! in the project venv, and otherwise the tests are skipped with a loud message.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stderr
)] // test code: a failure is the test failing; the skip notice goes to stderr

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ripcord_chaos::{Behavior, FakeVendor, Reply, Script, VendorError, Wire, otlp};
use ripcord_core::{Chain, ChatModel, ChatRequest, Context};
use ripcord_providers::{OpenAi, OpenAiConfig};
use ripcord_telemetry::Protocol;
use tracing_subscriber::layer::SubscriberExt;

/// A distinctive fake key: it must reach the vendor, and never the receiver.
const API_KEY: &str = "sk-ripcord-e2e-KEY-7f3a9c2e41d84b6f";

struct Receiver {
    grpc: String,
    http: String,
    log: PathBuf,
    _owned: Option<otlp::ReceiverInfo>,
}

fn receiver() -> Option<Receiver> {
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    if let (Some(grpc), Some(http), Some(query)) = (
        env("RIPCORD_OTLP_GRPC_ENDPOINT"),
        env("RIPCORD_OTLP_HTTP_ENDPOINT"),
        env("RIPCORD_OTLP_QUERY"),
    ) {
        let log = query
            .strip_prefix("rotel-log:")
            .unwrap_or_else(|| panic!("RIPCORD_OTLP_QUERY={query:?}: expected rotel-log:<path>"));
        return Some(Receiver {
            grpc,
            http,
            log: PathBuf::from(log),
            _owned: None,
        });
    }
    let ci = std::env::var_os("CI").is_some();
    // Under CI the receiver is installed if missing (into the project venv, from PyPI);
    // elsewhere only an installed one is started. One test at a time: pip must not race.
    static ACQUIRE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = ACQUIRE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let got = if ci {
        otlp::ensure_receiver().map(Some)
    } else {
        otlp::start_if_installed()
    };
    match got {
        Ok(Some(info)) => Some(Receiver {
            grpc: info.grpc_endpoint.clone(),
            http: info.http_endpoint.clone(),
            log: info.log.clone(),
            _owned: Some(info),
        }),
        Ok(None) if ci => panic!(
            "CI is set but no OTLP receiver is available: run the suite through `cargo xtask test`, \
             which installs and starts rotel"
        ),
        Err(e) if ci => panic!("CI is set but the OTLP receiver could not start: {e}"),
        other => {
            let why = match other {
                Err(e) => e,
                _ => "rotel is not installed in .cache/venv".to_owned(),
            };
            eprintln!(
                "\n\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n\
                 !!! SKIPPED: the OTLP end-to-end test needs a real receiver ({why}).\n\
                 !!! Run `cargo xtask test`, or set RIPCORD_OTLP_GRPC_ENDPOINT,\n\
                 !!! RIPCORD_OTLP_HTTP_ENDPOINT and RIPCORD_OTLP_QUERY.\n\
                 !!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n"
            );
            None
        }
    }
}

/// A span as rotel's debug log prints it.
#[derive(Debug, Default, Clone)]
struct LoggedSpan {
    trace_id: String,
    parent_id: String,
    id: String,
    name: String,
    kind: String,
    status: String,
    attrs: BTreeMap<String, String>,
    events: Vec<(String, BTreeMap<String, String>)>,
}

/// What the receiver logged for one resource.
#[derive(Debug, Default)]
struct LoggedResource {
    attrs: BTreeMap<String, String>,
    spans: Vec<LoggedSpan>,
    metrics: Vec<String>,
}

/// `Str(x)` -> `x`, `Int(3)` -> `3`, `Slice(["stop"])` -> `["stop"]`.
fn strip_type(v: &str) -> String {
    let v = v.trim();
    match (v.find('('), v.ends_with(')')) {
        (Some(open), true) if v[..open].chars().all(|c| c.is_ascii_alphabetic()) => {
            v[open + 1..v.len() - 1].to_owned()
        }
        _ => v.to_owned(),
    }
}

fn kv(line: &str) -> Option<(String, String)> {
    let rest = line.trim_start().strip_prefix("-> ")?;
    let (k, v) = rest.split_once(": ")?;
    Some((k.trim().to_owned(), strip_type(v)))
}

/// Parses rotel's debug output (the OpenTelemetry Collector debug exporter's "detailed" format).
fn parse(log: &str) -> Vec<LoggedResource> {
    #[derive(PartialEq, Clone, Copy)]
    enum Section {
        None,
        Resource,
        SpanAttrs,
        Events,
        EventAttrs,
        Metrics,
    }
    let mut out: Vec<LoggedResource> = Vec::new();
    let mut section = Section::None;
    for line in log.lines() {
        let t = line.trim();
        if t.starts_with("ResourceSpans #") || t.starts_with("ResourceMetrics #") {
            out.push(LoggedResource::default());
            section = Section::None;
            continue;
        }
        let Some(res) = out.last_mut() else { continue };
        if t.starts_with("ScopeSpans #") || t.starts_with("ScopeMetrics #") {
            section = if t.starts_with("ScopeMetrics") {
                Section::Metrics
            } else {
                Section::None
            };
            continue;
        }
        if t.starts_with("Span #") {
            res.spans.push(LoggedSpan::default());
            section = Section::None;
            continue;
        }
        // Lines that only open a section.
        let headers = [
            ("Resource attributes:", Section::Resource),
            ("Attributes:", Section::SpanAttrs),
            ("Events:", Section::Events),
            ("-> Attributes::", Section::EventAttrs),
            ("Links:", Section::None),
        ];
        if let Some(&(_, opened)) = headers.iter().find(|(h, _)| *h == t) {
            section = opened;
            continue;
        }
        if t.starts_with("SpanEvent #") {
            if let Some(s) = res.spans.last_mut() {
                s.events.push((String::new(), BTreeMap::new()));
            }
            section = Section::Events;
            continue;
        }
        if section == Section::Metrics {
            if let Some(name) = t.strip_prefix("-> Name: ") {
                res.metrics.push(name.to_owned());
            }
            if let Some(name) = t.strip_prefix("Name: ") {
                res.metrics.push(name.to_owned());
            }
            continue;
        }
        // Span header fields: "    Name           : chat gpt-4o"
        if let (Some(span), Some((k, v))) = (
            res.spans.last_mut(),
            t.split_once(" : ").or_else(|| t.split_once(": ")),
        ) {
            let k = k.trim();
            let v = v.trim().to_owned();
            let field = match k {
                "Trace ID" => Some(&mut span.trace_id),
                "Parent ID" => Some(&mut span.parent_id),
                "ID" => Some(&mut span.id),
                "Name" if !t.starts_with("->") => Some(&mut span.name),
                "Kind" => Some(&mut span.kind),
                "Status code" => Some(&mut span.status),
                _ => None,
            };
            if let Some(f) = field {
                *f = v;
                continue;
            }
        }
        match section {
            Section::Resource => {
                if let Some((k, v)) = kv(line) {
                    res.attrs.insert(k, v);
                }
            }
            Section::SpanAttrs => {
                if let (Some(span), Some((k, v))) = (res.spans.last_mut(), kv(line)) {
                    span.attrs.insert(k, v);
                }
            }
            Section::Events => {
                if let (Some(span), Some((k, v))) = (res.spans.last_mut(), kv(line))
                    && k == "Name"
                    && let Some(ev) = span.events.last_mut()
                {
                    ev.0 = v;
                }
            }
            Section::EventAttrs => {
                if let (Some(span), Some((k, v))) = (res.spans.last_mut(), kv(line))
                    && let Some(ev) = span.events.last_mut()
                {
                    ev.1.insert(k, v);
                }
            }
            _ => {}
        }
    }
    out
}

/// Everything the receiver logged for `service`: spans and metric names.
fn logged_for(log: &str, service: &str) -> (Vec<LoggedSpan>, Vec<String>) {
    let mut spans = Vec::new();
    let mut metrics = Vec::new();
    for r in parse(log) {
        if r.attrs.get("service.name").map(String::as_str) == Some(service) {
            spans.extend(r.spans);
            metrics.extend(r.metrics);
        }
    }
    (spans, metrics)
}

/// Polls the receiver's log until `ready` holds for what it logged for `service`.
async fn wait_for(
    log: &PathBuf,
    service: &str,
    ready: impl Fn(&[LoggedSpan], &[String]) -> bool,
) -> (String, Vec<LoggedSpan>, Vec<String>) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let (spans, metrics) = logged_for(&text, service);
        if ready(&spans, &metrics) {
            return (text, spans, metrics);
        }
        if tokio::time::Instant::now() > deadline {
            panic!(
                "the receiver did not log the expected telemetry for {service} within 30 s; it logged {} spans: {:#?}\nmetrics: {metrics:?}",
                spans.len(),
                spans
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn openai(vendor: &FakeVendor, name: &str, model: &str) -> Arc<dyn ChatModel> {
    let cfg = OpenAiConfig::new(model, API_KEY.to_owned())
        .with_base_url(format!("{}/v1", vendor.base_url()));
    // The adapter records its own attempt spans: no TracedModel around it.
    Arc::new(OpenAi::new(cfg).expect("valid OpenAI config").named(name))
}

async fn run_chain_and_check(protocol: Protocol, endpoint: String, log: PathBuf) {
    let service = format!(
        "ripcord-e2e-{}-{}",
        std::process::id(),
        protocol.as_str().replace('/', "-")
    );
    let down = FakeVendor::start(Wire::OpenAi).await.unwrap();
    down.set_script(Script::Always(Behavior::Error(VendorError::Overloaded)));
    let up = FakeVendor::start(Wire::OpenAi).await.unwrap();
    up.set_script(Script::Always(Behavior::Reply(
        Reply::text("Rayleigh scattering.").with_usage(12, 4),
    )));

    let telemetry = ripcord_telemetry::init()
        .ignore_environment()
        .service_name(service.clone())
        .endpoint(endpoint)
        .protocol(protocol)
        .timeout(Duration::from_secs(10))
        .build()
        .expect("telemetry builds");
    let (layer, guard) = telemetry.into_parts();
    {
        let _default = tracing::subscriber::set_default(tracing_subscriber::registry().with(layer));
        let chain = Chain::builder()
            .name("e2e")
            .link_arc(openai(&down, "primary", "gpt-4o"))
            .link_arc(openai(&up, "backup", "gpt-4o-mini"))
            .build()
            .unwrap();
        let reply = chain
            .chat(&ChatRequest::user("Why is the sky blue?"), &Context::new())
            .await
            .expect("the backup serves");
        assert_eq!(reply.text(), "Rayleigh scattering.");
        assert_eq!(reply.served_by(), "backup");
    }
    // The key did go to both vendors...
    for v in [&down, &up] {
        let req = v.requests().pop().expect("the vendor was called");
        assert_eq!(
            req.header("authorization"),
            Some(format!("Bearer {API_KEY}").as_str())
        );
    }
    // ... and shutting down flushes everything to the receiver, from inside async code.
    guard.shutdown().expect("export to the receiver");

    let (text, spans, metrics) = wait_for(&log, &service, |spans, metrics| {
        spans.iter().any(|s| s.name == "chain e2e")
            && spans.iter().filter(|s| s.name.starts_with("chat ")).count() >= 2
            && metrics
                .iter()
                .any(|m| m == "gen_ai.client.operation.duration")
    })
    .await;

    let call = spans.iter().find(|s| s.name == "chain e2e").unwrap();
    assert_eq!(call.kind, "SPAN_KIND_INTERNAL");
    assert_eq!(
        call.attrs.get("gen_ai.operation.name").map(String::as_str),
        Some("chat")
    );
    assert_eq!(
        call.attrs.get("ripcord.served_by").map(String::as_str),
        Some("backup")
    );
    assert_eq!(
        call.attrs.get("ripcord.degraded").map(String::as_str),
        Some("true")
    );
    let fallback = call
        .events
        .iter()
        .find(|(name, _)| name == "ripcord.fallback")
        .unwrap_or_else(|| panic!("no fallback event on {call:#?}"));
    assert_eq!(
        fallback.1.get("ripcord.fallback.from").map(String::as_str),
        Some("primary")
    );
    assert_eq!(
        fallback.1.get("ripcord.fallback.to").map(String::as_str),
        Some("backup")
    );
    assert_eq!(
        fallback.1.get("error.type").map(String::as_str),
        Some("overloaded")
    );

    let first = spans
        .iter()
        .find(|s| s.name == "chat gpt-4o")
        .expect("first attempt span");
    let second = spans
        .iter()
        .find(|s| s.name == "chat gpt-4o-mini")
        .expect("second attempt span");
    for (s, model, n) in [(first, "gpt-4o", "1"), (second, "gpt-4o-mini", "2")] {
        assert_eq!(s.kind, "SPAN_KIND_CLIENT", "{s:#?}");
        assert_eq!(s.trace_id, call.trace_id);
        assert_eq!(
            s.parent_id, call.id,
            "attempt spans are children of the call span"
        );
        let a = |k: &str| s.attrs.get(k).map(String::as_str);
        assert_eq!(a("gen_ai.operation.name"), Some("chat"));
        assert_eq!(a("gen_ai.provider.name"), Some("openai"));
        assert_eq!(a("gen_ai.request.model"), Some(model));
        assert_eq!(a("gen_ai.request.stream"), Some("false"));
        assert_eq!(a("server.address"), Some("127.0.0.1"));
        assert_eq!(a("ripcord.attempt"), Some(n));
        assert_eq!(a("gen_ai.system"), None);
    }
    assert_eq!(
        first.attrs.get("error.type").map(String::as_str),
        Some("overloaded")
    );
    assert_eq!(first.status, "STATUS_CODE_ERROR");
    let a = |k: &str| second.attrs.get(k).map(String::as_str);
    assert_eq!(a("error.type"), None);
    assert_eq!(a("gen_ai.response.model"), Some("gpt-4o-mini"));
    assert_eq!(a("gen_ai.usage.input_tokens"), Some("12"));
    assert_eq!(a("gen_ai.usage.output_tokens"), Some("4"));
    assert!(
        a("gen_ai.response.finish_reasons").is_some_and(|v| v.contains("stop")),
        "{second:#?}"
    );

    for m in [
        "gen_ai.client.operation.duration",
        "gen_ai.client.token.usage",
        "ripcord.fallbacks",
        "ripcord.chain.calls",
    ] {
        assert!(
            metrics.iter().any(|x| x == m),
            "metric {m} not received: {metrics:?}"
        );
    }
    assert!(
        !text.contains(API_KEY) && !text.contains("7f3a9c2e41d84b6f"),
        "the API key reached the receiver"
    );
}

/// Runs the chain on a runtime from `runtime`, exporting over `protocol` to the receiver's
/// endpoint for it (skipped without a receiver).
fn export_from(runtime: &mut tokio::runtime::Builder, protocol: Protocol) {
    let Some(rx) = receiver() else { return };
    let endpoint = match protocol {
        Protocol::Grpc => rx.grpc,
        _ => rx.http,
    };
    runtime
        .enable_all()
        .build()
        .unwrap()
        .block_on(run_chain_and_check(protocol, endpoint, rx.log));
}

#[test]
fn grpc_export_from_a_current_thread_runtime_reaches_the_receiver() {
    export_from(
        &mut tokio::runtime::Builder::new_current_thread(),
        Protocol::Grpc,
    );
}

#[test]
fn http_export_from_a_multi_thread_runtime_reaches_the_receiver() {
    export_from(
        tokio::runtime::Builder::new_multi_thread().worker_threads(2),
        Protocol::HttpProtobuf,
    );
}
