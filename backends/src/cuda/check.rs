//! The GPU self-check: every raw operation of this backend against a plain CPU
//! reference on seeded random data, plus copy round trips and two speed
//! figures. `cargo test` has no GPU; this is the GPU test, run by hand
//! (`tessera gpu-check`). It calls the operations directly: the typed
//! [`views`](super::views) and the codelets' CUDA bodies built on them are
//! checked only by real runs (e.g. `tessera lu --gpus all`, with its residual).

use std::panic::{catch_unwind, AssertUnwindSafe};

use tessera_engine::device::{Device, DeviceBuffer, DeviceMemory};

use super::{blas, d2d_bandwidth, kernels, CudaDevice, STAGING_CHUNKS, STAGING_CHUNK_BYTES};

/// One result of [`self_check`].
#[derive(Clone, Debug, PartialEq)]
pub struct CheckLine {
    /// What was checked or measured.
    pub what: String,
    /// Largest error relative to the reference's scale (0 for exact checks
    /// and measurements).
    pub max_rel_err: f64,
    /// Whether the error is within the stated tolerance (measurements: the
    /// figure could be taken).
    pub passed: bool,
    /// Tolerance, sizes, measured figure, or the error met.
    pub detail: String,
}

/// Runs each GPU operation against a CPU reference on seeded random data
/// (dgemm_minus 300×200×150 with odd leading dimensions, dtrsm, laswp across
/// 3 tiles with swaps crossing tiles, spmv_csr on random CSR blocks with
/// empty rows), upload/download round trips of odd sizes (0, 1, 17 MiB + 3
/// bytes, past the staging pool, and from three threads at once), and
/// measures cuBLAS dgemm GFLOP/s at n = 8192 and D2D bandwidth. A failing
/// check gives a failed line, not an `Err`; `Err` only when the device cannot
/// be used at all. Never panics.
pub fn self_check(dev: &CudaDevice) -> Result<Vec<CheckLine>, String> {
    catch_unwind(AssertUnwindSafe(|| run_checks(dev))).unwrap_or_else(|p| {
        Err(format!(
            "self-check panicked: {}",
            tessera_engine::fmt::panic_message(&*p)
        ))
    })
}

