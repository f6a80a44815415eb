//! Proves that the trace of a simulated distributed LU (`lu --grid PxQ --simulate
//! PLATFORM --trace FILE`) keeps the dependencies between tasks of different ranks, so
//! `trace summary`'s critical path follows the run from rank to rank (they were dropped
//! until stop 35, and the path stopped at each rank's border).

use std::collections::HashMap;
use std::time::Duration;

mod common;

#[test]
fn a_simulated_grid_trace_keeps_the_edges_across_ranks() {
    let dir = std::env::temp_dir().join(format!("tessera-simtrace-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let platform = dir.join("four.toml");
    std::fs::write(
        &platform,
        "name = \"four\"\nnodes = 4\nranks_per_node = 1\n[node]\ncores = 2\n[node.cpu]\ngflops = 10\ngbs = 5\n[network]\nlatency_us = 2\ngbs = 10\n",
    )
    .unwrap();
    let trace = dir.join("t.json");
    let (p, t) = (platform.display().to_string(), trace.display().to_string());
    let out = common::tessera_within(
        &[
            "lu",
            "--n",
            "40",
            "--nb",
            "8",
            "--grid",
            "2x2",
            "--simulate",
            &p,
            "--trace",
            &t,
        ],
        Duration::from_secs(60),
    );
    assert_eq!(out.code(), Some(0), "{}\n{}", out.stdout, out.stderr);
    let tr = tessera_engine::trace::chrome::load(&trace).unwrap();
    // Workers are named `r<rank> <name>`.
    let rank_of_worker: Vec<String> = tr
        .workers
        .iter()
        .map(|w| w.name.split(' ').next().unwrap().to_string())
        .collect();
    let rank_of_task: HashMap<u64, &str> = tr
        .tasks
        .iter()
        .map(|x| (x.id, rank_of_worker[x.worker as usize].as_str()))
        .collect();
    let (mut across, mut dangling) = (0, 0);
    for (a, b) in &tr.edges {
        match (rank_of_task.get(a), rank_of_task.get(b)) {
            (Some(ra), Some(rb)) if ra != rb => across += 1,
            (Some(_), Some(_)) => {}
            _ => dangling += 1,
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        across > 0,
        "no edge between tasks of two ranks in the trace"
    );
    assert_eq!(dangling, 0, "edges naming tasks the trace does not have");
}
