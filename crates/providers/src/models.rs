//! Per-model capability and price tables.
//!
//! The chain skips a link that cannot take a request (no tools, no vision, window too small)
//! and estimates cost from the price, so each adapter knows its vendor's common models. Tables
//! match by the longest prefix (`gpt-4o-2024-08-06` is `gpt-4o`, `gpt-4o-mini-…` is
//! `gpt-4o-mini`); unknown names get the vendor's conservative default. Prices are list prices
//! in USD per million tokens at the time of writing — override with `with_capabilities` when
//! you have a contract price.

use ripcord_core::{Capabilities, Locality, Price};

/// A list price per million tokens with a price for cached input (USD), as the model tables
/// write it.
pub(crate) const fn cached_price(input: f64, output: f64, cached: f64) -> Price {
    Price::per_million(input, output).with_cached_input(cached)
}

/// Usage from a vendor that counts cache reads and writes apart from the other input tokens
/// (Anthropic, Bedrock): ripcord's input counts every prompt token, cached ones included, and
/// the cache reads are kept as the cached part.
#[cfg(any(feature = "anthropic", feature = "bedrock"))]
pub(crate) fn usage_with_cache(
    input: Option<u64>,
    output: Option<u64>,
    cache_read: Option<u64>,
    cache_write: Option<u64>,
    price: Option<&Price>,
) -> ripcord_core::Usage {
    let read = cache_read.unwrap_or(0);
    let input = input.unwrap_or(0) + read + cache_write.unwrap_or(0);
    ripcord_core::Usage::new(input, output.unwrap_or(0))
        .with_cached_input(read)
        .priced(price)
}

/// One row of a capability table.
///
/// # Examples
///
/// ```
/// use ripcord_core::{Locality, Price};
/// use ripcord_providers::ModelInfo;
/// const ROWS: &[ModelInfo] = &[
///     ModelInfo::new("my-model", 32_768, 4_096).tools().json().price(Price::per_million(0.5, 1.5)),
/// ];
/// let caps = ModelInfo::lookup(ROWS, &ModelInfo::new("", 8_192, 2_048), "my-model-v2")
///     .capabilities(Locality::cloud("acme"));
/// assert_eq!(caps.context_window, 32_768);
/// assert!(caps.tools && !caps.vision);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct ModelInfo {
    /// The model-name prefix this row matches.
    pub prefix: &'static str,
    /// Context window in tokens.
    pub context_window: u32,
    /// Largest output in tokens.
    pub max_output_tokens: u32,
    /// Tool calling.
    pub tools: bool,
    /// Image input.
    pub vision: bool,
    /// JSON output mode.
    pub json_mode: bool,
    /// List price, when known.
    pub price: Option<Price>,
}

impl ModelInfo {
    /// A text-only row without tools, JSON mode or price.
    pub const fn new(prefix: &'static str, context_window: u32, max_output_tokens: u32) -> Self {
        ModelInfo {
            prefix,
            context_window,
            max_output_tokens,
            tools: false,
            vision: false,
            json_mode: false,
            price: None,
        }
    }

    /// A text row with tool calling and JSON mode: the usual chat model
    /// (`ModelInfo::new(..).tools().json()`).
    pub const fn chat(prefix: &'static str, context_window: u32, max_output_tokens: u32) -> Self {
        ModelInfo::new(prefix, context_window, max_output_tokens)
            .tools()
            .json()
    }

    /// With tool calling.
    pub const fn tools(mut self) -> Self {
        self.tools = true;
        self
    }

    /// With image input.
    pub const fn vision(mut self) -> Self {
        self.vision = true;
        self
    }

    /// With JSON mode.
    pub const fn json(mut self) -> Self {
        self.json_mode = true;
        self
    }

    /// With a price.
    pub const fn price(mut self, price: Price) -> Self {
        self.price = Some(price);
        self
    }

    /// Tools, vision and JSON: the usual flagship row.
    pub const fn full(self) -> Self {
        self.tools().vision().json()
    }

    /// The row with the longest prefix of `model`, or `default`.
    pub fn lookup<'a>(
        table: &'a [ModelInfo],
        default: &'a ModelInfo,
        model: &str,
    ) -> &'a ModelInfo {
        table
            .iter()
            .filter(|r| model.starts_with(r.prefix))
            .max_by_key(|r| r.prefix.len())
            .unwrap_or(default)
    }

    /// The capabilities this row describes, at `locality`. A default row (empty prefix: the
    /// model is in no table) describes a guess, so its window is marked unknown
    /// ([`Capabilities::context_window_known`]): the chain tries such a link instead of
    /// judging it, and learns the real window from the vendor's context-length error.
    pub fn capabilities(&self, locality: Locality) -> Capabilities {
        let caps = Capabilities::new(self.context_window, self.max_output_tokens)
            .with_context_window_known(!self.prefix.is_empty())
            .with_tools(self.tools)
            .with_vision(self.vision)
            .with_json_mode(self.json_mode)
            .with_streaming(true)
            .with_locality(locality);
        match self.price {
            Some(p) => caps.with_price(p),
            None => caps,
        }
    }
}

#[cfg_attr(not(feature = "openai"), allow(dead_code))]
/// True when a base URL points at this machine (Ollama, vLLM on localhost): such a link is
/// `Locality::Local` and may receive local-only requests.
pub(crate) fn is_loopback(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &[ModelInfo] = &[
        ModelInfo::new("gpt-4o", 128_000, 16_384).full(),
        ModelInfo::new("gpt-4o-mini", 128_000, 16_384).tools(),
    ];
    const D: ModelInfo = ModelInfo::new("", 8_192, 4_096);

    #[test]
    fn longest_prefix_wins_and_unknown_gets_default() {
        assert!(ModelInfo::lookup(T, &D, "gpt-4o-2024-08-06").vision);
        assert!(!ModelInfo::lookup(T, &D, "gpt-4o-mini-2024-07-18").vision);
        assert_eq!(ModelInfo::lookup(T, &D, "davinci").context_window, 8_192);
    }

    #[test]
    fn loopback_detection() {
        for (u, local) in [
            ("http://localhost:11434/v1", true),
            ("http://127.0.0.1:8000/v1", true),
            ("http://[::1]:8000/v1", true),
            ("http://gpu-box.lan:8000/v1", false),
            ("https://api.openai.com/v1", false),
        ] {
            assert_eq!(is_loopback(&url::Url::parse(u).unwrap()), local, "{u}");
        }
    }
}
