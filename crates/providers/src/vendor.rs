//! [`Vendor`]: the one list of the vendors this crate speaks to — each one's config name, the
//! cargo feature that builds its adapter, and the facts a caller needs before building one.
//!
//! The list is the same in every build; [`Vendor::is_built`] says whether this build has the
//! adapter, so a config that names a vendor left out of the build is refused naming the
//! feature, not taken for a typo.
//!
//! ```
//! use ripcord_providers::Vendor;
//! let v: Vendor = "azure-openai".parse().unwrap();
//! assert_eq!(v, Vendor::AzureOpenAi);
//! assert_eq!(v.feature(), "azure");
//! assert_eq!(v.to_string(), "azure-openai");
//! assert!("gpt".parse::<Vendor>().is_err());
//! ```

use std::fmt;
use std::str::FromStr;

/// A vendor (or vendor-compatible server) with an adapter in this crate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Vendor {
    /// OpenAI (Chat Completions or Responses).
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
    /// Azure OpenAI.
    AzureOpenAi,
    /// DeepSeek (OpenAI-compatible).
    DeepSeek,
    /// Zhipu GLM (OpenAI-compatible).
    Zhipu,
    /// Qwen on Alibaba DashScope (compatible mode).
    Qwen,
    /// Moonshot / Kimi (OpenAI-compatible).
    Moonshot,
    /// Baidu Qianfan v2 (OpenAI-compatible).
    Qianfan,
    /// Ollama's OpenAI-compatible endpoint.
    Ollama,
    /// vLLM's OpenAI-compatible server.
    Vllm,
    /// Gemini on Google AI Studio.
    Gemini,
    /// Gemini on Vertex AI.
    Vertex,
    /// Claude on Vertex AI.
    VertexAnthropic,
    /// AWS Bedrock (Converse / ConverseStream).
    Bedrock,
    /// Mistral AI (OpenAI-compatible).
    Mistral,
    /// Groq (OpenAI-compatible).
    Groq,
    /// xAI / Grok (OpenAI-compatible).
    Xai,
    /// OpenRouter (OpenAI-compatible).
    OpenRouter,
    /// Together AI (OpenAI-compatible).
    Together,
    /// Fireworks AI (OpenAI-compatible).
    Fireworks,
    /// Cerebras (OpenAI-compatible).
    Cerebras,
}

/// Each vendor with its config name and the feature that builds it, in one table.
const TABLE: [(Vendor, &str, &str); 21] = [
    (Vendor::OpenAi, "openai", "openai"),
    (Vendor::Anthropic, "anthropic", "anthropic"),
    (Vendor::AzureOpenAi, "azure-openai", "azure"),
    (Vendor::DeepSeek, "deepseek", "deepseek"),
    (Vendor::Zhipu, "zhipu", "zhipu"),
    (Vendor::Qwen, "qwen", "qwen"),
    (Vendor::Moonshot, "moonshot", "moonshot"),
    (Vendor::Qianfan, "qianfan", "qianfan"),
    (Vendor::Ollama, "ollama", "ollama"),
    (Vendor::Vllm, "vllm", "vllm"),
    (Vendor::Gemini, "gemini", "gemini"),
    (Vendor::Vertex, "vertex", "vertex"),
    (
        Vendor::VertexAnthropic,
        "vertex-anthropic",
        "vertex-anthropic",
    ),
    (Vendor::Bedrock, "bedrock", "bedrock"),
    (Vendor::Mistral, "mistral", "mistral"),
    (Vendor::Groq, "groq", "groq"),
    (Vendor::Xai, "xai", "xai"),
    (Vendor::OpenRouter, "openrouter", "openrouter"),
    (Vendor::Together, "together", "together"),
    (Vendor::Fireworks, "fireworks", "fireworks"),
    (Vendor::Cerebras, "cerebras", "cerebras"),
];

impl Vendor {
    /// Every vendor, in the table's order.
    pub const ALL: [Vendor; 21] = {
        let mut all = [Vendor::OpenAi; 21];
        let mut i = 0;
        while i < TABLE.len() {
            all[i] = TABLE[i].0;
            i += 1;
        }
        all
    };

    /// Every vendor's config name, in [`Vendor::ALL`]'s order.
    pub const NAMES: [&'static str; 21] = {
        let mut names = [""; 21];
        let mut i = 0;
        while i < TABLE.len() {
            names[i] = TABLE[i].1;
            i += 1;
        }
        names
    };

