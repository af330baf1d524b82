//! Deserialization helpers both OpenAI wire modules ([`super::chat_wire`] and
//! [`super::responses_wire`]) use.

use serde::{Deserialize, Deserializer};

/// `null` (or a missing field, with `#[serde(default)]`) is the type's default.
pub(super) fn null_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}
