//! The process-wide ONNX Runtime environment.
//!
//! `ort` is built with `load-dynamic`: nothing is linked at build time and the shared library is
//! opened at run time with `ort::init_from(path)`. ONNX Runtime allows one environment per
//! process and a library can only be loaded once, so the first successful load wins and every
//! later model shares it. A *failed* load is not remembered: the next model may name a
//! library that exists.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use ort::environment::Environment;
use ripcord_core::Error;

use crate::error::unavailable;

struct Loaded {
    path: PathBuf,
    env: Environment,
}

static RUNTIME: Mutex<Option<Loaded>> = Mutex::new(None);

/// The shared environment, loading ONNX Runtime from `dylib` the first time.
///
/// The path is always checked, even when a library is already loaded, so a wrong path is
/// reported the same way whatever ran before. When a different, existing library is named after
/// one was loaded, the loaded one keeps serving (a process cannot hold two).
pub(crate) fn environment(dylib: &Path) -> Result<Environment, Error> {
    if !dylib.is_file() {
        return Err(unavailable(format!(
            "ONNX Runtime library not found at {} (run `cargo xtask setup-model`, or set ORT_DYLIB_PATH)",
            dylib.display()
        )));
    }
    let mut slot = RUNTIME.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(loaded) = slot.as_ref() {
        if loaded.path != dylib {
            tracing::warn!(
                loaded = %loaded.path.display(),
                requested = %dylib.display(),
                "ONNX Runtime is already loaded in this process; using the loaded library"
            );
        }
        return Ok(loaded.env.clone());
    }
    let builder = ort::init_from(dylib).map_err(|e| {
        unavailable(format!(
            "cannot load ONNX Runtime from {}: {e}",
            dylib.display()
        ))
    })?;
    let env = builder.with_name("ripcord").build().map_err(|e| {
        unavailable(format!(
            "cannot start ONNX Runtime from {}: {e}",
            dylib.display()
        ))
    })?;
    *slot = Some(Loaded {
        path: dylib.to_path_buf(),
        env: env.clone(),
    });
    Ok(env)
}
