//! `tessera spmv`: the SpMV driver. Reads a Matrix Market file or generates a
//! matrix, runs repeated SpMV, power iteration or CG as task graphs over row
//! blocks, and reports GFLOP/s and effective bandwidth against the STREAM
//! triad measured by this same program, and faer's sparse×dense product on
//! the same matrix in the same run. Under `mpirun` with several ranks (feature
//! `mpi`) it runs distributed instead ([`crate::spmv::dist`]). This file only
//! dispatches: to the simulation, the distributed run or the one-process run
//! ([`crate::spmv::run`]).

use crate::args::SpmvArgs;

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
        return crate::spmv::dist::run(args, ranks);
    }
    crate::spmv::run::run(&args)
}
