//! What `[store]` gives `ripcord serve`: the ledger's writer, the keys kept in the store, and
//! the budget accounts charged at start with what the ledger holds.

use std::sync::Arc;

use ripcord_cli::{config, gateway};

/// Charges the budget accounts with what the ledger holds for their window, so a restart
/// (even a `kill -9`, within the ledger's flush bound) loses no spend. A database that does not
/// answer is reported, and the gateway starts with empty accounts.
pub(crate) async fn charge_spent(
    store: &ripcord_store::Store,
    accounts: &ripcord_cli::build::budget_accounts::BudgetAccounts,
    budget: &config::TenantBudget,
) {
    let (from, what) = budget_from(Some(budget));
    match store.tokens_by_tenant_since(from).await {
        Ok(spent) => match accounts.charge_spent(&spent) {
            Some(n) => eprintln!(
                "ripcord: budget accounts charged {n} token(s) the ledger holds for {what}"
            ),
            None => eprintln!(
                "ripcord: budget accounts are on Redis, which keeps them across restarts; the ledger is not replayed into them"
            ),
        },
        Err(e) => eprintln!(
            "ripcord: could not read the ledger's spend for the budget window, starting with empty accounts: {e}"
        ),
    }
}

/// Where a budget's window (or period) began, and how to say it: `[budget]`'s, or the default
/// window without one.
fn budget_from(budget: Option<&config::TenantBudget>) -> (i64, String) {
    let now = ripcord_resilience::system_wall_clock()();
    let window_s = budget.map_or(
        ripcord_resilience::BudgetPolicy::default()
            .window()
            .as_secs(),
        |b| b.window_s,
    );
    match budget.and_then(|b| b.period) {
        Some(p) => (p.start_of(now), format!("this {p:?}").to_lowercase()),
        None => (
            now.saturating_sub(i64::try_from(window_s.saturating_mul(1000)).unwrap_or(i64::MAX)),
            format!("the last {window_s} s"),
        ),
    }
}

/// Charges the store keys' own budgets with what the ledger holds for each key in the window.
pub(crate) async fn charge_key_spend(
    store: &ripcord_store::Store,
    accounts: &Arc<dyn ripcord_resilience::BudgetStore>,
    budget: Option<&config::TenantBudget>,
) {
    let (from, what) = budget_from(budget);
    match store.tokens_by_key_since(from).await {
        Ok(spent) => {
            let mut n = 0;
            for (id, tokens) in spent.iter().filter(|(id, _)| id.starts_with("key_")) {
                let account = gateway::store_keys::budget_account(id);
                if matches!(
                    accounts.try_reserve(&account, u64::MAX, *tokens),
                    ripcord_resilience::BudgetAdmit::Held(_)
                ) {
                    n += tokens;
                }
            }
            eprintln!(
                "ripcord: store keys' budgets charged {n} token(s) the ledger holds for {what}"
            );
        }
        Err(e) => eprintln!(
            "ripcord: could not read the ledger's spend per key, starting the keys' budgets empty: {e}"
        ),
    }
}

/// What `[store]` gives a running gateway: the ledger, its database, and the keys kept there
/// (`keys = true`).
pub(crate) type Stored = (
    ripcord_store::Ledger,
    ripcord_store::Store,
    Option<gateway::store_keys::KeyDirectory>,
);

/// Connects `[store]`'s database (migrating it), starts the ledger's writer and, with
/// `keys = true`, reads the keys kept there.
pub(crate) async fn start_ledger(
    s: &config::StoreSettings,
) -> Result<
    (
        ripcord_store::Ledger,
        ripcord_store::Store,
        ripcord_store::LedgerTask,
        Option<gateway::store_keys::KeyDirectory>,
    ),
    String,
> {
    use secrecy::ExposeSecret;
    let url = s.url.expose_secret();
    let store = ripcord_store::Store::connect(url, &ripcord_store::StoreOptions::default())
        .await
        .map_err(|e| {
            let cause = std::error::Error::source(&e).map_or(String::new(), |c| format!(": {c}"));
            format!("{e}{cause}")
        })?;
    let mut options = ripcord_store::LedgerOptions::new(s.spool.clone());
    options.flush_interval = s.flush_interval;
    options.spool_max_bytes = s.spool_max_bytes;
    let (ledger, task) = ripcord_store::Ledger::start(store.clone(), options)
        .await
        .map_err(|e| e.to_string())?;
    eprintln!(
        "ripcord: ledger on {} (spool {})",
        ripcord_store::redact(url),
        s.spool.display()
    );
    let directory = match s.keys_poll {
        None => None,
        Some(every) => {
            let d = gateway::store_keys::KeyDirectory::start(store.clone(), every)
                .await
                .map_err(|e| format!("could not read the store's keys: {e}"))?;
            eprintln!(
                "ripcord: {} key(s) in the store, read again every {} ms",
                d.len(),
                every.as_millis()
            );
            Some(d)
        }
    };
    Ok((ledger, store, task, directory))
}
