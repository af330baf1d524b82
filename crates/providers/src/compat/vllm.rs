//! vLLM's OpenAI-compatible server (<https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html>).
//!
//! There is no default host: the base URL is required (`VLLM_BASE_URL` for `from_env`), and
//! the key is optional (`--api-key` on the server, `VLLM_API_KEY` here). On this machine the
//! link is local and free. vLLM's errors put the fields at the top level,
//! `{"object":"error","message","type":"BadRequestError","code":400}`: `NotFoundError` is an
//! unknown model, "maximum context length" a context overflow; tool calling needs server flags
//! (`--enable-auto-tool-choice`), so the default row has no tools.
//!
//! Assistant prefill is vLLM's `continue_final_message: true` with
//! `add_generation_prompt: false` (its chat-completion extra parameters): the chat template
//! leaves the final assistant message open and the model writes on.

use ripcord_core::ErrorKind;

use super::Preset;
use crate::error_body::ErrorBody;
use crate::models::ModelInfo;
use crate::openai::AssistantPrefill;

fn error_hook(_status: Option<u16>, body: &ErrorBody) -> Option<ErrorKind> {
    match body.error_type.as_deref()? {
        "NotFoundError" => Some(ErrorKind::ModelNotFound),
        "ServiceUnavailableError" => Some(ErrorKind::Overloaded),
        "InternalServerError" => Some(ErrorKind::ServerError),
        _ => None,
    }
}

/// vLLM: base URL required, key optional.
pub fn vllm() -> Preset {
    let mut p = Preset::new("vllm", "")
        .with_key_env("VLLM_API_KEY")
        .with_base_url_env("VLLM_BASE_URL")
        .key_optional()
        .local_on_loopback()
        .with_json_schema(true)
        .with_models(&[], ModelInfo::new("", 8_192, 4_096).json())
        .with_error_hook(error_hook)
        .with_prefill(AssistantPrefill::ContinueFinalMessage);
    p.base_url = None;
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compat::{OpenAiCompatible, preset_table::assert_kinds};

    #[test]
    fn vllm_needs_a_base_url_and_maps_its_errors() {
        let e =
            OpenAiCompatible::new(vllm(), "meta-llama/Llama-3.1-8B-Instruct", None).unwrap_err();
        assert!(
            e.message()
                .contains("base URL is required (or set VLLM_BASE_URL)"),
            "{e}"
        );
        let p = vllm();
        assert_kinds(
            &p,
            &[
                (
                    404,
                    r#"{"object":"error","message":"The model `x` does not exist.","type":"NotFoundError","param":null,"code":404}"#,
                    ErrorKind::ModelNotFound,
                ),
                (
                    400,
                    r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens","type":"BadRequestError","param":null,"code":400}"#,
                    ErrorKind::ContextLengthExceeded,
                ),
                (
                    400,
                    r#"{"object":"error","message":"bad top_p","type":"BadRequestError","param":null,"code":400}"#,
                    ErrorKind::InvalidRequest,
                ),
            ],
        );
    }
}
