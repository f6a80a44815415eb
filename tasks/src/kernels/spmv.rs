//! CSR sparse matrix–vector product `y += A·x` on raw slices: the body of the SpMV codelet.
//!
//! # Layout convention
//!
//! `row_ptr` has one entry more than `y` has rows: row `i` of the block owns the entries
//! `col_idx[row_ptr[i]..row_ptr[i + 1]]` and `vals[row_ptr[i]..row_ptr[i + 1]]`. The offsets
//! are *absolute* positions in `col_idx` / `vals`, and `row_ptr[0]` need not be 0: a row block
//! `r0..r1` of a bigger matrix is computed, without copying, by passing
//! `&row_ptr[r0..=r1]`, the whole `col_idx` and `vals`, the whole `x` and `&mut y[r0..r1]`.
//! Column indices are `u32` (the matrix types keep `n_cols ≤ u32::MAX`), which saves a third
//! of the index traffic against `usize` on a memory-bound kernel. [`spmv_csr16_unchecked`] and
//! [`spmv_csr16_dot_unchecked`] read them as 16-bit gaps between a row's consecutive columns
//! instead (`Csr::with_compact_columns`, for rows whose columns increase by at most 65,535 at a
//! time): 10 bytes per entry instead of 12, the same summation order, the same bits.
//!
//! # Checks and speed
//!
//! [`spmv_csr`] is safe for any input: it panics (never reads out of bounds) on a malformed
//! `row_ptr` or a column index `≥ x.len()`. The column check is one compare-and-branch per
//! entry, which this memory-bound loop hides: measured (release, one thread, the 2-core AMD
//! EPYC development VM, best of 6 runs, matrices of 24–36 M entries — 27-point and 7-point
//! stencils, power-law rows, dense) it runs within 0–5 % of [`spmv_csr_unchecked`] on the
//! stencils and the dense matrix and 5–20 % behind on power-law rows (random access to `x`).
//! Two alternatives were measured and rejected: checking the largest column index of each
//! row (in L1-sized chunks) before an unchecked multiply (an extra pass over the indices:
//! 13–55 % slower than unchecked, so slower than the per-entry check), and SSE2
//! intrinsics or an AVX2/FMA build of the loop (no gain beyond noise: the loop waits on
//! memory, not on arithmetic). [`spmv_csr_unchecked`] skips the check for callers that have
//! validated the matrix once (`tessera_linalg::sparse::Csr` does, at construction); it also
//! skips [`spmv_csr`]'s `O(rows)` monotonicity pass over `row_ptr` (a decreasing `row_ptr`
//! still panics, when its row is sliced), chosen because that pass re-reads `row_ptr`, 2 % of
//! the traffic, and leaving it out measured +1–4 % (medians below, `old` vs `old-nopass`).
//!
//! # Software prefetch
//!
//! Both functions prefetch (`prefetcht0`) the cache lines of `vals` and `col_idx`
//! `PREFETCH_AHEAD` = 1024 entries (8 KiB of values, 4 KiB of indices) ahead of the row being
//! multiplied, one prefetch per new line. Chosen because the hardware prefetcher alone leaves
//! the kernel well short of the memory bandwidth, and the prefetch measured +17–57 %: 2
//! threads on half the rows each, 27-point stencil on 150³ (89.9 M entries, 1.19 GB per SpMV),
//! medians of 21 alternating runs, in the same process as a STREAM triad on 3 × 512 MiB
//! (the `spmv_bw` example of the time, since removed with the frozen pre-prefetch kernel it compared; the shared 2-core AMD EPYC VM):
//! original unchecked kernel 25.4–35.0 GB/s = 61–85 % of the triad, this one 30.3–54.7 GB/s =
//! 88–100 % (`spmv_csr` 85–100 %). Distances of 4–32 KiB of `vals` measured alike (±3 %),
//! 256 B–1 KiB gained nothing; `prefetcht1` the same as `prefetcht0`. On a matrix that stays in
//! cache (27-point on 40³, 22 MB) it costs nothing measurable. Measured and rejected: two rows
//! interleaved with their own accumulators (same as one row: out-of-order execution already
//! overlaps the rows' loads) and AVX2 gathers of `x` (+0–9 % without the prefetch, nothing on
//! top of it, and they need runtime detection). The prefetch changes no arithmetic.
//!
//! Every row is summed with four accumulators (entry `k` of the row into accumulator
//! `k mod 4`, a trailing `len mod 4` entries into the first), so a long row is not serialised
//! on the floating-point add latency; the order differs from a left-to-right loop by rounding
//! only (tests compare with a relative tolerance on `Σ|a·x|`). Both functions sum in the same
//! order, so they agree bit for bit.

/// Floating-point operations of one SpMV with `nnz` stored entries: a multiply and an add each.
pub fn spmv_flops(nnz: usize) -> f64 {
    2.0 * nnz as f64
}

