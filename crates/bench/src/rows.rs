//! The rows of the table and the models behind them.
//!
//! Every link of every chain carries the recommended stack of `ripcord-resilience` (outermost
//! first): breaker → bulkhead → retry → rate limit → the OpenAI adapter. Limits are generous
//! so that nothing refuses during the run — the point is what the policies cost when nothing
//! fails: RPM 10⁹, TPM 4·10⁹, 256 calls in flight, 3 attempts.
//!
//! The `chain_redis` row is the `chain` row with link 1's breaker and rate limit shared through
//! a `redis-server` child on loopback (`ripcord-redis`, default options: 50 ms per Redis
//! operation): what the Redis backend adds on the success path (the breaker admits from its
//! leased cached view and reports outcomes in the background; the GCRA script still runs once
//! per call). Without `redis-server` on PATH the row is skipped and the report
//! says why ([`redis_skipped`]).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::StreamExt;
use ripcord_chaos::{FakeOptions, FakeVendor, Wire};
use ripcord_core::chain::Strategy;
use ripcord_core::{Chain, ChatModel, ChatRequest, ChatResponse, Context, StreamEvent};
use ripcord_providers::{HttpClient, OpenAi, OpenAiConfig};
use ripcord_redis::server::RedisServer;
use ripcord_redis::{
    RedisState, SharedBreakerConfig, SharedRateLimitConfig, StateOptions, shared_breaker,
    shared_rate_limit,
};
use ripcord_resilience::{
    BreakerHandle, BreakerLayer, BreakerState, BulkheadLayer, ChatModelExt, ProbeLayer, Prober,
    RateLimitLayer, RedactLayer, RetryLayer,
};
use tokio::time::Instant;

use crate::floor::{HyperPost, RawPost};
use crate::rawhttp::RawClient;
use crate::runner::{Call, CallFuture, Row, Stats};

/// The model the adapters ask for.
pub(crate) const MODEL: &str = "gpt-4o-mini";
/// The API key sent upstream (the fake checks none).
pub(crate) const KEY: &str = "sk-bench-not-a-real-key";
/// The question.
pub(crate) const PROMPT: &str = "Why is the sky blue?";
/// The answer cap (keeps the rate limiter's token reservations realistic).
pub(crate) const MAX_TOKENS: u32 = 64;

/// Wraps a closure returning a future into a [`Call`].
pub(crate) fn call<F, Fut>(f: F) -> Call
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Option<Duration>, String>> + Send + 'static,
{
    Arc::new(move || -> CallFuture { Box::pin(f()) })
}

/// The request every ripcord row sends.
pub(crate) fn request() -> ChatRequest {
    ChatRequest::user(PROMPT).with_max_tokens(MAX_TOKENS)
}

/// What the OpenAI adapter puts on the wire, captured from a recording fake vendor, so the
/// floor sends byte-for-byte the same request.
#[derive(Debug, Clone)]
pub(crate) struct AdapterWire {
    /// The JSON body of a plain call.
    pub(crate) json_body: Vec<u8>,
    /// The JSON body of a streaming call.
    pub(crate) stream_body: Vec<u8>,
    /// Headers of a plain call, without those the HTTP client adds itself.
    pub(crate) json_headers: Vec<(String, String)>,
    /// Headers of a streaming call, likewise.
    pub(crate) stream_headers: Vec<(String, String)>,
}

fn own_headers(headers: &[(String, String)]) -> Vec<(String, String)> {
    const CLIENT_ADDED: &[&str] = &[
        "host",
        "content-length",
        "user-agent",
        "connection",
        "accept-encoding",
    ];
    headers
        .iter()
        .filter(|(n, _)| !CLIENT_ADDED.iter().any(|c| n.eq_ignore_ascii_case(c)))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
        .collect()
}

/// Captures the adapter's wire with an in-process recording fake.
pub(crate) async fn capture_adapter_wire() -> Result<AdapterWire, String> {
    let fake = FakeVendor::start_with(Wire::OpenAi, FakeOptions::default())
        .await
        .map_err(|e| format!("capture: bind: {e}"))?;
    let adapter = openai(&fake.base_url(), "primary", None)?;
    let req = request();
    adapter
        .chat(&req, &Context::new())
        .await
        .map_err(|e| format!("capture: chat: {e}"))?;
    let mut s = adapter
        .stream(&req, &Context::new())
        .await
        .map_err(|e| format!("capture: stream: {e}"))?;
    while let Some(ev) = s.next().await {
        ev.map_err(|e| format!("capture: stream: {e}"))?;
    }
    let sent = fake.requests();
    let [plain, streamed] = sent.as_slice() else {
        return Err(format!("capture: expected 2 requests, saw {}", sent.len()));
    };
    Ok(AdapterWire {
        json_body: plain.body.clone(),
        stream_body: streamed.body.clone(),
        json_headers: own_headers(&plain.headers),
        stream_headers: own_headers(&streamed.headers),
    })
}

