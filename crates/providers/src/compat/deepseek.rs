//! DeepSeek (<https://api-docs.deepseek.com>).
//!
//! Errors are told apart by status (<https://api-docs.deepseek.com/quick_start/error_codes>):
//! 400 invalid format, 401 authentication, **402 insufficient balance**, 422 invalid
//! parameters, 429 rate limit, 500 server error, **503 server overloaded**. The body carries an
//! OpenAI-style error object; a context overflow says "maximum context length" as OpenAI does.
//! The cache hit count comes back as `prompt_cache_hit_tokens`.
//!
//! Assistant prefill is DeepSeek's chat prefix completion
//! (<https://api-docs.deepseek.com/guides/chat_prefix_completion>): the last message is the
//! assistant's with `"prefix": true`, on the beta base URL `https://api.deepseek.com/beta`, so a
//! continued stream goes there; every other call keeps the usual endpoint.

use ripcord_core::{ErrorKind, Price};

use super::Preset;
use crate::error_body::ErrorBody;
use crate::models::ModelInfo;
use crate::openai::AssistantPrefill;

const MODELS: &[ModelInfo] = &[
    ModelInfo::chat("deepseek-chat", 131_072, 8_192)
        .price(Price::per_million(0.28, 0.42).with_cached_input(0.028)),
    ModelInfo::new("deepseek-reasoner", 131_072, 65_536)
        .json()
        .price(Price::per_million(0.28, 0.42).with_cached_input(0.028)),
];

fn error_hook(status: Option<u16>, body: &ErrorBody) -> Option<ErrorKind> {
    match status {
        Some(402) => Some(ErrorKind::QuotaExhausted),
        Some(422) if !body.is_context_length() => Some(ErrorKind::InvalidRequest),
        Some(503) => Some(ErrorKind::Overloaded),
        None if body
            .message_or_empty()
            .eq_ignore_ascii_case("insufficient balance") =>
        {
            Some(ErrorKind::QuotaExhausted)
        }
        _ => None,
    }
}

/// DeepSeek: `https://api.deepseek.com`, key from `DEEPSEEK_API_KEY`, data processed in China.
pub fn deepseek() -> Preset {
    Preset::new("deepseek", "https://api.deepseek.com")
        .with_key_env("DEEPSEEK_API_KEY")
        .with_base_url_env("DEEPSEEK_BASE_URL")
        .with_region("cn")
        .with_models(MODELS, ModelInfo::chat("", 65_536, 8_192))
        .with_error_hook(error_hook)
        .with_prefill(AssistantPrefill::Prefix {
            base_suffix: Some("/beta"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compat::preset_table::assert_kinds;

    #[test]
    fn deepseek_error_rows() {
        let p = deepseek();
        let body = |m: &str| {
            format!(
                r#"{{"error":{{"message":"{m}","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}}}"#
            )
        };
        assert_kinds(
            &p,
            &[
                (
                    402,
                    &body("Insufficient Balance"),
                    ErrorKind::QuotaExhausted,
                ),
                (
                    422,
                    &body("Invalid max_tokens value, the valid range of max_tokens is [1, 8192]"),
                    ErrorKind::InvalidRequest,
                ),
                (
                    400,
                    &body(
                        "This model's maximum context length is 131072 tokens. However, you requested 140000 tokens",
                    ),
                    ErrorKind::ContextLengthExceeded,
                ),
                (429, &body("Rate Limit Reached"), ErrorKind::RateLimited),
                (503, &body("Server Overloaded"), ErrorKind::Overloaded),
                (500, "", ErrorKind::ServerError),
                (401, &body("Authentication Fails"), ErrorKind::Auth),
            ],
        );
    }
}
