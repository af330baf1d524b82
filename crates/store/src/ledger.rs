//! The ledger's writer: rows go in through a bounded channel, off the request path, and are
//! written in batches.
//!
//! [`Ledger::record`] never waits: it `try_send`s a call's rows, and when the channel is full
//! the rows are counted as dropped ([`LedgerCounts::dropped_full`]). One writer task collects
//! rows and writes a batch when it holds [`LedgerOptions::max_batch`] rows or
//! [`LedgerOptions::flush_interval`] has passed (250 ms by default), so a row reaches the
//! database within about one interval plus one write: that is the bound on what a `kill -9`
//! can lose.
//!
//! When a write fails (the database is down or refuses), the batch goes to the spool, a bounded
//! JSON-lines file ([`LedgerOptions::spool_path`], [`LedgerOptions::spool_max_bytes`]); rows past
//! its cap are counted as dropped. While the spool holds rows, the writer retries the database
//! at most every [`LedgerOptions::retry_interval`], spooling new batches in between, and once a
//! retry succeeds it replays the spool and removes it. Rows carry their own ids, so nothing is
//! written twice. [`LedgerTask::shutdown`] stops taking rows, writes what is queued (or spools
//! it) and returns.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};

use crate::db::Store;
use crate::error::StoreError;
use crate::row::LedgerRow;
use crate::spool::Spool;

/// How the ledger buffers and writes.
#[derive(Debug, Clone)]
pub struct LedgerOptions {
    /// Calls the channel holds before [`Ledger::record`] drops (default 8192).
    pub channel_capacity: usize,
    /// Rows written in one batch at most (default 512).
    pub max_batch: usize,
    /// Longest a row waits before its batch is written (default 250 ms).
    pub flush_interval: Duration,
    /// Longest one database write may take before the batch is spooled (default 2 s).
    pub write_timeout: Duration,
    /// How often the writer tries the database again while it is failing (default 1 s).
    pub retry_interval: Duration,
    /// The spool file.
    pub spool_path: PathBuf,
    /// The spool's cap in bytes (default 64 MiB).
    pub spool_max_bytes: u64,
}

impl LedgerOptions {
    /// The defaults, spooling to `spool_path`.
    pub fn new(spool_path: PathBuf) -> Self {
        LedgerOptions {
            channel_capacity: 8192,
            max_batch: 512,
            flush_interval: Duration::from_millis(250),
            write_timeout: Duration::from_secs(2),
            retry_interval: Duration::from_secs(1),
            spool_path,
            spool_max_bytes: 64 * 1024 * 1024,
        }
    }
}

/// What the ledger did, as counters (rows).
#[derive(Debug, Default)]
pub struct LedgerStats {
    written: AtomicU64,
    spooled: AtomicU64,
    replayed: AtomicU64,
    dropped_full: AtomicU64,
    dropped_spool: AtomicU64,
    dropped_corrupt: AtomicU64,
    write_failures: AtomicU64,
}

/// A copy of [`LedgerStats`] at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct LedgerCounts {
    /// Rows written to the database (replayed ones included).
    pub written: u64,
    /// Rows put in the spool.
    pub spooled: u64,
    /// Rows written from the spool after an outage.
    pub replayed: u64,
    /// Rows dropped because the channel was full (or the writer had stopped).
    pub dropped_full: u64,
    /// Rows dropped because the spool was at its cap, or could not be written.
    pub dropped_spool: u64,
    /// Spool lines that did not parse when replayed.
    pub dropped_corrupt: u64,
    /// Database writes that failed.
    pub write_failures: u64,
}

impl LedgerStats {
    /// The counters now.
    pub fn counts(&self) -> LedgerCounts {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        LedgerCounts {
            written: g(&self.written),
            spooled: g(&self.spooled),
            replayed: g(&self.replayed),
            dropped_full: g(&self.dropped_full),
            dropped_spool: g(&self.dropped_spool),
            dropped_corrupt: g(&self.dropped_corrupt),
            write_failures: g(&self.write_failures),
        }
    }
}

