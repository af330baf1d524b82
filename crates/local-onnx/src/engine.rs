//! One ONNX Runtime session of a decoder with a KV cache, and its forward step.
//!
//! The graph follows the names `optimum` gives Llama-family exports: inputs `input_ids`,
//! `attention_mask`, `position_ids` (the last two optional) and `past_key_values.{i}.key/value`,
//! outputs `logits` and `present.{i}.key/value`. The presents of one step are moved, without a
//! copy, into the next step's pasts; the first step gets zero-length pasts. At load the
//! session's inputs are checked against `config.json` (layer count, KV heads, head size,
//! vocabulary), so a mismatched folder fails at once with a message naming both sides.
//!
//! # Two cache layouts
//!
//! A *growing* cache (any optimum-style export, and the converter's `model.onnx`): the pasts
//! hold exactly the tokens so far, and the graph returns presents one token longer, which
//! become the next pasts. The graph has to copy the whole cache into every new present, so each
//! step's copy grows with the answer.
//!
//! A *shared* cache (the converter's fused `model.q8.onnx` / `model.q4.onnx`, marked by the
//! metadata entry `ripcord.kv_cache = shared`): one tensor per layer and kind, allocated once per
//! answer with room for the whole answer, bound through an [`IoBinding`] as both the past input
//! and the present output. ONNX Runtime's `GroupQueryAttention` sees the same buffer on both
//! sides and writes the new token's key and value in place; the valid length comes from
//! `attention_mask`. No step copies the cache.

use std::borrow::Cow;
use std::path::Path;

use ort::environment::Environment;
use ort::memory::{AllocationDevice, AllocatorType, MemoryInfo, MemoryType};
use ort::session::builder::GraphOptimizationLevel;
use ort::session::{IoBinding, RunOptions, Session, SessionInputValue, SessionOutputs};
use ort::value::{DynValue, Outlet, Tensor, TensorElementType, ValueType};
use ripcord_core::Error;

use crate::config::ModelConfig;
use crate::error::{from_ort, out_of_memory, runtime, unavailable};

mod batch;
pub(crate) use batch::{BatchKv, RowInput};

/// The names and sizes of a decoder's inputs and outputs, read from the session.
#[derive(Debug, Clone)]
pub(crate) struct IoSpec {
    pub(crate) kv_heads: usize,
    pub(crate) head_dim: usize,
    /// The logits' last dimension when the graph states it.
    pub(crate) vocab: Option<usize>,
    has_attention_mask: bool,
    has_position_ids: bool,
    /// Past and present share one preallocated buffer (see the module docs).
    pub(crate) shared_kv: bool,
    /// `past_key_values.{i}.key`, `past_key_values.{i}.value`, for every layer in order.
    past: Vec<String>,
    /// `present.{i}.key`, `present.{i}.value`, in the same order.
    present: Vec<String>,
}

fn dims(o: &Outlet) -> Option<(&[i64], TensorElementType)> {
    match o.dtype() {
        ValueType::Tensor { ty, shape, .. } => Some((&shape[..], *ty)),
        _ => None,
    }
}

fn static_dim(d: i64) -> Option<usize> {
    usize::try_from(d).ok()
}

