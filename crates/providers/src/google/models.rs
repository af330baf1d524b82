//! Gemini's models: windows, output caps and list prices (USD per million tokens, prompts up to
//! 200k tokens; the cached price is the context-cache read price), from
//! <https://ai.google.dev/gemini-api/docs/models> and <https://ai.google.dev/gemini-api/docs/pricing>.
//! Vertex AI lists the same models at the same base prices
//! (<https://cloud.google.com/vertex-ai/generative-ai/pricing>).

use ripcord_core::Price;

use crate::models::{ModelInfo, cached_price as p};

/// Gemini models by name prefix (the longest prefix wins: `gemini-2.5-flash-lite` is not
/// `gemini-2.5-flash`). Every current model takes tools, images and JSON schemas.
pub(crate) const TABLE: &[ModelInfo] = &[
    ModelInfo::new("gemini-3-pro", 1_048_576, 65_536)
        .full()
        .price(p(2.00, 12.00, 0.20)),
    ModelInfo::new("gemini-3-flash", 1_048_576, 65_536)
        .full()
        .price(p(0.50, 3.00, 0.05)),
    ModelInfo::new("gemini-2.5-pro", 1_048_576, 65_536)
        .full()
        .price(p(1.25, 10.00, 0.125)),
    ModelInfo::new("gemini-2.5-flash", 1_048_576, 65_536)
        .full()
        .price(p(0.30, 2.50, 0.03)),
    ModelInfo::new("gemini-2.5-flash-lite", 1_048_576, 65_536)
        .full()
        .price(p(0.10, 0.40, 0.01)),
    ModelInfo::new("gemini-2.0-flash", 1_048_576, 8_192)
        .full()
        .price(p(0.10, 0.40, 0.025)),
    ModelInfo::new("gemini-2.0-flash-lite", 1_048_576, 8_192)
        .full()
        .price(Price::per_million(0.075, 0.30)),
];

/// An unknown Gemini model: a conservative window, no price.
pub(crate) const DEFAULT: ModelInfo = ModelInfo::new("", 32_768, 8_192).full();

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_prefix_wins() {
        let lite = ModelInfo::lookup(TABLE, &DEFAULT, "gemini-2.5-flash-lite-preview-09-2025");
        assert_eq!(lite.price.map(|p| p.input_per_mtok), Some(0.10));
        let flash = ModelInfo::lookup(TABLE, &DEFAULT, "gemini-2.5-flash");
        assert_eq!(flash.price.map(|p| p.output_per_mtok), Some(2.50));
        assert_eq!(
            ModelInfo::lookup(TABLE, &DEFAULT, "gemini-2.0-flash-001").max_output_tokens,
            8_192
        );
        assert_eq!(
            ModelInfo::lookup(TABLE, &DEFAULT, "gemma-9").context_window,
            32_768
        );
    }
}
