//! The last line of defence against API keys in telemetry.
//!
//! ripcord's own code never puts a key in a span, an event or an error (keys live in
//! `secrecy::SecretString` and adapters build errors from vendor bodies, never from request
//! headers). But spans also carry what *other* code records — a user's span field, a vendor's
//! error text that echoes a key — so everything ripcord-telemetry exports passes through a
//! [`SecretScrubber`] first: span names, attribute values, event attributes, status messages, and the
//! lines of the optional log output. It replaces
//!
//! - every secret registered with [`crate::TelemetryBuilder::redact`] (exact match), and
//! - anything shaped like a vendor key or bearer token: `sk-…`, `sk-ant-…`, `Bearer …`,
//!   `api-key=…` / `api_key: …` / `x-api-key …` style pairs,
//!
//! with `[REDACTED]`.

use std::borrow::Cow;
use std::fmt;
use std::io;
use std::sync::Arc;

use secrecy::{ExposeSecret, SecretString};

/// What a redacted value is replaced with.
pub const REDACTED: &str = "[REDACTED]";

/// Shortest run after a key prefix that is treated as a key (shorter runs are ordinary words).
const MIN_KEY_TAIL: usize = 16;

/// Scrubs secrets out of text. Cheap to clone (shared).
///
/// # Examples
///
/// ```
/// use ripcord_telemetry::SecretScrubber;
/// let r = SecretScrubber::new(["my-collector-token-123"]);
/// assert_eq!(r.scrub("auth my-collector-token-123 ok"), "auth [REDACTED] ok");
/// assert_eq!(r.scrub("key sk-proj-abcdefghijklmnopqrstuvwxyz"), "key [REDACTED]");
/// assert_eq!(r.scrub("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9"), "Authorization: Bearer [REDACTED]");
/// assert_eq!(r.scrub("nothing to see"), "nothing to see");
/// ```
#[derive(Clone, Default)]
pub struct SecretScrubber {
    secrets: Arc<Vec<SecretString>>,
}

impl fmt::Debug for SecretScrubber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretScrubber")
            .field("secrets", &self.secrets.len())
            .finish()
    }
}

fn is_key_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

fn is_token_char(b: u8) -> bool {
    is_key_char(b) || matches!(b, b'.' | b'~' | b'+' | b'/' | b'=')
}

/// True when `b[i..]` starts with `pat` (lowercase ASCII), ignoring ASCII case.
fn starts_with_ci(b: &[u8], i: usize, pat: &[u8]) -> bool {
    b.get(i..i + pat.len())
        .is_some_and(|w| w.eq_ignore_ascii_case(pat))
}

/// The key-value names whose value is a credential (`api-key=…`, `x-api-key: …`, …); all start
/// with `a`.
const KEY_NAMES: [&[u8]; 5] = [
    b"api-key",
    b"api_key",
    b"apikey",
    b"access_token",
    b"access-token",
];

/// Finds the next key-shaped run at or after `from`: `(start, end)` of the part to replace.
///
/// Every shape starts with an ASCII `s`, `b` or `a` in either case, so the scan looks at one
/// byte per position and tries the shapes only where one of those letters stands (a log line
/// is mostly other bytes; this runs on every line the gateway writes). A match starts at an
/// ASCII byte, so it is always on a `char` boundary.
fn next_pattern(s: &str, from: usize) -> Option<(usize, usize)> {
    let b = s.as_bytes();
    for i in from..b.len() {
        let first = b[i] | 0x20;
        if !matches!(first, b's' | b'b' | b'a') {
            continue;
        }
        let word_start = i == 0 || !is_key_char(b[i - 1]);
        match first {
            // `sk-…` keys (OpenAI `sk-`, `sk-proj-`, Anthropic `sk-ant-`, DeepSeek, Moonshot
            // …), only at a word boundary.
            b's' if word_start && starts_with_ci(b, i, b"sk-") => {
                let end = (i..b.len())
                    .find(|&j| !is_key_char(b[j]))
                    .unwrap_or(b.len());
                if end - i >= 3 + MIN_KEY_TAIL {
                    return Some((i, end));
                }
            }
            // `Bearer <token>`.
            b'b' if word_start && starts_with_ci(b, i, b"bearer ") => {
                let start = i + "bearer ".len();
                let end = (start..b.len())
                    .find(|&j| !is_token_char(b[j]))
                    .unwrap_or(b.len());
                if end - start >= 8 {
                    return Some((start, end));
                }
            }
            // `api-key=…`, `api_key: …`, `x-api-key …`, `apikey=…`, `access_token=…`.
            b'a' if i == 0 || !b[i - 1].is_ascii_alphanumeric() => {
                for name in KEY_NAMES {
                    if !starts_with_ci(b, i, name) {
                        continue;
                    }
                    let mut j = i + name.len();
                    // an optional closing quote of a JSON key, then separators
                    while j < b.len() && matches!(b[j], b'"' | b'\'' | b':' | b'=' | b' ') {
                        j += 1;
                    }
                    let end = (j..b.len())
                        .find(|&k| !is_token_char(b[k]))
                        .unwrap_or(b.len());
                    if j > i + name.len() && end - j >= 8 {
                        return Some((j, end));
                    }
                }
            }
            _ => {}
        }
    }
    None
}

