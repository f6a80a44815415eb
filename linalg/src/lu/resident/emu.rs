//! The resident LU on an emulated device: the plan runs in an interleaving
//! of its streams chosen by a seed (adversarial to a missing event), on a
//! copy of the matrix that stands for device memory. Copies go through the
//! device's link (`Device::copy`, which takes the modelled time); the
//! computations are the CPU LU's own tile kernels in the same order per
//! tile, so the factors are bit-identical to `lu_tiled_seq`'s.

use std::time::Instant;

use tessera_engine::device::Device;

use super::super::seq::{gemm, ipiv_global, panel, swap, trsm};
use super::super::solve_from_factors;
use super::check::execute;
use super::plan::{Op, Plan};
use super::{OpTime, Ran};
use crate::tiled::TileMatrix;

/// Runs `plan` on `dev` over `host` (the matrix; the factors on return),
/// then solves `A·x = b` from the device's copy of the factors. Returns
/// the global pivots, `x` and each working operation's times.
pub(super) fn run(
    dev: &dyn Device,
    host: &mut TileMatrix,
    plan: &Plan,
    seed: Option<u64>,
    b: &[f64],
) -> Result<Ran, String> {
    let (n, nb, t) = (host.n_rows(), host.nb(), host.mt());
    let mut mem = TileMatrix::zeros(n, n, nb);
    let mut piv: Vec<Vec<usize>> = vec![Vec::new(); t];
    let mut times = Vec::new();
    let start = Instant::now();
    execute(plan, seed, |s, op| {
        let t0 = start.elapsed().as_secs_f64();
        match op {
            Op::Upload(j) => {
                for i in 0..t {
                    let src = host.tile(i, *j).as_slice();
                    let dst = mem.tile_mut(i, *j).as_mut_slice();
                    dev.copy((src.len() * 8) as u64, &mut || dst.copy_from_slice(src));
                }
            }
            Op::Download(j) => {
                for i in 0..t {
                    let src = mem.tile(i, *j).as_slice();
                    let dst = host.tile_mut(i, *j).as_mut_slice();
                    dev.copy((src.len() * 8) as u64, &mut || dst.copy_from_slice(src));
                }
            }
            Op::Panel(k) => piv[*k] = panel(&mut mem, *k).map_err(|e| e.to_string())?,
            Op::Swap { k, cols } => {
                for j in cols.clone() {
                    swap(&mut mem, *k, j, &piv[*k]);
                }
            }
            Op::Trsm { k, cols } => {
                for j in cols.clone() {
                    trsm(&mut mem, *k, j);
                }
            }
            Op::Gemm { k, cols } => {
                for j in cols.clone() {
                    for i in k + 1..t {
                        gemm(&mut mem, *k, i, j);
                    }
                }
            }
            Op::Record(_) | Op::Wait(_) => {}
        }
        times.push(OpTime {
            stream: s,
            op: op.clone(),
            start: t0,
            end: start.elapsed().as_secs_f64(),
        });
        Ok(())
    })?;
    let ipiv = piv
        .iter()
        .enumerate()
        .flat_map(|(k, p)| ipiv_global(k, nb, p).collect::<Vec<_>>())
        .collect::<Vec<usize>>();
    let t0 = Instant::now();
    let x = solve_from_factors(&mem, &ipiv, b);
    Ok(Ran {
        ipiv,
        x,
        times,
        solve: t0.elapsed().as_secs_f64(),
    })
}
