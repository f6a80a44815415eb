//! `tessera spmv`: the SpMV driver. Reads a Matrix Market file or generates a
//! matrix, runs repeated SpMV, power iteration or CG as task graphs over row
//! blocks, and reports GFLOP/s and effective bandwidth against the STREAM
//! triad measured by this same program, and faer's sparse×dense product on
//! the same matrix in the same run. Under `mpirun` with several ranks (feature
//! `mpi`) it runs distributed instead (`super::spmv_dist`).

use std::time::Instant;

use faer::sparse::linalg::matmul::sparse_dense_matmul;
use faer::sparse::{SparseRowMatRef, SymbolicSparseRowMatRef};
use faer::{Accum, Mat, Par};
use tessera_engine::Runtime;
use tessera_linalg::solver::{check_square, CgOptions, CgVariant, Preconditioner};
use tessera_linalg::sparse::csr::Csr;
use tessera_linalg::sparse::mm::read_matrix_market_sized;
use tessera_linalg::sparse::stream::stream_triad;
use tessera_linalg::spmv::{balanced_power_iteration, power_iteration, repeated_spmv, SpmvMatrix};
use tessera_tasks::kernels::{spmv_bytes, spmv_flops};

use crate::args::SpmvArgs;
use crate::spmv::plan::{cg_bytes, check_cg_options, stream_elems};
use crate::spmv::report::{
    compact_line, past_stream_note, solver_lines, stop_line, true_residual_lines,
};

/// Row blocks of `--on-device` by default: each is a device task that ends
/// in a stream synchronisation, so a device gets a few large ones.
const ON_DEVICE_BLOCKS: usize = 4;

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

