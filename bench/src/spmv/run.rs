//! `tessera spmv` in one process, one function per phase: `plan` checks the options
//! and the machine's memory and configures the runtime, `load` reads or generates the
//! matrix, `build` splits it into row blocks, then the products, the power iteration,
//! CG or the balanced power iteration run and report against the STREAM triad measured
//! by this same program (and faer's sparse×dense product on the same matrix).

use std::time::Instant;

use faer::sparse::linalg::matmul::sparse_dense_matmul;
use faer::sparse::{SparseRowMatRef, SymbolicSparseRowMatRef};
use faer::{Accum, Mat, Par};
use tessera_engine::{Config, Runtime};
use tessera_linalg::solver::{check_square, CgOptions, CgVariant, Preconditioner};
use tessera_linalg::sparse::csr::Csr;
use tessera_linalg::sparse::gen::GenSpec;
use tessera_linalg::sparse::mm::read_matrix_market_sized;
use tessera_linalg::sparse::stream::stream_triad;
use tessera_linalg::spmv::{balanced_power_iteration, power_iteration, repeated_spmv, SpmvMatrix};
use tessera_tasks::kernels::{spmv_bytes, spmv_flops};

use super::plan::{buffers, cg_bytes, check_options, stream_elems};
use super::report::{compact_line, past_stream_note, solver_lines, stop_line, true_residual_lines};
use crate::args::SpmvArgs;

/// Row blocks of `--on-device` by default: each is a device task that ends
/// in a stream synchronisation, so a device gets a few large ones.
const ON_DEVICE_BLOCKS: usize = 4;

/// What the run knows of its machine once planned: the first device's facts,
/// what the memory check counts, and the STREAM arrays' length.
struct Machine {
    cpu_workers: usize,
    device_peak: Option<f64>,
    device_name: Option<String>,
    device_limit: Option<u64>,
    sims: Vec<Option<u64>>,
    threads: usize,
    stream_n: usize,
    has_devices: bool,
    /// The first GPU's device-to-device copy rate, bytes/s.
    d2d: Option<f64>,
}

impl Machine {
    /// [`crate::budget::check`] of a run on an `n × m` matrix of `csr` bytes.
    fn budget(&self, args: &SpmvArgs, what: &str, n: u64, m: u64, csr: u64) -> Result<(), String> {
        crate::budget::check(
            what,
            &buffers(args, n, m, csr, self.stream_n as u64, &self.sims),
            self.threads,
        )
    }
}

/// The matrix in row blocks, and what every solver's report reads.
struct Built<'a> {
    args: &'a SpmvArgs,
    rt: &'a Runtime,
    a: Csr,
    source: String,
    mat: SpmvMatrix,
    blocks: usize,
    has_devices: bool,
    x: Vec<f64>,
    workers: usize,
    stream_n: usize,
    /// The STREAM triad measured before the run, GB/s.
    stream: f64,
    per_iter_bytes: f64,
    per_iter_flops: f64,
    /// On one device alone, its copy rate (GB/s) and name: the physical limit to compare with.
    limit: Option<(f64, String)>,
}

impl Built<'_> {
    fn limit(&self) -> Option<(f64, &str)> {
        self.limit.as_ref().map(|(r, n)| (*r, n.as_str()))
    }
}

