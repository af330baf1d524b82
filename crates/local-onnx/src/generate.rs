//! The generation loop: prefill, then one token at a time through the KV cache.
//!
//! It runs on a blocking thread (never on the async runtime) and talks to the caller through a
//! sink that returns `false` once nobody listens any more. Between two tokens it checks the
//! cancellation token and the deadline; a dropped stream also sets ONNX Runtime's terminate flag,
//! which stops even a long prefill between two kernels.

use std::sync::Arc;
use std::time::Instant;

use ort::session::RunOptions;
use ripcord_core::{CancellationToken, Error, FinishReason, Price, StreamEvent, Usage};
use tokenizers::Tokenizer;

use crate::engine::Decoder;
use crate::sampling::{Sampler, SamplingParams};
use crate::scheduler::PREFILL_CHUNK;
use crate::text::{Detokenizer, StopFilter, StopStep};

/// One answer to produce.
#[derive(Debug, Clone)]
pub(crate) struct Job {
    pub(crate) prompt: Vec<u32>,
    pub(crate) max_new_tokens: usize,
    pub(crate) sampling: SamplingParams,
    pub(crate) stops: Vec<String>,
    pub(crate) eos: Vec<u32>,
    pub(crate) model_name: String,
}

/// When to stop early.
#[derive(Clone)]
pub(crate) struct Control {
    pub(crate) cancel: CancellationToken,
    /// The call's deadline on the std clock (the blocking thread has no tokio clock): it
    /// bounds the answer until its first text.
    pub(crate) deadline: Option<Instant>,
    /// The bound once text has been delivered (the context's stream deadline): a long answer
    /// is not cut at the deadline meant for getting it started.
    pub(crate) stream_deadline: Option<Instant>,
    pub(crate) run_options: Arc<RunOptions>,
}

impl std::fmt::Debug for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Control")
            .field("cancelled", &self.cancel.is_cancelled())
            .field("deadline", &self.deadline)
            .field("stream_deadline", &self.stream_deadline)
            .finish_non_exhaustive()
    }
}

impl Control {
    /// Cancelled, or past the bound that applies: the deadline until text was delivered, the
    /// stream deadline after.
    pub(crate) fn check(&self, delivered: bool) -> Result<(), Error> {
        let bound = if delivered {
            self.stream_deadline
        } else {
            self.deadline
        };
        if self.cancel.is_cancelled() {
            Err(Error::cancelled())
        } else if bound.is_some_and(|d| Instant::now() >= d) {
            Err(Error::deadline_exceeded())
        } else {
            Ok(())
        }
    }
}

/// How the loop ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Outcome {
    pub(crate) prompt_tokens: usize,
    pub(crate) output_tokens: usize,
    pub(crate) finish: FinishReason,
    /// The sink stopped listening; nothing more was sent.
    pub(crate) abandoned: bool,
}

/// What an answer does after a token was sampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Feed this token through the model and sample again from its logits.
    Feed(u32),
    /// The answer ended (end of sequence, a stop sequence, the length, or the reader left);
    /// call [`Decoding::finish`].
    Done,
}

/// One answer's decoding state: its sampler, detokenizer and stop filter. The solo loop
/// ([`run`]) and the batch scheduler drive it the same way, so an answer's tokens do not depend
/// on which of them produced it.
#[derive(Debug)]
pub(crate) struct Decoding {
    sampler: Sampler,
    detok: Detokenizer,
    stop: StopFilter,
    stopped_by_sequence: bool,
    delivered: bool,
    outcome: Outcome,
    started: Instant,
    prefilled: Option<Instant>,
}

impl Decoding {
    /// A new answer to `job`, started now.
    pub(crate) fn new(job: &Job) -> Decoding {
        Decoding {
            sampler: Sampler::new(job.sampling),
            detok: Detokenizer::new(),
            stop: StopFilter::new(&job.stops),
            stopped_by_sequence: false,
            delivered: false,
            outcome: Outcome {
                prompt_tokens: job.prompt.len(),
                output_tokens: 0,
                finish: FinishReason::Length,
                abandoned: false,
            },
            started: Instant::now(),
            prefilled: None,
        }
    }