fn run_checks(dev: &CudaDevice) -> Result<Vec<CheckLine>, String> {
    dev.bind()?;
    let mut rng = Rng(0x7E55_E4A5_C0DE_0001);
    let mut lines = vec![CheckLine {
        what: format!("open {} ({})", dev.name(), dev.info().name),
        max_rel_err: 0.0,
        passed: true,
        detail: format!(
            "sm {}.{}, {} SMs, dgemm(4096) {:.0} GFLOP/s, upload {:.1} GB/s, memory limit {:.1} GiB",
            dev.info().compute_capability.0,
            dev.info().compute_capability.1,
            dev.info().sm_count,
            dev.dgemm_gflops(),
            dev.link().bandwidth / 1e9,
            dev.memory_limit().unwrap_or(0) as f64 / (1u64 << 30) as f64
        ),
    }];
    let mut push = |what: &str, r: Result<CheckLine, String>| {
        lines.push(r.unwrap_or_else(|e| CheckLine {
            what: what.to_string(),
            max_rel_err: f64::NAN,
            passed: false,
            detail: e,
        }))
    };
    push("dgemm_minus", check_dgemm(dev, &mut rng, 300, 200, 150));
    push("dtrsm_unit_lower_left", check_dtrsm(dev, &mut rng, 173, 61));
    push("laswp", check_laswp(dev, &mut rng, &[37, 64, 23], 19));
    push(
        "dgetrf_panel",
        check_panel(dev, &mut rng, &[48, 48, 31], 48),
    );
    push(
        "spmv_csr (short rows)",
        check_spmv(dev, &mut rng, 1000, 1200, 12, 123),
    );
    push(
        "spmv_csr (long rows)",
        check_spmv(dev, &mut rng, 200, 5000, 120, 7),
    );
    let big = STAGING_CHUNKS * STAGING_CHUNK_BYTES / 2 + STAGING_CHUNK_BYTES / 2 + 5;
    for bytes in [0, 1, (17 << 20) + 3, big] {
        push("round trip", check_round_trip(dev, &mut rng, bytes));
    }
    push(
        "concurrent round trips",
        check_concurrent(dev, &mut rng, 3, (40 << 20) + 7),
    );
    push(
        "dgemm rate",
        dev.measure_dgemm(8192).map(|f| CheckLine {
            what: "cuBLAS dgemm n=8192".into(),
            max_rel_err: 0.0,
            passed: f.is_finite() && f > 0.0,
            detail: format!("{:.0} GFLOP/s", f / 1e9),
        }),
    );
    push(
        "link rates",
        dev.measure_link(256 << 20).map(|r| CheckLine {
            what: "host link, 256 MiB".into(),
            max_rel_err: 0.0,
            passed: [r.pinned_h2d, r.pinned_d2h, r.staged_h2d, r.staged_d2h]
                .iter()
                .all(|v| v.is_finite() && *v > 0.0),
            detail: format!(
                "pinned DMA h2d {:.1} / d2h {:.1} GB/s; memcpy {:.1} GB/s; staged upload {:.1} / download {:.1} GB/s",
                r.pinned_h2d / 1e9,
                r.pinned_d2h / 1e9,
                r.memcpy / 1e9,
                r.staged_h2d / 1e9,
                r.staged_d2h / 1e9
            ),
        }),
    );
    let d2d = d2d_bandwidth(dev, 256 << 20);
    let copy_rate = d2d.as_ref().ok().copied();
    push(
        "d2d bandwidth",
        d2d.map(|bw| CheckLine {
            what: "device-to-device copy, 256 MiB".into(),
            max_rel_err: 0.0,
            passed: bw.is_finite() && bw > 0.0,
            detail: format!("{:.0} GB/s (read + write)", bw / 1e9),
        }),
    );
    // The SpMV kernel alone, without the task around it: what `spmv
    // --on-device` can reach at most, and whether the lanes choice matters.
    const RATE_ROWS: usize = 2 << 20;
    push(
        "spmv_csr rate",
        kernels::spmv_rate(dev, RATE_ROWS).map(|rates| {
            let auto = kernels::spmv_lanes_for(27 * RATE_ROWS as u64, RATE_ROWS);
            let of_copy =
                |r: f64| copy_rate.map_or(String::new(), |c| format!(" = {:.0} %", 100.0 * r / c));
            CheckLine {
                what: format!("spmv_csr kernel, {RATE_ROWS} rows x 27"),
                max_rel_err: 0.0,
                passed: rates.iter().all(|(_, r)| r.is_finite() && *r > 0.0),
                detail: rates
                    .iter()
                    .map(|&(l, r)| {
                        let mark = if l == auto { " (auto)" } else { "" };
                        format!("{l} lanes{mark} {:.0} GB/s{}", r / 1e9, of_copy(r))
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
                    + " of the copy rate",
            }
        }),
    );
    Ok(lines)
}

/// xorshift64: seeded, reproducible test data.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Uniform in [-1, 1).
    fn f64(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }
    /// Uniform in 0..n (n > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn vec(&mut self, n: usize) -> Vec<f64> {
        (0..n).map(|_| self.f64()).collect()
    }
}

/// Element types copied as raw bytes.
trait Plain: Copy + Default {}
impl Plain for f64 {}
impl Plain for u64 {}
impl Plain for u32 {}
impl Plain for u8 {}

fn bytes_of<T: Plain>(v: &[T]) -> &[u8] {
    // SAFETY: Plain types have no padding and every byte is initialised.
    unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, std::mem::size_of_val(v)) }
}

fn bytes_of_mut<T: Plain>(v: &mut [T]) -> &mut [u8] {
    // SAFETY: as above, and every byte pattern is a valid Plain value.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, std::mem::size_of_val(v)) }
}

fn to_device<T: Plain>(dev: &CudaDevice, v: &[T]) -> Result<Box<dyn DeviceBuffer>, String> {
    let buf = dev.alloc(std::mem::size_of_val(v))?;
    dev.upload(bytes_of(v), &*buf)?;
    Ok(buf)
}

/// Waits for the compute stream, then downloads `buf` as `len` values.
fn to_host<T: Plain>(
    dev: &CudaDevice,
    buf: &dyn DeviceBuffer,
    len: usize,
) -> Result<Vec<T>, String> {
    dev.synchronize()?;
    let mut v = vec![T::default(); len];
    dev.download(buf, bytes_of_mut(&mut v))?;
    Ok(v)
}

