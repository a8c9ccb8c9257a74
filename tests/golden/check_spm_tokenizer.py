#!/usr/bin/env python3
"""An independent check of the SentencePiece-style GGUF tokenizer: encodes each golden prompt
the way llama.cpp's `llm_tokenizer_spm` does, from the GGUF's `tokenizer.ggml.*` fields only
(tokens, scores, token_type, add_bos_token, add_space_prefix), and compares with the token ids
in a golden file (which came from transformers). The engine must build a tokenizer from the
same fields that gives the same ids; this shows the fields are enough.

    /work/venv/bin/python tests/golden/check_spm_tokenizer.py \
        tests/golden/arch/gemma3_gguf/model.gguf tests/golden/arch/gemma3_gguf/golden.json
    /work/venv/bin/python tests/golden/check_spm_tokenizer.py \
        models/gemma3-270m-it-q4_k_m.gguf tests/golden/gemma3-270m.json

Both printed "ALL SAME" (gguf 0.19.0). Chat cases (`"chat": true`) hold `<bos>` in their
rendered text, so no BOS is added for them.
"""
import heapq
import json
import sys

import gguf


def load(path):
    r = gguf.GGUFReader(path)
    f = r.fields
    toks = f["tokenizer.ggml.tokens"]; ty = f["tokenizer.ggml.token_type"]; sc = f["tokenizer.ggml.scores"]
    tokens = [bytes(toks.parts[i]).decode("utf-8") for i in toks.data]
    types = [int(ty.parts[i][0]) for i in ty.data]
    scores = [float(sc.parts[i][0]) for i in sc.data]
    add_bos = bool(f["tokenizer.ggml.add_bos_token"].contents())
    bos = int(f["tokenizer.ggml.bos_token_id"].contents())
    asp = f.get("tokenizer.ggml.add_space_prefix")
    add_space = bool(asp.contents()) if asp is not None else True
    return tokens, types, scores, add_bos, bos, add_space

def spm_encode(text, tokens, types, scores, add_bos, bos, add_space, parse_special=True):
    """llama.cpp's llm_tokenizer_spm (as read in llama-vocab.cpp): specials (control and
    user-defined) cut out literally; each other fragment: space prefix if asked, ' ' -> '▁',
    split into UTF-8 characters, repeatedly merge the adjacent pair whose concatenation is a
    token with the highest score (leftmost on ties), byte fallback for what is left."""
    vocab = {t: i for i, t in enumerate(tokens)}
    specials = sorted([t for t, ty in zip(tokens, types) if ty in (3, 4) and t], key=len, reverse=True)
    frags = [(False, text)]
    if parse_special:
        for sp in specials:
            out = []
            for is_sp, s in frags:
                if is_sp:
                    out.append((is_sp, s)); continue
                parts = s.split(sp)
                for k, p in enumerate(parts):
                    if p: out.append((False, p))
                    if k < len(parts) - 1: out.append((True, sp))
            frags = out
    ids = [bos] if add_bos else []
    first = True
    for is_sp, s in frags:
        if is_sp:
            ids.append(vocab[s]); first = False; continue
        if add_space and first:
            s = " " + s
        first = False
        s = s.replace(" ", "\u2581")
        sym = list(s)
        # linked list merge with priority queue
        n = len(sym); prev = list(range(-1, n - 1)); nxt = list(range(1, n + 1)); alive = [True] * n
        heap = []
        def push(i, j):
            if i < 0 or j >= n: return
            t = sym[i] + sym[j]
            if t in vocab:
                heapq.heappush(heap, (-scores[vocab[t]], i, j, t))
        for i in range(n - 1): push(i, i + 1)
        while heap:
            _, i, j, t = heapq.heappop(heap)
            if not (alive[i] and alive[j]) or nxt[i] != j or sym[i] + sym[j] != t:
                continue
            sym[i] = t; alive[j] = False; nxt[i] = nxt[j]
            if nxt[j] < n: prev[nxt[j]] = i
            push(prev[i], i); push(i, nxt[i])
        i = 0
        while i < n:
            if alive[i]:
                if sym[i] in vocab:
                    ids.append(vocab[sym[i]])
                else:
                    for b in sym[i].encode("utf-8"):
                        ids.append(vocab[f"<0x{b:02X}>"])
            i = nxt[i] if alive[i] else i + 1
    return ids

if __name__ == "__main__":
    path, golden = sys.argv[1], sys.argv[2]
    voc = load(path)
    g = json.load(open(golden))
    ok = True
    for c in g["cases"]:
        text = c.get("rendered", c["prompt"])
        chat = c.get("chat", False)
        tokens, types, scores, add_bos, bos, add_space = voc
        got = spm_encode(text, tokens, types, scores, add_bos and not chat, bos, add_space)
        same = got == c["tokens"]
        ok &= same
        print("same" if same else "DIFFERENT", c.get("name", text[:30]), got if not same else "", c["tokens"] if not same else "")
    print("ALL SAME" if ok else "MISMATCH")
    sys.exit(0 if ok else 1)
