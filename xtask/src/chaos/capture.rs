//! The key scan: a `tracing` layer that reads every field of every event and span at debug
//! level and above — from ripcord, reqwest, the fake servers, anything in the process — and
//! remembers where one of the run's API keys showed up, plus a scan of the report texts.
//!
//! Only the *place* of a leak is kept (event or span name, target, field) and the provider
//! whose key it was, never the text that carried it: a report of a leak must not leak.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use super::record::Leak;

/// Shortest text treated as a key (shorter "keys" would match by accident).
const MIN_KEY_LEN: usize = 8;

/// The keys to look for, and what was found.
#[derive(Debug, Default)]
pub(crate) struct KeySink {
    /// `(whose, key)`.
    keys: Vec<(String, String)>,
    scanned: AtomicU64,
    leaks: Mutex<Vec<Leak>>,
}

impl KeySink {
    /// A sink for these `(provider, key)` pairs; keys shorter than eight characters are ignored.
    pub(crate) fn new(keys: Vec<(String, String)>) -> Arc<KeySink> {
        Arc::new(KeySink {
            keys: keys
                .into_iter()
                .filter(|(_, k)| k.len() >= MIN_KEY_LEN)
                .collect(),
            ..KeySink::default()
        })
    }

    /// How many keys it looks for.
    pub(crate) fn key_count(&self) -> usize {
        self.keys.len()
    }

    fn whose(&self, text: &str) -> Option<&str> {
        self.keys
            .iter()
            .find(|(_, k)| text.contains(k.as_str()))
            .map(|(who, _)| who.as_str())
    }

    /// Scans a text (a report file, the terminal table) named `place`.
    pub(crate) fn scan_text(&self, place: &str, text: &str) {
        self.scanned.fetch_add(1, Ordering::Relaxed);
        if let Some(who) = self.whose(text) {
            self.leak(place.to_owned(), who.to_owned());
        }
    }

    fn leak(&self, place: String, key_of: String) {
        let mut leaks = self.leaks.lock().unwrap_or_else(PoisonError::into_inner);
        let leak = Leak { place, key_of };
        if !leaks.contains(&leak) {
            leaks.push(leak);
        }
    }

    /// What was scanned and found since the last call, and starts over.
    pub(crate) fn take(&self) -> (u64, Vec<Leak>) {
        let scanned = self.scanned.swap(0, Ordering::Relaxed);
        let leaks = std::mem::take(&mut *self.leaks.lock().unwrap_or_else(PoisonError::into_inner));
        (scanned, leaks)
    }
}

/// The layer; add it to a `tracing_subscriber::registry()` with a debug-level filter.
#[derive(Debug, Clone)]
pub(crate) struct KeyScanLayer {
    sink: Arc<KeySink>,
}

impl KeyScanLayer {
    pub(crate) fn new(sink: &Arc<KeySink>) -> KeyScanLayer {
        KeyScanLayer {
            sink: Arc::clone(sink),
        }
    }

    fn scan(&self, what: &str, meta: &tracing::Metadata<'_>, visit: impl FnOnce(&mut Scan<'_>)) {
        self.sink.scanned.fetch_add(1, Ordering::Relaxed);
        let mut scan = Scan {
            sink: &self.sink,
            found: Vec::new(),
            buf: String::new(),
        };
        visit(&mut scan);
        for (field, who) in scan.found {
            self.sink.leak(
                format!(
                    "{what} {:?} (target {}), field {field}",
                    meta.name(),
                    meta.target()
                ),
                who,
            );
        }
    }
}

/// Visits fields, formatting each one and checking it for keys.
struct Scan<'a> {
    sink: &'a KeySink,
    found: Vec<(String, String)>,
    buf: String,
}

impl Scan<'_> {
    fn check(&mut self, field: &Field, text: &str) {
        if let Some(who) = self.sink.whose(text) {
            self.found.push((field.name().to_owned(), who.to_owned()));
        }
    }
}

impl Visit for Scan<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.check(field, value);
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        // The whole chain of causes, as a log line would show it.
        let mut text = value.to_string();
        let mut source = value.source();
        while let Some(s) = source {
            text.push_str(": ");
            text.push_str(&s.to_string());
            source = s.source();
        }
        self.check(field, &text);
        self.record_debug(field, &value);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        use std::fmt::Write as _;
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        let _ = write!(buf, "{value:?}");
        self.check(field, &buf);
        self.buf = buf;
    }
}

impl<S> Layer<S> for KeyScanLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, _id: &Id, _ctx: Context<'_, S>) {
        self.scan("span", attrs.metadata(), |s| attrs.record(s));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(meta) = ctx.metadata(id) else {
            // No metadata for the span: scan anyway, naming it by its id.
            self.sink.scanned.fetch_add(1, Ordering::Relaxed);
            let mut scan = Scan {
                sink: &self.sink,
                found: Vec::new(),
                buf: String::new(),
            };
            values.record(&mut scan);
            for (field, who) in scan.found {
                self.sink
                    .leak(format!("span {id:?} (recorded later), field {field}"), who);
            }
            return;
        };
        self.scan("span", meta, |s| values.record(s));
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        self.scan("event", event.metadata(), |s| event.record(s));
    }
}

#[cfg(test)]
mod tests {
    use tracing_subscriber::filter::LevelFilter;
    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    #[test]
    fn finds_keys_in_events_spans_and_texts_and_names_only_the_place() {
        let key = "sk-chaos-primary-0123456789abcdef";
        let sink = KeySink::new(vec![
            ("primary".into(), key.into()),
            ("short".into(), "abc".into()),
        ]);
        assert_eq!(sink.key_count(), 1);
        let subscriber = tracing_subscriber::registry()
            .with(KeyScanLayer::new(&sink).with_filter(LevelFilter::DEBUG));
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(status = 401, "vendor said no");
            tracing::debug!(header = %format!("Bearer {key}"), "sending");
            tracing::trace!(header = key, "too verbose to be scanned");
            let span = tracing::info_span!("call", auth = tracing::field::Empty);
            span.record("auth", format!("x-api-key: {key}").as_str());
            let e = std::io::Error::other(format!("echoed {key}"));
            tracing::warn!(error = &e as &(dyn std::error::Error + 'static), "failed");
        });
        sink.scan_text("report.json", "{\"ok\": true}");
        sink.scan_text("report.html", &format!("<p>{key}</p>"));
        let (scanned, leaks) = sink.take();
        // Three events at debug and above (the trace one is filtered out), a span, its later
        // record, and two texts.
        assert_eq!(scanned, 7);
        let places: Vec<&str> = leaks.iter().map(|l| l.place.as_str()).collect();
        assert_eq!(places.len(), 4, "{places:?}");
        assert!(places[0].starts_with("event") && places[0].ends_with("field header"));
        assert!(places[1].starts_with("span \"call\"") && places[1].ends_with("field auth"));
        assert!(places[2].ends_with("field error"));
        assert_eq!(places[3], "report.html");
        assert!(leaks.iter().all(|l| l.key_of == "primary"));
        assert!(leaks.iter().all(|l| !l.place.contains(key)));
        assert_eq!(sink.take(), (0, Vec::new()));
    }
}
