//! Two ranks under `mpirun`: ordinary task submission (sequential task
//! flow) run by two processes. Every rank registers the same data, each
//! piece with an owner, and submits the same tasks; each task runs on the
//! owner of what it writes, and the engine sends what the other rank reads.
//!
//! ```sh
//! cargo build --release --example two_ranks --features mpi
//! mpirun -np 2 target/release/examples/two_ranks   # as root: --allow-run-as-root --oversubscribe
//! ```

use std::process::ExitCode;

use tessera_backends::mpi;
use tessera_engine::dist::{stf::DistRuntime, Net};
use tessera_engine::{Codelet, Config, Read, ReadWrite, Runtime};

fn main() -> ExitCode {
    if !mpi::launched() {
        eprintln!(
            "two_ranks: start me under mpirun: mpirun -np 2 target/release/examples/two_ranks"
        );
        return ExitCode::from(2);
    }
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("two_ranks: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    // MPI and its communication thread; `mpi` must outlive everything that
    // uses the network (it finalises MPI when dropped, after them here).
    let mpi = mpi::init()?;
    if mpi.size() != 2 {
        return Err(format!("run with -np 2, not {}", mpi.size()).into());
    }
    let rank = mpi.rank();
    let dist = DistRuntime::new(
        Runtime::new(Config::with_workers(1))?,
        Net::new(mpi.transport()),
    );
    let a = dist.register(0, vec![1.0f64; 4]); // owned by rank 0
    let b = dist.register(1, vec![10.0f64; 4]); // owned by rank 1
    let add = Codelet::<(Read<Vec<f64>>, ReadWrite<Vec<f64>>)>::new("add").cpu(|_, _, (x, y)| {
        y.iter_mut().zip(x).for_each(|(y, x)| *y += x);
        Ok(())
    });
    dist.task(&add, (a.r(), b.rw())).submit()?; // on rank 1: `a` travels there
    dist.task(&add, (b.r(), a.rw())).submit()?; // on rank 0: `b`'s new version comes back
    dist.wait_all()?;
    // Each owner holds the final value of its data.
    let (a, b) = (dist.unregister(a)?, dist.unregister(b)?);
    let mine = if rank == 0 { a[0] } else { b[0] };
    println!("two_ranks: rank {rank} of 2 holds {mine}");
    assert_eq!(mine, if rank == 0 { 12.0 } else { 11.0 });
    drop(dist); // the runtime and the network before MPI
    Ok(())
}
