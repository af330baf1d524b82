//! One scenario run: fake vendors scripted on one shared timeline, the chain built around
//! them, N virtual users sending plain and streamed requests until the run's time is up, then
//! the records, the checks and the numbers.
//!
//! Everything runs on the caller's runtime, which must be a current-thread one (see
//! [`super::record`] for why the breaker checks need that); only the local model generates on
//! blocking threads of its own.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant as StdInstant};

use ripcord_cli::build::Wrap;
use ripcord_cli::routing::Route;
use ripcord_core::{ChatModel, ChatRequest, Context};

use super::capture::KeySink;
use super::chain::{LocalCache, Rig, Template, Whole, rig};
use super::invariants::{self, Check};
use super::observe::{REQUEST_ID, Recorder};
use super::record::{Records, TokenRec};
use super::recovery;
use super::reload::{self, Swap};
use super::scenario::{Rng, Scenario, mix};
use super::stats::{self, Summary};
use super::streams;

/// How a run loads the chain.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) users: usize,
    /// How long users keep sending.
    pub(crate) duration: Duration,
    /// Each request's deadline.
    pub(crate) deadline: Duration,
    pub(crate) seed: u64,
    /// Share of streamed requests.
    pub(crate) stream_share: f64,
    /// `max_tokens` of each request (small: the local model is slow on a small machine).
    pub(crate) max_tokens: u32,
    /// Lateness the deadline check forgives (scheduling on a loaded machine).
    pub(crate) tolerance: Duration,
    /// How long after `duration + deadline` the run still waits for its users.
    pub(crate) join_margin: Duration,
    /// Show the live progress line on stderr.
    pub(crate) progress: bool,
}

impl Settings {
    /// Users of a scenario that builds chains of its own (`vendor-declares-outage`,
    /// `embeddings_outage`): the run's, within 2 to 4.
    pub(crate) fn side_users(&self) -> usize {
        self.users.clamp(2, 4)
    }
}

#[cfg(test)]
impl Settings {
    /// The settings of the report tests: two users for `duration`, 1 s deadlines, seed 1.
    pub(crate) fn sample(duration: Duration) -> Settings {
        Settings {
            users: 2,
            duration,
            deadline: Duration::from_secs(1),
            seed: 1,
            stream_share: 0.5,
            max_tokens: 8,
            tolerance: Duration::from_millis(150),
            join_margin: Duration::from_secs(1),
            progress: false,
        }
    }
}

/// Prompts of the request mix.
const PROMPTS: &[&str] = &[
    "Why is the sky blue?",
    "Name a prime number.",
    "Say hello in French.",
    "What is two plus two?",
    "Give me one word for happy.",
    "What colour is grass?",
];

/// A finished scenario.
#[derive(Debug, Clone)]
pub(crate) struct ScenarioRun {
    pub(crate) scenario: Scenario,
    pub(crate) records: Records,
    /// Notes of the chain build (links that could not be built).
    pub(crate) notes: Vec<String>,
    pub(crate) invariants: Vec<Check>,
    pub(crate) expectations: Vec<Check>,
    pub(crate) summary: Summary,
    /// Wall time of the whole scenario, build included.
    pub(crate) wall: Duration,
}

impl ScenarioRun {
    /// Every invariant, then every expectation.
    pub(crate) fn checks(&self) -> Vec<&Check> {
        self.invariants.iter().chain(&self.expectations).collect()
    }

    /// True when every invariant and expectation passed.
    pub(crate) fn passed(&self) -> bool {
        self.invariants
            .iter()
            .chain(&self.expectations)
            .all(|c| c.passed)
    }

    /// Recomputes the checks (after more key-scan results were added to the records).
    pub(crate) fn recheck(&mut self, tolerance: Duration) {
        self.invariants = invariants::check_all(&self.records, tolerance.as_secs_f64() * 1000.0);
        self.invariants
            .extend(streams::check_streams(&self.records, &self.scenario));
        self.invariants
            .extend(recovery::check_recovery(&self.records, &self.scenario));
        self.invariants
            .extend(super::tokens::check_tokens(&self.records));
        self.invariants.extend(reload::check_reload(&self.records));
        self.expectations = invariants::expectations(&self.records, &self.scenario.expect);
    }
}

