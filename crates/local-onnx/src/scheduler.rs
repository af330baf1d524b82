//! Continuous batching: one thread owns one session and decodes every running answer in one
//! batched step.
//!
//! Answers join and leave between steps. Each running answer holds a KV slot (a row of
//! [`BatchKv`]); the slots grow in powers of two up to `max_batch` when an answer needs one and
//! shrink (compacting the rows) when at most half are used, so a step never computes many more
//! rows than there are answers. A slot holds what the longest admitted answer can reach (its
//! prompt and `max_tokens`, in powers of two from [`MIN_SLOT_TOKENS`]), not the whole context
//! window: sized to the window (8,192 tokens for SmolLM2), growing the batch to 8 slots
//! allocated 1.5 GB and stalled every running answer for seconds. The slots keep their length
//! until the batch empties. A new answer's prompt is prefilled alone, in chunks of
//! [`PREFILL_CHUNK`] tokens, one chunk between two batch steps, so a long prompt delays the
//! running answers by one chunk per token instead of stalling them; when the prompt is in, its
//! keys and values are copied into a free slot.
//!
//! Everything that is per answer stays per answer: its sampler, stop filter and detokenizer
//! ([`Decoding`], the same state the solo loop uses), its cancellation token and deadlines
//! (checked before each step it takes part in), and its run options (a dropped stream
//! terminates its prefill chunk). A reader that falls behind does not slow the others: its
//! events wait in its own queue and its row holds (takes no token) until the queue drains.
//!
//! A failed batch step fails every answer in the batch (the shared buffers may be half
//! written); the next answers get fresh slots.

use std::collections::VecDeque;
use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use ort::session::RunOptions;
use ripcord_core::{Error, Result, StreamEvent};
use tokenizers::Tokenizer;
use tokio::sync::{OwnedSemaphorePermit, mpsc};

use crate::engine::{BatchKv, Decoder, KvCache, RowInput};
use crate::error::runtime;
use crate::generate::{Control, Decoding, Job, Next};

/// Prompt tokens prefilled per run between two batch steps.
pub(crate) const PREFILL_CHUNK: usize = 64;

/// The fewest tokens a KV slot (and the prefill's staging cache) is sized for.
pub(crate) const MIN_SLOT_TOKENS: usize = 256;

/// How long the thread waits for a new answer while every running answer's reader is behind
/// (the readers drain on other threads; there is nothing to compute until one does).
const READER_POLL: Duration = Duration::from_millis(2);

/// One answer handed to the scheduler.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) job: Job,
    pub(crate) control: Control,
    pub(crate) tx: mpsc::Sender<Result<StreamEvent>>,
    /// The caller's place among the `max_batch` answers; released when the answer leaves.
    pub(crate) permit: OwnedSemaphorePermit,
}

/// The handle of a running scheduler thread; dropping it lets the thread end once its answers
/// are done.
#[derive(Debug)]
pub(crate) struct Scheduler {
    submit: std_mpsc::Sender<Request>,
}

impl Scheduler {
    /// Starts the thread that owns `decoder` (which must have a shared KV cache).
    ///
    /// `capacity` is the most tokens one answer can hold (prompt and output).
    pub(crate) fn start(
        decoder: Decoder,
        tokenizer: Tokenizer,
        max_batch: usize,
        capacity: usize,
        span: tracing::Span,
    ) -> Result<Scheduler> {
        let staging = decoder.empty_cache(MIN_SLOT_TOKENS.min(capacity + 1))?;
        let (submit, requests) = std_mpsc::channel();
        let run_options =
            RunOptions::new().map_err(|e| runtime(format!("cannot create run options: {e}")))?;
        let mut state = State {
            decoder,
            tokenizer,
            max_batch: max_batch.max(1),
            capacity,
            staging: Some(staging),
            kv: None,
            running: Vec::new(),
            waiting: VecDeque::new(),
            prefilling: None,
            run_options,
        };
        std::thread::Builder::new()
            .name("ripcord-local-batch".into())
            .spawn(move || {
                let _enter = span.enter();
                state.serve(&requests);
            })
            .map_err(|e| runtime(format!("cannot start the batch thread: {e}")))?;
        Ok(Scheduler { submit })
    }

    /// Queues an answer; its events arrive on `req.tx`.
    pub(crate) fn submit(&self, req: Request) -> Result<()> {
        self.submit
            .send(req)
            .map_err(|_| runtime("the batch thread has stopped"))
    }
}

/// An answer in the scheduler.
struct Seq {
    job: Job,
    control: Control,
    tx: mpsc::Sender<Result<StreamEvent>>,
    decoding: Decoding,
    /// Events the reader has not taken yet (its channel was full), in order.
    backlog: VecDeque<Result<StreamEvent>>,
    /// The reader has gone.
    closed: bool,
    /// Prompt tokens prefilled so far.
    fed: usize,
    /// The token to feed next (after the prefill).
    next: Option<u32>,
    /// The KV slot.
    row: Option<usize>,
    _permit: OwnedSemaphorePermit,
}

