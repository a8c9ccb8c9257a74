//! # edgefit-wasm
//!
//! The thin `#[wasm_bindgen]` facade the web page's worker calls: it turns JS values into engine
//! calls and engine errors into JS `Error`s (`Result<_, JsError>`), installs a panic hook so a
//! panic reaches the console with its message, and supplies the browser [`Platform`]
//! (`performance.now()`, the wasm linear-memory size, and the heap in use, counted by this
//! crate's global allocator, [`heap`]); in the threaded build (wasm32 with `atomics`,
//! `pkg-threads/`) it also installs the kernels' pool [`Spawner`](edgefit_kernels::pool::Spawner)
//! that runs pool threads on Web Workers (`threads`). It has no logic of its own: every
//! number it returns is computed by `edgefit-engine` (and, from issue 3 on, `edgefit-estimate`),
//! exactly as the CLI computes it.
//!
//! It speaks JavaScript: model info, metrics, specs, device profiles, estimates, fit results and
//! reports cross as plain JS objects (serde-wasm-bindgen, `to_js`: `None` is `null`, maps
//! are objects), never as JSON text the worker parses; what the page hands in (a deployment, a
//! prune plan, `start`'s options) is a JS object too. Inputs are read with serde_json's rules
//! (`from_js`), so a misspelt field of a struct that refuses unknown ones is refused as the
//! CLI refuses it. The one JSON text left is the estimator's tables (`estimatorTables`,
//! `seedEstimatorTables`): a file the site build writes and the worker fetches as text.

mod estimator;
pub mod heap;

pub use estimator::*;

use edgefit_engine::{GenerateOptions, Platform, SamplerConfig};
use edgefit_estimate::KvFormat;
use edgefit_kernels::Kernel;
use wasm_bindgen::prelude::*;

#[wasm_bindgen]
extern "C" {
    /// `performance.now()`: exists on the window, in workers and in Node.
    #[wasm_bindgen(js_namespace = performance, js_name = now)]
    fn performance_now() -> f64;
}

/// Time from `performance.now()`, memory from the size of this module's linear memory (which
/// only grows, so its current size is its peak) and from [`heap::live_bytes`].
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

    fn heap_bytes(&self) -> Option<u64> {
        // Only the wasm build installs the counting allocator.
        cfg!(target_arch = "wasm32").then(heap::live_bytes)
    }
}

/// `Read + Seek` over a JS `Uint8Array`, copying only the bytes asked for into wasm memory.
struct JsBytes<'a> {
    bytes: &'a js_sys::Uint8Array,
    len: u64,
    pos: u64,
}

impl<'a> JsBytes<'a> {
    fn new(bytes: &'a js_sys::Uint8Array) -> Self {
        JsBytes {
            bytes,
            len: u64::from(bytes.length()),
            pos: 0,
        }
    }
}

impl std::io::Read for JsBytes<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = (self.len.saturating_sub(self.pos)).min(buf.len() as u64) as usize;
        if n > 0 {
            // Both ends fit in u32: `len` came from a u32 and `n` is at most `len - pos`.
            let start = self.pos as u32;
            self.bytes
                .subarray(start, start + n as u32)
                .copy_to(&mut buf[..n]);
            self.pos += n as u64;
        }
        Ok(n)
    }
}

impl std::io::Seek for JsBytes<'_> {
    fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
        let target = match to {
            std::io::SeekFrom::Start(p) => Some(p),
            std::io::SeekFrom::End(d) => self.len.checked_add_signed(d),
            std::io::SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        match target {
            Some(p) => {
                // Past the end is allowed (as for files); reads there return 0 bytes.
                self.pos = p;
                Ok(p)
            }
            None => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "seek before the start of the file",
            )),
        }
    }
}

/// The first bytes of a file of `len` bytes: reads inside the prefix succeed, a read past it
/// fails and sets `past` (the header is longer than the prefix), so [`check_gguf_header`] can
/// tell "refused" from "read more".
struct Prefix<'a> {
    bytes: JsBytes<'a>,
    prefix_len: u64,
    past: bool,
}

impl std::io::Read for Prefix<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.bytes.pos >= self.prefix_len && self.bytes.pos < self.bytes.len && !buf.is_empty() {
            self.past = true;
            return Err(std::io::Error::other("past the bytes read so far"));
        }
        let room = self.prefix_len.saturating_sub(self.bytes.pos) as usize;
        let n = buf.len().min(room);
        self.bytes.read(&mut buf[..n])
    }
}

impl std::io::Seek for Prefix<'_> {
    fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
        self.bytes.seek(to)
    }
}

fn js_err(e: impl std::fmt::Display) -> JsError {
    JsError::new(&e.to_string())
}

