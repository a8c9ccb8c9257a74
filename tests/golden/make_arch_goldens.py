#!/usr/bin/env python3
"""Tiny random models of each architecture issue 16 adds, and their reference outputs from
Hugging Face transformers: writes tests/golden/arch/<case>/.

Regenerate (from the repository root; the venv lives outside the repository and is never a
test-time dependency; the run is offline and takes about a minute):

    python3 -m venv /work/venv
    /work/venv/bin/pip install torch transformers accelerate safetensors tokenizers gguf numpy \
        sentencepiece protobuf
    /work/venv/bin/python tests/golden/make_arch_goldens.py [--only CASE ...]

Last run (every case, 2026-12-07, then `--published`, then make_phi3_gguf.py) with: Python
3.11.7, torch 2.15.0 (CPU), transformers 5.25.0, tokenizers 0.23.3, sentencepiece 0.2.3,
protobuf 7.36.2, gguf 0.19.0, safetensors 0.8.0, numpy 2.4.6.

Every case directory holds an HF-layout model (config.json, model.safetensors in f32,
tokenizer.json, tokenizer_config.json with a chat template) and golden.json: the prompts, their
token ids (from tokenizer.json), the logits at every position (full vocabulary, 6 significant
digits) and 16 greedy tokens. Some cases also hold model.gguf (f32, written with gguf-py's
GGUFWriter following llama.cpp's convert_hf_to_gguf.py) and model-q8_0.gguf with
golden-q8_0.json. The conventions are in tests/golden/arch/README.md.

How the reference is computed: the model is built from its config, its weights overwritten
with the seeded values of fixture_weights.py (norm weights and biases too, so a missing bias or
a `w` vs `1 + w` norm changes the logits clearly), saved, then LOADED BACK from the
written files with `from_pretrained` (eager attention, f32) and the goldens are computed from
the loaded model. The loaded model must reproduce the in-memory one exactly, which proves
transformers reads the written config.json (in the transformers-4 or -5 style) as intended.
The f32 GGUF files are read back by transformers (`gguf_file=`) where it supports the
architecture and must give the same logits (within 1e-4); that checks the Q/K permutation,
the norm +1 and the tensor names against an implementation that undoes them.

The model files are not committed: each case's weights.json (fixture_weights.py) says how the
engine's tests write them again, with the sha256 of the files written here.
"""

import json
import math
import os
import shutil
import sys

import fixture_weights as fw
import gguf
import numpy as np
import sentencepiece as spm
import torch
from safetensors.torch import save_file
from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers,
                        pre_tokenizers, processors, trainers)
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast
from transformers.tokenization_utils_base import generate_merges

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEXT = os.path.join(ROOT, "tests", "data", "constitution.txt")
OUT = os.path.join(ROOT, "tests", "golden", "arch")
GREEDY = 16
VOCAB = 384

PROMPTS = [
    "In 1787, 7+5=12.",
    # Longer than every sliding window below (8 tokens).
    "The Senate shall be composed",
]

# Llama 3's pre-tokenizer regex (llama.cpp `llama-bpe`) and Qwen2's (llama.cpp `qwen2`): the
# same but Qwen2 splits numbers into single digits where Llama 3 takes up to three.
LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
             r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
            r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
BPE_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
          "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
# Gemma 3's template, reduced to user/model turns (no system folding).
GEMMA_CHAT = ("{{ bos_token }}{% for message in messages %}{% set role = 'model' if "
              "message['role'] == 'assistant' else message['role'] %}{{ '<start_of_turn>' + "
              "role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}"
              "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}")
SPM_SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]


def r6(x):
    return float(f"{x:.6g}")


# --------------------------------------------------------------------------------------------
# Tokenizers
# --------------------------------------------------------------------------------------------

def train_bpe(workdir):
    """Byte-level BPE (GPT-2 byte alphabet) with Llama 3's pre-tokenizer regex, trained on the
    evaluation text plus the years 1700-1799 (so that multi-digit tokens exist and Llama 3's
    up-to-three-digit grouping and Qwen2's single digits give different ids)."""
    years = os.path.join(workdir, "years.txt")
    with open(years, "w") as f:
        f.write(" ".join(str(y) for y in range(1700, 1800)) + "\n")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_RE), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB, special_tokens=BPE_SPECIALS, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train([TEXT, years], trainer)
    assert tok.get_vocab_size() == VOCAB, tok.get_vocab_size()
    return tok


def bpe_variant(tok, regex):
    """The same vocabulary and merges with another pre-tokenizer regex."""
    d = json.loads(tok.to_str())
    d["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {"Regex": regex}
    return Tokenizer.from_str(json.dumps(d))


def train_spm(workdir):
    """A SentencePiece BPE model with byte fallback, in Gemma's layout (pad 0, eos 1, bos 2,
    unk 3, no dummy prefix, digits split), and its tokenizer.json as transformers' Gemma
    converter makes it (what Gemma ships)."""
    prefix = os.path.join(workdir, "spm")
    spm.SentencePieceTrainer.train(
        input=TEXT, model_prefix=prefix, model_type="bpe", vocab_size=VOCAB,
        byte_fallback=True, character_coverage=1.0, add_dummy_prefix=False,
        normalization_rule_name="identity", remove_extra_whitespaces=False, split_digits=True,
        allow_whitespace_only_pieces=True, pad_id=0, eos_id=1, bos_id=2, unk_id=3,
        pad_piece="<pad>", eos_piece="<eos>", bos_piece="<bos>", unk_piece="<unk>",
        user_defined_symbols=["<start_of_turn>", "<end_of_turn>", "\t"], minloglevel=2,
        num_threads=1, seed_sentencepiece_size=1000000)
    model_file = prefix + ".model"
    sp = spm.SentencePieceProcessor(model_file=model_file)
    # What transformers' GemmaConverter builds (its SentencePiece extractor is broken in
    # transformers 5.24.0: `self.sp` is never set), written out with the same pieces:
    # BPE over the pieces with merges ordered by piece score, byte fallback, " " -> "▁".
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    vocab = {p: i for i, p in enumerate(pieces)}
    scores = {p: (0.0 if p in SPM_SPECIALS else sp.get_score(i)) for i, p in enumerate(pieces)}
    merges = generate_merges(vocab, scores)
    tok = Tokenizer(models.BPE(vocab, merges, unk_token="<unk>", fuse_unk=True,
                               byte_fallback=True))
    tok.normalizer = normalizers.Replace(" ", "\u2581")
    tok.pre_tokenizer = pre_tokenizers.Split(" ", "merged_with_previous")
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                     decoders.Fuse()])
    tok.add_tokens([AddedToken("\t", normalized=False, special=False)])
    tok.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in SPM_SPECIALS])
    tok.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A <bos> $B", special_tokens=[("<bos>", 2)])
    # The HF tokenizer and SentencePiece itself agree on the prompts and on the whole text.
    for text in PROMPTS + [open(TEXT, encoding="utf-8").read()[:4000]]:
        a, b = tok.encode(text, add_special_tokens=False).ids, sp.encode(text)
        assert a == b, (text[:40], a[:20], b[:20])
    return model_file, tok