/// The OpenAI Python SDK's request (the sync client of the venv's `openai` 3.57.0): its headers as captured from
/// the SDK, and the JSON it writes for `client.chat.completions.create(model=..., messages=...,
/// max_tokens=64)`.
pub(crate) fn sdk_wire() -> (Vec<(String, String)>, Vec<u8>) {
    let headers = [
        ("accept", "application/json"),
        ("content-type", "application/json"),
        ("authorization", "Bearer sk-bench-not-a-real-key"),
        ("user-agent", "OpenAI/Python 3.57.0"),
        ("x-stainless-lang", "python"),
        ("x-stainless-package-version", "3.57.0"),
        ("x-stainless-os", "Linux"),
        ("x-stainless-arch", "x64"),
        ("x-stainless-runtime", "CPython"),
        ("x-stainless-runtime-version", "3.11.7"),
        ("x-stainless-async", "false"),
        ("x-stainless-retry-count", "0"),
        ("x-stainless-read-timeout", "600"),
        ("accept-encoding", "gzip, deflate"),
    ];
    let body = format!(
        r#"{{"messages":[{{"role":"user","content":"{PROMPT}"}}],"model":"{MODEL}","max_tokens":{MAX_TOKENS}}}"#
    );
    (
        headers
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect(),
        body.into_bytes(),
    )
}

/// The HTTP client the chains share: ripcord's pooled client (hyper-util under rustls).
pub(crate) fn http_client() -> Result<HttpClient, String> {
    HttpClient::new(Duration::from_secs(10)).map_err(|e| format!("HTTP client: {e}"))
}

/// An OpenAI adapter on `base` (the fake's base URL, without `/v1`).
pub(crate) fn openai(
    base: &str,
    name: &str,
    client: Option<&HttpClient>,
) -> Result<OpenAi, String> {
    let mut cfg = OpenAiConfig::new(MODEL, KEY).with_base_url(format!("{base}/v1"));
    if let Some(c) = client {
        cfg = cfg.with_client(c.clone());
    }
    Ok(OpenAi::new(cfg)
        .map_err(|e| format!("adapter {name}: {e}"))?
        .named(name))
}

fn rate_limit() -> Result<RateLimitLayer, String> {
    RateLimitLayer::builder()
        .rpm(1_000_000_000)
        .tpm(4_000_000_000)
        .build()
        .map_err(|e| e.to_string())
}

fn bulkhead() -> Result<BulkheadLayer, String> {
    BulkheadLayer::builder()
        .max_in_flight(256)
        .max_queue(1024)
        .build()
        .map_err(|e| e.to_string())
}

/// A model with the full stack; returns it and its breaker's handle.
pub(crate) fn decorate<M: ChatModel + 'static>(
    model: M,
    breaker: BreakerLayer,
) -> Result<(Arc<dyn ChatModel>, BreakerHandle), String> {
    let b = model
        .with_rate_limit(rate_limit()?)
        .with_retry(RetryLayer::default())
        .with_bulkhead(bulkhead()?)
        .with_breaker(breaker);
    let handle = b.handle();
    Ok((Arc::new(b), handle))
}

/// A breaker that never trips during the run (its bookkeeping still runs on every call).
fn never_trips() -> Result<BreakerLayer, String> {
    BreakerLayer::builder()
        .consecutive_failures(u32::MAX)
        .build()
        .map_err(|e| e.to_string())
}

/// A breaker that trips on the first failure and stays open for the whole run.
pub(crate) fn trips_at_once() -> Result<BreakerLayer, String> {
    BreakerLayer::builder()
        .consecutive_failures(1)
        .open_for(Duration::from_secs(24 * 3600))
        .build()
        .map_err(|e| e.to_string())
}

/// Issue 10's options on top of the 3-link chain (all off for the plain rows).
#[derive(Default)]
struct Extras {
    strategy: Option<Strategy>,
    redact: bool,
    probe: bool,
}