/// A Rust value as a plain JS value, shaped exactly as its JSON would be: through
/// `serde_json::Value` first, so a map with integer keys (a `Pruning`'s layers) has string
/// keys, `None` and a non-finite float are `null`, then serde-wasm-bindgen builds the objects
/// (maps as objects, not `Map`s; integers as numbers, one above 2^53 an error, not a rounded
/// number). An `f32` field arrives as the `f64` of that `f32` (an `rms_eps` of 1e-5 reads
/// 9.999999747378752e-6), where JSON text printed the shortest decimal.
fn to_js<T: serde::Serialize + ?Sized>(value: &T) -> Result<JsValue, JsError> {
    let ser = serde_wasm_bindgen::Serializer::new()
        .serialize_missing_as_null(true)
        .serialize_maps_as_objects(true);
    let json = serde_json::to_value(value).map_err(js_err)?;
    serde::Serialize::serialize(&json, &ser).map_err(js_err)
}

/// The JSON text of a JS value (`JSON.stringify`), for the readers that take text
/// ([`DeviceProfile::from_json`](edgefit_estimate::DeviceProfile::from_json)); the error names
/// `what`.
fn js_json(what: &str, v: &JsValue) -> Result<String, JsError> {
    js_sys::JSON::stringify(v)
        .ok()
        .and_then(|t| JsValue::from(t).as_string())
        .ok_or_else(|| {
            JsError::new(&format!(
                "{what}: expected a plain JS object (no cycle, no BigInt, not undefined)"
            ))
        })
}

/// A JS value read as `T` by serde_json, exactly as the CLI reads the same JSON: through
/// `JSON.stringify`, so a field left `undefined` is missing (its default applies) and
/// `deny_unknown_fields` refuses a misspelt field (serde-wasm-bindgen's own reader looks a
/// struct's fields up by name and would ignore one). The error names `what`.
fn from_js<T: serde::de::DeserializeOwned>(what: &str, v: &JsValue) -> Result<T, JsError> {
    serde_json::from_str(&js_json(what, v)?).map_err(|e| JsError::new(&format!("{what}: {e}")))
}

/// Checks a GGUF file from its first bytes before the whole file is read
/// (`edgefit_engine::gguf::check_header`: magic, version, tensor layout against the file's
/// `fileLen` bytes, an architecture this engine builds). `prefix` is the start of the file (all
/// of it for a small file). Returns a JS object: `{status: "ok", arch, name, tensors}`,
/// `{status: "refused", message}` (the load would fail: the message says why), or
/// `{status: "need_more"}` (the header runs past `prefix`: check again with more bytes).
#[wasm_bindgen(js_name = checkGgufHeader)]
pub fn check_gguf_header(prefix: &js_sys::Uint8Array, file_len: f64) -> Result<JsValue, JsError> {
    if !(file_len.is_finite()
        && file_len >= 0.0
        && file_len.fract() == 0.0
        && file_len <= 2f64.powi(53))
    {
        return Err(JsError::new(&format!(
            "fileLen {file_len}: expected a whole number of bytes"
        )));
    }
    let mut bytes = JsBytes::new(prefix);
    let prefix_len = bytes.len;
    bytes.len = (file_len as u64).max(prefix_len);
    let mut r = Prefix {
        bytes,
        prefix_len,
        past: false,
    };
    let out = match edgefit_engine::gguf::check_header(&mut r) {
        Ok(h) => serde_json::json!({
            "status": "ok", "arch": h.arch, "name": h.name, "tensors": h.tensors,
        }),
        Err(_) if r.past => serde_json::json!({ "status": "need_more" }),
        Err(e) => serde_json::json!({ "status": "refused", "message": e.to_string() }),
    };
    to_js(&out)
}

/// The weight formats `loadGguf` takes: an array of names (default first).
#[wasm_bindgen(js_name = weightFormats)]
pub fn weight_formats() -> Result<JsValue, JsError> {
    names_js(
        edgefit_engine::WeightsFormat::ALL
            .iter()
            .map(|f| f.as_str()),
    )
}

/// A list of names as a JS array of strings.
fn names_js<'a>(names: impl Iterator<Item = &'a str>) -> Result<JsValue, JsError> {
    to_js(&names.collect::<Vec<_>>())
}

/// The weight formats the estimator sizes (`edgefit_estimate::WeightFormat`, in declaration
/// order): the estimate panel's weights knob, a wider list than the engine's `weightFormats()`.
#[wasm_bindgen(js_name = estimateWeightFormats)]
pub fn estimate_weight_formats() -> Result<JsValue, JsError> {
    names_js(
        edgefit_estimate::WeightFormat::ALL
            .iter()
            .map(|f| f.as_str()),
    )
}

/// The activation precisions the estimator takes (`edgefit_estimate::ComputeDtype`, in
/// declaration order): the estimate panel's activations knob, `edgefit estimate --compute`.
#[wasm_bindgen(js_name = computeDtypes)]
pub fn compute_dtypes() -> Result<JsValue, JsError> {
    names_js(
        edgefit_estimate::ComputeDtype::ALL
            .iter()
            .map(|f| f.as_str()),
    )
}

