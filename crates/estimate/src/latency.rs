//! The per-layer operation table and the roofline time model.
//!
//! # Ops of one block for a step of `n` new tokens after `p` cached ones (`b` sequences)
//! | op | FLOPs | bytes moved |
//! |---|---|---|
//! | matmul `rows × cols` (q, k, v, o, gate, up, down) | `2·b·n·rows·cols` | weights `matrix_bytes(rows, cols)` in the format the runtime's file holds it in ([`LayerMix`]: Q4_K_M's v and down of about half the layers in Q6_K) + activations `a·b·n·(rows + cols)` |
//! | attention (q·k, softmax, ·v) | `b·H·(2·dk + 2·dv + 5)·S`, `S = n·p + n(n+1)/2` (causal) | KV read `b·(p + n)·kv_layer_token` + written `b·n·kv_layer_token` + activations `a·b·n·H·(dk + dv)` |
//! | attention, static-shape graph for context `C` (QNN / Genie, LiteRT) | as above with `S = n·C` | KV read `b·C·kv_layer_token` + written + activations as above |
//! | attention of a sliding-window layer (window `w`: a query sees its newest `w` tokens), filled cache | `S = Σ_{i=1..n} min(p + i, w)` | KV read `b·(min(p, w) + n)·kv_layer_token` + written + activations as above |
//! | norms | `4·b·n·d` per norm | `4·d` weights + `2·a·b·n·d` per norm |
//! | MLP activation (SiLU/GELU × up) | `5·b·n·I` | `3·a·b·n·I` |
//!
//! Plus the head: embedding lookup (`b·n` rows), final norm, and the output projection
//! `V × d` for the last position only (the only logits sampling needs).
//!
//! # Roofline per op on the chosen unit, at frequency `f` of a table topped by `f_max`
//! `t = max(FLOPs / (peak · efficiency · f/f_max), bytes / bandwidth, weights / (rate · f/f_max))
//! + overhead` (on a CPU under a runtime profile the kernel term adds to the bytes' time,
//! `max(FLOPs / …, bytes / bandwidth + weights / (rate · f/f_max))`: see [`crate::runtime`]),
//! (`FLOPs / (peak · efficiency)` is, on a unit with a vector roof `V` — this browser tab's
//! measured rate of the engine's ops between its matrix products —,
//! `(FLOPs − FLOPs_vec) / (peak · efficiency) + FLOPs_vec / V`, `FLOPs_vec` being the norms',
//! the MLP activation's and the attention's: `4·b·n·d` per norm, `5·b·n·I`,
//! `b·H·(2·dk + 2·dv + 5)·S`; attention over a quantized cache and code that runs value by
//! value, square roots and exponentials, are far slower than a GEMM's FLOPs, which the tab's
//! peak stands for),
//! where `rate` is the optional instruction-bound kernel roof of the format the matrix is held in (weights per second; a wasm int4 GEMV is bound by instructions, not memory;
//! where the unit measured a roof per format, each matrix of a mixed file takes its own, else
//! the layer format's or the runtime's); for a matmul of
//! `rows = b·n > 1` activation rows on a unit with a prompt-sized GEMM roof `rate_gemm`
//! (`prefill_weight_rate_gws`, weight·rows per second) the kernel term is
//! `rows · weights / (rate_gemm · f/f_max)` instead (from 64 rows, the size it is measured at;
//! between 1 and 64 rows the kernel time interpolates linearly between the GEMV's and the
//! 64-row GEMM's). DRAM has its own
//! clock, so a memory-bound decode slows less than the unit's frequency drops. The op's intensity is FLOPs/bytes, its attainable GFLOP/s is
//! `FLOPs / max(...)`, and its bound is the term that wins (`compute`, `memory`, `kernel`, or
//! `overhead` when the fixed cost is larger than all three). The bandwidth follows the unit's clock
//! only by the profile's `bandwidth_freq_sensitivity` `s`: `BW(f) = BW · (1 − s + s·f/f_max)`.
//!
//! # Phases
//! - prefill: the prompt in chunks (default one chunk); TTFT = prefill time (which ends with the
//!   logits of the last prompt position, i.e. the first generated token);
//! - decode: generating `G` tokens takes `G − 1` steps after prefill, at cache lengths
//!   `P, P+1, …, P+G−2`; decode tok/s = `b·(G − 1) / Σ t(step)` (with `G = 1`: `b / t(P)`).
//!   Sums over more than 8192 steps use the trapezoid rule on 8192 segments (each step's time is
//!   piecewise linear in the cache length, so the error is negligible).

use serde::{Deserialize, Serialize};

use crate::device::UnitProfile;
use crate::format::{BlockMatrix, ComputeDtype, KvFormat, LayerMix, WeightFormat};
use crate::memory::activation_bytes_per_value;
use crate::spec::{LayerSpec, ModelSpec};

/// Which roof limits an op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Bound {
    /// Peak FLOP/s.
    Compute,
    /// Memory bandwidth.
    Memory,
    /// The kernel's instruction-bound weight rate.
    Kernel,
    /// Fixed per-op cost.
    Overhead,
}