mod request;

#[cfg(test)]
use request::differs_from_whole;
use request::{chat_once, stream_once};

/// What every virtual user of a run shares.
#[derive(Clone, Copy)]
struct User<'a> {
    chain: &'a dyn ChatModel,
    routes: usize,
    rec: &'a Recorder,
    s: &'a Settings,
    stream_max: Duration,
    seed: u64,
    whole: Option<&'a Whole>,
}

/// One virtual user: requests until the run's time is up, with seeded think times and mix.
///
/// With several routes in the config, the user's requests take them in turn (offset by the
/// user's number), so routes that share a provider share its breaker, limiter and health under
/// the same checks as a single chain.
async fn user(u: usize, run: &User<'_>) {
    let User {
        chain,
        routes,
        rec,
        s,
        stream_max,
        seed,
        whole,
    } = *run;
    let mut rng = Rng::new(mix(
        seed ^ (u as u64 + 1).wrapping_mul(0x2545_F491_4F6C_DD1D)
    ));
    let mut n = 0usize;
    while rec.elapsed() < s.duration {
        n += 1;
        let id = format!("u{u}-{n}");
        let streamed = rng.next_f64() < s.stream_share;
        let prompt = PROMPTS[rng.below(PROMPTS.len() as u64) as usize];
        // One request in four has a side effect hanging on it: never to be sent twice after
        // a failure the vendor may have processed.
        let retry_safe = rng.below(4) != 0;
        let req = ChatRequest::user(prompt).with_max_tokens(s.max_tokens);
        let idx = rec.request_started(id.clone(), u, streamed, retry_safe, s.deadline);
        let mut ctx = Context::new()
            .with_timeout(s.deadline)
            .with_retry_safe(retry_safe)
            .with_metadata(REQUEST_ID, id);
        if routes > 1 {
            ctx = ctx.with_extension(Route((u + n) % routes));
        }
        if streamed {
            // As the gateway does: the deadline bounds getting an answer, and a streamed
            // answer may then run to the stream bound.
            ctx = ctx.with_stream_deadline(tokio::time::Instant::now() + stream_max);
        }
        // Unconstrained: tokio's cooperative budget would make `select!` (inside the breaker,
        // between its admission and the admitted call's first poll) yield when the task's
        // budget runs out, letting another task trip the breaker in between — and the checks
        // rely on that never happening (see `record`). Every await here still waits on real
        // I/O or timers, so the user cannot starve the rest.
        let (outcome, list) = tokio::task::unconstrained(async {
            if streamed {
                stream_once(chain, &req, &ctx, rec, idx, whole).await
            } else {
                chat_once(chain, &req, &ctx, rec, idx).await
            }
        })
        .await;
        rec.request_finished(idx, outcome, list);
        let think = Duration::from_millis(50 + rng.below(200));
        tokio::time::sleep(think).await;
    }
}

/// The live progress line: redrawn in place on a terminal, a line every two seconds otherwise.
async fn progress(label: &str, rec: &Recorder, s: &Settings) {
    let tty = std::io::stderr().is_terminal();
    let every = if tty {
        Duration::from_millis(200)
    } else {
        Duration::from_secs(2)
    };
    let mut tick = tokio::time::interval(every);
    tick.tick().await;
    loop {
        tick.tick().await;
        let l = &rec.live;
        let started = l.started.load(Ordering::Relaxed);
        let finished = l.finished.load(Ordering::Relaxed);
        let line = format!(
            "{label} {:>5.1}/{:.0} s · {started} requests · {} in flight · model {} · static {} · errors {}",
            rec.elapsed().as_secs_f64(),
            s.duration.as_secs_f64(),
            started.saturating_sub(finished),
            l.by_model.load(Ordering::Relaxed),
            l.by_static.load(Ordering::Relaxed),
            l.errors.load(Ordering::Relaxed),
        );
        let mut err = std::io::stderr().lock();
        let _ = if tty {
            write!(err, "\r\x1b[2K{line}")
        } else {
            writeln!(err, "{line}")
        };
        let _ = err.flush();
    }
}