/// The KV-cache formats `setKvFormat` takes: an array of names.
#[wasm_bindgen(js_name = kvFormats)]
pub fn kv_formats() -> Result<JsValue, JsError> {
    names_js(KvFormat::ALL.iter().map(|f| f.as_str()))
}

/// The KV format the engine runs with until `setKvFormat` (and the estimator's default).
#[wasm_bindgen(js_name = defaultKvFormat)]
pub fn default_kv_format() -> String {
    edgefit_estimate::DEFAULT_KV_FORMAT.to_string()
}

/// Bytes the estimator says `tokens` tokens of KV cache in `format` occupy for the model shape
/// `spec` (a `ModelSpec` object, e.g. from `Engine.modelSpec()`): what the engine's cache holds
/// for that many tokens, exactly.
#[wasm_bindgen(js_name = kvBytes)]
pub fn kv_bytes(spec: &JsValue, format: &str, tokens: f64) -> Result<f64, JsError> {
    let spec: edgefit_estimate::ModelSpec = from_js("model spec", spec)?;
    spec.validate().map_err(js_err)?;
    let format: KvFormat = format.parse().map_err(js_err)?;
    if !(tokens.is_finite() && tokens.fract() == 0.0 && (0.0..=1e12).contains(&tokens)) {
        return Err(JsError::new(&format!(
            "tokens {tokens}: expected a whole number from 0 to 1e12"
        )));
    }
    Ok(edgefit_estimate::kv_bytes(&spec, format, tokens as u64) as f64)
}

/// The engine's version, for the page footer and bug reports.
#[wasm_bindgen]
pub fn version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}

#[wasm_bindgen(start)]
fn start() {
    console_error_panic_hook::set_once();
    #[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
    edgefit_kernels::pool::set_spawner(threads::spawn);
}

/// Whether this build can run the engine on more than one thread: only the threaded build
/// (wasm32 with `atomics`, shared memory; `pkg-threads/`), which the worker loads on a
/// cross-origin isolated page. The other builds refuse `setThreads` above 1.
#[wasm_bindgen(js_name = threadsSupported)]
pub fn threads_supported() -> bool {
    edgefit_kernels::pool::threads_supported()
}

/// The largest thread count `setThreads` accepts.
#[wasm_bindgen(js_name = maxThreads)]
pub fn max_threads() -> usize {
    edgefit_kernels::pool::MAX_THREADS
}

/// The threaded build's pool threads: each is a Web Worker that the page's worker starts
/// (`globalThis.edgefitSpawnPoolWorker(module, memory, ptr)`, defined by `web/worker.js`), which
/// instantiates this same module over the same shared memory (wasm-bindgen gives each instance
/// its own stack and thread-local storage) and calls [`threads::pool_worker_entry`] with `ptr`:
/// the boxed closure the pool handed to [`threads::spawn`].
#[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
pub mod threads {
    use wasm_bindgen::prelude::*;

    #[wasm_bindgen]
    extern "C" {
        #[wasm_bindgen(js_namespace = globalThis, js_name = edgefitSpawnPoolWorker, catch)]
        fn spawn_pool_worker(module: JsValue, memory: JsValue, ptr: u32) -> Result<(), JsValue>;
    }

    type Work = Box<dyn FnOnce() + Send>;

    /// [`edgefit_kernels::pool::Spawner`]: hands `f` to a new Web Worker.
    pub fn spawn(f: Work) -> Result<(), String> {
        let ptr = Box::into_raw(Box::new(f));
        spawn_pool_worker(wasm_bindgen::module(), wasm_bindgen::memory(), ptr as u32).map_err(|e| {
            // SAFETY: the worker was not started, so `ptr` was not handed to anyone.
            drop(unsafe { Box::from_raw(ptr) });
            format!(
                "starting a Web Worker failed: {}",
                e.as_string()
                    .or_else(|| js_sys::JSON::stringify(&e).ok().map(String::from))
                    .unwrap_or_else(|| "unknown error".into())
            )
        })
    }

    /// Runs the pool thread's closure `ptr` (from [`spawn`]) on this Web Worker; returns when
    /// the pool that started it is dropped.
    #[wasm_bindgen(js_name = poolWorkerEntry)]
    pub fn pool_worker_entry(ptr: u32) {
        // SAFETY: `ptr` is the `Box<Work>` that `spawn` leaked for exactly one worker, which
        // calls this once.
        let f = unsafe { Box::from_raw(ptr as *mut Work) };
        f();
    }

    /// Called by `web/pool-worker.js` on this same instance when [`pool_worker_entry`] threw
    /// (the wasm trapped: a panic aborts on wasm32): marks this thread's pool worker lost, so
    /// the region it was in ends with an error instead of the engine waiting for it forever
    /// ([`edgefit_kernels::pool::worker_lost`]). Returns whether this thread ran a pool worker.
    #[wasm_bindgen(js_name = poolWorkerLost)]
    pub fn pool_worker_lost() -> bool {
        edgefit_kernels::pool::worker_lost()
    }
}