/// Raw cost of one op.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct OpCost {
    pub op: &'static str,
    pub flops: f64,
    pub weight_bytes: f64,
    pub kv_bytes: f64,
    pub act_bytes: f64,
    /// The part of `flops` outside the matrix products (norms, the MLP activation, the
    /// attention: scores, softmax, weighted values): on a unit with a vector roof
    /// (`vector_gflops`) it runs at that rate, the rest at the compute roof.
    pub vector_flops: f64,
    /// Weights processed (for the kernel roof).
    pub weights: f64,
    /// Activation rows each weight multiplies (`b·n` for a matmul, 0 for other ops): picks the
    /// kernel roof (`rows > 1`: the prompt-sized GEMM's, when the unit has one).
    pub rows: f64,
    /// The format a matmul's weights are held in (the layers', the mix's, or the embedding's
    /// for the output head): the unit's kernel roofs measured for that format apply when it has
    /// them ([`FormatRates`]); `None` for the other ops.
    pub format: Option<WeightFormat>,
}

impl OpCost {
    fn bytes(&self) -> f64 {
        self.weight_bytes + self.kv_bytes + self.act_bytes
    }
    fn add(&mut self, o: &OpCost) {
        self.flops += o.flops;
        self.vector_flops += o.vector_flops;
        self.weight_bytes += o.weight_bytes;
        self.kv_bytes += o.kv_bytes;
        self.act_bytes += o.act_bytes;
        self.weights += o.weights;
        self.rows = self.rows.max(o.rows);
    }
}

/// One row of the op table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OpRow {
    /// `q_proj`, `attention`, `gate_proj`, ...
    pub op: String,
    /// Floating-point operations.
    pub flops: f64,
    /// Weight bytes read.
    pub weight_bytes: f64,
    /// KV bytes read and written.
    pub kv_bytes: f64,
    /// Activation bytes read and written.
    pub act_bytes: f64,
    /// FLOPs per byte.
    pub intensity: f64,
    /// What the roofline allows for this op, GFLOP/s.
    pub attainable_gflops: f64,
    /// The limiting roof.
    pub bound: Bound,
    /// Time, µs.
    pub time_us: f64,
}

/// Activation rows the prompt-sized GEMM roof (`prefill_weight_rate_gws`) is measured at (the
/// engine's prefill chunk; `edgefit_engine::microbench` measures it so).
pub const GEMM_ROWS: f64 = 64.0;

/// Kernel roofs per weight format: `(GEMV rate, prompt-sized GEMM rate)`, indexed like
/// [`WeightFormat::ALL`] (a fixed array, so the roofs stay `Copy`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FormatRates([(Option<f64>, Option<f64>); WeightFormat::ALL.len()]);

impl FormatRates {
    /// `f`'s place in [`WeightFormat::ALL`]: a fieldless enum's discriminant is its place in the
    /// declaration, which `ALL` lists in order (no search on the time model's per-op path).
    fn index(f: WeightFormat) -> usize {
        f as usize
    }

    /// The roofs a unit measured: `gemv[f]` and `gemm[f]` where present.
    pub fn measured(
        gemv: &std::collections::BTreeMap<WeightFormat, f64>,
        gemm: &std::collections::BTreeMap<WeightFormat, f64>,
    ) -> FormatRates {
        let mut r = FormatRates::default();
        for &f in WeightFormat::ALL {
            r.0[Self::index(f)] = (gemv.get(&f).copied(), gemm.get(&f).copied());
        }
        r
    }

    /// The same roofs without the GEMM ones (a decode step multiplies one row).
    pub fn gemv_only(mut self) -> FormatRates {
        for e in &mut self.0 {
            e.1 = None;
        }
        self
    }

    /// `(GEMV, GEMM)` of `f`.
    pub fn get(&self, f: WeightFormat) -> (Option<f64>, Option<f64>) {
        self.0[Self::index(f)]
    }

    fn scaled(mut self, k: f64) -> FormatRates {
        for e in &mut self.0 {
            *e = (e.0.map(|r| r * k), e.1.map(|r| r * k));
        }
        self
    }
}

/// The roofs of a unit at one frequency.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Roof {
    /// FLOP/s.
    pub flops: f64,
    /// bytes/s.
    pub bw: f64,
    /// weights/s, if the format has a kernel roof.
    pub weight_rate: Option<f64>,
    /// weight·rows/s of a prompt-sized GEMM, if the format has one (`prefill_weight_rate_gws`).
    pub prefill_weight_rate: Option<f64>,
    /// weights/s and weight·rows/s measured per format: a matmul in a format listed here takes
    /// its own roofs (a mixed file's q5_0 or q6_k matrices, a q8_0 output head), one not listed
    /// the two above.
    pub format_rates: FormatRates,
    /// FLOP/s of the element-wise ops (`OpCost::vector_flops`), if the unit has that roof.
    pub vector_flops: Option<f64>,
    /// s per op.
    pub overhead: f64,
    /// s per forward pass (decode step or prefill chunk): graph scheduling, sampling.
    pub pass_overhead: f64,
    /// See [`PhaseRoof::kernel_adds_to_memory`].
    pub kernel_adds_to_memory: bool,
}

