//! Bedrock's models: windows, output caps and on-demand list prices in `us-east-1` (USD per
//! million tokens, at the time of writing; the cached price is the cache-read price), and how a
//! model id names its foundation model.
//!
//! A model id is a foundation model (`anthropic.claude-sonnet-4-5-20250929-v1:0`), a
//! cross-region inference profile (the same with a geography prefix: `us.`, `eu.`, `apac.`,
//! `global.`, …), or an ARN of either (`arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic…`).
//! The table is looked up by the foundation model the id names. An application inference
//! profile's ARN names no model and gets the default row.

use ripcord_core::Price;

use crate::models::{ModelInfo, cached_price as c};

const fn p(input: f64, output: f64) -> Price {
    Price::per_million(input, output)
}

/// Bedrock models by foundation-model prefix.
pub(crate) const TABLE: &[ModelInfo] = &[
    ModelInfo::new("anthropic.claude-opus-4-5", 200_000, 64_000)
        .full()
        .price(c(5.0, 25.0, 0.50)),
    ModelInfo::new("anthropic.claude-opus-4-1", 200_000, 32_000)
        .full()
        .price(c(15.0, 75.0, 1.50)),
    ModelInfo::new("anthropic.claude-opus-4", 200_000, 32_000)
        .full()
        .price(c(15.0, 75.0, 1.50)),
    ModelInfo::new("anthropic.claude-sonnet-4-5", 200_000, 64_000)
        .full()
        .price(c(3.0, 15.0, 0.30)),
    ModelInfo::new("anthropic.claude-sonnet-4", 200_000, 64_000)
        .full()
        .price(c(3.0, 15.0, 0.30)),
    ModelInfo::new("anthropic.claude-haiku-4-5", 200_000, 64_000)
        .full()
        .price(c(1.0, 5.0, 0.10)),
    ModelInfo::new("anthropic.claude-3-7-sonnet", 200_000, 64_000)
        .full()
        .price(c(3.0, 15.0, 0.30)),
    ModelInfo::new("anthropic.claude-3-5-sonnet", 200_000, 8_192)
        .full()
        .price(p(3.0, 15.0)),
    ModelInfo::chat("anthropic.claude-3-5-haiku", 200_000, 8_192).price(c(0.80, 4.0, 0.08)),
    ModelInfo::new("anthropic.claude-3-haiku", 200_000, 4_096)
        .full()
        .price(p(0.25, 1.25)),
    ModelInfo::new("amazon.nova-premier", 1_000_000, 10_000)
        .full()
        .price(p(2.50, 12.50)),
    ModelInfo::new("amazon.nova-pro", 300_000, 10_000)
        .full()
        .price(c(0.80, 3.20, 0.20)),
    ModelInfo::new("amazon.nova-lite", 300_000, 10_000)
        .full()
        .price(c(0.06, 0.24, 0.015)),
    ModelInfo::chat("amazon.nova-micro", 128_000, 10_000).price(c(0.035, 0.14, 0.00875)),
    ModelInfo::new("meta.llama4-maverick-17b-instruct", 1_000_000, 8_192)
        .full()
        .price(p(0.24, 0.97)),
    ModelInfo::new("meta.llama4-scout-17b-instruct", 3_500_000, 8_192)
        .full()
        .price(p(0.17, 0.66)),
    ModelInfo::chat("meta.llama3-3-70b-instruct", 128_000, 8_192).price(p(0.72, 0.72)),
    ModelInfo::chat("meta.llama3-1-8b-instruct", 128_000, 8_192).price(p(0.22, 0.22)),
    ModelInfo::chat("mistral.mistral-large-2407", 128_000, 8_192).price(p(2.0, 6.0)),
    ModelInfo::new("mistral.pixtral-large-2502", 128_000, 8_192)
        .full()
        .price(p(2.0, 6.0)),
    ModelInfo::new("deepseek.r1", 128_000, 32_768).price(p(1.35, 5.40)),
    ModelInfo::chat("openai.gpt-oss-120b", 128_000, 32_768).price(p(0.15, 0.60)),
];

/// An unknown Bedrock model: text with tools, a modest window.
pub(crate) const DEFAULT: ModelInfo = ModelInfo::chat("", 128_000, 4_096);

/// Geography prefixes of cross-region inference profiles.
const GEOGRAPHIES: [&str; 8] = ["us", "eu", "apac", "global", "us-gov", "jp", "au", "ca"];

/// The foundation model a model id names: the ARN's resource, without a geography prefix.
pub(crate) fn foundation_model(id: &str) -> &str {
    let id = id.trim();
    let id = match id.strip_prefix("arn:") {
        Some(rest) => rest.rsplit_once('/').map_or(rest, |(_, r)| r),
        None => id,
    };
    match id.split_once('.') {
        Some((geo, rest)) if GEOGRAPHIES.contains(&geo) => rest,
        _ => id,
    }
}

/// The region of an ARN model id (`arn:aws:bedrock:REGION:…`), if it has one.
pub(crate) fn arn_region(id: &str) -> Option<&str> {
    let mut parts = id.trim().strip_prefix("arn:")?.split(':');
    let _partition = parts.next()?;
    let _service = parts.next()?;
    parts.next().filter(|r| !r.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_profiles_and_arns_name_their_model() {
        for (id, base) in [
            (
                "anthropic.claude-sonnet-4-5-20250929-v1:0",
                "anthropic.claude-sonnet-4-5-20250929-v1:0",
            ),
            (
                "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
                "anthropic.claude-sonnet-4-5-20250929-v1:0",
            ),
            ("eu.amazon.nova-pro-v1:0", "amazon.nova-pro-v1:0"),
            (
                "apac.anthropic.claude-3-5-sonnet-20240620-v1:0",
                "anthropic.claude-3-5-sonnet-20240620-v1:0",
            ),
            (
                "global.anthropic.claude-haiku-4-5-20251001-v1:0",
                "anthropic.claude-haiku-4-5-20251001-v1:0",
            ),
            (
                "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.meta.llama3-3-70b-instruct-v1:0",
                "meta.llama3-3-70b-instruct-v1:0",
            ),
            (
                "arn:aws:bedrock:eu-west-1::foundation-model/mistral.mistral-large-2407-v1:0",
                "mistral.mistral-large-2407-v1:0",
            ),
            (
                "arn:aws:bedrock:us-west-2:123456789012:application-inference-profile/a1b2c3",
                "a1b2c3",
            ),
        ] {
            assert_eq!(foundation_model(id), base, "{id}");
        }
        assert_eq!(
            arn_region("arn:aws:bedrock:eu-central-1:123456789012:inference-profile/eu.x"),
            Some("eu-central-1")
        );
        assert_eq!(arn_region("us.anthropic.claude"), None);
        let row = ModelInfo::lookup(
            TABLE,
            &DEFAULT,
            foundation_model("us.anthropic.claude-sonnet-4-5-20250929-v1:0"),
        );
        assert_eq!(row.max_output_tokens, 64_000);
        assert!(row.vision);
        let haiku = ModelInfo::lookup(TABLE, &DEFAULT, "anthropic.claude-3-5-haiku-20241022-v1:0");
        assert!(!haiku.vision);
        assert_eq!(
            ModelInfo::lookup(TABLE, &DEFAULT, "a1b2c3").context_window,
            128_000
        );
    }
}
