//! Tests of [`Pool`](super::Pool): the row split, hostile thread counts, every job run once
//! (also in short back-to-back regions), the split quantization equal to the serial one, and a
//! job that panics or a worker lost in a region ending as an error, not a hang.

use super::*;

#[test]
fn split_covers_every_row_once_on_row_split_boundaries() {
    for n in [0, 1, 7, 8, 9, 63, 64, 65, 576, 49_152 + 3] {
        for jobs in 1..=9 {
            let mut next = 0;
            for j in 0..jobs {
                let r = split(n, jobs, j);
                assert_eq!(r.start, next, "n {n} jobs {jobs} part {j}");
                assert!(r.start.is_multiple_of(ROW_SPLIT));
                assert!(r.end.is_multiple_of(ROW_SPLIT) || r.end == n);
                next = r.end;
            }
            assert_eq!(next, n);
        }
    }
}

#[test]
fn hostile_thread_counts_are_refused() {
    assert!(matches!(
        Pool::new(0),
        Err(KernelError::Threads { value: 0, .. })
    ));
    assert!(Pool::new(MAX_THREADS + 1).is_err());
    assert_eq!(Pool::new(1).map(|p| p.threads()), Ok(1));
}

#[cfg(not(target_arch = "wasm32"))]
#[test]
fn every_job_runs_once_on_any_pool() {
    for threads in [1, 2, 3, 7] {
        let pool = Pool::new(threads).expect("pool");
        for jobs in [0, 1, 2, 5, 64] {
            let hits: Vec<AtomicUsize> = (0..jobs).map(|_| AtomicUsize::new(0)).collect();
            for _ in 0..50 {
                pool.run(jobs, &|i| {
                    hits[i].fetch_add(1, Ordering::Relaxed);
                });
            }
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 50));
        }
    }
}

/// The pool's split quantization of a prefill's activations is the serial one, value for
/// value, on odd shapes and with poisoned (NaN, infinite) and all-zero blocks.
#[cfg(not(target_arch = "wasm32"))]
#[test]
fn split_requantize_equals_the_serial_one() {
    for threads in [1, 2, 3, 7] {
        let pool = Pool::new(threads).expect("pool");
        let mut xq = ActQ16::default();
        for (m, cols) in [
            (1, 5),
            (2, 33),
            (3, 64),
            (5, 70),
            (9, 576),
            (64, 31),
            (7, 0),
        ] {
            let mut x = crate::pseudo_random((m * 31 + cols) as u64, m * cols);
            if m * cols > 40 {
                x[3] = f32::NAN;
                x[cols + 1] = f32::INFINITY;
                for v in &mut x[(m - 1) * cols..(m - 1) * cols + cols.min(32)] {
                    *v = 0.0;
                }
            }
            // Reused buffers from the last, larger or smaller, shape.
            pool.requantize(&mut xq, &x, m, cols);
            let want = ActQ16::quantize(&x, m, cols);
            let what = format!("threads {threads}, {m}×{cols}");
            assert_eq!(
                (xq.rows(), xq.cols(), xq.blocks()),
                (m, cols, want.blocks()),
                "{what}"
            );
            assert_eq!(xq.q, want.q, "{what}");
            assert_eq!(xq.sums, want.sums, "{what}");
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&xq.scales), bits(&want.scales), "{what}");
        }
    }
}

/// Many short regions back to back (workers late, skipping regions the caller closed,
/// joining the next): every index of every region runs exactly once, into a buffer on the
/// caller's stack that the next region replaces.
#[cfg(not(target_arch = "wasm32"))]
#[test]
fn short_regions_back_to_back_run_each_job_once() {
    for threads in [2, 7] {
        let pool = Pool::new(threads).expect("pool");
        let mut total = 0usize;
        for region in 0..20_000usize {
            let jobs = 1 + region % 3;
            let hits = [const { AtomicUsize::new(0) }; 3];
            pool.run(jobs, &|i| {
                hits[i].fetch_add(region + 1, Ordering::Relaxed);
            });
            for (i, h) in hits.iter().enumerate() {
                let want = if i < jobs { region + 1 } else { 0 };
                assert_eq!(h.load(Ordering::Relaxed), want, "region {region} job {i}");
            }
            total += jobs;
        }
        assert_eq!(total, (0..20_000).map(|r| 1 + r % 3).sum::<usize>());
    }
}