/// Bytes one SpMV moves from or to memory at least (the roofline model's traffic): the matrix
/// (8 bytes of value and 4 of column index per entry, 8 bytes of `row_ptr` per row), `x` read
/// once (8 per column) and `y` read and written (16 per row).
pub fn spmv_bytes(nnz: usize, rows: usize, cols: usize) -> f64 {
    12.0 * nnz as f64 + 8.0 * rows as f64 + 8.0 * cols as f64 + 16.0 * rows as f64
}

/// Bytes [`spmv_bytes`] counts that compact column indices (`Csr::with_compact_columns`)
/// do not move, for `nnz` entries in `rows` rows held that way: 2 per entry (16-bit offsets
/// for 32-bit indices), less the 4-byte first column of each row.
pub fn spmv_bytes_saved_by_compact(nnz: usize, rows: usize) -> f64 {
    2.0 * nnz as f64 - 4.0 * rows as f64
}

/// `y += A·x` for the rows that `row_ptr` covers (see the module doc for the layout).
///
/// # Panics
/// If `row_ptr.len() != y.len() + 1`, if `row_ptr` decreases, if its last entry exceeds
/// `col_idx.len()` or `vals.len()`, or if a column index in the covered entries is
/// `≥ x.len()`. Rows before a panicking one have already been updated.
pub fn spmv_csr(row_ptr: &[usize], col_idx: &[u32], vals: &[f64], x: &[f64], y: &mut [f64]) {
    check_row_ptr(row_ptr, col_idx, vals, y);
    // `check_row_ptr` proved `start ≤ end ≤ len`, so slicing cannot fail.
    add_rows(row_ptr, col_idx, vals, y, |i, start, end| {
        row_dot(&col_idx[start..end], &vals[start..end], |c| {
            match x.get(c as usize) {
                Some(&v) => v,
                None => column_out_of_range(c, i, x.len()),
            }
        })
    });
}

/// `y += A·x` like [`spmv_csr`] (same summation order, same result), without checking the
/// column indices.
///
/// # Safety
/// - every column index in `col_idx[row_ptr[0]..row_ptr[y.len()]]` is `< x.len()`.
///
/// A malformed `row_ptr` still panics and never reads out of bounds: its length and last
/// entry are checked up front like [`spmv_csr`]'s, and a decreasing or overlong row is caught
/// by slicing that row (a slice-index panic, after the rows before it have been updated). The
/// separate monotonicity pass of [`spmv_csr`] is left out: it re-reads `row_ptr`, 2 % of the
/// traffic (see the module doc).
pub unsafe fn spmv_csr_unchecked(
    row_ptr: &[usize],
    col_idx: &[u32],
    vals: &[f64],
    x: &[f64],
    y: &mut [f64],
) {
    check_row_ptr_ends(row_ptr, col_idx, vals, y);
    add_rows(row_ptr, col_idx, vals, y, |i, start, end| {
        // Panics (safely) unless `start ≤ end ≤ col_idx.len()`, and `vals` likewise.
        let cols = &col_idx[start..end];
        debug_assert!(cols.iter().all(|&c| (c as usize) < x.len()), "row {i}");
        // SAFETY: `c` is one of the covered column indices, `< x.len()` by the caller's promise.
        row_dot(cols, &vals[start..end], |c| unsafe {
            *x.get_unchecked(c as usize)
        })
    });
}

/// `y += A·x` like [`spmv_csr_unchecked`] (same summation order, same bits), with the
/// column indices as 16-bit gaps: row `i`'s entries `s..e` are in columns `first[i] +
/// gaps[s]`, then each the one before plus its gap
/// (`tessera_tasks::csr::Csr::with_compact_columns`, which says why).
///
/// # Safety
/// Every column so decoded from the covered entries is `< x.len()`.
///
/// # Panics
/// As [`spmv_csr_unchecked`] (with `gaps` for `col_idx`), and if `first` is shorter than `y`.
pub unsafe fn spmv_csr16_unchecked(
    row_ptr: &[usize],
    first: &[u32],
    gaps: &[u16],
    vals: &[f64],
    x: &[f64],
    y: &mut [f64],
) {
    check_row_ptr_ends(row_ptr, gaps, vals, y);
    let first = &first[..y.len()];
    add_rows(row_ptr, gaps, vals, y, |i, start, end| {
        // SAFETY: every decoded column is `< x.len()` by the caller's promise.
        unsafe { row_dot_gaps(first[i], &gaps[start..end], &vals[start..end], x) }
    });
}

/// `y += A·x` with `x` in two parts, as a rank of a distributed SpMV holds it: a column
/// `c < x_own.len()` reads `x_own[c]` (the rank's own entries), a larger one
/// `x_halo[c − x_own.len()]` (the entries received from other ranks). Same layout, checks and
/// summation order as [`spmv_csr`], so with the same values of `x` it gives the same bits.
/// Meant for the few rows that read the halo (one compare per entry more).
///
/// # Panics
/// As [`spmv_csr`], with `x_own.len() + x_halo.len()` for `x.len()`.
pub fn spmv_csr_split(
    row_ptr: &[usize],
    col_idx: &[u32],
    vals: &[f64],
    x_own: &[f64],
    x_halo: &[f64],
    y: &mut [f64],
) {
    check_row_ptr(row_ptr, col_idx, vals, y);
    add_rows(row_ptr, col_idx, vals, y, |i, start, end| {
        row_dot(&col_idx[start..end], &vals[start..end], |c| {
            split_x(x_own, x_halo, c, i)
        })
    });
}

