//! The rows of the table and the models behind them.
//!
//! Every link of every chain carries the recommended stack of `ripcord-resilience` (outermost
//! first): breaker → bulkhead → retry → rate limit → the OpenAI adapter. Limits are generous
//! so that nothing refuses during the run — the point is what the policies cost when nothing
//! fails: RPM 10⁹, TPM 4·10⁹, 256 calls in flight, 3 attempts.
//!
//! The `chain_redis` row is the `chain` row with link 1's breaker and rate limit shared through
//! a `redis-server` child on loopback (`ripcord-redis`, default options but 250 ms per Redis
//! operation: see `redis::state_options`): what the Redis backend adds on the success path (the breaker admits from its
//! leased cached view and reports outcomes in the background; the rate limit spends leased
//! blocks of requests, one script call per block). `failover_redis` is the `failover` row with link 1's breaker on Redis (every
//! failure reported to the shared count), and [`trip_spread`] measures how one replica's trip
//! reaches the others. Without `redis-server` on PATH these are skipped and the report says why
//! ([`redis_skipped`]).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use ripcord_core::chain::Strategy;
use ripcord_core::{ChatModel, ChatResponse, Context, StreamEvent};
use ripcord_redis::RedisState;
use ripcord_redis::server::RedisServer;
use ripcord_resilience::{BreakerPolicy, BreakerState};
use tokio::time::Instant;

use crate::floor::{HyperPost, RawPost};
use crate::rawhttp::RawClient;
use crate::runner::{Call, CallFuture, Row, Stats};

mod budget;
mod chains;
mod redis;
mod wire;

pub(crate) use budget::target as budget_target;
use chains::{Extras, chain, chain_with, never_trips, pool_chain};
pub(crate) use chains::{decorate, trips_at_once};
use redis::{REDIS_SKIPPED, redis_chain, redis_failover};
pub(crate) use redis::{redis_skipped, trip_spread};
pub(crate) use wire::{AdapterWire, KEY, MODEL, capture_adapter_wire, request};
use wire::{openai, sdk_wire};
/// Wraps a closure returning a future into a [`Call`].
pub(crate) fn call<F, Fut>(f: F) -> Call
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Option<Duration>, String>> + Send + 'static,
{
    Arc::new(move || -> CallFuture { Box::pin(f()) })
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
    /// The bare proxy (forwarding alone), if running.
    pub(crate) proxy: Option<String>,
    /// The gateway with its ledger on SQLite, then on Postgres (`[store]`), when running.
    pub(crate) ledger_sqlite: Option<String>,
    pub(crate) ledger_postgres: Option<String>,
}

impl Targets {
    /// The upstream's two ends, and nothing else running.
    pub(crate) fn upstream(urls: &crate::upstream::Urls) -> Targets {
        Targets {
            ok: urls.ok.clone(),
            down: urls.down.clone(),
            gateway: None,
            proxy: None,
            ledger_sqlite: None,
            ledger_postgres: None,
        }
    }
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