/// A three-link chain: `first` on `first_url`, then two links on `ok_url`.
fn chain(
    first_url: &str,
    first_breaker: BreakerLayer,
    ok_url: &str,
) -> Result<(Chain, BreakerHandle), String> {
    chain_with(first_url, first_breaker, ok_url, Extras::default()).map(|(c, h, _)| (c, h))
}

/// [`chain`] with a link-order strategy, redaction on every link, or an active prober on link 1
/// (returned: it probes for as long as it is kept).
fn chain_with(
    first_url: &str,
    first_breaker: BreakerLayer,
    ok_url: &str,
    extras: Extras,
) -> Result<(Chain, BreakerHandle, Option<Prober>), String> {
    let client = http_client()?;
    let adapter = |url: &str, name: &str| -> Result<Arc<dyn ChatModel>, String> {
        let a = openai(url, name, Some(&client))?;
        Ok(if extras.redact {
            let layer = RedactLayer::builder().build().map_err(|e| e.to_string())?;
            Arc::new(layer.layer(a))
        } else {
            Arc::new(a)
        })
    };
    let first = adapter(first_url, "primary")?;
    let prober = if extras.probe {
        let layer = ProbeLayer::builder()
            .interval(Duration::from_millis(200))
            .timeout(Duration::from_millis(100))
            .probe_healthy(true)
            .build()
            .map_err(|e| e.to_string())?;
        Some(Prober::builder(Arc::clone(&first), layer).spawn())
    } else {
        None
    };
    let (primary, handle) = decorate(first, first_breaker)?;
    let (secondary, _) = decorate(adapter(ok_url, "secondary")?, BreakerLayer::default())?;
    let (tertiary, _) = decorate(adapter(ok_url, "tertiary")?, BreakerLayer::default())?;
    let mut b = Chain::builder()
        .link_arc(primary)
        .link_arc(secondary)
        .link_arc(tertiary)
        .deadline(Duration::from_secs(30));
    if let Some(s) = extras.strategy {
        b = b.strategy(s);
    }
    let chain = b.build().map_err(|e| format!("chain: {e}"))?;
    Ok((chain, handle, prober))
}

/// Why the `chain_redis` row was skipped, once [`build`] has tried to start Redis.
static REDIS_SKIPPED: OnceLock<String> = OnceLock::new();

/// The report's note when the `chain_redis` row was skipped (empty otherwise).
pub(crate) fn redis_skipped() -> Vec<String> {
    REDIS_SKIPPED
        .get()
        .map(|why| vec![format!("row chain_redis skipped: {why}")])
        .unwrap_or_default()
}

/// The [`chain`] row's chain with link 1's breaker and rate limit shared through Redis (same
/// limits, same retry and bulkhead in between); links 2 and 3 as in [`chain`].
async fn redis_chain(ok_url: &str, redis: &RedisServer) -> Result<(Chain, RedisState), String> {
    let state = RedisState::connect_with(&redis.url(), StateOptions::default())
        .await
        .map_err(|e| e.to_string())?;
    let client = http_client()?;
    // GCRA intervals are whole microseconds: 60 M per minute is the largest limit that still
    // runs both cells (a larger one reads as "no limit" and skips the script's writes).
    let limits = SharedRateLimitConfig::default()
        .rpm(60_000_000)
        .tpm(60_000_000);
    let limited = shared_rate_limit(
        openai(ok_url, "primary", Some(&client))?,
        state.clone(),
        limits,
    )
    .map_err(|e| e.to_string())?;
    let inner = limited
        .with_retry(RetryLayer::default())
        .with_bulkhead(bulkhead()?);
    let primary = shared_breaker(inner, state.clone(), SharedBreakerConfig::default())
        .map_err(|e| e.to_string())?;
    let (secondary, _) = decorate(
        openai(ok_url, "secondary", Some(&client))?,
        BreakerLayer::default(),
    )?;
    let (tertiary, _) = decorate(
        openai(ok_url, "tertiary", Some(&client))?,
        BreakerLayer::default(),
    )?;
    let chain = Chain::builder()
        .link(primary)
        .link_arc(secondary)
        .link_arc(tertiary)
        .deadline(Duration::from_secs(30))
        .build()
        .map_err(|e| format!("chain: {e}"))?;
    Ok((chain, state))
}

fn check(r: &ChatResponse, served_by: &str) -> Result<(), String> {
    if r.served_by() != served_by {
        return Err(format!(
            "served by {:?}, expected {served_by:?}",
            r.served_by()
        ));
    }
    if r.text().is_empty() {
        return Err("empty answer".into());
    }
    Ok(())
}

