//! Choosing the next token from the logits: greedy, or temperature with top-k and top-p.
//!
//! Greedy (temperature 0) is the default, as Hugging Face's `generate` does without
//! `do_sample`: a fallback link should be predictable. Sampling is seeded when the request
//! carries a seed, so a seeded request gives the same answer every time.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use ripcord_core::Error;

use crate::error::runtime;

/// How to pick tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SamplingParams {
    /// 0 (or less) is greedy.
    pub(crate) temperature: f32,
    /// Keep the k most likely tokens; 0 keeps all.
    pub(crate) top_k: usize,
    /// Keep the smallest set of most likely tokens whose mass reaches p; 1 keeps all.
    pub(crate) top_p: f32,
    /// Seed of the random generator; `None` seeds from the OS.
    pub(crate) seed: Option<u64>,
}

impl SamplingParams {
    /// Greedy decoding.
    #[cfg(test)]
    pub(crate) const GREEDY: SamplingParams = SamplingParams {
        temperature: 0.0,
        top_k: 0,
        top_p: 1.0,
        seed: None,
    };

    fn is_greedy(&self) -> bool {
        self.temperature <= 0.0 || self.top_k == 1
    }
}

/// Picks tokens with one random generator for the whole answer.
#[derive(Debug)]
pub(crate) struct Sampler {
    params: SamplingParams,
    rng: StdRng,
    scratch: Vec<(u32, f32)>,
}

impl Sampler {
    pub(crate) fn new(params: SamplingParams) -> Sampler {
        let rng = match params.seed {
            Some(seed) => StdRng::seed_from_u64(seed),
            None => StdRng::from_os_rng(),
        };
        Sampler {
            params,
            rng,
            scratch: Vec::new(),
        }
    }

    /// The next token for these logits (one row, vocabulary-sized).
    ///
    /// NaN logits are never chosen; a row with no finite logit is an error.
    pub(crate) fn sample(&mut self, logits: &[f32]) -> Result<u32, Error> {
        if self.params.is_greedy() {
            return argmax(logits);
        }
        let inv_t = 1.0 / self.params.temperature;
        self.scratch.clear();
        self.scratch.extend(
            logits
                .iter()
                .enumerate()
                .filter(|(_, l)| l.is_finite())
                .map(|(i, &l)| (i as u32, l * inv_t)),
        );
        let cands = &mut self.scratch;
        if cands.is_empty() {
            return Err(runtime("the model produced no finite logit"));
        }
        let by_logit_desc =
            |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        let k = self.params.top_k;
        if k > 0 && k < cands.len() {
            cands.select_nth_unstable_by(k - 1, by_logit_desc);
            cands.truncate(k);
        }
        cands.sort_unstable_by(by_logit_desc);
        let max = cands[0].1;
        let mut total = 0.0f64;
        for c in cands.iter_mut() {
            c.1 = (c.1 - max).exp();
            total += f64::from(c.1);
        }
        let p = f64::from(self.params.top_p);
        if p < 1.0 {
            let mut mass = 0.0f64;
            let mut keep = cands.len();
            for (i, c) in cands.iter().enumerate() {
                mass += f64::from(c.1) / total;
                if mass >= p {
                    keep = i + 1;
                    break;
                }
            }
            cands.truncate(keep.max(1));
            total = cands.iter().map(|c| f64::from(c.1)).sum();
        }
        let mut r = self.rng.random::<f64>() * total;
        for c in cands.iter() {
            r -= f64::from(c.1);
            if r < 0.0 {
                return Ok(c.0);
            }
        }
        Ok(cands[cands.len() - 1].0)
    }
}

/// The index of the largest finite logit (the lowest index on ties).
pub(crate) fn argmax(logits: &[f32]) -> Result<u32, Error> {
    let mut best: Option<(usize, f32)> = None;
    for (i, &l) in logits.iter().enumerate() {
        if l.is_nan() {
            continue;
        }
        if best.is_none_or(|(_, b)| l > b) {
            best = Some((i, l));
        }
    }
    best.map(|(i, _)| i as u32)
        .ok_or_else(|| runtime("the model produced no usable logit"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(temperature: f32, top_k: usize, top_p: f32, seed: u64) -> SamplingParams {
        SamplingParams {
            temperature,
            top_k,
            top_p,
            seed: Some(seed),
        }
    }

    #[test]
    fn greedy_is_argmax_skipping_nan_and_first_on_ties() {
        let mut s = Sampler::new(SamplingParams::GREEDY);
        assert_eq!(s.sample(&[0.1, 3.0, f32::NAN, 3.0, -1.0]).unwrap(), 1);
        assert!(s.sample(&[f32::NAN, f32::NAN]).is_err());
        assert!(s.sample(&[]).is_err());
    }

    #[test]
    fn top_k_one_and_tiny_top_p_are_greedy() {
        let logits = [0.5, 2.0, 1.9, -3.0];
        for seed in 0..20 {
            assert_eq!(
                Sampler::new(params(1.5, 1, 1.0, seed))
                    .sample(&logits)
                    .unwrap(),
                1
            );
            assert_eq!(
                Sampler::new(params(1.5, 0, 0.01, seed))
                    .sample(&logits)
                    .unwrap(),
                1
            );
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_tokens() {
        let logits: Vec<f32> = (0..100).map(|i| ((i * 37) % 11) as f32 * 0.3).collect();
        let run = |seed| {
            let mut s = Sampler::new(params(1.0, 0, 1.0, seed));
            (0..50)
                .map(|_| s.sample(&logits).unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }

    #[test]
    fn temperature_one_follows_the_softmax() {
        // p = softmax([0, ln 3]) = [0.25, 0.75].
        let logits = [0.0, 3.0f32.ln()];
        let mut s = Sampler::new(params(1.0, 0, 1.0, 42));
        let n = 20_000;
        let ones = (0..n).filter(|_| s.sample(&logits).unwrap() == 1).count();
        let frac = ones as f64 / f64::from(n);
        assert!((frac - 0.75).abs() < 0.02, "{frac}");
    }

    #[test]
    fn top_k_and_top_p_never_pick_outside_their_set() {
        let logits = [4.0, 3.9, 3.8, 0.0, -1.0, 0.5];
        let mut s = Sampler::new(params(2.0, 3, 1.0, 1));
        for _ in 0..2_000 {
            assert!(s.sample(&logits).unwrap() <= 2);
        }
        // [0.6, 0.3, 0.1]: top_p 0.8 keeps the first two.
        let logits = [0.6f32.ln(), 0.3f32.ln(), 0.1f32.ln()];
        let mut s = Sampler::new(params(1.0, 0, 0.8, 3));
        let picks: Vec<u32> = (0..2_000).map(|_| s.sample(&logits).unwrap()).collect();
        assert!(picks.iter().all(|&t| t < 2));
        assert!(picks.contains(&1));
    }

    #[test]
    fn low_temperature_sharpens() {
        let logits = [1.0, 1.5];
        let mut s = Sampler::new(params(0.05, 0, 1.0, 9));
        assert!((0..1_000).all(|_| s.sample(&logits).unwrap() == 1));
    }
}
