//! The HPL-style LU in one process: plan the runtime and check the memory,
//! factor and solve under a progress bar, then print HPL's result block with
//! the scaled residual check.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use tessera_engine::{Config, Runtime};
use tessera_linalg::hpl::{generate_matrix, generate_rhs, hpl_flops, hpl_residual, HPL_THRESHOLD};
use tessera_linalg::lu::resident::ResidentOptions;
use tessera_linalg::lu::{lu_factor, solve_from_factors, LuOptions};

use super::plan::{buffers, progress_bar, warn_if_overhead_bound};
use crate::args::LuArgs;
use crate::report::{passed, print_hpl_block, print_lu_shape, print_split_shares, residual_line};

/// What a finished factorisation hands to the report: each device's share
/// of the work, the right-hand side and the solution, and the seconds it took.
struct Factored {
    shares: Vec<(usize, f64)>,
    b: Vec<f64>,
    x: Vec<f64>,
    time: f64,
}

/// The single-process LU; `resident` is `--update resident`'s options when
/// given (else chosen once the devices are known).
pub fn run(args: &LuArgs, resident: Option<ResidentOptions>) -> Result<(), String> {
    let (config, gpu_dgemm) = plan(args)?;
    let devices = config.devices.clone();
    let rt = Runtime::new(config).map_err(|e| e.to_string())?;
    let resident = resident.or_else(|| super::resident::auto(args, &rt));
    super::resident::check_no_pin(args, resident)?;
    if let Some(resident) = resident {
        return super::resident::run(args, &rt, resident, gpu_dgemm);
    }
    let opts = args.lu_options(&rt)?;
    warm_up_gpus(&devices, args.nb().min(args.n))?;
    let done = match factor(args, &rt, &opts) {
        Ok(done) => done,
        Err(_) if rt.is_interrupted() => {
            return crate::interrupt::stopped(&rt, args.trace.as_deref())
        }
        Err(e) => return Err(format!("LU failed: {e}")),
    };
    report(args, &rt, &opts, done, gpu_dgemm)
}

/// The runtime's configuration, checked against the machine's memory, and the
/// GPUs' own dgemm rate (cuBLAS, measured when each was opened): the LU's
/// physical reference on a GPU run.
fn plan(args: &LuArgs) -> Result<(Config, f64), String> {
    let config = crate::placement::runtime_config(
        &args.placement,
        &args.sched,
        tessera_engine::Scheduler::Prio,
    )?
    .trace(args.trace.is_some());
    let (sims, threads) = crate::budget::config_needs(&config);
    crate::budget::check(
        &format!("lu --n {} --nb {}", args.n, args.nb()),
        &buffers(args.n, args.nb(), &sims),
        threads,
    )?;
    warn_if_overhead_bound(args.n, args.nb());
    let gpu_dgemm: f64 = config
        .devices
        .iter()
        .filter(|d| d.arch() == "cuda")
        .map(|d| d.peak_flops())
        .sum();
    Ok((config, gpu_dgemm))
}

/// Runs the tile LU's operations once on each GPU, before the clock (see
/// `tessera_backends::cuda::warm`: their libraries and kernels load at first
/// use, seconds on a freshly started node, while dmda gives the waiting
/// GPU's work to the CPU workers).
#[cfg(feature = "cuda")]
fn warm_up_gpus(
    devices: &[std::sync::Arc<dyn tessera_engine::device::Device>],
    nb: usize,
) -> Result<(), String> {
    for dev in devices {
        if let Some(gpu) = dev
            .as_any()
            .downcast_ref::<tessera_backends::cuda::CudaDevice>()
        {
            let t = Instant::now();
            tessera_backends::cuda::warm_up_lu(gpu, nb)?;
            crate::say!(
                "tessera: {}: the tile operations warmed up in {:.2} s, before the clock",
                dev.name(),
                t.elapsed().as_secs_f64()
            );
        }
    }
    Ok(())
}

#[cfg(not(feature = "cuda"))]
fn warm_up_gpus(
    _devices: &[std::sync::Arc<dyn tessera_engine::device::Device>],
    _nb: usize,
) -> Result<(), String> {
    Ok(())
}

/// Generate the matrix, factor it and solve, timed, with a progress bar.
fn factor(args: &LuArgs, rt: &Runtime, opts: &LuOptions) -> Result<Factored, String> {
    let (n, nb) = (args.n, args.nb());
    let a = generate_matrix(n, nb, args.seed);
    let b = generate_rhs(n, args.seed);

    let t0 = Instant::now();
    let finished = AtomicBool::new(false);
    let (result, time) = std::thread::scope(|s| {
        let finished = &finished;
        let bar = s.spawn(move || progress_bar(hpl_flops(n), || rt.flops_done(), finished));
        let result = crate::interrupt::watch(rt, || lu_factor(rt, a, opts));
        let result = result.map(|lu| {
            let x = solve_from_factors(&lu.factors, &lu.ipiv, &b);
            (lu.device_shares, x)
        });
        let time = t0.elapsed().as_secs_f64();
        finished.store(true, Ordering::Relaxed);
        let _ = bar.join();
        (result, time)
    });
    let (shares, x) = result.map_err(|e| e.to_string())?;
    Ok(Factored { shares, b, x, time })
}

/// HPL's block, the run's shape, the devices' shares and the residual check.
fn report(
    args: &LuArgs,
    rt: &Runtime,
    opts: &LuOptions,
    done: Factored,
    gpu_dgemm: f64,
) -> Result<(), String> {
    let (n, nb) = (args.n, args.nb());
    let Factored { shares, b, x, time } = done;
    let gflops = hpl_flops(n) / time / 1e9;
    let resid = hpl_residual(n, nb, args.seed, &x, &b);

    let tv = format!("TS{}{}", rt.scheduler_name().to_uppercase(), rt.workers());
    print_hpl_block(&tv, n, nb, (1, 1), time, gflops, &residual_line(resid));
    print_lu_shape(rt, n, nb, opts);

    print_split_shares(&shares);
    if gpu_dgemm > 0.0 {
        println!(
            "LU {gflops:.1} GFLOP/s = {:.1} % of the GPUs' cuBLAS dgemm ({:.1} GFLOP/s, measured in this run)",
            gflops * 1e9 / gpu_dgemm * 100.0,
            gpu_dgemm / 1e9
        );
    }
    crate::wrap_up(rt, args.trace.as_deref(), &args.placement)?;
    if !passed(resid) {
        return Err(format!(
            "residual check FAILED ({resid:e} >= {HPL_THRESHOLD})"
        ));
    }
    Ok(())
}
