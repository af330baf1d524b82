//! Where the prepared model and the ONNX Runtime library live.
//!
//! `cargo xtask setup-model` fills one cache folder (git-ignored): a Python venv, the ONNX
//! Runtime shared library taken out of the `onnxruntime` wheel, and the converted models. These
//! functions find it the same way the xtask does, so tests, benches and applications agree.

use std::env;
use std::path::{Component, Path, PathBuf};

/// The ONNX Runtime version the crate is built against (`ort` with `api-31`).
pub const ORT_VERSION: &str = "1.31.1";

/// The folder name of the prepared SmolLM2-135M-Instruct model inside `<cache>/models/`.
pub const SMOLLM2_DIR: &str = "smollm2-135m-instruct";

/// The folder name of the tiny random-weight test model inside `<cache>/models/`.
pub const TINY_DIR: &str = "tiny-llama";

/// The cache root, decided at run time (never a path of the build machine, so an installed or
/// copied binary finds its cache too): `$RIPCORD_CACHE` when set (and not empty), else the
/// platform's cache folder — `$XDG_CACHE_HOME/ripcord` when that is an absolute path, else
/// `$HOME/.cache/ripcord` — else `ripcord-cache` in the temporary folder.
///
/// # Examples
///
/// ```
/// let cache = ripcord_local_onnx::default_cache_dir();
/// assert!(cache.is_absolute());
/// ```
pub fn default_cache_dir() -> PathBuf {
    cache_dir_from(|k| env::var_os(k))
}

/// [`default_cache_dir`] over any environment (tests pass their own).
fn cache_dir_from(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> PathBuf {
    let set = |k: &str| var(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = set("RIPCORD_CACHE") {
        return dir;
    }
    if let Some(xdg) = set("XDG_CACHE_HOME").filter(|p| p.is_absolute()) {
        return xdg.join("ripcord");
    }
    if let Some(home) = set("HOME").filter(|p| p.is_absolute()) {
        return home.join(".cache").join("ripcord");
    }
    normalize(&env::temp_dir().join("ripcord-cache"))
}

/// The prepared SmolLM2-135M-Instruct model: `<cache>/models/smollm2-135m-instruct`.
///
/// # Examples
///
/// ```
/// let dir = ripcord_local_onnx::default_model_dir();
/// assert!(dir.ends_with("models/smollm2-135m-instruct"));
/// ```
pub fn default_model_dir() -> PathBuf {
    default_cache_dir().join("models").join(SMOLLM2_DIR)
}

/// The tiny random-weight model the tests use: `<cache>/models/tiny-llama`.
///
/// Its answers are nonsense by design; it has the real SmolLM2 tokenizer and the same graph,
/// so every code path runs in milliseconds.
pub fn tiny_model_dir() -> PathBuf {
    default_cache_dir().join("models").join(TINY_DIR)
}

/// The ONNX Runtime library: `$ORT_DYLIB_PATH` when set (and not empty), else
/// `<cache>/onnxruntime/libonnxruntime.so.1.31.1`.
///
/// # Examples
///
/// ```
/// let lib = ripcord_local_onnx::default_ort_dylib();
/// assert!(lib.is_absolute() || std::env::var_os("ORT_DYLIB_PATH").is_some());
/// ```
pub fn default_ort_dylib() -> PathBuf {
    match env::var_os("ORT_DYLIB_PATH") {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => default_cache_dir()
            .join("onnxruntime")
            .join(format!("libonnxruntime.so.{ORT_VERSION}")),
    }
}

/// Removes `.` and `..` components without touching the file system (the cache may not exist).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push(c);
                }
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_removes_dot_dot() {
        assert_eq!(
            normalize(Path::new("/a/b/../../c/./d")),
            PathBuf::from("/c/d")
        );
        assert_eq!(
            normalize(Path::new("/a/crates/x/../../.cache")),
            PathBuf::from("/a/.cache")
        );
    }

    #[test]
    fn the_cache_is_decided_at_run_time_from_the_environment() {
        fn env<'a>(
            pairs: &'a [(&'a str, &'a str)],
        ) -> impl Fn(&str) -> Option<std::ffi::OsString> + 'a {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| std::ffi::OsString::from(v))
            }
        }
        let all = [
            ("RIPCORD_CACHE", "/srv/rc"),
            ("XDG_CACHE_HOME", "/x"),
            ("HOME", "/home/u"),
        ];
        assert_eq!(cache_dir_from(env(&all[..])), PathBuf::from("/srv/rc"));
        assert_eq!(cache_dir_from(env(&all[1..])), PathBuf::from("/x/ripcord"));
        // An empty or relative XDG_CACHE_HOME is ignored, as the XDG spec says.
        let relative = [
            ("XDG_CACHE_HOME", "rel"),
            ("HOME", "/home/u"),
            ("RIPCORD_CACHE", ""),
        ];
        assert_eq!(
            cache_dir_from(env(&relative[..])),
            PathBuf::from("/home/u/.cache/ripcord")
        );
        let none = cache_dir_from(env(&[]));
        assert!(
            none.is_absolute() && none.ends_with("ripcord-cache"),
            "{}",
            none.display()
        );
        // Nothing of the build machine is baked in.
        assert!(!none.starts_with(env!("CARGO_MANIFEST_DIR")));
    }
}
