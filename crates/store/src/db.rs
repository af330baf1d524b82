//! The database: one [`Store`] over SQLite or Postgres, its migrations applied at start.
//!
//! Queries are run-time strings through sqlx's `Any` driver (no database at build time), with
//! `$N` placeholders, which both SQLite and Postgres read. The migrations are SQL files in
//! `crates/store/migrations/{sqlite,postgres}/`, compiled into the binary and applied by
//! `sqlx::migrate::Migrator` (which records them in `_sqlx_migrations`).

use std::borrow::Cow;
use std::path::Path;
use std::time::Duration;

use sqlx::any::{AnyPoolOptions, install_default_drivers};
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::{Any, AnyPool, Transaction};

use crate::error::StoreError;
use crate::row::{AttemptRow, CallRow, CallScope, LedgerRow};

/// Which database a [`Store`] talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// A SQLite file.
    Sqlite,
    /// A Postgres server.
    Postgres,
}

impl Backend {
    /// The backend a URL names (`sqlite:` or `postgres:` / `postgresql:`).
    ///
    /// # Errors
    ///
    /// [`StoreError::Url`] for any other scheme.
    pub fn of_url(url: &str) -> Result<Backend, StoreError> {
        if url.starts_with("sqlite:") {
            Ok(Backend::Sqlite)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Backend::Postgres)
        } else {
            Err(StoreError::Url(format!(
                "the store url must start with sqlite:// or postgres://, got scheme {:?}",
                url.split(':').next().unwrap_or_default()
            )))
        }
    }
}

const SQLITE_MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "ledger",
        include_str!("../migrations/sqlite/0001_ledger.sql"),
    ),
    (
        2,
        "keys",
        include_str!("../migrations/sqlite/0002_keys.sql"),
    ),
];
const POSTGRES_MIGRATIONS: &[(i64, &str, &str)] = &[
    (
        1,
        "ledger",
        include_str!("../migrations/postgres/0001_ledger.sql"),
    ),
    (
        2,
        "keys",
        include_str!("../migrations/postgres/0002_keys.sql"),
    ),
];

fn migrator(backend: Backend) -> Migrator {
    let set = match backend {
        Backend::Sqlite => SQLITE_MIGRATIONS,
        Backend::Postgres => POSTGRES_MIGRATIONS,
    };
    let migrations = set
        .iter()
        .map(|(v, d, sql)| {
            Migration::new(
                *v,
                Cow::Borrowed(*d),
                MigrationType::Simple,
                Cow::Borrowed(*sql),
                false,
            )
        })
        .collect::<Vec<_>>();
    Migrator {
        migrations: Cow::Owned(migrations),
        ..Migrator::DEFAULT
    }
}

/// How a [`Store`] connects.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Most connections in the pool.
    pub max_connections: u32,
    /// How long a query waits for a connection before it fails (so an unreachable database
    /// fails a batch quickly and the ledger spools it).
    pub acquire_timeout: Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            max_connections: 4,
            acquire_timeout: Duration::from_secs(2),
        }
    }
}

/// A connected, migrated database.
#[derive(Debug, Clone)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
}

impl Store {
    /// Connects to `url` (`sqlite://PATH` or `postgres://…`) and applies the migrations. A
    /// SQLite file (and its directory) is created when missing.
    ///
    /// # Errors
    ///
    /// [`StoreError::Url`] for an unknown scheme, [`StoreError::Connect`] when the database
    /// cannot be reached or opened, [`StoreError::Migrate`] when a migration fails.
    pub async fn connect(url: &str, options: &StoreOptions) -> Result<Store, StoreError> {
        let backend = Backend::of_url(url)?;
        install_default_drivers();
        let url = match backend {
            Backend::Sqlite => sqlite_url(url)?,
            Backend::Postgres => url.to_string(),
        };
        let pool = AnyPoolOptions::new()
            .max_connections(options.max_connections.max(1))
            .acquire_timeout(options.acquire_timeout)
            .connect(&url)
            .await
            .map_err(|e| StoreError::Connect(redact(&url), e))?;
        migrator(backend)
            .run(&pool)
            .await
            .map_err(StoreError::Migrate)?;
        Ok(Store { pool, backend })
    }

