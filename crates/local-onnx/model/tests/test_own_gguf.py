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

from modeltool.gguf_source import random_weights

TINY = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "max_position_embeddings": 512,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
}


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


def spm_tokenizer():
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + SPM_PIECES + SPM_MERGED
    types = [2, 3, 3] + [6] * 256 + [1] * (len(SPM_PIECES) + len(SPM_MERGED))
    scores = [0.0] * (3 + 256 + len(SPM_PIECES)) + [-1.0 - i for i in range(len(SPM_MERGED))]
    return tokens, types, scores


def write_gguf(path: Path, *, arch="llama", tokenizer="gpt2", pre="llama-bpe", extra=(), rope_freqs=None, eot=None):
    """A tiny GGUF: TINY's shapes with seeded weights, and the tokenizer kind asked for."""
    from gguf import GGUFWriter

    w = GGUFWriter(str(path), arch)
    w.add_block_count(TINY["num_hidden_layers"])
    w.add_context_length(TINY["max_position_embeddings"])
    w.add_embedding_length(TINY["hidden_size"])
    w.add_feed_forward_length(TINY["intermediate_size"])
    w.add_head_count(TINY["num_attention_heads"])
    w.add_head_count_kv(TINY["num_key_value_heads"])
    w.add_layer_norm_rms_eps(TINY["rms_norm_eps"])
    w.add_rope_freq_base(TINY["rope_theta"])
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
    cfg = dict(TINY, vocab_size=len(tokens))
    weights = random_weights(cfg, 7)
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

    def test_another_architecture_is_refused_naming_it_and_what_is_converted(self):
        write_gguf(self.gguf, arch="gemma3")
        err = run_tool("convert", "--gguf", str(self.gguf), "--out", str(self.out), ok=False)
        self.assertIn(f"cannot convert {self.gguf}: its architecture is 'gemma3'", err)
        self.assertIn("'llama'", err)
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
