//! Baidu Qianfan ModelBuilder, OpenAI-compatible v2 API
//! (<https://cloud.baidu.com/doc/qianfan-api/s/3m7of64lb>).
//!
//! v2 errors are `{"error":{"code","message","type"},"id"}`
//! (<https://cloud.baidu.com/doc/qianfan-api/s/rmwbl43x7>): `tokens_too_long` /
//! `characters_too_long` are context overflows, `rpm_rate_limit_exceeded` /
//! `tpm_rate_limit_exceeded` rate limits, type `unsafe_request` the content filter,
//! `access_denied` / `no_parameter_permission` permission; `invalid_model` on a 401 ("No
//! permission to use the model": not enabled for the account) a missing model, on a 400
//! ("model is empty") a bad request. The older numeric codes of the v1 API
//! (<https://ai.baidu.com/ai-doc/WENXINWORKSHOP/tlmyncueh>), sent as
//! `{"error_code":…,"error_msg":…}` in a 200 body, still show up behind some gateways:
//! 336501/336502 (RPM/TPM), 18 (QPS) are rate limits; 17/19 (daily/total request quota) spent
//! quotas; 110/111 invalid access tokens; 6 no permission; 2, 4 and 336100 ("try again
//! later") a busy service; 1 and 336000 internal errors.

use ripcord_core::{ErrorKind, Price};

use super::Preset;
use crate::error_body::ErrorBody;
use crate::models::ModelInfo;
use crate::openai::MaxTokensField;

const MODELS: &[ModelInfo] = &[
    ModelInfo::chat("ernie-4.5-turbo-128k", 131_072, 12_288)
        .price(Price::per_million(0.11, 0.45)),
    ModelInfo::new("ernie-4.5-turbo-vl", 131_072, 16_384).full(),
    ModelInfo::chat("ernie-x1-turbo-32k", 32_768, 16_384)
        .price(Price::per_million(0.14, 0.55)),
    ModelInfo::chat("ernie-4.0-8k", 8_192, 2_048),
    ModelInfo::new("ernie-speed-128k", 131_072, 4_096).price(Price::FREE),
    ModelInfo::new("ernie-lite-8k", 8_192, 2_048).price(Price::FREE),
    ModelInfo::chat("deepseek-v3", 65_536, 8_192),
];

fn error_hook(status: Option<u16>, body: &ErrorBody) -> Option<ErrorKind> {
    if body.error_type.as_deref() == Some("unsafe_request") {
        return Some(ErrorKind::ContentFiltered);
    }
    let kind = match body.code.as_deref()? {
        "tokens_too_long" | "characters_too_long" => ErrorKind::ContextLengthExceeded,
        "rpm_rate_limit_exceeded" | "tpm_rate_limit_exceeded" | "336501" | "336502" | "18" => {
            ErrorKind::RateLimited
        }
        "17" | "19" => ErrorKind::QuotaExhausted,
        "110" | "111" => ErrorKind::Auth,
        "6" | "no_parameter_permission" | "access_denied" => ErrorKind::PermissionDenied,
        // "No permission to use the model": the model is not enabled for this account.
        "invalid_model" if matches!(status, Some(401 | 403)) => ErrorKind::ModelNotFound,
        "1" | "336000" => ErrorKind::ServerError,
        "2" | "4" | "336100" => ErrorKind::Overloaded,
        _ => return None,
    };
    Some(kind)
}

/// Qianfan v2: `https://qianfan.baidubce.com/v2`, key (a bearer API key) from
/// `QIANFAN_API_KEY`, data processed in China. Sends `max_completion_tokens`.
pub fn qianfan() -> Preset {
    Preset::new("qianfan", "https://qianfan.baidubce.com/v2")
        .with_key_env("QIANFAN_API_KEY")
        .with_base_url_env("QIANFAN_BASE_URL")
        .with_region("cn")
        .with_max_tokens_field(MaxTokensField::MaxCompletionTokens)
        .with_models(MODELS, ModelInfo::chat("", 8_192, 2_048))
        .with_error_hook(error_hook)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compat::preset_table::assert_kinds;

    fn body(t: &str, code: &str, msg: &str) -> String {
        format!(r#"{{"error":{{"code":"{code}","message":"{msg}","type":"{t}"}},"id":"as-1"}}"#)
    }

    #[test]
    fn qianfan_codes() {
        let p = qianfan();
        assert_kinds(
            &p,
            &[
                (
                    400,
                    &body(
                        "invalid_request_error",
                        "tokens_too_long",
                        "Prompt tokens too long",
                    ),
                    ErrorKind::ContextLengthExceeded,
                ),
                (
                    429,
                    &body(
                        "rate_limit_exceeded",
                        "rpm_rate_limit_exceeded",
                        "Rate limit reached for RPM",
                    ),
                    ErrorKind::RateLimited,
                ),
                (
                    400,
                    &body(
                        "unsafe_request",
                        "prompt_unsafe",
                        "the content of prompt field is unsafe",
                    ),
                    ErrorKind::ContentFiltered,
                ),
                (
                    401,
                    &body(
                        "invalid_request_error",
                        "invalid_model",
                        "No permission to use the model",
                    ),
                    ErrorKind::ModelNotFound,
                ),
                (
                    400,
                    &body("invalid_request_error", "invalid_model", "model is empty"),
                    ErrorKind::InvalidRequest,
                ),
                (
                    200,
                    r#"{"error_code":336501,"error_msg":"Rate limit reached for RPM"}"#,
                    ErrorKind::RateLimited,
                ),
                (
                    400,
                    r#"{"error_code":17,"error_msg":"Open api daily request limit reached"}"#,
                    ErrorKind::QuotaExhausted,
                ),
            ],
        );
    }
}
