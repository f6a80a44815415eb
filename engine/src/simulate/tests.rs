//! Proves the event loop on hand-built DAGs whose makespans are worked out
//! by hand: a chain, a fork-join on two cores, a transfer-bound case (one
//! link, FIFO), the symbolic front-end's unfolding in virtual time, and
//! that virtual data is refused by a real runtime; and the durations: a
//! codelet the platform does not know takes the default rate with one
//! warning (the engine's own receive tasks with none), and a real run's
//! measurements time its codelets in `Simulation::with_calibrated`; and
//! that messages between two ranks arrive in the order they were sent.

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
        let (sim, rt) = sim_runtime(platform(2, None), sched);
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
fn a_codelet_runs_only_where_it_has_a_body() {
    // Issue 42: a codelet with a CPU body alone ran on simulated GPUs. On
    // a core of 1 GFLOP/s beside an accelerator of 1000, dmda would put
    // every 1-GFLOP task on the accelerator; only the one with a device
    // body may go there.
    for (name, device_body, on_acc) in [("k", false, false), ("k", true, true)] {
        let (sim, rt) = sim_runtime(platform(1, Some(name)), Scheduler::Dmda);
        let cl = Codelet::<crate::ReadWrite<Vec<u8>>>::new(name).cpu(|_, _, _| Ok(()));
        let cl = if device_body {
            cl.device::<super::VirtualDevice, _>(|_, _, _| Ok(()))
        } else {
            cl
        };
        for _ in 0..3 {
            let h = rt.register_replicable(vec![0u8; 8]);
            rt.task(&cl, h.rw()).flops(1e9).submit().unwrap();
        }
        rt.wait_all().unwrap();
        let t = rt.trace();
        let on: Vec<&str> = t
            .tasks
            .iter()
            .map(|x| t.workers[x.worker as usize].name.as_str())
            .collect();
        if on_acc {
            assert!(on.iter().all(|w| *w == "acc"), "{on:?}");
        } else {
            assert!(on.iter().all(|w| *w != "acc"), "{on:?}");
            assert!((sim.now() - 3.0).abs() < 1e-6, "{}", sim.now());
        }
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
        .all(|x| t.workers[x.worker as usize].name == "acc"));
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

#[test]
fn unknown_codelets_take_the_default_rate_with_one_warning() {
    // Default 1 GFLOP/s; `known` has 2. Three `mine` (1 s each) and two
    // `known` (0.5 s each) in a chain: 4 s, and one warning, for `mine`.
    let p = Platform::parse(
        "name = \"p\"\n[node]\ncores = 1\ntask_overhead_us = 0\n[node.cpu]\ngflops = 1\ngbs = 2\ncodelets = { known = { gflops = 2 } }\n",
        false,
        "p.toml",
    )
    .unwrap();
    let (sim, rt) = sim_runtime(p, Scheduler::Ws);
    let h = rt.register(0u64);
    let (mine, known): (Codelet, Codelet) = (Codelet::new("mine"), Codelet::new("known"));
    for cl in [&mine, &known, &mine, &known, &mine] {
        crate::TaskBuilder::new(cl)
            .rw(&h)
            .flops(1e9)
            .body(|_| Ok(()))
            .submit_to(&rt);
    }
    rt.wait_all().unwrap();
    assert!((sim.now() - 4.0).abs() < 1e-9, "{}", sim.now());
    let w = sim.warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].starts_with("codelet 'mine' has no rate in platform 'p'")
            && w[0].contains("on cpu: its flops at 1 GFLOP/s"),
        "{}",
        w[0]
    );
    // Without flops: its data at the default GB/s.
    let idle: Codelet = Codelet::new("idle");
    let v = rt.register_replicable(vec![0u8; 1000]);
    crate::TaskBuilder::new(&idle)
        .rw(&v)
        .body(|_| Ok(()))
        .submit_to(&rt);
    rt.wait_all().unwrap();
    assert!((sim.now() - 4.0 - 500e-9).abs() < 1e-9, "{}", sim.now());
    let w = sim.warnings();
    assert!(
        w.len() == 2 && w[1].contains("'idle'") && w[1].contains("its data at 2 GB/s"),
        "{w:?}"
    );
}

