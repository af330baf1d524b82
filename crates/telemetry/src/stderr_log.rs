//! The server log on stderr, built once for both ways of installing telemetry.
//!
//! What it costs matters: a gateway writes at least one line per request (its access line), so
//! the layer is built to stay off the request's path where it can:
//!
//! - events of [`METRICS_ONLY_TARGET`] feed the metrics and never become log lines (a gateway
//!   answer's tenant usage is counted in `ripcord.tenant.tokens`; a second line per request
//!   told the operator nothing the metrics and the access line do not);
//! - colours (ANSI escapes) only when stderr is a terminal: a log collector reading a pipe or
//!   a file gets plain text, and formatting skips the escape codes;
//! - lines are handed to one writer thread, which writes whatever has queued up in a single
//!   `write`. The thread is woken only by the first line into an empty queue and then lets
//!   lines gather for [`BATCH_WINDOW`] (or until [`FLUSH_AT`] bytes wait), so under load a
//!   request pays for appending its line to a buffer, not for waking a thread and a system
//!   call each. A line reaches stderr at most `BATCH_WINDOW` after it was written; [`flush`]
//!   writes what is still queued, and the guards call it when the process stops;
//! - the queue is bounded ([`MAX_QUEUED`] bytes): when stderr does not keep up (a stalled pipe,
//!   a slow collector), a line that does not fit is dropped and counted ([`dropped_lines`]),
//!   and the next batch written says how many were lost. A stalled log costs at most that
//!   much memory, never the process;
//! - the layer formats events only, never spans. A formatting layer that sees spans writes
//!   every field of every span into text when the span opens and again on each `record`,
//!   whether or not a line is ever written under it: two spans of about twenty fields per
//!   request, the largest part of the log's cost in the gateway's profile. Every event
//!   ripcord writes carries the fields that say what it is about (`ripcord.link`,
//!   `error.type`, …), and the spans themselves go to the traces (OTLP). The filter's
//!   directives therefore select events by target and level; a directive naming a span
//!   (`[chain]=debug`) does not apply to the log;
//! - fields are written by [`PlainFields`]: the same text as `tracing_subscriber`'s default
//!   field formatter, without its detour through `Debug` (and its styling) for a value that
//!   needs no escaping. Formatting the access line's ten fields the default way cost about as
//!   much as scrubbing the line for keys did before that scan was made cheap.

use std::fmt;
use std::io::{self, Write as _};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use tracing::Metadata;
use tracing::field::{Field, Visit};
use tracing::subscriber::Interest;
use tracing_subscriber::Layer;
use tracing_subscriber::field::{RecordFields, VisitOutput as _};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::format::{DefaultVisitor, Writer};
use tracing_subscriber::layer::{Context, Filter};
use tracing_subscriber::registry::LookupSpan;

use crate::{RedactingWriter, SecretScrubber};

/// The `tracing` target of events that only feed metrics (never a log line).
pub const METRICS_ONLY_TARGET: &str = "ripcord::usage";

/// How long the writer thread lets lines gather after the first one before writing them.
pub const BATCH_WINDOW: Duration = Duration::from_millis(10);

/// Queued bytes that make the writer thread write at once, before the window ends.
pub const FLUSH_AT: usize = 64 * 1024;

/// Most bytes queued for stderr; a line beyond it is dropped and counted.
pub const MAX_QUEUED: usize = 4 * 1024 * 1024;

/// Lines dropped because the queue was full, since the process started.
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// Of those, the ones already reported in the log.
static REPORTED: AtomicU64 = AtomicU64::new(0);

/// Log lines dropped so far because stderr did not keep up (the queue held [`MAX_QUEUED`]).
pub fn dropped_lines() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Lines waiting for the writer thread; `written` is held while a batch is being written, so
/// batches reach stderr in the order they were queued.
struct Queue {
    lines: Mutex<Vec<u8>>,
    ready: Condvar,
    written: Mutex<()>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

static QUEUE: OnceLock<&'static Queue> = OnceLock::new();

/// The queue, with its writer thread started on first use (`None` if no thread could start:
/// lines are then written directly).
fn queue() -> Option<&'static Queue> {
    if let Some(q) = QUEUE.get() {
        return Some(q);
    }
    let q: &'static Queue = Box::leak(Box::new(Queue {
        lines: Mutex::new(Vec::new()),
        ready: Condvar::new(),
        written: Mutex::new(()),
    }));
    std::thread::Builder::new()
        .name("ripcord-log".into())
        .spawn(move || {
            loop {
                {
                    let mut lines = lock(&q.lines);
                    while lines.is_empty() {
                        lines = q.ready.wait(lines).unwrap_or_else(PoisonError::into_inner);
                    }
                    // Let the lines of the next few milliseconds join this write.
                    let _ = q
                        .ready
                        .wait_timeout_while(lines, BATCH_WINDOW, |l| l.len() < FLUSH_AT)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                write_queued(q);
            }
        })
        .ok()?;
    // Two first lines at once may start two threads; the queue that won serves (the other
    // thread waits on a queue nobody writes to).
    Some(QUEUE.get_or_init(|| q))
}

