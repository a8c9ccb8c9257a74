#!/usr/bin/env python3
"""Reference outputs of the second real model, Gemma 3 270M Q4_K_M: writes tests/golden/gemma3-270m.json.

Regenerate (from the repository root; the venv lives outside the repository and is never a
test-time dependency):

    python3 -m venv /work/venv
    /work/venv/bin/pip install torch transformers accelerate safetensors tokenizers gguf numpy sentencepiece
    cargo xtask setup --gemma          # models/gemma3-270m-it-q4_k_m.gguf, sha256-checked
    /work/venv/bin/python tests/golden/make_gemma_goldens.py

Last run with: Python 3.11.7, torch 2.15.0 (CPU), transformers 5.24.0, tokenizers 0.23.3,
gguf 0.19.0, numpy 2.4.6.

The reference is Hugging Face transformers reading the GGUF file itself
(`from_pretrained(models/, gguf_file=...)`): transformers dequantizes every tensor (Q4_K, Q6_K,
Q5_0, Q8_0) to float32 with gguf-py and subtracts the 1 that llama.cpp's converter added to the
Gemma norm weights, so these are the outputs of the file's exact values in f32 (eager attention).
The tokenizer is the one transformers builds from the file's `tokenizer.ggml.*` fields; the
script checks that a llama.cpp-style SPM tokenizer (check_spm_tokenizer.py) built from the same
fields gives the same ids on every prompt and on the whole evaluation text (stored as
`perplexity.text_token_ids`).

Note: the file carries no `tokenizer.chat_template` and its `general.name` is "Gemma 3 270m"
(no "it"): the chat case renders Gemma 3's published turn format by hand (see CHAT_TEMPLATE).

Perplexity is computed the way `edgefit perplexity` does (crates/engine/src/perplexity.rs,
README "Perplexity"): the text is tokenized once with BOS first (the file says
add_bos_token = true); the inputs t0..t(n-2) are cut into consecutive windows of 512 tokens,
each run from an empty cache; every token t1..t(n-1) is predicted exactly once; -log p is
logsumexp(logits) - logits[target] in f64, summed in f64. Only the first window starts with BOS.
"""

import hashlib
import json
import math
import os
import sys
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_spm_tokenizer  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL_DIR = os.path.join(ROOT, "models")
MODEL_FILE = "gemma3-270m-it-q4_k_m.gguf"
MODEL_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
TEXT = os.path.join(ROOT, "tests", "data", "constitution.txt")
OUT = os.path.join(ROOT, "tests", "golden", "gemma3-270m.json")
TOP_K = 10
GREEDY = 16
WINDOW = 512

# Gemma 3's turn format (the instruction-tuned models' template, written out by hand because the
# file has none): BOS, then one user turn, then the opening of the model's turn.
CHAT_TEMPLATE = "<bos><start_of_turn>user\n{}<end_of_turn>\n<start_of_turn>model\n"

CASES = [
    # name, text, chat
    ("capital", "The capital of France is", False),
    ("digits", "In 1787, 39 delegates signed; 7+5=12.", False),
    ("unicode", "Café naïve — 東京 😀", False),
    ("chat", "What is 2+2?", True),
]


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def r6(x):
    return float(f"{x:.6g}")


