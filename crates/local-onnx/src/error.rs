//! How local failures map to ripcord's error kinds.
//!
//! Everything that goes wrong while *loading* — a missing or unloadable ONNX Runtime library, a
//! missing or corrupt model file, a model whose inputs do not match its config — is
//! [`ErrorKind::ModelNotFound`] with a message that starts `local model unavailable:` and names
//! the path. Its disposition is "fall back, never retry": waiting will not make a file appear,
//! so a chain moves on to its next link at once. A failure while *running* a loaded model is
//! [`ErrorKind::InvalidResponse`] (retry, then fall back), like a vendor's broken answer.

use std::fmt::Display;

use ripcord_core::{Error, ErrorKind};

/// The prefix of every load-time error message.
pub(crate) const UNAVAILABLE: &str = "local model unavailable";

/// A load-time failure: the model cannot be used at all.
pub(crate) fn unavailable(what: impl Display) -> Error {
    Error::new(ErrorKind::ModelNotFound, format!("{UNAVAILABLE}: {what}"))
}

/// A failure while running a loaded model.
pub(crate) fn runtime(what: impl Display) -> Error {
    Error::new(
        ErrorKind::InvalidResponse,
        format!("local model failed: {what}"),
    )
}

/// A request this model cannot serve (tools, images, a malformed conversation).
pub(crate) fn invalid_request(what: impl Display) -> Error {
    Error::new(ErrorKind::InvalidRequest, what.to_string())
}