impl SecretScrubber {
    /// A redactor for these exact secrets (plus the built-in key patterns). Empty strings are
    /// ignored.
    pub fn new<I, S>(secrets: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let secrets = secrets
            .into_iter()
            .map(Into::into)
            .filter(|s: &String| !s.is_empty())
            .map(SecretString::from)
            .collect();
        SecretScrubber {
            secrets: Arc::new(secrets),
        }
    }

    /// A redactor for these secrets, already wrapped.
    pub fn from_secrets(secrets: Vec<SecretString>) -> Self {
        SecretScrubber {
            secrets: Arc::new(
                secrets
                    .into_iter()
                    .filter(|s| !s.expose_secret().is_empty())
                    .collect(),
            ),
        }
    }

    /// `text` with every secret and key-shaped token replaced by [`REDACTED`]; borrowed when
    /// nothing had to change.
    pub fn scrub<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out: Cow<'a, str> = Cow::Borrowed(text);
        for s in self.secrets.iter() {
            let s = s.expose_secret();
            if out.contains(s) {
                out = Cow::Owned(out.replace(s, REDACTED));
            }
        }
        // The first match found by the check is the loop's first, not looked for again.
        let mut next = next_pattern(&out, 0);
        if next.is_none() {
            return out;
        }
        let mut result = String::with_capacity(out.len());
        let mut pos = 0;
        while let Some((start, end)) = next {
            result.push_str(&out[pos..start]);
            result.push_str(REDACTED);
            pos = end;
            next = next_pattern(&out, pos);
        }
        result.push_str(&out[pos..]);
        Cow::Owned(result)
    }

    /// True when `text` holds nothing to redact.
    pub fn is_clean(&self, text: &str) -> bool {
        matches!(self.scrub(text), Cow::Borrowed(_))
    }
}

/// A [`tracing_subscriber::fmt::MakeWriter`] that scrubs every log line through a
/// [`SecretScrubber`] before writing it to the inner writer.
///
/// # Examples
///
/// ```
/// use ripcord_telemetry::{RedactingWriter, SecretScrubber};
/// let subscriber = tracing_subscriber::fmt()
///     .with_writer(RedactingWriter::new(std::io::stderr, SecretScrubber::new(["hunter2-token"])))
///     .finish();
/// # drop(subscriber);
/// ```
#[derive(Debug, Clone)]
pub struct RedactingWriter<M> {
    inner: M,
    redactor: SecretScrubber,
}

impl<M> RedactingWriter<M> {
    /// Wraps a writer factory.
    pub fn new(inner: M, redactor: SecretScrubber) -> Self {
        RedactingWriter { inner, redactor }
    }
}

/// One log line being written: buffered, scrubbed and written on drop (the fmt layer writes
/// a whole event per writer).
#[derive(Debug)]
pub struct RedactingLine<W: io::Write> {
    inner: W,
    redactor: SecretScrubber,
    buf: Vec<u8>,
}

impl<W: io::Write> io::Write for RedactingLine<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.write_out()?;
        self.inner.flush()
    }
}

impl<W: io::Write> RedactingLine<W> {
    fn write_out(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let text = String::from_utf8_lossy(&self.buf);
        let clean = self.redactor.scrub(&text);
        self.inner.write_all(clean.as_bytes())?;
        self.buf.clear();
        Ok(())
    }
}