impl IoSpec {
    /// Checks the session's inputs and outputs against the config.
    fn read(session: &Session, config: &ModelConfig, path: &Path) -> Result<IoSpec, Error> {
        let p = path.display();
        let has_input = |n: &str| session.inputs().iter().any(|o| o.name() == n);
        let has_output = |n: &str| session.outputs().iter().any(|o| o.name() == n);
        if !has_input("input_ids") || !has_output("logits") {
            return Err(unavailable(format!(
                "{p} is not a decoder with optimum-style names (it needs an `input_ids` input and a `logits` output)"
            )));
        }
        let layers = session
            .inputs()
            .iter()
            .filter(|o| o.name().starts_with("past_key_values.") && o.name().ends_with(".key"))
            .count();
        if layers != config.layers {
            return Err(unavailable(format!(
                "shape mismatch: {p} has {layers} layers of `past_key_values.*.key` inputs but config.json says num_hidden_layers = {}",
                config.layers
            )));
        }
        let mut past = Vec::with_capacity(2 * layers);
        let mut present = Vec::with_capacity(2 * layers);
        for i in 0..layers {
            for kind in ["key", "value"] {
                let input = format!("past_key_values.{i}.{kind}");
                let output = format!("present.{i}.{kind}");
                let Some(outlet) = session.inputs().iter().find(|o| o.name() == input) else {
                    return Err(unavailable(format!(
                        "shape mismatch: {p} has no input {input}"
                    )));
                };
                if !has_output(&output) {
                    return Err(unavailable(format!(
                        "shape mismatch: {p} has no output {output}"
                    )));
                }
                let Some((shape, ty)) = dims(outlet) else {
                    return Err(unavailable(format!("{p}: input {input} is not a tensor")));
                };
                if ty != TensorElementType::Float32 {
                    return Err(unavailable(format!(
                        "{p}: input {input} is {ty:?}; only float32 KV caches are supported"
                    )));
                }
                let kv = shape.get(1).copied().and_then(static_dim);
                let hd = shape.get(3).copied().and_then(static_dim);
                if shape.len() != 4
                    || kv.is_some_and(|k| k != config.kv_heads)
                    || hd.is_some_and(|h| h != config.head_dim)
                {
                    return Err(unavailable(format!(
                        "shape mismatch: {p} input {input} has shape {shape:?} but config.json says [batch, {}, past, {}]",
                        config.kv_heads, config.head_dim
                    )));
                }
                past.push(input);
                present.push(output);
            }
        }
        let vocab = session
            .outputs()
            .iter()
            .find(|o| o.name() == "logits")
            .and_then(dims)
            .and_then(|(s, _)| s.last().copied())
            .and_then(static_dim);
        if let (Some(v), Some(c)) = (vocab, config.vocab_size)
            && v != c
        {
            return Err(unavailable(format!(
                "shape mismatch: {p} produces {v} logits but config.json says vocab_size = {c}"
            )));
        }
        let shared_kv = session
            .metadata()
            .ok()
            .and_then(|m| m.custom("ripcord.kv_cache"))
            .is_some_and(|v| v == "shared");
        if shared_kv && !has_input("attention_mask") {
            return Err(unavailable(format!(
                "{p} shares its KV buffer (ripcord.kv_cache = shared) but has no `attention_mask` input to carry the valid length"
            )));
        }
        Ok(IoSpec {
            kv_heads: config.kv_heads,
            head_dim: config.head_dim,
            vocab,
            has_attention_mask: has_input("attention_mask"),
            has_position_ids: has_input("position_ids"),
            shared_kv,
            past,
            present,
        })
    }
}

/// How a session is built.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SessionOptions {
    pub(crate) intra_threads: usize,
    pub(crate) device: Device,
}

/// Where ONNX Runtime runs the model.
///
/// # Examples
///
/// ```
/// use ripcord_local_onnx::Device;
/// assert_eq!("cuda".parse::<Device>(), Ok(Device::Cuda));
/// assert!("tpu".parse::<Device>().unwrap_err().to_string().contains("\"tpu\""));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Device {
    /// The CPU execution provider (every ONNX Runtime build has it).
    #[default]
    Cpu,
    /// ONNX Runtime's CUDA execution provider, device 0. Loading fails, naming the device and
    /// the library, when the loaded library was built without it.
    Cuda,
}

impl Device {
    /// The name used in configuration: `cpu` or `cuda`.
    pub fn as_str(self) -> &'static str {
        match self {
            Device::Cpu => "cpu",
            Device::Cuda => "cuda",
        }
    }
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A device name that is neither `cpu` nor `cuda`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownDevice(pub String);

impl std::fmt::Display for UnknownDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "unknown device {:?} (expected \"cpu\" or \"cuda\")",
            self.0
        )
    }
}

impl std::error::Error for UnknownDevice {}

impl std::str::FromStr for Device {
    type Err = UnknownDevice;

