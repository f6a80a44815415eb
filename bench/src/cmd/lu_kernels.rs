//! `tessera lu-kernels`: the LU's CPU tile kernels alone, as the LU runs them
//! (cold tiles, one per core, both cores busy), to choose `nb`, the GEMM row
//! blocks and the panel kernel from measurements. A showcase and tuning aid,
//! not a regression check: `bench/peers/lu_kernels.sh` runs it alternated
//! with OpenBLAS `dgetrf` on the same panel and prints same-run ratios.
//!
//! Measured here (2 cores, AVX-512, 2 MiB L2 per core), while other sessions
//! compiled on the same 2 cores (load averages 3–6, stated per row): compare
//! figures within a row only.
//!
//! GEMM per tile, 2 threads, cold tiles, GFLOP/s (`--what gemm --nb
//! 256,320,384,448,512 --rows whole,auto --rounds 3`, run twice, load 3.1–3.3):
//!
//! | nb  | one call (whole) | row blocks (auto)   |
//! |-----|------------------|---------------------|
//! | 256 | 65.8, 63.9       | 67.5, 67.4 (256)    |
//! | 320 | 73.6, 70.7       | 73.1, 73.5 (320)    |
//! | 384 | 68.3, 74.6       | 72.3, 77.9 (192)    |
//! | 448 | 66.8, 58.0       | 58.4, 75.4 (224)    |
//! | 512 | 63.7, 58.0       | 65.0, 70.2 (256)    |
//!
//! At nb=448 alone (`--nb 448 --rows whole,224,160,112` twice, load 3.5):
//! whole 59.8 / 64.8, 224 rows 76.5 / 76.5, 160 rows 78.2 / 71.9, 112 rows
//! 79.6 / 66.9: blocks of 112–224 rows all clear the cliff; the kernel takes
//! the largest that fits half the L2 (224 here).
//!
//! Panel `8192 × 448`, GFLOP/s (`--what panel --nb 448 --rounds 1`, three
//! runs, core 1 idle, load 4.6–5): tessera 45.9 / 39.8 / 41.0, faer's
//! `lu_in_place` 21.2 / 28.8 / 21.7. Leaf width (same runs with the leaf as a
//! parameter, before the panel worked in place): 8 → 33.4–34.6, 12 → 33.7–34.0,
//! 16 → 28.9–32.9, 24 → 21.6–32.6. Against OpenBLAS `dgetrf` on a panel of
//! the same shape (`bash bench/peers/lu_kernels.sh 8192 448 3`, load 6.2–6.4,
//! medians): tessera 32.8, OpenBLAS 1 thread 32.4 (1.01×), 2 threads 24.9
//! (1.32×), faer 17.4 (tessera 1.88×); with core 1 running GEMMs, tessera 16.2.
//!
//! The team panel (`--what panel --nb 448 --team 1,2 --companion none`, three
//! runs, load 4.4–5.0 from other sessions' builds), GFLOP/s: single-core
//! 18.6 / 17.1 / 18.6, team of 1 23.7 / 21.5 / 18.7, team of 2 14.1 / 12.0 /
//! 12.5. With both cores shared, each of the panel's 638 synchronisations
//! waits for a member the OS has descheduled. Instruction counts (callgrind,
//! one factorisation of the same panel): a team of 2 gives its members 51.5 %
//! and 50.0 % of the single-core kernel's count; a team of 1 (N=4096) 101.4 %.

use std::sync::{Barrier, OnceLock};
use std::time::Instant;

use tessera_backends::cpu::{bind_current_thread, current_thread_cpus};
use tessera_engine::team::run_threads;
use tessera_engine::worker_cap;
use tessera_linalg::hpl::generate_tile;
use tessera_tasks::kernels::{
    gemm_flops, gemm_minus_blocked, gemm_row_block, getrf_panel, getrf_panel_faer,
    getrf_panel_flops, laswp, trsm_flops, trsm_unit_lower, TeamPanel,
};
use tessera_tasks::tile::Tile;

/// The CPUs this process may use (its mask, say `taskset -c 1`), read once,
/// by `run` before any thread binds itself: read later, a thread spawned by
/// the main thread after `panel_rate` bound it to one core would inherit
/// that one core as its whole mask.
static PROCESS_CPUS: OnceLock<Vec<usize>> = OnceLock::new();

