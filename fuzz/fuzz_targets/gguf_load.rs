//! The engine's GGUF model loader (`edgefit_engine::gguf::load_gguf`, the page's and the CLI's
//! path for a dropped `.gguf`) on arbitrary bytes: it must return a model or an error, never
//! panic, hang or allocate more than the input justifies. A model that loads also runs one
//! forward pass over a short prompt, so shapes it accepts are shapes it can run.
#![no_main]

use std::io::Cursor;

use edgefit_engine::gguf::load_gguf;
use edgefit_engine::synthetic::{gguf_bytes, SyntheticDType};
use edgefit_engine::{LoadOptions, Logits};
use libfuzzer_sys::fuzz_target;

fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for (name, dtype) in [
        ("synthetic-q8_0.gguf", SyntheticDType::Q8_0),
        ("synthetic-q4_0.gguf", SyntheticDType::Q4_0),
        ("synthetic-q4_1.gguf", SyntheticDType::Q4_1),
        ("synthetic-f16.gguf", SyntheticDType::F16),
    ] {
        out.push((
            name.to_string(),
            gguf_bytes(7, dtype).expect("synthetic GGUF"),
        ));
    }
    out.extend(edgefit_fuzz::real_model_head("real-head.gguf"));
    out
}

fuzz_target!(
    init: edgefit_fuzz::write_seeds_if_asked(seeds),
    |data: &[u8]| {
        let Ok((model, tok)) = load_gguf(&mut Cursor::new(data), LoadOptions::default(), &mut |_, _| {})
        else {
            return;
        };
        let Ok(mut ids) = tok.encode("the cat") else {
            return;
        };
        ids.truncate(4);
        if ids.is_empty() {
            return;
        }
        let mut cache = model.new_cache(8);
        let _ = model.forward(&ids, &mut cache, Logits::Last);
        let _ = tok.decode(&ids);
    }
);
