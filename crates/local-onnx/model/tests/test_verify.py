"""The verifier's tests, on a copy of the tiny model: it passes a good model and names what is wrong
with a bad one. Also the small subcommands the setup runs (`extract`, `sha256`, `version`)."""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import unittest
import zipfile
from pathlib import Path

from support import CACHE, TINY_DIR, run_tool

TINY = CACHE / "models" / TINY_DIR


@unittest.skipUnless((TINY / "model.onnx").is_file(), f"{TINY} is missing: run `cargo xtask setup-model`")
class Verify(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="ripcord-verify-")
        self.dir = Path(self.tmp.name)
        for f in TINY.iterdir():
            shutil.copy(f, self.dir / f.name)

    def tearDown(self):
        self.tmp.cleanup()

    def test_kv_cache_decoding_equals_a_full_prefill_in_every_variant(self):
        report = run_tool(
            "verify", "--dir", str(self.dir), "--models", "model.onnx", "model.q8.onnx", "model.q4.onnx", "--tokens", "6"
        )
        self.assertEqual(report["dir"], str(self.dir))
        self.assertGreater(report["prompt_tokens"], 10)
        for name in ["model.onnx", "model.q8.onnx", "model.q4.onnx"]:
            self.assertEqual(report[name]["tokens"], 6, name)
            self.assertTrue(report[name]["answer"], name)
        # The float model binds the check exactly (the quantized ones are judged by `agree`).
        self.assertLessEqual(report["model.onnx"]["cache_max_abs_diff"], 1e-3)

    def test_an_answer_without_the_expected_text_fails_naming_the_file(self):
        err = run_tool(
            "verify", "--dir", str(self.dir), "--tokens", "4", "--expect", "Paris", ok=False
        )
        self.assertIn("model.onnx", err)
        self.assertIn("does not contain 'Paris'", err)

    def test_a_truncated_model_file_fails(self):
        path = self.dir / "model.q8.onnx"
        path.write_bytes(path.read_bytes()[:4096])
        err = run_tool("verify", "--dir", str(self.dir), "--models", "model.q8.onnx", "--tokens", "2", ok=False)
        self.assertIn("model.q8.onnx", err)

    def test_a_tokenizer_that_does_not_round_trip_the_prompt_fails(self):
        # A tokenizer that drops unknown text: the chat prompt cannot survive encode/decode.
        (self.dir / "tokenizer.json").write_text(
            '{"version":"1.0","truncation":null,"padding":null,"added_tokens":[],"normalizer":null,'
            '"pre_tokenizer":{"type":"Whitespace"},"post_processor":null,"decoder":null,'
            '"model":{"type":"WordLevel","vocab":{"[UNK]":0,"user":1},"unk_token":"[UNK]"}}'
        )
        err = run_tool("verify", "--dir", str(self.dir), "--tokens", "2", ok=False)
        self.assertIn("tokenizer round trip failed", err)

    def test_agreement_of_a_model_with_itself_is_total(self):
        report = run_tool(
            "agree", "--dir", str(self.dir), "--models", "model.onnx", "--tokens", "4", "--min-identical", "20"
        )
        entry = report["variants"]["model.onnx"]
        self.assertEqual(report["prompts"], 20)
        self.assertEqual(entry["identical_prompts"], 20)
        self.assertEqual(entry["token_agreement"], 1.0)

    def test_agreement_below_the_minimum_fails_naming_the_variant(self):
        err = run_tool(
            "agree", "--dir", str(self.dir), "--models", "model.q4.onnx", "--tokens", "4", "--min-identical", "21", ok=False
        )
        self.assertIn("model.q4.onnx:", err)
        self.assertIn("below 21", err)


class SmallCommands(unittest.TestCase):
    def test_extract_copies_one_member_and_sha256_hashes_it(self):
        with tempfile.TemporaryDirectory() as t:
            t = Path(t)
            wheel = t / "pkg-1.0-py3-none-any.whl"
            payload = bytes(range(256)) * 100
            with zipfile.ZipFile(wheel, "w") as z:
                z.writestr("pkg/lib/libthing.so", payload)
                z.writestr("pkg/other.txt", "x")
            dest = t / "out" / "libthing.so"
            report = run_tool("extract", str(wheel), "pkg/lib/libthing.so", str(dest))
            self.assertEqual(report, {"extracted": str(dest), "size": len(payload)})
            self.assertEqual(dest.read_bytes(), payload)
            self.assertFalse(dest.with_name("libthing.so.part").exists())
            sums = run_tool("sha256", str(dest))
            self.assertEqual(
                sums["files"][str(dest)], {"sha256": hashlib.sha256(payload).hexdigest(), "size": len(payload)}
            )
            err = run_tool("extract", str(wheel), "pkg/missing.so", str(t / "m"), ok=False)
            self.assertIn("has no member pkg/missing.so", err)

    def test_version_is_a_number(self):
        self.assertIsInstance(run_tool("version")["converter_version"], int)


if __name__ == "__main__":
    unittest.main()
