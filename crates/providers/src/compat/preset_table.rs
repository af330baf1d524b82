//! The presets' error tables, checked by their own tests.

use ::http::header::HeaderMap;
use ripcord_core::ErrorKind;

use super::Preset;

/// The kind a preset gives an answer.
fn kind_for(preset: &Preset, status: u16, body: &str) -> ErrorKind {
    crate::error_body::http_error(
        status,
        &HeaderMap::new(),
        body.as_bytes(),
        preset.error_hook,
    )
    .kind()
}

/// Asserts the kind each `(status, body, kind)` row gets from the preset's hook and the
/// shared rules.
pub(crate) fn assert_kinds(preset: &Preset, rows: &[(u16, &str, ErrorKind)]) {
    for &(status, body, kind) in rows {
        assert_eq!(kind_for(preset, status, body), kind, "{status} {body}");
    }
}
