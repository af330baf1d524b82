//! The KV slots of a batch: many answers decoded in one run of the shared-cache graph.
//!
//! One tensor per layer and kind, shaped `[rows, kv_heads, capacity, head_dim]`, bound once as
//! both past and present like a single answer's shared cache (see the parent module). Row `r` is
//! one answer's slot. A step feeds one token per row; `attention_mask` row `r` holds
//! `len[r] + 1` ones and zeros after (right padding), so `GroupQueryAttention` reads each row's
//! own past length from it (`seqlens_k`), writes the row's new key and value at that position and
//! rotates the query by it. Rows that do not advance in a step (a free slot, an answer whose
//! reader is behind) are fed a placeholder at their next free position: it is overwritten by the
//! row's next real token, and its logits are not read.
//!
//! Prompts are not prefilled here: a prompt runs alone through a one-row [`KvCache`] (in chunks,
//! between batch steps), then [`BatchKv::load_row`] copies its keys and values into a slot.

use ort::session::{IoBinding, RunOptions};
use ort::value::Tensor;
use ripcord_core::Error;

use super::{Decoder, KvCache, bind_i64, ort_err, run_to_cpu_logits, static_dim};
use crate::error::runtime;

/// The slots of a batch (see the module docs).
#[derive(Debug)]
pub(crate) struct BatchKv {
    /// One `[rows, kv_heads, capacity, head_dim]` buffer per layer and kind.
    buffers: Vec<Tensor<f32>>,
    binding: Option<IoBinding>,
    rows: usize,
    capacity: usize,
    kv_heads: usize,
    head_dim: usize,
    /// Valid tokens per row.
    lens: Vec<usize>,
}

/// What one row does in a batch step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RowInput {
    /// The row appends this token; its logits are returned.
    Token(u32),
    /// The row does not advance (free, or its answer waits for its reader).
    Hold,
}

impl BatchKv {
    /// Rows (slots), used or not.
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Tokens each row can hold.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Valid tokens in `row`.
    pub(crate) fn len(&self, row: usize) -> usize {
        self.lens.get(row).copied().unwrap_or(0)
    }

    /// Marks `row` empty (its answer left).
    pub(crate) fn clear_row(&mut self, row: usize) {
        if let Some(l) = self.lens.get_mut(row) {
            *l = 0;
        }
    }

    /// Copies the `len` valid tokens of one head-major block `[kv_heads, cap, head_dim]` into
    /// row `row` of `dst`.
    fn copy_block(
        &self,
        dst: &mut [f32],
        row: usize,
        src: &[f32],
        src_cap: usize,
        len: usize,
    ) -> Result<(), Error> {
        let hd = self.head_dim;
        for h in 0..self.kv_heads {
            let from = h * src_cap * hd;
            let to = (row * self.kv_heads + h) * self.capacity * hd;
            let (Some(s), Some(d)) = (
                src.get(from..from + len * hd),
                dst.get_mut(to..to + len * hd),
            ) else {
                return Err(runtime(format!(
                    "KV slot copy out of bounds (row {row}, {len} tokens, capacity {})",
                    self.capacity
                )));
            };
            d.copy_from_slice(s);
        }
        Ok(())
    }

    /// Copies `len` tokens of each of `sources` (one per buffer, `src_cap` tokens per row; `pick`
    /// selects the source row's block) into row `to` of the matching buffer; `what` names the
    /// sources in errors.
    fn copy_in(
        &mut self,
        sources: &mut [Tensor<f32>],
        what: &str,
        to: usize,
        (src_cap, len): (usize, usize),
        pick: impl Fn(&[f32]) -> Result<&[f32], Error>,
    ) -> Result<(), Error> {
        let mut buffers = std::mem::take(&mut self.buffers);
        let result = buffers
            .iter_mut()
            .zip(sources.iter_mut())
            .try_for_each(|(dst, s)| {
                let (_, s) = s.try_extract_tensor_mut().map_err(ort_err(what))?;
                let (_, d) = dst
                    .try_extract_tensor_mut()
                    .map_err(ort_err("the batch KV cache"))?;
                self.copy_block(d, to, pick(s)?, src_cap, len)
            });
        self.buffers = buffers;
        result
    }

    /// Copies a one-row cache (a prefilled prompt) into `row`, which then holds its tokens.
    pub(crate) fn load_row(&mut self, row: usize, src: &mut KvCache) -> Result<(), Error> {
        let len = src.len;
        if row >= self.rows || len > self.capacity || src.shared.len() != self.buffers.len() {
            return Err(runtime(format!(
                "cannot load {len} tokens into KV slot {row} of {} (capacity {})",
                self.rows, self.capacity
            )));
        }
        let src_cap = src.capacity;
        self.copy_in(
            &mut src.shared,
            "the prompt's KV cache",
            row,
            (src_cap, len),
            |s| Ok(s),
        )?;
        self.lens[row] = len;
        Ok(())
    }