/// The one-process run. Every argument is checked before anything is built or measured.
pub fn run(args: &SpmvArgs) -> Result<(), String> {
    let (pc, variant) = check_options(args, args.balance)?;
    let stream_n = stream_elems(args.stream_mi)?;
    let spec = match &args.matrix {
        Some(path) => {
            tessera_linalg::sparse::mm::check_regular_file(path).map_err(|e| e.to_string())?;
            None
        }
        None => Some(GenSpec::parse(&args.gen)?),
    };
    let (config, machine) = plan(args, stream_n, spec.as_ref())?;
    let rt = Runtime::new(config).map_err(|e| e.to_string())?;
    let result = crate::interrupt::watch(&rt, || {
        // The first device's memory node (checked in `plan` that there is a device
        // when it is used).
        let device_node = rt.device_nodes().first().copied().unwrap_or(1);
        let (a, source) = load(args, &machine, spec)?;
        let built = build(args, &rt, &machine, a, source, device_node)?;
        if let Some(peak_device) = machine.device_peak.filter(|_| args.balance) {
            return balanced(built, &machine, device_node, peak_device);
        }
        match args.solver.as_str() {
            "spmv" => products(&built)?,
            "power" => power(built)?,
            "cg" => cg(&built, pc, variant)?,
            other => unreachable!("--solver '{other}' was checked first"),
        }
        crate::wrap_up(&rt, args.trace.as_deref(), &args.placement)?;
        Ok(())
    });
    match result {
        Err(_) if rt.is_interrupted() => crate::interrupt::stopped(&rt, args.trace.as_deref()),
        r => r,
    }
}

/// The runtime's configuration and the machine it gives, checked: a device where one
/// is needed, the memory for the matrix (generated) or the file (read whole).
fn plan(
    args: &SpmvArgs,
    stream_n: usize,
    spec: Option<&GenSpec>,
) -> Result<(Config, Machine), String> {
    let sched = if args.balance || args.on_device {
        "dmda"
    } else {
        args.sched.as_str()
    };
    let config =
        crate::placement::runtime_config(&args.placement, sched, tessera_engine::Scheduler::Ws)?
            .trace(args.trace.is_some());
    if (args.balance || args.on_device) && config.devices.is_empty() {
        return Err(
            "--balance and --on-device need a device: add --gpus all or --emu 1[:...]".into(),
        );
    }
    if !config.devices.is_empty() && !args.balance && args.solver != "spmv" {
        // The solvers' tasks have no device body: a device holds a host core and idles.
        crate::say!(
            "tessera: note: the {} solver's tasks (fused SpMV and dot, vector updates) run on CPU workers only; the device(s) stay idle and each holds a host core its worker would have had (drop --gpus/--emu, or use --balance for the device's SpMV)",
            args.solver
        );
    }
    let (sims, threads) = crate::budget::config_needs(&config);
    let mut machine = Machine {
        cpu_workers: config.workers,
        device_peak: config.devices.first().map(|d| d.peak_flops()),
        device_name: config.devices.first().map(|d| d.name()),
        device_limit: config.devices.first().and_then(|d| d.memory_limit()),
        sims,
        threads,
        stream_n,
        has_devices: !config.devices.is_empty(),
        d2d: None,
    };
    match (spec, &args.matrix) {
        (Some(g), _) => {
            let (n, csr) = (
                g.n_rows() as u64,
                g.csr_bytes().min(u64::MAX as u128) as u64,
            );
            machine.budget(args, &format!("spmv --gen {}", args.gen), n, n, csr)?;
        }
        (None, Some(path)) => {
            // The file is read whole, then its entries parsed beside it.
            let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
            crate::budget::check(
                &format!("reading {}", path.display()),
                &[("the file", size), ("its entries", size)],
                threads,
            )?;
        }
        (None, None) => unreachable!("--gen has a default"),
    }
    machine.d2d = device_copy_rate(config.devices.first());
    if args.compare_compact && machine.has_devices {
        return Err("--compare-compact times the CPU kernels: run it without devices (--gpus none, no --emu or --sim)".into());
    }
    Ok((config, machine))
}

