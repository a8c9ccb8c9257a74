//! # edgefit-wasm
//!
//! The thin `#[wasm_bindgen]` facade the web page's worker calls: it turns JS values into engine
//! calls and engine errors into JS `Error`s (`Result<_, JsError>`), installs a panic hook so a
//! panic reaches the console with its message, and supplies the browser [`Platform`]
//! (`performance.now()` and the wasm linear-memory size). It has no logic of its own: every
//! number it returns is computed by `edgefit-engine` (and, from issue 3 on, `edgefit-estimate`),
//! exactly as the CLI computes it.

use edgefit_engine::{GenerateOptions, Platform, SamplerConfig};
use wasm_bindgen::prelude::*;

#[wasm_bindgen]
extern "C" {
    /// `performance.now()`: exists on the window, in workers and in Node.
    #[wasm_bindgen(js_namespace = performance, js_name = now)]
    fn performance_now() -> f64;
}

/// Time from `performance.now()`, memory from the size of this module's linear memory (which
/// only grows, so its current size is its peak).
struct BrowserPlatform;

impl Platform for BrowserPlatform {
    fn now_ms(&self) -> f64 {
        performance_now()
    }

    fn peak_bytes(&self) -> u64 {
        let memory: js_sys::WebAssembly::Memory = wasm_bindgen::memory().unchecked_into();
        let buffer: js_sys::ArrayBuffer = memory.buffer().unchecked_into();
        buffer.byte_length() as u64
    }
}

fn js_err(e: impl std::fmt::Display) -> JsError {
    JsError::new(&e.to_string())
}

/// The engine's version, for the page footer and bug reports.
#[wasm_bindgen]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}

#[wasm_bindgen(start)]
fn start() {
    console_error_panic_hook::set_once();
}

/// A loaded model with its tokenizer, KV cache and generation state.
#[wasm_bindgen]
pub struct Engine {
    inner: edgefit_engine::Engine,
}

#[wasm_bindgen]
impl Engine {
    /// Parses a GGUF file's bytes and builds the model; throws with a message naming the
    /// problem when the file is not a supported model.
    #[wasm_bindgen(js_name = loadGguf)]
    pub fn load_gguf(bytes: &[u8]) -> Result<Engine, JsError> {
        let mut reader = std::io::Cursor::new(bytes);
        let inner = edgefit_engine::Engine::load_gguf(
            &mut reader,
            Box::new(BrowserPlatform),
            &mut |_, _| {},
        )
        .map_err(js_err)?;
        Ok(Engine { inner })
    }

    /// Model shape and tokenizer summary as JSON.
    pub fn info(&self) -> Result<String, JsError> {
        serde_json::to_string(&self.inner.info()).map_err(js_err)
    }

    /// Begins a generation (clears the KV cache); throws on out-of-range settings.
    pub fn start(
        &mut self,
        prompt: &str,
        chat: bool,
        max_tokens: u32,
        temperature: f32,
        top_p: f32,
        seed: u32,
    ) -> Result<(), JsError> {
        let options = GenerateOptions {
            chat,
            max_tokens: max_tokens as usize,
            sampler: SamplerConfig {
                temperature,
                top_p,
                seed: seed as u64,
            },
        };
        self.inner.start(prompt, options).map_err(js_err)
    }

    /// The next piece of text (the first call runs the prefill); `undefined` once finished.
    pub fn step(&mut self) -> Result<Option<String>, JsError> {
        self.inner.step().map_err(js_err)
    }

    /// Measurements of the load and the latest generation as JSON.
    pub fn metrics(&self) -> Result<String, JsError> {
        serde_json::to_string(self.inner.metrics()).map_err(js_err)
    }
}
