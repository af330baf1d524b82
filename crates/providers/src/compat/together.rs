//! Together AI (<https://docs.together.ai/docs/error-codes>).
//!
//! OpenAI's wire at `https://api.together.xyz/v1`. Its error table has two surprises the
//! shared rules already read right from the body: a **403** for a prompt plus `max_tokens` longer
//! than the model's context ("Input token count + max_tokens parameter must be less than the
//! context length …": a context overflow, not a permission) and **402** for a reached monthly
//! spending limit. **503** is "Engine Overloaded".

use ripcord_core::ErrorKind;

use super::Preset;
use crate::error_body::ErrorBody;
use crate::models::ModelInfo;

const MODELS: &[ModelInfo] = &[
    ModelInfo::chat("meta-llama/Llama-3.3-70B-Instruct-Turbo", 131_072, 8_192),
    ModelInfo::new("meta-llama/Llama-4-Maverick", 1_048_576, 8_192).full(),
    ModelInfo::chat("deepseek-ai/DeepSeek-V3", 131_072, 8_192),
    ModelInfo::new("deepseek-ai/DeepSeek-R1", 163_840, 32_768).json(),
    ModelInfo::chat("Qwen/Qwen2.5-72B-Instruct-Turbo", 32_768, 8_192),
    ModelInfo::chat("openai/gpt-oss-120b", 131_072, 32_768),
];

fn error_hook(status: Option<u16>, body: &ErrorBody) -> Option<ErrorKind> {
    match status {
        // Together's 403 is its context overflow: "`inputs` tokens + `max_new_tokens` must be
        // <= N" names no context in words.
        Some(403)
            if body.is_context_length() || body.message_or_empty().contains("max_new_tokens") =>
        {
            Some(ErrorKind::ContextLengthExceeded)
        }
        Some(402) => Some(ErrorKind::QuotaExhausted),
        _ => None,
    }
}

/// Together: `https://api.together.xyz/v1`, key from `TOGETHER_API_KEY`.
pub fn together() -> Preset {
    Preset::new("together", "https://api.together.xyz/v1")
        .with_key_env("TOGETHER_API_KEY")
        .with_base_url_env("TOGETHER_BASE_URL")
        .with_region("us")
        .with_json_schema(true)
        .with_models(MODELS, ModelInfo::chat("", 32_768, 4_096))
        .with_error_hook(error_hook)
}