/// Runs one scenario.
///
/// `keys` is the sink of the process's key-scanning layer (taken after the run);
/// `perturb` wraps each adapter outside the observers — only tests use it, to break an
/// invariant on purpose.
pub(crate) async fn run_scenario(
    scenario: &Scenario,
    label: &str,
    t: &Template,
    s: &Settings,
    cache: &Arc<LocalCache>,
    keys: Option<&Arc<KeySink>>,
    perturb: Option<Wrap>,
) -> Result<ScenarioRun, String> {
    let wall = StdInstant::now();
    t.check(scenario)?;
    let rec = Recorder::new();
    let rig = rig(t, scenario, &rec, cache, s.duration, s.seed, perturb).await?;
    // A config with its state on Redis: the scenario starts from empty shared state, not
    // from what the previous scenario's breakers and limits left there.
    if let Some(state) = rig.built.redis() {
        for name in t.names() {
            if state.forget_link(name).await.is_none() {
                return Err(format!(
                    "scenario {:?}: Redis did not answer while clearing link {name:?}'s shared state",
                    scenario.name
                ));
            }
        }
    }
    // Every route behind one switch (the config's budget, if any, around it), as the gateway
    // calls it; behind a swap when the scenario reloads the config mid-run.
    let direct = Arc::clone(&rig.built.model);
    let swap = Swap::new(Arc::clone(&direct));
    let chain: &dyn ChatModel = if scenario.load.reload.is_some() {
        &swap
    } else {
        direct.as_ref()
    };
    let routes = rig.built.routes.len();
    // One timeline for every vendor: scripts and records share the start.
    let start = rec.start();
    for (name, fake) in &rig.fakes {
        fake.set_script_since(scenario.script(name, s.duration, s.seed), start);
    }
    let scenario_seed = mix(s.seed ^ super::scenario::hash_str(&scenario.name));
    let n_users = s.users.max(scenario.load.min_users.unwrap_or(0));
    // A stream may run past its deadline, up to the (longest) stream bound of its route.
    let stream_max = t
        .config
        .routes
        .iter()
        .map(|r| Duration::from_millis(r.spec.stream_max_ms))
        .max()
        .unwrap_or(Duration::from_secs(600));
    let run = User {
        chain,
        routes,
        rec: &rec,
        s,
        stream_max,
        seed: scenario_seed,
        whole: rig.whole.as_ref(),
    };
    let users = futures::future::join_all((0..n_users).map(|u| user(u, &run)));
    let join_limit = s.duration + s.deadline.max(stream_max) + s.join_margin;
    // The build goes to the reload (which builds the next chain from it, when the scenario
    // has one) and comes back with every build made, to be dropped after the run.
    let reloading = reload::reload_at(
        scenario.load.reload.as_ref(),
        rig.built,
        &rig.config,
        &rig.hooks,
        &swap,
        &rec,
        start,
        s.duration,
    );
    let (joined, reloaded) = {
        let bounded = tokio::time::timeout(join_limit, futures::future::join(users, reloading));
        tokio::pin!(bounded);
        let r = if s.progress {
            tokio::select! {
                r = &mut bounded => r.ok(),
                () = progress(label, &rec, s) => None,
            }
        } else {
            bounded.await.ok()
        };
        match r {
            Some((_, reloaded)) => (true, Some(reloaded)),
            None => (false, None),
        }
    };
    if s.progress && std::io::stderr().is_terminal() {
        eprint!("\r\x1b[2K");
    }
    let mut records = Records {
        links: t.links.clone(),
        background_probe_ms: rig.background_probe_ms.clone(),
        hits: rig
            .fakes
            .iter()
            .map(|(n, f)| (n.clone(), f.hits()))
            .collect(),
        run_ms: s.duration.as_secs_f64() * 1000.0,
        stream_max_ms: stream_max.as_secs_f64() * 1000.0,
        join_limit_ms: join_limit.as_secs_f64() * 1000.0,
        joined,
        tokens: rig.tokens.as_ref().map(|t| {
            let registry = t.server.registry();
            TokenRec {
                lifetime_ms: t.lifetime.as_secs_f64() * 1000.0,
                exchanges: t.server.exchanges(),
                minted: t.server.minted(),
                expired_rejections: registry.expired_rejections(),
                unknown_rejections: registry.unknown_rejections(),
            }
        }),
        deployments: Rig::deployment_records(&rig.fakes, t, scenario, start, s.duration),
        ..Records::default()
    };
    let (builds, reload_rec) = reloaded.unwrap_or_default();
    records.reload = reload_rec;
    if let Some(rl) = &mut records.reload {
        reload::record_keys(rl, &rig.config, &rig.fakes, start);
    }
    drop(swap);
    drop(direct);
    drop(builds);
    drop(rig.fakes);
    rec.take_into(&mut records);
    if let Some(k) = keys {
        let (scanned, leaks) = k.take();
        records.scanned = scanned;
        records.leaks = leaks;
    }
    let summary = stats::summarize(&records);
    let mut run = ScenarioRun {
        scenario: scenario.clone(),
        records,
        notes: rig.notes,
        invariants: Vec::new(),
        expectations: Vec::new(),
        summary,
        wall: wall.elapsed(),
    };
    run.recheck(s.tolerance);
    Ok(run)
}

