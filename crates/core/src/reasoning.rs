//! A model's reasoning as it comes back: thinking text, its signature, and redacted blocks.
//!
//! Vendors that reason return it beside the answer: Anthropic as `thinking` content blocks
//! (with a `signature` that must come back unchanged in later turns) and `redacted_thinking`
//! blocks (opaque, encrypted `data`); DeepSeek, Qwen, vLLM and Ollama as `reasoning_content`
//! on the message; OpenRouter as `reasoning`; the OpenAI Responses API as `reasoning` output
//! items with a summary. ripcord keeps them all as a list of [`ReasoningBlock`]s on the answer
//! ([`crate::ChatResponse::reasoning`]) and on assistant messages in history
//! ([`crate::Message::reasoning`]), so reasoning is never silently dropped on the way through.

use serde::{Deserialize, Serialize};

/// One block of a model's reasoning.
///
/// # Examples
///
/// ```
/// use ripcord_core::ReasoningBlock;
/// let b = ReasoningBlock::thinking("Let me add 2 and 2.").with_signature("sig-1");
/// assert_eq!(b.text(), Some("Let me add 2 and 2."));
/// assert_eq!(b.signature(), Some("sig-1"));
/// assert_eq!(ReasoningBlock::redacted("b64").text(), None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ReasoningBlock {
    /// Reasoning in plain text (a summary, for vendors that only show one).
    Thinking {
        /// The reasoning text.
        text: String,
        /// The vendor's signature over the block (Anthropic), which the vendor checks when
        /// the block comes back in history; `None` where the vendor signs nothing.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// Reasoning the vendor encrypted (Anthropic `redacted_thinking`): opaque data that is
    /// only passed back to the vendor that issued it.
    Redacted {
        /// The opaque data, as the vendor sent it.
        data: String,
    },
}

impl ReasoningBlock {
    /// A thinking block with no signature.
    pub fn thinking(text: impl Into<String>) -> Self {
        ReasoningBlock::Thinking {
            text: text.into(),
            signature: None,
        }
    }

    /// A redacted block.
    pub fn redacted(data: impl Into<String>) -> Self {
        ReasoningBlock::Redacted { data: data.into() }
    }

    /// The same block signed with `signature` (a redacted block is returned unchanged).
    pub fn with_signature(self, signature: impl Into<String>) -> Self {
        match self {
            ReasoningBlock::Thinking { text, .. } => ReasoningBlock::Thinking {
                text,
                signature: Some(signature.into()),
            },
            other => other,
        }
    }

    /// The reasoning text of a thinking block; `None` for a redacted one.
    pub fn text(&self) -> Option<&str> {
        match self {
            ReasoningBlock::Thinking { text, .. } => Some(text),
            ReasoningBlock::Redacted { .. } => None,
        }
    }

    /// The signature of a signed thinking block.
    pub fn signature(&self) -> Option<&str> {
        match self {
            ReasoningBlock::Thinking { signature, .. } => signature.as_deref(),
            ReasoningBlock::Redacted { .. } => None,
        }
    }
}

/// The reasoning text of `blocks`, thinking blocks joined in order (redacted ones have none).
pub fn reasoning_text(blocks: &[ReasoningBlock]) -> String {
    let mut out = String::new();
    for b in blocks {
        if let Some(t) = b.text() {
            out.push_str(t);
        }
    }
    out
}

/// Builds reasoning blocks from stream pieces, the way [`crate::stream::Collector`] does:
/// text goes to the open thinking block (a new one when the last is signed or redacted), a
/// signature closes the open block, a redacted block stands alone.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ReasoningAccumulator {
    blocks: Vec<ReasoningBlock>,
}

impl ReasoningAccumulator {
    /// An empty accumulator.
    pub fn new() -> Self {
        ReasoningAccumulator::default()
    }

    /// Appends a piece of thinking text.
    pub fn text(&mut self, piece: &str) {
        if let Some(ReasoningBlock::Thinking {
            text,
            signature: None,
        }) = self.blocks.last_mut()
        {
            text.push_str(piece);
            return;
        }
        self.blocks.push(ReasoningBlock::thinking(piece));
    }

    /// Signs (and closes) the open thinking block; a signature with no open block starts an
    /// empty signed one, so it is not lost.
    pub fn signature(&mut self, sig: &str) {
        if let Some(ReasoningBlock::Thinking { signature, .. }) = self.blocks.last_mut()
            && signature.is_none()
        {
            *signature = Some(sig.to_owned());
            return;
        }
        self.blocks
            .push(ReasoningBlock::thinking("").with_signature(sig));
    }

    /// Adds a redacted block.
    pub fn redacted(&mut self, data: &str) {
        self.blocks.push(ReasoningBlock::redacted(data));
    }

    /// True when nothing arrived.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// The blocks so far.
    pub fn into_blocks(self) -> Vec<ReasoningBlock> {
        self.blocks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_build_blocks_split_at_signatures() {
        let mut a = ReasoningAccumulator::new();
        a.text("Let me ");
        a.text("think.");
        a.signature("s1");
        a.redacted("opaque");
        a.text("More.");
        a.signature("s2");
        a.text("unsigned");
        assert_eq!(
            a.into_blocks(),
            vec![
                ReasoningBlock::thinking("Let me think.").with_signature("s1"),
                ReasoningBlock::redacted("opaque"),
                ReasoningBlock::thinking("More.").with_signature("s2"),
                ReasoningBlock::thinking("unsigned"),
            ]
        );
    }

    #[test]
    fn a_lone_signature_is_kept() {
        let mut a = ReasoningAccumulator::new();
        a.signature("s");
        assert_eq!(
            a.into_blocks(),
            vec![ReasoningBlock::thinking("").with_signature("s")]
        );
    }

    #[test]
    fn blocks_serialize_tagged() {
        let v = serde_json::to_value(vec![
            ReasoningBlock::thinking("t").with_signature("s"),
            ReasoningBlock::redacted("d"),
        ])
        .unwrap();
        assert_eq!(
            v,
            serde_json::json!([
                {"type": "thinking", "text": "t", "signature": "s"},
                {"type": "redacted", "data": "d"}
            ])
        );
        assert_eq!(
            reasoning_text(&[
                ReasoningBlock::thinking("a"),
                ReasoningBlock::redacted("x"),
                ReasoningBlock::thinking("b")
            ]),
            "ab"
        );
    }
}
