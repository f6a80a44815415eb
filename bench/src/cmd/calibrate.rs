//! `tessera calibrate`: real runs on this machine turned into a platform
//! description for `--simulate`. Runs the LU (prio, symbolic) and repeated
//! SpMV with every task timed into fresh perf models, measures the STREAM
//! triad, then writes the perf models beside the platform file and the
//! platform file itself (cores, per-codelet rates fitted from the models,
//! memory bandwidth), with the figures it measured in comments.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use tessera_engine::perfmodel::{PerfModelConfig, PerfModels};
use tessera_engine::team::{team_arch, TeamSize};
use tessera_engine::{Config, Runtime, Scheduler};
use tessera_linalg::hpl::{generate_matrix, hpl_flops};
use tessera_linalg::lu::{lu_factor, Front, LuOptions};
use tessera_linalg::sparse::gen::parse_gen_spec;
use tessera_linalg::sparse::stream::stream_triad;
use tessera_linalg::spmv::{repeated_spmv, SpmvMatrix};

use crate::platform_out::PlatformOut;

/// Options of `tessera calibrate`.
#[derive(clap::Args, Debug)]
pub struct CalibrateArgs {
    /// The platform file to write; its perf models go to a folder beside it
    /// (`NAME.perfmodels/`).
    #[arg(short, long, default_value = "bench/platforms/this-machine.toml")]
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
    /// STREAM triad array length in Mi elements (3 arrays of 8-byte
    /// elements; cut to fit the memory limits, `ulimit -v` included).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=1 << 20))]
    pub stream_mi: u32,
    /// Panel team sizes to time besides one core, comma-separated: LU runs
    /// with the panel as a team of each size (`lu --panel-team K`), whose
    /// panels' times are saved under the team's architecture (`cpuxK`), so
    /// that `--simulate` predicts team panels from measurements. Default:
    /// every size from 2 to the CPU workers; `1` for none.
    #[arg(long, value_delimiter = ',')]
    pub panel_teams: Option<Vec<usize>>,
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

/// A task time more than this many times its size's median is an outlier
/// (the task was preempted, or the machine disturbed), not the kernel's time.
const OUTLIER_RATIO: f64 = 5.0;

/// The mean of `xs` without its outliers ([`OUTLIER_RATIO`]), and how many
/// were left out. Issue 28: a few inflated samples made `slowdown = [1.0,
/// 290.14]`, stored unchecked.
fn robust_mean(xs: &[f64]) -> (f64, usize) {
    let m = median(xs.to_vec());
    let kept: Vec<f64> = xs
        .iter()
        .copied()
        .filter(|&x| x <= m * OUTLIER_RATIO)
        .collect();
    (mean(&kept), xs.len() - kept.len())
}

/// The least r² (on the log scale) a codelet's fit over 3 or more sizes
/// should have: below it the times do not follow the sizes (issue 28: a
/// panel fit with r² = 0.34), and `--simulate` extrapolates noise.
const WEAK_FIT_R2: f64 = 0.9;

/// `slowdown` if plausible, else the nearest plausible value and a warning:
/// a core cannot run faster with the others busy (below 1, less noise), nor
/// slower than if all `workers` shared it.
fn plausible_slowdown(slowdown: f64, workers: usize, notes: &mut String) -> f64 {
    let max = (workers as f64).max(2.0);
    if slowdown.is_finite() && (0.8..=max).contains(&slowdown) {
        return slowdown;
    }
    let kept = if slowdown.is_finite() {
        slowdown.clamp(1.0, max)
    } else {
        1.0
    };
    let text = format!(
        "a core measured {slowdown:.3}x slower with {workers} busy, outside 0.8 to {max}: noise, not the machine; stored {kept:.3} (calibrate again on a quiet machine)"
    );
    crate::say!("tessera: warning: calibrate: {text}");
    let _ = writeln!(notes, "# warning: {text}");
    kept
}

/// Check the options before the minutes of measuring they would waste
/// (issue 28: `--n` below `--nb` or a read-only `--out` failed after 40 s,
/// `--nb 0` panicked).
fn check(args: &CalibrateArgs) -> Result<PlatformOut, String> {
    if args.nb == 0 {
        return Err("--nb 0: the tile size must be at least 1".into());
    }
    if args.runs == 0 {
        // Issue 42: `--runs 0` was run as 1.
        return Err("--runs 0: calibrate needs at least one LU run".into());
    }
    if args.runs < 3 {
        crate::say!(
            "tessera: warning: calibrate: --runs {}: each size's median needs 3 samples; with fewer, one noisy run sets the figures",
            args.runs
        );
    }
    if args.n.is_empty() {
        return Err("--n: give at least one LU order".into());
    }
    if let Some(n) = args.n.iter().find(|&&n| n <= args.nb) {
        return Err(format!(
            "--n {n} is not larger than --nb {}: an LU of one tile column has no GEMM to time",
            args.nb
        ));
    }
    tessera_linalg::sparse::gen::GenSpec::parse(&args.spmv).map_err(|e| format!("--spmv: {e}"))?;
    PlatformOut::check(&args.out)
}

/// The STREAM array length: `--stream-mi` (by default 1.5 GiB for the
/// three arrays), or less where the memory limits (`ulimit -v`, the cgroup's, what is
/// available) leave less, so that the run fits (issue 28: it aborted under
/// `ulimit -v`); a warning when the arrays are then within 4x the
/// last-level cache, which the triad would measure instead of memory.
fn stream_elems(mi: u32, threads: usize) -> usize {
    use tessera_linalg::sparse::stream::TRIAD_BYTES_PER_ELEM;
    let asked = (mi as usize) << 20;
    let per_elem = TRIAD_BYTES_PER_ELEM as u64;
    let headroom = crate::budget::headrooms(threads)
        .iter()
        .map(|h| h.bytes)
        .min()
        .unwrap_or(u64::MAX);
    // Half the headroom: the allocator and the threads' stacks take some.
    let fits = usize::try_from(headroom / 2 / per_elem).unwrap_or(usize::MAX);
    let elems = asked.min(fits).max(1 << 16);
    if elems < asked {
        crate::say!(
            "calibrate: STREAM arrays cut to 3 x {} to fit the memory limit",
            tessera_engine::fmt::bytes(elems as u64 * 8)
        );
    }
    if let Some(llc) = crate::spmv::plan::last_level_cache() {
        if (elems as u64 * per_elem) < 4 * llc {
            crate::say!(
                "tessera: warning: the STREAM arrays ({}) are less than 4x the last-level cache ({}): memory_gbs will be the cache's rate, too high",
                tessera_engine::fmt::bytes(elems as u64 * per_elem),
                tessera_engine::fmt::bytes(llc)
            );
        }
    }
    elems
}

/// Stop between the measuring steps on Ctrl-C: nothing is written.
fn stop_if_interrupted() -> Result<(), String> {
    if crate::interrupt::requested() {
        return Err(
            "interrupted (Ctrl-C) while measuring: nothing written, the previous platform file and models are untouched"
                .into(),
        );
    }
    Ok(())
}

/// The panel team sizes to calibrate: `asked` (each from 1 to `workers`;
/// 1, one core, is always measured and adds nothing), else every size from
/// 2 to `workers`.
fn panel_teams(asked: Option<&[usize]>, workers: usize) -> Result<Vec<usize>, String> {
    let Some(asked) = asked else {
        return Ok((2..=workers).collect());
    };
    let mut teams = Vec::new();
    for &k in asked {
        if k == 0 || k > workers {
            return Err(format!(
                "--panel-teams {k}: a team has 1 to {workers} CPU workers here"
            ));
        }
        if k > 1 && !teams.contains(&k) {
            teams.push(k);
        }
    }
    Ok(teams)
}

/// Run one measured LU under the Ctrl-C watcher, its panel a team of
/// `team` workers where given (else one worker's task).
fn timed_lu(
    rt: &Runtime,
    n: usize,
    nb: usize,
    seed: u64,
    team: Option<usize>,
) -> Result<f64, String> {
    let a = generate_matrix(n, nb, seed);
    let opts = LuOptions {
        panel_team: team.map(TeamSize::exactly),
        ..LuOptions::new(Front::Symbolic)
    };
    let t0 = Instant::now();
    let r = crate::interrupt::watch(rt, || lu_factor(rt, a, &opts));
    stop_if_interrupted()?;
    r.map_err(|e| e.to_string())?;
    Ok(t0.elapsed().as_secs_f64())
}

/// Task durations of the team-panel runs: (team size, flops) → seconds.
type TeamSamples = std::collections::BTreeMap<(usize, u64), Vec<f64>>;

/// (team size, n, seconds) of each team-panel LU run.
type TeamTimes = Vec<(usize, usize, f64)>;

/// What the measuring runs found, for the platform file's comments and figures.
struct Measured {
    /// (n, seconds) of each one-core-panel LU run.
    lu_times: Vec<(usize, f64)>,
    lu_team_times: TeamTimes,
    /// Seconds of the SpMV run's products.
    spmv_seconds: f64,
    /// A core's time with all the workers busy over its time alone.
    slowdown: f64,
    /// The STREAM triad, bytes/s.
    triad: f64,
}

pub fn run(args: CalibrateArgs) -> Result<(), String> {
    let out = check(&args)?;
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
        return Err("calibrate describes this machine's cores: drop --gpus/--emu".into());
    }
    let workers = base.workers;
    let teams = panel_teams(args.panel_teams.as_deref(), workers)?;
    let lu_times = measure_lu(&args, &base, &perf, &mut samples)?;
    let (team_samples, lu_team_times) = measure_team_panels(&args, &base, &teams)?;
    let spmv_seconds = measure_spmv(&args, &base, &perf, &mut samples)?;
    // Warnings, also written into the platform file as comments.
    let mut notes = String::new();
    let slowdown = measure_slowdown(&args, &base, &samples, &mut notes)?;
    let triad = stream_triad(stream_elems(args.stream_mi, workers), workers, 5);
    let triad = tessera_linalg::sparse::stream::check_rate(triad, workers)?;
    stop_if_interrupted()?;
    crate::say!("calibrate: STREAM triad {:.1} GB/s", triad / 1e9);

