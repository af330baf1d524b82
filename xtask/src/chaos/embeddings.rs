//! `embeddings_outage`: the embedding chain under an outage — what each link is charged for, and
//! when it is tried again.
//!
//! An `[embeddings]` chain `primary` → `backup` (two OpenAI-wire fakes) is built by
//! `ripcord-cli`'s own builder from a config, as `ripcord serve` builds it for
//! `POST /v1/embeddings`; `primary` has `[providers.retry] max_attempts = 3`. A few users send
//! embedding requests, each with its own input text, while `primary` plays a timeline in fifths:
//! healthy; a 500 for every request (`server_error`, retried by default: tried three times, then
//! fallen back); a 503 (`overloaded`, which by default falls to the next link at once); a 401 (a
//! key problem, never retried); healthy again. The fakes record every request, and the input
//! text ties each one to the user request that sent it.
//!
//! The checks:
//!
//! - `answered`: every request got vectors (`backup` stays healthy).
//! - `charged-as-sent`: per request and link, the attempts the answer records are exactly the
//!   requests that vendor received with that request's input — nothing charged that was not
//!   sent, nothing sent that was not charged.
//! - `retry-budget`: no request tried `primary` more than `max_attempts` times, and a request
//!   that fell back after only `server_error` failures on `primary` had used all of them.
//! - `not-retried`: no attempt on `primary` follows an `overloaded` or `auth` failure from it in
//!   the same request (classes outside the default `retry_on`).
//! - `paths-seen`: the run exercised every path: served by `primary`, retried then fallen back,
//!   fallen back after a single 503 and after a single 401 (so the checks are not vacuous).

use std::collections::BTreeMap;
use std::time::Duration;

use ripcord_chaos::{Behavior, FakeOptions, FakeVendor, Script, VendorError, Wire};
use ripcord_core::{Context, EmbeddingModel, EmbeddingRequest, ErrorKind};
use serde::Serialize;
use tokio::time::Instant;

use super::chain::fake_key;
use super::invariants::Check;
use super::report::SideFigures;
use super::run::Settings;

/// The scenario's name (for `--only`).
pub(crate) const NAME: &str = "embeddings_outage";
/// What it does, for `--list`.
pub(crate) const DESCRIPTION: &str = "embeddings over primary → backup: 500s retried up to max_attempts then fallen back, a 503 or a 401 fallen back at once; every attempt charged is a request the vendor received";

const PRIMARY: &str = "primary";
const BACKUP: &str = "backup";
/// `primary`'s `[providers.retry] max_attempts`.
const MAX_ATTEMPTS: usize = 3;

/// One attempt as the answer recorded it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct AttemptRec {
    pub(crate) link: String,
    pub(crate) status: Option<u16>,
    /// `None` for the serving attempt.
    pub(crate) kind: Option<ErrorKind>,
}

/// One user request and what came of it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct EmbedRec {
    /// The input text, which also identifies the request at the vendors.
    pub(crate) input: String,
    pub(crate) started_ms: f64,
    pub(crate) latency_ms: f64,
    /// Who served it, or `None` when it failed.
    pub(crate) served_by: Option<String>,
    /// The error, when it failed.
    pub(crate) error: Option<String>,
    pub(crate) attempts: Vec<AttemptRec>,
}

/// What the scenario produced.
#[derive(Debug, Clone)]
pub(crate) struct EmbeddingsRun {
    pub(crate) requests: Vec<EmbedRec>,
    /// Per link: how many embedding requests the vendor received, per input text.
    pub(crate) received: BTreeMap<String, BTreeMap<String, usize>>,
    pub(crate) checks: Vec<Check>,
    pub(crate) wall: Duration,
}

impl EmbeddingsRun {
    /// True when every check passed.
    pub(crate) fn passed(&self) -> bool {
        SideFigures::passed(&self.checks)
    }