#[test]
fn engine_codelets_are_not_warned_about() {
    use crate::dist::symbolic::{self, DistClasses};
    use crate::dist::DataRef;
    use crate::symbolic::TaskClasses;
    // Task 0 on rank 0 writes `x`, task 1 on rank 1 reads it: a remote
    // edge, so rank 1 runs the distributed layer's receive task, which the
    // platform has no rate for and takes the default on purpose.
    struct Edge {
        x: crate::DataHandle<Vec<f64>>,
        cl: Codelet,
    }
    impl TaskClasses for Edge {
        type Key = u32;
        fn roots(&self) -> Vec<u32> {
            vec![0]
        }
        fn predecessor_count(&self, k: &u32) -> usize {
            *k as usize
        }
        fn successors(&self, k: &u32, out: &mut Vec<u32>) {
            if *k == 0 {
                out.push(1);
            }
        }
        fn task(&self, k: &u32) -> crate::TaskBuilder {
            let t = crate::TaskBuilder::new(&self.cl)
                .flops(1e9)
                .body(|_| Ok(()));
            if *k == 0 {
                t.write(&self.x)
            } else {
                t.read(&self.x)
            }
        }
        fn owner(&self, k: &u32) -> usize {
            *k as usize
        }
    }
    impl DistClasses for Edge {
        fn flows(&self, _: &u32, _: &u32, out: &mut Vec<u64>) {
            out.push(0);
        }
        fn data(&self, _: u64) -> DataRef {
            DataRef::of(&self.x)
        }
        fn owned(&self, _: usize) -> usize {
            1
        }
    }
    let p = Platform::parse(
        "nodes = 2\n[node]\ncores = 1\n[node.cpu]\ngflops = 1\ngbs = 1\ncodelets = { t = { gflops = 1 } }\n[network]\ngbs = 1\n",
        false,
        "two.toml",
    )
    .unwrap();
    let sim = Simulation::with_models(p, Arc::default(), false, false);
    let nets: Vec<_> = (0..2).map(|r| sim.net(r)).collect();
    let rts: Vec<Runtime> = (0..2)
        .map(|r| Runtime::new(Config::simulated(sim.node(r)).trace(true)).unwrap())
        .collect();
    let started: Vec<_> = (0..2)
        .map(|r| {
            let x = rts[r].register_replicable(vec![0.0; 8]);
            let edge = Arc::new(Edge {
                x,
                cl: Codelet::new("t"),
            });
            symbolic::start(&rts[r], &nets[r], edge)
        })
        .collect();
    sim.run().unwrap();
    let finishing: Vec<_> = started
        .into_iter()
        .enumerate()
        .map(|(r, s)| s.finish(&rts[r], &nets[r]).unwrap())
        .collect();
    sim.run().unwrap();
    for (r, f) in finishing.into_iter().enumerate() {
        f.wait(&nets[r]).unwrap();
    }
    let received = rts[1].trace().tasks;
    assert!(
        received.iter().any(|t| t.codelet == "recv"),
        "rank 1 ran a receive task: {received:?}"
    );
    assert_eq!(sim.warnings(), Vec::<String>::new());
}