/// Writes what is queued now, in one write.
fn write_queued(q: &Queue) {
    let _order = lock(&q.written);
    let mut batch = std::mem::take(&mut *lock(&q.lines));
    let dropped = DROPPED.load(Ordering::Relaxed);
    let unreported = dropped.saturating_sub(REPORTED.swap(dropped, Ordering::Relaxed));
    if unreported > 0 {
        batch.extend_from_slice(
            format!(
                "ripcord: {unreported} log line(s) dropped: stderr did not keep up ({dropped} in all)\n"
            )
            .as_bytes(),
        );
    }
    if !batch.is_empty() {
        // A failed log write has nowhere to be reported.
        let _ = io::stderr().lock().write_all(&batch);
    }
}

/// Writes the lines still queued for stderr (the telemetry guards call it on drop).
pub fn flush() {
    if let Some(q) = QUEUE.get() {
        write_queued(q);
    }
}

/// A writer that queues what it is given for the writer thread.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct QueuedStderr;

impl io::Write for QueuedStderr {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        match queue() {
            Some(q) => {
                let mut lines = lock(&q.lines);
                let before = lines.len();
                if before.saturating_add(data.len()) > MAX_QUEUED {
                    // Bounded: a stalled stderr costs a counted line, not memory.
                    drop(lines);
                    DROPPED.fetch_add(1, Ordering::Relaxed);
                    return Ok(data.len());
                }
                lines.extend_from_slice(data);
                // The writer waits for a first line, or (in its window) for a full buffer;
                // any other line needs no wake-up.
                let wake = before == 0 || (before < FLUSH_AT && lines.len() >= FLUSH_AT);
                drop(lines);
                if wake {
                    q.ready.notify_one();
                }
                Ok(data.len())
            }
            None => io::stderr().write(data),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The stderr log layer: lines scrubbed by `redactor`, filtered by `filter` (an `EnvFilter`
/// directive string), without [`METRICS_ONLY_TARGET`].
pub(crate) fn layer<S>(
    redactor: SecretScrubber,
    filter: &str,
) -> Result<impl Layer<S> + Send + Sync + 'static, crate::TelemetryError>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    let directives = format!("{filter},{},{METRICS_ONLY_TARGET}=off", crate::SILENCED);
    let filter = tracing_subscriber::EnvFilter::try_new(&directives)
        .map_err(|e| crate::TelemetryError::config("filter", format!("{filter:?}: {e}")))?;
    let ansi = std::io::IsTerminal::is_terminal(&io::stderr());
    Ok(tracing_subscriber::fmt::layer()
        .with_ansi(ansi)
        .fmt_fields(PlainFields)
        .with_writer(RedactingWriter::new(|| QueuedStderr, redactor))
        .with_filter(EventsOnly(filter)))
}

/// A per-layer filter that lets no span through and decides events with the wrapped filter
/// (see the module docs for why the log formats no span).
struct EventsOnly<F>(F);

impl<S, F: Filter<S>> Filter<S> for EventsOnly<F> {
    fn enabled(&self, meta: &Metadata<'_>, cx: &Context<'_, S>) -> bool {
        meta.is_event() && self.0.enabled(meta, cx)
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        if meta.is_span() {
            Interest::never()
        } else {
            self.0.callsite_enabled(meta)
        }
    }

    fn event_enabled(&self, event: &tracing::Event<'_>, cx: &Context<'_, S>) -> bool {
        self.0.event_enabled(event, cx)
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        self.0.max_level_hint()
    }
}

/// The log's field formatter: `name=value` pairs separated by spaces, the message bare,
/// strings quoted — exactly what `tracing_subscriber`'s `DefaultFields` writes. A string of
/// printable ASCII, an integer or a bool (almost every field ripcord writes) is written
/// directly; anything else, and every field when colours are on, goes through
/// `DefaultVisitor`, so escaping and styling stay the default's.
#[derive(Debug, Clone, Copy, Default)]
pub struct PlainFields;

impl<'w> FormatFields<'w> for PlainFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'w>, fields: R) -> fmt::Result {
        let mut v = PlainVisitor {
            writer,
            is_empty: true,
            result: Ok(()),
        };
        fields.record(&mut v);
        v.result
    }
}

struct PlainVisitor<'w> {
    writer: Writer<'w>,
    is_empty: bool,
    result: fmt::Result,
}

