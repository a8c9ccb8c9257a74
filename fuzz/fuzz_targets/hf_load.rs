//! The HF loader: `config.json` + safetensors (`edgefit_engine::hf::load_hf`, with the
//! synthetic model's tokenizer files), and the estimator's reader of the same `config.json`
//! (`ModelSpec::from_hf_config`). The input is `[u16 LE length][config.json][safetensors]`
//! (see `edgefit_fuzz::split`).
#![no_main]

use std::sync::OnceLock;

use edgefit_engine::hf::load_hf;
use edgefit_engine::synthetic::hf_files;
use edgefit_engine::{LoadOptions, Logits};
use edgefit_estimate::ModelSpec;
use libfuzzer_sys::fuzz_target;

/// The synthetic model's tokenizer.json and tokenizer_config.json.
fn tokenizer_files() -> &'static (String, String) {
    static FILES: OnceLock<(String, String)> = OnceLock::new();
    FILES.get_or_init(|| {
        let (_, tok, tok_cfg, _) = hf_files(7).expect("synthetic HF files");
        (tok, tok_cfg)
    })
}

fn seeds() -> Vec<(String, Vec<u8>)> {
    let (config, _, _, st) = hf_files(7).expect("synthetic HF files");
    let mut out = vec![(
        "synthetic.hf".to_string(),
        edgefit_fuzz::join(config.as_bytes(), &st),
    )];
    // The bundled presets are config.json files too (no safetensors).
    for (name, bytes) in edgefit_fuzz::json_files("models/presets") {
        out.push((format!("preset-{name}"), edgefit_fuzz::join(&bytes, &[])));
    }
    out
}

fuzz_target!(
    init: {
        edgefit_fuzz::write_seeds_if_asked(seeds);
        tokenizer_files();
    },
    |data: &[u8]| {
        let (config, st) = edgefit_fuzz::split(data);
        let Ok(config) = std::str::from_utf8(config) else {
            return;
        };
        if let Ok(spec) = ModelSpec::from_hf_config("fuzz", config) {
            let _ = spec.params();
        }
        let (tok, tok_cfg) = tokenizer_files();
        let Ok((model, tok)) = load_hf(config, tok.as_bytes(), Some(tok_cfg), &[st], LoadOptions::default())
        else {
            return;
        };
        if let Ok(ids) = tok.encode("the") {
            if !ids.is_empty() {
                let mut cache = model.new_cache(4);
                let _ = model.forward(&ids[..ids.len().min(2)], &mut cache, Logits::Last);
            }
        }
    }
);
