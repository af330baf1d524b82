//! The conversation as alternating turns, as the Messages, Converse and Gemini wires want it:
//! system messages set apart, the rest merged so that no two turns in a row share a role.

use std::borrow::Cow;

use ripcord_core::{ChatRequest, ContentPart, Error, Message, Result, Role, ToolCall};
use serde_json::value::RawValue;

/// How one vendor wire names its turns and words its refusals.
pub(crate) struct TurnWire {
    /// The wire's name in the "needs at least one" error (`Anthropic`, `Gemini`, `Converse`).
    pub(crate) name: &'static str,
    /// The assistant's role on the wire (`assistant`, or Gemini's `model`).
    pub(crate) assistant: &'static str,
    /// Builds the wire's `InvalidRequest` error from its message.
    pub(crate) invalid: fn(String) -> Error,
}

/// One turn: a wire role and the parts of every message merged into it.
pub(crate) struct Turn<P> {
    /// `user` or [`TurnWire::assistant`].
    pub(crate) role: &'static str,
    /// The parts, in message order.
    pub(crate) parts: Vec<P>,
}

impl TurnWire {
    /// The turns of `req`: each non-system message becomes `parts(index, message)`; an empty
    /// result is skipped and a message of the previous turn's role joins that turn. System
    /// messages' texts go to `system` when given (anything but text there is refused), and are
    /// skipped when not (the caller builds its system prompt apart). A request without any
    /// turn is refused.
    pub(crate) fn turns<'a, P>(
        &self,
        req: &'a ChatRequest,
        mut system: Option<&mut Vec<&'a str>>,
        mut parts: impl FnMut(usize, &'a Message) -> Result<Vec<P>>,
    ) -> Result<Vec<Turn<P>>> {
        let mut turns: Vec<Turn<P>> = Vec::with_capacity(req.messages.len());
        for (i, m) in req.messages.iter().enumerate() {
            let role = match m.role {
                Role::System => {
                    if let Some(out) = system.as_deref_mut() {
                        self.system_texts(i, m, out)?;
                    }
                    continue;
                }
                Role::Assistant => self.assistant,
                _ => "user",
            };
            let p = parts(i, m)?;
            if p.is_empty() {
                continue;
            }
            match turns.last_mut() {
                Some(last) if last.role == role => last.parts.extend(p),
                _ => turns.push(Turn { role, parts: p }),
            }
        }
        if turns.is_empty() {
            return Err((self.invalid)(format!(
                "the request has no user or assistant message ({} needs at least one)",
                self.name
            )));
        }
        Ok(turns)
    }

    /// [`TurnWire::object_arguments`] of a call, named in errors by its id and name.
    #[cfg_attr(
        not(any(feature = "anthropic", feature = "bedrock")),
        allow(dead_code, reason = "Gemini names a call by its message")
    )]
    pub(crate) fn call_input<'a>(&self, call: &'a ToolCall) -> Result<&'a RawValue> {
        self.object_arguments(
            &call.arguments,
            format_args!("tool call {:?} ({})", call.id, call.name),
        )
    }

    /// The `tool_call_id` of tool-result message `i`, which these wires need.
    pub(crate) fn tool_result_id<'a>(&self, i: usize, m: &'a Message) -> Result<&'a str> {
        m.tool_call_id.as_deref().ok_or_else(|| {
            (self.invalid)(format!(
                "message {i}: a tool result needs the tool_call_id it answers"
            ))
        })
    }

    /// Pushes the non-empty texts of system message `i`; any other part is refused.
    fn system_texts<'a>(&self, i: usize, m: &'a Message, out: &mut Vec<&'a str>) -> Result<()> {
        for part in &m.content {
            match part {
                ContentPart::Text { text } if !text.is_empty() => out.push(text),
                ContentPart::Text { .. } => {}
                _ => {
                    return Err((self.invalid)(format!(
                        "message {i}: a system message can only hold text"
                    )));
                }
            }
        }
        Ok(())
    }

    /// The arguments of a tool call as the raw JSON object these wires carry (an empty string is
    /// `{}`). `call` names the call in errors (`tool call "id" (name)`); arguments that are not
    /// JSON, or JSON but no object, are refused.
    pub(crate) fn object_arguments<'a>(
        &self,
        args: &'a str,
        call: impl std::fmt::Display,
    ) -> Result<&'a RawValue> {
        let args = args.trim();
        let text = if args.is_empty() { "{}" } else { args };
        let raw: &RawValue = serde_json::from_str(text).map_err(|e| {
            (self.invalid)(format!("{call}: its arguments are not valid JSON: {e}"))
        })?;
        if raw.get().trim_start().starts_with('{') {
            return Ok(raw);
        }
        let name = self.name;
        Err((self.invalid)(format!(
            "{call}: {name} needs the arguments to be a JSON object"
        )))
    }
}

/// A tool result's text: its one text part as is, or all of its parts' text.
#[cfg_attr(
    not(any(feature = "anthropic", feature = "bedrock")),
    allow(dead_code, reason = "Gemini sends a tool result as a JSON object")
)]
pub(crate) fn tool_result_text(m: &Message) -> Cow<'_, str> {
    match m.content.as_slice() {
        [ContentPart::Text { text }] => Cow::Borrowed(text.as_str()),
        _ => Cow::Owned(m.text()),
    }
}