def fast_tokenizer(tok, kind):
    if kind == "spm":
        return PreTrainedTokenizerFast(
            tokenizer_object=tok, bos_token="<bos>", eos_token="<eos>", unk_token="<unk>",
            pad_token="<pad>", additional_special_tokens=["<start_of_turn>", "<end_of_turn>"],
            add_bos_token=True, chat_template=GEMMA_CHAT)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"], chat_template=CHATML)


def save_tokenizer(d, tok, kind, spm_file=None):
    """The fixture's tokenizer files in `d`: tokenizer.json and tokenizer_config.json with the
    chat template inside it (as most model repositories ship it, not a separate
    chat_template.jinja), BOS added for SentencePiece; `spm_file` copied as tokenizer.model
    when given."""
    fast_tokenizer(tok, kind).save_pretrained(d)
    tc_path = os.path.join(d, "tokenizer_config.json")
    tc = json.load(open(tc_path))
    tc["chat_template"] = GEMMA_CHAT if kind == "spm" else CHATML
    tc["add_bos_token"] = kind == "spm"
    with open(tc_path, "w") as f:
        json.dump(tc, f, indent=2, sort_keys=True)
        f.write("\n")
    if spm_file is not None:
        shutil.copy(spm_file, os.path.join(d, "tokenizer.model"))
    for extra in ("special_tokens_map.json", "chat_template.jinja"):
        p = os.path.join(d, extra)
        if os.path.exists(p):
            os.remove(p)


def encode(tok, kind, text):
    ids = tok.encode(text, add_special_tokens=False).ids
    return ([2] + ids) if kind == "spm" else ids  # SPM cases add BOS (add_bos_token = true)


# --------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------

def all_logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0]


def greedy(model, ids, n=GREEDY):
    seq = list(ids)
    with torch.no_grad():
        for _ in range(n):
            seq.append(int(model(torch.tensor([seq])).logits[0, -1].argmax()))
    return seq[len(ids):]


def greedy_cached(model, ids, n=GREEDY):
    """Greedy tokens as transformers' `generate` makes them: the prompt in one pass, then one
    token a pass on the KV cache, except that Phi-3 drops the cache and runs the whole sequence
    again at the first pass reaching past `original_max_position_embeddings`
    (`Phi3ForCausalLM.prepare_inputs_for_generation`), so every key then has LongRoPE's long
    rotation. No stop token (16 tokens whatever they are)."""
    model.generation_config.eos_token_id = None
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), max_new_tokens=n, do_sample=False,
                             eos_token_id=None, pad_token_id=0)
    seq = out[0, len(ids):].tolist()
    assert len(seq) == n, seq
    return seq


def goldens(model, tok, kind, note, top_k=None, cached=False):
    cases = []
    for text in PROMPTS:
        ids = encode(tok, kind, text)
        lg = all_logits(model, ids)
        case = {"prompt": text, "tokens": ids}
        if top_k is None:
            case["logits"] = [[r6(v) for v in row.tolist()] for row in lg]
        else:
            case["top"] = [[[int(i), r6(v)] for v, i in zip(*row.topk(top_k))] for row in lg]
        case["greedy"] = greedy_cached(model, ids) if cached else greedy(model, ids)
        cases.append(case)
    out = {"note": note, "cases": cases}
    if cached:
        out["greedy_kind"] = ("transformers' generate: one pass for the prompt, then one token a "
                              "pass on the KV cache; Phi-3 runs the whole sequence again at the "
                              "first pass reaching past the original context")
    return out


def max_diff(a, b, tok, kind):
    d = 0.0
    for text in PROMPTS:
        ids = encode(tok, kind, text)
        d = max(d, float((all_logits(a, ids) - all_logits(b, ids)).abs().max()))
    return d


# --------------------------------------------------------------------------------------------
# config.json styles
# --------------------------------------------------------------------------------------------

def config_v4(d):
    """transformers-4 style: rope_theta / rope_scaling / rope_local_base_freq /
    partial_rotary_factor at the top level, no rope_parameters."""
    d = dict(d)
    rp = d.pop("rope_parameters")
    if "full_attention" in rp:  # Gemma: one set per layer type
        full, local = rp["full_attention"], rp["sliding_attention"]
        assert local.get("rope_type", "default") == "default"
        d["rope_theta"] = full["rope_theta"]
        d["rope_local_base_freq"] = local["rope_theta"]
        # transformers 4 Gemma 3: top-level rope_scaling is the full-attention layers' one.
        d["rope_scaling"] = (None if full.get("rope_type", "default") == "default" else
                             {k: v for k, v in full.items() if k != "rope_theta"})
    else:
        rp = dict(rp)
        d["rope_theta"] = rp.pop("rope_theta")
        if "partial_rotary_factor" in rp:
            d["partial_rotary_factor"] = rp.pop("partial_rotary_factor")
        d["rope_scaling"] = None if rp.get("rope_type", "default") == "default" else rp
    return d


