//! The `tessera` command line: drivers (`lu`), benchmarks (`overhead`) and
//! trace tools (`trace`).

use tessera_bench::{
    gpu_check, lu_cmd, lu_kernels_cmd, overhead, perfmodel_cmd, placement, spmv_cmd, trace_cmd,
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
    Lu(lu_cmd::LuArgs),
    /// The LU's CPU tile kernels alone (GEMM row blocks, panel kernels), for tuning nb.
    LuKernels(lu_kernels_cmd::LuKernelsArgs),
    /// SpMV (CSR, row blocks as tasks): repeated SpMV, power iteration or CG, with bandwidth figures.
    Spmv(spmv_cmd::SpmvArgs),
    /// Runtime cost per task on three graph shapes (and StarPU's, if installed).
    Overhead(overhead::OverheadArgs),
    /// Inspect performance models (per codelet, architecture and size).
    #[command(subcommand)]
    Perfmodel(perfmodel_cmd::PerfmodelCmd),
    /// The machine's topology (packages, NUMA nodes, cores) and the worker map.
    Topology(placement::TopologyArgs),
    /// Inspect a recorded trace: statistics, Gantt chart.
    #[command(subcommand)]
    Trace(trace_cmd::TraceCmd),
    /// Check each GPU codelet against the CPU and measure the GPUs' dgemm and copy rates.
    GpuCheck(gpu_check::GpuCheckArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Lu(a) => lu_cmd::run(a),
        Command::LuKernels(a) => lu_kernels_cmd::run(a),
        Command::Overhead(a) => overhead::run(a),
        Command::Spmv(a) => spmv_cmd::run(a),
        Command::Trace(c) => trace_cmd::run(c),
        Command::Topology(a) => placement::run_topology(a),
        Command::Perfmodel(c) => perfmodel_cmd::run(c),
        Command::GpuCheck(a) => gpu_check::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tessera: error: {e}");
            ExitCode::FAILURE
        }
    }
}
