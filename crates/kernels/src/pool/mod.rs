//! [`Pool`]: a persistent thread pool that splits a matrix product into ranges of output rows
//! and per-item work (attention heads) into runs of items, with results that do not depend on
//! the thread count.
//!
//! Why the bits do not change: every output value is computed by exactly the code one thread
//! would run for it. Products split at multiples of [`ROW_SPLIT`] rows, where every kernel's
//! tile passes line up with the whole matrix's ([`Matrix::matmul_rows`]); items (one attention
//! head of one token) are independent. Nothing is reduced across threads.
//!
//! The pool is ggml's model rather than a work-stealing one: `threads − 1` workers wait on an
//! epoch counter (spinning briefly, then parked on a condition variable); a region publishes a
//! job `f(i)` for `i in 0..jobs`, the calling thread and the workers take indices from one
//! atomic counter. A worker joins a region through its gate (one atomic word: the region's
//! epoch, the workers joined, and a closed bit); once the caller has taken the last index it
//! closes the gate and waits only for the workers that joined, so the job, borrowed from the
//! caller's stack, is never touched after it returns, and a worker the OS has not scheduled
//! (a busy machine) does not hold the region up: the caller runs its share instead. One region
//! is a handful of atomic operations and no allocation, which matters at ~150 regions per
//! decoded token.
//!
//! On wasm32 `std::thread::spawn` always fails. A wasm32 build without the `atomics` target
//! feature (the page's simd128 and baseline builds) has no shared memory: a pool of more than
//! one thread is refused with an error, and the serial pool runs every job on the caller. The
//! threaded build (`+atomics,+bulk-memory,+mutable-globals`, std rebuilt, shared memory) starts
//! its workers through a [`Spawner`] that the embedder installs once ([`set_spawner`]; the wasm
//! facade's starts a Web Worker that instantiates the same module over the same memory and runs
//! the closure from an exported entry point). Everything else is the same code: std's `Mutex`
//! and `Condvar` park on `memory.atomic.wait32` there, which browsers allow in workers (the
//! engine itself runs in a worker, never on a page's main thread). Without a spawner installed,
//! more than one thread is refused as in the other wasm builds.
//!
//! A job that fails on a worker never leaves the caller waiting. Natively a panicking job is
//! caught on the worker (`catch_unwind`). On wasm32 a panic aborts: the Web Worker's instance
//! traps and that thread never acknowledges its region, so its embedder (web/pool-worker.js)
//! reports the loss through [`worker_lost`] on the same instance, which marks the worker lost
//! (one atomic word per worker: joined the current region, lost); the caller waits only for
//! the joined workers that are not lost. Either way the region ends, the pool records the
//! failure for good (later regions run on the caller alone, their results correct) and
//! [`Pool::check`] returns it as [`KernelError::PoolFailed`], which the engine turns into an
//! error of the forward pass that met it and of every later one, until a new pool (another
//! thread count, another model) replaces this one.

use std::cell::{Cell, UnsafeCell};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use crate::act::{quantize_rows, ActQ16, BLOCK};
use crate::error::{KernelError, Result};
use crate::matrix::{Matrix, Prepared, ROW_SPLIT};
use crate::Kernel;

/// The largest thread count a pool accepts (far beyond any device edgefit sizes).
pub const MAX_THREADS: usize = 256;

/// Starts `f` on a new thread of the same address space (wasm32 with `atomics`: a Web Worker
/// over the shared memory), or says why it could not. The thread runs `f` to its end and then
/// stops; the pool never joins it (its workers return once the pool is dropped).
pub type Spawner = fn(Box<dyn FnOnce() + Send>) -> std::result::Result<(), String>;

#[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
static SPAWNER: std::sync::OnceLock<Spawner> = std::sync::OnceLock::new();