/// max |got − want| / max(1, max |want|).
fn rel_err(got: &[f64], want: &[f64]) -> f64 {
    let scale = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    let diff = got.iter().zip(want).fold(0.0f64, |m, (g, w)| {
        if (g - w).is_nan() {
            f64::INFINITY
        } else {
            m.max((g - w).abs())
        }
    });
    if got.len() != want.len() {
        return f64::INFINITY;
    }
    diff / scale
}

fn line(what: String, err: f64, tol: f64, detail: &str) -> CheckLine {
    CheckLine {
        what,
        max_rel_err: err,
        passed: err <= tol,
        detail: format!("tolerance {tol:.0e}; {detail}"),
    }
}

fn check_dgemm(
    dev: &CudaDevice,
    rng: &mut Rng,
    m: usize,
    n: usize,
    k: usize,
) -> Result<CheckLine, String> {
    let (lda, ldb, ldc) = (m + 3, k + 5, m + 7);
    let a = rng.vec(lda * k);
    let b = rng.vec(ldb * n);
    let c0 = rng.vec(ldc * n);
    let mut want = c0.clone();
    for j in 0..n {
        for p in 0..k {
            let bpj = b[p + j * ldb];
            for i in 0..m {
                want[i + j * ldc] -= a[i + p * lda] * bpj;
            }
        }
    }
    let (da, db, dc) = (
        to_device(dev, &a)?,
        to_device(dev, &b)?,
        to_device(dev, &c0)?,
    );
    // SAFETY: the buffers hold the matrices with these leading dimensions.
    unsafe { blas::dgemm_minus(dev, m, n, k, da.ptr(), lda, db.ptr(), ldb, dc.ptr(), ldc)? };
    let got = to_host::<f64>(dev, &*dc, c0.len())?;
    Ok(line(
        format!("dgemm_minus {m}x{n}x{k}"),
        rel_err(&got, &want),
        1e-12,
        &format!("lda {lda}, ldb {ldb}, ldc {ldc}; padding rows must stay untouched"),
    ))
}

fn check_dtrsm(dev: &CudaDevice, rng: &mut Rng, m: usize, n: usize) -> Result<CheckLine, String> {
    let (ldl, ldb) = (m + 2, m + 4);
    let mut l = vec![0.0; ldl * m];
    for j in 0..m {
        for i in 0..ldl {
            l[i + j * ldl] = match i.cmp(&j) {
                // Small entries keep L well conditioned.
                std::cmp::Ordering::Greater => rng.f64() / m as f64,
                // Never read (unit diagonal, upper part): poison values.
                std::cmp::Ordering::Equal => 3.0,
                std::cmp::Ordering::Less => 5.0e3,
            };
        }
    }
    let b0 = rng.vec(ldb * n);
    let mut want = b0.clone();
    for j in 0..n {
        for i in 0..m {
            let mut s = want[i + j * ldb];
            for p in 0..i {
                s -= l[i + p * ldl] * want[p + j * ldb];
            }
            want[i + j * ldb] = s;
        }
    }
    let (dl, db) = (to_device(dev, &l)?, to_device(dev, &b0)?);
    // SAFETY: the buffers hold L (m×m, ldl) and B (m×n, ldb).
    unsafe { blas::dtrsm_unit_lower_left(dev, m, n, dl.ptr(), ldl, db.ptr(), ldb)? };
    let got = to_host::<f64>(dev, &*db, b0.len())?;
    Ok(line(
        format!("dtrsm_unit_lower_left {m}x{n}"),
        rel_err(&got, &want),
        1e-12,
        &format!("ldl {ldl}, ldb {ldb}; diagonal and upper part poisoned"),
    ))
}

