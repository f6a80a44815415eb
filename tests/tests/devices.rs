//! Proves heterogeneous data management: results over several memory nodes
//! (host + emulated devices) equal a sequential replay for random DAGs; data 4x a
//! node's limit still runs, by eviction; dmda prefers the faster device and
//! skips a transfer that does not pay; a failing device body falls back to
//! the CPU body; a working set that can never fit is refused by name.

use std::sync::Arc;
use std::time::Duration;

use tessera_backends::emu::{EmuConfig, EmuDevice};
use tessera_engine::device::{Device, Link};
use tessera_engine::{Codelet, Config, Runtime, TaskBuilder, TaskContext};
use tessera_tests::random_dag::{Params, Program};
use tessera_tests::{gate, with_timeout};

const LIMIT: Duration = Duration::from_secs(120);

fn fast_sim(i: usize, speed: f64, mem: Option<u64>) -> Arc<dyn Device> {
    sim_device(i, speed, mem, false)
}

/// A emulated device; with `own_memory` its replicas are raw buffers that only
/// device bodies reach (the GPU data path).
fn sim_device(i: usize, speed: f64, mem: Option<u64>, own_memory: bool) -> Arc<dyn Device> {
    Arc::new(EmuDevice::new(
        i,
        EmuConfig {
            speed,
            latency: Duration::from_micros(1),
            half_speed_flops: 0.0,
            reference_gflops: 50.0,
            link: Link {
                latency: Duration::from_micros(1),
                bandwidth: 50e9,
            },
            memory: mem,
            own_memory,
        },
    ))
}

fn config(workers: usize, sched: &str, devices: Vec<Arc<dyn Device>>) -> Config {
    let mut c = Config::with_workers(workers).scheduler(sched.parse().unwrap());
    c.devices = devices;
    c
}

/// One random op: target = f(target?, reads) over Vec<u64> handles.
fn run_random(
    rt: &Runtime,
    seed: u64,
    handles: usize,
    tasks: usize,
    len: usize,
) -> (Vec<Vec<u64>>, Vec<Vec<u64>>) {
    run_random_on(rt, seed, handles, tasks, len, None, None)
}

/// The emulated device (or the sim inside a `FaultyDevice`) a device body runs on:
/// its memory is host memory, reached through typed device views.
fn sim_of<'a>(ctx: &TaskContext<'a>) -> &'a EmuDevice {
    let any = ctx
        .device()
        .expect("a device body runs on a device")
        .as_any();
    any.downcast_ref::<EmuDevice>()
        .or_else(|| any.downcast_ref::<FaultyDevice>().map(|f| &f.0))
        .expect("a emulated device")
}

/// [`run_random`] with every task placed on memory node `hint` (dmda).
fn run_random_on(
    rt: &Runtime,
    seed: u64,
    handles: usize,
    tasks: usize,
    len: usize,
    hint: Option<usize>,
    device_runs: Option<&Arc<std::sync::atomic::AtomicUsize>>,
) -> (Vec<Vec<u64>>, Vec<Vec<u64>>) {
    let params = Params {
        lanes: len,
        max_reads: 2,
        overwrite: 0.4,
        ..Params::new(handles, tasks)
    };
    let prog = Program::random(seed, &params);
    let hs: Vec<_> = (0..handles)
        .map(|h| rt.register_replicable(prog.initial(h)))
        .collect();
    let cl = Codelet::new("mix");
    for (k, op) in prog.ops.iter().enumerate() {
        let mut t = TaskBuilder::new(&cl).label(format!("mix{k}")).flops(1e5);
        if let Some(n) = hint {
            t = t.on_node(n);
        }
        t = op.declare(t, &hs);
        if let Some(count) = device_runs {
            let rh: Vec<_> = op.reads.iter().map(|&r| hs[r].clone()).collect();
            let th = hs[op.target].clone();
            let (op, count) = (op.clone(), Arc::clone(count));
            t = t.device_body(move |ctx| {
                assert!(ctx.device().is_some(), "a device body runs on a device");
                assert!(
                    ctx.read(&th).is_err(),
                    "typed access to device memory must fail"
                );
                let sim = sim_of(ctx);
                let mut inputs: Vec<&[u64]> = Vec::with_capacity(rh.len());
                for h in &rh {
                    inputs.push(sim.host(ctx.device_view(h)?)?);
                }
                op.apply(&inputs, sim.host_mut(ctx.device_view_mut(&th)?)?);
                count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Ok(())
            });
        }
        let own_memory = device_runs.is_some();
        let run = op.body(&hs);
        t = t.body(move |ctx| {
            assert!(
                !own_memory || ctx.device().is_none(),
                "a CPU body never runs on device memory"
            );
            run(ctx)
        });
        rt.submit(t).unwrap();
    }
    rt.wait_all_timeout(LIMIT).unwrap();
    let got = hs.into_iter().map(|h| rt.unregister(h).unwrap()).collect();
    (got, prog.expected())
}

