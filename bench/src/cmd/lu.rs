//! `tessera lu`: the HPL-style driver. Generates a seeded random matrix,
//! factors it with the task-graph LU, solves, and prints HPL's result block
//! with the scaled residual check.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tessera_engine::Runtime;
use tessera_linalg::hpl::{
    generate_matrix, generate_rhs, hpl_flops, hpl_residual, solve_from_factors, HPL_THRESHOLD,
};
use tessera_linalg::lu::{lu_factor_split, Front, Split};

/// Options of `tessera lu`.
#[derive(clap::Args, Debug)]
pub struct LuArgs {
    /// Matrix order N.
    #[arg(long, default_value_t = 8192)]
    pub n: usize,
    /// Tile size NB (448 measured fastest at N=8192 here, interleaved against
    /// 384 and 512; see the closing note of the LU issue).
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
    /// With devices: how tile columns are placed. auto (cyclic over two or
    /// more devices, else the scheduler), sched (dmda decides per task),
    /// cyclic (columns dealt over the devices, Hetero-HPL), adaptive (each
    /// step's columns split between host and devices by the TianHe-1
    /// splitter, learnt from measured rates; needs --front symbolic).
    #[arg(long, default_value = "auto")]
    pub split: String,
    /// Task-graph front-end: symbolic (lazily unfolded) or stf.
    #[arg(long, default_value = "symbolic")]
    pub front: String,
    /// Write a Chrome/Perfetto trace of the factorisation to FILE.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Predict this run on the machine described in PLATFORM (TOML, see
    /// bench/platforms/) in simulated time instead of running it here.
    #[arg(long, value_name = "PLATFORM")]
    pub simulate: Option<PathBuf>,
}

/// Bytes of memory available to this process, from /proc/meminfo.
fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
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
                tessera_engine::fmt::bytes(need as u64),
                tessera_engine::fmt::bytes(avail)
            ));
        }
    }
    Ok(())
}

pub fn run(args: LuArgs) -> Result<(), String> {
    if let Some(platform) = &args.simulate {
        return crate::simulate::lu(&args, platform);
    }
    validate(args.n, args.nb)?;
    let front = match args.front.as_str() {
        "symbolic" => Front::Symbolic,
        "stf" => Front::Stf,
        other => return Err(format!("unknown --front '{other}' (known: symbolic, stf)")),
    };
    let split: Split = args.split.parse().map_err(|e| format!("--split: {e}"))?;
    if split == Split::Adaptive && front == Front::Stf {
        return Err(
            "--split adaptive learns as the factorisation proceeds: it needs --front symbolic"
                .into(),
        );
    }
    let config = crate::placement::runtime_config(
        &args.placement,
        &args.sched,
        tessera_engine::Scheduler::Prio,
    )?
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

    let t0 = Instant::now();
    let finished = AtomicBool::new(false);
    let (result, time) = std::thread::scope(|s| {
        let (rt, finished) = (&rt, &finished);
        let bar = s.spawn(move || progress_bar(hpl_flops(n), || rt.flops_done(), finished));
        let result = lu_factor_split(rt, a, front, split).map(|(lu, shares)| {
            let x = solve_from_factors(&lu.factors, &lu.ipiv, &b);
            (shares, x)
        });
        let time = t0.elapsed().as_secs_f64();
        finished.store(true, Ordering::Relaxed);
        let _ = bar.join();
        (result, time)
    });
    let (shares, x) = match result {
        Ok(r) => r,
        Err(e) => return Err(format!("LU failed: {e}")),
    };
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

    if !shares.is_empty() {
        // TianHe-1's adaptive split: the device share of each step's columns.
        let list: Vec<String> = shares
            .iter()
            .map(|(k, s)| format!("{k}:{:.0}%", s * 100.0))
            .collect();
        println!("adaptive split, device share per step: {}", list.join(" "));
    }
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
        crate::report_fallbacks(&rt);
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
pub(crate) fn sci(x: f64, digits: usize) -> String {
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
/// second, fed by the flops finished so far; returns when `finished` is set.
fn progress_bar(total: f64, done: impl Fn() -> u64, finished: &AtomicBool) {
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