/// Installs how a wasm32 build with `atomics` starts pool threads (once; later calls are
/// ignored). Returns whether this build can use it: `false` natively (std threads are used) and
/// on wasm32 without `atomics` (no shared memory, so no second thread).
pub fn set_spawner(spawner: Spawner) -> bool {
    #[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
    {
        let _ = SPAWNER.set(spawner);
        true
    }
    #[cfg(not(all(target_arch = "wasm32", target_feature = "atomics")))]
    {
        let _ = spawner;
        false
    }
}

/// Whether [`Pool::new`] can start more than one thread in this build: always natively; on
/// wasm32 only with `atomics` and a [`Spawner`] installed.
pub fn threads_supported() -> bool {
    #[cfg(not(target_arch = "wasm32"))]
    {
        true
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
    {
        SPAWNER.get().is_some()
    }
    #[cfg(all(target_arch = "wasm32", not(target_feature = "atomics")))]
    {
        false
    }
}

/// The default thread count: the CPUs this process may use
/// (`std::thread::available_parallelism`: affinity and cgroup quotas included, SMT siblings
/// counted as CPUs), capped at 8. 1 where it cannot be told, and always 1 on wasm32.
///
/// Why a cap: every matrix product is one region that each worker must acknowledge, ~150 per
/// decoded token for the default model, and a region's smallest products are small (its k/v
/// projections, 192 rows: 24 [`ROW_SPLIT`] units, 3 per thread at 8 threads, about 14k
/// multiply-adds each). Past a handful of threads a decode step waits on the slowest worker of
/// each region more than it gains in compute, and decode streams the weights once per token,
/// so it is bound by memory bandwidth long before the core count of a phone or laptop runs
/// out. `--threads N` (up to [`MAX_THREADS`]) overrides it.
pub fn default_threads() -> usize {
    if cfg!(target_arch = "wasm32") {
        return 1;
    }
    std::thread::available_parallelism()
        .map(|n| n.get().min(8))
        .unwrap_or(1)
}

/// A pool of threads that run the parallel regions of a forward pass: cheap to clone (shared).
#[derive(Clone)]
pub struct Pool {
    threads: usize,
    inner: Option<Arc<Handle>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("threads", &self.threads)
            .finish()
    }
}

impl Default for Pool {
    fn default() -> Pool {
        Pool::serial()
    }
}

/// A job: `f(i)` for one index of the current region.
type Job = dyn Fn(usize) + Sync;

/// State shared by the caller and the workers.
struct Shared {
    /// Bumped once per region (and once to quit).
    epoch: AtomicUsize,
    /// The next job index to take.
    next: AtomicUsize,
    jobs: AtomicUsize,
    /// Workers that finished the current region (of those the gate let in).
    done: AtomicUsize,
    /// `epoch << GATE_EPOCH_SHIFT | joined << 1 | closed`: workers join the current region by
    /// adding 2 while its epoch is there and the closed bit is clear.
    gate: AtomicUsize,
    /// The current region's job, written by the caller only while no worker reads it (between
    /// regions, under `busy`), read by workers only between joining through the gate and `done`.
    job: UnsafeCell<Option<*const Job>>,
    panicked: AtomicBool,
    /// Per worker (thread `i` at `i − 1`): [`SLOT_JOINED`] while it runs the current region's
    /// jobs, [`SLOT_LOST`] once its embedder reported it stopped ([`worker_lost`]).
    slots: Box<[AtomicUsize]>,
    /// Workers lost after joining the current region (they never acknowledge it).
    lost: AtomicUsize,
    /// The first failure, for good: 0, or `thread << 2 | FAIL_PANIC / FAIL_LOST`.
    failure: AtomicUsize,
    /// A worker's panic message (native; the wasm panic hook logs its own).
    failure_msg: Mutex<String>,
    quit: AtomicBool,
    sleeping: AtomicUsize,
    lock: Mutex<()>,
    wake: Condvar,
    /// One region at a time (a pool shared by two callers serialises their regions).
    busy: Mutex<()>,
}