enum Msg {
    Rows(Vec<LedgerRow>),
    Flush(oneshot::Sender<()>),
}

/// The handle the gateway records through (cheap to clone).
#[derive(Debug, Clone)]
pub struct Ledger {
    tx: mpsc::Sender<Msg>,
    stats: Arc<LedgerStats>,
}

impl std::fmt::Debug for Msg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Msg::Rows(r) => write!(f, "Rows({})", r.len()),
            Msg::Flush(_) => f.write_str("Flush"),
        }
    }
}

impl Ledger {
    /// Starts the writer task on `store`. The spool is opened first, so rows a previous run
    /// spooled are replayed once the database answers.
    ///
    /// # Errors
    ///
    /// [`StoreError::Spool`] when the spool's directory cannot be made or its file read.
    pub async fn start(
        store: Store,
        options: LedgerOptions,
    ) -> Result<(Ledger, LedgerTask), StoreError> {
        let spool = Spool::open(options.spool_path.clone(), options.spool_max_bytes).await?;
        let (tx, rx) = mpsc::channel(options.channel_capacity.max(1));
        let stats = Arc::new(LedgerStats::default());
        let writer = Writer {
            store,
            spool,
            stats: Arc::clone(&stats),
            batch: Vec::new(),
            failing_since: None,
            options,
        };
        let (close_tx, close_rx) = oneshot::channel();
        let handle = tokio::spawn(writer.run(rx, close_rx));
        Ok((
            Ledger { tx, stats },
            LedgerTask {
                close: Some(close_tx),
                handle: Some(handle),
            },
        ))
    }

    /// Queues a call's rows without waiting; when the channel is full they are counted as
    /// dropped.
    pub fn record(&self, rows: Vec<LedgerRow>) {
        let n = rows.len() as u64;
        if self.tx.try_send(Msg::Rows(rows)).is_err() {
            self.stats.dropped_full.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Waits until everything queued before this call was written or spooled.
    pub async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        if self.tx.send(Msg::Flush(tx)).await.is_ok() {
            let _ = rx.await;
        }
    }

    /// The counters.
    pub fn stats(&self) -> &LedgerStats {
        &self.stats
    }
}

/// The writer task's owner: [`shutdown`](LedgerTask::shutdown) drains and stops it.
#[derive(Debug)]
pub struct LedgerTask {
    close: Option<oneshot::Sender<()>>,
    handle: Option<JoinHandle<()>>,
}

impl LedgerTask {
    /// Stops taking rows, writes (or spools) everything queued, and waits for the writer.
    pub async fn shutdown(mut self) {
        if let Some(c) = self.close.take() {
            let _ = c.send(());
        }
        if let Some(h) = self.handle.take()
            && let Err(e) = h.await
        {
            tracing::error!(target: "ripcord::ledger", error = %e, "the ledger writer ended abnormally");
        }
    }
}

impl Drop for LedgerTask {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            h.abort();
        }
    }
}

struct Writer {
    store: Store,
    spool: Spool,
    stats: Arc<LedgerStats>,
    batch: Vec<LedgerRow>,
    /// When the database last failed, while it has not answered since.
    failing_since: Option<Instant>,
    options: LedgerOptions,
}