/// What a runtime reaches on a unit in one phase, at the unit's top frequency (see
/// [`crate::runtime`]): the roofs before frequency scaling.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PhaseRoof {
    /// Peak of the unit at the precision used (over the threads used), GFLOP/s.
    pub peak_gflops: f64,
    /// Achieved fraction of the peak.
    pub compute_fraction: f64,
    /// Achieved bandwidth, GB/s.
    pub bandwidth_gbs: f64,
    /// Instruction-bound kernel roof, 10^9 weights/s, if any.
    pub weight_rate_gws: Option<f64>,
    /// Kernel roof of a prompt-sized GEMM ([`GEMM_ROWS`] activation rows), 10^9 weight·rows/s,
    /// if any (`UnitProfile::prefill_weight_rate_gws`).
    pub gemm_rate_gws: Option<f64>,
    /// The two kernel roofs measured per weight format (10^9 weights/s, weight·rows/s), where
    /// the unit has them (`weight_rate_gws`, `prefill_weight_rate_gws`: the tab's probes of
    /// the engine's kernels); a matmul in a listed format takes its own (a mixed file's q5_0
    /// or q6_k matrices, a q8_0 output head under 4-bit layers), others the two above.
    pub format_rates: FormatRates,
    /// Roof of the element-wise ops, GFLOP/s (`UnitProfile::vector_gflops`), if any.
    pub vector_gflops: Option<f64>,
    /// Fixed cost per op, µs.
    pub op_overhead_us: f64,
    /// Fixed cost per forward pass, µs.
    pub pass_overhead_us: f64,
    /// The kernel roof and the bytes add (`t = t_memory + t_kernel`) instead of the longer one
    /// bounding the op: a CPU's decode GEMV, see [`Roof::time`].
    pub kernel_adds_to_memory: bool,
}

impl Roof {
    /// The roofs of `phase` on `unit` at `freq_mhz`: compute and the kernel roof follow the
    /// clock, bandwidth follows it by `bandwidth_freq_sensitivity` only.
    pub(crate) fn at(unit: &UnitProfile, phase: &PhaseRoof, freq_mhz: f64) -> Roof {
        let scale = freq_mhz / unit.f_max();
        Roof {
            flops: phase.peak_gflops * 1e9 * phase.compute_fraction * scale,
            bw: phase.bandwidth_gbs
                * 1e9
                * (1.0 - unit.bandwidth_freq_sensitivity + unit.bandwidth_freq_sensitivity * scale),
            weight_rate: phase.weight_rate_gws.map(|r| r * 1e9 * scale),
            prefill_weight_rate: phase.gemm_rate_gws.map(|r| r * 1e9 * scale),
            format_rates: phase.format_rates.scaled(1e9 * scale),
            vector_flops: phase.vector_gflops.map(|v| v * 1e9 * scale),
            overhead: phase.op_overhead_us * 1e-6,
            pass_overhead: phase.pass_overhead_us * 1e-6,
            kernel_adds_to_memory: phase.kernel_adds_to_memory,
        }
    }

    fn time(&self, c: &OpCost) -> (f64, Bound) {
        // Element-wise FLOPs at the vector roof where the unit has one, the rest at the peak.
        let tc = match self.vector_flops {
            Some(v) => (c.flops - c.vector_flops) / self.flops + c.vector_flops / v,
            None => c.flops / self.flops,
        };
        let tm = c.bytes() / self.bw;
        // Kernel roof: a GEMV (one row) streams each weight once, `weights / rate`; a GEMM of
        // `rows > 1` rows on a unit with a GEMM roof measured at GEMM_ROWS rows interpolates
        // linearly between the two measured points, t(1) = weights / rate and
        // t(64) = 64 · weights / rate_gemm, and scales as `rows · weights / rate_gemm` beyond.
        let (own, own_gemm) = c.format.map_or((None, None), |f| self.format_rates.get(f));
        let rates = (
            own.or(self.weight_rate),
            own_gemm.or(self.prefill_weight_rate),
        );
        let tk = match rates {
            _ if c.weights <= 0.0 => 0.0,
            (r, Some(rg)) if c.rows > 1.0 => {
                let t_gemm = GEMM_ROWS * c.weights / rg;
                if c.rows >= GEMM_ROWS {
                    c.rows * c.weights / rg
                } else {
                    let t1 = r.map_or(t_gemm / GEMM_ROWS, |r| c.weights / r);
                    t1 + (c.rows - 1.0) / (GEMM_ROWS - 1.0) * (t_gemm - t1)
                }
            }
            (Some(r), _) => c.weights / r,
            (None, _) => 0.0,
        };
        // A CPU core's decode GEMV issues its loads and its unpacking from one instruction
        // stream, and a DRAM miss outlasts what the out-of-order window can cover, so the
        // memory time and the instruction time add; a GPU hides memory latency behind
        // thousands of threads in flight, so the longer of the two bounds it.
        let tk = if self.kernel_adds_to_memory && tk > 0.0 {
            tm + tk
        } else {
            tk
        };
        let (t, mut bound) = if tc >= tm && tc >= tk {
            (tc, Bound::Compute)
        } else if tm >= tk {
            (tm, Bound::Memory)
        } else {
            (tk, Bound::Kernel)
        };
        if self.overhead > t {
            bound = Bound::Overhead;
        }
        (t + self.overhead, bound)
    }

