//! `tessera calibrate`: real runs on this machine turned into a platform
//! description for `--simulate`. Runs the LU (prio, symbolic) and repeated
//! SpMV with every task timed into fresh perf models, measures the STREAM
//! triad, then writes the perf models beside the platform file and the
//! platform file itself (cores, per-codelet rates fitted from the models,
//! memory bandwidth), with the figures it measured in comments.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use tessera_engine::perfmodel::{PerfModelConfig, PerfModels};
use tessera_engine::{Runtime, Scheduler};
use tessera_linalg::hpl::{generate_matrix, hpl_flops};
use tessera_linalg::lu::{lu_factor_split, Front, Split};
use tessera_linalg::sparse::gen::parse_gen_spec;
use tessera_linalg::sparse::stream::stream_triad;
use tessera_linalg::spmv::{repeated_spmv, SpmvMatrix};

/// Options of `tessera calibrate`.
#[derive(clap::Args, Debug)]
pub struct CalibrateArgs {
    /// The platform file to write; its perf models go to a folder beside it
    /// (`NAME.perfmodels/`).
    #[arg(long, default_value = "bench/platforms/this-machine.toml")]
    pub out: PathBuf,
    /// LU orders of the calibration runs, comma-separated (each run's panel
    /// and edge tiles have sizes of their own: calibrate at the orders you
    /// will predict, or let the regression extrapolate).
    #[arg(long, default_value = "8192", value_delimiter = ',')]
    pub n: Vec<usize>,
    /// LU tile size (the drivers' default).
    #[arg(long, default_value_t = 448)]
    pub nb: usize,
    /// LU runs (each size's median needs 3 samples).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Matrix of the SpMV runs (a generator spec, see `tessera spmv --gen`).
    #[arg(long, default_value = "stencil27:100")]
    pub spmv: String,
    /// SpMV iterations.
    #[arg(long, default_value_t = 20)]
    pub spmv_iters: usize,
    #[command(flatten)]
    pub placement: crate::placement::PlacementArgs,
}

/// Median of `xs` (0 if empty).
fn median(mut xs: Vec<f64>) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Task durations of the calibration runs: (codelet, flops) → seconds.
type Samples = std::collections::BTreeMap<(String, u64), Vec<f64>>;

/// Add the tasks of `rt`'s trace to `samples`.
fn collect(rt: &Runtime, samples: &mut Samples) {
    for t in rt.trace().tasks {
        if t.flops > 0.0 {
            samples
                .entry((t.codelet, t.flops as u64))
                .or_default()
                .push((t.end - t.start) as f64 * 1e-9);
        }
    }
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len().max(1) as f64
}