/// A loaded model with its tokenizer, KV cache and generation state, and for pruning: the
/// calibration statistics collected so far (of the model as loaded, so every prune reuses them).
#[wasm_bindgen]
pub struct Engine {
    inner: edgefit_engine::Engine,
    calibration: Option<edgefit_engine::Calibration>,
}

/// A whole number from JS in `1..=max`, or an error naming `name`.
fn count(name: &str, v: f64, max: usize) -> Result<usize, JsError> {
    if v.is_finite() && v.fract() == 0.0 && v >= 1.0 && v <= max as f64 {
        Ok(v as usize)
    } else {
        Err(JsError::new(&format!(
            "{name} {v}: expected a whole number from 1 to {max}"
        )))
    }
}

/// `Engine.start`'s options, read from one JS object and checked field by field: every bad or
/// unknown field is named in one error (`start options: maxTokens 1.5: expected a whole number
/// from 1 to 4294967295; topP 0: expected a number above 0 and at most 1`). `undefined` counts
/// as left out.
///
/// | field | value | left out |
/// |---|---|---|
/// | `prompt` | a string | refused |
/// | `maxTokens` | a whole number from 1 to 2³²−1 (the engine refuses one past the context) | refused |
/// | `chat` | `true` / `false`: wrap the prompt in the chat template | `false` |
/// | `temperature` | a number from 0 (greedy) to [`MAX_TEMPERATURE`](edgefit_engine::sampler::MAX_TEMPERATURE) | 0 |
/// | `topP` | a number above 0 and at most 1 | 1 |
/// | `seed` | a whole number from 0 to 2³²−1 | 0 |
/// | `keep` | `true` / `false`: continue the conversation | `false` |
#[derive(Debug, Clone, PartialEq)]
pub struct StartOptions {
    pub prompt: String,
    pub options: GenerateOptions,
}

/// The fields [`StartOptions`] reads (in the order of the page's `generate` message).
pub const START_FIELDS: [&str; 7] = [
    "prompt",
    "chat",
    "maxTokens",
    "temperature",
    "topP",
    "seed",
    "keep",
];

/// A JS value as an error message shows it: `undefined`, `NaN`, `Infinity`, or its JSON
/// (`"text"`, `1.5`, `null`).
fn shown(v: &JsValue) -> String {
    if v.is_undefined() {
        return "undefined".into();
    }
    match v.as_f64() {
        Some(n) if n.is_nan() => return "NaN".into(),
        Some(n) if n.is_infinite() => return if n > 0.0 { "Infinity" } else { "-Infinity" }.into(),
        _ => {}
    }
    js_sys::JSON::stringify(v)
        .ok()
        .and_then(|t| JsValue::from(t).as_string())
        .unwrap_or_else(|| "(not JSON)".into())
}

impl StartOptions {
    /// Reads and checks `v` (see the table above).
    pub fn from_js(v: &JsValue) -> Result<StartOptions, JsError> {
        if !v.is_object() || js_sys::Array::is_array(v) {
            return Err(JsError::new(&format!(
                "start options: expected an object {{{}}}, got {}",
                START_FIELDS.join(", "),
                shown(v)
            )));
        }
        let mut bad: Vec<String> = Vec::new();
        for key in js_sys::Object::keys(v.unchecked_ref::<js_sys::Object>()).iter() {
            let key = key.as_string().unwrap_or_default();
            if !START_FIELDS.contains(&key.as_str()) {
                bad.push(format!(
                    "{key:?} is not an option (they are {})",
                    START_FIELDS.join(", ")
                ));
            }
        }
        let get = |k: &str| js_sys::Reflect::get(v, &JsValue::from_str(k)).unwrap_or_default();
        // Each field: its value, or the default when left out, or an entry in `bad`.
        let mut field =
            |name: &str, expected: &str, default: Option<f64>, ok: &dyn Fn(f64) -> bool| {
                let x = get(name);
                match (x.as_f64(), default) {
                    (None, Some(d)) if x.is_undefined() => d,
                    (Some(n), _) if ok(n) => n,
                    _ => {
                        bad.push(format!("{name} {}: expected {expected}", shown(&x)));
                        default.unwrap_or(0.0)
                    }
                }
            };
        let whole_u32 = |n: f64| n.fract() == 0.0 && (0.0..=u32::MAX as f64).contains(&n);
        let max_tokens = field(
            "maxTokens",
            "a whole number from 1 to 4294967295",
            None,
            &|n| whole_u32(n) && n >= 1.0,
        );
        let max_t = edgefit_engine::sampler::MAX_TEMPERATURE as f64;
        let temperature = field(
            "temperature",
            &format!("a number from 0 (greedy) to {max_t}"),
            Some(0.0),
            &|n| (0.0..=max_t).contains(&n),
        );
        let top_p = field("topP", "a number above 0 and at most 1", Some(1.0), &|n| {
            n > 0.0 && n <= 1.0
        });
        let seed = field(
            "seed",
            "a whole number from 0 to 4294967295",
            Some(0.0),
            &whole_u32,
        );
        let mut flag = |name: &str| {
            let x = get(name);
            match x.as_bool() {
                Some(b) => b,
                None if x.is_undefined() => false,
                None => {
                    bad.push(format!("{name} {}: expected true or false", shown(&x)));
                    false
                }
            }
        };
        let chat = flag("chat");
        let keep = flag("keep");
        let prompt = get("prompt").as_string();
        if prompt.is_none() {
            bad.insert(
                0,
                format!("prompt {}: expected a string", shown(&get("prompt"))),
            );
        }
        if !bad.is_empty() {
            return Err(JsError::new(&format!("start options: {}", bad.join("; "))));
        }
        Ok(StartOptions {
            prompt: prompt.unwrap_or_default(),
            options: GenerateOptions {
                chat,
                max_tokens: max_tokens as usize,
                sampler: SamplerConfig {
                    temperature: temperature as f32,
                    top_p: top_p as f32,
                    seed: seed as u64,
                },
                keep,
            },
        })
    }
}

