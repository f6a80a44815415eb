//! `tessera cholesky`: a tiled Cholesky factorisation (A = L·Lᵀ, lower) as
//! a user writes one: four codelets over NB×NB tiles, submitted in the
//! order of the sequential right-looking algorithm through `dist::Submit`,
//! so the same code runs in one process (`Runtime`) and as one rank of
//! several under mpirun (`DistRuntime`: tiles dealt 2D block-cyclic over a
//! P×Q grid of ranks, each task run by the owner of the tile it writes,
//! the tiles it reads carried by remote edges).
//!
//! Its peer in the same run: faer's Cholesky of the whole matrix
//! (`cholesky_in_place`, the dense kernel library the tiles use) on as many
//! threads as the run has workers, on rank 0. Every rank checks the tiles
//! it owns against faer's factor computed on one thread before the clock.

use std::path::PathBuf;
use std::time::Instant;

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt::factor::{cholesky_in_place, cholesky_in_place_scratch};
use faer::linalg::matmul::matmul;
use faer::linalg::matmul::triangular::{self, BlockStructure};
use faer::linalg::triangular_solve::solve_lower_triangular_in_place;
use faer::{Accum, Mat, MatMut, MatRef, Par};

use tessera_engine::dist::stf::{DistHandle, DistRuntime};
use tessera_engine::dist::Submit;
use tessera_engine::{Codelet, Read, ReadWrite, Runtime, Scheduler};

use crate::ranks::Ranks;

/// Options of `tessera cholesky`.
#[derive(clap::Args, Debug)]
pub struct CholeskyArgs {
    #[command(flatten)]
    pub placement: crate::placement::PlacementArgs,
    /// Scheduler: ws, prio or dmda.
    #[arg(long, default_value = "prio")]
    pub sched: String,
    /// Matrix order (a multiple of --nb).
    #[arg(long, default_value_t = 2048)]
    pub n: usize,
    /// Tile order.
    #[arg(long, default_value_t = 256)]
    pub nb: usize,
    /// Timed factorisations (each of a fresh matrix); the best is reported.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Skip faer's whole-matrix factorisation (the peer) on rank 0.
    #[arg(long)]
    pub no_peer: bool,
    /// For tests: the matrix's diagonal shift (default N, which makes it
    /// positive definite).
    #[arg(long, hide = true, allow_negative_numbers = true)]
    pub diagonal: Option<f64>,
    /// Record a trace of the run (every round) and write it here (under
    /// mpirun one file per rank, `NAME.rankR.json`).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
}

/// A tile, column-major, NB×NB.
type Tile = Vec<f64>;

/// Entry (i, j) of the matrix, `d` on top of the diagonal: symmetric, and
/// positive definite when diagonally dominant (`d` = N, the default).
fn entry(d: f64, i: usize, j: usize) -> f64 {
    1.0 / (1.0 + i.abs_diff(j) as f64) + if i == j { d } else { 0.0 }
}

/// Tile (ti, tj) of the matrix, column-major.
fn make_tile(d: f64, nb: usize, ti: usize, tj: usize) -> Tile {
    let mut t = Vec::with_capacity(nb * nb);
    for c in 0..nb {
        for r in 0..nb {
            t.push(entry(d, ti * nb + r, tj * nb + c));
        }
    }
    t
}

fn view(t: &[f64], nb: usize) -> MatRef<'_, f64> {
    MatRef::from_column_major_slice(t, nb, nb)
}

fn view_mut(t: &mut [f64], nb: usize) -> MatMut<'_, f64> {
    MatMut::from_column_major_slice_mut(t, nb, nb)
}

/// The rank grid P×Q (P ≤ Q, as square as `size` allows) and the owner of
/// tile (i, j): 2D block-cyclic, as ScaLAPACK deals tiles.
#[derive(Clone, Copy)]
struct Grid {
    p: usize,
    q: usize,
}

impl Grid {
    fn new(size: usize) -> Grid {
        let p = (1..=size)
            .filter(|&p| size.is_multiple_of(p) && p * p <= size)
            .max()
            .unwrap_or(1);
        Grid { p, q: size / p }
    }