// SAFETY: `job` is the only non-Sync field; the protocol above gives it a single writer at a
// time with happens-before edges (the gate's SeqCst store/CAS, `done`'s Release/Acquire)
// between the write and every read. The pointee is `Sync`.
unsafe impl Sync for Shared {}
// SAFETY: as above; the raw pointer is only dereferenced under that protocol.
unsafe impl Send for Shared {}

/// Owns the worker threads: dropping the last [`Pool`] clone stops and joins them.
struct Handle {
    shared: Arc<Shared>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shared.quit.store(true, Ordering::SeqCst);
        self.shared.epoch.fetch_add(1, Ordering::SeqCst);
        {
            let _g = self.shared.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.wake.notify_all();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Spins before a worker parks (~tens of µs): regions of one forward pass follow each other
/// closely, and a parked worker costs a futex wake.
const SPINS: usize = 1 << 14;

impl Pool {
    /// One thread: every job runs on the caller.
    pub fn serial() -> Pool {
        Pool {
            threads: 1,
            inner: None,
        }
    }

    /// A pool of `threads` threads (the caller and `threads − 1` workers).
    ///
    /// # Errors
    /// [`KernelError::Threads`] for 0, more than [`MAX_THREADS`], or more than 1 where this
    /// build has no threads ([`threads_supported`]); [`KernelError::Spawn`] if the system (or
    /// the [`Spawner`]) refuses a thread.
    pub fn new(threads: usize) -> Result<Pool> {
        if threads == 0 || threads > MAX_THREADS {
            return Err(KernelError::Threads {
                value: threads,
                expected: format!("a thread count from 1 to {MAX_THREADS}"),
            });
        }
        if threads == 1 {
            return Ok(Pool::serial());
        }
        if !threads_supported() {
            return Err(KernelError::Threads {
                value: threads,
                expected: "1: this wasm build runs one thread (the threaded build needs a \
                           cross-origin isolated page)"
                    .into(),
            });
        }
        let shared = Arc::new(Shared {
            epoch: AtomicUsize::new(0),
            next: AtomicUsize::new(0),
            jobs: AtomicUsize::new(0),
            done: AtomicUsize::new(0),
            gate: AtomicUsize::new(GATE_CLOSED),
            job: UnsafeCell::new(None),
            panicked: AtomicBool::new(false),
            slots: (1..threads).map(|_| AtomicUsize::new(0)).collect(),
            lost: AtomicUsize::new(0),
            failure: AtomicUsize::new(0),
            failure_msg: Mutex::new(String::new()),
            quit: AtomicBool::new(false),
            sleeping: AtomicUsize::new(0),
            lock: Mutex::new(()),
            wake: Condvar::new(),
            busy: Mutex::new(()),
        });
        let mut handle = Handle {
            shared: shared.clone(),
            threads: Vec::with_capacity(threads - 1),
        };
        for i in 1..threads {
            let s = shared.clone();
            // On an error, dropping `handle` stops the workers started so far.
            if let Some(t) = spawn(i, move || worker(&s, i))? {
                handle.threads.push(t);
            }
        }
        Ok(Pool {
            threads,
            inner: Some(Arc::new(handle)),
        })
    }

    /// Threads that run a region (the caller included).
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The failure this pool met, if any: a job that panicked on a worker, or a worker lost
    /// in a region ([`worker_lost`]). For good: the pool then runs every region on the caller
    /// alone, and a new pool is needed to use the threads again.
    ///
    /// # Errors
    /// [`KernelError::PoolFailed`] naming the thread and what happened.
    pub fn check(&self) -> Result<()> {
        let Some(s) = self.inner.as_ref().map(|h| &*h.shared) else {
            return Ok(());
        };
        let f = s.failure.load(Ordering::SeqCst);
        if f == 0 {
            return Ok(());
        }
        let (thread, kind) = (f >> 2, f & 3);
        let what = if kind == FAIL_PANIC {
            let msg = s.failure_msg.lock().unwrap_or_else(|e| e.into_inner());
            format!("a job panicked on it ({msg})")
        } else {
            "it stopped inside a parallel region (its Web Worker's wasm trapped: a panic or an \
             engine bug, whose message is in the browser console)"
                .to_string()
        };
        Err(KernelError::PoolFailed(format!(
            "pool thread {thread} of {}: {what}; this pool runs no more parallel work: load \
             the model again or choose another thread count",
            self.threads
        )))
    }

    /// Runs `f(i)` for every `i in 0..jobs` across the pool (the calling thread included) and
    /// returns when all have run. No allocation.
    ///
    /// A job that panics on a worker, or a worker lost inside the region ([`worker_lost`]),
    /// ends the region without the jobs that did not finish: [`check`](Self::check) says so
    /// from then on, and every later region runs on the caller alone.
    ///
    /// # Panics
    /// If a job panics on the calling thread (after the workers that joined finished).
    pub fn run(&self, jobs: usize, f: &(dyn Fn(usize) + Sync)) {
        let handle = self
            .inner
            .as_ref()
            .filter(|h| jobs > 1 && h.shared.failure.load(Ordering::Relaxed) == 0);
        let Some(handle) = handle else {
            for i in 0..jobs {
                f(i);
            }
            return;
        };
        let s = &*handle.shared;
        let _busy = s.busy.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: the lifetime is erased only for the duration of this region: `Wait` below
        // returns (also on unwind) only after every worker acknowledged it, and no worker reads
        // the pointer after acknowledging.
        let job: *const Job =
            unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync), &'static Job>(f) };
        // SAFETY: no worker reads `job` between regions (see `Shared::job`), and `busy` is held.
        unsafe { *s.job.get() = Some(job) };
        s.jobs.store(jobs, Ordering::Relaxed);
        s.next.store(0, Ordering::Relaxed);
        s.done.store(0, Ordering::Relaxed);
        s.lost.store(0, Ordering::Relaxed);
        s.panicked.store(false, Ordering::Relaxed);
        let epoch = s.epoch.load(Ordering::Relaxed).wrapping_add(1);
        // Open the gate for the new epoch (no worker is inside: the last region's gate was
        // closed and its joiners finished), then publish the epoch.
        s.gate.store(gate_open(epoch), Ordering::SeqCst);
        s.epoch.store(epoch, Ordering::SeqCst);
        if s.sleeping.load(Ordering::SeqCst) > 0 {
            let _g = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            s.wake.notify_all();
        }
        struct Wait<'a>(&'a Shared);
        impl Drop for Wait<'_> {
            fn drop(&mut self) {
                // Close the gate: no worker joins from now on; wait for those that did and
                // are not lost (a lost worker never touches the job again).
                let joined =
                    (self.0.gate.fetch_or(GATE_CLOSED, Ordering::SeqCst) & GATE_JOINED) >> 1;
                let mut spins = 0usize;
                while self.0.done.load(Ordering::Acquire) + self.0.lost.load(Ordering::SeqCst)
                    < joined
                {
                    spins += 1;
                    if spins < SPINS {
                        std::hint::spin_loop();
                    } else {
                        std::thread::yield_now();
                    }
                }
                // SAFETY: every worker that joined finished; the closed gate keeps the others
                // out, so none reads `job` now.
                unsafe { *self.0.job.get() = None };
            }
        }
        let wait = Wait(s);
        loop {
            let i = s.next.fetch_add(1, Ordering::Relaxed);
            if i >= jobs {
                break;
            }
            f(i);
        }
        drop(wait);
    }

    /// `y = x · Wᵀ` for every `(w, out)` reading the same input `x` (`m × cols`), which is
    /// prepared once into `prep` on `kernel`; each job computes one range of rows of every
    /// matrix ([`JOBS_PER_THREAD`] jobs per thread), so a group (q/k/v, gate/up) is one region. `out`s are resized to `m × rows`.
    /// For `m > 1` (token-major outputs, strided per row range) each job writes its range into
    /// `scratch` and copies it into place itself (O(m·n) against O(m·n·k), split like the
    /// product).
    pub fn linear(
        &self,
        kernel: Kernel,
        prep: &mut Prepared,
        scratch: &mut Vec<f32>,
        x: &[f32],
        m: usize,
        outs: &mut [(&Matrix, &mut Vec<f32>)],
    ) {
        let Some(cols) = outs.first().map(|(w, _)| w.cols()) else {
            return;
        };
        prep.prepare(
            kernel,
            x,
            m,
            cols,
            outs.iter().map(|(w, _)| *w),
            &|xq, x, m, cols| self.requantize(xq, x, m, cols),
        );
        let widest = outs.iter().map(|(w, _)| w.rows()).max().unwrap_or(0);
        let jobs = match self.threads {
            1 => 1,
            t => (JOBS_PER_THREAD * t).min(widest.div_ceil(ROW_SPLIT)).max(1),
        };
        for (w, out) in outs.iter_mut() {
            out.resize(m * w.rows(), 0.0);
        }
        if jobs == 1 {
            for (w, out) in outs.iter_mut() {
                w.matmul_rows(prep, x, 0..w.rows(), out);
            }
            return;
        }
        assert!(
            outs.len() <= MAX_GROUP,
            "Pool::linear: more than {MAX_GROUP} matrices"
        );
        let direct = m == 1;
        if !direct {
            scratch.resize(outs.iter().map(|(w, _)| m * w.rows()).sum(), 0.0);
        }
        // Where each matrix's outputs go: its own buffer, and (more than one token) its part of
        // `scratch`, where a job's rows `r` come out as one `m × r.len()` block.
        let mut targets: [(Option<&Matrix>, Disjoint, Disjoint); MAX_GROUP] = Default::default();
        let mut at = 0;
        for (i, (w, out)) in outs.iter_mut().enumerate() {
            let block = if direct {
                Disjoint::default()
            } else {
                let len = m * w.rows();
                let d = Disjoint::new(&mut scratch[at..at + len]);
                at += len;
                d
            };
            targets[i] = (Some(*w), Disjoint::new(out), block);
        }
        let prep = &*prep;
        self.run(jobs, &|j| {
            for (w, out, block) in targets.iter() {
                let Some(w) = w else { break };
                let (n, r) = (w.rows(), split(w.rows(), jobs, j));
                if direct {
                    // SAFETY: job `j`'s ranges `r` are disjoint from every other job's.
                    w.matmul_rows(prep, x, r.clone(), unsafe { out.slice(r) });
                    continue;
                }
                // SAFETY: job `j` alone writes block `[m·r.start, m·r.end)` of the scratch.
                let part = unsafe { block.slice(m * r.start..m * r.end) };
                w.matmul_rows(prep, x, r.clone(), part);
                // Block `[t][r − lo]` into `out[t][r]`, here rather than after the region: the
                // copy is split across the threads too.
                let len = r.len();
                for t in 0..m {
                    // SAFETY: row `t`'s columns `r` of `out` are job `j`'s alone.
                    let dst = unsafe { out.slice(t * n + r.start..t * n + r.end) };
                    dst.copy_from_slice(&part[t * len..(t + 1) * len]);
                }
            }
        });
    }

    /// [`ActQ16::requantize`] of `x` (`m × cols`) into `xq`, its rows split across the pool
    /// when there are several (a prefill chunk): each row is quantized by the same code
    /// whichever thread takes it, so `xq` holds the same values on any thread count. One row
    /// (a decode step) runs on the caller: a region would cost more than its ~600 values.
    pub fn requantize(&self, xq: &mut ActQ16, x: &[f32], m: usize, cols: usize) {
        let jobs = self.threads.min(m);
        if jobs <= 1 || cols == 0 {
            xq.requantize(x, m, cols);
            return;
        }
        assert_eq!(
            x.len(),
            m * cols,
            "Pool::requantize: x has the wrong length"
        );
        xq.reset(m, cols);
        let blocks = cols.div_ceil(BLOCK);
        let (q, scales, sums) = xq.parts_mut();
        let (q, scales, sums) = (Disjoint::new(q), Disjoint::new(scales), Disjoint::new(sums));
        self.run(jobs, &|j| {
            let r = (m * j / jobs)..(m * (j + 1) / jobs);
            // SAFETY: job `j` alone writes rows `r` of each buffer.
            let (q, scales, sums) = unsafe {
                (
                    q.slice(r.start * blocks * BLOCK..r.end * blocks * BLOCK),
                    scales.slice(r.start * blocks..r.end * blocks),
                    sums.slice(r.start * blocks..r.end * blocks),
                )
            };
            quantize_rows(
                &x[r.start * cols..r.end * cols],
                cols,
                blocks,
                q,
                scales,
                sums,
            );
        });
    }

    /// Runs `f(item, out_item, scratch)` for every item of `out` (`out.len() / item_len` items
    /// of `item_len` values), spread over the pool in runs of consecutive items; each run gets
    /// its own `scratch_len` values of `scratch` (resized here). `f` must compute an item from
    /// its index alone (the attention heads of a token).
    pub fn for_each_item(
        &self,
        out: &mut [f32],
        item_len: usize,
        scratch: &mut Vec<f32>,
        scratch_len: usize,
        f: &ItemJob<'_>,
    ) {
        let items = out.len().checked_div(item_len).unwrap_or(0);
        // A few runs per thread balance causal prefill, where later tokens see more keys.
        let jobs = if self.threads == 1 {
            1
        } else {
            items.min(4 * self.threads).max(1)
        };
        scratch.resize(jobs * scratch_len, 0.0);
        let (outs, scr) = (Disjoint::new(out), Disjoint::new(scratch));
        self.run(jobs, &|j| {
            let r = split(items, jobs, j);
            // SAFETY: job `j` alone writes items `r` of `out` and run `j` of `scratch`.
            let (o, sc) = unsafe {
                (
                    outs.slice(r.start * item_len..r.end * item_len),
                    scr.slice(j * scratch_len..(j + 1) * scratch_len),
                )
            };
            for (i, item) in r.clone().zip(o.chunks_exact_mut(item_len.max(1))) {
                f(i, item, sc);
            }
        });
    }
}