/// `y = A·x` (overwriting `y`) for the rows `row_ptr` covers, fused with the two dot
/// products the iterative solvers need next: returns `(Σ x_rows[i]·y[i], Σ y[i]²)`, where
/// `x_rows` is `x` at the block's own rows (CG's `p·A·p`; power iteration's `||A·x||²`).
/// Chosen because the block's slice of `y` is still in cache when the row ends, so the dots
/// cost no second pass over `y` and `x_rows` (measured as a separate pass they were a third of
/// CG's vector traffic). `x` may be split (`x_halo`, as [`spmv_csr_split`]); each row is
/// summed like [`spmv_csr`], and the dots left to right, so the result equals
/// [`spmv_csr`] followed by [`dot_pair`] bit for bit.
///
/// # Panics
/// As [`spmv_csr_split`], and if `x_rows.len() != y.len()`.
pub fn spmv_csr_dot(
    row_ptr: &[usize],
    col_idx: &[u32],
    vals: &[f64],
    x_own: &[f64],
    x_halo: &[f64],
    x_rows: &[f64],
    y: &mut [f64],
) -> (f64, f64) {
    check_row_ptr(row_ptr, col_idx, vals, y);
    let own = x_own.len();
    if x_halo.is_empty() {
        spmv_dot_rows(row_ptr, col_idx, vals, x_rows, y, |c, i| {
            match x_own.get(c as usize) {
                Some(&v) => v,
                None => column_out_of_range(c, i, own),
            }
        })
    } else {
        spmv_dot_rows(row_ptr, col_idx, vals, x_rows, y, |c, i| {
            split_x(x_own, x_halo, c, i)
        })
    }
}

/// [`spmv_csr_dot`] with `x` in one part, without checking the column indices, as
/// [`spmv_csr_unchecked`] is to [`spmv_csr`]: the same bits. The one-process CG's multiply
/// (its blocks are validated [`Csr`](crate::csr::Csr)s, `x` as long as their columns): the
/// checked loop's compare and branch per entry made CG's SpMV run at 86 % of the plain
/// `tessera spmv`, which uses the unchecked kernel.
///
/// # Safety
/// Every column index in `col_idx[row_ptr[0]..row_ptr[y.len()]]` is `< x.len()`.
///
/// # Panics
/// As [`spmv_csr_unchecked`], and if `x_rows.len() != y.len()`.
pub unsafe fn spmv_csr_dot_unchecked(
    row_ptr: &[usize],
    col_idx: &[u32],
    vals: &[f64],
    x: &[f64],
    x_rows: &[f64],
    y: &mut [f64],
) -> (f64, f64) {
    check_row_ptr_ends(row_ptr, col_idx, vals, y);
    spmv_dot_rows(row_ptr, col_idx, vals, x_rows, y, |c, _| {
        debug_assert!((c as usize) < x.len());
        // SAFETY: `c` is a covered column index, `< x.len()` by the caller's promise.
        unsafe { *x.get_unchecked(c as usize) }
    })
}

/// [`spmv_csr_dot_unchecked`] with compact column indices (as [`spmv_csr16_unchecked`]):
/// the same bits.
///
/// # Safety
/// Every column decoded from the covered entries is `< x.len()`.
///
/// # Panics
/// As [`spmv_csr16_unchecked`], and if `x_rows.len() != y.len()`.
pub unsafe fn spmv_csr16_dot_unchecked(
    row_ptr: &[usize],
    first: &[u32],
    gaps: &[u16],
    vals: &[f64],
    x: &[f64],
    x_rows: &[f64],
    y: &mut [f64],
) -> (f64, f64) {
    check_row_ptr_ends(row_ptr, gaps, vals, y);
    let first = &first[..y.len()];
    set_rows_with_dots(row_ptr, gaps, vals, x_rows, y, |i, start, end| {
        // SAFETY: every decoded column is `< x.len()` by the caller's promise.
        unsafe { row_dot_gaps(first[i], &gaps[start..end], &vals[start..end], x) }
    })
}

/// Column `c` of `x` held in two parts, `[x_own; x_halo]` (row `i`, for the message when
/// `c` is past both).
#[inline(always)]
fn split_x(x_own: &[f64], x_halo: &[f64], c: u32, i: usize) -> f64 {
    let (c, own) = (c as usize, x_own.len());
    let v = if c < own {
        x_own.get(c)
    } else {
        x_halo.get(c - own)
    };
    match v {
        Some(&v) => v,
        None => column_out_of_range(c as u32, i, own + x_halo.len()),
    }
}