#[test]
fn a_real_run_times_its_codelets_in_a_calibrated_simulation() {
    use crate::ReadWrite;
    // The user's `gemm` is not the platform's: the platform's rate (1000
    // GFLOP/s) predicts its flops (a thousand per element) at that rate, by
    // name. Measured for real, then
    // simulated with those measurements, each task takes what it took
    // here, though each size was measured once.
    let p = || {
        Platform::parse(
            "[node]\ncores = 1\ntask_overhead_us = 0\n[node.cpu]\ngflops = 1\ncodelets = { gemm = { gflops = 1000 } }\n",
            false,
            "p.toml",
        )
        .unwrap()
    };
    let gemm = Codelet::<ReadWrite<Vec<f64>>, usize>::with_args("gemm")
        .flops(|&n| n as f64 * 1e3)
        .cpu(|_, _, v| {
            for _ in 0..20 {
                v.iter_mut().for_each(|x| *x = (*x + 1.0).sqrt());
            }
            Ok(())
        });
    let dag = |rt: &Runtime| {
        for n in [1 << 12, 1 << 14] {
            let v = rt.register(vec![1.0; n]);
            rt.task(&gemm, v.rw()).args(n).submit().unwrap();
        }
        rt.wait_all().unwrap();
    };
    let real = Runtime::new(Config::with_workers(1).calibrate(true)).unwrap();
    dag(&real);
    let measured: f64 = real.perf_models().summary().iter().map(|r| r.median).sum();
    assert_eq!(real.perf_models().summary().len(), 2, "one size each");

    let by_name = Simulation::new(p()).unwrap();
    dag(&Runtime::new(Config::simulated(by_name.node(0))).unwrap());
    let rated = (1 << 12 | 1 << 14) as f64 * 1e3 / 1e12;
    assert!((by_name.now() - rated).abs() < 1e-9, "{}", by_name.now());

    let sim = Simulation::with_calibrated(p(), real.perf_models()).unwrap();
    // Silenced before the first task: the note made while the simulation
    // was built is not printed either.
    sim.print_warnings(false);
    dag(&Runtime::new(Config::simulated(sim.node(0))).unwrap());
    assert_eq!(sim.durations.echoed(), 0);
    assert!(
        (sim.now() - measured).abs() < 1e-8,
        "{} vs {measured}",
        sim.now()
    );
    // One warning: this machine's timings stand for the platform's cpu.
    let w = sim.warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains("gemm on cpu timed by measurements of this machine"),
        "{w:?}"
    );
}

#[test]
fn warnings_go_to_stderr_once_and_can_be_kept_off_it() {
    // Issue 42: every warning was printed on stderr and returned by
    // warnings(), with no way to silence the first.
    let p = || {
        Platform::parse(
            "name = \"p\"\n[node]\ncores = 1\ntask_overhead_us = 0\n[node.cpu]\ngflops = 1\ngbs = 2\n",
            false,
            "inline",
        )
        .unwrap()
    };
    for print in [true, false] {
        let sim = Simulation::new(p()).unwrap();
        sim.print_warnings(print);
        let rt = Runtime::new(Config::simulated(sim.node(0))).unwrap();
        let h = rt.register(0u64);
        let mine: Codelet = Codelet::new("mine");
        for _ in 0..3 {
            crate::TaskBuilder::new(&mine)
                .rw(&h)
                .flops(1e9)
                .body(|_| Ok(()))
                .submit_to(&rt);
        }
        rt.wait_all().unwrap();
        assert_eq!(sim.warnings().len(), 1, "{:?}", sim.warnings());
        assert_eq!(sim.durations.echoed(), usize::from(print));
    }
}

#[test]
fn a_short_message_does_not_overtake_a_long_one() {
    // Two ranks of one node, through memory at 1 GB/s: alone, the 1 MB
    // message would arrive after 1 ms and the 10-byte one sent after it
    // after 14 ns.
    let p = Platform::parse(
        "ranks_per_node = 2\nmemory_gbs = 1\n[node]\ncores = 2\n[node.cpu]\ngflops = 1\n[network]\nlatency_us = 0\ngbs = 1\n",
        false,
        "node.toml",
    )
    .unwrap();
    let sim = Simulation::with_models(p, Arc::default(), false, false);
    let (a, b) = (sim.net(0), sim.net(1));
    let (to_b, (_, inbox)) = (a.channel(), b.open_mailbox());
    to_b.send_bytes(1, &vec![7u8; 1_000_000]);
    to_b.send_bytes(1, &[9u8; 10]);
    sim.run().unwrap();
    let lens: Vec<usize> = inbox.try_iter().map(|(_, m)| m.len()).collect();
    assert_eq!(lens, [1_000_000, 10]);
    assert!((sim.now() - 1.000_004e-3).abs() < 1e-12, "{}", sim.now());
}

/// Issue 28: a task of 10^300 s (a platform edited past the file's bounds)
/// used to wrap the u64-ns clock, and the run reported 0.001 s. Now the
/// clock saturates and the run fails, saying so.
#[test]
fn clock_overflow_fails_the_run_instead_of_wrapping() {
    let mut p = platform(1, None);
    p.node
        .cpu
        .codelets
        .insert("long".into(), super::Rate::Seconds(1e300));
    let (sim, rt) = sim_runtime(p, Scheduler::Ws);
    let h = rt.register(0u64);
    let cl: Codelet = Codelet::new("long");
    for _ in 0..2 {
        crate::TaskBuilder::new(&cl).rw(&h).submit_to(&rt);
    }
    let e = rt.wait_all().unwrap_err();
    // Issue 42: a simulation that cannot go on has its own error, not
    // "invalid runtime configuration".
    assert!(matches!(e, crate::Error::Simulation(_)), "{e:?}");
    let e = e.to_string();
    assert!(e.starts_with("simulation stopped: "), "{e}");
    assert!(e.contains("simulated clock overflowed"), "{e}");
    assert!(
        sim.now() >= 1e9,
        "the clock stops at its limit: {}",
        sim.now()
    );
}