#[wasm_bindgen]
impl Engine {
    /// Parses a GGUF file's bytes and builds the model with the linear layers in `weights`
    /// (`w4g32` when undefined; also `w4g64`, `w4g128`, `q8_0`, `f16`, `f32`) and the embedding
    /// in `embedding` (undefined: `q8_0` with 4-bit weights, else the same). Throws with a
    /// message naming the problem when the file is not a supported model or a name is unknown.
    ///
    /// The bytes stay on the JS side: the loader reads them through a small buffer one piece at
    /// a time, so the wasm memory holds the converted weights plus one tensor in flight, never a
    /// second copy of the whole file. A model that would not fit what is left of the 4 GiB a
    /// wasm32 memory can hold ([`memory_budget`]) is refused before any tensor is allocated,
    /// with the bytes needed and the budget.
    #[wasm_bindgen(js_name = loadGguf)]
    pub fn load_gguf(
        bytes: &js_sys::Uint8Array,
        weights: Option<String>,
        embedding: Option<String>,
    ) -> Result<Engine, JsError> {
        let options = edgefit_engine::LoadOptions {
            weights: match weights {
                Some(w) => w.parse().map_err(js_err)?,
                None => edgefit_engine::WeightsFormat::DEFAULT,
            },
            embedding: embedding.map(|e| e.parse()).transpose().map_err(js_err)?,
            requantize: false,
        };
        let mut reader = std::io::BufReader::with_capacity(1 << 16, JsBytes::new(bytes));
        let inner = edgefit_engine::Engine::load_gguf_within(
            &mut reader,
            Box::new(BrowserPlatform),
            options,
            Some(memory_budget()),
            &mut |_, _| {},
        )
        .map_err(js_err)?;
        Ok(Engine {
            inner,
            calibration: None,
        })
    }

    /// Runs the matrix products on the kernel named `name` (`simd128` or `scalar` in this
    /// build; `info().kernels` lists them). Throws on a name this build cannot run.
    #[wasm_bindgen(js_name = setKernel)]
    pub fn set_kernel(&mut self, name: &str) -> Result<(), JsError> {
        let kernel = edgefit_kernels::Kernel::from_name(name)
            .ok_or_else(|| JsError::new(&format!("unknown kernel `{name}`")))?;
        self.inner.set_kernel(kernel).map_err(js_err)
    }

    /// Runs the matrix products and attention heads on `threads` threads from now on (the
    /// tokens are the same bits for any count). Throws on a count that is not a whole number
    /// from 1 to [`max_threads`], or above 1 in a build without threads ([`threads_supported`]).
    /// In the threaded build the new pool's Web Workers start asynchronously: the worker waits
    /// until each has instantiated the module before it runs the engine.
    #[wasm_bindgen(js_name = setThreads)]
    pub fn set_threads(&mut self, threads: f64) -> Result<(), JsError> {
        let n = count("threads", threads, edgefit_kernels::pool::MAX_THREADS)?;
        self.inner.set_threads(n).map_err(js_err)
    }

    /// Stores the KV cache as `name` (`f32`, `f16`, `k8v16`, `int8`, `int4g32`) from the next
    /// generation on; throws on an unknown name.
    #[wasm_bindgen(js_name = setKvFormat)]
    pub fn set_kv_format(&mut self, name: &str) -> Result<(), JsError> {
        let format: edgefit_estimate::KvFormat = name.parse().map_err(js_err)?;
        self.inner.set_kv_format(format);
        Ok(())
    }

    /// Model shape and tokenizer summary: a JS object (`ModelInfo`; the shape's fields inlined).
    pub fn info(&self) -> Result<JsValue, JsError> {
        to_js(&self.inner.info())
    }