/// Read or generate the matrix, check it for the solver (square; symmetric for CG, where
/// memory has room for the check) and the memory with its real sizes, and say so.
fn load(
    args: &SpmvArgs,
    machine: &Machine,
    spec: Option<GenSpec>,
) -> Result<(Csr, String), String> {
    let t_load = Instant::now();
    let (a, source) = match (&args.matrix, spec) {
        (Some(path), _) => (
            // Checked at the size line, before anything of the declared size exists: its
            // row pointers (the least the matrix takes) and what the run builds from its
            // dimensions.
            read_matrix_market_sized(path, |n, m| {
                let (n, m) = (n as u64, m as u64);
                let row_ptr = n.saturating_add(1).saturating_mul(8);
                machine.budget(args, &format!("spmv on {}", path.display()), n, m, row_ptr)
            })
            .map_err(|e| e.to_string())?,
            path.display().to_string(),
        ),
        (None, Some(g)) => (g.build(), args.gen.clone()),
        (None, None) => unreachable!("--gen has a default"),
    };
    let load_s = t_load.elapsed().as_secs_f64();
    let (n, m, nnz) = (a.n_rows(), a.n_cols(), a.nnz());
    if !args.balance && args.solver != "spmv" {
        check_square(&args.solver, n, m)?;
    }
    if args.solver == "cg" && args.matrix.is_some() {
        // CG assumes a symmetric matrix and does not check it; the check here builds a
        // transpose: skipped, and said, where memory has no room for it.
        let transpose = (a.nnz() as u64 * 12).saturating_add(n as u64 * 8);
        if crate::budget::check("the symmetry check", &[("a transpose", transpose)], 1).is_err() {
            crate::say!("tessera: warning: --solver cg: {source}'s symmetry not checked (no memory for its transpose)");
        } else if !a.is_symmetric() {
            crate::say!(
                "tessera: warning: --solver cg: {source} is not symmetric, and CG assumes a symmetric positive definite matrix: its iterations need not converge, nor its result mean anything"
            );
        }
    }
    if args.matrix.is_some() {
        // Now with the real sizes: the vectors follow the columns, which a small file
        // can declare by the billion.
        let mut items = buffers(
            args,
            n as u64,
            m as u64,
            a.bytes() as u64,
            machine.stream_n as u64,
            &machine.sims,
        );
        items.retain(|(what, _)| *what != "the matrix"); // read already
        crate::budget::check(&format!("spmv on {source}"), &items, machine.threads)?;
    }
    println!(
        "matrix {source}: {n} x {m}, {nnz} nonzeros, {:.1} MiB, {} in {load_s:.2} s",
        a.bytes() as f64 / (1 << 20) as f64,
        if args.matrix.is_some() {
            "read"
        } else {
            "generated"
        }
    );
    Ok((a, source))
}

/// Measure the STREAM triad, split the matrix into row blocks (placed on the device
/// with `--on-device`, whose largest task must fit it) and size an iteration.
fn build<'a>(
    args: &'a SpmvArgs,
    rt: &'a Runtime,
    machine: &Machine,
    a: Csr,
    source: String,
    device_node: usize,
) -> Result<Built<'a>, String> {
    let workers = rt.workers();
    let (n, m, nnz) = (a.n_rows(), a.n_cols(), a.nnz());
    let stream = triad(args, machine.stream_n, workers)?;
    // Balancing moves whole blocks between host and device: finer blocks, finer splits.
    // One device alone: a few blocks, unless asked for more.
    let blocks = if args.balance {
        64
    } else if args.on_device && args.blocks_per_worker.is_none() {
        ON_DEVICE_BLOCKS
    } else {
        workers.saturating_mul(args.row_blocks_per_worker())
    };
    let limit = machine
        .d2d
        .filter(|_| args.on_device)
        .map(|r| (r / 1e9, machine.device_name.clone().unwrap_or_default()));
    let compact = !args.no_compact && (args.compare_compact || a.compact_pays());
    let mut mat = SpmvMatrix::new_with(rt, &a, blocks, compact);
    println!(
        "{}",
        compact_line(mat.compact_nnz(), nnz, n, args.no_compact)
    );
    if args.on_device {
        place_on_device(&mut mat, machine, device_node)?;
    }
    let x: Vec<f64> = (0..m).map(|i| 1.0 + (i % 7) as f64 * 0.125).collect();
    // Device kernels read the `u32` column indices; CPU ones the compact ones where the
    // blocks hold them.
    let per_iter_bytes = if args.on_device || args.balance {
        spmv_bytes(nnz, n, m)
    } else {
        mat.traffic_bytes()
    };
    Ok(Built {
        args,
        rt,
        a,
        source,
        mat,
        blocks,
        has_devices: machine.has_devices,
        x,
        workers,
        stream_n: machine.stream_n,
        stream,
        per_iter_bytes,
        per_iter_flops: spmv_flops(nnz),
        limit,
    })
}