pub fn run(args: CalibrateArgs) -> Result<(), String> {
    // Every sample kept, none rejected: the simulation wants each size's
    // typical time over the whole run (its mean, from the traces), not the
    // recent median a scheduler wants; these models give the swaps' times
    // (keyed by bytes), the traces the others' (keyed by flops).
    let perf = Arc::new(PerfModels::new(PerfModelConfig {
        history_len: 1 << 20,
        outlier_k: 1e12,
        ..PerfModelConfig::default()
    }));
    let mut samples = Samples::new();
    let base = crate::placement::runtime_config(&args.placement, "prio", Scheduler::Prio)?;
    if !base.devices.is_empty() {
        return Err("calibrate describes this machine's cores: drop --gpus/--sim".into());
    }
    let workers = base.workers;
    let mut log = String::new();
    // LU: every task timed (calibrate on), prio, symbolic, like `tessera lu`.
    let mut lu_times = Vec::new();
    for &n in &args.n {
        for r in 0..args.runs.max(1) {
            let rt = Runtime::new(
                base.clone()
                    .perf_models(Arc::clone(&perf))
                    .calibrate(true)
                    .trace(true),
            )
            .map_err(|e| e.to_string())?;
            let a = generate_matrix(n, args.nb, 1 + r as u64);
            let t0 = Instant::now();
            lu_factor_split(&rt, a, Front::Symbolic, Split::Auto).map_err(|e| e.to_string())?;
            let t = t0.elapsed().as_secs_f64();
            collect(&rt, &mut samples);
            eprintln!(
                "calibrate: LU n={n} nb={} run {}: {t:.2} s ({:.1} GFLOP/s)",
                args.nb,
                r + 1,
                hpl_flops(n) / t / 1e9
            );
            lu_times.push((n, t));
        }
    }
    // SpMV under ws, as `tessera spmv` runs it.
    let a = parse_gen_spec(&args.spmv)?;
    let rt = Runtime::new(
        base.clone()
            .scheduler(Scheduler::Ws)
            .perf_models(Arc::clone(&perf))
            .calibrate(true)
            .trace(true),
    )
    .map_err(|e| e.to_string())?;
    let mat = SpmvMatrix::new(&rt, &a, workers * 16);
    let x: Vec<f64> = (0..a.n_cols())
        .map(|i| 1.0 + (i % 7) as f64 * 0.125)
        .collect();
    let (_, st) = repeated_spmv(&rt, &mat, x, args.spmv_iters).map_err(|e| e.to_string())?;
    collect(&rt, &mut samples);
    eprintln!(
        "calibrate: SpMV {} x {}: {:.3} s",
        args.spmv, args.spmv_iters, st.spmv_seconds
    );
    drop(rt);
    // How much slower a core runs when all of them work (memory bandwidth
    // and caches shared): one LU run on one worker, its full-tile GEMM mean
    // against the runs above.
    let gemm_key = |s: &Samples| {
        s.iter()
            .filter(|((c, _), _)| c == "gemm")
            .max_by_key(|(_, v)| v.len())
            .map(|((_, f), v)| (*f, mean(v)))
    };
    let mut slowdown = 1.0;
    if workers > 1 {
        let n = args.n.last().copied().unwrap_or(4096);
        let mut one = base.clone().workers(1).trace(true);
        // The placement's per-worker lists are for all the workers.
        one.steal_order = None;
        one.worker_numa = None;
        let rt = Runtime::new(one).map_err(|e| e.to_string())?;
        let a = generate_matrix(n, args.nb, 99);
        let t0 = Instant::now();
        lu_factor_split(&rt, a, Front::Symbolic, Split::Auto).map_err(|e| e.to_string())?;
        eprintln!(
            "calibrate: LU n={n} on one worker: {:.2} s",
            t0.elapsed().as_secs_f64()
        );
        let mut one = Samples::new();
        collect(&rt, &mut one);
        if let (Some((f, all)), Some((g, alone))) = (gemm_key(&samples), gemm_key(&one)) {
            if f == g && alone > 0.0 {
                slowdown = all / alone;
            }
        }
        eprintln!("calibrate: a core is {slowdown:.3}x slower with {workers} busy");
    }
    let triad = stream_triad(64 << 20, workers, 5);
    eprintln!("calibrate: STREAM triad {:.1} GB/s", triad / 1e9);

    // The models saved: each (codelet, size) of the traces at its mean
    // time (recorded min_samples times, so it is a history, not a guess);
    // codelets without flops from the models measured above.
    let saved = PerfModels::new(PerfModelConfig::default());
    for ((c, f), v) in &samples {
        for _ in 0..saved.config().min_samples {
            saved.record(c, "cpu", *f, mean(v));
        }
    }
    let flop_keyed: Vec<String> = samples.keys().map(|(c, _)| c.clone()).collect();
    for r in perf.summary() {
        if !flop_keyed.contains(&r.codelet) {
            for _ in 0..saved.config().min_samples {
                saved.record(&r.codelet, &r.arch, r.size, r.median);
            }
        }
    }
    let perf = saved;
    // Per-codelet rates from the models: flops-keyed codelets in GFLOP/s
    // (median over sizes of size/time), the others in GB/s of their data.
    let rows = perf.summary();
    let mut codelets: Vec<String> = rows.iter().map(|r| r.codelet.clone()).collect();
    codelets.dedup();
    let mut rates = String::new();
    let mut gemm_rate = 0.0;
    let mut gbs_default = Vec::new();
    for c in &codelets {
        let pts: Vec<f64> = rows
            .iter()
            .filter(|r| &r.codelet == c && r.arch == "cpu" && r.median > 0.0)
            .map(|r| r.size as f64 / r.median)
            .collect();
        let rate = median(pts) / 1e9;
        if flop_keyed.contains(c) {
            let _ = writeln!(rates, "{c} = {{ gflops = {rate:.3} }}");
            if c == "gemm" {
                gemm_rate = rate;
            }
        } else {
            let _ = writeln!(rates, "{c} = {{ gbs = {rate:.3} }}");
            gbs_default.push(rate);
        }
    }
    if gemm_rate <= 0.0 {
        return Err("no GEMM was timed: is n larger than nb?".into());
    }
    let stem = args
        .out
        .file_stem()
        .ok_or_else(|| format!("{}: not a file name", args.out.display()))?
        .to_string_lossy()
        .into_owned();
    let dir_name = format!("{stem}.perfmodels");
    let folder = args.out.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(folder).map_err(|e| format!("{}: {e}", folder.display()))?;
    let models_dir = folder.join(&dir_name);
    perf.save_to(&models_dir).map_err(|e| e.to_string())?;
    let _ = writeln!(
        log,
        "# LU nb={} ({} workers, prio, symbolic), n: seconds: {}",
        args.nb,
        workers,
        lu_times
            .iter()
            .map(|(n, t)| format!("{n}: {t:.2}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(
        log,
        "# SpMV {} x {} iterations (ws): {:.3} s; STREAM triad {:.1} GB/s",
        args.spmv,
        args.spmv_iters,
        st.spmv_seconds,
        triad / 1e9
    );
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let text = format!(
        "# This machine, written by `tessera calibrate` from real runs measured here\n\
         # (per-codelet rates are medians over the perf models' sizes; the models\n\
         # themselves, in {dir_name}/, give each size's time and the regression).\n\
         # load when calibrated: {load}\n\
         {log}\
         name = \"this machine (calibrated)\"\n\
         nodes = 1\n\
         ranks_per_node = 1\n\
         perf_models = \"{dir_name}\"\n\
         memory_gbs = {mem:.2}   # STREAM triad measured by calibrate\n\
         \n\
         [node]\n\
         cores = {cores}\n\
         reserve_core_per_accelerator = false\n\
         task_overhead_us = 5   # guessed: the runtime's cost per task, order of `tessera overhead`\n\
         \n\
         [node.cpu]\n\
         arch = \"cpu\"\n\
         gflops = {gemm_rate:.3}   # one core's GEMM rate (tasks with flops and no model)\n\
         gbs = {gbs:.3}   # tasks without flops and no model: their data at this rate\n\
         slowdown = [1.0, {slowdown:.4}]   # a core's time alone, and with all {workers} busy (the models' case)\n\
         \n\
         [node.cpu.codelets]\n\
         {rates}",
        load = std::fs::read_to_string("/proc/loadavg")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
        mem = triad / 1e9,
        gbs = median(gbs_default).max(0.1),
    );
    std::fs::write(&args.out, text).map_err(|e| format!("{}: {e}", args.out.display()))?;
    println!(
        "calibrate: wrote {} and {}",
        args.out.display(),
        models_dir.display()
    );
    Ok(())
}
