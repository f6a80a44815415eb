//! Transparent huge pages for the `tessera` binary's large allocations.
//!
//! The sparse solvers stream the matrix (about 1 GB at `stencil27:150`) and the vectors from
//! memory once per iteration. Debian's kernels ship transparent huge pages in `madvise`
//! mode: without advice every 4 KiB page of those streams is a TLB entry of its own. With
//! advice the same streams run in 2 MiB pages: the CG's iterations at `stencil27:150` are
//! faster with them (the CHANGELOG has the figures), and the dense LU, whose tiles are reused from
//! cache rather than streamed, is unchanged.
//!
//! [`HugePages`] gives blocks of at least [`THRESHOLD`] bytes from the system allocator plus
//! one `madvise(MADV_HUGEPAGE)` on the 2 MiB-aligned part of each, before anything touches it
//! (so its first faults already map huge pages). Written by hand because what it does is one
//! call. Smaller blocks come from mimalloc: a fine-grained DAG allocates a task's small parts
//! on the submitting thread and frees them on a worker, glibc malloc's worst case (its
//! arena locks, `malloc_consolidate` and `_int_free` took 20–25 % of all CPU samples of a
//! Task Bench stencil, issue 41), where mimalloc frees into the owning thread's page
//! without a lock. The large blocks keep the system allocator, so the dense and sparse
//! kernels' memory behaves as before. It is the allocator of the `tessera` binary only
//! (`main.rs`; the engine sets none); `TESSERA_HUGE_PAGES=0` turns the advice off, for
//! comparisons.

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

/// Whether mimalloc's plain `mi_malloc` gives a block of `layout` its alignment: every
/// mimalloc block is 8-byte aligned (sizes are whole words from an aligned page start), and
/// a block whose size is a multiple of 16 is 16-byte aligned (the same reasoning for its
/// size class). Checked by `plain_mimalloc_blocks_have_their_alignment`.
///
/// Why not always the aligned entry points, as the `mimalloc` crate's allocator does: in
/// mimalloc 3, `mi_malloc_aligned` takes its fast path only when the size class's page
/// has a free block, and otherwise, for a size that is not a power of two, over-allocates
/// into a larger class; a task's 24-, 40- or 96-byte parts then never find their own page,
/// and every allocation took the slow path. `callgrind` of a Task Bench stencil's
/// submission loop: about 500 instructions of allocation per task.
fn plain(layout: Layout) -> bool {
    layout.align() <= 8 || (layout.align() <= 16 && layout.size().is_multiple_of(16))
}

/// A block of `layout` (not [`large`]) from mimalloc.
///
/// # Safety
/// `GlobalAlloc::alloc`'s contract.
unsafe fn small_alloc(layout: Layout) -> *mut u8 {
    if plain(layout) {
        // SAFETY: any size is valid; the block is `layout`-aligned (`plain`).
        unsafe { libmimalloc_sys::mi_malloc(layout.size()).cast() }
    } else {
        // SAFETY: the caller's contract, passed on.
        unsafe { mimalloc::MiMalloc.alloc(layout) }
    }
}

/// Whether a block of `size` bytes comes from the system allocator (else from mimalloc).
/// A block's size decides it at every call (`GlobalAlloc` passes the block's layout back
/// to `dealloc` and `realloc`), so each block returns to the allocator that made it.
fn large(size: usize) -> bool {
    size >= THRESHOLD
}

