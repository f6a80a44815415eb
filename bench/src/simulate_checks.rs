//! What `--simulate` checks before it simulates anything (issue 28): the
//! options that describe this machine and do not apply to a described one,
//! codelet names in the platform file that no run makes, `--workers` past
//! the real runs' cap, and the size of the run against the same budget as
//! a real one, in tasks and in memory.

use std::path::Path;

use tessera_engine::simulate::Platform;

use crate::placement::PlacementArgs;

include!(concat!(env!("OUT_DIR"), "/codelet_names.rs"));

/// Most tasks a simulated LU may have: the simulator runs some 10^5 to
/// 10^6 tasks a second, so 10^9 would take hours (`--n 16384 --nb 8`,
/// 2.9·10^9 tasks, ran about 3 hours without a word).
pub const MAX_SIM_TASKS: u128 = 1_000_000_000;

/// Tasks above which a simulated run says it will take a while.
const SLOW_SIM_TASKS: u128 = 10_000_000;

/// Most virtual workers per rank that `--workers` may ask for: the engine's
/// own least cap (`Runtime::new`'s), or the platform's cores where a node
/// has more.
pub use tessera_engine::MIN_WORKER_CAP;

use crate::lu::plan::TILE_HANDLE_BYTES;

/// Address space one simulated rank's runtime takes besides its tiles.
const RUNTIME_BYTES: u64 = 16 << 20;

/// `Err` naming the placement options given, which describe this machine:
/// a simulated run takes its cores, accelerators and perf models from the
/// platform file, and would silently ignore them.
pub fn placement(args: &PlacementArgs, platform: &Path) -> Result<(), String> {
    let mut given = Vec::new();
    if args.gpus.trim() != "none" {
        given.push("--gpus");
    }
    if !args.emu.is_empty() {
        given.push("--emu");
    }
    if !args.sim_renamed.is_empty() {
        given.push("--sim");
    }
    if args.cpus.is_some() {
        given.push("--cpus");
    }
    if args.perfmodel_dir.is_some() {
        given.push("--perfmodel-dir");
    }
    if given.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{} describe{} this machine and do{} not apply to a simulated run: {} gives the cores, accelerators and perf models (edit it, or run without --simulate)",
        given.join(", "),
        if given.len() == 1 { "s" } else { "" },
        if given.len() == 1 { "es" } else { "" },
        platform.display()
    ))
}

/// `Err` naming the first codelet in `p`'s `codelets` tables or `only`
/// lists that no codelet of this workspace is called (a misspelling would
/// otherwise take no effect).
pub fn codelet_names(p: &Platform, file: &Path) -> Result<(), String> {
    let mut named: Vec<(String, &str)> = p
        .node
        .cpu
        .codelets
        .keys()
        .map(|c| ("node.cpu.codelets".to_string(), c.as_str()))
        .collect();
    for (i, a) in p.node.accelerators.iter().enumerate() {
        named.extend(
            a.proc
                .codelets
                .keys()
                .map(|c| (format!("node.accelerators[{i}].codelets"), c.as_str())),
        );
        for c in a.only.iter().flatten() {
            named.push((format!("node.accelerators[{i}].only"), c.as_str()));
        }
    }
    // Beside the codelets, the resident LU's operations take rates by name.
    let resident = crate::lu::resident::RATE_NAMES;
    for (key, name) in named {
        let rated_op = key.ends_with(".codelets") && resident.contains(&name);
        if !KNOWN_CODELETS.contains(&name) && !rated_op {
            return Err(format!(
                "{}: {key}: no codelet is called '{name}' (known: {}; the resident LU's operations: {})",
                file.display(),
                KNOWN_CODELETS.join(", "),
                resident.join(", ")
            ));
        }
    }
    Ok(())
}

/// `--workers` within the cap: [`MIN_WORKER_CAP`], or the platform's cores
/// per node where they are more.
pub fn workers(workers: Option<usize>, p: &Platform) -> Result<(), String> {
    let cap = MIN_WORKER_CAP.max(p.node.cores);
    match workers {
        Some(w) if w > cap => Err(format!(
            "--workers {w}: at most {cap} virtual workers per rank (as in a real run: {MIN_WORKER_CAP}, or the platform's {} cores per node where more)",
            p.node.cores
        )),
        _ => Ok(()),
    }
}

