//! Gateway keys kept in the store, and the audit of every change to them.
//!
//! A key's secret is made here ([`Store::create_key`], [`Store::rotate_key`]), returned once as
//! a [`NewSecret`], and kept only as its SHA-256 digest. A rotation keeps the previous secret
//! valid for a grace period; a revocation ends the key at once. Every change writes an
//! [`AuditEntry`] in the same transaction, so there is no change without its record.
//!
//! The store decides nothing about routes or limits: it keeps what the gateway validated, and a
//! gateway replica reads the live keys back ([`Store::keys`]) on its own schedule.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Deserializer, Serialize};
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::db::Store;
use crate::error::StoreError;
use crate::row::new_row_id;

/// What a key may do, as an operator sets it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeySettings {
    /// A label for people (`"acme-backend"`); not unique, not secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The tenant its calls are charged to (`None`: calls without a tenant).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// The routes it may use, by name (`None`: all).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routes: Option<Vec<String>>,
    /// Requests per minute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpm: Option<u32>,
    /// Tokens per minute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpm: Option<u32>,
    /// Tokens per budget period (the gateway's `[budget]` period) for this key alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_tokens: Option<u64>,
    /// When it stops working, Unix milliseconds (`None`: never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_ms: Option<i64>,
}

impl KeySettings {
    /// Refuses zero limits and an empty route list, naming the field.
    ///
    /// # Errors
    ///
    /// [`StoreError::KeySpec`].
    pub fn check(&self) -> Result<(), StoreError> {
        let bad = |field: &str, why: &str| Err(StoreError::KeySpec(format!("`{field}` {why}")));
        if self.rpm == Some(0) {
            return bad("rpm", "must be at least 1");
        }
        if self.tpm == Some(0) {
            return bad("tpm", "must be at least 1");
        }
        if self.budget_tokens == Some(0) {
            return bad("budget_tokens", "must be at least 1");
        }
        if self.routes.as_ref().is_some_and(Vec::is_empty) {
            return bad(
                "routes",
                "must name at least one route (leave it out for all)",
            );
        }
        if self.tenant.as_ref().is_some_and(|t| t.trim().is_empty()) {
            return bad("tenant", "must not be empty");
        }
        Ok(())
    }
}

/// One field of a [`KeyChange`]: left out (keep), `null` (clear) or a value (set).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Change<T> {
    /// Unchanged.
    #[default]
    Keep,
    /// Removed (the setting's default: no limit, all routes, never expires).
    Clear,
    /// Set to this.
    Set(T),
}

impl<T> Change<T> {
    fn apply(self, to: &mut Option<T>) {
        match self {
            Change::Keep => {}
            Change::Clear => *to = None,
            Change::Set(v) => *to = Some(v),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Change<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Option::<T>::deserialize(d)? {
            None => Change::Clear,
            Some(v) => Change::Set(v),
        })
    }
}

/// A change to a key's settings (`PATCH /admin/keys/{id}`); its tenant is not changeable (what
/// it spent was charged to that tenant).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyChange {
    /// The label.
    #[serde(default)]
    pub name: Change<String>,
    /// The routes.
    #[serde(default)]
    pub routes: Change<Vec<String>>,
    /// Requests per minute.
    #[serde(default)]
    pub rpm: Change<u32>,
    /// Tokens per minute.
    #[serde(default)]
    pub tpm: Change<u32>,
    /// Tokens per budget period.
    #[serde(default)]
    pub budget_tokens: Change<u64>,
    /// The expiry.
    #[serde(default)]
    pub expires_ms: Change<i64>,
}

impl KeyChange {
    /// `settings` with this change applied.
    pub fn applied_to(&self, settings: &KeySettings) -> KeySettings {
        let mut s = settings.clone();
        self.name.clone().apply(&mut s.name);
        self.routes.clone().apply(&mut s.routes);
        self.rpm.clone().apply(&mut s.rpm);
        self.tpm.clone().apply(&mut s.tpm);
        self.budget_tokens.clone().apply(&mut s.budget_tokens);
        self.expires_ms.clone().apply(&mut s.expires_ms);
        s
    }
}