    pub(crate) fn row(&self, c: &OpCost, calls: f64) -> OpRow {
        let (t, bound) = self.time(c);
        let core = t - self.overhead;
        let bytes = c.bytes();
        OpRow {
            op: c.op.to_string(),
            flops: c.flops,
            weight_bytes: c.weight_bytes,
            kv_bytes: c.kv_bytes,
            act_bytes: c.act_bytes,
            intensity: if bytes > 0.0 { c.flops / bytes } else { 0.0 },
            attainable_gflops: if core > 0.0 {
                c.flops / core / 1e9
            } else {
                0.0
            },
            bound,
            time_us: t * calls * 1e6,
        }
    }
}

/// The resolved knobs the time model needs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plan {
    pub weights: WeightFormat,
    pub embedding: WeightFormat,
    pub kv: KvFormat,
    pub compute: ComputeDtype,
    pub batch: u64,
    pub prompt: u64,
    pub gen: u64,
    pub chunk: u64,
    /// `Some(C)`: graphs with static shapes for a context of `C` tokens
    /// ([`crate::runtime::RuntimeUnit::static_context`]): attention spans the whole buffer.
    pub static_context: Option<u64>,
    /// How the runtime's files store some layer matrices in other formats ([`LayerMix`]).
    pub mix: LayerMix,
}

/// A run of identical consecutive layers (same shape, and with a [`LayerMix`] the same
/// [`LayerMix::class`], so every matrix in the same format).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Group {
    pub first: usize,
    pub count: usize,
    pub layer: LayerSpec,
    /// The mix's [`LayerMix::class`] of its layers.
    pub class: u8,
}

pub(crate) fn groups(spec: &ModelSpec, mix: LayerMix) -> Vec<Group> {
    let n = spec.layers.len();
    let mut out: Vec<Group> = Vec::new();
    for (i, l) in spec.layers.iter().enumerate() {
        let class = mix.class(i, n);
        match out.last_mut() {
            Some(g) if g.layer == *l && g.class == class => g.count += 1,
            _ => out.push(Group {
                first: i,
                count: 1,
                layer: *l,
                class,
            }),
        }
    }
    out
}

pub(crate) struct TimeModel<'a> {
    pub spec: &'a ModelSpec,
    pub plan: Plan,
    pub groups: Vec<Group>,
}

impl<'a> TimeModel<'a> {
    pub fn new(spec: &'a ModelSpec, plan: Plan) -> Self {
        TimeModel {
            spec,
            plan,
            groups: groups(spec, plan.mix),
        }
    }

    fn a(&self) -> f64 {
        activation_bytes_per_value(self.plan.compute) as f64
    }

    fn matmul(&self, op: &'static str, fmt: WeightFormat, rows: u64, cols: u64, n: u64) -> OpCost {
        let bn = (self.plan.batch * n) as f64;
        let (r, c) = (rows as f64, cols as f64);
        OpCost {
            op,
            flops: 2.0 * bn * r * c,
            vector_flops: 0.0,
            weight_bytes: fmt.matrix_bytes(rows, cols) as f64,
            kv_bytes: 0.0,
            act_bytes: self.a() * bn * (r + c),
            weights: r * c,
            rows: bn,
            format: Some(fmt),
        }
    }

    pub fn attention(&self, l: &LayerSpec, n: u64, past: u64) -> OpCost {
        let b = self.plan.batch as f64;
        let (nf, pf) = (n as f64, past as f64);
        // Causal attention over the filled cache: S = n·p + n(n+1)/2 score entries, KV read
        // p + n tokens. A static-shape graph compiled for a context C (QNN / Genie, LiteRT)
        // computes every step over the whole buffer, masked: S = n·C and KV read C tokens.
        // A sliding-window layer's query sees only its newest w tokens, so over the filled
        // cache each count is capped by w. A static graph's buffers hold C positions in every
        // layer (ai-edge-torch's KV cache is (1, kv_cache_max, groups, head_dim) per layer), so
        // its sliding layers attend over C, masked, like the others.
        let (s, read) = match self.plan.static_context {
            Some(c) => (nf * c as f64, c as f64),
            None => {
                let w = l.sliding_window.map_or(f64::INFINITY, f64::from);
                (windowed_scores(nf, pf, w), pf.min(w) + nf)
            }
        };
        let h = f64::from(l.num_heads);
        let (dk, dv) = (f64::from(l.qk_head_dim), f64::from(l.v_head_dim));
        let per_tok = self.plan.kv.layer_bytes_per_token(l) as f64;
        OpCost {
            op: "attention",
            flops: b * h * (2.0 * dk + 2.0 * dv + 5.0) * s,
            vector_flops: b * h * (2.0 * dk + 2.0 * dv + 5.0) * s,
            weight_bytes: 0.0,
            kv_bytes: b * per_tok * read + b * per_tok * nf,
            act_bytes: self.a() * b * nf * h * (dk + dv),
            weights: 0.0,
            rows: 0.0,
            format: None,
        }
    }

