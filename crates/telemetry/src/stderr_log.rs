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
//! - the layer formats events only, never spans. A formatting layer that sees spans writes
//!   every field of every span into text when the span opens and again on each `record`,
//!   whether or not a line is ever written under it: two spans of about twenty fields per
//!   request, the largest part of the log's cost in the gateway's profile. Every event
//!   ripcord writes carries the fields that say what it is about (`ripcord.link`,
//!   `error.type`, …), and the spans themselves go to the traces (OTLP). The filter's
//!   directives therefore select events by target and level; a directive naming a span
//!   (`[chain]=debug`) does not apply to the log.

use std::io::{self, Write as _};
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use tracing::Metadata;
use tracing::subscriber::Interest;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::{Context, Filter};
use tracing_subscriber::registry::LookupSpan;

use crate::{RedactingWriter, SecretScrubber};

/// The `tracing` target of events that only feed metrics (never a log line).
pub const METRICS_ONLY_TARGET: &str = "ripcord::usage";

/// How long the writer thread lets lines gather after the first one before writing them.
pub const BATCH_WINDOW: Duration = Duration::from_millis(10);

/// Queued bytes that make the writer thread write at once, before the window ends.
pub const FLUSH_AT: usize = 64 * 1024;

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
    let batch = std::mem::take(&mut *lock(&q.lines));
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
