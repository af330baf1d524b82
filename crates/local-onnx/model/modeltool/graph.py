"""The converter's ONNX graphs: the reference decoder (optimum names) and the fused one."""

from __future__ import annotations

import sys

from .common import CONVERTER_VERSION
from .gguf_source import Blocks, architecture, is_gemma3, is_local_layer, rope_inv_freq


# --------------------------------------------------------------------------------------------
# the ONNX graph
# --------------------------------------------------------------------------------------------


class GraphBuilder:
    def __init__(self, storage: str):
        self.nodes = []
        self.inits = []
        self.storage = storage
        self.counter = 0

    def name(self, base: str) -> str:
        self.counter += 1
        return f"{base}_{self.counter}"

    def op(self, op_type: str, inputs, base: str | None = None, outputs=None, **attrs):
        from onnx import helper

        if outputs is None:
            outputs = [self.name(base or op_type.lower())]
        self.nodes.append(helper.make_node(op_type, list(inputs), list(outputs), name=self.name("n_" + op_type), **attrs))
        return outputs[0] if len(outputs) == 1 else outputs

    def const(self, name: str, array) -> str:
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(array, name))
        return name

    def weight(self, name: str, array) -> str:
        """A large weight: stored as fp16 behind a Cast when storage == 'fp16'."""
        import numpy as np
        from onnx import TensorProto

        if self.storage == "fp16":
            self.const(name + ".fp16", np.ascontiguousarray(array.astype(np.float16)))
            return self.op("Cast", [name + ".fp16"], outputs=[name], to=TensorProto.FLOAT)
        return self.const(name, np.ascontiguousarray(array.astype(np.float32)))


def add_kv_cache_io(inputs: list, outputs: list, n_layers: int, kvh: int, hd: int, past: str, present: str):
    """Appends each layer's key and value cache: `past_key_values.{i}.{kind}` inputs with
    sequence axis `past`, `present.{i}.{kind}` outputs with sequence axis `present`."""
    from onnx import TensorProto, helper

    for i in range(n_layers):
        for kind in ("key", "value"):
            inputs.append(
                helper.make_tensor_value_info(
                    f"past_key_values.{i}.{kind}", TensorProto.FLOAT, ["batch_size", kvh, past, hd]
                )
            )
            outputs.append(
                helper.make_tensor_value_info(f"present.{i}.{kind}", TensorProto.FLOAT, ["batch_size", kvh, present, hd])
            )


def ffn_norm_name(cfg, p: str) -> str:
    """The initializer name of layer `p`'s norm before the feed-forward block: transformers'
    post_attention_layernorm for Llama, pre_feedforward_layernorm for Gemma (whose
    post_attention_layernorm normalizes the attention output)."""
    return p + ("pre_feedforward_layernorm.weight" if is_gemma3(cfg) else "post_attention_layernorm.weight")