/// Bytes that `Debug` and the message's escaping write unchanged.
fn plain_text(s: &str) -> bool {
    s.bytes()
        .all(|b| (0x20..=0x7e).contains(&b) && b != b'"' && b != b'\\')
}

impl PlainVisitor<'_> {
    /// True when this field may take the direct path.
    fn direct(&self, field: &Field) -> bool {
        let name = field.name();
        self.result.is_ok()
            && !self.writer.has_ansi_escapes()
            && !name.starts_with("r#")
            && !name.starts_with("log.")
    }

    fn pad(&mut self) -> fmt::Result {
        if self.is_empty {
            self.is_empty = false;
            Ok(())
        } else {
            self.writer.write_char(' ')
        }
    }

    /// `name=` then `value` as `Display` writes it (the same as `Debug` for the callers).
    fn write_direct(&mut self, field: &Field, value: &dyn fmt::Display) {
        self.result = self.pad().and_then(|()| {
            self.writer.write_str(field.name())?;
            self.writer.write_char('=')?;
            write!(self.writer, "{value}")
        });
    }

    /// A string as `Debug` writes it when it needs no escaping: quoted; the message bare.
    fn write_str_direct(&mut self, field: &Field, value: &str) {
        self.result = self.pad().and_then(|()| {
            if field.name() == "message" {
                return self.writer.write_str(value);
            }
            self.writer.write_str(field.name())?;
            self.writer.write_str("=\"")?;
            self.writer.write_str(value)?;
            self.writer.write_char('"')
        });
    }

    /// An integer or a bool: `Display` and `Debug` write the same text.
    fn scalar<T: fmt::Display + fmt::Debug>(&mut self, field: &Field, value: T) {
        if self.direct(field) {
            self.write_direct(field, &value);
        } else {
            self.default_field(field, &value);
        }
    }

    /// The field as `DefaultVisitor` writes it.
    fn default_field(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.with_default(field, |d| d.record_debug(field, value));
    }

    fn with_default(&mut self, field: &Field, record: impl FnOnce(&mut DefaultVisitor<'_>)) {
        if self.result.is_err() {
            return;
        }
        let mut d = DefaultVisitor::new(self.writer.by_ref(), self.is_empty);
        record(&mut d);
        self.result = d.finish();
        // The default skips `log.*` fields (log-crate metadata) without writing anything.
        if !field.name().starts_with("log.") {
            self.is_empty = false;
        }
    }
}

impl Visit for PlainVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if self.direct(field) && plain_text(value) {
            self.write_str_direct(field, value);
        } else if field.name() == "message" {
            self.default_field(field, &format_args!("{value}"));
        } else {
            self.default_field(field, &value);
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.scalar(field, value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.scalar(field, value);
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.scalar(field, value);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.default_field(field, value);
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        // The default writes the error's sources too.
        self.with_default(field, |d| d.record_error(field, value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_writer::SharedBuf;

    #[derive(Debug)]
    struct Outer(std::io::Error);

    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("outer failed")
        }
    }

    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    /// Every kind of field, plain and needing escapes.
    fn events() {
        tracing::info!(
            target: "ripcord::access",
            request_id = "req_0123",
            path = "/v1/chat/completions",
            status = 200u64,
            delta = -3i64,
            ok = true,
            ratio = 1.0f64,
            quoted = "say \"hi\"",
            backslash = "a\\b",
            control = "bell\x07 esc\x1b",
            unicode = "naïve 日本",
            shown = %"display, not debug",
            r#type = "raw name",
            "access"
        );
        tracing::info!(message = "a str message", link = "primary");
        tracing::warn!(message = "with \"quotes\"\x1b[31m", n = 1u64);
        let err = Outer(std::io::Error::other("inner cause"));
        tracing::error!(error = &err as &(dyn std::error::Error + 'static), "failed");
        tracing::info!(only = "no message");
    }

    fn render(plain: bool, ansi: bool) -> String {
        let buf = SharedBuf::default();
        let out = buf.clone();
        let builder = tracing_subscriber::fmt()
            .with_writer(move || buf.clone())
            .without_time()
            .with_ansi(ansi);
        if plain {
            tracing::subscriber::with_default(builder.fmt_fields(PlainFields).finish(), events);
        } else {
            tracing::subscriber::with_default(builder.finish(), events);
        }
        out.text()
    }

    #[test]
    fn plain_fields_write_what_the_default_formatter_writes() {
        for ansi in [false, true] {
            let plain = render(true, ansi);
            assert_eq!(plain, render(false, ansi), "ansi {ansi}");
            assert_eq!(plain.lines().count(), 5, "{plain}");
        }
        let plain = render(true, false);
        assert!(
            plain.contains(" ripcord::access: access request_id=\"req_0123\" path=\"/v1/chat/completions\" status=200 delta=-3 ok=true ratio=1.0 "),
            "{plain}"
        );
    }
}