    /// Every op of one block of group `g` except attention.
    pub fn block_ops(&self, g: &Group, n: u64) -> Vec<OpCost> {
        let l = &g.layer;
        let d = u64::from(self.spec.hidden_size);
        let i = u64::from(l.intermediate_size);
        // The format each matrix is held in (the layer format, or the mix's; `g.first` stands
        // for the group, whose layers all make the same choice).
        let n_layers = self.spec.layers.len();
        let w = |m, cols| {
            self.plan
                .mix
                .format(self.plan.weights, m, g.first, n_layers, cols)
        };
        let plain = w(BlockMatrix::Plain, d);
        let bn = (self.plan.batch * n) as f64;
        let df = d as f64;
        let norms = f64::from(self.spec.norms_per_layer);
        vec![
            OpCost {
                op: "norms",
                flops: norms * 4.0 * bn * df,
                vector_flops: norms * 4.0 * bn * df,
                weight_bytes: norms * 4.0 * df,
                kv_bytes: 0.0,
                act_bytes: norms * 2.0 * self.a() * bn * df,
                weights: 0.0,
                rows: 0.0,
                format: None,
            },
            self.matmul("q_proj", plain, l.q_dim(), d, n),
            self.matmul("k_proj", plain, l.k_dim(), d, n),
            self.matmul("v_proj", w(BlockMatrix::V, d), l.v_dim(), d, n),
            self.matmul(
                "o_proj",
                w(BlockMatrix::O, l.o_in_dim()),
                d,
                l.o_in_dim(),
                n,
            ),
            self.matmul("gate_proj", plain, i, d, n),
            self.matmul("up_proj", plain, i, d, n),
            OpCost {
                op: "mlp_act",
                flops: 5.0 * bn * i as f64,
                vector_flops: 5.0 * bn * i as f64,
                weight_bytes: 0.0,
                kv_bytes: 0.0,
                act_bytes: 3.0 * self.a() * bn * i as f64,
                weights: 0.0,
                rows: 0.0,
                format: None,
            },
            self.matmul("down_proj", w(BlockMatrix::Down, i), d, i, n),
        ]
    }

    /// Embedding lookup of `n` tokens, final norm and the output head for `logits` positions.
    pub fn head_ops(&self, n: u64, logits: u64) -> Vec<OpCost> {
        let d = u64::from(self.spec.hidden_size);
        let v = u64::from(self.spec.vocab_size);
        let b = self.plan.batch as f64;
        let df = d as f64;
        let mut lm = self.matmul("lm_head", self.plan.embedding, v, d, logits);
        lm.act_bytes +=
            4.0 * b * logits as f64 * v as f64 - self.a() * b * logits as f64 * v as f64;
        vec![
            OpCost {
                op: "embedding",
                flops: 0.0,
                vector_flops: 0.0,
                weight_bytes: b
                    * n as f64
                    * match (self.spec.tie_word_embeddings, self.plan.mix.token_embd) {
                        (false, Some(f)) => f,
                        _ => self.plan.embedding,
                    }
                    .row_bytes(d) as f64,
                kv_bytes: 0.0,
                act_bytes: self.a() * b * n as f64 * df,
                weights: 0.0,
                rows: 0.0,
                format: None,
            },
            OpCost {
                op: "final_norm",
                flops: 4.0 * b * logits as f64 * df,
                vector_flops: 4.0 * b * logits as f64 * df,
                weight_bytes: 4.0 * df,
                kv_bytes: 0.0,
                act_bytes: 2.0 * self.a() * b * logits as f64 * df,
                weights: 0.0,
                rows: 0.0,
                format: None,
            },
            lm,
        ]
    }

    /// Time (s) and bytes of one step of `n` tokens after `past`, with logits for the last one.
    pub fn step(&self, roof: &Roof, n: u64, past: u64) -> (f64, f64) {
        let mut t = roof.pass_overhead;
        let mut bytes = 0.0;
        for g in &self.groups {
            let c = g.count as f64;
            for op in self.block_ops(g, n) {
                t += c * roof.time(&op).0;
                bytes += c * op.bytes();
            }
            let at = self.attention(&g.layer, n, past);
            t += c * roof.time(&at).0;
            bytes += c * at.bytes();
        }
        for op in self.head_ops(n, 1) {
            t += roof.time(&op).0;
            bytes += op.bytes();
        }
        (t, bytes)
    }

