//! Tenants' token budgets as gauges, read when the metrics are collected.
//!
//! A budget account changes on every call, but an operator only needs its level when
//! Prometheus scrapes (or the OTLP export collects): so nothing is recorded per call. The
//! gauges are OpenTelemetry *observable* gauges whose callbacks ask a [`BudgetSource`] for the
//! accounts at collection time; a call pays nothing for them. The source is swappable
//! ([`BudgetGauges::set`]), so a gateway whose config is reloaded reports its new accounts
//! from the next collection on, and an account no longer read disappears from the next scrape
//! (observable gauges report only what their last callback observed).
//!
//! | instrument | Prometheus | meaning |
//! | --- | --- | --- |
//! | `ripcord.budget.limit_tokens` | `ripcord_budget_limit_tokens` | the account's tokens per window |
//! | `ripcord.budget.remaining_tokens` | `ripcord_budget_remaining_tokens` | tokens it may still use in the current window |
//! | `ripcord.budget.remaining_ratio` | `ripcord_budget_remaining_ratio` | remaining / limit, 0 to 1 (0 for a zero limit) |
//!
//! Each carries `ripcord.tenant` (`ripcord_tenant`), so a tenant's key reading `/metrics`
//! ([`crate::PrometheusExport::render_for_tenant`]) sees only its own accounts. Which accounts a
//! source reports is its choice; it must keep them bounded (one series per account).

use std::fmt;
use std::sync::{Arc, RwLock};

use opentelemetry::KeyValue;
use opentelemetry::metrics::{AsyncInstrument, Meter};
use ripcord_core::telemetry::attr;

use crate::metrics::names;

/// What a gauge reads of an account.
type Pick<T> = fn(&BudgetReading) -> T;

/// One budget account as a collection reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetReading {
    /// The account's tenant (`acme`, or `acme/alice` for a sub-tenant's account).
    pub tenant: String,
    /// Its tokens per window.
    pub limit: u64,
    /// Tokens it may still use in the current window.
    pub remaining: u64,
}

impl BudgetReading {
    /// `remaining / limit`, 0 to 1; 0 for a zero limit (such a tenant can spend nothing).
    pub fn ratio(&self) -> f64 {
        if self.limit == 0 {
            return 0.0;
        }
        (self.remaining.min(self.limit) as f64) / (self.limit as f64)
    }
}

/// Where the gauges read the accounts from, at each collection (so it must not block on I/O:
/// read what is known locally).
pub trait BudgetSource: Send + Sync + fmt::Debug + 'static {
    /// The accounts to report now (a bounded set: one series per account).
    fn readings(&self) -> Vec<BudgetReading>;
}

/// The budget gauges of one meter provider, over a source that can be replaced while it runs.
/// Clones share the source.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use ripcord_telemetry::PrometheusExport;
/// use ripcord_telemetry::budget_gauges::{BudgetReading, BudgetSource};
///
/// #[derive(Debug)]
/// struct Fixed;
/// impl BudgetSource for Fixed {
///     fn readings(&self) -> Vec<BudgetReading> {
///         vec![BudgetReading { tenant: "acme".into(), limit: 1000, remaining: 50 }]
///     }
/// }
///
/// let export = PrometheusExport::new();
/// let (_layer, _provider) = export.local_layer(); // registers the gauges
/// export.budget_gauges().set(Some(Arc::new(Fixed)));
/// let text = export.render()?;
/// assert!(text.contains(r#"ripcord_budget_remaining_ratio{ripcord_tenant="acme"} 0.05"#), "{text}");
/// export.budget_gauges().set(None);
/// assert!(!export.render()?.contains("acme"));
/// # Ok::<(), std::fmt::Error>(())
/// ```
#[derive(Clone, Default)]
pub struct BudgetGauges {
    source: Arc<RwLock<Option<Arc<dyn BudgetSource>>>>,
}

impl fmt::Debug for BudgetGauges {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BudgetGauges")
            .field("source", &self.current().is_some())
            .finish()
    }
}

impl BudgetGauges {
    /// Gauges without a source (they report nothing).
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads the accounts from `source` from the next collection on (`None`: report none).
    pub fn set(&self, source: Option<Arc<dyn BudgetSource>>) {
        *self
            .source
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = source;
    }

