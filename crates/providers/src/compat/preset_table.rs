//! The presets' error tables, checked by their own tests.

use ::http::header::HeaderMap;
use ripcord_core::ErrorKind;

use super::Preset;
use crate::Vendor;

/// The kind a preset gives an answer.
fn kind_for(preset: &Preset, status: u16, body: &str) -> ErrorKind {
    crate::error_body::http_error(
        status,
        &HeaderMap::new(),
        body.as_bytes(),
        preset.error_hook,
    )
    .kind()
}

/// Asserts the kind each `(status, body, kind)` row gets from the preset's hook and the
/// shared rules.
pub(crate) fn assert_kinds(preset: &Preset, rows: &[(u16, &str, ErrorKind)]) {
    for &(status, body, kind) in rows {
        assert_eq!(kind_for(preset, status, body), kind, "{status} {body}");
    }
}

/// An answer's status and body, with the kind it must get.
type Row = (u16, &'static str, ErrorKind);

/// Answers of the vendors whose presets only map an error's kind, by vendor, with the kind
/// each gets. A vendor whose preset this build lacks is skipped.
const VENDOR_ROWS: &[(Vendor, &[Row])] = &[
    (
        Vendor::Moonshot,
        &[
            (
                429,
                r#"{"error":{"type":"exceeded_current_quota_error","message":"Your account is suspended, please check your plan and billing details"}}"#,
                ErrorKind::QuotaExhausted,
            ),
            (
                429,
                r#"{"error":{"type":"engine_overloaded_error","message":"The engine is currently overloaded, please try again later"}}"#,
                ErrorKind::Overloaded,
            ),
            (
                429,
                r#"{"error":{"type":"rate_limit_reached_error","message":"Your account reached max request: 3, please try again after 1 seconds"}}"#,
                ErrorKind::RateLimited,
            ),
            (
                400,
                r#"{"error":{"type":"content_filter","message":"The request was rejected because it was considered high risk"}}"#,
                ErrorKind::ContentFiltered,
            ),
            (
                400,
                r#"{"error":{"type":"invalid_request_error","message":"Invalid request: Your request exceeded model token limit: 8192"}}"#,
                ErrorKind::ContextLengthExceeded,
            ),
            (
                400,
                r#"{"error":{"type":"invalid_request_error","message":"Invalid request: temperature must be in [0, 1]"}}"#,
                ErrorKind::InvalidRequest,
            ),
            (
                401,
                r#"{"error":{"type":"invalid_authentication_error","message":"Invalid Authentication"}}"#,
                ErrorKind::Auth,
            ),
            (
                404,
                r#"{"error":{"type":"resource_not_found_error","message":"Not found the model moonshot-x or Permission denied"}}"#,
                ErrorKind::ModelNotFound,
            ),
            (
                403,
                r#"{"error":{"type":"permission_denied_error","message":"The API you are accessing is not open"}}"#,
                ErrorKind::PermissionDenied,
            ),
        ],
    ),
    (
        Vendor::Qwen,
        &[
            (
                400,
                r#"{"error":{"message":"Access denied, please make sure your account is in good standing.","type":"Arrearage","param":null,"code":"Arrearage"},"request_id":"r"}"#,
                ErrorKind::QuotaExhausted,
            ),
            (
                400,
                r#"{"error":{"message":"Input data may contain inappropriate content.","type":"data_inspection_failed","param":null,"code":"data_inspection_failed"},"request_id":"r"}"#,
                ErrorKind::ContentFiltered,
            ),
            (
                429,
                r#"{"error":{"message":"Requests rate limit exceeded, please try again later.","type":"Throttling.RateQuota","param":null,"code":"Throttling.RateQuota"},"request_id":"r"}"#,
                ErrorKind::RateLimited,
            ),
            (
                429,
                r#"{"error":{"message":"You exceeded your current requests list.","type":"limit_requests","param":null,"code":"limit_requests"},"request_id":"r"}"#,
                ErrorKind::RateLimited,
            ),
            (
                403,
                r#"{"error":{"message":"free tier exhausted","type":"AllocationQuota.FreeTierOnly","param":null,"code":"AllocationQuota.FreeTierOnly"},"request_id":"r"}"#,
                ErrorKind::QuotaExhausted,
            ),
            (
                401,
                r#"{"error":{"message":"Incorrect API key provided.","type":"invalid_api_key","param":null,"code":"invalid_api_key"},"request_id":"r"}"#,
                ErrorKind::Auth,
            ),
            (
                404,
                r#"{"error":{"message":"The model `qwen-x` does not exist","type":"model_not_found","param":null,"code":"model_not_found"},"request_id":"r"}"#,
                ErrorKind::ModelNotFound,
            ),
            (
                400,
                r#"{"error":{"message":"Range of input length should be [1, 30720]","type":"InvalidParameter","param":null,"code":"InvalidParameter"},"request_id":"r"}"#,
                ErrorKind::ContextLengthExceeded,
            ),
            (
                500,
                r#"{"error":{"message":"An internal error has occured","type":"InternalError.Algo","param":null,"code":"InternalError.Algo"},"request_id":"r"}"#,
                ErrorKind::ServerError,
            ),
        ],
    ),
    (
        Vendor::Fireworks,
        &[
            (
                412,
                r#"{"error":{"object":"error","type":"invalid_request_error","message":"Account is suspended"}}"#,
                ErrorKind::QuotaExhausted,
            ),
            (
                403,
                r#"{"error":{"object":"error","type":"invalid_request_error","message":"Forbidden"}}"#,
                ErrorKind::Auth,
            ),
            (
                429,
                r#"{"error":"Too Many Requests","message":"You have exceeded your usage limits. Please try again later or contact Fireworks to explore dedicated capacity."}"#,
                ErrorKind::RateLimited,
            ),
        ],
    ),
    (
        Vendor::Together,
        &[
            (
                403,
                r#"{"error":{"message":"Input validation error: `inputs` tokens + `max_new_tokens` must be <= 8193. Given: 8000 `inputs` tokens and 1000 `max_new_tokens`; the input token count + max_tokens parameter must be less than the context length of the model","type":"invalid_request_error"}}"#,
                ErrorKind::ContextLengthExceeded,
            ),
            (
                403,
                r#"{"error":{"message":"You do not have access to this model","type":"invalid_request_error"}}"#,
                ErrorKind::PermissionDenied,
            ),
        ],
    ),
];

#[test]
fn vendor_error_rows() {
    for &(vendor, rows) in VENDOR_ROWS {
        if let Some(p) = super::preset(vendor) {
            assert_kinds(&p, rows);
        }
    }
}
