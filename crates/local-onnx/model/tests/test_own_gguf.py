"""`convert` on GGUFs other than SmolLM2's: what `setup-model --gguf PATH` runs on a user's model.

Each test writes a small GGUF with the gguf library's own writer (tiny seeded weights, the
tokenizer and metadata of the kind under test), converts it and checks what the converter made
of it, or that it refused naming what it cannot convert.
"""

from __future__ import annotations

import json
import tempfile
import unittest
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from support import GGUF, run_tool

from modeltool.convert import GEMMA3_TEMPLATE, PLAIN_TEMPLATE, TINY_CONFIG as TINY
from modeltool.gguf_source import random_weights


def smollm2_tokenizer():
    """SmolLM2's byte-level BPE vocabulary, merges and token types."""
    from gguf import GGUFReader

    r = GGUFReader(str(GGUF))

    def field(k):
        return list(r.fields[k].contents())

    return field("tokenizer.ggml.tokens"), field("tokenizer.ggml.merges"), field("tokenizer.ggml.token_type")


# A SentencePiece vocabulary: specials, the 256 byte pieces, characters, and merged pieces whose
# scores (higher merges first) spell "hello" and "world".
SPM_PIECES = ["\u2581", "h", "e", "l", "o", "w", "r", "d"]
SPM_MERGED = ["he", "ll", "or", "llo", "wor", "hello", "worl", "world", "\u2581hello", "\u2581world"]


def spm_tokenizer(gemma=False):
    """The vocabulary above; `gemma`: with Gemma's specials in front (<pad> <eos> <bos> <unk>,
    the turn markers) and a user-defined "\n\n" piece (token type 4), as Gemma 3's GGUF has."""
    head, head_types = (["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>", "\n\n"], [3, 3, 3, 2, 3, 3, 4]) if gemma else (["<unk>", "<s>", "</s>"], [2, 3, 3])
    tokens = head + [f"<0x{b:02X}>" for b in range(256)] + SPM_PIECES + SPM_MERGED
    types = head_types + [6] * 256 + [1] * (len(SPM_PIECES) + len(SPM_MERGED))
    scores = [0.0] * (len(head) + 256 + len(SPM_PIECES)) + [-1.0 - i for i in range(len(SPM_MERGED))]
    return tokens, types, scores


#: A tiny Gemma 3: heads wider than hidden / heads (as the 270M's 4 x 256 over 640), one KV
#: head, and a sliding window of 4 so that a short prompt crosses it.
GEMMA = dict(TINY, num_key_value_heads=1, head_dim=32, sliding_window=4)


def gemma_weights(cfg, seed: int):
    """random_weights plus Gemma 3's per-head Q/K norms and post-attention/feed-forward norms."""
    rng = np.random.default_rng(seed)
    w = random_weights(cfg, seed)
    for layer in w["layers"]:
        for key, size in (("q_norm", cfg["head_dim"]), ("k_norm", cfg["head_dim"]), ("post_attn_norm", cfg["hidden_size"]), ("post_ffn_norm", cfg["hidden_size"])):
            layer[key] = (1.0 + 0.1 * rng.standard_normal(size)).astype(np.float32)
    return w