// SAFETY: a block of at least THRESHOLD bytes comes from `System`, a smaller one from
// `MiMalloc`, and goes back to the same one (`large` of the same size); a `realloc` that
// crosses the threshold allocates in the other one, copies and frees. `advise` only sets a
// flag on pages inside a block.
unsafe impl GlobalAlloc for HugePages {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !large(layout.size()) {
            // SAFETY: the caller's contract, passed on.
            return unsafe { small_alloc(layout) };
        }
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc(layout) };
        advise(p, layout.size());
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !large(layout.size()) {
            if plain(layout) {
                // SAFETY: as in `small_alloc`; `mi_zalloc` zeroes the block.
                return unsafe { libmimalloc_sys::mi_zalloc(layout.size()).cast() };
            }
            // SAFETY: the caller's contract, passed on.
            return unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) };
        }
        // SAFETY: the caller's contract, passed on. glibc's calloc of a large block is a fresh
        // mapping it does not write to, so the advice still comes before the first fault.
        let p = unsafe { System.alloc_zeroed(layout) };
        advise(p, layout.size());
        p
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        match (large(layout.size()), large(new_size)) {
            (false, false) => {
                // SAFETY: `ptr` is a mimalloc block (either entry point's: `mi_free` and
                // `mi_realloc` take both); the new block keeps `layout`'s alignment
                // (`plain` of the new size), else the aligned reallocation keeps it.
                let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
                if plain(new) {
                    unsafe { libmimalloc_sys::mi_realloc(ptr.cast(), new_size).cast() }
                } else {
                    unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) }
                }
            }
            (true, true) => {
                // SAFETY: the caller's contract, passed on; `ptr` came from `System`.
                let p = unsafe { System.realloc(ptr, layout, new_size) };
                advise(p, new_size);
                p
            }
            _ => {
                // SAFETY: `new_size` is non-zero with the old alignment (the caller's
                // contract); the new block is at least as long as the part copied.
                unsafe {
                    let new = Layout::from_size_align_unchecked(new_size, layout.align());
                    let p = self.alloc(new);
                    if !p.is_null() {
                        std::ptr::copy_nonoverlapping(ptr, p, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                    p
                }
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if large(layout.size()) {
            // SAFETY: `ptr` came from `System` with `layout`.
            unsafe { System.dealloc(ptr, layout) }
        } else {
            // SAFETY: `ptr` came from mimalloc (`mi_free` takes the blocks of both entry
            // points, as `MiMalloc::dealloc` does).
            unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
        }
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
            crate::say!("this kernel refuses MADV_HUGEPAGE: not checked");
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

    #[test]
    fn blocks_keep_their_contents_across_the_threshold() {
        let small = Layout::from_size_align(64, 16).unwrap();
        // SAFETY: each block is written within its length, moved by `realloc` with the
        // layout it has, and freed with the layout of its last size.
        unsafe {
            let p = HugePages.alloc(small);
            assert!(!p.is_null());
            for i in 0..64 {
                *p.add(i) = i as u8;
            }
            let big = HugePages.realloc(p, small, THRESHOLD + 4096);
            assert!(!big.is_null());
            assert!(
                (0..64).all(|i| *big.add(i) == i as u8),
                "grown past the threshold"
            );
            *big.add(THRESHOLD) = 7;
            let grown = Layout::from_size_align(THRESHOLD + 4096, 16).unwrap();
            let back = HugePages.realloc(big, grown, 32);
            assert!(!back.is_null());
            assert!((0..32).all(|i| *back.add(i) == i as u8), "shrunk below it");
            assert_eq!(back as usize % 16, 0, "alignment kept");
            HugePages.dealloc(back, Layout::from_size_align(32, 16).unwrap());
        }
    }

    #[test]
    fn plain_mimalloc_blocks_have_their_alignment() {
        // Many blocks of every small size at the alignments Rust types ask for, zeroed and
        // not, then each grown and shrunk: every address must keep its layout's alignment
        // and a block its contents, on either entry point (`plain` decides which).
        let mut blocks = Vec::new();
        for size in 1..=600usize {
            for align in [1, 2, 4, 8, 16, 32, 64] {
                let layout = Layout::from_size_align(size, align).unwrap();
                for zeroed in [false, true] {
                    // SAFETY: non-zero layouts; each block is filled within its length,
                    // reallocated with its layout and freed with its last one.
                    unsafe {
                        let p = if zeroed {
                            HugePages.alloc_zeroed(layout)
                        } else {
                            HugePages.alloc(layout)
                        };
                        assert!(!p.is_null());
                        assert_eq!(p as usize % align, 0, "size {size} align {align}");
                        if zeroed {
                            assert!((0..size).all(|i| *p.add(i) == 0), "zeroed {size}");
                        }
                        std::ptr::write_bytes(p, (size % 251) as u8, size);
                        blocks.push((p, layout));
                    }
                }
            }
        }
        for (p, layout) in blocks {
            let (size, align) = (layout.size(), layout.align());
            let (grown, shrunk) = (size * 3 + 5, size.div_ceil(2));
            // SAFETY: as above.
            unsafe {
                let q = HugePages.realloc(p, layout, grown);
                assert_eq!(
                    q as usize % align,
                    0,
                    "grown {size} -> {grown}, align {align}"
                );
                assert!(
                    (0..size).all(|i| *q.add(i) == (size % 251) as u8),
                    "kept {size}"
                );
                let big = Layout::from_size_align(grown, align).unwrap();
                let r = HugePages.realloc(q, big, shrunk);
                assert_eq!(
                    r as usize % align,
                    0,
                    "shrunk {grown} -> {shrunk}, align {align}"
                );
                assert!((0..shrunk).all(|i| *r.add(i) == (size % 251) as u8));
                HugePages.dealloc(r, Layout::from_size_align(shrunk, align).unwrap());
            }
        }
    }
}