fn chat_call<M: ChatModel + Clone + 'static>(model: M, served_by: &'static str) -> Call {
    let req = Arc::new(request());
    call(move || {
        let model = model.clone();
        let req = req.clone();
        async move {
            let r = model
                .chat(&req, &Context::new())
                .await
                .map_err(|e| e.to_string())?;
            check(&r, served_by)?;
            Ok(None)
        }
    })
}

fn stream_call<M: ChatModel + Clone + 'static>(model: M) -> Call {
    let req = Arc::new(request());
    call(move || {
        let model = model.clone();
        let req = req.clone();
        async move {
            let start = Instant::now();
            let mut s = model
                .stream(&req, &Context::new())
                .await
                .map_err(|e| e.to_string())?;
            let mut first = None;
            let mut finished = false;
            while let Some(ev) = s.next().await {
                let ev = ev.map_err(|e| e.to_string())?;
                if first.is_none() && ev.is_content() {
                    first = Some(start.elapsed());
                }
                if matches!(ev, StreamEvent::Finish { .. }) {
                    finished = true;
                }
            }
            match (first, finished) {
                (Some(d), true) => Ok(Some(d)),
                _ => Err("the stream ended without content or a finish event".into()),
            }
        }
    })
}

fn row(
    key: &'static str,
    label: &'static str,
    floor: Option<&'static str>,
    via: &'static [&'static str],
    call: Call,
    meters: usize,
) -> Row {
    Row {
        key,
        label,
        floor,
        via,
        call,
        stats: Stats::new(meters),
    }
}

/// Where the rows send their requests.
#[derive(Debug, Clone)]
pub(crate) struct Targets {
    /// The upstream that answers.
    pub(crate) ok: String,
    /// The upstream that answers 503.
    pub(crate) down: String,
    /// The gateway (`ripcord serve`), if running.
    pub(crate) gateway: Option<String>,
}

fn socket_addr(base: &str) -> Result<std::net::SocketAddr, String> {
    base.trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .map_err(|e| format!("{base:?} is not http://IP:PORT: {e}"))
}

