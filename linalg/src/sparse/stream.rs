//! STREAM-triad memory bandwidth (`a[i] = b[i] + s·c[i]`), the roofline SpMV rates are judged
//! against: SpMV moves ~12 bytes per 2 flops, so its best rate is about bandwidth / 6.

use std::sync::{Barrier, Mutex};
use std::time::Instant;

/// The most triad bandwidth one thread can plausibly reach, in bytes per
/// second: above any core's memory bandwidth today (tens of GB/s from DRAM,
/// about 100 GB/s on the widest HBM-fed cores), with room for arrays that
/// sit partly in cache. A figure above `threads ×` this is a timing error
/// (issue 28: a 2-core VM "measured" 700 to 9,300 GB/s when the clock
/// started late), refused by [`check_rate`].
pub const MAX_BYTES_PER_SEC_PER_THREAD: f64 = 200e9;

/// `Ok(rate)` when a triad rate of `rate` bytes per second with `threads`
/// threads is physically possible ([`MAX_BYTES_PER_SEC_PER_THREAD`] per
/// thread); else an error saying so, for the driver to refuse the figure
/// rather than report it.
pub fn check_rate(rate: f64, threads: usize) -> Result<f64, String> {
    let max = MAX_BYTES_PER_SEC_PER_THREAD * threads.max(1) as f64;
    if rate.is_finite() && rate > 0.0 && rate <= max {
        return Ok(rate);
    }
    Err(format!(
        "the STREAM triad measured {:.1} GB/s with {threads} thread(s), more than any machine gives ({:.0} GB/s per thread at most): the timing is wrong (a machine too loaded to time, or arrays the caches hold), so the figure is refused",
        rate / 1e9,
        MAX_BYTES_PER_SEC_PER_THREAD / 1e9
    ))
}

/// A default array length for [`stream_triad`]: 64 Mi `f64` = 512 MiB per array, 1.5 GiB for
/// the three, several times any L3 this runs on (the development VM reports 32 MiB; large
/// nodes a few hundred MiB), so the caches cannot serve the loop.
pub const DEFAULT_STREAM_ELEMS: usize = 64 << 20;

/// Bytes one triad iteration counts, by STREAM's convention: read `b[i]` and `c[i]`, write
/// `a[i]`. Without non-temporal stores the hardware also reads `a[i]` before writing it
/// (write-allocate), so the true traffic is up to 4/3 of this; STREAM reports the 24.
pub const TRIAD_BYTES_PER_ELEM: f64 = 24.0;

/// Runs the triad `a[i] = b[i] + s·c[i]` over arrays of `n_elems` `f64` with `threads`
/// threads, `reps` times, and returns the best rate in bytes per second (24 bytes per
/// element, see [`TRIAD_BYTES_PER_ELEM`]).
///
/// The range is split into `threads` contiguous chunks; each thread first-touches its chunk of
/// all three arrays (so on a NUMA node the pages land near the thread that streams them) and
/// then runs every repetition on that same chunk. Threads start each repetition together on a
/// barrier and each times its own chunk; a repetition's time spans from the first thread's
/// start to the last thread's end, so the slowest thread sets it, as in STREAM, and no
/// thread's late start can shorten it (issue 28: the main thread's clock, started after the
/// start barrier, missed work already done, and a 2-core VM read 9,300 GB/s). Allocation and
/// first touch are not timed. Callers check the figure with [`check_rate`].
///
/// # Panics
/// If `n_elems`, `threads` or `reps` is 0, or if the result fails its check (`a = b + s·c`).
pub fn stream_triad(n_elems: usize, threads: usize, reps: usize) -> f64 {
    assert!(
        n_elems > 0 && threads > 0 && reps > 0,
        "stream_triad: n_elems, threads and reps must be positive"
    );
    // Zeroed allocation maps pages lazily: nothing is touched until the workers write.
    let mut a = vec![0.0f64; n_elems];
    let mut b = vec![0.0f64; n_elems];
    let mut c = vec![0.0f64; n_elems];
    let chunk = n_elems.div_ceil(threads);
    let s = std::hint::black_box(3.0);
    // Main thread + workers meet twice per repetition: start, end.
    let barrier = Barrier::new(threads + 1);
    // Each repetition's (earliest start, latest end) over the threads; a
    // thread's (start, end) is merged in between the barriers.
    let spans: Mutex<Vec<Option<(Instant, Instant)>>> = Mutex::new(vec![None; reps]);
    let mut best = f64::INFINITY;
    std::thread::scope(|scope| {
        for ((a, b), c) in a
            .chunks_mut(chunk)
            .zip(b.chunks_mut(chunk))
            .zip(c.chunks_mut(chunk))
        {
            let (barrier, spans) = (&barrier, &spans);
            scope.spawn(move || {
                // First touch by the thread that will stream this chunk.
                a.fill(0.0);
                b.fill(1.0);
                c.fill(2.0);
                barrier.wait();
                for rep in 0..reps {
                    barrier.wait();
                    let t0 = Instant::now();
                    triad(a, b, c, s);
                    let t1 = Instant::now();
                    {
                        let mut spans = spans.lock().unwrap_or_else(|e| e.into_inner());
                        let span = spans[rep].get_or_insert((t0, t1));
                        *span = (span.0.min(t0), span.1.max(t1));
                    }
                    barrier.wait();
                }
            });
        }
        // `chunks_mut` may yield fewer chunks than `threads` (tiny arrays): stand in for the
        // missing workers so the barrier count still matches.
        let missing = threads - n_elems.div_ceil(chunk);
        for _ in 0..missing {
            let barrier = &barrier;
            scope.spawn(move || {
                for _ in 0..2 * reps + 1 {
                    barrier.wait();
                }
            });
        }
        barrier.wait(); // first touch done
        for rep in 0..reps {
            barrier.wait();
            barrier.wait();
            let spans = spans.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((t0, t1)) = spans[rep] {
                best = best.min((t1 - t0).as_secs_f64());
            }
        }
    });
    let want = 1.0 + s * 2.0;
    assert!(
        a.iter().step_by(4099).all(|&v| v == want) && a[n_elems - 1] == want,
        "stream_triad: wrong result"
    );
    TRIAD_BYTES_PER_ELEM * n_elems as f64 / best
}

