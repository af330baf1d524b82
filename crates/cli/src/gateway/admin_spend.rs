//! `GET /admin/spend`: what the ledger says was spent, as JSON or CSV (issue 38).
//!
//! Query: `tenant`, `key` (a key's ledger id, `tenant@source`), `from` and `to` (RFC 3339
//! times, `YYYY-MM-DD` UTC days, or Unix milliseconds; `to` is exclusive, a day `to` means the
//! end of that day), `group_by` = `model` | `route` | `link` | `day` (default: one total), and
//! `format=csv` (or `Accept: text/csv`). A bad parameter is a 400 naming it; a gateway without
//! `[store]` answers 404. The report itself is [`crate::spend_report`], shared with
//! `ripcord spend`.
//!
//! `GET /admin/ledger` answers the ledger's counters since start (rows written, spooled,
//! replayed after an outage, dropped because the buffer was full or the spool at its cap,
//! spool lines that did not parse, failed writes), so an operator can see that nothing was
//! lost, or how much.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::GatewayState;
use super::errors::GatewayError;
use crate::spend_report::{self, SpendQuestion};

/// The query string, as sent.
#[derive(Debug, Default, Deserialize)]
pub(super) struct SpendQuery {
    tenant: Option<String>,
    key: Option<String>,
    from: Option<String>,
    to: Option<String>,
    group_by: Option<String>,
    format: Option<String>,
}

fn wants_csv(q: &SpendQuery, headers: &HeaderMap) -> Result<bool, GatewayError> {
    match q.format.as_deref() {
        Some("csv") => return Ok(true),
        Some("json") => return Ok(false),
        Some(other) => {
            return Err(GatewayError::new(
                400,
                "invalid_request",
                format!("`format` = {other:?} is not json or csv"),
            )
            .with_param("format"));
        }
        None => {}
    }
    Ok(headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("text/csv")))
}

pub(super) async fn spend(
    State(state): State<Arc<GatewayState>>,
    headers: HeaderMap,
    Query(q): Query<SpendQuery>,
) -> Response {
    match run(&state, &headers, q).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn run(
    state: &GatewayState,
    headers: &HeaderMap,
    q: SpendQuery,
) -> Result<Response, GatewayError> {
    super::admin::check(state, headers)?;
    let Some(store) = &state.store else {
        return Err(GatewayError::new(
            404,
            "not_found",
            "this gateway has no ledger: configure [store]",
        ));
    };
    let csv = wants_csv(&q, headers)?;
    let question = SpendQuestion {
        tenant: q.tenant,
        key: q.key,
        from: q.from,
        to: q.to,
        group_by: q.group_by,
    };
    let (filter, group_by, name) = question
        .parse()
        .map_err(|b| GatewayError::new(400, "invalid_request", b.message).with_param(b.param))?;
    let report = spend_report::ask(store, filter, group_by, name)
        .await
        .map_err(|e| GatewayError::new(503, "store_unavailable", e))?;
    if csv {
        let body = report
            .csv()
            .map_err(|e| GatewayError::new(500, "server_error", e))?;
        let mut resp = body.into_response();
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/csv; charset=utf-8"),
        );
        return Ok(resp);
    }
    Ok(axum::Json(report.json()).into_response())
}

pub(super) async fn ledger(State(state): State<Arc<GatewayState>>, headers: HeaderMap) -> Response {
    if let Err(e) = super::admin::check(&state, &headers) {
        return e.into_response();
    }
    let Some(ledger) = &state.ledger else {
        return GatewayError::new(
            404,
            "not_found",
            "this gateway has no ledger: configure [store]",
        )
        .into_response();
    };
    let c = ledger.stats().counts();
    axum::Json(serde_json::json!({
        "written": c.written,
        "spooled": c.spooled,
        "replayed": c.replayed,
        "dropped_full": c.dropped_full,
        "dropped_spool": c.dropped_spool,
        "dropped_corrupt": c.dropped_corrupt,
        "write_failures": c.write_failures,
    }))
    .into_response()
}
