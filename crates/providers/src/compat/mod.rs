//! OpenAI-compatible vendors as presets: data plus a small error-mapping function.
//!
//! Many vendors serve the Chat Completions wire format. What differs is data — the base URL,
//! whether a key is needed and where it comes from, the model table, the region, which field
//! carries `max_tokens`, whether `json_schema` is understood — and the vendor's own error codes
//! in the body (Zhipu's `1113`, DashScope's `Arrearage`, Moonshot's
//! `exceeded_current_quota_error`, …). A [`Preset`] holds exactly that, and
//! [`OpenAiCompatible`] runs it on the one OpenAI engine: no vendor gets a copy of the adapter.
//!
//! Build your own preset for a vendor not listed here with [`Preset::new`] and the `with_*`
//! methods, including an [`ErrorHook`] for its codes.
//!
//! | preset | feature | base URL | key env |
//! | --- | --- | --- | --- |
//! | [`deepseek()`] | `deepseek` | `https://api.deepseek.com` | `DEEPSEEK_API_KEY` |
//! | [`zhipu()`] | `zhipu` | `https://open.bigmodel.cn/api/paas/v4` | `ZHIPUAI_API_KEY` |
//! | [`qwen()`] | `qwen` | `https://dashscope.aliyuncs.com/compatible-mode/v1` | `DASHSCOPE_API_KEY` |
//! | [`moonshot()`] | `moonshot` | `https://api.moonshot.cn/v1` | `MOONSHOT_API_KEY` |
//! | [`qianfan()`] | `qianfan` | `https://qianfan.baidubce.com/v2` | `QIANFAN_API_KEY` |
//! | [`ollama()`] | `ollama` | `http://localhost:11434/v1` | none |
//! | [`vllm()`] | `vllm` | required (`VLLM_BASE_URL`) | `VLLM_API_KEY` (optional) |
//! | [`mistral()`] | `mistral` | `https://api.mistral.ai/v1` | `MISTRAL_API_KEY` |
//! | [`groq()`] | `groq` | `https://api.groq.com/openai/v1` | `GROQ_API_KEY` |
//! | [`xai()`] | `xai` | `https://api.x.ai/v1` | `XAI_API_KEY` |
//! | [`openrouter()`] | `openrouter` | `https://openrouter.ai/api/v1` | `OPENROUTER_API_KEY` |
//! | [`together()`] | `together` | `https://api.together.xyz/v1` | `TOGETHER_API_KEY` |
//! | [`fireworks()`] | `fireworks` | `https://api.fireworks.ai/inference/v1` | `FIREWORKS_API_KEY` |
//! | [`cerebras()`] | `cerebras` | `https://api.cerebras.ai/v1` | `CEREBRAS_API_KEY` |

use std::borrow::Cow;
use std::fmt;

use ::http::header::HeaderMap;
use ripcord_core::{Capabilities, Error, ErrorKind, Locality, Price, Result};
use secrecy::SecretString;

use crate::error_body::ErrorHook;
use crate::http::{self, Auth};
use crate::models::{ModelInfo, is_loopback};
use crate::openai::{AssistantPrefill, Dialect, MaxTokensField, OpenAi, OpenAiConfig, Setup};

/// An OpenAI-compatible vendor: its data and its error codes.
///
/// # Examples
///
/// ```
/// use ripcord_core::ErrorKind;
/// use ripcord_providers::{ModelInfo, compat::{OpenAiCompatible, Preset}};
/// const MODELS: &[ModelInfo] = &[ModelInfo::new("acme-large", 65_536, 8_192).tools().json()];
/// let acme = Preset::new("acme", "https://api.acme.example/v1")
///     .with_key_env("ACME_API_KEY")
///     .with_models(MODELS, ModelInfo::new("", 8_192, 2_048))
///     .with_error_hook(|_status, body| (body.code.as_deref() == Some("E42")).then_some(ErrorKind::QuotaExhausted));
/// let m = OpenAiCompatible::new(acme, "acme-large", Some("key-123".into()))?;
/// # drop(m);
/// # Ok::<(), ripcord_core::Error>(())
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct Preset {
    /// The vendor name: the default link name and the locality's vendor.
    pub vendor: &'static str,
    /// The base URL; `None` when it must be configured (vLLM).
    pub base_url: Option<Cow<'static, str>>,
    /// The environment variable [`OpenAiCompatible::from_env`] reads the key from.
    pub key_env: Option<&'static str>,
    /// The environment variable that overrides the base URL.
    pub base_url_env: Option<&'static str>,
    /// Whether the vendor needs a key.
    pub key_required: bool,
    /// Where the vendor processes data (`cn`, `us`, …), when known.
    pub region: Option<&'static str>,
    /// A base URL on this machine makes the link `Locality::Local` and free (Ollama, vLLM).
    pub local_on_loopback: bool,
    /// Model rows by name prefix.
    pub models: &'static [ModelInfo],
    /// The row for unknown model names.
    pub default_model: ModelInfo,
    /// Which field carries `max_tokens`.
    pub max_tokens_field: MaxTokensField,
    /// Whether `response_format: json_schema` is understood (else `json_object` plus the
    /// schema in a system message).
    pub json_schema: bool,
    /// Whether to send `stream_options.include_usage`.
    pub stream_usage: bool,
    /// The vendor's own error codes, run before the shared rules.
    pub error_hook: Option<ErrorHook>,
    /// How the vendor continues a final assistant message (assistant prefill), if it does.
    pub prefill: AssistantPrefill,
}

