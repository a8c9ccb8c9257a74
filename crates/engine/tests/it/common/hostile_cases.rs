//! Hostile model files built from the synthetic model, shared by the engine's
//! `tests/hostile.rs` and the CLI's `tests/hostile.rs` (included there with `#[path]`): each
//! case is the bytes (or HF files), the kind of error the engine must return, and words its
//! message must contain. Plus the byte-patching helpers: a GGUF layout walker (where each
//! metadata value, tensor info and the data start are) and little-endian setters.
#![allow(dead_code)] // each test file uses its own subset

use edgefit_engine::synthetic::{gguf_bytes, gguf_bytes_with, hf_files, SyntheticDType, Value};

pub const SEED: u64 = 11;

/// One metadata entry's place in a GGUF file.
pub struct Kv {
    pub key: String,
    pub ty: u32,
    /// Byte offset of the value type (the u32 before the value).
    pub ty_at: usize,
    /// Byte offset of the value.
    pub value_at: usize,
}

/// One tensor info's place.
pub struct TensorAt {
    pub name: String,
    /// Byte offsets of the dims (u64 each, fastest-varying first).
    pub dims_at: Vec<usize>,
    pub n_dims_at: usize,
    pub dtype_at: usize,
    pub offset_at: usize,
    /// The tensor's data offset relative to the data start.
    pub offset: u64,
}

/// Where everything is in a GGUF v3 file written by candle (alignment 32).
pub struct Layout {
    pub kv: Vec<Kv>,
    pub tensors: Vec<TensorAt>,
    pub tensor_count_at: usize,
    /// End of the tensor infos (the header proper).
    pub header_end: usize,
    pub data_start: usize,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

pub fn set_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

pub fn set_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn value_end(b: &[u8], at: usize, ty: u32) -> usize {
    match ty {
        0 | 1 | 7 => at + 1,
        2 | 3 => at + 2,
        4..=6 => at + 4,
        10..=12 => at + 8,
        8 => at + 8 + u64_at(b, at) as usize,
        9 => {
            let elem = u32_at(b, at);
            let n = u64_at(b, at + 4);
            let mut p = at + 12;
            for _ in 0..n {
                p = value_end(b, p, elem);
            }
            p
        }
        t => panic!("value type {t}"),
    }
}

pub fn layout(b: &[u8]) -> Layout {
    assert_eq!(&b[..4], b"GGUF");
    let n_tensors = u64_at(b, 8);
    let n_kv = u64_at(b, 16);
    let mut p = 24;
    let mut kv = Vec::new();
    for _ in 0..n_kv {
        let len = u64_at(b, p) as usize;
        let key = String::from_utf8(b[p + 8..p + 8 + len].to_vec()).unwrap();
        let ty_at = p + 8 + len;
        let ty = u32_at(b, ty_at);
        let value_at = ty_at + 4;
        p = value_end(b, value_at, ty);
        kv.push(Kv {
            key,
            ty,
            ty_at,
            value_at,
        });
    }
    let mut tensors = Vec::new();
    for _ in 0..n_tensors {
        let len = u64_at(b, p) as usize;
        let name = String::from_utf8(b[p + 8..p + 8 + len].to_vec()).unwrap();
        let n_dims_at = p + 8 + len;
        let n = u32_at(b, n_dims_at) as usize;
        let dims_at = (0..n).map(|i| n_dims_at + 4 + 8 * i).collect();
        let dtype_at = n_dims_at + 4 + 8 * n;
        let offset_at = dtype_at + 4;
        tensors.push(TensorAt {
            name,
            dims_at,
            n_dims_at,
            dtype_at,
            offset_at,
            offset: u64_at(b, offset_at),
        });
        p = offset_at + 8;
    }
    Layout {
        kv,
        tensors,
        tensor_count_at: 8,
        header_end: p,
        data_start: p.div_ceil(32) * 32,
    }
}

impl Layout {
    pub fn kv(&self, key: &str) -> &Kv {
        self.kv.iter().find(|k| k.key == key).expect(key)
    }
    pub fn tensor(&self, name: &str) -> &TensorAt {
        self.tensors.iter().find(|t| t.name == name).expect(name)
    }
    /// Absolute byte offset of `name`'s data.
    pub fn data_of(&self, name: &str) -> usize {
        self.data_start + self.tensor(name).offset as usize
    }
}

/// What kind of [`edgefit_engine::EngineError`] a case must give.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Format,
    Metadata,
    Unsupported,
    Config,
    Tensor,
    Tokenizer,
    OverBudget,
}

