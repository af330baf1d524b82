//! Groq (<https://console.groq.com/docs/errors>, <https://console.groq.com/docs/rate-limits>).
//!
//! OpenAI's wire at `https://api.groq.com/openai/v1`. Errors are OpenAI-shaped
//! (`{"error":{"message","type","code"}}`); a rate limit says which limit and when to come
//! back ("Please try again in 8.77s", with `retry-after` and `x-ratelimit-*` headers). Groq's own
//! status: **498** — the flex tier has no capacity right now (`capacity_exceeded`), the vendor's
//! load, not the caller's fault.

use ripcord_core::ErrorKind;

use super::Preset;
use crate::error_body::ErrorBody;
use crate::models::ModelInfo;

const MODELS: &[ModelInfo] = &[
    ModelInfo::chat("llama-3.3-70b-versatile", 131_072, 32_768),
    ModelInfo::chat("llama-3.1-8b-instant", 131_072, 131_072),
    ModelInfo::new("meta-llama/llama-4-scout", 131_072, 8_192).full(),
    ModelInfo::new("meta-llama/llama-4-maverick", 131_072, 8_192).full(),
    ModelInfo::chat("openai/gpt-oss-120b", 131_072, 65_536),
    ModelInfo::chat("openai/gpt-oss-20b", 131_072, 65_536),
    ModelInfo::chat("qwen/qwen3-32b", 131_072, 40_960),
    ModelInfo::chat("moonshotai/kimi-k2-instruct", 131_072, 16_384),
];

fn error_hook(status: Option<u16>, body: &ErrorBody) -> Option<ErrorKind> {
    let capacity = body.code.as_deref() == Some("capacity_exceeded")
        || body.error_type.as_deref() == Some("capacity_exceeded");
    (status == Some(498) || capacity).then_some(ErrorKind::Overloaded)
}

/// Groq: `https://api.groq.com/openai/v1`, key from `GROQ_API_KEY`, data processed in the US.
pub fn groq() -> Preset {
    Preset::new("groq", "https://api.groq.com/openai/v1")
        .with_key_env("GROQ_API_KEY")
        .with_base_url_env("GROQ_BASE_URL")
        .with_region("us")
        .with_models(MODELS, ModelInfo::chat("", 131_072, 8_192))
        .with_error_hook(error_hook)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compat::preset_table::assert_kinds;

    #[test]
    fn groq_error_rows() {
        let p = groq();
        let body = r#"{"error":{"message":"Flex tier capacity exceeded. This is a transient error, please try again later.","type":"invalid_request_error","code":"capacity_exceeded"}}"#;
        assert_kinds(
            &p,
            &[
                (498, body, ErrorKind::Overloaded),
                (
                    401,
                    r#"{"error":{"message":"Invalid API Key","type":"invalid_request_error","code":"invalid_api_key"}}"#,
                    ErrorKind::Auth,
                ),
            ],
        );
    }
}
