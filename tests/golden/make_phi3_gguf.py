#!/usr/bin/env python3
"""Phi-3 as llama.cpp's GGUF writes it, and its goldens from transformers READING THAT FILE:
writes tests/golden/arch/phi3_gguf/.

Regenerate (from the repository root, offline, a few seconds; the venv of
make_arch_goldens.py, never a test-time dependency):

    /work/venv/bin/python tests/golden/make_phi3_gguf.py

Last run (2026-12-07) with: Python 3.11.7, torch 2.15.0 (CPU), transformers 5.25.0,
sentencepiece 0.2.3, gguf 0.19.0, numpy 2.4.6. Run it after make_arch_goldens.py (it reads the
phi3 case's files); it writes weights.json (fixture_weights.py) beside the goldens.

The weights are the `phi3` case's (tests/golden/arch/phi3/model.safetensors, written by
make_arch_goldens.py: hidden 32, 4 heads / 2 KV heads, head_dim 8, partial_rotary_factor 0.5,
untied output, vocabulary 384). What llama.cpp's `convert_hf_to_gguf.py` (`Phi3MiniModel`)
does with them, and this script does the same:

- tensors keep HF's row order (llama.cpp runs Phi-3 with NEOX RoPE: no q/k permutation) and
  HF's fusion: `qkv_proj` -> `blk.N.attn_qkv.weight` (q rows, then k, then v),
  `gate_up_proj` -> `blk.N.ffn_up.weight` (gate rows, then up; llama.cpp's SWIGLU takes the
  first half as the gate), `o_proj` -> `attn_output`, `down_proj` -> `ffn_down`,
  `input_layernorm` -> `attn_norm`, `post_attention_layernorm` -> `ffn_norm`, `model.norm` ->
  `output_norm`, `lm_head` -> `output`, `embed_tokens` -> `token_embd`;
- metadata `phi3.context_length`, `phi3.rope.scaling.original_context_length`,
  `phi3.embedding_length`, `phi3.feed_forward_length`, `phi3.block_count`,
  `phi3.attention.head_count`, `phi3.attention.head_count_kv`,
  `phi3.attention.layer_norm_rms_epsilon`, `phi3.rope.dimension_count` =
  int(partial_rotary_factor * hidden) // heads (= 4 here: the partial rotary),
  `phi3.rope.freq_base`, `general.file_type`, `phi3.attention.sliding_window` = 0 (the config
  has none); no `attention.key_length` (llama.cpp takes head_dim = hidden / heads);
  longrope models add `phi3.rope.scaling.attn_factor` and the tensors `rope_factors_long.weight`
  / `rope_factors_short.weight` (not in these files: `crates/engine/tests/it/arch_phi3.rs`
  adds them to a copy and checks it against the same factors from config.json);
- vocabulary `Phi3MiniModel.set_vocab`: `tokenizer.ggml.model = "llama"`, `pre = "default"`,
  the SentencePiece pieces, scores and types (UNKNOWN 2, CONTROL 3, BYTE 6, NORMAL 1; the
  tokens tokenizer.json lists as special added tokens become CONTROL with score -1000), then
  gguf's SpecialVocab: bos / eos / unk / pad ids, `add_bos_token`, `add_eos_token`, the chat
  template. No `add_space_prefix` (llama.cpp's default for this vocabulary kind: on). The
  SentencePiece model is a tiny Llama-2-style one trained here (`<unk>` 0, `<s>` 1, `</s>` 2,
  dummy prefix on, byte fallback, digits split, Phi-3's chat tokens), 384 pieces.

Files: `model.gguf` (`--outtype f16`: 2-D tensors F16, norms F32, file_type 1) and
`model-q4_0.gguf` (every 2-D tensor Q4_0, as gguf-py's quantizer makes blocks of 32 along each
row, norms F32, file_type 2). Goldens: transformers 5.24.0 loads each file with
`from_pretrained(dir, gguf_file=..., config=...)` (its GGUF config reader ignores
`rope.dimension_count`, so the partial rotary comes from the phi3 case's config.json; the
tensors are the file's, dequantized by gguf-py) and tokenizes with
`AutoTokenizer.from_pretrained(dir, gguf_file=...)` (its phi3 SentencePiece builder).
golden.json and golden-q4_0.json: top 10 (id, logit) at every position, the logits of the
whole vocabulary at the last position (6 significant digits) and 16 greedy tokens.
Checks made here: the token ids equal SentencePiece's own (BOS first); the f16 file read by
transformers gives exactly the logits of the phi3 HF model with its weights rounded to f16
(so names, fusion order and row layout undo exactly); gguf-py reads the files back.
"""