/// The size of a simulated LU of order `n` in tiles of `nb` on `ranks`
/// ranks: refused past [`MAX_SIM_TASKS`] or past the memory its tile
/// handles need; warned about when slow, or when its tiles are so small
/// that it models the runtime's overhead (as a real run is).
pub fn lu_size(n: usize, nb: usize, ranks: usize) -> Result<(), String> {
    let what = format!("lu --simulate --n {n} --nb {nb}");
    let tasks = crate::lu::plan::task_count(n, nb);
    if tasks > MAX_SIM_TASKS {
        return Err(format!(
            "{what}: {} tasks, more than the {MAX_SIM_TASKS} a simulation may run (some 10^5 to 10^6 a second: hours); use a larger --nb",
            if tasks == u128::MAX { "too many to count".to_string() } else { tasks.to_string() }
        ));
    }
    let tiles = (n.div_ceil(nb) as u64).saturating_mul(n.div_ceil(nb) as u64);
    crate::budget::check(
        &what,
        &[
            ("tile handles", tiles.saturating_mul(TILE_HANDLE_BYTES)),
            (
                "the ranks' runtimes",
                (ranks as u64).saturating_mul(RUNTIME_BYTES),
            ),
        ],
        1,
    )?;
    crate::lu::plan::warn_if_overhead_bound(n, nb);
    if tasks > SLOW_SIM_TASKS {
        crate::say!(
            "tessera: simulate: {tasks} tasks to simulate: this takes minutes (the simulator runs some 10^5 to 10^6 tasks a second)"
        );
    }
    Ok(())
}

/// A simulated SpMV of `iters` iterations over at most `workers ×
/// blocks_per_worker` row blocks (a task each) within [`MAX_SIM_TASKS`].
pub fn spmv_tasks(iters: usize, workers: usize, blocks_per_worker: usize) -> Result<(), String> {
    let tasks = (iters as u128)
        .saturating_mul(workers as u128)
        .saturating_mul(blocks_per_worker.max(1) as u128);
    if tasks > MAX_SIM_TASKS {
        return Err(format!(
            "spmv --simulate: up to {tasks} tasks ({iters} iterations x {workers} workers x {blocks_per_worker} blocks each), more than the {MAX_SIM_TASKS} a simulation may run (hours); use fewer --iters or --blocks-per-worker"
        ));
    }
    if tasks > SLOW_SIM_TASKS {
        crate::say!(
            "tessera: simulate: up to {tasks} tasks to simulate: this takes minutes (the simulator runs some 10^5 to 10^6 tasks a second)"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! Proves the codelet names are read from the source (today's and any
    //! added later are known) and the task budget.
    use super::*;

    #[test]
    fn every_codelet_of_the_workspace_is_known() {
        use tessera_tasks::codelets::{lu, lu_dist, spmv};
        for name in [
            lu::PANEL.name(),
            lu::SWAP.name(),
            lu::TRSM.name(),
            lu::GEMM.name(),
            lu_dist::PANEL_PART.name(),
            lu_dist::BCAST.name(),
            lu_dist::SWAPOUT.name(),
            lu_dist::SWAPTOP.name(),
            lu_dist::SWAPIN.name(),
            spmv::SPMV.name(),
            spmv::SPMV_HALO.name(),
            "send",
            "recv",
            "halo-send",
            "halo-recv",
        ] {
            assert!(KNOWN_CODELETS.contains(&name), "{name}: {KNOWN_CODELETS:?}");
        }
    }

    #[test]
    fn huge_lu_is_refused_by_its_task_count() {
        assert!(lu_size(usize::MAX, 1, 1)
            .unwrap_err()
            .contains("too many to count"));
        assert!(lu_size(16384, 8, 1)
            .unwrap_err()
            .contains("use a larger --nb"));
        assert!(lu_size(1024, 128, 1).is_ok());
    }
}