    /// Text has been delivered (the stream deadline applies from now on).
    pub(crate) fn delivered(&self) -> bool {
        self.delivered
    }

    /// Samples from the logits after the last fed token, shows its text, and says whether the
    /// answer goes on. The first call marks the end of the prefill.
    pub(crate) fn next(
        &mut self,
        job: &Job,
        tokenizer: &Tokenizer,
        logits: &[f32],
        sink: &mut dyn FnMut(StreamEvent) -> bool,
    ) -> Result<Next, Error> {
        if self.prefilled.is_none() {
            self.prefilled = Some(Instant::now());
        }
        let outcome = &mut self.outcome;
        if outcome.output_tokens >= job.max_new_tokens {
            return Ok(Next::Done);
        }
        let id = self.sampler.sample(logits)?;
        if job.eos.contains(&id) {
            outcome.finish = FinishReason::Stop;
            return Ok(Next::Done);
        }
        outcome.output_tokens += 1;
        let delta = self.detok.push(tokenizer, id)?;
        let (text, hit) = match self.stop.push(&delta) {
            StopStep::Emit(t) => (t, false),
            StopStep::Stop(t) => (t, true),
        };
        if !text.is_empty() {
            if !sink(StreamEvent::text(text)) {
                outcome.abandoned = true;
                return Ok(Next::Done);
            }
            self.delivered = true;
        }
        if hit {
            outcome.finish = FinishReason::Stop;
            self.stopped_by_sequence = true;
            return Ok(Next::Done);
        }
        if outcome.output_tokens >= job.max_new_tokens {
            return Ok(Next::Done);
        }
        Ok(Next::Feed(id))
    }

    /// Ends the answer: the text the stop filter held back, then usage and the finish event
    /// (nothing when the reader already left). `kv_tokens` is logged.
    pub(crate) fn finish(
        mut self,
        job: &Job,
        tokenizer: &Tokenizer,
        kv_tokens: usize,
        sink: &mut dyn FnMut(StreamEvent) -> bool,
    ) -> Result<Outcome, Error> {
        let mut outcome = self.outcome;
        if outcome.abandoned {
            return Ok(outcome);
        }
        if !self.stopped_by_sequence {
            let tail = self.detok.finish(tokenizer)?;
            let text = match self.stop.push(&tail) {
                StopStep::Emit(t) => t + &self.stop.flush(),
                StopStep::Stop(t) => {
                    outcome.finish = FinishReason::Stop;
                    t
                }
            };
            if !text.is_empty() && !sink(StreamEvent::text(text)) {
                outcome.abandoned = true;
                return Ok(outcome);
            }
        }
        let prefilled = self.prefilled.unwrap_or(self.started);
        let decode_secs = prefilled.elapsed().as_secs_f64();
        tracing::debug!(
            prompt_tokens = outcome.prompt_tokens,
            output_tokens = outcome.output_tokens,
            kv_tokens,
            prefill_ms = (prefilled - self.started).as_secs_f64() * 1000.0,
            decode_tok_s = if decode_secs > 0.0 {
                outcome.output_tokens as f64 / decode_secs
            } else {
                0.0
            },
            finish = outcome.finish.as_str(),
            message = ripcord_core::telemetry::event::LOCAL_GENERATED
        );
        let usage = Usage::new(outcome.prompt_tokens as u64, outcome.output_tokens as u64)
            .priced(Some(&Price::FREE));
        let finish = StreamEvent::Finish {
            reason: outcome.finish.clone(),
            model: Some(job.model_name.clone()),
        };
        if !sink(StreamEvent::Usage { usage }) || !sink(finish) {
            outcome.abandoned = true;
        }
        Ok(outcome)
    }
}