impl Writer {
    async fn run(mut self, mut rx: mpsc::Receiver<Msg>, mut close: oneshot::Receiver<()>) {
        let mut tick = tokio::time::interval(self.options.flush_interval);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                msg = rx.recv() => match msg {
                    Some(Msg::Rows(rows)) => {
                        self.batch.extend(rows);
                        if self.batch.len() >= self.options.max_batch {
                            self.flush().await;
                        }
                    }
                    Some(Msg::Flush(ack)) => {
                        self.flush().await;
                        let _ = ack.send(());
                    }
                    None => break,
                },
                _ = tick.tick() => self.flush().await,
                _ = &mut close => break,
            }
        }
        rx.close();
        while let Some(msg) = rx.recv().await {
            match msg {
                Msg::Rows(rows) => self.batch.extend(rows),
                Msg::Flush(ack) => {
                    let _ = ack.send(());
                }
            }
        }
        // At shutdown the database gets one more try even inside the retry interval.
        self.failing_since = None;
        self.flush().await;
    }

    /// Writes the spool (when it holds rows) and then the batch, or spools the batch.
    async fn flush(&mut self) {
        if self.spool.has_rows() && !self.replay().await {
            let batch = std::mem::take(&mut self.batch);
            self.spool_rows(&batch).await;
            return;
        }
        if self.batch.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.batch);
        match self.write(&batch).await {
            Ok(()) => {
                self.stats
                    .written
                    .fetch_add(batch.len() as u64, Ordering::Relaxed);
            }
            Err(e) => {
                self.failed(&e);
                self.spool_rows(&batch).await;
            }
        }
    }

    async fn write(&self, rows: &[LedgerRow]) -> Result<(), StoreError> {
        for chunk in rows.chunks(self.options.max_batch.max(1)) {
            match tokio::time::timeout(self.options.write_timeout, self.store.insert(chunk)).await {
                Ok(r) => r?,
                Err(_) => {
                    return Err(StoreError::Query(sqlx::Error::PoolTimedOut));
                }
            }
        }
        Ok(())
    }

    fn failed(&mut self, e: &StoreError) {
        self.stats.write_failures.fetch_add(1, Ordering::Relaxed);
        if self.failing_since.is_none() {
            tracing::warn!(
                target: "ripcord::ledger",
                error = %e,
                cause = %std::error::Error::source(e).map(ToString::to_string).unwrap_or_default(),
                spool = %self.spool.path().display(),
                "the ledger could not write to the store: rows go to the spool until it answers"
            );
        }
        self.failing_since = Some(Instant::now());
    }

    /// Replays the spool when the retry interval allows; true when it is empty afterwards.
    async fn replay(&mut self) -> bool {
        if let Some(t) = self.failing_since
            && t.elapsed() < self.options.retry_interval
        {
            return false;
        }
        let read = match self.spool.read().await {
            Ok(r) => r,
            Err(e) => {
                tracing::error!(target: "ripcord::ledger", error = %e, "the ledger spool could not be read");
                return false;
            }
        };
        match self.write(&read.rows).await {
            Ok(()) => {}
            Err(e) => {
                self.failed(&e);
                return false;
            }
        }
        if let Err(e) = self.spool.clear().await {
            // The rows are written; left in the file they would be replayed again, which their
            // ids make harmless, but the file would keep growing.
            tracing::error!(target: "ripcord::ledger", error = %e, "the ledger spool could not be emptied");
            return false;
        }
        let n = read.rows.len() as u64;
        self.stats.written.fetch_add(n, Ordering::Relaxed);
        self.stats.replayed.fetch_add(n, Ordering::Relaxed);
        if read.corrupt > 0 {
            self.stats
                .dropped_corrupt
                .fetch_add(read.corrupt, Ordering::Relaxed);
            tracing::warn!(target: "ripcord::ledger", lines = read.corrupt, "spool lines that did not parse were dropped");
        }
        if self.failing_since.take().is_some() {
            tracing::info!(target: "ripcord::ledger", rows = n, "the store answers again: the spooled rows are written");
        }
        true
    }

    async fn spool_rows(&mut self, rows: &[LedgerRow]) {
        if rows.is_empty() {
            return;
        }
        match self.spool.append(rows).await {
            Ok(a) => {
                self.stats.spooled.fetch_add(a.written, Ordering::Relaxed);
                if a.dropped > 0 {
                    self.stats
                        .dropped_spool
                        .fetch_add(a.dropped, Ordering::Relaxed);
                    tracing::warn!(target: "ripcord::ledger", rows = a.dropped, cap = self.options.spool_max_bytes, "the ledger spool is full: rows were dropped");
                }
            }
            Err(e) => {
                self.stats
                    .dropped_spool
                    .fetch_add(rows.len() as u64, Ordering::Relaxed);
                tracing::error!(target: "ripcord::ledger", error = %e, rows = rows.len(), "the ledger spool could not be written: rows were dropped");
            }
        }
    }
}
