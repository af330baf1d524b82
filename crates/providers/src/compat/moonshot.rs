//! Moonshot AI / Kimi (<https://platform.moonshot.cn/docs/api/chat>).
//!
//! Errors are `{"error":{"type":…,"message":…}}` (<https://platform.moonshot.cn/docs/api/errors>):
//! 400 `content_filter` ("considered high risk") and `invalid_request_error` (with "Input
//! token length too long" / "exceeded model token limit" for context overflows); 401
//! `invalid_authentication_error` / `incorrect_api_key_error`; 403 `permission_denied_error`
//! (or a suspended / unpaid account); 404 `resource_not_found_error`; 429 is three different
//! things told apart by type — `engine_overloaded_error` (their capacity: overloaded),
//! `exceeded_current_quota_error` (your balance: quota) and `rate_limit_reached_error` (your
//! rate: rate limited). Moonshot puts stream usage inside the last choice, which the OpenAI
//! decoder reads.

use ripcord_core::{ErrorKind, Price};

use super::Preset;
use crate::error_body::ErrorBody;
use crate::models::ModelInfo;

const MODELS: &[ModelInfo] = &[
    ModelInfo::chat("kimi-k2", 262_144, 32_768)
        .price(Price::per_million(0.6, 2.5).with_cached_input(0.15)),
    ModelInfo::chat("kimi-k2-turbo", 262_144, 32_768)
        .price(Price::per_million(1.15, 8.0).with_cached_input(0.15)),
    ModelInfo::new("kimi-latest", 131_072, 32_768).full(),
    ModelInfo::chat("moonshot-v1-8k", 8_192, 4_096)
        .price(Price::per_million(0.2, 2.0)),
    ModelInfo::chat("moonshot-v1-32k", 32_768, 8_192)
        .price(Price::per_million(1.0, 3.0)),
    ModelInfo::chat("moonshot-v1-128k", 131_072, 8_192)
        .price(Price::per_million(2.0, 5.0)),
    ModelInfo::new("moonshot-v1-8k-vision", 8_192, 4_096)
        .full()
        .price(Price::per_million(0.2, 2.0)),
    ModelInfo::new("moonshot-v1-32k-vision", 32_768, 8_192)
        .full()
        .price(Price::per_million(1.0, 3.0)),
    ModelInfo::new("moonshot-v1-128k-vision", 131_072, 8_192)
        .full()
        .price(Price::per_million(2.0, 5.0)),
];

fn error_hook(status: Option<u16>, body: &ErrorBody) -> Option<ErrorKind> {
    // A spent balance or a used-up period allowance ("You've reached your usage limit for
    // this period") arrives under several types and statuses (403, 429): the words decide.
    if body.is_quota() {
        return Some(ErrorKind::QuotaExhausted);
    }
    let kind = match body.error_type.as_deref()? {
        "exceeded_current_quota_error" => ErrorKind::QuotaExhausted,
        "engine_overloaded_error" => ErrorKind::Overloaded,
        "rate_limit_reached_error" => ErrorKind::RateLimited,
        "content_filter" => ErrorKind::ContentFiltered,
        "invalid_authentication_error" | "incorrect_api_key_error" => ErrorKind::Auth,
        "permission_denied_error" => {
            let m = body.message_or_empty().to_ascii_lowercase();
            if m.contains("suspended") || m.contains("balance") {
                ErrorKind::QuotaExhausted
            } else {
                ErrorKind::PermissionDenied
            }
        }
        "resource_not_found_error" => ErrorKind::ModelNotFound,
        "access_terminated_error" => ErrorKind::PermissionDenied,
        "unexpected_output" if status.is_none_or(|s| s >= 500 && s != 503) => {
            ErrorKind::ServerError
        }
        _ => return None,
    };
    Some(kind)
}

/// Moonshot (Kimi): `https://api.moonshot.cn/v1`, key from `MOONSHOT_API_KEY`, data processed
/// in China (`https://api.moonshot.ai/v1` is the international platform; keys differ).
pub fn moonshot() -> Preset {
    Preset::new("moonshot", "https://api.moonshot.cn/v1")
        .with_key_env("MOONSHOT_API_KEY")
        .with_base_url_env("MOONSHOT_BASE_URL")
        .with_region("cn")
        .with_models(MODELS, ModelInfo::chat("", 131_072, 8_192))
        .with_error_hook(error_hook)
}
