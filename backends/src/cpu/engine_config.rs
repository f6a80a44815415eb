//! Turns a worker map into the engine's start-up settings: one CPU worker per
//! planned core, each bound to its PU at start, stealing NUMA siblings first.

use std::sync::Arc;

use tessera_engine::{Config, WorkerHook};

use super::binding::bind_current_thread;
use super::placement::{steal_order, WorkerMap};
use super::topology::Topology;

/// Set `config`'s worker count, binding hook, steal order and (on a machine
/// with several NUMA nodes) each worker's host memory node from `map`.
/// CPU worker `w` is bound to its PU; device worker `d` (engine index
/// `workers + d`) to the PUs of `map.device_cores[d]`, where the plan
/// reserved one (else it is left unbound).
pub fn apply_worker_map(mut config: Config, map: &WorkerMap, topo: &Topology) -> Config {
    let pus: Vec<usize> = map.cpu_workers.iter().map(|s| s.pu).collect();
    let device_pus: Vec<Vec<usize>> = map
        .device_cores
        .iter()
        .map(|&c| topo.cores[c].pus.clone())
        .collect();
    config.workers = pus.len();
    config.steal_order = Some((0..pus.len()).map(|w| steal_order(map, w)).collect());
    // One host memory node per NUMA node that has workers.
    let mut nodes: Vec<usize> = map.cpu_workers.iter().map(|s| s.numa).collect();
    nodes.sort_unstable();
    nodes.dedup();
    if nodes.len() > 1 {
        config.worker_numa = Some(
            map.cpu_workers
                .iter()
                .map(|s| nodes.binary_search(&s.numa).expect("listed above"))
                .collect(),
        );
    }
    let n = pus.len();
    config.on_worker_start = Some(WorkerHook(Arc::new(move |w| {
        let cpus = if w < n {
            std::slice::from_ref(&pus[w])
        } else {
            match device_pus.get(w - n) {
                Some(p) => p.as_slice(),
                None => return Ok(()),
            }
        };
        bind_current_thread(cpus).map_err(|e| e.to_string())
    })));
    config
}

#[cfg(test)]
mod tests {
    //! Proves an engine started from a worker map runs its workers bound to the planned PUs.
    use super::*;
    use crate::cpu::{current_thread_cpus, plan, PlacementConfig, Topology};
    use tessera_engine::{Codelet, Runtime, TaskBuilder};

    #[test]
    fn workers_run_on_their_planned_pu() {
        let topo = Topology::detect().expect("topology");
        let map = plan(&topo, &PlacementConfig::default()).expect("plan");
        let allowed = current_thread_cpus().expect("affinity");
        if map.cpu_workers.iter().any(|s| !allowed.contains(&s.pu)) {
            eprintln!("note: process is confined to {allowed:?}; skipping the binding check");
            return;
        }
        let rt = Runtime::new(apply_worker_map(Config::default(), &map, &topo)).expect("runtime");
        let cl = Codelet::new("where");
        let seen = rt.register(Vec::<(usize, Vec<usize>)>::new());
        for _ in 0..64 {
            let s = seen.clone();
            rt.submit(TaskBuilder::new(&cl).rw(&seen).body(move |ctx| {
                let cpus = current_thread_cpus().map_err(|e| e.to_string())?;
                ctx.write(&s)?.push((ctx.worker(), cpus));
                Ok(())
            }))
            .expect("submit");
        }
        rt.wait_all().expect("tasks");
        for (w, cpus) in rt.unregister(seen).expect("value") {
            assert_eq!(
                cpus,
                vec![map.cpu_workers[w].pu],
                "worker {w} is not bound to its PU"
            );
        }
    }
}
