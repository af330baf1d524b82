//! The ledger's rows: one per call ([`CallRow`]) and one per attempt ([`AttemptRow`]).
//!
//! A row is plain data the gateway fills in after a call; it serializes to JSON so the spool
//! (a local file used while the database is unreachable) can hold it unchanged.

use serde::{Deserialize, Serialize};

/// Tokens and their cost estimate, as the vendor reported them.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Tokens {
    /// Prompt tokens, cached ones included.
    pub input: u64,
    /// Generated tokens.
    pub output: u64,
    /// Prompt tokens served from the vendor's cache.
    pub cached: u64,
    /// Estimated cost in USD, when the model's price is known.
    pub cost_usd: Option<f64>,
}

/// Who a call was for and where it went: the columns a call and its attempts share.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CallScope {
    /// The gateway's request id.
    pub request_id: String,
    /// The gateway key's id (its label), when the caller used one.
    pub key_id: Option<String>,
    /// The tenant the call was charged to.
    pub tenant: Option<String>,
    /// The sub-tenant inside the tenant.
    pub sub_tenant: Option<String>,
    /// The route (the requested model name the gateway routed on).
    pub route: String,
}

/// One call through the gateway.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRow {
    /// A random id, unique per row (a replayed row is written once).
    pub id: String,
    /// When the call began, Unix milliseconds (UTC).
    pub at_ms: i64,
    /// Who and where.
    pub scope: CallScope,
    /// The link that served (the last attempt's link, when one was made).
    pub link: Option<String>,
    /// The deployment of a pooled link that served.
    pub deployment: Option<String>,
    /// The model that served (or was last asked).
    pub model: Option<String>,
    /// What the call used.
    pub tokens: Tokens,
    /// `ok`, `static_reply`, or the failure's error kind (snake_case).
    pub outcome: String,
    /// Wall time of the call in milliseconds.
    pub latency_ms: u64,
    /// True when a fallback or the static reply answered.
    pub degraded: bool,
    /// The link that served the answer (`None`: none did).
    pub served_by: Option<String>,
    /// Wire attempts the call made.
    pub attempts: u32,
}

/// One attempt of a call at one link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptRow {
    /// A random id, unique per row.
    pub id: String,
    /// The [`CallRow::id`] of its call.
    pub call_id: String,
    /// Its place in the call, from 0.
    pub seq: u32,
    /// When the call began, Unix milliseconds (UTC).
    pub at_ms: i64,
    /// Who and where (the call's).
    pub scope: CallScope,
    /// The link tried.
    pub link: String,
    /// The deployment of a pooled link it went to.
    pub deployment: Option<String>,
    /// The model asked.
    pub model: String,
    /// What the attempt used: vendors report usage once per call, so the serving attempt
    /// carries the call's tokens and the others zero.
    pub tokens: Tokens,
    /// `ok` or the failure's error kind (snake_case).
    pub outcome: String,
    /// The vendor's HTTP status, when the attempt got one.
    pub status: Option<u16>,
    /// Wall time of the attempt in milliseconds.
    pub latency_ms: u64,
    /// The call's degraded flag.
    pub degraded: bool,
    /// The link that served the call.
    pub served_by: Option<String>,
}

/// A row of either table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "table", rename_all = "snake_case")]
pub enum LedgerRow {
    /// A row of `ledger_calls`.
    Call(CallRow),
    /// A row of `ledger_attempts`.
    Attempt(AttemptRow),
}

/// A fresh random row id: 128 random bits as 32 hex digits.
pub fn new_row_id() -> String {
    let n: u128 = rand::random();
    format!("{n:032x}")
}
