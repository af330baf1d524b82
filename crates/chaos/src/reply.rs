//! The successful answer a fake vendor gives.

/// A successful answer: text, tool calls and usage, rendered per wire.
///
/// `chunks` is how many SSE deltas the text is split into (by characters, at most one per
/// character; `0` counts as `1`), or, with [`Chunking::Words`], the text goes one word per
/// delta as a token stream does. Each tool call's arguments are split into `chunks` pieces,
/// after one delta that carries the call's id and name.
///
/// A reply that [`continues`](Reply::continues) answers a request whose last assistant message
/// is the start of its text with only the rest of it, as a model asked to continue its own cut
/// answer does (by assistant prefill or by an instruction after the delivered text).
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
    /// How the text is cut into deltas.
    pub chunking: Chunking,
    /// A request whose last assistant message is the start of the text (trailing whitespace
    /// aside) gets only the rest of the text: the fake continues its own answer.
    pub continues: bool,
    /// The model's reasoning, sent before the answer: a signed `thinking` block on the
    /// Anthropic wire ([`signature_for`] signs it), `reasoning_content` on the OpenAI wire
    /// (DeepSeek's convention); `None` (the default) sends none.
    pub reasoning: Option<String>,
    /// The data of a `redacted_thinking` block the Anthropic wire sends after the thinking
    /// block; ignored by the other wires.
    pub redacted_reasoning: Option<String>,
}

/// The signature the fake Anthropic gives a thinking block with this text, and checks when
/// the block comes back in history (as the real API checks its own): a fixed-format tag
/// derived from the text (FNV-1a), so an altered text or a made-up signature is caught.
/// It is a fake's consistency check, not a cryptographic signature.
///
/// # Examples
///
/// ```
/// use ripcord_chaos::signature_for;
/// assert_eq!(signature_for("a"), signature_for("a"));
/// assert_ne!(signature_for("a"), signature_for("b"));
/// assert!(signature_for("a").starts_with("fake-sig-"));
/// ```
pub fn signature_for(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("fake-sig-{h:016x}")
}

/// How a [`Reply`]'s text is cut into stream deltas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Chunking {
    /// [`Reply::chunks`] pieces of nearly equal character counts.
    #[default]
    Even,
    /// One delta per word, each with the whitespace before it ("Once", " upon", " a"): a
    /// token-by-token stream, so a fault "after N chunks" falls after N words.
    Words,
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
            chunking: Chunking::Even,
            continues: false,
            reasoning: None,
            redacted_reasoning: None,
        }
    }
}

impl Reply {
    /// The adapters' tests' streamed answer: `abcd` in two chunks, then one call of `f` with
    /// `{"a":1}`, its id `call_id`.
    #[cfg(test)]
    pub(crate) fn text_then_tool(call_id: &str) -> Reply {
        Reply::text("abcd")
            .with_chunks(2)
            .with_tool_call(call_id, "f", "{\"a\":1}")
    }

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

    /// A reply with this text streamed one word per delta ([`Chunking::Words`]); `chunks`
    /// (for tool-call arguments) is the number of words, output tokens one per word.
    ///
    /// # Examples
    ///
    /// ```
    /// use ripcord_chaos::{Chunking, Reply};
    /// let r = Reply::words("one two three").continuing();
    /// assert_eq!((r.chunks, r.output_tokens, r.chunking), (3, 3, Chunking::Words));
    /// assert_eq!(r.after("one two").map(|r| r.text), Some(" three".to_owned()));
    /// ```
    pub fn words(t: impl Into<String>) -> Reply {
        let text = t.into();
        let n = split_words(&text).len();
        Reply {
            text,
            chunks: n.max(1),
            output_tokens: (n as u64).max(1),
            chunking: Chunking::Words,
            ..Reply::default()
        }
    }

    ripcord_core::setters! {
        /// Makes the reply continue its own start when a request carries it ([`Reply::continues`]).
        continuing() => continues = true;
    }

    /// The reply to a request whose last assistant message is `delivered`: the rest of the text
    /// when the reply [`continues`](Reply::continues) and `delivered` (trailing whitespace aside)
    /// is a non-empty start of it; `None` otherwise. Output tokens shrink in proportion.
    pub fn after(&self, delivered: &str) -> Option<Reply> {
        let start = delivered.trim_end();
        if !self.continues || start.is_empty() || !self.text.starts_with(start) {
            return None;
        }
        let rest = self.text[start.len()..].to_owned();
        let whole = self.text.len().max(1) as u64;
        let output_tokens = (self.output_tokens * rest.len() as u64)
            .div_ceil(whole)
            .max(1);
        let chunks = match self.chunking {
            Chunking::Words => split_words(&rest).len().max(1),
            Chunking::Even => self.chunks,
        };
        Some(Reply {
            text: rest,
            chunks,
            output_tokens,
            ..self.clone()
        })
    }

    ripcord_core::setters! {
        /// Sets the number of SSE deltas.
        with_chunks(chunks: usize) => chunks = chunks;
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

    ripcord_core::setters! {
        /// Sends this reasoning before the answer ([`Reply::reasoning`]).
        with_reasoning(text: impl Into<String>) => reasoning = Some(text.into());
        /// Sends a `redacted_thinking` block with this data on the Anthropic wire
        /// ([`Reply::redacted_reasoning`]).
        with_redacted_reasoning(data: impl Into<String>) => redacted_reasoning = Some(data.into());
        /// Sets the reported model name.
        with_model(model: impl Into<String>) => model = Some(model.into());
    }

    /// The text deltas of a stream.
    pub(crate) fn text_pieces(&self) -> Vec<&str> {
        match self.chunking {
            Chunking::Even => split_even(&self.text, self.chunks),
            Chunking::Words => split_words(&self.text),
        }
    }
}

/// Splits `s` into words, each piece a word with the whitespace before it (leading whitespace
/// goes with the first word). An empty string gives no pieces.
pub(crate) fn split_words(s: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut in_word = false;
    for (i, c) in s.char_indices() {
        let space = c.is_whitespace();
        if space && in_word {
            pieces.push(&s[start..i]);
            start = i;
        }
        in_word = !space;
    }
    if start < s.len() {
        pieces.push(&s[start..]);
    }
    pieces
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
    fn split_words_gives_one_piece_per_word_with_its_space() {
        assert_eq!(split_words("a bb  c"), vec!["a", " bb", "  c"]);
        assert_eq!(split_words(" lead\nnext "), vec![" lead", "\nnext", " "]);
        assert!(split_words("").is_empty());
        let text = "héllo wörld ✓ done";
        assert_eq!(split_words(text).concat(), text);
        let r = Reply::words(text);
        assert_eq!(r.text_pieces().len(), 4);
    }

    #[test]
    fn a_continuing_reply_answers_only_the_rest_of_its_text() {
        let r = Reply::words("Once upon a time there was a stream").continuing();
        // Prefill leaves trailing whitespace out; an instruction form keeps it.
        for delivered in ["Once upon a", "Once upon a "] {
            let rest = r.after(delivered).unwrap();
            assert_eq!(rest.text, " time there was a stream");
            assert_eq!(
                rest.text_pieces(),
                vec![" time", " there", " was", " a", " stream"]
            );
        }
        assert!(r.after("Twice upon").is_none());
        assert!(r.after("  ").is_none());
        assert!(Reply::words("Once upon").after("Once").is_none());
    }

    #[test]
    fn reply_text_estimates_output_tokens() {
        assert_eq!(Reply::text("12345678").output_tokens, 2);
        assert_eq!(Reply::text("").output_tokens, 1);
        assert_eq!(Reply::default().text_pieces().len(), 4);
    }
}