    /// Ops of one forward pass in the op table (each pays the per-op overhead): every block op
    /// and attention per layer, plus embedding, final norm and lm_head.
    pub fn ops_per_pass(&self) -> f64 {
        self.groups
            .iter()
            .map(|g| g.count as f64 * (self.block_ops(g, 1).len() as f64 + 1.0))
            .sum::<f64>()
            + 3.0
    }

    /// Chunks of the prompt: (n, past) pairs.
    pub fn chunks(&self) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut p = 0;
        while p < self.plan.prompt {
            let n = self.plan.chunk.min(self.plan.prompt - p);
            out.push((n, p));
            p += n;
        }
        out
    }

    /// Prefill time (s) and bytes moved. Logits are computed for the last chunk only.
    pub fn prefill(&self, roof: &Roof) -> (f64, f64) {
        let chunks = self.chunks();
        let mut t = 0.0;
        let mut bytes = 0.0;
        for (k, &(n, p)) in chunks.iter().enumerate() {
            t += roof.pass_overhead;
            for g in &self.groups {
                let c = g.count as f64;
                for op in self.block_ops(g, n) {
                    t += c * roof.time(&op).0;
                    bytes += c * op.bytes();
                }
                let at = self.attention(&g.layer, n, p);
                t += c * roof.time(&at).0;
                bytes += c * at.bytes();
            }
            let logits = u64::from(k + 1 == chunks.len());
            for op in self.head_ops(n, logits) {
                if logits == 0 && op.op != "embedding" {
                    continue;
                }
                t += roof.time(&op).0;
                bytes += op.bytes();
            }
        }
        (t, bytes)
    }

    /// Decode steps at cache lengths `start .. start + steps`: total time (s) and bytes.
    pub fn decode_sum(&self, roof: &Roof, start: u64, steps: u64) -> (f64, f64) {
        // Everything but attention is the same at every step.
        let mut t_const = roof.pass_overhead;
        let mut b_const = 0.0;
        for g in &self.groups {
            for op in self.block_ops(g, 1) {
                t_const += g.count as f64 * roof.time(&op).0;
                b_const += g.count as f64 * op.bytes();
            }
        }
        for op in self.head_ops(1, 1) {
            t_const += roof.time(&op).0;
            b_const += op.bytes();
        }
        let at = |pos: u64| -> (f64, f64) {
            let mut t = 0.0;
            let mut b = 0.0;
            for g in &self.groups {
                let a = self.attention(&g.layer, 1, pos);
                t += g.count as f64 * roof.time(&a).0;
                b += g.count as f64 * a.bytes();
            }
            (t, b)
        };
        const EXACT: u64 = 8192;
        let (mut t, mut b) = (0.0, 0.0);
        if steps <= EXACT {
            for pos in start..start + steps {
                let (ta, ba) = at(pos);
                t += ta;
                b += ba;
            }
        } else {
            for j in 0..EXACT {
                let lo = start + steps * j / EXACT;
                let hi = start + steps * (j + 1) / EXACT;
                if hi == lo {
                    continue;
                }
                let (t0, b0) = at(lo);
                let (t1, b1) = at(hi - 1);
                let len = (hi - lo) as f64;
                t += (t0 + t1) / 2.0 * len;
                b += (b0 + b1) / 2.0 * len;
            }
        }
        (t + t_const * steps as f64, b + b_const * steps as f64)
    }

    /// Number of decode steps and the cache length of the first one.
    pub fn decode_steps(&self) -> (u64, u64) {
        (self.plan.gen.saturating_sub(1).max(1), self.plan.prompt)
    }

    /// Op table of one group: prefill totals over all chunks, and the first decode step.
    pub fn group_rows(
        &self,
        roof: &Roof,
        decode_roof: &Roof,
        g: &Group,
    ) -> (Vec<OpRow>, Vec<OpRow>) {
        let chunks = self.chunks();
        let mut prefill: Vec<(OpCost, f64)> = Vec::new();
        for &(n, p) in &chunks {
            let mut ops = self.block_ops(g, n);
            ops.insert(4, self.attention(&g.layer, n, p));
            for (k, op) in ops.into_iter().enumerate() {
                let t = roof.time(&op).0;
                match prefill.get_mut(k) {
                    Some((acc, tt)) => {
                        acc.add(&op);
                        *tt += t;
                    }
                    None => prefill.push((op, t)),
                }
            }
        }
        let prefill_rows = prefill
            .iter()
            .map(|(c, t)| {
                let mut r = roof.row(c, 1.0);
                r.time_us = t * 1e6;
                r
            })
            .collect();
        let mut dec = self.block_ops(g, 1);
        dec.insert(4, self.attention(&g.layer, 1, self.plan.prompt));
        let decode_rows = dec.iter().map(|c| decode_roof.row(c, 1.0)).collect();
        (prefill_rows, decode_rows)
    }
}

