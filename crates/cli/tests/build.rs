//! Chains built from config against chaos servers: redaction before cloud calls and active
//! health probes, as configured in TOML.
#![allow(clippy::unwrap_used, clippy::panic)] // test helpers fail the test by panicking

mod support;

use std::time::Duration;

use ripcord_chaos::{FakeVendor, Reply, Wire};
use ripcord_cli::{build, config};
use ripcord_core::{ChatModel, ChatRequest, Context, ErrorKind};

fn no_env(_: &str) -> Option<String> {
    None
}

/// A fake OpenAI vendor, and the chain of one link `cloud` to it with `extra` after its
/// section, parsed as `file` and built.
async fn one_link(file: &str, extra: &str) -> (FakeVendor, build::Built) {
    let vendor = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let link = support::openai_link("cloud", "gpt-4o", &vendor.base_url(), "sk-x");
    let text = format!("[chain]\norder = [\"cloud\"]\n{link}{extra}");
    let cfg = config::parse(file, &text, &no_env).unwrap();
    (vendor, build::build(&cfg).unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn redaction_masks_personal_data_before_the_cloud_and_restores_it() {
    let vendor = support::fake(
        Wire::OpenAi,
        Reply::text("I will write to [EMAIL_1] about card [BANK_CARD_1]."),
    )
    .await;
    let text = format!(
        "[chain]\norder = [\"cloud\"]\n[redaction]\nrestore = true\ncustom = [{{ label = \"EMPLOYEE\", pattern = 'EMP-\\d{{6}}' }}]\n\
         [[providers]]\nname = \"cloud\"\nkind = \"openai\"\nmodel = \"gpt-4o\"\nbase_url = \"{}/v1\"\napi_key = \"sk-x\"\n",
        vendor.base_url()
    );
    let cfg = config::parse("redact.toml", &text, &no_env).unwrap();
    let built = build::build(&cfg).unwrap();
    let req = ChatRequest::user(
        "我是张伟，邮箱 zhang.wei@example.com，卡号 4111 1111 1111 1111，工号 EMP-004217。请联系我。",
    );
    let answer = built.chain.chat(&req, &Context::new()).await.unwrap();
    let sent = vendor.requests()[0].json().unwrap()["messages"][0]["content"].to_string();
    assert!(
        !sent.contains("zhang.wei@example.com")
            && !sent.contains("4111 1111 1111 1111")
            && !sent.contains("EMP-004217"),
        "{sent}"
    );
    assert!(
        sent.contains("[EMAIL_1]")
            && sent.contains("[BANK_CARD_1]")
            && sent.contains("[EMPLOYEE_1]"),
        "{sent}"
    );
    assert_eq!(
        answer.text(),
        "I will write to zhang.wei@example.com about card 4111 1111 1111 1111."
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn configured_probes_reach_the_vendor_without_callers_and_stop_with_the_chain() {
    let probe = "[providers.probe]\ninterval_ms = 150\ntimeout_ms = 100\nprobe_healthy = true\n";
    let (vendor, built) = one_link("probe.toml", probe).await;
    assert_eq!(built.probers.len(), 1);
    // Bounded poll: the prober runs on its own; no caller ever sends a request here.
    let mut waited = Duration::ZERO;
    while vendor.hits() < 2 {
        assert!(
            waited < Duration::from_secs(10),
            "no probe reached the vendor in 10 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
        waited += Duration::from_millis(20);
    }
    let ready = built.readiness();
    assert!(ready["links"][0]["probe"].is_object(), "{ready}");
    assert!(built.probers[0].stats().ok >= 1);
    let links: Vec<_> = built
        .chain
        .links()
        .map(|l| l.id().name.to_string())
        .collect();
    assert_eq!(links, ["cloud"]);
    drop(built);
    // After the chain (and its probers) are gone, probing stops.
    let after_drop = vendor.hits();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        vendor.hits() <= after_drop + 1,
        "probes went on after the chain was dropped"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn lowest_cost_strategy_from_the_config_tries_the_cheaper_link_first() {
    let pricey = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let cheap = FakeVendor::start(Wire::OpenAi).await.unwrap();
    let text = format!(
        "[chain]\norder = [\"pricey\", \"cheap\"]\nstrategy = \"lowest_cost\"\n\
         [[providers]]\nname = \"pricey\"\nkind = \"openai\"\nmodel = \"gpt-4o\"\nbase_url = \"{}/v1\"\napi_key = \"sk-x\"\n\
         [[providers]]\nname = \"cheap\"\nkind = \"openai\"\nmodel = \"gpt-4o-mini\"\nbase_url = \"{}/v1\"\napi_key = \"sk-y\"\n",
        pricey.base_url(),
        cheap.base_url()
    );
    let cfg = config::parse("cost.toml", &text, &no_env).unwrap();
    let built = build::build(&cfg).unwrap();
    let answer = built
        .chain
        .chat(
            &ChatRequest::user("hi").with_max_tokens(100),
            &Context::new(),
        )
        .await
        .unwrap();
    assert_eq!(answer.served_by(), "cheap");
    assert_eq!(pricey.hits(), 0);
}

#[test]
fn strategy_mistakes_name_the_line_and_key() {
    let base = "[chain]\norder = [\"a\"]\nSTRATEGY\n[[providers]]\nname = \"a\"\nkind = \"ollama\"\nmodel = \"m\"\n";
    let e = config::parse(
        "s.toml",
        &base.replace("STRATEGY", "strategy = \"fastest\""),
        &no_env,
    )
    .unwrap_err();
    assert_eq!(
        (e.line, e.key.as_deref()),
        (Some(3), Some("chain.strategy"))
    );
    let e = config::parse(
        "s.toml",
        &base.replace(
            "STRATEGY",
            "strategy = \"weighted\"\n[chain.weights]\nb = 3",
        ),
        &no_env,
    )
    .unwrap_err();
    assert_eq!((e.line, e.key.as_deref()), (Some(5), Some("chain.weights")));
    assert!(e.message.contains("\"b\" is not a provider"), "{e}");
    let ok = config::parse(
        "s.toml",
        &base.replace(
            "STRATEGY",
            "strategy = \"lowest_latency\"\nmin_samples = 3\nindependent_fallbacks = true",
        ),
        &no_env,
    )
    .unwrap();
    assert_eq!(
        ok.routes[0].spec.strategy,
        config::Strategy::LowestLatency { min_samples: 3 }
    );
    assert!(ok.routes[0].spec.independent_fallbacks);
}

/// A replica builds (and answers) with `[state] backend = "redis"` while nothing listens at
/// the URL: building does no I/O, and calls run on local state.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread")]
async fn a_redis_backed_chain_builds_and_answers_while_redis_is_down() {
    let port = support::free_port();
    let extra = format!(
        "[providers.rate_limit]\nrpm = 600\n[state]\nbackend = \"redis\"\nurl = \"redis://127.0.0.1:{port}\"\n"
    );
    let (_vendor, built) = one_link("shared.toml", &extra).await;
    assert_eq!(built.readiness()["state"]["backend"], "redis");
    let answer = built
        .chain
        .chat(&ChatRequest::user("hi"), &Context::new())
        .await
        .unwrap();
    assert_eq!(answer.served_by(), "cloud");
    let state = built.readiness()["state"].clone();
    assert_eq!(state["degraded"], true, "{state}");
    assert_eq!(state["degradations"], 1, "{state}");
    assert!(state["local_calls"].as_u64().unwrap() >= 1, "{state}");
    // The link's health carries the shared breaker (its cached view; local state while
    // Redis is down), so /readyz and /status see it like a local one.
    let ready = built.readiness();
    assert_eq!(ready["links"][0]["breaker"]["state"], "closed", "{ready}");
}

/// The configured spells reach the shared breaker: with `[state] backend = "redis"`, every
/// re-trip without a close opens the breaker for twice as long, from `open_ms` up to
/// `open_max_ms`, as the in-process breaker does; read from the open key a REAL
/// `redis-server` holds (its TTL is the spell left plus the state TTL, 10 min).
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread")]
async fn a_shared_breaker_s_open_spell_grows_as_configured() {
    use ripcord_chaos::VendorError;
    let Some(redis) = support::redis("the shared spell test").await else {
        return;
    };
    let vendor = support::fake_failing(Wire::OpenAi, VendorError::ServerError).await;
    let text = format!(
        "[chain]\norder = [\"vendor\"]\n[[providers]]\nname = \"vendor\"\nkind = \"openai\"\nmodel = \"gpt-4o\"\nbase_url = \"{}/v1\"\napi_key = \"sk-x\"\n\
         [providers.retry]\nmax_attempts = 1\n\
         [providers.breaker]\nfailure_threshold = 1\nopen_ms = 200\nopen_max_ms = 500\nbackground_probe_ms = 0\n\
         [state]\nbackend = \"redis\"\nurl = \"{}\"\nop_timeout_ms = 1000\n",
        vendor.base_url(),
        redis.url()
    );
    let cfg = config::parse("spells.toml", &text, &no_env).unwrap();
    let built = build::build(&cfg).unwrap();
    let streak = || {
        redis.command(
            "EVAL \"return tonumber(redis.call('GET', KEYS[1]) or 0)\" 1 ripcord:v1:{vendor}:breaker:streak",
        )
    };
    let state_ttl_ms = 600_000;
    let mut left_ms = 0;
    for (n, spell_ms) in [(1, 200), (2, 400), (3, 500), (4, 500)] {
        // Trip 1 is the first failure; each later one, the half-open probe once the spell
        // before it is over.
        tokio::time::sleep(Duration::from_millis(left_ms + 30)).await;
        let e = built
            .chain
            .chat(&ChatRequest::user("hi"), &Context::new())
            .await
            .unwrap_err();
        assert_ne!(
            e.kind(),
            ErrorKind::CircuitOpen,
            "call {n} was refused: {e}"
        );
        // Outcomes reach Redis from the breaker's background reporter: poll for the trip.
        let until = std::time::Instant::now() + Duration::from_secs(3);
        while streak().as_deref() != Some(format!(":{n}").as_str()) {
            assert!(
                std::time::Instant::now() < until,
                "trip {n} never reached Redis (streak {:?})",
                streak()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let pttl: u64 = redis
            .command("PTTL ripcord:v1:{vendor}:breaker:open")
            .and_then(|r| r.trim_start_matches(':').parse().ok())
            .unwrap();
        left_ms = pttl.saturating_sub(state_ttl_ms);
        assert!(
            left_ms <= spell_ms && left_ms > spell_ms / 2,
            "trip {n}: {left_ms} ms left of the open spell, expected a spell of {spell_ms} ms"
        );
    }
    assert_eq!(
        vendor.hits(),
        4,
        "one failure and three probes reached the vendor"
    );
}

/// `[budget]` on local state: a tenant's tokens are charged around the whole chain, per tenant.
#[tokio::test(flavor = "multi_thread")]
async fn a_local_tenant_budget_refuses_a_spent_tenant_and_serves_another() {
    let (vendor, built) = one_link("budget.toml", "[budget]\ntokens_per_window = 60\n").await;
    let req = ChatRequest::user("hi").with_max_tokens(10);
    let acme = || Context::new().with_tenant("acme");
    let mut served = 0;
    let refusal = loop {
        match built.model.chat(&req, &acme()).await {
            Ok(_) => served += 1,
            Err(e) => break e,
        }
        assert!(served < 10, "the budget never ran out");
    };
    assert_eq!(refusal.kind(), ripcord_core::ErrorKind::BudgetExhausted);
    assert!((2..=3).contains(&served), "{served}");
    assert_eq!(vendor.hits(), served);
    let other = Context::new().with_tenant("globex");
    assert!(built.model.chat(&req, &other).await.is_ok());
    // Calls without a tenant share one anonymous account rather than none: they run out too.
    let mut anonymous = 0;
    while built.model.chat(&req, &Context::new()).await.is_ok() {
        anonymous += 1;
        assert!(anonymous < 10, "anonymous calls are not budgeted");
    }
    assert!((2..=3).contains(&anonymous), "{anonymous}");
}

/// A listening socket that takes no connection: its accept queue (backlog 0) is filled and
/// never drained, so the kernel drops every further SYN and a connect hangs until its
/// timeout — the way an unreachable host behaves, on loopback.
fn black_hole() -> (std::net::SocketAddr, Vec<std::net::TcpStream>) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(0).unwrap();
    let addr = listener.local_addr().unwrap();
    std::mem::forget(listener); // never accepted, open until the test process ends
    let mut filled = Vec::new();
    for _ in 0..8 {
        match std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            Ok(s) => filled.push(s),
            Err(_) => return (addr, filled), // the queue is full: SYNs are dropped now
        }
    }
    panic!("the backlog-0 listener on {addr} kept accepting connections");
}

/// Each provider's `timeouts.connect_ms` is what its connections are opened with (the build
/// once shared one client with a fixed 10 s connect limit, so the setting had no effect).
#[tokio::test(flavor = "multi_thread")]
async fn a_provider_s_connect_ms_bounds_its_connect_and_another_keeps_its_own() {
    let (addr, _filled) = black_hole();
    let text = format!(
        "[chain]\norder = [\"hasty\", \"patient\"]\n\
         [[providers]]\nname = \"hasty\"\nkind = \"openai\"\nmodel = \"gpt-4o\"\nbase_url = \"http://{addr}/v1\"\napi_key = \"sk-x\"\n\
         [providers.timeouts]\nconnect_ms = 300\n\
         [[providers]]\nname = \"patient\"\nkind = \"openai\"\nmodel = \"gpt-4o\"\nbase_url = \"http://{addr}/v1\"\napi_key = \"sk-y\"\n\
         [providers.timeouts]\nconnect_ms = 1500\n"
    );
    let cfg = config::parse("connect.toml", &text, &no_env).unwrap();
    let built = build::build(&cfg).unwrap();
    let started = std::time::Instant::now();
    let err = built
        .chain
        .chat(&ChatRequest::user("hi"), &Context::new())
        .await
        .unwrap_err();
    let took = started.elapsed();
    let attempts = err.attempts();
    let hasty: Vec<_> = attempts
        .iter()
        .filter(|a| &*a.provider == "hasty")
        .collect();
    let patient: Vec<_> = attempts
        .iter()
        .filter(|a| &*a.provider == "patient")
        .collect();
    assert!(!hasty.is_empty() && !patient.is_empty(), "{err:?}");
    for a in hasty.iter().chain(&patient) {
        assert_eq!(a.error_kind, Some(ErrorKind::Timeout), "{err:?}");
    }
    // Each attempt waited its own provider's limit: about 0.3 s and 1.5 s, never 10 s.
    let hasty_took: Duration = hasty.iter().map(|a| a.latency).sum();
    let patient_took: Duration = patient.iter().map(|a| a.latency).sum();
    let per = |d: Duration, n: usize| d / u32::try_from(n).unwrap();
    assert!(
        per(hasty_took, hasty.len()) >= Duration::from_millis(250)
            && per(hasty_took, hasty.len()) < Duration::from_millis(1000),
        "hasty attempts took {hasty_took:?} over {}",
        hasty.len()
    );
    assert!(
        per(patient_took, patient.len()) >= Duration::from_millis(1400)
            && per(patient_took, patient.len()) < Duration::from_millis(3000),
        "patient attempts took {patient_took:?} over {}",
        patient.len()
    );
    assert!(took < Duration::from_secs(10), "{took:?}");
}