/// Builds every HTTP row. `meters` is the number of child processes measured.
pub(crate) async fn build(
    t: &Targets,
    wire: &AdapterWire,
    meters: usize,
) -> Result<(Vec<Row>, Vec<Arc<RawClient>>), String> {
    let chat_url = |base: &str| format!("{base}/v1/chat/completions");
    let (sdk_headers, sdk_body) = sdk_wire();
    let sdk_pairs: Vec<(&str, &str)> = sdk_headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let mut rows = Vec::new();
    let mut raws = Vec::new();

    let ceiling = Arc::new(RawClient::new(
        socket_addr(&t.ok)?,
        "/v1/chat/completions",
        &sdk_pairs,
        &sdk_body,
    ));
    raws.push(ceiling.clone());
    rows.push(row(
        "upstream_ceiling",
        "upstream ceiling: raw keep-alive client",
        None,
        &[],
        raw_call(ceiling),
        meters,
    ));

    let floor = RawPost::new(
        crate::floor::reqwest_client()?,
        &chat_url(&t.ok),
        &wire.json_headers,
        wire.json_body.clone(),
    )?;
    rows.push(row(
        "floor",
        "floor: reqwest POST + parse",
        None,
        &[],
        call(move || {
            let f = floor.clone();
            async move { f.json().await.map(|()| None) }
        }),
        meters,
    ));

    let hyper_floor = HyperPost::new(&chat_url(&t.ok), &wire.json_headers, wire.json_body.clone())?;
    rows.push(row(
        "floor_hyper",
        "hyper floor: hyper-util POST + parse",
        Some("floor"),
        &[],
        call(move || {
            let f = hyper_floor.clone();
            async move { f.json().await.map(|()| None) }
        }),
        meters,
    ));

    let adapter = openai(&t.ok, "primary", None)?;
    rows.push(row(
        "adapter",
        "OpenAI adapter alone",
        Some("floor"),
        &[],
        chat_call(adapter.clone(), "primary"),
        meters,
    ));

    let (ok_chain, _) = chain(&t.ok, BreakerLayer::default(), &t.ok)?;
    rows.push(row(
        "chain",
        "chain: 3 decorated links, link 1 serves",
        Some("floor"),
        &[],
        chat_call(ok_chain.clone(), "primary"),
        meters,
    ));

    // Issue 11: the same chain with link 1's state on Redis. A call that Redis did not serve
    // (it fell back to local state) counts as an error of the row, never as a fast call.
    let redis = match RedisServer::start().await.map_err(|e| e.to_string()) {
        Ok(r) => Some(r),
        Err(why) => {
            eprintln!("ripcord-bench: row chain_redis skipped: {why}");
            let _ = REDIS_SKIPPED.set(why);
            None
        }
    };
    if let Some(redis) = redis {
        let (shared, state) = redis_chain(&t.ok, &redis).await?;
        let keep = Arc::new(redis);
        let shared_call = chat_call(shared, "primary");
        rows.push(row(
            "chain_redis",
            "chain, link 1 state on Redis",
            Some("chain"),
            &[],
            call(move || {
                let _keep = Arc::clone(&keep);
                let state = state.clone();
                let fut = shared_call();
                async move {
                    let r = fut.await;
                    if state.is_degraded() {
                        return Err("Redis failed: the call ran on local state".into());
                    }
                    r
                }
            }),
            meters,
        ));
    }

    // Issue 10's features on the same chain, each on its own: what they cost when nothing fails.
    let (lowest_latency, _, _) = chain_with(
        &t.ok,
        BreakerLayer::default(),
        &t.ok,
        Extras {
            strategy: Some(Strategy::LowestLatency { min_samples: 5 }),
            ..Extras::default()
        },
    )?;
    rows.push(row(
        "chain_lowest_latency",
        "chain, strategy lowest_latency",
        Some("chain"),
        &[],
        chat_call(lowest_latency, "primary"),
        meters,
    ));
    let (redacting, _, _) = chain_with(
        &t.ok,
        BreakerLayer::default(),
        &t.ok,
        Extras {
            redact: true,
            ..Extras::default()
        },
    )?;
    rows.push(row(
        "chain_redact",
        "chain, redaction on every link",
        Some("chain"),
        &[],
        chat_call(redacting, "primary"),
        meters,
    ));
    let (probed, _, prober) = chain_with(
        &t.ok,
        BreakerLayer::default(),
        &t.ok,
        Extras {
            probe: true,
            ..Extras::default()
        },
    )?;
    // The prober lives as long as the row's calls: it probes link 1 every 200 ms meanwhile.
    let prober = Arc::new(prober);
    let probed_call = chat_call(probed, "primary");
    rows.push(row(
        "chain_probed",
        "chain, link 1 probed every 200 ms",
        Some("chain"),
        &[],
        call(move || {
            let _keep = Arc::clone(&prober);
            probed_call()
        }),
        meters,
    ));

    let (failover, _) = chain(&t.down, never_trips()?, &t.ok)?;
    rows.push(row(
        "failover",
        "failover: link 1 503 -> link 2",
        Some("floor"),
        &[],
        chat_call(failover, "secondary"),
        meters,
    ));

    let (skip, handle) = chain(&t.down, trips_at_once()?, &t.ok)?;
    // One call trips link 1's breaker; it stays open for the whole run.
    let first = skip
        .chat(&request(), &Context::new())
        .await
        .map_err(|e| format!("skip: tripping call: {e}"))?;
    check(&first, "secondary")?;
    if handle.state() != BreakerState::Open {
        return Err(format!(
            "skip: link 1's breaker is {:?} after a 503, expected open",
            handle.state()
        ));
    }
    rows.push(row(
        "skip",
        "skip: link 1 breaker open -> link 2",
        Some("floor"),
        &[],
        chat_call(skip, "secondary"),
        meters,
    ));

    let stream_floor = RawPost::new(
        crate::floor::reqwest_client()?,
        &chat_url(&t.ok),
        &wire.stream_headers,
        wire.stream_body.clone(),
    )?;
    rows.push(row(
        "stream_floor",
        "stream floor: first SSE text event",
        None,
        &[],
        call(move || {
            let f = stream_floor.clone();
            async move { f.sse_first_content().await.map(Some) }
        }),
        meters,
    ));
    rows.push(row(
        "stream_adapter",
        "stream: adapter, first content event",
        Some("stream_floor"),
        &[],
        stream_call(adapter),
        meters,
    ));
    rows.push(row(
        "stream_chain",
        "stream: chain, first content event",
        Some("stream_floor"),
        &[],
        stream_call(ok_chain),
        meters,
    ));

    let sdk_direct = RawPost::new(
        reqwest_plain()?,
        &chat_url(&t.ok),
        &sdk_headers,
        sdk_body.clone(),
    )?;
    rows.push(row(
        "sdk_direct",
        "SDK wire -> upstream directly",
        None,
        &[],
        call(move || {
            let f = sdk_direct.clone();
            async move { f.json().await.map(|()| None) }
        }),
        meters,
    ));
    if let Some(gw) = &t.gateway {
        let via_gw = RawPost::new(
            reqwest_plain()?,
            &chat_url(gw),
            &sdk_headers,
            sdk_body.clone(),
        )?;
        rows.push(row(
            "gateway",
            "SDK wire -> ripcord serve -> upstream",
            Some("sdk_direct"),
            &["gateway"],
            call(move || {
                let f = via_gw.clone();
                async move { f.json().await.map(|()| None) }
            }),
            meters,
        ));
        let raw_gw = Arc::new(RawClient::new(
            socket_addr(gw)?,
            "/v1/chat/completions",
            &sdk_pairs,
            &sdk_body,
        ));
        raws.push(raw_gw.clone());
        rows.push(row(
            "gateway_keepalive",
            "ripcord serve, raw keep-alive client",
            Some("upstream_ceiling"),
            &["gateway"],
            raw_call(raw_gw),
            meters,
        ));
    }
    Ok((rows, raws))
}

