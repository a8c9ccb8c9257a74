//! Every architecture of the engine's table on the synthetic shape (random weights, its optional
//! tensors included), checked three ways:
//! - written by the HF and GGUF exporters and read back by both loaders, the logits are the
//!   model's own, bit for bit (the rotate-half permutation of q/k weights, biases and norms
//!   undone exactly, for GGUF only where the architecture keeps rotate-half order);
//! - against a plain f64 forward written here from the transformers definitions, on the HF
//!   tensors as exported (rotate-half RoPE, biases, per-head q/k RMSNorm, GQA), within a
//!   bound derived below;
//! - the estimator counts the same parameters and the held bytes agree.
#![cfg(not(target_arch = "wasm32"))]

use std::collections::HashMap;

use edgefit_engine::export::{gguf_bytes, hf_files, ExportDType, GgufDType};
use edgefit_engine::hf::load_hf;
use edgefit_engine::synthetic::model_of;
use edgefit_engine::{LoadOptions, Logits, Model, WeightsFormat};
use safetensors::SafeTensors;

const F32: LoadOptions = LoadOptions {
    weights: WeightsFormat::F32,
    embedding: None,
    requantize: false,
};

const TOKENS: [u32; 12] = [3, 9, 14, 4, 22, 7, 30, 11, 5, 18, 2, 27];

fn logits(model: &Model, tokens: &[u32]) -> Vec<f32> {
    let mut cache = model.new_cache(64);
    model.forward(tokens, &mut cache, Logits::All).unwrap()
}

/// The architectures with the head size each is tried at (Qwen3 with `head_dim` ≠
/// hidden / heads, as Qwen3 ships).
const CASES: [(&str, usize); 4] = [("llama", 16), ("mistral", 16), ("qwen2", 16), ("qwen3", 24)];

#[test]
fn every_architecture_round_trips_through_both_formats_exactly() {
    for (arch, hd) in CASES {
        let (model, tok) = model_of(arch, 7, hd).unwrap();
        let want = logits(&model, &TOKENS);
        let files: HashMap<String, Vec<u8>> = hf_files(&model, &tok, ExportDType::F32)
            .unwrap()
            .into_iter()
            .collect();
        let text = |n: &str| String::from_utf8(files[n].clone()).unwrap();
        let (hf, _) = load_hf(
            &text("config.json"),
            &files["tokenizer.json"],
            Some(&text("tokenizer_config.json")),
            &[&files["model.safetensors"]],
            F32,
        )
        .unwrap_or_else(|e| panic!("{arch}: {e}"));
        assert_eq!(hf.config, model.config, "{arch}");
        assert_eq!(logits(&hf, &TOKENS), want, "{arch}: HF round trip");
        let bytes = gguf_bytes(&model, &tok, GgufDType::F32).unwrap();
        let (g, _) =
            edgefit_engine::gguf::load_gguf(&mut std::io::Cursor::new(bytes), F32, &mut |_, _| {})
                .unwrap_or_else(|e| panic!("{arch}: {e}"));
        assert_eq!(g.config.arch, arch);
        assert_eq!(logits(&g, &TOKENS), want, "{arch}: GGUF round trip");
        // One parameter count, and the bytes held are the parameters at f32.
        let spec = model.config.to_spec();
        assert_eq!(spec.params().total, model.config.params());
        assert_eq!(model.weights.bytes(), 4 * model.config.params(), "{arch}");
    }
}

/// The transformers forward of a LLaMA-style decoder with the optional features, in f64, on
/// the HF tensors (q/k in rotate-half order).
struct Reference<'a> {
    st: SafeTensors<'a>,
    cfg: serde_json::Value,
}

