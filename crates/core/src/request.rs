//! The vendor-neutral chat request.
//!
//! Callers describe *what* they want once; adapters translate it to each wire format
//! (Anthropic's separate system prompt and strict role alternation, a local chat template, …).

use serde::{Deserialize, Serialize};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Role {
    /// Instructions for the model.
    System,
    /// The end user.
    User,
    /// The model.
    Assistant,
    /// The result of a tool call, sent back to the model.
    Tool,
}

impl Role {
    /// The lowercase wire name shared by most vendors (`system`, `user`, `assistant`, `tool`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// An image given to a vision model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "source", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ImageSource {
    /// An `https:` URL the vendor fetches itself.
    Url {
        /// The URL.
        url: String,
    },
    /// Inline bytes, base64-encoded.
    Base64 {
        /// The media type, e.g. `image/png`.
        media_type: String,
        /// The base64 data (no `data:` prefix).
        data: String,
    },
}

/// One part of a message's content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ContentPart {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// An image.
    Image {
        /// Where the image comes from.
        image: ImageSource,
        /// Optional detail hint (`low`, `high`, `auto`) for vendors that take one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<String>,
    },
    /// A file (a PDF or another document) sent with the message.
    File {
        /// Where the file comes from.
        file: FileSource,
        /// The file name the client gave, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        filename: Option<String>,
    },
    /// Audio sent with the message, base64-encoded.
    Audio {
        /// The base64 data (no `data:` prefix).
        data: String,
        /// Its encoding as the client named it (`wav`, `mp3`).
        format: String,
    },
}

/// Where a [`ContentPart::File`] comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum FileSource {
    /// Inline bytes, base64-encoded.
    Base64 {
        /// The media type, e.g. `application/pdf`.
        media_type: String,
        /// The base64 data (no `data:` prefix).
        data: String,
    },
    /// A file uploaded to the vendor beforehand, by the vendor's id (only the vendor that
    /// issued it can read it).
    Id {
        /// The vendor's file id.
        id: String,
    },
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolCall {
    /// The vendor's id for this call; tool results refer to it.
    pub id: String,
    /// The function name.
    pub name: String,
    /// The arguments as a JSON text, exactly as the model wrote them.
    pub arguments: String,
}

impl ToolCall {
    /// A tool call.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }
}

/// One message of the conversation.
///
/// # Examples
///
/// ```
/// use ripcord_core::{Message, Role};
/// let m = Message::user("Why is the sky blue?");
/// assert_eq!(m.role, Role::User);
/// assert_eq!(m.text(), "Why is the sky blue?");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Its content parts (text and images).
    #[serde(default)]
    pub content: Vec<ContentPart>,
    /// Tool calls an assistant message made.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For a `Tool` message: the id of the call this is the result of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Optional participant name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The reasoning an assistant message came with (thinking blocks with their signatures,
    /// redacted blocks), for vendors that want it back in history: Anthropic requires the
    /// signed blocks of the turn that called tools when thinking is on. Adapters of vendors
    /// that take no reasoning in history leave it out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasoning: Vec<crate::reasoning::ReasoningBlock>,
}

impl Message {
    /// A message of `role` with one text part.
    pub fn new(role: Role, text: impl Into<String>) -> Self {
        Message {
            role,
            content: vec![ContentPart::Text { text: text.into() }],
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
            reasoning: Vec::new(),
        }
    }

    /// A system message.
    pub fn system(text: impl Into<String>) -> Self {
        Message::new(Role::System, text)
    }

    /// A user message.
    pub fn user(text: impl Into<String>) -> Self {
        Message::new(Role::User, text)
    }

    /// An assistant message.
    pub fn assistant(text: impl Into<String>) -> Self {
        Message::new(Role::Assistant, text)
    }

    /// An assistant message that made tool calls (and said nothing).
    pub fn assistant_tool_calls(calls: Vec<ToolCall>) -> Self {
        Message {
            role: Role::Assistant,
            content: Vec::new(),
            tool_calls: calls,
            tool_call_id: None,
            name: None,
            reasoning: Vec::new(),
        }
    }

    /// The result of the tool call `call_id`.
    pub fn tool_result(call_id: impl Into<String>, text: impl Into<String>) -> Self {
        Message {
            role: Role::Tool,
            content: vec![ContentPart::Text { text: text.into() }],
            tool_calls: Vec::new(),
            tool_call_id: Some(call_id.into()),
            name: None,
            reasoning: Vec::new(),
        }
    }

    crate::setters! {
        /// The same message carrying `reasoning` (see [`Message::reasoning`]).
        with_reasoning(reasoning: Vec<crate::reasoning::ReasoningBlock>) => reasoning = reasoning;
    }

    /// Adds an image part.
    pub fn with_image(mut self, image: ImageSource) -> Self {
        self.content.push(ContentPart::Image {
            image,
            detail: None,
        });
        self
    }

