//! The wasm API end to end on the synthetic tiny model, run by wasm-bindgen-test in Node and in
//! headless Chromium (`cargo xtask test` runs both). Natively these tests are not compiled.
#![cfg(target_arch = "wasm32")]

use edgefit_engine::synthetic::{gguf_bytes, SyntheticDType};
use edgefit_wasm::Engine;
use wasm_bindgen::JsValue;
use wasm_bindgen_test::wasm_bindgen_test;

fn engine() -> Engine {
    let bytes = gguf_bytes(7, SyntheticDType::Q8_0).expect("synthetic model");
    Engine::load_gguf(&js(&bytes), None, None).unwrap_or_else(|_| panic!("synthetic model loads"))
}

/// The bytes as the worker hands them over: a JS `Uint8Array`.
fn js(bytes: &[u8]) -> js_sys::Uint8Array {
    js_sys::Uint8Array::from(bytes)
}

/// A JS value the facade returns (serde-wasm-bindgen) read back as JSON.
fn json(v: &JsValue) -> serde_json::Value {
    serde_wasm_bindgen::from_value(v.clone()).expect("a plain JS value")
}

/// A JS object from JSON text, as the worker would build it.
fn obj(text: &str) -> JsValue {
    js_sys::JSON::parse(text).expect("valid JSON")
}

/// `start`'s options object, the worker's `generate` message without its `type`.
fn opts(
    prompt: &str,
    chat: bool,
    max_tokens: u32,
    temperature: f64,
    top_p: f64,
    seed: u32,
    keep: Option<bool>,
) -> JsValue {
    let mut o = serde_json::json!({
        "prompt": prompt, "chat": chat, "maxTokens": max_tokens, "temperature": temperature,
        "topP": top_p, "seed": seed,
    });
    if let Some(k) = keep {
        o["keep"] = k.into();
    }
    obj(&o.to_string())
}

/// [`json`] of an owned value.
/// A metrics object's `token_ms`, as numbers.
fn token_ms(metrics: &serde_json::Value) -> Vec<f64> {
    metrics["token_ms"]
        .as_array()
        .expect("token_ms is an array")
        .iter()
        .map(|x| x.as_f64().expect("token_ms holds numbers"))
        .collect()
}

fn value(v: JsValue) -> serde_json::Value {
    serde_wasm_bindgen::from_value(v).expect("a plain JS value")
}

#[wasm_bindgen_test]
fn loads_and_reports_the_shape() {
    let e = engine();
    let info = json(&e.info().unwrap_or_else(|_| panic!("info")));
    assert_eq!(info["n_layers"], 2);
    assert_eq!(info["n_kv_heads"], 2);
    assert_eq!(info["chat_template"], true);
}

#[wasm_bindgen_test]
fn generates_with_measurements() {
    let mut e = engine();
    e.start(&opts("the cat", false, 6, 0.0, 1.0, 0, None))
        .unwrap_or_else(|_| panic!("start"));
    let mut pieces = 0;
    while let Some(_piece) = e.step().unwrap_or_else(|_| panic!("step")) {
        pieces += 1;
        assert!(pieces <= 6, "never more pieces than max_tokens");
    }
    let m = json(&e.metrics().unwrap_or_else(|_| panic!("metrics")));
    let generated = m["generated_tokens"].as_u64().unwrap();
    assert!((1..=6).contains(&generated));
    assert!(m["prompt_tokens"].as_u64().unwrap() >= 2);
    assert!(m["ttft_ms"].as_f64().unwrap() >= 0.0);
    assert!(m["weights_bytes"].as_u64().unwrap() > 0);
    assert!(m["kv_bytes"].as_u64().unwrap() > 0);
    // The wasm memory holds at least the f32 weights.
    assert!(m["peak_bytes"].as_u64().unwrap() >= m["weights_bytes"].as_u64().unwrap());
    // The heap in use holds the weights and the KV cache's reserved bytes, within the peak.
    let heap = m["heap_bytes"]
        .as_u64()
        .expect("the wasm build counts its heap");
    assert!(
        heap >= m["weights_bytes"].as_u64().unwrap() + m["kv_reserved_bytes"].as_u64().unwrap(),
        "heap {heap} B holds the weights and the cache: {m}"
    );
    assert!(
        heap <= m["peak_bytes"].as_u64().unwrap(),
        "heap {heap} B within the peak: {m}"
    );
    // A finished generation keeps returning undefined.
    assert!(e.step().unwrap_or_else(|_| panic!("step")).is_none());
    // Dropping the engine gives its weights and cache back: the count falls (the peak cannot).
    let weights = m["weights_bytes"].as_u64().unwrap();
    drop(e);
    let after = edgefit_wasm::heap::live_bytes();
    assert!(
        after + weights <= heap,
        "after dropping the engine the heap is {after} B, it was {heap} B with {weights} B of weights"
    );
}

