//! The vendor adapters, undecorated: one per provider kind, for chat and for embeddings.

use ripcord_providers::Vendor;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ripcord_core::{ChatModel, EmbeddingChain, EmbeddingModel, Result};
#[cfg(feature = "vertex-anthropic")]
use ripcord_providers::google::VertexAnthropic;
#[cfg(feature = "gemini")]
use ripcord_providers::google::{Gemini, GeminiConfig, Thinking};
#[cfg(any(feature = "vertex", feature = "vertex-anthropic"))]
use ripcord_providers::google::{GoogleCredentials, VertexConfig};
use ripcord_providers::{
    Anthropic, AnthropicConfig, HttpClient, OpenAi, OpenAiConfig, Timeouts, compat,
};
#[cfg(feature = "azure")]
use ripcord_providers::{AzureConfig, AzureOpenAi};
use secrecy::SecretString;

use super::config_error;
#[cfg(any(feature = "vertex", feature = "vertex-anthropic"))]
use crate::config::VertexCredentials;
use crate::config::{Provider, ProviderKind};

fn timeouts(p: &Provider) -> Timeouts {
    let mut t = Timeouts::default();
    if let Some(ms) = p.timeouts.connect_ms {
        t = t.with_connect(Duration::from_millis(ms));
    }
    if let Some(ms) = p.timeouts.first_token_ms {
        t = t.with_first_token(Duration::from_millis(ms));
    }
    if let Some(ms) = p.timeouts.stream_first_token_ms {
        t = t.with_stream_first_token(Duration::from_millis(ms));
    }
    if let Some(ms) = p.timeouts.idle_ms {
        t = t.with_stream_idle(Duration::from_millis(ms));
    }
    if let Some(n) = p.timeouts.max_skipped_events {
        t = t.with_max_skipped_events(n);
    }
    t
}

/// The HTTP clients of one build, one per connect limit: providers with the same limit share a
/// connection pool, and each provider's connections are opened within its own `connect_ms`
/// (the library's [`Timeouts::default`] when unset). A client is made when a provider first
/// needs it.
#[derive(Debug, Default)]
pub(super) struct Clients {
    by_connect: Mutex<BTreeMap<Duration, HttpClient>>,
}

impl Clients {
    /// The client whose connect limit is `p`'s.
    pub(super) fn of(&self, p: &Provider) -> Result<HttpClient> {
        let connect = timeouts(p).connect;
        let mut clients = self
            .by_connect
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(c) = clients.get(&connect) {
            return Ok(c.clone());
        }
        let client = HttpClient::new(connect)?;
        clients.insert(connect, client.clone());
        Ok(client)
    }
}

fn key(p: &Provider) -> SecretString {
    p.api_key
        .clone()
        .unwrap_or_else(|| SecretString::from(String::new()))
}

pub(super) fn model_name(p: &Provider) -> String {
    p.model.clone().unwrap_or_default()
}

/// An adapter of the OpenAI wire family: each serves both chat and embeddings.
enum OpenAiFamily {
    OpenAi(OpenAi),
    #[cfg(feature = "azure")]
    Azure(AzureOpenAi),
    Compatible(compat::OpenAiCompatible),
}