/// One row group of the per-layer table: identical consecutive layers share one table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerTable {
    /// First layer index of the run.
    pub first_layer: usize,
    /// Last layer index of the run (inclusive).
    pub last_layer: usize,
    /// Number of layers in the run.
    pub count: usize,
    /// Per-layer ops summed over all prefill chunks (one layer; multiply by `count`).
    pub prefill: Vec<OpRow>,
    /// Per-layer ops of the first decode step (cache = prompt tokens).
    pub decode: Vec<OpRow>,
}

fn default_runtime_id() -> crate::deploy::Runtime {
    crate::deploy::Runtime::Edgefit
}

/// Milliseconds of a step's ops by the roof that bounds each op ([`Bound`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BoundMs {
    pub memory: f64,
    pub kernel: f64,
    pub compute: f64,
    pub overhead: f64,
}

impl BoundMs {
    /// Adds `rows` (each `times` times) to their bounds' totals.
    pub fn add(&mut self, rows: &[OpRow], times: f64) {
        for r in rows {
            let ms = r.time_us * times / 1e3;
            match r.bound {
                Bound::Memory => self.memory += ms,
                Bound::Kernel => self.kernel += ms,
                Bound::Compute => self.compute += ms,
                Bound::Overhead => self.overhead += ms,
            }
        }
    }
}

/// One point of the decode-time curve.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    /// Tokens in the cache when the step runs.
    pub kv_tokens: u64,
    /// Time of that step, ms.
    pub ms: f64,
}

/// Latency side of the report, at the unit's top frequency (no throttling).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatencyReport {
    /// Unit used.
    pub unit: crate::ComputeUnit,
    /// Compute precision of the matrix products (the runtime's for the weight format).
    pub compute: ComputeDtype,
    /// Runtime.
    #[serde(default = "default_runtime_id")]
    pub runtime: crate::deploy::Runtime,
    /// CPU threads used (`null` on other units).
    #[serde(default)]
    pub threads: Option<u32>,
    /// Frequency assumed, MHz (the top of the table).
    pub freq_mhz: f64,
    /// Peak of the unit for the dtype, GFLOP/s.
    pub peak_gflops: f64,
    /// Peak × efficiency, GFLOP/s.
    pub effective_gflops: f64,
    /// Achieved bandwidth in decode, GB/s.
    pub bandwidth_gbs: f64,
    /// Achieved bandwidth in prefill, GB/s.
    #[serde(default)]
    pub prefill_bandwidth_gbs: f64,
    /// Fixed cost per op, µs.
    #[serde(default)]
    pub op_overhead_us: f64,
    /// The unit's roof of the ops other than matrix products (norms, MLP activation,
    /// attention), GFLOP/s,
    /// where it has one (this browser tab measures it); absent: they run at the compute roof.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vector_gflops: Option<f64>,
    /// Fixed cost per forward pass (decode step or prefill chunk), µs.
    #[serde(default)]
    pub token_overhead_us: f64,
    /// Ridge point: FLOPs per byte where compute and memory roofs meet.
    pub ridge_intensity: f64,
    /// Prefill time, ms.
    pub prefill_ms: f64,
    /// Time to first token, ms.
    pub ttft_ms: f64,
    /// `[low, high]` TTFT, ms (from the prefill band, see [`crate::uncertainty`]).
    #[serde(default)]
    pub ttft_ms_range: [f64; 2],
    /// Prompt tokens per second in prefill (all sequences).
    pub prefill_tok_s: f64,
    /// `[low, high]` prefill tok/s: the estimate times the 10th and 90th percentile of the
    /// validation set's measured/estimated ratios for this unit ([`crate::uncertainty`]).
    #[serde(default)]
    pub prefill_tok_s_range: [f64; 2],
    /// First decode step, ms.
    pub decode_ms_first: f64,
    /// Last decode step, ms.
    pub decode_ms_last: f64,
    /// Average decode tokens per second over the generation (all sequences).
    pub decode_tok_s: f64,
    /// `[low, high]` decode tok/s, as `prefill_tok_s_range`.
    #[serde(default)]
    pub decode_tok_s_range: [f64; 2],
    /// Share of the first decode step spent in fixed overheads (per-op + per-pass), 0–1.
    #[serde(default)]
    pub decode_overhead_share: f64,
    /// How the ranges were obtained.
    #[serde(default)]
    pub range_basis: String,
    /// Tokens every step's attention spans when the runtime runs static-shape graphs compiled
    /// for the whole context (QNN / Genie: the deployment's `context`); `None`: the filled
    /// cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub static_context_tokens: Option<u64>,
    /// Bytes moved by the first decode step.
    pub decode_bytes_per_step: f64,
    /// The first decode step's op time by what bounds each op (ms; the per-op fixed cost
    /// included in each op's), so a reader sees which roof sets the step: the bytes moved, a
    /// CPU decode kernel's weight rate, compute, or the fixed cost alone.
    #[serde(default)]
    pub decode_ms_by_bound: BoundMs,
    /// Step time as the cache grows (up to 33 points).
    pub decode_curve: Vec<CurvePoint>,
    /// The head (embedding, final norm, lm_head) in the first decode step.
    pub head_decode: Vec<OpRow>,
}