impl Seq {
    fn new(req: Request) -> Seq {
        Seq {
            decoding: Decoding::new(&req.job),
            job: req.job,
            control: req.control,
            tx: req.tx,
            backlog: VecDeque::new(),
            closed: false,
            fed: 0,
            next: None,
            row: None,
            _permit: req.permit,
        }
    }

    /// Sends `ev`, or queues it when the reader is behind; false once the reader has gone.
    fn send(&mut self, ev: Result<StreamEvent>) -> bool {
        sink_into(&self.tx, &mut self.backlog, &mut self.closed, ev)
    }

    /// Hands queued events to the reader while it has room.
    fn drain(&mut self) {
        while let Some(ev) = self.backlog.pop_front() {
            match self.tx.try_send(ev) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(ev)) => {
                    self.backlog.push_front(ev);
                    return;
                }
                Err(mpsc::error::TrySendError::Closed(_)) => {
                    self.closed = true;
                    self.backlog.clear();
                    return;
                }
            }
        }
    }

    /// Samples from `logits` (see [`Decoding::next`]).
    fn step(&mut self, tokenizer: &Tokenizer, logits: &[f32]) -> Result<Next> {
        let (job, decoding, mut send) = self.parts();
        decoding.next(job, tokenizer, logits, &mut |ev| send(Ok(ev)))
    }

    /// The answer's job and decoding, beside a sink that [sends](Seq::send) into its stream.
    fn parts(
        &mut self,
    ) -> (
        &Job,
        &mut Decoding,
        impl FnMut(Result<StreamEvent>) -> bool + '_,
    ) {
        let Seq {
            job,
            decoding,
            tx,
            backlog,
            closed,
            ..
        } = self;
        (job, decoding, move |ev| sink_into(tx, backlog, closed, ev))
    }
}

/// [`Seq::send`] on borrowed parts (the decoding state is borrowed beside them).
fn sink_into(
    tx: &mpsc::Sender<Result<StreamEvent>>,
    backlog: &mut VecDeque<Result<StreamEvent>>,
    closed: &mut bool,
    ev: Result<StreamEvent>,
) -> bool {
    if *closed {
        return false;
    }
    if !backlog.is_empty() {
        backlog.push_back(ev);
        return true;
    }
    match tx.try_send(ev) {
        Ok(()) => true,
        Err(mpsc::error::TrySendError::Full(ev)) => {
            backlog.push_back(ev);
            true
        }
        Err(mpsc::error::TrySendError::Closed(_)) => {
            *closed = true;
            false
        }
    }
}

struct State {
    decoder: Decoder,
    tokenizer: Tokenizer,
    max_batch: usize,
    capacity: usize,
    /// The one-row cache prompts are prefilled in; `None` after a failed prefill until a new
    /// one is made.
    staging: Option<KvCache>,
    kv: Option<BatchKv>,
    /// Answers past their prefill (in a slot) or finishing (backlog still draining).
    running: Vec<Seq>,
    /// Answers whose prefill has not started.
    waiting: VecDeque<Seq>,
    prefilling: Option<Seq>,
    run_options: RunOptions,
}

impl State {
    fn serve(&mut self, requests: &std_mpsc::Receiver<Request>) {
        let mut open = true;
        loop {
            // New answers: wait for one when idle, else take what has arrived.
            if self.is_idle() {
                if !open {
                    return;
                }
                match requests.recv() {
                    Ok(r) => self.waiting.push_back(Seq::new(r)),
                    Err(_) => return,
                }
            }
            loop {
                match requests.try_recv() {
                    Ok(r) => self.waiting.push_back(Seq::new(r)),
                    Err(std_mpsc::TryRecvError::Empty) => break,
                    Err(std_mpsc::TryRecvError::Disconnected) => {
                        open = false;
                        break;
                    }
                }
            }
            self.retire();
            let stepped = self.decode_step();
            let prefilled = self.prefill_chunk();
            if !stepped && !prefilled && !self.is_idle() {
                // Every running answer waits for its reader.
                match requests.recv_timeout(READER_POLL) {
                    Ok(r) => self.waiting.push_back(Seq::new(r)),
                    Err(std_mpsc::RecvTimeoutError::Timeout) => {}
                    Err(std_mpsc::RecvTimeoutError::Disconnected) => open = false,
                }
            }
        }
    }

    fn is_idle(&self) -> bool {
        self.running.is_empty() && self.waiting.is_empty() && self.prefilling.is_none()
    }