/// A hostile GGUF file.
pub struct GgufCase {
    pub name: &'static str,
    pub bytes: Vec<u8>,
    pub kind: Kind,
    /// Words the message must contain (the field and the value).
    pub needles: Vec<String>,
}

fn case(name: &'static str, bytes: Vec<u8>, kind: Kind, needles: &[&str]) -> GgufCase {
    GgufCase {
        name,
        bytes,
        kind,
        needles: needles.iter().map(|s| s.to_string()).collect(),
    }
}

pub fn good(dtype: SyntheticDType) -> Vec<u8> {
    gguf_bytes(SEED, dtype).unwrap()
}

/// The synthetic Q8_0 file with `key` set to `value` (added when absent).
fn with_key(key: &str, value: Value) -> Vec<u8> {
    gguf_bytes_with(SEED, SyntheticDType::Q8_0, |md| {
        md.retain(|(k, _)| k != key);
        md.push((key.to_string(), value));
    })
    .unwrap()
}

fn without_key(key: &str) -> Vec<u8> {
    gguf_bytes_with(SEED, SyntheticDType::Q8_0, |md| {
        md.retain(|(k, _)| k != key)
    })
    .unwrap()
}

/// Patches the synthetic file of `dtype` in place with `patch(bytes, layout)`.
fn patched(dtype: SyntheticDType, patch: impl FnOnce(&mut Vec<u8>, &Layout)) -> Vec<u8> {
    let mut b = good(dtype);
    let l = layout(&b);
    patch(&mut b, &l);
    b
}

