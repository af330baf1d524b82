//! The vendor adapters, undecorated: one per provider kind, for chat and for embeddings.

use std::sync::Arc;
use std::time::Duration;

use ripcord_core::{ChatModel, EmbeddingChain, EmbeddingModel, Result};
use ripcord_providers::{
    Anthropic, AnthropicConfig, AzureConfig, AzureOpenAi, HttpClient, OpenAi, OpenAiConfig,
    Timeouts, compat,
};
use secrecy::SecretString;

use super::config_error;
use crate::config::{Provider, ProviderKind};

fn timeouts(p: &Provider) -> Timeouts {
    let mut t = Timeouts::default();
    if let Some(ms) = p.timeouts.connect_ms {
        t = t.with_connect(Duration::from_millis(ms));
    }
    if let Some(ms) = p.timeouts.first_token_ms {
        t = t.with_first_token(Duration::from_millis(ms));
    }
    if let Some(ms) = p.timeouts.idle_ms {
        t = t.with_stream_idle(Duration::from_millis(ms));
    }
    if let Some(n) = p.timeouts.max_skipped_events {
        t = t.with_max_skipped_events(n);
    }
    t
}

fn key(p: &Provider) -> SecretString {
    p.api_key
        .clone()
        .unwrap_or_else(|| SecretString::from(String::new()))
}

pub(super) fn model_name(p: &Provider) -> String {
    p.model.clone().unwrap_or_default()
}

/// The preset of an OpenAI-compatible kind.
fn preset_of(kind: ProviderKind) -> Option<compat::Preset> {
    Some(match kind {
        ProviderKind::Deepseek => compat::deepseek(),
        ProviderKind::Zhipu => compat::zhipu(),
        ProviderKind::Qwen => compat::qwen(),
        ProviderKind::Moonshot => compat::moonshot(),
        ProviderKind::Qianfan => compat::qianfan(),
        ProviderKind::Ollama => compat::ollama(),
        ProviderKind::Vllm => compat::vllm(),
        ProviderKind::Mistral => compat::mistral(),
        ProviderKind::Groq => compat::groq(),
        ProviderKind::Xai => compat::xai(),
        ProviderKind::Openrouter => compat::openrouter(),
        ProviderKind::Together => compat::together(),
        ProviderKind::Fireworks => compat::fireworks(),
        ProviderKind::Cerebras => compat::cerebras(),
        _ => return None,
    })
}

/// An adapter of the OpenAI wire family: each serves both chat and embeddings.
enum OpenAiFamily {
    OpenAi(OpenAi),
    Azure(AzureOpenAi),
    Compatible(compat::OpenAiCompatible),
}

impl OpenAiFamily {
    /// Builds the adapter for `p` asking for `model`; `None` for kinds outside the family.
    fn build(p: &Provider, model: &str, client: &HttpClient) -> Result<Option<Self>> {
        let t = timeouts(p);
        if p.kind == ProviderKind::AzureOpenai {
            let mut c = AzureConfig::new(
                p.base_url.clone().unwrap_or_default(),
                p.deployment.clone().unwrap_or_default(),
                key(p),
            )
            .with_name(p.name.clone())
            .with_timeouts(t)
            .with_client(client.clone());
            if let Some(v) = &p.api_version {
                c = c.with_api_version(v.clone());
            }
            if !model.is_empty() {
                c = c.with_model(model);
            }
            return Ok(Some(OpenAiFamily::Azure(
                AzureOpenAi::from_config(c)?.named(p.name.clone()),
            )));
        }
        // Keyless endpoints (Ollama, vLLM) get no key rather than an empty one.
        let mut c = OpenAiConfig::keyless(model)
            .with_name(p.name.clone())
            .with_timeouts(t)
            .with_client(client.clone());
        if let Some(k) = &p.api_key {
            c = c.with_api_key(k.clone());
        }
        if let Some(u) = &p.base_url {
            c = c.with_base_url(u.clone());
        }
        Ok(match (p.kind, preset_of(p.kind)) {
            (ProviderKind::Openai, _) => {
                Some(OpenAiFamily::OpenAi(OpenAi::new(c)?.named(p.name.clone())))
            }
            (_, Some(preset)) => Some(OpenAiFamily::Compatible(
                compat::OpenAiCompatible::from_config(preset, c)?.named(p.name.clone()),
            )),
            _ => None,
        })
    }

