//! One run of `vendor-declares-outage`: the fakes, the chain, the users, the observer of
//! ripcord's view and the page's timeline, on the caller's runtime.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use ripcord_chaos::status_page::{FakeStatusPage, PageMode};
use ripcord_chaos::{Behavior, FakeOptions, FakeVendor, Script, VendorError, Wire};
use ripcord_cli::build::status_watch::VendorWatch;
use ripcord_cli::build::{BuildHooks, Built, Wrap, build_with};
use ripcord_core::{ChatModel, ChatRequest, ChatResponse, ChatStream, Context, Result};

use super::super::chain::configs::link_policies;
use super::super::chain::fake_key;
use super::super::observe::wrap_only;
use super::super::run::Settings;
use super::super::scenario::{Rng, STATIC, hash_str, mix};
use super::checks::{BACKUP, ModeRec, PRIMARY, ReqRec, Variant, VariantRec, ViewRec};
use super::{INTERVAL, SAMPLE, TIMEOUT};

/// Traffic before the declaration (and after the restoration).
const HEALTHY: Duration = Duration::from_millis(600);
/// How long the declared outage lasts once ripcord acted on it; backup fails in its second
/// half.
const DECLARED: Duration = Duration::from_millis(1600);
/// Traffic after the unreadable page is readable again.
const AFTER: Duration = Duration::from_millis(400);
/// The longest wait for the poller to see a change: a poll after the backoff of three
/// failures in a row, with its timeout, and room on a loaded machine. Only a limit: each
/// wait ends as soon as its condition holds, and the checks judge how long it took.
const WAIT: Duration = Duration::from_millis(5_000);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The chain of the run: A (OpenAI wire, listening to the fake page) → B (Anthropic wire) →
/// static reply. B is tried once per request and its breaker never trips here, so every
/// request that B fails shows A's place behind it in its attempts.
fn config_text(variant: Variant, a: &str, b: &str, page: &str, deadline: Duration) -> String {
    format!(
        concat!(
            r#"
[chain]
order = ["{PRIMARY}", "{BACKUP}"]
deadline_ms = {deadline}
min_attempt_ms = 300
static_reply = "The assistant is busy right now; please try again in a few minutes."

[[providers]]
name = "{PRIMARY}"
kind = "openai"
model = "gpt-4o"
base_url = "{a}/v1"
api_key = "${{RIPCORD_CHAOS_PRIMARY_KEY}}"
"#,
            link_policies!(),
            r#"[providers.status_page]
url = "{page}"
components = ["API"]
format = "statuspage"
interval_ms = {interval}
timeout_ms = {timeout}
on_major_outage = "{policy}"

[[providers]]
name = "{BACKUP}"
kind = "anthropic"
model = "claude-sonnet-4-5"
base_url = "{b}"
api_key = "${{RIPCORD_CHAOS_BACKUP_KEY}}"
[providers.retry]
max_attempts = 1
[providers.breaker]
failure_threshold = 1000000
open_ms = 1000
[providers.timeouts]
connect_ms = 500
first_token_ms = 1000
idle_ms = 500
"#
        ),
        PRIMARY = PRIMARY,
        BACKUP = BACKUP,
        a = a,
        b = b,
        page = page,
        deadline = deadline.as_millis(),
        interval = INTERVAL.as_millis(),
        timeout = TIMEOUT.as_millis(),
        policy = variant.policy(),
    )
}

/// Wraps A's adapter: when each call to it started (every call sent to vendor A).
#[derive(Debug)]
struct CallLog {
    inner: Arc<dyn ChatModel>,
    calls: Arc<Mutex<Vec<Instant>>>,
}

impl CallLog {
    /// The build hook that wraps A's adapter in one, logging to `calls`.
    fn hook(calls: &Arc<Mutex<Vec<Instant>>>) -> Wrap {
        let calls = Arc::clone(calls);
        wrap_only(PRIMARY, move |inner| {
            Arc::new(CallLog {
                inner,
                calls: Arc::clone(&calls),
            })
        })
    }
}