/// `f(item, out_item, scratch)` of [`Pool::for_each_item`].
pub type ItemJob<'a> = dyn Fn(usize, &mut [f32], &mut [f32]) + Sync + 'a;

/// Matrices one [`Pool::linear`] region computes at most (q/k/v is three).
pub const MAX_GROUP: usize = 4;

/// Row ranges per thread in one [`Pool::linear`] region (fewer where a matrix has fewer
/// [`ROW_SPLIT`] units). Threads take ranges from the region's counter, so a thread the OS
/// did not schedule at once, or took off its core halfway (a browser's other threads on a
/// 2-core machine), holds back a quarter of its share rather than all of it: the others take
/// the rest. On the page's threaded build at 2 threads (`tests/bench/run-ab.mjs`, 6 and 8
/// interleaved rounds on 2026-12-06) prefill ran at a median 136.9 and 160.0 tok/s against
/// 114.7 and 128.1 with one range per thread; decode did not move beyond the noise.
pub const JOBS_PER_THREAD: usize = 4;

/// Part `j` of `jobs` of `0..n`, on [`ROW_SPLIT`] boundaries (the last part ends at `n`; parts
/// may be empty when `n` is small).
pub(crate) fn split(n: usize, jobs: usize, j: usize) -> Range<usize> {
    let units = n.div_ceil(ROW_SPLIT);
    let at = |j: usize| (units * j / jobs * ROW_SPLIT).min(n);
    at(j)..at(j + 1)
}