    fn chat(self) -> Arc<dyn ChatModel> {
        match self {
            OpenAiFamily::OpenAi(m) => Arc::new(m),
            OpenAiFamily::Azure(m) => Arc::new(m),
            OpenAiFamily::Compatible(m) => Arc::new(m),
        }
    }

    fn embeddings(self) -> Arc<dyn EmbeddingModel> {
        match self {
            OpenAiFamily::OpenAi(m) => Arc::new(m),
            OpenAiFamily::Azure(m) => Arc::new(m),
            OpenAiFamily::Compatible(m) => Arc::new(m),
        }
    }
}

/// Builds the vendor adapter (undecorated) for one provider.
pub(super) fn adapter(p: &Provider, client: &HttpClient) -> Result<Arc<dyn ChatModel>> {
    if let Some(m) = OpenAiFamily::build(p, &model_name(p), client)? {
        return Ok(m.chat());
    }
    Ok(match p.kind {
        ProviderKind::Anthropic => {
            let mut c = AnthropicConfig::new(model_name(p), key(p))
                .with_name(p.name.clone())
                .with_timeouts(timeouts(p))
                .with_client(client.clone());
            if let Some(u) = &p.base_url {
                c = c.with_base_url(u.clone());
            }
            Arc::new(Anthropic::new(c)?.named(p.name.clone()))
        }
        ProviderKind::Bedrock => {
            let Some(b) = &p.bedrock else {
                return Err(config_error(format!(
                    "provider {:?}: bedrock settings were not resolved",
                    p.name
                )));
            };
            let mut c = ripcord_providers::BedrockConfig::new(model_name(p), b.region.clone())
                .with_credentials(b.credentials.clone())
                .with_name(p.name.clone())
                .with_timeouts(timeouts(p))
                .with_client(client.clone());
            if let Some(u) = &p.base_url {
                c = c.with_base_url(u.clone());
            }
            Arc::new(ripcord_providers::Bedrock::new(c)?.named(p.name.clone()))
        }
        ProviderKind::LocalOnnx => {
            let dir = p
                .model_dir
                .clone()
                .unwrap_or_else(ripcord_local_onnx::default_model_dir);
            let mut b = ripcord_local_onnx::LocalLlama::builder(&dir).name(p.name.clone());
            if let Some(v) = p.variant {
                b = b.variant(v);
            }
            if let Some(n) = p.threads {
                b = b.threads(n);
            }
            Arc::new(b.build()?)
        }
        other => {
            return Err(config_error(format!(
                "provider {:?}: no adapter for kind {}",
                p.name,
                other.as_str()
            )));
        }
    })
}

/// One embedding adapter per provider, all serving `model`, in an [`EmbeddingChain`].
pub(super) fn embedding_chain(
    providers: &[Provider],
    model: &str,
    client: &HttpClient,
    deadline_ms: u64,
) -> Result<Arc<dyn EmbeddingModel>> {
    let mut b = EmbeddingChain::builder().deadline(Duration::from_millis(deadline_ms));
    for p in providers {
        let Some(family) = OpenAiFamily::build(p, model, client)? else {
            return Err(config_error(format!(
                "provider {:?} ({}) has no embeddings endpoint",
                p.name,
                p.kind.as_str()
            )));
        };
        let link = family.embeddings();
        b = b.link_arc(link);
    }
    Ok(Arc::new(b.build().map_err(config_error)?))
}