    // The adapter's own request (`headers`, `body`) to the upstream, by the floor's client.
    let floor_post = |headers: &[(String, String)], body: &[u8]| {
        RawPost::new(
            crate::floor::reqwest_client()?,
            &chat_url(&t.ok),
            headers,
            body.to_vec(),
        )
    };
    rows.push(row(
        "floor",
        "floor: reqwest POST + parse",
        None,
        &[],
        json_call(floor_post(&wire.json_headers, &wire.json_body)?),
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

    let (ok_chain, _) = chain(&t.ok, BreakerPolicy::default(), &t.ok)?;
    rows.push(row(
        "chain",
        "chain: 3 decorated links, link 1 serves",
        Some("floor"),
        &[],
        chat_call(ok_chain.clone(), "primary"),
        meters,
    ));
    // Issue 42: the tenant budget with 1 and with 30,000 live sub-tenants.
    rows.extend(budget::rows(t, meters)?);

    // Issue 11: the same chain with link 1's state on Redis. A call that Redis did not serve
    // (it fell back to local state) counts as an error of the row, never as a fast call.
    let redis = match RedisServer::start().await.map_err(|e| e.to_string()) {
        Ok(r) => Some(Arc::new(r)),
        Err(why) => {
            eprintln!("ripcord-bench: row chain_redis skipped: {why}");
            let _ = REDIS_SKIPPED.set(why);
            None
        }
    };
    if let Some(redis) = &redis {
        let (shared, state) = redis_chain(&t.ok, redis).await?;
        rows.push(row(
            "chain_redis",
            "chain, link 1 state on Redis",
            Some("chain"),
            &[],
            on_redis(chat_call(shared, "primary"), state, redis),
            meters,
        ));
    }

    // Issue 10's features on the same chain, each on its own: what they cost when nothing fails.
    let (lowest_latency, _, _) = chain_with(
        &t.ok,
        BreakerPolicy::default(),
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
        BreakerPolicy::default(),
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
        BreakerPolicy::default(),
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

    // Issue 36: link 1 a pool of three deployments (all healthy): what balancing costs a call.
    let pooled = pool_chain(&t.ok, &t.ok)?;
    rows.push(row(
        "chain_pool",
        "chain, link 1 a pool of 3 (p2c)",
        Some("chain"),
        &[],
        chat_call(pooled, "primary"),
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

    if let Some(redis) = &redis {
        // Every failure of link 1 goes to the shared count (the breaker never trips here; the
        // trip's spread across replicas is measured on its own: `trip_spread`).
        let (shared, state) = redis_failover(&t.down, &t.ok, redis).await?;
        rows.push(row(
            "failover_redis",
            "failover, link 1 state on Redis",
            Some("failover"),
            &[],
            on_redis(chat_call(shared, "secondary"), state, redis),
            meters,
        ));
    }

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

    let stream_floor = floor_post(&wire.stream_headers, &wire.stream_body)?;
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

    // The SDK's Chat Completions request to `base`, by a plain client like the SDK's.
    let sdk_post = |base: &str| {
        RawPost::new(
            reqwest_plain()?,
            &chat_url(base),
            &sdk_headers,
            sdk_body.clone(),
        )
    };
    rows.push(row(
        "sdk_direct",
        "SDK wire -> upstream directly",
        None,
        &[],
        json_call(sdk_post(&t.ok)?),
        meters,
    ));
    if let Some(gw) = &t.gateway {
        rows.push(row(
            "gateway",
            "SDK wire -> ripcord serve -> upstream",
            Some("sdk_direct"),
            &["gateway"],
            json_call(sdk_post(gw)?),
            meters,
        ));
        // The same gateway with every call written to its ledger (issue 38: at most 1.1x the
        // gateway's p50), on SQLite and on Postgres.
        let ledgers = [
            (
                "gateway_ledger_sqlite",
                "SDK wire -> ripcord serve + ledger on SQLite -> upstream",
                &["gateway_ledger_sqlite"] as &'static [&'static str],
                &t.ledger_sqlite,
            ),
            (
                "gateway_ledger_postgres",
                "SDK wire -> ripcord serve + ledger on Postgres -> upstream",
                &["gateway_ledger_postgres"],
                &t.ledger_postgres,
            ),
        ];
        for (key, label, via, url) in ledgers {
            let Some(url) = url else { continue };
            rows.push(row(
                key,
                label,
                Some("gateway"),
                via,
                json_call(sdk_post(url)?),
                meters,
            ));
        }
        // The other two front doors, same chain, same upstream: what each door's dialect costs
        // beside Chat Completions' (issue 32: no door more than 10% slower).
        for (key, label, path, body, text_at) in door_wires() {
            let via = RawPost::new(
                reqwest_plain()?,
                &format!("{gw}{path}"),
                &sdk_headers,
                body.into_bytes(),
            )?;
            rows.push(row(
                key,
                label,
                Some("sdk_direct"),
                &["gateway"],
                call(move || {
                    let f = via.clone();
                    async move { f.answer(text_at).await.map(|()| None) }
                }),
                meters,
            ));
        }
        if let Some(px) = &t.proxy {
            rows.push(row(
                "bare_proxy",
                "SDK wire -> bare hyper proxy -> upstream",
                Some("sdk_direct"),
                &["proxy"],
                json_call(sdk_post(px)?),
                meters,
            ));
        }
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

/// `call` on a chain whose link 1 state is on `redis` (kept running while the call lives): a
/// call that Redis did not serve (it fell back to local state) counts as an error of the row,
/// never as a fast call.
fn on_redis(call_once: Call, state: RedisState, redis: &Arc<RedisServer>) -> Call {
    let keep = Arc::clone(redis);
    call(move || {
        let _keep = Arc::clone(&keep);
        let state = state.clone();
        let fut = call_once();
        async move {
            let r = fut.await;
            if state.is_degraded() {
                return Err("Redis failed: the call ran on local state".into());
            }
            r
        }
    })
}

/// The Messages and Responses doors' rows: key, label, path, the request body (the same prompt
/// and answer bound as the Chat Completions row's) and where the answer's text is.
fn door_wires() -> [(
    &'static str,
    &'static str,
    &'static str,
    String,
    &'static str,
); 2] {
    use crate::rows::wire::{MAX_TOKENS, MODEL, PROMPT};
    [
        (
            "gateway_messages",
            "Messages wire -> ripcord serve -> upstream",
            "/v1/messages",
            format!(
                r#"{{"model":"{MODEL}","max_tokens":{MAX_TOKENS},"messages":[{{"role":"user","content":"{PROMPT}"}}]}}"#
            ),
            "/content/0/text",
        ),
        (
            "gateway_responses",
            "Responses wire -> ripcord serve -> upstream",
            "/v1/responses",
            format!(
                r#"{{"model":"{MODEL}","max_output_tokens":{MAX_TOKENS},"input":"{PROMPT}","store":false}}"#
            ),
            "/output_text",
        ),
    ]
}

/// A plain reqwest client like the SDK's httpx one: pooled keep-alive, no ripcord settings.
fn reqwest_plain() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .tcp_nodelay(true)
        .build()
        .map_err(|e| format!("reqwest client: {e}"))
}

/// One POST of `post` a call, its JSON answer parsed.
fn json_call(post: RawPost) -> Call {
    call(move || {
        let f = post.clone();
        async move { f.json().await.map(|()| None) }
    })
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
mod tests;
