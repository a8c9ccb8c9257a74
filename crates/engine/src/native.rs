//! The [`Platform`] for native callers (CLI, tests): `std::time::Instant` and the process's peak
//! resident set size. Not compiled for wasm32, where `Instant::now` panics; the wasm facade
//! provides its own platform from `performance.now()` and the linear memory size.

use std::time::Instant;

use crate::engine::Platform;

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