/// The STREAM triad on `workers` threads, GB/s, said.
fn triad(args: &SpmvArgs, stream_n: usize, workers: usize) -> Result<f64, String> {
    let stream =
        tessera_linalg::sparse::stream::check_rate(stream_triad(stream_n, workers, 5), workers)?
            / 1e9;
    println!(
        "STREAM triad ({workers} threads, 3 x {} MiB): {stream:.1} GB/s",
        args.stream_mi * 8
    );
    Ok(stream)
}

/// `--on-device`: the blocks' home is the device, whose memory must hold the largest
/// block's task (admission control would run a larger one on the host, and the
/// "device" rates printed would be the host's).
fn place_on_device(
    mat: &mut SpmvMatrix,
    machine: &Machine,
    device_node: usize,
) -> Result<(), String> {
    let need = mat.largest_working_set();
    if let Some(limit) = machine.device_limit.filter(|&l| need > l) {
        return Err(format!(
            "--on-device: the largest block's task needs {} on {} (its block, all of x and its part of y), more than the device's {}: it would run on the host; give the device more memory (mem=) or, when the blocks are the bulk, more --blocks-per-worker",
            tessera_engine::fmt::bytes(need),
            machine.device_name.as_deref().unwrap_or("the device"),
            tessera_engine::fmt::bytes(limit)
        ));
    }
    mat.set_home(Some(device_node));
    Ok(())
}

/// `--balance`: the power iteration with the row blocks dealt between the host's
/// workers and the device by their measured rates, one line per iteration.
fn balanced(
    mut b: Built,
    machine: &Machine,
    device_node: usize,
    peak_device: f64,
) -> Result<(), String> {
    let (args, rt) = (b.args, b.rt);
    let cpu_workers = machine.cpu_workers;
    let peak_host = args.host_peak_gflops.unwrap_or(50.0 * cpu_workers as f64) * 1e9;
    let (_, stats, log) = balanced_power_iteration(
        rt,
        &b.mat,
        std::mem::take(&mut b.x),
        args.iters,
        device_node,
        peak_host,
        peak_device,
    )
    .map_err(|e| e.to_string())?;
    println!(
        "balanced power iteration: host {cpu_workers} CPU worker(s) vs device {}",
        machine.device_name.as_deref().unwrap_or("?")
    );
    for (i, it) in log.iter().enumerate() {
        let t = &it.times;
        println!(
            "iter {:>3}: device share {:>5.1} %  host {:>8.3} ms  device {:>8.3} ms  transfer {:>8.3} ms  iteration {:>8.3} ms  | {}",
            i + 1,
            it.fraction * 100.0,
            t.host_compute * 1e3,
            t.device_compute * 1e3,
            t.transfer * 1e3,
            t.total * 1e3,
            it.log
        );
    }
    report_iter(
        &stats,
        b.per_iter_flops,
        b.per_iter_bytes,
        b.stream,
        b.limit(),
    );
    print!("{}", rt.memory_stats());
    crate::report_fallbacks(rt);
    Ok(())
}