/// The CPU for measuring thread `t`: the `t`-th this process may use, not
/// CPU `t` of the machine, so two processes with masks of their own each
/// measure on their own core.
fn cpu(t: usize) -> usize {
    let cpus = PROCESS_CPUS.get_or_init(|| current_thread_cpus().unwrap_or_default());
    if cpus.is_empty() {
        t
    } else {
        cpus[t % cpus.len()]
    }
}

/// Options of `tessera lu-kernels`.
#[derive(clap::Args, Debug)]
pub struct LuKernelsArgs {
    /// Tile sizes to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "256,384,448,512")]
    pub nb: Vec<usize>,
    /// GEMM row blocks per call: `auto` (the kernel's choice), `whole` (one
    /// call per tile) or a row count; comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "whole,auto")]
    pub rows: Vec<String>,
    /// Consecutive GEMM calls that share their `B` tile, as the updates of
    /// one tile column do (1: every call has its own tiles); comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    pub share_b: Vec<usize>,
    /// Threads running GEMMs at once, each bound to its own core.
    #[arg(long, default_value_t = 2)]
    pub threads: usize,
    /// Matrix order whose first panel (`N × nb`) the panel kernels factor.
    #[arg(long, default_value_t = 8192)]
    pub n: usize,
    /// What to measure: gemm, panel, trsm, swap (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "gemm,panel,trsm,swap")]
    pub what: Vec<String>,
    /// While a panel is factored on core 0, core 1 runs GEMMs on cold tiles
    /// as in the LU (`gemm`) or idles (`none`).
    #[arg(long, default_value = "gemm")]
    pub companion: String,
    /// Rounds per figure (the median is printed).
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Team sizes for `--what panel`: the team panel (`TeamPanel`) on that
    /// many threads, each bound to its own core (the process's first ones),
    /// is timed beside the single-core panel; comma-separated. Leave core 1
    /// to the team: `--companion none`.
    #[arg(long, value_delimiter = ',')]
    pub team: Vec<usize>,
}

/// How many rows one GEMM call gets.
#[derive(Clone, Copy, Debug)]
enum Rows {
    Auto,
    Whole,
    Fixed(usize),
}

fn parse_rows(s: &str) -> Result<Rows, String> {
    match s {
        "auto" => Ok(Rows::Auto),
        "whole" => Ok(Rows::Whole),
        // A call of 0 rows does nothing (issue 42: `--rows 0` was taken).
        n => match n.parse() {
            Ok(0) => Err("--rows 0: a GEMM call needs at least one row (or auto, whole)".into()),
            Ok(r) => Ok(Rows::Fixed(r)),
            Err(_) => Err(format!("--rows: '{n}' is not auto, whole or a row count")),
        },
    }
}

