//! The modes that run one thing alone: `--profile ROW` (one row, sequentially, for a profiler)
//! and `--paired` (issue 36's pool against a single link, nothing else).

use crate::{
    Args, bare_proxy, command_line, cpu, gateway, load_average, paired, rows, skipcost, upstream,
    workspace_root,
};

/// `--paired`: the pool against a single link alone (the upstream child, the two chains,
/// nothing else), printed with the load average.
pub(crate) fn paired(args: &Args) -> Result<(), String> {
    let load_start = load_average();
    let upstream = upstream::Upstream::spawn()?;
    let targets = rows::Targets::upstream(&upstream.urls);
    let rt = crate::runtime()?;
    let p = rt.block_on(async {
        let wire = rows::capture_adapter_wire().await?;
        let (rows, _) = rows::build(&targets, &wire, 0).await?;
        let call_of = |key: &str| {
            rows.iter()
                .find(|r| r.key == key)
                .map(|r| r.call.clone())
                .ok_or_else(|| format!("no row {key:?}"))
        };
        paired::measure(
            call_of("chain")?,
            call_of("chain_pool")?,
            paired::PairedPlan::new(args.quick),
        )
        .await
    })?;
    drop(rt);
    drop(upstream);
    println!("{}", p.line());
    println!(
        "load average: {load_start:.2} at the start, {:.2} at the end; command: {}",
        load_average(),
        command_line(args)
    );
    Ok(())
}

/// Runs one row sequentially, for a profiler (`valgrind --tool=callgrind`, `perf record`).
pub(crate) fn profile(args: &Args) -> Result<(), String> {
    let key = args.profile.clone().unwrap_or_default();
    let upstream = upstream::Upstream::spawn()?;
    let gateway = if key.starts_with("gateway") {
        let bin = gateway::find_binary(args.ripcord.as_deref())?;
        let dir = workspace_root().join("target").join("bench");
        Some(gateway::spawn(
            &bin,
            &upstream.urls.ok,
            &dir,
            args.gateway_wrapper.as_deref(),
        )?)
    } else {
        None
    };
    let proxy = if key == "bare_proxy" {
        Some(bare_proxy::BareProxy::spawn(&upstream.urls.ok)?)
    } else {
        None
    };
    let targets = rows::Targets {
        gateway: gateway.as_ref().map(|g| g.url.clone()),
        proxy: proxy.as_ref().map(|p| p.url.clone()),
        ..rows::Targets::upstream(&upstream.urls)
    };
    let rt = crate::runtime()?;
    let result = rt.block_on(async {
        if key == "skip_cost" {
            let s = tokio::spawn(skipcost::measure(args.calls, 11))
                .await
                .map_err(|e| e.to_string())??;
            println!("skip cost: {s:?}");
            return Ok(());
        }
        let wire = rows::capture_adapter_wire().await?;
        let (rows, _) = rows::build(&targets, &wire, 0).await?;
        let keys: Vec<&str> = rows.iter().map(|r| r.key).collect();
        let row = rows
            .into_iter()
            .find(|r| r.key == key)
            .ok_or_else(|| format!("--profile {key:?}: rows are {keys:?} and skip_cost"))?;
        let call = row.call.clone();
        let n = args.calls;
        let tasks = args.concurrency.max(1);
        let per_task = n.div_ceil(tasks);
        let run = async move {
            for _ in 0..n / 10 + 1 {
                call().await?;
            }
            let cpu0 = cpu::self_cpu();
            let t0 = tokio::time::Instant::now();
            let mut set = tokio::task::JoinSet::new();
            for _ in 0..tasks {
                let call = call.clone();
                set.spawn(async move {
                    for _ in 0..per_task {
                        call().await?;
                    }
                    Ok::<_, String>(())
                });
            }
            while let Some(done) = set.join_next().await {
                done.map_err(|e| e.to_string())??;
            }
            Ok::<_, String>((t0.elapsed(), cpu::self_cpu().saturating_sub(cpu0)))
        };
        let (wall, cpu) = tokio::spawn(run).await.map_err(|e| e.to_string())??;
        let n = per_task * tasks;
        println!(
            "{key}: {n} calls by {tasks} task(s), {:.1} µs wall and {:.1} µs CPU per call",
            wall.as_secs_f64() * 1e6 / n.max(1) as f64,
            cpu.as_secs_f64() * 1e6 / n.max(1) as f64
        );
        Ok(())
    });
    // Client connections close first, so a gently stopped gateway drains at once.
    drop(rt);
    drop(gateway);
    result
}