    let (perf, flop_keyed) = models(&samples, &team_samples, &perf, &mut notes);
    let (rates, gemm_rate, gbs_default) = rates(&perf, &flop_keyed);
    if gemm_rate <= 0.0 {
        return Err("no GEMM was timed: is n larger than nb?".into());
    }
    warn_weak_fits(&perf, &mut notes);
    let measured = Measured {
        lu_times,
        lu_team_times,
        spmv_seconds,
        slowdown,
        triad,
    };
    let log = measured_log(&args, workers, &teams, &measured);
    let text = platform_text(
        &out.models_name,
        &log,
        &notes,
        &measured,
        workers,
        (gemm_rate, median(gbs_default).max(0.1)),
        &rates,
    );
    stop_if_interrupted()?;
    out.save(&perf, &text)?;
    println!(
        "calibrate: wrote {} and {}",
        args.out.display(),
        out.models.display()
    );
    Ok(())
}

/// The LU runs with every task timed (calibrate on), prio, symbolic, like `tessera lu`:
/// `--runs` of each `--n`, their tasks added to `samples`; returns (n, seconds) of each.
fn measure_lu(
    args: &CalibrateArgs,
    base: &Config,
    perf: &Arc<PerfModels>,
    samples: &mut Samples,
) -> Result<Vec<(usize, f64)>, String> {
    let mut lu_times = Vec::new();
    for &n in &args.n {
        for r in 0..args.runs.max(1) {
            let rt = Runtime::new(
                base.clone()
                    .perf_models(Arc::clone(perf))
                    .calibrate(true)
                    .trace(true),
            )
            .map_err(|e| e.to_string())?;
            let t = timed_lu(&rt, n, args.nb, 1 + r as u64, None)?;
            collect(&rt, samples);
            crate::say!(
                "calibrate: LU n={n} nb={} run {}: {t:.2} s ({:.1} GFLOP/s)",
                args.nb,
                r + 1,
                hpl_flops(n) / t / 1e9
            );
            lu_times.push((n, t));
        }
    }
    Ok(lu_times)
}