import json
import os
import shutil
import sys

import gguf
import numpy as np
import sentencepiece as spm
import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fixture_weights as fw  # noqa: E402
from make_arch_goldens import GREEDY, PROMPTS, TEXT, VOCAB, all_logits, greedy, r6  # noqa: E402

SRC = os.path.join(HERE, "arch", "phi3")
OUT = os.path.join(HERE, "arch", "phi3_gguf")
CHAT_TOKENS = ["<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]
PHI3_CHAT = ("{% for message in messages %}{{ '<|' + message['role'] + '|>\\n' + "
             "message['content'] + '<|end|>\\n' }}{% endfor %}"
             "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}"
             "{{ eos_token }}{% endif %}")
BOS, EOS, UNK, PAD = 1, 2, 0, 0


def train_spm(workdir):
    prefix = os.path.join(workdir, "spm")
    spm.SentencePieceTrainer.train(
        input=TEXT, model_prefix=prefix, model_type="bpe", vocab_size=VOCAB,
        byte_fallback=True, character_coverage=1.0, add_dummy_prefix=True,
        normalization_rule_name="identity", remove_extra_whitespaces=False, split_digits=True,
        unk_id=UNK, bos_id=BOS, eos_id=EOS, pad_id=-1,
        user_defined_symbols=CHAT_TOKENS, minloglevel=2, num_threads=1)
    sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
    assert sp.get_piece_size() == VOCAB, sp.get_piece_size()
    return sp


def vocab_of(sp):
    tokens, scores, types = [], [], []
    for i in range(sp.get_piece_size()):
        p = sp.id_to_piece(i)
        tokens.append(p)
        if p in CHAT_TOKENS or i in (UNK, BOS, EOS):
            # tokenizer.json's special added tokens: CONTROL, -1000 (Phi3MiniModel.set_vocab)
            scores.append(-1000.0)
            types.append(3)
        elif sp.is_byte(i):
            scores.append(sp.get_score(i))
            types.append(6)
        else:
            scores.append(sp.get_score(i))
            types.append(1)
    return tokens, scores, types


def write(path, c, state, vocab, qtype):
    tokens, scores, types = vocab
    hidden, heads = c["hidden_size"], c["num_attention_heads"]
    w = gguf.GGUFWriter(path, "phi3")
    w.add_name("phi3_gguf")
    w.add_context_length(c["max_position_embeddings"])
    w.add_rope_scaling_orig_ctx_len(c["original_max_position_embeddings"])
    w.add_embedding_length(hidden)
    w.add_feed_forward_length(c["intermediate_size"])
    w.add_block_count(c["num_hidden_layers"])
    w.add_head_count(heads)
    w.add_head_count_kv(c["num_key_value_heads"])
    w.add_layer_norm_rms_eps(c["rms_norm_eps"])
    w.add_rope_dimension_count(int(c["partial_rotary_factor"] * hidden) // heads)
    w.add_rope_freq_base(c["rope_theta"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if qtype is None
                    else gguf.LlamaFileType.MOSTLY_Q4_0)
    w.add_sliding_window(0)
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(BOS)
    w.add_eos_token_id(EOS)
    w.add_unk_token_id(UNK)
    w.add_pad_token_id(PAD)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_chat_template(PHI3_CHAT)
    names = {"input_layernorm": "attn_norm", "self_attn.qkv_proj": "attn_qkv",
             "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
             "mlp.gate_up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    recipes = {}
    for hf, t in state.items():
        if hf == "model.embed_tokens.weight":
            name = "token_embd.weight"
        elif hf == "model.norm.weight":
            name = "output_norm.weight"
        elif hf == "lm_head.weight":
            name = "output.weight"
        else:
            p = hf.split(".")
            assert p[:2] == ["model", "layers"], hf
            name = f"blk.{p[2]}.{names['.'.join(p[3:-1])]}.{p[-1]}"
        recipes[name] = {"from": hf}
        if t.ndim == 1:
            w.add_tensor(name, t.astype(np.float32))
        elif qtype is None:
            w.add_tensor(name, t.astype(np.float16))
        else:
            w.add_tensor(name, gguf.quants.quantize(t, qtype), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    r = gguf.GGUFReader(path)
    assert r.fields["general.architecture"].contents() == "phi3"
    assert r.fields["phi3.rope.dimension_count"].contents() == 4
    got = sorted(t.name for t in r.tensors)
    assert len(got) == len(state) and "blk.0.attn_qkv.weight" in got, got
    qkv = next(t for t in r.tensors if t.name == "blk.0.attn_qkv.weight")
    assert list(qkv.shape) == [hidden, hidden + 2 * c["num_key_value_heads"] * hidden // heads]
    return recipes


def main():
    torch.set_num_threads(2)
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    work = os.path.join(OUT, ".work")
    os.makedirs(work)
    sp = train_spm(work)
    vocab = vocab_of(sp)
    shutil.rmtree(work)

    hf = AutoModelForCausalLM.from_pretrained(SRC, attn_implementation="eager",
                                              dtype=torch.float32).eval()
    c = json.load(open(os.path.join(SRC, "config.json")))
    # Copies: the f16 rounding below changes the parameters in place.
    state = {k: v.detach().numpy().copy() for k, v in hf.state_dict().items()}
    # The reference for the f16 file: the same model with every 2-D tensor rounded to f16.
    with torch.no_grad():
        for _, p in hf.named_parameters():
            if p.ndim == 2:
                p.copy_(p.half().float())

    config = AutoConfig.from_pretrained(SRC)
    summary = {}
    files = []
    for fname, qtype in [("model.gguf", None),
                         ("model-q4_0.gguf", gguf.GGMLQuantizationType.Q4_0)]:
        path = os.path.join(OUT, fname)
        files.append(fw.gguf_entry(path, write(path, c, state, vocab, qtype)))
        back = AutoModelForCausalLM.from_pretrained(
            OUT, gguf_file=fname, config=config, dtype=torch.float32,
            attn_implementation="eager").eval()
        tok = AutoTokenizer.from_pretrained(OUT, gguf_file=fname)
        cases = []
        for text in PROMPTS:
            ids = tok(text).input_ids
            want = [BOS] + sp.encode(text)
            if ids != want:
                sys.exit(f"{fname}: transformers' GGUF tokenizer gives {ids}, SentencePiece {want}")
            lg = all_logits(back, ids)
            case = {"prompt": text, "tokens": ids}
            if qtype is None:
                d = float((lg - all_logits(hf, ids)).abs().max())
                summary.setdefault("f16_vs_hf", []).append(d)
                if d > 1e-5:
                    sys.exit(f"{fname} read by transformers differs from the f16-rounded HF "
                             f"model by {d}")
            # Top 10 at every position and the whole last row: a wrong split, order or
            # rotation moves these by O(0.1-1), and the file stays tens of KB.
            case["top"] = [[[int(i), r6(v)] for v, i in zip(*row.topk(10))] for row in lg]
            case["last_logits"] = [r6(v) for v in lg[-1].tolist()]
            case["greedy"] = greedy(back, ids)
            cases.append(case)
        ver = __import__("transformers").__version__
        g = {"case": "phi3_gguf", "file": fname, "cases": cases,
             "source": f"transformers {ver} reading {fname} (from_pretrained(dir, gguf_file="
                       f"'{fname}', config=<phi3/config.json>): its GGUF config reader ignores "
                       "rope.dimension_count); tokens from AutoTokenizer.from_pretrained(dir, "
                       f"gguf_file='{fname}'), equal to SentencePiece's with BOS",
             "note": "top 10 (id, logit) at every position and the full vocabulary at the "
                     f"last (`last_logits`), 6 significant digits; greedy = {GREEDY} argmax "
                     "tokens, no stop"}
        if qtype is None:
            g["check"] = ("the f16 phi3 HF model (tests/golden/arch/phi3, every 2-D tensor rounded "
                          "to f16) gives these logits too: max |diff| "
                          f"{max(summary['f16_vs_hf']):.2e}")
        out = "golden.json" if qtype is None else "golden-q4_0.json"
        with open(os.path.join(OUT, out), "w") as f:
            json.dump(g, f, separators=(",", ":"))
            f.write("\n")
    specs = json.load(open(os.path.join(SRC, fw.MANIFEST)))["tensors"]
    fw.write_manifest(OUT, specs, files, "tests/golden/make_phi3_gguf.py (the phi3 case's weights)")
    sizes = {f: os.path.getsize(os.path.join(OUT, f)) for f in sorted(os.listdir(OUT))}
    print(sizes, "total", sum(sizes.values()), "f16 vs HF", summary["f16_vs_hf"])


if __name__ == "__main__":
    main()