/// The row loop of the fused multiply-and-dots: `y[i] = Σ vals·x_at(col, i)` over row `i`'s
/// entries, and the two dots; panics unless `x_rows` and `y` have one length. `row_ptr`'s
/// length and last entry are checked by the caller; a decreasing row panics when its slice is
/// taken.
#[inline(always)]
fn spmv_dot_rows(
    row_ptr: &[usize],
    col_idx: &[u32],
    vals: &[f64],
    x_rows: &[f64],
    y: &mut [f64],
    x_at: impl Fn(u32, usize) -> f64,
) -> (f64, f64) {
    set_rows_with_dots(row_ptr, col_idx, vals, x_rows, y, |i, start, end| {
        row_dot(&col_idx[start..end], &vals[start..end], |c| x_at(c, i))
    })
}

/// The plain kernels' row loop, whatever their index form: `y[i] += row(i, start, end)`
/// for row `i`'s entries `start..end`, with the software prefetch running ahead over `idx`
/// and `vals`. Inlined into each kernel, so each keeps its own specialised loop.
#[inline(always)]
fn add_rows<C>(
    row_ptr: &[usize],
    idx: &[C],
    vals: &[f64],
    y: &mut [f64],
    row: impl Fn(usize, usize, usize) -> f64,
) {
    let mut prefetch = Prefetch::new(idx, vals, row_ptr[0]);
    for (i, yi) in y.iter_mut().enumerate() {
        let (start, end) = (row_ptr[i], row_ptr[i + 1]);
        prefetch.up_to(end);
        *yi += row(i, start, end);
    }
}

/// The fused kernels' row loop, whatever their index form: `y[i] = row(i, start, end)`,
/// and the dots `(Σ x_rows[i]·y[i], Σ y[i]²)` left to right, with the prefetch of
/// [`add_rows`].
///
/// # Panics
/// If `x_rows.len() != y.len()`.
#[inline(always)]
fn set_rows_with_dots<C>(
    row_ptr: &[usize],
    idx: &[C],
    vals: &[f64],
    x_rows: &[f64],
    y: &mut [f64],
    row: impl Fn(usize, usize, usize) -> f64,
) -> (f64, f64) {
    assert_eq!(
        x_rows.len(),
        y.len(),
        "spmv_csr_dot: x_rows and y differ in length"
    );
    let mut prefetch = Prefetch::new(idx, vals, row_ptr[0]);
    let (mut xy, mut yy) = (0.0, 0.0);
    for (i, (yi, &xi)) in y.iter_mut().zip(x_rows).enumerate() {
        let (start, end) = (row_ptr[i], row_ptr[i + 1]);
        prefetch.up_to(end);
        let v = row(i, start, end);
        *yi = v;
        xy += xi * v;
        yy += v * v;
    }
    (xy, yy)
}

/// `(Σ a[i]·b[i], Σ b[i]²)` left to right: the unfused form of [`spmv_csr_dot`]'s dots.
pub fn dot_pair(a: &[f64], b: &[f64]) -> (f64, f64) {
    assert_eq!(a.len(), b.len(), "dot_pair: lengths differ");
    a.iter()
        .zip(b)
        .fold((0.0, 0.0), |(ab, bb), (&x, &y)| (ab + x * y, bb + y * y))
}

/// Panics unless `row_ptr` has `y.len() + 1` non-decreasing entries ending within both
/// `col_idx` and `vals`: after this, `row_ptr[i]..row_ptr[i + 1]` is a valid range of both.
fn check_row_ptr(row_ptr: &[usize], col_idx: &[u32], vals: &[f64], y: &[f64]) {
    check_row_ptr_ends(row_ptr, col_idx, vals, y);
    if let Some(i) = row_ptr.windows(2).position(|w| w[0] > w[1]) {
        panic!(
            "spmv_csr: row_ptr decreases at row {i} of the block ({} > {})",
            row_ptr[i],
            row_ptr[i + 1]
        );
    }
}

/// The `O(1)` part of [`check_row_ptr`]: panics unless `row_ptr` has `y.len() + 1` entries
/// and its last one is within both `col_idx` and `vals`.
fn check_row_ptr_ends<C>(row_ptr: &[usize], col_idx: &[C], vals: &[f64], y: &[f64]) {
    assert_eq!(
        row_ptr.len(),
        y.len() + 1,
        "spmv_csr: row_ptr has {} entries for {} rows of y (expected rows + 1)",
        row_ptr.len(),
        y.len()
    );
    let last = row_ptr[y.len()];
    assert!(
        last <= col_idx.len() && last <= vals.len(),
        "spmv_csr: row_ptr ends at {last}, beyond col_idx ({}) or vals ({})",
        col_idx.len(),
        vals.len()
    );
}

