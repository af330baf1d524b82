//! The request body of `POST /v1/responses` and its parts: input, tools, tool choice, text
//! format, reasoning.

use std::collections::BTreeMap;

use serde::de::{self, Deserializer};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::de::{Tagged, TextOrList, null_default};
use super::items::{InputItem, type_of};

/// The body of `POST /v1/responses`
/// (<https://platform.openai.com/docs/api-reference/responses/create>).
///
/// Every field is optional and `null` counts as absent; fields this module does not list are
/// accepted and dropped. Fields the gateway cannot honour but must not ignore silently
/// (`conversation`, `prompt`, …) are kept as JSON.
///
/// # Examples
///
/// ```
/// use ripcord_providers::openai_responses_wire::{CreateResponse, Input};
/// let req: CreateResponse = serde_json::from_str(
///     r#"{"model":"gpt-4.1","input":"Tell me a joke","temperature":null,"tools":null}"#,
/// )?;
/// assert_eq!(req.model.as_deref(), Some("gpt-4.1"));
/// assert!(matches!(req.input, Some(Input::Text(_))));
/// assert!(req.temperature.is_none() && req.tools.is_empty());
///
/// let out = CreateResponse { model: Some("gpt-4.1".into()), store: Some(false), ..Default::default() };
/// assert_eq!(serde_json::to_string(&out)?, r#"{"model":"gpt-4.1","store":false}"#);
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CreateResponse {
    /// The model (the gateway's route name on the way in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// A string (one user message) or a list of items.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Input>,
    /// A system (developer) message put before the input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Function tools and built-in tools.
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub tools: Vec<Tool>,
    /// How the model picks tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// Whether the model may call several tools at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    /// The output format (`text.format`) and verbosity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<TextConfig>,
    /// The output cap, reasoning tokens included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Reasoning effort and summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<Reasoning>,
    /// Up to 16 string pairs kept with the response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<BTreeMap<String, String>>,
    /// An end-user id (deprecated by OpenAI for `safety_identifier` / `prompt_cache_key`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Whether the server keeps the response (OpenAI's default: `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<bool>,
    /// Answer as a stream of server-sent events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    /// Continue the conversation of a stored response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_response_id: Option<String>,
    /// Extra output to include (`reasoning.encrypted_content`, …).
    #[serde(
        default,
        deserialize_with = "null_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub include: Vec<String>,
    /// `auto` or `disabled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncation: Option<String>,
    /// `auto`, `default`, `flex`, `priority`, ….
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_tier: Option<String>,
    /// A key that groups requests for prompt caching.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_cache_key: Option<String>,
    /// A stable, hashed end-user id for abuse detection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safety_identifier: Option<String>,
    /// Log probabilities of this many top tokens (0–20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_logprobs: Option<u32>,
    /// A cap on built-in tool calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tool_calls: Option<u64>,
    /// Run in the background (poll for the result).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub background: Option<bool>,
    /// Streaming options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    /// A server-side conversation to continue (kept as JSON: an id or `{id}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<Value>,
    /// A stored prompt template (kept as JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<Value>,
    /// Context management (compaction) entries (kept as JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_management: Option<Value>,
    /// Moderation settings (kept as JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moderation: Option<Value>,
    /// `in_memory` or `24h` (deprecated by OpenAI for `prompt_cache_options`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_cache_retention: Option<String>,
    /// Prompt caching options (kept as JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_cache_options: Option<Value>,
}

/// A request's `input`: one user message as a string, or a list of items.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Input {
    /// A single user message.
    Text(String),
    /// Messages, function calls and their results, reasoning items, references.
    Items(Vec<InputItem>),
}

impl<'de> Deserialize<'de> for Input {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match TextOrList::deserialize(d)? {
            TextOrList::Text(t) => Input::Text(t),
            TextOrList::List(i) => Input::Items(i),
        })
    }
}

/// Streaming options.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct StreamOptions {
    /// Pad delta events with random `obfuscation` text against side channels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_obfuscation: Option<bool>,
}

/// Reasoning settings (reasoning models only).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Reasoning {
    /// `none`, `minimal`, `low`, `medium`, `high`, `xhigh`, ….
    #[serde(default)]
    pub effort: Option<String>,
    /// `auto`, `concise` or `detailed`.
    #[serde(default)]
    pub summary: Option<String>,
}

