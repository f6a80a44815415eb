//! The resident LU on an NVIDIA GPU: the plan, checked for races first,
//! issued operation by operation on the device's streams
//! (`tessera_backends::cuda::resident`), then one wait at the end. Every
//! working operation is bracketed by timing events, so the run reports
//! where the device's time went.

use tessera_backends::cuda::resident::{HostRegistration, ResidentLu};
use tessera_backends::cuda::CudaDevice;

use super::plan::{Op, Plan};
use super::{OpTime, Ran};
use crate::tiled::TileMatrix;

/// The host blocks of `a`'s tiles, for page-locking.
pub(super) fn register<'d>(
    dev: &'d CudaDevice,
    a: &mut TileMatrix,
) -> Result<HostRegistration<'d>, String> {
    let (mt, nt) = (a.mt(), a.nt());
    let mut blocks = Vec::with_capacity(mt * nt);
    for j in 0..nt {
        for i in 0..mt {
            let s = a.tile_mut(i, j).as_mut_slice();
            blocks.push((s.as_mut_ptr() as *mut u8, std::mem::size_of_val(s)));
        }
    }
    HostRegistration::new(dev, &blocks)
}

/// Sets the device up for `plan` over `a` (untimed: HPL allocates its
/// buffers before its clock starts): the matrix allocation, streams,
/// handles, kernels, events, and one warm-up call of every operation.
pub(super) fn prepare<'d>(
    dev: &'d CudaDevice,
    a: &TileMatrix,
    plan: &Plan,
) -> Result<ResidentLu<'d>, String> {
    let work = plan.ops.iter().filter(|(_, op)| op.is_work()).count();
    ResidentLu::new(dev, a.n_rows(), a.nb(), a.mt(), plan.events, work)
}

/// Runs `plan` (proved race-free by the caller) on `lu` over `a` (the
/// factors on return), then solves `A·x = b` on the device. Returns the
/// global pivots, `x` and each working operation's device times.
pub(super) fn run(
    lu: &ResidentLu<'_>,
    a: &mut TileMatrix,
    plan: &Plan,
    b: &[f64],
) -> Result<Ran, String> {
    let (n, nb, t) = (a.n_rows(), a.nb(), a.mt());
    let work: Vec<usize> = (0..plan.ops.len())
        .filter(|&i| plan.ops[i].1.is_work())
        .collect();
    let width = |j: usize| (n - j * nb).min(nb);
    let first = |j: usize| j * nb;
    // Columns of the blocks `cols`.
    let span = |cols: &std::ops::Range<usize>| (first(cols.start), (cols.end * nb).min(n));
    let mut slot = 0;
    for (s, op) in &plan.ops {
        let s = *s as usize;
        let timed = op.is_work();
        if timed {
            lu.mark(s, slot, false)?;
        }
        let issued = match op {
            Op::Upload(j) => (0..t).try_for_each(|i| {
                let tile = a.tile(i, *j);
                // SAFETY: `a` outlives `lu` (declared before it) and the host
                // touches no tile until `finish` has returned.
                unsafe {
                    lu.upload(
                        s,
                        tile.as_slice(),
                        tile.rows(),
                        tile.cols(),
                        first(i),
                        first(*j),
                    )
                }
            }),
            Op::Download(j) => (0..t).try_for_each(|i| {
                let tile = a.tile_mut(i, *j);
                let (rows, cols) = (tile.rows(), tile.cols());
                // SAFETY: as for the uploads; the slice's storage stays put
                // (a tile never reallocates).
                unsafe { lu.download(s, tile.as_mut_slice(), rows, cols, first(i), first(*j)) }
            }),
            Op::Panel(k) => lu.panel(s, *k, first(*k), width(*k)),
            Op::Swap { k, cols } => {
                let (c0, c1) = span(cols);
                lu.swap(s, *k, first(*k), width(*k), c0, c1)
            }
            Op::Trsm { k, cols } => {
                let (c0, c1) = span(cols);
                lu.trsm(s, first(*k), width(*k), c0, c1)
            }
            Op::Gemm { k, cols } => {
                let (c0, c1) = span(cols);
                lu.gemm(s, first(*k), width(*k), c0, c1)
            }
            Op::Record(e) => lu.record(s, *e),
            Op::Wait(e) => lu.wait(s, *e),
        };
        if let Err(e) = issued {
            // Drain what was issued: its copies still use the host tiles.
            let _ = lu.finish();
            return Err(format!("{op}: {e}"));
        }
        if timed {
            lu.mark(s, slot, true)?;
            slot += 1;
        }
    }
    let done = lu.finish()?;
    if let Some((k, &info)) = done.info.iter().enumerate().find(|(_, &i)| i != 0) {
        return Err(if info > 0 {
            format!(
                "matrix is singular: exact zero pivot in column {}",
                first(k) + info as usize - 1
            )
        } else {
            format!("panel {k}: cusolverDnDgetrf: argument {} is wrong", -info)
        });
    }
    let mut ipiv = Vec::with_capacity(n);
    for k in 0..t {
        for i in first(k)..first(k) + width(k) {
            let p = done.ipiv[i];
            if p < 1 || first(k) + p as usize > n {
                return Err(format!(
                    "panel {k}: pivot {p} of row {i} is outside the matrix"
                ));
            }
            ipiv.push(first(k) + p as usize - 1);
        }
    }
    let t0 = std::time::Instant::now();
    let x = lu.solve(b)?;
    let solve = t0.elapsed().as_secs_f64();
    let times = work
        .iter()
        .zip(&done.times)
        .map(|(&i, &(start, end))| OpTime {
            stream: plan.ops[i].0,
            op: plan.ops[i].1.clone(),
            start,
            end,
        })
        .collect();
    Ok(Ran {
        ipiv,
        x,
        times,
        solve,
    })
}