    /// The figures shown above the checks.
    fn figure_lines(&self) -> Vec<String> {
        let served = |who: &str| {
            self.requests
                .iter()
                .filter(|r| r.served_by.as_deref() == Some(who))
                .count()
        };
        let charged = |who: &str| {
            self.requests
                .iter()
                .flat_map(|r| &r.attempts)
                .filter(|a| a.link == who)
                .count()
        };
        let received = |who: &str| self.received.get(who).map_or(0, |m| m.values().sum());
        vec![
            format!(
                "{} requests: {} served by {PRIMARY}, {} by {BACKUP}, {} failed",
                self.requests.len(),
                served(PRIMARY),
                served(BACKUP),
                self.requests.iter().filter(|r| r.error.is_some()).count()
            ),
            format!(
                "attempts charged / requests received: {PRIMARY} {} / {}, {BACKUP} {} / {}",
                charged(PRIMARY),
                received(PRIMARY),
                charged(BACKUP),
                received(BACKUP)
            ),
            format!(
                "fell back after {MAX_ATTEMPTS} server errors: {}; after one 503: {}; after one 401: {}",
                self.requests.iter().filter(|r| retried_out(r)).count(),
                self.requests
                    .iter()
                    .filter(|r| fell_back_at_once(r, ErrorKind::Overloaded))
                    .count(),
                self.requests
                    .iter()
                    .filter(|r| fell_back_at_once(r, ErrorKind::Auth))
                    .count()
            ),
        ]
    }
}

/// The attempts a request made on one link.
fn on<'a>(r: &'a EmbedRec, link: &'a str) -> impl Iterator<Item = &'a AttemptRec> + 'a {
    r.attempts.iter().filter(move |a| a.link == link)
}

/// A failure the default `retry_on` retries on the same link (the timeline's 500s).
fn retryable(a: &AttemptRec) -> bool {
    a.kind == Some(ErrorKind::ServerError)
}

/// Failures the default `retry_on` does not retry: they fall to the next link at once.
const NOT_RETRIED: [ErrorKind; 2] = [ErrorKind::Overloaded, ErrorKind::Auth];

/// Served by `backup` after `primary` failed only with retryable errors.
fn fell_back_retryable(r: &EmbedRec) -> bool {
    r.served_by.as_deref() == Some(BACKUP)
        && on(r, PRIMARY).next().is_some()
        && on(r, PRIMARY).all(retryable)
}

/// Served by `backup` after `primary`'s whole retry budget of retryable failures.
fn retried_out(r: &EmbedRec) -> bool {
    fell_back_retryable(r) && on(r, PRIMARY).count() == MAX_ATTEMPTS
}

/// Served by `backup` after exactly one attempt on `primary`, failed with `kind`.
fn fell_back_at_once(r: &EmbedRec, kind: ErrorKind) -> bool {
    r.served_by.as_deref() == Some(BACKUP)
        && on(r, PRIMARY).map(|a| a.kind).collect::<Vec<_>>() == [Some(kind)]
}

/// The config: the embedding chain `primary` → `backup`, `primary` retried.
fn config_text(primary: &str, backup: &str) -> String {
    format!(
        r#"
[chain]
order = ["{PRIMARY}", "{BACKUP}"]

[embeddings]
providers = ["{PRIMARY}", "{BACKUP}"]
model = "text-embedding-3-small"

[[providers]]
name = "{PRIMARY}"
kind = "openai"
model = "gpt-4o-mini"
base_url = "{primary}/v1"
api_key = "${{RIPCORD_CHAOS_EMB_PRIMARY_KEY}}"
[providers.retry]
max_attempts = {MAX_ATTEMPTS}
base_delay_ms = 10
max_delay_ms = 40

[[providers]]
name = "{BACKUP}"
kind = "openai"
model = "gpt-4o-mini"
base_url = "{backup}/v1"
api_key = "${{RIPCORD_CHAOS_EMB_BACKUP_KEY}}"
"#
    )
}

/// `primary`'s timeline over a run of `d`, in fifths: healthy, 500s, 503s, 401s, healthy.
fn timeline(d: Duration) -> Script {
    let fifth = d / 5;
    let always = |e| Script::Always(Behavior::Error(e));
    Script::Timeline(vec![
        (Duration::ZERO, Script::Always(Behavior::Ok)),
        (fifth, always(VendorError::ServerError)),
        (2 * fifth, always(VendorError::EmptyServiceUnavailable)),
        (3 * fifth, always(VendorError::Auth)),
        (4 * fifth, Script::Always(Behavior::Ok)),
    ])
}

/// The input text of a recorded embeddings request (a string or the first of a list).
fn input_of(body: &serde_json::Value) -> Option<String> {
    match &body["input"] {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Array(items) => items.first()?.as_str().map(str::to_owned),
        _ => None,
    }
}