#[test]
fn coherence_over_three_memory_nodes_matches_sequential_replay() {
    with_timeout(Duration::from_secs(300), || {
        let runtimes: Vec<Runtime> = ["dmda", "ws", "prio"]
            .iter()
            .flat_map(|s| {
                (1..=2).map(move |w| {
                    Runtime::new(config(
                        w,
                        s,
                        vec![fast_sim(0, 1.0, None), fast_sim(1, 3.0, None)],
                    ))
                    .unwrap()
                })
            })
            .collect();
        for seed in 0..500u64 {
            let rt = &runtimes[seed as usize % runtimes.len()];
            let (got, expected) = run_random(rt, seed, 6, 25, 16);
            assert_eq!(
                got,
                expected,
                "seed {seed}: {} differs from sequential replay",
                rt.scheduler_name()
            );
        }
        // data really moved between nodes
        let moved: u64 = runtimes
            .iter()
            .flat_map(|rt| rt.memory_stats().nodes)
            .map(|n| n.bytes_in)
            .sum();
        assert!(moved > 0, "no transfer happened");
    });
}

#[test]
fn data_four_times_a_device_limit_runs_by_eviction() {
    with_timeout(LIMIT, || {
        let len = 1024; // 8 KiB per handle
        let handles = 16; // 128 KiB of data
        let limit = (handles * len * 8 / 4) as u64; // the device holds a quarter
                                                    // `ws` may leave the device idle; `dmda-device` hints every task to
                                                    // the device, so all the data must pass through its memory.
        for sched in ["dmda-device", "dmda", "ws"] {
            let rt = Runtime::new(config(
                1,
                sched.trim_end_matches("-device"),
                vec![fast_sim(0, 4.0, Some(limit))],
            ))
            .unwrap();
            let hint = (sched == "dmda-device").then_some(1);
            let (got, expected) = run_random_on(&rt, 7, handles, 300, len, hint, None);
            assert_eq!(got, expected, "{sched}: wrong result under eviction");
            let stats = rt.memory_stats();
            let dev = &stats.nodes[1];
            assert!(
                dev.resident <= limit,
                "{sched}: {} bytes resident over the limit {limit}",
                dev.resident
            );
            assert!(
                hint.is_none() || dev.evictions > 0,
                "{sched}: expected evictions with data 4x the limit: {stats}"
            );
        }
    });
}

#[test]
fn device_memory_coherence_matches_sequential_replay() {
    // Two emulated devices whose replicas are raw buffers (the GPU data path):
    // uploads, downloads, device → device copies through the host, and
    // device bodies that see only device views.
    with_timeout(Duration::from_secs(300), || {
        let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let runtimes: Vec<Runtime> = ["dmda", "ws", "prio"]
            .iter()
            .flat_map(|s| {
                (1..=2).map(move |w| {
                    Runtime::new(config(
                        w,
                        s,
                        vec![
                            sim_device(0, 1.0, None, true),
                            sim_device(1, 3.0, None, true),
                        ],
                    ))
                    .unwrap()
                })
            })
            .collect();
        for seed in 0..300u64 {
            let rt = &runtimes[seed as usize % runtimes.len()];
            let (got, expected) = run_random_on(rt, seed, 6, 25, 16, None, Some(&runs));
            assert_eq!(
                got,
                expected,
                "seed {seed}: {} differs from sequential replay",
                rt.scheduler_name()
            );
        }
        assert!(
            runs.load(std::sync::atomic::Ordering::Relaxed) > 0,
            "no device body ran"
        );
        let to_devices: u64 = runtimes
            .iter()
            .flat_map(|rt| rt.memory_stats().nodes.into_iter().skip(1))
            .map(|n| n.bytes_in)
            .sum();
        assert!(to_devices > 0, "nothing was uploaded");
    });
}