def gemma_reference(cfg, w, ids):
    """Logits [len(ids), vocab] of a full prefill, transcribed from transformers'
    Gemma3TextModel (norm weights as llama.cpp's GGUF holds them, the +1 already added)."""
    d, hd = cfg["hidden_size"], cfg["head_dim"]
    heads, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    eps, n = cfg["rms_norm_eps"], len(ids)

    def rms(x, weight):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight

    def rope(x, base):
        inv = 1.0 / base ** (np.arange(0, hd, 2) / hd)
        ang = np.arange(n)[:, None] * inv[None, :]
        cos, sin = np.cos(np.concatenate([ang, ang], -1)), np.sin(np.concatenate([ang, ang], -1))
        half = np.concatenate([-x[..., hd // 2 :], x[..., : hd // 2]], axis=-1)
        return x * cos[:, None, :] + half * sin[:, None, :]

    x = w["embed"][ids].astype(np.float64) * np.sqrt(d)
    for i, lw in enumerate(w["layers"]):
        local = (i + 1) % cfg["sliding_window_pattern"] != 0
        h = rms(x, lw["attn_norm"])
        q = rms((h @ lw["wq"].T).reshape(n, heads, hd), lw["q_norm"])
        k = rms((h @ lw["wk"].T).reshape(n, kv, hd), lw["k_norm"])
        v = (h @ lw["wv"].T).reshape(n, kv, hd)
        base = cfg["rope_local_base_freq"] if local else cfg["rope_theta"]
        q, k = rope(q, base), rope(k, base)
        qi, kj = np.arange(n)[:, None], np.arange(n)[None, :]
        allowed = (kj <= qi) & ((qi - kj < cfg["sliding_window"]) if local else True)
        ctx = np.zeros((n, heads, hd))
        for head in range(heads):
            g = head // (heads // kv)
            scores = q[:, head] @ k[:, g].T / np.sqrt(cfg["query_pre_attn_scalar"])
            scores = np.where(allowed, scores, -np.inf)
            p = np.exp(scores - scores.max(-1, keepdims=True))
            ctx[:, head] = (p / p.sum(-1, keepdims=True)) @ v[:, g]
        x = x + rms(ctx.reshape(n, heads * hd) @ lw["wo"].T, lw["post_attn_norm"])
        h = rms(x, lw["ffn_norm"])
        gate = h @ lw["w_gate"].T
        gelu = 0.5 * gate * (1 + np.tanh(np.sqrt(2 / np.pi) * (gate + 0.044715 * gate**3)))
        x = x + rms((gelu * (h @ lw["w_up"].T)) @ lw["w_down"].T, lw["post_ffn_norm"])
    return rms(x, w["norm"]) @ w["embed"].T


def write_gguf(path: Path, *, arch="llama", tokenizer="gpt2", pre="llama-bpe", extra=(), rope_freqs=None, eot=None, finetune=None):
    """A tiny GGUF: TINY's shapes (GEMMA's for arch gemma3) with seeded weights, and the
    tokenizer kind asked for."""
    from gguf import GGUFWriter

    gemma = arch == "gemma3"
    shape = GEMMA if gemma else TINY
    w = GGUFWriter(str(path), arch)
    if finetune is not None:
        w.add_string("general.finetune", finetune)
    w.add_block_count(TINY["num_hidden_layers"])
    w.add_context_length(TINY["max_position_embeddings"])
    w.add_embedding_length(TINY["hidden_size"])
    w.add_feed_forward_length(TINY["intermediate_size"])
    w.add_head_count(TINY["num_attention_heads"])
    w.add_head_count_kv(shape["num_key_value_heads"])
    w.add_layer_norm_rms_eps(TINY["rms_norm_eps"])
    w.add_rope_freq_base(TINY["rope_theta"])
    if gemma:
        w.add_key_length(shape["head_dim"])
        w.add_value_length(shape["head_dim"])
        w.add_sliding_window(shape["sliding_window"])
    else:
        w.add_rope_dimension_count(TINY["head_dim"])
    if tokenizer == "gpt2":
        tokens, merges, types = smollm2_tokenizer()
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre(pre)
        w.add_token_list(tokens)
        w.add_token_types(types)
        w.add_token_merges(merges)
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        w.add_add_bos_token(True)
        w.add_chat_template("{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}")
    elif tokenizer == "gemma":
        # Gemma 3 270M's tokenizer metadata, and like it no chat template.
        tokens, types, scores = spm_tokenizer(gemma=True)
        w.add_tokenizer_model("llama")
        w.add_token_list(tokens)
        w.add_token_types(types)
        w.add_token_scores(scores)
        w.add_bos_token_id(2)
        w.add_eos_token_id(1)
        w.add_unk_token_id(3)
        w.add_pad_token_id(0)
        w.add_add_bos_token(True)
        w.add_add_space_prefix(False)
    else:
        tokens, types, scores = spm_tokenizer()
        w.add_tokenizer_model("llama")
        w.add_token_list(tokens)
        w.add_token_types(types)
        w.add_token_scores(scores)
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        w.add_unk_token_id(0)
        w.add_add_bos_token(True)
        w.add_add_space_prefix(True)
        w.add_chat_template("{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}</s>\n{% endfor %}")
    if eot is not None:
        w.add_eot_token_id(eot)
    cfg = dict(shape, vocab_size=len(tokens))
    weights = gemma_weights(cfg, 7) if gemma else random_weights(cfg, 7)
    w.add_tensor("token_embd.weight", weights["embed"])
    w.add_tensor("output_norm.weight", weights["norm"])
    names = {
        "attn_norm": "attn_norm",
        "wq": "attn_q",
        "wk": "attn_k",
        "wv": "attn_v",
        "wo": "attn_output",
        "ffn_norm": "ffn_norm",
        "w_gate": "ffn_gate",
        "w_up": "ffn_up",
        "w_down": "ffn_down",
    }
    if gemma:
        names.update({"q_norm": "attn_q_norm", "k_norm": "attn_k_norm", "post_attn_norm": "post_attention_norm", "post_ffn_norm": "post_ffw_norm"})
    for i, layer in enumerate(weights["layers"]):
        for key, name in names.items():
            w.add_tensor(f"blk.{i}.{name}.weight", layer[key])
    if rope_freqs is not None:
        w.add_tensor("rope_freqs.weight", np.asarray(rope_freqs, dtype=np.float32))
    for name, array in extra:
        w.add_tensor(name, array)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


class OwnGguf(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="ripcord-own-gguf-")
        self.dir = Path(self.tmp.name)
        self.gguf = self.dir / "model.gguf"
        self.out = self.dir / "out"

    def tearDown(self):
        self.tmp.cleanup()

    def convert_and_verify(self, prompt: str):
        run_tool("convert", "--gguf", str(self.gguf), "--out", str(self.out), "--blocks", "8", "4")
        models = ["model.onnx", "model.q8.onnx", "model.q4.onnx"]
        return run_tool("verify", "--dir", str(self.out), "--plain", "--prompt", prompt, "--tokens", "8", "--models", *models)

    def test_a_llama_3_style_gguf_converts_with_its_pre_tokenizer_rope_factors_and_end_of_turn(self):
        factors = [1.0, 1.0, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
        write_gguf(self.gguf, pre="llama-bpe", rope_freqs=factors, eot=0)
        report = self.convert_and_verify("The capital of France is")
        for name in ("model.onnx", "model.q8.onnx", "model.q4.onnx"):
            self.assertEqual(report[name]["tokens"], 8, report)
        # Llama 3's regex: digits in runs of up to three.
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(self.out / "tokenizer.json"))
        pieces = [p for p, _ in tok.pre_tokenizer.pre_tokenize_str("abc 12345")]
        self.assertEqual(pieces, ["abc", "\u0120", "123", "45"])
        # <|eot_id|> ends a turn beside EOS; the RoPE factors are in the graph, not config.json.
        self.assertEqual(json.loads((self.out / "generation_config.json").read_text())["eos_token_id"], [2, 0])
        config = json.loads((self.out / "config.json").read_text())
        self.assertNotIn("rope_freq_factors", config)
        graph = onnx.load(str(self.out / "model.onnx")).graph
        inv = next(numpy_helper.to_array(t) for t in graph.initializer if t.name == "c_inv_freq")
        hd = TINY["head_dim"]
        want = 1.0 / (TINY["rope_theta"] ** (np.arange(0, hd, 2) / hd)) / np.asarray(factors)
        np.testing.assert_allclose(inv.reshape(-1), want, rtol=1e-6)
        # The template writes BOS itself, so none is added in front of it.
        self.assertTrue(json.loads((self.out / "tokenizer_config.json").read_text())["chat_template"].startswith("{{ bos_token }}{%"))

    def test_a_sentencepiece_gguf_gets_merges_from_its_scores_byte_fallback_and_bos(self):
        write_gguf(self.gguf, tokenizer="llama")
        self.convert_and_verify("hello world")
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(self.out / "tokenizer.json"))
        self.assertEqual(tok.encode("hello world", add_special_tokens=False).tokens, ["\u2581hello", "\u2581world"])
        # Text outside the pieces falls back to its UTF-8 bytes and decodes back.
        enc = tok.encode("h\u00e9", add_special_tokens=False)
        self.assertEqual(enc.tokens, ["\u2581", "h", "<0xC3>", "<0xA9>"])
        self.assertEqual(tok.decode(enc.ids), "h\u00e9")
        # TinyLlama's template does not write BOS; the model wants it, so the template gets it.
        tcfg = json.loads((self.out / "tokenizer_config.json").read_text())
        self.assertTrue(tcfg["chat_template"].startswith("{{ bos_token }}{% for m in messages %}<|"), tcfg["chat_template"])
        self.assertEqual(tcfg["bos_token"], "<s>")

    def test_a_gemma_3_gguf_converts_with_its_template_end_of_turn_and_sliding_window(self):
        write_gguf(self.gguf, arch="gemma3", tokenizer="llama")
        # verify checks that KV-cache decoding equals a full prefill; 6 prompt tokens and 8 more
        # cross the window of 4 both ways.
        report = self.convert_and_verify("hello world hello world")
        for name in ("model.onnx", "model.q8.onnx", "model.q4.onnx"):
            self.assertEqual(report[name]["tokens"], 8, report)
        config = json.loads((self.out / "config.json").read_text())
        self.assertEqual((config["model_type"], config["head_dim"], config["sliding_window"]), ("gemma3_text", 32, 4))
        # The GGUF has a template here; a Gemma GGUF without one gets Gemma's (see below).
        tcfg = json.loads((self.out / "tokenizer_config.json").read_text())
        self.assertEqual(tcfg["tokenizer_class"], "GemmaTokenizerFast")
        # The agreement check runs on a model of one's own with plain prompts.
        agree = run_tool("agree", "--dir", str(self.out), "--plain", "--tokens", "4", "--models", "model.q8.onnx")
        self.assertEqual(agree["prompts"], 20, agree)
        self.assertIn("model.q8.onnx", agree["variants"])

    def test_a_gemma_3_graph_computes_what_the_reference_computes(self):
        """Both graphs against a numpy transcription of transformers' Gemma3 decoder layer
        (embedding scale, per-head Q/K norms, local and global RoPE bases, the sliding window,
        post-norms, tanh GELU), over a prompt longer than the window."""
        from modeltool.convert import save_model
        from modeltool.gguf_source import open_gguf, read_gguf_config, read_gguf_weights
        from modeltool.graph import build_fused_model, build_model
        from modeltool.verify import FusedDecoder, OrtDecoder

        write_gguf(self.gguf, arch="gemma3", tokenizer="llama")
        reader = open_gguf(self.gguf)
        # Every second layer global (Gemma 3: every sixth), so both kinds are in two layers.
        cfg = dict(read_gguf_config(reader), sliding_window_pattern=2)
        w = read_gguf_weights(reader, cfg)
        ids = [1, 260, 265, 270, 261, 266, 271, 262, 267, 272]
        want = gemma_reference(cfg, w, ids)
        self.assertEqual(cfg["sliding_window"], 4)
        config = {k: cfg[k] for k in ("num_hidden_layers", "num_key_value_heads", "head_dim", "hidden_size", "num_attention_heads")}
        save_model(build_model(cfg, w, storage="fp32", head="gemm"), self.dir / "plain.onnx")
        plain = OrtDecoder(str(self.dir / "plain.onnx"), config, 1)
        got = plain.step(ids, plain.empty_cache(), 0)[0][0]
        np.testing.assert_allclose(got, want, atol=2e-3, rtol=1e-3)
        # The fused graph (GroupQueryAttention's local_window_size, FastGelu), with fp32
        # activations: its 8-bit weight blocks are the only difference from the reference.
        save_model(build_fused_model(cfg, w, 8, accuracy=1), self.dir / "fused.onnx")
        fused = FusedDecoder(str(self.dir / "fused.onnx"), config, 1, capacity=16)
        got = fused.step(ids, fused.empty_cache(), 0)[0][0, -1]
        spread = float(want[-1].max() - want[-1].min())
        self.assertLess(float(np.abs(got - want[-1]).max()), 0.02 * spread)
        self.assertEqual(int(got.argmax()), int(want[-1].argmax()))
        # The window matters: without it the last position's logits are not the reference's.
        wide = gemma_reference(dict(cfg, sliding_window=512), w, ids)
        self.assertGreater(float(np.abs(wide[-1] - want[-1]).max()), 0.05 * spread)

    def test_a_base_gemma_3_gguf_without_a_template_is_prompted_with_plain_text(self):
        write_gguf(self.gguf, arch="gemma3", tokenizer="gemma")
        run_tool("convert", "--gguf", str(self.gguf), "--out", str(self.out))
        tcfg = json.loads((self.out / "tokenizer_config.json").read_text())
        self.assertEqual(tcfg["chat_template"], "{{ bos_token }}" + PLAIN_TEMPLATE)

    def test_an_instruction_tuned_gemma_3_gguf_without_a_template_gets_gemmas_and_its_end_of_turn(self):
        write_gguf(self.gguf, arch="gemma3", tokenizer="gemma", finetune="it")
        run_tool("convert", "--gguf", str(self.gguf), "--out", str(self.out))
        tcfg = json.loads((self.out / "tokenizer_config.json").read_text())
        self.assertEqual(tcfg["chat_template"], GEMMA3_TEMPLATE)
        tokens = spm_tokenizer(gemma=True)[0]
        eos = json.loads((self.out / "generation_config.json").read_text())["eos_token_id"]
        self.assertEqual(eos, [1, tokens.index("<end_of_turn>")])
        # User-defined tokens ("\n\n") are matched whole and decode as text, not as specials.
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(self.out / "tokenizer.json"))
        enc = tok.encode("hello\n\nworld", add_special_tokens=False)
        self.assertIn("\n\n", enc.tokens)
        self.assertEqual(tok.decode(enc.ids, skip_special_tokens=True), "hello\n\nworld")

    def test_another_architecture_is_refused_naming_it_and_what_is_converted(self):
        write_gguf(self.gguf, arch="qwen2")
        err = run_tool("convert", "--gguf", str(self.gguf), "--out", str(self.out), ok=False)
        self.assertIn(f"cannot convert {self.gguf}: its architecture is 'qwen2'", err)
        self.assertIn("'llama'", err)
        self.assertIn("'gemma3'", err)
        self.assertFalse(self.out.exists(), "nothing is written for a refused model")

    def test_a_tensor_the_graph_lacks_is_refused_naming_it(self):
        bias = ("blk.0.attn_q.bias", np.zeros(64, dtype=np.float32))
        write_gguf(self.gguf, extra=[bias])
        err = run_tool("convert", "--gguf", str(self.gguf), "--out", str(self.out), ok=False)
        self.assertIn("tensor blk.0.attn_q.bias is not part of the llama graph", err)

    def test_an_unknown_pre_tokenizer_is_refused_naming_it(self):
        write_gguf(self.gguf, pre="qwen2")
        err = run_tool("convert", "--gguf", str(self.gguf), "--out", str(self.out), ok=False)
        self.assertIn("its pre-tokenizer is 'qwen2'", err)

    def test_a_file_that_is_not_a_gguf_is_refused_naming_it(self):
        self.gguf.write_bytes(b"not a gguf at all")
        err = run_tool("convert", "--gguf", str(self.gguf), "--out", str(self.out), ok=False)
        self.assertIn(f"cannot convert {self.gguf}: not a readable GGUF file", err)


if __name__ == "__main__":
    unittest.main()
