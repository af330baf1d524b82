//! Turning a stream of token ids into text deltas: whole UTF-8 characters only, stop sequences
//! cut exactly.
//!
//! **UTF-8.** A byte-level BPE token can hold half of a character (`é` is two bytes, an emoji
//! four, and either may be split across tokens). Decoding token by token would show U+FFFD
//! replacement characters. [`Detokenizer`] decodes a small window of recent ids and releases
//! new text only when it no longer ends in an incomplete character — the approach of Hugging
//! Face's text-generation-inference — and flushes whatever is left at the end.
//!
//! **Stop sequences.** A stop sequence may arrive split across deltas (`"\n\nUs"` + `"er:"`).
//! [`StopFilter`] holds back the shortest tail that could still become a stop sequence, so the
//! caller never sees a part of one, and cuts the text right before the first complete match.

use ripcord_core::Error;
use tokenizers::Tokenizer;

use crate::error::runtime;

/// Incremental, UTF-8-safe decoding.
#[derive(Debug, Default)]
pub(crate) struct Detokenizer {
    ids: Vec<u32>,
    prefix_offset: usize,
    read_offset: usize,
}

impl Detokenizer {
    pub(crate) fn new() -> Detokenizer {
        Detokenizer::default()
    }

    fn decode(tok: &Tokenizer, ids: &[u32]) -> Result<String, Error> {
        tok.decode(ids, true)
            .map_err(|e| runtime(format!("cannot decode tokens: {e}")))
    }

    /// Takes one id; returns the text it completes (often empty).
    pub(crate) fn push(&mut self, tok: &Tokenizer, id: u32) -> Result<String, Error> {
        self.ids.push(id);
        self.next_delta(tok, false)
    }

    /// Everything not yet returned (an incomplete character at the very end included).
    pub(crate) fn finish(&mut self, tok: &Tokenizer) -> Result<String, Error> {
        self.next_delta(tok, true)
    }

    fn next_delta(&mut self, tok: &Tokenizer, last: bool) -> Result<String, Error> {
        let prefix = Self::decode(tok, &self.ids[self.prefix_offset..self.read_offset])?;
        let full = Self::decode(tok, &self.ids[self.prefix_offset..])?;
        let complete = last || !full.ends_with('\u{FFFD}');
        if full.len() > prefix.len() && complete {
            let delta = match full.strip_prefix(prefix.as_str()) {
                Some(rest) => rest.to_owned(),
                // A decoder that rewrote the prefix (rare): take the bytes after it, on a
                // character boundary.
                None => full
                    .char_indices()
                    .find(|(i, _)| *i >= prefix.len())
                    .map(|(i, _)| full[i..].to_owned())
                    .unwrap_or_default(),
            };
            self.prefix_offset = self.read_offset;
            self.read_offset = self.ids.len();
            Ok(delta)
        } else {
            Ok(String::new())
        }
    }
}

/// What the stop filter lets through.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum StopStep {
    /// Show this text (possibly empty) and go on.
    Emit(String),
    /// Show this text, then stop: a stop sequence followed it.
    Stop(String),
}

/// Cuts the answer before the first stop sequence.
#[derive(Debug)]
pub(crate) struct StopFilter {
    stops: Vec<String>,
    text: String,
    emitted: usize,
}

impl StopFilter {
    /// A filter for these stop sequences (empty ones are ignored).
    pub(crate) fn new(stops: &[String]) -> StopFilter {
        StopFilter {
            stops: stops.iter().filter(|s| !s.is_empty()).cloned().collect(),
            text: String::new(),
            emitted: 0,
        }
    }

    /// Takes a delta of the answer.
    pub(crate) fn push(&mut self, delta: &str) -> StopStep {
        self.text.push_str(delta);
        // A stop sequence can only start in the part not shown yet: anything that could have
        // started one was held back.
        let pending = &self.text[self.emitted..];
        let first = self
            .stops
            .iter()
            .filter_map(|s| pending.find(s.as_str()))
            .min();
        if let Some(at) = first {
            let out = pending[..at].to_owned();
            self.emitted = self.text.len();
            return StopStep::Stop(out);
        }
        let hold = self
            .stops
            .iter()
            .map(|s| longest_suffix_prefix(pending, s))
            .max()
            .unwrap_or(0);
        let end = pending.len() - hold;
        let out = pending[..end].to_owned();
        self.emitted += end;
        StopStep::Emit(out)
    }

    /// The held-back tail, at the end of the answer (it never became a stop sequence).
    pub(crate) fn flush(&mut self) -> String {
        let out = self.text[self.emitted..].to_owned();
        self.emitted = self.text.len();
        out
    }
}

