//! The OpenAI Chat Completions wire, answers out: the `chat.completion` object and the
//! `chat.completion.chunk` stream, serialised straight from the core types.

use ripcord_core::{ChatResponse, FinishReason, Usage};
use serde::Serialize;

pub(super) fn finish_reason(r: &FinishReason) -> &str {
    r.as_str()
}

/// A `chat.completion` object, serialised straight from the response (no intermediate
/// `serde_json::Value`: building one costs a map allocation per object and key, which the
/// benchmark showed as about a sixth of the gateway's CPU per call).
#[derive(Debug, Serialize)]
pub(crate) struct Completion<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: [CompletionChoice<'a>; 1],
    usage: CompletionUsage,
}

#[derive(Debug, Serialize)]
struct CompletionChoice<'a> {
    index: u32,
    message: CompletionMessage<'a>,
    finish_reason: &'a str,
    logprobs: Option<()>,
}

#[derive(Debug, Serialize)]
struct CompletionMessage<'a> {
    role: &'static str,
    /// `null` only for an answer that is nothing but tool calls.
    content: Option<&'a str>,
    /// The serving model's reasoning text (DeepSeek's field, which vLLM and others share);
    /// absent when it showed none.
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<CompletionToolCall<'a>>,
}

#[derive(Debug, Serialize)]
struct CompletionToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: CompletionFunction<'a>,
}

#[derive(Debug, Serialize)]
struct CompletionFunction<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Debug, Serialize)]
struct CompletionUsage {
    prompt_tokens: u64,
    completion_tokens: u64,
    total_tokens: u64,
    prompt_tokens_details: CachedTokens,
}

#[derive(Debug, Serialize)]
struct CachedTokens {
    cached_tokens: u64,
}

impl From<&Usage> for CompletionUsage {
    fn from(u: &Usage) -> Self {
        CompletionUsage {
            prompt_tokens: u.input_tokens,
            completion_tokens: u.output_tokens,
            total_tokens: u.total_tokens(),
            prompt_tokens_details: CachedTokens {
                cached_tokens: u.cached_input_tokens,
            },
        }
    }
}

/// A `chat.completion` object.
pub(crate) fn completion<'a>(
    id: &'a str,
    created: u64,
    model: &'a str,
    resp: &'a ChatResponse,
) -> Completion<'a> {
    let tool_calls: Vec<CompletionToolCall<'a>> = resp
        .tool_calls
        .iter()
        .map(|c| CompletionToolCall {
            id: &c.id,
            kind: "function",
            function: CompletionFunction {
                name: &c.name,
                arguments: &c.arguments,
            },
        })
        .collect();
    let content = if !tool_calls.is_empty() && resp.content.is_empty() {
        None
    } else {
        Some(resp.content.as_str())
    };
    Completion {
        id,
        object: "chat.completion",
        created,
        model,
        choices: [CompletionChoice {
            index: 0,
            message: CompletionMessage {
                role: "assistant",
                content,
                // Only the text: the Chat Completions wire has no place for a signature or a
                // redacted block, so those stay behind (the Messages door carries them).
                reasoning_content: Some(ripcord_core::reasoning::reasoning_text(&resp.reasoning))
                    .filter(|r| !r.is_empty()),
                tool_calls,
            },
            finish_reason: finish_reason(&resp.finish_reason),
            logprobs: None,
        }],
        usage: CompletionUsage::from(&resp.usage),
    }
}

/// Builds `chat.completion.chunk` events, serialised straight from typed chunks (as
/// [`Completion`]): a streamed answer sends one per delta, so a `serde_json::Value` per chunk
/// (a map allocation per object and key) would be paid many times per answer.
#[derive(Debug)]
pub(crate) struct ChunkWriter {
    pub(crate) id: String,
    pub(crate) created: u64,
    pub(crate) model: String,
}

/// What one chunk's `delta` carries; absent parts are left out of the JSON.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Delta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<[ToolCallPiece<'a>; 1]>,
}

impl<'a> Delta<'a> {
    /// The first chunk's: the assistant's role and empty content.
    pub(crate) fn opening() -> Self {
        Delta {
            role: Some("assistant"),
            content: Some(""),
            reasoning_content: None,
            tool_calls: None,
        }
    }

    /// A piece of the model's reasoning (`reasoning_content`, DeepSeek's convention).
    pub(crate) fn reasoning(text: &'a str) -> Self {
        Delta {
            reasoning_content: Some(text),
            ..Delta::default()
        }
    }

    /// A piece of the answer's text.
    pub(crate) fn text(text: &'a str) -> Self {
        Delta {
            content: Some(text),
            ..Delta::default()
        }
    }

    /// A piece of a tool call; the id (and with it the `type`) and the name come with the
    /// pieces that carry them.
    pub(crate) fn tool_call(
        index: u32,
        id: Option<&'a str>,
        name: Option<&'a str>,
        arguments: &'a str,
    ) -> Self {
        Delta {
            tool_calls: Some([ToolCallPiece {
                index,
                id,
                kind: id.map(|_| "function"),
                function: FunctionPiece { name, arguments },
            }]),
            ..Delta::default()
        }
    }
}

#[derive(Debug, Serialize)]
struct ToolCallPiece<'a> {
    index: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    kind: Option<&'static str>,
    function: FunctionPiece<'a>,
}

#[derive(Debug, Serialize)]
struct FunctionPiece<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    arguments: &'a str,
}

/// A `chat.completion.chunk` with one choice.
#[derive(Debug, Serialize)]
pub(crate) struct Chunk<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: [ChunkChoice<'a>; 1],
}

#[derive(Debug, Serialize)]
struct ChunkChoice<'a> {
    index: u32,
    delta: Delta<'a>,
    finish_reason: Option<&'a str>,
    logprobs: Option<()>,
}

/// The last chunk of a stream that asked for usage: no choices, the usage.
#[derive(Debug, Serialize)]
pub(crate) struct UsageChunk<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: [(); 0],
    usage: CompletionUsage,
}

impl ChunkWriter {
    pub(crate) fn chunk<'a>(&'a self, delta: Delta<'a>, finish: Option<&'a str>) -> Chunk<'a> {
        Chunk {
            id: &self.id,
            object: "chat.completion.chunk",
            created: self.created,
            model: &self.model,
            choices: [ChunkChoice {
                index: 0,
                delta,
                finish_reason: finish,
                logprobs: None,
            }],
        }
    }

    pub(crate) fn usage(&self, usage: &Usage) -> UsageChunk<'_> {
        UsageChunk {
            id: &self.id,
            object: "chat.completion.chunk",
            created: self.created,
            model: &self.model,
            choices: [],
            usage: CompletionUsage::from(usage),
        }
    }
}
