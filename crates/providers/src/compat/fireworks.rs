//! Fireworks AI (<https://docs.fireworks.ai/guides/inference-error-codes>).
//!
//! OpenAI's wire at `https://api.fireworks.ai/inference/v1`; model ids are paths
//! (`accounts/fireworks/models/llama-v3p3-70b-instruct`). Its error table differs from OpenAI's in
//! three rows: **403** is an authentication problem ("Verify you have the correct API key"), **412**
//! Precondition Failed is a suspended account or a missing payment method (spent money: another
//! link, not a retry), and **404** covers a model that exists but is not deployed. Its **429**
//! says "You have exceeded your usage limits. Please try again later …": words the shared rules
//! read as spent money, but Fireworks answers a spent account with 402 or 412 — at 429 it is the
//! rate limit, and waiting is the answer.

use ripcord_core::ErrorKind;

use super::Preset;
use crate::error_body::ErrorBody;
use crate::models::ModelInfo;

const MODELS: &[ModelInfo] = &[
    ModelInfo::chat(
        "accounts/fireworks/models/llama-v3p3-70b-instruct",
        131_072,
        16_384,
    ),
    ModelInfo::new(
        "accounts/fireworks/models/llama4-maverick",
        1_048_576,
        16_384,
    )
    .full(),
    ModelInfo::chat("accounts/fireworks/models/deepseek-v3", 163_840, 16_384),
    ModelInfo::chat("accounts/fireworks/models/qwen3-235b", 131_072, 16_384),
    ModelInfo::chat("accounts/fireworks/models/gpt-oss-120b", 131_072, 32_768),
];

fn error_hook(status: Option<u16>, body: &ErrorBody) -> Option<ErrorKind> {
    match status {
        Some(412) => Some(ErrorKind::QuotaExhausted),
        Some(429) => Some(ErrorKind::RateLimited),
        Some(403) if !body.is_region() && !body.is_content_filter() => Some(ErrorKind::Auth),
        _ => None,
    }
}

/// Fireworks: `https://api.fireworks.ai/inference/v1`, key from `FIREWORKS_API_KEY`.
pub fn fireworks() -> Preset {
    Preset::new("fireworks", "https://api.fireworks.ai/inference/v1")
        .with_key_env("FIREWORKS_API_KEY")
        .with_base_url_env("FIREWORKS_BASE_URL")
        .with_region("us")
        .with_json_schema(true)
        .with_models(MODELS, ModelInfo::chat("", 32_768, 4_096))
        .with_error_hook(error_hook)
}
