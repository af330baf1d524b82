//! `cargo xtask chaos`: scripted vendor outages against the real chain, and a report of what
//! the chain did.
//!
//! Only the vendors are fake. Each scenario starts `ripcord-chaos` servers on loopback (an
//! OpenAI-wire "primary", an Anthropic-wire "backup"), builds the chain from a ripcord config
//! with `ripcord-cli`'s own builder — real adapters, retries, breakers, health, the real
//! local Llama on ONNX Runtime, the static reply — and lets virtual users send plain and
//! streamed requests while the servers play the scenario's timeline of faults.
//!
//! Every run checks six invariants (see [`invariants`]) and the scenario's expectations, and
//! writes a terminal table per scenario, a JSON file and a self-contained HTML file with an
//! SVG timeline. The exit status is non-zero when any check fails.
//!
//! Why a current-thread runtime: the breaker checks compare what a breaker admitted with the
//! state its listener reported. On one thread, a breaker's admission, its listener call and
//! the first poll of the admitted call happen in one poll of one task, so the observed order
//! is the real order (see [`record`]). The local model still generates on blocking threads.

pub(crate) mod abuse;
mod capture;
mod chain;
mod embeddings;
mod invariants;
mod observe;
mod record;
mod recovery;
mod reload;
mod report;
mod run;
mod scenario;
mod shared;
mod stats;
mod streams;
mod tokens;
mod vendor_status;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use capture::{KeyScanLayer, KeySink};
use chain::{Builtin, LocalCache, Template};
use run::{ScenarioRun, Settings};
use scenario::Scenario;

/// `cargo xtask chaos`: scripted vendor outages against the real chain.
#[derive(Debug, Parser)]
#[command(
    name = "cargo xtask chaos",
    about = "Scripted vendor outages against the real ripcord chain, and a report of what it did.",
    after_help = "Reports go to target/chaos-report/ (report.json, report.html). The exit status is 1 when any invariant or expectation fails."
)]
struct Args {
    /// Every selected scenario, short: 4 users, 6 s each, 3 s deadlines (about a minute in all).
    #[arg(long)]
    quick: bool,
    /// Add the scenarios of this TOML file (repeatable; format in the README).
    #[arg(long = "scenario", value_name = "PATH")]
    scenario_files: Vec<PathBuf>,
    /// Run only these scenarios (comma-separated names).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    only: Vec<String>,
    /// List the scenarios and exit.
    #[arg(long)]
    list: bool,
    /// Concurrent virtual users [default: 8, --quick 4].
    #[arg(long)]
    users: Option<usize>,
    /// Seconds the users keep sending, per scenario [default: 20, --quick 6].
    #[arg(long, value_name = "SECONDS")]
    duration: Option<f64>,
    /// Seed of the request mix, the think times and the probabilistic faults.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Each request's deadline in milliseconds [default: 4000, --quick 3000].
    #[arg(long, value_name = "MS")]
    deadline_ms: Option<u64>,
    /// Share of streamed requests, 0 to 1.
    #[arg(long, default_value_t = 0.5, value_name = "SHARE")]
    streamed: f64,
    /// A ripcord config to test instead of the built-in chain. Its cloud providers are pointed
    /// at the fake servers; scenarios refer to providers by name (built-ins use primary, backup,
    /// local).
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
    /// Run the built-in providers (without the local model) behind two routes that share
    /// "primary": each user's requests alternate between the routes, and one breaker serves
    /// both. A config with `[[routes]]` (`--config`) is driven the same way.
    #[arg(long, conflicts_with = "config")]
    routes: bool,
    /// Run the Claude-three-ways chain: claude (Anthropic wire) → claude-bedrock (Bedrock
    /// wire, every request SigV4-signed and checked) → claude-vertex (Claude on Vertex AI) →
    /// local → static. Chosen by itself for `--only claude-three-ways`.
    #[arg(long, conflicts_with_all = ["config", "routes"])]
    bedrock: bool,
    /// Run the Claude-via-Vertex chain: claude (Anthropic wire) → claude-vertex (Claude on
    /// Vertex AI, service-account tokens from a fake Google token endpoint, checked on every
    /// request) → local → static. Chosen by itself for `--only claude-via-vertex`.
    #[arg(long, conflicts_with_all = ["config", "routes", "bedrock"])]
    vertex: bool,
    /// Where the reports go [default: target/chaos-report].
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Export the run's traces over OTLP (`:4317` is gRPC, else HTTP), e.g. to Jaeger.
    #[arg(long, value_name = "ENDPOINT")]
    otlp: Option<String>,
    /// No live progress line.
    #[arg(long)]
    no_progress: bool,
}