impl fmt::Debug for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Preset")
            .field("vendor", &self.vendor)
            .field("base_url", &self.base_url)
            .field("key_env", &self.key_env)
            .field("key_required", &self.key_required)
            .field("region", &self.region)
            .field("models", &self.models.len())
            .field("max_tokens_field", &self.max_tokens_field)
            .field("json_schema", &self.json_schema)
            .field("error_hook", &self.error_hook.is_some())
            .field("prefill", &self.prefill)
            .finish_non_exhaustive()
    }
}

impl Preset {
    /// A preset for `vendor` at `base_url`: key required, no table (a 32k/4k default row with
    /// tools and JSON), `max_tokens`, no `json_schema`, usage on streams, no hook.
    pub const fn new(vendor: &'static str, base_url: &'static str) -> Preset {
        Preset {
            vendor,
            base_url: Some(Cow::Borrowed(base_url)),
            key_env: None,
            base_url_env: None,
            key_required: true,
            region: None,
            local_on_loopback: false,
            models: &[],
            default_model: ModelInfo::chat("", 32_768, 4_096),
            max_tokens_field: MaxTokensField::MaxTokens,
            json_schema: false,
            stream_usage: true,
            error_hook: None,
            prefill: AssistantPrefill::None,
        }
    }

    /// Sets how the vendor continues a final assistant message; the links get
    /// [`Capabilities::assistant_prefill`](ripcord_core::Capabilities::assistant_prefill).
    pub const fn with_prefill(mut self, prefill: AssistantPrefill) -> Self {
        self.prefill = prefill;
        self
    }

    ripcord_core::setters! {
        /// Overrides the base URL (another region, a proxy, a self-hosted server).
        with_base_url(url: impl Into<String>) => base_url = Some(Cow::Owned(url.into()));
    }

    /// Sets the key's environment variable.
    pub const fn with_key_env(mut self, var: &'static str) -> Self {
        self.key_env = Some(var);
        self
    }

    /// Sets the base URL's environment variable.
    pub const fn with_base_url_env(mut self, var: &'static str) -> Self {
        self.base_url_env = Some(var);
        self
    }

    /// The vendor needs no key (one is still sent if given).
    pub const fn key_optional(mut self) -> Self {
        self.key_required = false;
        self
    }

    /// Sets the processing region.
    pub const fn with_region(mut self, region: &'static str) -> Self {
        self.region = Some(region);
        self
    }

    /// Loopback base URLs make the link local and free.
    pub const fn local_on_loopback(mut self) -> Self {
        self.local_on_loopback = true;
        self
    }

    /// Sets the model table and the default row.
    pub const fn with_models(mut self, models: &'static [ModelInfo], default: ModelInfo) -> Self {
        self.models = models;
        self.default_model = default;
        self
    }

    /// Sets which field carries `max_tokens`.
    pub const fn with_max_tokens_field(mut self, f: MaxTokensField) -> Self {
        self.max_tokens_field = f;
        self
    }

    /// Sets whether `json_schema` is understood.
    pub const fn with_json_schema(mut self, yes: bool) -> Self {
        self.json_schema = yes;
        self
    }

    /// Sets the vendor's error hook.
    pub const fn with_error_hook(mut self, hook: ErrorHook) -> Self {
        self.error_hook = Some(hook);
        self
    }

    /// The capabilities of `model` at `url`.
    fn capabilities(&self, model: &str, url: &url::Url) -> Capabilities {
        let row = ModelInfo::lookup(self.models, &self.default_model, model);
        let prefill = self.prefill != AssistantPrefill::None;
        if self.local_on_loopback && is_loopback(url) {
            return row
                .capabilities(Locality::Local)
                .with_price(Price::FREE)
                .with_assistant_prefill(prefill);
        }
        let locality = match self.region {
            Some(r) => Locality::cloud_in(self.vendor, r),
            None => Locality::cloud(self.vendor),
        };
        row.capabilities(locality).with_assistant_prefill(prefill)
    }
}

