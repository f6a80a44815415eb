//! Proves NUMA-aware data placement on a synthetic two-node machine (this one
//! has one NUMA node, so the runtime is told which node each worker is on):
//! results over two host memory nodes (and a device) equal a sequential
//! replay; a replica is allocated on the node of the worker that first writes
//! it; dmda runs tasks where their data already is.

use std::sync::Arc;
use std::time::Duration;

use tessera_backends::emu::{EmuConfig, EmuDevice};
use tessera_engine::{Codelet, Config, Runtime, TaskBuilder};
use tessera_tests::with_timeout;

const LIMIT: Duration = Duration::from_secs(120);

fn two_numa(sched: &str, device: bool) -> Runtime {
    let mut cfg = Config::with_workers(4).scheduler(sched.parse().unwrap());
    cfg.worker_numa = Some(vec![0, 0, 1, 1]);
    cfg.trace = true;
    if device {
        cfg.devices
            .push(Arc::new(EmuDevice::new(0, EmuConfig::default())));
    }
    Runtime::new(cfg).unwrap()
}

#[test]
fn coherence_over_two_numa_nodes_matches_sequential_replay() {
    with_timeout(LIMIT, || {
        for (sched, device) in [
            ("ws", false),
            ("prio", true),
            ("dmda", true),
            ("dmda", false),
        ] {
            let rt = two_numa(sched, device);
            let cl = Codelet::new("acc");
            let hs: Vec<_> = (0..6)
                .map(|i| rt.register_replicable(vec![i as u64; 64]))
                .collect();
            let mut expected: Vec<u64> = (0..6).map(|i| i as u64).collect();
            for k in 0..300usize {
                let (src, dst) = (k % 6, (k * 7 + 1) % 6);
                if src == dst {
                    continue;
                }
                expected[dst] = expected[dst]
                    .wrapping_mul(3)
                    .wrapping_add(expected[src])
                    .wrapping_add(k as u64);
                let (s2, d2) = (hs[src].clone(), hs[dst].clone());
                rt.submit(
                    TaskBuilder::new(&cl)
                        .read(&hs[src])
                        .rw(&hs[dst])
                        .body(move |ctx| {
                            let s = ctx.read(&s2)?[0];
                            for x in ctx.write(&d2)?.iter_mut() {
                                *x = x.wrapping_mul(3).wrapping_add(s).wrapping_add(k as u64);
                            }
                            Ok(())
                        }),
                )
                .unwrap();
            }
            rt.wait_all_timeout(LIMIT).unwrap();
            let stats = rt.memory_stats();
            assert_eq!(stats.nodes[0].name, "numa0");
            assert_eq!(stats.nodes[1].name, "numa1");
            for (h, e) in hs.into_iter().zip(expected) {
                assert_eq!(rt.unregister(h).unwrap(), vec![e; 64], "{sched}");
            }
        }
    });
}

#[test]
fn first_writer_allocates_on_its_numa_node_and_dmda_follows_the_data() {
    with_timeout(LIMIT, || {
        let rt = two_numa("dmda", false);
        let init = Codelet::new("init");
        let use_ = Codelet::new("use");
        // 16 MiB of data, first written by a task placed on NUMA node 1.
        let big = rt.register_replicable(vec![0.0f64; 1 << 21]);
        let b2 = big.clone();
        rt.submit(
            TaskBuilder::new(&init)
                .write(&big)
                .on_node(1)
                .body(move |ctx| {
                    ctx.write(&b2)?.iter_mut().for_each(|x| *x = 1.0);
                    Ok(())
                }),
        )
        .unwrap();
        rt.wait_all().unwrap();
        assert!(
            rt.memory_stats().nodes[1].resident >= 8 << 21,
            "replica not on numa1"
        );
        // Cheap readers: moving 16 MiB across nodes costs more than running
        // them, so dmda keeps them on node 1's workers.
        for _ in 0..20 {
            let b3 = big.clone();
            rt.submit(
                TaskBuilder::new(&use_)
                    .flops(1e3)
                    .read(&big)
                    .body(move |ctx| {
                        assert_eq!(ctx.read(&b3)?[7], 1.0);
                        Ok(())
                    }),
            )
            .unwrap();
        }
        rt.wait_all().unwrap();
        let t = rt.trace();
        let nodes: Vec<u32> = t
            .tasks
            .iter()
            .filter(|x| x.codelet == "use")
            .map(|x| t.workers[x.worker as usize].memory_node)
            .collect();
        assert_eq!(nodes.len(), 20);
        assert!(
            nodes.iter().all(|&n| n == 1),
            "readers ran on nodes {nodes:?}"
        );
        assert_eq!(rt.unregister(big).unwrap()[5], 1.0);
    });
}
