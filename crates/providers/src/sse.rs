//! An incremental parser for server-sent events (`text/event-stream`).
//!
//! Vendors stream answers as SSE, and the network splits that byte stream wherever it likes:
//! in the middle of a line, between the `\r` and the `\n` of a line break, inside a multi-byte
//! UTF-8 character. [`SseParser`] takes bytes in whatever pieces they arrive and yields exactly
//! the events the whole stream holds — the same events for every split (a property test pins
//! this). It follows the WHATWG parsing rules: `\r\n`, `\n` and `\r` end lines; lines starting
//! with `:` are comments; `event`, `data`, `id` and `retry` are the fields; a blank line
//! dispatches the event; an event with no data is not dispatched.
//!
//! The parser never allocates per byte: complete lines are parsed straight from the input, and
//! only a line cut by a chunk boundary is copied into a carry-over buffer. A line longer than
//! [`MAX_LINE_BYTES`] is an error, and so is an event whose `data:` lines add up to more than
//! [`MAX_EVENT_BYTES`], so a broken upstream cannot make us buffer without bound.

use std::collections::VecDeque;
use std::fmt;

/// The longest line the parser buffers before giving up (8 MiB).
pub const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;

/// The most data one event may gather from its `data:` lines before the parser gives up
/// (8 MiB): each line is bounded by [`MAX_LINE_BYTES`], and without this an upstream that
/// never sends the blank line ending an event could grow the event forever.
pub const MAX_EVENT_BYTES: usize = 8 * 1024 * 1024;

/// One dispatched server-sent event.
///
/// # Examples
///
/// ```
/// use ripcord_providers::sse::SseParser;
/// let mut p = SseParser::new();
/// p.push(b"event: ping\ndata: {}\n\ndata: a\ndata: b\n\n").unwrap();
/// let first = p.next_event().unwrap();
/// assert_eq!(first.name(), "ping");
/// assert_eq!(p.next_event().unwrap().data, "a\nb");
/// assert!(p.next_event().is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct SseEvent {
    /// The `event:` field; empty when the event had none (the SSE default type is `message`).
    pub event: String,
    /// The `data:` lines, joined with `\n`.
    pub data: String,
    /// The last `id:` seen so far in the stream, if any.
    pub id: Option<String>,
    /// The `retry:` reconnection time in milliseconds, when this event set one.
    pub retry: Option<u64>,
}

impl SseEvent {
    /// The event type: the `event:` field, or `message` when there was none.
    pub fn name(&self) -> &str {
        if self.event.is_empty() {
            "message"
        } else {
            &self.event
        }
    }
}

/// The stream broke the parser's limits.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SseError {
    /// A single line exceeded [`MAX_LINE_BYTES`].
    LineTooLong {
        /// The limit in bytes.
        limit: usize,
    },
    /// One event's data exceeded [`MAX_EVENT_BYTES`].
    EventTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
}

impl fmt::Display for SseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SseError::LineTooLong { limit } => {
                write!(f, "server-sent event line longer than {limit} bytes")
            }
            SseError::EventTooLarge { limit } => {
                write!(f, "server-sent event data larger than {limit} bytes")
            }
        }
    }
}

impl std::error::Error for SseError {}

/// An incremental SSE parser: push bytes in any split, take complete events.
///
/// # Examples
///
/// ```
/// use ripcord_providers::sse::SseParser;
/// let mut p = SseParser::new();
/// p.push(b"data: hel").unwrap();
/// assert!(p.next_event().is_none());
/// p.push(b"lo\r").unwrap();
/// p.push(b"\n\r\n").unwrap();
/// assert_eq!(p.next_event().unwrap().data, "hello");
/// ```
#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of a line cut by a chunk boundary.
    carry: Vec<u8>,
    /// The previous chunk ended with `\r`: a leading `\n` of the next one belongs to it.
    skip_lf: bool,
    /// The first line has been seen (a UTF-8 BOM is only stripped there).
    started: bool,
    event: String,
    data: String,
    has_data: bool,
    last_id: Option<String>,
    retry: Option<u64>,
    ready: VecDeque<SseEvent>,
    failed: Option<SseError>,
}

impl SseParser {
    /// An empty parser.
    pub fn new() -> Self {
        SseParser::default()
    }