/// Per input text, the embedding requests a fake received.
fn received(fake: &FakeVendor) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for r in fake.requests() {
        if !r.path_only().ends_with("/embeddings") {
            continue;
        }
        let input = r
            .json()
            .and_then(|b| input_of(&b))
            .unwrap_or_else(|| "<no input>".to_owned());
        *out.entry(input).or_insert(0) += 1;
    }
    out
}

/// Runs the scenario on the caller's runtime (with the run's duration, deadline and seed, and
/// [`Settings::side_users`] users), then its checks.
pub(crate) async fn run(s: &Settings) -> Result<EmbeddingsRun, String> {
    let started = Instant::now();
    let start = |what: &'static str| async move {
        FakeVendor::start_with(Wire::OpenAi, FakeOptions::default())
            .await
            .map_err(|e| format!("{NAME}: cannot start fake vendor {what}: {e}"))
    };
    let primary = start(PRIMARY).await?;
    let backup = start(BACKUP).await?;
    let env = |var: &str| {
        var.strip_prefix("RIPCORD_CHAOS_")
            .and_then(|n| n.strip_suffix("_KEY"))
            .map(|n| fake_key(n, s.seed))
    };
    let text = config_text(&primary.base_url(), &backup.base_url());
    let config = ripcord_cli::config::parse("<embeddings chaos chain>", &text, &env)
        .map_err(|e| format!("{NAME}: {e}"))?;
    let built = ripcord_cli::build::build(&config)
        .map_err(|e| format!("{NAME}: the chain cannot be built: {e}"))?;
    let chain = built
        .embeddings
        .clone()
        .ok_or_else(|| format!("{NAME}: the config's [embeddings] built no chain"))?;

    let t0 = Instant::now();
    primary.set_script_since(timeline(s.duration), t0);
    let users: Vec<_> = (0..s.side_users())
        .map(|u| {
            let chain = chain.clone();
            let s = s.clone();
            tokio::spawn(async move { user(u, chain, &s, t0).await })
        })
        .collect();
    let mut requests = Vec::new();
    for u in users {
        requests.extend(
            u.await
                .map_err(|e| format!("{NAME}: a user panicked: {e}"))?,
        );
    }
    requests.sort_by(|a, b| a.started_ms.total_cmp(&b.started_ms));
    let received: BTreeMap<String, BTreeMap<String, usize>> = [
        (PRIMARY.to_owned(), received(&primary)),
        (BACKUP.to_owned(), received(&backup)),
    ]
    .into();
    let checks = checks(&requests, &received, s.side_users());
    Ok(EmbeddingsRun {
        requests,
        received,
        checks,
        wall: started.elapsed(),
    })
}

