//! Mistral AI (<https://docs.mistral.ai/api/>), data processed in the EU.
//!
//! OpenAI's wire at `https://api.mistral.ai/v1`, with two quirks: `stream_options` is refused, so
//! streams are sent without `include_usage` (Mistral reports usage in the last chunk anyway); and
//! errors come in three shapes — `{"message":"Requests rate limit exceeded"}` from the edge,
//! `{"object":"error","message","type":"rate_limited","code":"1300"}` from the API, and
//! `{"detail":"Unauthorized"}` for a bad key. Mistral's `rate_limited` type and code `1300` are a
//! rate limit whatever the message says.

use ripcord_core::ErrorKind;

use super::Preset;
use crate::error_body::ErrorBody;
use crate::models::ModelInfo;

const MODELS: &[ModelInfo] = &[
    ModelInfo::chat("mistral-large", 131_072, 32_768),
    ModelInfo::new("mistral-medium", 131_072, 32_768).full(),
    ModelInfo::new("mistral-small", 131_072, 32_768).full(),
    ModelInfo::chat("magistral-medium", 40_960, 40_960),
    ModelInfo::chat("codestral", 262_144, 32_768),
    ModelInfo::chat("devstral", 131_072, 32_768),
    ModelInfo::new("pixtral-large", 131_072, 32_768).full(),
    ModelInfo::chat("ministral-8b", 131_072, 32_768),
];

fn error_hook(_status: Option<u16>, body: &ErrorBody) -> Option<ErrorKind> {
    let rate = body.error_type.as_deref() == Some("rate_limited")
        || body.code.as_deref() == Some("1300")
        || body
            .message_or_empty()
            .eq_ignore_ascii_case("requests rate limit exceeded");
    rate.then_some(ErrorKind::RateLimited)
}

/// Mistral: `https://api.mistral.ai/v1`, key from `MISTRAL_API_KEY`, data processed in the EU.
pub fn mistral() -> Preset {
    let mut p = Preset::new("mistral", "https://api.mistral.ai/v1")
        .with_key_env("MISTRAL_API_KEY")
        .with_base_url_env("MISTRAL_BASE_URL")
        .with_region("eu")
        .with_json_schema(true)
        .with_models(MODELS, ModelInfo::chat("", 32_768, 8_192))
        .with_error_hook(error_hook);
    p.stream_usage = false;
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compat::preset_table::assert_kinds;

    #[test]
    fn mistral_error_rows() {
        let p = mistral();
        assert!(!p.stream_usage);
        assert_kinds(
            &p,
            &[
                (
                    429,
                    r#"{"message":"Requests rate limit exceeded"}"#,
                    ErrorKind::RateLimited,
                ),
                (
                    429,
                    r#"{"object":"error","message":"Rate limit exceeded","type":"rate_limited","param":null,"code":"1300"}"#,
                    ErrorKind::RateLimited,
                ),
                (401, r#"{"detail":"Unauthorized"}"#, ErrorKind::Auth),
            ],
        );
    }
}