    /// Drains backlogs; drops answers whose reader left, that were cancelled or ran out of
    /// time, and finished answers whose events are all delivered. Frees their slots.
    fn retire(&mut self) {
        let mut i = 0;
        while i < self.running.len() {
            let seq = &mut self.running[i];
            seq.drain();
            let finished = seq.next.is_none() && seq.backlog.is_empty();
            let failed = if seq.closed || finished {
                None
            } else {
                seq.control.check(seq.decoding.delivered()).err()
            };
            if seq.closed || finished || failed.is_some() {
                let mut seq = self.running.swap_remove(i);
                if let Some(e) = failed {
                    seq.backlog.clear();
                    seq.send(Err(e));
                }
                self.free_row(&seq);
                continue;
            }
            i += 1;
        }
        for seq in self.waiting.iter_mut() {
            if let Err(e) = seq.control.check(false) {
                seq.send(Err(e));
                seq.closed = true;
            }
            if seq.tx.is_closed() {
                seq.closed = true;
            }
        }
        self.waiting.retain(|s| !s.closed);
        self.shrink();
    }

    fn free_row(&mut self, seq: &Seq) {
        if let (Some(row), Some(kv)) = (seq.row, self.kv.as_mut()) {
            kv.clear_row(row);
        }
    }

    /// One batch step for every running answer whose reader keeps up. False when no row
    /// advanced.
    fn decode_step(&mut self) -> bool {
        let Some(kv) = self.kv.as_mut() else {
            return false;
        };
        let mut inputs = vec![RowInput::Hold; kv.rows()];
        let mut any = false;
        for seq in &self.running {
            if let (Some(row), Some(id), true) = (seq.row, seq.next, seq.backlog.is_empty())
                && let Some(slot) = inputs.get_mut(row)
            {
                *slot = RowInput::Token(id);
                any = true;
            }
        }
        if !any {
            return false;
        }
        let logits = match self.decoder.decode_batch(kv, &inputs, &self.run_options) {
            Ok(l) => l,
            Err(e) => {
                // The slots are gone: every answer in them fails (answers that already ended
                // keep delivering what they queued).
                for seq in self.running.iter_mut().filter(|s| s.row.is_some()) {
                    seq.backlog.clear();
                    seq.send(Err(e.clone()));
                    seq.closed = true;
                    seq.row = None;
                    seq.next = None;
                }
                self.kv = None;
                return true;
            }
        };
        let tokenizer = &self.tokenizer;
        for seq in &mut self.running {
            let Some(row) = seq.row else { continue };
            let Some(Some(l)) = logits.get(row) else {
                continue;
            };
            let next = match seq.step(tokenizer, l) {
                Ok(n) => n,
                Err(e) => {
                    seq.send(Err(e));
                    seq.next = None;
                    seq.closed = true;
                    continue;
                }
            };
            match next {
                Next::Feed(id) => seq.next = Some(id),
                Next::Done => {
                    Self::finish(tokenizer, seq, kv.len(row));
                    // The slot is free at once; the answer stays until its reader has it all.
                    kv.clear_row(row);
                    seq.row = None;
                }
            }
        }
        true
    }

    /// Sends an ended answer's tail, usage and finish (into its backlog when the reader is
    /// behind); its slot is freed once they are delivered.
    fn finish(tokenizer: &Tokenizer, seq: &mut Seq, kv_tokens: usize) {
        seq.next = None;
        let decoding = std::mem::replace(&mut seq.decoding, Decoding::new(&seq.job));
        let (job, _, mut send) = seq.parts();
        let ended = decoding.finish(job, tokenizer, kv_tokens, &mut |ev| send(Ok(ev)));
        if let Err(e) = ended {
            send(Err(e));
        }
    }

    /// The tokens a slot (or staging cache) for `tokens` tokens is sized for: a power of two
    /// from [`MIN_SLOT_TOKENS`], at most the window (and one more, for the step past the end).
    fn slot_tokens(&self, tokens: usize) -> usize {
        tokens
            .next_power_of_two()
            .max(MIN_SLOT_TOKENS)
            .min(self.capacity + 1)
    }

    /// A free slot of at least `need` tokens, growing the batch (more rows, longer rows) when
    /// none is free or the slots are too short.
    fn free_slot(&mut self, need: usize) -> Result<Option<usize>> {
        let used: Vec<usize> = self.running.iter().filter_map(|s| s.row).collect();
        let (rows, capacity) = self
            .kv
            .as_ref()
            .map_or((0, 0), |kv| (kv.rows(), kv.capacity()));
        let free = (0..rows).find(|r| !used.contains(r));
        if let Some(r) = free
            && capacity >= need
        {
            return Ok(Some(r));
        }
        let new_rows = if free.is_some() {
            rows
        } else if rows >= self.max_batch {
            return Ok(None);
        } else {
            (rows + 1).next_power_of_two().min(self.max_batch)
        };
        self.resize(new_rows, capacity.max(self.slot_tokens(need)))?;
        let used: Vec<usize> = self.running.iter().filter_map(|s| s.row).collect();
        Ok((0..new_rows).find(|r| !used.contains(r)))
    }

