//! The successful answer a fake vendor gives.

/// A successful answer: text, tool calls and usage, rendered per wire.
///
/// `chunks` is how many SSE deltas the text is split into (by characters, at most one per
/// character; `0` counts as `1`). Each tool call's arguments are split the same way, after
/// one delta that carries the call's id and name.
///
/// # Examples
///
/// ```
/// use ripcord_chaos::Reply;
/// let reply = Reply::text("Rayleigh scattering.")
///     .with_chunks(3)
///     .with_tool_call("call_1", "lookup", r#"{"q":"sky"}"#)
///     .with_usage(20, 7);
/// assert_eq!(reply.text, "Rayleigh scattering.");
/// assert_eq!(reply.tool_calls.len(), 1);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The answer's text (may be empty when the answer is only tool calls).
    pub text: String,
    /// Number of SSE deltas the text is split into.
    pub chunks: usize,
    /// Tool calls as `(id, name, arguments JSON)`.
    pub tool_calls: Vec<(String, String, String)>,
    /// Reported input (prompt) tokens.
    pub input_tokens: u64,
    /// Reported output (completion) tokens.
    pub output_tokens: u64,
    /// The model name reported; `None` echoes the request's `model` (or the wire's default).
    pub model: Option<String>,
}

impl Default for Reply {
    /// "Hello! How can I help you today?" in 4 chunks, 12 input and 9 output tokens.
    fn default() -> Self {
        Reply {
            text: "Hello! How can I help you today?".to_owned(),
            chunks: 4,
            tool_calls: Vec::new(),
            input_tokens: 12,
            output_tokens: 9,
            model: None,
        }
    }
}

impl Reply {
    /// A reply with this text, 4 chunks, 12 input tokens and about one output token per four
    /// characters (at least one).
    pub fn text(t: impl Into<String>) -> Reply {
        let text = t.into();
        let output_tokens = (text.chars().count() as u64).div_ceil(4).max(1);
        Reply {
            text,
            output_tokens,
            ..Reply::default()
        }
    }

    /// Sets the number of SSE deltas.
    pub fn with_chunks(mut self, chunks: usize) -> Reply {
        self.chunks = chunks;
        self
    }

    /// Adds a tool call (`arguments` is the JSON text of the arguments).
    pub fn with_tool_call(
        mut self,
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Reply {
        self.tool_calls
            .push((id.into(), name.into(), arguments.into()));
        self
    }

    /// Sets the reported usage.
    pub fn with_usage(mut self, input_tokens: u64, output_tokens: u64) -> Reply {
        self.input_tokens = input_tokens;
        self.output_tokens = output_tokens;
        self
    }

    /// Sets the reported model name.
    pub fn with_model(mut self, model: impl Into<String>) -> Reply {
        self.model = Some(model.into());
        self
    }

    /// The text deltas of a stream.
    pub(crate) fn text_pieces(&self) -> Vec<&str> {
        split_even(&self.text, self.chunks)
    }
}

/// Splits `s` into at most `n` (≥ 1) pieces of nearly equal character counts, on char
/// boundaries. An empty string gives no pieces.
pub(crate) fn split_even(s: &str, n: usize) -> Vec<&str> {
    let chars = s.chars().count();
    if chars == 0 {
        return Vec::new();
    }
    let n = n.clamp(1, chars);
    let mut pieces = Vec::with_capacity(n);
    let mut bounds = s
        .char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(s.len()));
    let mut start = 0;
    let mut taken = 0;
    for k in 1..=n {
        // Piece k ends after chars * k / n characters.
        let end_char = chars * k / n;
        let end = bounds.nth(end_char - taken).unwrap_or(s.len());
        taken = end_char + 1;
        pieces.push(&s[start..end]);
        start = end;
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_even_covers_text_on_char_boundaries() {
        for (text, n) in [
            ("Hello! How can I help you today?", 4),
            ("héllo wörld ✓", 5),
            ("ab", 7),
            ("x", 0),
            ("abcdef", 1),
            ("日本語のテキスト", 3),
        ] {
            let pieces = split_even(text, n);
            assert_eq!(pieces.concat(), text, "{text:?} in {n}");
            assert_eq!(pieces.len(), n.clamp(1, text.chars().count()));
            assert!(pieces.iter().all(|p| !p.is_empty()));
            let sizes: Vec<usize> = pieces.iter().map(|p| p.chars().count()).collect();
            let (min, max) = (sizes.iter().min(), sizes.iter().max());
            assert!(max.zip(min).is_some_and(|(a, b)| a - b <= 1), "{sizes:?}");
        }
        assert!(split_even("", 3).is_empty());
    }

    #[test]
    fn reply_text_estimates_output_tokens() {
        assert_eq!(Reply::text("12345678").output_tokens, 2);
        assert_eq!(Reply::text("").output_tokens, 1);
        assert_eq!(Reply::default().text_pieces().len(), 4);
    }
}
