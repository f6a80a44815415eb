//! Worker placement options shared by the drivers: bind one worker per core
//! (NUMA siblings adjacent, hierarchical stealing) unless told otherwise.

use std::sync::Arc;
use tessera_backends::cpu::{
    apply_worker_map, current_thread_cpus, describe, parse_cpu_list, plan, CpuSelection,
    PlacementConfig, Topology, WorkerMap,
};

use tessera_backends::sim::{SimConfig, SimDevice};
use tessera_engine::device::Device;
use tessera_engine::perfmodel::PerfModels;
use tessera_engine::Config;

/// Placement options of every driver.
#[derive(clap::Args, Debug, Clone)]
pub struct PlacementArgs {
    /// Worker threads (default: one per core of the selected CPUs).
    #[arg(long)]
    pub workers: Option<usize>,
    /// CPUs to run workers on, as a Linux cpu list (e.g. `0-3,8`); default:
    /// the CPUs this process may use.
    #[arg(long, value_name = "LIST")]
    pub cpus: Option<String>,
    /// Do not bind workers to cores.
    #[arg(long)]
    pub no_bind: bool,
    /// Add N simulated accelerators: `N[:speed=S,latency=L,bandwidth=B,mem=M,...]`
    /// (e.g. `1:speed=0.5,latency=20us,bandwidth=10GB,mem=256MiB`); repeat for
    /// devices of unlike speeds. Each gets a device worker; with devices, CPU
    /// workers default to one per core minus one per device (a host core
    /// drives each device).
    #[arg(long, value_name = "SPEC")]
    pub sim: Vec<String>,
    /// Load performance models from DIR and save them there at the end.
    #[arg(long, value_name = "DIR")]
    pub perfmodel_dir: Option<std::path::PathBuf>,
}

/// The sim devices the `--sim` options ask for.
pub fn sim_devices(specs: &[String]) -> Result<Vec<Arc<dyn Device>>, String> {
    let mut devices: Vec<Arc<dyn Device>> = Vec::new();
    for spec in specs {
        let (n, cfg) = SimConfig::parse_spec(spec)?;
        for _ in 0..n {
            let i = devices.len();
            devices.push(Arc::new(SimDevice::new(i, cfg.clone())));
        }
    }
    Ok(devices)
}

/// Save the runtime's perf models if `--perfmodel-dir` was given.
pub fn save_perf_models(args: &PlacementArgs, rt: &tessera_engine::Runtime) -> Result<(), String> {
    if let Some(dir) = &args.perfmodel_dir {
        rt.perf_models().save_to(dir).map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn worker_map(args: &PlacementArgs) -> Result<(Topology, WorkerMap), String> {
    let devices = sim_devices(&args.sim)?.len();
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
            ..PlacementConfig::default()
        },
    )
    .map_err(|e| e.to_string())?;
    if let Some(w) = args.workers {
        map.cpu_workers.truncate(w);
    }
    Ok((topo, map))
}

/// The engine configuration for these options and scheduler.
pub fn runtime_config(args: &PlacementArgs, sched: &str) -> Result<Config, String> {
    let mut config = runtime_config_cpus(args, sched)?;
    config.devices = sim_devices(&args.sim)?;
    if let Some(dir) = &args.perfmodel_dir {
        let models = PerfModels::load(dir).map_err(|e| e.to_string())?;
        config.perf_models = Some(Arc::new(models));
    }
    Ok(config)
}

fn runtime_config_cpus(args: &PlacementArgs, sched: &str) -> Result<Config, String> {
    let mut config = Config::default().scheduler(sched);
    let devices = sim_devices(&args.sim)?.len();
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
        return Ok(config);
    }
    let (topo, map) = worker_map(args)?;
    if args.workers.is_some_and(|w| w > map.cpu_workers.len()) {
        // More workers than cores: oversubscribed, so binding would only pile
        // threads onto cores; leave them to the OS.
        eprintln!(
            "tessera: {} workers on {} cores: workers are not bound",
            config.workers,
            map.cpu_workers.len()
        );
        return Ok(config);
    }
    Ok(apply_worker_map(config, &map, &topo))
}

/// Options of `tessera topology`.
#[derive(clap::Args, Debug)]
pub struct TopologyArgs {
    #[command(flatten)]
    pub placement: PlacementArgs,
}

/// `tessera topology`: what was found and the worker map the runtime would use.
pub fn run_topology(args: TopologyArgs) -> Result<(), String> {
    let (topo, map) = worker_map(&args.placement)?;
    print!("{}", describe(&topo, &map));
    Ok(())
}