    /// The backend.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The connection pool, for queries of other modules.
    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// Writes `rows` in one transaction; a row whose id is already there is skipped, so
    /// writing a batch twice writes it once.
    ///
    /// # Errors
    ///
    /// [`StoreError::Query`] when the database refuses or cannot be reached; nothing of the
    /// batch is written then.
    pub async fn insert(&self, rows: &[LedgerRow]) -> Result<(), StoreError> {
        let mut tx = self.pool.begin().await.map_err(StoreError::Query)?;
        for row in rows {
            match row {
                LedgerRow::Call(c) => insert_call(&mut tx, c).await?,
                LedgerRow::Attempt(a) => insert_attempt(&mut tx, a).await?,
            }
        }
        tx.commit().await.map_err(StoreError::Query)
    }

    /// A transaction that reads then writes: on SQLite it takes the write lock at its start
    /// (`BEGIN IMMEDIATE`), so a second process writing the same file makes it wait (the busy
    /// timeout) instead of failing with `database is locked` when its read turns into a write.
    pub(crate) async fn begin_write(&self) -> Result<Transaction<'static, Any>, StoreError> {
        match self.backend {
            Backend::Sqlite => self.pool.begin_with("BEGIN IMMEDIATE").await,
            Backend::Postgres => self.pool.begin().await,
        }
        .map_err(StoreError::Query)
    }

    /// Closes the pool (waits for connections in use).
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

// A cost is never bound as a NULL float: sqlx 0.8.6's `Any` driver sends a null
// `Option<f64>` to Postgres as a `float4` null (sqlx-core `any/arguments.rs` swaps `Real` and
// `Double`), the statement is cached with that type, and the next row's 8-byte `f64` is then
// refused ("incorrect binary data format"). The cost goes as a number plus a flag instead.

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

async fn insert_call(tx: &mut Transaction<'_, Any>, c: &CallRow) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO ledger_calls (id, at_ms, request_id, key_id, tenant, sub_tenant, route, \
         link, deployment, model, tokens_in, tokens_out, tokens_cached, cost_usd, outcome, \
         latency_ms, degraded, served_by, attempts) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, \
         $10, $11, $12, $13, CASE WHEN $20 THEN $14 END, $15, $16, $17, $18, $19) \
         ON CONFLICT (id) DO NOTHING",
    )
    .bind(&c.id)
    .bind(c.at_ms)
    .bind_scope(&c.scope)
    .bind(c.link.as_deref())
    .bind(c.deployment.as_deref())
    .bind(c.model.as_deref())
    .bind(to_i64(c.tokens.input))
    .bind(to_i64(c.tokens.output))
    .bind(to_i64(c.tokens.cached))
    .bind(c.tokens.cost_usd.unwrap_or(0.0))
    .bind(&c.outcome)
    .bind(to_i64(c.latency_ms))
    .bind(c.degraded)
    .bind(c.served_by.as_deref())
    .bind(i64::from(c.attempts))
    .bind(c.tokens.cost_usd.is_some())
    .execute(&mut **tx)
    .await
    .map(|_| ())
    .map_err(StoreError::Query)
}

/// Binds a ledger row's scope, in the column order both ledger tables share.
trait BindScope<'q> {
    fn bind_scope(self, scope: &'q CallScope) -> Self;
}

impl<'q> BindScope<'q> for sqlx::query::Query<'q, Any, sqlx::any::AnyArguments<'q>> {
    fn bind_scope(self, s: &'q CallScope) -> Self {
        self.bind(&s.request_id)
            .bind(s.key_id.as_deref())
            .bind(s.tenant.as_deref())
            .bind(s.sub_tenant.as_deref())
            .bind(&s.route)
    }
}