impl Reference<'_> {
    fn t(&self, name: &str) -> Option<Vec<f64>> {
        let v = self.st.tensor(name).ok()?;
        Some(
            v.data()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64)
                .collect(),
        )
    }
    fn u(&self, k: &str) -> usize {
        self.cfg[k].as_u64().unwrap() as usize
    }

    fn logits(&self, tokens: &[u32]) -> Vec<f64> {
        let (h, nh, nkv, hd, ffn, vocab) = (
            self.u("hidden_size"),
            self.u("num_attention_heads"),
            self.u("num_key_value_heads"),
            self.u("head_dim"),
            self.u("intermediate_size"),
            self.u("vocab_size"),
        );
        let eps = self.cfg["rms_norm_eps"].as_f64().unwrap();
        let theta = self.cfg["rope_theta"].as_f64().unwrap();
        let rms = |x: &[f64], w: &[f64]| -> Vec<f64> {
            let ms = x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64;
            let inv = 1.0 / (ms + eps).sqrt();
            x.iter().zip(w).map(|(v, g)| v * inv * g).collect()
        };
        // y = W x (+ b), W rows × cols row-major.
        let lin = |w: &[f64], b: Option<&Vec<f64>>, x: &[f64]| -> Vec<f64> {
            let cols = x.len();
            w.chunks_exact(cols)
                .enumerate()
                .map(|(r, row)| {
                    row.iter().zip(x).map(|(a, b)| a * b).sum::<f64>() + b.map_or(0.0, |b| b[r])
                })
                .collect()
        };
        // Rotate-half RoPE: element i pairs with i + d/2.
        let rope = |x: &mut [f64], pos: usize| {
            for head in x.chunks_exact_mut(hd) {
                for i in 0..hd / 2 {
                    let f = theta.powf(-(2.0 * i as f64) / hd as f64);
                    let (s, c) = (pos as f64 * f).sin_cos();
                    let (a, b) = (head[i], head[i + hd / 2]);
                    head[i] = a * c - b * s;
                    head[i + hd / 2] = b * c + a * s;
                }
            }
        };
        let embed = self.t("model.embed_tokens.weight").unwrap();
        let mut xs: Vec<Vec<f64>> = tokens
            .iter()
            .map(|&t| embed[t as usize * h..(t as usize + 1) * h].to_vec())
            .collect();
        for l in 0..self.u("num_hidden_layers") {
            let n = |p: &str| format!("model.layers.{l}.{p}");
            let w = |p: &str| self.t(&n(p)).unwrap();
            let (wq, wk, wv, wo) = (
                w("self_attn.q_proj.weight"),
                w("self_attn.k_proj.weight"),
                w("self_attn.v_proj.weight"),
                w("self_attn.o_proj.weight"),
            );
            let (bq, bk, bv) = (
                self.t(&n("self_attn.q_proj.bias")),
                self.t(&n("self_attn.k_proj.bias")),
                self.t(&n("self_attn.v_proj.bias")),
            );
            let (qn, kn) = (
                self.t(&n("self_attn.q_norm.weight")),
                self.t(&n("self_attn.k_norm.weight")),
            );
            let (mut ks, mut vs) = (Vec::new(), Vec::new());
            let mut outs = Vec::new();
            for (pos, x) in xs.iter().enumerate() {
                let a = rms(x, &w("input_layernorm.weight"));
                let mut q = lin(&wq, bq.as_ref(), &a);
                let mut k = lin(&wk, bk.as_ref(), &a);
                let v = lin(&wv, bv.as_ref(), &a);
                if let (Some(qn), Some(kn)) = (&qn, &kn) {
                    q = q.chunks_exact(hd).flat_map(|hq| rms(hq, qn)).collect();
                    k = k.chunks_exact(hd).flat_map(|hk| rms(hk, kn)).collect();
                }
                rope(&mut q, pos);
                rope(&mut k, pos);
                ks.push(k);
                vs.push(v);
                let mut att = vec![0.0; nh * hd];
                for head in 0..nh {
                    let kvh = head / (nh / nkv);
                    let qh = &q[head * hd..(head + 1) * hd];
                    let s: Vec<f64> = ks
                        .iter()
                        .map(|k| {
                            qh.iter()
                                .zip(&k[kvh * hd..(kvh + 1) * hd])
                                .map(|(a, b)| a * b)
                                .sum::<f64>()
                                / (hd as f64).sqrt()
                        })
                        .collect();
                    let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let e: Vec<f64> = s.iter().map(|v| (v - m).exp()).collect();
                    let z: f64 = e.iter().sum();
                    for (p, v) in e.iter().zip(&vs) {
                        for d in 0..hd {
                            att[head * hd + d] += p / z * v[kvh * hd + d];
                        }
                    }
                }
                outs.push(lin(&wo, None, &att));
            }
            for (x, o) in xs.iter_mut().zip(outs) {
                x.iter_mut().zip(o).for_each(|(a, b)| *a += b);
                let m = rms(x, &w("post_attention_layernorm.weight"));
                let g = lin(&w("mlp.gate_proj.weight"), None, &m);
                let u = lin(&w("mlp.up_proj.weight"), None, &m);
                let mid: Vec<f64> = g
                    .iter()
                    .zip(&u)
                    .map(|(g, u)| g / (1.0 + (-g).exp()) * u)
                    .collect();
                assert_eq!(mid.len(), ffn);
                let d = lin(&w("mlp.down_proj.weight"), None, &mid);
                x.iter_mut().zip(d).for_each(|(a, b)| *a += b);
            }
        }
        let fin = self.t("model.norm.weight").unwrap();
        let head = self.t("lm_head.weight").unwrap_or(embed);
        xs.iter()
            .flat_map(|x| {
                let x = rms(x, &fin);
                let out = lin(&head, None, &x);
                assert_eq!(out.len(), vocab);
                out
            })
            .collect()
    }
}

#[test]
fn every_architecture_matches_an_f64_transformers_forward() {
    for (arch, hd) in CASES {
        let (model, tok) = model_of(arch, 9, hd).unwrap();
        let files: HashMap<String, Vec<u8>> = hf_files(&model, &tok, ExportDType::F32)
            .unwrap()
            .into_iter()
            .collect();
        let reference = Reference {
            st: SafeTensors::deserialize(&files["model.safetensors"]).unwrap(),
            cfg: serde_json::from_slice(&files["config.json"]).unwrap(),
        };
        let want = reference.logits(&TOKENS);
        let got = logits(&model, &TOKENS);
        let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let err = got
            .iter()
            .zip(&want)
            .map(|(g, w)| (*g as f64 - w).abs())
            .fold(0.0, f64::max);
        // Bound: f32 dot products of length n ≤ 96 carry a relative error of about n·2⁻²⁴
        // ≈ 6·10⁻⁶ each; a few of them in series (two blocks, the head), plus the engine's
        // exp (a few ulp), stay far below 10⁻⁴ of the largest logit. A wrong permutation,
        // bias or norm moves logits by O(1) of that scale.
        assert!(
            err <= 1e-4 * scale.max(1.0),
            "{arch}: max |engine − reference| = {err:e} (largest logit {scale})"
        );
        eprintln!("{arch}: max |engine − f64 reference| = {err:.3e}, largest logit {scale:.3}");
    }
}