/// `--solver spmv`: repeated products, timed whole and in rounds alternated with the
/// triad, checked against the reference loop, and compared with faer's.
fn products(b: &Built) -> Result<(), String> {
    let (args, rt) = (b.args, b.rt);
    if b.has_devices {
        // One untimed product places the devices' blocks of the matrix, as an iterative
        // solver's first iteration does; the timed products then measure the kernels,
        // not the one-time upload.
        let t = Instant::now();
        repeated_spmv(rt, &b.mat, b.x.clone(), 1).map_err(|e| e.to_string())?;
        println!(
            "warm-up: one product in {:.3} s (the matrix placed on the devices; not timed below)",
            t.elapsed().as_secs_f64()
        );
    }
    let (y, stats) =
        repeated_spmv(rt, &b.mat, b.x.clone(), args.iters).map_err(|e| e.to_string())?;
    let t = stats.spmv_seconds;
    let gbs = b.per_iter_bytes * args.iters as f64 / t / 1e9;
    println!(
        "spmv: {} iterations in {t:.3} s: {:.2} GFLOP/s",
        args.iters,
        b.per_iter_flops * args.iters as f64 / t / 1e9
    );
    println!(
        "effective {gbs:.1} GB/s = {:.0} % of STREAM triad ({:.1} GB/s)",
        gbs / b.stream * 100.0,
        b.stream
    );
    let per_round = alternating_rounds(b)?;
    if args.compare_compact {
        compare_compact(rt, &b.a, &b.mat, &b.x, b.blocks, per_round)?;
    }
    check_products(b, &y)?;
    if !args.no_faer {
        let tf = faer_spmv_seconds(&b.a, &b.x, args.iters, b.workers)?;
        println!(
            "faer sparse x dense ({} threads): {tf:.3} s, {:.2} GFLOP/s; tessera/faer = {:.2}x",
            b.workers,
            b.per_iter_flops * args.iters as f64 / tf / 1e9,
            tf / t
        );
    }
    Ok(())
}

/// Short triad and SpMV rounds alternated (a shared machine's memory bandwidth drifts
/// within a minute), with the median of the per-round ratios; returns the products per
/// round.
fn alternating_rounds(b: &Built) -> Result<usize, String> {
    let rounds = 5;
    let per_round = (b.args.iters / rounds).max(1);
    let mut ratios = Vec::new();
    for _ in 0..rounds {
        let tri = stream_triad(b.stream_n, b.workers, 2) / 1e9;
        let (_, st) =
            repeated_spmv(b.rt, &b.mat, b.x.clone(), per_round).map_err(|e| e.to_string())?;
        let g = b.per_iter_bytes * per_round as f64 / st.spmv_seconds / 1e9;
        ratios.push((g / tri, g, tri));
    }
    let in_order = ratios
        .iter()
        .map(|(r, g, t)| format!("{:.0} % ({g:.1}/{t:.1})", r * 100.0))
        .collect::<Vec<_>>()
        .join(", ");
    ratios.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (r, g, tri) = ratios[rounds / 2];
    println!(
        "alternating rounds ({rounds} x {per_round} iterations): median effective {g:.1} GB/s = {:.0} % of the triad of its round ({tri:.1} GB/s); in order, ratio (SpMV/triad GB/s): {in_order}",
        r * 100.0
    );
    Ok(per_round)
}

/// Check the products `y` (`--iters` of them, summed) against the plain reference loop.
fn check_products(b: &Built, y: &[f64]) -> Result<(), String> {
    let mut reference = vec![0.0; b.a.n_rows()];
    b.a.spmv_reference(&b.x, &mut reference);
    let k = b.args.iters as f64;
    let err = y
        .iter()
        .zip(&reference)
        .map(|(got, r)| (got - k * r).abs() / (k * r.abs()).max(1e-300))
        // Not `f64::max`, which skips NaN: one NaN must show.
        .fold(0.0f64, |m, e| {
            if e.is_nan() || m.is_nan() {
                f64::NAN
            } else {
                m.max(e)
            }
        });
    println!("check: max relative difference from the reference loop {err:.1e}");
    // A product (or its repeated sum) past f64 is the matrix's, whichever loop
    // computes it: no kernel is blamed for it.
    if reference.iter().any(|r| !(k * r).is_finite()) {
        return Err(format!(
            "{}: A·x, summed over {} iterations, overflows f64 (its entries are too large): the result cannot be checked, and no kernel is at fault",
            b.source, b.args.iters
        ));
    }
    if err.is_nan() || err > 1e-10 {
        return Err(format!("SpMV result differs from the reference ({err:e})"));
    }
    Ok(())
}

