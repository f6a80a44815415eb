//! Worker placement options shared by the drivers: bind one worker per core
//! (NUMA siblings adjacent, hierarchical stealing) unless told otherwise.

use tessera_backends::cpu::{
    apply_worker_map, current_thread_cpus, describe, parse_cpu_list, plan, CpuSelection,
    PlacementConfig, Topology, WorkerMap,
};
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
}

fn worker_map(args: &PlacementArgs) -> Result<(Topology, WorkerMap), String> {
    let topo = Topology::detect().map_err(|e| e.to_string())?;
    let cpus = match &args.cpus {
        Some(list) => parse_cpu_list(list).map_err(|e| format!("--cpus: {e}"))?,
        None => current_thread_cpus().map_err(|e| e.to_string())?,
    };
    let mut map = plan(
        &topo,
        &PlacementConfig {
            cpus: CpuSelection::List(cpus),
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
    let mut config = Config::default().scheduler(sched);
    if let Some(w) = args.workers {
        config.workers = w;
    }
    if args.no_bind {
        if args.cpus.is_some() {
            return Err("--cpus needs binding; drop --no-bind".into());
        }
        return Ok(config);
    }
    let (_, map) = worker_map(args)?;
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
    Ok(apply_worker_map(config, &map))
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
