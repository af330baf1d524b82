//! The pieces of a request the adapters' tests build again and again — a user turn with an
//! image, the assistant calling the `weather` tool, the tool itself — shared by the unit tests
//! and (through `tests/support`) the integration tests.
#![allow(
    dead_code,
    reason = "each adapter's tests use some of these; a build with one vendor leaves the rest unused"
)]

use ripcord_core::{ImageSource, Message, ToolCall, ToolChoice, ToolSpec};
use serde_json::Value;

/// A user turn: `text` and a base64 image of `media_type`.
pub(crate) fn user_with_image(text: &str, media_type: &str, data: &str) -> Message {
    Message::user(text).with_image(ImageSource::Base64 {
        media_type: media_type.into(),
        data: data.into(),
    })
}

/// The assistant calling `weather` for `city`, under the call id `id`.
pub(crate) fn weather_call(id: &str, city: &str) -> Message {
    Message::assistant_tool_calls(vec![ToolCall::new(
        id,
        "weather",
        format!(r#"{{"city":"{city}"}}"#),
    )])
}

/// The `weather` tool: `description`, and `parameters` as its JSON schema.
pub(crate) fn weather_tool(description: &str, parameters: Value) -> ToolSpec {
    ToolSpec::new("weather", description, parameters)
}

/// The tool choice that forces `weather`.
pub(crate) fn force_weather() -> ToolChoice {
    ToolChoice::Tool {
        name: "weather".into(),
    }
}