#[wasm_bindgen_test]
fn the_heap_count_follows_allocations_and_frees() {
    let before = edgefit_wasm::heap::live_bytes();
    let mut v: Vec<u8> = std::hint::black_box(Vec::with_capacity(1 << 20));
    v.push(1);
    assert_eq!(edgefit_wasm::heap::live_bytes(), before + (1 << 20));
    v.reserve_exact(3 << 20); // a realloc to 4 MiB + 1
    let grown = edgefit_wasm::heap::live_bytes();
    assert_eq!(grown, before + v.capacity() as u64);
    // alloc_zeroed; black_box keeps the optimizer from eliding an allocation nothing reads.
    let zeroed = std::hint::black_box(vec![0u32; 1000]);
    assert_eq!(edgefit_wasm::heap::live_bytes(), grown + 4000);
    drop(v);
    drop(zeroed);
    assert_eq!(edgefit_wasm::heap::live_bytes(), before);
}

#[wasm_bindgen_test]
fn greedy_is_deterministic_and_chat_works() {
    let run = |chat| {
        let mut e = engine();
        e.start(&opts("hello there", chat, 5, 0.0, 1.0, 0, None))
            .unwrap_or_else(|_| panic!("start"));
        let mut text = String::new();
        while let Some(p) = e.step().unwrap_or_else(|_| panic!("step")) {
            text.push_str(&p);
        }
        (
            text,
            json(&e.metrics().unwrap_or_else(|_| panic!("metrics")))["prompt_tokens"]
                .as_u64()
                .unwrap(),
        )
    };
    let (a, plain_tokens) = run(false);
    let (b, _) = run(false);
    assert_eq!(a, b);
    let (_, chat_tokens) = run(true);
    assert!(chat_tokens > plain_tokens, "the chat template adds tokens");
}

#[wasm_bindgen_test]
fn bad_input_is_an_error_not_a_panic() {
    assert!(Engine::load_gguf(&js(b"definitely not a gguf file"), None, None).is_err());
    let bytes = gguf_bytes(7, SyntheticDType::Q8_0).unwrap();
    assert!(
        Engine::load_gguf(&js(&bytes[..bytes.len() / 2]), None, None).is_err(),
        "truncated file"
    );
    let mut e = engine();
    assert!(
        e.start(&opts("x", false, 4, -1.0, 1.0, 0, None)).is_err(),
        "negative temperature"
    );
    assert!(
        e.start(&opts("x", false, 0, 0.0, 1.0, 0, None)).is_err(),
        "zero max tokens"
    );
    assert!(
        e.start(&opts("x", false, 4, 0.0, 1.5, 0, None)).is_err(),
        "top-p above 1"
    );
    assert!(
        e.start(&opts("x", false, 100_000, 0.0, 1.0, 0, None))
            .is_err(),
        "beyond the context"
    );
    assert!(e.step().is_err(), "step without a started generation");
    assert!(
        Engine::load_gguf(&js(&bytes), Some("w3g7".into()), None).is_err(),
        "unknown weight format"
    );
    assert!(e.set_kernel("avx512").is_err(), "unknown kernel");
}