def main():
    torch.manual_seed(0)
    torch.set_num_threads(2)
    path = os.path.join(MODEL_DIR, MODEL_FILE)
    got = sha256_of(path)
    if got != MODEL_SHA256:
        sys.exit(f"{path}: sha256 {got}, expected {MODEL_SHA256} (run `cargo xtask setup --gemma`)")
    t0 = time.time()
    tok = AutoTokenizer.from_pretrained(MODEL_DIR, gguf_file=MODEL_FILE)
    model = AutoModelForCausalLM.from_pretrained(
        MODEL_DIR, gguf_file=MODEL_FILE, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    t_load = time.time() - t0
    print(f"loaded in {t_load:.1f} s", flush=True)

    cases = []
    with torch.no_grad():
        for name, text, chat in CASES:
            if chat:
                rendered = CHAT_TEMPLATE.format(text)
                # The rendered text holds <bos> literally: no second BOS.
                ids = tok(rendered, add_special_tokens=False).input_ids
            else:
                rendered = text
                ids = tok(rendered).input_ids  # BOS first (add_bos_token = true)
            logits = model(torch.tensor([ids])).logits[0]
            positions = []
            for p in range(len(ids)):
                v, i = logits[p].topk(TOP_K)
                positions.append({"pos": p, "top": [[int(a), r6(b)] for a, b in zip(i, v)]})
            seq = list(ids)
            for _ in range(GREEDY):
                nxt = int(model(torch.tensor([seq])).logits[0, -1].argmax())
                seq.append(nxt)
            greedy = seq[len(ids):]
            cases.append({
                "name": name, "prompt": text, "chat": chat, "rendered": rendered,
                "tokens": ids, "token_strings": tok.convert_ids_to_tokens(ids),
                "positions": positions,
                "greedy": {"tokens": greedy, "text": tok.decode(greedy)},
            })
            print(name, ids, repr(tok.decode(greedy)), flush=True)

        t1 = time.time()
        text = open(TEXT, encoding="utf-8").read()
        tokens = tok(text).input_ids
        # The same ids from the GGUF fields alone, the way llama.cpp's SPM tokenizer works.
        voc = check_spm_tokenizer.load(path)
        for c in cases:
            v = list(voc)
            v[3] = v[3] and not c["chat"]  # the rendered chat text holds <bos> itself
            if check_spm_tokenizer.spm_encode(c["rendered"], *v) != c["tokens"]:
                sys.exit(f"{c['name']}: llama.cpp-style SPM ids differ from transformers'")
        if check_spm_tokenizer.spm_encode(text, *voc) != tokens:
            sys.exit("the evaluation text: llama.cpp-style SPM ids differ from transformers'")
        n_pred = len(tokens) - 1
        inputs, targets = tokens[:n_pred], tokens[1:]
        total, windows = 0.0, 0
        for start in range(0, n_pred, WINDOW):
            x = torch.tensor([inputs[start:start + WINDOW]])
            y = torch.tensor(targets[start:start + WINDOW])
            lg = model(x).logits[0].double()
            nll = torch.logsumexp(lg, dim=-1) - lg.gather(1, y[:, None])[:, 0]
            total += float(nll.sum())
            windows += 1
            print(f"window {windows}: {start + len(y)}/{n_pred}", flush=True)
        mean = total / n_pred
        t_ppl = time.time() - t1
    out = {
        "model": MODEL_FILE,
        "model_sha256": MODEL_SHA256,
        "generator": "tests/golden/make_gemma_goldens.py",
        "reference": "transformers 5.24.0 reading the GGUF (every tensor dequantized to f32), "
                     "eager attention, torch 2.15.0 CPU",
        "note": "general.name is 'Gemma 3 270m' and the file has no chat template; the chat "
                "case renders Gemma 3's turn format by hand",
        "top_k": TOP_K,
        "cases": cases,
        "perplexity": {
            "text": "tests/data/constitution.txt",
            "text_sha256": sha256_of(TEXT),
            "window": WINDOW,
            "bos": "one BOS at the start of the text (add_bos_token = true); windows after the "
                   "first start without BOS, as edgefit's perplexity does",
            "text_tokens": len(tokens),
            "text_token_ids": tokens,
            "tokens": n_pred,
            "windows": windows,
            "mean_nll": mean,
            "perplexity": math.exp(mean),
        },
    }
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"perplexity {math.exp(mean):.4f} over {n_pred} tokens in {windows} windows "
          f"({t_ppl:.0f} s); load {t_load:.0f} s; wrote {OUT}")


if __name__ == "__main__":
    main()
