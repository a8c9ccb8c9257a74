//! `estimate()`: one call from (model, deployment, device) to the full report.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::deploy::{Deployment, Policy, Thresholds};
use crate::device::{DeviceProfile, Loader};
use crate::error::{out_of_range, Result};
use crate::explain::{fmt_bytes, Explanation};
use crate::format::{ComputeDtype, ComputeUnit};
use crate::latency::{CurvePoint, LatencyReport, LayerTable, Plan, Roof, TimeModel};
use crate::memory::{memory_report, MemoryInputs, MemoryReport};
use crate::runtime::{default_runtime, resolve};
use crate::spec::{Family, ModelSpec, ParamBreakdown};
use crate::thermal::{simulate, GovernorParams, LevelPerf, ThermalInputs, ThermalReport};
use crate::uncertainty::Phase;
use crate::verdict::{experience, Verdict, Verdicts};

/// The model part of the report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelSummary {
    /// Name.
    pub name: String,
    /// Family.
    pub family: Family,
    /// Blocks.
    pub num_layers: usize,
    /// Hidden size.
    pub hidden_size: u32,
    /// Vocabulary.
    pub vocab_size: u32,
    /// Tied embeddings.
    pub tie_word_embeddings: bool,
    /// Parameters by component.
    pub params: ParamBreakdown,
}

/// The device part of the report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceSummary {
    /// Id.
    pub id: String,
    /// Name.
    pub name: String,
    /// Kind.
    pub kind: String,
}

/// Everything the estimator says about one deployment. This is the JSON the CLI's
/// `edgefit estimate --json` prints and the page renders.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The model.
    pub model: ModelSummary,
    /// The device.
    pub device: DeviceSummary,
    /// The deployment with every default resolved (`compute`, `unit`, `loader`,
    /// `embedding_weights`, `ambient_c`, `freq_cap_mhz` for capped are filled in).
    pub deployment: Deployment,
    /// Memory.
    pub memory: MemoryReport,
    /// Latency at the top frequency.
    pub latency: LatencyReport,
    /// The per-layer op table, one entry per run of identical layers.
    pub layers: Vec<LayerTable>,
    /// Heat over time.
    pub thermal: ThermalReport,
    /// Verdicts.
    pub verdict: Verdicts,
    /// How each number was derived, keyed by its JSON path (`memory.kv_bytes`, ...).
    pub explain: BTreeMap<String, Explanation>,
    /// Things the user should know (e.g. context beyond the model's trained length).
    pub warnings: Vec<String>,
}

