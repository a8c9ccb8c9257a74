"""Reference values of the two i-quant block types edgefit reads itself (IQ4_NL, IQ4_XS), from
gguf-py's own dequantizer (an implementation independent of edgefit's), for
`crates/engine/tests/it/ggml_formats.rs`.

    /work/venv/bin/python tests/golden/make_iq4_goldens.py

Writes tests/golden/ggml/iq4.json: per type, the raw block bytes (a finite f16 scale, then
seeded random bytes) and the float32 values gguf.quants.dequantize gives for them.
"""
import importlib.metadata
import json
import os

import gguf
import numpy as np
from gguf.quants import dequantize

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ggml", "iq4.json")


def blocks(seed, scales, block_bytes):
    rng = np.random.default_rng(seed)
    out = []
    for d in scales:
        head = np.frombuffer(np.float16(d).tobytes(), dtype=np.uint8)
        out.append(np.concatenate([head, rng.integers(0, 256, block_bytes - 2, dtype=np.uint8)]))
    return np.concatenate(out).reshape(1, -1)


def entry(qtype, raw):
    values = dequantize(raw, qtype).reshape(-1)
    return {"bytes": [int(b) for b in raw.reshape(-1)],
            "values": [float(v) for v in values]}


def main():
    T = gguf.GGMLQuantizationType
    doc = {
        "note": "gguf-py " + importlib.metadata.version("gguf") + " gguf.quants.dequantize of "
                "the bytes; written by tests/golden/make_iq4_goldens.py",
        "iq4_nl": entry(T.IQ4_NL, blocks(7, [0.0123, -0.5, 3.0], 18)),
        "iq4_xs": entry(T.IQ4_XS, blocks(11, [0.0371, -0.002], 136)),
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    print(OUT, {k: len(v["values"]) for k, v in doc.items() if k != "note"})


if __name__ == "__main__":
    main()
