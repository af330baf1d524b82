//! A non-streamed answer gathered from a vendor's content blocks (Messages, Converse, Gemini).

use ripcord_core::{ChatResponse, Error, FinishReason, ReasoningBlock, Result, ToolCall, Usage};

/// The text, tool calls and reasoning of one answer, in the order the blocks came.
#[derive(Default)]
pub(crate) struct Answer {
    /// The answer text.
    pub(crate) content: String,
    /// The tool calls.
    pub(crate) calls: Vec<ToolCall>,
    /// The reasoning blocks.
    pub(crate) reasoning: Vec<ReasoningBlock>,
}

impl Answer {
    /// The response; a content-filter stop that left neither text nor tool calls is
    /// `refused()` instead.
    pub(crate) fn into_response(
        self,
        finish: FinishReason,
        usage: Usage,
        model: String,
        refused: impl FnOnce() -> Error,
    ) -> Result<ChatResponse> {
        if finish == FinishReason::ContentFilter && self.content.is_empty() && self.calls.is_empty()
        {
            return Err(refused());
        }
        Ok(ChatResponse::new(self.content)
            .with_tool_calls(self.calls)
            .with_reasoning(self.reasoning)
            .with_finish_reason(finish)
            .with_usage(usage)
            .with_model(model))
    }
}
