//! The tenants' budget accounts that `/metrics` shows (`ripcord_budget_*`), read at scrape
//! time from the gateway's `[budget]` wrappers.
//!
//! Which accounts, and why: one series per *configured* tenant — every tenant a gateway key
//! names, every tenant with a limit of its own in `[budget.tenants]`, and `<anonymous>` when
//! calls without a tenant are budgeted and some caller can make them. A sub-tenant account
//! (`tenant/sub`, named by the client of a `sub_tenants` key) is shown only when
//! `[budget.tenants]` gives it a limit of its own: clients can name tens of thousands of them,
//! and a series each would make every scrape, and Prometheus, pay for that cardinality.

use std::sync::Arc;

use ripcord_resilience::{BudgetPeriod, BudgetStore, BudgetView};
use ripcord_telemetry::budget_gauges::{BudgetReading, BudgetSource};

use crate::config::Config;

/// The accounts of one build of the gateway (replaced whole on a reload).
#[derive(Debug)]
pub struct BudgetAccounts {
    /// The per-tenant accounts, and the tenants to read from them.
    tenants: (BudgetView, Vec<String>),
    /// The sub-tenant accounts (when a key has `sub_tenants`), and the configured ones to read.
    subs: Option<(BudgetView, Vec<String>)>,
    /// The window (seconds) and period the accounts count over.
    window: (u64, Option<BudgetPeriod>),
}

/// The previous build's account stores a rebuild keeps: the tenants', and the sub-tenants'.
pub(super) type Kept = (Arc<dyn BudgetStore>, Option<Arc<dyn BudgetStore>>);

impl BudgetAccounts {
    /// The accounts of `config`'s `[budget]` over its wrappers' views (`sub`: the sub-tenant
    /// accounts' wrapper, when there is one).
    pub(super) fn new(config: &Config, tenants: BudgetView, sub: Option<BudgetView>) -> Self {
        let overrides = config.budget.iter().flat_map(|b| b.tenants.iter());
        let mut names: Vec<String> = config
            .gateway_keys
            .iter()
            .filter_map(|k| k.tenant.clone())
            .chain(
                overrides
                    .clone()
                    .filter(|(t, _)| !t.contains('/'))
                    .map(|(t, _)| t.clone()),
            )
            .collect();
        let untenanted = config.gateway_keys.is_empty()
            || config.gateway_keys.iter().any(|k| k.tenant.is_none());
        if let Some(anon) = tenants.anonymous().filter(|_| untenanted) {
            names.push(anon.to_owned());
        }
        names.sort();
        names.dedup();
        let subs = sub.map(|view| {
            let mut named: Vec<String> = overrides
                .filter(|(t, _)| t.contains('/'))
                .map(|(t, _)| t.clone())
                .collect();
            named.sort();
            named.dedup();
            (view, named)
        });
        BudgetAccounts {
            tenants: (tenants, names),
            subs,
            window: config
                .budget
                .as_ref()
                .map_or((0, None), |b| (b.window_s, b.period)),
        }
    }

    /// The stores a rebuild over `budget` keeps, so a reload loses no spend: these accounts'
    /// own when they count over the same window or period (a changed window starts afresh;
    /// limits may change, what was spent stays).
    pub(super) fn kept_for(&self, budget: &crate::config::TenantBudget) -> Option<Kept> {
        (self.window == (budget.window_s, budget.period)).then(|| {
            (
                self.tenants.0.store(),
                self.subs.as_ref().map(|(v, _)| v.store()),
            )
        })
    }

    /// True when `other` reads the same tenant accounts (a rebuild kept them).
    pub fn same_accounts(&self, other: &BudgetAccounts) -> bool {
        self.tenants.0.same_accounts(&other.tenants.0)
    }
}

impl BudgetAccounts {
    /// Charges what the ledger says each account spent in the window (`tenant`, `sub-tenant`,
    /// tokens per group), so a restart loses no spend: the tenant's account, the sub-tenant's
    /// (`tenant/sub`) when sub-tenants are budgeted, and `<anonymous>` for calls without a
    /// tenant when those are budgeted. Answers the tokens charged; `None` when the accounts
    /// are shared through Redis, which keeps them across restarts itself.
    pub fn charge_spent(&self, spent: &[(Option<String>, Option<String>, u64)]) -> Option<u64> {
        let (view, _) = &self.tenants;
        let mut charged = 0;
        for (tenant, sub, tokens) in spent {
            let account = match (tenant, view.anonymous()) {
                (Some(t), _) => t.as_str(),
                (None, Some(anon)) => anon,
                (None, None) => continue,
            };
            if !view.charge(account, *tokens) {
                return None;
            }
            charged += tokens;
            if let (Some(t), Some(s), Some((subs, _))) = (tenant, sub, &self.subs) {
                subs.charge(&format!("{t}/{s}"), *tokens);
            }
        }
        Some(charged)
    }
}

fn read(view: &BudgetView, tenant: &str) -> BudgetReading {
    BudgetReading {
        tenant: tenant.to_owned(),
        limit: view.limit_for(tenant),
        remaining: view.remaining(tenant),
    }
}

impl BudgetSource for BudgetAccounts {
    fn readings(&self) -> Vec<BudgetReading> {
        let (view, names) = &self.tenants;
        let mut out: Vec<BudgetReading> = names.iter().map(|t| read(view, t)).collect();
        if let Some((view, names)) = &self.subs {
            out.extend(names.iter().map(|t| read(view, t)));
        }
        out
    }
}