    /// The concatenated text parts.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for part in &self.content {
            if let ContentPart::Text { text } = part {
                out.push_str(text);
            }
        }
        out
    }

    /// True when the message carries an image.
    pub fn has_image(&self) -> bool {
        self.content
            .iter()
            .any(|p| matches!(p, ContentPart::Image { .. }))
    }

    /// True when the message carries anything but text (an image, a file, audio).
    pub fn has_non_text(&self) -> bool {
        self.content
            .iter()
            .any(|p| !matches!(p, ContentPart::Text { .. }))
    }
}

/// A tool (function) the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolSpec {
    /// The function name.
    pub name: String,
    /// What it does, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON schema of its parameters.
    pub parameters: serde_json::Value,
    /// For a tool a vendor defines itself (Anthropic's `bash_20250124`, `text_editor_20250728`,
    /// `computer_20250124`): its dated type. Such a tool has no schema of the client's; it goes
    /// unchanged (type and name) to links of that vendor and is refused by every other.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor_type: Option<String>,
}

impl ToolSpec {
    /// A tool with a JSON-schema for its parameters.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: serde_json::Value,
    ) -> Self {
        ToolSpec {
            name: name.into(),
            description: Some(description.into()),
            parameters,
            vendor_type: None,
        }
    }

    /// An Anthropic-defined client tool (`bash_20250124`, `text_editor_*`, `computer_*`), by
    /// its dated type and the name the model calls it by.
    pub fn anthropic_defined(kind: impl Into<String>, name: impl Into<String>) -> Self {
        ToolSpec {
            name: name.into(),
            description: None,
            parameters: serde_json::Value::Null,
            vendor_type: Some(kind.into()),
        }
    }
}

impl ChatRequest {
    /// Refuses a request carrying a vendor-defined tool ([`ToolSpec::vendor_type`]) on a link
    /// (named `vendor`) that cannot run it: an `InvalidRequest` naming the tool, never a tool
    /// silently turned into a function without a schema.
    pub fn refuse_vendor_tools(&self, vendor: &str) -> crate::Result<()> {
        match self
            .tools
            .iter()
            .enumerate()
            .find_map(|(i, t)| t.vendor_type.as_deref().map(|k| (i, k, &t.name)))
        {
            None => Ok(()),
            Some((i, kind, name)) => Err(crate::Error::new(
                crate::ErrorKind::InvalidRequest,
                format!(
                    "tools[{i}]: the Anthropic-defined tool {kind:?} ({name}) runs only on Anthropic links; {vendor} cannot run it"
                ),
            )),
        }
    }
}

/// Whether and which tool the model must call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolChoice {
    /// The model decides.
    Auto,
    /// No tool calls.
    None,
    /// At least one tool call.
    Required,
    /// This tool.
    Tool {
        /// The function name.
        name: String,
    },
}

/// The shape of the answer.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ResponseFormat {
    /// Free text.
    #[default]
    Text,
    /// Any valid JSON object.
    Json,
    /// JSON matching a schema.
    JsonSchema {
        /// A name for the schema (some vendors require one).
        name: String,
        /// The schema.
        schema: serde_json::Value,
        /// Ask the vendor to enforce the schema strictly where it can.
        #[serde(default)]
        strict: bool,
    },
}

impl ResponseFormat {
    /// True for `Json` and `JsonSchema`.
    pub fn is_json(&self) -> bool {
        !matches!(self, ResponseFormat::Text)
    }
}

/// A chat request, independent of any vendor.
///
/// # Examples
///
/// ```
/// use ripcord_core::{ChatRequest, Message};
/// let req = ChatRequest::new(vec![Message::system("Be brief."), Message::user("Hi")])
///     .with_max_tokens(64)
///     .with_temperature(0.2);
/// assert_eq!(req.max_tokens, Some(64));
/// let same: ChatRequest = serde_json::from_str(&serde_json::to_string(&req).unwrap()).unwrap();
/// assert_eq!(same, req);
/// ```
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ChatRequest {
    /// The conversation, oldest first.
    pub messages: Vec<Message>,
    /// Tools the model may call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec>,
    /// Whether and which tool the model must call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// The shape of the answer.
    #[serde(default)]
    pub response_format: ResponseFormat,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Nucleus sampling mass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    /// Upper bound on generated tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Stop sequences.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    /// Seed for vendors that support reproducible sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// An end-user id for the vendor's abuse monitoring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// OpenAI's presence penalty (-2.0 to 2.0), for vendors that have one; an adapter of a
    /// vendor without it refuses a non-zero value rather than drop it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub presence_penalty: Option<f32>,
    /// OpenAI's frequency penalty (-2.0 to 2.0), as [`ChatRequest::presence_penalty`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frequency_penalty: Option<f32>,
    /// Whether the model may call several tools in one turn (`None`: the vendor's default,
    /// which is yes). OpenAI's `parallel_tool_calls`; Anthropic's
    /// `tool_choice.disable_parallel_tool_use` is its negation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    /// How much the model should think before it answers, for models that reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<Reasoning>,
}