    /// Begins a generation with `options`, one JS object ([`StartOptions`]: `{prompt, maxTokens,
    /// chat?, temperature?, topP?, seed?, keep?}`, the page's `generate` message without its
    /// `type`); throws naming every bad or unknown field, or on a full context ("context full:
    /// ..."). `keep` continues the conversation (the cache keeps the earlier turns' tokens and
    /// only new ones are computed); without it the conversation and the cache start empty.
    pub fn start(&mut self, options: &JsValue) -> Result<(), JsError> {
        let o = StartOptions::from_js(options)?;
        self.inner.start(&o.prompt, o.options).map_err(js_err)
    }

    /// The next piece of text (the first call runs what is left of the prefill); `undefined`
    /// once finished.
    pub fn step(&mut self) -> Result<Option<String>, JsError> {
        self.inner.step().map_err(js_err)
    }

    /// Feeds the next chunk of the prompt (`edgefit_engine::PREFILL_CHUNK` tokens) and returns
    /// the prefill's progress as a JS object `{done: n, total: m}` (prompt tokens fed, of all);
    /// once `done == total`, `step()` samples the first token. Lets the worker report the
    /// prefill's progress and stop between chunks.
    #[wasm_bindgen(js_name = prefillChunk)]
    pub fn prefill_chunk(&mut self) -> Result<JsValue, JsError> {
        let progress = self.inner.prefill_chunk().map_err(js_err)?;
        to_js(&progress)
    }

    /// The estimator's `ModelSpec` of the loaded model, a JS object (feed it to [`estimate`]).
    #[wasm_bindgen(js_name = modelSpec)]
    pub fn model_spec(&self) -> Result<JsValue, JsError> {
        to_js(&self.inner.model_spec())
    }

    /// Starts a calibration of the model as loaded on the first `maxTokens` tokens of `text`,
    /// in windows of `window` tokens (each with a fresh cache), dropping any earlier one; run
    /// it with [`calibrate_step`](Self::calibrate_step). Returns the tokens it will run.
    #[wasm_bindgen(js_name = calibrateBegin)]
    pub fn calibrate_begin(
        &mut self,
        text: &str,
        max_tokens: f64,
        window: f64,
    ) -> Result<u32, JsError> {
        self.calibration = None;
        let max_tokens = count("maxTokens", max_tokens, 1 << 24)?;
        let context = self.inner.unpruned_model().config.context_length;
        let window = count("window", window, context)?;
        let calibration = self
            .inner
            .begin_calibration(text, max_tokens, window)
            .map_err(js_err)?;
        let n = calibration.tokens().len() as u32;
        self.calibration = Some(calibration);
        Ok(n)
    }

    /// Runs the next `windows` windows of the calibration begun with
    /// [`calibrate_begin`](Self::calibrate_begin) and returns the tokens run so far (all of
    /// them once it is done). The statistics equal one `collect_stats` over all the tokens.
    #[wasm_bindgen(js_name = calibrateStep)]
    pub fn calibrate_step(&mut self, windows: f64) -> Result<u32, JsError> {
        let windows = count("windows", windows, 1 << 20)?;
        let cal = self
            .calibration
            .as_mut()
            .ok_or_else(|| JsError::new("no calibration begun: call calibrateBegin first"))?;
        let ran = self.inner.calibrate_step(cal, windows).map_err(js_err)?;
        Ok(ran as u32)
    }

    /// Tokens of the finished calibration the next activation-aware prune uses (0 when none
    /// is finished).
    #[wasm_bindgen(js_name = calibrationTokens)]
    pub fn calibration_tokens(&self) -> u32 {
        match &self.calibration {
            Some(c) if c.done() => c.tokens().len() as u32,
            _ => 0,
        }
    }

    /// Prunes the model as loaded with `plan` (a `PrunePlan` object: `{ratios: {heads,
    /// kv_heads, qk_dims, v_dims, mlp}, layers, importance: "magnitude"|"activation",
    /// allocation: "uniform"|"global"}`, missing fields default, unknown ones refused) and runs
    /// the result from now on in the loaded formats; returns the `PruneReport` object.
    /// Activation importance needs a finished calibration. The cache and the conversation start
    /// empty. Every prune starts from the model as loaded; [`restore`](Self::restore) runs that
    /// again.
    pub fn prune(&mut self, plan: &JsValue) -> Result<JsValue, JsError> {
        let plan: edgefit_engine::PrunePlan = from_js("plan", plan)?;
        let stats = self.calibration.as_ref().and_then(|c| c.stats());
        let report = self.inner.prune(&plan, stats).map_err(js_err)?;
        to_js(&report)
    }

    /// Runs the model as loaded again after a prune; `false` when it already runs.
    pub fn restore(&mut self) -> bool {
        self.inner.restore()
    }

    /// Whether a pruned model runs.
    #[wasm_bindgen(js_name = isPruned)]
    pub fn is_pruned(&self) -> bool {
        self.inner.is_pruned()
    }

