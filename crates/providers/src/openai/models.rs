//! OpenAI's models: windows, output caps, features and list prices (USD per million tokens).

use ripcord_core::Price;

use crate::models::{ModelInfo, cached_price as p};

/// OpenAI chat models by name prefix.
pub(crate) const TABLE: &[ModelInfo] = &[
    full("gpt-5", 400_000, 128_000, p(1.25, 10.0, 0.125)),
    full("gpt-5-mini", 400_000, 128_000, p(0.25, 2.0, 0.025)),
    full("gpt-5-nano", 400_000, 128_000, p(0.05, 0.40, 0.005)),
    full("gpt-4.1", 1_047_576, 32_768, p(2.0, 8.0, 0.50)),
    full("gpt-4.1-mini", 1_047_576, 32_768, p(0.40, 1.60, 0.10)),
    full("gpt-4.1-nano", 1_047_576, 32_768, p(0.10, 0.40, 0.025)),
    full("gpt-4o", 128_000, 16_384, p(2.50, 10.0, 1.25)),
    full("gpt-4o-mini", 128_000, 16_384, p(0.15, 0.60, 0.075)),
    full("o1", 200_000, 100_000, p(15.0, 60.0, 7.50)),
    full("o3", 200_000, 100_000, p(2.0, 8.0, 0.50)),
    ModelInfo::chat("o3-mini", 200_000, 100_000).price(p(1.10, 4.40, 0.55)),
    full("o4-mini", 200_000, 100_000, p(1.10, 4.40, 0.275)),
    full(
        "gpt-4-turbo",
        128_000,
        4_096,
        Price::per_million(10.0, 30.0),
    ),
    ModelInfo::new("gpt-4", 8_192, 8_192)
        .tools()
        .price(Price::per_million(30.0, 60.0)),
    ModelInfo::chat("gpt-3.5-turbo", 16_385, 4_096).price(Price::per_million(0.50, 1.50)),
];

/// A flagship row ([`ModelInfo::full`]: tools, vision, JSON) at `price`.
const fn full(prefix: &'static str, window: u32, max_output: u32, price: Price) -> ModelInfo {
    ModelInfo::new(prefix, window, max_output)
        .full()
        .price(price)
}

/// An unknown OpenAI model: a modern window with tools and JSON, no vision, no price.
pub(crate) const DEFAULT: ModelInfo = ModelInfo::chat("", 128_000, 4_096);
