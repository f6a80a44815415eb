//! The `tessera` command line's subcommands and the benchmarks' shared code.

pub mod gantt;
pub mod gpu_check;
pub mod lu_cmd;
pub mod lu_kernels_cmd;
pub mod overhead;
pub mod perfmodel_cmd;
pub mod placement;
pub mod spmv_cmd;
pub mod trace_cmd;

/// Write the runtime's recorded trace to `path` as Chrome/Perfetto JSON and say so.
pub fn save_trace(rt: &tessera_engine::Runtime, path: &std::path::Path) -> Result<(), String> {
    let trace = rt.trace();
    tessera_engine::trace::chrome::save(&trace, path, &Default::default())
        .map_err(|e| e.to_string())?;
    println!(
        "trace: {} tasks written to {}",
        trace.tasks.len(),
        path.display()
    );
    Ok(())
}
