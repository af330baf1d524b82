//! Context-window trimming: drop the oldest turns of a conversation so it fits a smaller window.
//!
//! When a request's prompt does not fit the window of the link about to be tried, the chain
//! may (with [`Trim::Oldest`]) send that link a copy of the request without its oldest
//! non-system turns, rather than skipping the link. System messages and the last message are
//! always kept; a turn is dropped whole — an assistant message that called tools goes with the
//! tool results that answer it — and the kept history starts with a user message, as vendors
//! with strict role alternation require. The answer's provenance says how many messages were
//! dropped ([`crate::Provenance::trimmed_messages`]), so nobody mistakes a trimmed answer for
//! one that saw the whole conversation.

use serde::{Deserialize, Serialize};

use crate::request::{ChatRequest, Role};
use crate::tokens;

/// What the chain does with a prompt too large for a link's window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Trim {
    /// Skip the link (reason `context_window`). The default.
    #[default]
    None,
    /// Drop the oldest non-system turns until the prompt fits the link's window.
    Oldest,
}

/// A copy of `req` without its oldest non-system turns, such that its estimated prompt plus
/// `output` fits `window`; with the number of messages dropped. `None` when even the system
/// messages and the last message alone do not fit, or nothing needs dropping.
pub(crate) fn oldest(req: &ChatRequest, window: u32, output: u32) -> Option<(ChatRequest, u32)> {
    let fits = |r: &ChatRequest| tokens::estimate_request(r).saturating_add(output) <= window;
    if fits(req) || req.messages.len() < 2 {
        return None;
    }
    let mut out = req.clone();
    let mut dropped = 0u32;
    loop {
        let last = out.messages.len().saturating_sub(1);
        // The oldest non-system message that is not the last one.
        let first = out.messages[..last]
            .iter()
            .position(|m| m.role != Role::System)?;
        let mut end = first + 1;
        // A turn goes whole: the tool results answering an assistant's calls go with it, and
        // so does anything left at the front that is not a user message.
        while end < last
            && out.messages[end].role != Role::User
            && out.messages[end].role != Role::System
        {
            end += 1;
        }
        dropped += u32::try_from(end - first).unwrap_or(u32::MAX);
        out.messages.drain(first..end);
        if fits(&out) {
            return Some((out, dropped));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::conversation;

    #[test]
    fn drops_the_oldest_turns_keeps_system_and_last_and_starts_with_a_user() {
        let req = conversation(10, 50);
        let full = tokens::estimate_request(&req);
        let (trimmed, dropped) = oldest(&req, full / 2, 0).unwrap();
        assert!(tokens::estimate_request(&trimmed) <= full / 2);
        assert!(
            dropped > 0 && dropped.is_multiple_of(2),
            "whole turns: {dropped}"
        );
        assert_eq!(trimmed.messages[0].role, Role::System);
        assert_eq!(trimmed.messages[1].role, Role::User);
        assert_eq!(trimmed.messages.last().unwrap().text(), "and now?");
        assert_eq!(
            trimmed.messages.len() + dropped as usize,
            req.messages.len()
        );
    }

    #[test]
    fn nothing_to_do_or_nothing_that_fits() {
        let req = conversation(1, 50);
        assert!(oldest(&req, 1_000_000, 0).is_none());
        assert!(oldest(&req, 5, 0).is_none());
    }
}
