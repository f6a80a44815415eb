//! SpMV bandwidth against a STREAM triad in the same process, 2 threads (half the rows each).
//!
//! `cargo run --release -p tessera-tasks --example spmv_bw -- [N] [REPS] [INNER]` builds
//! 27-point stencil on an `N³` grid (default 150: 3.4 M rows, 89.9 M entries, like
//! `tessera spmv --gen stencil27:150`), then times, alternating and `REPS` times each
//! (default 15), a frozen copy of the original unchecked kernel (`old`, and `old-nopass`
//! without its `row_ptr` monotonicity pass), the library kernels (`unchecked` =
//! `spmv_csr_unchecked`, `checked` = `spmv_csr`) and the triad `a = b + s·c` on 3 × 512 MiB
//! arrays. A third argument `INNER` times that many SpMVs back to back per sample (a small
//! `N` then measures a matrix that stays in cache).
//! Prints the median and best effective GB/s of each (bytes as in `spmv_bytes`) and checks
//! that every kernel gives the same bits as `old`.

use std::hint::black_box;
use std::time::Instant;
use tessera_tasks::kernels::{spmv_bytes, spmv_csr, spmv_csr_unchecked};

/// The 27-point stencil on an `n³` grid, columns sorted, like `tessera_linalg`'s generator
/// (values vary a little so that a change of summation order would show in the bits).
fn stencil27(n: usize) -> (Vec<usize>, Vec<u32>, Vec<f64>) {
    let nnz = (3 * n - 2).pow(3);
    let mut row_ptr = Vec::with_capacity(n * n * n + 1);
    let mut col_idx = Vec::with_capacity(nnz);
    let mut vals = Vec::with_capacity(nnz);
    row_ptr.push(0);
    let span = |p: usize| p.saturating_sub(1)..(p + 2).min(n);
    for z in 0..n {
        for y in 0..n {
            for x in 0..n {
                let i = (z * n + y) * n + x;
                for zz in span(z) {
                    for yy in span(y) {
                        let base = (zz * n + yy) * n;
                        for xx in span(x) {
                            let c = base + xx;
                            col_idx.push(c as u32);
                            vals.push(if c == i {
                                26.0
                            } else {
                                -1.0 - (c % 7) as f64 * 0.1
                            });
                        }
                    }
                }
                row_ptr.push(col_idx.len());
            }
        }
    }
    (row_ptr, col_idx, vals)
}

/// The unchecked kernel as it was before the bandwidth work: a monotonicity pass over
/// `row_ptr` (left out when `!PASS`), then one row at a time, no software prefetch.
mod old {
    /// # Safety
    /// Every column index in the covered entries is `< x.len()`.
    pub unsafe fn spmv<const PASS: bool>(
        row_ptr: &[usize],
        col_idx: &[u32],
        vals: &[f64],
        x: &[f64],
        y: &mut [f64],
    ) {
        assert_eq!(row_ptr.len(), y.len() + 1);
        if PASS {
            if let Some(i) = row_ptr.windows(2).position(|w| w[0] > w[1]) {
                panic!("row_ptr decreases at {i}");
            }
        }
        let last = row_ptr[y.len()];
        assert!(last <= col_idx.len() && last <= vals.len());
        for (i, yi) in y.iter_mut().enumerate() {
            let (start, end) = (row_ptr[i], row_ptr[i + 1]);
            let cols = &col_idx[start..end];
            *yi += row_dot(cols, &vals[start..end], |c| unsafe {
                *x.get_unchecked(c as usize)
            });
        }
    }

    #[inline(always)]
    fn row_dot(cols: &[u32], vals: &[f64], load: impl Fn(u32) -> f64) -> f64 {
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
}

type Kernel = fn(&[usize], &[u32], &[f64], &[f64], &mut [f64]);

/// One SpMV on 2 threads, rows split in halves; returns seconds.
fn run2(k: Kernel, rp: &[usize], ci: &[u32], v: &[f64], x: &[f64], y: &mut [f64]) -> f64 {
    let mid = y.len() / 2;
    let (y0, y1) = y.split_at_mut(mid);
    let t = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| k(&rp[mid..], ci, v, x, y1));
        k(&rp[..=mid], ci, v, x, y0);
    });
    t.elapsed().as_secs_f64()
}