#[test]
fn device_memory_four_times_over_its_limit_runs_by_eviction() {
    with_timeout(LIMIT, || {
        let (len, handles) = (1024, 16);
        let limit = (handles * len * 8 / 4) as u64;
        let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let rt = Runtime::new(config(
            1,
            "dmda",
            vec![sim_device(0, 4.0, Some(limit), true)],
        ))
        .unwrap();
        let (got, expected) = run_random_on(&rt, 11, handles, 300, len, Some(1), Some(&runs));
        assert_eq!(
            got, expected,
            "wrong result under eviction from device memory"
        );
        let stats = rt.memory_stats();
        assert!(stats.nodes[1].resident <= limit, "{stats}");
        assert!(stats.nodes[1].evictions > 0, "expected evictions: {stats}");
        assert_eq!(
            runs.load(std::sync::atomic::Ordering::Relaxed),
            300,
            "every task ran on the device"
        );
    });
}

#[test]
fn tasks_without_a_device_body_stay_off_device_memory() {
    with_timeout(LIMIT, || {
        for sched in ["ws", "prio", "dmda"] {
            let rt =
                Runtime::new(config(1, sched, vec![sim_device(0, 100.0, None, true)])).unwrap();
            let h = rt.register_replicable(vec![1u64; 64]);
            let cl = Codelet::new("host_only_body");
            for _ in 0..50 {
                rt.submit(TaskBuilder::new(&cl).rw(&h).flops(1e6).on_node(1).body({
                    let h = h.clone();
                    move |ctx| {
                        assert_eq!(ctx.memory_node(), 0, "ran on device memory");
                        ctx.rw(&h)?.iter_mut().for_each(|x| *x += 1);
                        Ok(())
                    }
                }))
                .unwrap();
            }
            rt.wait_all_timeout(LIMIT).unwrap();
            assert_eq!(rt.unregister(h).unwrap(), vec![51u64; 64], "{sched}");
        }
    });
}

#[test]
fn working_set_larger_than_the_device_runs_on_the_cpu() {
    with_timeout(LIMIT, || {
        // The device is "faster" but holds 1000 bytes; the task needs 4000:
        // admission control keeps it on the CPU worker, under every policy.
        for sched in ["ws", "prio", "dmda"] {
            let mut cfg = config(1, sched, vec![fast_sim(0, 1000.0, Some(1000))]);
            cfg.trace = true;
            let rt = Runtime::new(cfg).unwrap();
            let cl = Codelet::new("big");
            let a = rt.register_replicable_named(vec![0u8; 4000], "A");
            for i in 0..20 {
                let a2 = a.clone();
                rt.submit(
                    TaskBuilder::new(&cl)
                        .label(format!("big{i}"))
                        .rw(&a)
                        .body(move |ctx| {
                            ctx.write(&a2)?[0] += 1;
                            Ok(())
                        }),
                )
                .unwrap();
            }
            rt.wait_all().unwrap();
            assert_eq!(rt.unregister(a).unwrap()[0], 20, "{sched}");
            let t = rt.trace();
            assert!(
                t.tasks
                    .iter()
                    .all(|x| t.workers[x.worker as usize].name == "cpu0"),
                "{sched}: ran on the device"
            );
            assert_eq!(
                rt.memory_stats().nodes[1].resident,
                0,
                "{sched}: something was allocated on the device"
            );
        }
    });
}

#[test]
fn dmda_prefers_the_faster_device() {
    with_timeout(LIMIT, || {
        let mut cfg = config(
            1,
            "dmda",
            vec![fast_sim(0, 1.0, None), fast_sim(1, 8.0, None)],
        );
        cfg.trace = true;
        let rt = Runtime::new(cfg).unwrap();
        let cl = Codelet::new("kernel");
        let hs: Vec<_> = (0..40)
            .map(|_| rt.register_replicable(vec![1.0f64; 8]))
            .collect();
        for h in &hs {
            let h2 = h.clone();
            // 5e7 flops: 1 ms at speed 1, 0.125 ms at speed 8; cheap body.
            rt.submit(TaskBuilder::new(&cl).flops(5e7).rw(h).body(move |ctx| {
                ctx.write(&h2)?[0] += 1.0;
                Ok(())
            }))
            .unwrap();
        }
        rt.wait_all().unwrap();
        let t = rt.trace();
        let on = |name: &str| {
            let w = t.workers.iter().position(|w| w.name == name).unwrap() as u32;
            t.tasks.iter().filter(|x| x.worker == w).count()
        };
        let (slow, fast) = (on("emu0"), on("emu1"));
        assert!(
            fast > 2 * slow.max(1),
            "fast device got {fast} tasks, slow {slow}"
        );
    });
}