/// Every big buffer of a run on an `n × m` matrix of `csr` bytes, for
/// [`crate::budget::check`].
fn buffers(
    args: &SpmvArgs,
    n: u64,
    m: u64,
    csr: u64,
    stream: u64,
    sims: &[Option<u64>],
) -> Vec<(&'static str, u64)> {
    let vectors = 10u64.saturating_mul(n.max(m)).saturating_mul(8);
    let replicas = sims
        .iter()
        .map(|l| l.map_or(csr, |l| l.min(csr)))
        .fold(0u64, u64::saturating_add);
    let faer = if args.no_faer || args.balance || args.solver != "spmv" {
        0
    } else {
        n.saturating_mul(4) + (n + m).saturating_mul(8)
    };
    // At most 2 bytes per nonzero and 4 per row (`Csr::with_compact_columns`); a nonzero
    // takes at least 12 of the matrix's bytes, so a sixth of them bounds it.
    let compact = if args.no_compact { 0 } else { csr / 6 + n * 4 };
    vec![
        ("the matrix", csr),
        ("its row blocks", csr),
        ("their compact column indices", compact),
        (
            "a u32 copy of the blocks (--compare-compact)",
            if args.compare_compact { csr } else { 0 },
        ),
        ("replicas on emulated devices", replicas),
        ("vectors", vectors),
        ("STREAM arrays", stream.saturating_mul(24)),
        ("faer's copy", faer),
    ]
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

pub fn run(args: SpmvArgs) -> Result<(), String> {
    if args.compare_compact
        && (args.solver != "spmv" || args.on_device || args.balance || args.simulate.is_some())
    {
        return Err("--compare-compact times the plain SpMV (--solver spmv) on CPU workers only: leave out --solver, --on-device, --balance and --simulate".into());
    }
    if let Some(platform) = &args.simulate {
        return crate::simulate::spmv(&args, platform);
    }
    let ranks = crate::ranks::Ranks::join()?;
    if ranks.size > 1 {
        if args.compare_compact {
            return Err("--compare-compact runs in one process (not under mpirun)".into());
        }
        return super::spmv_dist::run(args, ranks);
    }
    // Every argument is checked before anything is built or measured.
    if args.iters == 0 {
        return Err("--iters must be at least 1".into());
    }
    if !args.balance && !matches!(args.solver.as_str(), "spmv" | "power" | "cg") {
        return Err(format!(
            "unknown --solver '{}' (known: spmv, power, cg)",
            args.solver
        ));
    }
    tessera_linalg::solver::cg::check_rtol(args.tol)?;
    let pc: Preconditioner = args.pc.parse()?;
    let variant: CgVariant = args.cg.parse()?;
    check_cg_options(&args.solver, pc, variant)?;
    let stream_n = stream_elems(args.stream_mi)?;
    let spec = match &args.matrix {
        Some(path) => {
            tessera_linalg::sparse::mm::check_regular_file(path).map_err(|e| e.to_string())?;
            None
        }
        None => Some(tessera_linalg::sparse::gen::GenSpec::parse(&args.gen)?),
    };
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
        // Measured on an H200 node: `--solver cg --gpus all` ran 15.8 ms per
        // iteration against 12.8 without the GPU, which took a core and did nothing.
        eprintln!(
            "tessera: note: the {} solver's tasks (fused SpMV and dot, vector updates) run on CPU workers only; the device(s) stay idle and each holds a host core its worker would have had (drop --gpus/--emu, or use --balance for the device's SpMV)",
            args.solver
        );
    }
    let cpu_workers = config.workers;
    let device_peak = config.devices.first().map(|d| d.peak_flops());
    let device_name = config.devices.first().map(|d| d.name());
    let device_limit = config.devices.first().and_then(|d| d.memory_limit());
    let (sims, threads) = crate::budget::config_needs(&config);
    let budget = |what: &str, n: u64, m: u64, csr: u64| {
        crate::budget::check(
            what,
            &buffers(&args, n, m, csr, stream_n as u64, &sims),
            threads,
        )
    };
    match (&spec, &args.matrix) {
        (Some(g), _) => {
            let (n, csr) = (
                g.n_rows() as u64,
                g.csr_bytes().min(u64::MAX as u128) as u64,
            );
            budget(&format!("spmv --gen {}", args.gen), n, n, csr)?;
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
    let d2d = device_copy_rate(config.devices.first());
    let has_devices = !config.devices.is_empty();
    if args.compare_compact && has_devices {
        return Err("--compare-compact times the CPU kernels: run it without devices (--gpus none, no --emu or --sim)".into());
    }
    let rt = Runtime::new(config).map_err(|e| e.to_string())?;
    let result = crate::interrupt::watch(&rt, || {
        // The first device's memory node (checked above that there is a device
        // when it is used).
        let device_node = rt.device_nodes().first().copied().unwrap_or(1);
        let workers = rt.workers();

        let t_load = Instant::now();
        let (a, source) = match (&args.matrix, spec) {
            (Some(path), _) => (
                // Checked at the size line, before anything of the declared
                // size exists: its row pointers (the least the matrix takes)
                // and what the run builds from its dimensions. A three-line
                // file declaring 2.5e9 rows had the process killed for memory.
                read_matrix_market_sized(path, |n, m| {
                    let (n, m) = (n as u64, m as u64);
                    let row_ptr = n.saturating_add(1).saturating_mul(8);
                    budget(&format!("spmv on {}", path.display()), n, m, row_ptr)
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
            // Issue 42: CG ran on a matrix that is not symmetric without a
            // word (PETSc's KSPCG does not check either). The check builds a
            // transpose: skipped, and said, where memory has no room for it.
            let transpose = (a.nnz() as u64 * 12).saturating_add(n as u64 * 8);
            if crate::budget::check("the symmetry check", &[("a transpose", transpose)], 1).is_err()
            {
                eprintln!("tessera: warning: --solver cg: {source}'s symmetry not checked (no memory for its transpose)");
            } else if !a.is_symmetric() {
                eprintln!(
                    "tessera: warning: --solver cg: {source} is not symmetric, and CG assumes a symmetric positive definite matrix: its iterations need not converge, nor its result mean anything"
                );
            }
        }
        if args.matrix.is_some() {
            // Now with the real sizes: the vectors follow the columns, which a
            // 60-byte file can declare by the billion.
            let mut items = buffers(
                &args,
                n as u64,
                m as u64,
                a.bytes() as u64,
                stream_n as u64,
                &sims,
            );
            items.retain(|(what, _)| *what != "the matrix"); // read already
            crate::budget::check(&format!("spmv on {source}"), &items, threads)?;
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

        let stream = tessera_linalg::sparse::stream::check_rate(
            stream_triad(stream_n, workers, 5),
            workers,
        )? / 1e9;
        println!(
            "STREAM triad ({workers} threads, 3 x {} MiB): {stream:.1} GB/s",
            args.stream_mi * 8
        );

        // Balancing moves whole blocks between host and device: finer blocks, finer splits.
        // One device alone: a few blocks, unless asked for more.
        let blocks = if args.balance {
            64
        } else if args.on_device && args.blocks_per_worker.is_none() {
            ON_DEVICE_BLOCKS
        } else {
            workers.saturating_mul(args.row_blocks_per_worker())
        };
        // On one device alone, its copy rate is the physical limit to compare with.
        let limit = d2d
            .filter(|_| args.on_device)
            .map(|r| (r / 1e9, device_name.clone().unwrap_or_default()));
        let limit = limit.as_ref().map(|(r, n)| (*r, n.as_str()));
        let compact = !args.no_compact && (args.compare_compact || a.compact_pays());
        let mut mat = SpmvMatrix::new_with(&rt, &a, blocks, compact);
        println!(
            "{}",
            compact_line(mat.compact_nnz(), nnz, n, args.no_compact)
        );
        if args.on_device {
            let need = mat.largest_working_set();
            if let Some(limit) = device_limit.filter(|&l| need > l) {
                // Admission control would run such blocks on the host, and the
                // "device" rates printed would be the host's.
                return Err(format!(
                "--on-device: the largest block's task needs {} on {} (its block, all of x and its part of y), more than the device's {}: it would run on the host; give the device more memory (mem=) or, when the blocks are the bulk, more --blocks-per-worker",
                tessera_engine::fmt::bytes(need),
                device_name.as_deref().unwrap_or("the device"),
                tessera_engine::fmt::bytes(limit)
            ));
            }
            mat.set_home(Some(device_node));
        }
        let x: Vec<f64> = (0..m).map(|i| 1.0 + (i % 7) as f64 * 0.125).collect();
        // Device kernels read the `u32` column indices; CPU ones the compact ones where the
        // blocks hold them.
        let per_iter_bytes = if args.on_device || args.balance {
            spmv_bytes(nnz, n, m)
        } else {
            mat.traffic_bytes()
        };
        let per_iter_flops = spmv_flops(nnz);

        if let Some(peak_device) = device_peak.filter(|_| args.balance) {
            let peak_host = args.host_peak_gflops.unwrap_or(50.0 * cpu_workers as f64) * 1e9;
            let (_, stats, log) = balanced_power_iteration(
                &rt,
                &mat,
                x,
                args.iters,
                device_node,
                peak_host,
                peak_device,
            )
            .map_err(|e| e.to_string())?;
            println!(
                "balanced power iteration: host {cpu_workers} CPU worker(s) vs device {}",
                device_name.as_deref().unwrap_or("?")
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
            report_iter(&stats, per_iter_flops, per_iter_bytes, stream, limit);
            print!("{}", rt.memory_stats());
            crate::report_fallbacks(&rt);
            return Ok(());
        }
        match args.solver.as_str() {
            "spmv" => {
                if has_devices {
                    // One untimed product places the devices' blocks of the
                    // matrix, as an iterative solver's first iteration does:
                    // timed, the one-time upload was most of "50 iterations"
                    // on an H200 (0.24 s of 0.30 s; its tasks then took
                    // 0.3 ms each).
                    let t = Instant::now();
                    repeated_spmv(&rt, &mat, x.clone(), 1).map_err(|e| e.to_string())?;
                    println!(
                        "warm-up: one product in {:.3} s (the matrix placed on the devices; not timed below)",
                        t.elapsed().as_secs_f64()
                    );
                }
                let (y, stats) =
                    repeated_spmv(&rt, &mat, x.clone(), args.iters).map_err(|e| e.to_string())?;
                let t = stats.spmv_seconds;
                let gbs = per_iter_bytes * args.iters as f64 / t / 1e9;
                println!(
                    "spmv: {} iterations in {t:.3} s: {:.2} GFLOP/s",
                    args.iters,
                    per_iter_flops * args.iters as f64 / t / 1e9
                );
                println!(
                    "effective {gbs:.1} GB/s = {:.0} % of STREAM triad ({stream:.1} GB/s)",
                    gbs / stream * 100.0
                );
                // This VM's memory bandwidth drifts by up to 2x within a minute,
                // so also alternate short triad and SpMV rounds and report the
                // median of the per-round ratios.
                let rounds = 5;
                let per_round = (args.iters / rounds).max(1);
                let mut ratios = Vec::new();
                for _ in 0..rounds {
                    let tri = stream_triad(stream_n, workers, 2) / 1e9;
                    let (_, st) = repeated_spmv(&rt, &mat, x.clone(), per_round)
                        .map_err(|e| e.to_string())?;
                    let g = per_iter_bytes * per_round as f64 / st.spmv_seconds / 1e9;
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
                if args.compare_compact {
                    compare_compact(&rt, &a, &mat, &x, blocks, per_round)?;
                }
                // Check one result against the plain reference loop.
                let mut reference = vec![0.0; n];
                a.spmv_reference(&x, &mut reference);
                let k = args.iters as f64;
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
                // Issue 42: entries near f64's end overflowed, and the kernel
                // was blamed. A product (or its repeated sum) past f64 is the
                // matrix's, whichever loop computes it.
                if reference.iter().any(|r| !(k * r).is_finite()) {
                    return Err(format!(
                        "{source}: A·x, summed over {} iterations, overflows f64 (its entries are too large): the result cannot be checked, and no kernel is at fault",
                        args.iters
                    ));
                }
                if err.is_nan() || err > 1e-10 {
                    return Err(format!("SpMV result differs from the reference ({err:e})"));
                }
                if !args.no_faer {
                    let tf = faer_spmv_seconds(&a, &x, args.iters, workers)?;
                    println!(
                    "faer sparse x dense ({workers} threads): {tf:.3} s, {:.2} GFLOP/s; tessera/faer = {:.2}x",
                    per_iter_flops * args.iters as f64 / tf / 1e9,
                    tf / t
                );
                }
            }
            "power" => {
                let (_, stats) =
                    power_iteration(&rt, &mat, x, args.iters).map_err(|e| e.to_string())?;
                for (i, l) in stats.history.iter().enumerate() {
                    println!("power {:>4}: ||A x|| = {l:.12e}", i + 1);
                }
                let stream = stream_next_to_the_run(stream, stream_n, workers);
                report_iter(&stats, per_iter_flops, per_iter_bytes, stream, limit);
                print!(
                    "{}",
                    solver_lines(&stats, per_iter_bytes, 24.0 * n as f64, stream, None)
                );
            }
            "cg" => {
                let b = vec![1.0; n];
                let opts = CgOptions {
                    rtol: args.tol,
                    max_iters: args.iters,
                    pc,
                    variant,
                };
                let (xs, stats) = tessera_linalg::solver::conjugate_gradient(&rt, &mat, &b, &opts)
                    .map_err(|e| e.to_string())?;
                for (i, r) in stats.history.iter().enumerate() {
                    println!("cg {:>4}: ||r||/||b|| = {r:.3e}", i + 1);
                }
                println!("{}", stop_line(&stats, &opts));
                let mut ax = vec![0.0; n];
                a.spmv_reference(&xs, &mut ax);
                let res = ax
                    .iter()
                    .zip(&b)
                    .map(|(p, q)| (p - q) * (p - q))
                    .sum::<f64>()
                    .sqrt()
                    / (n as f64).sqrt();
                print!("{}", true_residual_lines(res, &stats, &opts));
                let stream = stream_next_to_the_run(stream, stream_n, workers);
                report_iter(&stats, per_iter_flops, per_iter_bytes, stream, limit);
                print!(
                    "{}",
                    solver_lines(
                        &stats,
                        per_iter_bytes,
                        cg_bytes(n, pc, variant),
                        stream,
                        None
                    )
                );
            }
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
            eprintln!("tessera: device-to-device bandwidth not measured: {e}");
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
