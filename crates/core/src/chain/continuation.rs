//! Mid-stream continuation ([`super::StreamPolicy::Continue`]): a cut answer goes on from the
//! text already delivered, on the next link.
//!
//! The client has the first part of the answer; it must not see it again, and it must not
//! see two answers. So the next link is asked to *continue* the delivered text, and only what
//! it adds is streamed:
//!
//! - **assistant prefill** where the vendor supports it ([`crate::Capabilities::assistant_prefill`]):
//!   the delivered text is the start of the assistant's own message, and the model writes the
//!   rest of it. Trailing whitespace is left out of the prefill (Anthropic refuses a final
//!   assistant message that ends with it); the overlap check below drops it again if the model
//!   starts with it.
//! - **an explicit instruction** elsewhere, and when a link refuses the prefill: the delivered
//!   text as an assistant message, then a user message asking to continue exactly where it
//!   stops, without repeating or introducing anything.
//!
//! Models asked to continue sometimes repeat the end of what they were given. The first part
//! of a continuation is held back while it could still be such a repetition (while it is a
//! piece of the delivered text's tail, at most [`OVERLAP_WINDOW`] bytes); then the longest
//! start of it that exactly repeats the end of the delivered text is dropped — if it is long
//! enough to be a repetition rather than a coincidence ([`MIN_OVERLAP`] bytes, or whitespace
//! only).
//!
//! Tool-call streams and requests not marked retry-safe are never continued: a half-sent tool
//! call cannot be finished by another model, and a side effect must not happen twice.

use crate::request::{ChatRequest, Message};
use crate::response::ContinuationMode;
use crate::tokens;

/// The instruction a link without prefill gets after the delivered text.
pub const CONTINUE_INSTRUCTION: &str = "Your previous answer was cut off. Continue it from exactly where it stops: do not repeat any of it, do not add a preamble or comment, and keep the same language, tone and format.";

/// How much of a continuation's start is held back to look for a repetition, at most.
pub const OVERLAP_WINDOW: usize = 256;

/// The shortest repetition of the delivered text's end that is dropped (shorter ones, unless
/// whitespace only, may well be the answer going on).
pub const MIN_OVERLAP: usize = 12;

/// What ended a continued stream, as metrics and spans label it: `stall` for a stream silent
/// past its idle limit (a timeout), `cut` for one that ended or broke without its finish (a
/// truncated body, a reset, a half-sent event), `in_band` for an error the vendor sent inside
/// the stream (overloaded, rate limited, a server error, …).
///
/// # Examples
///
/// ```
/// use ripcord_core::ErrorKind;
/// use ripcord_core::chain::continuation::reason_label;
/// assert_eq!(reason_label(ErrorKind::Timeout), "stall");
/// assert_eq!(reason_label(ErrorKind::InvalidResponse), "cut");
/// assert_eq!(reason_label(ErrorKind::Overloaded), "in_band");
/// ```
pub fn reason_label(kind: crate::ErrorKind) -> &'static str {
    use crate::ErrorKind as K;
    match kind {
        K::Timeout => "stall",
        K::Network | K::InvalidResponse => "cut",
        _ => "in_band",
    }
}

/// The request that asks a link to continue `delivered`.
pub(crate) fn request(base: &ChatRequest, delivered: &str, mode: ContinuationMode) -> ChatRequest {
    let mut req = base.clone();
    match mode {
        ContinuationMode::Prefill => {
            req.messages
                .push(Message::assistant(delivered.trim_end().to_owned()));
        }
        ContinuationMode::Instruction => {
            req.messages.push(Message::assistant(delivered.to_owned()));
            req.messages.push(Message::user(CONTINUE_INSTRUCTION));
        }
    }
    // What was delivered already counts against the answer's length.
    if let Some(max) = req.max_tokens {
        let spent = tokens::estimate_text(delivered);
        req.max_tokens = Some(max.saturating_sub(spent).max(1));
    }
    req
}

/// The largest byte index `<= i` on a char boundary of `s`.
fn floor_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Holds a continuation's first text back until it cannot be a repetition of the delivered
/// text's end any longer, then drops the repeated part.
#[derive(Debug)]
pub(crate) struct Overlap {
    /// The end of the delivered text (at most [`OVERLAP_WINDOW`] bytes).
    tail: String,
    pending: String,
    done: bool,
    /// Bytes dropped as a repetition.
    pub(crate) trimmed: u64,
}