/// A task with no flops hint and no measurement yet is estimated on a CPU
/// worker by the data it streams, not at a fixed 10 µs: row interchanges
/// over 16 MiB each go to a device whose link moves them in a third of a
/// millisecond (the tile LU's first swaps all went to its one CPU worker,
/// 56 ms each, on an H200 node), but one, the CPU's calibration sample.
/// With a slow link they stay on the CPU.
#[test]
fn dmda_estimates_an_unmeasured_flopless_task_by_its_data() {
    with_timeout(LIMIT, || {
        let slow: Arc<dyn Device> = Arc::new(EmuDevice::new(
            0,
            EmuConfig {
                link: Link {
                    latency: Duration::from_millis(1),
                    bandwidth: 1e8,
                },
                ..EmuConfig::default()
            },
        ));
        for (device, to_device) in [(fast_sim(0, 1.0, None), true), (slow, false)] {
            let mut cfg = config(1, "dmda", vec![device]);
            cfg.trace = true;
            let rt = Runtime::new(cfg).unwrap();
            let cl = Codelet::new("swap-like");
            let hs: Vec<_> = (0..4)
                .map(|_| rt.register_replicable(vec![1.0f64; 2 << 20]))
                .collect();
            // The four tasks become ready together, pushed one after the
            // other by the CPU worker that ran the gate: no CPU task can end
            // between two placements. Submitted one by one, a CPU task
            // could end before the next submission (a slow or preempted
            // submitter), leaving the CPU's queue empty again and the CPU
            // within twice the device's end: a second calibration sample
            // (CI, stop 58: "2 of 4 ran on the CPU").
            let (gate, go) = gate(&rt);
            for h in &hs {
                let h2 = h.clone();
                rt.submit(TaskBuilder::new(&cl).rw(h).after(&gate).body(move |ctx| {
                    ctx.write(&h2)?[0] += 1.0;
                    Ok(())
                }))
                .unwrap();
            }
            go.send(()).unwrap();
            rt.wait_all().unwrap();
            let t = rt.trace();
            let cpu = t.workers.iter().position(|w| w.name == "cpu0").unwrap() as u32;
            let on_cpu = t
                .tasks
                .iter()
                .filter(|x| x.worker == cpu && x.codelet == "swap-like")
                .count();
            if to_device {
                // At most one: the CPU's calibration sample, taken once the
                // device's queue makes it no more than twice as slow.
                assert!(on_cpu <= 1, "fast link: {on_cpu} of 4 ran on the CPU");
            } else {
                assert_eq!(
                    on_cpu,
                    4,
                    "slow link: {} of 4 ran on the device",
                    4 - on_cpu
                );
            }
            for h in hs {
                assert_eq!(rt.unregister(h).unwrap()[0], 2.0);
            }
        }
    });
}

#[test]
fn dmda_skips_a_transfer_that_does_not_pay() {
    with_timeout(LIMIT, || {
        // A slow link: moving 8 MB costs 80 ms; the task itself is tiny.
        let slow_link: Arc<dyn Device> = Arc::new(EmuDevice::new(
            0,
            EmuConfig {
                speed: 100.0,
                link: Link {
                    latency: Duration::from_millis(1),
                    bandwidth: 1e8,
                },
                ..EmuConfig::default()
            },
        ));
        let mut cfg = config(1, "dmda", vec![slow_link]);
        cfg.trace = true;
        let rt = Runtime::new(cfg).unwrap();
        let cl = Codelet::new("small");
        let big = rt.register_replicable(vec![0.0f64; 1 << 20]);
        for _ in 0..5 {
            let b2 = big.clone();
            rt.submit(TaskBuilder::new(&cl).flops(1e4).rw(&big).body(move |ctx| {
                ctx.write(&b2)?[0] += 1.0;
                Ok(())
            }))
            .unwrap();
        }
        rt.wait_all().unwrap();
        assert_eq!(rt.unregister(big).unwrap()[0], 5.0);
        let stats = rt.memory_stats();
        assert_eq!(
            stats.nodes[1].bytes_in, 0,
            "data was moved to the device although it did not pay: {stats}"
        );
    });
}

