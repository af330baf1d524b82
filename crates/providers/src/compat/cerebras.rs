//! Cerebras Inference (<https://inference-docs.cerebras.ai/support/error>,
//! <https://inference-docs.cerebras.ai/support/rate-limits>).
//!
//! OpenAI's wire at `https://api.cerebras.ai/v1`, errors with the fields at the top level
//! (`{"message","type","param","code"}`). Limits are per minute *and per day* (requests and
//! tokens, reported in `x-ratelimit-*-minute` / `-day` headers): "Tokens per minute limit
//! exceeded" clears in a minute, a per-day limit does not — that is a spent quota. **402** is
//! Payment Required.

use ripcord_core::ErrorKind;

use super::Preset;
use crate::error_body::ErrorBody;
use crate::models::ModelInfo;

const MODELS: &[ModelInfo] = &[
    ModelInfo::chat("llama-3.3-70b", 65_536, 8_192),
    ModelInfo::chat("llama3.1-8b", 32_768, 8_192),
    ModelInfo::chat("gpt-oss-120b", 131_072, 40_960),
    ModelInfo::chat("qwen-3-32b", 65_536, 16_382),
    ModelInfo::chat("qwen-3-235b", 131_072, 40_960),
    ModelInfo::chat("zai-glm", 131_072, 40_960),
];

fn error_hook(status: Option<u16>, body: &ErrorBody) -> Option<ErrorKind> {
    let m = body.message_or_empty().to_ascii_lowercase();
    match status {
        Some(429) if m.contains("per day") => Some(ErrorKind::QuotaExhausted),
        Some(429) if m.contains("per minute") || m.contains("per hour") => {
            Some(ErrorKind::RateLimited)
        }
        _ => None,
    }
}

/// Cerebras: `https://api.cerebras.ai/v1`, key from `CEREBRAS_API_KEY`.
pub fn cerebras() -> Preset {
    Preset::new("cerebras", "https://api.cerebras.ai/v1")
        .with_key_env("CEREBRAS_API_KEY")
        .with_base_url_env("CEREBRAS_BASE_URL")
        .with_region("us")
        .with_json_schema(true)
        .with_models(MODELS, ModelInfo::chat("", 32_768, 8_192))
        .with_error_hook(error_hook)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compat::preset_table::assert_kinds;

    #[test]
    fn cerebras_error_rows() {
        let p = cerebras();
        let body = |m: &str| {
            format!(
                r#"{{"message":"{m}","type":"too_many_requests_error","param":"quota","code":"token_quota_exceeded"}}"#
            )
        };
        assert_kinds(
            &p,
            &[
                (
                    429,
                    &body("Tokens per minute limit exceeded - too many tokens processed."),
                    ErrorKind::RateLimited,
                ),
                (
                    429,
                    &body("Tokens per day limit exceeded - too many tokens processed."),
                    ErrorKind::QuotaExhausted,
                ),
                (
                    402,
                    r#"{"message":"Payment required"}"#,
                    ErrorKind::QuotaExhausted,
                ),
            ],
        );
    }
}