/// The length of the longest suffix of `text` that is a proper prefix of `stop`.
fn longest_suffix_prefix(text: &str, stop: &str) -> usize {
    let max = stop.len().saturating_sub(1).min(text.len());
    (1..=max)
        .rev()
        .find(|&k| stop.is_char_boundary(k) && text.ends_with(&stop[..k]))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(stops: &[&str], deltas: &[&str]) -> (Vec<String>, bool) {
        let stops: Vec<String> = stops.iter().map(|s| s.to_string()).collect();
        let mut f = StopFilter::new(&stops);
        let mut out = Vec::new();
        for d in deltas {
            match f.push(d) {
                StopStep::Emit(s) => out.push(s),
                StopStep::Stop(s) => {
                    out.push(s);
                    return (out, true);
                }
            }
        }
        out.push(f.flush());
        (out, false)
    }

    #[test]
    fn stop_split_across_deltas_is_never_shown() {
        let (out, stopped) = run(&["\nUser:"], &["Hello", " there\n", "Us", "er: hi"]);
        assert!(stopped);
        assert_eq!(out.concat(), "Hello there");
        // The newline was held back until it was clear it starts the stop sequence.
        assert_eq!(out[1], " there");
    }

    #[test]
    fn a_false_start_is_released() {
        let (out, stopped) = run(&["STOP"], &["ST", "ART", " and ST"]);
        assert!(!stopped);
        assert_eq!(out.concat(), "START and ST");
        assert_eq!(out[0], "");
        assert_eq!(out[1], "START");
    }

    #[test]
    fn earliest_of_several_stops_wins_and_multibyte_stops_work() {
        let (out, stopped) = run(&["b", "日本"], &["aa日", "本 b"]);
        assert!(stopped);
        assert_eq!(out.concat(), "aa");
        let (out, stopped) = run(&["x"], &["abc"]);
        assert!(!stopped);
        assert_eq!(out.concat(), "abc");
    }

    #[test]
    fn no_stops_passes_everything_at_once() {
        let (out, _) = run(&[], &["a", "b"]);
        assert_eq!(out, vec!["a", "b", ""]);
        let (out, _) = run(&[""], &["a"]);
        assert_eq!(out, vec!["a", ""]);
    }

    #[test]
    fn suffix_prefix() {
        assert_eq!(longest_suffix_prefix("hello wo", "world"), 2);
        assert_eq!(longest_suffix_prefix("hello", "world"), 0);
        assert_eq!(longest_suffix_prefix("w", "w"), 0);
        assert_eq!(longest_suffix_prefix("a日", "日本"), 3);
    }

    fn tiny_tokenizer() -> Option<Tokenizer> {
        let dir = crate::test_support::tiny_dir_or_skip()?;
        Some(Tokenizer::from_file(dir.join("tokenizer.json")).unwrap())
    }

    #[test]
    fn detokenizer_never_splits_a_character() {
        let Some(tok) = tiny_tokenizer() else { return };
        let text = "Grüße aus Köln 🎉🦀 日本語のテキスト — naïve café";
        let ids = tok.encode(text, false).unwrap().get_ids().to_vec();
        // Byte-level BPE carries some of these characters in more than one token.
        let partial = ids
            .iter()
            .filter(|&&id| tok.decode(&[id], true).unwrap().contains('\u{FFFD}'))
            .count();
        assert!(
            partial >= 2,
            "the text no longer exercises split characters"
        );

        let mut d = Detokenizer::new();
        let mut deltas: Vec<String> = ids.iter().map(|&id| d.push(&tok, id).unwrap()).collect();
        assert!(
            deltas.iter().any(String::is_empty),
            "no token was held back"
        );
        deltas.push(d.finish(&tok).unwrap());
        assert!(deltas.iter().all(|s| !s.contains('\u{FFFD}')), "{deltas:?}");
        assert_eq!(deltas.concat(), text);
    }

    #[test]
    fn an_incomplete_character_at_the_end_is_flushed_not_lost() {
        let Some(tok) = tiny_tokenizer() else { return };
        let ids = tok.encode("a🦀", false).unwrap().get_ids().to_vec();
        let (last_partial, _) = ids
            .iter()
            .enumerate()
            .rev()
            .find(|(_, id)| tok.decode(&[**id], true).unwrap().contains('\u{FFFD}'))
            .expect("🦀 spans several tokens");
        let mut d = Detokenizer::new();
        let mut shown = String::new();
        for &id in &ids[..last_partial] {
            shown.push_str(&d.push(&tok, id).unwrap());
        }
        // The answer ends in the middle of the crab: the rest comes out at the end, lossy.
        let tail = d.finish(&tok).unwrap();
        assert!(
            shown.starts_with('a') && !shown.contains('\u{FFFD}'),
            "{shown:?}"
        );
        assert!(tail.contains('\u{FFFD}'), "{tail:?}");
    }

    #[test]
    fn special_tokens_are_not_shown() {
        let Some(tok) = tiny_tokenizer() else { return };
        let ids = tok
            .encode("<|im_start|>assistant\nHi<|im_end|>", false)
            .unwrap()
            .get_ids()
            .to_vec();
        assert_eq!(ids[0], 1);
        let mut d = Detokenizer::new();
        let mut out: String = ids.iter().map(|&id| d.push(&tok, id).unwrap()).collect();
        out.push_str(&d.finish(&tok).unwrap());
        assert_eq!(out, "assistant\nHi");
    }
}