#[test]
fn failing_device_body_falls_back_to_the_cpu_body() {
    with_timeout(LIMIT, || {
        // dmda with a placement hint sends every task to the device first.
        let rt = Runtime::new(config(1, "dmda", vec![fast_sim(0, 1.0, None)])).unwrap();
        let cl = Codelet::new("flaky");
        let hs: Vec<_> = (0..20)
            .map(|_| rt.register_replicable(vec![1u64; 4]))
            .collect();
        let device_tries = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        for h in &hs {
            let (h1, h2) = (h.clone(), h.clone());
            let tries = device_tries.clone();
            rt.submit(
                TaskBuilder::new(&cl)
                    .rw(h)
                    .on_node(1)
                    .device_body(move |ctx| {
                        tries.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        ctx.write(&h1)?[0] = 999; // partial write, then failure
                        Err("kernel launch failed".into())
                    })
                    .body(move |ctx| {
                        ctx.write(&h2)?.iter_mut().for_each(|x| *x += 1);
                        Ok(())
                    }),
            )
            .unwrap();
        }
        rt.wait_all().unwrap();
        for h in hs {
            assert_eq!(rt.unregister(h).unwrap(), vec![2u64; 4]);
        }
        assert!(
            device_tries.load(std::sync::atomic::Ordering::SeqCst) == 20,
            "every task should have tried the device first"
        );
    });
}

/// A emulated device with its own memory whose `run` reports a device error
/// after the body ran (a kernel fault found at synchronisation).
/// `repr(transparent)`: the inner sim sits at the device's address, so the
/// device views the engine makes for this device are the sim's too.
#[repr(transparent)]
struct FaultyDevice(EmuDevice);