    fn from_str(s: &str) -> Result<Device, UnknownDevice> {
        match s {
            "cpu" => Ok(Device::Cpu),
            "cuda" => Ok(Device::Cuda),
            other => Err(UnknownDevice(other.to_string())),
        }
    }
}

/// The KV cache of one answer: one key and one value tensor per layer.
#[derive(Debug)]
pub(crate) struct KvCache {
    /// Growing layout: the last step's presents. Empty after a failed step.
    values: Vec<DynValue>,
    /// Shared layout: the preallocated buffers, bound as past and present alike.
    shared: Vec<Tensor<f32>>,
    /// Shared layout: the buffers bound once as past and present; each step rebinds only the
    /// token inputs and the logits.
    binding: Option<IoBinding>,
    /// Tokens the shared buffers can hold (0 for the growing layout).
    capacity: usize,
    len: usize,
}

impl KvCache {
    /// Tokens held.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Tokens a shared-layout cache can hold (0 for the growing layout).
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Empties a shared-layout cache for the next answer, keeping its buffers (their old
    /// contents are overwritten as the new answer grows). False when the cache cannot be reused
    /// (a growing cache, or one dropped by a failed step).
    pub(crate) fn reset(&mut self) -> bool {
        self.len = 0;
        self.binding.is_some() && !self.shared.is_empty()
    }
}

/// A loaded decoder session.
#[derive(Debug)]
pub(crate) struct Decoder {
    session: Session,
    spec: IoSpec,
}

fn ort_err(what: &str) -> impl Fn(ort::Error) -> Error + '_ {
    move |e| from_ort(what, &e)
}

impl Decoder {
    /// Opens `path` in `env` and checks it against `config`.
    pub(crate) fn load(
        env: &Environment,
        path: &Path,
        config: &ModelConfig,
        opts: SessionOptions,
    ) -> Result<Decoder, Error> {
        let p = path.display();
        let fail = |e: String| unavailable(format!("cannot open {p}: {e}"));
        let mut builder = Session::builder(env)
            .map_err(|e| fail(e.to_string()))?
            .with_optimization_level(GraphOptimizationLevel::All)
            .map_err(|e| fail(e.to_string()))?
            .with_intra_threads(opts.intra_threads)
            .map_err(|e| fail(e.to_string()))?
            .with_inter_threads(1)
            .map_err(|e| fail(e.to_string()))?
            .with_memory_pattern(false)
            .map_err(|e| fail(e.to_string()))?;
        if opts.device == Device::Cuda {
            use ort::ep::ExecutionProvider;
            let available = ort::ep::CUDA::is_available().map_err(|e| fail(e.to_string()))?;
            if !available {
                return Err(unavailable(format!(
                    "device \"cuda\" was asked for {p}, but the loaded ONNX Runtime library has no CUDA execution provider (a CPU-only build); install the GPU build of ONNX Runtime and point ORT_DYLIB_PATH at it, or use device \"cpu\""
                )));
            }
            builder = builder
                .with_execution_providers([ort::ep::CUDA::default().build().error_on_failure()])
                .map_err(|e| fail(format!("cannot use device \"cuda\": {e}")))?;
        }
        let session = builder
            .commit_from_file(path)
            .map_err(|e| fail(e.to_string()))?;
        let spec = IoSpec::read(&session, config, path)?;
        Ok(Decoder { session, spec })
    }

    /// The checked input/output layout.
    pub(crate) fn spec(&self) -> &IoSpec {
        &self.spec
    }

    /// One buffer per layer's past, `rows` x `capacity` tokens, each bound as that layer's
    /// past input and its present output, so the graph writes the cache in place. `size`
    /// names the allocation and `bind` the binding in errors.
    fn bound_kv(
        &self,
        rows: usize,
        capacity: usize,
        size: &str,
        bind: &str,
    ) -> Result<(Vec<Tensor<f32>>, IoBinding), Error> {
        let shape = [rows, self.spec.kv_heads, capacity, self.spec.head_dim];
        let allocator = self.session.allocator();
        let mut buffers = Vec::with_capacity(self.spec.past.len());
        for _ in 0..self.spec.past.len() {
            buffers.push(Tensor::<f32>::new(allocator, shape).map_err(|e| {
                out_of_memory(format!("cannot allocate a KV cache of {size}: {e}"))
            })?);
        }
        let mut binding = self.session.create_binding().map_err(ort_err(bind))?;
        for ((input, output), buffer) in self
            .spec
            .past
            .iter()
            .zip(&self.spec.present)
            .zip(buffers.iter_mut())
        {
            binding
                .bind_input(input.as_str(), &*buffer)
                .map_err(ort_err(bind))?;
            binding
                .bind_output(output.as_str(), &mut *buffer)
                .map_err(ort_err(bind))?;
        }
        Ok((buffers, binding))
    }

