//! OpenAI's Responses API (`POST /v1/responses`) as serde types, used in both directions: the
//! gateway's `/v1/responses` door deserializes [`CreateResponse`] and serializes [`Response`]
//! and [`StreamEvent`]s; the Responses upstream adapter serializes [`CreateResponse`] and
//! deserializes the other two. One set of types, so the two sides cannot drift.
//!
//! API reference: <https://platform.openai.com/docs/api-reference/responses/create>,
//! streaming events: <https://platform.openai.com/docs/api-reference/responses-streaming>.
//! The shapes follow the generated types of the official SDK (`openai-python`,
//! `src/openai/types/responses/`) and the OpenAPI description (`openai/openai-openapi`).
//!
//! ## Conventions
//!
//! - **Null is absent.** Every optional field accepts an explicit JSON `null` as if it were
//!   missing (`Option<T>`, or a default for lists, maps and flags), because clients send both.
//! - **Unknown fields are accepted** and dropped; a request field the gateway must act on has a
//!   field here (e.g. [`CreateResponse::conversation`], [`CreateResponse::prompt`]) so the
//!   gateway can refuse it by name instead of ignoring it.
//! - **Unknown tags are kept, not refused**: an input item, content part, output item, tool,
//!   text format or stream event whose `type` this module does not model parses as an `Other`
//!   variant holding the JSON object (its `type_name()` says which), so a newer vendor does not
//!   break the adapter and the gateway can name what it refuses. A *known* tag with bad fields
//!   is an error naming the tag and the field (``function_call` item: missing field `call_id``).
//! - **A message item may omit `type`** (the SDKs send `{role, content}`), and an
//!   `item_reference` may omit it too (`{id}`).
//! - **Construction is plain struct literals.** Structs have public fields and implement
//!   `Default` where a default makes sense; build with `..Default::default()` so fields added
//!   later do not break callers. [`Response::default`] already says `object: "response"`,
//!   `parallel_tool_calls: true` and `tool_choice: "auto"`.

mod items;
mod request;
mod response;
mod stream;
#[cfg(test)]
mod tests;

pub use items::{
    ContentPart, FunctionCall, FunctionCallOutput, FunctionOutput, InputFile, InputImage,
    InputItem, InputMessage, InputText, ItemReference, ItemStatus, MessageContent, OutputContent,
    OutputItem, OutputMessage, OutputText, ReasoningContent, ReasoningItem, ReasoningText, Refusal,
    Role, SummaryPart, SummaryText,
};
pub use request::{
    AllowedTools, BuiltInTool, CreateResponse, FunctionChoice, FunctionTool, Input,
    JsonSchemaFormat, Reasoning, StreamOptions, TextConfig, TextFormat, Tool, ToolChoice,
    ToolChoiceMode,
};
pub use response::{
    IncompleteDetails, InputTokensDetails, OutputTokensDetails, Response, ResponseError,
    ResponseStatus, Usage,
};
pub use stream::{
    ContentPartEvent, ErrorEvent, ErrorEventDetail, FunctionCallArgumentsDeltaEvent,
    FunctionCallArgumentsDoneEvent, OutputItemEvent, ReasoningSummaryPartEvent,
    ReasoningSummaryTextDeltaEvent, ReasoningSummaryTextDoneEvent, RefusalDeltaEvent,
    RefusalDoneEvent, ResponseEvent, StreamEvent, TextDeltaEvent, TextDoneEvent,
};

/// Deserialization helpers shared by the submodules: null-as-default and tag dispatch.
mod de {
    use std::borrow::Cow;

    use serde::de::{self, DeserializeOwned, IgnoredAny};
    use serde::{Deserialize, Deserializer};
    use serde_json::value::RawValue;

    pub(super) use crate::openai::wire_de::null_default;