impl Device for FaultyDevice {
    fn name(&self) -> String {
        self.0.name()
    }
    fn arch(&self) -> &'static str {
        self.0.arch()
    }
    fn memory_limit(&self) -> Option<u64> {
        self.0.memory_limit()
    }
    fn link(&self) -> Link {
        self.0.link()
    }
    fn peak_flops(&self) -> f64 {
        self.0.peak_flops()
    }
    fn expected_time(&self, cost: &tessera_engine::device::TaskCost<'_>) -> Duration {
        self.0.expected_time(cost)
    }
    fn run(
        &self,
        cost: &tessera_engine::device::TaskCost<'_>,
        body: &mut dyn FnMut(),
    ) -> Result<Duration, String> {
        self.0.run(cost, body)?;
        Err("illegal address found at synchronisation".into())
    }
    fn copy(&self, bytes: u64, copy: &mut dyn FnMut()) -> Duration {
        self.0.copy(bytes, copy)
    }
    fn memory(&self) -> Option<&dyn tessera_engine::device::DeviceMemory> {
        self.0.memory()
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[test]
fn device_error_after_the_body_falls_back_to_the_cpu_body() {
    with_timeout(LIMIT, || {
        let sim = EmuDevice::new(
            0,
            EmuConfig {
                own_memory: true,
                ..EmuConfig::default()
            },
        );
        let rt = Runtime::new(config(1, "dmda", vec![Arc::new(FaultyDevice(sim))])).unwrap();
        let cl = Codelet::new("faulting_kernel");
        let h = rt.register_replicable(vec![1u64; 8]);
        let tries = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        for _ in 0..10 {
            let (h1, h2, t) = (h.clone(), h.clone(), tries.clone());
            rt.submit(
                TaskBuilder::new(&cl)
                    .rw(&h)
                    .on_node(1)
                    .device_body(move |ctx| {
                        t.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        // garbage, then the fault
                        sim_of(ctx).host_mut(ctx.device_view_mut(&h1)?)?[0] = 999;
                        Ok(())
                    })
                    .body(move |ctx| {
                        ctx.rw(&h2)?.iter_mut().for_each(|x| *x += 1);
                        Ok(())
                    }),
            )
            .unwrap();
        }
        rt.wait_all_timeout(LIMIT).unwrap();
        assert_eq!(rt.unregister(h).unwrap(), vec![11u64; 8]);
        assert_eq!(tries.load(std::sync::atomic::Ordering::SeqCst), 10);
    });
}

/// Symbolic classes that promise their order (`described_order`) skip the
/// data inference, not the data's movement: over the host and a device
/// holding a quarter of the data, every task hinted to the device, a
/// stencil over two fields per point computes the sequential result, the
/// device evicts (each task's replicas were unpinned at its end), and the
/// data unregister.
#[test]
fn a_described_symbolic_run_moves_its_data_over_memory_nodes() {
    use tessera_engine::symbolic::{self, DescribedOrder, TaskClasses};
    use tessera_engine::{DataHandle, Read, Task, Write};

    const LEN: usize = 1024;
    type StepData = (Vec<Read<Vec<u64>>>, Write<Vec<u64>>);
    /// Task `(t, p)` writes field `t % 2` of point `p`: one more than the
    /// sum of field `(t + 1) % 2` of points `p − 1..=p + 1`.
    struct TwoFields {
        width: usize,
        steps: usize,
        data: Vec<DataHandle<Vec<u64>>>,
        cl: Codelet<StepData>,
        hint: Option<usize>,
    }
    impl TwoFields {
        fn near(&self, p: usize) -> std::ops::RangeInclusive<usize> {
            p.saturating_sub(1)..=(p + 1).min(self.width - 1)
        }
    }
    impl TaskClasses for TwoFields {
        type Key = (usize, usize);
        fn roots(&self) -> Vec<(usize, usize)> {
            (0..self.width).map(|p| (0, p)).collect()
        }
        fn predecessor_count(&self, &(t, p): &(usize, usize)) -> usize {
            if t == 0 {
                0
            } else {
                self.near(p).count()
            }
        }
        fn successors(&self, &(t, p): &(usize, usize), out: &mut Vec<(usize, usize)>) {
            if t + 1 < self.steps {
                out.extend(self.near(p).map(|q| (t + 1, q)));
            }
        }
        fn task(&self, &(t, p): &(usize, usize)) -> TaskBuilder {
            let w = self.width;
            let inputs = self
                .near(p)
                .map(|q| self.data[((t + 1) % 2) * w + q].r())
                .collect();
            let task = Task::new(&self.cl, (inputs, self.data[(t % 2) * w + p].w()));
            match self.hint {
                Some(n) => task.on_node(n).into(),
                None => task.into(),
            }
        }
        fn described_order(&self) -> Option<DescribedOrder> {
            // SAFETY: two fields: a task's readers are its successors, and
            // the next writer of its field follows them (the stencil's
            // edges); `check_order` confirms it below.
            Some(unsafe { DescribedOrder::new() })
        }
    }
    let (width, steps) = (8, 40);
    let mut expected = vec![0u64; width];
    for _ in 0..steps {
        expected = (0..width)
            .map(|p| {
                (p.saturating_sub(1)..=(p + 1).min(width - 1))
                    .fold(1u64, |s, q| s.wrapping_add(expected[q]))
            })
            .collect();
    }
    with_timeout(LIMIT, move || {
        let limit = (2 * width * LEN * 8 / 4) as u64;
        for sched in ["dmda-device", "ws"] {
            let rt = Runtime::new(config(
                1,
                sched.trim_end_matches("-device"),
                vec![fast_sim(0, 4.0, Some(limit))],
            ))
            .unwrap();
            let classes = Arc::new(TwoFields {
                width,
                steps,
                data: (0..2 * width)
                    .map(|_| rt.register_replicable(vec![0u64; LEN]))
                    .collect(),
                cl: Codelet::<StepData>::new("step").cpu(|_, _, (inputs, out)| {
                    for (i, x) in out.iter_mut().enumerate() {
                        *x = inputs.iter().fold(1u64, |s, v| s.wrapping_add(v[i]));
                    }
                    Ok(())
                }),
                hint: (sched == "dmda-device").then_some(1),
            });
            symbolic::check_order(&*classes).unwrap();
            symbolic::run(&rt, Arc::clone(&classes)).unwrap();
            let evictions = rt.memory_stats().nodes[1].evictions;
            assert!(
                sched == "ws" || evictions > 0,
                "{sched}: the device evicted nothing: {}",
                rt.memory_stats()
            );
            let classes = Arc::into_inner(classes).unwrap();
            let last = (steps - 1) % 2;
            let got: Vec<Vec<u64>> = classes
                .data
                .into_iter()
                .enumerate()
                .map(|(i, d)| (i, rt.unregister(d).unwrap()))
                .filter(|(i, _)| i / width == last)
                .map(|(_, v)| v)
                .collect();
            let want: Vec<Vec<u64>> = expected.iter().map(|&v| vec![v; LEN]).collect();
            assert!(got == want, "{sched}: wrong result");
        }
    });
}
