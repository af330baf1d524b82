//! `max_tokens` per link: a request's output cap is lowered to what the link's model can
//! write when ripcord knows that (its model table or configuration), and the attempt says so.
//!
//! Clients set `max_tokens` for the model they had in mind: the Vercel AI SDK's Anthropic
//! provider sends 64000, which a fallback to GPT-4o (at most 16384) would refuse outright —
//! the backup failing on a number nobody chose for it. Each link therefore gets the smaller of
//! the request's value and its own cap; a link whose cap is a guess (a model in no table) gets
//! the request's value unchanged, and its vendor's refusal says what is wrong.

use std::borrow::Cow;

use crate::{Attempt, Capabilities, ChatRequest};

/// The request link `caps` is sent, and the `max_tokens` it was lowered to, when it was.
pub(crate) fn for_link<'a>(
    req: &'a ChatRequest,
    caps: &Capabilities,
) -> (Cow<'a, ChatRequest>, Option<u32>) {
    match req.max_tokens {
        Some(asked)
            if caps.context_window_known
                && caps.max_output_tokens > 0
                && asked > caps.max_output_tokens =>
        {
            let mut lowered = req.clone();
            lowered.max_tokens = Some(caps.max_output_tokens);
            (Cow::Owned(lowered), Some(caps.max_output_tokens))
        }
        _ => (Cow::Borrowed(req), None),
    }
}

/// Marks the attempts of link `name` (the last ones of `attempts` that name it) with the
/// lowered value.
pub(crate) fn record(attempts: &mut [Attempt], name: &str, clamped: Option<u32>) {
    let Some(n) = clamped else {
        return;
    };
    for a in attempts.iter_mut().rev() {
        if &*a.provider != name {
            break;
        }
        a.clamped_max_tokens = Some(n);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn only_a_known_cap_lowers_max_tokens() {
        let req = ChatRequest::user("hi").with_max_tokens(64_000);
        let known = Capabilities::new(128_000, 16_384);
        let (sent, clamped) = for_link(&req, &known);
        assert_eq!(sent.max_tokens, Some(16_384));
        assert_eq!(clamped, Some(16_384));
        // Under the cap, or without a value, the request goes as it is (not even cloned).
        let small = ChatRequest::user("hi").with_max_tokens(100);
        assert!(matches!(for_link(&small, &known), (Cow::Borrowed(_), None)));
        let none = ChatRequest::user("hi");
        assert!(matches!(for_link(&none, &known), (Cow::Borrowed(_), None)));
        // A guessed cap (a model in no table) is not a reason to change the client's number.
        let guessed = Capabilities::new(128_000, 4_096).with_context_window_known(false);
        let (sent, clamped) = for_link(&req, &guessed);
        assert_eq!((sent.max_tokens, clamped), (Some(64_000), None));
    }

    #[test]
    fn the_clamp_marks_only_the_links_own_last_attempts() {
        let mut attempts = vec![
            Attempt::success("a".into(), "m".into(), Duration::ZERO),
            Attempt::success("b".into(), "m".into(), Duration::ZERO),
            Attempt::success("b".into(), "m".into(), Duration::ZERO),
        ];
        record(&mut attempts, "b", Some(8));
        let marks: Vec<Option<u32>> = attempts.iter().map(|a| a.clamped_max_tokens).collect();
        assert_eq!(marks, [None, Some(8), Some(8)]);
        record(&mut attempts, "a", None);
        assert_eq!(attempts[0].clamped_max_tokens, None);
    }
}