impl<W: io::Write> Drop for RedactingLine<W> {
    fn drop(&mut self) {
        // A failed log write has nowhere to be reported.
        let _ = self.write_out();
    }
}

impl<'a, M> tracing_subscriber::fmt::MakeWriter<'a> for RedactingWriter<M>
where
    M: tracing_subscriber::fmt::MakeWriter<'a>,
{
    type Writer = RedactingLine<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        RedactingLine {
            inner: self.inner.make_writer(),
            redactor: self.redactor.clone(),
            buf: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default scrubber turns each input into its wanted text; the input names a failure.
    fn assert_default_scrubs(cases: &[(&str, &str)]) {
        let r = SecretScrubber::default();
        for &(input, want) in cases {
            assert_eq!(r.scrub(input), want, "{input}");
        }
    }

    #[test]
    fn registered_secrets_are_replaced_everywhere() {
        let r = SecretScrubber::new(["tok-1234", ""]);
        assert_eq!(
            r.scrub("a tok-1234 b tok-1234"),
            "a [REDACTED] b [REDACTED]"
        );
        assert!(matches!(r.scrub("clean text"), Cow::Borrowed(_)));
    }

    #[test]
    fn vendor_key_shapes_are_replaced() {
        assert_default_scrubs(&[
            ("sk-proj-AbCdEfGhIjKlMnOpQrStUv", "[REDACTED]"),
            (
                "key=sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123 end",
                "key=[REDACTED] end",
            ),
            (
                "\"Authorization\": \"Bearer abc.def.ghi\"",
                "\"Authorization\": \"Bearer [REDACTED]\"",
            ),
            ("api-key: 0123456789abcdef0123", "api-key: [REDACTED]"),
            (
                "{\"api_key\":\"ABCDEFGH12345678\"}",
                "{\"api_key\":\"[REDACTED]\"}",
            ),
            (
                "https://x.example/v1?access_token=abcdefgh12345678&x=1",
                "https://x.example/v1?access_token=[REDACTED]&x=1",
            ),
        ]);
    }

    #[test]
    fn shapes_match_in_any_case_and_beside_other_scripts() {
        assert_default_scrubs(&[
            ("SK-PROJ-ABCDEFGHIJKLMNOPQRST", "[REDACTED]"),
            (
                "Authorization: BEARER abcdefgh12",
                "Authorization: BEARER [REDACTED]",
            ),
            ("X-Api-Key: 0123456789ABCDEF", "X-Api-Key: [REDACTED]"),
            ("ACCESS-TOKEN=abcdefgh12345678", "ACCESS-TOKEN=[REDACTED]"),
            (
                "日本語 sk-abcdefghijklmnopqrstu テキスト",
                "日本語 [REDACTED] テキスト",
            ),
            ("é apikey=abcdefgh12345678 é", "é apikey=[REDACTED] é"),
            (
                "two: sk-abcdefghijklmnopqrstu and Bearer abcdefgh12",
                "two: [REDACTED] and Bearer [REDACTED]",
            ),
        ]);
    }

    #[test]
    fn ordinary_words_are_left_alone() {
        let r = SecretScrubber::default();
        for s in [
            "task-runner",
            "ask-me anything",
            "sk-short",
            "desk-lamp-and-more-words-here",
            "the bearer of bad news",
            "chat gpt-4o",
            "an api-key was rejected",
            "日本語 sk- テキスト",
        ] {
            assert!(r.is_clean(s), "{s} -> {}", r.scrub(s));
        }
    }

    #[test]
    fn log_lines_are_scrubbed_before_they_reach_the_writer() {
        use std::io::Write;
        let sink = crate::test_writer::SharedBuf::default();
        let r = SecretScrubber::new(["secret-value-1"]);
        {
            let mut line = RedactingLine {
                inner: sink.clone(),
                redactor: r,
                buf: Vec::new(),
            };
            line.write_all(b"got secret-").unwrap();
            line.write_all(b"value-1 and sk-abcdefghijklmnopqrstu\n")
                .unwrap();
        }
        assert_eq!(sink.text(), "got [REDACTED] and [REDACTED]\n");
    }
}