/// Runs `body` on a thread of its own and fails if it does not finish within `secs`.
#[cfg(not(target_arch = "wasm32"))]
fn within<T: Send + 'static>(secs: u64, body: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(body());
    });
    rx.recv_timeout(std::time::Duration::from_secs(secs))
        .expect("the pool hung (or the body panicked)")
}

/// Whether this thread is a pool worker (not the caller).
#[cfg(not(target_arch = "wasm32"))]
fn on_worker() -> bool {
    std::thread::current()
        .name()
        .is_some_and(|n| n.starts_with("edgefit-pool-"))
}

/// A job that panics on a worker ends its region (no hang) and the pool reports it as an
/// error naming the thread and the panic, for good; later regions still run every job
/// (on the caller).
#[cfg(not(target_arch = "wasm32"))]
#[test]
fn a_job_panicking_on_a_worker_is_an_error_not_a_hang() {
    let err = within(20, || {
        let pool = Pool::new(2).expect("pool");
        assert_eq!(pool.check(), Ok(()));
        // Until a worker has taken a job (it normally takes some of the first region's).
        for _ in 0..1000 {
            pool.run(64, &|i| {
                if on_worker() {
                    panic!("job {i} on a worker");
                }
                std::thread::sleep(std::time::Duration::from_micros(200));
            });
            if pool.check().is_err() {
                break;
            }
        }
        let err = pool.check().unwrap_err();
        let count = AtomicUsize::new(0);
        pool.run(8, &|_| {
            count.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(count.load(Ordering::Relaxed), 8);
        assert_eq!(
            pool.check().map_err(|e| e.to_string()),
            Err(err.to_string())
        );
        err
    });
    let msg = err.to_string();
    assert!(matches!(err, KernelError::PoolFailed(_)), "{msg}");
    assert!(
        msg.contains("pool thread 1 of 2") && msg.contains("on a worker"),
        "{msg}"
    );
}

/// A job panicking on the caller's thread panics the caller, after the workers that
/// joined finished, and leaves the pool working.
#[cfg(not(target_arch = "wasm32"))]
#[test]
fn a_job_panicking_on_the_caller_panics_it_and_the_pool_still_works() {
    within(20, || {
        let pool = Pool::new(2).expect("pool");
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.run(4, &|_| {
                assert!(on_worker(), "a job on the caller");
                std::thread::sleep(std::time::Duration::from_millis(5));
            });
        }));
        assert!(r.is_err());
        assert_eq!(pool.check(), Ok(()));
        let count = AtomicUsize::new(0);
        pool.run(8, &|_| {
            count.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(count.load(Ordering::Relaxed), 8);
    });
}

/// What web/pool-worker.js does when a Web Worker's wasm traps inside a job (the thread
/// never returns): here the job reports [`worker_lost`] and then blocks for good, as a
/// trapped worker would. The caller must not wait for it: the region ends, the pool
/// reports the lost thread, and later regions run on the caller.
#[cfg(not(target_arch = "wasm32"))]
#[test]
fn a_worker_lost_inside_a_region_ends_it_with_an_error_not_a_hang() {
    assert!(!worker_lost(), "not a pool thread");
    let msg = within(20, || {
        let pool = Pool::new(3).expect("pool");
        for _ in 0..1000 {
            pool.run(64, &|_| {
                if on_worker() {
                    assert!(worker_lost());
                    loop {
                        std::thread::park();
                    }
                }
                std::thread::sleep(std::time::Duration::from_micros(200));
            });
            if pool.check().is_err() {
                break;
            }
        }
        let count = AtomicUsize::new(0);
        pool.run(8, &|_| {
            count.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(count.load(Ordering::Relaxed), 8);
        let msg = pool.check().unwrap_err().to_string();
        // Dropping the pool would join the blocked worker: leak it instead (the test
        // process ends).
        std::mem::forget(pool);
        msg
    });
    assert!(msg.contains("stopped inside a parallel region"), "{msg}");
}