/// One user: requests one after another until the run's time is up.
async fn user(
    u: usize,
    chain: std::sync::Arc<dyn EmbeddingModel>,
    s: &Settings,
    t0: Instant,
) -> Vec<EmbedRec> {
    let mut out = Vec::new();
    let mut i = 0usize;
    while t0.elapsed() < s.duration {
        let input = format!("user {u} request {i}");
        i += 1;
        let began = Instant::now();
        let ctx = Context::new().with_timeout(s.deadline);
        let res = chain
            .embed(&EmbeddingRequest::new(vec![input.clone()]), &ctx)
            .await;
        let rec = |a: &ripcord_core::Attempt| AttemptRec {
            link: a.provider.to_string(),
            status: a.status,
            kind: a.error_kind,
        };
        let (served_by, error, attempts) = match res {
            Ok(r) => (
                r.served_by.as_deref().map(str::to_owned),
                None,
                r.attempts.iter().map(rec).collect(),
            ),
            Err(e) => (
                None,
                Some(e.to_string()),
                e.attempts().iter().map(rec).collect(),
            ),
        };
        out.push(EmbedRec {
            input,
            started_ms: began.duration_since(t0).as_secs_f64() * 1000.0,
            latency_ms: began.elapsed().as_secs_f64() * 1000.0,
            served_by,
            error,
            attempts,
        });
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
    out
}

/// Calls that reached `primary` (each deposits into its retry budget) started in the budget's
/// window before `t_ms`, and the retries of the requests that ended in it.
fn budget_at(reqs: &[EmbedRec], t_ms: f64, window_ms: f64) -> (usize, usize) {
    let within = |at: f64| at <= t_ms && at >= t_ms - window_ms;
    let calls = reqs
        .iter()
        .filter(|r| on(r, PRIMARY).next().is_some() && within(r.started_ms))
        .count();
    let retries = reqs
        .iter()
        .filter(|r| within(r.started_ms + r.latency_ms))
        .map(|r| on(r, PRIMARY).count().saturating_sub(1))
        .sum();
    (calls, retries)
}

/// `retry-budget`: at most `max_attempts` on `primary`; retries within the default retry budget
/// (`min_retries + ratio × calls` per window, [`ripcord_resilience::RetryBudget`]); and a
/// request that fell back before using its attempts on server errors did so only when that
/// budget was spent. The
/// comparisons forgive what the users had in flight (the requests' own times bound when each
/// deposit and withdrawal happened, not exactly).
fn retry_budget(reqs: &[EmbedRec], users: usize) -> Check {
    let b = ripcord_resilience::RetryBudget::default();
    let window_ms = b.window.as_secs_f64() * 1000.0;
    let allowed = |calls: usize| f64::from(b.min_retries) + b.ratio * calls as f64;
    let slack = (users * (MAX_ATTEMPTS - 1)) as f64;
    let mut offenders = Vec::new();
    let mut early = 0;
    for r in reqs {
        let n = on(r, PRIMARY).count();
        let end = r.started_ms + r.latency_ms;
        let (calls, retries) = budget_at(reqs, end, window_ms);
        if n > MAX_ATTEMPTS {
            offenders.push(format!("{}: {n} attempts on {PRIMARY}", r.input));
        }
        if retries as f64 > allowed(calls) + slack {
            offenders.push(format!(
                "{}: {retries} retries by {end:.0} ms over {calls} calls, beyond the budget of {:.0}",
                r.input,
                allowed(calls)
            ));
        }
        if fell_back_retryable(r) && n < MAX_ATTEMPTS {
            early += 1;
            if (retries as f64) + slack < allowed(calls) - 1.0 {
                offenders.push(format!(
                    "{}: fell back after {n} of {MAX_ATTEMPTS} attempts with the budget unspent ({retries} of {:.0} retries over {calls} calls)",
                    r.input,
                    allowed(calls)
                ));
            }
        }
    }
    let retries: usize = reqs
        .iter()
        .map(|r| on(r, PRIMARY).count().saturating_sub(1))
        .sum();
    Check::new(
        "retry-budget",
        &format!(
            "at most {MAX_ATTEMPTS} attempts on {PRIMARY}, retries within the retry budget, and none left unused before a fallback"
        ),
        format!(
            "{retries} retries over {} calls (budget {} + {} × calls per {:.0} s); {} requests fell back after server errors, {early} of them before their {MAX_ATTEMPTS} attempts (the budget spent)",
            reqs.len(),
            b.min_retries,
            b.ratio,
            b.window.as_secs_f64(),
            reqs.iter().filter(|r| fell_back_retryable(r)).count(),
        ),
        offenders,
    )
}

fn checks(
    reqs: &[EmbedRec],
    received: &BTreeMap<String, BTreeMap<String, usize>>,
    users: usize,
) -> Vec<Check> {
    let answered = Check::new(
        "answered",
        "every request got vectors",
        format!("{} requests", reqs.len()),
        reqs.iter()
            .filter_map(|r| Some(format!("{}: {}", r.input, r.error.as_ref()?)))
            .collect(),
    );

    let mut mismatched = Vec::new();
    for (link, by_input) in received {
        for r in reqs {
            let charged = on(r, link).count();
            let sent = by_input.get(&r.input).copied().unwrap_or(0);
            if charged != sent {
                mismatched.push(format!(
                    "{}: {link} charged {charged} attempts, received {sent} requests",
                    r.input
                ));
            }
        }
        let known: usize = reqs
            .iter()
            .map(|r| by_input.get(&r.input).copied().unwrap_or(0))
            .sum();
        let all: usize = by_input.values().sum();
        if known != all {
            mismatched.push(format!(
                "{link} received {} requests that no user sent",
                all - known
            ));
        }
    }
    let charged = Check::new(
        "charged-as-sent",
        "every attempt charged is a request the vendor received, and the reverse",
        format!(
            "{} attempts recorded over {} requests",
            reqs.iter().map(|r| r.attempts.len()).sum::<usize>(),
            reqs.len()
        ),
        mismatched,
    );

    let budget = retry_budget(reqs, users);

    let not_retried = |a: &AttemptRec| a.kind.is_some_and(|k| NOT_RETRIED.contains(&k));
    let fatal = Check::new(
        "not-retried",
        &format!("no attempt on {PRIMARY} after an overloaded or auth failure from it"),
        format!(
            "{} requests met one",
            reqs.iter()
                .filter(|r| on(r, PRIMARY).any(not_retried))
                .count()
        ),
        reqs.iter()
            .filter_map(|r| {
                let kinds: Vec<_> = on(r, PRIMARY).map(|a| a.kind).collect();
                let i = on(r, PRIMARY).position(not_retried)?;
                (i + 1 < kinds.len()).then(|| format!("{}: retried after {:?}", r.input, kinds[i]))
            })
            .collect(),
    );

    let paths = [
        (
            "served by primary",
            reqs.iter()
                .filter(|r| r.served_by.as_deref() == Some(PRIMARY))
                .count(),
        ),
        (
            "retried then fell back",
            reqs.iter().filter(|r| retried_out(r)).count(),
        ),
        (
            "fell back after one 503",
            reqs.iter()
                .filter(|r| fell_back_at_once(r, ErrorKind::Overloaded))
                .count(),
        ),
        (
            "fell back after one 401",
            reqs.iter()
                .filter(|r| fell_back_at_once(r, ErrorKind::Auth))
                .count(),
        ),
    ];
    let seen = Check::new(
        "paths-seen",
        "the run served by primary, retried then fell back, fell back on a 503 and on a 401",
        paths
            .iter()
            .map(|(what, n)| format!("{what}: {n}"))
            .collect::<Vec<_>>()
            .join(", "),
        paths
            .iter()
            .filter(|(_, n)| *n == 0)
            .map(|(what, _)| format!("no request {what}"))
            .collect(),
    );
    vec![answered, charged, budget, fatal, seen]
}

/// The scenario's block in the terminal output.
pub(crate) fn terminal_block(r: &EmbeddingsRun) -> String {
    SideFigures::new(NAME, DESCRIPTION, r.figure_lines(), &r.checks, r.wall).terminal_block()
}

/// The scenario's section of the HTML report.
pub(crate) fn html_section(r: &EmbeddingsRun) -> String {
    SideFigures::new(NAME, DESCRIPTION, r.figure_lines(), &r.checks, r.wall).html_section()
}

/// The scenario in the JSON report.
#[derive(Debug, Serialize)]
pub(crate) struct EmbeddingsReport<'a> {
    name: &'static str,
    description: &'static str,
    passed: bool,
    wall_s: f64,
    requests: &'a [EmbedRec],
    received: &'a BTreeMap<String, BTreeMap<String, usize>>,
    checks: &'a [Check],
}

