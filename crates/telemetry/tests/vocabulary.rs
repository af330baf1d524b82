//! The event vocabulary (`ripcord_core::telemetry::event`) and the emitters are held to each
//! other: every ripcord event a run emits is named in the vocabulary, the situations driven here
//! emit the names they should, and every name in the vocabulary is emitted by some source file
//! through its constant (never as a string literal the exporter would have to match by hand).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers: a failure is the test failing

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ripcord_chaos::{Behavior, FakeVendor, Script, VendorError, Wire};
use ripcord_core::telemetry::event;
use ripcord_core::testing::{ScriptedModel, StreamItem, text_stream};
use ripcord_core::{
    Capabilities, Chain, ChainBuilder, ChatModel, ChatRequest, ChatResponse, Context, Error,
    ErrorKind, Locality, StreamEvent, StreamPolicy, ToolSpec, stream,
};
use ripcord_providers::{OpenAi, OpenAiConfig};
use ripcord_resilience::{
    BreakerPolicy, CachePolicy, ChatModelExt, HedgeDelay, HedgePolicy, RetryOn, RetryPolicy,
    validator_fn,
};
use tracing::field::{Field, Visit};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;

/// Collects the message (the event name) of every event whose target is a ripcord crate.
#[derive(Clone, Default)]
struct Names(Arc<Mutex<BTreeSet<String>>>);

struct Message(Option<String>);

impl Visit for Message {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0 = Some(value.to_owned());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            self.0 = Some(format!("{value:?}"));
        }
    }
}

impl<S: tracing::Subscriber> Layer<S> for Names {
    fn on_event(&self, ev: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if !ev.metadata().target().starts_with("ripcord") {
            return;
        }
        let mut m = Message(None);
        ev.record(&mut m);
        if let Some(name) = m.0 {
            self.0.lock().unwrap().insert(name);
        }
    }
}

fn ask() -> ChatRequest {
    ChatRequest::user("Why is the sky blue?")
}

fn retry(attempts: u32) -> RetryPolicy {
    RetryPolicy::builder()
        .max_attempts(attempts)
        .base_delay(Duration::from_millis(1))
        .max_delay(Duration::from_millis(2))
        .build()
        .unwrap()
}

/// Builds `chain` and asks it the usual question.
async fn chat_on(chain: ChainBuilder) -> Result<ChatResponse, Error> {
    chain.build().unwrap().chat(&ask(), &Context::new()).await
}

/// Drives the chain, retry, breaker and adapter through the situations that name an event.
async fn drive() {
    // A failed link, a fallback, and an alert-kind failure (auth).
    chat_on(
        Chain::builder()
            .name("fallback")
            .link(ScriptedModel::new("primary").fail(ErrorKind::Auth))
            .link(ScriptedModel::new("backup").reply("ok")),
    )
    .await
    .unwrap();

    // The static reply.
    chat_on(
        Chain::builder()
            .name("static")
            .link(ScriptedModel::new("only").fail(ErrorKind::RateLimited))
            .static_reply("busy"),
    )
    .await
    .unwrap();

    // Every link failed and no static reply: the call ends in the error.
    chat_on(
        Chain::builder()
            .name("exhausted")
            .link(ScriptedModel::new("only").fail(ErrorKind::ServerError)),
    )
    .await
    .unwrap_err();

    // A link skipped for lacking tools.
    let chain = Chain::builder()
        .name("tools")
        .link(
            ScriptedModel::new("small")
                .with_caps(Capabilities::new(8_000, 1_000).with_locality(Locality::Local)),
        )
        .link(ScriptedModel::new("big").reply("called"))
        .build()
        .unwrap();
    let req = ask().with_tool(ToolSpec::new(
        "get_weather",
        "Current weather",
        serde_json::json!({"type": "object"}),
    ));
    chain.chat(&req, &Context::new()).await.unwrap();

    // A committed stream that restarts on the next link, and one that fails after commit.
    let flaky = || {
        ScriptedModel::new("flaky").stream_items(vec![
            (
                Duration::from_millis(1),
                StreamItem::Event(StreamEvent::text("Ray")),
            ),
            (
                Duration::ZERO,
                StreamItem::Error(Error::new(ErrorKind::ServerError, "dropped")),
            ),
        ])
    };
    let chain = Chain::builder()
        .name("restart")
        .link(flaky())
        .link(
            ScriptedModel::new("steady")
                .stream_items(text_stream(&["Rayleigh"], Duration::from_millis(1))),
        )
        .stream_policy(StreamPolicy::Restart)
        .build()
        .unwrap();
    stream::collect(chain.stream(&ask(), &Context::new()).await.unwrap())
        .await
        .unwrap();
    let chain = Chain::builder().name("cut").link(flaky()).build().unwrap();
    let s = chain.stream(&ask(), &Context::new()).await.unwrap();
    stream::collect(s).await.unwrap_err();

    // A retry scheduled, and an error class retry leaves alone.
    let m = ScriptedModel::new("r")
        .fail(ErrorKind::ServerError)
        .reply("ok")
        .with_retry(retry(2));
    let safe = Context::new().with_retry_safe(true);
    m.chat(&ask(), &safe).await.unwrap();
    for kind in [
        ErrorKind::Overloaded,
        ErrorKind::RateLimited,
        ErrorKind::Timeout,
    ] {
        let m = ScriptedModel::new("r2").fail(kind).with_retry(
            RetryPolicy::builder()
                .max_attempts(2)
                .retry_on(RetryOn::none())
                .build()
                .unwrap(),
        );
        m.chat(&ask(), &Context::new()).await.unwrap_err();
    }

    // A breaker that opens.
    let breaker = BreakerPolicy::builder()
        .consecutive_failures(1)
        .build()
        .unwrap();
    let m = ScriptedModel::new("b")
        .fail(ErrorKind::ServerError)
        .with_breaker(breaker);
    m.chat(&ask(), &Context::new()).await.unwrap_err();

    // A cache hit.
    let cache = CachePolicy::builder().build().unwrap();
    let m = ScriptedModel::new("c")
        .reply("cached")
        .reply("fresh")
        .with_cache(cache);
    m.chat(&ask(), &Context::new()).await.unwrap();
    m.chat(&ask(), &Context::new()).await.unwrap();

    // A hedge sent, and winning against a slow primary.
    let hedge = HedgePolicy::builder()
        .delay(HedgeDelay::Fixed(Duration::from_millis(1)))
        .build()
        .unwrap();
    let m = ScriptedModel::new("slow")
        .reply_after("late", Duration::from_millis(200))
        .with_hedge(ScriptedModel::new("fast").reply("early"), hedge);
    m.chat(&ask(), &Context::new().with_retry_safe(true))
        .await
        .unwrap();

    // An answer rejected by a validator.
    let m = ScriptedModel::new("v")
        .reply("not what was asked")
        .with_validation(validator_fn(|_, _| Err("rejected".to_owned())));
    m.chat(&ask(), &Context::new()).await.unwrap_err();

    // A vendor failure through a real adapter.
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    vendor.set_script(Script::Always(Behavior::Error(VendorError::ServerError)));
    let cfg = OpenAiConfig::new("gpt-4o", "sk-test".to_owned())
        .with_base_url(format!("{}/v1", vendor.base_url()));
    let adapter = OpenAi::new(cfg).unwrap();
    adapter.chat(&ask(), &Context::new()).await.unwrap_err();
}