/// A worker's slot bits ([`Shared::slots`]).
const SLOT_JOINED: usize = 1;
const SLOT_LOST: usize = 2;
/// [`Shared::failure`] kinds.
const FAIL_PANIC: usize = 1;
const FAIL_LOST: usize = 2;

thread_local! {
    /// The pool and thread index of the worker loop running on this thread, for
    /// [`worker_lost`].
    static CURRENT: Cell<Option<(*const Shared, usize)>> = const { Cell::new(None) };
}

/// Records the first failure of the pool (`thread`, `kind`).
fn fail(s: &Shared, thread: usize, kind: usize) {
    let _ = s
        .failure
        .compare_exchange(0, thread << 2 | kind, Ordering::SeqCst, Ordering::SeqCst);
}

/// Reports that the pool worker of this thread stopped and will never run again: on wasm32 the
/// embedder calls it on the worker's own instance after the pool's closure threw (the wasm
/// trapped, which no `catch_unwind` sees). The region the worker was in then ends without it
/// (its caller stops waiting for it), and the pool fails for good ([`Pool::check`]). Returns
/// whether this thread ran a pool worker. Only atomics: nothing here allocates or locks, so it
/// runs even when the trap left a lock of the instance held.
///
/// The caller must not run the worker's code on this thread again.
pub fn worker_lost() -> bool {
    let Some((s, i)) = CURRENT.with(Cell::get) else {
        return false;
    };
    // SAFETY: the worker loop that set CURRENT holds an `Arc<Shared>` (its closure's) that a
    // trap never drops, so the pointee is alive; the loop never runs again (the contract).
    let s = unsafe { &*s };
    fail(s, i, FAIL_LOST);
    let Some(slot) = s.slots.get(i.wrapping_sub(1)) else {
        return false;
    };
    let prev = slot.fetch_or(SLOT_LOST, Ordering::SeqCst);
    if prev & SLOT_JOINED != 0 && prev & SLOT_LOST == 0 {
        // It joined the current region and will never acknowledge it.
        s.lost.fetch_add(1, Ordering::SeqCst);
    }
    true
}

