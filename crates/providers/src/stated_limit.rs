//! The context window a vendor states in its context-length error.
//!
//! Most vendors say the model's real limit when they refuse a prompt as too long, and often how
//! many tokens they counted:
//!
//! - OpenAI, Azure OpenAI: "This model's maximum context length is 128000 tokens. However, your
//!   messages resulted in 131072 tokens."
//! - DeepSeek, vLLM: "This model's maximum context length is 10000 tokens. However, you
//!   requested 10515 tokens (2323 in the messages, 8192 in the completion)." — newer vLLM:
//!   "However, your request has 5000 input tokens."
//! - Anthropic: "prompt is too long: 210345 tokens > 200000 maximum".
//!
//! The number is what the chain then judges the link by ([`ContextLimit`]): a link whose model
//! is missing from the built-in tables has no known window until its vendor says it. Phrasings
//! without a number (Moonshot's "Input token length too long", Zhipu's 1261) give nothing: the
//! link's window stays unknown, and it is still tried.

use ripcord_core::ContextLimit;

/// The number that follows `needle` in `text` (ASCII case-insensitive, spaces and thousands
/// separators allowed), if any.
fn number_after(text: &str, needle: &str) -> Option<u32> {
    let lower = text.to_ascii_lowercase();
    let at = lower.find(needle)? + needle.len();
    let rest = lower.get(at..)?.trim_start();
    let digits: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// What the message of a context-length error states about the model's window; `None` when
/// it names no window.
///
/// # Examples
///
/// ```
/// use ripcord_providers::stated_context_limit;
/// let l = stated_context_limit("prompt is too long: 210345 tokens > 200000 maximum").unwrap();
/// assert_eq!((l.window, l.prompt_tokens), (200_000, Some(210_345)));
/// let l = stated_context_limit("This model's maximum context length is 8192 tokens").unwrap();
/// assert_eq!((l.window, l.prompt_tokens), (8_192, None));
/// assert!(stated_context_limit("Input token length too long").is_none());
/// ```
pub fn stated_context_limit(message: &str) -> Option<ContextLimit> {
    if let Some(window) = number_after(message, "maximum context length is") {
        let prompt = number_after(message, "your messages resulted in")
            .or_else(|| number_after(message, "tokens ("))
            .or_else(|| number_after(message, "your request has"))
            .or_else(|| number_after(message, "you requested"));
        return plausible(window, prompt);
    }
    // Anthropic: "prompt is too long: P tokens > N maximum".
    let prompt = number_after(message, "prompt is too long:")?;
    let window = number_after(message, "tokens >")?;
    plausible(window, Some(prompt))
}

/// A window of zero (or a garbled number) states nothing.
fn plausible(window: u32, prompt: Option<u32>) -> Option<ContextLimit> {
    if window == 0 {
        return None;
    }
    let limit = ContextLimit::new(window);
    Some(match prompt.filter(|&p| p > 0) {
        Some(p) => limit.with_prompt_tokens(p),
        None => limit,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A message and the (window, prompt count) it states.
    type Case = (&'static str, Option<(u32, Option<u32>)>);

    /// The phrasings of the context-length rows of `ripcord-chaos`'s vendor error table.
    #[test]
    fn the_vendor_tables_phrasings() {
        let cases: &[Case] = &[
            (
                "This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 tokens. Please reduce the length of the messages.",
                Some((128_000, Some(131_072))),
            ),
            (
                "This model's maximum context length is 131072 tokens. However, you requested 140000 tokens (139000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.",
                Some((131_072, Some(139_000))),
            ),
            (
                "This model's maximum context length is 10000 tokens. However, you requested 10515 tokens (2323 in the messages, 8192 in the completion).",
                Some((10_000, Some(2_323))),
            ),
            (
                "This model's maximum context length is 4096 tokens. However, your request has 5000 input tokens.",
                Some((4_096, Some(5_000))),
            ),
            (
                "prompt is too long: 210345 tokens > 200000 maximum",
                Some((200_000, Some(210_345))),
            ),
            (
                "This model's maximum context length is 8192 tokens",
                Some((8_192, None)),
            ),
            ("Input token length too long", None),
            ("Prompt 超长", None),
            ("This model's maximum context length is 0 tokens", None),
        ];
        for (text, want) in cases {
            let got = stated_context_limit(text).map(|l| (l.window, l.prompt_tokens));
            assert_eq!(got, *want, "{text}");
        }
    }

    #[test]
    fn thousands_separators_are_read() {
        let l = stated_context_limit("maximum context length is 8,192 tokens").unwrap();
        assert_eq!(l.window, 8_192);
    }
}
