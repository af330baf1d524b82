//! Issue 42: what a per-tenant token budget costs per call as the number of live sub-tenants
//! grows. The `chain` row's chain behind a [`Budget`], called as one sub-tenant
//! (`budget_1_subtenant`) and as 30,000 sub-tenants in turn (`budget_30k_subtenants`), every
//! account already live in the window when the row starts (the table is filled before the
//! run, so the row measures steady state, not account creation). The target: the bench
//! process's CPU per call with 30,000 sub-tenants at most 1.5× that with one.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ripcord_core::{ChatModel, Context};
use ripcord_resilience::{
    Budget, BudgetAdmit, BudgetPolicy, BudgetStore, LocalBudgetStore, TokioClock,
};

use super::{Targets, call, chain, check, request, row};
use crate::report::{RowReport, Target};
use crate::runner::Row;

/// Live sub-tenants of the large row.
pub(crate) const SUB_TENANTS: usize = 30_000;

/// A budget so large nothing is refused during the run.
fn policy() -> Result<BudgetPolicy, String> {
    BudgetPolicy::builder()
        .tokens_per_window(u64::MAX / 4)
        .window(Duration::from_secs(3600))
        .build()
        .map_err(|e| e.to_string())
}

fn tenant(i: usize) -> Arc<str> {
    Arc::from(format!("acme/user-{i:05}"))
}

/// One budgeted chain whose calls go to `tenants` sub-tenants in turn, every account filled.
fn budgeted_row(
    t: &Targets,
    key: &'static str,
    label: &'static str,
    tenants: usize,
    meters: usize,
) -> Result<Row, String> {
    let policy = policy()?;
    let store = Arc::new(LocalBudgetStore::new(policy.window(), Arc::new(TokioClock)));
    let names: Arc<Vec<Arc<str>>> = Arc::new((0..tenants).map(tenant).collect());
    for name in names.iter() {
        match store.try_reserve(name, policy.limit_for(name), 1) {
            BudgetAdmit::Held(h) => store.settle(h, 1),
            other => return Err(format!("filling the budget table: {other:?}")),
        }
    }
    let (ok_chain, _) = chain(&t.ok, ripcord_resilience::BreakerPolicy::default(), &t.ok)?;
    let model: Arc<dyn ChatModel> = Arc::new(Budget::with_store(ok_chain, policy, store));
    let req = Arc::new(request());
    let next = Arc::new(AtomicUsize::new(0));
    Ok(row(
        key,
        label,
        Some("chain"),
        &[],
        call(move || {
            let model = Arc::clone(&model);
            let req = Arc::clone(&req);
            let i = next.fetch_add(1, Ordering::Relaxed) % names.len();
            let ctx = Context::new().with_tenant(Arc::clone(&names[i]));
            async move {
                let r = model.chat(&req, &ctx).await.map_err(|e| e.to_string())?;
                check(&r, "primary")?;
                Ok(None)
            }
        }),
        meters,
    ))
}

/// The two budget rows.
pub(super) fn rows(t: &Targets, meters: usize) -> Result<Vec<Row>, String> {
    Ok(vec![
        budgeted_row(
            t,
            "budget_1_subtenant",
            "chain + tenant budget, 1 sub-tenant",
            1,
            meters,
        )?,
        budgeted_row(
            t,
            "budget_30k_subtenants",
            "chain + tenant budget, 30,000 live sub-tenants",
            SUB_TENANTS,
            meters,
        )?,
    ])
}

/// The target: CPU per call of the bench process at c=64, 30,000 sub-tenants over one.
pub(crate) fn target(rows: &[RowReport]) -> Option<Target> {
    let get = |key: &str| rows.iter().find(|r| r.key == key);
    let (one, many) = (get("budget_1_subtenant")?, get("budget_30k_subtenants")?);
    let r = many.c64.cpu_us_bench / one.c64.cpu_us_bench.max(f64::MIN_POSITIVE);
    Some(Target {
        what: format!(
            "bench CPU per call at c=64 with {SUB_TENANTS} budget sub-tenants / with 1 ({:.1} / {:.1} µs)",
            many.c64.cpu_us_bench, one.c64.cpu_us_bench
        ),
        value: r,
        bound: "<= 1.5".into(),
        met: r <= 1.5,
    })
}