/// A key as the store keeps it (its digest, never its secret).
#[derive(Clone, PartialEq, Eq)]
pub struct StoredKey {
    /// Its id (`key_` and 16 hex digits): the ledger's `key_id` of its calls.
    pub id: String,
    /// What it may do.
    pub settings: KeySettings,
    /// The SHA-256 of its secret.
    pub digest: [u8; 32],
    /// The previous secret's digest and until when it is still accepted (after a rotation).
    pub previous: Option<([u8; 32], i64)>,
    /// When it was revoked.
    pub revoked_ms: Option<i64>,
    /// When it was made.
    pub created_ms: i64,
    /// When it last changed.
    pub updated_ms: i64,
}

impl fmt::Debug for StoredKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoredKey")
            .field("id", &self.id)
            .field("settings", &self.settings)
            .field("rotating", &self.previous.map(|(_, until)| until))
            .field("revoked_ms", &self.revoked_ms)
            .finish_non_exhaustive()
    }
}

impl StoredKey {
    /// Whether it works at `now_ms` (not revoked, not expired).
    pub fn live_at(&self, now_ms: i64) -> bool {
        self.revoked_ms.is_none() && self.settings.expires_ms.is_none_or(|e| now_ms < e)
    }

    /// The digests that authenticate it at `now_ms`: its secret's, and during a rotation's
    /// grace period the previous one's.
    pub fn digests_at(&self, now_ms: i64) -> impl Iterator<Item = [u8; 32]> + '_ {
        let live = self.live_at(now_ms);
        let current = live.then_some(self.digest);
        let previous = self
            .previous
            .filter(|(_, until)| live && now_ms < *until)
            .map(|(d, _)| d);
        current.into_iter().chain(previous)
    }

    /// The key as the admin API shows it (no digest).
    pub fn to_json(&self, now_ms: i64) -> serde_json::Value {
        serde_json::json!({
            "id": self.id,
            "settings": self.settings,
            "state": if self.revoked_ms.is_some() { "revoked" }
                else if !self.live_at(now_ms) { "expired" }
                else { "active" },
            "previous_secret_until_ms": self.previous.map(|(_, u)| u).filter(|u| *u > now_ms),
            "revoked_ms": self.revoked_ms,
            "created_ms": self.created_ms,
            "updated_ms": self.updated_ms,
        })
    }
}

/// A secret just made: shown to the operator once, never stored, never in `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct NewSecret(String);

impl NewSecret {
    /// The secret.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for NewSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NewSecret([redacted])")
    }
}

/// One admin action, as the audit table holds it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditEntry {
    /// When, Unix ms.
    pub at_ms: i64,
    /// Who (the admin credential's label).
    pub actor: String,
    /// `create`, `rotate`, `revoke` or `change`.
    pub action: String,
    /// The key.
    pub key_id: Option<String>,
    /// What changed (settings, grace period; never a secret).
    pub detail: serde_json::Value,
}

/// The SHA-256 of a secret.
pub fn digest_of(secret: &str) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, secret.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

