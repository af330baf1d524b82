//! Alibaba Cloud Model Studio (DashScope) in OpenAI-compatible mode
//! (<https://help.aliyun.com/zh/model-studio/compatibility-of-openai-with-dashscope>).
//!
//! Errors carry DashScope's codes in `code` / `type`
//! (<https://help.aliyun.com/zh/model-studio/error-code>): `Arrearage` (account overdue —
//! "Access denied, please make sure your account is in good standing", sent as a 400) and
//! `AllocationQuota.FreeTierOnly` are spent quotas; `DataInspectionFailed` /
//! `data_inspection_failed` is the content filter; `Throttling*` and `limit_requests` are rate
//! limits; `InvalidApiKey` is authentication; `AccessDenied.Unpurchased` (the model is not
//! enabled for the account) a missing model, other `AccessDenied*` permission; `ModelNotFound` /
//! `model_not_found`; `BadRequest.TooLarge` a payload too large; `RequestTimeOut` (408) a
//! timeout; `InternalError*` server errors; `ServiceUnavailable` overload. "Range of input
//! length should be [1, N]" is a context overflow. Native-API answers put `code` / `message`
//! at the top level of a 200 body; they are read as errors by their codes.

use ripcord_core::{ErrorKind, Price};

use super::Preset;
use crate::error_body::ErrorBody;
use crate::models::ModelInfo;

const MODELS: &[ModelInfo] = &[
    ModelInfo::chat("qwen-max", 32_768, 8_192)
        .price(Price::per_million(1.6, 6.4)),
    ModelInfo::chat("qwen3-max", 262_144, 65_536)
        .price(Price::per_million(1.2, 6.0)),
    ModelInfo::chat("qwen-plus", 131_072, 16_384)
        .price(Price::per_million(0.4, 1.2)),
    ModelInfo::chat("qwen-turbo", 1_000_000, 16_384)
        .price(Price::per_million(0.05, 0.2)),
    ModelInfo::chat("qwen-flash", 1_000_000, 32_768)
        .price(Price::per_million(0.05, 0.4)),
    ModelInfo::new("qwen-long", 10_000_000, 8_192)
        .json()
        .price(Price::per_million(0.07, 0.28)),
    ModelInfo::new("qwen-vl-max", 131_072, 8_192)
        .vision()
        .json()
        .price(Price::per_million(0.8, 3.2)),
    ModelInfo::new("qwen-vl-plus", 131_072, 8_192)
        .vision()
        .json()
        .price(Price::per_million(0.21, 0.63)),
    ModelInfo::chat("qwen3-coder-plus", 1_000_000, 65_536)
        .price(Price::per_million(1.0, 5.0)),
];

fn error_hook(_status: Option<u16>, body: &ErrorBody) -> Option<ErrorKind> {
    let tags = [body.code.as_deref(), body.error_type.as_deref()];
    for tag in tags.into_iter().flatten() {
        let kind = match tag {
            "Arrearage" | "AllocationQuota.FreeTierOnly" | "insufficient_quota" => {
                ErrorKind::QuotaExhausted
            }
            "DataInspectionFailed" | "data_inspection_failed" => ErrorKind::ContentFiltered,
            t if t.starts_with("Throttling") || t == "limit_requests" => ErrorKind::RateLimited,
            "InvalidApiKey" | "invalid_api_key" => ErrorKind::Auth,
            // The model is not enabled ("purchased") for this account: for the caller it does
            // not exist.
            "AccessDenied.Unpurchased" => ErrorKind::ModelNotFound,
            t if t.starts_with("AccessDenied") => ErrorKind::PermissionDenied,
            "ModelNotFound" | "model_not_found" => ErrorKind::ModelNotFound,
            "BadRequest.TooLarge" => ErrorKind::PayloadTooLarge,
            "RequestTimeOut" => ErrorKind::Timeout,
            t if t.starts_with("InternalError") => ErrorKind::ServerError,
            "ServiceUnavailable" => ErrorKind::Overloaded,
            _ => continue,
        };
        return Some(kind);
    }
    None
}

/// DashScope (Qwen), compatible mode: `https://dashscope.aliyuncs.com/compatible-mode/v1`, key
/// from `DASHSCOPE_API_KEY`, data processed in China (use
/// `https://dashscope-intl.aliyuncs.com/compatible-mode/v1` with `with_base_url` for the
/// international endpoint).
pub fn qwen() -> Preset {
    Preset::new("qwen", "https://dashscope.aliyuncs.com/compatible-mode/v1")
        .with_key_env("DASHSCOPE_API_KEY")
        .with_base_url_env("DASHSCOPE_BASE_URL")
        .with_region("cn")
        .with_models(MODELS, ModelInfo::chat("", 131_072, 8_192))
        .with_error_hook(error_hook)
}