    /// Moves every slotted answer into a new batch of `rows` slots of `capacity` tokens (rows
    /// 0, 1, … in order).
    fn resize(&mut self, rows: usize, capacity: usize) -> Result<()> {
        let mut new = self.decoder.batch_kv(rows, capacity)?;
        let mut to = 0;
        for seq in &mut self.running {
            let Some(from) = seq.row else { continue };
            if let Some(old) = self.kv.as_mut() {
                new.copy_row(to, old, from)?;
            }
            seq.row = Some(to);
            to += 1;
        }
        self.kv = Some(new);
        Ok(())
    }

    /// Compacts the slots when at most half of them are used.
    fn shrink(&mut self) {
        let Some(rows) = self.kv.as_ref().map(BatchKv::rows) else {
            return;
        };
        let used = self.running.iter().filter(|s| s.row.is_some()).count();
        let busy = used + usize::from(self.prefilling.is_some()) + self.waiting.len();
        if used == 0 && busy == 0 {
            self.kv = None;
            return;
        }
        let want = busy.max(1).next_power_of_two().min(self.max_batch);
        let capacity = self.kv.as_ref().map_or(0, BatchKv::capacity);
        if want * 2 <= rows
            && let Err(e) = self.resize(want, capacity)
        {
            tracing::warn!(error = %e, "cannot compact the batch KV slots; keeping them");
        }
    }

    /// Runs one prefill chunk of the next waiting answer. False when nothing ran.
    fn prefill_chunk(&mut self) -> bool {
        if self.prefilling.is_none() {
            match self.waiting.pop_front() {
                Some(s) => self.prefilling = Some(s),
                None => return false,
            }
        }
        let Some(mut seq) = self.prefilling.take() else {
            return false;
        };
        if seq.tx.is_closed() {
            return true;
        }
        if let Err(e) = seq.control.check(false) {
            seq.send(Err(e));
            return true;
        }
        // The staging cache holds the prompt; a longer prompt than it can hold gets a new one.
        let prompt_tokens = self.slot_tokens(seq.job.prompt.len() + 1);
        let reusable = match self.staging.take() {
            Some(mut c) => {
                if seq.fed > 0 || (c.capacity() >= prompt_tokens && c.reset()) {
                    Some(c)
                } else {
                    None
                }
            }
            None => None,
        };
        let mut staging = match reusable {
            Some(c) => c,
            None => match self.decoder.empty_cache(prompt_tokens) {
                Ok(c) => c,
                Err(e) => {
                    seq.send(Err(e));
                    return true;
                }
            },
        };
        let end = (seq.fed + PREFILL_CHUNK).min(seq.job.prompt.len());
        let chunk = &seq.job.prompt[seq.fed..end];
        let logits = match self
            .decoder
            .forward(chunk, &mut staging, &seq.control.run_options)
        {
            Ok(l) => l,
            Err(e) => {
                // The staging cache is dropped by the failed step; a new one is made next time.
                let e = if seq.control.cancel.is_cancelled() {
                    Error::cancelled()
                } else {
                    e
                };
                seq.send(Err(e));
                return true;
            }
        };
        seq.fed = end;
        if seq.fed < seq.job.prompt.len() {
            self.staging = Some(staging);
            self.prefilling = Some(seq);
            return true;
        }
        let result = self.admit(&mut seq, &mut staging, &logits);
        self.staging = Some(staging);
        if let Err(e) = result {
            seq.backlog.clear();
            seq.send(Err(e));
            self.free_row(&seq);
        } else {
            self.running.push(seq);
        }
        true
    }

    /// The prompt is in: sample the first token, and give the answer a slot when it goes on.
    fn admit(&mut self, seq: &mut Seq, staging: &mut KvCache, logits: &[f32]) -> Result<()> {
        match seq.step(&self.tokenizer, logits)? {
            Next::Done => {
                Self::finish(&self.tokenizer, seq, staging.len());
                Ok(())
            }
            Next::Feed(id) => {
                // Room for the prompt, every token the answer may add, and the step past it.
                let need = self.slot_tokens(seq.job.prompt.len() + seq.job.max_new_tokens + 1);
                let Some(row) = self.free_slot(need)? else {
                    return Err(runtime("no free KV slot for an admitted answer"));
                };
                if let Some(kv) = self.kv.as_mut() {
                    kv.load_row(row, staging)?;
                }
                seq.row = Some(row);
                seq.next = Some(id);
                Ok(())
            }
        }
    }
}
