//! The model folder's JSON side files, read the way Hugging Face exports lay them out.
//!
//! - `config.json`: layer, head and vocabulary sizes and the context window
//!   (`max_position_embeddings`), checked against the ONNX graph's inputs at load;
//! - `generation_config.json` (optional): end-of-sequence ids (one or a list, as Llama 3 has)
//!   and sampling defaults;
//! - `tokenizer_config.json` (optional): the chat template and the BOS/EOS token texts.

use std::fs;
use std::path::{Path, PathBuf};

use ripcord_core::Error;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::error::unavailable;

/// A token id or a list of them (`eos_token_id` is either).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum IdOrIds {
    One(u32),
    Many(Vec<u32>),
}

impl IdOrIds {
    fn into_vec(self) -> Vec<u32> {
        match self {
            IdOrIds::One(id) => vec![id],
            IdOrIds::Many(ids) => ids,
        }
    }
}

/// A special token given as text or as an `AddedToken` object (`{"content": "<s>", ...}`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum TokenText {
    Text(String),
    Object { content: String },
}

impl TokenText {
    fn into_string(self) -> String {
        match self {
            TokenText::Text(s) | TokenText::Object { content: s } => s,
        }
    }
}

/// One named chat template (tokenizer configs may carry a list of them).
#[derive(Debug, Clone, Deserialize)]
struct NamedTemplate {
    name: String,
    template: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum TemplateField {
    One(String),
    Named(Vec<NamedTemplate>),
}

#[derive(Debug, Deserialize)]
struct RawConfig {
    num_hidden_layers: usize,
    num_attention_heads: usize,
    #[serde(default)]
    num_key_value_heads: Option<usize>,
    hidden_size: usize,
    #[serde(default)]
    head_dim: Option<usize>,
    #[serde(default)]
    max_position_embeddings: Option<u32>,
    #[serde(default)]
    vocab_size: Option<usize>,
    #[serde(default)]
    eos_token_id: Option<IdOrIds>,
}

#[derive(Debug, Default, Deserialize)]
struct RawGeneration {
    #[serde(default)]
    eos_token_id: Option<IdOrIds>,
    #[serde(default)]
    do_sample: Option<bool>,
    #[serde(default)]
    temperature: Option<f32>,
    #[serde(default)]
    top_k: Option<usize>,
    #[serde(default)]
    top_p: Option<f32>,
}

#[derive(Debug, Default, Deserialize)]
struct RawTokenizerConfig {
    #[serde(default)]
    chat_template: Option<TemplateField>,
    #[serde(default)]
    bos_token: Option<TokenText>,
    #[serde(default)]
    eos_token: Option<TokenText>,
}

/// Sampling defaults from `generation_config.json`, used when a request sets nothing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SamplingDefaults {
    /// Temperature; 0 means greedy.
    pub(crate) temperature: f32,
    /// Keep the k most likely tokens; 0 keeps all.
    pub(crate) top_k: usize,
    /// Nucleus mass; 1 keeps all.
    pub(crate) top_p: f32,
}

/// What the folder says about the model.
#[derive(Debug, Clone)]
pub(crate) struct ModelConfig {
    pub(crate) layers: usize,
    pub(crate) kv_heads: usize,
    pub(crate) head_dim: usize,
    pub(crate) vocab_size: Option<usize>,
    /// The context window in tokens (prompt plus output), when the config states one.
    pub(crate) window: Option<u32>,
    pub(crate) eos_ids: Vec<u32>,
    pub(crate) sampling: SamplingDefaults,
    pub(crate) chat_template: Option<String>,
    pub(crate) bos_token: Option<String>,
    pub(crate) eos_token: Option<String>,
}

fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T, Error> {
    let text = fs::read_to_string(path)
        .map_err(|e| unavailable(format!("cannot read {}: {e}", path.display())))?;
    serde_json::from_str(&text)
        .map_err(|e| unavailable(format!("{} is not a valid model file: {e}", path.display())))
}

fn read_optional_json<T: DeserializeOwned + Default>(path: &Path) -> Result<T, Error> {
    if path.exists() {
        read_json(path)
    } else {
        Ok(T::default())
    }
}

/// The files of a model folder.
#[derive(Debug, Clone)]
pub(crate) struct ModelFiles {
    pub(crate) dir: PathBuf,
    pub(crate) model: PathBuf,
    pub(crate) tokenizer: PathBuf,
    pub(crate) config: PathBuf,
}

impl ModelFiles {
    /// The files of `dir` with the ONNX file `model_file`; fails naming the first one missing.
    pub(crate) fn locate(dir: &Path, model_file: &Path) -> Result<ModelFiles, Error> {
        if !dir.is_dir() {
            return Err(unavailable(format!(
                "model folder {} does not exist (run `cargo xtask setup-model`)",
                dir.display()
            )));
        }
        let files = ModelFiles {
            dir: dir.to_path_buf(),
            model: dir.join(model_file),
            tokenizer: dir.join("tokenizer.json"),
            config: dir.join("config.json"),
        };
        for f in [&files.config, &files.tokenizer, &files.model] {
            if !f.is_file() {
                return Err(unavailable(format!("{} is missing", f.display())));
            }
        }
        Ok(files)
    }
}