    fn owner(&self, i: usize, j: usize) -> usize {
        (i % self.p) * self.q + j % self.q
    }
}

/// The data of an update: the tiles it reads, then the one it writes.
type Update = (Read<Tile>, Read<Tile>, ReadWrite<Tile>);

/// The four codelets (their names are the trace's and the perf models').
/// Their argument is the step k.
struct Codelets {
    potrf: Codelet<ReadWrite<Tile>, usize>,
    trsm: Codelet<(Read<Tile>, ReadWrite<Tile>), usize>,
    syrk: Codelet<(Read<Tile>, ReadWrite<Tile>), usize>,
    gemm: Codelet<Update, usize>,
}

fn codelets(nb: usize) -> Codelets {
    let f = nb as f64;
    Codelets {
        // The diagonal tile's own factor; its argument is k, for the error.
        potrf: Codelet::with_args("chol-potrf")
            .flops(move |_| f * f * f / 3.0)
            .cpu(move |_, &k, a: &mut Tile| {
                let mut stack = MemBuffer::new(cholesky_in_place_scratch::<f64>(
                    nb,
                    Par::Seq,
                    Default::default(),
                ));
                cholesky_in_place(
                    view_mut(a, nb),
                    Default::default(),
                    Par::Seq,
                    MemStack::new(&mut stack),
                    Default::default(),
                )
                .map(|_| ())
                .map_err(|e| {
                    format!("diagonal tile ({k}, {k}) is not positive definite ({e})").into()
                })
            }),
        // b := b·l⁻ᵀ (b below the diagonal): l·bᵀ = bᵀ solved in place.
        trsm: Codelet::with_args("chol-trsm")
            .flops(move |_| f * f * f)
            .cpu(move |_, _, (l, b): (&Tile, &mut Tile)| {
                solve_lower_triangular_in_place(
                    view(l, nb),
                    view_mut(b, nb).transpose_mut(),
                    Par::Seq,
                );
                Ok(())
            }),
        // c := c − a·aᵀ on the diagonal, its lower half only (the upper
        // half is never read).
        syrk: Codelet::with_args("chol-syrk")
            .flops(move |_| f * f * f)
            .cpu(move |_, _, (a, c): (&Tile, &mut Tile)| {
                let a = view(a, nb);
                triangular::matmul(
                    view_mut(c, nb),
                    BlockStructure::TriangularLower,
                    Accum::Add,
                    a,
                    BlockStructure::Rectangular,
                    a.transpose(),
                    BlockStructure::Rectangular,
                    -1.0,
                    Par::Seq,
                );
                Ok(())
            }),
        // c := c − a·bᵀ below the diagonal.
        gemm: Codelet::with_args("chol-gemm")
            .flops(move |_| 2.0 * f * f * f)
            .cpu(move |_, _, (a, b, c): (&Tile, &Tile, &mut Tile)| {
                matmul(
                    view_mut(c, nb),
                    Accum::Add,
                    view(a, nb),
                    view(b, nb).transpose(),
                    -1.0,
                    Par::Seq,
                );
                Ok(())
            }),
    }
}

/// The lower tiles, `tiles[i][j]` for j ≤ i, each made on its owner.
/// Another rank makes its copy of a tile when the tile first arrives there,
/// to be overwritten at once: a zeroed one, not the matrix's entries.
fn register<S: Submit>(
    s: &S,
    grid: Grid,
    n: usize,
    nb: usize,
    d: f64,
) -> Vec<Vec<DistHandle<Tile>>> {
    let (nt, me) = (n / nb, s.rank());
    (0..nt)
        .map(|i| {
            (0..=i)
                .map(|j| {
                    let owner = grid.owner(i, j);
                    s.register_with(owner, move || match owner == me {
                        true => make_tile(d, nb, i, j),
                        false => vec![0.0; nb * nb],
                    })
                })
                .collect()
        })
        .collect()
}

