//! Which of the converter's model files to run, and how many threads to give it.
//!
//! `cargo xtask setup-model` writes three variants of SmolLM2-135M-Instruct into one folder.
//! Which ones ship, and which is the default, was decided by two checks run on the converted
//! files: the model must answer "What is the capital of France?" with Paris, and a fixed set of
//! 20 prompts is decoded greedily for 16 tokens by each variant and by the fp32 model, counting
//! the prompts whose 16 tokens are identical (`ripcord_model.py agree`). On SmolLM2-135M:
//!
//! | variant | file | weights | identical of 20 | same first token | Paris |
//! | --- | --- | --- | --- | --- | --- |
//! | `fp32` | `model.onnx` | fp16 storage, fp32 compute | (reference) | (reference) | yes |
//! | `q8` | `model.q8.onnx` | re-quantized: symmetric 8-bit blocks of 16 | 14 | 20 | yes |
//! | `q4` | `model.q4.onnx` | the GGUF's own 4-bit blocks of 32 (exact), 8-bit head in blocks of 16 | 6 | 19 | yes |
//!
//! For comparison, the dynamic int8 file the converter used to ship (`--int8`) agreed on 1 of 20
//! prompts (15 first tokens) while reading more bytes per token than `q8`; it no longer ships.
//! `q4` computes with exactly the GGUF's weights (nothing re-quantized; built with fp32
//! activations it agrees with an fp32 model of those weights on 20 of 20 — on the fast path the
//! kernels quantize the activations to int8, which is what it still differs in); re-quantized,
//! as it was before, it agreed on 1. `q8` re-quantizes: for a Q4_1 source its exact form was
//! slower and no closer (11 of 20).
//! `q8` is the default: the closest to fp32 at a fraction of the bytes read per token. `q4` is
//! the fastest and smallest, and its answers drift from fp32 after a few tokens.

use std::fmt;
use std::str::FromStr;

/// A model file made by the crate's converter (`model/ripcord_model.py`).
///
/// # Examples
///
/// ```
/// use ripcord_local_onnx::Variant;
/// let v: Variant = "q4".parse().unwrap();
/// assert_eq!(v.file_name(), "model.q4.onnx");
/// assert_eq!(Variant::default(), Variant::Q8);
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Variant {
    /// `model.onnx`: fp16 weights widened to fp32 at load; the reference.
    Fp32,
    /// `model.q8.onnx`: 8-bit block-quantized weights, fused attention (the default).
    #[default]
    Q8,
    /// `model.q4.onnx`: 4-bit block-quantized weights (8-bit LM head), fused attention.
    Q4,
}

impl Variant {
    /// Every shipped variant, the default first.
    pub const ALL: [Variant; 3] = [Variant::Q8, Variant::Q4, Variant::Fp32];

    /// The file inside the model folder.
    pub const fn file_name(self) -> &'static str {
        match self {
            Variant::Fp32 => "model.onnx",
            Variant::Q8 => "model.q8.onnx",
            Variant::Q4 => "model.q4.onnx",
        }
    }

    /// The name used in configuration (`fp32`, `q8`, `q4`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Variant::Fp32 => "fp32",
            Variant::Q8 => "q8",
            Variant::Q4 => "q4",
        }
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A variant name that is not one of [`Variant::ALL`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownVariant(String);

impl fmt::Display for UnknownVariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown local model variant {:?}: expected one of fp32, q8, q4",
            self.0
        )
    }
}

impl std::error::Error for UnknownVariant {}

impl FromStr for Variant {
    type Err = UnknownVariant;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "fp32" => Ok(Variant::Fp32),
            "q8" => Ok(Variant::Q8),
            "q4" => Ok(Variant::Q4),
            other => Err(UnknownVariant(other.to_owned())),
        }
    }
}

/// The most intra-op threads the default gives one session.
const MAX_DEFAULT_THREADS: usize = 4;

/// The default intra-op thread count: the cores available to this process, at most 4.
///
/// Decoding one token is a chain of matrix-vector products that ONNX Runtime splits across its
/// threads. On the 2-core machine where this was measured (`cargo xtask bench --local-only`),
/// 2 threads decoded SmolLM2-135M 1.4–1.6× faster than 1 (`q8` 75.4 → 118.7 tok/s, `q4`
/// 127.5 → 176.7) and prefilled 1.8× faster; the crate README has the table. So a session uses
/// every core it is given. The gain depends on the cores being free: with other
/// work on the machine, 2 threads on 2 cores can fall below 1 thread. Beyond 4 threads a
/// 135M-parameter model has too little work per step to gain more. A process running several
/// sessions at once (`max_sessions`) should give each fewer threads.
///
/// # Examples
///
/// ```
/// let n = ripcord_local_onnx::default_threads();
/// assert!((1..=4).contains(&n));
/// ```
pub fn default_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .clamp(1, MAX_DEFAULT_THREADS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_list_the_choices() {
        for v in Variant::ALL {
            assert_eq!(v.as_str().parse::<Variant>().unwrap(), v);
            assert!(v.file_name().starts_with("model.") && v.file_name().ends_with(".onnx"));
        }
        let e = "int4".parse::<Variant>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown local model variant \"int4\": expected one of fp32, q8, q4"
        );
        assert_eq!(Variant::ALL[0], Variant::default());
    }
}
