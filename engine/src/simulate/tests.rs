//! Proves the event loop on hand-built DAGs whose makespans are worked out
//! by hand: a chain, a fork-join on two cores, a transfer-bound case (one
//! link, FIFO), the symbolic front-end's unfolding in virtual time, and
//! that virtual data is refused by a real runtime.

use std::sync::Arc;

use super::{Platform, Simulation};
use crate::codelet::Codelet;
use crate::{Config, Runtime, Scheduler};

/// `cores` cores of 1 GFLOP/s, no overhead; optionally one accelerator of
/// 1000 GFLOP/s that runs only `acc_only`, behind a 1 GB/s link.
fn platform(cores: usize, accel: Option<&str>) -> Platform {
    let mut text = format!(
        "name = \"test\"\n[node]\ncores = {cores}\nreserve_core_per_accelerator = false\ntask_overhead_us = 0\n[node.cpu]\ngflops = 1\n"
    );
    if let Some(only) = accel {
        text.push_str(&format!(
            "[[node.accelerators]]\nname = \"acc\"\narch = \"acc\"\ngflops = 1000\nlink = {{ latency_us = 0, gbs = 1 }}\nonly = [\"{only}\"]\n"
        ));
    }
    Platform::parse(&text, false, "test.toml").unwrap()
}

fn sim_runtime(p: Platform, sched: Scheduler) -> (Arc<Simulation>, Runtime) {
    let sim = Simulation::with_models(p, Arc::default(), false, false);
    let rt = Runtime::new(Config::simulated(sim.node(0)).scheduler(sched).trace(true)).unwrap();
    (sim, rt)
}

#[test]
fn chain_takes_the_sum_of_its_tasks() {
    for sched in [Scheduler::Ws, Scheduler::Prio, Scheduler::Dmda] {
        let (sim, rt) = sim_runtime(platform(2, None), sched);
        let h = rt.register(0u64);
        let cl: Codelet = Codelet::new("step");
        for _ in 0..3 {
            crate::TaskBuilder::new(&cl)
                .rw(&h)
                .flops(1e9)
                .submit_to(&rt);
        }
        rt.wait_all().unwrap();
        assert!((sim.now() - 3.0).abs() < 1e-9, "{}", sim.now());
        assert_eq!(rt.trace().tasks.len(), 3);
    }
}

trait SubmitTo {
    fn submit_to(self, rt: &Runtime);
}
impl SubmitTo for crate::TaskBuilder {
    fn submit_to(self, rt: &Runtime) {
        rt.submit(self).unwrap();
    }
}

#[test]
fn fork_join_on_two_cores() {
    // a (1 s) → b, c, d (1 s each, two cores: 2 s) → e (1 s): 4 s.
    for sched in [Scheduler::Ws, Scheduler::Prio, Scheduler::Dmda] {
        let (sim, rt) = sim_runtime(platform(2, None), sched.clone());
        let cl: Codelet = Codelet::new("t");
        let a = rt.register(0u8);
        let parts: Vec<_> = (0..3).map(|_| rt.register(0u8)).collect();
        crate::TaskBuilder::new(&cl)
            .write(&a)
            .flops(1e9)
            .submit_to(&rt);
        for p in &parts {
            crate::TaskBuilder::new(&cl)
                .read(&a)
                .write(p)
                .flops(1e9)
                .submit_to(&rt);
        }
        let mut join = crate::TaskBuilder::new(&cl).flops(1e9);
        for p in &parts {
            join = join.read(p);
        }
        join.submit_to(&rt);
        rt.wait_all().unwrap();
        assert!((sim.now() - 4.0).abs() < 1e-9, "{:?}: {}", sched, sim.now());
    }
}

#[test]
fn transfers_share_the_link_one_at_a_time() {
    // Two tasks of 10 GFLOP (10 s on the core, 10 ms on the accelerator),
    // each reading its own 1 GB of virtual data from the host over a
    // 1 GB/s link: dmda gives both to the accelerator and prefetches; the
    // copies go one after the other (done at 1 s, then 2 s), and each task
    // runs once its copy is in: 2.01 s.
    let (sim, rt) = sim_runtime(platform(1, Some("k")), Scheduler::Dmda);
    let cl: Codelet = Codelet::new("k");
    let out = rt.register_replicable(vec![0u8; 8]);
    let data: Vec<crate::DataHandle<Vec<u8>>> = (0..2)
        .map(|i| {
            rt.register_virtual(1_000_000_000, [0; 4], format!("d{i}"))
                .unwrap()
        })
        .collect();
    let outs: Vec<_> = (0..2)
        .map(|_| rt.register_replicable(vec![0u8; 0]))
        .collect();
    for (d, o) in data.iter().zip(&outs) {
        crate::TaskBuilder::new(&cl)
            .read(d)
            .write(o)
            .flops(1e10)
            .submit_to(&rt);
    }
    rt.wait_all().unwrap();
    assert!((sim.now() - 2.01).abs() < 1e-6, "{}", sim.now());
    let t = rt.trace();
    assert_eq!(t.transfers.len(), 2);
    assert!(t
        .tasks
        .iter()
        .all(|x| t.workers[x.worker as usize].name == "acc0"));
    drop(out);
}

#[test]
fn virtual_data_is_refused_by_a_real_runtime() {
    let rt = Runtime::with_workers(1).unwrap();
    let e = rt
        .register_virtual::<Vec<u8>>(1 << 20, [0; 4], "big")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("'big'") && e.contains("Config::simulated"),
        "{e}"
    );
}

#[test]
fn symbolic_dags_unfold_in_virtual_time() {
    use crate::symbolic::{self, TaskClasses};
    // A binary tree of depth 3 fanning out then a chain per leaf: every
    // task 1 s on 4 cores. Level sizes 1, 2, 4, 8: 1 + 1 + 1 + 2 = 5 s.
    struct Tree(Codelet);
    impl TaskClasses for Tree {
        type Key = (u32, u32);
        fn roots(&self) -> Vec<(u32, u32)> {
            vec![(0, 0)]
        }
        fn predecessor_count(&self, k: &(u32, u32)) -> usize {
            usize::from(k.0 > 0)
        }
        fn successors(&self, k: &(u32, u32), out: &mut Vec<(u32, u32)>) {
            if k.0 < 3 {
                out.extend([(k.0 + 1, 2 * k.1), (k.0 + 1, 2 * k.1 + 1)]);
            }
        }
        fn task(&self, _k: &(u32, u32)) -> crate::TaskBuilder {
            crate::TaskBuilder::new(&self.0).flops(1e9)
        }
    }
    let (sim, rt) = sim_runtime(platform(4, None), Scheduler::Prio);
    let stats = symbolic::run(&rt, Arc::new(Tree(Codelet::new("node")))).unwrap();
    assert_eq!(stats.instantiated, 15);
    assert!((sim.now() - 5.0).abs() < 1e-9, "{}", sim.now());
}