/// The gate's closed bit, its joined-workers field and where its epoch starts.
const GATE_CLOSED: usize = 1;
const GATE_EPOCH_SHIFT: u32 = 16;
const GATE_JOINED: usize = ((1 << GATE_EPOCH_SHIFT) - 1) & !GATE_CLOSED;
const _: () = assert!(2 * MAX_THREADS < 1 << GATE_EPOCH_SHIFT);

/// The gate of region `epoch`, open with nobody joined (the epoch's low bits suffice: a worker
/// compares it with the epoch it saw, at most one region behind).
fn gate_open(epoch: usize) -> usize {
    epoch << GATE_EPOCH_SHIFT
}

/// Joins region `epoch` if its gate is still open: true if this worker may run its jobs.
fn join(gate: &AtomicUsize, epoch: usize) -> bool {
    let want = gate_open(epoch);
    let mut g = gate.load(Ordering::SeqCst);
    loop {
        if g & GATE_CLOSED != 0 || g & !GATE_JOINED != want {
            return false;
        }
        match gate.compare_exchange_weak(g, g + 2, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => return true,
            Err(now) => g = now,
        }
    }
}

/// A mutable slice that several jobs write disjoint parts of.
struct Disjoint<T = f32> {
    ptr: *mut T,
    len: usize,
}