#[wasm_bindgen_test]
fn weight_formats_and_kernels_are_selectable() {
    let bytes = gguf_bytes(7, SyntheticDType::F32).unwrap();
    let formats: Vec<String> = serde_json::from_value(json(
        &edgefit_wasm::weight_formats().unwrap_or_else(|_| panic!("formats")),
    ))
    .unwrap();
    assert_eq!(formats[0], "auto", "the default comes first");
    for w in ["w4g32", "f32"] {
        let mut texts = Vec::new();
        let mut e = Engine::load_gguf(&js(&bytes), Some(w.into()), None)
            .unwrap_or_else(|_| panic!("loads as {w}"));
        let info = json(&e.info().unwrap_or_else(|_| panic!("info")));
        assert_eq!(info["weights"]["weights"], w);
        let kernels: Vec<String> = serde_json::from_value(info["kernels"].clone()).unwrap();
        // This test build has simd128 on (.cargo/config.toml), so the SIMD kernel is listed and
        // is the default.
        assert!(kernels.contains(&"simd128".to_string()), "{kernels:?}");
        assert_eq!(info["kernel"], "simd128");
        for k in &kernels {
            e.set_kernel(k).unwrap_or_else(|_| panic!("kernel {k}"));
            e.start(&opts("the cat", false, 4, 0.0, 1.0, 0, None))
                .unwrap_or_else(|_| panic!("start"));
            let mut text = String::new();
            while let Some(p) = e.step().unwrap_or_else(|_| panic!("step")) {
                text.push_str(&p);
            }
            let m = json(&e.metrics().unwrap_or_else(|_| panic!("metrics")));
            assert_eq!(m["kernel"], k.as_str());
            assert_eq!(m["weights"], w);
            texts.push(text);
        }
        // Greedy text of the tiny model is the same on every kernel of a format.
        assert!(
            texts.len() >= 2,
            "{w}: at least the scalar and simd128 kernels ran"
        );
        assert!(texts.iter().all(|t| t == &texts[0]), "{w}: {texts:?}");
    }
}