#[async_trait]
impl ChatModel for CallLog {
    model_identity!(inner);
    async fn chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        lock(&self.calls).push(Instant::now());
        self.inner.chat(req, ctx).await
    }
    async fn stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        lock(&self.calls).push(Instant::now());
        self.inner.stream(req, ctx).await
    }
    fn bounds_itself(&self) -> bool {
        self.inner.bounds_itself()
    }
}

/// What one run shares between its users, its observer and its timeline.
struct Run<'a> {
    start: Instant,
    stop: AtomicBool,
    built: &'a Built,
    watch: &'a VendorWatch,
    s: &'a Settings,
    requests: Mutex<Vec<ReqRec>>,
    view: Mutex<Vec<ViewRec>>,
}

impl Run<'_> {
    fn ms(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.start).as_secs_f64() * 1000.0
    }

    fn now_ms(&self) -> f64 {
        self.ms(Instant::now())
    }

    /// Ripcord's view of A now.
    fn sample(&self) -> ViewRec {
        let st = self.watch.state();
        let at_ms = self.now_ms();
        ViewRec {
            at_ms,
            prev_ms: at_ms,
            acting: st.acting,
            demoted: self.built.switches.demoted(PRIMARY).unwrap_or(false),
            held_open: self.built.switches.vendor_open(PRIMARY).unwrap_or(false),
            status: st.status.map(|s| s.as_str().to_owned()),
            failures: st.failures,
            last_error: st.last_error,
        }
    }

    /// Waits until `done` holds of ripcord's view (at most [`WAIT`]); false when it ran out.
    async fn until(&self, done: impl Fn(&ViewRec) -> bool) -> bool {
        let limit = Instant::now() + WAIT;
        loop {
            if done(&self.sample()) {
                return true;
            }
            if Instant::now() >= limit {
                return false;
            }
            tokio::time::sleep(SAMPLE).await;
        }
    }
}

/// Keeps `v` when it differs from the last view kept.
fn keep_if_changed(view: &Mutex<Vec<ViewRec>>, v: ViewRec) {
    let key = |x: &ViewRec| {
        (
            x.acting,
            x.demoted,
            x.held_open,
            x.status.clone(),
            x.failures,
            x.last_error.clone(),
        )
    };
    let mut view = lock(view);
    if view.last().is_none_or(|l| key(l) != key(&v)) {
        view.push(v);
    }
}

/// Samples ripcord's view every [`SAMPLE`] and keeps each change, until the run stops.
async fn observe(run: &Run<'_>) {
    let mut prev: Option<f64> = None;
    loop {
        let mut v = run.sample();
        v.prev_ms = prev.unwrap_or(v.at_ms);
        prev = Some(v.at_ms);
        keep_if_changed(&run.view, v);
        if run.stop.load(Ordering::SeqCst) {
            return;
        }
        tokio::time::sleep(SAMPLE).await;
    }
}

/// One virtual user: plain requests with short think times until the run stops.
async fn user(u: usize, run: &Run<'_>) {
    let chain = Arc::clone(&run.built.model);
    let mut rng = Rng::new(mix(run.s.seed ^ (u as u64 + 1)));
    while !run.stop.load(Ordering::SeqCst) {
        let req = ChatRequest::user("Why is the sky blue?").with_max_tokens(8);
        let ctx = Context::new().with_timeout(run.s.deadline);
        let start = Instant::now();
        // Unconstrained, as the main runs' users are: the cooperative budget must not make
        // the chain yield between a link's switch check and its call, or a flip observed in
        // between would be misread as a call sent after it.
        let r = tokio::task::unconstrained(chain.chat(&req, &ctx)).await;
        let rec = match r {
            Ok(resp) => {
                let p = &resp.provenance;
                ReqRec {
                    start_ms: run.ms(start),
                    end_ms: run.now_ms(),
                    attempted: p.attempts.iter().map(|a| a.provider.to_string()).collect(),
                    skipped: p.skipped.iter().map(|k| k.provider.to_string()).collect(),
                    served_by: match &p.served_by {
                        Some(by) => by.to_string(),
                        None if p.static_reply => STATIC.to_owned(),
                        None => "unknown".to_owned(),
                    },
                }
            }
            Err(e) => ReqRec {
                start_ms: run.ms(start),
                end_ms: run.now_ms(),
                attempted: e
                    .attempts()
                    .iter()
                    .map(|a| a.provider.to_string())
                    .collect(),
                skipped: e.skipped().iter().map(|k| k.provider.to_string()).collect(),
                served_by: format!("error: {}", e.kind().as_str()),
            },
        };
        lock(&run.requests).push(rec);
        tokio::time::sleep(Duration::from_millis(20 + rng.below(40))).await;
    }
}

