//! The estimator's GGUF path (`edgefit estimate --model file.gguf` and the page's estimate of a
//! dropped file): the engine's header-only reader (`read_estimate_metadata`), then
//! `GgufMetadata::to_spec` (crates/estimate/src/gguf.rs), then a full estimate on a bundled
//! device. Errors are fine; panics, hangs and huge allocations are findings.
#![no_main]

use std::io::Cursor;

use edgefit_engine::gguf::read_estimate_metadata;
use edgefit_engine::synthetic::{gguf_bytes, SyntheticDType};
use edgefit_estimate::{device, estimate, kv_bytes, Deployment, KvFormat};
use libfuzzer_sys::fuzz_target;

fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut out = vec![(
        "synthetic-q4_0.gguf".to_string(),
        gguf_bytes(7, SyntheticDType::Q4_0).expect("synthetic GGUF"),
    )];
    out.extend(edgefit_fuzz::real_model_head("real-head.gguf"));
    out
}

fuzz_target!(
    init: {
        edgefit_fuzz::write_seeds_if_asked(seeds);
        edgefit_fuzz::warm_estimator();
    },
    |data: &[u8]| {
        let Ok(md) = read_estimate_metadata(&mut Cursor::new(data)) else {
            return;
        };
        let Ok(spec) = md.to_spec("fuzz") else {
            return;
        };
        let _ = spec.params();
        for f in KvFormat::ALL {
            let _ = kv_bytes(&spec, *f, 4096);
        }
        let dev = device("snapdragon-8-gen3").expect("bundled device");
        let _ = estimate(&spec, &Deployment::default(), &dev);
    }
);