/// Software prefetch of `vals` and `col_idx`, [`PREFETCH_AHEAD`] entries ahead of the row
/// being multiplied (see the module doc, "Software prefetch", for the measurement that chose
/// it).
///
/// It holds raw pointers only to form prefetch addresses, which may lie past the end of the
/// slices: a prefetch is a hint that never faults and reads nothing the program sees.
struct Prefetch {
    vals: *const f64,
    cols: *const u8,
    /// Bytes of one column index (4 for `u32`, 2 for the compact `u16` offsets).
    col_bytes: usize,
    /// Next entry whose `vals` cache line is to be prefetched (steps of 8 entries = 64 bytes).
    next_val: usize,
    /// Next entry whose column-index cache line is to be prefetched (steps of
    /// `64 / col_bytes` entries).
    next_col: usize,
}

/// How far ahead [`Prefetch`] runs, in entries: 8 KiB of `vals` and 4 KiB of `col_idx`
/// (4–32 KiB of `vals` measured alike). The first `PREFETCH_AHEAD` entries of each call are
/// left to the hardware prefetcher: a negligible share of the row blocks the codelets get.
const PREFETCH_AHEAD: usize = 1024;

impl Prefetch {
    /// Starts `PREFETCH_AHEAD` entries after `first`: the lines before are demanded at once,
    /// so prefetching them would only add instructions.
    fn new<C>(col_idx: &[C], vals: &[f64], first: usize) -> Self {
        let next = first.saturating_add(PREFETCH_AHEAD);
        Prefetch {
            vals: vals.as_ptr(),
            cols: col_idx.as_ptr().cast(),
            col_bytes: std::mem::size_of::<C>(),
            next_val: next,
            next_col: next,
        }
    }

    /// Prefetches every line up to entry `end + PREFETCH_AHEAD` not prefetched yet.
    #[inline(always)]
    fn up_to(&mut self, end: usize) {
        let target = end.saturating_add(PREFETCH_AHEAD);
        while self.next_val < target {
            prefetch_line(self.vals.wrapping_add(self.next_val).cast());
            self.next_val += 8;
        }
        while self.next_col < target {
            prefetch_line(
                self.cols
                    .wrapping_add(self.next_col * self.col_bytes)
                    .cast(),
            );
            self.next_col += 64 / self.col_bytes;
        }
    }
}