    /// Copies row `from` of `src` into row `to` of `self` (growing or compacting the batch).
    pub(crate) fn copy_row(
        &mut self,
        to: usize,
        src: &mut BatchKv,
        from: usize,
    ) -> Result<(), Error> {
        let len = src.len(from);
        if to >= self.rows || from >= src.rows || len > self.capacity {
            return Err(runtime(format!(
                "cannot move KV slot {from} ({len} tokens) to slot {to} of {}",
                self.rows
            )));
        }
        let block = src.kv_heads * src.capacity * src.head_dim;
        let src_cap = src.capacity;
        self.copy_in(
            &mut src.buffers,
            "the old batch KV cache",
            to,
            (src_cap, len),
            |s| {
                s.get(from * block..(from + 1) * block)
                    .ok_or_else(|| runtime("KV slot out of bounds"))
            },
        )?;
        self.lens[to] = len;
        Ok(())
    }
}

impl Decoder {
    /// Empty slots for `rows` answers of at most `capacity` tokens each (shared layout only).
    pub(crate) fn batch_kv(&self, rows: usize, capacity: usize) -> Result<BatchKv, Error> {
        if !self.spec.shared_kv {
            return Err(runtime(
                "batched decoding needs a graph whose KV cache is shared (a fused q8/q4 variant)",
            ));
        }
        if rows == 0 || capacity == 0 {
            return Err(runtime("a batch needs at least one row of one token"));
        }
        let (buffers, binding) = self.bound_kv(
            rows,
            capacity,
            &format!("{rows} slots x {capacity} tokens"),
            "cannot bind the batch KV cache",
        )?;
        Ok(BatchKv {
            buffers,
            binding: Some(binding),
            rows,
            capacity,
            kv_heads: self.spec.kv_heads,
            head_dim: self.spec.head_dim,
            lens: vec![0; rows],
        })
    }

    /// One decode step for every row of `kv` (`inputs.len()` must equal its rows): the logits of
    /// each [`RowInput::Token`] row, `None` for held rows. Advancing rows grow by one token.
    ///
    /// On an error the batch's buffers may be half written: the slots are dropped and every
    /// answer in them has to fail.
    pub(crate) fn decode_batch(
        &mut self,
        kv: &mut BatchKv,
        inputs: &[RowInput],
        options: &RunOptions,
    ) -> Result<Vec<Option<Vec<f32>>>, Error> {
        let rows = kv.rows;
        if inputs.len() != rows || kv.binding.is_none() {
            return Err(runtime(format!(
                "a batch step of {} rows for {rows} slots (or slots dropped by a failed step)",
                inputs.len()
            )));
        }
        let width = kv.lens.iter().map(|l| l + 1).max().unwrap_or(1);
        if width > kv.capacity {
            return Err(runtime(format!(
                "the KV slots hold {} tokens; a step to {width} does not fit",
                kv.capacity
            )));
        }
        let result = self.run_batch(kv, inputs, width, options);
        match result {
            Ok(logits) => {
                for (len, input) in kv.lens.iter_mut().zip(inputs) {
                    if matches!(input, RowInput::Token(_)) {
                        *len += 1;
                    }
                }
                Ok(logits)
            }
            Err(e) => {
                kv.binding = None;
                kv.buffers.clear();
                kv.lens.iter_mut().for_each(|l| *l = 0);
                Err(e)
            }
        }
    }