/// A model of an OpenAI-compatible vendor, run by the OpenAI engine with the vendor's preset.
///
/// # Examples
///
/// ```
/// use ripcord_core::{ChatModel, Locality};
/// use ripcord_providers::compat::{self, OpenAiCompatible};
/// let local = OpenAiCompatible::new(compat::ollama(), "llama3.2", None)?;
/// assert_eq!(local.capabilities().locality, Locality::Local);
/// let ds = OpenAiCompatible::new(compat::deepseek(), "deepseek-chat", Some("sk-ds".into()))?;
/// assert_eq!(ds.id().to_string(), "deepseek/deepseek-chat");
/// # Ok::<(), ripcord_core::Error>(())
/// ```
#[derive(Clone)]
pub struct OpenAiCompatible {
    inner: OpenAi,
}

impl fmt::Debug for OpenAiCompatible {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("OpenAiCompatible")
            .field(&self.inner)
            .finish()
    }
}

impl OpenAiCompatible {
    /// A model of the preset's vendor with default settings.
    ///
    /// # Errors
    ///
    /// As [`OpenAiCompatible::from_config`].
    pub fn new(
        preset: Preset,
        model: impl Into<String>,
        api_key: Option<SecretString>,
    ) -> Result<Self> {
        let mut cfg = OpenAiConfig::keyless(model);
        cfg.api_key = api_key;
        OpenAiCompatible::from_config(preset, cfg)
    }

    /// Reads the key (and a base URL override) from the preset's environment variables.
    ///
    /// # Errors
    ///
    /// `Auth` when the preset needs a key and its variable is unset; otherwise as
    /// [`OpenAiCompatible::from_config`].
    pub fn from_env(preset: Preset, model: impl Into<String>) -> Result<Self> {
        let mut cfg = OpenAiConfig::keyless(model);
        cfg.api_key = preset.key_env.and_then(http::env).map(SecretString::from);
        if cfg.api_key.is_none() && preset.key_required {
            let var = preset.key_env.unwrap_or("the vendor's key variable");
            return Err(Error::new(
                ErrorKind::Auth,
                format!("{}: {var} is not set", preset.vendor),
            ));
        }
        cfg.http.base_url = preset.base_url_env.and_then(http::env);
        OpenAiCompatible::from_config(preset, cfg)
    }

    /// Builds the provider from an [`OpenAiConfig`] (its base URL, if set, overrides the
    /// preset's; its organization/project headers are not sent).
    ///
    /// # Errors
    ///
    /// `Auth` when a key is required and missing; `InvalidRequest` when no base URL is known
    /// or it is invalid, or for zero timeouts.
    pub fn from_config(preset: Preset, cfg: OpenAiConfig) -> Result<Self> {
        let vendor = preset.vendor;
        let base: String = match (&cfg.http.base_url, &preset.base_url) {
            (Some(b), _) => b.clone(),
            (None, Some(b)) => b.to_string(),
            (None, None) => {
                let hint = preset
                    .base_url_env
                    .map(|v| format!(" (or set {v})"))
                    .unwrap_or_default();
                return Err(Error::new(
                    ErrorKind::InvalidRequest,
                    format!("{vendor}: a base URL is required{hint}"),
                ));
            }
        };
        let chat_url =
            http::Target::new(http::endpoint(&base, "/chat/completions", vendor)?, vendor)?;
        let embeddings_url =
            http::Target::new(http::endpoint(&base, "/embeddings", vendor)?, vendor)?;
        let models_url = Some(http::Target::new(
            http::endpoint(&base, "/models", vendor)?,
            vendor,
        )?);
        let auth = match cfg.api_key.clone() {
            Some(k) => Auth::bearer(k, vendor)?,
            None if preset.key_required => {
                let hint = preset
                    .key_env
                    .map(|v| format!(" (set {v})"))
                    .unwrap_or_default();
                return Err(Error::new(
                    ErrorKind::Auth,
                    format!("{vendor}: no API key configured{hint}"),
                ));
            }
            None => Auth::none(),
        };
        let caps = preset.capabilities(&cfg.model, &chat_url);
        let dialect = Dialect {
            max_tokens: cfg.max_tokens_field.unwrap_or(preset.max_tokens_field),
            stream_usage: preset.stream_usage,
            json_schema: preset.json_schema,
            hook: preset.error_hook,
            prefill: preset.prefill,
        };
        // DeepSeek serves prefix completion on its beta base URL only.
        let prefill_url = match preset.prefill {
            AssistantPrefill::Prefix {
                base_suffix: Some(suffix),
            } => {
                let trimmed = base.trim_end_matches('/');
                let root = trimmed.strip_suffix("/v1").unwrap_or(trimmed);
                let beta = format!("{root}{suffix}");
                Some(http::Target::new(
                    http::endpoint(&beta, "/chat/completions", vendor)?,
                    vendor,
                )?)
            }
            _ => None,
        };
        let inner = OpenAi::assemble(
            Setup {
                vendor,
                chat_url,
                embeddings_url,
                models_url,
                auth,
                headers: HeaderMap::new(),
                dialect,
                caps,
            },
            cfg,
        )?;
        let inner = match prefill_url {
            Some(url) => inner.with_prefill_url(url),
            None => inner,
        };
        Ok(OpenAiCompatible { inner })
    }
}