impl OpenAiFamily {
    /// Builds the adapter for `p` asking for `model`; `None` for kinds outside the family.
    fn build(p: &Provider, model: &str, client: &HttpClient) -> Result<Option<Self>> {
        let t = timeouts(p);
        #[cfg(feature = "azure")]
        if p.kind == ProviderKind::Vendor(Vendor::AzureOpenAi) {
            let mut c = AzureConfig::new(
                p.base_url.clone().unwrap_or_default(),
                p.deployment.clone().unwrap_or_default(),
                key(p),
            )
            .with_name(p.name.clone())
            .with_timeouts(t)
            .with_client(client.clone())
            .with_wire(p.wire);
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
        // An OpenAI-compatible kind has its preset in the vendor registry.
        Ok(match (p.kind, p.kind.vendor().and_then(compat::preset)) {
            (ProviderKind::Vendor(Vendor::OpenAi), _) => Some(OpenAiFamily::OpenAi(
                OpenAi::new(c.with_wire(p.wire))?.named(p.name.clone()),
            )),
            (_, Some(preset)) => Some(OpenAiFamily::Compatible(
                compat::OpenAiCompatible::from_config(preset, c)?.named(p.name.clone()),
            )),
            _ => None,
        })
    }

    fn chat(self) -> Arc<dyn ChatModel> {
        match self {
            OpenAiFamily::OpenAi(m) => Arc::new(m),
            #[cfg(feature = "azure")]
            OpenAiFamily::Azure(m) => Arc::new(m),
            OpenAiFamily::Compatible(m) => Arc::new(m),
        }
    }

    fn embeddings(self) -> Arc<dyn EmbeddingModel> {
        match self {
            OpenAiFamily::OpenAi(m) => Arc::new(m),
            #[cfg(feature = "azure")]
            OpenAiFamily::Azure(m) => Arc::new(m),
            OpenAiFamily::Compatible(m) => Arc::new(m),
        }
    }
}

/// Gemini on AI Studio for `p`, asking for `model`.
#[cfg(feature = "gemini")]
fn gemini(p: &Provider, model: &str, client: &HttpClient) -> Result<Gemini> {
    let mut c = GeminiConfig::new(model, key(p))
        .with_name(p.name.clone())
        .with_timeouts(timeouts(p))
        .with_client(client.clone());
    if let Some(u) = &p.base_url {
        c = c.with_base_url(u.clone());
    }
    if let Some(b) = p.thinking_budget {
        c = c.with_thinking(Thinking::budget(b));
    }
    Ok(Gemini::new(c)?.named(p.name.clone()))
}

/// The Vertex configuration of `p`.
#[cfg(any(feature = "vertex", feature = "vertex-anthropic"))]
fn vertex_config(p: &Provider, client: &HttpClient) -> Result<VertexConfig> {
    vertex_config_for(p, &model_name(p), client)
}

/// The Vertex configuration of `p`, asking for `model` (an embedding model for `[embeddings]`).
#[cfg(any(feature = "vertex", feature = "vertex-anthropic"))]
fn vertex_config_for(p: &Provider, model: &str, client: &HttpClient) -> Result<VertexConfig> {
    let Some(v) = &p.vertex else {
        return Err(config_error(format!(
            "provider {:?} ({}): no project, location or credentials",
            p.name,
            p.kind.as_str()
        )));
    };
    let creds = match &v.credentials {
        VertexCredentials::KeyFile(path) => GoogleCredentials::key_file(path)?,
        VertexCredentials::Token(t) => GoogleCredentials::access_token(t.clone()),
    };
    let mut c = VertexConfig::new(model, v.project.clone(), v.location.clone(), creds)
        .with_name(p.name.clone())
        .with_timeouts(timeouts(p))
        .with_client(client.clone());
    if let Some(u) = &p.base_url {
        c = c.with_base_url(u.clone());
    }
    // Only Gemini models think on a budget (the config refuses the key on other kinds).
    #[cfg(feature = "gemini")]
    if let Some(b) = p.thinking_budget {
        c = c.with_thinking(Thinking::budget(b));
    }
    Ok(c)
}

/// `model` with the provider's configured window and output cap, when it sets any.
fn capped(p: &Provider, model: Arc<dyn ChatModel>) -> Arc<dyn ChatModel> {
    if p.context_window.is_none() && p.max_output_tokens.is_none() {
        return model;
    }
    let mut caps = model.capabilities().clone();
    if let Some(w) = p.context_window {
        caps = caps.with_context_window(w);
    }
    if let Some(n) = p.max_output_tokens {
        caps = caps.with_max_output_tokens(n);
    }
    Arc::new(super::policies::WithCaps { inner: model, caps })
}

/// Builds the vendor adapter (undecorated) for one provider, with its configured window.
pub(super) fn adapter(p: &Provider, clients: &Clients) -> Result<Arc<dyn ChatModel>> {
    uncapped(p, &clients.of(p)?).map(|m| capped(p, m))
}

fn uncapped(p: &Provider, client: &HttpClient) -> Result<Arc<dyn ChatModel>> {
    if let Some(m) = OpenAiFamily::build(p, &model_name(p), client)? {
        return Ok(m.chat());
    }
    Ok(match p.kind {
        ProviderKind::Vendor(Vendor::Anthropic) => {
            let mut c = AnthropicConfig::new(model_name(p), key(p))
                .with_name(p.name.clone())
                .with_timeouts(timeouts(p))
                .with_client(client.clone());
            if let Some(u) = &p.base_url {
                c = c.with_base_url(u.clone());
            }
            Arc::new(Anthropic::new(c)?.named(p.name.clone()))
        }
        #[cfg(feature = "bedrock")]
        ProviderKind::Vendor(Vendor::Bedrock) => {
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
        #[cfg(feature = "gemini")]
        ProviderKind::Vendor(Vendor::Gemini) => Arc::new(gemini(p, &model_name(p), client)?),
        #[cfg(feature = "vertex")]
        ProviderKind::Vendor(Vendor::Vertex) => {
            Arc::new(Gemini::vertex(vertex_config(p, client)?)?.named(p.name.clone()))
        }
        #[cfg(feature = "vertex-anthropic")]
        ProviderKind::Vendor(Vendor::VertexAnthropic) => {
            Arc::new(VertexAnthropic::new(vertex_config(p, client)?)?.named(p.name.clone()))
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
            if let Some(n) = p.max_batch {
                b = b.max_batch(n);
            }
            if let Some(d) = p.device {
                b = b.device(d);
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

/// `link` retried under the provider's `[providers.retry]`, as its chat link is.
fn retried(p: &Provider, link: Arc<dyn EmbeddingModel>) -> Result<Arc<dyn EmbeddingModel>> {
    Ok(match super::decorate::retry_policy(p)? {
        Some(policy) => Arc::new(ripcord_resilience::Retry::new(link, policy)),
        None => link,
    })
}

/// One embedding adapter per provider, all serving `model`, in an [`EmbeddingChain`], each
/// retried as the provider's chat link is.
pub(super) fn embedding_chain(
    providers: &[Provider],
    model: &str,
    clients: &Clients,
    deadline_ms: u64,
) -> Result<Arc<dyn EmbeddingModel>> {
    let mut b = EmbeddingChain::builder().deadline(Duration::from_millis(deadline_ms));
    for p in providers {
        let client = &clients.of(p)?;
        #[cfg(feature = "gemini")]
        if p.kind == ProviderKind::Vendor(Vendor::Gemini) {
            let link: Arc<dyn EmbeddingModel> = Arc::new(gemini(p, model, client)?);
            b = b.link_arc(retried(p, link)?);
            continue;
        }
        #[cfg(feature = "vertex")]
        if p.kind == ProviderKind::Vendor(Vendor::Vertex) {
            // Vertex's text-embedding models answer on `:predict`, not `generateContent`.
            let g = Gemini::vertex(vertex_config_for(p, model, client)?)?.named(p.name.clone());
            let link: Arc<dyn EmbeddingModel> = Arc::new(g);
            b = b.link_arc(retried(p, link)?);
            continue;
        }
        let Some(family) = OpenAiFamily::build(p, model, client)? else {
            return Err(config_error(format!(
                "provider {:?} ({}) has no embeddings endpoint",
                p.name,
                p.kind.as_str()
            )));
        };
        b = b.link_arc(retried(p, family.embeddings())?);
    }
    Ok(Arc::new(b.build().map_err(config_error)?))
}
