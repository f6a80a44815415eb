//! `tessera lu`: the HPL-style driver. Generates a seeded random matrix,
//! factors it with the task-graph LU, solves, and prints HPL's result block
//! with the scaled residual check.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tessera_engine::Runtime;
use tessera_linalg::hpl::{
    generate_matrix, generate_rhs, hpl_flops, hpl_residual, solve_from_factors, HPL_THRESHOLD,
};
use tessera_linalg::lu::{lu_factor, Front};

/// Options of `tessera lu`.
#[derive(clap::Args, Debug)]
pub struct LuArgs {
    /// Matrix order N.
    #[arg(long, default_value_t = 8192)]
    pub n: usize,
    /// Tile size NB. 448 was the fastest at N=8192 on the faster VM type; on
    /// the slower one (issue 16) it fell off faer's GEMM cache cliff, which the
    /// GEMM kernel now avoids with row blocks sized from the L2 it reads at run
    /// time, and 448 is again the fastest there: `tessera lu --n 8192 --nb X`
    /// alternated over 320/384/448/512, 3 rounds, load 4.4–4.7, medians
    /// 89.6 / 86.3 / 94.3 / 88.1 GFLOP/s.
    #[arg(long, default_value_t = 448)]
    pub nb: usize,
    #[command(flatten)]
    pub placement: crate::placement::PlacementArgs,
    /// Scheduler: ws, prio (prio gives the look-ahead), dmda (data-aware,
    /// for devices), or auto (dmda with devices, else prio).
    #[arg(long, default_value = "auto")]
    pub sched: String,
    /// Seed of the random matrix and right-hand side.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Task-graph front-end: symbolic (lazily unfolded) or stf.
    #[arg(long, default_value = "symbolic")]
    pub front: String,
    /// Write a Chrome/Perfetto trace of the factorisation to FILE.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
}

/// Bytes of memory available to this process, from /proc/meminfo.
fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn human_bytes(b: f64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = b;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.1} {}", UNITS[u])
}

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
    // The tiled matrix, plus O(n) vectors and per-task overhead.
    let need = (n as f64) * (n as f64) * 8.0 * 1.05 + 64.0 * 1024.0 * 1024.0;
    if let Some(avail) = available_memory() {
        if need > avail as f64 {
            return Err(format!(
                "N={n} needs about {} for the matrix, but only {} of memory is available",
                human_bytes(need),
                human_bytes(avail as f64)
            ));
        }
    }
    Ok(())
}

