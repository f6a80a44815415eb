//! `tessera lu`: the HPL-style driver. Generates a seeded random matrix,
//! factors it with the task-graph LU, solves, and prints HPL's result block
//! with the scaled residual check. This file only dispatches: to the
//! simulation (`--simulate`), the distributed run (mpirun or `--grid`) or the
//! one-process run, all in [`crate::lu`].

use crate::args::{Balance, LuArgs};

pub fn run(args: LuArgs) -> Result<(), String> {
    if let Some(platform) = &args.simulate {
        if args.balance == Balance::Speed {
            return Err("--balance speed measures the ranks' own cores; a simulated run (--simulate) deals by --balance work or cyclic".into());
        }
        return crate::simulate::lu(&args, platform);
    }
    crate::lu::plan::validate(args.n, args.nb())?;
    let resident = crate::lu::resident::options(&args)?;
    let ranks = crate::ranks::Ranks::join()?;
    if resident.is_some() && (ranks.size > 1 || args.grid.is_some()) {
        return Err(
            "--update resident runs on one device of one process (no --grid, no mpirun)".into(),
        );
    }
    if args.balance == Balance::Speed && ranks.size == 1 && args.grid.is_none() {
        return Err("--balance speed deals tile columns over the ranks of a distributed run (mpirun with --grid); one process balances its workers by itself".into());
    }
    if ranks.size > 1 || args.grid.is_some() {
        return match crate::lu::dist::run(&args, &ranks) {
            Ok(()) => Ok(()),
            // No rank may be left waiting for this one: end the job.
            Err(e) if ranks.size > 1 => ranks.fail(&e),
            Err(e) => Err(e),
        };
    }
    crate::lu::run::run(&args, resident)
}
