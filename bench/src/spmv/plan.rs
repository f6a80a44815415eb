//! What a SpMV or solver run checks and sizes before it runs, the same in one process
//! ([`super::run`]) and across ranks ([`super::dist`]): the options checked first, the
//! options refused together, the big buffers of a run, the STREAM array length, the bytes
//! a CG iteration streams. Pure functions of the options and the machine's cache size;
//! nothing here runs a kernel.

use tessera_linalg::solver::{CgVariant, Preconditioner};
use tessera_tasks::kernels::blas1::{cg_vector_bytes, pipecg_vector_bytes};

use crate::args::SpmvArgs;

/// The options every run checks first, in this order and with these messages, before
/// anything is built or measured: `--iters`, `--solver` (not when `any_solver`: one
/// process's `--balance` runs its own power iteration), `--tol`, `--pc`, `--cg`. Returns
/// the parsed preconditioner and CG variant.
pub fn check_options(
    args: &SpmvArgs,
    any_solver: bool,
) -> Result<(Preconditioner, CgVariant), String> {
    if args.iters == 0 {
        return Err("--iters must be at least 1".into());
    }
    if !any_solver && !matches!(args.solver.as_str(), "spmv" | "power" | "cg") {
        return Err(format!(
            "unknown --solver '{}' (known: spmv, power, cg)",
            args.solver
        ));
    }
    tessera_linalg::solver::cg::check_rtol(args.tol)?;
    let pc: Preconditioner = args.pc.parse()?;
    let variant: CgVariant = args.cg.parse()?;
    check_cg_options(&args.solver, pc, variant)?;
    Ok((pc, variant))
}

/// Every big buffer of a one-process run on an `n × m` matrix of `csr` bytes with STREAM
/// arrays of `stream` elements and emulated devices limited to `sims`, for
/// [`crate::budget::check`].
pub fn buffers(
    args: &SpmvArgs,
    n: u64,
    m: u64,
    csr: u64,
    stream: u64,
    sims: &[Option<u64>],
) -> Vec<(&'static str, u64)> {
    let vectors = 10u64.saturating_mul(n.max(m)).saturating_mul(8);
    let replicas = sims
        .iter()
        .map(|l| l.map_or(csr, |l| l.min(csr)))
        .fold(0u64, u64::saturating_add);
    let faer = if args.no_faer || args.balance || args.solver != "spmv" {
        0
    } else {
        n.saturating_mul(4) + (n + m).saturating_mul(8)
    };
    // At most 2 bytes per nonzero and 4 per row (`Csr::with_compact_columns`); a nonzero
    // takes at least 12 of the matrix's bytes, so a sixth of them bounds it.
    let compact = if args.no_compact { 0 } else { csr / 6 + n * 4 };
    vec![
        ("the matrix", csr),
        ("its row blocks", csr),
        ("their compact column indices", compact),
        (
            "a u32 copy of the blocks (--compare-compact)",
            if args.compare_compact { csr } else { 0 },
        ),
        ("replicas on emulated devices", replicas),
        ("vectors", vectors),
        ("STREAM arrays", stream.saturating_mul(24)),
        ("faer's copy", faer),
    ]
}

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
            crate::say!(
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
