"""The verifier: `verify`, `agree` and `bench`, with ONNX Runtime's own Python API."""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

from .common import out


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
    """A decoder for the model file; a file ONNX or ONNX Runtime cannot load ends the run naming it."""
    try:
        return FusedDecoder(path, config, threads, capacity) if is_fused(path) else OrtDecoder(path, config, threads)
    except Exception as e:  # protobuf's DecodeError, onnxruntime's Fail/InvalidGraph, OSError
        sys.exit(f"{path}: cannot load the model: {type(e).__name__}: {e}")


def chat_prompt(text: str) -> str:
    # The SmolLM2 template for one user message (the Rust side renders the real Jinja template).
    return (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"
    )


def wants_bos(d: Path) -> bool:
    """The model folder's tokenizer_config.json asks for BOS in front of a prompt."""
    tcfg_path = d / "tokenizer_config.json"
    return tcfg_path.is_file() and bool(json.loads(tcfg_path.read_text()).get("add_bos_token"))


def cmd_verify(args) -> None:
    import numpy as np
    from tokenizers import Tokenizer

    d = Path(args.dir)
    config = json.loads((d / "config.json").read_text())
    tok = Tokenizer.from_file(str(d / "tokenizer.json"))
    # --plain: the prompt as it is (a model of the user's own, whose chat template the Rust side
    # renders), after BOS when the model wants one; else SmolLM2's chat prompt.
    prompt = args.prompt if args.plain else chat_prompt(args.prompt)
    ids = tok.encode(prompt, add_special_tokens=False).ids
    roundtrip = tok.decode(ids, skip_special_tokens=False)
    if roundtrip != prompt:
        sys.exit(f"tokenizer round trip failed: {roundtrip!r} != {prompt!r}")
    if args.plain and wants_bos(d):
        ids = [int(config["bos_token_id"])] + ids
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
# The prompts live in one file beside the tool's entry point (in the source tree and wherever
# `ripcord setup-model` writes the tool out), read by this script and compiled into
# `ripcord_local_onnx::agreement`.
AGREEMENT_PROMPTS = [
    line
    for line in (Path(__file__).resolve().parents[1] / "agreement_prompts.txt")
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
    # --plain: each prompt as it is, after BOS when the model wants one (a model of one's own);
    # else in SmolLM2's chat format.
    bos = [int(config["bos_token_id"])] if args.plain and wants_bos(d) else []
    prompts = [bos + tok.encode(p if args.plain else chat_prompt(p), add_special_tokens=False).ids for p in AGREEMENT_PROMPTS]

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