/// What the whole run produced.
pub(crate) struct RunResult {
    pub(crate) runs: Vec<ScenarioRun>,
    pub(crate) template: Template,
    pub(crate) settings: Settings,
    pub(crate) quick: bool,
    pub(crate) started_unix_s: u64,
    pub(crate) wall: Duration,
    /// The shared-state scenario, when it was run (it runs its own replicas on Redis).
    pub(crate) shared: Option<shared::SharedRun>,
    /// The vendor-status scenario, when it was run (it runs its own chains and status pages).
    pub(crate) vendor: Option<vendor_status::VendorRun>,
    /// The gateway-under-abuse scenario, when it was run (a `ripcord serve` child).
    pub(crate) abuse: Option<abuse::AbuseRun>,
    /// The embeddings-outage scenario, when it was run (its own embedding chain).
    pub(crate) embeddings: Option<embeddings::EmbeddingsRun>,
}

impl RunResult {
    /// True when every scenario, the shared-state and vendor-status ones included, passed.
    pub(crate) fn passed(&self) -> bool {
        self.runs.iter().all(run::ScenarioRun::passed)
            && self.shared.as_ref().is_none_or(shared::SharedRun::passed)
            && self
                .vendor
                .as_ref()
                .is_none_or(vendor_status::VendorRun::passed)
            && self.abuse.as_ref().is_none_or(abuse::AbuseRun::passed)
            && self
                .embeddings
                .as_ref()
                .is_none_or(embeddings::EmbeddingsRun::passed)
    }
}

fn settings(a: &Args) -> Result<Settings, String> {
    let users = a.users.unwrap_or(if a.quick { 4 } else { 8 });
    let duration = a.duration.unwrap_or(if a.quick { 6.0 } else { 20.0 });
    let deadline_ms = a.deadline_ms.unwrap_or(if a.quick { 3000 } else { 4000 });
    if !(1..=256).contains(&users) {
        return Err(format!("--users must be 1 to 256, got {users}"));
    }
    if !(duration.is_finite() && (0.5..=3600.0).contains(&duration)) {
        return Err(format!(
            "--duration must be 0.5 to 3600 seconds, got {duration}"
        ));
    }
    if !(100..=120_000).contains(&deadline_ms) {
        return Err(format!(
            "--deadline-ms must be 100 to 120000, got {deadline_ms}"
        ));
    }
    if !(0.0..=1.0).contains(&a.streamed) {
        return Err(format!("--streamed must be 0 to 1, got {}", a.streamed));
    }
    Ok(Settings {
        users,
        duration: Duration::from_secs_f64(duration),
        deadline: Duration::from_millis(deadline_ms),
        seed: a.seed,
        stream_share: a.streamed,
        max_tokens: 8,
        tolerance: Duration::from_millis(150),
        join_margin: Duration::from_secs(5),
        progress: !a.no_progress,
    })
}

fn scenarios(a: &Args) -> Result<Vec<Scenario>, String> {
    let mut all = scenario::builtins();
    for path in &a.scenario_files {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the scenario file {}: {e}", path.display()))?;
        let taken: Vec<String> = all.iter().map(|s| s.name.clone()).collect();
        let taken: Vec<&str> = taken.iter().map(String::as_str).collect();
        let file = path.display().to_string();
        all.extend(scenario::parse(&file, &text, &taken).map_err(|e| e.to_string())?);
    }
    if a.only.is_empty() {
        return Ok(all);
    }
    let mut picked = Vec::new();
    for name in &a.only {
        match all.iter().find(|s| &s.name == name) {
            Some(s) => picked.push(s.clone()),
            None => {
                let names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
                return Err(format!(
                    "--only: no scenario named {name:?} (known: {})",
                    names.join(", ")
                ));
            }
        }
    }
    Ok(picked)
}