#[test]
fn a_rendezvous_ends_its_members_together() {
    // Two cores. x (3 s) and a (1 s) start at 0; b (1 s) reads x's output, so it starts
    // at 3 s; a and b meet (2 exchanges of 1 MB over a 1 ms, 1 GB/s network: 2 ms each),
    // so both end at 3 + 1 + 0.004 s, a's core held from 0 s; c (1 s) after a: 5.004 s.
    let text = "name = \"test\"\n[node]\ncores = 2\nreserve_core_per_accelerator = false\ntask_overhead_us = 0\n[node.cpu]\ngflops = 1\n[network]\nlatency_us = 1000\ngbs = 1\n";
    let p = Platform::parse(text, false, "test.toml").unwrap();
    for sched in [Scheduler::Ws, Scheduler::Prio, Scheduler::Dmda] {
        let (sim, rt) = sim_runtime(p.clone(), sched);
        let cl: Codelet = Codelet::new("t");
        let (x, y) = (rt.register(0u8), rt.register(0u8));
        let meet = crate::Rendezvous {
            key: 7,
            members: 2,
            rounds: 2,
            bytes: 1_000_000,
        };
        crate::TaskBuilder::new(&cl)
            .write(&x)
            .flops(3e9)
            .label("x")
            .submit_to(&rt);
        crate::TaskBuilder::new(&cl)
            .write(&y)
            .flops(1e9)
            .label("a")
            .rendezvous(meet.clone())
            .submit_to(&rt);
        crate::TaskBuilder::new(&cl)
            .read(&x)
            .flops(1e9)
            .label("b")
            .rendezvous(meet)
            .submit_to(&rt);
        crate::TaskBuilder::new(&cl)
            .read(&y)
            .flops(1e9)
            .label("c")
            .submit_to(&rt);
        rt.wait_all().unwrap();
        assert!((sim.now() - 5.004).abs() < 1e-9, "{sched:?}: {}", sim.now());
        let t = rt.trace();
        let span = |l: &str| {
            let r = t
                .tasks
                .iter()
                .find(|r| r.label.as_deref() == Some(l))
                .unwrap();
            (r.start, r.end)
        };
        let (a, b) = (span("a"), span("b"));
        assert_eq!(a.1, b.1, "{sched:?}: a and b end together");
        assert_eq!(a.0, 0, "{sched:?}: a holds its core from its start");
        assert_eq!(b.1, 4_004_000_000, "{sched:?}");
    }
}

/// Issue 42, item 12: a platform's single devices named `cuda0` and `cuda1`
/// (as `platform import` writes them) became `cuda00` and `cuda10`. A name
/// given to one device is kept; several, or the default name, get an index.
#[test]
fn single_devices_keep_their_names() {
    let p = crate::simulate::Platform::parse(
        "[node]\ncores = 8\n[node.cpu]\ngflops = 1\n\
         [[node.accelerators]]\nname = \"cuda0\"\ngflops = 10\nlink = { gbs = 1 }\n\
         [[node.accelerators]]\nname = \"cuda1\"\ngflops = 10\nlink = { gbs = 1 }\n\
         [[node.accelerators]]\nname = \"gpu\"\ncount = 2\ngflops = 10\nlink = { gbs = 1 }\n\
         [[node.accelerators]]\ngflops = 10\nlink = { gbs = 1 }\n",
        false,
        "p.toml",
    )
    .unwrap();
    let sim = Simulation::new(p).unwrap();
    let names: Vec<String> = sim.node(0).devices().iter().map(|d| d.name()).collect();
    assert_eq!(names, ["cuda0", "cuda1", "gpu0", "gpu1", "acc3_0"]);
}