pub fn run(args: LuArgs) -> Result<(), String> {
    validate(args.n, args.nb)?;
    let front = match args.front.as_str() {
        "symbolic" => Front::Symbolic,
        "stf" => Front::Stf,
        other => return Err(format!("unknown --front '{other}' (known: symbolic, stf)")),
    };
    let config = crate::placement::runtime_config(&args.placement, &args.sched, "prio")?
        .trace(args.trace.is_some());
    // The GPUs' own dgemm rate (cuBLAS, measured when each was opened): the
    // LU's physical reference on a GPU run.
    let gpu_dgemm: f64 = config
        .devices
        .iter()
        .filter(|d| d.arch() == "cuda")
        .map(|d| d.peak_flops())
        .sum();
    let rt = Runtime::new(config).map_err(|e| e.to_string())?;
    let (n, nb) = (args.n, args.nb);

    let a = generate_matrix(n, nb, args.seed);
    let b = generate_rhs(n, args.seed);

    let done = Arc::new(AtomicU64::new(0));
    let finished = Arc::new(AtomicBool::new(false));
    let bar = progress_bar(hpl_flops(n), Arc::clone(&done), Arc::clone(&finished));

    let t0 = Instant::now();
    let result = lu_factor(&rt, a, front, Some(done));
    let lu = match result {
        Ok(lu) => lu,
        Err(e) => {
            finished.store(true, Ordering::Relaxed);
            let _ = bar.map(|h| h.join());
            return Err(format!("LU failed: {e}"));
        }
    };
    let x = solve_from_factors(&lu.factors, &lu.ipiv, &b);
    let time = t0.elapsed().as_secs_f64();
    finished.store(true, Ordering::Relaxed);
    if let Some(h) = bar {
        let _ = h.join();
    }
    let gflops = hpl_flops(n) / time / 1e9;
    let resid = hpl_residual(n, nb, args.seed, &x, &b);

    let line = "=".repeat(80);
    let dash = "-".repeat(80);
    println!("{line}");
    println!("T/V                N    NB     P     Q               Time                 Gflops");
    println!("{dash}");
    let tv = format!("TS{}{}", rt.scheduler_name().to_uppercase(), rt.workers());
    println!(
        "{tv:<10}{n:>9}{nb:>6}{:>6}{:>6}{time:>19.2}{:>23}",
        1,
        1,
        sci(gflops, 4)
    );
    println!("{dash}");
    let verdict = if resid.is_finite() && resid < HPL_THRESHOLD {
        "PASSED"
    } else {
        "FAILED"
    };
    println!(
        "||Ax-b||_oo/(eps*(||A||_oo*||x||_oo+||b||_oo)*N)= {:>15} ...... {verdict}",
        sci(resid, 8)
    );
    println!("{line}");
    println!(
        "workers {}  scheduler {}  front {:?}  tiles {}x{}",
        rt.workers(),
        rt.scheduler_name(),
        front,
        n.div_ceil(nb),
        n.div_ceil(nb)
    );

    if gpu_dgemm > 0.0 {
        println!(
            "LU {gflops:.1} GFLOP/s = {:.1} % of the GPUs' cuBLAS dgemm ({:.1} GFLOP/s, measured in this run)",
            gflops * 1e9 / gpu_dgemm * 100.0,
            gpu_dgemm / 1e9
        );
    }
    if let Some(path) = &args.trace {
        crate::save_trace(&rt, path)?;
    }
    if rt.memory_stats().nodes.len() > 1 {
        print!("{}", rt.memory_stats());
    }
    crate::placement::save_perf_models(&args.placement, &rt)?;
    if verdict == "FAILED" {
        return Err(format!(
            "residual check FAILED ({resid:e} >= {HPL_THRESHOLD})"
        ));
    }
    Ok(())
}

/// C-style scientific notation as HPL prints it: `1.4770e+02`.
fn sci(x: f64, digits: usize) -> String {
    let s = format!("{x:.digits$e}");
    match s.split_once('e') {
        Some((m, e)) => {
            let e: i32 = e.parse().unwrap_or(0);
            format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
        }
        None => s, // inf / NaN
    }
}

/// A progress bar on stderr that appears only once the run has lasted a
/// second, fed by the flops finished so far.
fn progress_bar(
    total: f64,
    done: Arc<AtomicU64>,
    finished: Arc<AtomicBool>,
) -> Option<std::thread::JoinHandle<()>> {
    let handle = std::thread::Builder::new()
        .name("tessera-progress".into())
        .spawn(move || {
            let start = Instant::now();
            let mut bar: Option<ProgressBar> = None;
            while !finished.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                if bar.is_none() && start.elapsed() > Duration::from_secs(1) {
                    let b = ProgressBar::with_draw_target(Some(100), ProgressDrawTarget::stderr());
                    b.set_style(
                        ProgressStyle::with_template(
                            "LU {bar:40} {percent:>3}% {elapsed} (eta {eta})",
                        )
                        .expect("valid template"),
                    );
                    bar = Some(b);
                }
                if let Some(b) = &bar {
                    let pct = (done.load(Ordering::Relaxed) as f64 / total * 100.0).min(100.0);
                    b.set_position(pct as u64);
                }
            }
            if let Some(b) = bar {
                b.finish_and_clear();
            }
        })
        .ok()?;
    Some(handle)
}
