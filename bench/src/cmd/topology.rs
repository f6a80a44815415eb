//! `tessera topology`: the machine's packages, NUMA nodes and cores, and the worker map the
//! runtime would use with the same placement options.

use tessera_backends::cpu::describe;

use crate::placement::{devices, worker_map, PlacementArgs};

/// Options of `tessera topology`.
#[derive(clap::Args, Debug)]
pub struct TopologyArgs {
    #[command(flatten)]
    pub placement: PlacementArgs,
}

/// `tessera topology`: what was found and the worker map the runtime would use.
pub fn run(args: TopologyArgs) -> Result<(), String> {
    // This process's cores, whether or not a launcher started it; a stray
    // launcher variable is said as every command says it.
    let _ = crate::ranks::launched_ranks();
    let devices = devices(&args.placement)?.len();
    let (topo, map) = worker_map(&args.placement, devices)?;
    print!("{}", describe(&topo, &map));
    Ok(())
}
