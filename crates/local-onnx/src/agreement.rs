//! The greedy-agreement check that decides which quantized variants ship.
//!
//! A quantized model is judged against the fp32 one on what a user sees: the same 20 fixed
//! prompts ([`prompts`]) are answered greedily, and the first 16 tokens of each answer are
//! compared. [`Agreement`] counts the prompts whose tokens are all identical, the prompts whose
//! first token agrees, and the mean length of the common prefix. The converter runs the same
//! check with ONNX Runtime's Python API (`ripcord_model.py agree`); the test suite runs it on
//! the tiny model, `cargo xtask bench --anchors` on SmolLM2-135M.

use ripcord_core::{ChatRequest, Result};

use crate::LocalLlama;

/// The fixed prompts, one per line of `agreement_prompts.txt` (the file the converter's
/// `agree` subcommand reads too, so both ends compare the same answers).
pub fn prompts() -> impl Iterator<Item = &'static str> {
    include_str!("../model/agreement_prompts.txt")
        .lines()
        .filter(|l| !l.trim().is_empty())
}

/// Greedy tokens compared per prompt.
pub const TOKENS: usize = 16;

/// How closely a candidate's greedy answers follow the reference's.
#[derive(Debug, Clone, PartialEq)]
pub struct Agreement {
    /// Prompts compared.
    pub prompts: usize,
    /// Prompts whose compared tokens are all identical.
    pub identical: usize,
    /// Prompts whose first token is identical.
    pub same_first_token: usize,
    /// Mean length of the common token prefix.
    pub mean_common_prefix: f64,
}

impl Agreement {
    /// Compares two lists of answers (token ids), prompt by prompt.
    ///
    /// # Examples
    ///
    /// ```
    /// use ripcord_local_onnx::agreement::Agreement;
    /// let a = Agreement::compare(&[vec![1, 2, 3], vec![4, 5]], &[vec![1, 2, 9], vec![4, 5]]);
    /// assert_eq!((a.identical, a.same_first_token), (1, 2));
    /// assert_eq!(a.mean_common_prefix, 2.0);
    /// ```
    pub fn compare(reference: &[Vec<u32>], candidate: &[Vec<u32>]) -> Agreement {
        let mut identical = 0;
        let mut first = 0;
        let mut prefix = 0usize;
        for (r, c) in reference.iter().zip(candidate) {
            identical += usize::from(r == c);
            first += usize::from(!r.is_empty() && r.first() == c.first());
            prefix += r.iter().zip(c).take_while(|(a, b)| a == b).count();
        }
        let prompts = reference.len().min(candidate.len());
        Agreement {
            prompts,
            identical,
            same_first_token: first,
            mean_common_prefix: if prompts == 0 {
                0.0
            } else {
                prefix as f64 / prompts as f64
            },
        }
    }
}

/// The greedy answers (first [`TOKENS`] token ids) of `model` to every prompt of [`prompts`].
///
/// # Errors
///
/// The first error of [`LocalLlama::greedy_tokens`].
pub async fn answers(model: &LocalLlama) -> Result<Vec<Vec<u32>>> {
    let mut out = Vec::new();
    for p in prompts() {
        out.push(model.greedy_tokens(&ChatRequest::user(p), TOKENS).await?);
    }
    Ok(out)
}
