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