/// Produces the answer alone on `decoder`, sending text deltas, then usage, then the finish
/// event to `sink`.
///
/// # Errors
///
/// `Cancelled` / `DeadlineExceeded` between tokens; `ServerError` (or `Overloaded` when out of
/// memory) when ONNX Runtime fails.
pub(crate) fn run(
    decoder: &mut Decoder,
    tokenizer: &Tokenizer,
    job: &Job,
    control: &Control,
    sink: &mut dyn FnMut(StreamEvent) -> bool,
) -> Result<Outcome, Error> {
    control.check(false)?;
    let mut state = Decoding::new(job);
    let mut cache = decoder.empty_cache(job.prompt.len() + job.max_new_tokens)?;
    // The prompt goes in as the batch scheduler feeds it, in chunks of PREFILL_CHUNK tokens:
    // the same runs on the same shapes, so an answer is the same token for token alone or
    // batched (one 854-token run and 64-token chunks rounded a Gemma 3 prompt apart), and a
    // long prompt can be cancelled or run out of time between chunks.
    let mut fed = 0;
    let mut logits = loop {
        let end = (fed + PREFILL_CHUNK).min(job.prompt.len());
        let l = decoder.forward(&job.prompt[fed..end], &mut cache, &control.run_options)?;
        fed = end;
        if fed == job.prompt.len() {
            break l;
        }
        control.check(false)?;
    };
    while let Next::Feed(id) = state.next(job, tokenizer, &logits, sink)? {
        control.check(state.delivered())?;
        logits = decoder.forward(&[id], &mut cache, &control.run_options)?;
    }
    state.finish(job, tokenizer, cache.len(), sink)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROMPT: &str =
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n";

    fn control() -> Control {
        Control {
            cancel: CancellationToken::new(),
            deadline: None,
            stream_deadline: None,
            run_options: Arc::new(RunOptions::new().unwrap()),
        }
    }

    /// The tiny model, and [`PROMPT`] in its tokens.
    struct Tiny {
        dec: Decoder,
        tok: Tokenizer,
        prompt: Vec<u32>,
    }

    impl Tiny {
        /// `None` when the tiny model is missing (skipped).
        fn load() -> Option<Tiny> {
            let (dec, _, tok) = crate::test_support::load_tiny()?;
            let prompt = tok.encode(PROMPT, false).unwrap().get_ids().to_vec();
            Some(Tiny { dec, tok, prompt })
        }

        /// Runs the loop on the prompt for up to `max_new_tokens`, greedy, ending at `eos`.
        fn answer(
            &mut self,
            max_new_tokens: usize,
            eos: Vec<u32>,
            control: &Control,
            sink: &mut dyn FnMut(StreamEvent) -> bool,
        ) -> Result<Outcome, Error> {
            let job = Job {
                prompt: self.prompt.clone(),
                max_new_tokens,
                sampling: SamplingParams::GREEDY,
                stops: vec![],
                eos,
                model_name: "tiny-llama".into(),
            };
            run(&mut self.dec, &self.tok, &job, control, sink)
        }
    }

    fn collect(events: &[StreamEvent]) -> String {
        events.iter().filter_map(StreamEvent::text_delta).collect()
    }

    #[test]
    fn the_loop_streams_the_greedy_answer_then_usage_then_finish() {
        let Some(mut t) = Tiny::load() else {
            return;
        };
        let reference = crate::test_support::greedy_ids(&mut t.dec, &t.prompt, 16);
        let mut events = Vec::new();
        let out = t
            .answer(16, vec![], &control(), &mut |e| {
                events.push(e);
                true
            })
            .unwrap();
        assert_eq!(out.output_tokens, 16);
        assert_eq!(out.finish, FinishReason::Length);
        assert!(!out.abandoned);
        assert_eq!(collect(&events), t.tok.decode(&reference, true).unwrap());
        let n = events.len();
        assert_eq!(
            events[n - 2],
            StreamEvent::Usage {
                usage: Usage::new(t.prompt.len() as u64, 16).priced(Some(&Price::FREE))
            }
        );
        assert_eq!(
            events[n - 1],
            StreamEvent::Finish {
                reason: FinishReason::Length,
                model: Some("tiny-llama".into())
            }
        );
    }

    #[test]
    fn an_end_of_sequence_token_stops_without_being_shown() {
        let Some(mut t) = Tiny::load() else {
            return;
        };
        let reference = crate::test_support::greedy_ids(&mut t.dec, &t.prompt, 12);
        // The first token (from the fourth on) that did not occur before it: make it the EOS.
        let k = (3..reference.len())
            .find(|&k| !reference[..k].contains(&reference[k]))
            .expect("the tiny model repeats itself");
        let mut events = Vec::new();
        let out = t
            .answer(12, vec![reference[k]], &control(), &mut |e| {
                events.push(e);
                true
            })
            .unwrap();
        assert_eq!(out.output_tokens, k);
        assert_eq!(out.finish, FinishReason::Stop);
        assert_eq!(
            collect(&events),
            t.tok.decode(&reference[..k], true).unwrap()
        );
    }

    #[test]
    fn cancellation_and_deadline_are_checked_before_work() {
        let Some(mut t) = Tiny::load() else {
            return;
        };
        let cancelled = control();
        cancelled.cancel.cancel();
        let mut expired = control();
        expired.deadline = Some(Instant::now());
        let mut events = 0;
        for (c, want) in [
            (cancelled, ripcord_core::ErrorKind::Cancelled),
            (expired, ripcord_core::ErrorKind::DeadlineExceeded),
        ] {
            let e = t
                .answer(8, vec![], &c, &mut |_| {
                    events += 1;
                    true
                })
                .unwrap_err();
            assert_eq!(e.kind(), want, "{want:?}");
        }
        assert_eq!(events, 0);
    }

    #[test]
    fn after_the_first_text_the_stream_deadline_bounds_the_answer_not_the_deadline() {
        let Some(mut t) = Tiny::load() else {
            return;
        };
        // The deadline passes while the first text is being shown (a slow consumer step).
        let slow_first = |events: &mut usize| {
            *events += 1;
            if *events == 1 {
                // A plain test thread (no runtime to block), standing in for the generating
                // thread whose consumer is slow: it waits for no background work.
                #[expect(clippy::disallowed_methods, reason = "a plain test thread, see above")]
                std::thread::sleep(std::time::Duration::from_millis(60));
            }
            true
        };
        let mut c = control();
        c.deadline = Some(Instant::now() + std::time::Duration::from_millis(30));
        c.stream_deadline = Some(Instant::now() + std::time::Duration::from_secs(600));
        let mut events = 0;
        let out = t
            .answer(8, vec![], &c, &mut |_| slow_first(&mut events))
            .unwrap();
        assert_eq!(out.output_tokens, 8, "a long answer runs past the deadline");

        // With the stream bound passed too, the answer is cut at the next token.
        let mut c = control();
        c.deadline = Some(Instant::now() + std::time::Duration::from_millis(30));
        c.stream_deadline = c.deadline;
        let mut events = 0;
        let e = t
            .answer(8, vec![], &c, &mut |_| slow_first(&mut events))
            .unwrap_err();
        assert_eq!(e.kind(), ripcord_core::ErrorKind::DeadlineExceeded);
        assert!(
            events <= 1,
            "cut at the next token, not after {events} texts"
        );
    }

    #[test]
    fn cancelling_mid_answer_stops_at_the_next_token() {
        let Some(mut t) = Tiny::load() else {
            return;
        };
        let c = control();
        let cancel = c.cancel.clone();
        let mut deltas = 0;
        let e = t
            .answer(400, vec![], &c, &mut |e| {
                if matches!(e, StreamEvent::TextDelta { .. }) {
                    deltas += 1;
                    if deltas == 3 {
                        cancel.cancel();
                    }
                }
                true
            })
            .unwrap_err();
        assert_eq!(e.kind(), ripcord_core::ErrorKind::Cancelled);
        assert_eq!(deltas, 3);
    }

    #[test]
    fn a_sink_that_stops_listening_ends_the_loop() {
        let Some(mut t) = Tiny::load() else {
            return;
        };
        let mut calls = 0;
        let out = t
            .answer(400, vec![], &control(), &mut |_| {
                calls += 1;
                false
            })
            .unwrap();
        assert!(out.abandoned);
        assert_eq!(calls, 1);
        assert!(out.output_tokens < 10, "{}", out.output_tokens);
    }
}