crate::openai::engine_wrapper!(OpenAiCompatible);

/// The presets, written once: each one's feature, its module (holding the constructor of the
/// same name) and the [`Vendor`](crate::Vendor) it is the preset of.
macro_rules! presets {
    ($($feature:literal => $name:ident for $vendor:ident),* $(,)?) => {
        $(
            #[cfg(feature = $feature)]
            mod $name;
            #[cfg(feature = $feature)]
            pub use $name::$name;
        )*

        /// The preset of an OpenAI-compatible [`Vendor`](crate::Vendor), when this build has it
        /// (`None` for the other vendors and for presets whose feature is off).
        pub fn preset(vendor: crate::Vendor) -> Option<Preset> {
            match vendor {
                $(
                    #[cfg(feature = $feature)]
                    crate::Vendor::$vendor => Some($name()),
                )*
                _ => None,
            }
        }

        /// The presets' error tables, checked by their own tests.
        #[cfg(all(test, any($(feature = $feature),*)))]
        pub(crate) mod preset_table;
    };
}

presets! {
    "deepseek" => deepseek for DeepSeek,
    "zhipu" => zhipu for Zhipu,
    "qwen" => qwen for Qwen,
    "moonshot" => moonshot for Moonshot,
    "qianfan" => qianfan for Qianfan,
    "ollama" => ollama for Ollama,
    "vllm" => vllm for Vllm,
    "mistral" => mistral for Mistral,
    "groq" => groq for Groq,
    "xai" => xai for Xai,
    "openrouter" => openrouter for OpenRouter,
    "together" => together for Together,
    "fireworks" => fireworks for Fireworks,
    "cerebras" => cerebras for Cerebras,
}

#[cfg(test)]
mod tests {
    use super::*;
    use ripcord_core::ChatModel;

    #[test]
    fn every_built_compatible_vendor_has_its_preset_under_its_own_name() {
        for v in crate::Vendor::ALL {
            match preset(v) {
                Some(p) => {
                    assert!(v.is_openai_compatible() && v.is_built(), "{v}");
                    assert_eq!(p.vendor, v.name());
                }
                None => assert!(!v.is_openai_compatible() || !v.is_built(), "{v}: no preset"),
            }
        }
    }

    #[test]
    fn custom_preset_rules() {
        let p = Preset::new("acme", "https://api.acme.example/v1");
        let e = OpenAiCompatible::new(p.clone(), "m", None).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Auth);
        let mut no_base = p.clone();
        no_base.base_url = None;
        let e = OpenAiCompatible::new(no_base, "m", Some("k-123".into())).unwrap_err();
        assert!(e.message().contains("base URL is required"), "{e}");
        let ok = OpenAiCompatible::new(p, "m", Some("k-123".into())).unwrap();
        assert_eq!(ok.capabilities().context_window, 32_768);
        assert_eq!(ok.capabilities().locality, Locality::cloud("acme"));
        // A vendor without a registered GenAI name keeps its own on the attempt spans.
        assert_eq!(ok.inner.provider_name(), "acme");
    }

    #[test]
    fn presets_name_their_attempt_spans_with_the_genai_provider_name() {
        // The presets' vendor names, each on a base URL of its own.
        for (vendor, want) in [
            ("deepseek", "deepseek"),
            ("qwen", "alibaba.dashscope"),
            ("zhipu", "zhipu_ai"),
            ("moonshot", "moonshot_ai"),
            ("qianfan", "baidu.qianfan"),
            ("ollama", "ollama"),
            ("vllm", "vllm"),
        ] {
            let preset = Preset::new(vendor, "https://api.example.test/v1");
            let link = OpenAiCompatible::new(preset, "m", Some("k-123".into())).unwrap();
            assert_eq!(link.inner.provider_name(), want, "{vendor}");
        }
    }
}