/// `--solver power`: the power iteration, its estimates and its rates.
fn power(mut b: Built) -> Result<(), String> {
    let x = std::mem::take(&mut b.x);
    let (_, stats) = power_iteration(b.rt, &b.mat, x, b.args.iters).map_err(|e| e.to_string())?;
    for (i, l) in stats.history.iter().enumerate() {
        println!("power {:>4}: ||A x|| = {l:.12e}", i + 1);
    }
    solver_report(&b, &stats, 24.0 * b.a.n_rows() as f64);
    Ok(())
}

/// A solver's rates: against the STREAM triad measured again next to the run, and split
/// between the SpMV and the vector work of `vector_bytes` per iteration.
fn solver_report(b: &Built, stats: &tessera_linalg::spmv::IterStats, vector_bytes: f64) {
    let stream = stream_next_to_the_run(b.stream, b.stream_n, b.workers);
    report_iter(stats, b.per_iter_flops, b.per_iter_bytes, stream, b.limit());
    print!(
        "{}",
        solver_lines(stats, b.per_iter_bytes, vector_bytes, stream, None)
    );
}

/// `--solver cg` on `b = 1`: the residuals, why it stopped, the true residual and the
/// rates.
fn cg(b: &Built, pc: Preconditioner, variant: CgVariant) -> Result<(), String> {
    let n = b.a.n_rows();
    let rhs = vec![1.0; n];
    let opts = CgOptions {
        rtol: b.args.tol,
        max_iters: b.args.iters,
        pc,
        variant,
    };
    let (xs, stats) = tessera_linalg::solver::conjugate_gradient(b.rt, &b.mat, &rhs, &opts)
        .map_err(|e| e.to_string())?;
    for (i, r) in stats.history.iter().enumerate() {
        println!("cg {:>4}: ||r||/||b|| = {r:.3e}", i + 1);
    }
    println!("{}", stop_line(&stats, &opts));
    let mut ax = vec![0.0; n];
    b.a.spmv_reference(&xs, &mut ax);
    let res = ax
        .iter()
        .zip(&rhs)
        .map(|(p, q)| (p - q) * (p - q))
        .sum::<f64>()
        .sqrt()
        / (n as f64).sqrt();
    print!("{}", true_residual_lines(res, &stats, &opts));
    solver_report(b, &stats, cg_bytes(n, pc, variant));
    Ok(())
}

/// faer's sparse×dense product `y += A·x`, `iters` times, 2 threads when available; seconds.
fn faer_spmv_seconds(a: &Csr, x: &[f64], iters: usize, threads: usize) -> Result<f64, String> {
    let row_ptr: Vec<u32> = a
        .row_ptr()
        .iter()
        .map(|&p| {
            u32::try_from(p).map_err(|_| "matrix too large for faer's u32 indices".to_string())
        })
        .collect::<Result<_, _>>()?;
    let sym =
        SymbolicSparseRowMatRef::new_checked(a.n_rows(), a.n_cols(), &row_ptr, None, a.col_idx());
    let mat = SparseRowMatRef::new(sym, a.vals());
    let xm = Mat::from_fn(a.n_cols(), 1, |i, _| x[i]);
    let mut y = Mat::<f64>::zeros(a.n_rows(), 1);
    let par = if threads > 1 {
        Par::rayon(threads)
    } else {
        Par::Seq
    };
    let t0 = Instant::now();
    for _ in 0..iters {
        sparse_dense_matmul(y.as_mut(), Accum::Add, mat, xm.as_ref(), 1.0, par);
    }
    Ok(t0.elapsed().as_secs_f64())
}