/// `a = b + s·c` on 2 threads; returns seconds.
fn triad2(a: &mut [f64], b: &[f64], c: &[f64]) -> f64 {
    let mid = a.len() / 2;
    let (a0, a1) = a.split_at_mut(mid);
    let body = |a: &mut [f64], b: &[f64], c: &[f64]| {
        for ((ai, &bi), &ci) in a.iter_mut().zip(b).zip(c) {
            *ai = bi + 3.0 * ci;
        }
    };
    let t = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| body(a1, &b[mid..], &c[mid..]));
        body(a0, &b[..mid], &c[..mid]);
    });
    t.elapsed().as_secs_f64()
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(150, |s| s.parse().expect("N"));
    let reps: usize = args.next().map_or(15, |s| s.parse().expect("REPS"));
    // SpMVs back to back per sample: > 1 measures a matrix that stays in cache.
    let inner: usize = args.next().map_or(1, |s| s.parse().expect("INNER"));
    let (rp, ci, v) = stencil27(n);
    let rows = rp.len() - 1;
    let x: Vec<f64> = (0..rows).map(|j| 1.0 + (j % 11) as f64 * 0.01).collect();
    let bytes = spmv_bytes(ci.len(), rows, rows);
    println!(
        "stencil27:{n}: {rows} rows, {:.1} M nnz, {:.0} MB per SpMV",
        ci.len() as f64 / 1e6,
        bytes / 1e6
    );
    let kernels: [(&str, Kernel); 4] = [
        ("old", |r, c, v, x, y| unsafe {
            old::spmv::<true>(r, c, v, x, y)
        }),
        ("old-nopass", |r, c, v, x, y| unsafe {
            old::spmv::<false>(r, c, v, x, y)
        }),
        ("unchecked", |r, c, v, x, y| unsafe {
            spmv_csr_unchecked(r, c, v, x, y)
        }),
        ("checked", spmv_csr),
    ];
    // Same bits as the original kernel.
    let mut want = vec![0.5; rows];
    run2(kernels[0].1, &rp, &ci, &v, &x, &mut want);
    for (name, k) in &kernels[1..] {
        let mut got = vec![0.5; rows];
        run2(*k, &rp, &ci, &v, &x, &mut got);
        let same = got
            .iter()
            .zip(&want)
            .all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(same, "{name} differs from old");
    }
    let ns = 64 << 20; // 512 MiB per array
    let (mut a, b, c) = (vec![0.0; ns], vec![1.0; ns], vec![2.0; ns]);
    triad2(&mut a, &b, &c);
    let mut y = vec![0.0; rows];
    let mut times = vec![Vec::new(); kernels.len() + 1];
    for r in 0..reps {
        // Rotate the order so that no variant always follows the same one.
        for j in 0..=kernels.len() {
            let idx = (j + r) % (kernels.len() + 1);
            let t = if idx == kernels.len() {
                triad2(&mut a, &b, &c)
            } else {
                let k = kernels[idx].1;
                (0..inner)
                    .map(|_| run2(k, &rp, &ci, &v, &x, &mut y))
                    .sum::<f64>()
                    / inner as f64
            };
            times[idx].push(t);
        }
    }
    black_box((&a, &y));
    let triad_bytes = 3.0 * 8.0 * ns as f64;
    let mut triad_med = 0.0;
    for (idx, t) in times.iter_mut().enumerate().rev() {
        let best = t.iter().copied().fold(f64::INFINITY, f64::min);
        let med = median(t);
        let (name, b) = if idx == kernels.len() {
            triad_med = triad_bytes / med;
            ("triad", triad_bytes)
        } else {
            (kernels[idx].0, bytes)
        };
        let pct = if idx == kernels.len() {
            String::new()
        } else {
            format!(" = {:.1} % of triad (median)", 100.0 * b / med / triad_med)
        };
        println!(
            "{name:>10}: median {:.2} GB/s, best {:.2} GB/s{pct}",
            b / med / 1e9,
            b / best / 1e9
        );
    }
}
