//! Transparent huge pages for the `tessera` binary's large allocations.
//!
//! The sparse solvers stream the matrix (about 1 GB at `stencil27:150`) and the vectors from
//! memory once per iteration. Debian's kernels ship transparent huge pages in `madvise`
//! mode: without advice every 4 KiB page of those streams is a TLB entry of its own. With
//! advice the same streams run in 2 MiB pages. Measured here (the 2-core VM,
//! `spmv --gen stencil27:150 --solver cg --iters 50`, alternated rounds): with glibc's
//! `glibc.malloc.hugetlb=1` tunable as the switch, five rounds, STREAM triad 29.7–33.2 →
//! 35.3–36.0 GB/s, the CG's vector work 7.3–9.8 → 5.5–6.2 ms, the median iteration 60.4 →
//! 54.2 ms; with this allocator and `TESSERA_HUGE_PAGES`, six rounds, 59.5 → 53.9 ms (5 of
//! the 6 pairs faster). `lu --n 8192` is unchanged (68.4 and 69.1 GFLOP/s, three rounds each):
//! dense tiles are reused from cache, not streamed.
//!
//! [`HugePages`] is the system allocator plus one `madvise(MADV_HUGEPAGE)` per allocation of
//! at least [`THRESHOLD`] bytes, on the 2 MiB-aligned part of it, before anything touches it
//! (so its first faults already map huge pages). Written by hand because what it does is one
//! call: jemalloc's `thp:always` or mimalloc's large pages would replace the whole allocator
//! and bring a C build into a crate that needs none. It is the allocator of the `tessera`
//! binary only (`main.rs`); `TESSERA_HUGE_PAGES=0` turns the advice off, for comparisons.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};

/// Allocations from this size on are advised.
pub const THRESHOLD: usize = 4 << 20;
/// The size of a transparent huge page on x86-64 and arm64 (4 KiB base pages).
const HUGE_PAGE: usize = 2 << 20;

static ENABLED: AtomicBool = AtomicBool::new(true);

/// Turn the advice on or off for the allocations that follow (on by default).
pub fn set_enabled(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

/// Whether [`HugePages`] advises new large allocations.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Read `TESSERA_HUGE_PAGES` (`0` turns the advice off) once, at start-up.
pub fn from_env() {
    if std::env::var_os("TESSERA_HUGE_PAGES").is_some_and(|v| v == "0") {
        set_enabled(false);
    }
}

/// The system allocator, with large blocks advised into transparent huge pages.
pub struct HugePages;

/// Advise the whole 2 MiB pages inside `[p, p + len)`. Returns whether the kernel took the
/// advice (false: nothing to advise, advice off, or a kernel without transparent huge pages).
/// A refused advice leaves the memory as it was: ordinary pages.
pub fn advise(p: *mut u8, len: usize) -> bool {
    if p.is_null() || len < THRESHOLD || !enabled() {
        return false;
    }
    let start = (p as usize).next_multiple_of(HUGE_PAGE);
    let end = (p as usize + len) / HUGE_PAGE * HUGE_PAGE;
    if end <= start {
        return false;
    }
    // SAFETY: `[start, end)` lies inside a block the allocator just handed out (page-aligned
    // by construction); MADV_HUGEPAGE changes how its pages are backed, never its contents.
    unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) == 0 }
}

// SAFETY: every block comes from `System` and goes back to it with the same layout; `advise`
// only sets a flag on pages inside the block.
unsafe impl GlobalAlloc for HugePages {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc(layout) };
        advise(p, layout.size());
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on. glibc's calloc of a large block is a fresh
        // mapping it does not write to, so the advice still comes before the first fault.
        let p = unsafe { System.alloc_zeroed(layout) };
        advise(p, layout.size());
        p
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on; `ptr` came from `System`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        advise(p, new_size);
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `VmFlags` line of the mapping of `/proc/self/smaps` that holds `addr`.
    fn vm_flags(addr: usize) -> Option<String> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ') {
                if let Some((a, b)) = range.split_once('-') {
                    if let (Ok(a), Ok(b)) =
                        (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
                    {
                        inside = (a..b).contains(&addr);
                        continue;
                    }
                }
            }
            if inside {
                if let Some(flags) = line.strip_prefix("VmFlags:") {
                    return Some(flags.trim().to_string());
                }
            }
        }
        None
    }

    #[test]
    fn large_blocks_are_advised_and_small_ones_not() {
        let layout = Layout::from_size_align(16 << 20, 8).unwrap();
        // SAFETY: a non-zero layout; the block is freed below with the same layout.
        let p = unsafe { HugePages.alloc_zeroed(layout) };
        assert!(!p.is_null());
        let middle = p as usize + (8 << 20);
        // Advising again reports what the kernel says; on a kernel without transparent huge
        // pages there is nothing to check.
        if advise(p, layout.size()) {
            let flags = vm_flags(middle).expect("the block is mapped");
            assert!(
                flags.split(' ').any(|f| f == "hg"),
                "no huge-page advice on the block: {flags}"
            );
        } else {
            eprintln!("this kernel refuses MADV_HUGEPAGE: not checked");
        }
        // SAFETY: the block is 16 MiB long and zeroed.
        assert_eq!(unsafe { *p.add(10 << 20) }, 0, "contents unchanged");
        // SAFETY: allocated above with `layout`.
        unsafe { HugePages.dealloc(p, layout) };
        assert!(
            !advise(std::ptr::dangling_mut(), THRESHOLD - 1),
            "below the threshold"
        );
        assert!(!advise(std::ptr::null_mut(), 1 << 30), "null");
    }
}