    /// `null` (or a missing field, with `#[serde(default = "yes")]`) is `true`.
    pub(super) fn null_true<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
        Ok(Option::<bool>::deserialize(d)?.unwrap_or(true))
    }

    /// The default of flags that are on unless said otherwise.
    pub(super) fn yes() -> bool {
        true
    }

    /// A Unix time in seconds; OpenAI sends an integer, its SDK types say float, so both are
    /// read (a fraction is dropped). `null` is 0.
    pub(super) fn timestamp<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Num {
            Int(u64),
            Float(f64),
        }
        Ok(match Option::<Num>::deserialize(d)? {
            None => 0,
            Some(Num::Int(n)) => n,
            Some(Num::Float(f)) if f.is_finite() && f >= 0.0 => f as u64,
            Some(Num::Float(f)) => {
                return Err(de::Error::custom(format!(
                    "invalid timestamp {f}, expected seconds since 1970"
                )));
            }
        })
    }

    /// A serde_json error's message without its " at line L column C" suffix (the position is
    /// relative to one object, not to the document the caller parsed).
    pub(super) fn message_of(e: &serde_json::Error) -> String {
        let s = e.to_string();
        let suffix = format!(" at line {} column {}", e.line(), e.column());
        match s.strip_suffix(&suffix) {
            Some(m) => m.to_owned(),
            None => s,
        }
    }

    #[derive(Deserialize)]
    struct Peek<'a> {
        #[serde(rename = "type", borrow, default)]
        ty: Option<Cow<'a, str>>,
        #[serde(default)]
        role: Option<IgnoredAny>,
        #[serde(default)]
        id: Option<IgnoredAny>,
    }

    /// One JSON object whose `type` tag has been read and whose body is kept raw, so the
    /// variant's own struct parses it once with exact error messages (serde's internally
    /// tagged enums lose both the field names and any fallback for unknown tags).
    pub(super) struct Tagged {
        tag: Option<String>,
        has_role: bool,
        has_id: bool,
        raw: Box<RawValue>,
    }

    impl Tagged {
        /// Reads one object; `what` names it in errors ("input item", "content part").
        pub(super) fn read<'de, D: Deserializer<'de>>(
            d: D,
            what: &'static str,
        ) -> Result<Tagged, D::Error> {
            Tagged::from_raw(Box::<RawValue>::deserialize(d)?, what)
        }

        /// Reads one object, or a string (returned as `Err`), for values that may be either.
        pub(super) fn read_or_str<'de, D: Deserializer<'de>>(
            d: D,
            what: &'static str,
        ) -> Result<Result<Tagged, String>, D::Error> {
            let raw = Box::<RawValue>::deserialize(d)?;
            if raw.get().trim_start().starts_with('"') {
                return serde_json::from_str(raw.get())
                    .map(Err)
                    .map_err(|e| de::Error::custom(format!("{what}: {}", message_of(&e))));
            }
            Tagged::from_raw(raw, what).map(Ok)
        }

        fn from_raw<E: de::Error>(raw: Box<RawValue>, what: &'static str) -> Result<Tagged, E> {
            if !raw.get().trim_start().starts_with('{') {
                return Err(E::custom(format!(
                    "{what}: expected an object with a `type`, found {}",
                    kind_of(raw.get())
                )));
            }
            let peek: Peek<'_> = serde_json::from_str(raw.get())
                .map_err(|e| E::custom(format!("{what}: {}", message_of(&e))))?;
            let tag = peek.ty.map(Cow::into_owned);
            let (has_role, has_id) = (peek.role.is_some(), peek.id.is_some());
            Ok(Tagged {
                tag,
                has_role,
                has_id,
                raw,
            })
        }

        /// The `type` tag, when there is one.
        pub(super) fn tag(&self) -> Option<&str> {
            self.tag.as_deref()
        }

        /// The object has a (non-null) `role`.
        pub(super) fn has_role(&self) -> bool {
            self.has_role
        }

        /// The object has a (non-null) `id`.
        pub(super) fn has_id(&self) -> bool {
            self.has_id
        }

        /// Parses the object as `T`; errors read "`{tag}` {what}: {serde's message}".
        pub(super) fn parse<T: DeserializeOwned, E: de::Error>(&self, what: &str) -> Result<T, E> {
            serde_json::from_str(self.raw.get()).map_err(|e| {
                let tag = self.tag.as_deref().unwrap_or("message");
                E::custom(format!("`{tag}` {what}: {}", message_of(&e)))
            })
        }

        /// The object as a JSON value (for the `Other` variants).
        pub(super) fn other<E: de::Error>(&self) -> Result<serde_json::Value, E> {
            serde_json::from_str(self.raw.get()).map_err(|e| E::custom(message_of(&e)))
        }

        /// The error for an object without a `type`.
        pub(super) fn untyped<E: de::Error>(what: &str) -> E {
            E::custom(format!("{what}: missing field `type`"))
        }
    }

    fn kind_of(raw: &str) -> &'static str {
        match raw.trim_start().as_bytes().first() {
            Some(b'[') => "an array",
            Some(b'"') => "a string",
            Some(b't' | b'f') => "a boolean",
            Some(b'n') => "null",
            _ => "a number",
        }
    }

    /// A string or a list of `T` (`input`, a message's `content`, a tool result's `output`),
    /// read without buffering.
    pub(super) enum TextOrList<T> {
        Text(String),
        List(Vec<T>),
    }

    impl<'de, T: Deserialize<'de>> Deserialize<'de> for TextOrList<T> {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V<T>(std::marker::PhantomData<T>);
            impl<'de, T: Deserialize<'de>> de::Visitor<'de> for V<T> {
                type Value = TextOrList<T>;

                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a string or an array")
                }

                fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                    Ok(TextOrList::Text(s.to_owned()))
                }

                fn visit_string<E: de::Error>(self, s: String) -> Result<Self::Value, E> {
                    Ok(TextOrList::Text(s))
                }

                fn visit_seq<A: de::SeqAccess<'de>>(
                    self,
                    mut seq: A,
                ) -> Result<Self::Value, A::Error> {
                    let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
                    while let Some(item) = seq.next_element()? {
                        out.push(item);
                    }
                    Ok(TextOrList::List(out))
                }
            }
            d.deserialize_any(V(std::marker::PhantomData))
        }
    }
}
