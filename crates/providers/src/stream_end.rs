//! The end of a stream whose stop reason and token counts come on events of their own
//! (Anthropic Messages, Bedrock ConverseStream): both are held for the one `Usage` and the
//! single `Finish` that close the answer.

use std::collections::VecDeque;

use ripcord_core::{FinishReason, Price, StreamEvent, Usage};

/// A wire's token counts, costed at a price.
pub(crate) trait WireTokens: Copy + Default {
    /// Ripcord's usage of these counts.
    fn to_usage(self, price: Option<&Price>) -> Usage;
}

/// What a stream decoder keeps for the answer's close.
pub(crate) struct StreamEnd<U> {
    /// The stop reason, mapped, once the vendor sent it.
    pub(crate) stop: Option<FinishReason>,
    /// The token counts so far.
    pub(crate) usage: U,
    /// The answering model, when known.
    pub(crate) model: Option<String>,
    price: Option<Price>,
}

impl<U: WireTokens> StreamEnd<U> {
    /// Nothing seen yet; `model` is what served, when the stream will not say.
    pub(crate) fn new(price: Option<Price>, model: Option<String>) -> Self {
        StreamEnd {
            stop: None,
            usage: U::default(),
            model,
            price,
        }
    }

    /// Queues the final usage and the single `Finish` (the default reason if no stop came).
    pub(crate) fn finish(&mut self, out: &mut VecDeque<StreamEvent>) {
        out.push_back(StreamEvent::Usage {
            usage: self.usage.to_usage(self.price.as_ref()),
        });
        out.push_back(StreamEvent::Finish {
            reason: self.stop.take().unwrap_or_default(),
            model: self.model.take(),
        });
    }

    /// [`Decoder::clean_end`](crate::driver::Decoder::clean_end) on these wires: once the stop
    /// reason came, the events still to come would add nothing to the answer.
    pub(crate) fn clean_end(&mut self, out: &mut VecDeque<StreamEvent>) -> bool {
        if self.stop.is_none() {
            return false;
        }
        self.finish(out);
        true
    }
}