fn fmt_num(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

/// Estimates memory, latency, heat and verdicts for `spec` deployed as `dep` on `device`.
///
/// Pure: no clock, no I/O; the same inputs always give the same report. Errors name the knob
/// and the value (see [`EstimateError`](crate::EstimateError)).
pub fn estimate(spec: &ModelSpec, dep: &Deployment, device: &DeviceProfile) -> Result<Report> {
    spec.validate()?;
    dep.validate()?;
    device.validate()?;
    let mut warnings = Vec::new();

    // Resolve defaults.
    let unit_id: ComputeUnit = dep.unit.unwrap_or(device.default_unit);
    let unit = device.unit(unit_id)?;
    let runtime = match dep.runtime {
        Some(r) => r,
        None => default_runtime(device, unit_id)?,
    };
    let rt = crate::uncertainty::fitted_profile(runtime)?;
    let exec = resolve(device, unit_id, dep, &rt)?;
    warnings.extend(exec.warnings.iter().cloned());
    let compute = exec.compute;
    let embedding = crate::runtime::head_weights(dep, &rt, spec);
    let loader = dep.loader.unwrap_or(device.memory.loader);
    let ambient = dep.ambient_c.unwrap_or(device.thermal.ambient_c);
    let ceiling = match dep.policy {
        Policy::Capped => {
            let cap = dep
                .freq_cap_mhz
                .unwrap_or(unit.freq_mhz.get(1).copied().unwrap_or(unit.f_max()));
            match unit.freq_mhz.iter().position(|&f| f <= cap) {
                Some(i) => i,
                None => {
                    return Err(out_of_range(
                        "freq_cap_mhz",
                        cap,
                        format!(
                            "below the lowest level of {}'s {unit_id} table {:?}",
                            device.id, unit.freq_mhz
                        ),
                    ))
                }
            }
        }
        _ => 0,
    };
    let mut resolved = dep.clone();
    resolved.compute = Some(compute);
    resolved.unit = Some(unit_id);
    resolved.embedding_weights = Some(embedding);
    resolved.loader = Some(loader);
    resolved.ambient_c = Some(ambient);
    resolved.runtime = Some(runtime);
    resolved.threads = exec.threads;
    let thresholds = dep
        .thresholds
        .clone()
        .or_else(|| device.thresholds.clone())
        .unwrap_or_else(|| Thresholds::for_kind(&device.kind, device.memory.usable_bytes));
    resolved.thresholds = Some(thresholds.clone());
    if dep.policy == Policy::Capped {
        resolved.freq_cap_mhz = Some(unit.freq_mhz[ceiling]);
    }
    if let Some(max) = spec.max_position_embeddings {
        if dep.context > max {
            warnings.push(format!(
                "context {} is beyond the model's trained length {max}: quality is not modelled",
                dep.context
            ));
        }
    }
    // The kernel roof is the edgefit runtime's (the device's own measured kernels); it is
    // optional, so only a unit that lists some rates but not this format's gets a warning.
    let device_figures = rt.unit(unit_id)?.device_figures;
    if device_figures
        && !unit.weight_rate_gws.is_empty()
        && !unit.weight_rate_gws.contains_key(&dep.weights)
    {
        warnings.push(format!(
            "{} {unit_id} has no measured kernel rate for {}: only the compute and memory roofs apply",
            device.id, dep.weights
        ));
    }

    let prompt = u64::from(dep.prompt_tokens);
    let gen = u64::from(dep.gen_tokens);
    let batch = u64::from(dep.batch);
    let chunk = u64::from(dep.prefill_chunk.unwrap_or(dep.prompt_tokens)).min(prompt);

    // Memory.
    let mem = memory_report(
        spec,
        &MemoryInputs {
            weights: dep.weights,
            embedding,
            mix: crate::runtime::layer_mix(dep, &rt, spec),
            kv: dep.kv,
            compute,
            context: u64::from(dep.context),
            prompt,
            chunk,
            batch,
            loader,
            loader_chunk_bytes: device.memory.loader_chunk_bytes,
            runtime_overhead_bytes: device.memory.runtime_overhead_bytes,
            fragmentation: device.memory.fragmentation,
            usable_bytes: device.memory.usable_bytes,
            wasm_limit_bytes: device.memory.wasm_limit_bytes,
        },
    );
    if !mem.fits {
        warnings.push(format!(
            "does not fit: needs {} of {} usable",
            fmt_bytes(mem.total_bytes),
            fmt_bytes(mem.usable_bytes)
        ));
    }

    // Latency at the top frequency.
    let plan = Plan {
        weights: dep.weights,
        embedding,
        kv: dep.kv,
        compute,
        batch,
        prompt,
        gen,
        chunk,
        static_context: exec.static_context.then_some(u64::from(dep.context)),
        mix: crate::runtime::layer_mix(dep, &rt, spec),
    };
    let tm = TimeModel::new(spec, plan);
    let f_top = unit.freq_mhz[ceiling];
    let roof_top = Roof::at(unit, &exec.decode, unit.f_max());
    let prefill_roof = Roof::at(unit, &exec.prefill, unit.f_max());
    let (prefill_s, _) = tm.prefill(&prefill_roof);
    let (steps, start) = tm.decode_steps();
    let (dec_s, _) = tm.decode_sum(&roof_top, start, steps);
    let (first_s, first_bytes) = tm.step(&roof_top, 1, start);
    let last_pos = start + steps - 1;
    let (last_s, _) = tm.step(&roof_top, 1, last_pos);
    let overhead_s = tm.ops_per_pass() * roof_top.overhead + roof_top.pass_overhead;
    let decode_tok_s = batch as f64 * steps as f64 / dec_s;
    let n_pts = steps.min(32);
    let decode_curve = (0..=n_pts)
        .map(|j| {
            let pos = start + (steps - 1) * j / n_pts.max(1);
            CurvePoint {
                kv_tokens: pos,
                ms: tm.step(&roof_top, 1, pos).0 * 1e3,
            }
        })
        .collect();
    let head_decode: Vec<crate::latency::OpRow> = tm
        .head_ops(1, 1)
        .iter()
        .map(|c| roof_top.row(c, 1.0))
        .collect();
    let layers: Vec<LayerTable> = tm
        .groups
        .iter()
        .map(|g| {
            let (prefill, decode) = tm.group_rows(&prefill_roof, &roof_top, g);
            LayerTable {
                first_layer: g.first,
                last_layer: g.first + g.count - 1,
                count: g.count,
                prefill,
                decode,
            }
        })
        .collect();
    let mut decode_ms_by_bound = crate::latency::BoundMs::default();
    for g in &layers {
        decode_ms_by_bound.add(&g.decode, g.count as f64);
    }
    decode_ms_by_bound.add(&head_decode, 1.0);
    let eff = exec.prefill.peak_gflops * exec.prefill.compute_fraction;
    let prefill_tok_s = (prompt * batch) as f64 / prefill_s;
    let bands = crate::uncertainty::bands()?;
    let band_p = bands.band(unit_id, Phase::Prefill);
    let band_d = bands.band(unit_id, Phase::Decode);
    let latency = LatencyReport {
        unit: unit_id,
        compute,
        runtime,
        threads: exec.threads,
        freq_mhz: unit.f_max(),
        peak_gflops: exec.prefill.peak_gflops,
        effective_gflops: eff,
        bandwidth_gbs: exec.decode.bandwidth_gbs,
        prefill_bandwidth_gbs: exec.prefill.bandwidth_gbs,
        ridge_intensity: eff / exec.prefill.bandwidth_gbs,
        op_overhead_us: exec.decode.op_overhead_us,
        vector_gflops: exec.prefill.vector_gflops,
        token_overhead_us: exec.decode.pass_overhead_us,
        prefill_ms: prefill_s * 1e3,
        ttft_ms: prefill_s * 1e3,
        ttft_ms_range: [prefill_s * 1e3 / band_p.high, prefill_s * 1e3 / band_p.low],
        prefill_tok_s,
        prefill_tok_s_range: [prefill_tok_s * band_p.low, prefill_tok_s * band_p.high],
        decode_ms_first: first_s * 1e3,
        decode_ms_last: last_s * 1e3,
        decode_tok_s,
        decode_tok_s_range: [decode_tok_s * band_d.low, decode_tok_s * band_d.high],
        decode_overhead_share: overhead_s / first_s,
        decode_bytes_per_step: first_bytes,
        decode_ms_by_bound,
        decode_curve,
        head_decode,
        static_context_tokens: plan.static_context,
        range_basis: format!(
            "prefill: {}; decode: {}",
            band_p.describe(),
            band_d.describe()
        ),
    };

    // Heat. Under the governor the memory clock follows the unit's level by the class's
    // `memory_follows` (the top level, and so the latency above, is the same either way).
    let governor = GovernorParams::of(device);
    let mut gov_unit = unit.clone();
    if let Some(m) = governor.memory_follows {
        gov_unit.bandwidth_freq_sensitivity = m;
    }
    let levels: Vec<LevelPerf> = unit
        .freq_mhz
        .iter()
        .map(|&f| {
            let roof = Roof::at(&gov_unit, &exec.decode, f);
            let (t, b) = tm.decode_sum(&roof, start, steps);
            LevelPerf {
                freq_mhz: f,
                step_s: t / steps as f64,
                bytes_per_step: b / steps as f64,
                batch: batch as f64,
            }
        })
        .collect();
    let thermal = simulate(
        device,
        unit,
        &ThermalInputs {
            levels,
            ceiling,
            policy: dep.policy,
            work_ms: dep.pacing_work_ms,
            idle_ms: dep.pacing_idle_ms,
            duration_s: dep.minutes * 60.0,
            ambient_c: ambient,
            governor,
        },
    );

    // Verdicts.
    let th = &thresholds;
    let verdict = Verdicts {
        memory: Verdict::from_bool(mem.fits && mem.total_bytes <= th.peak_memory_bytes),
        ttft: Verdict::from_bool(latency.ttft_ms < th.ttft_ms),
        sustained: Verdict::from_bool(thermal.sustained_tok_s >= th.sustained_tok_s),
        temperature: Verdict::from_bool(thermal.temp_rise_c < th.temp_rise_c),
        experience: experience(thermal.sustained_tok_s, th),
        thresholds: th.clone(),
    };

    let explain = explanations(
        spec, &resolved, device, &mem, &latency, &thermal, &verdict, f_top,
    );
    Ok(Report {
        model: ModelSummary {
            name: spec.name.clone(),
            family: spec.family,
            num_layers: spec.num_layers(),
            hidden_size: spec.hidden_size,
            vocab_size: spec.vocab_size,
            tie_word_embeddings: spec.tie_word_embeddings,
            params: spec.params(),
        },
        device: DeviceSummary {
            id: device.id.clone(),
            name: device.name.clone(),
            kind: device.kind.clone(),
        },
        deployment: resolved,
        memory: mem,
        latency,
        layers,
        thermal,
        verdict,
        explain,
        warnings,
    })
}

#[allow(clippy::too_many_arguments)]
fn explanations(
    spec: &ModelSpec,
    dep: &Deployment,
    device: &DeviceProfile,
    m: &MemoryReport,
    l: &LatencyReport,
    t: &ThermalReport,
    v: &Verdicts,
    f_top: f64,
) -> BTreeMap<String, Explanation> {
    let mut e = BTreeMap::new();
    let p = spec.params();
    let c = &m.weights_by_component;
    let emb = dep.embedding_weights.unwrap_or(dep.weights);
    e.insert(
        "memory.weights_bytes".into(),
        Explanation::new(
            "Σ matrices ⌈cols/G⌉·bytes_per_group·rows (scales included), each in the format the runtime's file holds it in (llama.cpp's Q4_K_M / Q5_K_M: v and down of the first and last eighth of the layers and every third between in Q6_K; K-quant rows not a multiple of 256 wide in Q5_0 / Q5_1 / Q8_0) + norms·4",
            format!(
                "embedding {} ({} × {} in {emb}) + attention {} + MLP {} + norms {} + lm_head {} ({}) ; {} params at {:.3} bits/param",
                c.embedding, spec.vocab_size, spec.hidden_size, c.attention, c.mlp, c.norms, c.lm_head,
                if spec.tie_word_embeddings { "tied" } else { "untied" },
                p.total, m.weights_bits_per_param
            ),
            fmt_bytes(m.weights_bytes),
        )
        .note(format!(
            "{} is {} bits per weight nominal; exact per-row rounding of groups is counted",
            dep.weights,
            dep.weights.bits_per_weight()
        )),
    );
    let l0 = spec.layers[0];
    e.insert(
        "memory.kv_bytes_per_token".into(),
        Explanation::new(
            "Σ layers kv_heads · (bytes_K(dk) + bytes_V(dv))",
            format!(
                "{} layers × {} KV heads × (K {} B + V {} B per head) in {}",
                spec.num_layers(),
                l0.num_kv_heads,
                dep.kv.layer_k_bytes_per_token(&l0) / u64::from(l0.num_kv_heads),
                dep.kv.layer_v_bytes_per_token(&l0) / u64::from(l0.num_kv_heads),
                dep.kv
            ),
            format!("{} B/token", m.kv_bytes_per_token),
        )
        .note("layer 0 shown; pruned models sum their own layers"),
    );
    e.insert(
        "memory.kv_bytes".into(),
        Explanation::new(
            "KV = kv_bytes(context) × batch; kv_bytes(n) = kv_bytes_per_token × n except kivi4",
            format!("{} × {} × {}", m.kv_bytes_per_token, dep.context, dep.batch),
            fmt_bytes(m.kv_bytes),
        )
        .note(if dep.kv.is_linear() {
            "every token costs the same"
        } else {
            "kivi4: keys in blocks of 32 tokens plus an f16 tail, so bytes are exact per block, not per token"
        }),
    );
    e.insert(
        "memory.activations_bytes".into(),
        Explanation::new(
            "b · max_layers max(a·n·(2d + q + k + v + o_in) + 4·H·n·(p+n), a·n·(2d + 2I)) + 4·b·V",
            format!(
                "chunk n = {}, prompt {}, a = {} B ({}), d = {}, I = {}, V = {}",
                dep.prefill_chunk
                    .unwrap_or(dep.prompt_tokens)
                    .min(dep.prompt_tokens),
                dep.prompt_tokens,
                crate::memory::activation_bytes_per_value(dep.compute.unwrap_or(ComputeDtype::F32)),
                dep.compute.unwrap_or(ComputeDtype::F32),
                spec.hidden_size,
                l0.intermediate_size,
                spec.vocab_size
            ),
            fmt_bytes(m.activations_bytes),
        )
        .note("a model: assumes f32 attention scores of one chunk are materialised"),
    );
    e.insert(
        "memory.total_bytes".into(),
        Explanation::new(
            "weights + KV + activations + runtime + loader duplication + fragmentation·(weights + KV)",
            format!(
                "{} + {} + {} + {} + {} ({:?}) + {} ({} × (weights + KV))",
                m.weights_bytes,
                m.kv_bytes,
                m.activations_bytes,
                m.runtime_overhead_bytes,
                m.loader_duplication_bytes,
                dep.loader.unwrap_or(Loader::Mmap),
                m.fragmentation_bytes,
                device.memory.fragmentation
            ),
            fmt_bytes(m.total_bytes),
        ),
    );
    e.insert(
        "memory.usable_bytes".into(),
        Explanation::new(
            "device profile memory.usable_bytes",
            format!("{}: {}", device.id, m.usable_bytes),
            fmt_bytes(m.usable_bytes),
        )
        .note(
            device
                .sources
                .get("memory.usable_bytes")
                .cloned()
                .unwrap_or_else(|| "see the device profile".into()),
        ),
    );
    let threads = l
        .threads
        .map(|t| format!(", {t} threads"))
        .unwrap_or_default();
    let overhead_ms = l.decode_overhead_share * l.decode_ms_first;
    // A static-shape runtime (QNN / Genie, LiteRT) attends over the whole compiled context.
    let static_ctx = l
        .static_context_tokens
        .map(|c| format!("; static-shape graphs: attention spans the whole context C = {c} at every step (FLOPs ∝ n·C, KV read C tokens)"))
        .unwrap_or_default();
    let vector = l
        .vector_gflops
        .map(|v| {
            format!(
                "; norms, activation and attention at V = {} GFLOP/s",
                fmt_num(v)
            )
        })
        .unwrap_or_default();
    e.insert(
        "latency.ttft_ms".into(),
        Explanation::new(
            "TTFT = Σ chunks [τ + Σ ops max(FLOPs/(peak·η_c), bytes/BW_prefill, weights/rate) + o] (on a unit with a vector roof V, this browser tab's measured rate of the engine's ops between its matrix products: FLOPs/(peak·η_c) → (FLOPs − FLOPs_vec)/(peak·η_c) + FLOPs_vec/V, FLOPs_vec = the norms' 4·n·d, the MLP activation's 5·n·I and the attention's H·(2·dk + 2·dv + 5)·S), attention FLOPs ∝ n·p + n(n+1)/2 (Σ_i min(p + i, w) in a layer with a sliding window w; n·C for a static-shape graph of context C), logits for the last position",
            format!(
                "{} prompt tokens in chunks of {}; runtime {} on the {}{threads}: {} matmuls, peak {} GFLOP/s × η_c {} = {} GFLOP/s; BW {} GB/s; o = {} µs per op, τ = {} µs per pass{vector}{static_ctx}",
                dep.prompt_tokens,
                dep.prefill_chunk.unwrap_or(dep.prompt_tokens).min(dep.prompt_tokens),
                l.runtime,
                l.unit,
                l.compute,
                fmt_num(l.peak_gflops),
                fmt_num(l.effective_gflops / l.peak_gflops),
                fmt_num(l.effective_gflops),
                fmt_num(l.prefill_bandwidth_gbs),
                fmt_num(l.op_overhead_us),
                fmt_num(l.token_overhead_us),
            ),
            format!(
                "{} ms (range {}..{} ms)",
                fmt_num(l.ttft_ms),
                fmt_num(l.ttft_ms_range[0]),
                fmt_num(l.ttft_ms_range[1])
            ),
        )
        .note(format!(
            "a model: the runtime's precision per weight format and its achieved fraction of peak (fitted on the validation set, `edgefit validate`); on a CPU the peak is Σ over the threads' cores of f·FLOP/cycle·(2 f16, 4 SDOT, 8 i8mm int8). Range: {}",
            l.range_basis
        )),
    );
    e.insert(
        "latency.prefill_tok_s".into(),
        Explanation::new(
            "prompt tokens × batch / prefill time",
            format!(
                "{} × {} / {} ms",
                dep.prompt_tokens,
                dep.batch,
                fmt_num(l.prefill_ms)
            ),
            format!(
                "{} tok/s (range {}..{})",
                fmt_num(l.prefill_tok_s),
                fmt_num(l.prefill_tok_s_range[0]),
                fmt_num(l.prefill_tok_s_range[1])
            ),
        )
        .note(format!("range: {}", l.range_basis)),
    );
    e.insert(
        "latency.decode_tok_s".into(),
        Explanation::new(
            "b·(G − 1) / Σ_{L=P}^{P+G−2} t_step(L); t_step = τ + Σ ops [max(FLOPs/(peak·η_c), bytes/BW_decode, weights/rate) + o] with bytes = weights + KV read of L tokens (min(L, w) in a layer with a sliding window w; C, the whole context, for a static-shape graph) + logits head (the norms', activation's and attention's FLOPs at the vector roof V where the unit has one, as in TTFT); on a CPU under a runtime the kernel adds to the bytes, max(FLOPs/(peak·η_c), bytes/BW_decode + weights/rate) (its loads and its unpacking share one instruction stream; a GPU overlaps them); BW_decode = BW_theoretical · η_d · min(1, threads/t_sat); rate = the decode kernel's weight rate where the runtime has one (CPU: ρ weights per cycle × Σ clock of the cores used; GPU, and an NPU with float activations: κ weights per FLOP × the f32 (NPU: activation precision) peak, for quantized formats; this browser tab: the engine's measured GEMV rate per format, bytes included)",
            format!(
                "runtime {} on the {}{threads}: first step {} ms ({} bytes moved, ~{} ms at {} GB/s; its ops by what bounds them: bytes {} ms, kernel rate {} ms, compute {} ms, fixed cost alone {} ms; fixed overhead {} ms = {}% of the step: o = {} µs × ops + τ = {} µs), last step {} ms{static_ctx}",
                l.runtime,
                l.unit,
                fmt_num(l.decode_ms_first),
                fmt_num(l.decode_bytes_per_step),
                fmt_num(l.decode_bytes_per_step / (l.bandwidth_gbs * 1e9) * 1e3),
                fmt_num(l.bandwidth_gbs),
                fmt_num(l.decode_ms_by_bound.memory),
                fmt_num(l.decode_ms_by_bound.kernel),
                fmt_num(l.decode_ms_by_bound.compute),
                fmt_num(l.decode_ms_by_bound.overhead),
                fmt_num(overhead_ms),
                fmt_num(l.decode_overhead_share * 100.0),
                fmt_num(l.op_overhead_us),
                fmt_num(l.token_overhead_us),
                fmt_num(l.decode_ms_last)
            ),
            format!(
                "{} tok/s (range {}..{})",
                fmt_num(l.decode_tok_s),
                fmt_num(l.decode_tok_s_range[0]),
                fmt_num(l.decode_tok_s_range[1])
            ),
        )
        .note(format!(
            "decode is usually memory-bound: bytes moved per token over the bandwidth the runtime achieves (η_d fitted on the validation set) set the speed; on a CPU with few threads, or a large GPU with 4-bit weights, the decode kernel's weight rate (ρ or κ, fitted on the validation set) or the compute roof can bind instead, and for a small model the fixed cost per op can dominate. Range: {}",
            l.range_basis
        )),
    );
    e.insert(
        "latency.decode_overhead_share".into(),
        Explanation::new(
            "(ops per pass × o + τ) / t_step(P)",
            format!(
                "({} µs per op, {} µs per pass) / {} ms",
                fmt_num(l.op_overhead_us),
                fmt_num(l.token_overhead_us),
                fmt_num(l.decode_ms_first)
            ),
            format!("{}%", fmt_num(l.decode_overhead_share * 100.0)),
        )
        .note("fixed costs of the runtime (kernel launches, thread barriers, sampling), from its profile in models/runtimes/"),
    );
    let th = &device.thermal;
    e.insert(
        "thermal.time_to_throttle_s".into(),
        Explanation::new(
            "first poll where the governor's budget min((T_trip−T_b)/R_db + C_d·(T_trip−T_d)/poll, (T_skin−T_a)/R_ba + C_b·(T_skin−T_b)/(C_d·R_db+poll)) falls below the ceiling's power; C_d·dT_d/dt = P − (T_d−T_b)/R_db, C_b·dT_b/dt = (T_d−T_b)/R_db − (T_b−T_a)/R_ba",
            format!(
                "C_d {} J/K, C_b {} J/K, R_db {} K/W, R_ba {} K/W, trip {} °C, skin limit {}, static share {}, memory follows the clock {}, T_a {} °C, policy {}, start {} MHz",
                th.die_capacity_j_per_k, th.body_capacity_j_per_k, th.die_to_body_k_per_w,
                th.body_to_ambient_k_per_w, th.trip_c,
                t.governor.skin_limit_c.map_or("none".to_string(), |c| format!("{c} °C")),
                t.governor.static_share,
                t.governor.memory_follows.map_or("by the unit's sensitivity".to_string(), |m| m.to_string()),
                t.ambient_c, t.policy, f_top
            ),
            match t.time_to_throttle_s {
                Some(s) => format!("{} s", fmt_num(s)),
                None => format!("never within {} s", fmt_num(t.duration_s)),
            },
        )
        .note("a model: lumped RC and a power-capping governor; the phone class's skin limit and R_db are fitted to the published sustained-load traces (models/validation/thermal/, tests/thermal_traces.rs), the rest are estimates (see the device profile's sources and crates/estimate/src/thermal.rs)"),
    );
    e.insert(
        "thermal.sustained_tok_s".into(),
        Explanation::new(
            "mean over the last 60 s of the tokens/s the budget buys (time-shared DVFS levels and idle)",
            format!(
                "start {} tok/s (utilisation {}), end of run at {} MHz, duty {}; sustainable power {}",
                fmt_num(t.initial_tok_s),
                fmt_num(t.utilisation),
                fmt_num(t.series.last().map(|s| s.freq_mhz).unwrap_or(f_top)),
                fmt_num(t.series.last().map(|s| s.duty).unwrap_or(1.0)),
                t.sustainable_power_w.map_or("none (no skin limit)".to_string(), |p| format!("{} W", fmt_num(p)))
            ),
            format!("{} tok/s", fmt_num(t.sustained_tok_s)),
        ),
    );
    e.insert(
        "thermal.temp_rise_c".into(),
        Explanation::new(
            "max_t T_body(t) − T_ambient",
            format!("{} − {}", fmt_num(t.body_max_c), fmt_num(t.ambient_c)),
            format!(
                "{} °C (die max {} °C)",
                fmt_num(t.temp_rise_c),
                fmt_num(t.die_max_c)
            ),
        ),
    );
    e.insert(
        "thermal.energy_per_token_j".into(),
        Explanation::new(
            "∫P dt / tokens, P = P_idle + u·(P_unit·(σ + (1−σ)·(f/f_max)^k) + E_dram·bytes/t_step)",
            format!(
                "mean {} W over {} s, {} tokens; P_idle {} W, E_dram {} pJ/B",
                fmt_num(t.avg_power_w),
                fmt_num(t.duration_s),
                fmt_num(t.tokens),
                device.power.idle_w,
                device.power.dram_pj_per_byte
            ),
            format!("{} J/token", fmt_num(t.energy_per_token_j)),
        ),
    );
    e.insert(
        "verdict.thresholds".into(),
        Explanation::new(
            "deployment thresholds, else the device profile's, else the defaults of its kind",
            format!(
                "device {} (kind {}): memory ≤ {} B, TTFT < {} ms, sustained ≥ {} tok/s, temperature rise < {} °C",
                device.id,
                device.kind,
                v.thresholds.peak_memory_bytes,
                v.thresholds.ttft_ms,
                v.thresholds.sustained_tok_s,
                v.thresholds.temp_rise_c
            ),
            if dep.thresholds.as_ref() == device.thresholds.as_ref() && device.thresholds.is_some() {
                "from the device profile".to_string()
            } else {
                format!("{} defaults unless the deployment set them", device.kind)
            },
        )
        .note("a board with an active cooler is not held to a phone's skin-temperature rise: see Thresholds::for_kind"),
    );
    for (key, verdict, f, val) in [
        (
            "verdict.memory",
            v.memory,
            "total ≤ min(threshold, usable)",
            format!(
                "{} ≤ min({}, {})",
                m.total_bytes, v.thresholds.peak_memory_bytes, m.usable_bytes
            ),
        ),
        (
            "verdict.ttft",
            v.ttft,
            "ttft_ms < threshold",
            format!("{} < {}", fmt_num(l.ttft_ms), v.thresholds.ttft_ms),
        ),
        (
            "verdict.sustained",
            v.sustained,
            "sustained_tok_s ≥ threshold",
            format!(
                "{} ≥ {}",
                fmt_num(t.sustained_tok_s),
                v.thresholds.sustained_tok_s
            ),
        ),
        (
            "verdict.temperature",
            v.temperature,
            "temp_rise_c < threshold",
            format!("{} < {}", fmt_num(t.temp_rise_c), v.thresholds.temp_rise_c),
        ),
    ] {
        e.insert(
            key.into(),
            Explanation::new(f, val, format!("{verdict:?}").to_lowercase()),
        );
    }
    e
}
