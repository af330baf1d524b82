//! The ledger against real databases: a SQLite file in a temp directory, and Postgres when
//! `RIPCORD_TEST_POSTGRES_URL` names a server. Each behaviour is one `async fn` run on both.

#![allow(clippy::unwrap_used, clippy::panic, clippy::print_stderr)]

#[macro_use]
mod support;

use std::time::Duration;

use ripcord_store::{GroupBy, Ledger, LedgerOptions, SpendFilter, Store, StoreOptions};
use support::{Db, call};

fn options(db: &Db) -> LedgerOptions {
    let mut o = LedgerOptions::new(db.dir.0.join("ledger.spool"));
    o.retry_interval = Duration::ZERO;
    o.write_timeout = Duration::from_secs(5);
    o
}

async fn open(db: &Db) -> Store {
    Store::connect(&db.url, &StoreOptions::default())
        .await
        .unwrap()
}

/// Takes the calls table away (the database refuses every write), or puts it back.
async fn break_calls(store: &Store, broken: bool) {
    let sql = if broken {
        "ALTER TABLE ledger_calls RENAME TO ledger_calls_away"
    } else {
        "ALTER TABLE ledger_calls_away RENAME TO ledger_calls"
    };
    sqlx::query(sql).execute(store.pool()).await.unwrap();
}

async fn every_row_is_written(db: Db) {
    let store = open(&db).await;
    let (ledger, task) = Ledger::start(store.clone(), options(&db)).await.unwrap();
    for i in 0..50 {
        ledger.record(call("acme", "gpt", 1_000 + i, 10, 2));
    }
    ledger.flush().await;
    assert_eq!(store.row_counts().await.unwrap(), (50, 100));
    let c = ledger.stats().counts();
    assert_eq!((c.written, c.spooled, c.dropped_full), (150, 0, 0));
    task.shutdown().await;
}

async fn migrations_apply_once(db: Db) {
    let a = open(&db).await;
    a.close().await;
    let b = open(&db).await;
    assert_eq!(b.row_counts().await.unwrap(), (0, 0));
}

async fn shutdown_writes_what_is_queued(db: Db) {
    let store = open(&db).await;
    let mut o = options(&db);
    o.flush_interval = Duration::from_secs(3600);
    let (ledger, task) = Ledger::start(store.clone(), o).await.unwrap();
    for i in 0..7 {
        ledger.record(call("acme", "gpt", i, 1, 1));
    }
    task.shutdown().await;
    assert_eq!(store.row_counts().await.unwrap(), (7, 7));
    ledger.record(call("acme", "gpt", 9, 1, 1));
    assert_eq!(
        ledger.stats().counts().dropped_full,
        2,
        "after shutdown rows are counted, not lost silently"
    );
}

async fn an_outage_spools_and_loses_nothing(db: Db) {
    let store = open(&db).await;
    let (ledger, task) = Ledger::start(store.clone(), options(&db)).await.unwrap();
    for i in 0..10 {
        ledger.record(call("acme", "gpt", i, 1, 1));
    }
    ledger.flush().await;
    break_calls(&store, true).await;
    for i in 0..25 {
        ledger.record(call("acme", "gpt", 100 + i, 1, 1));
        if i % 5 == 0 {
            ledger.flush().await;
        }
    }
    ledger.flush().await;
    let c = ledger.stats().counts();
    assert!(c.write_failures > 0 && c.spooled >= 50, "{c:?}");
    assert!(db.dir.0.join("ledger.spool").exists());
    break_calls(&store, false).await;
    ledger.record(call("acme", "gpt", 999, 1, 1));
    ledger.flush().await;
    assert_eq!(
        store.row_counts().await.unwrap(),
        (36, 36),
        "every row, once"
    );
    let c = ledger.stats().counts();
    assert_eq!(c.written, 72, "{c:?}");
    assert_eq!(
        (c.dropped_full, c.dropped_spool, c.dropped_corrupt),
        (0, 0, 0)
    );
    assert!(
        !db.dir.0.join("ledger.spool").exists(),
        "the spool is removed once replayed"
    );
    task.shutdown().await;
}

async fn a_spool_left_by_a_run_is_replayed_by_the_next(db: Db) {
    let store = open(&db).await;
    break_calls(&store, true).await;
    let (ledger, task) = Ledger::start(store.clone(), options(&db)).await.unwrap();
    for i in 0..12 {
        ledger.record(call("acme", "gpt", i, 1, 1));
    }
    task.shutdown().await;
    assert_eq!(ledger.stats().counts().spooled, 24);
    break_calls(&store, false).await;
    let (ledger, task) = Ledger::start(store.clone(), options(&db)).await.unwrap();
    ledger.flush().await;
    assert_eq!(store.row_counts().await.unwrap(), (12, 12));
    assert_eq!(ledger.stats().counts().replayed, 24);
    task.shutdown().await;
}