/// The GPU panel (cuSOLVER dgetrf on gathered tiles) against a plain
/// partial-pivoting LU on the host: same pivots, factors within 1e-10 of
/// the scale.
fn check_panel(
    dev: &CudaDevice,
    rng: &mut Rng,
    tile_rows: &[usize],
    cols: usize,
) -> Result<CheckLine, String> {
    let m: usize = tile_rows.iter().sum();
    let mut a: Vec<f64> = (0..m * cols).map(|_| rng.f64()).collect(); // m × cols, ld = m
    let mut tiles = Vec::new();
    let mut bufs = Vec::new();
    let mut first = 0;
    for &r in tile_rows {
        let t: Vec<f64> = (0..r * cols)
            .map(|x| a[first + x % r + (x / r) * m])
            .collect();
        let b = to_device(dev, &t)?;
        tiles.push((b.ptr(), r));
        bufs.push(b);
        first += r;
    }
    // Host reference: right-looking LU with partial pivoting (first largest |pivot|).
    let k = m.min(cols);
    let mut want_piv = Vec::with_capacity(k);
    for j in 0..k {
        let p = (j..m)
            .max_by(|&x, &y| {
                a[x + j * m]
                    .abs()
                    .partial_cmp(&a[y + j * m].abs())
                    .unwrap()
                    .then(y.cmp(&x))
            })
            .unwrap();
        want_piv.push(p);
        for c in 0..cols {
            a.swap(j + c * m, p + c * m);
        }
        let d = a[j + j * m];
        for i in j + 1..m {
            a[i + j * m] /= d;
        }
        for c in j + 1..cols {
            let u = a[j + c * m];
            for i in j + 1..m {
                a[i + c * m] -= a[i + j * m] * u;
            }
        }
    }
    // SAFETY: each tile holds r × cols doubles, ld = r, and nothing else uses them.
    let got_piv = match unsafe { super::solver::dgetrf_panel(dev, &tiles, cols) } {
        Ok(p) => p,
        Err(e) => return Err(format!("{e:?}")),
    };
    let mut err = 0.0f64;
    let mut first = 0;
    for (b, &r) in bufs.iter().zip(tile_rows) {
        let got = to_host::<f64>(dev, &**b, r * cols)?;
        for c in 0..cols {
            for i in 0..r {
                err = err.max((got[i + c * r] - a[first + i + c * m]).abs());
            }
        }
        first += r;
    }
    let scale = a.iter().fold(0.0f64, |s, v| s.max(v.abs())).max(1.0);
    let rel = err / scale;
    let same = got_piv == want_piv;
    Ok(CheckLine {
        what: format!("dgetrf_panel {m}x{cols} over {} tiles", tile_rows.len()),
        max_rel_err: rel,
        passed: same && rel < 1e-10,
        detail: format!(
            "pivots {}, tolerance 1e-10",
            if same { "equal" } else { "DIFFER" }
        ),
    })
}

fn check_laswp(
    dev: &CudaDevice,
    rng: &mut Rng,
    tile_rows: &[usize],
    cols: usize,
) -> Result<CheckLine, String> {
    let total: usize = tile_rows.iter().sum();
    // Global matrix, row-major by (row, col): value identifies its origin.
    let mut rows: Vec<Vec<f64>> = (0..total)
        .map(|g| (0..cols).map(|c| (g * 1000 + c) as f64).collect())
        .collect();
    // Two calls in a row (the second reuses the scratch while the first may
    // still be queued): LAPACK-style pivots (ipiv[i] >= i, some equal to i,
    // some far, in other tiles) then arbitrary ones.
    let ipiv1: Vec<usize> = (0..40)
        .map(|i| {
            if rng.below(5) == 0 {
                i
            } else {
                i + rng.below(total - i)
            }
        })
        .collect();
    let ipiv2: Vec<usize> = (0..total).map(|_| rng.below(total)).collect();
    let mut tiles = Vec::new();
    let mut bufs = Vec::new();
    let mut first = 0;
    for &r in tile_rows {
        let mut t = vec![0.0; r * cols];
        for c in 0..cols {
            for i in 0..r {
                t[i + c * r] = rows[first + i][c];
            }
        }
        let b = to_device(dev, &t)?;
        tiles.push((b.ptr(), r));
        bufs.push(b);
        first += r;
    }
    for ipiv in [&ipiv1, &ipiv2] {
        for (i, &p) in ipiv.iter().enumerate() {
            rows.swap(i, p);
        }
        // SAFETY: each tile holds r × cols doubles, ld = r.
        unsafe { kernels::laswp(dev, &tiles, cols, ipiv)? };
    }
    let mut wrong = 0usize;
    let mut first = 0;
    for (b, &r) in bufs.iter().zip(tile_rows) {
        let got = to_host::<f64>(dev, &**b, r * cols)?;
        for c in 0..cols {
            for i in 0..r {
                if got[i + c * r] != rows[first + i][c] {
                    wrong += 1;
                }
            }
        }
        first += r;
    }
    // A bad ipiv must be refused before any device work.
    // SAFETY: rejected on the host; nothing is enqueued.
    let refused = unsafe { kernels::laswp(dev, &tiles, cols, &[0, total]) }.is_err();
    Ok(CheckLine {
        what: format!("laswp tiles {tile_rows:?} x {cols} cols"),
        max_rel_err: if wrong == 0 { 0.0 } else { 1.0 },
        passed: wrong == 0 && refused,
        detail: format!(
            "exact; {wrong} wrong entries; two calls of {} and {} swaps; bad ipiv refused: {refused}",
            ipiv1.len(),
            ipiv2.len()
        ),
    })
}