#[inline(never)]
fn triad(a: &mut [f64], b: &[f64], c: &[f64], s: f64) {
    for ((a, &b), &c) in a.iter_mut().zip(b).zip(c) {
        *a = b + s * c;
    }
}

#[cfg(test)]
mod tests {
    //! Proves that the triad runs and checks its result for any split of the range (more
    //! threads than elements included), and holds the SpMV-vs-bandwidth measurement
    //! (`cargo test --release -p tessera-linalg sparse::stream -- --ignored --nocapture`).

    use super::*;

    #[test]
    fn triad_runs_for_awkward_splits() {
        for (n, t) in [(1, 1), (1, 3), (10, 3), (1000, 2), (4097, 4)] {
            let rate = stream_triad(n, t, 2);
            assert!(rate.is_finite() && rate > 0.0, "n={n} t={t}: {rate}");
        }
    }

    #[test]
    fn implausible_rates_are_refused() {
        assert_eq!(check_rate(20e9, 2), Ok(20e9));
        assert!(check_rate(400e9, 2).is_ok());
        // Issue 28's figures on a 2-core VM.
        for bad in [700e9, 9_300e9, f64::INFINITY, f64::NAN, 0.0] {
            let e = check_rate(bad, 2).unwrap_err();
            assert!(e.contains("refused"), "{e}");
        }
    }

    #[test]
    #[ignore = "measurement: ~2 GiB of memory and several seconds; run in release"]
    fn spmv_vs_stream() {
        use crate::sparse::gen;
        use tessera_tasks::kernels::{spmv_bytes, spmv_csr, spmv_csr_unchecked, spmv_flops};

        let n = std::env::var("STREAM_ELEMS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(DEFAULT_STREAM_ELEMS);
        let threads = std::thread::available_parallelism().map_or(1, |p| p.get());
        let bw1 = stream_triad(n, 1, 5);
        let bwt = stream_triad(n, threads, 5);
        println!(
            "STREAM triad, {} MiB per array: 1 thread {:.2} GB/s, {threads} threads {:.2} GB/s",
            (n * 8) >> 20,
            bw1 / 1e9,
            bwt / 1e9
        );
        for spec in [
            "stencil27:100",
            "stencil7:150",
            "powerlaw:2000000:12:2.5",
            "dense:6000",
        ] {
            let a = gen::parse_gen_spec(spec).unwrap();
            let x: Vec<f64> = (0..a.n_cols()).map(|j| 1.0 + (j % 7) as f64).collect();
            let flops = spmv_flops(a.nnz());
            let bytes = spmv_bytes(a.nnz(), a.n_rows(), a.n_cols());
            let time = |f: &mut dyn FnMut(&mut [f64])| {
                let mut y = vec![0.0; a.n_rows()];
                f(&mut y); // warm
                let mut best = f64::INFINITY;
                for _ in 0..8 {
                    let t = Instant::now();
                    f(&mut y);
                    best = best.min(t.elapsed().as_secs_f64());
                }
                std::hint::black_box(&y);
                best
            };
            let (rp, ci, v) = (a.row_ptr(), a.col_idx(), a.vals());
            let t_checked = time(&mut |y| spmv_csr(rp, ci, v, &x, y));
            // SAFETY: `a` is a validated Csr and x.len() == n_cols.
            let t_unchecked = time(&mut |y| unsafe { spmv_csr_unchecked(rp, ci, v, &x, y) });
            let t_reference = time(&mut |y| a.spmv_reference(&x, y));
            let roofline = bw1 * flops / bytes;
            println!(
                "{spec}: {} rows, {:.1} M nnz, {:.0} MB moved per SpMV; 1 thread GFLOP/s: \
                 spmv_csr {:.2} ({:.1} GB/s), unchecked {:.2}, reference {:.2}; roofline at \
                 1-thread triad {:.2}",
                a.n_rows(),
                a.nnz() as f64 / 1e6,
                bytes / 1e6,
                flops / t_checked / 1e9,
                bytes / t_checked / 1e9,
                flops / t_unchecked / 1e9,
                flops / t_reference / 1e9,
                roofline / 1e9
            );
        }
    }
}
