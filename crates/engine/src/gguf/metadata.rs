//! Typed reads of a GGUF header's metadata: the tokenizer's fields, strings, integers, floats,
//! and the per-layer shapes of a structurally pruned model (`edgefit.layers.*`), each refusing
//! a missing or mistyped key by name.

use std::collections::HashMap;

use candle_core::quantized::gguf_file::Value;

use crate::config::LayerShape;
use crate::error::{EngineError, Result};
use crate::tokenizer::GgufTokenizerFields;

/// The array at `key` with every element read by `item` (an empty list when the key is
/// missing), refusing a non-array or an element `item` cannot read ("holds a non-`what`").
fn array<T>(
    md: &HashMap<String, Value>,
    key: &str,
    what: &str,
    item: impl Fn(&Value) -> Option<T>,
) -> Result<Vec<T>> {
    let Some(v) = md.get(key) else {
        return Ok(Vec::new());
    };
    v.to_vec()
        .map_err(|_| EngineError::metadata(key, "is not an array"))?
        .iter()
        .map(|x| item(x).ok_or_else(|| EngineError::metadata(key, format!("holds a non-{what}"))))
        .collect()
}

pub(super) fn tokenizer_fields(md: &HashMap<String, Value>) -> Result<GgufTokenizerFields> {
    let strings = |key: &str| array(md, key, "string", |x| x.to_string().ok().cloned());
    let id = |key: &str| -> Result<Option<u32>> {
        opt_usize(md, key)?
            .map(|v| {
                u32::try_from(v)
                    .map_err(|_| EngineError::metadata(key, format!("{v} is not a token id")))
            })
            .transpose()
    };
    Ok(GgufTokenizerFields {
        model: get_str(md, "tokenizer.ggml.model")?,
        pre: opt_str(md, "tokenizer.ggml.pre").unwrap_or_default(),
        tokens: strings("tokenizer.ggml.tokens")?,
        token_types: array(md, "tokenizer.ggml.token_type", "i32", |x| x.to_i32().ok())?,
        merges: strings("tokenizer.ggml.merges")?,
        scores: array(md, "tokenizer.ggml.scores", "f32", |x| x.to_f32().ok())?,
        bos: id("tokenizer.ggml.bos_token_id")?,
        eos: id("tokenizer.ggml.eos_token_id")?,
        eot: id("tokenizer.ggml.eot_token_id")?,
        eom: id("tokenizer.ggml.eom_token_id")?,
        unk: id("tokenizer.ggml.unknown_token_id")?,
        add_space_prefix: match md.get("tokenizer.ggml.add_space_prefix") {
            None => None,
            Some(v) => Some(v.to_bool().map_err(|_| {
                EngineError::metadata("tokenizer.ggml.add_space_prefix", "is not a bool")
            })?),
        },
        add_bos: match md.get("tokenizer.ggml.add_bos_token") {
            None => false,
            Some(v) => v.to_bool().map_err(|_| {
                EngineError::metadata("tokenizer.ggml.add_bos_token", "is not a bool")
            })?,
        },
        chat_template: opt_str(md, "tokenizer.chat_template"),
    })
}

pub(super) fn get_str(md: &HashMap<String, Value>, key: &str) -> Result<String> {
    match md.get(key) {
        None => Err(EngineError::metadata(key, "missing")),
        Some(v) => v
            .to_string()
            .cloned()
            .map_err(|_| EngineError::metadata(key, "is not a string")),
    }
}

pub(super) fn opt_str(md: &HashMap<String, Value>, key: &str) -> Option<String> {
    md.get(key).and_then(|v| v.to_string().ok().cloned())
}

pub(super) fn opt_usize(md: &HashMap<String, Value>, key: &str) -> Result<Option<usize>> {
    md.get(key).map(|v| value_usize(key, v)).transpose()
}

fn value_usize(key: &str, v: &Value) -> Result<usize> {
    let n: i128 = match v {
        Value::U8(x) => (*x).into(),
        Value::U16(x) => (*x).into(),
        Value::U32(x) => (*x).into(),
        Value::U64(x) => (*x).into(),
        Value::I8(x) => (*x).into(),
        Value::I16(x) => (*x).into(),
        Value::I32(x) => (*x).into(),
        Value::I64(x) => (*x).into(),
        _ => return Err(EngineError::metadata(key, "is not an integer")),
    };
    usize::try_from(n).map_err(|_| {
        let why = if n < 0 {
            "a count cannot be negative".to_string()
        } else {
            format!("at most {} in this build", usize::MAX)
        };
        EngineError::metadata(key, format!("{n} is not a valid count ({why})"))
    })
}

