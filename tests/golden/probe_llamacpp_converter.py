"""GGUF files written by llama.cpp's own converter, read by edgefit and by transformers.

The fixtures of `tests/golden/arch/` write their GGUF files with gguf-py, following
convert_hf_to_gguf.py by reading it; this probe runs the converter itself. For each case it
builds a tiny random model from a transformers config (weights from `fixture_weights.fill`,
a tokenizer of `tests/golden/arch/`), converts it with `convert_hf_to_gguf.py --outtype
f32 | f16 | q8_0`, and compares the mean negative log-likelihood of a text (every token after
the first scored) three ways: transformers on the checkpoint, transformers reading the GGUF
(`gguf_file=`) and `edgefit perplexity --model FILE.gguf` (`--weights f32`, or `q8_0` for the
Q8_0 file; `--kv f32`). It prints one row per file and exits non-zero when edgefit is further
than the tolerance from the reference the case names (`gguf`: transformers reading the file;
`hf`: the checkpoint, for the keys transformers' GGUF reader ignores, compared on the f32 file
only since the checkpoint's weights are not rounded).

Not a test: it needs the venv (torch, transformers, sentencepiece) and a llama.cpp source tree
with its gguf-py. None is downloaded from the Hugging Face Hub; the llama.cpp tree comes from
PyPI, vendored in the llama-cpp-python sdist:

    curl -sSLO https://files.pythonhosted.org/packages/ec/e9/e7de2b0463ea3ffbf0ede6cb21b58c1258a8f6521aae45ca773a59fe7cf3/llama_cpp_python-0.3.36.tar.gz
    tar xzf llama_cpp_python-0.3.36.tar.gz llama_cpp_python-0.3.36/vendor/llama.cpp
    /work/venv/bin/python tests/golden/probe_llamacpp_converter.py \
        --llama-cpp llama_cpp_python-0.3.36/vendor/llama.cpp \
        --edgefit target/release/edgefit [--quantize PATH/llama-quantize] [CASE ...]

`--quantize` takes llama.cpp's quantizer built from the same tree (`pip install cmake`, then
`cmake -B build -DLLAMA_CURL=OFF && cmake --build build -j2 --target llama-quantize` in it).

The converter identifies a BPE pre-tokenizer by hashing its output on a fixed text; the tiny
384-token vocabularies are not in its table, so the probe tells it the pre-tokenizer the
vocabulary was built with (`llama-bpe` for the llama3 regex, `qwen2`), which is what
`tokenizer.ggml.pre` then says.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fixture_weights as fw  # noqa: E402
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer  # noqa: E402

ARCH = os.path.join(HERE, "arch")
TEXT_FILE = os.path.join(HERE, "..", "data", "constitution.txt")
TOLERANCE = 2e-4  # mean NLL, nats: f32 sums in another order, f16 / Q8_0 rounding alike

BPE = dict(vocab_size=384, pad_token_id=0, eos_token_id=2, bos_token_id=1)
SMALL = dict(hidden_size=64, intermediate_size=128)
# name: (tokenizer case, pre-tokenizer, reference, config)
CASES = {
    "llama": ("llama", "llama-bpe", "gguf", dict(
        **BPE, **SMALL, num_hidden_layers=2, model_type="llama", num_attention_heads=4, num_key_value_heads=2)),
    "llama_tied": ("llama", "llama-bpe", "gguf", dict(
        **BPE, **SMALL, num_hidden_layers=2, model_type="llama", num_attention_heads=4, num_key_value_heads=4,
        tie_word_embeddings=True)),
    # transformers' GGUF reader ignores rope_freqs.weight (Llama 3.1+'s scaling as the
    # converter writes it): the checkpoint is the reference.
    "llama3_rope": ("llama", "llama-bpe", "hf", dict(
        **BPE, **SMALL, num_hidden_layers=2, model_type="llama", num_attention_heads=4, num_key_value_heads=2,
        rope_theta=500000.0, max_position_embeddings=1024, tie_word_embeddings=True,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 64})),
    "mistral": ("llama", "llama-bpe", "gguf", dict(
        **BPE, **SMALL, num_hidden_layers=2, model_type="mistral", num_attention_heads=4, num_key_value_heads=2)),
    "qwen2": ("qwen2", "qwen2", "gguf", dict(
        **BPE, **SMALL, num_hidden_layers=2, model_type="qwen2", num_attention_heads=4, num_key_value_heads=2)),
    "qwen2_tied": ("qwen2", "qwen2", "gguf", dict(
        **BPE, **SMALL, model_type="qwen2", num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, tie_word_embeddings=True)),
    # head_dim 128, Qwen3Config's default, which transformers' GGUF reader assumes.
    "qwen3": ("qwen3", "qwen2", "gguf", dict(
        **BPE, **SMALL, num_hidden_layers=2, model_type="qwen3", num_attention_heads=2, num_key_value_heads=1)),
    "phi3": ("phi3", "llama-bpe", "gguf", dict(
        **BPE, **SMALL, num_hidden_layers=2, model_type="phi3", num_attention_heads=4, num_key_value_heads=2)),
    # Phi-3-mini-4k's window below its context: the converter writes
    # phi3.attention.sliding_window = 2047; the text is shorter than the window.
    "phi3_mini4k": ("phi3", "llama-bpe", "gguf", dict(
        **BPE, **SMALL, num_hidden_layers=2, model_type="phi3", num_attention_heads=4, num_key_value_heads=4,
        sliding_window=2047, max_position_embeddings=4096)),
    # head_dim 256 (Gemma3TextConfig's default, = query_pre_attn_scalar), 7 layers: the
    # default layout (every 6th layer full) with a window of 16 below the text.
    "gemma3": ("gemma3", None, "gguf", dict(
        **SMALL, vocab_size=384, model_type="gemma3_text", num_hidden_layers=7,
        num_attention_heads=2, num_key_value_heads=1, sliding_window=16)),
    # Its own layout and local base: the converter writes gemma3.rope.freq_base_swa; the
    # probe adds gemma3.attention.sliding_window_pattern (llama.cpp reads it, this converter
    # version does not write it for Gemma 3). transformers' GGUF reader ignores both.
    "gemma3_layout": ("gemma3", None, "hf", dict(
        **SMALL, vocab_size=384, model_type="gemma3_text", num_hidden_layers=4,
        num_attention_heads=2, num_key_value_heads=1, sliding_window=8,
        layer_types=["sliding_attention", "full_attention", "sliding_attention",
                     "full_attention"],
        rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 500.0}})),
    # 256-wide, so llama-quantize (--quantize) writes real K-quant blocks rather than its
    # fallbacks for narrower rows.
    "llama_256": ("llama", "llama-bpe", "gguf", dict(
        **BPE, hidden_size=256, intermediate_size=512, num_hidden_layers=2, model_type="llama",
        num_attention_heads=4, num_key_value_heads=2)),
    "qwen3_256": ("qwen3", "qwen2", "gguf", dict(
        **BPE, hidden_size=256, intermediate_size=512, num_hidden_layers=2, model_type="qwen3",
        num_attention_heads=2, num_key_value_heads=1)),
    "gemma2": ("gemma2", None, "gguf", dict(
        **SMALL, vocab_size=384, model_type="gemma2", num_hidden_layers=3,
        num_attention_heads=2, num_key_value_heads=1, sliding_window=16)),
}
QUANTS = ["Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K", "Q4_0", "Q5_1", "IQ4_NL", "IQ4_XS"]
CLASSES = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM",
           "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM",
           "phi3": "Phi3ForCausalLM", "gemma3_text": "Gemma3ForCausalLM",
           "gemma2": "Gemma2ForCausalLM"}

# Runs convert_hf_to_gguf.py with the pre-tokenizer named (argv[1]) and, when argv[2] is
# "pattern", Gemma 3's layer_types written as gemma3.attention.sliding_window_pattern.
WRAPPER = r'''
import os, sys, runpy
src, pre, pattern = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, src); sys.path.insert(1, os.path.join(src, "gguf-py"))
import conversion.base as base
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: pre
if pattern == "pattern":
    import conversion.gemma as gemma
    set_parameters = gemma.Gemma3Model.set_gguf_parameters
    def with_pattern(self):
        set_parameters(self)
        self.gguf_writer.add_sliding_window_pattern(
            [t == "sliding_attention" for t in self.hparams["layer_types"]])
    gemma.Gemma3Model.set_gguf_parameters = with_pattern
sys.argv = [os.path.join(src, "convert_hf_to_gguf.py")] + sys.argv[4:]
runpy.run_path(sys.argv[0], run_name="__main__")
'''


def mean_nll(model, ids):
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].double()
    lp = torch.log_softmax(logits, -1)
    return -float(sum(lp[i, ids[i + 1]] for i in range(len(ids) - 1)) / (len(ids) - 1))


def quantized(a, d, name, f32_file, ids, text_file):
    """llama-quantize's files of `f32_file`, each against transformers reading it: edgefit read
    as f32 (every type dequantized) within the tolerance; with `auto` the kept blocks run the
    integer kernels (activations rounded per block) and Q2_K / Q3_K / IQ4_XS are converted to
    w4g32, so
    those rows are printed, not bounded. Only for cases whose reference is transformers reading
    the file (`gguf`)."""
    failed = []
    for q in QUANTS:
        out = os.path.join(d, f"model-{q}.gguf")
        r = subprocess.run([a.quantize, f32_file, out, q], capture_output=True, text=True)
        if r.returncode:
            print(f"{name:14s} {q:6s} llama-quantize failed: {r.stderr.strip()[-200:]}")
            failed.append(f"{name} {q}")
            continue
        back = AutoModelForCausalLM.from_pretrained(
            d, gguf_file=os.path.basename(out), dtype=torch.float32).eval()
        want = mean_nll(back, ids)
        got = {}
        for w in ("f32", "auto"):
            r = subprocess.run(
                [a.edgefit, "perplexity", "--model", out, "--text", text_file, "--weights", w,
                 "--kv", "f32", "--threads", "1", "--json"], capture_output=True, text=True)
            if r.returncode:
                print(f"{name:14s} {q:6s} edgefit --weights {w} failed: {r.stderr.strip()}")
                failed.append(f"{name} {q} {w}")
                break
            got[w] = json.loads(r.stdout.strip().splitlines()[-1])
        else:
            ok = abs(got["f32"]["mean_nll"] - want) <= TOLERANCE
            print(f"{name:14s} {q:6s} transformers-GGUF {want:.6f}  edgefit f32 "
                  f"{got['f32']['mean_nll'] - want:+.1e} {'ok' if ok else 'DIFFERS'}  "
                  f"auto ({got['auto']['weights']}) {got['auto']['mean_nll'] - want:+.1e}",
                  flush=True)
            if not ok:
                failed.append(f"{name} {q}")
    return failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llama-cpp", required=True, help="a llama.cpp source tree")
    ap.add_argument("--edgefit", required=True, help="the edgefit CLI")
    ap.add_argument("--out", default="/tmp/edgefit-converter-probe")
    ap.add_argument("--chars", type=int, default=600, help="characters of the text scored")
    ap.add_argument("--quantize", help="llama.cpp's llama-quantize: also quantize each f32 file "
                    "to " + ", ".join(QUANTS) + " and compare those (read as f32, and with "
                    "edgefit's default `auto`, which keeps the blocks it has kernels for)")
    ap.add_argument("cases", nargs="*")
    a = ap.parse_args()
    text = open(TEXT_FILE).read()[:a.chars]
    os.makedirs(a.out, exist_ok=True)
    text_file = os.path.join(a.out, "text.txt")
    with open(text_file, "w") as f:
        f.write(text)
    wrapper = os.path.join(a.out, "convert.py")
    with open(wrapper, "w") as f:
        f.write(WRAPPER)
    failed = []
    for name in a.cases or list(CASES):
        tok_case, pre, reference, cfg = CASES[name]
        cfg = dict(cfg, architectures=[CLASSES[cfg["model_type"]]])
        d = os.path.join(a.out, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        for f in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model"):
            if os.path.exists(os.path.join(ARCH, tok_case, f)):
                shutil.copy(os.path.join(ARCH, tok_case, f), d)
        if tok_case == "phi3":
            # Phi3MiniModel.set_vocab reads a BPE vocabulary only for a GPT2Tokenizer class
            # (Phi-4-mini's); otherwise it wants tokenizer.model.
            p = os.path.join(d, "tokenizer_config.json")
            t = json.load(open(p))
            t["tokenizer_class"] = "GPT2Tokenizer"
            json.dump(t, open(p, "w"))
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f)
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(d),
                                                 dtype=torch.float32).eval()
        fw.fill(model, 11, tok_case.startswith("gemma"))
        model.save_pretrained(d)
        ids = AutoTokenizer.from_pretrained(d)(text).input_ids
        hf = mean_nll(model, ids)
        for outtype in ("f32", "f16", "q8_0"):
            gguf = os.path.join(d, f"model-{outtype}.gguf")
            r = subprocess.run(
                [sys.executable, wrapper, a.llama_cpp, pre or "default",
                 "pattern" if name == "gemma3_layout" else "-", d, "--outtype", outtype,
                 "--outfile", gguf], capture_output=True, text=True)
            if r.returncode:
                print(f"{name:14s} {outtype:5s} conversion failed: "
                      f"{r.stderr.strip().splitlines()[-1]}")
                failed.append(f"{name} {outtype}")
                continue
            back = AutoModelForCausalLM.from_pretrained(
                d, gguf_file=os.path.basename(gguf), dtype=torch.float32).eval()
            from_gguf = mean_nll(back, ids)
            r = subprocess.run(
                [a.edgefit, "perplexity", "--model", gguf, "--text", text_file,
                 "--weights", "q8_0" if outtype == "q8_0" else "f32", "--kv", "f32",
                 "--threads", "1", "--json"], capture_output=True, text=True)
            if r.returncode:
                print(f"{name:14s} {outtype:5s} edgefit failed: {r.stderr.strip()}")
                failed.append(f"{name} {outtype}")
                continue
            ef = json.loads(r.stdout.strip().splitlines()[-1])
            # A checkpoint reference holds the unrounded weights: compared at f32 only.
            if reference == "hf" and outtype != "f32":
                print(f"{name:14s} {outtype:5s} tokens {len(ids) - 1:4d}  checkpoint {hf:.6f}  "
                      f"transformers-GGUF {from_gguf:.6f}  edgefit {ef['mean_nll']:.6f}  "
                      "(rounded weights: compared at f32 only)", flush=True)
                continue
            want = hf if reference == "hf" else from_gguf
            ok = abs(ef["mean_nll"] - want) <= TOLERANCE and ef["tokens"] == len(ids) - 1
            print(f"{name:14s} {outtype:5s} tokens {len(ids) - 1:4d}  checkpoint {hf:.6f}  "
                  f"transformers-GGUF {from_gguf:.6f}  edgefit {ef['mean_nll']:.6f}  "
                  f"vs {reference}: {ef['mean_nll'] - want:+.1e} {'ok' if ok else 'DIFFERS'}",
                  flush=True)
            if not ok:
                failed.append(f"{name} {outtype}")
            if a.quantize and outtype == "f32" and reference == "gguf":
                failed += quantized(a, d, name, gguf, ids, text_file)
    if failed:
        sys.exit("differs or failed: " + ", ".join(failed))


if __name__ == "__main__":
    main()