    /// An empty cache for an answer of at most `capacity` tokens (prompt included).
    ///
    /// The growing layout starts with zero-length pasts and ignores `capacity`; the shared
    /// layout allocates `capacity` positions per layer up front (pages are only touched as the
    /// answer grows).
    pub(crate) fn empty_cache(&self, capacity: usize) -> Result<KvCache, Error> {
        if self.spec.shared_kv {
            if capacity == 0 {
                return Err(runtime("a KV cache needs room for at least one token"));
            }
            let (shared, binding) = self.bound_kv(
                1,
                capacity,
                &format!("{capacity} tokens"),
                "cannot bind the KV cache",
            )?;
            return Ok(KvCache {
                values: Vec::new(),
                shared,
                binding: Some(binding),
                capacity,
                len: 0,
            });
        }
        let mut values = Vec::with_capacity(self.spec.past.len());
        for _ in 0..self.spec.past.len() {
            let shape = [1usize, self.spec.kv_heads, 0, self.spec.head_dim];
            let t = Tensor::<f32>::from_array((shape, Vec::<f32>::new()))
                .map_err(ort_err("cannot create an empty KV cache"))?;
            values.push(t.into_dyn());
        }
        Ok(KvCache {
            values,
            shared: Vec::new(),
            binding: None,
            capacity: 0,
            len: 0,
        })
    }

    /// Runs `ids` after what `cache` holds; returns the logits of the last position and grows
    /// the cache by `ids.len()`.
    ///
    /// On an error the cache is left empty and unusable for this answer.
    pub(crate) fn forward(
        &mut self,
        ids: &[u32],
        cache: &mut KvCache,
        options: &RunOptions,
    ) -> Result<Vec<f32>, Error> {
        let s = ids.len();
        if s == 0 {
            return Err(runtime("forward step with no tokens"));
        }
        let past = cache.len;
        let total = past + s;
        if self.spec.shared_kv {
            return self.forward_shared(ids, total, cache, options);
        }
        let mut inputs: Vec<(Cow<'_, str>, SessionInputValue<'_>)> =
            Vec::with_capacity(3 + cache.values.len());
        let input_ids: Vec<i64> = ids.iter().map(|&t| i64::from(t)).collect();
        inputs.push((
            "input_ids".into(),
            Tensor::from_array(([1usize, s], input_ids))
                .map_err(ort_err("input_ids"))?
                .into(),
        ));
        if self.spec.has_attention_mask {
            inputs.push((
                "attention_mask".into(),
                Tensor::from_array(([1usize, total], vec![1i64; total]))
                    .map_err(ort_err("attention_mask"))?
                    .into(),
            ));
        }
        if self.spec.has_position_ids {
            let pos: Vec<i64> = (past..total).map(|p| p as i64).collect();
            inputs.push((
                "position_ids".into(),
                Tensor::from_array(([1usize, s], pos))
                    .map_err(ort_err("position_ids"))?
                    .into(),
            ));
        }
        let values = std::mem::take(&mut cache.values);
        cache.len = 0;
        for (name, v) in self.spec.past.iter().zip(values) {
            inputs.push((name.as_str().into(), v.into()));
        }
        let mut outputs = self
            .session
            .run_with_options(inputs, options)
            .map_err(ort_err("inference failed"))?;
        let logits = last_logits(outputs.get("logits"), s)?;
        let mut next = Vec::with_capacity(self.spec.present.len());
        for name in &self.spec.present {
            let v = outputs
                .remove(name.as_str())
                .ok_or_else(|| runtime(format!("the model returned no {name}")))?;
            next.push(v);
        }
        cache.values = next;
        cache.len = total;
        Ok(logits)
    }