/// How much a reasoning model thinks: an effort (OpenAI's `reasoning_effort`), a token budget
/// (Anthropic's `thinking.budget_tokens`), or both. Each adapter sends what its vendor takes and
/// maps the other ([`Reasoning::effort_or_from_budget`], [`Reasoning::budget_or_from_effort`]).
///
/// # Examples
///
/// ```
/// use ripcord_core::{Reasoning, ReasoningEffort};
/// let r = Reasoning::effort(ReasoningEffort::High);
/// assert_eq!(r.budget_or_from_effort(), 16_384);
/// assert_eq!(Reasoning::budget(2_000).effort_or_from_budget(), ReasoningEffort::Low);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Reasoning {
    /// The effort asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<ReasoningEffort>,
    /// The thinking budget asked for, in tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_tokens: Option<u32>,
}

/// A reasoning effort, OpenAI's scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ReasoningEffort {
    /// As little thinking as the model allows.
    Minimal,
    /// Light thinking.
    Low,
    /// The usual amount.
    Medium,
    /// Thorough thinking.
    High,
}

impl ReasoningEffort {
    /// The wire name (`minimal`, `low`, `medium`, `high`).
    pub const fn as_str(self) -> &'static str {
        match self {
            ReasoningEffort::Minimal => "minimal",
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
        }
    }

    /// Parses a wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "minimal" => ReasoningEffort::Minimal,
            "low" => ReasoningEffort::Low,
            "medium" => ReasoningEffort::Medium,
            "high" => ReasoningEffort::High,
            _ => return None,
        })
    }
}

impl Reasoning {
    /// Reasoning at this effort.
    pub fn effort(effort: ReasoningEffort) -> Self {
        Reasoning {
            effort: Some(effort),
            budget_tokens: None,
        }
    }

    /// Reasoning with this token budget.
    pub fn budget(tokens: u32) -> Self {
        Reasoning {
            effort: None,
            budget_tokens: Some(tokens),
        }
    }

    /// The effort for a vendor that takes one: the one asked for, else the budget's band
    /// (under 2048 tokens low, under 8192 medium, else high; Anthropic's documented range
    /// starts at 1024).
    pub fn effort_or_from_budget(&self) -> ReasoningEffort {
        match (self.effort, self.budget_tokens) {
            (Some(e), _) => e,
            (None, Some(b)) if b < 2_048 => ReasoningEffort::Low,
            (None, Some(b)) if b < 8_192 => ReasoningEffort::Medium,
            (None, Some(_)) => ReasoningEffort::High,
            (None, None) => ReasoningEffort::Medium,
        }
    }

    /// The budget for a vendor that takes one: the one asked for, else the effort's
    /// (minimal 1024, low 2048, medium 8192, high 16384).
    pub fn budget_or_from_effort(&self) -> u32 {
        match (self.budget_tokens, self.effort) {
            (Some(b), _) => b,
            (None, Some(ReasoningEffort::Minimal)) => 1_024,
            (None, Some(ReasoningEffort::Low)) => 2_048,
            (None, Some(ReasoningEffort::High)) => 16_384,
            (None, _) => 8_192,
        }
    }
}

impl ChatRequest {
    /// A request with these messages and defaults for everything else.
    pub fn new(messages: Vec<Message>) -> Self {
        ChatRequest {
            messages,
            ..ChatRequest::default()
        }
    }

    /// A one-message user request.
    pub fn user(text: impl Into<String>) -> Self {
        ChatRequest::new(vec![Message::user(text)])
    }

    crate::setters! {
        /// Sets `max_tokens`.
        with_max_tokens(n: u32) => max_tokens = Some(n);
        /// Sets the temperature.
        with_temperature(t: f32) => temperature = Some(t);
        /// Sets the response format.
        with_response_format(f: ResponseFormat) => response_format = f;
    }

    /// Adds a tool.
    pub fn with_tool(mut self, tool: ToolSpec) -> Self {
        self.tools.push(tool);
        self
    }

    crate::setters! {
        /// Sets the tool choice.
        with_tool_choice(choice: ToolChoice) => tool_choice = Some(choice);
    }

    /// Adds a stop sequence.
    pub fn with_stop(mut self, stop: impl Into<String>) -> Self {
        self.stop.push(stop.into());
        self
    }

    crate::setters! {
        /// Sets the seed.
        with_seed(seed: u64) => seed = Some(seed);
    }

    /// True when any message carries an image.
    pub fn has_images(&self) -> bool {
        self.messages.iter().any(Message::has_image)
    }

    /// What the request needs from a model (used by the chain's skip rules).
    pub fn needs(&self) -> Needs {
        Needs {
            tools: !self.tools.is_empty()
                || self
                    .messages
                    .iter()
                    .any(|m| !m.tool_calls.is_empty() || m.role == Role::Tool),
            vision: self.has_images(),
            json: self.response_format.is_json(),
        }
    }
}

/// Capabilities a request needs from a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Needs {
    /// Tool calling.
    pub tools: bool,
    /// Image input.
    pub vision: bool,
    /// JSON output mode.
    pub json: bool,
}