#[cfg(test)]
mod tests {
    use async_trait::async_trait;
    use ripcord_core::{Capabilities, ChatResponse, ChatStream, ModelId, Result};
    use tracing_subscriber::Layer;
    use tracing_subscriber::filter::LevelFilter;
    use tracing_subscriber::layer::SubscriberExt;

    use super::super::capture::KeyScanLayer;
    use super::super::chain::Builtin;
    use super::super::observe::wrap_only;
    use super::super::scenario::{STATIC, builtins};
    use super::*;

    /// A naive retry that retries every failure — what the invariants must catch.
    #[derive(Debug)]
    struct NaiveRetry(Arc<dyn ChatModel>);

    /// Makes `call` up to three times, until it succeeds.
    async fn thrice<T, F>(call: impl Fn() -> F) -> Result<T>
    where
        F: std::future::Future<Output = Result<T>>,
    {
        let mut last = call().await;
        for _ in 0..2 {
            if last.is_ok() {
                break;
            }
            last = call().await;
        }
        last
    }

    #[async_trait]
    impl ChatModel for NaiveRetry {
        fn id(&self) -> &ModelId {
            self.0.id()
        }
        fn capabilities(&self) -> &Capabilities {
            self.0.capabilities()
        }
        async fn chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
            thrice(|| self.0.chat(req, ctx)).await
        }
        async fn stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
            thrice(|| self.0.stream(req, ctx)).await
        }
    }

    fn settings() -> Settings {
        Settings {
            users: 3,
            duration: Duration::from_millis(1500),
            deadline: Duration::from_millis(2500),
            seed: 11,
            stream_share: 0.5,
            max_tokens: 8,
            tolerance: Duration::from_millis(300),
            join_margin: Duration::from_secs(5),
            progress: false,
        }
    }

    /// The built-in scenario `name`.
    fn builtin(name: &str) -> Scenario {
        builtins().into_iter().find(|sc| sc.name == name).unwrap()
    }

    /// `quota-exhausted`, out of quota from the start, so every request meets it.
    fn quota_from_the_start() -> Scenario {
        let mut quota = builtin("quota-exhausted");
        quota.phases[0].at = super::super::scenario::At::Fraction(0.0);
        quota
    }

    /// A scan for `t`'s keys in every event of this thread while the guard lives.
    fn key_scan(t: &Template) -> (Arc<KeySink>, tracing::subscriber::DefaultGuard) {
        let sink = KeySink::new(t.keys.clone());
        let subscriber = tracing_subscriber::registry()
            .with(KeyScanLayer::new(&sink).with_filter(LevelFilter::DEBUG));
        let guard = tracing::subscriber::set_default(subscriber);
        (sink, guard)
    }

    /// Whether `who` answered any request of `run`.
    fn served(run: &ScenarioRun, who: &str) -> bool {
        run.summary
            .served_by
            .iter()
            .any(|s| s.who == who && s.count > 0)
    }

    fn assert_every_invariant_holds(run: &ScenarioRun) {
        for c in &run.invariants {
            assert!(c.passed, "{c:?}");
        }
    }

    async fn quota_run(perturb: Option<Wrap>) -> ScenarioRun {
        let s = settings();
        let t = Template::builtin(s.deadline, false, s.seed).unwrap();
        let (sink, _guard) = key_scan(&t);
        let cache = Arc::new(LocalCache::default());
        run_scenario(
            &quota_from_the_start(),
            "test",
            &t,
            &s,
            &cache,
            Some(&sink),
            perturb,
        )
        .await
        .unwrap()
    }

    fn by_id<'a>(run: &'a ScenarioRun, id: &str) -> &'a Check {
        run.invariants
            .iter()
            .find(|c| c.id == id)
            .unwrap_or_else(|| panic!("no check {id}"))
    }

    #[tokio::test]
    async fn the_real_chain_keeps_every_invariant_when_quota_runs_out() {
        let run = quota_run(None).await;
        assert_every_invariant_holds(&run);
        let r = &run.records;
        assert!(r.requests.len() >= 6, "{} requests", r.requests.len());
        assert!(r.requests.iter().any(|q| q.streamed) && r.requests.iter().any(|q| !q.streamed));
        // The quota verdict reached us, and primary was never asked twice for one request.
        assert!(
            r.wires
                .iter()
                .any(|w| w.error_kind() == Some(ripcord_core::ErrorKind::QuotaExhausted))
        );
        assert!(served(&run, "backup"));
        // The breaker saw the quota failures and opened; the key scan saw the traffic.
        assert!(
            run.summary.breakers[0].trips >= 1,
            "{:?}",
            run.summary.breakers
        );
        assert!(r.scanned > 0);
        assert_primary_hits_observed(r);
    }

    /// Every request fake `primary` counted is a call the wire observer saw.
    fn assert_primary_hits_observed(r: &Records) {
        let seen = r.wires.iter().filter(|w| w.link == "primary").count();
        assert_eq!(r.hits["primary"], seen);
    }

    /// Two routes share `primary`: its quota runs out under both routes' traffic, and one
    /// breaker, one health record and the same checks cover both (a route never calls the
    /// provider while the breaker the other route's traffic opened refuses).
    #[tokio::test]
    async fn two_routes_sharing_a_provider_keep_every_invariant_with_one_breaker() {
        let s = settings();
        let t = Template::builtin_two_routes(s.deadline, s.seed).unwrap();
        assert_eq!(t.config.routes.len(), 2);
        let cache = Arc::new(LocalCache::default());
        let run = run_scenario(&quota_from_the_start(), "test", &t, &s, &cache, None, None)
            .await
            .unwrap();
        assert_every_invariant_holds(&run);
        let r = &run.records;
        assert!(r.requests.len() >= 6, "{} requests", r.requests.len());
        // "chat" fell back to backup, "draft" (primary only) to its static reply.
        assert!(
            served(&run, "backup") && served(&run, STATIC),
            "{:?}",
            run.summary.served_by
        );
        // One breaker for primary, tripped by both routes' failures together; every call that
        // reached primary went through it.
        let primary: Vec<_> = run
            .summary
            .breakers
            .iter()
            .filter(|b| b.link == "primary")
            .collect();
        assert_eq!(primary.len(), 1, "{:?}", run.summary.breakers);
        assert!(primary[0].trips >= 1, "{:?}", run.summary.breakers);
        assert_primary_hits_observed(r);
    }

    /// Claude three ways, without the local model (its tier is the static reply here):
    /// Anthropic's API is down, then Bedrock throttles. Every invariant holds, Bedrock served
    /// while it could, and every request to it carried a signature the fake accepted.
    #[tokio::test]
    async fn claude_three_ways_keeps_every_invariant_over_a_signing_bedrock() {
        let s = settings();
        let t = Template::builtin_chain(Builtin::Bedrock, s.deadline, false, s.seed).unwrap();
        assert_eq!(t.names(), ["claude", "claude-bedrock", "claude-vertex"]);
        assert!(
            t.keys.iter().any(|(n, k)| n == "claude-bedrock"
                && k == ripcord_chaos::bedrock::TEST_SECRET_ACCESS_KEY),
            "the key scan looks for the Bedrock secret"
        );
        let (sink, _guard) = key_scan(&t);
        let sc = builtin(super::super::scenario::CLAUDE_THREE_WAYS);
        assert!(t.check(&sc).is_ok(), "the scenario fits the Bedrock chain");
        let cache = Arc::new(LocalCache::default());
        let run = run_scenario(&sc, "test", &t, &s, &cache, Some(&sink), None)
            .await
            .unwrap();
        assert_every_invariant_holds(&run);
        assert!(
            served(&run, "claude-bedrock"),
            "{:?}",
            run.summary.served_by
        );
        assert!(served(&run, "claude-vertex"), "{:?}", run.summary.served_by);
        assert!(!served(&run, "claude"), "{:?}", run.summary.served_by);
        let r = &run.records;
        // Bedrock's throttling reached the chain as a rate limit, after it had answered.
        assert!(r.wires.iter().any(|w| w.link == "claude-bedrock"
            && w.error_kind() == Some(ripcord_core::ErrorKind::RateLimited)));
        // No Bedrock attempt failed on its signature.
        assert!(
            !r.wires.iter().any(|w| w.link == "claude-bedrock"
                && w.error_kind() == Some(ripcord_core::ErrorKind::Auth)),
        );
        assert!(r.scanned > 0);
    }

    #[tokio::test]
    async fn a_naive_retry_of_quota_exhausted_fails_the_never_retry_invariant() {
        let perturb = wrap_only("primary", |m| Arc::new(NaiveRetry(m)));
        let run = quota_run(Some(perturb)).await;
        let c = by_id(&run, "never-retry");
        assert!(!c.passed, "{c:?}");
        assert!(!run.passed());
        assert!(c.offender_count >= 1);
        for o in &c.offenders {
            let (id, why) = o.split_once(": ").unwrap();
            assert!(
                run.records.requests.iter().any(|q| q.id == id),
                "{id} is a request id"
            );
            assert!(
                why.starts_with("primary answered quota_exhausted, then was attempted"),
                "{o}"
            );
        }
        // The other invariants still hold: the checks single out what broke.
        for id in ["deadline", "half-open", "answered", "no-keys"] {
            assert!(by_id(&run, id).passed, "{:?}", by_id(&run, id));
        }
    }

    #[test]
    fn a_continued_answer_from_the_fakes_must_be_the_whole_answer() {
        let whole = Whole {
            text: "one two three four".to_owned(),
            links: ["primary".to_owned(), "backup".to_owned()].into(),
        };
        let by_fakes = ["primary".to_owned(), "backup".to_owned()];
        assert_eq!(
            differs_from_whole("one two three four", &by_fakes, Some(&whole)),
            None
        );
        let repeated = differs_from_whole("one two two three four", &by_fakes, Some(&whole));
        assert!(
            repeated.unwrap().contains("at byte 9"),
            "two then three differ at the 10th byte"
        );
        assert!(differs_from_whole("one two four", &by_fakes, Some(&whole)).is_some());
        // The local model continues in its own words: no whole answer to compare with.
        let with_local = ["primary".to_owned(), "local".to_owned()];
        assert_eq!(
            differs_from_whole("one two, and so on", &with_local, Some(&whole)),
            None
        );
        assert_eq!(differs_from_whole("x", &by_fakes, None), None);
    }
}