/// `--compare-compact`: the same products with the blocks' `u32` column indices and with
/// their compact ones, in alternated rounds in this process (this VM's memory bandwidth
/// drifts within a minute, so separate runs compare badly); prints each round's times and
/// the median ratio.
fn compare_compact(
    rt: &Runtime,
    a: &Csr,
    compact: &SpmvMatrix,
    x: &[f64],
    blocks: usize,
    per_round: usize,
) -> Result<(), String> {
    let full = SpmvMatrix::new_with(rt, a, blocks, false);
    let rounds = 11;
    let mut pairs = Vec::with_capacity(rounds);
    for r in 0..rounds {
        let time = |m: &SpmvMatrix| -> Result<f64, String> {
            let (_, st) = repeated_spmv(rt, m, x.to_vec(), per_round).map_err(|e| e.to_string())?;
            Ok(st.spmv_seconds / per_round as f64 * 1e3)
        };
        // Which goes first alternates too.
        let (u, c) = if r % 2 == 0 {
            let u = time(&full)?;
            (u, time(compact)?)
        } else {
            let c = time(compact)?;
            (time(&full)?, c)
        };
        pairs.push((u, c));
    }
    let in_order = pairs
        .iter()
        .map(|(u, c)| format!("{u:.2}/{c:.2}"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut ratios: Vec<f64> = pairs.iter().map(|(u, c)| u / c).collect();
    ratios.sort_by(f64::total_cmp);
    println!(
        "compact column indices ({:.1} % of the nonzeros): median u32 time / compact time {:.3} over {rounds} alternated rounds of {per_round} products; in order, ms per product (u32/compact): {in_order}",
        100.0 * compact.compact_nnz() as f64 / a.nnz().max(1) as f64,
        ratios[rounds / 2]
    );
    Ok(())
}

/// A GPU's device-to-device copy rate in bytes/s (SpMV's physical limit on
/// it); `None` for other devices.
#[cfg(feature = "cuda")]
fn device_copy_rate(
    dev: Option<&std::sync::Arc<dyn tessera_engine::device::Device>>,
) -> Option<f64> {
    let gpu = dev?
        .as_any()
        .downcast_ref::<tessera_backends::cuda::CudaDevice>()?;
    match tessera_backends::cuda::kernels::d2d_bandwidth(gpu, 256 << 20) {
        Ok(rate) => Some(rate),
        Err(e) => {
            crate::say!("tessera: device-to-device bandwidth not measured: {e}");
            None
        }
    }
}

#[cfg(not(feature = "cuda"))]
fn device_copy_rate(
    _dev: Option<&std::sync::Arc<dyn tessera_engine::device::Device>>,
) -> Option<f64> {
    None
}

fn report_iter(
    stats: &tessera_linalg::spmv::IterStats,
    flops: f64,
    bytes: f64,
    stream: f64,
    device_limit: Option<(f64, &str)>,
) {
    let k = stats.iterations as f64;
    let t = stats.spmv_seconds.max(f64::MIN_POSITIVE);
    let gbs = bytes * k / t / 1e9;
    println!(
        "{} iterations in {:.3} s ({:.3} s in SpMV): SpMV {:.2} GFLOP/s, effective {gbs:.1} GB/s = {:.0} % of STREAM triad ({stream:.1} GB/s)",
        stats.iterations,
        stats.total_seconds,
        t,
        flops * k / t / 1e9,
        gbs / stream * 100.0
    );
    print!("{}", past_stream_note(gbs / stream));
    if let Some((rate, name)) = device_limit {
        println!(
            "effective {gbs:.1} GB/s = {:.0} % of {name}'s device-to-device copy ({rate:.1} GB/s, measured in this run)",
            gbs / rate * 100.0
        );
    }
}

/// The STREAM reference of a solver's ratios: the triad measured again right after the
/// run (best of 5 repetitions), and the better of that and the figure measured before it
/// (`before`, GB/s). The bandwidth of a shared machine moves between minutes: one figure,
/// measured away from the run, made a CG read 170 % of it (issue 42).
fn stream_next_to_the_run(before: f64, stream_n: usize, workers: usize) -> f64 {
    let after =
        tessera_linalg::sparse::stream::check_rate(stream_triad(stream_n, workers, 5), workers)
            .map_or(0.0, |r| r / 1e9);
    let best = before.max(after);
    println!(
        "STREAM triad again after the run: {after:.1} GB/s; the ratios use the better, {best:.1} GB/s"
    );
    best
}