/// A random CSR block of `n_rows` × `n_cols` with up to `max_len` entries
/// per row (every 7th row empty), whose row_ptr starts at `base`.
fn check_spmv(
    dev: &CudaDevice,
    rng: &mut Rng,
    n_rows: usize,
    n_cols: usize,
    max_len: usize,
    base: u64,
) -> Result<CheckLine, String> {
    let mut row_ptr = vec![base];
    let mut col_idx: Vec<u32> = Vec::new();
    let mut vals = Vec::new();
    for r in 0..n_rows {
        let len = if r % 7 == 3 {
            0
        } else {
            rng.below(max_len + 1)
        };
        for _ in 0..len {
            col_idx.push(rng.below(n_cols) as u32);
            vals.push(rng.f64());
        }
        row_ptr.push(base + col_idx.len() as u64);
    }
    let x = rng.vec(n_cols);
    let y0 = rng.vec(n_rows);
    let mut want = y0.clone();
    for (r, w) in want.iter_mut().enumerate() {
        let (a, b) = (
            (row_ptr[r] - base) as usize,
            (row_ptr[r + 1] - base) as usize,
        );
        for k in a..b {
            *w += vals[k] * x[col_idx[k] as usize];
        }
    }
    let d_rp = to_device(dev, &row_ptr)?;
    let d_ci = to_device(dev, &col_idx)?;
    let d_v = to_device(dev, &vals)?;
    let d_x = to_device(dev, &x)?;
    let d_y = to_device(dev, &y0)?;
    // SAFETY: the buffers hold the CSR block, x (n_cols) and y (n_rows).
    unsafe {
        kernels::spmv_csr(
            dev,
            n_rows,
            d_rp.ptr(),
            d_ci.ptr(),
            d_v.ptr(),
            d_x.ptr(),
            d_y.ptr(),
        )?
    };
    let got = to_host::<f64>(dev, &*d_y, n_rows)?;
    Ok(line(
        format!("spmv_csr {n_rows}x{n_cols}, {} nnz", vals.len()),
        rel_err(&got, &want),
        1e-13,
        &format!("row_ptr starts at {base}; every 7th row empty"),
    ))
}

fn check_round_trip(dev: &CudaDevice, rng: &mut Rng, bytes: usize) -> Result<CheckLine, String> {
    let src: Vec<u8> = (0..bytes).map(|_| rng.next() as u8).collect();
    let buf = dev.alloc(bytes)?;
    dev.upload(&src, &*buf)?;
    let mut back = vec![0u8; bytes];
    dev.download(&*buf, &mut back)?;
    let wrong = src.iter().zip(&back).filter(|(a, b)| a != b).count();
    Ok(CheckLine {
        what: format!("upload/download {bytes} bytes"),
        max_rel_err: if wrong == 0 { 0.0 } else { 1.0 },
        passed: wrong == 0,
        detail: format!("exact; {wrong} wrong bytes"),
    })
}

/// `threads` round trips at once: the staging pool shared under contention.
fn check_concurrent(
    dev: &CudaDevice,
    rng: &mut Rng,
    threads: usize,
    bytes: usize,
) -> Result<CheckLine, String> {
    let seeds: Vec<u64> = (0..threads).map(|_| rng.next() | 1).collect();
    let results: Vec<Result<CheckLine, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = seeds
            .iter()
            .map(|&seed| s.spawn(move || check_round_trip(dev, &mut Rng(seed), bytes)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|p| Err(tessera_engine::fmt::panic_message(&*p)))
            })
            .collect()
    });
    let mut failed = Vec::new();
    for r in results {
        match r {
            Ok(l) if l.passed => {}
            Ok(l) => failed.push(l.detail),
            Err(e) => failed.push(e),
        }
    }
    Ok(CheckLine {
        what: format!("{threads} threads x upload/download {bytes} bytes"),
        max_rel_err: if failed.is_empty() { 0.0 } else { 1.0 },
        passed: failed.is_empty(),
        detail: if failed.is_empty() {
            "exact".into()
        } else {
            failed.join("; ")
        },
    })
}