/// What the timeline recorded.
#[derive(Default)]
struct Timeline {
    declared_ms: Option<f64>,
    resolved_ms: Option<f64>,
    backup_down: Option<(f64, f64)>,
    modes: Vec<ModeRec>,
    notes: Vec<String>,
}

/// Healthy → declared (backup fails in its second half) → resolved → healthy.
async fn declare_and_resolve(
    run: &Run<'_>,
    variant: Variant,
    page: &FakeStatusPage,
    backup: &FakeVendor,
    t: &mut Timeline,
) {
    // Where the declaration and the resolution fall within a poll interval, drawn from the
    // seed: held for whole intervals, the page would always change just before a poll.
    let mut rng = Rng::new(mix(run.s.seed ^ hash_str(variant.name()) ^ 0x7061_6765));
    let interval_ms = INTERVAL.as_millis() as u64;
    let mut phase = || Duration::from_millis(rng.below(interval_ms));
    let acting = |v: &ViewRec| variant.effect(v);
    if !run.until(|v| v.status.is_some()).await {
        t.notes
            .push("the first poll of the page did not succeed in time".to_owned());
    }
    tokio::time::sleep(HEALTHY + phase()).await;
    page.set_component("API", "major_outage");
    let incident = page.open_incident("Elevated error rates on the API", "major", &["API"]);
    t.declared_ms = Some(run.now_ms());
    if !run.until(acting).await {
        t.notes.push(format!(
            "ripcord did not act on the declared outage within {} ms",
            WAIT.as_millis()
        ));
    }
    tokio::time::sleep(DECLARED / 2).await;
    backup.set_script(Script::Always(Behavior::Error(VendorError::Overloaded)));
    let down = run.now_ms();
    tokio::time::sleep(DECLARED / 2 + phase()).await;
    // Read before the fault ends, so no request started after it counts as sent during it.
    let up = run.now_ms();
    backup.set_script(Script::default());
    t.backup_down = Some((down, up));
    page.set_component("API", "operational");
    page.resolve_incident(&incident);
    t.resolved_ms = Some(run.now_ms());
    if !run.until(|v| !acting(v)).await {
        t.notes.push(format!(
            "ripcord did not restore primary within {} ms of the resolution",
            WAIT.as_millis()
        ));
    }
    tokio::time::sleep(HEALTHY).await;
}

/// Healthy → the page resets every connection, then hangs, then serves garbage (each until a
/// failed poll says so) → readable and all clear again.
async fn unreadable(run: &Run<'_>, page: &FakeStatusPage, t: &mut Timeline) {
    if !run.until(|v| v.status.is_some()).await {
        t.notes
            .push("the first poll of the page did not succeed in time".to_owned());
    }
    tokio::time::sleep(HEALTHY).await;
    for (mode, name, expect) in [
        (PageMode::Unreachable, "unreachable", "could not be reached"),
        (PageMode::Hang, "hang", "did not answer within"),
        (PageMode::Garbage, "garbage", "not Statuspage JSON"),
    ] {
        page.set_mode(mode);
        t.modes.push(ModeRec {
            at_ms: run.now_ms(),
            mode: name.to_owned(),
            expect: expect.to_owned(),
        });
        let says = |v: &ViewRec| v.last_error.as_deref().is_some_and(|e| e.contains(expect));
        if !run.until(says).await {
            t.notes.push(format!(
                "no failed poll said {expect:?} within {} ms of the page going {name}",
                WAIT.as_millis()
            ));
        }
    }
    page.set_mode(PageMode::Serve);
    page.all_clear();
    t.modes.push(ModeRec {
        at_ms: run.now_ms(),
        mode: "serve".to_owned(),
        expect: String::new(),
    });
    if !run
        .until(|v| v.failures == 0 && v.last_error.is_none())
        .await
    {
        t.notes.push(format!(
            "no good poll within {} ms of the page being readable again",
            WAIT.as_millis()
        ));
    }
    tokio::time::sleep(AFTER).await;
}

