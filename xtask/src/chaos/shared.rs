//! `shared_redis`: replicas of the built-in chain share link `primary`'s breaker and rate limit
//! through a real `redis-server`, and an outage trips the breaker for all of them.
//!
//! Three chains are built from the built-in config without the local model (`primary` →
//! `backup` → static reply), each by `ripcord-cli`'s own builder with `[state] backend =
//! "redis"` and its own connection, as three `ripcord serve` processes would be. They share
//! one pair of fake vendors. Users (a few per replica) send plain requests while `primary`
//! answers 503 for the middle third of the run. The redis-server is this scenario's own, on a
//! free loopback port, and its keys are flushed before the replicas are built, so no state
//! carries over from another run.
//!
//! The checks read, per replica, every breaker transition (its listener) and every call its
//! breaker admitted with when it started and ended (a wrapper just inside the breaker):
//!
//! - `trip-spread`: after the first replica's view of the breaker opens (time T), every other
//!   replica admits at most `lease_calls` calls to `primary` up to `T + lease_ttl` and none
//!   from then until the half-open time `T + open_ms` (both less a scheduling tolerance); and
//!   every replica's view opened (docs/shared-state.md, the staleness bound).
//! - `one-probe`: calls admitted while a replica's view was not closed (half-open probes) never
//!   overlap in time, across all replicas.
//! - `recovered`: after the outage, `primary` answers again on every replica and every
//!   replica's view ends closed.
//! - `answered`: every request got an answer (`primary`, `backup` or the static reply).
//! - `on-redis`: every replica kept its state on Redis: no call was decided on local fallback
//!   state, and every write sent without making a call wait (the limiter's summed
//!   settlements, pauses) reached Redis, so nothing a call was charged stayed on one replica.
//!
//! `primary` also gets a shared rate limit (`[providers.rate_limit]`, far above the users'
//! traffic, so it never refuses): its leased blocks, the asks ahead for the next block and the
//! summed settlements run on every replica through the outage, and any Redis ask or write
//! they fail shows in `on-redis`.
//!
//! Without `redis-server` on PATH the scenario is reported as SKIPPED (never as passed); with
//! the `CI` variable set it installs Debian's `redis-server` package first (as `cargo xtask
//! test` does), and a server that still cannot start is a failure.

use ripcord_cli::config::Vendor;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use ripcord_chaos::{Behavior, FakeOptions, FakeVendor, Script, VendorError, Wire};
use ripcord_cli::build::{BuildHooks, Wrap, build_with};
use ripcord_cli::config::{RedisSettings, StateBackend};
use ripcord_core::{ChatModel, ChatRequest, ChatResponse, ChatStream, Context, Result};
use ripcord_redis::server::{RedisServer, StartError};
use ripcord_resilience::{BreakerListener, BreakerState, Transition};
use tokio::time::Instant;

use super::chain::Template;
use super::invariants::Check;
use super::observe::wrap_only;
use super::report::SideFigures;
use super::run::Settings;
use super::scenario::{Rng, mix};

/// The scenario's name (for `--only`).
pub(crate) const NAME: &str = "shared_redis";
/// What it does, for `--list`.
pub(crate) const DESCRIPTION: &str = "3 replicas share primary's breaker and rate limit through redis-server; an outage trips it for all within the lease bound";

/// The link whose state is shared and failed.
const LINK: &str = "primary";
/// The shared breaker's lease as `ripcord-cli` builds it (`SharedBreakerConfig`'s defaults).
const LEASE_CALLS: usize = 32;
const LEASE_TTL: Duration = Duration::from_millis(100);

/// Replicas of the chain, each with its own users.
const REPLICAS: usize = 3;

/// Users per replica: half the run's, at least two.
fn users_per_replica(s: &Settings) -> usize {
    s.users.div_ceil(2).max(2)
}

/// What the scenario produced.
#[derive(Debug, Clone)]
pub(crate) struct SharedRun {
    /// Why it did not run (no redis-server); its checks are then empty.
    pub(crate) skipped: Option<String>,
    pub(crate) checks: Vec<Check>,
    /// Per replica: requests, and who answered them.
    pub(crate) served: Vec<BTreeMap<String, usize>>,
    pub(crate) wall: Duration,
}