    /// Perplexity of the running model on the first `maxTokens` + 1 tokens of `text` (one
    /// window), as the `PerplexityReport` object (with `ms`).
    pub fn perplexity(&self, text: &str, max_tokens: f64) -> Result<JsValue, JsError> {
        let context = self.inner.model().config.context_length;
        let max_tokens = count("maxTokens", max_tokens, context - 1)?;
        let options = edgefit_engine::PerplexityOptions {
            max_tokens: Some(max_tokens),
            window: Some((max_tokens + 1).min(context)),
            batch: None,
        };
        let report = edgefit_engine::perplexity_of_text(
            self.inner.model(),
            self.inner.tokenizer(),
            text,
            options,
            Some(&BrowserPlatform),
            &mut |_, _| {},
        )
        .map_err(js_err)?;
        to_js(&report)
    }

    /// The running model as one GGUF file in `dtype` (`q8_0`, `f16`, `f32`; the engine's GGUF
    /// loader reads it back, pruned shapes included).
    #[wasm_bindgen(js_name = exportGguf)]
    pub fn export_gguf(&self, dtype: &str) -> Result<Vec<u8>, JsError> {
        let dtype: edgefit_engine::export::GgufDType = dtype.parse().map_err(js_err)?;
        edgefit_engine::export::gguf_bytes(self.inner.model(), self.inner.tokenizer(), dtype)
            .map_err(js_err)
    }

    /// The running model as HF files in `dtype` (`f32`, `f16`, `bf16`): an array of
    /// `{name, bytes}` (`config.json`, `tokenizer.json`, `tokenizer_config.json`,
    /// `model.safetensors`).
    #[wasm_bindgen(js_name = exportHf)]
    pub fn export_hf(&self, dtype: &str) -> Result<js_sys::Array, JsError> {
        let dtype: edgefit_engine::export::ExportDType = dtype.parse().map_err(js_err)?;
        let files =
            edgefit_engine::export::hf_files(self.inner.model(), self.inner.tokenizer(), dtype)
                .map_err(js_err)?;
        let out = js_sys::Array::new();
        for (name, bytes) in files {
            let o = js_sys::Object::new();
            js_sys::Reflect::set(&o, &"name".into(), &name.into())
                .map_err(|_| JsError::new("building the file list"))?;
            let b = js_sys::Uint8Array::from(bytes.as_slice());
            js_sys::Reflect::set(&o, &"bytes".into(), &b.into())
                .map_err(|_| JsError::new("building the file list"))?;
            out.push(&o);
        }
        Ok(out)
    }

    /// Runs the loaded model on a throwaway input for about `budget_ms` (at least one pass) so
    /// that the browser has tiered up the code a run executes before the first measured one
    /// (`edgefit_engine::Engine::warm_up`); returns what it ran as a JS object (`WarmUp`: passes,
    /// prompt_tokens, pass_ms, total_ms), also kept in `metrics().warm_up`. A budget outside
    /// 0..=10000 ms throws naming it.
    #[wasm_bindgen(js_name = warmUp)]
    pub fn warm_up(&mut self, budget_ms: f64) -> Result<JsValue, JsError> {
        let report = self.inner.warm_up(budget_ms).map_err(js_err)?;
        to_js(&report)
    }

    /// Measurements of the load and the latest generation: a JS object (`Metrics`, with every
    /// `token_ms` entry; [`metrics_since`](Self::metrics_since) sends only the new ones).
    pub fn metrics(&self) -> Result<JsValue, JsError> {
        to_js(self.inner.metrics())
    }

    /// The metrics as a JS object whose `token_ms` holds only the entries from index `from` on
    /// (the decode steps since the caller last asked; empty when `from` is past the end). What
    /// the worker sends after every token: the cost is the new entries, not every token so far,
    /// so a generation of n tokens costs O(n) rather than the O(n²) of `metrics()` per step.
    /// The caller appends the entries to what it has: equal to `metrics().token_ms` when it asks
    /// from the length it holds (tests/web/token-ms.test.mjs).
    #[wasm_bindgen(js_name = metricsSince)]
    pub fn metrics_since(&self, from: u32) -> Result<JsValue, JsError> {
        let m = self.inner.metrics();
        // Every field but token_ms, spelled out (no `..`): a field added to Metrics fails to
        // compile here instead of going missing from the page.
        let since = edgefit_engine::Metrics {
            load_ms: m.load_ms,
            prompt_tokens: m.prompt_tokens,
            reused_tokens: m.reused_tokens,
            generated_tokens: m.generated_tokens,
            ttft_ms: m.ttft_ms,
            prefill_tok_s: m.prefill_tok_s,
            decode_tok_s: m.decode_tok_s,
            weights_bytes: m.weights_bytes,
            weights: m.weights.clone(),
            embedding: m.embedding.clone(),
            kernel: m.kernel.clone(),
            threads: m.threads,
            kv_format: m.kv_format.clone(),
            kv_tokens: m.kv_tokens,
            kv_bytes: m.kv_bytes,
            kv_reserved_bytes: m.kv_reserved_bytes,
            kv_limit: m.kv_limit,
            peak_bytes: m.peak_bytes,
            heap_bytes: m.heap_bytes,
            finish_reason: m.finish_reason,
            token_ms: m.token_ms.get(from as usize..).unwrap_or_default().to_vec(),
            warm_up: m.warm_up.clone(),
        };
        to_js(&since)
    }
}

