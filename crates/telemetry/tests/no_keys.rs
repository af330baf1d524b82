//! An API key never reaches telemetry: a chain of real OpenAI adapters, configured with a
//! distinctive fake key, against fake vendors — one of which echoes the key back in its error
//! body — exports no span, attribute, event, metric or log line that contains it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers: a failure is the test failing

use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_sdk::metrics::{
    InMemoryMetricExporter, InMemoryMetricExporterBuilder, Temporality,
};
use opentelemetry_sdk::trace::InMemorySpanExporter;
use ripcord_chaos::{Behavior, FakeVendor, Reply, Script, VendorError, Wire};
use ripcord_core::{Chain, ChatModel, ChatRequest, Context, stream};
use ripcord_providers::{OpenAi, OpenAiConfig};
use ripcord_telemetry::RedactingWriter;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;

const KEY: &str = "sk-ripcord-NEVER-EXPORT-5f2c9a0b7d1e43a8";
/// A part of the key distinctive enough that a truncated or masked copy would still show.
const KEY_TAIL: &str = "5f2c9a0b7d1e43a8";

#[derive(Clone, Default)]
struct Buf(Arc<Mutex<Vec<u8>>>);

impl io::Write for Buf {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Buf {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

fn openai(vendor: &FakeVendor, name: &str) -> Arc<dyn ChatModel> {
    let cfg = OpenAiConfig::new("gpt-4o", KEY.to_owned())
        .with_base_url(format!("{}/v1", vendor.base_url()));
    // The adapter records its own attempt spans.
    Arc::new(OpenAi::new(cfg).unwrap().named(name))
}

#[tokio::test]
async fn no_exported_span_attribute_metric_or_log_line_contains_the_api_key() {
    let echo = FakeVendor::start(Wire::OpenAi).await.unwrap();
    echo.set_script(Script::Always(Behavior::Status {
        status: 401,
        body: format!(
            r#"{{"error":{{"message":"Incorrect API key provided: {KEY}. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}}}"#
        ),
        headers: vec![("content-type".into(), "application/json".into())],
    }));
    let busy = FakeVendor::start(Wire::OpenAi).await.unwrap();
    busy.set_script(Script::Always(Behavior::Error(VendorError::Overloaded)));
    let ok = FakeVendor::start(Wire::OpenAi).await.unwrap();
    ok.set_script(Script::Always(Behavior::Reply(
        Reply::text("fine").with_chunks(2),
    )));

    let spans = InMemorySpanExporter::default();
    let metrics: InMemoryMetricExporter = InMemoryMetricExporterBuilder::new()
        .with_temporality(Temporality::Cumulative)
        .build();
    let telemetry = ripcord_telemetry::init()
        .ignore_environment()
        .filter("trace")
        .record_content(true)
        .span_exporter(spans.clone())
        .metric_exporter(metrics.clone())
        .build()
        .unwrap();
    let redactor = telemetry.redactor().clone();
    let (layer, guard) = telemetry.into_parts();
    // Our own crates' log lines, unredacted: they must be clean by construction.
    let ours = Buf::default();
    // Everything at TRACE (HTTP stack included), through the redacting writer.
    let all = Buf::default();
    let ours_w = ours.clone();
    let all_w = all.clone();
    let subscriber = tracing_subscriber::registry()
        .with(layer)
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(move || ours_w.clone())
                .with_filter(Targets::new().with_target("ripcord", LevelFilter::TRACE)),
        )
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(RedactingWriter::new(move || all_w.clone(), redactor))
                .with_filter(LevelFilter::TRACE),
        );
    let _default = tracing::subscriber::set_default(subscriber);

    let chain = Chain::builder()
        .name("keys")
        .link_arc(openai(&echo, "echo"))
        .link_arc(openai(&busy, "busy"))
        .link_arc(openai(&ok, "ok"))
        .deadline(Duration::from_secs(30))
        .build()
        .unwrap();
    let req = ChatRequest::user("hello");
    let reply = chain.chat(&req, &Context::new()).await.unwrap();
    assert_eq!(reply.served_by(), "ok");
    let streamed = stream::collect(chain.stream(&req, &Context::new()).await.unwrap())
        .await
        .unwrap();
    assert_eq!(streamed.text(), "fine");

    // The key really was configured and sent: the test would catch a leak.
    for v in [&echo, &busy, &ok] {
        let r = v.requests().pop().unwrap();
        assert_eq!(
            r.header("authorization"),
            Some(format!("Bearer {KEY}").as_str())
        );
    }

    guard.flush().unwrap();
    let exported = spans.get_finished_spans().unwrap();
    assert!(
        exported.len() >= 8,
        "two chain spans and six attempt spans: {}",
        exported.len()
    );
    assert!(
        exported.iter().any(|s| s.name == "chat gpt-4o"
            && s.attributes
                .iter()
                .any(|kv| kv.key.as_str() == "error.type" && kv.value.as_str() == "auth")),
        "the echoing vendor's failure is in the export"
    );
    let span_dump = format!("{exported:#?}");
    let metric_dump = format!("{:#?}", metrics.get_finished_metrics().unwrap());
    let ours = ours.text();
    let all = all.text();
    assert!(
        ours.contains("ripcord.fallback"),
        "our log lines were captured: {ours}"
    );
    assert!(all.contains("ripcord.fallback"));
    for (what, text) in [
        ("spans", &span_dump),
        ("metrics", &metric_dump),
        ("ripcord log lines", &ours),
        ("all log lines (redacted)", &all),
    ] {
        assert!(
            !text.contains(KEY_TAIL),
            "the API key appears in {what}:\n{text}"
        );
    }
}
