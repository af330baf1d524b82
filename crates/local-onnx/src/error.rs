//! How local failures map to ripcord's error kinds.
//!
//! Everything that goes wrong while *loading* — a missing or unloadable ONNX Runtime library, a
//! missing or corrupt model file, a model whose inputs do not match its config — is
//! [`ErrorKind::ModelNotFound`] with a message that starts `local model unavailable:` and names
//! the path. Its disposition is "fall back, never retry": waiting will not make a file appear,
//! so a chain moves on to its next link at once.
//!
//! A failure while *running* a loaded model is one of two kinds, told apart by what ONNX
//! Runtime reports:
//!
//! - out of memory (an allocation failed: the KV cache, an activation, a kernel's scratch) is
//!   [`ErrorKind::Overloaded`] with a message starting `local model out of memory:` — the machine
//!   has no room right now, so the chain falls back rather than retrying into the same wall;
//! - any other runtime failure (a kernel error, a broken output) is [`ErrorKind::ServerError`]
//!   with a message starting `local model failed:` — the local equivalent of a vendor's 500, so
//!   the policies retry it and then fall back.
//!
//! A device the loaded library cannot run on (`device = "cuda"` with a CPU-only build) is refused
//! at load like the other load failures (`local model unavailable: device "cuda" …`, naming the
//! device and the library): no retry can give a library a provider it was not built with.

use std::fmt::Display;

use ripcord_core::{Error, ErrorKind};

/// The prefix of every load-time error message.
pub(crate) const UNAVAILABLE: &str = "local model unavailable";

/// The prefix of an out-of-memory failure.
pub(crate) const OUT_OF_MEMORY: &str = "local model out of memory";

/// A load-time failure: the model cannot be used at all.
pub(crate) fn unavailable(what: impl Display) -> Error {
    Error::new(ErrorKind::ModelNotFound, format!("{UNAVAILABLE}: {what}"))
}

/// A failure while running a loaded model.
pub(crate) fn runtime(what: impl Display) -> Error {
    Error::new(
        ErrorKind::ServerError,
        format!("local model failed: {what}"),
    )
}

/// An allocation that ONNX Runtime (or the KV cache) could not make.
pub(crate) fn out_of_memory(what: impl Display) -> Error {
    Error::new(ErrorKind::Overloaded, format!("{OUT_OF_MEMORY}: {what}"))
}

/// A failure reported by ONNX Runtime while running: out of memory when its message says an
/// allocation failed, else a runtime failure. `what` says which step failed.
pub(crate) fn from_ort(what: &str, e: &ort::Error) -> Error {
    let text = e.to_string();
    if is_out_of_memory(&text) {
        out_of_memory(format!("{what}: {text}"))
    } else {
        runtime(format!("{what}: {text}"))
    }
}

/// ONNX Runtime's allocators report a failed allocation as `Failed to allocate memory`
/// (BFCArena and the CPU allocator), `bad allocation` / `std::bad_alloc` (a C++ `new` that threw)
/// or, for CUDA, `CUDA failure 2: out of memory` / `CUDNN_STATUS_ALLOC_FAILED`.
fn is_out_of_memory(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    [
        "failed to allocate memory",
        "bad_alloc",
        "bad allocation",
        "out of memory",
        "alloc_failed",
    ]
    .iter()
    .any(|needle| t.contains(needle))
}

/// A request this model cannot serve (tools, images, a malformed conversation).
pub(crate) fn invalid_request(what: impl Display) -> Error {
    Error::new(ErrorKind::InvalidRequest, what.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_failures_are_out_of_memory_and_the_rest_runtime_failures() {
        for text in [
            "Non-zero status code returned while running MatMulNBits node. Name:'n_1' Status Message: Failed to allocate memory for requested buffer of size 4294967296",
            "std::bad_alloc",
            "bad allocation",
            "CUDA failure 2: out of memory ; GPU=0",
            "CUDNN_STATUS_ALLOC_FAILED",
        ] {
            let e = from_ort("inference failed", &ort::Error::new(text));
            assert_eq!(e.kind(), ErrorKind::Overloaded, "{text}");
            assert!(
                e.message()
                    .starts_with("local model out of memory: inference failed: "),
                "{e}"
            );
            assert!(e.message().contains(text), "{e}");
        }
        let text = "Non-zero status code returned while running GroupQueryAttention node: seqlens_k out of range";
        let e = from_ort("inference failed", &ort::Error::new(text));
        assert_eq!(e.kind(), ErrorKind::ServerError);
        assert!(
            e.message()
                .starts_with("local model failed: inference failed: "),
            "{e}"
        );
        // The kinds' dispositions are what the module docs promise.
        assert_eq!(
            out_of_memory("x").disposition(),
            ripcord_core::Disposition::Fallback
        );
        assert!(matches!(
            runtime("x").disposition(),
            ripcord_core::Disposition::Retry { .. }
        ));
    }
}
