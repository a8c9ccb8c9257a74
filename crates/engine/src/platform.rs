//! Where the engine runs, as far as it needs to know: a clock and memory readings. The engine
//! never reads a clock itself: the caller injects a [`Platform`] (`Instant` and peak RSS
//! natively, [`NativePlatform`]; `performance.now()` and the wasm memory size in the browser, in
//! the wasm facade), so the same code measures the same things everywhere. A leaf module: it
//! imports nothing from the crate.

/// What the engine needs from where it runs.
pub trait Platform {
    /// Milliseconds from an arbitrary fixed origin, monotonic.
    fn now_ms(&self) -> f64;
    /// Peak memory of the process so far in bytes (peak RSS natively; the wasm linear memory
    /// size in a browser, which only grows).
    fn peak_bytes(&self) -> u64;
    /// Bytes of heap in use right now, where the platform counts its allocations (the wasm
    /// build's global allocator does; natively this is `None`). Unlike the peak, it falls when
    /// memory is freed, so it shows what the engine holds between turns.
    fn heap_bytes(&self) -> Option<u64> {
        None
    }
}

/// The [`Platform`] for native callers (CLI, tests). Not compiled for wasm32, where
/// `Instant::now` panics.
#[cfg(not(target_arch = "wasm32"))]
pub use native::{peak_rss_bytes, NativePlatform};

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use std::time::Instant;

    use super::Platform;

    /// Wall clock from `Instant`, peak memory from `/proc/self/status` (`VmHWM`).
    #[derive(Debug, Clone, Copy)]
    pub struct NativePlatform {
        origin: Instant,
    }

    impl Default for NativePlatform {
        fn default() -> Self {
            NativePlatform {
                origin: Instant::now(),
            }
        }
    }

    impl Platform for NativePlatform {
        fn now_ms(&self) -> f64 {
            self.origin.elapsed().as_secs_f64() * 1000.0
        }

        fn peak_bytes(&self) -> u64 {
            peak_rss_bytes().unwrap_or(0)
        }
    }

    /// Peak resident set size of this process, where the OS reports it (Linux).
    pub fn peak_rss_bytes() -> Option<u64> {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
        let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb * 1024)
    }
}
