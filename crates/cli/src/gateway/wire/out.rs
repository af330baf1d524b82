//! The OpenAI Chat Completions wire, answers out: the `chat.completion` object and the
//! `chat.completion.chunk` stream, as [`openai_chat_wire`](ripcord_providers::openai_chat_wire)
//! values borrowed from the core types and serialised straight from them (no intermediate
//! `serde_json::Value`: building one costs a map allocation per object and key, which the
//! benchmark showed as about a sixth of the gateway's CPU per call).

use std::borrow::Cow;

use ripcord_core::{ChatResponse, FinishReason, Usage};
use ripcord_providers::openai_chat_wire as oa;

pub(super) fn finish_reason(r: &FinishReason) -> &str {
    r.as_str()
}

/// Token counts as OpenAI reports them.
fn usage(u: &Usage) -> oa::Usage {
    oa::Usage {
        prompt_tokens: u.input_tokens,
        completion_tokens: u.output_tokens,
        total_tokens: u.total_tokens(),
        prompt_tokens_details: Some(oa::PromptTokensDetails {
            cached_tokens: Some(u.cached_input_tokens),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A `chat.completion` object.
pub(crate) fn completion<'a>(
    id: &'a str,
    created: u64,
    model: &'a str,
    resp: &'a ChatResponse,
) -> oa::ChatCompletion<'a> {
    let tool_calls: Vec<oa::ToolCall<'a>> = resp
        .tool_calls
        .iter()
        .map(|c| oa::ToolCall {
            id: Some(Cow::Borrowed(&c.id)),
            kind: Some(Cow::Borrowed("function")),
            function: oa::FunctionCall {
                name: Some(Cow::Borrowed(&c.name)),
                arguments: oa::Arguments::Text(Cow::Borrowed(&c.arguments)),
            },
        })
        .collect();
    // `null` only for an answer that is nothing but tool calls.
    let content = if !tool_calls.is_empty() && resp.content.is_empty() {
        None
    } else {
        Some(oa::MessageContent::Text(Cow::Borrowed(&resp.content)))
    };
    // Only the text: the Chat Completions wire has no place for a signature or a redacted
    // block, so those stay behind (the Messages door carries them); absent when it showed none.
    let reasoning = ripcord_core::reasoning::reasoning_text(&resp.reasoning);
    oa::ChatCompletion {
        id: Some(Cow::Borrowed(id)),
        object: Cow::Borrowed("chat.completion"),
        created,
        model: Some(Cow::Borrowed(model)),
        choices: vec![oa::Choice {
            index: 0,
            message: Some(oa::Message {
                role: Some(Cow::Borrowed("assistant")),
                content,
                reasoning_content: (!reasoning.is_empty()).then_some(Cow::Owned(reasoning)),
                tool_calls,
                ..Default::default()
            }),
            finish_reason: Some(Cow::Borrowed(finish_reason(&resp.finish_reason))),
            logprobs: None,
        }],
        usage: Some(usage(&resp.usage)),
        error: None,
    }
}

/// Builds `chat.completion.chunk` events, serialised straight from typed chunks (as
/// [`completion`]): a streamed answer sends one per delta, so a `serde_json::Value` per chunk
/// (a map allocation per object and key) would be paid many times per answer.
#[derive(Debug)]
pub(crate) struct ChunkWriter {
    pub(crate) id: String,
    pub(crate) created: u64,
    pub(crate) model: String,
}

/// The `delta`s a streamed answer sends; absent parts are left out of the JSON (an empty
/// delta is [`oa::Delta::default`]).
pub(crate) mod delta {
    use std::borrow::Cow;

    use ripcord_providers::openai_chat_wire as oa;

    /// The first chunk's: the assistant's role and empty content.
    pub(crate) fn opening() -> oa::Delta<'static> {
        oa::Delta {
            role: Some(Cow::Borrowed("assistant")),
            content: Some(oa::MessageContent::Text(Cow::Borrowed(""))),
            ..oa::Delta::default()
        }
    }

    /// A piece of the model's reasoning (`reasoning_content`, DeepSeek's convention).
    pub(crate) fn reasoning(text: &str) -> oa::Delta<'_> {
        oa::Delta {
            reasoning_content: Some(Cow::Borrowed(text)),
            ..oa::Delta::default()
        }
    }

    /// A piece of the answer's text.
    pub(crate) fn text(text: &str) -> oa::Delta<'_> {
        oa::Delta {
            content: Some(oa::MessageContent::Text(Cow::Borrowed(text))),
            ..oa::Delta::default()
        }
    }

    /// A piece of a tool call; the id (and with it the `type`) and the name come with the
    /// pieces that carry them.
    pub(crate) fn tool_call<'a>(
        index: u32,
        id: Option<&'a str>,
        name: Option<&'a str>,
        arguments: &'a str,
    ) -> oa::Delta<'a> {
        oa::Delta {
            tool_calls: vec![oa::ToolCallDelta {
                index: Some(index),
                id: id.map(Cow::Borrowed),
                kind: id.map(|_| Cow::Borrowed("function")),
                function: Some(oa::FunctionCall {
                    name: name.map(Cow::Borrowed),
                    arguments: oa::Arguments::Text(Cow::Borrowed(arguments)),
                }),
            }],
            ..oa::Delta::default()
        }
    }
}

impl ChunkWriter {
    fn with<'a>(&'a self, choices: Vec<oa::ChunkChoice<'a>>) -> oa::ChatCompletionChunk<'a> {
        oa::ChatCompletionChunk {
            id: Some(Cow::Borrowed(&self.id)),
            object: Cow::Borrowed("chat.completion.chunk"),
            created: self.created,
            model: Some(Cow::Borrowed(&self.model)),
            choices,
            ..Default::default()
        }
    }

    /// A `chat.completion.chunk` with one choice.
    pub(crate) fn chunk<'a>(
        &'a self,
        delta: oa::Delta<'a>,
        finish: Option<&'a str>,
    ) -> oa::ChatCompletionChunk<'a> {
        self.with(vec![oa::ChunkChoice {
            index: 0,
            delta,
            finish_reason: finish.map(Cow::Borrowed),
            logprobs: None,
            usage: None,
        }])
    }

    /// The last chunk of a stream that asked for usage: no choices, the usage.
    pub(crate) fn usage(&self, u: &Usage) -> oa::ChatCompletionChunk<'_> {
        oa::ChatCompletionChunk {
            usage: Some(usage(u)),
            ..self.with(Vec::new())
        }
    }
}
