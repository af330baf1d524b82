//! The key endpoints (`[store] keys = true`, issue 38), with the admin key:
//!
//! - `POST /admin/keys` with the key's settings (`name`, `tenant`, `routes`, `rpm`, `tpm`,
//!   `budget_tokens`, `expires_ms`; all optional) → 201 with the key and its `secret`, the only
//!   time the secret is shown;
//! - `GET /admin/keys` and `GET /admin/keys/{id}` → the keys (never a secret or digest);
//! - `PATCH /admin/keys/{id}` with the fields to change (`null` clears one; the tenant is not
//!   changeable);
//! - `POST /admin/keys/{id}/rotate` with `{"grace_s": N}` (default 3600) → a new secret; the old
//!   one keeps working for the grace period;
//! - `POST /admin/keys/{id}/revoke` → the key stops working;
//! - `GET /admin/audit?limit=N` → the latest admin actions on keys, newest first.
//!
//! A change is visible on this replica when the answer comes back, and on every other within
//! `[store] keys_poll_ms` (see the `store_keys` module).

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{FromRequestParts, Path, Query};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use ripcord_store::{KeyChange, KeySettings, NewSecret, Store, StoreError, StoredKey};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::GatewayState;
use super::errors::GatewayError;
use super::store_keys::now_ms;

/// Who the audit table names for the admin key's actions.
const ACTOR: &str = "admin";
/// The grace period of a rotation without `grace_s`.
const DEFAULT_GRACE: Duration = Duration::from_secs(3600);

pub(super) fn router() -> Router<Arc<GatewayState>> {
    Router::new()
        .route("/admin/keys", post(create).get(list))
        .route("/admin/keys/{id}", get(one).patch(change))
        .route("/admin/keys/{id}/rotate", post(rotate))
        .route("/admin/keys/{id}/revoke", post(revoke))
        .route("/admin/audit", get(audit))
}

/// The admin key, and a gateway that keeps keys in its store.
fn store_of<'a>(state: &'a GatewayState, headers: &HeaderMap) -> Result<&'a Store, GatewayError> {
    super::admin::check(state, headers)?;
    match (&state.store, &state.store_keys) {
        (Some(store), Some(_)) => Ok(store),
        _ => Err(GatewayError::new(
            404,
            "not_found",
            "this gateway keeps no keys in a store: configure [store] with keys = true",
        )),
    }
}

fn body<T: DeserializeOwned + Default>(bytes: &Bytes) -> Result<T, GatewayError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(bytes).map_err(|e| {
        GatewayError::new(
            400,
            "invalid_request",
            format!("the body is not valid here: {e}"),
        )
    })
}

fn store_error(e: StoreError) -> GatewayError {
    match e {
        StoreError::NoSuchKey(_) => GatewayError::new(404, "not_found", e.to_string()),
        StoreError::KeySpec(_) => GatewayError::new(400, "invalid_request", e.to_string()),
        other => {
            let cause =
                std::error::Error::source(&other).map_or(String::new(), |c| format!(": {c}"));
            GatewayError::new(503, "store_unavailable", format!("{other}{cause}"))
        }
    }
}

/// Route names must be routes of this gateway.
fn check_routes(state: &GatewayState, settings: &KeySettings) -> Result<(), String> {
    let Some(names) = &settings.routes else {
        return Ok(());
    };
    if state.routes.is_empty() {
        return Err("`routes`: this gateway has no routes (it answers any model)".into());
    }
    for n in names {
        if !state.routes.iter().any(|r| &r.name == n) {
            let known: Vec<&str> = state.routes.iter().map(|r| r.name.as_str()).collect();
            return Err(format!(
                "`routes`: no route {n:?}; this gateway has {}",
                known.join(", ")
            ));
        }
    }
    Ok(())
}

/// What every key endpoint starts from: the admin key, checked, and the store of a gateway
/// that keeps keys in one.
struct Keys {
    state: Arc<GatewayState>,
    store: Store,
}

impl FromRequestParts<Arc<GatewayState>> for Keys {
    type Rejection = GatewayError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<GatewayState>,
    ) -> Result<Self, GatewayError> {
        let store = store_of(state, &parts.headers)?.clone();
        Ok(Keys {
            state: state.clone(),
            store,
        })
    }
}

impl Keys {
    /// This replica sees a change at once (the others at their next poll).
    async fn refreshed(&self) {
        if let Some(k) = &self.state.store_keys {
            k.directory().refresh().await;
        }
    }
}

/// A key as the endpoints show it, with its `secret` when it was just made.
fn shown(key: &StoredKey, secret: Option<&NewSecret>) -> Value {
    let mut v = key.to_json(now_ms());
    if let Some(secret) = secret {
        v["secret"] = json!(secret.expose());
    }
    v
}

async fn create(k: Keys, bytes: Bytes) -> Result<Response, GatewayError> {
    let settings: KeySettings = body(&bytes)?;
    check_routes(&k.state, &settings).map_err(|m| GatewayError::new(400, "invalid_request", m))?;
    let (key, secret) = k
        .store
        .create_key(&settings, ACTOR)
        .await
        .map_err(store_error)?;
    k.refreshed().await;
    Ok((StatusCode::CREATED, axum::Json(shown(&key, Some(&secret)))).into_response())
}

async fn list(k: Keys) -> Result<Response, GatewayError> {
    let keys = k.store.keys().await.map_err(store_error)?;
    let now = now_ms();
    let data: Vec<_> = keys.iter().map(|k| k.to_json(now)).collect();
    Ok(axum::Json(json!({ "data": data })).into_response())
}

async fn one(k: Keys, Path(id): Path<String>) -> Result<Response, GatewayError> {
    let key = k.store.key(&id).await.map_err(store_error)?;
    Ok(axum::Json(shown(&key, None)).into_response())
}

async fn change(k: Keys, Path(id): Path<String>, bytes: Bytes) -> Result<Response, GatewayError> {
    let change: KeyChange = body(&bytes)?;
    let key = k
        .store
        .change_key(&id, &change, ACTOR, |s| check_routes(&k.state, s))
        .await
        .map_err(store_error)?;
    k.refreshed().await;
    Ok(axum::Json(shown(&key, None)).into_response())
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Rotation {
    grace_s: Option<u64>,
}

async fn rotate(k: Keys, Path(id): Path<String>, bytes: Bytes) -> Result<Response, GatewayError> {
    let r: Rotation = body(&bytes)?;
    let grace = r.grace_s.map_or(DEFAULT_GRACE, Duration::from_secs);
    let (key, secret) = k
        .store
        .rotate_key(&id, grace, ACTOR)
        .await
        .map_err(store_error)?;
    k.refreshed().await;
    Ok(axum::Json(shown(&key, Some(&secret))).into_response())
}

async fn revoke(k: Keys, Path(id): Path<String>) -> Result<Response, GatewayError> {
    let key = k.store.revoke_key(&id, ACTOR).await.map_err(store_error)?;
    k.refreshed().await;
    Ok(axum::Json(shown(&key, None)).into_response())
}

#[derive(Debug, Deserialize)]
pub(super) struct AuditQuery {
    limit: Option<u32>,
}

async fn audit(Query(q): Query<AuditQuery>, k: Keys) -> Result<Response, GatewayError> {
    let limit = q.limit.unwrap_or(100).clamp(1, 10_000);
    let entries = k.store.audit(limit).await.map_err(store_error)?;
    Ok(axum::Json(json!({ "data": entries })).into_response())
}
