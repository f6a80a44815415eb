//! What a SpMV or solver run checks and sizes before it runs, the same in one process
//! (`cmd::spmv`) and across ranks (`cmd::spmv_dist`): the options refused together, the
//! STREAM array length, the bytes a CG iteration streams. Pure functions of the options
//! and the machine's cache size; nothing here runs a kernel.

use tessera_linalg::solver::{CgVariant, Preconditioner};
use tessera_tasks::kernels::blas1::{cg_vector_bytes, pipecg_vector_bytes};

/// Bytes of the last-level cache of CPU 0, from sysfs.
pub fn last_level_cache() -> Option<u64> {
    let dir = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
    let mut best: Option<(u32, u64)> = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let read = |f: &str| std::fs::read_to_string(entry.path().join(f)).ok();
        let (Some(level), Some(size)) = (read("level"), read("size")) else {
            continue;
        };
        let level: u32 = level.trim().parse().ok()?;
        let size = size.trim();
        let bytes = match size.strip_suffix('K') {
            Some(k) => k.parse::<u64>().ok()? << 10,
            None => match size.strip_suffix('M') {
                Some(m) => m.parse::<u64>().ok()? << 20,
                None => size.parse().ok()?,
            },
        };
        if best.is_none_or(|(l, _)| level > l) {
            best = Some((level, bytes));
        }
    }
    best.map(|(_, b)| b)
}

/// The STREAM array length `--stream-mi` asks for, refused when it
/// overflows; a warning when the arrays fit in the last-level cache (then
/// the triad measures the cache: `--stream-mi 1` printed 14,504 GB/s).
pub fn stream_elems(mi: usize) -> Result<usize, String> {
    let elems = mi
        .checked_mul(1 << 20)
        .filter(|e| e.checked_mul(24).is_some())
        .ok_or_else(|| format!("--stream-mi {mi}: {mi} Mi elements overflow the address space"))?;
    if let Some(llc) = last_level_cache() {
        if (24 * elems as u64) < 4 * llc {
            eprintln!(
                "tessera: warning: --stream-mi {mi}: the triad's 3 arrays ({}) are less than 4x the last-level cache ({}), so it measures the cache, not memory; the SpMV ratios will be too low",
                tessera_engine::fmt::bytes(24 * elems as u64),
                tessera_engine::fmt::bytes(llc)
            );
        }
    }
    Ok(elems)
}

/// `--pc` and `--cg` are CG's: given with another solver, they would be ignored (issue
/// 42), so they are refused.
pub fn check_cg_options(
    solver: &str,
    pc: Preconditioner,
    variant: CgVariant,
) -> Result<(), String> {
    if solver == "cg" {
        return Ok(());
    }
    if pc != Preconditioner::None {
        return Err(format!(
            "--pc {pc}: a preconditioner of CG, but --solver {solver} runs no CG"
        ));
    }
    if variant != CgVariant::Standard {
        return Err(format!(
            "--cg {variant}: an algorithm of CG, but --solver {solver} runs no CG"
        ));
    }
    Ok(())
}

/// Bytes a CG iteration's vector work streams on `rows` rows.
pub fn cg_bytes(rows: usize, pc: Preconditioner, variant: CgVariant) -> f64 {
    let jacobi = pc == Preconditioner::Jacobi;
    match variant {
        CgVariant::Standard => cg_vector_bytes(rows, jacobi),
        CgVariant::Pipelined => pipecg_vector_bytes(rows, jacobi),
    }
}
