//! `[store]`: the database behind the gateway's ledger (issue 38).
//!
//! ```toml
//! [store]
//! url = "sqlite:///var/lib/ripcord/ripcord.db"   # or "postgres://user:${PGPASSWORD}@host/db"
//! spool = "/var/lib/ripcord/ledger-spool.jsonl"  # where rows wait while the database is down
//! flush_interval_ms = 250                        # the longest a row waits before it is written
//! spool_max_bytes = 67108864                     # the spool's cap; rows past it are counted drops
//! keys = true                                    # also accept the keys made by POST /admin/keys
//! keys_poll_ms = 1000                            # how soon a replica sees a key change
//! ```
//!
//! Without `url` the store is a SQLite file `ripcord.db` in the data directory:
//! `$RIPCORD_DATA_DIR`, else `$XDG_DATA_HOME/ripcord`, else `$HOME/.local/share/ripcord`, else
//! `./.ripcord`. The spool defaults to `ledger-spool.jsonl` in the same directory. Without a
//! `[store]` section there is no ledger and `ripcord serve` runs as before.

use std::path::PathBuf;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use toml::Spanned;

use super::ConfigError;
use super::env::Ctx;

/// `[store]`, as written.
#[derive(Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// `sqlite://PATH` or `postgres://…` (may hold a password, so it is never printed).
    #[serde(default)]
    pub url: Option<Spanned<String>>,
    /// The spool file.
    #[serde(default)]
    pub spool: Option<Spanned<String>>,
    /// The longest a ledger row waits before its batch is written.
    #[serde(default)]
    pub flush_interval_ms: Option<Spanned<u64>>,
    /// The spool's cap in bytes.
    #[serde(default)]
    pub spool_max_bytes: Option<Spanned<u64>>,
    /// Accept the keys kept in the store (made through `POST /admin/keys`).
    #[serde(default)]
    pub keys: Option<bool>,
    /// How often the store's keys are read again.
    #[serde(default)]
    pub keys_poll_ms: Option<Spanned<u64>>,
}

impl std::fmt::Debug for StoreConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreConfig")
            .field(
                "url",
                &self.url.as_ref().map(|u| super::redact_url(u.get_ref())),
            )
            .field("spool", &self.spool.as_ref().map(Spanned::get_ref))
            .finish_non_exhaustive()
    }
}

/// `[store]`, resolved.
#[derive(Clone)]
pub struct StoreSettings {
    /// The database URL (`sqlite://…` or `postgres://…`).
    pub url: SecretString,
    /// The spool file.
    pub spool: PathBuf,
    /// The longest a ledger row waits before its batch is written.
    pub flush_interval: Duration,
    /// The spool's cap in bytes.
    pub spool_max_bytes: u64,
    /// How often the store's keys are read again, when the gateway accepts them.
    pub keys_poll: Option<Duration>,
}

impl std::fmt::Debug for StoreSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreSettings")
            .field("url", &super::redact_url(self.url.expose_secret()))
            .field("spool", &self.spool)
            .field("flush_interval", &self.flush_interval)
            .field("spool_max_bytes", &self.spool_max_bytes)
            .field("keys_poll", &self.keys_poll)
            .finish()
    }
}

/// The default flush interval of the ledger.
pub const DEFAULT_FLUSH_INTERVAL_MS: u64 = 250;
/// How often a gateway reads the store's keys again by default: the bound on how soon every
/// replica sees a key made, changed or revoked.
pub(super) const DEFAULT_KEYS_POLL_MS: u64 = 1000;
/// The default cap of the spool.
pub const DEFAULT_SPOOL_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// The data directory (see the module docs).
fn data_dir(cx: &Ctx<'_>) -> PathBuf {
    let set = |name: &str| cx.env.var(name).filter(|v| !v.trim().is_empty());
    if let Some(d) = set("RIPCORD_DATA_DIR") {
        return PathBuf::from(d);
    }
    if let Some(d) = set("XDG_DATA_HOME") {
        return PathBuf::from(d).join("ripcord");
    }
    if let Some(h) = set("HOME") {
        return PathBuf::from(h).join(".local/share/ripcord");
    }
    PathBuf::from(".ripcord")
}

pub(super) fn resolve_store(
    cx: &Ctx<'_>,
    raw: Option<&StoreConfig>,
) -> Result<Option<StoreSettings>, ConfigError> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let dir = data_dir(cx);
    let url = match &raw.url {
        Some(u) => {
            let v = cx.interpolate(u, "store.url")?;
            if let Err(e) = ripcord_store::Backend::of_url(&v) {
                return Err(cx.err(Some(&u.span()), "store.url", e.to_string()));
            }
            v
        }
        None => format!("sqlite://{}", dir.join("ripcord.db").display()),
    };
    let spool = match &raw.spool {
        Some(s) => PathBuf::from(cx.interpolate(s, "store.spool")?),
        None => dir.join("ledger-spool.jsonl"),
    };
    let flush_interval_ms = cx
        .at_least(
            raw.flush_interval_ms.as_ref(),
            1,
            "store.flush_interval_ms",
            "must be greater than zero",
        )?
        .unwrap_or(DEFAULT_FLUSH_INTERVAL_MS);
    let spool_max_bytes = cx
        .at_least(
            raw.spool_max_bytes.as_ref(),
            4096,
            "store.spool_max_bytes",
            "must be at least 4096 (a few rows)",
        )?
        .unwrap_or(DEFAULT_SPOOL_MAX_BYTES);
    let keys_poll = match (raw.keys.unwrap_or(false), &raw.keys_poll_ms) {
        (_, Some(n)) if *n.get_ref() < 50 => {
            return Err(cx.err(
                Some(&n.span()),
                "store.keys_poll_ms",
                "must be at least 50 (every replica reads every key each time)",
            ));
        }
        (false, Some(n)) => {
            return Err(cx.err(
                Some(&n.span()),
                "store.keys_poll_ms",
                "has no effect without `keys = true`",
            ));
        }
        (false, None) => None,
        (true, n) => Some(Duration::from_millis(
            n.as_ref().map_or(DEFAULT_KEYS_POLL_MS, |n| *n.get_ref()),
        )),
    };
    Ok(Some(StoreSettings {
        url: SecretString::from(url),
        spool,
        flush_interval: Duration::from_millis(flush_interval_ms),
        spool_max_bytes,
        keys_poll,
    }))
}
