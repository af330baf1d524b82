//! The operator endpoints, on when `[server.admin]` names their key:
//!
//! - `POST /admin/breakers/{provider}/reset` closes the provider's breaker (after fixing a key,
//!   say) and answers the state it was in;
//! - `POST /admin/providers/{provider}/disable` and `/enable` take the provider out of service
//!   and back: a disabled link refuses every call at once and the chains move on to their next
//!   link, while its breaker, limiter and health state are kept;
//! - `POST /admin/reload` reads the config file again and swaps the new gateway in (see the
//!   `live` module), as `SIGHUP` does;
//! - `GET /admin/spend` reads the ledger (`[store]`): spend by tenant, key, time range, grouped
//!   by model, route, link or day, as JSON or CSV, and `GET /admin/ledger` its counters
//!   (the `admin_spend` module);
//! - `/admin/keys` makes, lists, changes, rotates and revokes the keys kept in the store, and
//!   `GET /admin/audit` answers what was done (the `admin_keys` module).
//!
//! They take the admin key only (`Authorization: Bearer …`), checked here by digest in constant
//! time as the gateway keys are: a tenant's key is refused (401), and a gateway without
//! `[server.admin]` does not have these routes at all (404). They sit beside the chat doors'
//! front door, not behind it, so a tenant key is never what opens them.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::json;

use super::errors::GatewayError;
use super::{GatewayState, digests_equal, sha256};

/// The admin routes, for a gateway whose state has an admin key.
pub(super) fn router() -> Router<Arc<GatewayState>> {
    Router::new()
        .route("/admin/breakers/{provider}/reset", post(reset_breaker))
        .route(
            "/admin/providers/{provider}/disable",
            post(switched::<false>),
        )
        .route("/admin/providers/{provider}/enable", post(switched::<true>))
        .route("/admin/reload", post(reload))
        .route(
            "/admin/spend",
            axum::routing::get(super::admin_spend::spend),
        )
        .route(
            "/admin/ledger",
            axum::routing::get(super::admin_spend::ledger),
        )
        .merge(super::admin_keys::router())
}

/// The bearer token must be the admin key.
pub(super) fn check(state: &GatewayState, headers: &HeaderMap) -> Result<(), GatewayError> {
    let refused = || {
        GatewayError::new(
            401,
            "invalid_admin_key",
            "the admin endpoints need the admin key of [server.admin] (Authorization: Bearer …)",
        )
    };
    let Some(expected) = &state.admin_digest else {
        return Err(GatewayError::new(
            404,
            "not_found",
            "the admin endpoints are off: [server.admin] is not configured",
        ));
    };
    let token = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, rest) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        })
        .ok_or_else(refused)?;
    if digests_equal(&sha256(token.as_bytes()), expected) {
        Ok(())
    } else {
        Err(refused())
    }
}

fn unknown(state: &GatewayState, provider: &str) -> GatewayError {
    let names: Vec<&str> = state.switches.names().collect();
    GatewayError::new(
        404,
        "provider_not_found",
        format!(
            "no provider {provider:?}; the providers are: {}",
            names.join(", ")
        ),
    )
}

fn answer(r: Result<serde_json::Value, GatewayError>) -> Response {
    match r {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn reset_breaker(
    State(state): State<Arc<GatewayState>>,
    Path(provider): Path<String>,
    headers: HeaderMap,
) -> Response {
    answer(check(&state, &headers).and_then(|()| {
        let was = state
            .switches
            .reset_breaker(&provider)
            .ok_or_else(|| unknown(&state, &provider))?;
        tracing::warn!(ripcord.link = %provider, was = was.as_str(), "breaker reset by an operator");
        Ok(json!({"provider": provider, "breaker": "closed", "was": was.as_str()}))
    }))
}

fn switch(state: &GatewayState, headers: &HeaderMap, provider: &str, on: bool) -> Response {
    answer(check(state, headers).and_then(|()| {
        let was = state
            .switches
            .set_enabled(provider, on)
            .ok_or_else(|| unknown(state, provider))?;
        tracing::warn!(ripcord.link = %provider, enabled = on, "provider switched by an operator");
        Ok(json!({"provider": provider, "enabled": on, "was_enabled": was}))
    }))
}

/// Reloads the config: the new one is validated and built in full before it replaces the
/// running one; a refused config leaves the running one serving.
async fn reload(State(state): State<Arc<GatewayState>>, headers: HeaderMap) -> Response {
    if let Err(e) = check(&state, &headers) {
        return e.into_response();
    }
    let Some(live) = state.live.as_ref().and_then(std::sync::Weak::upgrade) else {
        return GatewayError::new(
            404,
            "not_found",
            "this gateway was not started from a config file, so it cannot reload one",
        )
        .into_response();
    };
    match tokio::task::spawn_blocking(move || live.reload()).await {
        Ok(Ok(summary)) => {
            axum::Json(json!({"reloaded": true, "summary": summary})).into_response()
        }
        Ok(Err(why)) => GatewayError::new(400, "config_refused", why).into_response(),
        Err(e) => GatewayError::new(500, "server_error", format!("the reload failed: {e}"))
            .into_response(),
    }
}

/// `POST /admin/providers/{provider}/enable` (`ON`) or `/disable`.
async fn switched<const ON: bool>(
    State(state): State<Arc<GatewayState>>,
    Path(provider): Path<String>,
    headers: HeaderMap,
) -> Response {
    switch(&state, &headers, &provider, ON)
}