#[wasm_bindgen_test]
fn estimates_the_loaded_model_and_presets() {
    let e = engine();
    let spec = e.model_spec().unwrap_or_else(|_| panic!("spec"));
    let device =
        edgefit_wasm::device_profile("snapdragon-8-gen3").unwrap_or_else(|_| panic!("device"));
    let report = json(
        &edgefit_wasm::estimate(&spec, &obj(r#"{"weights":"w4g32","kv":"k8v16"}"#), &device)
            .unwrap_or_else(|_| panic!("estimate")),
    );
    assert!(report["memory"]["kv_bytes_per_token"].as_u64().unwrap() > 0);
    assert!(report["latency"]["decode_tok_s"].as_f64().unwrap() > 0.0);
    let presets = json(&edgefit_wasm::preset_ids().unwrap_or_else(|_| panic!("presets")));
    assert!(presets
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["id"] == "smollm2-135m"));
    let smol = edgefit_wasm::preset_spec("smollm2-135m").unwrap_or_else(|_| panic!("preset"));
    assert!(
        edgefit_wasm::estimate(&smol, &obj(r#"{"context":0}"#), &device).is_err(),
        "context 0 is refused"
    );
    assert!(
        edgefit_wasm::estimate(&smol, &obj("{}"), &obj("{}")).is_err(),
        "an empty device is refused"
    );
}

#[wasm_bindgen_test]
fn measures_this_browser_and_builds_its_profile() {
    assert!(
        edgefit_wasm::BrowserBench::new("avx2", 1.0).is_err(),
        "a kernel this build cannot run is refused"
    );
    for bad in [0.0, 1.5, 257.0, f64::NAN] {
        assert!(
            edgefit_wasm::BrowserBench::new("scalar", bad).is_err(),
            "threads {bad} is refused"
        );
    }
    // The build's fastest kernel ("" = best): the scalar one's 64-row probes ran this test past
    // ChromeDriver's 30 s renderer timeout on a slow machine.
    let mut bench = edgefit_wasm::BrowserBench::new("", 1.0).unwrap_or_else(|_| panic!("bench"));
    let total = bench.total();
    let mut steps = 0;
    while bench.step() {
        steps += 1;
        assert_eq!(bench.done(), steps);
    }
    assert_eq!(
        (steps + 1, bench.done()),
        (total, total),
        "one step per probe"
    );
    let m = json(&bench.finish().unwrap_or_else(|_| panic!("measure")));
    for v in [
        m["read_bandwidth_gbs"].as_f64().unwrap(),
        m["f32_gflops"].as_f64().unwrap(),
        m["weight_rate_gws"]["f32"].as_f64().unwrap(),
        m["weight_rate_gws"]["q4_1"].as_f64().unwrap(),
        m["prefill_weight_rate_gws"]["w4g32"].as_f64().unwrap(),
        m["op_overhead_us"].as_f64().unwrap(),
    ] {
        assert!(v.is_finite() && v > 0.0, "{m}");
    }
    let kernel = m["kernel"].as_str().unwrap_or_default();
    assert!(
        edgefit_wasm::BrowserBench::new(kernel, 1.0).is_ok(),
        "the figures name the kernel that ran: {kernel:?}"
    );
    assert_eq!(
        m["threads"].as_u64(),
        Some(1),
        "the figures say their thread count"
    );
    // Two threads: only where this build has threads (natively; not the single-threaded wasm).
    assert_eq!(
        edgefit_wasm::BrowserBench::new("scalar", 2.0).is_ok(),
        edgefit_wasm::threads_supported()
    );
    assert_eq!(m["wasm_limit_bytes"].as_u64(), Some(4 << 30));
    let device = edgefit_wasm::this_browser_device(&obj(&m.to_string()))
        .unwrap_or_else(|_| panic!("this-browser profile"));
    let d = json(&device);
    assert_eq!(
        d["units"]["cpu"]["weight_rate_gws"]["f32"].as_f64(),
        m["weight_rate_gws"]["f32"].as_f64()
    );
    assert_eq!(
        d["units"]["cpu"]["prefill_weight_rate_gws"]["w4g32"].as_f64(),
        m["prefill_weight_rate_gws"]["w4g32"].as_f64()
    );
    let spec = edgefit_wasm::preset_spec("smollm2-135m").unwrap_or_else(|_| panic!("preset"));
    let report = json(
        &edgefit_wasm::estimate(&spec, &obj(r#"{"weights":"f32","kv":"f32"}"#), &device)
            .unwrap_or_else(|_| panic!("estimate")),
    );
    assert!(report["latency"]["decode_tok_s"].as_f64().unwrap() > 0.0);
}

#[wasm_bindgen_test]
fn every_kv_format_runs_and_holds_the_estimated_bytes() {
    let mut e = engine();
    let spec: edgefit_estimate::ModelSpec =
        serde_json::from_value(json(&e.model_spec().unwrap_or_else(|_| panic!("spec")))).unwrap();
    for format in edgefit_estimate::KvFormat::ALL {
        e.set_kv_format(format.as_str())
            .unwrap_or_else(|_| panic!("kv {format}"));
        e.start(&opts("the cat", false, 4, 0.0, 1.0, 0, None))
            .unwrap_or_else(|_| panic!("start"));
        while e.step().unwrap_or_else(|_| panic!("step")).is_some() {}
        let m = json(&e.metrics().unwrap_or_else(|_| panic!("metrics")));
        assert_eq!(m["kv_format"], format.as_str());
        let tokens = m["kv_tokens"].as_u64().unwrap();
        assert!(tokens > 0);
        assert_eq!(
            m["kv_bytes"].as_u64().unwrap(),
            edgefit_estimate::kv_bytes(&spec, *format, tokens),
            "{format}"
        );
    }
    assert!(e.set_kv_format("int3").is_err(), "unknown KV format");
}

/// A kept turn reuses the cached tokens; kvBytes and defaultKvFormat agree with the engine.
#[wasm_bindgen_test]
fn kept_turns_reuse_the_cache_and_kv_bytes_match() {
    let mut e = engine();
    let m = json(&e.metrics().unwrap_or_else(|_| panic!("metrics")));
    assert_eq!(m["kv_format"], edgefit_wasm::default_kv_format());
    e.start(&opts("the cat", false, 4, 0.0, 1.0, 0, None))
        .unwrap_or_else(|_| panic!("start"));
    while e.step().unwrap_or_else(|_| panic!("step")).is_some() {}
    let held = json(&e.metrics().unwrap_or_else(|_| panic!("metrics")))["kv_tokens"]
        .as_u64()
        .unwrap();
    e.start(&opts(" and the dog", false, 4, 0.0, 1.0, 0, Some(true)))
        .unwrap_or_else(|_| panic!("second turn"));
    while e.step().unwrap_or_else(|_| panic!("step")).is_some() {}
    let m = json(&e.metrics().unwrap_or_else(|_| panic!("metrics")));
    let reused = m["reused_tokens"].as_u64().unwrap();
    assert!(reused > 0 && reused <= held, "reused {reused} of {held}");
    let tokens = m["kv_tokens"].as_u64().unwrap();
    assert!(tokens > held);
    let spec = e.model_spec().unwrap_or_else(|_| panic!("spec"));
    let format = m["kv_format"].as_str().unwrap();
    let est =
        edgefit_wasm::kv_bytes(&spec, format, tokens as f64).unwrap_or_else(|_| panic!("kvBytes"));
    assert_eq!(est, m["kv_bytes"].as_u64().unwrap() as f64);
    assert!(edgefit_wasm::kv_bytes(&spec, "int3", 1.0).is_err());
    assert!(edgefit_wasm::kv_bytes(&spec, format, 1.5).is_err());
}

#[wasm_bindgen_test]
fn fit_ranks_passing_configurations_and_names_bad_requests() {
    let spec = edgefit_wasm::preset_spec("smollm2-135m").unwrap_or_else(|_| panic!("preset"));
    let dev =
        edgefit_wasm::device_profile("snapdragon-8-gen3").unwrap_or_else(|_| panic!("device"));
    let spec = json(&spec);
    let req = obj(&format!(
        r#"{{"models":[{{"id":"smollm2-135m","spec":{spec}}}],"contexts":[2048]}}"#
    ));
    let res = json(&edgefit_wasm::fit(&req, &dev).unwrap_or_else(|_| panic!("fit")));
    let rows = res["rows"].as_array().unwrap();
    assert!(!rows.is_empty(), "a 135M model fits a flagship phone");
    assert_eq!(rows[0]["rank"], 1);
    assert_eq!(res["device"], "snapdragon-8-gen3");
    assert!(res["tried"].as_u64().unwrap() >= rows.len() as u64);
    // A level outside [0, 0.9] and an empty model list are refused, not clamped.
    let bad = obj(&format!(
        r#"{{"models":[{{"id":"x","spec":{spec}}}],"prune_levels":[0.95]}}"#
    ));
    assert!(edgefit_wasm::fit(&bad, &dev).is_err());
    assert!(edgefit_wasm::fit(&obj(r#"{"models":[]}"#), &dev).is_err());
    assert!(edgefit_wasm::fit(&JsValue::from_str("not a request"), &dev).is_err());
    assert!(edgefit_wasm::fit(&JsValue::UNDEFINED, &dev).is_err());
    // Model by model (the page's progress bar): the same result, refused the same way.
    let mut search = edgefit_wasm::FitSearch::new(&req, &dev).unwrap_or_else(|_| panic!("search"));
    assert_eq!((search.models_done(), search.models()), (0, 1));
    assert!(!search.step().unwrap_or_else(|_| panic!("step")));
    assert_eq!(search.models_done(), 1);
    let stepped = json(&search.finish().unwrap_or_else(|_| panic!("finish")));
    assert_eq!(stepped, res);
    assert!(edgefit_wasm::FitSearch::new(&bad, &dev).is_err());
}

#[wasm_bindgen_test]
fn pruned_spec_shrinks_the_model_and_level_zero_keeps_it() {
    let spec = edgefit_wasm::preset_spec("smollm2-135m").unwrap_or_else(|_| panic!("preset"));
    let same = edgefit_wasm::pruned_spec(&spec, 0.0).unwrap_or_else(|_| panic!("level 0"));
    assert_eq!(json(&same), json(&spec));
    let half = json(&edgefit_wasm::pruned_spec(&spec, 0.5).unwrap_or_else(|_| panic!("level 0.5")));
    assert_ne!(half, json(&spec));
    for bad in [-0.1, 0.95, f64::NAN] {
        assert!(
            edgefit_wasm::pruned_spec(&spec, bad).is_err(),
            "level {bad}"
        );
    }
}

#[wasm_bindgen_test]
fn the_prefill_runs_in_chunks_with_progress() {
    let mut e = engine();
    // Long enough for more than one chunk on the synthetic tokenizer.
    let prompt = "the theme of the thesis is the theme of the cat and the dog on the mat, \
        then the thesis of the theme is the cat sat on the theme";
    e.start(&opts(prompt, false, 4, 0.0, 1.0, 0, None))
        .unwrap_or_else(|_| panic!("start"));
    let total = json(&e.metrics().unwrap_or_else(|_| panic!("metrics")))["prompt_tokens"]
        .as_u64()
        .unwrap();
    let mut calls = 0;
    loop {
        let p = value(e.prefill_chunk().unwrap_or_else(|_| panic!("prefillChunk")));
        calls += 1;
        assert_eq!(p["total"].as_u64(), Some(total));
        let done = p["done"].as_u64().unwrap();
        assert_eq!(
            json(&e.metrics().unwrap_or_else(|_| panic!("metrics")))["kv_tokens"].as_u64(),
            Some(done)
        );
        if done == total {
            break;
        }
    }
    assert!(calls >= 2, "{total} prompt tokens in {calls} chunk(s)");
    let m = json(&e.metrics().unwrap_or_else(|_| panic!("metrics")));
    assert!(m["prefill_tok_s"].as_f64().unwrap() > 0.0, "{m}");
    // The first step samples from the fed prompt; nothing is fed twice.
    e.step().unwrap_or_else(|_| panic!("step"));
    let m = json(&e.metrics().unwrap_or_else(|_| panic!("metrics")));
    assert!(m["kv_tokens"].as_u64().unwrap() <= total + 1, "{m}");
}

#[wasm_bindgen_test]
fn compares_a_run_with_its_estimate() {
    let mut e = engine();
    e.start(&opts("the cat", false, 6, 0.0, 1.0, 0, None))
        .unwrap_or_else(|_| panic!("start"));
    while e.step().unwrap_or_else(|_| panic!("step")).is_some() {}
    let metrics = e.metrics().unwrap_or_else(|_| panic!("metrics"));
    let info = json(&e.info().unwrap_or_else(|_| panic!("info")));
    let stored = obj(&info["weights"]["stored"].to_string());
    let dep = edgefit_wasm::comparison_deployment(&metrics, &stored)
        .unwrap_or_else(|_| panic!("deployment"));
    let d = json(&dep);
    assert_eq!(d["unit"], "cpu");
    let device = edgefit_wasm::device_profile("this-browser").unwrap_or_else(|_| panic!("device"));
    let spec = e.model_spec().unwrap_or_else(|_| panic!("spec"));
    let report =
        edgefit_wasm::estimate(&spec, &dep, &device).unwrap_or_else(|_| panic!("estimate"));
    let rows = json(
        &edgefit_wasm::comparison_rows(&spec, &report, &metrics).unwrap_or_else(|_| panic!("rows")),
    );
    let keys: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["ttft", "prefill", "decode", "weights", "kv"]);
    // The KV row is exact: the engine allocates with the estimator's byte count.
    let kv = &rows[4];
    assert_eq!(kv["error_pct"].as_f64(), Some(0.0), "{kv}");
    assert!(
        edgefit_wasm::comparison_deployment(&obj("{}"), &obj("[]")).is_err(),
        "a run without tokens is refused"
    );
}

#[wasm_bindgen_test]
fn metrics_since_sends_only_the_new_token_ms() {
    let mut e = engine();
    e.start(&opts("the cat", false, 6, 0.0, 1.0, 0, None))
        .unwrap_or_else(|_| panic!("start"));
    // What the worker does: after each step ask from the entries it holds and append them.
    let mut held: Vec<f64> = Vec::new();
    let last = loop {
        let more = e.step().unwrap_or_else(|_| panic!("step")).is_some();
        let m = value(
            e.metrics_since(held.len() as u32)
                .unwrap_or_else(|_| panic!("metricsSince")),
        );
        let new = m["token_ms"]
            .as_array()
            .expect("token_ms is an array")
            .clone();
        assert!(new.len() <= 1, "one step adds at most one entry: {m}");
        held.extend(new.iter().map(|x| x.as_f64().expect("a number")));
        if !more {
            break m;
        }
    };
    // From 0: the whole list, through the same serializer (exactly the same f64s).
    let whole = value(
        e.metrics_since(0)
            .unwrap_or_else(|_| panic!("metricsSince")),
    );
    let whole_ms = token_ms(&whole);
    assert!(!whole_ms.is_empty());
    assert_eq!(held, whole_ms, "the appended entries are the whole list");
    // metrics() holds the same list (the same serializer: exactly the same f64s).
    let full = json(&e.metrics().unwrap_or_else(|_| panic!("metrics")));
    let full_ms = token_ms(&full);
    assert_eq!(held, full_ms);
    // Every other field is the full metrics' (finish_reason a string or null, as in the JSON),
    // and the object has exactly the JSON's keys.
    let strip = |v: &serde_json::Value| {
        let mut v = v.clone();
        let o = v.as_object_mut().unwrap();
        o.remove("token_ms");
        o.remove("heap_bytes");
        v
    };
    assert_eq!(strip(&last), strip(&whole));
    let keys = |v: &serde_json::Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(&last), keys(&full));
    assert!(last["finish_reason"].is_string(), "{last}");
    // Asked from past the end: no entries, not an error.
    let past = value(
        e.metrics_since(10_000)
            .unwrap_or_else(|_| panic!("metricsSince")),
    );
    assert_eq!(past["token_ms"], serde_json::json!([]));
}

/// The message of a facade error, as the page's worker shows it.
fn message(e: wasm_bindgen::JsError) -> String {
    let v: JsValue = e.into();
    js_sys::Reflect::get(&v, &"message".into())
        .ok()
        .and_then(|m| m.as_string())
        .unwrap_or_default()
}

#[wasm_bindgen_test]
fn start_takes_one_options_object_and_names_every_bad_field() {
    let mut e = engine();
    // Only prompt and maxTokens are needed: the rest take the engine's defaults (greedy, top-p 1,
    // seed 0, no chat template, a new conversation), so the text equals the explicit options'.
    let run = |e: &mut Engine, o: &JsValue| {
        e.start(o).unwrap_or_else(|_| panic!("start"));
        let mut text = String::new();
        while let Some(p) = e.step().unwrap_or_else(|_| panic!("step")) {
            text.push_str(&p);
        }
        text
    };
    let short = run(&mut e, &obj(r#"{"prompt":"the cat","maxTokens":5}"#));
    let full = run(&mut e, &opts("the cat", false, 5, 0.0, 1.0, 0, Some(false)));
    assert_eq!(short, full);
    // undefined counts as left out (a JS caller's `{keep: undefined}`).
    let o = obj(r#"{"prompt":"the cat","maxTokens":5}"#);
    js_sys::Reflect::set(&o, &"keep".into(), &JsValue::UNDEFINED).unwrap();
    assert_eq!(run(&mut e, &o), full);
    // Every bad field in one message, each with its value and what it takes.
    let bad = obj(
        r#"{"prompt":7,"maxTokens":1.5,"chat":"yes","temperature":-1,"topP":0,"seed":-2,"keep":1,"topK":40}"#,
    );
    let msg = message(e.start(&bad).expect_err("bad options are refused"));
    for part in [
        "start options: prompt 7: expected a string",
        r#""topK" is not an option"#,
        "maxTokens 1.5: expected a whole number from 1 to 4294967295",
        "temperature -1: expected a number from 0 (greedy) to 10",
        "topP 0: expected a number above 0 and at most 1",
        "seed -2: expected a whole number from 0 to 4294967295",
        r#"chat "yes": expected true or false"#,
        "keep 1: expected true or false",
    ] {
        assert!(msg.contains(part), "{part:?} missing from {msg:?}");
    }
    let o = obj(r#"{"prompt":"x","maxTokens":8}"#);
    js_sys::Reflect::set(&o, &"temperature".into(), &JsValue::from_f64(f64::NAN)).unwrap();
    js_sys::Reflect::set(&o, &"topP".into(), &JsValue::from_f64(f64::INFINITY)).unwrap();
    let msg = message(e.start(&o).expect_err("NaN and Infinity are refused"));
    assert!(
        msg.contains("temperature NaN: expected") && msg.contains("topP Infinity: expected"),
        "{msg}"
    );
    let msg = message(
        e.start(&obj(r#"{"prompt":"x"}"#))
            .expect_err("maxTokens is needed"),
    );
    assert!(
        msg.contains("maxTokens undefined: expected a whole number"),
        "{msg}"
    );
    for not_object in [
        JsValue::UNDEFINED,
        JsValue::from_str("the cat"),
        obj("[1,2]"),
    ] {
        let msg = message(e.start(&not_object).expect_err("not an object"));
        assert!(
            msg.starts_with("start options: expected an object"),
            "{msg}"
        );
    }
    // Past the 2^32 - 1 a u32 holds: refused, not wrapped.
    let msg = message(
        e.start(&obj(r#"{"prompt":"x","maxTokens":4294967296}"#))
            .expect_err("too many tokens"),
    );
    assert!(msg.contains("maxTokens 4294967296"), "{msg}");
}

#[wasm_bindgen_test]
fn objects_in_are_read_as_the_cli_reads_json() {
    let mut e = engine();
    // A prune plan refuses an unknown field (deny_unknown_fields), as `edgefit prune` does.
    let msg = message(
        e.prune(&obj(r#"{"ratios":{"mlp":0.25},"bogus":1}"#))
            .expect_err("an unknown plan field"),
    );
    assert!(msg.contains("plan: unknown field `bogus`"), "{msg}");
    let report = json(
        &e.prune(&obj(r#"{"ratios":{"mlp":0.25}}"#))
            .unwrap_or_else(|e| panic!("prune: {}", message(e))),
    );
    assert!(report.is_object(), "a PruneReport object: {report}");
    // A deployment field left undefined takes its default, as a field left out of JSON does.
    let spec = edgefit_wasm::preset_spec("smollm2-135m").unwrap_or_else(|_| panic!("preset"));
    let device =
        edgefit_wasm::device_profile("snapdragon-8-gen3").unwrap_or_else(|_| panic!("device"));
    let dep = obj("{}");
    js_sys::Reflect::set(&dep, &"context".into(), &JsValue::UNDEFINED).unwrap();
    let a = json(&edgefit_wasm::estimate(&spec, &dep, &device).unwrap_or_else(|_| panic!("a")));
    let b =
        json(&edgefit_wasm::estimate(&spec, &obj("{}"), &device).unwrap_or_else(|_| panic!("b")));
    assert_eq!(a, b);
    let msg = message(
        edgefit_wasm::estimate(&spec, &obj(r#"{"weights":"w9"}"#), &device)
            .expect_err("an unknown format"),
    );
    assert!(msg.starts_with("deployment: "), "{msg}");
    // The header check answers with an object too.
    let bytes = gguf_bytes(7, SyntheticDType::Q8_0).unwrap();
    let h = json(
        &edgefit_wasm::check_gguf_header(&js(&bytes), bytes.len() as f64)
            .unwrap_or_else(|_| panic!("header")),
    );
    assert_eq!(h["status"], "ok", "{h}");
}