    /// Its row of the table.
    const fn row(self) -> &'static (Vendor, &'static str, &'static str) {
        &TABLE[self as usize]
    }

    /// The name a config uses for it (`"azure-openai"`, `"vertex-anthropic"`, …).
    pub const fn name(self) -> &'static str {
        self.row().1
    }

    /// The cargo feature of this crate that builds its adapter.
    pub const fn feature(self) -> &'static str {
        self.row().2
    }

    /// True when this build has its adapter (its [`feature`](Vendor::feature) is on).
    pub const fn is_built(self) -> bool {
        match self {
            Vendor::OpenAi => cfg!(feature = "openai"),
            Vendor::Anthropic => cfg!(feature = "anthropic"),
            Vendor::AzureOpenAi => cfg!(feature = "azure"),
            Vendor::DeepSeek => cfg!(feature = "deepseek"),
            Vendor::Zhipu => cfg!(feature = "zhipu"),
            Vendor::Qwen => cfg!(feature = "qwen"),
            Vendor::Moonshot => cfg!(feature = "moonshot"),
            Vendor::Qianfan => cfg!(feature = "qianfan"),
            Vendor::Ollama => cfg!(feature = "ollama"),
            Vendor::Vllm => cfg!(feature = "vllm"),
            Vendor::Gemini => cfg!(feature = "gemini"),
            Vendor::Vertex => cfg!(feature = "vertex"),
            Vendor::VertexAnthropic => cfg!(feature = "vertex-anthropic"),
            Vendor::Bedrock => cfg!(feature = "bedrock"),
            Vendor::Mistral => cfg!(feature = "mistral"),
            Vendor::Groq => cfg!(feature = "groq"),
            Vendor::Xai => cfg!(feature = "xai"),
            Vendor::OpenRouter => cfg!(feature = "openrouter"),
            Vendor::Together => cfg!(feature = "together"),
            Vendor::Fireworks => cfg!(feature = "fireworks"),
            Vendor::Cerebras => cfg!(feature = "cerebras"),
        }
    }

    /// The vendor a config name names.
    pub fn from_name(name: &str) -> Option<Vendor> {
        TABLE
            .iter()
            .find(|(_, n, _)| *n == name)
            .map(|(v, _, _)| *v)
    }

    /// True for the OpenAI-compatible presets ([`crate::compat`]): DeepSeek, Zhipu, Qwen, …
    pub const fn is_openai_compatible(self) -> bool {
        !matches!(
            self,
            Vendor::OpenAi
                | Vendor::Anthropic
                | Vendor::AzureOpenAi
                | Vendor::Gemini
                | Vendor::Vertex
                | Vendor::VertexAnthropic
                | Vendor::Bedrock
        )
    }

    /// True for the Vertex AI vendors (a Google project, location and credentials).
    pub const fn is_vertex(self) -> bool {
        matches!(self, Vendor::Vertex | Vendor::VertexAnthropic)
    }

    /// True when it works without an API key: local servers (Ollama, vLLM), Bedrock (AWS
    /// credentials; its API key is optional) and Vertex (Google credentials).
    pub const fn key_optional(self) -> bool {
        matches!(self, Vendor::Ollama | Vendor::Vllm | Vendor::Bedrock) || self.is_vertex()
    }
}

impl fmt::Display for Vendor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is no vendor's, with the names that are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownVendor(pub String);

impl fmt::Display for UnknownVendor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown vendor `{}`, expected one of {}",
            self.0,
            Vendor::NAMES.join(", ")
        )
    }
}

impl std::error::Error for UnknownVendor {}

impl FromStr for Vendor {
    type Err = UnknownVendor;

    fn from_str(s: &str) -> Result<Vendor, UnknownVendor> {
        Vendor::from_name(s).ok_or_else(|| UnknownVendor(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_in_declaration_order_and_names_are_unique() {
        for (i, (v, name, _)) in TABLE.iter().enumerate() {
            assert_eq!(*v as usize, i, "{name} is out of place in TABLE");
            assert_eq!(Vendor::from_name(name), Some(*v));
            assert_eq!(v.name(), *name);
        }
        let mut names = Vendor::NAMES.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), TABLE.len());
    }

    #[test]
    fn every_feature_is_one_of_the_crate_s() {
        let manifest = include_str!("../Cargo.toml");
        for v in Vendor::ALL {
            let line = format!("\n{} = [", v.feature());
            assert!(
                manifest.contains(&line),
                "no feature {:?} for {v}",
                v.feature()
            );
        }
    }

    #[test]
    fn an_unknown_name_lists_the_known_ones() {
        let e = "gpt".parse::<Vendor>().unwrap_err();
        assert!(
            e.to_string()
                .starts_with("unknown vendor `gpt`, expected one of openai, ")
        );
    }
}
