"""The converter's tests: its pieces on small arrays, and `tiny` end to end on the real GGUF.

Run by `cargo xtask test` (through `crates/local-onnx/tests/model_tool.rs`) with the venv `setup-model`
makes; alone: `.cache/venv/bin/python -m unittest discover -s crates/local-onnx/model/tests -v`.
"""

from __future__ import annotations

import json
import tempfile
import unittest
from pathlib import Path

import numpy as np
import onnx

from support import CACHE, GGUF, TINY_DIR, run_tool

from modeltool.gguf_source import Blocks, blocks_of, random_weights, unpermute_rope_rows
from modeltool.convert import TINY_CONFIG
from modeltool.graph import ACCURACY, ROLES, GraphBuilder, accuracy_levels, build_fused_model, exact_matmul, parse_accuracy, quant_blocks


def llama_cpp_permute(w, n_head: int):
    """llama.cpp's `permute` (convert_hf_to_gguf.py), which the converter must undo."""
    rows = w.shape[0]
    return w.reshape(n_head, 2, rows // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


class FakeTensor:
    """What blocks_of reads of a GGUF tensor: its raw rows and its type."""

    def __init__(self, data, tensor_type):
        self.data, self.tensor_type = data, tensor_type


#: Where each super-block type keeps its fp16 scales (the gguf library quantizes none of them).
K_SCALE_FIELDS = {"Q4_K": (0, 2), "Q6_K": (208,)}


def gguf_blocks(w, kind):
    """w quantized by the gguf library into `kind` blocks, and those blocks read back. Q4_K
    and Q6_K, which the library only decodes, get random blocks of w's shape instead, their
    fp16 scales set to small normal numbers (random bytes may be NaN)."""
    from gguf.constants import GGML_QUANT_SIZES
    from gguf.quants import quantize

    if kind.name in K_SCALE_FIELDS:
        rng = np.random.default_rng(11)
        block, size = GGML_QUANT_SIZES[kind]
        n, k = w.shape
        raw = rng.integers(0, 256, size=(n, k // block, size), dtype=np.uint8)
        for at in K_SCALE_FIELDS[kind.name]:
            raw[..., at : at + 2] = rng.uniform(0.001, 0.02, size=(n, k // block, 1)).astype(np.float16).view(np.uint8)
        raw = raw.reshape(n, -1)
    else:
        raw = quantize(w, kind)
    return raw, blocks_of(FakeTensor(raw, kind))


class ExactBlocks(unittest.TestCase):
    """The GGUF's own blocks, taken into the fused graph without re-quantizing."""

    KINDS = ("Q4_0", "Q4_1", "Q8_0", "Q5_0", "Q4_K", "Q6_K")
    #: 8-bit levels (a 4-bit MatMulNBits cannot hold them), and blocks with a minimum.
    EIGHT_BIT = ("Q8_0", "Q5_0", "Q6_K")
    MINIMUM = ("Q4_1", "Q4_K")

    def test_blocks_decode_to_the_gguf_library_s_values(self):
        from gguf import GGMLQuantizationType as T
        from gguf.quants import dequantize

        rng = np.random.default_rng(3)
        w = rng.standard_normal((6, 512)).astype(np.float32)
        for name in self.KINDS:
            kind = T[name]
            raw, blk = gguf_blocks(w, kind)
            self.assertEqual(blk.shape, (6, 512), name)
            np.testing.assert_array_equal(blk.dequantize(), dequantize(raw, kind), err_msg=name)
            self.assertEqual(blk.levels, 256 if name in self.EIGHT_BIT else 16)
            self.assertEqual(blk.minimum is not None, name in self.MINIMUM)
            self.assertEqual(blk.BLOCK, 16 if name == "Q6_K" else 32)
        self.assertIsNone(blocks_of(FakeTensor(w, T.F32)), "F32 has no blocks to keep")
        raw = np.zeros((6, 512 // 256 * 176), dtype=np.uint8)
        self.assertIsNone(blocks_of(FakeTensor(raw, T.Q5_K)), "Q5_K has no exact form")

    def test_rows_rearranged_and_concatenated_keep_the_weights(self):
        from gguf import GGMLQuantizationType as T

        rng = np.random.default_rng(4)
        a, b = (rng.standard_normal((8, 64)).astype(np.float32) for _ in range(2))
        _, qa = gguf_blocks(a, T.Q4_1)
        _, qb = gguf_blocks(b, T.Q4_0)
        both = Blocks.concat([qa, qb])
        np.testing.assert_array_equal(both.dequantize(), np.concatenate([qa.dequantize(), qb.dequantize()]))
        flipped = qa.map_rows(lambda x: x[::-1])
        np.testing.assert_array_equal(flipped.dequantize(), qa.dequantize()[::-1])
        _, q8 = gguf_blocks(a, T.Q8_0)
        self.assertIsNone(Blocks.concat([qa, q8]), "4- and 8-bit levels do not share one weight")
        # Q5_0 and Q8_0 (Gemma's Q/K and V) share 8-bit levels, each block its zero point.
        c, d_ = (rng.standard_normal((8, 256)).astype(np.float32) for _ in range(2))
        _, q5 = gguf_blocks(c, T.Q5_0)
        _, q8 = gguf_blocks(d_, T.Q8_0)
        np.testing.assert_array_equal(Blocks.concat([q5, q8]).dequantize(), np.concatenate([q5.dequantize(), q8.dequantize()]))
        _, q6 = gguf_blocks(d_, T.Q6_K)
        self.assertIsNone(Blocks.concat([q5, q6]), "blocks of 32 and 16 do not share one weight")

    def test_matmulnbits_computes_with_exactly_the_blocks(self):
        """x @ w.T through MatMulNBits (fp32 activations) equals numpy's with the GGUF's own
        weights, for every type, 4 and 8 bits, blocks of 32 and split in 16."""
        import onnxruntime as ort
        from gguf import GGMLQuantizationType as T
        from gguf.quants import dequantize
        from onnx import TensorProto, helper

        rng = np.random.default_rng(5)
        k, n = 256, 10
        w = rng.standard_normal((n, k)).astype(np.float32)
        x = rng.standard_normal((1, 3, k)).astype(np.float32)
        for name in self.KINDS:
            raw, blk = gguf_blocks(w, T[name])
            want = x @ dequantize(raw, T[name]).T
            for bits in ((8,) if blk.levels == 256 else (4, 8)):
                for block in (32, 16) if blk.BLOCK == 32 else (16,):
                    g = GraphBuilder("fp32")
                    y = exact_matmul(g, "x", "w", blk, bits, block, 1, {})
                    graph = helper.make_graph(
                        g.nodes,
                        "t",
                        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, k])],
                        [helper.make_tensor_value_info(y, TensorProto.FLOAT, None)],
                        g.inits,
                    )
                    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
                    model.ir_version = 8
                    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
                    got = sess.run(None, {"x": x})[0]
                    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4, err_msg=f"{name}, {bits} bits, blocks of {block}")


class Pieces(unittest.TestCase):
    def test_unpermute_undoes_llama_cpp_permutation(self):
        rng = np.random.default_rng(1)
        for heads, head_dim, cols in [(4, 16, 8), (9, 64, 3), (3, 2, 5)]:
            w = rng.standard_normal((heads * head_dim, cols)).astype(np.float32)
            permuted = llama_cpp_permute(w, heads)
            self.assertFalse(np.array_equal(permuted, w) and head_dim > 2)
            np.testing.assert_array_equal(unpermute_rope_rows(permuted, heads), w)

    def test_random_weights_are_seeded(self):
        cfg = {
            "hidden_size": 8,
            "intermediate_size": 16,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "head_dim": 4,
            "vocab_size": 32,
        }
        a, b, c = random_weights(cfg, 7), random_weights(cfg, 7), random_weights(cfg, 8)
        np.testing.assert_array_equal(a["embed"], b["embed"])
        np.testing.assert_array_equal(a["layers"][1]["wq"], b["layers"][1]["wq"])
        self.assertFalse(np.array_equal(a["embed"], c["embed"]))
        self.assertEqual(a["layers"][0]["wq"].shape, (8, 8))
        self.assertEqual(a["layers"][0]["wk"].shape, (4, 8))

    def test_8_bit_blocks_round_trip_within_half_a_step(self):
        rng = np.random.default_rng(2)
        w = rng.standard_normal((6, 64)).astype(np.float32)
        blob, scales, zp = quant_blocks(w, 8, 16)
        self.assertIsNone(zp)
        self.assertEqual(blob.shape, (6, 4, 16))
        back = (blob.astype(np.float64) - 128) * scales[..., None]
        err = np.abs(back.reshape(6, 64) - w)
        step = np.repeat(scales, 16, axis=1)
        self.assertTrue((err <= step / 2 + 1e-6).all(), f"max error {err.max()}")

    def test_4_bit_blocks_pack_two_per_byte_and_keep_zero_exact(self):
        rng = np.random.default_rng(3)
        w = rng.standard_normal((2, 96)).astype(np.float32)
        w[0, 5] = 0.0
        blob, scales, zp = quant_blocks(w, 4, 32)
        self.assertEqual(blob.shape, (2, 3, 16))
        # Three blocks: the zero points are padded to an even count, then packed.
        self.assertEqual(zp.shape, (2, 2))
        q = np.stack([blob & 0x0F, blob >> 4], axis=-1).reshape(2, 3, 32).astype(np.float64)
        zpi = np.stack([zp & 0x0F, zp >> 4], axis=-1).reshape(2, 4)[:, :3].astype(np.float64)
        back = ((q - zpi[..., None]) * scales[..., None]).reshape(2, 96)
        self.assertEqual(back[0, 5], 0.0)
        step = np.repeat(scales, 32, axis=1)
        self.assertTrue((np.abs(back - w) <= step / 2 + 1e-6).all())

    def test_other_bit_widths_are_refused_by_name(self):
        with self.assertRaises(SystemExit) as e:
            quant_blocks(np.zeros((1, 16), dtype=np.float32), 3, 16)
        self.assertIn("unsupported bit width 3", str(e.exception))

    def test_accuracy_words_set_every_role_or_one_role_in_order(self):
        self.assertIsNone(parse_accuracy(None))
        self.assertEqual(accuracy_levels(None), {r: ACCURACY for r in ROLES})
        self.assertEqual(accuracy_levels(1), {r: 1 for r in ROLES})
        levels = parse_accuracy(["1", "lm_head=4"])
        self.assertEqual(levels, {"qkv_proj": 1, "o_proj": 1, "gate_up_proj": 1, "down_proj": 1, "lm_head": 4})
        self.assertEqual(accuracy_levels({"down_proj": 1}), dict({r: ACCURACY for r in ROLES}, down_proj=1))
        for bad in ("k_proj=1", "fast", "lm_head="):
            with self.assertRaises(SystemExit) as e:
                parse_accuracy([bad])
            self.assertIn(repr(bad), str(e.exception))
        with self.assertRaises(SystemExit) as e:
            accuracy_levels({"k_proj": 1})
        self.assertIn("k_proj", str(e.exception))

    def test_each_role_gets_its_accuracy_level_in_the_fused_graph(self):
        cfg = dict(TINY_CONFIG, vocab_size=256)
        w = random_weights(cfg, 9)
        m = build_fused_model(cfg, w, 4, accuracy=parse_accuracy(["1", "lm_head=4", "o_proj=0"]))
        want = {"qkv_proj": 1, "o_proj": 0, "gate_up_proj": 1, "down_proj": 1, "logits": 4}
        seen = set()
        for n in m.graph.node:
            if n.op_type == "MatMulNBits":
                kind = n.output[0].rstrip("0123456789").rstrip("_")
                level = next(a.i for a in n.attribute if a.name == "accuracy_level")
                self.assertEqual(level, want[kind], n.output[0])
                seen.add(kind)
        self.assertEqual(seen, set(want))

    def test_a_block_size_that_does_not_divide_the_row_is_refused(self):
        with self.assertRaises(SystemExit) as e:
            quant_blocks(np.zeros((1, 20), dtype=np.float32), 8, 16)
        self.assertIn("not a multiple of the block size 16", str(e.exception))


@unittest.skipUnless(GGUF.is_file(), f"{GGUF} is missing: run `cargo xtask setup-model`")
class Tiny(unittest.TestCase):
    """`tiny` on the real GGUF's tokenizer: the test model every Rust test of the local tier uses."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="ripcord-tiny-")
        cls.dir = Path(cls.tmp.name)
        cls.report = run_tool("tiny", "--gguf", str(GGUF), "--out", str(cls.dir), "--blocks", "8", "4")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_reports_where_and_with_which_seed(self):
        self.assertEqual(self.report, {"converted": str(self.dir), "seed": 20240229})

    def test_writes_every_variant_and_side_file(self):
        for name in [
            "model.onnx",
            "model.q8.onnx",
            "model.q4.onnx",
            "tokenizer.json",
            "config.json",
            "tokenizer_config.json",
            "generation_config.json",
        ]:
            self.assertTrue((self.dir / name).is_file(), name)
        config = json.loads((self.dir / "config.json").read_text())
        self.assertEqual(config["hidden_size"], 64)
        self.assertEqual(config["num_hidden_layers"], 2)
        self.assertEqual(config["vocab_size"], 49152)

    def test_the_plain_graph_has_optimum_names(self):
        m = onnx.load(str(self.dir / "model.onnx"))
        inputs = {i.name for i in m.graph.input}
        outputs = {o.name for o in m.graph.output}
        self.assertTrue({"input_ids", "attention_mask", "position_ids"} <= inputs, inputs)
        for layer in range(2):
            for kind in ("key", "value"):
                self.assertIn(f"past_key_values.{layer}.{kind}", inputs)
                self.assertIn(f"present.{layer}.{kind}", outputs)
        self.assertIn("logits", outputs)
        onnx.checker.check_model(m)

    def test_the_fused_graphs_say_so_and_use_block_kernels_of_their_width(self):
        for bits in (8, 4):
            m = onnx.load(str(self.dir / f"model.q{bits}.onnx"))
            meta = {p.key: p.value for p in m.metadata_props}
            self.assertEqual(meta.get("ripcord.kv_cache"), "shared", meta)
            nbits = [n for n in m.graph.node if n.op_type == "MatMulNBits"]
            self.assertTrue(nbits, f"q{bits}: no MatMulNBits node")
            widths = {a.i for n in nbits for a in n.attribute if a.name == "bits"}
            # Every projection at the variant's width; the tied LM head is 8-bit in both.
            self.assertEqual(widths, {bits, 8} if bits == 4 else {8}, f"q{bits}")
            self.assertTrue(any(n.op_type == "GroupQueryAttention" for n in m.graph.node))

    def test_is_deterministic_and_matches_the_cached_test_model(self):
        cached = CACHE / "models" / TINY_DIR
        if not cached.is_dir():
            self.skipTest(f"{cached} is missing: run `cargo xtask setup-model`")
        for name in ["model.onnx", "model.q8.onnx", "model.q4.onnx", "tokenizer.json", "config.json"]:
            self.assertEqual(
                (self.dir / name).read_bytes(),
                (cached / name).read_bytes(),
                f"{name} differs from the one setup-model made with the same seed",
            )


if __name__ == "__main__":
    unittest.main()