pub(crate) fn json_report(r: &EmbeddingsRun) -> EmbeddingsReport<'_> {
    EmbeddingsReport {
        name: NAME,
        description: DESCRIPTION,
        passed: r.passed(),
        wall_s: r.wall.as_secs_f64(),
        requests: &r.requests,
        received: &r.received,
        checks: &r.checks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(input: &str, served: Option<&str>, attempts: &[(&str, u16)]) -> EmbedRec {
        EmbedRec {
            input: input.to_owned(),
            started_ms: 0.0,
            latency_ms: 1.0,
            served_by: served.map(str::to_owned),
            error: served.is_none().then(|| "exhausted".to_owned()),
            attempts: attempts
                .iter()
                .map(|(link, status)| AttemptRec {
                    link: (*link).to_owned(),
                    status: (*status != 200).then_some(*status),
                    kind: match status {
                        500 => Some(ErrorKind::ServerError),
                        503 => Some(ErrorKind::Overloaded),
                        401 => Some(ErrorKind::Auth),
                        _ => None,
                    },
                })
                .collect(),
        }
    }

    fn received_of(reqs: &[EmbedRec]) -> BTreeMap<String, BTreeMap<String, usize>> {
        let mut out: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
        for link in [PRIMARY, BACKUP] {
            out.insert(link.to_owned(), BTreeMap::new());
        }
        for r in reqs {
            for a in &r.attempts {
                *out.entry(a.link.clone())
                    .or_default()
                    .entry(r.input.clone())
                    .or_insert(0) += 1;
            }
        }
        out
    }

    fn good() -> Vec<EmbedRec> {
        vec![
            req("a", Some(PRIMARY), &[(PRIMARY, 200)]),
            req(
                "b",
                Some(BACKUP),
                &[
                    (PRIMARY, 500),
                    (PRIMARY, 500),
                    (PRIMARY, 500),
                    (BACKUP, 200),
                ],
            ),
            req("c", Some(BACKUP), &[(PRIMARY, 401), (BACKUP, 200)]),
            req("e", Some(BACKUP), &[(PRIMARY, 503), (BACKUP, 200)]),
        ]
    }

    fn failing(checks: &[Check]) -> Vec<&str> {
        checks
            .iter()
            .filter(|c| !c.passed)
            .map(|c| c.id.as_str())
            .collect()
    }

    #[test]
    fn a_run_that_did_what_it_should_passes_every_check() {
        let reqs = good();
        assert!(failing(&checks(&reqs, &received_of(&reqs), 1)).is_empty());
    }

    #[test]
    fn each_broken_promise_fails_its_check() {
        // Fell back before the retry budget was spent.
        let mut reqs = good();
        reqs[1] = req("b", Some(BACKUP), &[(PRIMARY, 500), (BACKUP, 200)]);
        assert_eq!(
            failing(&checks(&reqs, &received_of(&reqs), 1)),
            ["retry-budget", "paths-seen"]
        );
        // The same early fallback once six requests have spent the budget is no offence; ten
        // retried out overspend it.
        let retried_out = |i: usize| {
            req(
                &format!("r{i}"),
                Some(BACKUP),
                &[
                    (PRIMARY, 500),
                    (PRIMARY, 500),
                    (PRIMARY, 500),
                    (BACKUP, 200),
                ],
            )
        };
        let mut spent = reqs.clone();
        spent.extend((0..6).map(retried_out));
        assert!(failing(&checks(&spent, &received_of(&spent), 1)).is_empty());
        let mut over = good();
        over.extend((0..10).map(retried_out));
        let c = checks(&over, &received_of(&over), 1);
        assert_eq!(failing(&c), ["retry-budget"]);
        assert!(
            c[2].offenders[0].contains("beyond the budget"),
            "{:?}",
            c[2]
        );
        // Retried after a 401.
        let mut reqs = good();
        reqs[2] = req(
            "c",
            Some(BACKUP),
            &[(PRIMARY, 401), (PRIMARY, 401), (BACKUP, 200)],
        );
        assert_eq!(
            failing(&checks(&reqs, &received_of(&reqs), 1)),
            ["not-retried", "paths-seen"]
        );
        // Retried after a 503.
        let mut reqs = good();
        reqs[3] = req("e", Some(PRIMARY), &[(PRIMARY, 503), (PRIMARY, 200)]);
        assert_eq!(
            failing(&checks(&reqs, &received_of(&reqs), 1)),
            ["not-retried", "paths-seen"]
        );
        // A request the vendor received that the answer does not record, and one nobody sent.
        let reqs = good();
        let mut received = received_of(&reqs);
        *received.get_mut(PRIMARY).unwrap().get_mut("a").unwrap() += 1;
        received
            .get_mut(BACKUP)
            .unwrap()
            .insert("stray".to_owned(), 1);
        let c = checks(&reqs, &received, 1);
        assert_eq!(failing(&c), ["charged-as-sent"]);
        assert_eq!(c[1].offender_count, 2, "{:?}", c[1].offenders);
        // A request that got no vectors.
        let mut reqs = good();
        reqs.push(req("d", None, &[(PRIMARY, 401), (BACKUP, 401)]));
        assert_eq!(
            failing(&checks(&reqs, &received_of(&reqs), 1)),
            ["answered"]
        );
    }

    #[test]
    fn the_input_is_read_from_a_string_or_a_list() {
        use serde_json::json;
        assert_eq!(input_of(&json!({"input": "x"})).as_deref(), Some("x"));
        assert_eq!(
            input_of(&json!({"input": ["y", "z"]})).as_deref(),
            Some("y")
        );
        assert_eq!(input_of(&json!({"input": 3})), None);
    }

    #[test]
    fn the_config_parses_and_retries_primary() {
        let env = |var: &str| var.ends_with("_KEY").then(|| "sk-test".to_owned());
        let text = config_text("http://127.0.0.1:1", "http://127.0.0.1:2");
        let config = ripcord_cli::config::parse("<test>", &text, &env).unwrap();
        let (providers, model) = config.embeddings.as_ref().unwrap();
        assert_eq!(model, "text-embedding-3-small");
        assert_eq!(providers.len(), 2);
        assert_eq!(providers[0].retry.max_attempts, MAX_ATTEMPTS as u32);
    }
}