/// Submit the factorisation (every rank submits every task; each runs on
/// the owner of the tile it writes).
fn submit<S: Submit>(
    s: &S,
    c: &Codelets,
    a: &[Vec<DistHandle<Tile>>],
) -> Result<(), tessera_engine::Error> {
    let nt = a.len();
    for k in 0..nt {
        s.task(&c.potrf, a[k][k].rw())
            .args(k)
            .priority(3)
            .submit()?;
        for i in k + 1..nt {
            s.task(&c.trsm, (a[k][k].r(), a[i][k].rw()))
                .args(k)
                .priority(2)
                .submit()?;
        }
        for i in k + 1..nt {
            s.task(&c.syrk, (a[i][k].r(), a[i][i].rw()))
                .args(k)
                .priority(if i == k + 1 { 2 } else { 1 })
                .submit()?;
            for j in k + 1..i {
                s.task(&c.gemm, (a[i][k].r(), a[j][k].r(), a[i][j].rw()))
                    .args(k)
                    .priority(if j == k + 1 { 1 } else { 0 })
                    .submit()?;
            }
        }
    }
    Ok(())
}

/// faer's factor of the whole matrix on `threads` threads, and its seconds.
fn whole(n: usize, d: f64, threads: usize) -> Result<(Mat<f64>, f64), String> {
    let mut m = Mat::from_fn(n, n, |i, j| entry(d, i, j));
    let par = if threads > 1 {
        Par::rayon(threads)
    } else {
        Par::Seq
    };
    let mut stack = MemBuffer::new(cholesky_in_place_scratch::<f64>(n, par, Default::default()));
    let t0 = Instant::now();
    cholesky_in_place(
        m.as_mut(),
        Default::default(),
        par,
        MemStack::new(&mut stack),
        Default::default(),
    )
    .map_err(|e| format!("faer's Cholesky of the whole matrix failed: {e:?}"))?;
    Ok((m, t0.elapsed().as_secs_f64()))
}

/// Largest |L − L_ref| over the lower part of the tiles this rank owns,
/// relative to the largest |L_ref|; infinite where an entry is not a
/// number (`f64::max` would skip it).
fn difference(tiles: &[Vec<Option<Tile>>], reference: &Mat<f64>, nb: usize) -> f64 {
    let scale = (0..reference.ncols())
        .map(|j| reference[(j, j)].abs())
        .fold(0.0, f64::max);
    let mut worst = 0.0f64;
    for (i, row) in tiles.iter().enumerate() {
        for (j, t) in row.iter().enumerate() {
            let Some(t) = t else { continue };
            for c in 0..nb {
                for r in 0..nb {
                    let (gi, gj) = (i * nb + r, j * nb + c);
                    if gi >= gj {
                        let e = (t[c * nb + r] - reference[(gi, gj)]).abs();
                        worst = worst.max(if e.is_nan() { f64::INFINITY } else { e });
                    }
                }
            }
        }
    }
    worst / scale
}

/// Each round: register a fresh matrix (diagonal shift `d`), then time its factorisation from
/// the first submission to the end of `wait_all` (after `barrier`, on every
/// rank), and compare the tiles this rank owns with `reference` (none when
/// faer refused the matrix). Returns (seconds, difference) per round.
fn rounds<S: Submit>(
    s: &S,
    c: &Codelets,
    args: &CholeskyArgs,
    grid: Grid,
    d: f64,
    reference: Option<&Mat<f64>>,
    barrier: impl Fn() -> Result<(), String>,
) -> Result<Vec<(f64, f64)>, String> {
    let (n, nb) = (args.n, args.nb);
    let mut out = Vec::with_capacity(args.rounds);
    for _ in 0..args.rounds {
        let a = register(s, grid, n, nb, d);
        barrier()?;
        let t0 = Instant::now();
        let submitted = submit(s, c, &a);
        // Wait even after a failed submission: every rank must reach wait_all.
        let waited = s.wait_all();
        let secs = t0.elapsed().as_secs_f64();
        submitted.map_err(|e| e.to_string())?;
        waited.map_err(|e| e.to_string())?;
        let mut mine: Vec<Vec<Option<Tile>>> = Vec::with_capacity(a.len());
        for (i, row) in a.into_iter().enumerate() {
            let mut kept = Vec::with_capacity(row.len());
            for (j, h) in row.into_iter().enumerate() {
                let value = s.unregister(h).map_err(|e| e.to_string())?;
                kept.push((grid.owner(i, j) == s.rank()).then_some(value));
            }
            mine.push(kept);
        }
        out.push((secs, reference.map_or(0.0, |r| difference(&mine, r, nb))));
    }
    Ok(out)
}