pub fn run(args: LuKernelsArgs) -> Result<(), String> {
    // The process's CPUs, before any measuring thread binds itself.
    cpu(0);
    let rows = args
        .rows
        .iter()
        .map(|s| parse_rows(s))
        .collect::<Result<Vec<_>, _>>()?;
    let busy = match args.companion.as_str() {
        "gemm" => true,
        "none" => false,
        other => return Err(format!("--companion: unknown '{other}' (gemm, none)")),
    };
    if args.threads == 0 || args.rounds == 0 || args.team.contains(&0) {
        return Err("--threads, --rounds and --team must be at least 1".into());
    }
    if args.share_b.contains(&0) {
        // Issue 42: `--share-b 0` was taken (read as 1 by the kernel loop).
        return Err("--share-b 0: at least 1 call uses each B tile (1: none shared)".into());
    }
    check_sizes(&args)?;
    for what in &args.what {
        match what.as_str() {
            "gemm" => {
                for &nb in &args.nb {
                    warn_if_long(nb, args.rounds, rows.len() * args.share_b.len());
                    for (&r, &share) in rows
                        .iter()
                        .flat_map(|r| args.share_b.iter().map(move |s| (r, s)))
                    {
                        let rates: Vec<f64> = (0..args.rounds)
                            .map(|_| {
                                crate::interrupt::check()?;
                                Ok(gemm_rate(nb, r, share.max(1), args.threads))
                            })
                            .collect::<Result<_, String>>()?;
                        let label = match r {
                            Rows::Auto => format!("auto({})", gemm_row_block(nb, nb)),
                            Rows::Whole => "whole".into(),
                            Rows::Fixed(n) => n.to_string(),
                        };
                        println!(
                            "gemm nb={nb} rows={label} share_b={share} threads={} {:.2} GFLOP/s",
                            args.threads,
                            median(rates)
                        );
                    }
                }
            }
            "panel" => {
                for &nb in &args.nb {
                    let mut kernels: Vec<(String, Box<PanelKernel>)> = vec![
                        ("tessera".into(), Box::new(getrf_panel)),
                        ("faer".into(), Box::new(getrf_panel_faer)),
                    ];
                    kernels.extend(
                        args.team
                            .iter()
                            .map(|&k| (format!("team{k}"), team_panel(k))),
                    );
                    for (name, kernel) in &kernels {
                        let rates: Vec<f64> = (0..args.rounds)
                            .map(|_| {
                                crate::interrupt::check()?;
                                panel_rate(args.n, nb, kernel, busy)
                            })
                            .collect::<Result<_, _>>()?;
                        println!(
                            "panel {name} m={} w={nb} companion={} {:.2} GFLOP/s",
                            args.n,
                            args.companion,
                            median(rates)
                        );
                    }
                }
            }
            "trsm" => {
                for &nb in &args.nb {
                    let rates: Vec<f64> = (0..args.rounds)
                        .map(|_| {
                            crate::interrupt::check()?;
                            Ok(trsm_rate(nb, args.threads))
                        })
                        .collect::<Result<_, String>>()?;
                    println!(
                        "trsm nb={nb} threads={} {:.2} GFLOP/s",
                        args.threads,
                        median(rates)
                    );
                }
            }
            "swap" => {
                for &nb in &args.nb {
                    let ms: Vec<f64> = (0..args.rounds)
                        .map(|_| {
                            crate::interrupt::check()?;
                            Ok(swap_ms(args.n, nb))
                        })
                        .collect::<Result<_, String>>()?;
                    println!(
                        "swap m={} w={nb} (pivots of the first panel) {:.3} ms",
                        args.n,
                        median(ms)
                    );
                }
            }
            other => {
                return Err(format!(
                    "--what: unknown '{other}' (gemm, panel, trsm, swap)"
                ))
            }
        }
    }
    Ok(())
}

/// Refuses, before anything is allocated or spawned, what the kernels cannot
/// measure: a tile size of 0, a panel wider than the matrix is tall, more
/// threads than a runtime would start as workers ([`worker_cap`]), and tiles
/// that do not fit in memory (`--nb 5e9` had aborted in the allocator,
/// `--threads 2^64-1` overflowed a capacity, `--nb 0` divided by zero).
fn check_sizes(args: &LuKernelsArgs) -> Result<(), String> {
    let cap = worker_cap();
    for (what, k) in
        std::iter::once(("--threads", args.threads)).chain(args.team.iter().map(|&k| ("--team", k)))
    {
        if k > cap {
            return Err(format!(
                "{what} {k}: at most {cap} threads on this machine (as many as a runtime starts as workers: 16 per CPU, at least 256)"
            ));
        }
    }
    let wants = |w: &str| args.what.iter().any(|x| x == w);
    let tall = wants("panel") || wants("swap");
    if tall && args.n == 0 {
        return Err("--n 0: the panel and swap kernels need a matrix of order at least 1".into());
    }
    for &nb in &args.nb {
        if nb == 0 {
            return Err("--nb 0: a tile has at least one row".into());
        }
        if tall && nb > args.n {
            return Err(format!(
                "--nb {nb} is larger than --n {}: the panel and swap kernels work on the first N x nb panel",
                args.n
            ));
        }
        // What the measurements of this tile size hold at once (see `gemm_rate`,
        // `trsm_rate`, `panel_rate`, `swap_ms`), in bytes.
        let tile = (nb as u128).pow(2) * 8;
        let ring = |per_set: u128| (48u128 << 20).div_ceil(per_set * tile).max(2) * per_set * tile;
        let panel = args.n as u128 * nb as u128 * 8;
        let threads = args.threads as u128;
        let clamp = |b: u128| b.min(u64::MAX as u128) as u64;
        let mut items = Vec::new();
        if wants("gemm") {
            items.push(("GEMM tiles (A, B, C per thread)", clamp(threads * ring(4))));
        }
        if wants("trsm") {
            items.push(("TRSM tiles", clamp(threads * ring(2))));
        }
        if wants("panel") {
            items.push(("the panel and its copy", clamp(2 * panel)));
            items.push(("the companion's GEMM tiles", clamp(48 * tile)));
        }
        if wants("swap") {
            items.push(("two tile columns", clamp(2 * panel)));
        }
        crate::budget::check(
            &format!("lu-kernels --nb {nb} --n {}", args.n),
            &items,
            args.threads
                .max(args.team.iter().copied().max().unwrap_or(1))
                + 1,
        )?;
    }
    Ok(())
}

