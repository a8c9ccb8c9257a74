#!/usr/bin/env python3
"""Independent Python reference for edgefit: writes tests/golden/smollm2-135m.json.

Regenerate (from the repository root):

    pip install numpy gguf jinja2 regex
    python3 tests/golden/make_goldens.py

Last run with: Python 3.11.7, numpy 2.4.6, gguf 0.19.0, jinja2 3.1.6, regex 2026.5.9.

Everything here is written from scratch on purpose (no torch / transformers /
llama.cpp bindings): `gguf` is only used to parse the file and dequantize
Q4_1 / Q8_0 blocks to float32. The tokenizer (GPT-2 byte-level BPE with the
`smollm` pre-tokenizer) and the LLaMA forward pass (float32 numpy) are plain
Python so that the Rust engine is checked against a second implementation.

Tokenizer notes: add_bos_token is False, so no BOS is prepended (the chat
template supplies <|im_start|> itself). Control tokens (token_type 3) are cut
out of the text literally first and never reach the pre-tokenizer or BPE.
The encoder was cross-checked once (not a dependency) against HF `tokenizers`
0.23.3 built from the same GGUF vocab/merges with
Sequence[Digits(individual_digits=True), ByteLevel(add_prefix_space=False)]:
identical ids on all four cases plus whitespace/unicode/contraction edge cases.

Greedy decoding always produces exactly N tokens (it does not stop at EOS;
the `chat` case happens to end with <|im_end|> as its 12th token).

The output holds, for each case: the exact string tokenized, its token ids,
the top-10 logits at every prompt position, and a greedy continuation.
"""

import hashlib
import json
import os
import sys

import gguf
import jinja2
import numpy as np
import regex

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "models", "smollm2-135m-instruct-q4_1.gguf")
MODEL_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
OUT = os.path.join(ROOT, "tests", "golden", "smollm2-135m.json")
TOP_K = 10

CASES = [
    # name, prompt, chat, greedy tokens
    ("capital", "The capital of France is", False, 8),
    ("digits", "In 1984, 12 apples cost $3.50; 7+5=12.", False, 8),
    ("unicode", "Café naïve — 東京 😀", False, 4),
    ("chat", "What is 2+2?", True, 12),
]


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# --------------------------------------------------------------------------
# Tokenizer: GPT-2 byte-level BPE with the `smollm` pre-tokenizer
# --------------------------------------------------------------------------