/// A plain reqwest client like the SDK's httpx one: pooled keep-alive, no ripcord settings.
fn reqwest_plain() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .tcp_nodelay(true)
        .build()
        .map_err(|e| format!("reqwest client: {e}"))
}

fn raw_call(client: Arc<RawClient>) -> Call {
    call(move || {
        let c = client.clone();
        async move {
            let r = c.call().await?;
            if r.status != 200 || r.body_len == 0 {
                return Err(format!(
                    "raw client: status {} with {} body bytes",
                    r.status, r.body_len
                ));
            }
            Ok(None)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row's call works against in-process fake vendors, and the skip row's link 1 is
    /// never called after its breaker opened.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_row_answers_against_fake_vendors() {
        let ok = FakeVendor::start_with(Wire::OpenAi, FakeOptions::fast())
            .await
            .unwrap();
        let down = FakeVendor::start_with(
            Wire::OpenAi,
            FakeOptions::default().with_script(ripcord_chaos::Script::Always(
                ripcord_chaos::Behavior::Error(ripcord_chaos::VendorError::Overloaded),
            )),
        )
        .await
        .unwrap();
        let targets = Targets {
            ok: ok.base_url(),
            down: down.base_url(),
            gateway: None,
        };
        let wire = capture_adapter_wire().await.unwrap();
        assert!(String::from_utf8_lossy(&wire.json_body).contains(PROMPT));
        assert!(String::from_utf8_lossy(&wire.stream_body).contains("\"stream\":true"));
        assert!(wire.json_headers.iter().any(|(n, _)| n == "authorization"));
        let (rows, raws) = build(&targets, &wire, 0).await.unwrap();
        let keys: Vec<&str> = rows.iter().map(|r| r.key).collect();
        let skipped = REDIS_SKIPPED.get();
        if let Some(why) = skipped {
            use std::io::Write as _;
            assert!(
                std::env::var_os("CI").is_none(),
                "CI requires the chain_redis row: {why}"
            );
            let _ = writeln!(std::io::stderr(), "SKIPPED: row chain_redis: {why}");
        }
        let expected: Vec<&str> = [
            "upstream_ceiling",
            "floor",
            "floor_hyper",
            "adapter",
            "chain",
            "chain_redis",
            "chain_lowest_latency",
            "chain_redact",
            "chain_probed",
            "failover",
            "skip",
            "stream_floor",
            "stream_adapter",
            "stream_chain",
            "sdk_direct",
        ]
        .into_iter()
        .filter(|k| *k != "chain_redis" || skipped.is_none())
        .collect();
        assert_eq!(keys, expected);
        // Link 1 of the failover chain and of the skip chain (once, to trip it) so far.
        let down_hits = down.hits();
        for row in &rows {
            for _ in 0..3 {
                let own = (row.call)()
                    .await
                    .unwrap_or_else(|e| panic!("{}: {e}", row.key));
                let streams = row.key.starts_with("stream");
                assert_eq!(own.is_some(), streams, "{}", row.key);
            }
        }
        // Failover called link 1 three times; skip never did.
        assert_eq!(down.hits(), down_hits + 3);
        assert_eq!(
            raws[0].connects(),
            1,
            "the raw client keeps its connection alive"
        );
    }
}
