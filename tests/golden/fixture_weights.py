"""The tiny fixtures' weights, reproducible outside Python, and the manifest the Rust tests
rebuild the model files from (`weights.json` in each case directory).

No model file is committed: `model*.safetensors` and `model*.gguf` are written by the scripts
(make_arch_goldens.py, make_phi3_gguf.py) for transformers to read, and rebuilt by the engine's
tests (`crates/engine/tests/it/common/fixtures.rs`) from `weights.json`:

- `tensors`: every HF tensor (f32) as `{"shape", "seed", "center", "scale"}`. Value `i` of a
  tensor (row-major) is `center + scale * (2u - 1) * sqrt(3)` in f64, rounded to f32, with
  `u = (z >> 11) * 2^-53` and `z = splitmix64(seed + (i + 1) * 0x9E3779B97F4A7C15)` (u64
  wrapping): a uniform value of mean `center` and standard deviation `scale`, the same bits in
  numpy and in Rust (integer mixing and exactly rounded f64 operations, no libm).
- `files`: each model file with the sha256 of the bytes the script wrote (the bytes
  transformers read for the goldens) and how to write it again:
  `{"safetensors": {"metadata", "tensors": [names]}}` or `{"gguf": {"version", "alignment",
  "kv": [[key, type, value], ...], "tensors": [{"name", "type", "dims", "from", "permute",
  "add"} | {"name", "type", "dims", "values"}]}}` in file order: `from` names the HF tensor,
  `permute` is llama.cpp's q/k row permutation with that many heads (convert_hf_to_gguf.py's
  `LlamaModel.permute`), `add` a constant added in f32 (Gemma's norms `1 + w`), `values` the
  f32 values themselves (Llama 3's `rope_freqs.weight`); `type` F32, F16, Q8_0 or Q4_0 (ggml's
  reference quantizers, as gguf-py's `quants.quantize`). The Rust side checks the sha256.
"""

import hashlib
import json
import os

import gguf
import numpy as np

GOLDEN = 0x9E3779B97F4A7C15
SQRT3 = 1.7320508075688772  # the f64 nearest sqrt(3), as Rust's 3f64.sqrt()
MANIFEST = "weights.json"


def values(seed, n, center, scale):
    """`n` f32 values of the generator described above."""
    with np.errstate(over="ignore"):
        i = np.arange(1, n + 1, dtype=np.uint64)
        z = np.uint64(seed) + i * np.uint64(GOLDEN)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)
    v = (2.0 * u - 1.0) * SQRT3
    return (np.float64(center) + np.float64(scale) * v).astype(np.float32)


def init_spec(name, shape, seed, gemma_norms):
    """What a tensor is drawn from: matrices sd 1/sqrt(fan_in), embeddings sd 0.5, norm
    weights around their identity (1 for w, 0 for Gemma's 1 + w) sd 0.3, biases sd 0.3."""
    if len(shape) == 1:
        if "norm" in name:
            center, scale = (0.0 if gemma_norms else 1.0), 0.3
        else:
            center, scale = 0.0, 0.3
    elif "embed_tokens" in name:
        center, scale = 0.0, 0.5
    else:
        center, scale = 0.0, 1.0 / float(np.sqrt(np.float64(shape[1])))
    return {"shape": list(shape), "seed": seed, "center": center, "scale": scale}


def fill(model, case_seed, gemma_norms):
    """Overwrites every parameter of a torch model with the generator's values (parameter k
    of `named_parameters()` gets seed `case_seed * 2^32 + k`); returns the specs by name."""
    import torch
    specs = {}
    with torch.no_grad():
        for k, (name, p) in enumerate(model.named_parameters()):
            spec = init_spec(name, tuple(p.shape), case_seed * 2**32 + k, gemma_norms)
            v = values(spec["seed"], p.numel(), spec["center"], spec["scale"])
            p.copy_(torch.from_numpy(v.reshape(p.shape)))
            specs[name] = spec
    return specs


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def safetensors_entry(path, names, metadata):
    return {"file": os.path.basename(path), "sha256": sha256(path),
            "safetensors": {"metadata": metadata, "tensors": list(names)}}


def _kv_type(field):
    t = field.types
    if t[0] == gguf.GGUFValueType.ARRAY:
        return "array:" + t[-1].name.lower()
    return t[0].name.lower()


def _kv_value(field):
    v = field.contents()
    if isinstance(v, list):
        return [float(x) if isinstance(x, float) else x for x in v]
    return v


def gguf_entry(path, recipes):
    """The manifest entry of a GGUF file written by gguf-py: its metadata as read back, its
    tensors in file order with `recipes[name]` (how the values come from the HF tensors)."""
    r = gguf.GGUFReader(path)
    kv = [[f.name, _kv_type(f), _kv_value(f)] for f in r.fields.values()
          if not f.name.startswith("GGUF.")]
    align = r.fields["general.alignment"].contents() if "general.alignment" in r.fields else 32
    tensors = []
    for t in r.tensors:
        e = {"name": t.name, "type": t.tensor_type.name, "dims": [int(d) for d in t.shape]}
        e.update(recipes[t.name])
        tensors.append(e)
    return {"file": os.path.basename(path), "sha256": sha256(path),
            "gguf": {"version": int(r.fields["GGUF.version"].contents()), "alignment": align,
                     "kv": kv, "tensors": tensors}}


def write_manifest(d, specs, files, source):
    with open(os.path.join(d, MANIFEST), "w") as f:
        json.dump({"note": "how the tests rebuild this case's model files: "
                           "tests/golden/fixture_weights.py; written by " + source,
                   "tensors": specs, "files": files}, f, indent=1)
        f.write("\n")