/// Every hostile GGUF case (truncations are tested separately, at many offsets).
pub fn gguf_cases() -> Vec<GgufCase> {
    use Kind::*;
    use SyntheticDType::{F32, Q8_0};
    let mut v = vec![
        case("empty file", Vec::new(), Format, &["0 bytes", "too short"]),
        case(
            "text file renamed to .gguf",
            b"hello, this is not a model\n".to_vec(),
            Format,
            &["GGUF magic", "68, 65, 6c, 6c"],
        ),
        case(
            "wrong magic",
            patched(Q8_0, |b, _| b[..4].copy_from_slice(b"GGML")),
            Format,
            &["GGUF magic"],
        ),
    ];
    for version in [0u32, 1, 4, u32::MAX] {
        let name: &'static str = match version {
            0 => "version 0",
            1 => "version 1",
            4 => "version 4",
            _ => "version u32::MAX",
        };
        v.push(GgufCase {
            name,
            bytes: patched(Q8_0, |b, _| set_u32(b, 4, version)),
            kind: Unsupported,
            needles: vec![format!("GGUF version {version}")],
        });
    }
    v.extend([
        case(
            "tensor count 2^40",
            patched(Q8_0, |b, l| set_u64(b, l.tensor_count_at, 1 << 40)),
            Format,
            &["1099511627776 tensors"],
        ),
        case(
            "metadata count 2^40",
            patched(Q8_0, |b, _| set_u64(b, 16, 1 << 40)),
            Format,
            &["1099511627776 metadata entries"],
        ),
        case(
            "string length past the end",
            patched(Q8_0, |b, l| {
                set_u64(b, l.kv("general.name").value_at, 1 << 50)
            }),
            Format,
            &["general.name", "1125899906842624 bytes", "file ends"],
        ),
        case(
            "array length 2^40",
            patched(Q8_0, |b, l| {
                set_u64(b, l.kv("tokenizer.ggml.tokens").value_at + 4, 1 << 40)
            }),
            Metadata,
            &["tokenizer.ggml.tokens", "1099511627776 elements"],
        ),
        case(
            "unknown metadata value type",
            patched(Q8_0, |b, l| set_u32(b, l.kv("general.name").ty_at, 99)),
            Metadata,
            &["general.name", "value type 99"],
        ),
        case(
            "general.alignment 0",
            with_key("general.alignment", Value::U32(0)),
            Metadata,
            &["general.alignment", "0 is not a power of two"],
        ),
        case(
            "general.alignment 48",
            with_key("general.alignment", Value::U32(48)),
            Metadata,
            &["general.alignment", "48 is not a power of two"],
        ),
        case(
            "general.alignment -32",
            with_key("general.alignment", Value::I32(-32)),
            Metadata,
            &["general.alignment", "-32 is not a power of two"],
        ),
        case(
            "unknown tensor dtype",
            patched(Q8_0, |b, l| {
                set_u32(b, l.tensor("blk.0.attn_q.weight").dtype_at, 99)
            }),
            Format,
            &["blk.0.attn_q.weight", "ggml type 99"],
        ),
        case(
            "i-quant tensor (IQ3_S)",
            patched(Q8_0, |b, l| {
                set_u32(b, l.tensor("blk.1.ffn_down.weight").dtype_at, 21)
            }),
            Format,
            &["blk.1.ffn_down.weight", "IQ3_S", "does not read"],
        ),
        case(
            "tensor with 5 dims",
            patched(Q8_0, |b, l| {
                set_u32(b, l.tensor("token_embd.weight").n_dims_at, 5)
            }),
            Format,
            &["token_embd.weight", "5 dimensions"],
        ),
        case(
            "tensor data past the end",
            patched(Q8_0, |b, l| {
                let at = l.tensor("blk.1.ffn_down.weight").offset_at;
                let len = b.len() as u64;
                set_u64(b, at, len)
            }),
            Tensor,
            &["blk.1.ffn_down.weight", "run past the end of the file"],
        ),
        case(
            "tensor offset near 2^64",
            patched(Q8_0, |b, l| {
                set_u64(b, l.tensor("output_norm.weight").offset_at, u64::MAX - 8)
            }),
            Tensor,
            &[
                "output_norm.weight",
                "18446744073709551607",
                "run past the end",
            ],
        ),
        case(
            "overlapping tensors",
            patched(Q8_0, |b, l| {
                let first = l.tensor("blk.0.attn_q.weight").offset;
                set_u64(b, l.tensor("blk.0.attn_k.weight").offset_at, first + 32)
            }),
            Tensor,
            &["overlap tensor", "blk.0.attn_q.weight"],
        ),
        case(
            "dims whose product overflows",
            patched(Q8_0, |b, l| {
                let t = l.tensor("token_embd.weight");
                set_u64(b, t.dims_at[0], 1 << 40);
                set_u64(b, t.dims_at[1], 1 << 40);
            }),
            Tensor,
            &["token_embd.weight", "multiply past 2^64"],
        ),
        case(
            "absurd dims claiming 100 GB",
            patched(Q8_0, |b, l| {
                let t = l.tensor("token_embd.weight");
                set_u64(b, t.dims_at[0], 65_536);
                set_u64(b, t.dims_at[1], 1_600_000);
            }),
            Tensor,
            &[
                "token_embd.weight",
                "111411200000 bytes",
                "run past the end",
            ],
        ),
        case(
            "NaN in a norm weight",
            patched(F32, |b, l| {
                let at = l.data_of("blk.0.attn_norm.weight") + 4 * 5;
                b[at..at + 4].copy_from_slice(&f32::NAN.to_le_bytes());
            }),
            Tensor,
            &["blk.0.attn_norm.weight", "NaN at index 5"],
        ),
        case(
            "+Inf in a weight matrix",
            patched(F32, |b, l| {
                let at = l.data_of("blk.1.ffn_up.weight") + 4 * 77;
                b[at..at + 4].copy_from_slice(&f32::INFINITY.to_le_bytes());
            }),
            Tensor,
            &["blk.1.ffn_up.weight", "inf at index 77"],
        ),
        case(
            "NaN block scale in a Q8_0 matrix",
            patched(Q8_0, |b, l| {
                // Block 3's f16 scale: 0x7e00 is a NaN.
                let at = l.data_of("blk.0.attn_v.weight") + 34 * 3;
                b[at..at + 2].copy_from_slice(&0x7e00u16.to_le_bytes());
            }),
            Tensor,
            &["blk.0.attn_v.weight", "NaN", "values 96..128"],
        ),
        case(
            "zero heads",
            with_key("llama.attention.head_count", Value::U32(0)),
            Config,
            &["n_heads = 0"],
        ),
        case(
            "zero KV heads",
            with_key("llama.attention.head_count_kv", Value::U32(0)),
            Config,
            &["n_kv_heads = 0"],
        ),
        case(
            "head counts that do not divide",
            with_key("llama.attention.head_count_kv", Value::U32(3)),
            Config,
            &["n_heads = 4", "not a multiple of n_kv_heads = 3"],
        ),
        case(
            "hidden not divisible by heads",
            with_key("llama.attention.head_count", Value::U32(5)),
            Config,
            &[
                "llama.embedding_length` = 64",
                "llama.attention.head_count` = 5",
            ],
        ),
        case(
            "head_dim 0",
            with_key("llama.attention.key_length", Value::U32(0)),
            Config,
            &["head_dim = 0"],
        ),
        case(
            "500 000 layers",
            with_key("llama.block_count", Value::U32(500_000)),
            Config,
            &["n_layers = 500000"],
        ),
        case(
            "hidden 200 000",
            with_key("llama.embedding_length", Value::U32(200_000)),
            Config,
            &["hidden = 200000"],
        ),
        case(
            "context 2^40",
            with_key("llama.context_length", Value::U64(1 << 40)),
            Config,
            &["context_length = 1099511627776"],
        ),
        case(
            "negative context",
            with_key("llama.context_length", Value::I32(-5)),
            Metadata,
            &[
                "llama.context_length",
                "-5 is not a valid count (a count cannot be negative)",
            ],
        ),
        case(
            "block count as a string",
            with_key("llama.block_count", Value::String("many".into())),
            Metadata,
            &["llama.block_count", "not an integer"],
        ),
        case(
            "missing embedding length",
            without_key("llama.embedding_length"),
            Metadata,
            &["llama.embedding_length", "missing"],
        ),
        case(
            "NaN RMSNorm epsilon",
            with_key(
                "llama.attention.layer_norm_rms_epsilon",
                Value::F32(f32::NAN),
            ),
            Config,
            &["RMSNorm epsilon = NaN"],
        ),
        case(
            "unsupported architecture",
            with_key("general.architecture", Value::String("gemma".into())),
            Unsupported,
            &["gemma"],
        ),
        case(
            "vocab smaller than the tokenizer",
            with_key("llama.vocab_size", Value::U32(100)),
            Config,
            &["tokenizer has", "vocabulary is 100"],
        ),
        case(
            "token types shorter than tokens",
            with_key(
                "tokenizer.ggml.token_type",
                Value::Array(vec![Value::I32(1); 10]),
            ),
            Metadata,
            &["tokenizer.ggml.token_type", "10 entries for"],
        ),
        case(
            "merge of a missing token",
            with_key(
                "tokenizer.ggml.merges",
                Value::Array(vec![Value::String("Ġ zzzz".into())]),
            ),
            Tokenizer,
            &["tokenizer.ggml.merges", "zzzz"],
        ),
        case(
            "merge without a space",
            with_key(
                "tokenizer.ggml.merges",
                Value::Array(vec![Value::String("Ġt".into())]),
            ),
            Metadata,
            &["tokenizer.ggml.merges", "entry 0"],
        ),
        case(
            "BOS id out of range",
            with_key("tokenizer.ggml.bos_token_id", Value::U32(100_000)),
            Metadata,
            &["tokenizer.ggml.bos_token_id", "100000"],
        ),
        case(
            "EOS id beyond u32",
            with_key("tokenizer.ggml.eos_token_id", Value::U64(1 << 33)),
            Metadata,
            &["tokenizer.ggml.eos_token_id", "8589934592"],
        ),
        case(
            "per-layer shape array of the wrong length",
            with_key(
                "edgefit.layers.head_count",
                Value::Array(vec![Value::U32(4)]),
            ),
            Metadata,
            &["edgefit.layers.head_count", "1 entries for 2 layers"],
        ),
        case(
            "tokens not strings",
            with_key(
                "tokenizer.ggml.tokens",
                Value::Array(vec![Value::U32(1); 4]),
            ),
            Metadata,
            &["tokenizer.ggml.tokens", "non-string"],
        ),
    ]);
    v
}

