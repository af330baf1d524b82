//! ripcord's database (issue 38): the ledger of every call and attempt, in SQLite or Postgres.
//!
//! - [`Store`]: one connection pool over `sqlite://PATH` or `postgres://…` (sqlx's `Any`
//!   driver, run-time queries, no database needed to build), migrations from
//!   `crates/store/migrations/{sqlite,postgres}/` applied at [`Store::connect`];
//! - [`Ledger`]: the writer the gateway records through, off the request path (a bounded
//!   channel, batches, a bounded local spool while the database is unreachable; the module docs
//!   of [`ledger`] state the bounds);
//! - [`Store::create_key`] and its siblings: gateway keys kept as digests, rotated with a
//!   grace period, revoked, every change in the audit table;
//! - [`Store::spend`] and [`Store::tokens_since`]: reading it back (spend reports, a budget's
//!   period spend at start).
//!
//! # Examples
//!
//! ```no_run
//! use ripcord_store::{Ledger, LedgerOptions, Store, StoreOptions};
//! # async fn run() -> Result<(), ripcord_store::StoreError> {
//! let store = Store::connect("sqlite:///var/lib/ripcord/ripcord.db", &StoreOptions::default()).await?;
//! let (ledger, task) = Ledger::start(store, LedgerOptions::new("/var/lib/ripcord/ledger.spool".into())).await?;
//! // ledger.record(rows) from the request path; at shutdown:
//! task.shutdown().await;
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

mod db;
mod error;
mod keys;
pub mod ledger;
mod row;
mod spend;
mod spool;

pub use db::{Backend, Store, StoreOptions, redact};
pub use error::StoreError;
pub use keys::{AuditEntry, Change, KeyChange, KeySettings, NewSecret, StoredKey, digest_of};
pub use ledger::{Ledger, LedgerCounts, LedgerOptions, LedgerStats, LedgerTask};
pub use row::{AttemptRow, CallRow, CallScope, LedgerRow, Tokens, new_row_id};
pub use spend::{GroupBy, SpendFilter, SpendGroup};
