//! The `tessera` command line's subcommands ([`cmd`]), the LU's and the SpMV's runs
//! ([`lu`], [`spmv`]: each a pure `plan` of the checks and sizing its runs share, and the
//! runners the commands dispatch to), and what the commands share: placement
//! options ([`placement`]), the options and report of the runs that can also be
//! simulated ([`args`], [`report`], [`simulate`]), Gantt charts ([`gantt`]), trace
//! files ([`save_trace`]), platform files with their models ([`platform_out`]) and
//! the binary's allocator ([`huge_pages`]).

/// `eprintln!` in one write (see [`output::say`]): a line on stderr that
/// another rank's line cannot cut in two under mpirun.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::output::say(&format!($($arg)*))
    };
}

pub mod args;
pub mod budget;
pub mod cli;
pub mod cmd;
pub mod gantt;
pub mod huge_pages;
pub mod interrupt;
pub mod lu;
pub mod output;
pub mod placement;
pub mod platform_out;
pub mod ranks;
pub mod report;
pub mod simulate;
pub mod simulate_checks;
pub mod spmv;
pub mod starpu_import;
pub mod taskbench;

/// Write the runtime's recorded trace to `path` as Chrome/Perfetto JSON and say so.
pub fn save_trace(rt: &tessera_engine::Runtime, path: &std::path::Path) -> Result<(), String> {
    write_trace(&rt.trace(), path, "tasks")
}

/// Write `trace` to `path` as Chrome/Perfetto JSON and say so, counting its
/// records as `what` (tasks, or a device's operations).
pub fn write_trace(
    trace: &tessera_engine::trace::Trace,
    path: &std::path::Path,
    what: &str,
) -> Result<(), String> {
    tessera_engine::trace::chrome::save(trace, path, &Default::default())
        .map_err(|e| e.to_string())?;
    println!(
        "trace: {} {what} written to {}",
        trace.tasks.len(),
        path.display()
    );
    Ok(())
}

/// [`save_trace`] for one rank of a distributed run: its trace records
/// the run's id ([`ranks::Ranks::run_id`]).
pub fn save_rank_trace(
    rt: &tessera_engine::Runtime,
    path: &std::path::Path,
    run_id: &str,
) -> Result<(), String> {
    let mut trace = rt.trace();
    for r in &mut trace.ranks {
        r.run_id = run_id.to_string();
    }
    tessera_engine::trace::chrome::save(&trace, path, &Default::default())
        .map_err(|e| e.to_string())?;
    println!(
        "trace: {} tasks written to {}",
        trace.tasks.len(),
        path.display()
    );
    Ok(())
}

/// Warn on stderr when device bodies failed and their tasks ran on the CPU
/// instead: the results are right, but the run is not what it was meant to
/// measure.
pub fn report_fallbacks(rt: &tessera_engine::Runtime) {
    if let (n @ 1.., first) = rt.device_fallbacks() {
        crate::say!(
            "tessera: warning: {n} device task(s) failed and ran their CPU body instead (first: {})",
            first.unwrap_or_default()
        );
    }
}

/// The end of every driver's run: save the trace (if asked), print each
/// memory node's traffic and any device fallback (with devices), and save
/// the perf models (with `--perfmodel-dir`).
pub fn wrap_up(
    rt: &tessera_engine::Runtime,
    trace: Option<&std::path::Path>,
    placement: &placement::PlacementArgs,
) -> Result<(), String> {
    if let Some(path) = trace {
        save_trace(rt, path)?;
    }
    if rt.memory_stats().nodes.len() > 1 {
        print!("{}", rt.memory_stats());
        report_fallbacks(rt);
    }
    placement::save_perf_models(placement, rt)
}