/// Runs `variant` on the caller's runtime (the poller is spawned on it).
pub(super) async fn drive(
    variant: Variant,
    s: &Settings,
) -> std::result::Result<VariantRec, String> {
    let name = variant.name();
    let primary = FakeVendor::start_with(Wire::OpenAi, FakeOptions::default())
        .await
        .map_err(|e| format!("{name}: cannot start fake vendor {PRIMARY}: {e}"))?;
    let backup = FakeVendor::start_with(Wire::Anthropic, FakeOptions::fast())
        .await
        .map_err(|e| format!("{name}: cannot start fake vendor {BACKUP}: {e}"))?;
    let page = FakeStatusPage::start(&["API", "ChatGPT"])
        .await
        .map_err(|e| format!("{name}: cannot start the fake status page: {e}"))?;
    if variant != Variant::Unreachable {
        // Another component's outage is not the provider's: it must change nothing.
        page.set_component("ChatGPT", "major_outage");
        page.open_incident("ChatGPT is unavailable", "critical", &["ChatGPT"]);
    }
    let text = config_text(
        variant,
        &primary.base_url(),
        &backup.base_url(),
        &page.summary_url(),
        s.deadline,
    );
    // The built-in chain's keys: the run's key scan looks for them.
    let env = |var: &str| {
        var.strip_prefix("RIPCORD_CHAOS_")
            .and_then(|n| n.strip_suffix("_KEY"))
            .map(|n| fake_key(n, s.seed))
    };
    let config = ripcord_cli::config::parse("<vendor-declares-outage chain>", &text, &env)
        .map_err(|e| format!("{name}: {e}"))?;
    let calls: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let around_adapter = CallLog::hook(&calls);
    let hooks = BuildHooks {
        around_adapter: Some(around_adapter),
        ..BuildHooks::default()
    };
    let built = build_with(&config, &hooks)
        .map_err(|e| format!("{name}: the chain cannot be built: {e}"))?;
    let Some(watch) = built.vendor_watches.first().cloned() else {
        return Err(format!(
            "{name}: the chain was built without its status page poller ({})",
            built.notes.join("; ")
        ));
    };
    let run = Run {
        start: Instant::now(),
        stop: AtomicBool::new(false),
        built: &built,
        watch: &watch,
        s,
        requests: Mutex::default(),
        view: Mutex::default(),
    };
    let mut t = Timeline::default();
    let timeline = async {
        match variant {
            Variant::Unreachable => unreadable(&run, &page, &mut t).await,
            _ => declare_and_resolve(&run, variant, &page, &backup, &mut t).await,
        }
        run.stop.store(true, Ordering::SeqCst);
    };
    let users = futures::future::join_all((0..s.side_users()).map(|u| user(u, &run)));
    futures::future::join3(timeline, users, observe(&run)).await;
    let run_ms = run.now_ms();
    let primary_hits_ms = primary
        .requests()
        .iter()
        .filter(|q| q.path_only().ends_with("/chat/completions"))
        .map(|q| run.ms(q.at))
        .collect();
    let primary_calls_ms = lock(&calls).iter().map(|at| run.ms(*at)).collect();
    let rec = VariantRec {
        variant,
        declared_ms: t.declared_ms,
        resolved_ms: t.resolved_ms,
        backup_down: t.backup_down,
        modes: t.modes,
        view: run
            .view
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner),
        requests: run
            .requests
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner),
        primary_hits_ms,
        primary_calls_ms,
        page_hits: page.hits(),
        run_ms,
        notes: t.notes,
    };
    drop(watch);
    drop(built);
    Ok(rec)
}