    fn run_batch(
        &mut self,
        kv: &mut BatchKv,
        inputs: &[RowInput],
        width: usize,
        options: &RunOptions,
    ) -> Result<Vec<Option<Vec<f32>>>, Error> {
        let rows = kv.rows;
        let ids: Vec<i64> = inputs
            .iter()
            .map(|i| match i {
                RowInput::Token(t) => i64::from(*t),
                RowInput::Hold => 0,
            })
            .collect();
        let mut mask = vec![0i64; rows * width];
        for (r, len) in kv.lens.iter().enumerate() {
            mask[r * width..r * width + len + 1].fill(1);
        }
        let Some(binding) = kv.binding.as_mut() else {
            return Err(runtime("the batch KV cache has no binding"));
        };
        bind_i64(binding, "input_ids", [rows, 1], ids)?;
        bind_i64(binding, "attention_mask", [rows, width], mask)?;
        let outputs = run_to_cpu_logits(&mut self.session, binding, options)?;
        let value = outputs
            .get("logits")
            .ok_or_else(|| runtime("the model returned no logits"))?;
        let (shape, data) = value
            .try_extract_tensor::<f32>()
            .map_err(ort_err("logits are not float32"))?;
        let vocab = shape.last().copied().and_then(static_dim).unwrap_or(0);
        if shape.len() != 3 || vocab == 0 || data.len() != rows * vocab {
            return Err(runtime(format!(
                "batch logits have shape {shape:?}, expected [{rows}, 1, vocab]"
            )));
        }
        Ok(inputs
            .iter()
            .zip(data.chunks_exact(vocab))
            .map(|(input, row)| match input {
                RowInput::Token(_) => Some(row.to_vec()),
                RowInput::Hold => None,
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampling::argmax;

    /// Prompts of different lengths share batch steps (with a free row, a row that holds for
    /// some steps, and a prompt prefilled in chunks) and each gets, token for token, the greedy
    /// answer it gets alone.
    #[test]
    fn batched_greedy_equals_solo_greedy_token_for_token() {
        for file in ["model.q8.onnx", "model.q4.onnx"] {
            let Some((mut dec, _, _)) = crate::test_support::load_tiny_file(file) else {
                return;
            };
            let prompts: Vec<Vec<u32>> = vec![
                vec![
                    1, 9690, 198, 2683, 314, 260, 3575, 282, 4649, 47, 2, 198, 1, 520,
                ],
                vec![1, 520, 9690],
                (0..40).map(|i| 100 + 37 * i).collect(),
            ];
            let n = 12;
            let reference: Vec<Vec<u32>> = prompts
                .iter()
                .map(|p| crate::test_support::greedy_ids(&mut dec, p, n))
                .collect();

            let opts = RunOptions::new().unwrap();
            let cap = 64;
            let mut kv = dec.batch_kv(4, cap).unwrap();
            // Rows 0, 2 and 3 are used; row 1 stays free. The third prompt goes in in chunks.
            let rows = [0usize, 2, 3];
            let mut next = Vec::new();
            for (p, &row) in prompts.iter().zip(&rows) {
                let mut staging = dec.empty_cache(cap).unwrap();
                let mut logits = Vec::new();
                for chunk in p.chunks(16) {
                    logits = dec.forward(chunk, &mut staging, &opts).unwrap();
                }
                kv.load_row(row, &mut staging).unwrap();
                assert_eq!(kv.len(row), p.len());
                next.push(argmax(&logits).unwrap());
            }
            let mut got: Vec<Vec<u32>> = next.iter().map(|&t| vec![t]).collect();
            let mut step = 0;
            while got.iter().any(|g| g.len() < n) {
                let mut inputs = vec![RowInput::Hold; 4];
                for (i, &row) in rows.iter().enumerate() {
                    // The second answer holds for steps 2..5 (a slow reader).
                    let holding = i == 1 && (2..5).contains(&step);
                    if got[i].len() < n && !holding {
                        inputs[row] = RowInput::Token(next[i]);
                    }
                }
                let logits = dec.decode_batch(&mut kv, &inputs, &opts).unwrap();
                assert!(logits[1].is_none(), "a free row returns no logits");
                for (i, &row) in rows.iter().enumerate() {
                    if let Some(l) = &logits[row] {
                        next[i] = argmax(l).unwrap();
                        got[i].push(next[i]);
                    }
                }
                step += 1;
            }
            for (i, (g, r)) in got.iter().zip(&reference).enumerate() {
                assert_eq!(g, r, "{file}: prompt {i} batched vs alone");
            }
            assert_eq!(kv.len(1), 0);
            assert_eq!(kv.len(2), prompts[1].len() + n - 1);
        }
    }

    /// Moving a slot to another batch (growing or compacting) keeps its answer going exactly.
    #[test]
    fn a_slot_moved_to_a_new_batch_continues_the_same_answer() {
        let Some((mut dec, _, _)) = crate::test_support::load_tiny_file("model.q8.onnx") else {
            return;
        };
        let prompt: Vec<u32> = vec![1, 9690, 198, 2683, 314, 260, 3575];
        let n = 8;
        let reference = crate::test_support::greedy_ids(&mut dec, &prompt, n);
        let opts = RunOptions::new().unwrap();
        let mut staging = dec.empty_cache(32).unwrap();
        let logits = dec.forward(&prompt, &mut staging, &opts).unwrap();
        let mut small = dec.batch_kv(1, 32).unwrap();
        small.load_row(0, &mut staging).unwrap();
        let mut ids = vec![argmax(&logits).unwrap()];
        let l = dec
            .decode_batch(&mut small, &[RowInput::Token(ids[0])], &opts)
            .unwrap();
        ids.push(argmax(l[0].as_ref().unwrap()).unwrap());
        // Grow to two rows; the answer moves to row 1.
        let mut big = dec.batch_kv(2, 32).unwrap();
        big.copy_row(1, &mut small, 0).unwrap();
        assert_eq!(big.len(1), prompt.len() + 1);
        while ids.len() < n {
            let inputs = [RowInput::Hold, RowInput::Token(*ids.last().unwrap())];
            let l = dec.decode_batch(&mut big, &inputs, &opts).unwrap();
            ids.push(argmax(l[1].as_ref().unwrap()).unwrap());
        }
        assert_eq!(ids, reference);
        // A step of the wrong width is refused, not run.
        let e = dec
            .decode_batch(&mut big, &[RowInput::Hold], &opts)
            .unwrap_err();
        assert!(e.message().contains("1 rows for 2 slots"), "{e}");
        // The plain graph cannot batch.
        let (plain, _, _) = crate::test_support::load_tiny().unwrap();
        let e = plain.batch_kv(2, 8).unwrap_err();
        assert!(e.message().contains("shared"), "{e}");
    }
}