impl ModelConfig {
    /// Reads `config.json` and the optional side files of `files.dir`.
    pub(crate) fn read(files: &ModelFiles) -> Result<ModelConfig, Error> {
        let raw: RawConfig = read_json(&files.config)?;
        let gen_path = files.dir.join("generation_config.json");
        let generation: RawGeneration = read_optional_json(&gen_path)?;
        let tok_path = files.dir.join("tokenizer_config.json");
        let tok: RawTokenizerConfig = read_optional_json(&tok_path)?;

        if raw.num_hidden_layers == 0 || raw.num_attention_heads == 0 || raw.hidden_size == 0 {
            return Err(unavailable(format!(
                "{} has zero layers, heads or hidden size",
                files.config.display()
            )));
        }
        let head_dim = raw
            .head_dim
            .unwrap_or(raw.hidden_size / raw.num_attention_heads);
        let mut eos_ids = generation
            .eos_token_id
            .map(IdOrIds::into_vec)
            .unwrap_or_default();
        for id in raw.eos_token_id.map(IdOrIds::into_vec).unwrap_or_default() {
            if !eos_ids.contains(&id) {
                eos_ids.push(id);
            }
        }
        let sampling = if generation.do_sample == Some(true) {
            SamplingDefaults {
                temperature: generation.temperature.unwrap_or(1.0),
                top_k: generation.top_k.unwrap_or(0),
                top_p: generation.top_p.unwrap_or(1.0),
            }
        } else {
            SamplingDefaults {
                temperature: 0.0,
                top_k: generation.top_k.unwrap_or(0),
                top_p: generation.top_p.unwrap_or(1.0),
            }
        };
        let chat_template = match tok.chat_template {
            Some(TemplateField::One(t)) => Some(t),
            Some(TemplateField::Named(list)) => list
                .iter()
                .find(|t| t.name == "default")
                .or_else(|| list.first())
                .map(|t| t.template.clone()),
            None => None,
        };
        Ok(ModelConfig {
            layers: raw.num_hidden_layers,
            kv_heads: raw.num_key_value_heads.unwrap_or(raw.num_attention_heads),
            head_dim,
            vocab_size: raw.vocab_size,
            window: raw.max_position_embeddings,
            eos_ids,
            sampling,
            chat_template,
            bos_token: tok.bos_token.map(TokenText::into_string),
            eos_token: tok.eos_token.map(TokenText::into_string),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(name: &str, files: &[(&str, &str)]) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("ripcord-config-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        for (f, text) in files {
            fs::write(dir.join(f), text).unwrap();
        }
        dir
    }

    const LLAMA3: &str = r#"{"num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
        "hidden_size": 2048, "head_dim": 64, "max_position_embeddings": 131072, "vocab_size": 128256,
        "eos_token_id": [128001, 128008, 128009]}"#;

    #[test]
    fn reads_a_llama3_style_config_with_a_list_of_eos_ids_and_object_tokens() {
        let dir = folder(
            "llama3",
            &[
                ("config.json", LLAMA3),
                ("tokenizer.json", "{}"),
                ("model.onnx", ""),
                (
                    "generation_config.json",
                    r#"{"eos_token_id": [128001, 128009], "do_sample": true, "temperature": 0.6, "top_p": 0.9}"#,
                ),
                (
                    "tokenizer_config.json",
                    r#"{"bos_token": {"content": "<|begin_of_text|>"}, "eos_token": "<|eot_id|>",
                    "chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]}"#,
                ),
            ],
        );
        let files = ModelFiles::locate(&dir, Path::new("model.onnx")).unwrap();
        let c = ModelConfig::read(&files).unwrap();
        assert_eq!((c.layers, c.kv_heads, c.head_dim), (16, 8, 64));
        assert_eq!(c.window, Some(131_072));
        assert_eq!(c.eos_ids, vec![128_001, 128_009, 128_008]);
        assert_eq!(
            c.sampling,
            SamplingDefaults {
                temperature: 0.6,
                top_k: 0,
                top_p: 0.9
            }
        );
        assert_eq!(c.chat_template.as_deref(), Some("D"));
        assert_eq!(c.bos_token.as_deref(), Some("<|begin_of_text|>"));
        assert_eq!(c.eos_token.as_deref(), Some("<|eot_id|>"));
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn greedy_unless_the_generation_config_samples_and_head_dim_defaults_from_hidden() {
        let dir = folder(
            "greedy",
            &[
                (
                    "config.json",
                    r#"{"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64}"#,
                ),
                ("tokenizer.json", "{}"),
                ("model.onnx", ""),
            ],
        );
        let files = ModelFiles::locate(&dir, Path::new("model.onnx")).unwrap();
        let c = ModelConfig::read(&files).unwrap();
        assert_eq!(c.sampling.temperature, 0.0);
        assert_eq!((c.kv_heads, c.head_dim), (4, 16));
        assert!(c.eos_ids.is_empty() && c.window.is_none() && c.chat_template.is_none());
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn missing_and_corrupt_files_name_the_path() {
        let dir = folder("missing", &[("config.json", "{"), ("tokenizer.json", "{}")]);
        let e = ModelFiles::locate(&dir, Path::new("model.onnx")).unwrap_err();
        assert_eq!(e.kind(), ripcord_core::ErrorKind::ModelNotFound);
        assert!(e.message().starts_with("local model unavailable: "), "{e}");
        assert!(
            e.message()
                .contains(&dir.join("model.onnx").display().to_string()),
            "{e}"
        );

        fs::write(dir.join("model.onnx"), "").unwrap();
        let files = ModelFiles::locate(&dir, Path::new("model.onnx")).unwrap();
        let e = ModelConfig::read(&files).unwrap_err();
        assert!(e.message().starts_with("local model unavailable: "), "{e}");
        assert!(
            e.message()
                .contains("config.json is not a valid model file"),
            "{e}"
        );

        let e = ModelFiles::locate(&dir.join("nope"), Path::new("model.onnx")).unwrap_err();
        assert!(e.message().contains("does not exist"), "{e}");
        fs::remove_dir_all(dir).unwrap();
    }
}
