//! The checks and sizing of an LU run that the real, distributed and simulated runs
//! share: the sizes' check, the DAG's task count, the tile handle's bytes, the
//! buffers each memory check counts, the grid's rank count, the overhead-bound
//! warning, and the progress bar. It imports no runner: `cmd::lu`, [`super::run`],
//! [`super::dist`], `simulate` and `simulate_checks` depend on it and none on another.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tessera_linalg::lu::dist::{DistLu, Layout};

/// Check the sizes before allocating anything.
pub fn validate(n: usize, nb: usize) -> Result<(), String> {
    if n == 0 {
        return Err("--n must be at least 1".into());
    }
    if nb == 0 {
        return Err("--nb must be at least 1".into());
    }
    if nb > n {
        return Err(format!("--nb {nb} is larger than --n {n}; use nb <= n"));
    }
    Ok(())
}

/// Every big buffer of an LU run, for [`crate::budget::check`]: the tiled
/// matrix, each tile's handle (with its dependency state: about 2 KiB, see
/// `tests/tests/lu_memory.rs`), replicas on emulated devices (host memory, up to
/// each device's limit), the solve's vectors, and the runtime itself.
pub(crate) fn buffers(
    n: usize,
    nb: usize,
    sim_devices: &[Option<u64>],
) -> Vec<(&'static str, u64)> {
    let matrix = (n as u64).saturating_mul(n as u64).saturating_mul(8);
    let tiles = (n.div_ceil(nb) as u64).pow(2);
    let replicas = sim_devices
        .iter()
        .map(|limit| limit.map_or(matrix, |l| l.min(matrix)))
        .fold(0u64, u64::saturating_add);
    vec![
        ("the matrix", matrix),
        ("tile handles", tiles.saturating_mul(TILE_HANDLE_BYTES)),
        ("replicas on emulated devices", replicas),
        ("vectors", 4 * 8 * n as u64),
        ("the runtime", 64 << 20),
    ]
}

/// Rank `me`'s big buffers in a distributed LU dealt by `layout`, for
/// [`crate::budget::check`]: its tiles, the panels it factors and keeps (P > 1:
/// the diagonal ranks keep their panels' L), its copies of other ranks' tiles
/// (`DistLu::tile_copies`: with the column-first priorities a rank holds them
/// until near the end, so they are all allocated at set-up, see
/// `DistLu::copy_pool`), the messages in flight (two buffers of a tile column,
/// also reserved at set-up) and the solve's vectors.
pub(crate) fn rank_buffers(
    n: usize,
    nb: usize,
    layout: &Layout,
    me: usize,
) -> Vec<(&'static str, u64)> {
    let t = n.div_ceil(nb) as u64;
    let tile = (nb * nb * 8) as u64;
    let owned = (0..t)
        .flat_map(|j| (0..t).map(move |i| (i, j)))
        .filter(|&(i, j)| layout.owner(i as usize, j as usize) == me)
        .count() as u64;
    vec![
        ("this rank's tiles", owned.saturating_mul(tile)),
        (
            "copies of other ranks' tiles (allocated at set-up)",
            (DistLu::tile_copies(n, nb, layout.clone(), me) as u64).saturating_mul(tile),
        ),
        ("messages in flight (two panels)", 2 * t * tile),
        ("vectors", 6 * 8 * n as u64),
        ("the runtime", 64 << 20),
    ]
}

/// Why a distributed LU (real or simulated) refuses another front-end.
pub(crate) const DIST_FRONT_ONLY: &str =
    "a distributed LU runs the symbolic front-end only (--front symbolic)";

/// `--grid PxQ` must name as many ranks as the run has; `have` says how
/// many it has and where from (mpirun, or the platform file).
pub(crate) fn check_grid_ranks(
    p: usize,
    q: usize,
    ranks: usize,
    have: impl FnOnce() -> String,
) -> Result<(), String> {
    if p.saturating_mul(q) == ranks {
        return Ok(());
    }
    Err(format!(
        "--grid {p}x{q} needs {} ranks, but {}",
        p.saturating_mul(q),
        have()
    ))
}

/// Tile size below which a GEMM task (2·nb³ flops) costs about what the
/// runtime spends per task (~1 µs), so the run measures overhead, not LU.
const OVERHEAD_BOUND_NB: usize = 32;

/// Tasks of the LU DAG for `T = ⌈n/nb⌉` tiles per side, in closed form:
/// `T` panels, `T(T−1)/2` swaps and as many trsms (right of each panel:
/// HPL's layout has no left swaps), `Σ(T−k−1)²` gemms; `u128::MAX` past
/// its range (`--n` near `u64::MAX`).
pub(crate) fn task_count(n: usize, nb: usize) -> u128 {
    let t = n.div_ceil(nb.max(1)) as u128;
    if t == 0 {
        return 0;
    }
    let gemms = (t - 1)
        .checked_mul(t)
        .and_then(|x| x.checked_mul(2 * t - 1))
        .map(|x| x / 6);
    gemms
        .and_then(|g| t.checked_mul(t - 1)?.checked_add(g)?.checked_add(t))
        .unwrap_or(u128::MAX)
}

/// Warn when tiles of `nb` are so small that the run measures (or, when
/// simulated, models) the runtime's per-task overhead rather than LU.
pub(crate) fn warn_if_overhead_bound(n: usize, nb: usize) {
    if nb < OVERHEAD_BOUND_NB && n > nb {
        let tasks = task_count(n, nb);
        crate::say!(
            "tessera: warning: --nb {nb} makes {tasks} tasks of at most {} flops each: the run measures the runtime's per-task overhead, not LU (use --nb {OVERHEAD_BOUND_NB} or more)",
            2 * nb.pow(3)
        );
    }
}

/// Bytes of one tile's handle with its dependency state (measured in
/// `tests/tests/lu_memory.rs`): the real and the simulated runs' memory
/// checks count tiles with it.
pub(crate) const TILE_HANDLE_BYTES: u64 = 2048;

/// A progress bar on stderr that appears only once the run has lasted a
/// second, fed by the flops finished so far; returns when `finished` is set.
/// (indicatif draws it only on a terminal.)
pub(crate) fn progress_bar(total: f64, done: impl Fn() -> u64, finished: &AtomicBool) {
    let start = Instant::now();
    let mut bar: Option<ProgressBar> = None;
    while !finished.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
        if bar.is_none() && start.elapsed() > Duration::from_secs(1) {
            let b = ProgressBar::with_draw_target(Some(100), ProgressDrawTarget::stderr());
            b.set_style(
                ProgressStyle::with_template("LU {bar:40} {percent:>3}% {elapsed} (eta {eta})")
                    .expect("valid template"),
            );
            bar = Some(b);
        }
        if let Some(b) = &bar {
            let pct = (done() as f64 / total * 100.0).min(100.0);
            b.set_position(pct as u64);
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    //! Proves the closed-form task count equals the unrolled symbolic DAG's.
    use super::*;

    #[test]
    fn task_count_matches_the_symbolic_dag() {
        for (n, nb) in [(1, 1), (5, 2), (8, 1), (17, 4), (64, 16)] {
            let unrolled = tessera_linalg::lu::symbolic_task_count(n, nb).unwrap() as u128;
            assert_eq!(task_count(n, nb), unrolled, "n={n} nb={nb}");
        }
    }
}