    /// [`Decoder::forward`] for the shared layout: the cache's buffers are bound as both the
    /// pasts and the presents, so the graph appends in place (`total`: the cache's length after
    /// the step).
    fn forward_shared(
        &mut self,
        ids: &[u32],
        total: usize,
        cache: &mut KvCache,
        options: &RunOptions,
    ) -> Result<Vec<f32>, Error> {
        let past = cache.len;
        if cache.shared.len() != self.spec.past.len() || cache.binding.is_none() {
            return Err(runtime(
                "the KV cache was dropped by a failed step; start a new cache",
            ));
        }
        if total > cache.capacity {
            cache.len = 0;
            cache.shared.clear();
            cache.binding = None;
            return Err(runtime(format!(
                "the KV cache holds {} tokens; a step to {total} does not fit",
                cache.capacity
            )));
        }
        // On any failure below the buffers may be half written: drop them.
        let result = self.run_shared(ids, past, total, cache, options);
        match result {
            Ok(logits) => {
                cache.len = total;
                Ok(logits)
            }
            Err(e) => {
                cache.len = 0;
                cache.binding = None;
                cache.shared.clear();
                Err(e)
            }
        }
    }

    fn run_shared(
        &mut self,
        ids: &[u32],
        past: usize,
        total: usize,
        cache: &mut KvCache,
        options: &RunOptions,
    ) -> Result<Vec<f32>, Error> {
        let s = ids.len();
        let Some(binding) = cache.binding.as_mut() else {
            return Err(runtime("the KV cache has no binding"));
        };
        let input_ids: Vec<i64> = ids.iter().map(|&t| i64::from(t)).collect();
        bind_i64(binding, "input_ids", [1, s], input_ids)?;
        bind_i64(binding, "attention_mask", [1, total], vec![1i64; total])?;
        if self.spec.has_position_ids {
            let pos: Vec<i64> = (past..total).map(|p| p as i64).collect();
            bind_i64(binding, "position_ids", [1, s], pos)?;
        }
        let outputs = run_to_cpu_logits(&mut self.session, binding, options)?;
        last_logits(outputs.get("logits"), s)
    }
}

/// Binds `data` shaped `shape` as the `i64` input `name`.
fn bind_i64(
    binding: &mut IoBinding,
    name: &str,
    shape: [usize; 2],
    data: Vec<i64>,
) -> Result<(), Error> {
    let tensor = Tensor::from_array((shape, data)).map_err(ort_err(name))?;
    binding.bind_input(name, &tensor).map_err(ort_err(name))
}

/// Binds the `logits` output to CPU memory and runs `session` on what `binding` holds (the
/// shared-cache step of one answer and of a batch).
fn run_to_cpu_logits<'s>(
    session: &'s mut Session,
    binding: &'s mut IoBinding,
    options: &RunOptions,
) -> Result<SessionOutputs<'s>, Error> {
    let cpu = MemoryInfo::new(
        AllocationDevice::CPU,
        0,
        AllocatorType::Device,
        MemoryType::Default,
    )
    .map_err(ort_err("cannot describe CPU memory"))?;
    binding
        .bind_output_to_device("logits", &cpu)
        .map_err(ort_err("cannot bind the logits"))?;
    session
        .run_binding_with_options(binding, options)
        .map_err(ort_err("inference failed"))
}

