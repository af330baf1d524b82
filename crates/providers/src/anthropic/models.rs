//! Anthropic's models: windows, output caps and list prices (USD per million tokens; the
//! cached price is the cache-read price).

use crate::models::{ModelInfo, cached_price as p};

/// Claude models by name prefix. JSON mode is provided through a forced tool, so every model
/// with tools has it.
pub(crate) const TABLE: &[ModelInfo] = &[
    ModelInfo::new("claude-opus-4-5", 200_000, 64_000)
        .full()
        .price(p(5.0, 25.0, 0.50)),
    ModelInfo::new("claude-opus-4-1", 200_000, 32_000)
        .full()
        .price(p(15.0, 75.0, 1.50)),
    ModelInfo::new("claude-opus-4", 200_000, 32_000)
        .full()
        .price(p(15.0, 75.0, 1.50)),
    ModelInfo::new("claude-sonnet-4-5", 200_000, 64_000)
        .full()
        .price(p(3.0, 15.0, 0.30)),
    ModelInfo::new("claude-sonnet-4", 200_000, 64_000)
        .full()
        .price(p(3.0, 15.0, 0.30)),
    ModelInfo::new("claude-haiku-4-5", 200_000, 64_000)
        .full()
        .price(p(1.0, 5.0, 0.10)),
    ModelInfo::new("claude-3-7-sonnet", 200_000, 64_000)
        .full()
        .price(p(3.0, 15.0, 0.30)),
    ModelInfo::new("claude-3-5-sonnet", 200_000, 8_192)
        .full()
        .price(p(3.0, 15.0, 0.30)),
    ModelInfo::new("claude-3-5-haiku", 200_000, 8_192)
        .full()
        .price(p(0.80, 4.0, 0.08)),
    ModelInfo::new("claude-3-opus", 200_000, 4_096)
        .full()
        .price(p(15.0, 75.0, 1.50)),
    ModelInfo::new("claude-3-haiku", 200_000, 4_096)
        .full()
        .price(p(0.25, 1.25, 0.03)),
];

/// An unknown Claude model.
pub(crate) const DEFAULT: ModelInfo = ModelInfo::new("", 200_000, 8_192).full();
