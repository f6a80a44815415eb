//! Worker placement options shared by the drivers: bind one worker per core
//! (NUMA siblings adjacent, hierarchical stealing) unless told otherwise.

use std::sync::Arc;
use tessera_backends::cpu::{
    apply_worker_map, current_thread_cpus, format_cpu_list, parse_cpu_list, plan, share_cpus,
    CpuSelection, PlacementConfig, Topology, WorkerMap,
};

use tessera_backends::emu::{EmuConfig, EmuDevice};
use tessera_engine::device::Device;
use tessera_engine::perfmodel::PerfModels;
use tessera_engine::{Config, Scheduler};

/// Placement options of every driver.
#[derive(clap::Args, Debug, Clone)]
pub struct PlacementArgs {
    /// Worker threads (default: one per core of the selected CPUs).
    #[arg(long, value_parser = at_least_one)]
    pub workers: Option<usize>,
    /// CPUs to run workers on, as a Linux cpu list (e.g. `0-3,8`); default:
    /// the CPUs this process may use.
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// Do not bind workers to cores.
    #[arg(long)]
    pub no_bind: bool,
    /// Add N emulated accelerators (devices that run their bodies on a host
    /// thread and take their modelled time; not `--simulate`):
    /// `N[:speed=S,latency=L,bandwidth=B,mem=M,...]`
    /// (e.g. `1:speed=0.5,latency=20us,bandwidth=10GB,mem=256MiB`); repeat for
    /// devices of unlike speeds. Each gets a device worker; with devices, CPU
    /// workers default to one per core minus one per device (a host core
    /// drives each device).
    #[arg(long, value_name = "SPEC")]
    pub emu: Vec<String>,
    /// The old name of `--emu` (renamed so that "sim" means `--simulate`
    /// only); still accepted, with a warning.
    #[arg(long = "sim", value_name = "SPEC", hide = true)]
    pub sim_renamed: Vec<String>,
    /// GPUs to use: `none`, `all` (CPU-only, said once, when there is none),
    /// a count (`2`) or a list of indices (`0,2`). Each gets a device
    /// worker on a host core of its own.
    #[arg(long, value_name = "SPEC", default_value = "none", value_parser = gpu_spec)]
    pub gpus: String,
    /// Load performance models from DIR and save them there at the end.
    #[arg(long, value_name = "DIR")]
    pub perfmodel_dir: Option<std::path::PathBuf>,
}

impl PlacementArgs {
    /// The emulated devices asked for: `--emu`'s specs, then those given
    /// under the old name `--sim` (said once on stderr).
    pub fn emu_specs(&self) -> Vec<String> {
        if !self.sim_renamed.is_empty() {
            crate::say!(
                "tessera: warning: --sim was renamed --emu (an emulated device); --sim still works for now"
            );
        }
        self.emu.iter().chain(&self.sim_renamed).cloned().collect()
    }
}

/// A count option that must be at least 1 (`--workers`, `--reps`, ...), as
/// clap's value parser: `0` is refused at parse time, before any work.
pub fn at_least_one(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("'{s}' is not a count ({e})")),
    }
}

/// A rate in GFLOP/s, positive and at most 10^9 (an exaflop per second), so
/// that the FLOP/s derived from it are finite: `--host-peak-gflops 0` or
/// `1e308` had panicked in the balancer.
pub fn gflops(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(x) if x > 0.0 && x <= 1e9 => Ok(x),
        Ok(_) => Err(format!(
            "{} GFLOP/s: must be positive and at most 1e9 (an exaflop per second)",
            s.trim()
        )),
        Err(e) => Err(format!("'{s}' is not a rate in GFLOP/s ({e})")),
    }
}

/// The syntax of `--gpus` (`none`, `all`, a count, a list such as `0,2`),
/// checked at parse time: `--gpus abc` is a usage error, whether or not a
/// CUDA driver is there to say anything else.
pub fn gpu_spec(s: &str) -> Result<String, String> {
    let t = s.trim();
    if matches!(t, "none" | "all") {
        return Ok(t.to_string());
    }
    let body = t.strip_suffix(',').unwrap_or(t);
    if !body.is_empty() && body.split(',').all(|g| g.trim().parse::<usize>().is_ok()) {
        return Ok(t.to_string());
    }
    Err(format!(
        "'{s}' is not a GPU spec: expected none, all, a count such as 2 or a list such as 0,2"
    ))
}

/// Every device the options ask for: GPUs first (`cuda0`, ...), then emulated
/// devices. Opening a GPU measures it, so call this once per run.
pub fn devices(args: &PlacementArgs) -> Result<Vec<Arc<dyn Device>>, String> {
    let mut devices = gpu_devices(&args.gpus)?;
    devices.extend(emu_devices(&args.emu_specs())?);
    Ok(devices)
}

