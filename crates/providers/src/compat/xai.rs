//! xAI's Grok models (<https://docs.x.ai/docs/api-reference>).
//!
//! OpenAI's wire at `https://api.x.ai/v1`, with its own error shape: `{"code": "…", "error": "…"}`,
//! where `code` is a sentence, not an identifier. Two rows need the hook: a bad key is a **400**
//! "Incorrect API key provided: xa***. You can obtain an API key from <https://console.x.ai>." (an
//! auth failure, not a bad request), and a team without credits is a **403** "You have run out of
//! credits …" or a **429** "Your team … has either used all available credits or reached its
//! monthly spending limit." (spent money, not a permission and not a wait); the subscription
//! lane's 429 "You've used all the included free usage … rolling 24-hour window" is the same.

use ripcord_core::ErrorKind;

use super::Preset;
use crate::error_body::ErrorBody;
use crate::models::ModelInfo;

const MODELS: &[ModelInfo] = &[
    ModelInfo::new("grok-4-fast", 2_000_000, 30_000).full(),
    ModelInfo::new("grok-4", 256_000, 64_000).full(),
    ModelInfo::chat("grok-code-fast", 256_000, 10_000),
    ModelInfo::chat("grok-3-mini", 131_072, 16_384),
    ModelInfo::chat("grok-3", 131_072, 16_384),
    ModelInfo::new("grok-2-vision", 32_768, 8_192).full(),
];

fn error_hook(_status: Option<u16>, body: &ErrorBody) -> Option<ErrorKind> {
    let m = body.message_or_empty().to_ascii_lowercase();
    if m.contains("incorrect api key") || m.contains("invalid api key") {
        return Some(ErrorKind::Auth);
    }
    if m.contains("run out of credits")
        || m.contains("doesn't have any credits")
        || m.contains("used all available credits")
        || m.contains("monthly spending limit")
        || m.contains("included free usage")
    {
        return Some(ErrorKind::QuotaExhausted);
    }
    None
}

/// xAI: `https://api.x.ai/v1`, key from `XAI_API_KEY`, data processed in the US.
pub fn xai() -> Preset {
    Preset::new("xai", "https://api.x.ai/v1")
        .with_key_env("XAI_API_KEY")
        .with_base_url_env("XAI_BASE_URL")
        .with_region("us")
        .with_json_schema(true)
        .with_models(MODELS, ModelInfo::chat("", 131_072, 16_384))
        .with_error_hook(error_hook)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compat::preset_table::assert_kinds;

    #[test]
    fn xai_error_rows() {
        let p = xai();
        assert_kinds(
            &p,
            &[
                (
                    400,
                    r#"{"code":"Client specified an invalid argument","error":"Incorrect API key provided: xa***yz. You can obtain an API key from https://console.x.ai."}"#,
                    ErrorKind::Auth,
                ),
                (
                    403,
                    r#"{"code":"The caller does not have permission to execute the specified operation","error":"You have run out of credits or need a Grok subscription."}"#,
                    ErrorKind::QuotaExhausted,
                ),
            ],
        );
        // Spent credits arrive as a 429 too: no wait brings them back.
        assert_kinds(
            &p,
            &[
                (
                    429,
                    r#"{"code":"Some resource has been exhausted","error":"Your team 16f2151a has either used all available credits or reached its monthly spending limit. To continue making API requests, please purchase more credits or raise your spending limit."}"#,
                    ErrorKind::QuotaExhausted,
                ),
                (
                    429,
                    r#"{"code":"Some resource has been exhausted","error":"Too many tokens for team e9fe19cb and model grok-4-0709. Your team's rate limit is — Tokens per Minute (actual/limit): 65605/16000."}"#,
                    ErrorKind::RateLimited,
                ),
                (
                    400,
                    r#"{"code":"Client specified an invalid argument","error":"temperature must be <= 2"}"#,
                    ErrorKind::InvalidRequest,
                ),
            ],
        );
    }
}