impl SharedRun {
    /// True when it ran and every check passed.
    pub(crate) fn passed(&self) -> bool {
        self.skipped.is_none() && self.checks.iter().all(|c| c.passed)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One replica's record of `primary`: its breaker's transitions and the calls it admitted.
#[derive(Debug, Default)]
struct ReplicaLog {
    transitions: Mutex<Vec<(Instant, BreakerState)>>,
    /// (admitted at, ended at, the view was not closed when admitted).
    calls: Mutex<Vec<(Instant, Option<Instant>, bool)>>,
}

impl ReplicaLog {
    fn view_closed(&self) -> bool {
        lock(&self.transitions)
            .last()
            .is_none_or(|(_, s)| *s == BreakerState::Closed)
    }
}

impl BreakerListener for ReplicaLog {
    fn on_transition(&self, t: &Transition) {
        if &*t.link == LINK {
            lock(&self.transitions).push((Instant::now(), t.to));
        }
    }
}

/// Wraps `primary` just inside its breaker: every admitted call, with its start and end.
#[derive(Debug)]
struct Admitted {
    inner: Arc<dyn ChatModel>,
    log: Arc<ReplicaLog>,
}

impl Admitted {
    /// The build hook that wraps `primary` in one, logging to `log`.
    fn hook(log: &Arc<ReplicaLog>) -> Wrap {
        let log = Arc::clone(log);
        wrap_only(LINK, move |inner| {
            Arc::new(Admitted {
                inner,
                log: Arc::clone(&log),
            })
        })
    }

    fn start(&self) -> usize {
        let probe = !self.log.view_closed();
        let mut calls = lock(&self.log.calls);
        calls.push((Instant::now(), None, probe));
        calls.len() - 1
    }

    fn end(&self, i: usize) {
        lock(&self.log.calls)[i].1 = Some(Instant::now());
    }
}

#[async_trait]
impl ChatModel for Admitted {
    model_identity!(inner);

    async fn chat(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatResponse> {
        let i = self.start();
        let r = self.inner.chat(req, ctx).await;
        self.end(i);
        r
    }

    async fn stream(&self, req: &ChatRequest, ctx: &Context) -> Result<ChatStream> {
        // The users of this scenario send plain requests only; a stream's call ends here.
        let i = self.start();
        let r = self.inner.stream(req, ctx).await;
        self.end(i);
        r
    }

    fn bounds_itself(&self) -> bool {
        self.inner.bounds_itself()
    }
}

/// `FLUSHDB` on a loopback redis-server: the scenario starts from empty shared state.
fn flush(port: u16) -> std::result::Result<(), String> {
    let mut s = TcpStream::connect(("127.0.0.1", port))
        .map_err(|e| format!("cannot reach redis-server to flush it: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(|e| e.to_string())?;
    s.write_all(b"FLUSHDB\r\n")
        .map_err(|e| format!("FLUSHDB: {e}"))?;
    let mut buf = [0u8; 5];
    s.read_exact(&mut buf)
        .map_err(|e| format!("FLUSHDB: {e}"))?;
    if &buf == b"+OK\r\n" {
        Ok(())
    } else {
        Err(format!(
            "FLUSHDB answered {:?}",
            String::from_utf8_lossy(&buf)
        ))
    }
}

/// Runs the scenario on the caller's runtime.
pub(crate) async fn run(s: &Settings) -> std::result::Result<SharedRun, String> {
    let wall = std::time::Instant::now();
    if std::env::var_os("CI").is_some() {
        // CI runs as root on a fresh machine: install Debian's package, as `xtask test` does.
        tokio::task::spawn_blocking(crate::redis_server::ensure_installed)
            .await
            .map_err(|e| format!("{NAME}: installing redis-server: {e}"))??;
    }
    let redis = match RedisServer::start().await {
        Ok(r) => r,
        Err(StartError::NotInstalled) if std::env::var_os("CI").is_none() => {
            return Ok(SharedRun {
                skipped: Some(format!(
                    "{} (install Debian's redis-server package)",
                    StartError::NotInstalled
                )),
                checks: Vec::new(),
                served: Vec::new(),
                wall: wall.elapsed(),
            });
        }
        Err(e) => return Err(format!("{NAME}: redis-server: {e}")),
    };
    flush(redis.port())?;
    let template = Template::builtin(s.deadline, false, s.seed)?;
    let mut config = template.config.clone();
    let url = redis.url();
    config.state = StateBackend::Redis(RedisSettings {
        url: url.clone().into(),
        redacted_url: url,
        // Longer than the default 50 ms: on a loaded machine a slow reply would degrade a
        // replica to local state, and the checks are about the shared state.
        op_timeout_ms: 500,
        connect_timeout_ms: 2000,
        retry_interval_ms: 1000,
        replicas: u32::try_from(REPLICAS).unwrap_or(u32::MAX),
    });
    // The shared limiter on `primary` (see the module docs): large enough never to refuse,
    // with leases (RPM) and settlements (TPM) both on.
    for p in config.chain.iter_mut().filter(|p| p.name == LINK) {
        p.rate_limit = Some(ripcord_cli::config::RateLimitConfig {
            rpm: Some(600_000),
            tpm: Some(60_000_000),
            pause_429_ms: None,
        });
        // One spell length for every trip: this scenario is about one trip seen by every
        // replica and its recovery within the run's last third. A spell that doubled when the
        // probe inside the outage re-trips would outlast a short run (the growth of a shared
        // spell across replicas is pinned by crates/redis/tests/breaker_spells.rs).
        p.breaker.open_max_ms = p.breaker.open_ms;
    }
    let open_ms = config
        .chain
        .iter()
        .find(|p| p.name == LINK)
        .map_or(1000, |p| p.breaker.open_ms);
    let mut fakes = BTreeMap::new();
    for p in &mut config.chain {
        let wire = if p.kind == ripcord_cli::config::ProviderKind::Vendor(Vendor::Anthropic) {
            Wire::Anthropic
        } else {
            Wire::OpenAi
        };
        let fake = FakeVendor::start_with(wire, FakeOptions::fast())
            .await
            .map_err(|e| format!("{NAME}: cannot start the fake vendor {:?}: {e}", p.name))?;
        p.base_url = Some(match wire {
            Wire::Anthropic => fake.base_url(),
            _ => format!("{}/v1", fake.base_url()),
        });
        fakes.insert(p.name.clone(), fake);
    }
    let mut replicas = Vec::with_capacity(REPLICAS);
    let mut states = Vec::with_capacity(REPLICAS);
    for _ in 0..REPLICAS {
        let log = Arc::new(ReplicaLog::default());
        let inside_breaker = Admitted::hook(&log);
        let hooks = BuildHooks {
            breaker_listener: Some(Arc::clone(&log) as Arc<dyn BreakerListener>),
            around_adapter: None,
            inside_breaker: Some(inside_breaker),
        };
        let built = build_with(&config, &hooks)
            .map_err(|e| format!("{NAME}: the chain cannot be built: {e}"))?;
        let Some(state) = built.redis().cloned() else {
            return Err(format!(
                "{NAME}: the chain was built without its Redis state"
            ));
        };
        if !state.ready().await {
            return Err(format!("{NAME}: a replica cannot reach redis-server"));
        }
        states.push(state);
        replicas.push((built, log));
    }
    // The outage: the middle third of the run.
    let outage = (s.duration / 3, s.duration * 2 / 3);
    let start = Instant::now();
    for (name, fake) in &fakes {
        let script = if name == LINK {
            Script::Window {
                from: outage.0,
                until: outage.1,
                fault: Behavior::Error(VendorError::Overloaded),
                otherwise: Behavior::Ok,
            }
        } else {
            Script::Always(Behavior::Ok)
        };
        fake.set_script_since(script, start);
    }
    let served: Vec<Mutex<BTreeMap<String, usize>>> =
        (0..REPLICAS).map(|_| Mutex::default()).collect();
    let failures: Mutex<Vec<String>> = Mutex::default();
    let last_primary: Vec<Mutex<Option<Instant>>> =
        (0..REPLICAS).map(|_| Mutex::default()).collect();
    let per_replica = users_per_replica(s);
    let users = (0..REPLICAS).flat_map(|r| (0..per_replica).map(move |u| (r, u)));
    futures::future::join_all(users.map(|(r, u)| {
        let chain = Arc::clone(&replicas[r].0.model);
        let served = &served[r];
        let failures = &failures;
        let last_primary = &last_primary[r];
        let mut rng = Rng::new(mix(s.seed ^ ((r * 64 + u) as u64 + 1)));
        async move {
            let mut n = 0;
            while start.elapsed() < s.duration {
                n += 1;
                let req = ChatRequest::user("Why is the sky blue?").with_max_tokens(8);
                let ctx = Context::new().with_timeout(s.deadline);
                match chain.chat(&req, &ctx).await {
                    Ok(resp) => {
                        let p = &resp.provenance;
                        let by = match &p.served_by {
                            Some(b) => b.to_string(),
                            None if p.static_reply => "static".to_owned(),
                            None => "unknown".to_owned(),
                        };
                        if by == LINK {
                            *lock(last_primary) = Some(Instant::now());
                        }
                        *lock(served).entry(by).or_default() += 1;
                    }
                    Err(e) => lock(failures).push(format!("replica {r} user {u} request {n}: {e}")),
                }
                tokio::time::sleep(Duration::from_millis(20 + rng.below(60))).await;
            }
        }
    }))
    .await;
    // Read while Redis still runs: a settlement sum still waiting to be written when the
    // users stop would fail once the server below is gone, which says nothing about the run.
    let degraded: Vec<String> = states
        .iter()
        .enumerate()
        .filter(|(_, st)| st.degradations() > 0 || st.local_calls() > 0 || st.unsent_writes() > 0)
        .map(|(i, st)| {
            format!(
                "replica {i}: Redis failed {} time(s), {} call(s) on local state, {} write(s) kept locally",
                st.degradations(),
                st.local_calls(),
                st.unsent_writes()
            )
        })
        .collect();
    let logs: Vec<Arc<ReplicaLog>> = replicas.iter().map(|(_, l)| Arc::clone(l)).collect();
    drop(replicas);
    drop(fakes);
    drop(redis);
    let outage_end = start + outage.1;
    let mut checks = vec![
        trip_spread(&logs, Duration::from_millis(open_ms), s.tolerance),
        one_probe(&logs),
    ];
    let last: Vec<Option<Instant>> = last_primary.iter().map(|m| *lock(m)).collect();
    checks.push(recovered(&logs, &last, outage_end));
    let failures = failures
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    let served: Vec<BTreeMap<String, usize>> = served
        .into_iter()
        .map(|m| m.into_inner().unwrap_or_else(PoisonError::into_inner))
        .collect();
    let total: usize = served.iter().flat_map(|m| m.values()).sum::<usize>() + failures.len();
    let mut answered = Check::new(
        "answered",
        "every request got an answer (primary, backup or the static reply)",
        format!("{total} requests, {} failed", failures.len()),
        failures,
    );
    if total == 0 {
        answered = answered.failed("no requests were made".to_owned());
    }
    checks.push(answered);
    checks.push(Check::new(
        "on-redis",
        "every replica kept its state on Redis (no call on local state, no write kept locally)",
        format!("{} replicas", states.len()),
        degraded,
    ));
    Ok(SharedRun {
        skipped: None,
        checks,
        served,
        wall: wall.elapsed(),
    })
}

/// The first time a replica's view opened, and when each other replica's did.
fn trip_spread(logs: &[Arc<ReplicaLog>], open_for: Duration, tolerance: Duration) -> Check {
    let first_open = |l: &ReplicaLog| {
        lock(&l.transitions)
            .iter()
            .find(|(_, s)| *s == BreakerState::Open)
            .map(|(at, _)| *at)
    };
    let opened: Vec<Option<Instant>> = logs.iter().map(|l| first_open(l)).collect();
    let Some(t0) = opened.iter().flatten().min().copied() else {
        return Check::unmet(
            "trip-spread",
            "a trip on one replica reaches every replica within the lease bound",
            "no replica's breaker opened during the outage".to_owned(),
            "the outage did not trip the shared breaker".to_owned(),
        );
    };
    let lease_end = t0 + LEASE_TTL + tolerance;
    let quiet_end = t0 + open_for.saturating_sub(tolerance);
    let mut offenders = Vec::new();
    let mut shown = Vec::new();
    for (i, l) in logs.iter().enumerate() {
        let calls = lock(&l.calls);
        let in_lease = calls
            .iter()
            .filter(|(at, _, _)| *at > t0 && *at <= lease_end)
            .count();
        let late = calls
            .iter()
            .filter(|(at, _, _)| *at > lease_end && *at < quiet_end)
            .count();
        let reach = opened[i].map(|o| o.saturating_duration_since(t0));
        shown.push(format!(
            "replica {i}: opened {}, {in_lease} admitted within the lease, {late} after it",
            reach.map_or("never".to_owned(), |d| format!("+{} ms", d.as_millis()))
        ));
        if reach.is_none() {
            offenders.push(format!("replica {i}: its view never opened"));
        }
        if in_lease > LEASE_CALLS {
            offenders.push(format!(
                "replica {i}: {in_lease} calls admitted within {} ms of the trip, at most {LEASE_CALLS}",
                (LEASE_TTL + tolerance).as_millis()
            ));
        }
        if late > 0 {
            offenders.push(format!(
                "replica {i}: {late} calls admitted between {} ms after the trip and the half-open time",
                (LEASE_TTL + tolerance).as_millis()
            ));
        }
    }
    Check::new(
        "trip-spread",
        "a trip on one replica reaches every replica within the lease bound",
        shown.join("; "),
        offenders,
    )
}

/// Probes (calls admitted while the replica's view was not closed) never overlap.
fn one_probe(logs: &[Arc<ReplicaLog>]) -> Check {
    let mut probes: Vec<(Instant, Instant, usize)> = Vec::new();
    let mut unfinished = Vec::new();
    for (i, l) in logs.iter().enumerate() {
        for (at, end, probe) in lock(&l.calls).iter() {
            if *probe {
                match end {
                    Some(e) => probes.push((*at, *e, i)),
                    None => unfinished.push(format!("replica {i}: a probe never ended")),
                }
            }
        }
    }
    probes.sort();
    let mut offenders = unfinished;
    // The probe still in flight longest among those started so far.
    let mut latest: Option<(Instant, usize)> = None;
    for (at, end, i) in &probes {
        if let Some((busy_until, j)) = latest
            && *at < busy_until
        {
            offenders.push(format!(
                "replica {i} admitted a probe while replica {j}'s was in flight"
            ));
        }
        if latest.is_none_or(|(until, _)| *end > until) {
            latest = Some((*end, *i));
        }
    }
    let mut c = Check::new(
        "one-probe",
        "one half-open probe at a time across all replicas",
        format!("{} probes across {} replicas", probes.len(), logs.len()),
        offenders,
    );
    if probes.is_empty() {
        c = c.failed("no probe was admitted: the breaker never reached half-open".to_owned());
    }
    c
}

/// After the outage every replica is served by `primary` again and its view ends closed.
fn recovered(logs: &[Arc<ReplicaLog>], last: &[Option<Instant>], outage_end: Instant) -> Check {
    let mut offenders = Vec::new();
    for (i, l) in logs.iter().enumerate() {
        if last[i].is_none_or(|t| t <= outage_end) {
            offenders.push(format!(
                "replica {i}: primary answered nothing after the outage"
            ));
        }
        if !l.view_closed() {
            offenders.push(format!("replica {i}: its breaker did not close again"));
        }
    }
    Check::new(
        "recovered",
        "after the outage, primary serves every replica again and every view is closed",
        format!("{} replicas", logs.len()),
        offenders,
    )
}

/// The scenario's block in the terminal report.
/// The scenario's section of the HTML report: who answered each replica, and the checks.
pub(crate) fn html_section(r: &SharedRun) -> String {
    use super::report::html::{esc, side_section, table_section};
    let wall = format!("{:.1} s", r.wall.as_secs_f64());
    if let Some(why) = &r.skipped {
        let body = format!("<p>Not run: {}</p>", esc(why));
        return side_section(NAME, DESCRIPTION, "SKIPPED", &body, &[], &wall);
    }
    let rows: Vec<(String, String)> = r
        .served
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let parts: Vec<String> = m.iter().map(|(k, v)| format!("{k} {v}")).collect();
            (i.to_string(), parts.join(" · "))
        })
        .collect();
    table_section(
        NAME,
        DESCRIPTION,
        r.passed(),
        ("replica", "served by"),
        &rows,
        &r.checks,
        &wall,
    )
}

pub(crate) fn terminal_block(r: &SharedRun) -> String {
    if let Some(why) = &r.skipped {
        return format!("── {NAME} ── {DESCRIPTION}\n  SKIPPED: {why}\n");
    }
    let figures: Vec<String> = r
        .served
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let parts: Vec<String> = m.iter().map(|(k, v)| format!("{k} {v}")).collect();
            format!("replica {i}: {}", parts.join(", "))
        })
        .collect();
    SideFigures::new(NAME, DESCRIPTION, figures, &r.checks, r.wall).terminal_block()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(opened_at: Option<Duration>, calls: &[(Duration, Duration, bool)]) -> Arc<ReplicaLog> {
        let t = Instant::now();
        let l = ReplicaLog::default();
        if let Some(at) = opened_at {
            lock(&l.transitions).push((t + at, BreakerState::Open));
        }
        for (at, end, probe) in calls {
            lock(&l.calls).push((t + *at, Some(t + *end), *probe));
        }
        Arc::new(l)
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_spread_check_passes_within_the_bound_and_names_a_late_admission() {
        let tol = ms(50);
        let open_for = ms(1000);
        // Replica 1 admits two calls within the lease after replica 0's trip, then nothing.
        let ok = [
            log(Some(ms(100)), &[(ms(50), ms(60), false)]),
            log(
                Some(ms(180)),
                &[(ms(120), ms(130), false), (ms(150), ms(160), false)],
            ),
        ];
        let c = trip_spread(&ok, open_for, tol);
        assert!(c.passed, "{c:?}");
        assert!(
            c.detail.contains("replica 1: opened +80 ms, 2 admitted"),
            "{c:?}"
        );
        // Replica 1 admits one call 400 ms after the trip: past the lease, before half-open.
        let late = [
            log(Some(ms(100)), &[]),
            log(Some(ms(600)), &[(ms(500), ms(510), false)]),
        ];
        let c = trip_spread(&late, open_for, tol);
        assert!(!c.passed);
        assert!(
            c.offenders[0].starts_with("replica 1: 1 calls admitted between"),
            "{c:?}"
        );
        // A replica that never opens is named; no trip at all fails.
        let c = trip_spread(&[log(Some(ms(100)), &[]), log(None, &[])], open_for, tol);
        assert_eq!(c.offenders, ["replica 1: its view never opened"]);
        let c = trip_spread(&[log(None, &[])], open_for, tol);
        assert!(!c.passed && c.detail.contains("did not trip"), "{c:?}");
    }

    #[test]
    fn overlapping_probes_across_replicas_are_named() {
        let apart = [
            log(None, &[(ms(0), ms(10), true)]),
            log(None, &[(ms(20), ms(30), true), (ms(25), ms(26), false)]),
        ];
        assert!(one_probe(&apart).passed);
        let overlap = [
            log(None, &[(ms(0), ms(10), true)]),
            log(None, &[(ms(5), ms(30), true)]),
        ];
        let c = one_probe(&overlap);
        assert_eq!(
            c.offenders,
            ["replica 1 admitted a probe while replica 0's was in flight"]
        );
        assert!(
            !one_probe(&[log(None, &[])]).passed,
            "no probe at all is not a pass"
        );
    }

    /// The scenario itself against a real redis-server (skipped loudly without one, unless
    /// `CI` is set).
    #[tokio::test(flavor = "current_thread")]
    async fn three_replicas_see_one_trip_within_the_bound() {
        let r = run(&Settings {
            deadline: Duration::from_secs(3),
            seed: 7,
            ..Settings::sample(Duration::from_secs(4))
        })
        .await
        .unwrap();
        if let Some(why) = &r.skipped {
            let _ = writeln!(std::io::stderr(), "SKIPPED: {NAME}: {why}");
            return;
        }
        assert!(r.passed(), "{}", terminal_block(&r));
        assert_eq!(r.served.len(), 3);
    }
}