/// Team panels: the same LU runs with the panel a team of each size in `teams`; only
/// the panels' times are kept (their leaders' records), the other tasks are the
/// one-core models' again. Returns the panels' samples and (k, n, seconds) of each run.
fn measure_team_panels(
    args: &CalibrateArgs,
    base: &Config,
    teams: &[usize],
) -> Result<(TeamSamples, TeamTimes), String> {
    let mut team_samples = TeamSamples::new();
    let mut lu_team_times = Vec::new();
    for &k in teams {
        let n = args.n.last().copied().unwrap_or(4096);
        for r in 0..args.runs.max(1) {
            let rt = Runtime::new(base.clone().trace(true)).map_err(|e| e.to_string())?;
            let t = timed_lu(&rt, n, args.nb, 1 + r as u64, Some(k))?;
            for p in rt.trace().tasks {
                if p.codelet == "panel" && p.team_rank == 0 && p.flops > 0.0 {
                    let secs = (p.end - p.start) as f64 * 1e-9;
                    team_samples
                        .entry((k, p.flops as u64))
                        .or_default()
                        .push(secs);
                }
            }
            crate::say!(
                "calibrate: LU n={n} nb={} panel team of {k}, run {}: {t:.2} s ({:.1} GFLOP/s)",
                args.nb,
                r + 1,
                hpl_flops(n) / t / 1e9
            );
            lu_team_times.push((k, n, t));
        }
    }
    Ok((team_samples, lu_team_times))
}

