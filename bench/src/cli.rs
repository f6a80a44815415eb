//! The `tessera` command line: its subcommands, parsed, run and ended the
//! way a Unix tool ends (exit status, a closed stdout, Ctrl-C, mpirun).
//! `main.rs` only calls [`main`]; tests under mpirun call it as a rank.

use crate::cmd::{
    calibrate, cholesky, gpu_check, lu, lu_kernels, overhead, overhead_mpi, perfmodel, platform,
    spmv, taskbench, topology, trace,
};

use std::panic::AssertUnwindSafe;

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
    Lu(crate::args::LuArgs),
    /// The LU's CPU tile kernels alone (GEMM row blocks, panel kernels), for tuning nb.
    LuKernels(lu_kernels::LuKernelsArgs),
    /// Tiled Cholesky (A = L·Lᵀ) written once against dist::Submit: in one process or as
    /// one rank of several under mpirun, beside faer's whole-matrix factorisation.
    Cholesky(cholesky::CholeskyArgs),
    /// SpMV (CSR, row blocks as tasks): repeated SpMV, power iteration or CG, with bandwidth figures.
    Spmv(crate::args::SpmvArgs),
    /// Runtime cost per task on three graph shapes (and StarPU's, if installed).
    Overhead(overhead::OverheadArgs),
    /// Remote edges between 2 ranks (mpirun -np 2, feature mpi): cost per edge and bandwidth
    /// with 8-byte and 1 MiB payloads, beside plain MPI ping-pong figures.
    OverheadMpi(overhead_mpi::OverheadMpiArgs),
    /// Task Bench's task graphs and kernels (its flags: -steps -width -type -kernel -iter ...),
    /// in one process, under mpirun or simulated; Task Bench's output lines.
    Taskbench(taskbench::TaskbenchArgs),
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
    /// Platform files for `--simulate` from StarPU's measurements of other machines.
    #[command(subcommand)]
    Platform(platform::PlatformCmd),
    /// Check the CUDA backend's operations against CPU references (not the codelets) and
    /// measure the GPUs' dgemm and copy rates.
    GpuCheck(gpu_check::GpuCheckArgs),
}

/// The whole `tessera` process but its exit: parse `args` (the program name
/// first), run the subcommand, say how it ended, and return the exit status
/// (after MPI's end under mpirun, see [`crate::ranks::before_exit`]). A
/// closed stdout ends the process by SIGPIPE instead ([`crate::output`]).
pub fn main<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            // Usage errors (2), `--help` and `--version` (0).
            let _ = e.print();
            let status = u8::try_from(e.exit_code()).unwrap_or(2);
            crate::ranks::before_exit(status);
            return status;
        }
    };
    if !cli.command.is_distributed() {
        crate::ranks::refuse_under_mpirun(cli.command.name());
    }
    crate::interrupt::install();
    crate::output::install();
    // A failed print (closed or full stdout) unwinds out of the subcommand
    // as a panic, dropping its runtime on the way; `output` says how to end.
    let result = match std::panic::catch_unwind(AssertUnwindSafe(|| run(cli.command))) {
        Ok(result) => result,
        Err(_) if crate::output::failed() => Ok(()),
        Err(payload) => std::panic::resume_unwind(payload),
    };
    let status = crate::output::finish().unwrap_or_else(|| {
        // Saying how the run ended may fail too (stderr full or closed).
        match std::panic::catch_unwind(AssertUnwindSafe(|| exit_status(result))) {
            Ok(status) => status,
            Err(_) if crate::output::failed() => crate::output::finish().unwrap_or(1),
            Err(payload) => std::panic::resume_unwind(payload),
        }
    });
    crate::ranks::before_exit(status);
    status
}

/// The exit status of a run that ended with `result`, its error said.
fn exit_status(result: Result<(), String>) -> u8 {
    if crate::interrupt::requested() {
        match result {
            Err(e) if e.starts_with("interrupted (Ctrl-C)") => {
                crate::say!("tessera: {e}")
            }
            // A run stopped by the interrupted runtime's error.
            Err(e) => crate::say!(
                "tessera: interrupted (Ctrl-C): stopped before the end, nothing half-made saved ({})",
                e.lines().next().unwrap_or_default()
            ),
            Ok(()) => crate::output::say(
                "tessera: interrupted (Ctrl-C) too late to stop the run: it finished, and what it printed and saved is complete",
            ),
        }
        return crate::interrupt::EXIT_STATUS;
    }
    match result {
        Ok(()) => 0,
        Err(e) => {
            crate::say!("tessera: error: {e}");
            1
        }
    }
}

impl Command {
    /// Whether it runs as one rank of several under mpirun (`lu` and `spmv`
    /// unless simulated, `overhead-mpi`); the others are one process.
    fn is_distributed(&self) -> bool {
        match self {
            Command::Lu(a) => a.simulate.is_none(),
            Command::Spmv(a) => a.simulate.is_none(),
            Command::OverheadMpi(_) => true,
            Command::Cholesky(_) => true,
            Command::Taskbench(a) => a.simulate.is_none(),
            _ => false,
        }
    }

    /// What the user typed, for messages.
    fn name(&self) -> &'static str {
        match self {
            Command::Lu(_) => "lu --simulate",
            Command::Spmv(_) => "spmv --simulate",
            Command::LuKernels(_) => "lu-kernels",
            Command::Cholesky(_) => "cholesky",
            Command::Overhead(_) => "overhead",
            Command::OverheadMpi(_) => "overhead-mpi",
            Command::Taskbench(_) => "taskbench --simulate",
            Command::Perfmodel(_) => "perfmodel",
            Command::Topology(_) => "topology",
            Command::Trace(_) => "trace",
            Command::Calibrate(_) => "calibrate",
            Command::Platform(_) => "platform",
            Command::GpuCheck(_) => "gpu-check",
        }
    }
}

/// Runs one subcommand.
fn run(command: Command) -> Result<(), String> {
    match command {
        Command::Lu(a) => lu::run(a),
        Command::LuKernels(a) => lu_kernels::run(a),
        Command::Cholesky(a) => cholesky::run(a),
        Command::Overhead(a) => overhead::run(a),
        Command::OverheadMpi(a) => overhead_mpi::run(a),
        Command::Taskbench(a) => taskbench::run(a),
        Command::Spmv(a) => spmv::run(a),
        Command::Trace(c) => trace::run(c),
        Command::Topology(a) => topology::run(a),
        Command::Perfmodel(c) => perfmodel::run(c),
        Command::GpuCheck(a) => gpu_check::run(a),
        Command::Calibrate(a) => calibrate::run(a),
        Command::Platform(c) => platform::run(c),
    }
}