/// A metadata header claiming a big model (4096 hidden, 500 layers) over the synthetic file's
/// small tensors: consistent enough to pass the shape checks, refused by the preflight under a
/// budget (and by the first tensor's shape without one).
pub fn claims_big_model() -> Vec<u8> {
    gguf_bytes_with(SEED, SyntheticDType::Q8_0, |md| {
        for (k, v) in md.iter_mut() {
            match k.as_str() {
                "llama.embedding_length" => *v = Value::U32(4096),
                "llama.block_count" => *v = Value::U32(500),
                "llama.feed_forward_length" => *v = Value::U32(16_384),
                "llama.rope.dimension_count" => *v = Value::U32(1024),
                "llama.context_length" => *v = Value::U32(32_768),
                _ => {}
            }
        }
    })
    .unwrap()
}

/// HF files: `(config.json, tokenizer.json, tokenizer_config.json, model.safetensors)`.
pub type HfFiles = (String, String, String, Vec<u8>);

/// A hostile HF model.
pub struct HfCase {
    pub name: &'static str,
    pub files: HfFiles,
    pub kind: Kind,
    pub needles: Vec<String>,
}

pub fn good_hf() -> HfFiles {
    hf_files(SEED).unwrap()
}

fn with_config(edit: impl FnOnce(&mut serde_json::Value)) -> HfFiles {
    let mut f = good_hf();
    let mut c: serde_json::Value = serde_json::from_str(&f.0).unwrap();
    edit(&mut c);
    f.0 = c.to_string();
    f
}