/// Installs the process's `tracing` subscriber: the key scan at debug level, and the OTLP
/// export when asked for.
fn install_tracing(
    sink: &Arc<KeySink>,
    otlp: Option<&str>,
    keys: &[(String, String)],
) -> Result<Option<ripcord_telemetry::TelemetryGuard>, String> {
    match otlp {
        None => {
            tracing_subscriber::registry()
                .with(KeyScanLayer::new(sink).with_filter(LevelFilter::DEBUG))
                .try_init()
                .map_err(|e| format!("cannot install the key scan: {e}"))?;
            Ok(None)
        }
        Some(endpoint) => {
            let protocol = if endpoint.trim_end_matches('/').ends_with(":4317") {
                ripcord_telemetry::Protocol::Grpc
            } else {
                ripcord_telemetry::Protocol::HttpProtobuf
            };
            let mut b = ripcord_telemetry::init()
                .service_name("ripcord-chaos")
                .endpoint(endpoint)
                .protocol(protocol);
            for (_, k) in keys {
                b = b.redact(k.clone());
            }
            let (layer, guard) = b
                .build()
                .map_err(|e| format!("--otlp {endpoint}: {e}"))?
                .into_parts();
            tracing_subscriber::registry()
                .with(layer)
                .with(KeyScanLayer::new(sink).with_filter(LevelFilter::DEBUG))
                .try_init()
                .map_err(|e| format!("cannot install tracing: {e}"))?;
            Ok(Some(guard))
        }
    }
}

/// Runs one of the scenarios with chains of their own when it is `wanted`, and prints its
/// block.
fn own_scenario<R>(
    wanted: bool,
    run: impl FnOnce() -> Result<R, String>,
    block: fn(&R) -> String,
) -> Result<Option<R>, String> {
    if !wanted {
        return Ok(None);
    }
    let r = run()?;
    println!("{}", block(&r));
    Ok(Some(r))
}