type PanelKernel =
    dyn Fn(&mut [&mut Tile], usize) -> Result<Vec<usize>, tessera_tasks::kernels::SingularColumn>;

/// The team panel on `k` plain threads (`run_threads`), member `r` bound to
/// the process's `r`-th CPU.
fn team_panel(k: usize) -> Box<PanelKernel> {
    Box::new(move |tiles: &mut [&mut Tile], col0: usize| {
        let panel = TeamPanel::new(tiles);
        run_threads(k, |m| {
            let _ = bind_current_thread(&[cpu(m.rank())]);
            panel.factor(col0, m)
        })
        .expect("no team member panics")
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn random_tile(nb: usize, seed: u64) -> Tile {
    generate_tile(nb * 64, nb, seed, 0, 0)
}

/// GEMM calls per thread in one figure of [`gemm_rate`] at `nb` (about
/// 4 GFLOP of calls).
fn gemm_calls(nb: usize) -> f64 {
    (4e9 / gemm_flops(nb, nb, nb)).ceil()
}

/// Calls per figure past which a GEMM figure takes more than seconds (some
/// 20 ns a call at the smallest tiles).
const LONG_GEMM_CALLS: f64 = 1e8;

/// Say, before it starts, that the GEMM figures of `nb` will take minutes
/// (issue 42: `--nb 1` ran minutes without a word: 2·10^9 calls a figure).
fn warn_if_long(nb: usize, rounds: usize, figures: usize) {
    let calls = gemm_calls(nb);
    if calls > LONG_GEMM_CALLS {
        crate::say!(
            "tessera: warning: lu-kernels --nb {nb}: {calls:.1e} GEMM calls a figure, {} figures of {rounds} round(s): tiles this small time the call overhead, and this takes minutes (each figure prints when done)",
            figures
        );
    }
}

/// GFLOP/s of `threads` threads each running `C -= A·B` on its own ring of
/// tiles, large enough (≥ 48 MB) that every call starts with cold tiles, as
/// the LU's GEMMs do; `share` consecutive calls use the same `B`.
fn gemm_rate(nb: usize, rows: Rows, share: usize, threads: usize) -> f64 {
    let set_bytes = 3 * nb * nb * 8;
    let sets = (48usize << 20).div_ceil(set_bytes).max(2);
    let calls = gemm_calls(nb) as usize;
    let barrier = Barrier::new(threads);
    let secs: Vec<f64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let barrier = &barrier;
                s.spawn(move || {
                    let _ = bind_current_thread(&[cpu(t)]);
                    let bs: Vec<Tile> = (0..sets.div_ceil(share))
                        .map(|i| random_tile(nb, (t * 1000 + 999 - i) as u64))
                        .collect();
                    let mut ring: Vec<(Tile, Tile, Tile)> = (0..sets)
                        .map(|i| {
                            let s = (t * 1000 + 3 * i) as u64;
                            (
                                random_tile(nb, s),
                                random_tile(nb, s + 1),
                                random_tile(nb, s + 2),
                            )
                        })
                        .collect();
                    let r = match rows {
                        Rows::Auto => gemm_row_block(nb, nb),
                        Rows::Whole => 0,
                        Rows::Fixed(r) => r,
                    };
                    barrier.wait();
                    let t0 = Instant::now();
                    for i in 0..calls {
                        let (a, b, c) = &mut ring[i % sets];
                        let b = if share > 1 {
                            &bs[(i % sets) / share]
                        } else {
                            &*b
                        };
                        gemm_minus_blocked(c.as_mut(), a.as_ref(), b.as_ref(), r);
                    }
                    t0.elapsed().as_secs_f64()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let wall = secs.iter().fold(0.0f64, |m, &s| m.max(s));
    threads as f64 * calls as f64 * gemm_flops(nb, nb, nb) / wall / 1e9
}

/// GFLOP/s of `threads` threads each solving `B := L⁻¹·B` on its own ring of
/// cold tiles.
fn trsm_rate(nb: usize, threads: usize) -> f64 {
    let sets = (48usize << 20).div_ceil(2 * nb * nb * 8).max(2);
    let calls = (2e9 / trsm_flops(nb, nb)).ceil() as usize;
    let barrier = Barrier::new(threads);
    let secs: Vec<f64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let barrier = &barrier;
                s.spawn(move || {
                    let _ = bind_current_thread(&[cpu(t)]);
                    let mut ring: Vec<(Tile, Tile)> = (0..sets)
                        .map(|i| {
                            let s = (t * 1000 + 2 * i) as u64;
                            (random_tile(nb, s), random_tile(nb, s + 1))
                        })
                        .collect();
                    barrier.wait();
                    let t0 = Instant::now();
                    for i in 0..calls {
                        let (l, b) = &mut ring[i % sets];
                        trsm_unit_lower(l, b);
                    }
                    t0.elapsed().as_secs_f64()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let wall = secs.iter().fold(0.0f64, |m, &s| m.max(s));
    threads as f64 * calls as f64 * trsm_flops(nb, nb) / wall / 1e9
}

/// Milliseconds of `SWAP(0, 1)`: the first panel's interchanges applied to
/// the second tile column of the HPL matrix of order `n` (fresh tiles).
fn swap_ms(n: usize, nb: usize) -> f64 {
    let t = n.div_ceil(nb);
    let mut panel: Vec<Tile> = (0..t).map(|i| generate_tile(n, nb, 1, i, 0)).collect();
    let mut refs: Vec<&mut Tile> = panel.iter_mut().collect();
    let ipiv = getrf_panel(&mut refs, 0).expect("the HPL matrix is regular");
    let mut col: Vec<Tile> = (0..t).map(|i| generate_tile(n, nb, 1, i, 1)).collect();
    let mut refs: Vec<&mut Tile> = col.iter_mut().collect();
    let t0 = Instant::now();
    laswp(&mut refs, &ipiv);
    t0.elapsed().as_secs_f64() * 1e3
}

/// GFLOP/s of one panel kernel on the first `n × nb` panel of the HPL matrix
/// of order `n` (best of 3 on fresh copies), on core 0 while core 1 runs
/// GEMMs on cold tiles, as in the LU (`busy`), or idles.
fn panel_rate(n: usize, nb: usize, kernel: &PanelKernel, busy: bool) -> Result<f64, String> {
    let t = n.div_ceil(nb);
    let panel: Vec<Tile> = (0..t).map(|i| generate_tile(n, nb, 1, i, 0)).collect();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (core0, core1) = (cpu(0), cpu(1));
    let best = std::thread::scope(|s| {
        let stop = &stop;
        s.spawn(move || {
            if !busy {
                return;
            }
            let _ = bind_current_thread(&[core1]);
            let mut ring: Vec<(Tile, Tile, Tile)> = (0..16)
                .map(|i| {
                    (
                        random_tile(nb, i),
                        random_tile(nb, i + 1),
                        random_tile(nb, i + 2),
                    )
                })
                .collect();
            let mut i = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let (a, b, c) = &mut ring[i % 16];
                gemm_minus_blocked(c.as_mut(), a.as_ref(), b.as_ref(), 0);
                i += 1;
            }
        });
        let _ = bind_current_thread(&[core0]);
        let mut best = f64::INFINITY;
        let mut result = Ok(());
        for _ in 0..3 {
            let mut tiles = panel.clone();
            let mut refs: Vec<&mut Tile> = tiles.iter_mut().collect();
            let t0 = Instant::now();
            if let Err(e) = kernel(&mut refs, 0) {
                result = Err(e.to_string());
            }
            best = best.min(t0.elapsed().as_secs_f64());
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        result.map(|()| best)
    })?;
    Ok(getrf_panel_flops(n, nb) / best / 1e9)
}
