//! OpenAI's models: windows, output caps, features and list prices (USD per million tokens).

use ripcord_core::Price;

use crate::models::{ModelInfo, cached_price as p};

/// OpenAI chat models by name prefix.
pub(crate) const TABLE: &[ModelInfo] = &[
    ModelInfo::new("gpt-5", 400_000, 128_000)
        .full()
        .price(p(1.25, 10.0, 0.125)),
    ModelInfo::new("gpt-5-mini", 400_000, 128_000)
        .full()
        .price(p(0.25, 2.0, 0.025)),
    ModelInfo::new("gpt-5-nano", 400_000, 128_000)
        .full()
        .price(p(0.05, 0.40, 0.005)),
    ModelInfo::new("gpt-4.1", 1_047_576, 32_768)
        .full()
        .price(p(2.0, 8.0, 0.50)),
    ModelInfo::new("gpt-4.1-mini", 1_047_576, 32_768)
        .full()
        .price(p(0.40, 1.60, 0.10)),
    ModelInfo::new("gpt-4.1-nano", 1_047_576, 32_768)
        .full()
        .price(p(0.10, 0.40, 0.025)),
    ModelInfo::new("gpt-4o", 128_000, 16_384)
        .full()
        .price(p(2.50, 10.0, 1.25)),
    ModelInfo::new("gpt-4o-mini", 128_000, 16_384)
        .full()
        .price(p(0.15, 0.60, 0.075)),
    ModelInfo::new("o1", 200_000, 100_000)
        .full()
        .price(p(15.0, 60.0, 7.50)),
    ModelInfo::new("o3", 200_000, 100_000)
        .full()
        .price(p(2.0, 8.0, 0.50)),
    ModelInfo::chat("o3-mini", 200_000, 100_000).price(p(1.10, 4.40, 0.55)),
    ModelInfo::new("o4-mini", 200_000, 100_000)
        .full()
        .price(p(1.10, 4.40, 0.275)),
    ModelInfo::new("gpt-4-turbo", 128_000, 4_096)
        .full()
        .price(Price::per_million(10.0, 30.0)),
    ModelInfo::new("gpt-4", 8_192, 8_192)
        .tools()
        .price(Price::per_million(30.0, 60.0)),
    ModelInfo::chat("gpt-3.5-turbo", 16_385, 4_096).price(Price::per_million(0.50, 1.50)),
];

/// An unknown OpenAI model: a modern window with tools and JSON, no vision, no price.
pub(crate) const DEFAULT: ModelInfo = ModelInfo::chat("", 128_000, 4_096);