def config_v5(d):
    """transformers-5 style: everything RoPE in rope_parameters (as save_pretrained writes)."""
    d = dict(d)
    for k in ("rope_theta", "rope_scaling", "rope_local_base_freq"):
        assert k not in d, k
    return d


# --------------------------------------------------------------------------------------------
# GGUF (llama.cpp conventions, see README.md)
# --------------------------------------------------------------------------------------------

def llama_permute(w, n_head):
    """convert_hf_to_gguf.py LlamaModel.permute: HF's rotate-half order -> GGML's interleaved
    pairs, rows of each head reordered (0, d/2, 1, d/2 + 1, ...)."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def llama3_rope_freqs(head_dim, rp, original_ctx):
    """convert_hf_to_gguf.py LlamaModel.generate_extra_tensors: one factor per frequency pair,
    GGML divides each rotation frequency by it."""
    base = rp["rope_theta"]
    freqs = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    factor, lo, hi = rp["factor"], rp["low_freq_factor"], rp["high_freq_factor"]
    lo_wl, hi_wl = original_ctx / lo, original_ctx / hi
    out = []
    for f in freqs.tolist():
        wl = 2 * math.pi / f
        if wl < hi_wl:
            out.append(1.0)
        elif wl > lo_wl:
            out.append(factor)
        else:
            s = (original_ctx / wl - lo) / (hi - lo)
            out.append(1 / ((1 - s) / factor + s))
    return np.array(out, dtype=np.float32)


def q8_0_roundtrip(w):
    q = gguf.quants.quantize(w, gguf.GGMLQuantizationType.Q8_0)
    return gguf.quants.dequantize(q, gguf.GGMLQuantizationType.Q8_0).reshape(w.shape)


def write_gguf(path, arch, cfg, state, tok_info, qtype):
    """Writes `state` (HF names, f32 numpy) as a llama.cpp GGUF of architecture `arch`."""
    c = cfg
    w = gguf.GGUFWriter(path, arch)
    w.add_name(os.path.basename(os.path.dirname(path)))
    w.add_context_length(c["max_position_embeddings"])
    w.add_embedding_length(c["hidden_size"])
    w.add_block_count(c["num_hidden_layers"])
    w.add_feed_forward_length(c["intermediate_size"])
    w.add_head_count(c["num_attention_heads"])
    w.add_head_count_kv(c["num_key_value_heads"])
    w.add_layer_norm_rms_eps(c["rms_norm_eps"])
    w.add_key_length(c["head_dim"])
    w.add_value_length(c["head_dim"])
    rp = c["rope_parameters"]
    if arch == "gemma2":
        # Gemma2Model.set_gguf_parameters: the window and both soft-caps (llama.cpp lays the
        # sliding layers out itself: the even ones).
        w.add_rope_freq_base(rp["rope_theta"])
        w.add_sliding_window(c["sliding_window"])
        w.add_attn_logit_softcapping(c["attn_logit_softcapping"])
        w.add_final_logit_softcapping(c["final_logit_softcapping"])
    elif arch == "gemma3":
        w.add_rope_freq_base(rp["full_attention"]["rope_theta"])
        w.add_sliding_window(c["sliding_window"])
        if rp["full_attention"].get("rope_type") == "linear":
            # Gemma3Model.set_gguf_parameters: linear scaling (llama.cpp applies it to the
            # global layers only: rope_freq_scale_train_swa = 1 for LLM_ARCH_GEMMA3).
            w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
            w.add_rope_scaling_factor(rp["full_attention"]["factor"])
        if c.get("final_logit_softcapping"):
            w.add_final_logit_softcapping(c["final_logit_softcapping"])
    else:
        w.add_rope_freq_base(rp["rope_theta"])
        if rp.get("rope_type") == "yarn":
            # Qwen2Model.set_gguf_parameters (convert_hf_to_gguf.py): type, factor, context.
            w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
            w.add_rope_scaling_factor(rp["factor"])
            w.add_rope_scaling_orig_ctx_len(rp["original_max_position_embeddings"])
    if arch == "llama":
        w.add_vocab_size(c["vocab_size"])
        w.add_rope_dimension_count(c["head_dim"])
    w.add_file_type(gguf.LlamaFileType.ALL_F32 if qtype is None else gguf.LlamaFileType.MOSTLY_Q8_0)

    # tokenizer
    if tok_info["kind"] == "spm":
        w.add_tokenizer_model("llama")
        w.add_tokenizer_pre("default")
        w.add_token_list(tok_info["tokens"])
        w.add_token_scores(tok_info["scores"])
        w.add_token_types(tok_info["types"])
        w.add_bos_token_id(2)
        w.add_eos_token_id(1)
        w.add_unk_token_id(3)
        w.add_pad_token_id(0)
        w.add_add_bos_token(True)
        w.add_add_eos_token(False)
        w.add_add_space_prefix(False)
        w.add_chat_template(GEMMA_CHAT)
    else:
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre(tok_info["pre"])
        w.add_token_list(tok_info["tokens"])
        w.add_token_types(tok_info["types"])
        w.add_token_merges(tok_info["merges"])
        w.add_eos_token_id(tok_info["eos"])
        w.add_pad_token_id(tok_info["pad"])
        w.add_add_bos_token(False)
        w.add_chat_template(CHATML)

    n_head, n_kv = c["num_attention_heads"], c["num_key_value_heads"]
    gemma = arch in ("gemma2", "gemma3")
    names = {
        "input_layernorm": "attn_norm",
        "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
        "self_attn.o_proj": "attn_output",
        "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
        "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
        # llama/qwen: the norm before the MLP; gemma3: the norm after attention
        "post_attention_layernorm": "post_attention_norm" if gemma else "ffn_norm",
        "pre_feedforward_layernorm": "ffn_norm",
        "post_feedforward_layernorm": "post_ffw_norm",
    }
    out, recipes = [], {}
    for hf, t in state.items():
        t = t.copy()
        recipe = {"from": hf}
        if hf == "model.embed_tokens.weight":
            name = "token_embd.weight"
        elif hf == "model.norm.weight":
            name = "output_norm.weight"
        elif hf == "lm_head.weight":
            name = "output.weight"
        else:
            parts = hf.split(".")
            assert parts[0] == "model" and parts[1] == "layers", hf
            bid, rest = parts[2], ".".join(parts[3:-1])
            name = f"blk.{bid}.{names[rest]}.{parts[-1]}"
        if arch == "llama" and ".attn_q." in name:
            t = llama_permute(t, n_head)
            recipe["permute"] = n_head
        if arch == "llama" and ".attn_k." in name:
            t = llama_permute(t, n_kv)
            recipe["permute"] = n_kv
        if gemma and name.endswith("norm.weight"):
            t = t + np.float32(1.0)  # llama.cpp stores Gemma's 1 + w
            recipe["add"] = 1.0
        out.append((name, t))
        recipes[name] = recipe
    if arch == "llama" and rp.get("rope_type") == "llama3":
        freqs = llama3_rope_freqs(c["head_dim"], rp, rp["original_max_position_embeddings"])
        out.append(("rope_freqs.weight", freqs))
        recipes["rope_freqs.weight"] = {"values": [float(v) for v in freqs]}
    for name, t in out:
        if qtype is not None and t.ndim == 2:
            w.add_tensor(name, gguf.quants.quantize(t, qtype), raw_dtype=qtype)
        else:
            w.add_tensor(name, t.astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return recipes


def check_gguf(path, arch, c, state, tok_info):
    """Reads the file back with gguf-py: metadata as written, every tensor present once."""
    r = gguf.GGUFReader(path)
    f = r.fields
    def val(k):
        return f[k].contents()
    assert val("general.architecture") == arch
    assert val(f"{arch}.block_count") == c["num_hidden_layers"]
    assert val(f"{arch}.attention.head_count") == c["num_attention_heads"]
    assert val(f"{arch}.attention.head_count_kv") == c["num_key_value_heads"]
    assert val(f"{arch}.attention.key_length") == c["head_dim"]
    assert len(val("tokenizer.ggml.tokens")) == c["vocab_size"]
    names = [t.name for t in r.tensors]
    assert len(names) == len(set(names))
    n_expected = len(state) + (1 if arch == "llama" and
                               c["rope_parameters"].get("rope_type") == "llama3" else 0)
    assert len(names) == n_expected, (len(names), n_expected)
    for t in r.tensors:
        if t.name == "token_embd.weight":
            assert list(t.shape) == [c["hidden_size"], c["vocab_size"]], t.shape


# --------------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------------

COMMON = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, intermediate_size=32,
              num_hidden_layers=2, max_position_embeddings=256, vocab_size=VOCAB,
              rms_norm_eps=1e-6, bos_token_id=None, eos_token_id=2, pad_token_id=0)
LLAMA3_ROPE = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 4.0,
               "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               # small, so the scaling changes rotations at the positions the prompts reach
               "original_max_position_embeddings": 32}
SPM_COMMON = dict(COMMON, bos_token_id=2, eos_token_id=1, pad_token_id=0)

CASES = [
    # name, model_type, config kwargs, tokenizer (kind, pre), config style, gguf arch, q8_0, seed
    ("llama", "llama", dict(COMMON, head_dim=8, tie_word_embeddings=True,
                            rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
     ("bpe", "llama-bpe"), "v4", None, False, 1),
    ("llama3", "llama", dict(COMMON, head_dim=8, tie_word_embeddings=True,
                             rope_parameters=LLAMA3_ROPE),
     ("bpe", "llama-bpe"), "v4", "llama", True, 2),
    # The same weights as llama3 (same seed), config in the transformers-5 form.
    ("llama3_rope_parameters", "llama", dict(COMMON, head_dim=8, tie_word_embeddings=True,
                                             rope_parameters=LLAMA3_ROPE),
     ("bpe", "llama-bpe"), "v5", None, False, 2),
    # Llama with biases everywhere transformers puts them: `attention_bias` on q, k, v and o,
    # `mlp_bias` on gate, up and down; untied output. GGUF: llama.cpp's `llama` graph reads
    # `attn_q.bias` ... `attn_output.bias`, `ffn_gate/up/down.bias` (q/k biases permuted as
    # their weights).
    ("llama_bias", "llama", dict(COMMON, head_dim=8, tie_word_embeddings=False,
                                 attention_bias=True, mlp_bias=True,
                                 rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
     ("bpe", "llama-bpe"), "v4", "llama", False, 12),
    ("qwen2", "qwen2", dict(COMMON, head_dim=8, tie_word_embeddings=True, use_sliding_window=False,
                            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
     ("bpe", "qwen2"), "v4", "qwen2", False, 3),
    ("qwen3", "qwen3", dict(COMMON, head_dim=16, tie_word_embeddings=True, attention_bias=False,
                            use_sliding_window=False,
                            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}),
     ("bpe", "qwen2"), "v5", "qwen3", True, 4),
    # Gemma 3 with what llama.cpp's GGUF cannot express: its own layer pattern, a local RoPE
    # base other than 10000, query_pre_attn_scalar != head_dim. HF layout only.
    ("gemma3", "gemma3_text", dict(
        SPM_COMMON, head_dim=16, num_hidden_layers=3, tie_word_embeddings=True,
        sliding_window=8, query_pre_attn_scalar=24,
        layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 20000.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 500.0}},
        final_logit_softcapping=None, attn_logit_softcapping=None),
     ("spm", None), "v5", None, False, 5),
    # Gemma 3 as llama.cpp's GGUF fixes it: every 6th layer full, local base 10000,
    # query_pre_attn_scalar = head_dim.
    ("gemma3_gguf", "gemma3_text", dict(
        SPM_COMMON, head_dim=16, num_hidden_layers=6, num_attention_heads=2,
        num_key_value_heads=1, tie_word_embeddings=True, sliding_window=8,
        query_pre_attn_scalar=16, layer_types=["sliding_attention"] * 5 + ["full_attention"],
        rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
        final_logit_softcapping=None, attn_logit_softcapping=None),
     ("spm", None), "v4", "gemma3", True, 6),
    # gemma3_gguf with Gemma 3 4B's linear RoPE scaling (factor 8) on the full layer: the
    # sliding layers keep the local base unscaled (transformers and llama.cpp alike).
    ("gemma3_linear_gguf", "gemma3_text", dict(
        SPM_COMMON, head_dim=16, num_hidden_layers=6, num_attention_heads=2,
        num_key_value_heads=1, tie_word_embeddings=True, sliding_window=8,
        query_pre_attn_scalar=16, layer_types=["sliding_attention"] * 5 + ["full_attention"],
        rope_parameters={"full_attention": {"rope_type": "linear", "factor": 8.0,
                                            "rope_theta": 1000000.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
        final_logit_softcapping=None, attn_logit_softcapping=None),
     ("spm", None), "v4", "gemma3", False, 10),
    # Mistral with a window narrower than the prompts and the greedy continuation:
    # transformers masks every layer with it (create_sliding_window_causal_mask).
    ("mistral_swa", "mistral", dict(COMMON, head_dim=8, tie_word_embeddings=False,
                                    sliding_window=4,
                                    rope_parameters={"rope_type": "default",
                                                     "rope_theta": 10000.0}),
     ("bpe", "llama-bpe"), "v4", None, False, 9),
    ("phi3", "phi3", dict(COMMON, tie_word_embeddings=False,
                          rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                           "partial_rotary_factor": 0.5},
                          original_max_position_embeddings=256, resid_pdrop=0.0,
                          embd_pdrop=0.0, attention_dropout=0.0),
     ("bpe", "llama-bpe"), "v4", None, False, 8),
    # Gemma 2: Gemma's block without QK-norm; the even layers slide with the global RoPE
    # (transformers' default layer_types, left out of config.json); attention scores and
    # logits soft-capped, with caps small enough to bend this random model's values;
    # query_pre_attn_scalar = head_dim, as llama.cpp scales a GGUF that is not the 27B.
    ("gemma2", "gemma2", dict(
        SPM_COMMON, head_dim=16, num_hidden_layers=3, num_attention_heads=2,
        num_key_value_heads=1, tie_word_embeddings=True, sliding_window=8,
        query_pre_attn_scalar=16, attn_logit_softcapping=2.0, final_logit_softcapping=3.0,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
     ("spm", None), "v4", "gemma2", False, 13),
    # Phi-3 with LongRoPE: 2 short and 2 long factors for its 4 rotated dims, an original
    # context of 14 tokens (the first prompt, 15 tokens, is longer: its one pass uses the long
    # factors; the second, 14 tokens, is not: its pass uses the short ones and its greedy
    # continuation the long ones, one cached pass at a time), attention factor
    # sqrt(1 + ln(256 / 14) / ln 14) from the contexts.
    ("phi3_longrope", "phi3", dict(COMMON, tie_word_embeddings=False,
                                   rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0,
                                                    "partial_rotary_factor": 0.5,
                                                    "short_factor": [1.0, 1.7],
                                                    "long_factor": [2.5, 9.0]},
                                   original_max_position_embeddings=14, resid_pdrop=0.0,
                                   embd_pdrop=0.0, attention_dropout=0.0),
     ("bpe", "llama-bpe"), "v4", None, False, 14),
    # Qwen3 with YaRN as Qwen's model cards enable it (`rope_scaling` with `rope_type` yarn,
    # `factor`, `original_max_position_embeddings`), the original context small enough that
    # the ramp spans pairs 0-3 of 8; the attention factor 0.1 ln 4 + 1. GGUF as llama.cpp's
    # converter writes YaRN.
    ("qwen3_yarn", "qwen3", dict(COMMON, head_dim=16, tie_word_embeddings=True,
                                 attention_bias=False, use_sliding_window=False,
                                 rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0,
                                                  "factor": 4.0,
                                                  "original_max_position_embeddings": 64}),
     ("bpe", "qwen2"), "v4", "qwen3", False, 15),
]

# Cases whose greedy goldens come from transformers' cached generation (LongRoPE's factors
# depend on the pass, see `greedy_cached`).
CACHED_GREEDY = {"phi3_longrope", "phi35_longrope"}


# --------------------------------------------------------------------------------------------
# Published configs (`--published`): every field of the model's own config.json kept as it is
# published, only the sizes shrunk (and token ids mapped into the 384-token vocabularies).
# Sources are recorded in tests/golden/arch/README.md ("Published configs").
# --------------------------------------------------------------------------------------------

# The published dicts (LLAMA32_1B, SMOLLM2_135M, QWEN25_05B, QWEN3_06B, GEMMA3_1B, GEMMA3_270M,
# GEMMA3_4B_TEXT, PHI35_MINI and its longrope factors, GEMMA2_9B) live in published_configs.py.
from published_configs import *  # noqa: E402,F401,F403

# Shrunk sizes (every other key stays as published). BPE ids: <|endoftext|> 0, <|im_start|> 1,
# <|im_end|> 2; SentencePiece ids: <pad> 0, <eos> 1, <bos> 2, <end_of_turn> 5 (Gemma's 106).
SMALL = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, intermediate_size=32,
             num_hidden_layers=2, vocab_size=VOCAB)
PUBLISHED = [
    # name, published dict, overrides, tokenizer (kind, pre), seed
    ("llama32_1b", LLAMA32_1B, dict(SMALL, head_dim=8, bos_token_id=1, eos_token_id=[0, 1, 2]),
     ("bpe", "llama-bpe"), 21),
    ("smollm2_135m", SMOLLM2_135M, dict(SMALL, hidden_size=48, num_attention_heads=3,
                                        num_key_value_heads=1),
     ("bpe", "llama-bpe"), 22),
    ("qwen25_05b", QWEN25_05B, dict(SMALL, bos_token_id=0, eos_token_id=2,
                                    max_window_layers=1), ("bpe", "qwen2"), 23),
    # Qwen2.5's published config with its sliding window switched on (narrowed to 4 tokens):
    # transformers slides the layers from max_window_layers (1) on, here layer 1 of 2.
    ("qwen25_swa", QWEN25_05B, dict(SMALL, bos_token_id=0, eos_token_id=2, max_window_layers=1,
                                    use_sliding_window=True, sliding_window=4),
     ("bpe", "qwen2"), 29),
    ("qwen3_06b", QWEN3_06B, dict(SMALL, head_dim=16, bos_token_id=0, eos_token_id=2,
                                  max_window_layers=2), ("bpe", "qwen2"), 24),
    ("gemma3_1b", GEMMA3_1B, dict(SMALL, num_attention_heads=2, num_key_value_heads=1,
                                  head_dim=16, num_hidden_layers=6, sliding_window=8,
                                  eos_token_id=[1, 5]), ("spm", None), 25),
    ("gemma3_270m", GEMMA3_270M, dict(SMALL, num_attention_heads=2, num_key_value_heads=1,
                                      head_dim=16, num_hidden_layers=6, sliding_window=8,
                                      layer_types=["sliding_attention"] * 5 + ["full_attention"]),
     ("spm", None), 26),
    ("gemma3_4b_text", GEMMA3_4B_TEXT, dict(SMALL, num_attention_heads=2, num_key_value_heads=1,
                                            head_dim=16, num_hidden_layers=6, sliding_window=8),
     ("spm", None), 27),
    ("phi35_mini", PHI35_MINI, dict(SMALL, num_key_value_heads=4, bos_token_id=1,
                                    eos_token_id=2, pad_token_id=2), ("bpe", "llama-bpe"), 28),
    # Phi-3.5-mini with its published longrope scaling (48 long and 48 short factors, so
    # head_dim 96 as published: hidden 96, one head, one layer). The prompts stay within the original
    # 4096 tokens: the short factors and the attention factor sqrt(1 + ln 32 / ln 4096).
    ("phi35_longrope", PHI35_MINI, dict(
        hidden_size=96, num_attention_heads=1, num_key_value_heads=1, intermediate_size=32,
        num_hidden_layers=1, vocab_size=VOCAB, bos_token_id=1, eos_token_id=2, pad_token_id=2,
        rope_scaling={"long_factor": PHI35_LONG_FACTOR, "short_factor": PHI35_SHORT_FACTOR,
                      "type": "longrope"}), ("bpe", "llama-bpe"), 30),
    # Gemma 2 9B's config.json (soft-caps 50 and 30, window 4096 narrowed to 8, no layer_types:
    # transformers' default, the even layers slide).
    ("gemma2_9b", GEMMA2_9B, dict(SMALL, num_attention_heads=2, num_key_value_heads=1,
                                  head_dim=16, num_hidden_layers=3, sliding_window=8),
     ("spm", None), 31),
]


def make_published(toks, spm_tok, spm_file, only):
    from transformers import AutoConfig, AutoTokenizer
    for name, published, over, (kind, pre), seed in PUBLISHED:
        if only is not None and name not in only:
            continue
        d = os.path.join(OUT, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        cdict = dict(published)
        cdict.update(over)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cdict, f, indent=2)
            f.write("\n")
        tok = toks[pre] if kind == "bpe" else spm_tok
        save_tokenizer(d, tok, kind)
        # transformers reads the published file as it is; the model is built from what it read.
        cfg = AutoConfig.from_pretrained(d)
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager",
                                                 dtype=torch.float32).eval()
        specs = fw.fill(model, seed, gemma_norms=cdict["model_type"].startswith("gemma"))
        state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
        if cfg.tie_word_embeddings:
            state.pop("lm_head.weight", None)
        assert set(state) <= set(specs), sorted(set(state) - set(specs))
        save_file(state, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        files = [fw.safetensors_entry(os.path.join(d, "model.safetensors"), state,
                                      {"format": "pt"})]
        loaded = AutoModelForCausalLM.from_pretrained(d, attn_implementation="eager",
                                                      dtype=torch.float32).eval()
        diff = max_diff(model, loaded, tok, kind)
        if diff != 0.0:
            sys.exit(f"{name}: reloaded model differs by {diff}")
        at = AutoTokenizer.from_pretrained(d)
        for text in PROMPTS:
            if at(text).input_ids != encode(tok, kind, text):
                sys.exit(f"{name}: AutoTokenizer ids differ")
        note = "logits of transformers %s at every position, full vocabulary, 6 significant " \
               "digits; greedy = %d argmax tokens, no stop" % (
                   __import__("transformers").__version__, GREEDY)
        g = goldens(loaded, tok, kind, note, cached=name in CACHED_GREEDY)
        # What transformers made of the file (its own reading, for the README and the tests).
        read_as = {k: getattr(loaded.config, k, None) for k in (
            "rope_parameters", "rope_scaling", "rope_theta", "rope_local_base_freq",
            "layer_types", "sliding_window", "query_pre_attn_scalar", "rms_norm_eps",
            "tie_word_embeddings", "head_dim", "use_sliding_window", "max_window_layers",
            "max_position_embeddings", "final_logit_softcapping", "attn_logit_softcapping")
            if hasattr(loaded.config, k)}
        g.update({"case": name, "architecture": cfg.architectures[0]
                  if getattr(cfg, "architectures", None) else type(loaded).__name__,
                  "config_style": "published", "transformers_read": json.loads(
                      json.dumps(read_as, default=str)),
                  "tokenizer": "sentencepiece-bpe (byte fallback)" if kind == "spm"
                  else f"byte-level BPE, pre-tokenizer {pre}"})
        with open(os.path.join(d, "golden.json"), "w") as f:
            json.dump(g, f, separators=(",", ":"))
            f.write("\n")
        fw.write_manifest(d, specs, files, "tests/golden/make_arch_goldens.py --published")
        sizes = {fn: os.path.getsize(os.path.join(d, fn)) for fn in sorted(os.listdir(d))}
        print(name, sum(sizes.values()), json.dumps(read_as, default=str), flush=True)


def make_config(model_type, kw):
    from transformers import AutoConfig
    cfg = AutoConfig.for_model(model_type, **kw)
    cfg.architectures = [{
        "llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM",
        "gemma3_text": "Gemma3ForCausalLM", "gemma2": "Gemma2ForCausalLM", "phi3": "Phi3ForCausalLM",
        "mistral": "MistralForCausalLM",
    }[model_type]]
    cfg.dtype = "float32"
    return cfg


def main():
    torch.manual_seed(0)
    torch.set_num_threads(2)
    work = os.path.join(OUT, ".work")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    bpe = train_bpe(work)
    bpe_q = bpe_variant(bpe, QWEN2_RE)
    spm_file, spm_tok = train_spm(work)
    toks = {"llama-bpe": bpe, "qwen2": bpe_q, None: spm_tok}
    a, b = bpe.encode(PROMPTS[0]).ids, bpe_q.encode(PROMPTS[0]).ids
    assert a != b, "the llama-bpe and qwen2 pre-tokenizers should give different ids"
    print("llama-bpe", a, "qwen2", b)
    sp = spm.SentencePieceProcessor(model_file=spm_file)
    assert sp.get_piece_size() == VOCAB
    assert bpe.token_to_id("<|im_end|>") == 2 and bpe.token_to_id("<|endoftext|>") == 0

    # `--only NAME ...`: regenerate those cases only (the others' files stay as they are).
    only = ([a for a in sys.argv[sys.argv.index("--only") + 1:] if not a.startswith("--")]
            if "--only" in sys.argv else None)
    if "--published" in sys.argv:
        make_published(toks, spm_tok, spm_file, only)
        shutil.rmtree(work, ignore_errors=True)
        return
    summary = []
    for name, mtype, kw, (kind, pre), style, garch, q8, seed in CASES:
        if only is not None and name not in only:
            continue
        d = os.path.join(OUT, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        tok = toks[pre] if kind == "bpe" else spm_tok
        cfg = make_config(mtype, kw)
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager",
                                                 dtype=torch.float32)
        model.eval()
        specs = fw.fill(model, seed, gemma_norms=mtype.startswith("gemma"))

        # HF layout
        state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
        if cfg.tie_word_embeddings:
            state.pop("lm_head.weight", None)
        assert set(state) <= set(specs), sorted(set(state) - set(specs))
        save_file(state, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        files = [fw.safetensors_entry(os.path.join(d, "model.safetensors"), state,
                                      {"format": "pt"})]
        cdict = cfg.to_dict()
        cdict.pop("attn_implementation", None)
        cdict = config_v4(cdict) if style == "v4" else config_v5(cdict)
        if name == "gemma2":
            # Left out, so the layer pattern is transformers' default (the reload below checks
            # it gives the same model).
            assert cdict.pop("layer_types") == ["sliding_attention", "full_attention",
                                                "sliding_attention"]
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cdict, f, indent=2, sort_keys=True)
            f.write("\n")
        save_tokenizer(d, tok, kind, spm_file if kind == "spm" else None)

        # Load back from the files: the goldens come from what transformers reads.
        loaded = AutoModelForCausalLM.from_pretrained(d, attn_implementation="eager",
                                                      dtype=torch.float32)
        loaded.eval()
        diff = max_diff(model, loaded, tok, kind)
        if diff != 0.0:
            sys.exit(f"{name}: the model loaded from {d} differs from the one built "
                     f"(max |logit diff| {diff}): config.json is not read as intended")
        # The tokenizer as saved gives the same ids.
        from transformers import AutoTokenizer
        at = AutoTokenizer.from_pretrained(d)
        for text in PROMPTS:
            got = at(text).input_ids
            want = encode(tok, kind, text)
            if got != want:
                sys.exit(f"{name}: AutoTokenizer ids {got} != tokenizer.json ids {want}")

        note = "logits of transformers %s at every position, full vocabulary, 6 significant " \
               "digits; greedy = %d argmax tokens, no stop" % (
                   __import__("transformers").__version__, GREEDY)
        g = goldens(loaded, tok, kind, note, cached=name in CACHED_GREEDY)
        g.update({"case": name, "architecture": cfg.architectures[0], "config_style": style,
                  "tokenizer": "sentencepiece-bpe (byte fallback)" if kind == "spm"
                  else f"byte-level BPE, pre-tokenizer {pre}"})
        if garch:
            g["gguf"] = ("model.gguf holds the same f32 weights in llama.cpp's layout: these "
                         "logits and greedy tokens are its goldens too")
        # A feature the case exists for is in effect: the same weights without it give other
        # logits (by at least 0.1).
        effect = {
            "llama3": ("scaling_effect", "with plain RoPE", dict(rope_parameters={
                "rope_type": "default", "rope_theta": LLAMA3_ROPE["rope_theta"]})),
            "mistral_swa": ("window_effect", "without the window", dict(sliding_window=None)),
            "gemma2": ("softcap_effect", "without soft-capping", dict(
                attn_logit_softcapping=None, final_logit_softcapping=None)),
            "phi3_longrope": ("scaling_effect", "with plain RoPE", dict(rope_parameters={
                "rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5})),
            "qwen3_yarn": ("scaling_effect", "with plain RoPE", dict(rope_parameters={
                "rope_type": "default", "rope_theta": 10000.0})),
        }.get(name)
        if effect:
            key, without, override = effect
            other = AutoModelForCausalLM.from_pretrained(
                d, config=make_config(mtype, dict(kw, **override)), attn_implementation="eager",
                dtype=torch.float32).eval()
            de = max_diff(loaded, other, tok, kind)
            if de < 0.1:
                sys.exit(f"{name}: the same weights {without} change the logits by only {de}")
            g[key] = f"max |logit diff| vs the same weights {without}: {de:.3f}"
        if name == "llama3_rope_parameters":
            # The same weights as llama3: the logits must be identical; golden.json points there.
            ref = json.load(open(os.path.join(OUT, "llama3", "golden.json")))
            if [c["logits"] for c in ref["cases"]] != [c["logits"] for c in g["cases"]] or \
                    [c["greedy"] for c in ref["cases"]] != [c["greedy"] for c in g["cases"]]:
                sys.exit("llama3_rope_parameters: logits differ from llama3's")
            g = {"case": name, "config_style": style, "same_as": "../llama3/golden.json",
                 "note": "the same weights as llama3 with config.json in the transformers-5 form "
                         "(rope_parameters); transformers gives exactly llama3's logits and "
                         "greedy tokens (checked when this was written), so its goldens are "
                         "../llama3/golden.json"}

        extra = {}
        if garch:
            cfg_d = cfg.to_dict()
            np_state = {k: v.numpy() for k, v in state.items()}
            if kind == "spm":
                tokens, scores, types = [], [], []
                for i in range(sp.get_piece_size()):
                    p = sp.id_to_piece(i)
                    tokens.append(p)
                    if p in SPM_SPECIALS:
                        scores.append(-1000.0); types.append(3)   # CONTROL
                    elif sp.is_byte(i):
                        scores.append(0.0); types.append(6)       # BYTE
                    elif p == "\t":
                        scores.append(-1000.0); types.append(4)   # USER_DEFINED
                    else:
                        scores.append(sp.get_score(i)); types.append(1)  # NORMAL
                tok_info = {"kind": "spm", "tokens": tokens, "scores": scores, "types": types}
            else:
                tj = json.loads(tok.to_str())
                vocab = tj["model"]["vocab"]
                tokens = [None] * len(vocab)
                for t, i in vocab.items():
                    tokens[i] = t
                merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
                types = [3 if t in BPE_SPECIALS else 1 for t in tokens]
                tok_info = {"kind": "bpe", "pre": pre, "tokens": tokens, "types": types,
                            "merges": merges, "eos": 2, "pad": 0}
            gpath = os.path.join(d, "model.gguf")
            files.append(fw.gguf_entry(gpath, write_gguf(gpath, garch, cfg_d, np_state,
                                                         tok_info, None)))
            check_gguf(gpath, garch, cfg_d, np_state, tok_info)
            # transformers reads the GGUF's tensors back (undoing the Q/K permutation and the
            # +1), with the case's config (its GGUF metadata reader ignores key_length,
            # rope_freqs and the Gemma 3 query scale, so the config comes from config.json):
            # the same logits?
            back = AutoModelForCausalLM.from_pretrained(
                d, gguf_file="model.gguf", config=loaded.config, dtype=torch.float32,
                attn_implementation="eager")
            back.eval()
            dg = max_diff(loaded, back, tok, kind)
            extra["gguf_check"] = ("transformers reading model.gguf's tensors: max |logit diff| "
                                   f"{dg:.2e}")
            if dg > 1e-4:
                sys.exit(f"{name}: model.gguf read by transformers differs by {dg}")
            if q8:
                qpath = os.path.join(d, "model-q8_0.gguf")
                files.append(fw.gguf_entry(qpath, write_gguf(
                    qpath, garch, cfg_d, np_state, tok_info, gguf.GGMLQuantizationType.Q8_0)))
                # Goldens of the Q8_0 file: the HF model with every matrix Q8_0-rounded (rows
                # are quantized in blocks of 32 along the input dimension, so the Q/K row
                # permutation does not change the values).
                qmodel = AutoModelForCausalLM.from_pretrained(d, attn_implementation="eager",
                                                              dtype=torch.float32)
                with torch.no_grad():
                    for k, p in qmodel.named_parameters():
                        if p.ndim == 2:
                            p.copy_(torch.from_numpy(q8_0_roundtrip(p.detach().numpy())))
                qmodel.eval()
                gq = goldens(qmodel, tok, kind, note.replace(
                    "full vocabulary", "top 10 (id, logit)"), top_k=10)
                gq.update({"case": name, "file": "model-q8_0.gguf",
                           "weights": "every 2-D tensor Q8_0 (token_embd too), 1-D tensors and "
                                      "rope_freqs f32; logits of the HF model holding the "
                                      "dequantized values"})
                with open(os.path.join(d, "golden-q8_0.json"), "w") as f:
                    json.dump(gq, f, separators=(",", ":"))
                    f.write("\n")
        g.update(extra)
        with open(os.path.join(d, "golden.json"), "w") as f:
            json.dump(g, f, separators=(",", ":"))
            f.write("\n")
        fw.write_manifest(d, specs, files, "tests/golden/make_arch_goldens.py")
        sizes = {fn: os.path.getsize(os.path.join(d, fn)) for fn in sorted(os.listdir(d))}
        summary.append((name, sizes, extra.get("gguf_check", "")))
        print(name, sum(sizes.values()), sizes, extra.get("gguf_check", ""), flush=True)
    shutil.rmtree(work, ignore_errors=True)
    total = sum(sum(s.values()) for _, s, _ in summary)
    print(f"total {total} bytes")


if __name__ == "__main__":
    main()
