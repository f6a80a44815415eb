//! The `tessera` command line: drivers (`lu`), benchmarks (`overhead`) and
//! trace tools (`trace`).

use tessera_bench::cmd::{
    calibrate, gpu_check, lu, lu_kernels, overhead, overhead_mpi, perfmodel, spmv, topology, trace,
};

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Tessera: a task-graph dataflow runtime for heterogeneous nodes.
#[derive(Parser, Debug)]
#[command(
    name = "tessera",
    version,
    about = "Tessera: a task-graph dataflow runtime for heterogeneous nodes (tiled LU, SpMV, task timelines)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Tiled LU with partial pivoting (HPL-style): factor, solve, check the residual.
    Lu(tessera_bench::args::LuArgs),
    /// The LU's CPU tile kernels alone (GEMM row blocks, panel kernels), for tuning nb.
    LuKernels(lu_kernels::LuKernelsArgs),
    /// SpMV (CSR, row blocks as tasks): repeated SpMV, power iteration or CG, with bandwidth figures.
    Spmv(tessera_bench::args::SpmvArgs),
    /// Runtime cost per task on three graph shapes (and StarPU's, if installed).
    Overhead(overhead::OverheadArgs),
    /// Remote edges between 2 ranks (mpirun -np 2, feature mpi): cost per edge and bandwidth
    /// with 8-byte and 1 MiB payloads, beside plain MPI ping-pong figures.
    OverheadMpi(overhead_mpi::OverheadMpiArgs),
    /// Inspect performance models (per codelet, architecture and size).
    #[command(subcommand)]
    Perfmodel(perfmodel::PerfmodelCmd),
    /// The machine's topology (packages, NUMA nodes, cores) and the worker map.
    Topology(topology::TopologyArgs),
    /// Inspect a recorded trace: statistics, Gantt chart.
    #[command(subcommand)]
    Trace(trace::TraceCmd),
    /// Measure this machine (LU, SpMV, STREAM) and write a platform file for `--simulate`.
    Calibrate(calibrate::CalibrateArgs),
    /// Check the CUDA backend's operations against CPU references (not the codelets) and
    /// measure the GPUs' dgemm and copy rates.
    GpuCheck(gpu_check::GpuCheckArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tessera_bench::interrupt::install();
    let result = match cli.command {
        Command::Lu(a) => lu::run(a),
        Command::LuKernels(a) => lu_kernels::run(a),
        Command::Overhead(a) => overhead::run(a),
        Command::OverheadMpi(a) => overhead_mpi::run(a),
        Command::Spmv(a) => spmv::run(a),
        Command::Trace(c) => trace::run(c),
        Command::Topology(a) => topology::run(a),
        Command::Perfmodel(c) => perfmodel::run(c),
        Command::GpuCheck(a) => gpu_check::run(a),
        Command::Calibrate(a) => calibrate::run(a),
    };
    if tessera_bench::interrupt::requested() {
        match result {
            Err(e) => eprintln!("tessera: {e}"),
            Ok(()) => eprintln!(
                "tessera: interrupted (Ctrl-C) after the run had finished: what it printed and saved is complete"
            ),
        }
        return ExitCode::from(tessera_bench::interrupt::EXIT_STATUS);
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tessera: error: {e}");
            ExitCode::FAILURE
        }
    }
}
