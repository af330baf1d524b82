//! Ollama's OpenAI-compatible endpoint (<https://github.com/ollama/ollama/blob/main/docs/openai.md>).
//!
//! A local server: no key, free, and `Locality::Local` when the base URL is on this machine
//! (so local-only requests may use it). Ollama's errors are plain messages: `model "x" not
//! found, try pulling it first` (404), "model requires more system memory" (the server cannot
//! load the model now: overloaded, try another link), "server busy, please try again" /
//! "maximum pending requests exceeded" (503, its queue is full). The context window defaults
//! to Ollama's own default (`num_ctx` 4096): Ollama truncates longer prompts silently, so the
//! chain's window check is the only guard — raise it with `with_capabilities` when you raise
//! `num_ctx`.

use ripcord_core::ErrorKind;

use super::Preset;
use crate::error_body::ErrorBody;
use crate::models::ModelInfo;

fn error_hook(_status: Option<u16>, body: &ErrorBody) -> Option<ErrorKind> {
    let m = body.message_or_empty().to_ascii_lowercase();
    if m.contains("try pulling it first") || (m.contains("model") && m.contains("not found")) {
        Some(ErrorKind::ModelNotFound)
    } else if m.contains("requires more system memory")
        || m.contains("server busy")
        || m.contains("maximum pending requests")
    {
        Some(ErrorKind::Overloaded)
    } else {
        None
    }
}

/// Ollama: `http://localhost:11434/v1`, no key.
pub fn ollama() -> Preset {
    Preset::new("ollama", "http://localhost:11434/v1")
        .with_base_url_env("OLLAMA_BASE_URL")
        .key_optional()
        .local_on_loopback()
        .with_json_schema(true)
        .with_models(&[], ModelInfo::chat("", 4_096, 4_096))
        .with_error_hook(error_hook)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compat::preset_table::assert_kinds;

    #[test]
    fn ollama_messages() {
        let p = ollama();
        let body = |m: &str| {
            format!(
                r#"{{"error":{{"message":"{m}","type":"api_error","param":null,"code":null}}}}"#
            )
        };
        assert_kinds(
            &p,
            &[
                (
                    404,
                    &body("model \\\"llama9\\\" not found, try pulling it first"),
                    ErrorKind::ModelNotFound,
                ),
                (
                    500,
                    &body("model requires more system memory (12 GiB) than is available (4 GiB)"),
                    ErrorKind::Overloaded,
                ),
                (
                    503,
                    r#"{"error":"server busy, please try again.  maximum pending requests exceeded"}"#,
                    ErrorKind::Overloaded,
                ),
                (
                    500,
                    &body("llama runner process has terminated"),
                    ErrorKind::ServerError,
                ),
            ],
        );
    }
}