/// Asks for the cache line holding `p` (into all levels); no-op off x86-64.
#[inline(always)]
fn prefetch_line(p: *const i8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetcht0` never faults and has no effect the program can observe, whatever
    // the address (SSE, which provides it, is part of the x86-64 baseline).
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cold]
#[inline(never)]
fn column_out_of_range(c: u32, row: usize, x_len: usize) -> ! {
    panic!("spmv_csr: column index {c} in row {row} of the block is out of range for x of length {x_len}")
}

/// `Σ vals[k] · load(cols[k])` with four accumulators: entry `k` into `acc[k % 4]`, the
/// trailing `len % 4` entries into `acc[0]`, then `(acc0 + acc1) + (acc2 + acc3)`.
#[inline(always)]
fn row_dot<C: Copy>(cols: &[C], vals: &[f64], load: impl Fn(C) -> f64) -> f64 {
    let mut acc = [0.0f64; 4];
    let cc = cols.chunks_exact(4);
    let vc = vals.chunks_exact(4);
    let (c_tail, v_tail) = (cc.remainder(), vc.remainder());
    for (c4, v4) in cc.zip(vc) {
        acc[0] += v4[0] * load(c4[0]);
        acc[1] += v4[1] * load(c4[1]);
        acc[2] += v4[2] * load(c4[2]);
        acc[3] += v4[3] * load(c4[3]);
    }
    for (&c, &v) in c_tail.iter().zip(v_tail) {
        acc[0] += v * load(c);
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3])
}

/// [`row_dot`] over a row held as gaps (see [`spmv_csr16_unchecked`]): the columns are
/// `first + gaps[0]`, then each the one before plus its gap; the same accumulators in the
/// same order, so the same bits as [`row_dot`] over the decoded columns.
///
/// # Safety
/// Every decoded column is `< x.len()`.
#[inline(always)]
unsafe fn row_dot_gaps(first: u32, gaps: &[u16], vals: &[f64], x: &[f64]) -> f64 {
    let mut acc = [0.0f64; 4];
    let mut c = first as usize;
    let gc = gaps.chunks_exact(4);
    let vc = vals.chunks_exact(4);
    let (g_tail, v_tail) = (gc.remainder(), vc.remainder());
    // SAFETY (every load): `c` is a decoded column, `< x.len()` by the caller's promise.
    let load = |c: usize| unsafe {
        debug_assert!(c < x.len(), "column {c} of x with {}", x.len());
        *x.get_unchecked(c)
    };
    for (g4, v4) in gc.zip(vc) {
        let c0 = c + g4[0] as usize;
        let c1 = c0 + g4[1] as usize;
        let c2 = c1 + g4[2] as usize;
        let c3 = c2 + g4[3] as usize;
        acc[0] += v4[0] * load(c0);
        acc[1] += v4[1] * load(c1);
        acc[2] += v4[2] * load(c2);
        acc[3] += v4[3] * load(c3);
        c = c3;
    }
    for (&g, &v) in g_tail.iter().zip(v_tail) {
        c += g as usize;
        acc[0] += v * load(c);
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3])
}

#[cfg(test)]
mod tests {
    //! Proves that the CSR kernel equals a plain loop on hand-written matrices (empty rows, one
    //! row, a row block at a non-zero offset, rows long enough to unroll), that the split-`x`
    //! kernel gives the same bits, and that malformed input panics instead of reading out of
    //! bounds.

    use super::*;

    /// Plain `y += A·x`, one accumulator, left to right.
    fn reference(row_ptr: &[usize], col_idx: &[u32], vals: &[f64], x: &[f64], y: &mut [f64]) {
        for i in 0..y.len() {
            for k in row_ptr[i]..row_ptr[i + 1] {
                y[i] += vals[k] * x[col_idx[k] as usize];
            }
        }
    }

    /// Relative tolerance on `Σ|a·x|` per row: reordering a sum of `m` terms changes it by at
    /// most `m·ε·Σ|terms|`; 1e-12 is far above that for the lengths used here.
    const TOL: f64 = 1e-12;

    fn check_both(row_ptr: &[usize], col_idx: &[u32], vals: &[f64], x: &[f64], y0: &[f64]) {
        let mut want = y0.to_vec();
        reference(row_ptr, col_idx, vals, x, &mut want);
        let mut scale = vec![0.0; y0.len()];
        for i in 0..y0.len() {
            scale[i] = y0[i].abs()
                + (row_ptr[i]..row_ptr[i + 1])
                    .map(|k| (vals[k] * x[col_idx[k] as usize]).abs())
                    .sum::<f64>();
        }
        let mut got = y0.to_vec();
        spmv_csr(row_ptr, col_idx, vals, x, &mut got);
        let mut got_unchecked = y0.to_vec();
        // SAFETY: the test matrices' columns are < x.len() (the checked call above passed).
        unsafe { spmv_csr_unchecked(row_ptr, col_idx, vals, x, &mut got_unchecked) };
        for i in 0..y0.len() {
            assert!(
                (got[i] - want[i]).abs() <= TOL * scale[i],
                "row {i}: {} vs {}",
                got[i],
                want[i]
            );
            assert_eq!(got[i].to_bits(), got_unchecked[i].to_bits(), "row {i}");
        }
        // `x` in two parts, split anywhere: the same bits.
        for cut in [0, x.len() / 2, x.len()] {
            let mut got_split = y0.to_vec();
            spmv_csr_split(row_ptr, col_idx, vals, &x[..cut], &x[cut..], &mut got_split);
            assert_same_bits(&got_split, &got, &format!("split at {cut}"));
        }
    }

    fn x_of(n: usize) -> Vec<f64> {
        (0..n).map(|j| 1.0 + (j as f64 * 0.37).sin()).collect()
    }

    /// Panics unless `got` equals `want` bit for bit, row by row, naming the row and `what`.
    fn assert_same_bits(got: &[f64], want: &[f64], what: &str) {
        assert_eq!(got.len(), want.len(), "{what}: lengths");
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            assert_eq!(g.to_bits(), w.to_bits(), "{what}, row {i}");
        }
    }

    /// Panics unless the dot pairs are equal bit for bit.
    fn assert_same_dots(got: (f64, f64), want: (f64, f64), what: &str) {
        assert_eq!(
            (got.0.to_bits(), got.1.to_bits()),
            (want.0.to_bits(), want.1.to_bits()),
            "{what}"
        );
    }

    #[test]
    fn fused_dot_equals_spmv_then_dots() {
        // Rows of many lengths, x split anywhere: the same y and the same dots, bit for bit.
        let n_cols = 300;
        let mut row_ptr = vec![0];
        let mut col_idx = Vec::new();
        let mut vals = Vec::new();
        for len in (0..=13).chain([40, 299]) {
            for k in 0..len {
                col_idx.push(((k * 11 + len * 3) % n_cols) as u32);
                vals.push(0.7 - (k as f64 * 0.3).cos());
            }
            row_ptr.push(col_idx.len());
        }
        let rows = row_ptr.len() - 1;
        let x = x_of(n_cols);
        let x_rows: Vec<f64> = (0..rows).map(|i| (i as f64).sin()).collect();
        let mut want = vec![0.0; rows];
        spmv_csr(&row_ptr, &col_idx, &vals, &x, &mut want);
        let dots = dot_pair(&x_rows, &want);
        for cut in [n_cols, n_cols / 3, 0] {
            let mut got = vec![f64::NAN; rows];
            let d = spmv_csr_dot(
                &row_ptr,
                &col_idx,
                &vals,
                &x[..cut],
                &x[cut..],
                &x_rows,
                &mut got,
            );
            assert_same_dots(d, dots, &format!("cut {cut}"));
            assert_same_bits(&got, &want, &format!("cut {cut}"));
        }
        // The unchecked kernel, x in one part: the same bits.
        let mut got = vec![f64::NAN; rows];
        // SAFETY: every column index is `% n_cols`, and x has n_cols entries.
        let d = unsafe { spmv_csr_dot_unchecked(&row_ptr, &col_idx, &vals, &x, &x_rows, &mut got) };
        assert_same_dots(d, dots, "unchecked");
        assert_same_bits(&got, &want, "unchecked");
    }

    #[test]
    fn small_with_empty_rows() {
        // [1 0 2; 0 0 0; 0 3 0; 0 0 0]
        let row_ptr = [0, 2, 2, 3, 3];
        let col_idx = [0, 2, 1];
        let vals = [1.0, 2.0, 3.0];
        let x = [1.0, 10.0, 100.0];
        let mut y = [0.5; 4];
        spmv_csr(&row_ptr, &col_idx, &vals, &x, &mut y);
        assert_eq!(y, [201.5, 0.5, 30.5, 0.5]);
        check_both(&row_ptr, &col_idx, &vals, &x, &[0.5; 4]);
    }

    #[test]
    fn no_rows_and_single_row() {
        let mut y: [f64; 0] = [];
        spmv_csr(&[3], &[0, 1, 2], &[1.0; 3], &[], &mut y);
        let n = 1000;
        let col_idx: Vec<u32> = (0..n as u32).rev().collect();
        let vals: Vec<f64> = (0..n).map(|k| (k as f64).cos()).collect();
        check_both(&[0, n], &col_idx, &vals, &x_of(n), &[0.25]);
    }

    #[test]
    fn row_lengths_around_the_unroll() {
        // Rows of lengths 0..=20 and some long ones: multiples of 4 and not, shorter and longer
        // than one unrolled step.
        let n_cols = 1200;
        let mut row_ptr = vec![0];
        let mut col_idx = Vec::new();
        let mut vals = Vec::new();
        for len in (0..=20).chain([511, 512, 513, 1024, 1100]) {
            for k in 0..len {
                col_idx.push(((k * 7 + len) % n_cols) as u32);
                vals.push(1.0 / (1 + k) as f64 - 0.3);
            }
            row_ptr.push(col_idx.len());
        }
        let rows = row_ptr.len() - 1;
        check_both(&row_ptr, &col_idx, &vals, &x_of(n_cols), &vec![1.0; rows]);
    }

    #[test]
    fn row_block_at_offset() {
        // Full matrix: 6 rows of lengths 3,0,5,9,1,2; block = rows 2..5 with row_ptr[0] != 0.
        let lens = [3, 0, 5, 9, 1, 2];
        let mut row_ptr = vec![0];
        let mut col_idx = Vec::new();
        let mut vals = Vec::new();
        for (i, &len) in lens.iter().enumerate() {
            for k in 0..len {
                col_idx.push(((i * 3 + k * 5) % 10) as u32);
                vals.push((i * 10 + k) as f64);
            }
            row_ptr.push(col_idx.len());
        }
        let x = x_of(10);
        let mut full = vec![0.0; 6];
        spmv_csr(&row_ptr, &col_idx, &vals, &x, &mut full);
        let mut block = vec![0.0; 3];
        spmv_csr(&row_ptr[2..=5], &col_idx, &vals, &x, &mut block);
        assert_eq!(block, full[2..5]);
        check_both(&row_ptr[2..=5], &col_idx, &vals, &x, &[0.0; 3]);
    }

    #[test]
    #[should_panic(
        expected = "column index 3 in row 0 of the block is out of range for x of length 3"
    )]
    fn column_out_of_range_panics() {
        spmv_csr(&[0, 2], &[0, 3], &[1.0, 1.0], &[1.0; 3], &mut [0.0]);
    }

    #[test]
    #[should_panic(expected = "row_ptr decreases at row 1")]
    fn decreasing_row_ptr_panics() {
        spmv_csr(&[0, 2, 1], &[0, 1], &[1.0, 1.0], &[1.0; 3], &mut [0.0; 2]);
    }

    #[test]
    // The slicing of row 1 panics (std's message, not matched here).
    #[should_panic]
    fn decreasing_row_ptr_panics_unchecked() {
        // SAFETY: every column index is < x.len(); only `row_ptr` is malformed.
        unsafe { spmv_csr_unchecked(&[0, 2, 1], &[0, 1], &[1.0, 1.0], &[1.0; 3], &mut [0.0; 2]) };
    }

    #[test]
    #[should_panic(expected = "beyond col_idx")]
    fn row_ptr_past_end_panics_unchecked() {
        // SAFETY: every column index is < x.len(); only `row_ptr` is malformed.
        unsafe { spmv_csr_unchecked(&[0, 3], &[0, 1], &[1.0, 1.0], &[1.0; 3], &mut [0.0]) };
    }

    #[test]
    fn long_block_prefetches_past_the_end() {
        // 3 × PREFETCH_AHEAD entries at an offset: the prefetch runs past the slices' end.
        let n = 3 * PREFETCH_AHEAD + 5;
        let col_idx: Vec<u32> = (0..n as u32).map(|k| k % 97).collect();
        let vals: Vec<f64> = (0..n).map(|k| 0.5 - (k as f64 * 0.01).sin()).collect();
        let row_ptr = [7, 7, 700, 2000, n - 3, n];
        check_both(&row_ptr, &col_idx, &vals, &x_of(97), &[1.0; 5]);
    }

    #[test]
    #[should_panic(expected = "beyond col_idx")]
    fn row_ptr_past_end_panics() {
        spmv_csr(&[0, 3], &[0, 1], &[1.0, 1.0], &[1.0; 3], &mut [0.0]);
    }

    #[test]
    #[should_panic(expected = "row_ptr has 2 entries for 2 rows")]
    fn wrong_row_ptr_length_panics() {
        spmv_csr(&[0, 1], &[0], &[1.0], &[1.0], &mut [0.0; 2]);
    }

    /// `(first, gaps)` of `col_idx` as `Csr::with_compact_columns` builds them (the rows'
    /// columns must be non-decreasing).
    fn compact(row_ptr: &[usize], col_idx: &[u32]) -> (Vec<u32>, Vec<u16>) {
        let mut first = Vec::new();
        let mut gaps = vec![0u16; col_idx.len()];
        for w in row_ptr.windows(2) {
            let start = col_idx
                .get(w[0])
                .copied()
                .filter(|_| w[1] > w[0])
                .unwrap_or(0);
            first.push(start);
            let mut prev = start;
            for k in w[0]..w[1] {
                gaps[k] = u16::try_from(col_idx[k] - prev).unwrap();
                prev = col_idx[k];
            }
        }
        (first, gaps)
    }

    #[test]
    fn compact_kernels_give_the_same_bits() {
        // Rows of lengths around the unroll and past the prefetch distance, columns rising by
        // gaps of 0 (a repeat) to 65,535, a row spanning far more than 65,536 columns, a
        // block at an offset.
        let n_cols = 300_000;
        let mut row_ptr = vec![5];
        let mut col_idx = vec![0u32; 5];
        let mut vals = vec![f64::NAN; 5];
        for (r, len) in (0..=9).chain([3 * PREFETCH_AHEAD, 17]).enumerate() {
            let mut c = (r * 4099) % 4000;
            for k in 0..len {
                c += if k % 1000 == 999 {
                    65_535
                } else {
                    (k * 7 + r) % 23
                };
                col_idx.push(c as u32);
                vals.push(0.25 + (k as f64 * 0.7).sin());
            }
            row_ptr.push(col_idx.len());
        }
        let rows = row_ptr.len() - 1;
        let (first, gaps) = compact(&row_ptr, &col_idx);
        let x = x_of(n_cols);
        let x_rows: Vec<f64> = (0..rows).map(|i| (i as f64).cos()).collect();
        let (mut want, mut got) = (vec![0.5; rows], vec![0.5; rows]);
        spmv_csr(&row_ptr, &col_idx, &vals, &x, &mut want);
        // SAFETY: every column is < 300,000 = x.len(), and the gaps decode to the columns.
        unsafe { spmv_csr16_unchecked(&row_ptr, &first, &gaps, &vals, &x, &mut got) };
        assert_same_bits(&got, &want, "compact");
        let (mut want, mut got) = (vec![f64::NAN; rows], vec![f64::NAN; rows]);
        // SAFETY: as above.
        let (d0, d1) = unsafe {
            (
                spmv_csr_dot_unchecked(&row_ptr, &col_idx, &vals, &x, &x_rows, &mut want),
                spmv_csr16_dot_unchecked(&row_ptr, &first, &gaps, &vals, &x, &x_rows, &mut got),
            )
        };
        assert_same_dots(d1, d0, "compact dot");
        assert_same_bits(&got, &want, "compact dot");
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn compact_kernel_with_too_few_first_columns_panics() {
        // Two rows, one first column: the slice of `first` panics before any row is read.
        // SAFETY: the columns (0 and 1) are < x.len(); the call panics on `first` first.
        unsafe {
            spmv_csr16_unchecked(
                &[0, 1, 2],
                &[0],
                &[0, 1],
                &[1.0, 1.0],
                &[1.0; 2],
                &mut [0.0; 2],
            )
        };
    }

    #[test]
    fn cost_hints() {
        assert_eq!(spmv_flops(10), 20.0);
        // 10 entries, 2 rows, 3 columns: 120 + 16 + 24 + 32.
        assert_eq!(spmv_bytes(10, 2, 3), 192.0);
        // Compact: 2 bytes fewer per entry, 4 more per row.
        assert_eq!(spmv_bytes_saved_by_compact(10, 2), 12.0);
    }
}