/// wasm32 linear memory is addressed with 32 bits: at most 4 GiB (65 536 pages of 64 KiB).
const WASM32_LIMIT_BYTES: u64 = 4 << 30;

/// Bytes a model may still take in this wasm instance: the 4 GiB a wasm32 memory can grow to
/// (`WASM32_LIMIT_BYTES`) minus what it has grown to already (`memory.size`). Memory the
/// allocator has freed but the instance keeps (wasm memory never shrinks) counts as used, so
/// the figure is on the safe side. [`Engine::load_gguf`] refuses a model whose preflight need
/// (weights, KV cache at its full context, scratch; `edgefit_engine::weights::MemoryNeed`) is
/// over it, with the numbers, before allocating any tensor. Natively (the tests) the instance's
/// size is not known and the whole 4 GiB is the budget.
pub fn memory_budget() -> u64 {
    #[cfg(target_arch = "wasm32")]
    let grown = core::arch::wasm32::memory_size(0) as u64 * 65_536;
    #[cfg(not(target_arch = "wasm32"))]
    let grown = 0u64;
    WASM32_LIMIT_BYTES.saturating_sub(grown)
}

/// The `this-browser` micro-benchmarks in this tab (streaming read bandwidth, f32 GEMM
/// throughput, the engine's fixed cost per op, the roof of its ops between the matrix products,
/// and the engine's GEMV and 64-row GEMM rates of every format it runs, each probe in two rounds;
/// about ten seconds in all on a 2-core machine), with the kernel
/// the engine runs, one probe per `step()` so the page can show progress: `step()` returns
/// whether probes remain, `done()` / `total()` count them, `finish()` returns the
/// `BrowserMeasurements` object that [`this_browser_device`] takes. Allocates a 64 MiB buffer for
/// the bandwidth probe, so the wasm memory grows by that much (it never shrinks). The probes run
/// on `threads` threads (a pool of their own, as the engine splits its work; the figures say
/// `threads`): in the threaded build the pool's Web Workers start asynchronously, so the worker
/// waits for them before the first `step()`, as after `setThreads`.
#[wasm_bindgen]
pub struct BrowserBench {
    run: edgefit_engine::microbench::MeasureRun,
}

#[wasm_bindgen]
impl BrowserBench {
    /// Probes timing `kernel` (`simd128`, `scalar`, ... as the engine's `kernels` lists them;
    /// empty: the fastest this build runs) on `threads` threads. Throws naming a kernel this
    /// build cannot run, or a thread count that is not a whole number from 1 to
    /// [`max_threads`] or is above 1 in a build without threads.
    #[wasm_bindgen(constructor)]
    pub fn new(kernel: &str, threads: f64) -> Result<BrowserBench, JsError> {
        let n = count("threads", threads, edgefit_kernels::pool::MAX_THREADS)?;
        let pool = edgefit_kernels::Pool::new(n).map_err(js_err)?;
        let k = if kernel.is_empty() {
            Kernel::best()
        } else {
            match Kernel::from_name(kernel) {
                Some(k) if k.is_available() => k,
                _ => {
                    let names: Vec<&str> = Kernel::available().iter().map(|k| k.name()).collect();
                    return Err(JsError::new(&format!(
                        "kernel {kernel:?}: this build runs {}",
                        names.join(", ")
                    )));
                }
            }
        };
        Ok(BrowserBench {
            run: edgefit_engine::microbench::MeasureRun::with_pool(
                edgefit_engine::microbench::MicrobenchConfig::default(),
                k,
                Some(WASM32_LIMIT_BYTES),
                pool,
            ),
        })
    }

    /// Probes in all.
    pub fn total(&self) -> usize {
        self.run.total()
    }

    /// Probes run so far.
    pub fn done(&self) -> usize {
        self.run.done()
    }

    /// Runs the next probe; `false` once all have run.
    pub fn step(&mut self) -> bool {
        self.run.step(&BrowserPlatform, &|| {
            Box::new(BrowserPlatform) as Box<dyn Platform>
        })
    }

    /// The `BrowserMeasurements` object (consumes the run).
    pub fn finish(self) -> Result<JsValue, JsError> {
        to_js(&self.run.finish())
    }
}

/// Fault injection for the page's tests, never called in normal use: the worker calls it only
/// when its URL carries `faults=1` and the page asked for a panic (`inject-fault`). Panics, so
/// the instance traps (a `WebAssembly.RuntimeError`) exactly as a real engine bug would.
#[wasm_bindgen(js_name = faultPanic)]
pub fn fault_panic() {
    panic!("deliberate panic (fault injection for tests)");
}