pub fn run(args: CholeskyArgs) -> Result<(), String> {
    if args.nb == 0 || args.n == 0 || !args.n.is_multiple_of(args.nb) {
        return Err(format!(
            "--n {} is not a positive multiple of --nb {}",
            args.n, args.nb
        ));
    }
    if args.rounds == 0 {
        return Err("--rounds must be at least 1".into());
    }
    let ranks = Ranks::join()?;
    match run_ranks(&args, &ranks) {
        Ok(()) => Ok(()),
        Err(e) if ranks.size > 1 => ranks.fail(&e),
        Err(e) => Err(e),
    }
}

fn run_ranks(args: &CholeskyArgs, ranks: &Ranks) -> Result<(), String> {
    ranks.check_same(
        "--n --nb --rounds",
        &format!("{} {} {}", args.n, args.nb, args.rounds),
    )?;
    let sched: Scheduler = args
        .sched
        .parse()
        .map_err(|e: String| format!("--sched: {e}"))?;
    let config =
        crate::placement::runtime_config_ranks(&args.placement, &args.sched, sched, ranks)?
            .trace(args.trace.is_some());
    let rt = Runtime::new(config).map_err(|e| e.to_string())?;
    let workers = rt.workers();
    let (n, nb) = (args.n, args.nb);
    let grid = Grid::new(ranks.size);
    let flops = (n as f64).powi(3) / 3.0;
    let d = args.diagonal.unwrap_or(n as f64);
    // The reference factor (one thread, before any clock). When faer
    // refuses the matrix, the tiled run must fail too (on the task that
    // meets the first non-positive pivot, naming its tile).
    let reference = whole(n, d, 1).map(|(m, _)| m);
    let peer = match (ranks.is_root(), args.no_peer, &reference) {
        (true, false, Ok(_)) => {
            let threads = workers * ranks.size;
            let (_, secs) = whole(n, d, threads)?;
            Some((threads, secs))
        }
        _ => None,
    };
    let refused = reference.as_ref().err().cloned();
    let reference = reference.ok();
    let c = codelets(nb);
    let rounds = match &ranks.net {
        None => {
            let r = rounds(&rt, &c, args, grid, d, reference.as_ref(), || Ok(()))?;
            crate::wrap_up(&rt, args.trace.as_deref(), &args.placement)?;
            r
        }
        Some((net, coll)) => {
            let dist = DistRuntime::new(rt, std::sync::Arc::clone(net));
            let r = rounds(&dist, &c, args, grid, d, reference.as_ref(), || {
                coll.barrier()
            })?;
            // The slowest rank's time is the round's; the worst difference is the run's.
            let mut out = Vec::with_capacity(r.len());
            for (secs, diff) in r {
                out.push((
                    f64::from_bits(coll.allreduce_max(secs.to_bits())?),
                    f64::from_bits(coll.allreduce_max(diff.to_bits())?),
                ));
            }
            if let Some(path) = &args.trace {
                let mine = crate::ranks::rank_trace_path(path, ranks.rank);
                crate::save_rank_trace(dist.runtime(), &mine, &ranks.run_id)?;
            }
            out
        }
    };
    if let Some(e) = refused {
        return Err(format!("{e}, yet the tiled factorisation finished"));
    }
    let diff = rounds.iter().map(|r| r.1).fold(0.0, f64::max);
    if ranks.is_root() {
        let nt = n / nb;
        println!(
            "cholesky N={n} nb={nb} ({nt}x{nt} tiles, {} tasks): {} rank(s) on a {}x{} grid x {workers} worker(s)",
            nt * (nt + 1) * (nt + 2) / 6,
            ranks.size,
            grid.p,
            grid.q
        );
        for (r, (secs, _)) in rounds.iter().enumerate() {
            println!(
                "  round {}: {:.4} s  {:.2} GFLOP/s",
                r + 1,
                secs,
                flops / secs / 1e9
            );
        }
        let best = rounds.iter().map(|r| r.0).fold(f64::INFINITY, f64::min);
        print!("best {:.4} s  {:.2} GFLOP/s", best, flops / best / 1e9);
        match peer {
            Some((threads, secs)) => println!(
                " = {:.2}x faer's Cholesky of the whole matrix on {threads} thread(s) in this run ({:.4} s, {:.2} GFLOP/s)",
                secs / best,
                secs,
                flops / secs / 1e9
            ),
            None => println!(),
        }
        let tol = 1e-12;
        println!(
            "check: largest |L - L_faer| / max |L_faer| over every tile of every round {diff:.1e} (tolerance {tol:.0e}) {}",
            if diff <= tol { "PASSED" } else { "FAILED" }
        );
        if diff > tol {
            return Err(format!("the factor differs from faer's by {diff:.1e}"));
        }
    } else if diff > 1e-12 {
        return Err(format!("the factor differs from faer's by {diff:.1e}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Grid;

    fn cli(args: &[&str]) -> u8 {
        let mut all = vec!["tessera", "cholesky", "--no-bind"];
        all.extend_from_slice(args);
        crate::cli::main(all)
    }

    /// Every tile of every round equals faer's factor (the command fails
    /// otherwise), with one and two workers and tiles that do not divide
    /// the cores evenly.
    #[test]
    fn the_tiled_factor_is_faers() {
        for workers in ["1", "2"] {
            for (n, nb) in [("192", "32"), ("96", "96"), ("200", "8")] {
                let args = ["--workers", workers, "--n", n, "--nb", nb, "--rounds", "2"];
                assert_eq!(cli(&args), 0, "{args:?}");
            }
        }
    }

    /// A matrix that is not positive definite fails the run (the task that
    /// meets the pivot names its tile), and bad sizes are refused.
    #[test]
    fn bad_input_fails_clearly() {
        assert_ne!(cli(&["--n", "128", "--nb", "32", "--diagonal", "-200"]), 0);
        assert_ne!(cli(&["--n", "100", "--nb", "32"]), 0);
        assert_ne!(cli(&["--n", "128", "--nb", "0"]), 0);
        assert_ne!(cli(&["--n", "128", "--nb", "32", "--rounds", "0"]), 0);
    }

    /// The check sees a wrong entry, and one that is not a number.
    #[test]
    fn the_check_sees_wrong_and_nan_entries() {
        let nb = 2;
        let reference = faer::Mat::from_fn(4, 4, |i, j| if i >= j { 1.0 + i as f64 } else { 0.0 });
        let tile = |i: usize, j: usize| -> Vec<f64> {
            (0..nb * nb)
                .map(|x| reference[(i * nb + x % nb, j * nb + x / nb)])
                .collect()
        };
        let mut tiles = vec![
            vec![Some(tile(0, 0))],
            vec![Some(tile(1, 0)), Some(tile(1, 1))],
        ];
        assert_eq!(super::difference(&tiles, &reference, nb), 0.0);
        tiles[1][0].as_mut().unwrap()[3] += 0.5;
        assert_eq!(super::difference(&tiles, &reference, nb), 0.5 / 4.0);
        tiles[1][0].as_mut().unwrap()[3] = f64::NAN;
        assert_eq!(super::difference(&tiles, &reference, nb), f64::INFINITY);
        // The upper part of a diagonal tile is never read.
        tiles[1][0] = Some(tile(1, 0));
        tiles[0][0].as_mut().unwrap()[2] = f64::NAN;
        assert_eq!(super::difference(&tiles, &reference, nb), 0.0);
    }

    /// The rank grid is as square as the count allows, and deals every
    /// rank some tile.
    #[test]
    fn grids_are_square_and_cover_every_rank() {
        for (size, p, q) in [
            (1, 1, 1),
            (2, 1, 2),
            (3, 1, 3),
            (4, 2, 2),
            (6, 2, 3),
            (8, 2, 4),
            (9, 3, 3),
        ] {
            let g = Grid::new(size);
            assert_eq!((g.p, g.q), (p, q), "{size} ranks");
            let mut seen = vec![false; size];
            for i in 0..p {
                for j in 0..q {
                    seen[g.owner(i, j)] = true;
                }
            }
            assert!(seen.iter().all(|&s| s), "{size} ranks");
        }
    }
}