def gelu_tanh(g, x):
    """GELU, tanh approximation (Gemma's gelu_pytorch_tanh), in opset-17 operators:
    0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    import numpy as np

    if "c_gelu_a" not in {t.name for t in g.inits}:
        g.const("c_gelu_a", np.array(0.044715, dtype=np.float32))
        g.const("c_gelu_b", np.array(np.sqrt(2.0 / np.pi), dtype=np.float32))
        g.const("c_half", np.array(0.5, dtype=np.float32))
        g.const("c_one_f", np.array(1.0, dtype=np.float32))
        g.const("c_three", np.array(3.0, dtype=np.float32))
    cube = g.op("Mul", [g.op("Pow", [x, "c_three"], "x3"), "c_gelu_a"], "ax3")
    inner = g.op("Mul", [g.op("Add", [x, cube], "x_ax3"), "c_gelu_b"], "gelu_in")
    t = g.op("Add", [g.op("Tanh", [inner], "tanh"), "c_one_f"], "one_tanh")
    return g.op("Mul", [g.op("Mul", [x, t], "x_t"), "c_half"], "gelu")


def build_model(cfg: dict, w: dict, storage: str, head: str):
    """The decoder graph, opset 17, optimum-style names.

    storage: 'fp16' (weights stored as fp16 behind Cast) or 'fp32' (plain initializers that
    onnxruntime.quantization can quantize). head: 'gemm' (tied embedding reused through
    Gemm(transB=1), no second copy) or 'matmul' (a separate [hidden, vocab] initializer, which
    the dynamic quantizer turns into MatMulInteger).
    """
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    d, f, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    hd, h, kvh = cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    groups = h // kvh
    n_layers = cfg["num_hidden_layers"]
    eps = cfg["rms_norm_eps"]
    gemma = is_gemma3(cfg)
    g = GraphBuilder(storage)

    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"]),
        helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch_size", "total_sequence_length"]),
        helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["batch_size", "sequence_length"]),
    ]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch_size", "sequence_length", v])]
    add_kv_cache_io(inputs, outputs, n_layers, kvh, hd, "past_sequence_length", "total_sequence_length")

    i64 = lambda *xs: np.array(xs, dtype=np.int64)  # noqa: E731
    g.const("c_axis_last", i64(-1))
    g.const("c_axis_1", i64(1))
    g.const("c_axes_1_2", i64(1, 2))
    g.const("c_zero_i", np.array(0, dtype=np.int64))
    g.const("c_one_i", np.array(1, dtype=np.int64))
    g.const("c_two", np.array(2.0, dtype=np.float32))
    g.const("c_eps", np.array(eps, dtype=np.float32))
    g.const("c_mask_off", np.array(0.0, dtype=np.float32))
    g.const("c_mask_on", np.array(-1e9, dtype=np.float32))
    g.const("c_shape_q", i64(0, 0, h, hd))
    g.const("c_shape_kv", i64(0, 0, kvh, hd))
    g.const("c_shape_qg", i64(0, kvh, -1, hd))
    g.const("c_shape_heads", i64(0, h, -1, hd))
    g.const("c_shape_merge", i64(0, 0, h * hd))
    g.const("c_split_half", i64(hd // 2, hd // 2))
    g.const("c_split_qkv", i64(h * hd, kvh * hd, kvh * hd))
    g.const("c_split_ff", i64(f, f))
    g.const("c_tile_groups", i64(1, 1, groups, 1))
    # RoPE's inverse frequencies for each kind of layer the model has (Gemma: local and global).
    layer_kinds = sorted({is_local_layer(cfg, i) for i in range(n_layers)})
    inv_freq = {local: "c_inv_freq_local" if local else "c_inv_freq" for local in layer_kinds}
    for local in layer_kinds:
        g.const(inv_freq[local], rope_inv_freq(cfg, local=local).astype(np.float32))

    def rms_norm(x, weight_name, weight):
        g.const(weight_name, weight.astype(np.float32))
        sq = g.op("Pow", [x, "c_two"], "sq")
        ms = g.op("ReduceMean", [sq], "ms", axes=[-1], keepdims=1)
        var = g.op("Add", [ms, "c_eps"], "var")
        std = g.op("Sqrt", [var], "std")
        y = g.op("Div", [x, std], "normed")
        return g.op("Mul", [y, weight_name], "scaled")

    # Embedding (tied with the LM head for SmolLM2); Gemma scales it by sqrt(hidden).
    embed = g.weight("model.embed_tokens.weight", w["embed"])
    hidden = g.op("Gather", [embed, "input_ids"], "embeds", axis=0)
    if gemma:
        g.const("c_embed_scale", np.array(np.sqrt(d), dtype=np.float32))
        hidden = g.op("Mul", [hidden, "c_embed_scale"], "embeds_scaled")

    # RoPE tables from position_ids: [B, 1, S, hd] (Gemma's local layers: a second pair).
    pos = g.op("Cast", ["position_ids"], "pos_f", to=TensorProto.FLOAT)
    pos = g.op("Unsqueeze", [pos, "c_axis_last"], "pos_u")

    def rope_tables(inv_freq_name):
        freqs = g.op("Mul", [pos, inv_freq_name], "freqs")
        emb = g.op("Concat", [freqs, freqs], "rope_emb", axis=-1)
        cos = g.op("Unsqueeze", [g.op("Cos", [emb], "cos"), "c_axis_1"], "cos_u")
        sin = g.op("Unsqueeze", [g.op("Sin", [emb], "sin"), "c_axis_1"], "sin_u")
        return cos, sin

    rope = {local: rope_tables(inv_freq[local]) for local in layer_kinds}

    # Attention mask [B, 1, groups*S, T]: causal by index (query i sits at T - S + i) and padding.
    ids_shape = g.op("Shape", ["input_ids"], "ids_shape")
    seq = g.op("Gather", [ids_shape, "c_one_i"], "seq", axis=0)
    total = g.op("Gather", [g.op("Shape", ["attention_mask"], "mask_shape"), "c_one_i"], "total", axis=0)
    past = g.op("Sub", [total, seq], "past_len")
    kpos = g.op("Range", ["c_zero_i", total, "c_one_i"], "kpos")
    qpos = g.op("Range", [past, total, "c_one_i"], "qpos")
    qpos = g.op("Unsqueeze", [qpos, "c_axis_last"], "qpos_u")
    causal = g.op("LessOrEqual", [kpos, qpos], "causal")
    pad = g.op("Cast", ["attention_mask"], "pad", to=TensorProto.BOOL)
    pad = g.op("Unsqueeze", [pad, "c_axes_1_2"], "pad_u")
    allowed = g.op("And", [causal, pad], "allowed")
    mask = g.op("Where", [allowed, "c_mask_off", "c_mask_on"], "mask")
    masks = {False: g.op("Tile", [mask, "c_tile_groups"], "mask_g")}
    if gemma:
        # A sliding-window layer's query at position i sees keys i - window < j <= i.
        g.const("c_window", np.array(cfg["sliding_window"], dtype=np.int64))
        in_window = g.op("Greater", [kpos, g.op("Sub", [qpos, "c_window"], "window_start")], "in_window")
        local = g.op("And", [allowed, in_window], "allowed_local")
        local = g.op("Where", [local, "c_mask_off", "c_mask_on"], "mask_local")
        masks[True] = g.op("Tile", [local, "c_tile_groups"], "mask_local_g")

    def rotate(x, cos, sin):
        x1, x2 = g.op("Split", [x, "c_split_half"], outputs=[g.name("x1"), g.name("x2")], axis=-1)
        rot = g.op("Concat", [g.op("Neg", [x2], "neg"), x1], "rot", axis=-1)
        return g.op("Add", [g.op("Mul", [x, cos], "xc"), g.op("Mul", [rot, sin], "rs")], "roped")

    scale = 1.0 / np.sqrt(cfg.get("query_pre_attn_scalar", hd))
    for i, lw in enumerate(w["layers"]):
        p = f"model.layers.{i}."
        local = is_local_layer(cfg, i)
        cos, sin = rope[local]
        x = rms_norm(hidden, p + "input_layernorm.weight", lw["attn_norm"])
        # Fused QKV projection; the attention scale is folded into the Q rows (RoPE is linear),
        # or, for Gemma, whose queries are normalized per head first, into the Q norm.
        wq = lw["wq"] if gemma else lw["wq"] * scale
        wqkv = np.concatenate([wq, lw["wk"], lw["wv"]], axis=0).T
        qkv = g.op("MatMul", [x, g.weight(p + "self_attn.qkv_proj.weight", wqkv)], "qkv")
        q, k, vv = g.op("Split", [qkv, "c_split_qkv"], outputs=[g.name("q"), g.name("k"), g.name("v")], axis=-1)
        q = g.op("Reshape", [q, "c_shape_q"], "q4")
        k = g.op("Reshape", [k, "c_shape_kv"], "k4")
        if gemma:
            q = rms_norm(q, p + "self_attn.q_norm.weight", lw["q_norm"] * scale)
            k = rms_norm(k, p + "self_attn.k_norm.weight", lw["k_norm"])
        q = g.op("Transpose", [q], "qt", perm=[0, 2, 1, 3])
        k = g.op("Transpose", [k], "kt", perm=[0, 2, 1, 3])
        vv = g.op("Transpose", [g.op("Reshape", [vv, "c_shape_kv"], "v4")], "vt", perm=[0, 2, 1, 3])
        q = rotate(q, cos, sin)
        k = rotate(k, cos, sin)
        pk = g.op("Concat", [f"past_key_values.{i}.key", k], outputs=[f"present.{i}.key"], axis=2)
        pv = g.op("Concat", [f"past_key_values.{i}.value", vv], outputs=[f"present.{i}.value"], axis=2)
        # Grouped-query attention without repeating K/V: [B, kvh, groups*S, hd] x [B, kvh, hd, T].
        qg = g.op("Reshape", [q, "c_shape_qg"], "qg")
        kt = g.op("Transpose", [pk], "kT", perm=[0, 1, 3, 2])
        scores = g.op("Add", [g.op("MatMul", [qg, kt], "scores"), masks[local]], "masked")
        probs = g.op("Softmax", [scores], "probs", axis=-1)
        ctx = g.op("MatMul", [probs, pv], "ctx")
        ctx = g.op("Reshape", [ctx, "c_shape_heads"], "ctx_h")
        ctx = g.op("Transpose", [ctx], "ctx_t", perm=[0, 2, 1, 3])
        ctx = g.op("Reshape", [ctx, "c_shape_merge"], "ctx_m")
        attn = g.op("MatMul", [ctx, g.weight(p + "self_attn.o_proj.weight", lw["wo"].T)], "attn_out")
        if gemma:
            attn = rms_norm(attn, p + "post_attention_layernorm.weight", lw["post_attn_norm"])
        hidden = g.op("Add", [hidden, attn], "resid1")

        x = rms_norm(hidden, ffn_norm_name(cfg, p), lw["ffn_norm"])
        wgu = np.concatenate([lw["w_gate"], lw["w_up"]], axis=0).T
        gu = g.op("MatMul", [x, g.weight(p + "mlp.gate_up_proj.weight", wgu)], "gate_up")
        gate, up = g.op("Split", [gu, "c_split_ff"], outputs=[g.name("gate"), g.name("up")], axis=-1)
        act = g.op("Mul", [gelu_tanh(g, gate) if gemma else g.op("Mul", [gate, g.op("Sigmoid", [gate], "sig")], "silu"), up], "act")
        down = g.op("MatMul", [act, g.weight(p + "mlp.down_proj.weight", lw["w_down"].T)], "down")
        if gemma:
            down = rms_norm(down, p + "post_feedforward_layernorm.weight", lw["post_ffn_norm"])
        hidden = g.op("Add", [hidden, down], "resid2")

    hidden = rms_norm(hidden, "model.norm.weight", w["norm"])
    if "lm_head" in w or head == "matmul":
        lm = w.get("lm_head", w["embed"])
        g.op("MatMul", [hidden, g.weight("lm_head.weight", lm.T)], outputs=["logits"])
    else:
        g.const("c_flat", i64(-1, d))
        g.const("c_vocab", i64(v))
        flat = g.op("Reshape", [hidden, "c_flat"], "flat")
        logits2 = g.op("Gemm", [flat, embed], "logits2", transB=1)
        lshape = g.op("Concat", [ids_shape, "c_vocab"], "logits_shape", axis=0)
        g.op("Reshape", [logits2, lshape], outputs=["logits"])

    graph = helper.make_graph(g.nodes, f"ripcord_{architecture(cfg)}_decoder", inputs, outputs, g.inits)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17)],
        producer_name="ripcord-local-onnx",
        producer_version=str(CONVERTER_VERSION),
    )
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


# --------------------------------------------------------------------------------------------
# the fused graph: block-quantized weights (MatMulNBits) and GroupQueryAttention
# --------------------------------------------------------------------------------------------
#
# Why a second graph: the plain graph above spends a decode step on ~1,200 small nodes (RoPE,
# mask, reshapes, transposes), grows its KV cache with a Concat that copies the whole cache every
# step, runs the LM head over every prompt position, and keeps the tied LM head in fp32 (113 MB
# read per token for SmolLM2-135M). The fused graph uses ONNX Runtime's contrib operators
# (domain com.microsoft, in the stock CPU execution provider):
#
#   - MatMulNBits: weights quantized in blocks of 32 along the input dimension, one scale (and
#     for 4 bits one zero point) per block, like llama.cpp's Q8_0 / Q4_1. The LM head is
#     quantized too. With accuracy_level 4 the activations are quantized to int8 per block as
#     well (what llama.cpp does with Q8_1) so the kernels use integer dot products.
#   - GroupQueryAttention with do_rotary: RoPE, causal masking and grouped heads in one kernel.
#     Its past and present caches are one buffer of the answer's full length when the caller
#     binds the same tensor to both (ONNX Runtime then appends in place), so no step copies the
#     cache; the caller tells the kernel the valid length through attention_mask.
#   - SimplifiedLayerNormalization / SkipSimplifiedLayerNormalization: RMSNorm with the residual
#     add fused.
#
# Prefill computes the LM head for the last position only (the only one generation reads).
#
# Exact weights. A weight the GGUF holds as Q4_0, Q4_1, Q8_0, Q5_0, Q4_K or Q6_K is not
# re-quantized: its own levels and scales go into MatMulNBits (see gguf_source.Blocks; Q4_1's and
# Q4_K's minimums through the block sums; Q5_0 and Q6_K as 8-bit levels with zero points 16 and
# 32, Q6_K in its blocks of 16), so the graph computes with exactly the GGUF's weights. Other
# types (F16, Q5_1, Q5_K, Q2_K, Q3_K) are dequantized and quantized as below. A block of 32 may
# be split in blocks of 16 with the same scale and zero point (still exact): the kernels quantize
# the activations per block, so smaller blocks lose less there, at some speed.
#
# What was measured on SmolLM2-135M's Q4_1 GGUF (20 prompts x 16 greedy tokens against an fp32
# model of the same dequantized weights, stored in fp32; the Paris check; ONNX Runtime's Python
# API, 1 thread, decode tokens/s of one noisy run each):
#
#   | weights                                   | identical | Paris | decode |
#   | ----------------------------------------- | --------- | ----- | ------ |
#   | model.onnx (fp16 storage)                 | 18/20     | yes   |        |
#   | re-quantized 8-bit blocks of 16 (old q8)  | 14/20     | yes   | ~43    |
#   | re-quantized 4-bit blocks of 32 (old q4)  |  1/20     | yes   | ~61    |
#   | exact, fp32 activations (accuracy 1)      | 20/20     | yes   |   3    |
#   | exact, layers 16, head 16                 | 12/20     | yes   | ~45    |
#   | exact, layers 16, head 32                 | 10/20     | yes   | ~45    |
#   | exact, layers 32, head 16 (q4)            |  8/20     | yes   | ~55    |
#   | exact, layers 32, head 32                 |  9/20     | no    | ~57    |
#
# (Rust runtime, `cargo xtask bench --anchors`, 1 thread, against model.onnx: the old q4 1/20 at
# 71.9 tok/s, the exact q4 6/20 at 61.3, the old q8 14/20 at 48.5, exact q8 in blocks of 16
# 11/20 at 34.9; llama.cpp 51.0.) So q4 takes the GGUF's blocks (layers 32, head 16) and q8 keeps
# re-quantizing in symmetric blocks of 16: for a Q4_1 source its exact form (zero points and
# block minimums on every weight) was both slower and no closer to fp32.
#
# So the weights are lossless (fp32 activations reproduce the fp32 model on every prompt), and
# what differs on the fast path is the int8 activations (accuracy_level 4), which llama.cpp's
# kernels quantize too (Q8 blocks of 32); ONNX Runtime's fp32-activation kernels decode ~15x
# slower on this CPU. Blocks of 32 everywhere lose the Paris answer ("L'Etoile, ..."), as
# re-quantized 8-bit blocks of 32 did before.

# Per-role accuracy levels (`convert --accuracy LEVEL ROLE=LEVEL ...`; issue 39 asks for 18/20),
# measured in one session against the fp32-storage model (prefix: mean common prefix, at most
# 14.55 as some answers end early; decode: tokens/s of process CPU time, Python API, 1 thread,
# best of 3 interleaved rounds on a loaded machine; * one round of 16 tokens):
#
#   | q4: exact layers (blocks of 32), Q8_0 head (16)  | identical | prefix | Paris | decode |
#   | ------------------------------------------------ | --------- | ------ | ----- | ------ |
#   | every weight at 4 (shipped)                       |  7/20     |  9.85  | yes   | 60.0   |
#   | every weight at 1                                 | 20/20     | 14.55  | yes   |  2.5*  |
#   | head at 1, layers at 4                            |  7/20     |  9.90  | yes   |  2.7*  |
#   | layers at 1, head at 4                            | 16/20     | 13.30  | no    | 24.7   |
#   | layers at 1, head at 4 in blocks of 32            | 15/20     | 12.10  | no    |        |
#   | layers at 0, 2 or 3, head at 4 (fp32 kernels too) | 16/20     | 13.30  | no    |        |
#   | qkv_proj at 1                                     |  8/20     |  9.70  | yes   | 46.1   |
#   | o_proj at 1                                       |  8/20     |  9.70  | no    | 50.8   |
#   | gate_up_proj at 1                                 |  9/20     | 10.15  | yes   | 34.8   |
#   | down_proj at 1                                    |  7/20     |  9.85  | yes   | 42.8   |
#   | qkv_proj and o_proj at 1                          | 10/20     | 11.05  | yes   |        |
#   | o_proj and down_proj at 1                         | 10/20     | 11.60  | yes   | 37.7   |
#   | q8: re-quantized 8-bit blocks of 16, all at 4     | 12/20     | 11.60  | yes   | 49.1   |
#   | q8, o_proj and down_proj at 1                     | 13/20     | 10.90  | yes   |  6.5*  |
#   | q8, layers at 1, head at 4                        | 15/20     | 11.80  | yes   |  2.0*  |
#   | q8, every weight at 1                             | 15/20     | 12.30  | yes   |  1.1*  |
#
# Levels 0-3 are all ONNX Runtime's fp32-activation kernels here (AVX2, no VNNI). For 8-bit
# weights there is none: the weight is dequantized on every call, so an 8-bit head at level 1
# alone costs 20x (the old "3 tokens/s"). The 4-bit fp32 kernels are ~4x the int8 ones per weight
# (one MatMulNBits 576 x 3072 at M = 1: ~1.0-1.5 ms against ~0.25-0.4 ms). And every role adds
# to the drift: only fp32 activations everywhere with an exact head reach 18/20. So no mix ships.
# Also tried, outside the converter: every MatMulNBits at level 4 computing W.[xq; x - xq] as one
# batched call (xq: x on the kernel's int8 grid of the same blocks, built in the graph; the two
# rows added), which makes the activations ~14-bit: 20/20 and Paris, but 0.71x q4's decode here
# and, in the Rust bench (one quick round at load 5), 0.80x decode and 0.70x prefill; over the
# layers only 15/20 without Paris. Both miss the speed target (q4 >= llama.cpp, 1.07x today).

FUSED_FORMAT = "ripcord-fused-v1"
# Weight block size per bit width (see above).
BLOCKS = {8: 16, 4: 32}
# accuracy_level 4: int8 activations, integer dot products (lower levels: see the table above).
ACCURACY = 4
# The block size of weights taken exactly from the GGUF's blocks of 32, per bit width (the 8-bit
# head of either: EXACT_HEAD_BLOCK); see above.
EXACT_BLOCKS = {8: 16, 4: 32}
# The variants the converter builds from the GGUF's own blocks (see above).
EXACT_VARIANTS = (4,)
EXACT_HEAD_BLOCK = 16


def quant_blocks(w, bits: int, block: int):
    """[N, K] float -> (B uint8 [N, kb, blob], scales f32 [N, kb], packed uint8 zero points | None)."""
    import numpy as np

    n, k = w.shape
    if k % block:
        sys.exit(f"input dimension {k} is not a multiple of the block size {block}")
    kb = k // block
    wb = w.reshape(n, kb, block).astype(np.float64)
    zp = None
    if bits == 8:
        # Symmetric: q = round(w / s) + 128, the kernel's default zero point.
        amax = np.abs(wb).max(axis=2)
        s = np.where(amax > 0, amax / 127.0, 1.0)
        q = np.clip(np.rint(wb / s[..., None]) + 128, 0, 255).astype(np.uint8)
        blob = q
    elif bits == 4:
        # Asymmetric with an integer zero point (the kernels' fast path needs uint8 zero
        # points): the range [min(lo, 0), max(hi, 0)] so that zero is exact.
        lo = np.minimum(wb.min(axis=2), 0.0)
        hi = np.maximum(wb.max(axis=2), 0.0)
        s = np.where(hi > lo, (hi - lo) / 15.0, 1.0)
        zpi = np.clip(np.rint(-lo / s), 0, 15).astype(np.uint8)
        q = np.clip(np.rint(wb / s[..., None]) + zpi[..., None], 0, 15).astype(np.uint8)
        blob = (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)
        if kb % 2:
            zpi = np.concatenate([zpi, np.zeros((n, 1), dtype=np.uint8)], axis=1)
        zp = (zpi[:, 0::2] | (zpi[:, 1::2] << 4)).astype(np.uint8)
    else:
        sys.exit(f"unsupported bit width {bits}")
    return np.ascontiguousarray(blob), s.astype(np.float32), zp


def pack_blocks(blk, bits: int, block: int):
    """A Blocks weight as MatMulNBits inputs in blocks of `block` (the GGUF's 32, or a divisor of
    it: each block split in parts with the same scale and zero point, still exact): (B uint8
    [N, kb, blob], scales f32 [N, kb], zero points packed as the operator reads them, or None
    where every block has the default)."""
    import numpy as np

    n, k = blk.q.shape
    if blk.BLOCK % block:
        sys.exit(f"blocks of {blk.BLOCK} ({blk.source}) cannot be split in blocks of {block}")
    parts = blk.BLOCK // block
    kb = k // block
    q = blk.q.reshape(n, kb, block)
    zp = np.repeat(blk.zp, parts, axis=1)
    scale = np.repeat(blk.scale, parts, axis=1)
    if bits == 4:
        blob = (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)
        default = 8
        if kb % 2:
            zp = np.concatenate([zp, np.full((n, 1), default, dtype=np.uint8)], axis=1)
        packed = (zp[:, 0::2] | (zp[:, 1::2] << 4)).astype(np.uint8)
    else:
        blob, default, packed = q, 128, zp
    zp_in = None if np.all(blk.zp == default) else np.ascontiguousarray(packed)
    return np.ascontiguousarray(blob), np.ascontiguousarray(scale.astype(np.float32)), zp_in


def exact_matmul(g, x, name: str, blk, bits: int, block: int, accuracy: int, sums: dict) -> str:
    """x @ w.T with the weight's own blocks: MatMulNBits over its levels, scales and zero points,
    plus, for blocks with a minimum (Q4_1), blocksum(x) @ minimums.T. `x` is [batch, seq, K];
    `sums` caches each input's block sums (several weights read the same input)."""
    import numpy as np

    n, k = blk.shape
    blob, scales, zp = pack_blocks(blk, bits, block)
    ins = [x, g.const(name + ".qweight", blob), g.const(name + ".scales", scales)]
    if zp is not None:
        ins.append(g.const(name + ".zero_points", zp))
    y = g.op("MatMulNBits", ins, name.split(".")[-1], domain="com.microsoft", K=k, N=n, bits=bits, block_size=block, accuracy_level=accuracy)
    if blk.minimum is None or not np.any(blk.minimum):
        return y
    if x not in sums:
        shape = g.const(g.name("c_blocks"), np.array([0, 0, k // blk.BLOCK, blk.BLOCK], dtype=np.int64))
        axis = g.const(g.name("c_axis"), np.array([-1], dtype=np.int64))
        sums[x] = g.op("ReduceSum", [g.op("Reshape", [x, shape], "blocked"), axis], "block_sums", keepdims=0)
    mins = g.const(name + ".block_minimums", np.ascontiguousarray(blk.minimum.T.astype(np.float32)))
    return g.op("Add", [y, g.op("MatMul", [sums[x], mins], "min_term")], "with_min")


#: The fused graph's weights by role: a projection's name ends in one, the head is "lm_head".
ROLES = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj", "lm_head")


def role(name: str) -> str:
    """The role of a weight named `model.layers.{i}.{block}.{role}`."""
    return name.split(".")[-1]


def accuracy_levels(accuracy=None) -> dict:
    """MatMulNBits' accuracy_level per role: `accuracy` None (ACCURACY everywhere), one level for
    every weight, or a mapping of roles (missing ones keep ACCURACY)."""
    if accuracy is None:
        return {r: ACCURACY for r in ROLES}
    if isinstance(accuracy, int):
        return {r: accuracy for r in ROLES}
    unknown = set(accuracy) - set(ROLES)
    if unknown:
        sys.exit(f"unknown weight roles {sorted(unknown)}; the roles are {', '.join(ROLES)}")
    return {r: accuracy.get(r, ACCURACY) for r in ROLES}


def parse_accuracy(items) -> dict | None:
    """`convert --accuracy`'s words in order: LEVEL sets every role, ROLE=LEVEL one role (so
    `1 lm_head=4` is fp32 activations everywhere but the head)."""
    if not items:
        return None
    levels = {}
    for item in items:
        target, _, level = item.rpartition("=")
        if not level.isdigit() or (target and target not in ROLES):
            sys.exit(f"--accuracy {item!r}: expected LEVEL or ROLE=LEVEL with a role of {', '.join(ROLES)}")
        levels.update({r: int(level) for r in ([target] if target else ROLES)})
    return levels


def build_fused_model(cfg: dict, w: dict, bits: int, blocks: dict | None = None, accuracy: int | dict | None = None, exact_block: int | None = None, head_block: int | None = None):
    """The fused decoder graph (see above); bits is 8 or 4. With `blocks` (read_gguf_blocks), a
    weight the GGUF holds in Q4_0, Q4_1, Q8_0, Q5_0, Q4_K or Q6_K blocks computes with exactly
    those blocks; any other is quantized from `w`."""
    import numpy as np
    from onnx import TensorProto, helper

    block = BLOCKS[bits]
    levels = accuracy_levels(accuracy)
    exact_block = EXACT_BLOCKS[bits] if exact_block is None else exact_block
    exact_head = EXACT_HEAD_BLOCK if head_block is None else head_block
    d, f, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    hd, h, kvh = cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    n_layers = cfg["num_hidden_layers"]
    eps = cfg["rms_norm_eps"]
    max_pos = cfg["max_position_embeddings"]
    gemma = is_gemma3(cfg)
    g = GraphBuilder("fp32")
    ms = "com.microsoft"

    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"]),
        helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch_size", "total_sequence_length"]),
    ]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch_size", 1, v])]
    add_kv_cache_io(inputs, outputs, n_layers, kvh, hd, "max_sequence_length", "max_sequence_length")

    sums = {}

    def qmatmul(x, name, wt, blk=None):
        """x @ wt.T for a weight wt of shape [N, K]; with blk, exactly with the GGUF's blocks."""
        if blk is not None:
            nbits = 8 if blk.levels == 256 else bits
            return exact_matmul(g, x, name, blk, nbits, min(exact_block, blk.BLOCK), levels[role(name)], sums)
        n, k = wt.shape
        blob, scales, zp = quant_blocks(wt, bits, block)
        ins = [x, g.const(name + ".qweight", blob), g.const(name + ".scales", scales)]
        if zp is not None:
            ins.append(g.const(name + ".zero_points", zp))
        return g.op("MatMulNBits", ins, role(name), domain=ms, K=k, N=n, bits=bits, block_size=block, accuracy_level=levels[role(name)])

    exact = blocks or {"layers": [{} for _ in w["layers"]]}

    def exact_concat(lb, *keys):
        parts = [lb.get(key) for key in keys]
        return None if any(p is None for p in parts) else Blocks.concat(parts)

    i64 = lambda *xs: np.array(xs, dtype=np.int64)  # noqa: E731
    g.const("c_one_i", np.array(1, dtype=np.int64))
    g.const("c_axis_1", i64(1))
    g.const("c_last_start", i64(-1))
    g.const("c_last_end", i64(np.iinfo(np.int64).max))
    g.const("c_split_ff", i64(f, f))
    positions = np.arange(max_pos, dtype=np.float64)[:, None]
    for local in sorted({is_local_layer(cfg, i) for i in range(n_layers)}):
        suffix = "_local" if local else ""
        angles = positions * rope_inv_freq(cfg, local=local)[None, :]
        g.const("c_cos" + suffix, np.cos(angles).astype(np.float32))
        g.const("c_sin" + suffix, np.sin(angles).astype(np.float32))
    if gemma:
        g.const("c_split_qkv", i64(h * hd, kvh * hd, kvh * hd))
        g.const("c_shape_q", i64(0, 0, h, hd))
        g.const("c_shape_kv", i64(0, 0, kvh, hd))
        g.const("c_shape_q_flat", i64(0, 0, h * hd))
        g.const("c_shape_kv_flat", i64(0, 0, kvh * hd))

    def norm(x, name, weight):
        """A plain RMSNorm (no residual) over the last axis."""
        g.const(name, weight.astype(np.float32))
        return g.op("SimplifiedLayerNormalization", [x, name], "ln", axis=-1, epsilon=eps)

    embed_blocks = exact.get("embed")
    tied_q8 = embed_blocks is not None and embed_blocks.levels == 256 and "lm_head" not in w
    if tied_q8:
        # A tied Q8_0 embedding: one table of the GGUF's int8 levels (stored + 128) serves the
        # embedding lookup (the gathered rows decoded exactly) and the 8-bit head.
        blob, scales, _ = pack_blocks(embed_blocks, 8, exact_head)
        g.const("lm_head.qweight", blob)
        g.const("lm_head.scales", scales)
        g.const("c_128", np.array(128.0, dtype=np.float32))
        g.const("c_last_axis", i64(-1))
        rows = g.op("Cast", [g.op("Gather", ["lm_head.qweight", "input_ids"], "embed_q", axis=0)], "embed_levels", to=TensorProto.FLOAT)
        row_scales = g.op("Unsqueeze", [g.op("Gather", ["lm_head.scales", "input_ids"], "embed_s", axis=0), "c_last_axis"], "embed_scales")
        hidden = g.op("Mul", [g.op("Sub", [rows, "c_128"], "embed_centred"), row_scales], "embed_blocks")
        g.const("c_embed_shape", i64(0, 0, d))
        hidden = g.op("Reshape", [hidden, "c_embed_shape"], "embeds")
    else:
        # The embedding table stays fp16 (only the gathered rows are widened).
        g.const("model.embed_tokens.weight.fp16", np.ascontiguousarray(w["embed"].astype(np.float16)))
        hidden = g.op("Gather", ["model.embed_tokens.weight.fp16", "input_ids"], "embeds16", axis=0)
        hidden = g.op("Cast", [hidden], "embeds", to=TensorProto.FLOAT)
    if gemma:
        g.const("c_embed_scale", np.array(np.sqrt(d), dtype=np.float32))
        hidden = g.op("Mul", [hidden, "c_embed_scale"], "embeds_scaled")

    # The KV length from the mask: seqlens_k = valid tokens - 1, total = the mask's length.
    mask_sum = g.op("ReduceSum", ["attention_mask", "c_axis_1"], "mask_sum", keepdims=0)
    seqlens = g.op("Cast", [g.op("Sub", [mask_sum, "c_one_i"], "seqlens64")], "seqlens_k", to=TensorProto.INT32)
    total = g.op("Gather", [g.op("Shape", ["attention_mask"], "mask_shape"), "c_one_i"], "total64", axis=0)
    total = g.op("Cast", [total], "total_seq", to=TensorProto.INT32)

    residual = None
    attn_out = None
    for i, lw in enumerate(w["layers"]):
        lb = exact["layers"][i]
        p = f"model.layers.{i}."
        g.const(p + "input_layernorm.weight", lw["attn_norm"].astype(np.float32))
        if residual is None:
            x = g.op("SimplifiedLayerNormalization", [hidden, p + "input_layernorm.weight"], "ln", axis=-1, epsilon=eps)
            residual = hidden
        else:
            x, _, _, residual = g.op(
                "SkipSimplifiedLayerNormalization",
                [attn_out, residual, p + "input_layernorm.weight"],
                outputs=[g.name("ln"), "", "", g.name("resid")],
                domain=ms,
                epsilon=eps,
            )
        wqkv = np.concatenate([lw["wq"], lw["wk"], lw["wv"]], axis=0)
        qkv = qmatmul(x, p + "self_attn.qkv_proj", wqkv, exact_concat(lb, "wq", "wk", "wv"))
        local = is_local_layer(cfg, i)
        qkv_in = [qkv, "", ""]
        gemma_attrs = {}
        if gemma:
            # Gemma normalizes each head's query and key before RoPE, so the packed projection
            # is split, normed per head, and given to the kernel as separate Q, K and V.
            q, k, v_ = g.op("Split", [qkv, "c_split_qkv"], outputs=[g.name("q"), g.name("k"), g.name("v")], axis=-1)
            q = norm(g.op("Reshape", [q, "c_shape_q"], "q4"), p + "self_attn.q_norm.weight", lw["q_norm"])
            k = norm(g.op("Reshape", [k, "c_shape_kv"], "k4"), p + "self_attn.k_norm.weight", lw["k_norm"])
            qkv_in = [g.op("Reshape", [q, "c_shape_q_flat"], "q_flat"), g.op("Reshape", [k, "c_shape_kv_flat"], "k_flat"), v_]
            gemma_attrs["scale"] = float(1.0 / np.sqrt(cfg["query_pre_attn_scalar"]))
            if local:
                # The kernel keeps local_window_size keys, the query's own included (measured
                # against an explicit mask), as transformers and llama.cpp do: i - j < window.
                gemma_attrs["local_window_size"] = cfg["sliding_window"]
        suffix = "_local" if local else ""
        attn = g.op(
            "GroupQueryAttention",
            [*qkv_in, f"past_key_values.{i}.key", f"past_key_values.{i}.value", seqlens, total, "c_cos" + suffix, "c_sin" + suffix],
            outputs=[g.name("attn"), f"present.{i}.key", f"present.{i}.value"],
            domain=ms,
            num_heads=h,
            kv_num_heads=kvh,
            do_rotary=1,
            rotary_interleaved=0,
            **gemma_attrs,
        )[0]
        o = qmatmul(attn, p + "self_attn.o_proj", lw["wo"], lb.get("wo"))
        if gemma:
            o = norm(o, p + "post_attention_layernorm.weight", lw["post_attn_norm"])
        g.const(ffn_norm_name(cfg, p), lw["ffn_norm"].astype(np.float32))
        x, _, _, residual = g.op(
            "SkipSimplifiedLayerNormalization",
            [o, residual, ffn_norm_name(cfg, p)],
            outputs=[g.name("ln"), "", "", g.name("resid")],
            domain=ms,
            epsilon=eps,
        )
        wgu = np.concatenate([lw["w_gate"], lw["w_up"]], axis=0)
        gu = qmatmul(x, p + "mlp.gate_up_proj", wgu, exact_concat(lb, "w_gate", "w_up"))
        gate, up = g.op("Split", [gu, "c_split_ff"], outputs=[g.name("gate"), g.name("up")], axis=-1)
        if gemma:
            # FastGelu: ONNX Runtime's tanh-approximated GELU (Gemma's gelu_pytorch_tanh).
            act = g.op("Mul", [g.op("FastGelu", [gate], "gelu", domain=ms), up], "act")
        else:
            act = g.op("Mul", [g.op("Mul", [gate, g.op("Sigmoid", [gate], "sig")], "silu"), up], "act")
        attn_out = qmatmul(act, p + "mlp.down_proj", lw["w_down"], lb.get("w_down"))
        if gemma:
            attn_out = norm(attn_out, p + "post_feedforward_layernorm.weight", lw["post_ffn_norm"])

    g.const("model.norm.weight", w["norm"].astype(np.float32))
    # Only the last position's logits are used: slice before the final norm and the head.
    last_out = g.op("Slice", [attn_out, "c_last_start", "c_last_end", "c_axis_1"], "last_out")
    last_res = g.op("Slice", [residual, "c_last_start", "c_last_end", "c_axis_1"], "last_res")
    normed, _, _, _ = g.op(
        "SkipSimplifiedLayerNormalization",
        [last_out, last_res, "model.norm.weight"],
        outputs=[g.name("final_norm"), "", "", ""],
        domain=ms,
        epsilon=eps,
    )
    # The head is 8-bit in both variants: it decides every token, and llama.cpp keeps SmolLM2's
    # tied embedding as Q8_0 too (which 8-bit blocks of 32 reproduce exactly).
    if tied_q8:
        ins = [normed, "lm_head.qweight", "lm_head.scales"]
        head_block = exact_head
    else:
        head_block = min(block, BLOCKS[8]) if bits == 8 else 32
        blob, scales, _ = quant_blocks(w.get("lm_head", w["embed"]), 8, head_block)
        ins = [normed, g.const("lm_head.qweight", blob), g.const("lm_head.scales", scales)]
    g.op("MatMulNBits", ins, outputs=["logits"], domain=ms, K=d, N=v, bits=8, block_size=head_block, accuracy_level=levels["lm_head"])

    graph = helper.make_graph(g.nodes, f"ripcord_{architecture(cfg)}_decoder_fused", inputs, outputs, g.inits)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ms, 1)],
        producer_name="ripcord-local-onnx",
        producer_version=str(CONVERTER_VERSION),
    )
    model.ir_version = 8
    # The runtime reads this to bind one buffer as both past and present (see the crate docs).
    helper.set_model_props(model, {"ripcord.kv_cache": "shared", "ripcord.format": FUSED_FORMAT})
    # No onnx.checker here: SimplifiedLayerNormalization is an ONNX Runtime operator in the
    # default domain that the checker does not know. `verify` loads every variant in ONNX Runtime.
    return model