/// The `text` settings: output format and verbosity.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TextConfig {
    /// The output format (plain text when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<TextFormat>,
    /// `low`, `medium` or `high`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verbosity: Option<String>,
}

/// `text.format`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum TextFormat {
    /// Plain text.
    Text,
    /// Any JSON object (the older JSON mode).
    JsonObject,
    /// JSON that follows a schema (Structured Outputs).
    JsonSchema(JsonSchemaFormat),
    /// Any other format, kept as JSON.
    #[serde(untagged)]
    Other(Value),
}

impl TextFormat {
    /// The format's `type`.
    pub fn type_name(&self) -> &str {
        match self {
            TextFormat::Text => "text",
            TextFormat::JsonObject => "json_object",
            TextFormat::JsonSchema(_) => "json_schema",
            TextFormat::Other(v) => type_of(v),
        }
    }
}

impl<'de> Deserialize<'de> for TextFormat {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let t = Tagged::read(d, "text format")?;
        match t.tag() {
            Some("text") => Ok(TextFormat::Text),
            Some("json_object") => Ok(TextFormat::JsonObject),
            Some("json_schema") => t.parse("format").map(TextFormat::JsonSchema),
            None => Err(Tagged::untyped("text format")),
            Some(_) => t.other().map(TextFormat::Other),
        }
    }
}

/// A `json_schema` text format. Unlike Chat Completions, the fields sit beside `type`, not
/// inside a `json_schema` object.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct JsonSchemaFormat {
    /// The format's name (`a-z`, `A-Z`, `0-9`, `_`, `-`; at most 64).
    pub name: String,
    /// The JSON Schema.
    #[serde(default)]
    pub schema: Value,
    /// What the format is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Strict schema adherence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

/// One entry of `tools`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Tool {
    /// A function the caller runs.
    Function(FunctionTool),
    /// Any other tool type: OpenAI's built-in tools (`web_search`, `web_search_preview`,
    /// `file_search`, `computer_use_preview`, `computer`, `code_interpreter`,
    /// `image_generation`, `mcp`, `local_shell`, `shell`, `apply_patch`, …) and free-form
    /// `custom` tools; kept as JSON so it can be forwarded or refused by name.
    BuiltIn(BuiltInTool),
}

impl Tool {
    /// The tool's `type`.
    pub fn type_name(&self) -> &str {
        match self {
            Tool::Function(_) => "function",
            Tool::BuiltIn(b) => &b.kind,
        }
    }
}

impl Serialize for Tool {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Tool::Function(f) => {
                let mut m = s.serialize_map(None)?;
                m.serialize_entry("type", "function")?;
                m.serialize_entry("name", &f.name)?;
                if let Some(d) = &f.description {
                    m.serialize_entry("description", d)?;
                }
                if let Some(p) = &f.parameters {
                    m.serialize_entry("parameters", p)?;
                }
                if let Some(st) = &f.strict {
                    m.serialize_entry("strict", st)?;
                }
                m.end()
            }
            Tool::BuiltIn(b) => b.config.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Tool {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let t = Tagged::read(d, "tool")?;
        match t.tag() {
            Some("function") => t.parse("tool").map(Tool::Function),
            None => Err(Tagged::untyped("tool")),
            Some(kind) => Ok(Tool::BuiltIn(BuiltInTool {
                kind: kind.to_owned(),
                config: t.other()?,
            })),
        }
    }
}

/// A function tool. Note: the Responses API treats a function without `strict` as strict
/// (every property required, no additional properties); send `strict: false` for a schema that
/// is not written for strict mode.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FunctionTool {
    /// The function's name.
    pub name: String,
    /// What the function does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The arguments' JSON Schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    /// Strict schema adherence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

/// A tool that is not a function tool, as it was sent.
#[derive(Debug, Clone, PartialEq)]
pub struct BuiltInTool {
    /// The tool's `type` (`web_search_preview`, `file_search`, `mcp`, `custom`, …).
    pub kind: String,
    /// The whole tool object, `type` included (serialized as it is).
    pub config: Value,
}