/// SpMV under ws, as `tessera spmv` runs it, its tasks added to `samples`; returns the
/// products' seconds.
fn measure_spmv(
    args: &CalibrateArgs,
    base: &Config,
    perf: &Arc<PerfModels>,
    samples: &mut Samples,
) -> Result<f64, String> {
    let a = parse_gen_spec(&args.spmv)?;
    let rt = Runtime::new(
        base.clone()
            .scheduler(Scheduler::Ws)
            .perf_models(Arc::clone(perf))
            .calibrate(true)
            .trace(true),
    )
    .map_err(|e| e.to_string())?;
    let mat = SpmvMatrix::new(&rt, &a, base.workers * 16);
    let x: Vec<f64> = (0..a.n_cols())
        .map(|i| 1.0 + (i % 7) as f64 * 0.125)
        .collect();
    let r = crate::interrupt::watch(&rt, || repeated_spmv(&rt, &mat, x, args.spmv_iters));
    stop_if_interrupted()?;
    let (_, st) = r.map_err(|e| e.to_string())?;
    collect(&rt, samples);
    crate::say!(
        "calibrate: SpMV {} x {}: {:.3} s",
        args.spmv,
        args.spmv_iters,
        st.spmv_seconds
    );
    Ok(st.spmv_seconds)
}

/// How much slower a core runs when all of them work (memory bandwidth and caches
/// shared): one LU run on one worker, its full-tile GEMM mean against the runs in
/// `samples`; 1 with one worker, and bounded by [`plausible_slowdown`].
fn measure_slowdown(
    args: &CalibrateArgs,
    base: &Config,
    samples: &Samples,
    notes: &mut String,
) -> Result<f64, String> {
    let workers = base.workers;
    if workers <= 1 {
        return Ok(1.0);
    }
    let gemm_key = |s: &Samples| {
        s.iter()
            .filter(|((c, _), _)| c == "gemm")
            .max_by_key(|(_, v)| v.len())
            .map(|((_, f), v)| (*f, robust_mean(v).0))
    };
    let mut slowdown = 1.0;
    let n = args.n.last().copied().unwrap_or(4096);
    let mut one = base.clone().workers(1).trace(true);
    // The placement's per-worker lists are for all the workers.
    one.steal_order = None;
    one.worker_numa = None;
    let rt = Runtime::new(one).map_err(|e| e.to_string())?;
    let t = timed_lu(&rt, n, args.nb, 99, None)?;
    crate::say!("calibrate: LU n={n} on one worker: {t:.2} s");
    let mut one = Samples::new();
    collect(&rt, &mut one);
    if let (Some((f, all)), Some((g, alone))) = (gemm_key(samples), gemm_key(&one)) {
        if f == g && alone > 0.0 {
            slowdown = all / alone;
        }
    }
    crate::say!("calibrate: a core is {slowdown:.3}x slower with {workers} busy");
    Ok(plausible_slowdown(slowdown, workers, notes))
}

/// The models saved: each (codelet, size) of the traces at its mean time (recorded
/// min_samples times, so it is a history, not a guess), outliers left out and counted
/// in `notes`; codelets without flops from the models measured (`perf`). Returns them
/// and the flops-keyed codelets.
fn models(
    samples: &Samples,
    team_samples: &TeamSamples,
    perf: &PerfModels,
    notes: &mut String,
) -> (PerfModels, Vec<String>) {
    let saved = PerfModels::new(PerfModelConfig::default());
    let mut outliers = 0;
    for ((c, f), v) in samples {
        let (m, dropped) = robust_mean(v);
        outliers += dropped;
        for _ in 0..saved.config().min_samples {
            saved.record(c, "cpu", *f, m);
        }
    }
    for ((k, f), v) in team_samples {
        let (m, dropped) = robust_mean(v);
        outliers += dropped;
        for _ in 0..saved.config().min_samples {
            saved.record("panel", &team_arch("cpu", *k), *f, m);
        }
    }
    if outliers > 0 {
        let text = format!(
            "{outliers} task time(s) over {OUTLIER_RATIO}x their size's median left out as noise"
        );
        crate::say!("calibrate: {text}");
        let _ = writeln!(notes, "# {text}");
    }
    let flop_keyed: Vec<String> = samples.keys().map(|(c, _)| c.clone()).collect();
    for r in perf.summary() {
        if !flop_keyed.contains(&r.codelet) {
            for _ in 0..saved.config().min_samples {
                saved.record(&r.codelet, &r.arch, r.size, r.median);
            }
        }
    }
    (saved, flop_keyed)
}