/// `Σ_{i=1..n} min(p + i, w)`: the score entries of `n` causal queries after `p` cached tokens
/// when each sees at most its newest `w` tokens (itself included); `w = ∞` (no window) gives
/// the full causal count `n·p + n(n+1)/2`.
fn windowed_scores(n: f64, p: f64, w: f64) -> f64 {
    if p + n <= w {
        n * p + n * (n + 1.0) / 2.0
    } else if p >= w {
        n * w
    } else {
        // Queries p+1 ..= w see all they have; the rest see w each.
        (w * (w + 1.0) - p * (p + 1.0)) / 2.0 + (p + n - w) * w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windowed_scores_count_what_each_query_sees() {
        for w in [1u32, 3, 8, 40] {
            for p in [0u32, 1, 2, 7, 8, 9, 50] {
                for n in [1u32, 2, 5, 8, 33] {
                    let brute: u32 = (1..=n).map(|i| (p + i).min(w)).sum();
                    let got = windowed_scores(f64::from(n), f64::from(p), f64::from(w));
                    assert_eq!(got, f64::from(brute), "n {n} p {p} w {w}");
                }
            }
        }
    }

    #[test]
    fn format_rates_index_every_format_in_its_place() {
        for (i, &f) in WeightFormat::ALL.iter().enumerate() {
            assert_eq!(FormatRates::index(f), i, "{f}");
        }
    }

    /// A CPU's decode GEMV (under a runtime profile) takes the time of its bytes plus the time of
    /// its instructions; a GPU's, the longer of the two; compute and the fixed cost as before.
    #[test]
    fn a_cpu_kernel_time_adds_to_the_bytes_time_a_gpu_takes_the_longer() {
        let roof = |adds| Roof {
            flops: 1e12,
            bw: 10e9,
            weight_rate: Some(20e9),
            prefill_weight_rate: None,
            format_rates: FormatRates::default(),
            vector_flops: None,
            overhead: 1e-6,
            pass_overhead: 0.0,
            kernel_adds_to_memory: adds,
        };
        // 1e9 weights in 0.5e9 bytes, one row: bytes 50 ms, instructions 50 ms, compute 2 ms.
        let op = OpCost {
            op: "gate_proj",
            flops: 2e9,
            vector_flops: 0.0,
            weight_bytes: 0.5e9,
            kv_bytes: 0.0,
            act_bytes: 0.0,
            weights: 1e9,
            rows: 1.0,
            format: Some(WeightFormat::Q4_0),
        };
        let (t, bound) = roof(true).time(&op);
        assert!((t - (0.05 + 0.05 + 1e-6)).abs() < 1e-12, "{t}");
        assert_eq!(bound, Bound::Kernel);
        let (t, _) = roof(false).time(&op);
        assert!((t - (0.05 + 1e-6)).abs() < 1e-12, "{t}");
        // No kernel roof (an unquantized format): the bytes alone, either way.
        let plain = Roof {
            weight_rate: None,
            ..roof(true)
        };
        let (t, bound) = plain.time(&op);
        assert!((t - (0.05 + 1e-6)).abs() < 1e-12, "{t}");
        assert_eq!(bound, Bound::Memory);
    }

    #[test]
    fn a_vector_roof_times_only_the_element_wise_flops() {
        let roof = |vector| Roof {
            flops: 100e9,
            bw: 1e12,
            weight_rate: None,
            prefill_weight_rate: None,
            format_rates: FormatRates::default(),
            vector_flops: vector,
            overhead: 0.0,
            pass_overhead: 0.0,
            kernel_adds_to_memory: false,
        };
        // An op of 1 GFLOP of which 0.1 GFLOP outside matrix products.
        let op = OpCost {
            op: "attention",
            flops: 1e9,
            vector_flops: 1e8,
            weight_bytes: 0.0,
            kv_bytes: 0.0,
            act_bytes: 0.0,
            weights: 0.0,
            rows: 0.0,
            format: None,
        };
        let (t, bound) = roof(None).time(&op);
        assert!((t - 0.01).abs() < 1e-12, "{t}");
        assert_eq!(bound, Bound::Compute);
        // 0.9 GFLOP at 100 GFLOP/s + 0.1 GFLOP at 2 GFLOP/s.
        let (t, bound) = roof(Some(2e9)).time(&op);
        assert!((t - (0.009 + 0.05)).abs() < 1e-12, "{t}");
        assert_eq!(bound, Bound::Compute);
        // A matmul has no element-wise FLOPs: the vector roof does not touch it.
        let mm = OpCost {
            vector_flops: 0.0,
            ..op
        };
        assert_eq!(roof(Some(2e9)).time(&mm), roof(None).time(&mm));
    }
}
