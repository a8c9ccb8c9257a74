//! The browser side: wasm-bindgen exports a bench page calls one shape at a time (so it can
//! report progress between shapes), then renders the same table as the native binary.

use crate::{kernel_names, render, run_shape, stream_gbs, Config, Report, Row};
use wasm_bindgen::prelude::*;

#[wasm_bindgen]
extern "C" {
    /// `performance.now()`: exists on the window, in workers and in Node.
    #[wasm_bindgen(js_namespace = performance, js_name = now)]
    fn performance_now() -> f64;
}

#[wasm_bindgen(start)]
fn start() {
    console_error_panic_hook::set_once();
}

fn config(json: &str) -> Result<Config, JsError> {
    if json.trim().is_empty() {
        return Ok(Config::default());
    }
    serde_json::from_str(json).map_err(|e| JsError::new(&format!("bench config: {e}")))
}

/// The names of the shapes `config_json` selects (a JSON array), for the page's loop.
#[wasm_bindgen(js_name = shapeNames)]
pub fn shape_names(config_json: &str) -> Result<String, JsError> {
    let names: Vec<&str> = config(config_json)?
        .selected_shapes()
        .iter()
        .map(|s| s.name)
        .collect();
    Ok(serde_json::to_string(&names)?)
}

/// The edgefit kernels this build can run (a JSON array).
#[wasm_bindgen(js_name = kernelNames)]
pub fn kernel_names_json() -> String {
    serde_json::to_string(&kernel_names()).unwrap_or_default()
}

/// Streaming-read rate, GB/s.
#[wasm_bindgen(js_name = streamGbs)]
pub fn stream_gbs_js(config_json: &str) -> Result<f64, JsError> {
    Ok(stream_gbs(&performance_now, &config(config_json)?))
}

/// Every row of the shape named `name` (a JSON array of rows).
#[wasm_bindgen(js_name = runShape)]
pub fn run_shape_js(name: &str, config_json: &str) -> Result<String, JsError> {
    let cfg = config(config_json)?;
    let shape = crate::SHAPES
        .iter()
        .find(|s| s.name == name)
        .ok_or_else(|| JsError::new(&format!("no shape named `{name}`")))?;
    let rows =
        run_shape(shape, &cfg, &performance_now, &mut |_| {}).map_err(|e| JsError::new(&e))?;
    Ok(serde_json::to_string(&rows)?)
}

/// The table for `rows_json` (all rows), with the runtime label and streaming rate.
#[wasm_bindgen(js_name = renderTable)]
pub fn render_table(
    runtime: &str,
    stream_gbs: f64,
    config_json: &str,
    rows_json: &str,
) -> Result<String, JsError> {
    let cfg = config(config_json)?;
    let rows: Vec<Row> = serde_json::from_str(rows_json)?;
    Ok(render(&Report {
        runtime: runtime.to_string(),
        kernels: kernel_names(),
        stream_gbs,
        stream_bytes: cfg.stream_bytes,
        rows,
    }))
}

/// The Gemma 3 270M matrix products ([`crate::gemma`]) as a table.
#[wasm_bindgen(js_name = runGemma)]
pub fn run_gemma_js(runtime: &str, config_json: &str) -> Result<String, JsError> {
    let cfg = config(config_json)?;
    crate::gemma::run_gemma(runtime, &cfg, &performance_now).map_err(|e| JsError::new(&e))
}