fn hex(d: &[u8; 32]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// 256 random bits: `rck_` and 64 hex digits.
fn new_secret() -> NewSecret {
    let a: u128 = rand::random();
    let b: u128 = rand::random();
    NewSecret(format!("rck_{a:032x}{b:032x}"))
}

fn q(e: sqlx::Error) -> StoreError {
    StoreError::Query(e)
}

const COLUMNS: &str = "id, name, tenant, digest, prev_digest, prev_until_ms, routes, rpm, tpm, \
                       budget_tokens, expires_ms, revoked_ms, created_ms, updated_ms";

fn key_of(row: &AnyRow) -> Result<StoredKey, StoreError> {
    let id: String = row.try_get("id").map_err(q)?;
    let corrupt = |what: &str| StoreError::KeySpec(format!("stored key {id:?}: {what}"));
    let digest: String = row.try_get("digest").map_err(q)?;
    let digest = unhex(&digest).ok_or_else(|| corrupt("its digest is not 64 hex digits"))?;
    let prev: Option<String> = row.try_get("prev_digest").map_err(q)?;
    let prev_until: Option<i64> = row.try_get("prev_until_ms").map_err(q)?;
    let previous = match (prev, prev_until) {
        (Some(p), Some(u)) => Some((
            unhex(&p).ok_or_else(|| corrupt("its previous digest is not 64 hex digits"))?,
            u,
        )),
        _ => None,
    };
    let routes: Option<String> = row.try_get("routes").map_err(q)?;
    let routes = routes
        .map(|r| serde_json::from_str::<Vec<String>>(&r))
        .transpose()
        .map_err(|e| corrupt(&format!("its routes are not a JSON list of names: {e}")))?;
    let small = |col: &str| -> Result<Option<u32>, StoreError> {
        let v: Option<i64> = row.try_get(col).map_err(q)?;
        v.map(|n| u32::try_from(n).map_err(|_| corrupt(&format!("{col} {n} is out of range"))))
            .transpose()
    };
    let budget: Option<i64> = row.try_get("budget_tokens").map_err(q)?;
    Ok(StoredKey {
        settings: KeySettings {
            name: row.try_get("name").map_err(q)?,
            tenant: row.try_get("tenant").map_err(q)?,
            routes,
            rpm: small("rpm")?,
            tpm: small("tpm")?,
            budget_tokens: budget.map(|n| u64::try_from(n).unwrap_or(0)),
            expires_ms: row.try_get("expires_ms").map_err(q)?,
        },
        digest,
        previous,
        revoked_ms: row.try_get("revoked_ms").map_err(q)?,
        created_ms: row.try_get("created_ms").map_err(q)?,
        updated_ms: row.try_get("updated_ms").map_err(q)?,
        id,
    })
}

type AnyQuery<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>;

/// A change to the keys in progress: its transaction, its time and who makes it.
struct KeyWrite<'a> {
    tx: sqlx::Transaction<'static, sqlx::Any>,
    now: i64,
    actor: &'a str,
}

impl KeyWrite<'_> {
    /// Key `id`, refused when it is revoked (a revoked key cannot change).
    async fn live_key(&mut self, id: &str) -> Result<StoredKey, StoreError> {
        let key = fetch_key(&mut self.tx, id).await?;
        if key.revoked_ms.is_some() {
            return Err(StoreError::NoSuchKey(format!("{id} (revoked)")));
        }
        Ok(key)
    }

    /// Runs `write`, records it in the audit in the same transaction (`action` on key
    /// `key_id`, with `detail`), commits, and reads the key back as it now is.
    async fn finish(
        mut self,
        write: AnyQuery<'_>,
        action: &str,
        key_id: &str,
        detail: serde_json::Value,
    ) -> Result<StoredKey, StoreError> {
        write.execute(&mut *self.tx).await.map_err(q)?;
        sqlx::query(
            "INSERT INTO admin_audit (id, at_ms, actor, action, key_id, detail) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(new_row_id())
        .bind(self.now)
        .bind(self.actor)
        .bind(action)
        .bind(key_id)
        .bind(detail.to_string())
        .execute(&mut *self.tx)
        .await
        .map_err(q)?;
        let key = fetch_key(&mut self.tx, key_id).await?;
        self.tx.commit().await.map_err(q)?;
        Ok(key)
    }
}

async fn fetch_key(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    id: &str,
) -> Result<StoredKey, StoreError> {
    let row = sqlx::query(&format!("SELECT {COLUMNS} FROM gateway_keys WHERE id = $1"))
        .bind(id)
        .fetch_optional(&mut **tx)
        .await
        .map_err(q)?
        .ok_or_else(|| StoreError::NoSuchKey(id.to_string()))?;
    key_of(&row)
}

fn opt_i64<T: TryInto<i64>>(v: Option<T>) -> Option<i64> {
    v.and_then(|n| n.try_into().ok())
}

/// Binds what a write of `s` stores after its name (and tenant and digest, on an insert): the
/// routes (as JSON), the limits, the expiry, and `now` as the time of the write.
fn bind_settings<'q>(query: AnyQuery<'q>, s: &KeySettings, now: i64) -> AnyQuery<'q> {
    let routes = s
        .routes
        .as_ref()
        .map(|r| serde_json::to_string(r).unwrap_or_default());
    query
        .bind(routes)
        .bind(opt_i64(s.rpm))
        .bind(opt_i64(s.tpm))
        .bind(opt_i64(s.budget_tokens))
        .bind(s.expires_ms)
        .bind(now)
}