/// The GPUs `--gpus` asks for, each described once on stderr.
#[cfg(feature = "cuda")]
fn gpu_devices(spec: &str) -> Result<Vec<Arc<dyn Device>>, String> {
    use tessera_backends::cuda;
    if spec.trim() == "none" {
        return Ok(Vec::new());
    }
    // CUDA numbers GPUs fastest first by default; in PCI bus order they match
    // the topology's `gpus_near` list, which places each device worker on a
    // core near its GPU. Set before the driver initialises (no thread yet).
    if std::env::var_os("CUDA_DEVICE_ORDER").is_none() {
        std::env::set_var("CUDA_DEVICE_ORDER", "PCI_BUS_ID");
    }
    if let Err(reason) = cuda::detect() {
        if spec.trim() == "all" {
            crate::say!("tessera: --gpus all: {reason}; running CPU-only");
            return Ok(Vec::new());
        }
        return Err(format!("--gpus {spec}: {reason}"));
    }
    let gpus = cuda::open_spec(spec)?;
    for g in &gpus {
        crate::say!(
            "tessera: {} = {}: cuBLAS dgemm {:.0} GFLOP/s measured at start",
            g.name(),
            g.info(),
            g.dgemm_gflops()
        );
    }
    Ok(gpus.into_iter().map(|g| g as Arc<dyn Device>).collect())
}

/// Without the `cuda` feature there are no GPUs to open.
#[cfg(not(feature = "cuda"))]
fn gpu_devices(spec: &str) -> Result<Vec<Arc<dyn Device>>, String> {
    match spec.trim() {
        "none" => Ok(Vec::new()),
        "all" => {
            crate::say!("tessera: --gpus all: this tessera was built without the cuda feature; running CPU-only");
            Ok(Vec::new())
        }
        _ => Err(format!(
            "--gpus {spec}: this tessera was built without the cuda feature (cargo build --release --features cuda)"
        )),
    }
}

/// The scheduler for `sched`: `auto` is `dmda` when there are devices,
/// `cpu_default` otherwise.
pub fn resolve_sched(
    sched: &str,
    devices: usize,
    cpu_default: Scheduler,
) -> Result<Scheduler, String> {
    match sched {
        "auto" if devices > 0 => Ok(Scheduler::Dmda),
        "auto" => Ok(cpu_default),
        other => other
            .parse()
            .map_err(|e: String| format!("--sched: {e} or auto")),
    }
}

/// The emulated devices the `--emu` options ask for.
pub fn emu_devices(specs: &[String]) -> Result<Vec<Arc<dyn Device>>, String> {
    let mut devices: Vec<Arc<dyn Device>> = Vec::new();
    for spec in specs {
        let (n, cfg) = EmuConfig::parse_spec(spec)?;
        for _ in 0..n {
            let i = devices.len();
            devices.push(Arc::new(EmuDevice::new(i, cfg.clone())));
        }
    }
    Ok(devices)
}

/// Save the runtime's perf models if `--perfmodel-dir` was given.
pub fn save_perf_models(args: &PlacementArgs, rt: &tessera_engine::Runtime) -> Result<(), String> {
    if let Some(dir) = &args.perfmodel_dir {
        let models = rt.perf_models();
        if models.is_empty() {
            println!(
                "perf models: nothing measured in this run, nothing saved to {} (models are measured with --sched dmda and devices)",
                dir.display()
            );
            return Ok(());
        }
        models.save_to(dir).map_err(|e| e.to_string())?;
        println!("perf models saved to {}", dir.display());
    }
    Ok(())
}

/// The machine's topology and the worker map for these options and `devices` devices.
pub(crate) fn worker_map(
    args: &PlacementArgs,
    devices: usize,
) -> Result<(Topology, WorkerMap), String> {
    worker_map_with(args, devices, false)
}

/// [`worker_map`], reserving a core for the MPI progress thread if `progress`.
fn worker_map_with(
    args: &PlacementArgs,
    devices: usize,
    progress: bool,
) -> Result<(Topology, WorkerMap), String> {
    let topo = Topology::detect().map_err(|e| e.to_string())?;
    let cpus = match &args.cpus {
        Some(list) => parse_cpu_list(list).map_err(|e| format!("--cpus: {e}"))?,
        None => current_thread_cpus().map_err(|e| e.to_string())?,
    };
    let mut map = plan(
        &topo,
        &PlacementConfig {
            cpus: CpuSelection::List(cpus),
            devices,
            // On a machine with as many devices as cores, share rather than fail.
            reserve_per_device: usize::from(topo.cores.len() > devices),
            reserve_for_progress_thread: progress,
        },
    )
    .map_err(|e| e.to_string())?;
    if let Some(w) = args.workers {
        map.cpu_workers.truncate(w);
    }
    Ok((topo, map))
}

/// The engine configuration for these options and scheduler (`auto`: `dmda`
/// with devices, `cpu_default` without).
pub fn runtime_config(
    args: &PlacementArgs,
    sched: &str,
    cpu_default: Scheduler,
) -> Result<Config, String> {
    Ok(config_and_progress(args, sched, cpu_default, false)?.0)
}

