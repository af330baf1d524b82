//! What a model can do, what it costs, and where it runs.

use serde::{Deserialize, Serialize};

use crate::response::Price;

/// Where a model runs: in this process / on this machine, or at a cloud vendor.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Locality {
    /// On this machine (no data leaves it).
    Local,
    /// At a cloud vendor.
    Cloud {
        /// The vendor, e.g. `openai`.
        vendor: String,
        /// The region the data is processed in, when known (e.g. `us`, `eu`, `cn`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        region: Option<String>,
    },
}

impl Locality {
    /// A cloud vendor without a known region.
    pub fn cloud(vendor: impl Into<String>) -> Self {
        Locality::Cloud {
            vendor: vendor.into(),
            region: None,
        }
    }

    /// A cloud vendor in a region.
    pub fn cloud_in(vendor: impl Into<String>, region: impl Into<String>) -> Self {
        Locality::Cloud {
            vendor: vendor.into(),
            region: Some(region.into()),
        }
    }

    /// True for [`Locality::Local`].
    pub fn is_local(&self) -> bool {
        matches!(self, Locality::Local)
    }
}

fn yes() -> bool {
    true
}

/// What a model can do.
///
/// # Examples
///
/// ```
/// use ripcord_core::{Capabilities, Locality, Price};
/// let caps = Capabilities::new(128_000, 16_384)
///     .with_tools(true)
///     .with_vision(true)
///     .with_price(Price::per_million(2.5, 10.0))
///     .with_locality(Locality::cloud("openai"));
/// assert!(caps.tools && caps.vision && caps.streaming);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Capabilities {
    /// Context window in tokens (prompt plus output). When [`Capabilities::context_window_known`]
    /// is false this is only a guess (a vendor's default for models its table does not list),
    /// and the chain does not judge the link by it.
    pub context_window: u32,
    /// Whether `context_window` is the model's real window: from a table of known models or
    /// from configuration. An unknown window is tried, never judged: the chain learns the real
    /// one from the vendor's context-length error ([`crate::Error::context_limit`]).
    #[serde(default = "yes")]
    pub context_window_known: bool,
    /// Largest output the model produces, in tokens.
    pub max_output_tokens: u32,
    /// Tool calling.
    pub tools: bool,
    /// Image input.
    pub vision: bool,
    /// JSON output mode.
    pub json_mode: bool,
    /// Streaming answers.
    pub streaming: bool,
    /// The vendor continues a final assistant message as its own answer (assistant prefill:
    /// Anthropic). A chain continuing a cut stream ([`crate::StreamPolicy::Continue`]) asks
    /// such a link with the delivered text as prefill; others get an explicit instruction.
    #[serde(default)]
    pub assistant_prefill: bool,
    /// Price, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price: Option<Price>,
    /// Where it runs.
    pub locality: Locality,
}

impl Capabilities {
    /// A text-only cloud model with streaming and these limits; refine with the `with_*` methods.
    pub fn new(context_window: u32, max_output_tokens: u32) -> Self {
        Capabilities {
            context_window,
            context_window_known: true,
            max_output_tokens,
            tools: false,
            vision: false,
            json_mode: false,
            streaming: true,
            assistant_prefill: false,
            price: None,
            locality: Locality::cloud("unknown"),
        }
    }

    crate::setters! {
        /// Marks the window as a guess (or as known): a link with an unknown window is tried
        /// whatever the prompt's size, and what its vendor states in a context-length error is
        /// what the chain knows of it afterwards.
        ///
        /// # Examples
        ///
        /// ```
        /// use ripcord_core::Capabilities;
        /// let guess = Capabilities::new(128_000, 4_096).with_context_window_known(false);
        /// assert!(!guess.context_window_known);
        /// assert!(Capabilities::new(8_192, 1_024).context_window_known);
        /// ```
        with_context_window_known(known: bool) => context_window_known = known;
    }

    /// Sets the context window (a known one).
    pub fn with_context_window(mut self, tokens: u32) -> Self {
        self.context_window = tokens;
        self.context_window_known = true;
        self
    }

    crate::setters! {
        /// Sets the largest output.
        with_max_output_tokens(tokens: u32) => max_output_tokens = tokens;
        /// Sets tool calling.
        with_tools(yes: bool) => tools = yes;
        /// Sets image input.
        with_vision(yes: bool) => vision = yes;
        /// Sets JSON mode.
        with_json_mode(yes: bool) => json_mode = yes;
        /// Sets assistant prefill ([`Capabilities::assistant_prefill`]).
        with_assistant_prefill(yes: bool) => assistant_prefill = yes;
        /// Sets streaming.
        with_streaming(yes: bool) => streaming = yes;
        /// Sets the price.
        with_price(price: Price) => price = Some(price);
        /// Sets the locality.
        with_locality(locality: Locality) => locality = locality;
    }

    /// The union of several models' capabilities: what a chain of them can do at best.
    /// Locality is `Local` only when every model is local.
    pub fn union<'a>(all: impl IntoIterator<Item = &'a Capabilities>) -> Option<Capabilities> {
        let mut it = all.into_iter();
        let mut acc = it.next()?.clone();
        for c in it {
            acc.context_window = acc.context_window.max(c.context_window);
            acc.context_window_known &= c.context_window_known;
            acc.max_output_tokens = acc.max_output_tokens.max(c.max_output_tokens);
            acc.tools |= c.tools;
            acc.vision |= c.vision;
            acc.json_mode |= c.json_mode;
            acc.streaming |= c.streaming;
            acc.assistant_prefill &= c.assistant_prefill;
            if acc.locality != c.locality {
                acc.locality = if acc.locality.is_local() && c.locality.is_local() {
                    Locality::Local
                } else {
                    Locality::cloud("mixed")
                };
            }
            if acc.price != c.price {
                acc.price = None;
            }
        }
        Some(acc)
    }
}