impl Store {
    /// Starts a change to the keys, made by `actor`, now.
    async fn key_write<'a>(&self, actor: &'a str) -> Result<KeyWrite<'a>, StoreError> {
        let tx = self.begin_write().await?;
        Ok(KeyWrite {
            tx,
            now: now_ms(),
            actor,
        })
    }

    /// Makes a key with `settings`; returns it and its secret (shown once, stored as a digest).
    ///
    /// # Errors
    ///
    /// [`StoreError::KeySpec`] for refused settings, [`StoreError::Query`] when the database
    /// fails.
    pub async fn create_key(
        &self,
        settings: &KeySettings,
        actor: &str,
    ) -> Result<(StoredKey, NewSecret), StoreError> {
        settings.check()?;
        let secret = new_secret();
        let n: u64 = rand::random();
        let id = format!("key_{n:016x}");
        let w = self.key_write(actor).await?;
        let insert = format!(
            "INSERT INTO gateway_keys ({COLUMNS}) VALUES ($1, $2, $3, $4, NULL, NULL, $5, $6, $7, \
             $8, $9, NULL, $10, $10)"
        );
        let query = sqlx::query(&insert)
            .bind(&id)
            .bind(settings.name.as_deref())
            .bind(settings.tenant.as_deref())
            .bind(hex(&digest_of(secret.expose())));
        let write = bind_settings(query, settings, w.now);
        let detail = serde_json::json!({ "settings": settings });
        let key = w.finish(write, "create", &id, detail).await?;
        Ok((key, secret))
    }

    /// Every key, revoked ones too, oldest first.
    ///
    /// # Errors
    ///
    /// [`StoreError::Query`] when the database fails; [`StoreError::KeySpec`] for a row that
    /// is not a key (edited by hand, say), naming it.
    pub async fn keys(&self) -> Result<Vec<StoredKey>, StoreError> {
        let rows = sqlx::query(&format!(
            "SELECT {COLUMNS} FROM gateway_keys ORDER BY created_ms, id"
        ))
        .fetch_all(self.pool())
        .await
        .map_err(q)?;
        rows.iter().map(key_of).collect()
    }

    /// One key.
    ///
    /// # Errors
    ///
    /// [`StoreError::NoSuchKey`], or as [`Store::keys`].
    pub async fn key(&self, id: &str) -> Result<StoredKey, StoreError> {
        let mut tx = self.pool().begin().await.map_err(q)?;
        let key = fetch_key(&mut tx, id).await?;
        tx.commit().await.map_err(q)?;
        Ok(key)
    }

    /// Gives key `id` a new secret; the old one keeps working for `grace` (zero: not at all).
    ///
    /// # Errors
    ///
    /// [`StoreError::NoSuchKey`] for an unknown or revoked key, or as [`Store::keys`].
    pub async fn rotate_key(
        &self,
        id: &str,
        grace: Duration,
        actor: &str,
    ) -> Result<(StoredKey, NewSecret), StoreError> {
        let secret = new_secret();
        let mut w = self.key_write(actor).await?;
        w.live_key(id).await?;
        let until = w
            .now
            .saturating_add(i64::try_from(grace.as_millis()).unwrap_or(i64::MAX));
        let write = sqlx::query(
            "UPDATE gateway_keys SET prev_digest = digest, prev_until_ms = $1, digest = $2, \
             updated_ms = $3 WHERE id = $4",
        )
        .bind(until)
        .bind(hex(&digest_of(secret.expose())))
        .bind(w.now)
        .bind(id);
        let detail =
            serde_json::json!({ "grace_ms": grace.as_millis() as u64, "previous_until_ms": until });
        let key = w.finish(write, "rotate", id, detail).await?;
        Ok((key, secret))
    }

    /// Ends key `id` (and any previous secret of a rotation) at once; revoking twice keeps the
    /// first time.
    ///
    /// # Errors
    ///
    /// [`StoreError::NoSuchKey`], or as [`Store::keys`].
    pub async fn revoke_key(&self, id: &str, actor: &str) -> Result<StoredKey, StoreError> {
        let mut w = self.key_write(actor).await?;
        fetch_key(&mut w.tx, id).await?;
        let write = sqlx::query(
            "UPDATE gateway_keys SET revoked_ms = COALESCE(revoked_ms, $1), updated_ms = $1 \
             WHERE id = $2",
        )
        .bind(w.now)
        .bind(id);
        w.finish(write, "revoke", id, serde_json::json!({})).await
    }

    /// Changes key `id`'s settings; `check` sees the settings as they would be after the change
    /// and may refuse them (the gateway checks route names there).
    ///
    /// # Errors
    ///
    /// [`StoreError::NoSuchKey`] for an unknown or revoked key, [`StoreError::KeySpec`] for
    /// refused settings, or as [`Store::keys`].
    pub async fn change_key(
        &self,
        id: &str,
        change: &KeyChange,
        actor: &str,
        check: impl FnOnce(&KeySettings) -> Result<(), String>,
    ) -> Result<StoredKey, StoreError> {
        let mut w = self.key_write(actor).await?;
        let old = w.live_key(id).await?;
        let new = change.applied_to(&old.settings);
        new.check()?;
        check(&new).map_err(StoreError::KeySpec)?;
        let query = sqlx::query(
            "UPDATE gateway_keys SET name = $1, routes = $2, rpm = $3, tpm = $4, \
             budget_tokens = $5, expires_ms = $6, updated_ms = $7 WHERE id = $8",
        )
        .bind(new.name.as_deref());
        let write = bind_settings(query, &new, w.now).bind(id);
        let detail = serde_json::json!({ "before": old.settings, "after": new });
        w.finish(write, "change", id, detail).await
    }

    /// The latest `limit` audit entries, newest first.
    ///
    /// # Errors
    ///
    /// [`StoreError::Query`] when the database fails.
    pub async fn audit(&self, limit: u32) -> Result<Vec<AuditEntry>, StoreError> {
        let rows = sqlx::query(
            "SELECT at_ms, actor, action, key_id, detail FROM admin_audit \
             ORDER BY at_ms DESC, id DESC LIMIT $1",
        )
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await
        .map_err(q)?;
        rows.iter()
            .map(|r| {
                let detail: String = r.try_get("detail").map_err(q)?;
                Ok(AuditEntry {
                    at_ms: r.try_get("at_ms").map_err(q)?,
                    actor: r.try_get("actor").map_err(q)?,
                    action: r.try_get("action").map_err(q)?,
                    key_id: r.try_get("key_id").map_err(q)?,
                    detail: serde_json::from_str(&detail)
                        .unwrap_or(serde_json::Value::String(detail)),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_digest_round_trips_through_hex() {
        let d = digest_of("rck_x");
        assert_eq!(unhex(&hex(&d)), Some(d));
        assert_eq!(unhex("zz"), None);
    }

    #[test]
    fn a_rotating_key_accepts_both_secrets_until_the_grace_ends_and_a_revoked_one_none() {
        let mut k = StoredKey {
            id: "key_1".into(),
            settings: KeySettings::default(),
            digest: digest_of("new"),
            previous: Some((digest_of("old"), 1_000)),
            revoked_ms: None,
            created_ms: 0,
            updated_ms: 0,
        };
        assert_eq!(k.digests_at(999).count(), 2);
        assert_eq!(
            k.digests_at(1_000).collect::<Vec<_>>(),
            vec![digest_of("new")]
        );
        k.settings.expires_ms = Some(500);
        assert_eq!(k.digests_at(600).count(), 0, "expired");
        k.settings.expires_ms = None;
        k.revoked_ms = Some(1);
        assert_eq!(k.digests_at(2).count(), 0, "revoked");
    }

    #[test]
    fn a_change_keeps_clears_and_sets() {
        let c: KeyChange = serde_json::from_str(r#"{"rpm": 5, "routes": null}"#).unwrap();
        let before = KeySettings {
            routes: Some(vec!["a".into()]),
            tpm: Some(9),
            ..KeySettings::default()
        };
        let after = c.applied_to(&before);
        assert_eq!(after.rpm, Some(5));
        assert_eq!(after.routes, None);
        assert_eq!(after.tpm, Some(9));
        assert!(serde_json::from_str::<KeyChange>(r#"{"tenant": "x"}"#).is_err());
    }

    #[test]
    fn a_new_secret_is_never_printed() {
        let s = new_secret();
        assert!(!format!("{s:?}").contains(&s.expose()[4..]));
        assert_eq!(s.expose().len(), 68);
    }
}
