"""The converter's inputs: a Llama GGUF's config and dequantized weights, or seeded random weights."""

from __future__ import annotations

import sys


# --------------------------------------------------------------------------------------------
# reading the GGUF
# --------------------------------------------------------------------------------------------


def gguf_field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    return f.contents()


#: The architectures the converter builds a graph for, and what each covers.
SUPPORTED_ARCHITECTURES = {
    "llama": "Llama 2 and 3.x, SmolLM, TinyLlama and other Llama-architecture models",
    "gemma3": "Gemma 3 text models (270M, 1B)",
}

#: The tensors of a Llama GGUF the graph uses (per layer `blk.N.` + these); any other is refused,
#: so a variant with parts the graph lacks (biases, extra norms) is never converted silently wrong.
LAYER_TENSORS = (
    "attn_norm.weight",
    "attn_q.weight",
    "attn_k.weight",
    "attn_v.weight",
    "attn_output.weight",
    "ffn_norm.weight",
    "ffn_gate.weight",
    "ffn_up.weight",
    "ffn_down.weight",
)
MODEL_TENSORS = ("token_embd.weight", "output_norm.weight", "output.weight", "rope_freqs.weight")

#: Gemma 3's extra per-layer tensors: RMSNorms of each head's query and key (before RoPE), and
#: norms of the attention and feed-forward outputs before each residual add. (llama.cpp's
#: converter stores Gemma's norm weights with the +1 of `Gemma3RMSNorm` already added, so every
#: norm here is a plain RMSNorm, as llama.cpp computes it.)
GEMMA3_LAYER_TENSORS = ("attn_q_norm.weight", "attn_k_norm.weight", "post_attention_norm.weight", "post_ffw_norm.weight")

#: Gemma 3's local (sliding-window) layers turn RoPE with this base; the global ones with
#: `gemma3.rope.freq_base` (llama.cpp's `rope_freq_base_train_swa`, transformers'
#: `rope_local_base_freq`). Every sixth layer is global (`sliding_window_pattern`).
GEMMA3_LOCAL_ROPE_BASE = 10000.0
GEMMA3_PATTERN = 6


def refuse(reader, what: str):
    """Stops the converter with a sentence naming the GGUF file and what it cannot convert."""
    sys.exit(f"cannot convert {getattr(reader, 'source_path', 'the GGUF')}: {what}")


def open_gguf(path):
    """A GGUFReader of `path`, or a sentence naming the file and why it cannot be read."""
    from pathlib import Path

    from gguf import GGUFReader

    if not Path(path).is_file():
        sys.exit(f"cannot convert {path}: no such file")
    try:
        reader = GGUFReader(path)
    except (ValueError, OSError) as e:
        sys.exit(f"cannot convert {path}: not a readable GGUF file ({e})")
    reader.source_path = str(path)
    return reader