async fn insert_attempt(tx: &mut Transaction<'_, Any>, a: &AttemptRow) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO ledger_attempts (id, call_id, seq, at_ms, request_id, key_id, tenant, \
         sub_tenant, route, link, deployment, model, tokens_in, tokens_out, tokens_cached, \
         cost_usd, outcome, status, latency_ms, degraded, served_by) VALUES ($1, $2, $3, $4, $5, \
         $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, CASE WHEN $22 THEN $16 END, $17, $18, \
         $19, $20, $21) ON CONFLICT (id) DO NOTHING",
    )
    .bind(&a.id)
    .bind(&a.call_id)
    .bind(i64::from(a.seq))
    .bind(a.at_ms)
    .bind_scope(&a.scope)
    .bind(&a.link)
    .bind(a.deployment.as_deref())
    .bind(&a.model)
    .bind(to_i64(a.tokens.input))
    .bind(to_i64(a.tokens.output))
    .bind(to_i64(a.tokens.cached))
    .bind(a.tokens.cost_usd.unwrap_or(0.0))
    .bind(&a.outcome)
    .bind(a.status.map(i64::from))
    .bind(to_i64(a.latency_ms))
    .bind(a.degraded)
    .bind(a.served_by.as_deref())
    .bind(a.tokens.cost_usd.is_some())
    .execute(&mut **tx)
    .await
    .map(|_| ())
    .map_err(StoreError::Query)
}

/// `sqlite://PATH` with the file's directory created and `mode=rwc` (create when missing).
fn sqlite_url(url: &str) -> Result<String, StoreError> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        .unwrap_or(url);
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    if path.is_empty() {
        return Err(StoreError::Url(
            "the sqlite store url names no file (sqlite://PATH)".into(),
        ));
    }
    if path != ":memory:"
        && let Some(dir) = Path::new(path).parent()
        && !dir.as_os_str().is_empty()
    {
        std::fs::create_dir_all(dir).map_err(|e| {
            StoreError::Url(format!(
                "could not create the sqlite store's directory {}: {e}",
                dir.display()
            ))
        })?;
    }
    let query = if query.contains("mode=") {
        query.to_string()
    } else if query.is_empty() {
        "mode=rwc".to_string()
    } else {
        format!("{query}&mode=rwc")
    };
    Ok(format!("sqlite://{path}?{query}"))
}

/// The URL without its password, for errors and logs.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    match rest.split_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or_default();
            if userinfo.contains(':') {
                format!("{scheme}://{user}:***@{host}")
            } else {
                format!("{scheme}://{user}@{host}")
            }
        }
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_told_apart_and_bad_ones_named() {
        assert_eq!(
            Backend::of_url("sqlite:///x.db").ok(),
            Some(Backend::Sqlite)
        );
        assert_eq!(
            Backend::of_url("postgres://u@127.0.0.1/db").ok(),
            Some(Backend::Postgres)
        );
        let e = Backend::of_url("mysql://x").unwrap_err().to_string();
        assert!(e.contains("\"mysql\""), "{e}");
    }

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(
            redact("postgres://me:hunter2@127.0.0.1:5432/db"),
            "postgres://me:***@127.0.0.1:5432/db"
        );
        assert_eq!(redact("postgres://me@h/db"), "postgres://me@h/db");
    }

    #[test]
    fn sqlite_urls_create_the_file() {
        assert_eq!(
            sqlite_url("sqlite:///tmp/a.db").unwrap(),
            "sqlite:///tmp/a.db?mode=rwc"
        );
        assert_eq!(
            sqlite_url("sqlite://rel.db?mode=ro").unwrap(),
            "sqlite://rel.db?mode=ro"
        );
        assert!(sqlite_url("sqlite://").is_err());
    }
}