async fn the_spool_is_bounded_and_counts_what_it_drops(db: Db) {
    let store = open(&db).await;
    break_calls(&store, true).await;
    let mut o = options(&db);
    o.spool_max_bytes = 4096;
    let (ledger, task) = Ledger::start(store.clone(), o).await.unwrap();
    for i in 0..40 {
        ledger.record(call("acme", "gpt", i, 1, 1));
        ledger.flush().await;
    }
    let c = ledger.stats().counts();
    assert!(c.dropped_spool > 0, "{c:?}");
    assert_eq!(c.spooled + c.dropped_spool, 80, "{c:?}");
    let len = std::fs::metadata(db.dir.0.join("ledger.spool"))
        .unwrap()
        .len();
    assert!(len <= 4096, "{len}");
    task.shutdown().await;
}

async fn spend_groups_and_sums(db: Db) {
    let store = open(&db).await;
    let (ledger, task) = Ledger::start(store.clone(), options(&db)).await.unwrap();
    let day = 86_400_000;
    ledger.record(call("acme", "gpt", 0, 10, 1));
    ledger.record(call("acme", "gpt", day + 5, 20, 2));
    ledger.record(call("acme", "claude", day + 6, 30, 1));
    ledger.record(call("other", "gpt", day + 7, 1000, 1));
    task.shutdown().await;
    let acme = SpendFilter {
        tenant: Some("acme".into()),
        ..SpendFilter::default()
    };
    let by_model = store.spend(&acme, GroupBy::Model).await.unwrap();
    let got: Vec<_> = by_model
        .iter()
        .map(|g| {
            (
                g.group.as_deref().unwrap(),
                g.calls,
                g.tokens_in,
                g.degraded,
            )
        })
        .collect();
    assert_eq!(got, vec![("claude", 1, 30, 0), ("gpt", 2, 30, 1)]);
    assert!((by_model[0].cost_usd - 0.03).abs() < 1e-9);
    let by_day = store.spend(&acme, GroupBy::Day).await.unwrap();
    let days: Vec<_> = by_day
        .iter()
        .map(|g| (g.group.clone().unwrap(), g.calls))
        .collect();
    assert_eq!(
        days,
        vec![("1970-01-01".into(), 1), ("1970-01-02".into(), 2)]
    );
    let since = SpendFilter {
        from_ms: Some(day),
        ..SpendFilter::default()
    };
    let total = store.spend(&since, GroupBy::Total).await.unwrap();
    assert_eq!(
        (total.len(), total[0].calls, total[0].tokens_out),
        (1, 3, 1050)
    );
    assert_eq!(store.tokens_since(Some("acme"), day).await.unwrap(), 100);
    assert_eq!(store.tokens_since(Some("nobody"), 0).await.unwrap(), 0);
    let none = SpendFilter {
        tenant: Some("nobody".into()),
        ..SpendFilter::default()
    };
    assert!(store.spend(&none, GroupBy::Total).await.unwrap().is_empty());
}

/// Rows without a price (NULL cost) and with one, in either order, in one batch.
async fn unpriced_and_priced_rows_mix(db: Db) {
    let store = open(&db).await;
    let mut rows = Vec::new();
    for i in 0..20 {
        rows.extend(call("acme", "gpt", 1_000 + i, 10, 2));
    }
    store.insert(&rows).await.unwrap();
    store.insert(&rows).await.unwrap();
    assert_eq!(
        store.row_counts().await.unwrap(),
        (20, 40),
        "a batch written twice is there once"
    );
    let total = store
        .spend(&SpendFilter::default(), GroupBy::Total)
        .await
        .unwrap();
    assert!((total[0].cost_usd - 0.2).abs() < 1e-9, "{total:?}");
}

on_both!(
    every_row_is_written,
    migrations_apply_once,
    shutdown_writes_what_is_queued,
    an_outage_spools_and_loses_nothing,
    a_spool_left_by_a_run_is_replayed_by_the_next,
    the_spool_is_bounded_and_counts_what_it_drops,
    spend_groups_and_sums,
    unpriced_and_priced_rows_mix,
);

#[tokio::test(flavor = "current_thread")]
async fn a_full_channel_drops_and_counts() {
    let db = support::sqlite();
    let store = open(&db).await;
    let mut o = options(&db);
    o.channel_capacity = 2;
    let (ledger, task) = Ledger::start(store.clone(), o).await.unwrap();
    // On one thread the writer cannot run between these: two calls fit, three do not.
    for i in 0..5 {
        ledger.record(call("acme", "gpt", i, 1, 1));
    }
    assert_eq!(ledger.stats().counts().dropped_full, 6);
    task.shutdown().await;
    assert_eq!(store.row_counts().await.unwrap(), (2, 2));
}

#[tokio::test]
async fn a_bad_url_is_named() {
    let e = Store::connect("mysql://x/y", &StoreOptions::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("sqlite://") && e.contains("mysql"), "{e}");
}