def read_gguf_config(reader) -> dict:
    arch = gguf_field(reader, "general.architecture")
    if arch not in SUPPORTED_ARCHITECTURES:
        known = "; ".join(f"{a!r} ({what})" for a, what in SUPPORTED_ARCHITECTURES.items())
        refuse(reader, f"its architecture is {arch!r}; the converter builds {known}")
    p = arch + "."

    def need(key):
        v = gguf_field(reader, p + key)
        if v is None:
            refuse(reader, f"its metadata has no {p + key}")
        return v

    n_head = int(need("attention.head_count"))
    hidden = int(need("embedding_length"))
    tokens = gguf_field(reader, "tokenizer.ggml.tokens")
    if tokens is None:
        refuse(reader, "its metadata has no tokenizer (tokenizer.ggml.tokens)")
    gemma = arch == "gemma3"
    cfg = {
        "architecture": arch,
        "hidden_size": hidden,
        "intermediate_size": int(need("feed_forward_length")),
        "num_hidden_layers": int(need("block_count")),
        "num_attention_heads": n_head,
        "num_key_value_heads": int(gguf_field(reader, p + "attention.head_count_kv", n_head)),
        "head_dim": int(gguf_field(reader, p + ("attention.key_length" if gemma else "rope.dimension_count"), hidden // n_head)),
        "max_position_embeddings": int(need("context_length")),
        "rms_norm_eps": float(need("attention.layer_norm_rms_epsilon")),
        "rope_theta": float(gguf_field(reader, p + "rope.freq_base", 10000.0)),
        "vocab_size": int(gguf_field(reader, p + "vocab_size", len(tokens))),
    }
    if gemma:
        # Gemma's heads are wider than hidden / heads (270M: 4 x 256 over 640) and RoPE turns
        # all of each head.
        value_length = int(gguf_field(reader, p + "attention.value_length", cfg["head_dim"]))
        if value_length != cfg["head_dim"]:
            refuse(reader, f"its values are {value_length} wide but its keys {cfg['head_dim']}")
        rope_dims = gguf_field(reader, p + "rope.dimension_count")
        if rope_dims is not None and int(rope_dims) != cfg["head_dim"]:
            refuse(reader, f"its keys are {cfg['head_dim']} wide but RoPE turns {rope_dims} (partial rotary)")
        cfg["sliding_window"] = int(need("attention.sliding_window"))
        cfg["sliding_window_pattern"] = GEMMA3_PATTERN
        cfg["rope_local_base_freq"] = GEMMA3_LOCAL_ROPE_BASE
        # The attention scale is 1/sqrt(query_pre_attn_scalar): head_dim for every size but 27B
        # (62 layers), whose scalar is hidden / heads (llama.cpp's f_attention_scale).
        cfg["query_pre_attn_scalar"] = hidden // n_head if cfg["num_hidden_layers"] == 62 else cfg["head_dim"]
    else:
        if cfg["head_dim"] * n_head != hidden:
            refuse(reader, f"head_dim {cfg['head_dim']} x heads {n_head} != hidden {hidden} (partial rotary)")
        key_length = gguf_field(reader, p + "attention.key_length")
        if key_length is not None and int(key_length) != cfg["head_dim"]:
            refuse(reader, f"its keys are {key_length} wide but RoPE turns {cfg['head_dim']} (partial rotary)")
    scaling = gguf_field(reader, p + "rope.scaling.type", "none")
    if scaling == "linear":
        cfg["rope_linear_factor"] = float(need("rope.scaling.factor"))
    elif scaling != "none":
        refuse(reader, f"its RoPE scaling is {scaling!r}; the converter handles none and 'linear'")
    tensors = {t.name: t for t in reader.tensors}
    if "rope_freqs.weight" in tensors:
        # Llama 3.1/3.2's frequency factors (llama.cpp divides each RoPE frequency by its factor).
        import numpy as np

        factors = np.asarray(tensors["rope_freqs.weight"].data, dtype=np.float32).reshape(-1)
        if factors.shape[0] != cfg["head_dim"] // 2:
            refuse(reader, f"rope_freqs.weight has {factors.shape[0]} factors for head_dim {cfg['head_dim']}")
        cfg["rope_freq_factors"] = [float(f) for f in factors]
    per_layer = LAYER_TENSORS + (GEMMA3_LAYER_TENSORS if gemma else ())
    layer_names = {f"blk.{i}.{n}" for i in range(cfg["num_hidden_layers"]) for n in per_layer}
    unknown = sorted(set(tensors) - layer_names - set(MODEL_TENSORS))
    if unknown:
        more = f" and {len(unknown) - 3} more" if len(unknown) > 3 else ""
        refuse(reader, f"tensor {', '.join(unknown[:3])}{more} is not part of the {arch} graph the converter builds")
    return cfg


def architecture(cfg) -> str:
    """The GGUF's `general.architecture` (the tiny test model's config names none: llama)."""
    return cfg.get("architecture", "llama")


def is_gemma3(cfg) -> bool:
    return architecture(cfg) == "gemma3"


def is_local_layer(cfg, i: int) -> bool:
    """Gemma 3: layer i attends within the sliding window (all but every sixth layer)."""
    return is_gemma3(cfg) and (i + 1) % cfg["sliding_window_pattern"] != 0


def rope_inv_freq(cfg, local: bool = False):
    """RoPE's inverse frequencies (float64, head_dim/2): theta^(-2i/d), divided by Llama 3's
    per-frequency factors and by a linear scaling factor when the GGUF has them. `local`: a
    Gemma 3 sliding-window layer's (its own base, never scaled)."""
    import numpy as np

    hd = cfg["head_dim"]
    if local:
        return 1.0 / (cfg["rope_local_base_freq"] ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
    inv = 1.0 / (cfg["rope_theta"] ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
    if "rope_freq_factors" in cfg:
        inv = inv / np.asarray(cfg["rope_freq_factors"], dtype=np.float64)
    return inv / cfg.get("rope_linear_factor", 1.0)


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
            refuse(reader, f"it has no tensor {name}")
        try:
            arr = dequantize(t.data, t.tensor_type)
        except (NotImplementedError, ValueError, KeyError) as e:
            refuse(reader, f"tensor {name} is of type {t.tensor_type.name}, which the gguf library cannot decode ({e})")
        return np.ascontiguousarray(arr, dtype=np.float32)

    # llama.cpp permutes a Llama's Q/K rows for its interleaved RoPE; Gemma's are stored as
    # transformers has them (llama.cpp turns them with NeoX-style RoPE, which is "rotate half").
    unpermute = (lambda a, heads: a) if is_gemma3(cfg) else unpermute_rope_rows
    w = {"embed": get("token_embd.weight"), "norm": get("output_norm.weight"), "layers": []}
    if "output.weight" in tensors:
        w["lm_head"] = get("output.weight")
    for i in range(cfg["num_hidden_layers"]):
        b = f"blk.{i}."
        w["layers"].append(
            {
                "attn_norm": get(b + "attn_norm.weight"),
                "wq": unpermute(get(b + "attn_q.weight"), cfg["num_attention_heads"]),
                "wk": unpermute(get(b + "attn_k.weight"), cfg["num_key_value_heads"]),
                "wv": get(b + "attn_v.weight"),
                "wo": get(b + "attn_output.weight"),
                "ffn_norm": get(b + "ffn_norm.weight"),
                "w_gate": get(b + "ffn_gate.weight"),
                "w_up": get(b + "ffn_up.weight"),
                "w_down": get(b + "ffn_down.weight"),
            }
        )
        if is_gemma3(cfg):
            w["layers"][-1].update(
                {
                    "q_norm": get(b + "attn_q_norm.weight"),
                    "k_norm": get(b + "attn_k_norm.weight"),
                    "post_attn_norm": get(b + "post_attention_norm.weight"),
                    "post_ffn_norm": get(b + "post_ffw_norm.weight"),
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
# the GGUF's own blocks, for the fused graph's exact weights
# --------------------------------------------------------------------------------------------
#
# llama.cpp's 4- and 8-bit blocks hold 32 weights of one row each, along the input dimension:
#
#   Q4_0  d (fp16), 16 bytes of nibbles          w = d * (q - 8)
#   Q4_1  d (fp16), m (fp16), 16 bytes of nibbles w = d * q + m
#   Q8_0  d (fp16), 32 int8                       w = d * q
#
# (nibbles: byte j holds element j in its low half and element j + 16 in its high half). ONNX
# Runtime's MatMulNBits computes with w = scale * (q - zero_point) per block of 32, the zero point
# a small integer: Q4_0 and Q8_0 are exactly that. Q4_1's minimum is not a multiple of d, so the
# fused graph keeps it apart: x @ w.T = MatMulNBits(x, q, d, zero point 0) + blocksum(x) @ m.T,
# where blocksum(x) sums x over each block of 32 inputs. Either way the graph computes with the
# GGUF's own weights: nothing is re-quantized.
#
# Three more types have an exact form (what Q4_K_M files such as Gemma 3 270M's mix):
#
#   Q5_0  d, 5-bit q per block of 32                w = d * (q - 16)        8-bit levels, zp 16
#   Q4_K  super-blocks of 256: d, dmin, a 6-bit scale and minimum per sub-block of 32
#                                                  w = d*sc * q - dmin*m   like Q4_1
#   Q6_K  super-blocks of 256: d, an int8 scale per sub-block of 16, 6-bit q
#                                                  w = d*sc * (q - 32)     8-bit levels, blocks of 16
#
# Their bit layouts are not decoded here: the gguf library decodes a copy of the blocks whose
# scale fields are set so that each weight equals its level (d = 1, minimums 0), which gives q;
# the scales are the blocks' own fields (Q4_K's through the library's get_scale_min).


class Blocks:
    """A weight [N, K] as blocks of `block` (32, or 16 for Q6_K) along K: levels q (uint8
    [N, K]), zero points and scales (per block, [N, K/block]) and, for Q4_1 and Q4_K, the
    blocks' minimums: w = scale * (q - zp) + minimum."""

    def __init__(self, q, zp, scale, minimum, levels: int, source: str, block: int = 32):
        self.q, self.zp, self.scale, self.minimum = q, zp, scale, minimum
        self.levels, self.source, self.BLOCK = levels, source, block

    @property
    def shape(self):
        return self.q.shape

    def dequantize(self):
        import numpy as np

        n, k = self.q.shape
        kb = k // self.BLOCK
        q = self.q.reshape(n, kb, self.BLOCK).astype(np.float32) - self.zp[..., None].astype(np.float32)
        w = q * self.scale[..., None]
        if self.minimum is not None:
            w = w + self.minimum[..., None]
        return w.reshape(n, k).astype(np.float32)

    def map_rows(self, f):
        """The same weight with its rows rearranged by f (applied to every per-row array)."""
        m = None if self.minimum is None else f(self.minimum)
        return Blocks(f(self.q), f(self.zp), f(self.scale), m, self.levels, self.source, self.BLOCK)

    @staticmethod
    def concat(parts):
        """Row-wise concatenation (QKV, gate and up): one weight of all the rows."""
        import numpy as np

        levels = {p.levels for p in parts}
        block = {p.BLOCK for p in parts}
        if len(levels) != 1 or len(block) != 1:
            return None
        mins = None
        if any(p.minimum is not None for p in parts):
            mins = np.concatenate([p.minimum if p.minimum is not None else np.zeros_like(p.scale) for p in parts])
        return Blocks(
            np.concatenate([p.q for p in parts]),
            np.concatenate([p.zp for p in parts]),
            np.concatenate([p.scale for p in parts]),
            mins,
            levels.pop(),
            "+".join(sorted({p.source for p in parts})),
            block.pop(),
        )


def levels_by_library(raw, kind, patch):
    """The level of every weight of `raw` (uint8 [N, blocks * size]), as the gguf library
    decodes a copy whose scale fields `patch(blocks)` set so that each weight is its level."""
    import numpy as np
    from gguf.constants import GGML_QUANT_SIZES
    from gguf.quants import dequantize

    copy = np.array(raw, dtype=np.uint8, copy=True)
    n = copy.shape[0]
    _, size = GGML_QUANT_SIZES[kind]
    patch(copy.reshape(n, -1, size))
    return np.rint(dequantize(copy, kind)).astype(np.int16)


def _f16(b):
    """A block field of two bytes (the last axis) as the fp16 number it holds, widened."""
    import numpy as np

    return np.ascontiguousarray(b).view(np.float16)[..., 0].astype(np.float32)


def k_blocks_of(tensor):
    """Q5_0, Q4_K and Q6_K as Blocks (see above), or None for another type."""
    import numpy as np
    from gguf import GGMLQuantizationType as T
    from gguf.constants import GGML_QUANT_SIZES
    from gguf.quants import Q4_K

    kind = tensor.tensor_type
    if kind not in (T.Q5_0, T.Q4_K, T.Q6_K):
        return None
    raw = np.asarray(tensor.data, dtype=np.uint8)
    n = raw.shape[0]
    b = raw.reshape(n, -1, GGML_QUANT_SIZES[kind][1])
    nb = b.shape[1]
    one = np.array([1.0], dtype=np.float16).view(np.uint8)
    if kind == T.Q5_0:

        def unit(c):
            c[..., 0:2] = one

        q = (levels_by_library(raw, kind, unit) + 16).astype(np.uint8)
        return Blocks(q, np.full((n, nb), 16, dtype=np.uint8), _f16(b[..., 0:2]), None, 256, kind.name)
    if kind == T.Q4_K:

        def unit(c):
            c[..., 0:2] = one
            c[..., 2:4] = 0
            # Every sub-block's 6-bit scale 1 and minimum 0 (get_scale_min's packing).
            c[..., 4:16] = np.array([1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1], dtype=np.uint8)

        q = levels_by_library(raw, kind, unit).astype(np.uint8)
        sc, m = Q4_K.get_scale_min(np.ascontiguousarray(b[..., 4:16]).reshape(n * nb, 12))
        d = _f16(b[..., 0:2]).reshape(n, nb, 1)
        dmin = _f16(b[..., 2:4]).reshape(n, nb, 1)
        scale = (d * sc.reshape(n, nb, 8).astype(np.float32)).reshape(n, nb * 8)
        minimum = -(dmin * m.reshape(n, nb, 8).astype(np.float32)).reshape(n, nb * 8)
        return Blocks(q, np.zeros((n, nb * 8), dtype=np.uint8), scale, minimum, 16, kind.name)

    def unit(c):
        c[..., 192:208] = 1
        c[..., 208:210] = one

    q = (levels_by_library(raw, kind, unit) + 32).astype(np.uint8)
    d = _f16(b[..., 208:210]).reshape(n, nb, 1)
    sc = np.ascontiguousarray(b[..., 192:208]).view(np.int8).astype(np.float32)
    scale = (d * sc).reshape(n, nb * 16)
    return Blocks(q, np.full((n, nb * 16), 32, dtype=np.uint8), scale, None, 256, kind.name, block=16)


def blocks_of(tensor):
    """The tensor's own blocks, or None for a type MatMulNBits cannot hold exactly (F32, F16,
    Q5_1, Q5_K, Q2_K, Q3_K, ...: those are dequantized and re-quantized)."""
    import numpy as np
    from gguf import GGMLQuantizationType as T

    kind = tensor.tensor_type
    layout = {T.Q4_0: (18, 2), T.Q4_1: (20, 4), T.Q8_0: (34, 2)}.get(kind)
    if layout is None:
        return k_blocks_of(tensor)
    size, head = layout
    data = np.asarray(tensor.data, dtype=np.uint8)
    n = data.shape[0]
    b = data.reshape(n, -1, size)
    kb = b.shape[1]
    d = _f16(b[..., 0:2])
    if kind == T.Q8_0:
        q = (np.ascontiguousarray(b[..., 2:]).view(np.int8).astype(np.int16) + 128).astype(np.uint8)
        zp = np.full((n, kb), 128, dtype=np.uint8)
        return Blocks(q.reshape(n, kb * 32), zp, d, None, 256, kind.name)
    qs = b[..., head:]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.uint8)
    if kind == T.Q4_0:
        zp = np.full((n, kb), 8, dtype=np.uint8)
        return Blocks(q.reshape(n, kb * 32), zp, d, None, 16, kind.name)
    m = _f16(b[..., 2:4])
    return Blocks(q.reshape(n, kb * 32), np.zeros((n, kb), dtype=np.uint8), d, m, 16, kind.name)


def read_gguf_blocks(reader, cfg) -> dict:
    """Per weight of read_gguf_weights, its Blocks (None where the type has no exact form), each
    checked against the GGUF library's own dequantization."""
    import numpy as np
    from gguf.quants import dequantize

    tensors = {t.name: t for t in reader.tensors}

    def get(name, rope_heads=None):
        t = tensors[name]
        blk = blocks_of(t)
        if blk is None:
            return None
        want = dequantize(t.data, t.tensor_type).astype(np.float32)
        if not np.array_equal(blk.dequantize(), want):
            sys.exit(f"GGUF tensor {name} ({t.tensor_type.name}): its blocks do not decode to the GGUF library's values")
        if rope_heads is not None and not is_gemma3(cfg):
            blk = blk.map_rows(lambda a: unpermute_rope_rows(a, rope_heads))
        return blk

    out = {"embed": get("token_embd.weight"), "layers": []}
    if "output.weight" in tensors:
        out["lm_head"] = get("output.weight")
    for i in range(cfg["num_hidden_layers"]):
        b = f"blk.{i}."
        out["layers"].append(
            {
                "wq": get(b + "attn_q.weight", cfg["num_attention_heads"]),
                "wk": get(b + "attn_k.weight", cfg["num_key_value_heads"]),
                "wv": get(b + "attn_v.weight"),
                "wo": get(b + "attn_output.weight"),
                "w_gate": get(b + "ffn_gate.weight"),
                "w_up": get(b + "ffn_up.weight"),
                "w_down": get(b + "ffn_down.weight"),
            }
        )
    return out