/// [`runtime_config`] for one rank of a distributed run: where this rank's
/// CPUs (its mpirun binding, or `--cpus`) have a core to spare beyond its
/// workers and devices, the plan reserves it for the MPI communication
/// thread, which is bound there (issue 12); otherwise the thread shares the
/// rank's cores with the workers (it naps when idle, see
/// `tessera_backends::mpi`).
pub fn runtime_config_ranks(
    args: &PlacementArgs,
    sched: &str,
    cpu_default: Scheduler,
    ranks: &crate::ranks::Ranks,
) -> Result<Config, String> {
    let shared = share_node_cpus(args, ranks)?;
    let args = shared.as_ref().unwrap_or(args);
    let (config, progress) = config_and_progress(args, sched, cpu_default, ranks.size > 1)?;
    if let Some(pus) = progress {
        ranks.bind_progress_thread(&pus)?;
    }
    Ok(config)
}

/// The options with `--cpus` set to this rank's share of its CPUs where
/// other ranks of its node were given the same ones (`share_cpus`), said
/// once per node on stderr; `None` where nothing changes: `--cpus` or
/// `--no-bind` given, one rank, or a launcher that bound each rank to CPUs
/// of its own. Collective over the ranks whatever this rank's options, so
/// that ranks started with different ones still meet.
fn share_node_cpus(
    args: &PlacementArgs,
    ranks: &crate::ranks::Ranks,
) -> Result<Option<PlacementArgs>, String> {
    if ranks.size <= 1 {
        return Ok(None);
    }
    let cpus = current_thread_cpus().map_err(|e| e.to_string())?;
    let share = ranks.node_share(&cpus)?;
    let Some((place, count)) = share.filter(|_| args.cpus.is_none() && !args.no_bind) else {
        return Ok(None);
    };
    let topo = Topology::detect().map_err(|e| e.to_string())?;
    let mine = share_cpus(&topo, &cpus, place, count);
    if place == 0 {
        crate::say!(
            "tessera: {count} ranks on this node were all given CPUs {} (the launcher did not bind them): each takes its share, whole cores (rank {}: {})",
            format_cpu_list(&cpus),
            ranks.rank,
            format_cpu_list(&mine)
        );
    }
    let mut args = args.clone();
    args.cpus = Some(format_cpu_list(&mine));
    Ok(Some(args))
}

/// The engine configuration (devices, scheduler, workers, perf models) and,
/// when `progress` asks for one and the CPUs allow it, the PUs of the core
/// reserved for the MPI progress thread.
fn config_and_progress(
    args: &PlacementArgs,
    sched: &str,
    cpu_default: Scheduler,
    progress: bool,
) -> Result<(Config, Option<Vec<usize>>), String> {
    let devices = devices(args)?;
    let sched = resolve_sched(sched, devices.len(), cpu_default)?;
    let (mut config, progress) = runtime_config_cpus(args, sched, devices.len(), progress)?;
    config.devices = devices;
    if let Some(dir) = &args.perfmodel_dir {
        let models = PerfModels::load(dir).map_err(|e| e.to_string())?;
        config.perf_models = Some(Arc::new(models));
    }
    Ok((config, progress))
}

/// The configuration, and the PUs of the core reserved for the progress
/// thread when `progress` asked for one and the CPUs allow it (the workers
/// asked for still get a core each).
fn runtime_config_cpus(
    args: &PlacementArgs,
    sched: Scheduler,
    devices: usize,
    progress: bool,
) -> Result<(Config, Option<Vec<usize>>), String> {
    let mut config = Config::default().scheduler(sched);
    let mut args = args.clone();
    if args.workers.is_none() && devices > 0 {
        // TSUBAME: a host core per accelerator.
        args.workers = Some(config.workers.saturating_sub(devices).max(1));
    }
    let args = &args;
    if let Some(w) = args.workers {
        config.workers = w;
    }
    if args.no_bind {
        if args.cpus.is_some() {
            return Err("--cpus needs binding; drop --no-bind".into());
        }
        return Ok((config, None));
    }
    // With a progress core if the CPUs leave one beside the workers asked for.
    let reserved = progress
        .then(|| worker_map_with(args, devices, true).ok())
        .flatten()
        .filter(|(_, m)| !m.cpu_workers.is_empty())
        .filter(|(_, m)| args.workers.is_none_or(|w| w <= m.cpu_workers.len()));
    let (topo, map) = match reserved {
        Some(tm) => tm,
        None => worker_map(args, devices)?,
    };
    if args.workers.is_some_and(|w| w > map.cpu_workers.len()) {
        // More workers than cores: oversubscribed, so binding would only pile
        // threads onto cores; leave them to the OS.
        crate::say!(
            "tessera: {} workers on {} cores: workers are not bound",
            config.workers,
            map.cpu_workers.len()
        );
        return Ok((config, None));
    }
    let progress_pus = map.progress_core.map(|c| topo.cores[c].pus.clone());
    Ok((apply_worker_map(config, &map, &topo), progress_pus))
}