#[tokio::test]
async fn every_emitted_event_is_in_the_vocabulary_and_the_driven_ones_are_emitted() {
    let names = Names::default();
    let _default =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(names.clone()));
    drive().await;
    let emitted = names.0.lock().unwrap().clone();

    let vocabulary: BTreeSet<&str> = event::ALL.iter().copied().collect();
    assert_eq!(vocabulary.len(), event::ALL.len(), "a name is listed twice");
    for name in &emitted {
        assert!(
            vocabulary.contains(name.as_str()),
            "{name:?} was emitted but is not in telemetry::event::ALL"
        );
    }
    for want in [
        event::LINK_FAILED,
        event::FALLBACK,
        event::ALERT,
        event::STATIC_REPLY,
        event::CHAIN_EXHAUSTED,
        event::LINK_SKIPPED,
        event::STREAM_RESTARTED,
        event::STREAM_FAILED,
        event::RETRY_SCHEDULED,
        event::RETRY_CLASS_NOT_RETRIED,
        event::BREAKER_TRANSITION,
        event::VENDOR_ERROR,
        event::CACHE_HIT,
        event::HEDGE_STARTED,
        event::HEDGE_WON,
        event::VALIDATION_FAILED,
    ] {
        assert!(
            emitted.contains(want),
            "{want} was not emitted: {emitted:?}"
        );
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every constant of the vocabulary is referenced by an emitter (`event::NAME`, or the
/// `alert::EVENT` it aliases) somewhere in the library and CLI sources, and no source names an
/// event of the vocabulary by its string.
#[test]
fn every_name_in_the_vocabulary_is_emitted_through_its_constant() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let names_rs = root.join("crates/core/src/telemetry/names.rs");
    let names_src = std::fs::read_to_string(&names_rs).unwrap();
    let event_mod = &names_src[names_src.find("pub mod event {").unwrap()..];
    let consts: Vec<&str> = event_mod
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub const "))
        .filter_map(|l| l.split(':').next())
        .filter(|n| *n != "ALL")
        .collect();
    assert_eq!(
        consts.len(),
        event::ALL.len(),
        "telemetry::event::ALL must list every event constant"
    );

    let mut files = Vec::new();
    for dir in ["crates", "xtask/src"] {
        rust_files(&root.join(dir), &mut files);
    }
    let sources: Vec<(PathBuf, String)> = files
        .into_iter()
        .filter(|p| p.components().any(|c| c.as_os_str() == "src"))
        .filter(|p| !p.ends_with("crates/core/src/telemetry/names.rs"))
        .filter(|p| !p.starts_with(root.join("crates/telemetry")))
        .map(|p| {
            let s = std::fs::read_to_string(&p).unwrap();
            (p, s)
        })
        .collect();
    for name in &consts {
        let needle = format!("event::{name}");
        let used = sources.iter().any(|(_, s)| s.contains(&needle))
            || (*name == "ALERT" && sources.iter().any(|(_, s)| s.contains("message = EVENT")));
        assert!(used, "no emitter uses telemetry::{needle}");
    }
    for value in event::ALL {
        let literal = format!("\"{value}\"");
        for (path, s) in &sources {
            for line in s.lines().filter(|l| l.contains(&literal)) {
                let t = line.trim_start();
                assert!(
                    t.starts_with("//")
                        || t.starts_with("pub const")
                        || t.contains(".with_intent("),
                    "{}: names the event {value} by its string, not its constant: {line}",
                    path.display()
                );
            }
        }
    }
}