/// The last position's logits from a `[1, s, vocab]` or `[1, 1, vocab]` output (a graph may
/// compute the head for the last position only).
fn last_logits(value: Option<&DynValue>, s: usize) -> Result<Vec<f32>, Error> {
    let value = value.ok_or_else(|| runtime("the model returned no logits"))?;
    let (shape, data) = value
        .try_extract_tensor::<f32>()
        .map_err(ort_err("logits are not float32"))?;
    let vocab = shape.last().copied().and_then(static_dim).unwrap_or(0);
    let positions = shape.get(1).copied().and_then(static_dim).unwrap_or(0);
    if shape.len() != 3
        || vocab == 0
        || !(positions == s || positions == 1)
        || data.len() != positions * vocab
    {
        return Err(runtime(format!(
            "logits have shape {shape:?}, expected [1, {s}, vocab] or [1, 1, vocab]"
        )));
    }
    Ok(data[(positions - 1) * vocab..].to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ModelFiles;
    use crate::test_support::{ONE_CPU_THREAD, tiny_dir_or_skip};

    fn load_tiny() -> Option<(Decoder, ModelConfig)> {
        crate::test_support::load_tiny().map(|(d, c, _)| (d, c))
    }

    #[test]
    fn spec_matches_the_tiny_config() {
        let Some((dec, config)) = load_tiny() else {
            return;
        };
        let spec = dec.spec();
        assert_eq!(spec.past.len(), 2 * config.layers);
        assert_eq!(spec.present.len(), 2 * config.layers);
        assert_eq!((spec.kv_heads, spec.head_dim), (2, 16));
        assert_eq!(spec.vocab, Some(49_152));
        assert!(spec.has_attention_mask && spec.has_position_ids);
    }

    /// The KV cache is an optimisation, not an approximation: feeding tokens one at a time
    /// through the cache gives the logits of one full prefill of the same sequence.
    #[test]
    fn kv_cache_steps_equal_a_full_prefill() {
        let Some((mut dec, _)) = load_tiny() else {
            return;
        };
        let opts = RunOptions::new().unwrap();
        let seq: Vec<u32> = vec![
            1, 9690, 198, 2683, 314, 260, 3575, 282, 4649, 47, 2, 198, 1, 520,
        ];

        let mut full_cache = dec.empty_cache(64).unwrap();
        let full = dec.forward(&seq, &mut full_cache, &opts).unwrap();
        assert_eq!(full_cache.len(), seq.len());

        // Prefill half, then one token at a time.
        let mut cache = dec.empty_cache(64).unwrap();
        let last = prefill_then_step(&mut dec, &seq, &mut cache, &opts);
        assert_eq!(cache.len(), seq.len());
        assert_eq!(last.len(), full.len());
        assert_close(&full, &last, 1e-4, "the tiny model");
        // And the cache matters: without it, the last token alone gives different logits.
        let mut fresh = dec.empty_cache(64).unwrap();
        let alone = dec
            .forward(&seq[seq.len() - 1..], &mut fresh, &opts)
            .unwrap();
        let diff_alone = max_abs_diff(&full, &alone);
        assert!(
            diff_alone > 1e-2,
            "the context made no difference ({diff_alone})"
        );
    }

    /// Prefills `seq[..6]` into `cache`, then steps the rest one token at a time; the last
    /// step's logits.
    fn prefill_then_step(
        dec: &mut Decoder,
        seq: &[u32],
        cache: &mut KvCache,
        opts: &RunOptions,
    ) -> Vec<f32> {
        let mut last = dec.forward(&seq[..6], cache, opts).unwrap();
        for &t in &seq[6..] {
            last = dec.forward(&[t], cache, opts).unwrap();
        }
        last
    }

    /// The stepped logits `last` equal the prefill's `full` within `tolerance` of their scale,
    /// and `full` is not degenerate; `what` names the model in a failure.
    fn assert_close(full: &[f32], last: &[f32], tolerance: f32, what: &str) {
        let max_diff = max_abs_diff(full, last);
        let scale = max_abs(full);
        assert!(
            scale > 0.1,
            "{what}: logits are degenerate: max |logit| = {scale}"
        );
        assert!(
            max_diff <= tolerance * scale.max(1.0),
            "{what}: cache vs prefill differ by {max_diff}"
        );
    }

    /// The largest absolute value of a logit vector.
    fn max_abs(a: &[f32]) -> f32 {
        a.iter().map(|x| x.abs()).fold(0.0f32, f32::max)
    }

    /// The largest absolute difference between two logit vectors.
    fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0f32, f32::max)
    }

    fn load_tiny_file(file: &str) -> Option<(Decoder, ModelConfig)> {
        crate::test_support::load_tiny_file(file).map(|(dec, config, _)| (dec, config))
    }

    /// The fused variants bind one buffer as past and present: stepping through it gives the
    /// logits of one full prefill, the buffer does not move, and the graph returns the last
    /// position's logits only.
    #[test]
    fn the_shared_kv_buffer_steps_equal_a_full_prefill() {
        for file in ["model.q8.onnx", "model.q4.onnx"] {
            let Some((mut dec, _)) = load_tiny_file(file) else {
                return;
            };
            assert!(dec.spec().shared_kv, "{file}");
            let opts = RunOptions::new().unwrap();
            let seq: Vec<u32> = vec![
                1, 9690, 198, 2683, 314, 260, 3575, 282, 4649, 47, 2, 198, 1, 520,
            ];
            let mut full_cache = dec.empty_cache(seq.len()).unwrap();
            let full = dec.forward(&seq, &mut full_cache, &opts).unwrap();
            assert_eq!(full.len(), 49_152);

            let mut cache = dec.empty_cache(32).unwrap();
            let buffer = cache.shared[0].data_ptr();
            let last = prefill_then_step(&mut dec, &seq, &mut cache, &opts);
            assert_eq!(cache.len(), seq.len());
            // Appended in place: the same allocation after every step.
            assert_eq!(cache.shared[0].data_ptr(), buffer, "{file}");
            assert_close(&full, &last, 1e-3, file);
        }
    }

    #[test]
    fn a_step_past_the_shared_buffer_fails_and_empties_the_cache() {
        let Some((mut dec, _)) = load_tiny_file("model.q8.onnx") else {
            return;
        };
        let opts = RunOptions::new().unwrap();
        let mut cache = dec.empty_cache(4).unwrap();
        dec.forward(&[1, 2, 3], &mut cache, &opts).unwrap();
        dec.forward(&[4], &mut cache, &opts).unwrap();
        let e = dec.forward(&[5], &mut cache, &opts).unwrap_err();
        assert_eq!(e.kind(), ripcord_core::ErrorKind::ServerError);
        assert!(e.message().contains("does not fit"), "{e}");
        assert_eq!(cache.len(), 0);
        assert!(dec.forward(&[1], &mut cache, &opts).is_err());
        assert!(dec.empty_cache(0).is_err());
    }

    #[test]
    fn a_run_with_terminated_options_fails_cleanly_and_empties_the_cache() {
        let Some((mut dec, _)) = load_tiny() else {
            return;
        };
        let opts = RunOptions::new().unwrap();
        opts.terminate().unwrap();
        let mut cache = dec.empty_cache(64).unwrap();
        let e = dec.forward(&[1, 2, 3], &mut cache, &opts).unwrap_err();
        assert_eq!(e.kind(), ripcord_core::ErrorKind::ServerError);
        assert_eq!(cache.len(), 0);
        // The cache went into the failed run; it cannot be reused by mistake.
        assert!(
            dec.forward(&[1], &mut cache, &RunOptions::new().unwrap())
                .is_err()
        );
    }

    #[test]
    fn a_config_that_disagrees_with_the_graph_is_a_shape_mismatch() {
        let Some(dir) = tiny_dir_or_skip() else {
            return;
        };
        let files = ModelFiles::locate(&dir, Path::new("model.onnx")).unwrap();
        let env = crate::runtime::environment(&crate::default_ort_dylib()).unwrap();
        let mut config = ModelConfig::read(&files).unwrap();
        config.kv_heads = 3;
        let e = Decoder::load(&env, &files.model, &config, ONE_CPU_THREAD).unwrap_err();
        assert_eq!(e.kind(), ripcord_core::ErrorKind::ModelNotFound);
        assert!(
            e.message()
                .starts_with("local model unavailable: shape mismatch"),
            "{e}"
        );
        assert!(e.message().contains("past_key_values.0.key"), "{e}");
        config.kv_heads = 2;
        config.layers = 30;
        let e = Decoder::load(&env, &files.model, &config, ONE_CPU_THREAD).unwrap_err();
        assert!(e.message().contains("num_hidden_layers = 30"), "{e}");
    }
}