/// The safetensors header (JSON) and data of `st`.
pub fn st_split(st: &[u8]) -> (serde_json::Value, Vec<u8>) {
    let n = u64::from_le_bytes(st[..8].try_into().unwrap()) as usize;
    (
        serde_json::from_slice(&st[8..8 + n]).unwrap(),
        st[8 + n..].to_vec(),
    )
}

pub fn st_join(header: &serde_json::Value, data: &[u8]) -> Vec<u8> {
    let mut h = header.to_string().into_bytes();
    while !h.len().is_multiple_of(8) {
        h.push(b' ');
    }
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend(h);
    out.extend(data);
    out
}

fn with_st(edit: impl FnOnce(&mut serde_json::Value, &mut Vec<u8>)) -> HfFiles {
    let mut f = good_hf();
    let (mut h, mut d) = st_split(&f.3);
    edit(&mut h, &mut d);
    f.3 = st_join(&h, &d);
    f
}

fn hf_case(name: &'static str, files: HfFiles, kind: Kind, needles: &[&str]) -> HfCase {
    HfCase {
        name,
        files,
        kind,
        needles: needles.iter().map(|s| s.to_string()).collect(),
    }
}

pub fn hf_cases() -> Vec<HfCase> {
    use Kind::*;
    let set = |key: &'static str, v: serde_json::Value| {
        with_config(move |c| {
            c[key] = v;
        })
    };
    let norm = "model.layers.0.input_layernorm.weight";
    vec![
        hf_case(
            "config.json not JSON",
            {
                let mut f = good_hf();
                f.0 = "{ this is not json".into();
                f
            },
            Config,
            &["config.json is not JSON"],
        ),
        hf_case(
            "config.json an array",
            {
                let mut f = good_hf();
                f.0 = "[1, 2]".into();
                f
            },
            Config,
            &["config.json is an array"],
        ),
        hf_case(
            "hidden_size a string",
            set("hidden_size", serde_json::json!("64")),
            Config,
            &["`hidden_size` = \"64\"", "non-negative integer"],
        ),
        hf_case(
            "hidden_size negative",
            set("hidden_size", serde_json::json!(-64)),
            Config,
            &["`hidden_size` = -64"],
        ),
        hf_case(
            "num_hidden_layers 1e12",
            set("num_hidden_layers", serde_json::json!(1_000_000_000_000u64)),
            Config,
            &["n_layers = 1000000000000"],
        ),
        hf_case(
            "zero heads",
            set("num_attention_heads", serde_json::json!(0)),
            Config,
            &["n_heads = 0"],
        ),
        hf_case(
            "head counts that do not divide",
            set("num_key_value_heads", serde_json::json!(3)),
            Config,
            &["not a multiple of n_kv_heads = 3"],
        ),
        hf_case(
            "hidden not divisible by heads",
            set("num_attention_heads", serde_json::json!(5)),
            Config,
            &["`hidden_size` = 64", "`num_attention_heads` = 5"],
        ),
        hf_case(
            "rope_theta overflowing f32",
            set("rope_theta", serde_json::json!(1e39)),
            Config,
            &["`rope_theta`", "finite number"],
        ),
        hf_case(
            "vocab smaller than the tokenizer",
            set("vocab_size", serde_json::json!(100)),
            Config,
            &["tokenizer has", "vocabulary is 100"],
        ),
        hf_case(
            "eos_token_id out of range",
            set("eos_token_id", serde_json::json!(1u64 << 40)),
            Config,
            &["`eos_token_id` = 1099511627776"],
        ),
        hf_case(
            "tokenizer.json garbage",
            {
                let mut f = good_hf();
                f.1 = "{\"model\": 42}".into();
                f
            },
            Tokenizer,
            &["tokenizer.json"],
        ),
        hf_case(
            "safetensors truncated",
            {
                let mut f = good_hf();
                let n = f.3.len();
                f.3.truncate(n - 100);
                f
            },
            Format,
            &["safetensors shard 0"],
        ),
        hf_case(
            "safetensors header length 2^40",
            {
                let mut f = good_hf();
                f.3[..8].copy_from_slice(&(1u64 << 40).to_le_bytes());
                f
            },
            Format,
            &["safetensors shard 0"],
        ),
        hf_case(
            "safetensors offsets past the end",
            with_st(|h, d| {
                let end = d.len() as u64;
                h[norm]["data_offsets"] = serde_json::json!([end, end + 256]);
            }),
            Format,
            &["safetensors shard 0"],
        ),
        hf_case(
            "safetensors dtype and shape mismatch",
            with_st(|h, _| h[norm]["dtype"] = serde_json::json!("F16")),
            Format,
            &["safetensors shard 0"],
        ),
        hf_case(
            "safetensors overlapping tensors",
            with_st(|h, _| {
                let other =
                    h["model.layers.0.post_attention_layernorm.weight"]["data_offsets"].clone();
                h[norm]["data_offsets"] = other;
            }),
            Format,
            &["safetensors shard 0"],
        ),
        hf_case(
            "NaN in a safetensors norm",
            with_st(|h, d| {
                let start = h[norm]["data_offsets"][0].as_u64().unwrap() as usize + 4 * 9;
                d[start..start + 4].copy_from_slice(&f32::NAN.to_le_bytes());
            }),
            Tensor,
            &[norm, "NaN at index 9"],
        ),
    ]
}
