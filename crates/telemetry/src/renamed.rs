//! The old names of renamed types, deprecated and kept for one release.
//!
//! Kept in this file so the rename script (which skips files named `renamed.rs`) can be
//! re-run over other branches without touching them.

/// The old name of [`SecretScrubber`](crate::SecretScrubber): it scrubs API keys and other
/// secrets; the personal-data redactor is `ripcord_resilience::PiiRedactor`.
#[deprecated(note = "renamed to `SecretScrubber`")]
pub type Redactor = crate::SecretScrubber;

#[cfg(test)]
mod tests {
    #![allow(deprecated)]

    use std::any::TypeId;

    /// Code written against the old name keeps compiling and means the same type.
    #[test]
    fn the_old_name_is_the_new_type() {
        assert_eq!(
            TypeId::of::<super::Redactor>(),
            TypeId::of::<crate::SecretScrubber>()
        );
    }
}