    /// Feeds the next bytes of the stream.
    ///
    /// # Errors
    ///
    /// [`SseError::LineTooLong`] when a line grows beyond [`MAX_LINE_BYTES`], or
    /// [`SseError::EventTooLarge`] when one event's data grows beyond [`MAX_EVENT_BYTES`]; the
    /// parser then stays failed and rejects further input.
    pub fn push(&mut self, mut bytes: &[u8]) -> Result<(), SseError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if self.skip_lf
            && let Some((&first, rest)) = bytes.split_first()
        {
            self.skip_lf = false;
            if first == b'\n' {
                bytes = rest;
            }
        }
        while !bytes.is_empty() {
            match bytes.iter().position(|&b| b == b'\n' || b == b'\r') {
                Some(end) => {
                    let term = bytes[end];
                    let fits = if self.carry.is_empty() {
                        self.line(&bytes[..end])
                    } else {
                        let mut line = std::mem::take(&mut self.carry);
                        line.extend_from_slice(&bytes[..end]);
                        let fits = self.line(&line);
                        line.clear();
                        self.carry = line;
                        fits
                    };
                    if let Err(e) = fits {
                        self.failed = Some(e.clone());
                        return Err(e);
                    }
                    let mut next = end + 1;
                    if term == b'\r' {
                        match bytes.get(next) {
                            Some(b'\n') => next += 1,
                            Some(_) => {}
                            None => self.skip_lf = true,
                        }
                    }
                    bytes = &bytes[next..];
                }
                None => {
                    if self.carry.len() + bytes.len() > MAX_LINE_BYTES {
                        let e = SseError::LineTooLong {
                            limit: MAX_LINE_BYTES,
                        };
                        self.failed = Some(e.clone());
                        return Err(e);
                    }
                    self.carry.extend_from_slice(bytes);
                    bytes = &[];
                }
            }
        }
        Ok(())
    }

    /// Takes the next complete event, if one is ready.
    pub fn next_event(&mut self) -> Option<SseEvent> {
        self.ready.pop_front()
    }

    /// True when bytes of an unfinished line or event are buffered (the stream stopped
    /// mid-event).
    pub fn has_partial(&self) -> bool {
        !self.carry.is_empty() || self.has_data
    }

    fn line(&mut self, mut line: &[u8]) -> Result<(), SseError> {
        if !self.started {
            self.started = true;
            if let Some(rest) = line.strip_prefix(b"\xEF\xBB\xBF") {
                line = rest;
            }
        }
        if line.is_empty() {
            self.dispatch();
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &[][..]),
        };
        match field {
            b"event" => {
                self.event.clear();
                self.event.push_str(&String::from_utf8_lossy(value));
            }
            b"data" => {
                if self.data.len() + value.len() + 1 > MAX_EVENT_BYTES {
                    return Err(SseError::EventTooLarge {
                        limit: MAX_EVENT_BYTES,
                    });
                }
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(&String::from_utf8_lossy(value));
                self.has_data = true;
            }
            b"id" if !value.contains(&0) => {
                self.last_id = Some(String::from_utf8_lossy(value).into_owned());
            }
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                self.retry = std::str::from_utf8(value).ok().and_then(|s| s.parse().ok());
            }
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self) {
        if !self.has_data {
            self.event.clear();
            return;
        }
        self.has_data = false;
        self.ready.push_back(SseEvent {
            event: std::mem::take(&mut self.event),
            data: std::mem::take(&mut self.data),
            id: self.last_id.clone(),
            retry: self.retry.take(),
        });
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn all(input: &[u8]) -> Vec<SseEvent> {
        let mut p = SseParser::new();
        p.push(input).unwrap();
        std::iter::from_fn(|| p.next_event()).collect()
    }

    fn split(input: &[u8], cuts: &[usize]) -> Vec<SseEvent> {
        let mut p = SseParser::new();
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
        cuts.sort_unstable();
        let mut at = 0;
        let mut out = Vec::new();
        for c in cuts {
            p.push(&input[at..c]).unwrap();
            out.extend(std::iter::from_fn(|| p.next_event()));
            at = c;
        }
        p.push(&input[at..]).unwrap();
        out.extend(std::iter::from_fn(|| p.next_event()));
        out
    }

    #[test]
    fn fields_comments_and_defaults() {
        let evs = all(b": keep-alive\nevent: content_block_delta\ndata: {\"a\":1}\nid: 7\nretry: 1500\n\ndata\n\n");
        assert_eq!(evs.len(), 2);
        assert_eq!(evs[0].name(), "content_block_delta");
        assert_eq!(evs[0].data, "{\"a\":1}");
        assert_eq!(evs[0].id.as_deref(), Some("7"));
        assert_eq!(evs[0].retry, Some(1500));
        // A bare `data` line is a data field with an empty value; the id carries over.
        assert_eq!(evs[1].name(), "message");
        assert_eq!(evs[1].data, "");
        assert_eq!(evs[1].id.as_deref(), Some("7"));
        assert_eq!(evs[1].retry, None);
    }

    #[test]
    fn event_without_data_is_not_dispatched_and_its_type_resets() {
        let evs = all(b"event: ping\n\ndata: x\n\n");
        assert_eq!(evs.len(), 1);
        assert_eq!(evs[0].name(), "message");
    }

    #[test]
    fn crlf_cr_and_lf_line_ends_and_bom() {
        let evs = all(b"\xEF\xBB\xBFdata: a\r\n\r\ndata: b\r\rdata: c\n\n");
        let data: Vec<&str> = evs.iter().map(|e| e.data.as_str()).collect();
        assert_eq!(data, ["a", "b", "c"]);
    }

    #[test]
    fn no_space_after_colon_and_only_one_space_stripped() {
        let evs = all(b"data:x\n\ndata:  y\n\n");
        assert_eq!(evs[0].data, "x");
        assert_eq!(evs[1].data, " y");
    }

    #[test]
    fn unfinished_event_is_held_and_reported_partial() {
        let mut p = SseParser::new();
        p.push(b"data: [DONE]\n").unwrap();
        assert!(p.next_event().is_none());
        assert!(p.has_partial());
        p.push(b"\n").unwrap();
        assert_eq!(p.next_event().unwrap().data, "[DONE]");
        assert!(!p.has_partial());
    }

    #[test]
    fn overlong_line_is_an_error_not_unbounded_memory() {
        let mut p = SseParser::new();
        let big = vec![b'a'; 1024 * 1024];
        let mut err = None;
        for _ in 0..9 {
            if let Err(e) = p.push(&big) {
                err = Some(e);
                break;
            }
        }
        assert_eq!(
            err,
            Some(SseError::LineTooLong {
                limit: MAX_LINE_BYTES
            })
        );
        assert!(p.push(b"\n\n").is_err());
    }

    #[test]
    fn an_event_that_never_ends_is_an_error_not_unbounded_memory() {
        let mut p = SseParser::new();
        // Many short data lines and never the blank line that would dispatch them.
        let mut line = vec![b'a'; 64 * 1024];
        line.splice(0..0, *b"data: ");
        line.push(b'\n');
        let mut err = None;
        for _ in 0..(MAX_EVENT_BYTES / (64 * 1024) + 2) {
            if let Err(e) = p.push(&line) {
                err = Some(e);
                break;
            }
        }
        assert_eq!(
            err,
            Some(SseError::EventTooLarge {
                limit: MAX_EVENT_BYTES
            })
        );
        assert!(p.next_event().is_none());
        assert!(p.push(b"\n").is_err());
        // Just under the limit is still one event.
        let mut p = SseParser::new();
        for _ in 0..(MAX_EVENT_BYTES / (64 * 1024) - 1) {
            p.push(&line).unwrap();
        }
        p.push(b"\n").unwrap();
        assert!(
            p.next_event()
                .is_some_and(|e| e.data.len() < MAX_EVENT_BYTES)
        );
    }

    #[test]
    fn utf8_split_inside_a_character() {
        let input = "data: 你好，世界\n\n".as_bytes();
        for cut in 0..input.len() {
            assert_eq!(split(input, &[cut])[0].data, "你好，世界");
        }
    }

    fn stream_strategy() -> impl Strategy<Value = Vec<u8>> {
        let line = prop_oneof![
            "[a-z{}\":,\\[\\] 0-9é你]{0,12}".prop_map(|s| format!("data: {s}")),
            "[a-z_]{1,10}".prop_map(|s| format!("event: {s}")),
            "[0-9]{1,3}".prop_map(|s| format!("id: {s}")),
            "[0-9]{1,4}".prop_map(|s| format!("retry: {s}")),
            "[a-z ]{0,8}".prop_map(|s| format!(": {s}")),
            Just(String::new()),
        ];
        let end = prop_oneof![Just("\n"), Just("\r\n"), Just("\r")];
        proptest::collection::vec((line, end), 0..40).prop_map(|lines| {
            let mut out = Vec::new();
            for (l, e) in lines {
                out.extend_from_slice(l.as_bytes());
                out.extend_from_slice(e.as_bytes());
            }
            out
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Any split of an SSE byte stream into chunks yields the same events.
        #[test]
        fn any_split_yields_the_same_events(
            input in stream_strategy(),
            cuts in proptest::collection::vec(any::<usize>(), 0..12),
        ) {
            prop_assert_eq!(split(&input, &cuts), all(&input));
        }

        /// Byte-at-a-time feeding agrees with one-shot feeding.
        #[test]
        fn byte_at_a_time_matches(input in stream_strategy()) {
            let mut p = SseParser::new();
            let mut out = Vec::new();
            for b in &input {
                p.push(std::slice::from_ref(b)).unwrap();
                out.extend(std::iter::from_fn(|| p.next_event()));
            }
            prop_assert_eq!(out, all(&input));
        }
    }
}