impl BuiltInTool {
    /// A human name for the tool type, for error messages ("web search" for `web_search`,
    /// `web_search_preview` and their dated variants); the raw `type` when unknown.
    ///
    /// # Examples
    ///
    /// ```
    /// use ripcord_providers::openai_responses_wire::{Tool, BuiltInTool};
    /// let t: Tool = serde_json::from_str(r#"{"type":"web_search_preview_2025_03_11"}"#)?;
    /// let Tool::BuiltIn(b) = t else { panic!("built-in") };
    /// assert_eq!(b.description(), "web search");
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn description(&self) -> &str {
        let k = self.kind.as_str();
        match k {
            _ if k.starts_with("web_search") => "web search",
            "file_search" => "file search",
            _ if k.starts_with("computer") => "computer use",
            "code_interpreter" => "code interpreter",
            "image_generation" => "image generation",
            "mcp" => "remote MCP",
            "local_shell" | "shell" => "shell",
            "apply_patch" => "apply patch",
            "custom" => "custom (free-form) tool",
            _ => k,
        }
    }
}

/// `tool_choice`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ToolChoice {
    /// `"auto"`, `"none"` or `"required"`.
    Mode(ToolChoiceMode),
    /// `{"type": "function", "name": …}`: call this function.
    Function(FunctionChoice),
    /// `{"type": "allowed_tools", "mode": …, "tools": […]}`: pick among these.
    AllowedTools(AllowedTools),
    /// Any other typed choice (a built-in tool, `mcp`, `custom`, …), kept as JSON.
    Other(Value),
}

impl ToolChoice {
    /// The choice's `type` (the mode's name for a mode).
    pub fn type_name(&self) -> &str {
        match self {
            ToolChoice::Mode(m) => m.as_str(),
            ToolChoice::Function(_) => "function",
            ToolChoice::AllowedTools(_) => "allowed_tools",
            ToolChoice::Other(v) => type_of(v),
        }
    }
}

impl Default for ToolChoice {
    fn default() -> Self {
        ToolChoice::Mode(ToolChoiceMode::Auto)
    }
}

/// A `tool_choice` given as a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ToolChoiceMode {
    /// The model decides.
    #[default]
    Auto,
    /// No tool calls.
    None,
    /// At least one tool call.
    Required,
}

impl ToolChoiceMode {
    /// `auto`, `none` or `required`.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolChoiceMode::Auto => "auto",
            ToolChoiceMode::None => "none",
            ToolChoiceMode::Required => "required",
        }
    }
}

/// `{"type": "function", "name": …}`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FunctionChoice {
    /// The function to call.
    pub name: String,
}

/// `{"type": "allowed_tools", …}`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AllowedTools {
    /// `auto` or `required`.
    pub mode: ToolChoiceMode,
    /// The allowed tools (`{"type": "function", "name": …}` and the like).
    #[serde(default, deserialize_with = "null_default")]
    pub tools: Vec<Value>,
}

impl Serialize for ToolChoice {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ToolChoice::Mode(m) => s.serialize_str(m.as_str()),
            ToolChoice::Function(f) => {
                let mut m = s.serialize_map(Some(2))?;
                m.serialize_entry("type", "function")?;
                m.serialize_entry("name", &f.name)?;
                m.end()
            }
            ToolChoice::AllowedTools(a) => {
                let mut m = s.serialize_map(Some(3))?;
                m.serialize_entry("type", "allowed_tools")?;
                m.serialize_entry("mode", &a.mode)?;
                m.serialize_entry("tools", &a.tools)?;
                m.end()
            }
            ToolChoice::Other(v) => v.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for ToolChoice {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let t = Tagged::read_or_str(d, "tool_choice")?;
        let t = match t {
            Ok(t) => t,
            Err(mode) => {
                return match mode.as_str() {
                    "auto" => Ok(ToolChoice::Mode(ToolChoiceMode::Auto)),
                    "none" => Ok(ToolChoice::Mode(ToolChoiceMode::None)),
                    "required" => Ok(ToolChoice::Mode(ToolChoiceMode::Required)),
                    other => Err(de::Error::custom(format!(
                        "tool_choice: unknown value `{other}`, expected `auto`, `none`, \
                         `required` or an object"
                    ))),
                };
            }
        };
        match t.tag() {
            Some("function") => t.parse("tool_choice").map(ToolChoice::Function),
            Some("allowed_tools") => t.parse("tool_choice").map(ToolChoice::AllowedTools),
            None => Err(Tagged::untyped("tool_choice")),
            Some(_) => t.other().map(ToolChoice::Other),
        }
    }
}
