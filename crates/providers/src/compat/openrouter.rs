//! OpenRouter (<https://openrouter.ai/docs/api/reference/errors-and-debugging>).
//!
//! OpenAI's wire at `https://openrouter.ai/api/v1`, in front of many vendors. Errors are
//! `{"error":{"code": <HTTP status as a number>, "message", "metadata"}}`. The status is the
//! request's own only for a bad request or spent credits; once a model started, an upstream
//! failure arrives *in the body* (a 200, or an SSE `data:` event) with the status in `code` — the
//! shared rules read it from there. Rows of its own: **402** insufficient credits (spent money);
//! **403** "Your chosen model requires moderation and your input was flagged" (a policy refusal,
//! not a permission); **408** timed out; **502** the chosen model is down; **503** no provider
//! meets the routing requirements (the vendor side is unavailable — observed answers to that
//! condition come as a 404, a model this link cannot serve). A **429** "Rate limit exceeded:
//! free-models-per-day" is the day's free allowance spent: no wait of minutes brings it back, so
//! it is quota, not a rate limit. 408 and 429 may carry `Retry-After`.

use ripcord_core::ErrorKind;

use super::Preset;
use crate::error_body::ErrorBody;
use crate::models::ModelInfo;

fn error_hook(status: Option<u16>, body: &ErrorBody) -> Option<ErrorKind> {
    let m = body.message_or_empty().to_ascii_lowercase();
    let status = status.or_else(|| body.code.as_deref().and_then(|c| c.parse().ok()));
    match status {
        Some(403) if m.contains("moderation") || m.contains("flagged") => {
            Some(ErrorKind::ContentFiltered)
        }
        Some(402) => Some(ErrorKind::QuotaExhausted),
        Some(429) if m.contains("per-day") => Some(ErrorKind::QuotaExhausted),
        Some(503) => Some(ErrorKind::Overloaded),
        _ => None,
    }
}

/// OpenRouter: `https://openrouter.ai/api/v1`, key from `OPENROUTER_API_KEY`. Model ids name
/// the vendor (`anthropic/claude-sonnet-4.5`); the default row is a conservative 128k window.
pub fn openrouter() -> Preset {
    Preset::new("openrouter", "https://openrouter.ai/api/v1")
        .with_key_env("OPENROUTER_API_KEY")
        .with_base_url_env("OPENROUTER_BASE_URL")
        .with_json_schema(true)
        .with_models(&[], ModelInfo::chat("", 131_072, 16_384))
        .with_error_hook(error_hook)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compat::preset_table::assert_kinds;

    #[test]
    fn openrouter_error_rows() {
        let p = openrouter();
        assert_kinds(
            &p,
            &[
                (
                    403,
                    r#"{"error":{"code":403,"message":"Your chosen model requires moderation and your input was flagged","metadata":{"reasons":["harassment"],"flagged_input":"…","provider_name":"OpenAI","model_slug":"openai/gpt-4o"}}}"#,
                    ErrorKind::ContentFiltered,
                ),
                (
                    402,
                    r#"{"error":{"code":402,"message":"Insufficient credits. Add more using https://openrouter.ai/credits"}}"#,
                    ErrorKind::QuotaExhausted,
                ),
                (
                    503,
                    r#"{"error":{"code":503,"message":"No allowed providers are available for the selected model."}}"#,
                    ErrorKind::Overloaded,
                ),
                (
                    429,
                    r#"{"error":{"message":"Rate limit exceeded: free-models-per-day. Add 10 credits to unlock 1000 free model requests per day","code":429}}"#,
                    ErrorKind::QuotaExhausted,
                ),
                (
                    429,
                    r#"{"error":{"message":"Rate limit exceeded: free-models-per-min.","code":429}}"#,
                    ErrorKind::RateLimited,
                ),
            ],
        );
    }
}