impl Overlap {
    pub(crate) fn new(delivered: &str) -> Self {
        let start = floor_boundary(delivered, delivered.len().saturating_sub(OVERLAP_WINDOW));
        // `floor_boundary` may step back one char past the window; that is harmless.
        Overlap {
            tail: delivered[start..].to_owned(),
            pending: String::new(),
            done: delivered.is_empty(),
            trimmed: 0,
        }
    }

    /// Takes a piece of continuation text; returns what may be shown now.
    pub(crate) fn push(&mut self, text: String) -> Option<String> {
        if self.done {
            return Some(text);
        }
        self.pending.push_str(&text);
        if self.tail.contains(self.pending.as_str()) && self.pending.len() < OVERLAP_WINDOW {
            // Could still be (the start of) a repetition: wait for more.
            return None;
        }
        self.flush()
    }

    /// Ends the hold-back (the continuation finished or failed): what is left to show.
    pub(crate) fn flush(&mut self) -> Option<String> {
        if self.done {
            return None;
        }
        self.done = true;
        let pending = std::mem::take(&mut self.pending);
        // The longest start of `pending` that the delivered text ends with.
        let mut k = floor_boundary(&pending, pending.len().min(self.tail.len()));
        while k > 0 {
            if pending.is_char_boundary(k) && self.tail.ends_with(&pending[..k]) {
                break;
            }
            k -= 1;
        }
        let repeated = &pending[..k];
        let drop = k >= MIN_OVERLAP || (k > 0 && repeated.chars().all(char::is_whitespace));
        let shown = if drop {
            self.trimmed = k as u64;
            pending[k..].to_owned()
        } else {
            pending
        };
        (!shown.is_empty()).then_some(shown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(delivered: &str, pieces: &[&str]) -> (String, u64) {
        let mut o = Overlap::new(delivered);
        let mut out = String::new();
        for p in pieces {
            if let Some(s) = o.push((*p).to_owned()) {
                out.push_str(&s);
            }
        }
        if let Some(s) = o.flush() {
            out.push_str(&s);
        }
        (out, o.trimmed)
    }

    #[test]
    fn a_repeated_tail_is_dropped_once() {
        let delivered = "The sky is blue because air scatters short wavelengths";
        let (out, trimmed) = run(
            delivered,
            &[
                "air scatters short ",
                "wavelengths",
                " more than long ones.",
            ],
        );
        assert_eq!(out, " more than long ones.");
        assert_eq!(trimmed, "air scatters short wavelengths".len() as u64);
    }

    #[test]
    fn a_fresh_start_passes_unchanged_and_short_coincidences_stay() {
        assert_eq!(
            run("It is blue", &[" because of", " Rayleigh."]).0,
            " because of Rayleigh."
        );
        // "the" repeats the end, but three bytes is not a repetition worth dropping.
        assert_eq!(run("over the", &["the hill"]).0, "the hill");
    }

    #[test]
    fn whitespace_the_prefill_left_out_is_not_doubled() {
        assert_eq!(run("Hello world ", &[" next"]).0, "next");
        assert_eq!(run("Hello world", &[" next"]).0, " next");
    }

    #[test]
    fn the_hold_back_is_bounded() {
        let delivered = "a".repeat(1000);
        let mut o = Overlap::new(&delivered);
        let mut shown = 0;
        for _ in 0..300 {
            if let Some(s) = o.push("a".to_owned()) {
                shown += s.len();
            }
        }
        // Past the window the hold-back ends (the whole window was a repetition).
        assert!(o.done);
        assert_eq!(shown as u64 + o.trimmed, 300);
    }

    #[test]
    fn requests_carry_the_delivered_text() {
        let base = ChatRequest::user("Why is the sky blue?").with_max_tokens(100);
        let p = request(&base, "Because of ", ContinuationMode::Prefill);
        assert_eq!(p.messages.len(), 2);
        assert_eq!(p.messages[1].text(), "Because of");
        assert!(p.max_tokens.unwrap() < 100);
        let i = request(&base, "Because of ", ContinuationMode::Instruction);
        assert_eq!(i.messages.len(), 3);
        assert_eq!(i.messages[1].text(), "Because of ");
        assert_eq!(i.messages[2].text(), CONTINUE_INSTRUCTION);
    }
}