/// The codelets of `perf`'s models, in its summary's order.
fn codelets(perf: &PerfModels) -> Vec<String> {
    let mut codelets: Vec<String> = perf.summary().iter().map(|r| r.codelet.clone()).collect();
    codelets.dedup();
    codelets
}

/// Per-codelet rates from the models, as the platform file's `codelets` lines:
/// flops-keyed codelets in GFLOP/s (median over sizes of size/time), the others in GB/s
/// of their data. Returns the lines, the GEMM rate, and the GB/s rates.
fn rates(perf: &PerfModels, flop_keyed: &[String]) -> (String, f64, Vec<f64>) {
    let rows = perf.summary();
    let codelets = codelets(perf);
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
    (rates, gemm_rate, gbs_default)
}

/// Warn (on stderr and in `notes`) of each codelet whose times fit its sizes poorly.
fn warn_weak_fits(perf: &PerfModels, notes: &mut String) {
    for c in &codelets(perf) {
        if let Some(fit) = perf
            .fit(c, "cpu")
            .filter(|f| f.sizes >= 3 && f.r2 < WEAK_FIT_R2)
        {
            let text = format!(
                "{c}'s times fit its sizes poorly (r² {:.2} over {} sizes, below {WEAK_FIT_R2}): --simulate's predictions at other sizes are unreliable; calibrate again, at the orders you will predict",
                fit.r2, fit.sizes
            );
            crate::say!("tessera: warning: calibrate: {text}");
            let _ = writeln!(notes, "# warning: {text}");
        }
    }
}

/// The platform file's comment lines with the figures measured.
fn measured_log(args: &CalibrateArgs, workers: usize, teams: &[usize], m: &Measured) -> String {
    let mut log = String::new();
    let _ = writeln!(
        log,
        "# LU nb={} ({} workers, prio, symbolic), n: seconds: {}",
        args.nb,
        workers,
        m.lu_times
            .iter()
            .map(|(n, t)| format!("{n}: {t:.2}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for &k in teams {
        let _ = writeln!(
            log,
            "# LU nb={} with panel teams of {k} (panels saved as {}), n: seconds: {}",
            args.nb,
            team_arch("cpu", k),
            m.lu_team_times
                .iter()
                .filter(|(j, _, _)| *j == k)
                .map(|(_, n, t)| format!("{n}: {t:.2}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let _ = writeln!(
        log,
        "# SpMV {} x {} iterations (ws): {:.3} s; STREAM triad {:.1} GB/s",
        args.spmv,
        args.spmv_iters,
        m.spmv_seconds,
        m.triad / 1e9
    );
    log
}

/// The platform file: what wrote it, the `log` and `notes` comments, the node's cores,
/// memory bandwidth, one core's GEMM rate and default GB/s (`cpu_rates`), the slowdown,
/// and the codelets' `rates`.
fn platform_text(
    dir_name: &str,
    log: &str,
    notes: &str,
    m: &Measured,
    workers: usize,
    cpu_rates: (f64, f64),
    rates: &str,
) -> String {
    let (gemm_rate, gbs) = cpu_rates;
    let slowdown = m.slowdown;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!(
        "# This machine, written by `tessera calibrate` from real runs measured here\n\
         # (per-codelet rates are medians over the perf models' sizes; the models\n\
         # themselves, in {dir_name}/, give each size's time and the regression).\n\
         # load when calibrated: {load}\n\
         {log}\
         {notes}\
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
        mem = m.triad / 1e9,
    )
}

#[cfg(test)]
mod tests {
    //! Proves that calibrate keeps noise out of what it stores (issue 28,
    //! item 15): outlier task times are left out of the means, and an
    //! implausible slowdown is replaced and flagged.

    use super::*;

    #[test]
    fn outliers_are_left_out_of_the_mean() {
        let (m, dropped) = robust_mean(&[1.0, 1.1, 0.9, 1.0, 290.0]);
        assert_eq!(dropped, 1);
        assert!((m - 1.0).abs() < 1e-9, "{m}");
        assert_eq!(robust_mean(&[2.0, 2.0]), (2.0, 0));
    }

    #[test]
    fn implausible_slowdowns_are_flagged_and_bounded() {
        let mut notes = String::new();
        assert_eq!(plausible_slowdown(1.3, 2, &mut notes), 1.3);
        assert!(notes.is_empty());
        assert_eq!(plausible_slowdown(290.14, 2, &mut notes), 2.0);
        assert!(notes.contains("290.140x"), "{notes}");
        assert_eq!(plausible_slowdown(f64::NAN, 4, &mut notes), 1.0);
        assert_eq!(plausible_slowdown(0.1, 4, &mut notes), 1.0);
    }
}