/// Runs the task.
pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let a = match Args::try_parse_from(
        std::iter::once("cargo xtask chaos".to_owned()).chain(args.iter().cloned()),
    ) {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                Err("bad arguments".to_owned())
            } else {
                Ok(())
            };
        }
    };
    let s = settings(&a)?;
    // The scenarios that build chains of their own (the shared-state one its replicas of the
    // built-in chain, the vendor-status one chains with a fake status page each, the abuse one
    // its own `ripcord serve` child, the embeddings one an embedding chain) run only when asked
    // for by name or when every scenario runs, and never with a user's config or the two-route
    // chain.
    let mut a = a;
    let asked = |name: &str| a.only.iter().any(|n| n == name);
    let [asked_shared, asked_vendor, asked_abuse, asked_embeddings] = [
        shared::NAME,
        vendor_status::NAME,
        abuse::NAME,
        embeddings::NAME,
    ]
    .map(asked);
    for (name, asked, what) in [
        (
            shared::NAME,
            asked_shared,
            "it runs replicas of the built-in chain",
        ),
        (
            vendor_status::NAME,
            asked_vendor,
            "it runs chains of its own",
        ),
        (abuse::NAME, asked_abuse, "it runs its own ripcord serve"),
        (
            embeddings::NAME,
            asked_embeddings,
            "it builds an embedding chain of its own",
        ),
    ] {
        if asked && (a.config.is_some() || a.routes) {
            return Err(format!(
                "--only {name}: {what}, not with --config or --routes"
            ));
        }
    }
    // The Bedrock scenario names its own chain's providers: asked for alone, it gets that chain.
    if a.config.is_none() && !a.routes && a.only == [scenario::CLAUDE_THREE_WAYS] {
        a.bedrock = true;
    }
    if a.config.is_none() && !a.routes && a.only == [scenario::CLAUDE_VIA_VERTEX] {
        a.vertex = true;
    }
    // The pooled scenario names its own chain's deployments: asked for alone, it gets that chain.
    let regions =
        a.config.is_none() && !a.routes && !a.bedrock && !a.vertex && a.only == [scenario::REGIONS];
    let own_chains = a.config.is_none() && !a.routes && !a.bedrock && !a.vertex;
    let run_shared = own_chains && (a.only.is_empty() || asked_shared);
    let run_vendor = own_chains && (a.only.is_empty() || asked_vendor);
    let run_abuse = own_chains && (a.only.is_empty() || asked_abuse);
    let run_embeddings = own_chains && (a.only.is_empty() || asked_embeddings);
    let asked_own = asked_shared || asked_vendor || asked_abuse || asked_embeddings;
    let run_own = run_shared || run_vendor || run_abuse || run_embeddings;
    a.only.retain(|n| {
        ![
            shared::NAME,
            vendor_status::NAME,
            abuse::NAME,
            embeddings::NAME,
        ]
        .contains(&n.as_str())
    });
    let selected = if asked_own && a.only.is_empty() {
        Vec::new()
    } else {
        scenarios(&a)?
    };
    if a.list {
        for sc in &selected {
            println!("{:<20} {} [{}]", sc.name, sc.description, sc.source);
        }
        if run_shared {
            println!(
                "{:<20} {} [{}]",
                shared::NAME,
                shared::DESCRIPTION,
                scenario::BUILT_IN
            );
        }
        if run_vendor {
            println!(
                "{:<20} {} [{}]",
                vendor_status::NAME,
                vendor_status::DESCRIPTION,
                scenario::BUILT_IN
            );
        }
        if run_abuse {
            println!(
                "{:<20} {} [{}]",
                abuse::NAME,
                abuse::DESCRIPTION,
                scenario::BUILT_IN
            );
        }
        if run_embeddings {
            println!(
                "{:<20} {} [{}]",
                embeddings::NAME,
                embeddings::DESCRIPTION,
                scenario::BUILT_IN
            );
        }
        return Ok(());
    }
    if selected.is_empty() && !run_own {
        return Err("no scenario to run".to_owned());
    }
    let template = match &a.config {
        Some(path) => Template::file(path, s.seed)?,
        None if a.routes => Template::builtin_two_routes(s.deadline, s.seed)?,
        None if a.bedrock => Template::builtin_chain(Builtin::Bedrock, s.deadline, true, s.seed)?,
        None if a.vertex => Template::builtin_chain(Builtin::Vertex, s.deadline, true, s.seed)?,
        None if regions => Template::builtin_chain(Builtin::Regions, s.deadline, false, s.seed)?,
        // Only the scenarios that build chains of their own: the local model is not needed.
        None if selected.is_empty() => Template::builtin(s.deadline, false, s.seed)?,
        None => Template::builtin(s.deadline, true, s.seed)?,
    };
    // A built-in scenario that does not fit a user's chain is skipped (unless asked for by
    // name); anything else that does not fit is an error.
    let mut selected = selected;
    let mut fits = Vec::with_capacity(selected.len());
    for sc in selected.drain(..) {
        match template.check(&sc) {
            Ok(()) => fits.push(sc),
            Err(e) if a.only.is_empty() && sc.source == scenario::BUILT_IN => {
                eprintln!("chaos: skipping {}: {e}", sc.name);
            }
            Err(e) => return Err(e),
        }
    }
    let selected = fits;
    if selected.is_empty() && !run_own {
        return Err("no scenario fits this chain".to_owned());
    }
    let out_dir = a.out.clone().unwrap_or_else(|| {
        crate::test::workspace_root()
            .join("target")
            .join("chaos-report")
    });
    let sink = KeySink::new(template.keys.clone());
    let telemetry = install_tracing(&sink, a.otlp.as_deref(), &template.keys)?;
    let started = Instant::now();
    let started_unix_s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    eprintln!(
        "chaos: {} scenario{}{} · {} users · {:.1} s each · {} ms deadlines · seed {} · scanning logs for {} keys\nchaos: chain: {}",
        selected.len(),
        if selected.len() == 1 { "" } else { "s" },
        [
            (
                run_shared,
                format!(" + {} (3 replicas on Redis)", shared::NAME)
            ),
            (
                run_vendor,
                format!(" + {} (3 chains with status pages)", vendor_status::NAME)
            ),
            (
                run_abuse,
                format!(" + {} (a ripcord serve child)", abuse::NAME)
            ),
            (
                run_embeddings,
                format!(" + {} (an embedding chain)", embeddings::NAME)
            ),
        ]
        .into_iter()
        .filter_map(|(on, what)| on.then_some(what))
        .collect::<String>(),
        s.users,
        s.duration.as_secs_f64(),
        s.deadline.as_millis(),
        s.seed,
        sink.key_count(),
        template.source
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    let cache = Arc::new(LocalCache::default());
    let total = selected.len();
    let mut runs = Vec::with_capacity(total);
    for (i, sc) in selected.iter().enumerate() {
        let label = format!("[{}/{total} {}]", i + 1, sc.name);
        let baseline = if sc.load.healthy_baseline {
            let mut healthy = sc.clone();
            healthy.phases.clear();
            healthy.load.healthy_baseline = false;
            let b = runtime.block_on(run::run_scenario(
                &healthy,
                &format!("{label} (all healthy)"),
                &template,
                &s,
                &cache,
                None,
                None,
            ))?;
            let per_s = invariants::answers_per_s(&b.records);
            eprintln!(
                "chaos: {}: the all-healthy run answered {per_s:.1} requests/s",
                sc.name
            );
            Some(per_s)
        } else {
            None
        };
        let mut r = runtime.block_on(run::run_scenario(
            sc,
            &label,
            &template,
            &s,
            &cache,
            Some(&sink),
            None,
        ))?;
        if baseline.is_some() {
            r.records.baseline_answers_per_s = baseline;
            r.recheck(s.tolerance);
        }
        report::scan_scenario(&mut r, &sink, &s);
        println!("{}", report::terminal::scenario_block(&r, i + 1, total));
        runs.push(r);
    }
    drop(cache);
    let shared_run = own_scenario(
        run_shared,
        || runtime.block_on(shared::run(&s)),
        shared::terminal_block,
    )?;
    let vendor_run = own_scenario(
        run_vendor,
        || {
            // Its own key scan starts here (what came before was judged by its own scenario).
            let _ = sink.take();
            let mut r = runtime.block_on(vendor_status::run(&s))?;
            vendor_status::add_key_scan(&mut r, &sink);
            Ok(r)
        },
        vendor_status::terminal_block,
    )?;
    let embeddings_run = own_scenario(
        run_embeddings,
        || runtime.block_on(embeddings::run(&s)),
        embeddings::terminal_block,
    )?;
    // A local generation cut by a deadline stops at its next token; don't wait on it forever.
    runtime.shutdown_timeout(Duration::from_secs(10));
    // Its own runtime (several threads) and its own child process.
    let abuse_run = own_scenario(
        run_abuse,
        || {
            abuse::run(&abuse::AbuseSettings {
                duration: abuse::DURATION,
            })
        },
        abuse::terminal_block,
    )?;
    let result = RunResult {
        runs,
        template,
        settings: s,
        quick: a.quick,
        started_unix_s,
        wall: started.elapsed(),
        shared: shared_run,
        vendor: vendor_run,
        abuse: abuse_run,
        embeddings: embeddings_run,
    };
    let paths = report::write(&result, &out_dir, &sink)?;
    println!("{}", report::terminal::summary(&result));
    if let Some(r) = &result.shared {
        println!(
            "{}: {}",
            shared::NAME,
            match (&r.skipped, r.passed()) {
                (Some(why), _) => format!("SKIPPED ({why})"),
                (None, true) => "PASS".to_owned(),
                (None, false) => "FAIL".to_owned(),
            }
        );
    }
    if let Some(r) = &result.vendor {
        println!(
            "{}: {}",
            vendor_status::NAME,
            if r.passed() { "PASS" } else { "FAIL" }
        );
    }
    if let Some(r) = &result.abuse {
        println!(
            "{}: {}",
            abuse::NAME,
            if r.passed() { "PASS" } else { "FAIL" }
        );
    }
    if let Some(r) = &result.embeddings {
        println!(
            "{}: {}",
            embeddings::NAME,
            if r.passed() { "PASS" } else { "FAIL" }
        );
    }
    println!("JSON report: {}", paths.json.display());
    println!(
        "HTML report: {}  (open it in a browser; it needs no network)",
        paths.html.display()
    );
    if let Some(guard) = telemetry {
        if let Err(e) = guard.shutdown() {
            eprintln!("chaos: the OTLP export failed: {e}");
        } else {
            eprintln!(
                "chaos: traces exported to {}",
                a.otlp.as_deref().unwrap_or("")
            );
        }
    }
    let mut failed: Vec<String> = result
        .runs
        .iter()
        .flat_map(|r| {
            r.invariants
                .iter()
                .chain(&r.expectations)
                .filter(|c| !c.passed)
                .map(move |c| format!("{}: {}", r.scenario.name, c.id))
        })
        .collect();
    for (name, checks) in [
        (shared::NAME, result.shared.as_ref().map(|r| &r.checks)),
        (
            vendor_status::NAME,
            result.vendor.as_ref().map(|r| &r.checks),
        ),
        (abuse::NAME, result.abuse.as_ref().map(|r| &r.checks)),
        (
            embeddings::NAME,
            result.embeddings.as_ref().map(|r| &r.checks),
        ),
    ] {
        failed.extend(
            checks
                .into_iter()
                .flatten()
                .filter(|c| !c.passed)
                .map(|c| format!("{name}: {}", c.id)),
        );
    }
    if failed.is_empty() && paths.leaks.is_empty() {
        Ok(())
    } else {
        let mut why = failed;
        why.extend(
            paths
                .leaks
                .iter()
                .map(|l| format!("{}: the key of {}", l.place, l.key_of)),
        );
        Err(format!("{} check(s) failed: {}", why.len(), why.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Args {
        Args::try_parse_from(std::iter::once("chaos").chain(a.iter().copied())).unwrap()
    }

    #[test]
    fn quick_defaults_overrides_and_limits() {
        let s = settings(&args(&["--quick"])).unwrap();
        assert_eq!(s.users, 4);
        assert_eq!(s.duration, Duration::from_secs(6));
        assert_eq!(s.deadline, Duration::from_millis(3000));
        let s = settings(&args(&["--quick", "--users", "2", "--duration", "1.5"])).unwrap();
        assert_eq!((s.users, s.duration), (2, Duration::from_millis(1500)));
        let s = settings(&args(&[])).unwrap();
        assert_eq!((s.users, s.duration.as_secs(), s.seed), (8, 20, 7));
        for bad in [
            &["--users", "0"][..],
            &["--duration", "0"],
            &["--duration", "nan"],
            &["--deadline-ms", "5"],
            &["--streamed", "1.5"],
        ] {
            assert!(settings(&args(bad)).is_err(), "{bad:?}");
        }
        assert!(Args::try_parse_from(["chaos", "--users", "many"]).is_err());
    }

    #[test]
    fn scenario_files_add_and_only_selects() {
        let path =
            std::env::temp_dir().join(format!("ripcord-chaos-test-{}.toml", std::process::id()));
        std::fs::write(
            &path,
            "[[scenario]]\nname = \"mine\"\n[[scenario.phase]]\nvendor = \"backup\"\nat = 0.5\nfault = \"hang\"\n",
        )
        .unwrap();
        let file = path.display().to_string();
        let all = scenarios(&args(&["--scenario", &file])).unwrap();
        // The built-ins, then the file's.
        let n = scenario::builtins().len();
        assert_eq!(all.len(), n + 1);
        assert_eq!(all[n].name, "mine");
        assert_eq!(all[n].source, file);
        let some = scenarios(&args(&["--scenario", &file, "--only", "mine,flapping"])).unwrap();
        let names: Vec<&str> = some.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["mine", "flapping"]);
        let e = scenarios(&args(&["--only", "nope"])).unwrap_err();
        assert!(
            e.contains("no scenario named \"nope\"") && e.contains("flapping"),
            "{e}"
        );
        std::fs::write(&path, "[[scenario]]\nname = \"flapping\"\n").unwrap();
        let e = scenarios(&args(&["--scenario", &file])).unwrap_err();
        assert!(
            e.starts_with(&format!("{file}:2: key `scenario[0].name`")),
            "{e}"
        );
        std::fs::remove_file(&path).unwrap();
        let e = scenarios(&args(&["--scenario", &file])).unwrap_err();
        assert!(e.contains("cannot read the scenario file"), "{e}");
    }
}
