//! Databases for the store's tests: a SQLite file in a fresh temp directory, and a fresh
//! database on the Postgres server `RIPCORD_TEST_POSTGRES_URL` names (`cargo xtask test` starts
//! one; without it the Postgres tests print why and skip).

#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::print_stderr)]

use std::path::PathBuf;

use ripcord_store::{AttemptRow, CallRow, CallScope, LedgerRow, Tokens, new_row_id};
use sqlx::Connection;

/// Runs each named `async fn(Db)` as a test on a SQLite file and on Postgres.
macro_rules! on_both {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name(super::support::sqlite()).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $name() {
                    if let Some(db) = super::support::postgres().await {
                        super::$name(db).await;
                    }
                }
            )*
        }
    };
}

/// A temp directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new() -> TempDir {
        let p = std::env::temp_dir().join(format!("ripcord-store-{}", new_row_id()));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A database for one test: its URL and where its spool goes.
pub struct Db {
    pub url: String,
    pub dir: TempDir,
}

pub fn sqlite() -> Db {
    let dir = TempDir::new();
    Db {
        url: format!("sqlite://{}", dir.0.join("ripcord.db").display()),
        dir,
    }
}

/// A fresh database on the test server, or `None` (with the reason printed).
pub async fn postgres() -> Option<Db> {
    let Ok(base) = std::env::var("RIPCORD_TEST_POSTGRES_URL") else {
        eprintln!(
            "skipped: RIPCORD_TEST_POSTGRES_URL is not set (cargo xtask test starts a Postgres)"
        );
        return None;
    };
    let name = format!("t{}", &new_row_id()[..16]);
    let mut c = sqlx::PgConnection::connect(&base).await.unwrap();
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut c)
        .await
        .unwrap();
    let (root, _) = base.rsplit_once('/').unwrap();
    Some(Db {
        url: format!("{root}/{name}"),
        dir: TempDir::new(),
    })
}

/// A call with `attempts` attempts (the last one served), `tokens` in and out.
pub fn call(tenant: &str, model: &str, at_ms: i64, tokens: u64, attempts: u32) -> Vec<LedgerRow> {
    let scope = CallScope {
        request_id: format!("req-{}", new_row_id()),
        key_id: Some("key-a".into()),
        tenant: Some(tenant.into()),
        sub_tenant: None,
        route: "chat".into(),
    };
    let t = Tokens {
        input: tokens,
        output: tokens,
        cached: 0,
        cost_usd: Some(tokens as f64 * 0.001),
    };
    let id = new_row_id();
    let mut rows = vec![LedgerRow::Call(CallRow {
        id: id.clone(),
        at_ms,
        scope: scope.clone(),
        link: Some("primary".into()),
        deployment: None,
        model: Some(model.into()),
        tokens: t,
        outcome: "ok".into(),
        latency_ms: 12,
        degraded: attempts > 1,
        served_by: Some("primary".into()),
        attempts,
    })];
    for seq in 0..attempts {
        let last = seq + 1 == attempts;
        rows.push(LedgerRow::Attempt(AttemptRow {
            id: new_row_id(),
            call_id: id.clone(),
            seq,
            at_ms,
            scope: scope.clone(),
            link: if last {
                "primary".into()
            } else {
                "backup".into()
            },
            deployment: None,
            model: model.into(),
            tokens: if last { t } else { Tokens::default() },
            outcome: if last {
                "ok".into()
            } else {
                "upstream5xx".into()
            },
            status: if last { None } else { Some(503) },
            latency_ms: 5,
            degraded: attempts > 1,
            served_by: Some("primary".into()),
        }));
    }
    rows
}