impl<T> Default for Disjoint<T> {
    fn default() -> Disjoint<T> {
        Disjoint {
            ptr: std::ptr::NonNull::dangling().as_ptr(),
            len: 0,
        }
    }
}

// SAFETY: only `slice` hands out access, and its callers guarantee disjoint ranges.
unsafe impl<T: Send> Sync for Disjoint<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for Disjoint<T> {}

impl<T> Disjoint<T> {
    fn new(s: &mut [T]) -> Disjoint<T> {
        Disjoint {
            ptr: s.as_mut_ptr(),
            len: s.len(),
        }
    }

    /// # Safety
    /// No two slices alive at the same time overlap, and the source slice outlives them.
    #[allow(clippy::mut_from_ref)]
    unsafe fn slice(&self, r: Range<usize>) -> &mut [T] {
        assert!(
            r.start <= r.end && r.end <= self.len,
            "Disjoint: {r:?} of {}",
            self.len
        );
        // SAFETY: in bounds (checked); exclusivity is the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(r.start), r.len()) }
    }
}

/// Starts pool thread `i` running `f`: a std thread natively (returned, to be joined), a
/// [`Spawner`] thread on wasm32 with `atomics` (not joinable: it ends when `f` returns).
fn spawn(
    i: usize,
    f: impl FnOnce() + Send + 'static,
) -> Result<Option<std::thread::JoinHandle<()>>> {
    #[cfg(all(target_arch = "wasm32", target_feature = "atomics"))]
    {
        let _ = i;
        let spawner = SPAWNER.get().ok_or_else(|| {
            KernelError::Spawn("no spawner installed in this wasm build (set_spawner)".into())
        })?;
        spawner(Box::new(f)).map_err(KernelError::Spawn)?;
        Ok(None)
    }
    #[cfg(not(all(target_arch = "wasm32", target_feature = "atomics")))]
    {
        std::thread::Builder::new()
            .name(format!("edgefit-pool-{i}"))
            .spawn(f)
            .map(Some)
            .map_err(|e| KernelError::Spawn(e.to_string()))
    }
}

