//! Page-locking the caller's host tiles for the duration of a resident LU, so its copies
//! are DMA at the link's rate. Invariant: each page is registered at most once (the driver
//! refuses overlapping ranges), and every range registered is unregistered on drop.

use std::ffi::c_void;

use cudarc::driver::sys;

use crate::cuda::{driver_error, CudaDevice};

/// Host memory page-locked for the duration of a resident LU
/// (`cuMemHostRegister`), unregistered on drop.
pub struct HostRegistration<'d> {
    dev: &'d CudaDevice,
    ptrs: Vec<*mut c_void>,
}

impl<'d> HostRegistration<'d> {
    /// Page-locks every block of `blocks` (pointer, bytes). The driver
    /// locks whole pages and refuses a range that overlaps one already
    /// registered, and two small tiles may share a page: so the blocks are
    /// widened to whole pages and merged where they touch, and each merged
    /// range is registered once. All or nothing: on a failure the ranges
    /// registered so far are released and the driver's reason returned.
    pub fn new(dev: &'d CudaDevice, blocks: &[(*mut u8, usize)]) -> Result<Self, String> {
        dev.bind()?;
        let mut reg = HostRegistration {
            dev,
            ptrs: Vec::new(),
        };
        for (start, bytes) in page_ranges(blocks, PAGE) {
            // SAFETY: every page of the range holds some of the caller's
            // live blocks (the rest of a page is mapped too: pages are the
            // unit of mapping); flags 0 (not portable, not mapped).
            unsafe { sys::cuMemHostRegister_v2(start as *mut c_void, bytes, 0) }
                .result()
                .map_err(|e| format!("cuMemHostRegister of {bytes} bytes: {}", driver_error(e)))?;
            reg.ptrs.push(start as *mut c_void);
        }
        Ok(reg)
    }
}

impl Drop for HostRegistration<'_> {
    fn drop(&mut self) {
        let _ = self.dev.bind();
        for &p in &self.ptrs {
            // SAFETY: registered above, unregistered only here.
            let _ = unsafe { sys::cuMemHostUnregister(p) };
        }
    }
}

/// The page size the registration rounds to (x86-64 Linux's base page; a
/// larger real page only makes the ranges' ends fall inside one).
const PAGE: usize = 4096;

/// `blocks` widened to whole `page`s, sorted and merged where they overlap
/// or touch: (start, bytes) ranges, none empty.
fn page_ranges(blocks: &[(*mut u8, usize)], page: usize) -> Vec<(usize, usize)> {
    let mut spans: Vec<(usize, usize)> = blocks
        .iter()
        .filter(|b| b.1 > 0)
        .map(|&(p, bytes)| {
            let a = p as usize;
            (a / page * page, (a + bytes).div_ceil(page) * page)
        })
        .collect();
    spans.sort_unstable();
    let mut out: Vec<(usize, usize)> = Vec::new();
    for (a, b) in spans {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out.into_iter().map(|(a, b)| (a, b - a)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_ranges_merge_shared_pages() {
        let p = |a: usize| a as *mut u8;
        // Two blocks sharing page 1, one on its own, one empty.
        let r = page_ranges(
            &[
                (p(4096 + 100), 4000),
                (p(8192 + 10), 100),
                (p(40960), 8192),
                (p(99999), 0),
            ],
            4096,
        );
        assert_eq!(r, vec![(4096, 8192), (40960, 8192)]);
        // Touching blocks merge; out of order too.
        let r = page_ranges(&[(p(8192), 4096), (p(4096), 4096)], 4096);
        assert_eq!(r, vec![(4096, 8192)]);
    }
}