    fn current(&self) -> Option<Arc<dyn BudgetSource>> {
        self.source
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The accounts now (none without a source).
    pub fn readings(&self) -> Vec<BudgetReading> {
        self.current().map(|s| s.readings()).unwrap_or_default()
    }

    /// Registers the three gauges on `meter` (once per meter provider: a second registration
    /// would report every account twice).
    pub fn register(&self, meter: &Meter) {
        let tokens: [(&str, &str, Pick<u64>); 2] = [
            (
                names::BUDGET_LIMIT,
                "A tenant's token budget per window",
                |r| r.limit,
            ),
            (
                names::BUDGET_REMAINING,
                "Tokens a tenant may still use in the budget's current window",
                |r| r.remaining,
            ),
        ];
        for (name, description, pick) in tokens {
            meter
                .u64_observable_gauge(name)
                .with_unit("{token}")
                .with_description(description)
                .with_callback(self.per_tenant(pick))
                .build();
        }
        meter
            .f64_observable_gauge(names::BUDGET_REMAINING_RATIO)
            .with_unit("1")
            .with_description("What is left of a tenant's token budget, as a share of its limit")
            .with_callback(self.per_tenant(BudgetReading::ratio))
            .build();
    }

    /// A gauge callback observing `pick` of every account the source reads now, each under
    /// its tenant.
    fn per_tenant<T: 'static>(
        &self,
        pick: Pick<T>,
    ) -> impl Fn(&dyn AsyncInstrument<T>) + Send + Sync + 'static {
        let g = self.clone();
        move |o| {
            for r in g.readings() {
                o.observe(pick(&r), &[KeyValue::new(attr::TENANT, r.tenant.clone())]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PrometheusExport;
    use std::sync::Mutex;

    #[derive(Debug, Default)]
    struct Accounts(Mutex<Vec<BudgetReading>>);

    impl BudgetSource for Accounts {
        fn readings(&self) -> Vec<BudgetReading> {
            self.0.lock().unwrap().clone()
        }
    }

    fn reading(tenant: &str, limit: u64, remaining: u64) -> BudgetReading {
        BudgetReading {
            tenant: tenant.to_owned(),
            limit,
            remaining,
        }
    }

    #[test]
    fn the_gauges_read_the_source_at_each_scrape_and_a_tenant_sees_only_its_own() {
        let export = PrometheusExport::new();
        let (_layer, _provider) = export.local_layer();
        let accounts = Arc::new(Accounts::default());
        *accounts.0.lock().unwrap() = vec![
            reading("acme", 1000, 1000),
            reading("acme/alice", 100, 0),
            reading("globex", 0, 0),
        ];
        export
            .budget_gauges()
            .set(Some(Arc::clone(&accounts) as Arc<dyn BudgetSource>));
        let text = export.render().unwrap();
        for line in [
            r#"ripcord_budget_limit_tokens{ripcord_tenant="acme"} 1000"#,
            r#"ripcord_budget_remaining_tokens{ripcord_tenant="acme/alice"} 0"#,
            r#"ripcord_budget_remaining_ratio{ripcord_tenant="acme"} 1"#,
            r#"ripcord_budget_remaining_ratio{ripcord_tenant="globex"} 0"#,
            "# TYPE ripcord_budget_remaining_ratio gauge",
        ] {
            assert!(text.contains(line), "{line} not in\n{text}");
        }
        // The next scrape reads the accounts again: nothing is recorded in between.
        accounts.0.lock().unwrap()[0].remaining = 40;
        let text = export.render().unwrap();
        assert!(
            text.contains(r#"ripcord_budget_remaining_ratio{ripcord_tenant="acme"} 0.04"#),
            "{text}"
        );
        let mine = export.render_for_tenant("acme").unwrap();
        assert!(
            mine.contains("acme/alice") && !mine.contains("globex"),
            "{mine}"
        );
        // A source without an account (or none at all) leaves no stale series behind.
        accounts.0.lock().unwrap().retain(|r| r.tenant != "globex");
        assert!(!export.render().unwrap().contains("globex"));
        export.budget_gauges().set(None);
        assert!(!export.render().unwrap().contains("ripcord_tenant"));
    }

    #[test]
    fn the_ratio_stays_between_zero_and_one() {
        assert_eq!(reading("t", 0, 0).ratio(), 0.0);
        assert_eq!(reading("t", 10, 20).ratio(), 1.0);
        assert_eq!(reading("t", 200, 50).ratio(), 0.25);
    }
}