/// Worker `index` (1-based: 0 is the caller): waits for each new epoch, takes job indices
/// until none are left, acknowledges.
fn worker(s: &Shared, index: usize) {
    CURRENT.with(|c| c.set(Some((s as *const Shared, index))));
    let slot = &s.slots[index - 1];
    let mut seen = 0usize;
    loop {
        let mut spins = 0usize;
        loop {
            let e = s.epoch.load(Ordering::SeqCst);
            if e != seen {
                seen = e;
                break;
            }
            if spins < SPINS {
                spins += 1;
                std::hint::spin_loop();
                continue;
            }
            let mut g = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            s.sleeping.fetch_add(1, Ordering::SeqCst);
            while s.epoch.load(Ordering::SeqCst) == seen {
                g = s.wake.wait(g).unwrap_or_else(|e| e.into_inner());
            }
            s.sleeping.fetch_sub(1, Ordering::SeqCst);
        }
        if s.quit.load(Ordering::SeqCst) {
            return;
        }
        if !join(&s.gate, seen) {
            // The caller already took every index and closed the region without this worker.
            continue;
        }
        // Joined: from here until `done`, a loss reported for this thread counts in `lost`.
        slot.store(SLOT_JOINED, Ordering::SeqCst);
        // SAFETY: the caller wrote the job before opening the gate and keeps it alive until
        // every worker that joined acknowledges below.
        let job = unsafe { *s.job.get() };
        if let Some(job) = job {
            let jobs = s.jobs.load(Ordering::Relaxed);
            loop {
                let i = s.next.fetch_add(1, Ordering::Relaxed);
                if i >= jobs {
                    break;
                }
                // SAFETY: see above.
                let f = unsafe { &*job };
                if let Err(e) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(i))) {
                    if !s.panicked.swap(true, Ordering::Relaxed) {
                        let msg = e
                            .downcast_ref::<&str>()
                            .map(|m| m.to_string())
                            .or_else(|| e.downcast_ref::<String>().cloned())
                            .unwrap_or_else(|| "no message".into());
                        if s.failure.load(Ordering::SeqCst) == 0 {
                            *s.failure_msg.lock().unwrap_or_else(|e| e.into_inner()) =
                                format!("job {i}: {msg}");
                        }
                        fail(s, index, FAIL_PANIC);
                    }
                    // The other jobs of this region still run (on the caller and the other
                    // workers); the region ends, and the pool reports the failure.
                }
            }
        }
        slot.store(0, Ordering::SeqCst);
        s.done.fetch_add(1, Ordering::Release);
    }
}

#[cfg(test)]
mod tests;
