//! The heap in use, counted: on wasm32 this crate's global allocator forwards every call to
//! the standard allocator and keeps a running total of the bytes handed out and not yet freed.
//! The linear memory's size (the browser platform's peak) only grows, so it cannot show
//! whether memory is given back; this count can (the soak test relies on it, and the page shows
//! it as "heap in use"). The bookkeeping is one add or subtract per allocation.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

static LIVE: AtomicUsize = AtomicUsize::new(0);

/// Bytes allocated through the global allocator and not yet freed (requested sizes; the
/// allocator's own headers and padding are not counted).
pub fn live_bytes() -> u64 {
    LIVE.load(Ordering::Relaxed) as u64
}

/// The standard allocator, counting.
pub struct Counting;

// SAFETY: every call is forwarded unchanged to `System`; the counter is only arithmetic on
// the sizes of calls that succeeded.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc` is passed on as is.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator (so from `System`) with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `dealloc`; `new_size` is the caller's, checked by its contract.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(new_size, Ordering::Relaxed);
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }
}

#[cfg(target_arch = "wasm32")]
#[global_allocator]
static GLOBAL: Counting = Counting;