/// Per-layer shapes from the `edgefit.layers.*` keys (see the module docs), if present.
pub(super) fn layer_shapes(
    md: &HashMap<String, Value>,
    n_layers: usize,
) -> Result<Option<Vec<LayerShape>>> {
    const PREFIX: &str = "edgefit.layers.";
    if !md.keys().any(|k| k.starts_with(PREFIX)) {
        return Ok(None);
    }
    let field = |name: &str| -> Result<Vec<usize>> {
        let key = format!("{PREFIX}{name}");
        let v = opt_usize_array(md, &key)?.ok_or_else(|| EngineError::metadata(&key, "missing"))?;
        if v.len() != n_layers {
            return Err(EngineError::metadata(
                &key,
                format!("has {} entries for {n_layers} layers", v.len()),
            ));
        }
        Ok(v)
    };
    let (heads, kv_heads, qk, v, ffn) = (
        field("head_count")?,
        field("head_count_kv")?,
        field("key_length")?,
        field("value_length")?,
        field("feed_forward_length")?,
    );
    let pairs_key = format!("{PREFIX}rope_pairs");
    let pairs = opt_usize_array(md, &pairs_key)?
        .ok_or_else(|| EngineError::metadata(&pairs_key, "missing"))?;
    let mut rest = pairs.as_slice();
    let mut layers = Vec::with_capacity(n_layers);
    for i in 0..n_layers {
        let n = qk[i] / 2;
        if rest.len() < n {
            return Err(EngineError::metadata(
                &pairs_key,
                format!("ends before layer {i}'s {n} pairs"),
            ));
        }
        let (mine, tail) = rest.split_at(n);
        rest = tail;
        let rope_pairs = mine
            .iter()
            .map(|&p| {
                u16::try_from(p).map_err(|_| {
                    EngineError::metadata(&pairs_key, format!("pair {p} is too large"))
                })
            })
            .collect::<Result<_>>()?;
        layers.push(LayerShape {
            n_heads: heads[i],
            n_kv_heads: kv_heads[i],
            qk_dim: qk[i],
            v_dim: v[i],
            ffn: ffn[i],
            rope_pairs,
        });
    }
    if !rest.is_empty() {
        return Err(EngineError::metadata(
            &pairs_key,
            format!(
                "has {} entries beyond the layers' key_length / 2",
                rest.len()
            ),
        ));
    }
    Ok(Some(layers))
}

fn opt_usize_array(md: &HashMap<String, Value>, key: &str) -> Result<Option<Vec<usize>>> {
    let Some(v) = md.get(key) else {
        return Ok(None);
    };
    let Value::Array(items) = v else {
        return Err(EngineError::metadata(key, "is not an array"));
    };
    items
        .iter()
        .map(|x| value_usize(key, x))
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

pub(super) fn get_usize(md: &HashMap<String, Value>, key: &str) -> Result<usize> {
    opt_usize(md, key)?.ok_or_else(|| EngineError::metadata(key, "missing"))
}

pub(super) fn opt_f32(md: &HashMap<String, Value>, key: &str) -> Result<Option<f32>> {
    match md.get(key) {
        None => Ok(None),
        Some(Value::F32(x)) => Ok(Some(*x)),
        Some(Value::F64(x)) => Ok(Some(*x as f32)),
        Some(_) => Err(EngineError::metadata(key, "is not a float")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn md(key: &str, v: Value) -> HashMap<String, Value> {
        HashMap::from([(key.to_string(), v)])
    }

    #[test]
    fn one_array_reader_for_every_element_type() {
        let k = "tokenizer.ggml.scores";
        let f32s = |m: &HashMap<String, Value>| array(m, k, "f32", |x| x.to_f32().ok());
        assert_eq!(
            f32s(&HashMap::new()).unwrap(),
            Vec::<f32>::new(),
            "missing: empty"
        );
        let ok = md(k, Value::Array(vec![Value::F32(0.5), Value::F32(-1.0)]));
        assert_eq!(f32s(&ok).unwrap(), vec![0.5, -1.0]);
        let problem = |r: Result<Vec<f32>>| match r {
            Err(EngineError::Metadata { key, problem }) => (key, problem),
            other => panic!("expected a metadata error, got {other:?}"),
        };
        assert_eq!(
            problem(f32s(&md(k, Value::F32(1.0)))),
            (k.to_string(), "is not an array".to_string())
        );
        let mixed = md(
            k,
            Value::Array(vec![Value::F32(0.5), Value::String("x".into())]),
        );
        assert_eq!(
            problem(f32s(&mixed)),
            (k.to_string(), "holds a non-f32".to_string())
        );
        // The tokenizer's three arrays read through it, each naming its own key and type.
        let mut m = md("tokenizer.ggml.model", Value::String("gpt2".into()));
        m.insert(
            "tokenizer.ggml.token_type".into(),
            Value::Array(vec![Value::I32(1), Value::F32(2.0)]),
        );
        match tokenizer_fields(&m) {
            Err(EngineError::Metadata { key, problem }) => {
                assert_eq!(
                    (key.as_str(), problem.as_str()),
                    ("tokenizer.ggml.token_type", "holds a non-i32")
                )
            }
            other => panic!("expected the token_type error, got {:?}", other.map(|_| ())),
        }
        m.remove("tokenizer.ggml.token_type");
        m.insert(
            "tokenizer.ggml.tokens".into(),
            Value::Array(vec![Value::String("a".into()), Value::String("b".into())]),
        );
        let t = tokenizer_fields(&m).unwrap();
        assert_eq!(t.tokens, ["a", "b"]);
        assert!(t.token_types.is_empty() && t.scores.is_empty() && t.merges.is_empty());
    }
}