def bytes_to_unicode():
    """GPT-2's reversible byte -> printable unicode char table."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) \
        + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


# Stage 1 of the `smollm` pre-tokenizer: every digit is its own piece.
DIGIT_RE = regex.compile(r"\p{N}")
# Stage 2: the GPT-2 pattern, applied to each piece of stage 1.
GPT2_RE = regex.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def split_keep(pattern, text):
    """Split text into the regex matches AND the unmatched text between them,
    in order (this is how both llama.cpp and HF chain pre-tokenizer stages)."""
    out, last = [], 0
    for m in pattern.finditer(text):
        if m.start() > last:
            out.append(text[last:m.start()])
        out.append(m.group())
        last = m.end()
    if last < len(text):
        out.append(text[last:])
    return out


class Tokenizer:
    def __init__(self, reader):
        f = reader.fields
        self.tokens = f["tokenizer.ggml.tokens"].contents()
        types = f["tokenizer.ggml.token_type"].contents()
        self.vocab = {t: i for i, t in enumerate(self.tokens)}
        merges = f["tokenizer.ggml.merges"].contents()
        self.ranks = {tuple(m.split(" ")): r for r, m in enumerate(merges)}
        self.byte_enc = bytes_to_unicode()
        self.byte_dec = {c: b for b, c in self.byte_enc.items()}
        # Control tokens (type 3: <|endoftext|>, <|im_start|>, <|im_end|>, ...)
        # are matched literally in the raw text and never go through BPE.
        specials = [t for t, ty in zip(self.tokens, types) if ty == 3]
        specials.sort(key=len, reverse=True)  # longest first
        self.special_re = regex.compile("|".join(regex.escape(s) for s in specials))
        self.add_bos = bool(f["tokenizer.ggml.add_bos_token"].contents())
        self.bos = int(f["tokenizer.ggml.bos_token_id"].contents())

    def bpe(self, word):
        """Greedy lowest-rank merge of a byte-level-encoded word."""
        parts = list(word)
        while len(parts) > 1:
            pairs = [(self.ranks.get((a, b), 1 << 30), i)
                     for i, (a, b) in enumerate(zip(parts, parts[1:]))]
            rank, i = min(pairs)
            if rank == 1 << 30:
                break
            # merge all occurrences of this pair, left to right
            a, b = parts[i], parts[i + 1]
            merged, j = [], 0
            while j < len(parts):
                if j + 1 < len(parts) and parts[j] == a and parts[j + 1] == b:
                    merged.append(a + b)
                    j += 2
                else:
                    merged.append(parts[j])
                    j += 1
            parts = merged
        return [self.vocab[p] for p in parts]

    def encode(self, text):
        ids = [self.bos] if self.add_bos else []  # add_bos_token is False here
        for chunk in split_keep(self.special_re, text):
            if chunk in self.vocab and self.special_re.fullmatch(chunk):
                ids.append(self.vocab[chunk])
                continue
            for piece in split_keep(DIGIT_RE, chunk):
                for word in split_keep(GPT2_RE, piece):
                    enc = "".join(self.byte_enc[b] for b in word.encode("utf-8"))
                    ids.extend(self.bpe(enc))
        return ids

    def decode(self, ids):
        out = bytearray()
        for i in ids:
            t = self.tokens[i]
            if self.special_re.fullmatch(t):
                out += t.encode("utf-8")
            else:
                out += bytes(self.byte_dec[c] for c in t)
        return out.decode("utf-8", errors="replace")


# --------------------------------------------------------------------------
# Weights
# --------------------------------------------------------------------------

def load_weights(reader):
    """Dequantize every tensor to a float32 numpy array in row-major order.

    Orientation: GGUF lists dimensions fastest-varying first (ne0, ne1, ...),
    so reader shape [576, 1536] for ffn_gate means 1536 rows of 576 contiguous
    floats. Reversing the shape gives the numpy (rows, cols) matrix W with
    y = W @ x, i.e. W is [out_features, in_features] like a PyTorch Linear.
    """
    w = {}
    for t in reader.tensors:
        a = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        w[t.name] = a.reshape([int(d) for d in reversed(t.shape)])
    return w


# --------------------------------------------------------------------------
# LLaMA forward pass (float32, whole sequence at once, no cache)
# --------------------------------------------------------------------------

class Llama:
    def __init__(self, reader):
        f = reader.fields
        g = lambda k: f[k].contents()
        self.n_layer = int(g("llama.block_count"))
        self.n_embd = int(g("llama.embedding_length"))
        self.n_head = int(g("llama.attention.head_count"))
        self.n_kv = int(g("llama.attention.head_count_kv"))
        self.head_dim = self.n_embd // self.n_head
        self.eps = np.float32(g("llama.attention.layer_norm_rms_epsilon"))
        self.base = float(g("llama.rope.freq_base"))
        self.w = load_weights(reader)
        w, d, hd = self.w, self.n_embd, self.head_dim
        assert w["blk.0.attn_q.weight"].shape == (d, d)
        assert w["blk.0.attn_k.weight"].shape == (self.n_kv * hd, d)
        assert w["blk.0.ffn_gate.weight"].shape == (int(g("llama.feed_forward_length")), d)
        assert w["blk.0.ffn_down.weight"].shape == (d, int(g("llama.feed_forward_length")))
        assert w["token_embd.weight"].shape == (int(g("llama.vocab_size")), d)
        assert "output.weight" not in w  # tied embeddings

    def rmsnorm(self, x, weight):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * weight

    def rope(self, x):
        """Rotate x of shape [T, heads, head_dim] by position.

        Layout: llama.cpp's converter permutes the HF q/k weights so that in a
        GGUF llama model each rotation pair is two ADJACENT elements
        (2i, 2i+1) of a head (llama.cpp rope "normal" mode), not HF's split
        halves (i, i + d/2). theta_i = base^(-2i/d), angle = pos * theta_i.
        Checked empirically: both layouts happen to predict " Paris" for the
        5-token `capital` prompt, but on a ~50-token English paragraph the
        adjacent layout gives a mean next-token NLL of 2.14 nats vs 3.72 for
        the half-split one, and only the adjacent layout answers the `chat`
        case sensibly ("... is 4."); the half-split one emits <|im_end|> and
        then repeats the system prompt.
        """
        T, _, d = x.shape
        inv_freq = self.base ** (-np.arange(0, d, 2, dtype=np.float64) / d)   # [d/2]
        ang = np.arange(T, dtype=np.float64)[:, None] * inv_freq[None, :]      # [T, d/2]
        cos = np.cos(ang).astype(np.float32)[:, None, :]
        sin = np.sin(ang).astype(np.float32)[:, None, :]
        x0, x1 = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = x0 * cos - x1 * sin
        out[..., 1::2] = x0 * sin + x1 * cos
        return out

    def forward(self, ids):
        """Return logits [T, vocab] for every position of `ids`."""
        w, T, hd = self.w, len(ids), self.head_dim
        group = self.n_head // self.n_kv
        x = w["token_embd.weight"][ids]                                         # [T, d]
        causal = np.triu(np.full((T, T), -np.inf, dtype=np.float32), k=1)
        for l in range(self.n_layer):
            p = f"blk.{l}."
            h = self.rmsnorm(x, w[p + "attn_norm.weight"])
            q = (h @ w[p + "attn_q.weight"].T).reshape(T, self.n_head, hd)
            k = (h @ w[p + "attn_k.weight"].T).reshape(T, self.n_kv, hd)
            v = (h @ w[p + "attn_v.weight"].T).reshape(T, self.n_kv, hd)
            q, k = self.rope(q), self.rope(k)
            att = np.empty((T, self.n_head, hd), dtype=np.float32)
            for hh in range(self.n_head):
                kv = hh // group                       # grouped-query attention
                s = (q[:, hh, :] @ k[:, kv, :].T) / np.float32(np.sqrt(hd)) + causal
                s = np.exp(s - s.max(axis=-1, keepdims=True))
                s /= s.sum(axis=-1, keepdims=True)
                att[:, hh, :] = s @ v[:, kv, :]
            x = x + att.reshape(T, -1) @ w[p + "attn_output.weight"].T
            h = self.rmsnorm(x, w[p + "ffn_norm.weight"])
            gate = h @ w[p + "ffn_gate.weight"].T
            up = h @ w[p + "ffn_up.weight"].T
            silu = gate / (1.0 + np.exp(-gate))
            x = x + (silu * up) @ w[p + "ffn_down.weight"].T
        x = self.rmsnorm(x, w["output_norm.weight"])
        return x @ w["token_embd.weight"].T                                     # tied output


# --------------------------------------------------------------------------

def render_chat(reader, prompt):
    # HF renders chat templates with trim_blocks and lstrip_blocks.
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    tmpl = env.from_string(reader.fields["tokenizer.chat_template"].contents())
    return tmpl.render(messages=[{"role": "user", "content": prompt}],
                       add_generation_prompt=True)


def top_k(row, k):
    idx = np.argsort(-row, kind="stable")[:k]
    return [[int(i), round(float(row[i]), 4)] for i in idx]


def to_json(v, ind=""):
    """Pretty JSON with one line per position / token list (small, diffable)."""
    compact = lambda x: json.dumps(x, ensure_ascii=False, separators=(",", ":"))
    if isinstance(v, dict) and "pos" not in v:
        inner = ind + "  "
        items = [f"{inner}{json.dumps(k)}: {to_json(x, inner)}" for k, x in v.items()]
        return "{\n" + ",\n".join(items) + "\n" + ind + "}"
    if isinstance(v, list) and v and isinstance(v[0], dict):
        inner = ind + "  "
        return "[\n" + ",\n".join(inner + to_json(x, inner) for x in v) + "\n" + ind + "]"
    return compact(v)


def main():
    digest = sha256_of(MODEL)
    if digest != MODEL_SHA256:
        sys.exit(f"model sha256 mismatch: {digest} != {MODEL_SHA256}")
    reader = gguf.GGUFReader(MODEL)
    tok = Tokenizer(reader)
    model = Llama(reader)

    cases = []
    for name, prompt, chat, n_gen in CASES:
        rendered = render_chat(reader, prompt) if chat else prompt
        ids = tok.encode(rendered)
        logits = model.forward(ids)
        positions = [{"pos": p, "top": top_k(logits[p], TOP_K)} for p in range(len(ids))]
        # Greedy: re-run the whole sequence each step (no cache, simplest to trust).
        seq, gen = list(ids), []
        next_id = int(np.argmax(logits[-1]))
        for _ in range(n_gen):
            gen.append(next_id)
            seq.append(next_id)
            if len(gen) < n_gen:
                next_id = int(np.argmax(model.forward(seq)[-1]))
        text = tok.decode(gen)
        print(f"{name}: {len(ids)} prompt tokens {ids}\n  greedy {gen} -> {text!r}")
        cases.append({"name": name, "prompt": prompt, "chat": chat, "rendered": rendered,
                      "tokens": ids, "positions": positions,
                      "greedy": {"tokens": gen, "text": text}})

    assert cases[0]["greedy"]["text"].startswith(" Paris"), "forward pass is wrong"
    out = {"model": os.path.basename(MODEL), "model_sha256": MODEL_SHA256,
           "generator": "tests/golden/make_goldens.py", "top_k": TOP_K, "cases": cases}
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(to_json(out) + "\n")
    print(f"wrote {OUT} ({os.path.getsize(OUT)} bytes)")


if __name__ == "__main__":
    main()
