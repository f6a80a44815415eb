//! Proves how a device's memory is shared out when it is full: clean
//! replicas (valid elsewhere) are evicted before the only copies, whatever
//! their age (a device keeps what it owns and wrote), and write-through data
//! is copied back to the host as soon as a device task wrote it, so its
//! eviction costs no write-back (TianHe-1's output stage). In simulated time
//! (exact byte counts) and on an emulated device with its own memory.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tessera_engine::simulate::{Platform, Simulation};
use tessera_engine::{Codelet, Config, DataHandle, Runtime, Scheduler, TaskBuilder};
use tessera_tests::{gate, with_timeout};

const LIMIT: Duration = Duration::from_secs(60);
const KB: u64 = 1000;

/// One core and one accelerator with room for three 1000-byte replicas.
fn platform_mem(mem: f64) -> Platform {
    Platform::parse(
        &format!(
            "[node]\ncores = 2\ntask_overhead_us = 0\nreserve_core_per_accelerator = true\n\
         [node.cpu]\ngflops = 1\n\
         [[node.accelerators]]\nname = \"acc\"\ngflops = 10\nmemory_gib = {mem}\n\
         link = {{ latency_us = 1, gbs = 1 }}\n"
        ),
        false,
        "residency",
    )
    .unwrap()
}

fn virtual_handle(rt: &Runtime, name: &str) -> DataHandle<Vec<f64>> {
    rt.register_virtual::<Vec<f64>>(KB, [125, 0, 0, 0], name)
        .unwrap()
}

fn platform() -> Platform {
    platform_mem(2.8e-6)
}

/// Bytes copied into the host so far (write-backs, in these tests).
fn host_in(rt: &Runtime) -> u64 {
    rt.memory_stats().nodes[0].bytes_in
}

/// One CPU worker and one emulated device with memory of its own, under dmda;
/// the device's memory node.
fn emu_runtime() -> (Runtime, usize) {
    let dev = tessera_backends::emu::EmuDevice::new(
        0,
        tessera_backends::emu::EmuConfig {
            own_memory: true,
            ..Default::default()
        },
    );
    let rt = Runtime::new(
        Config::with_workers(1)
            .devices(vec![Arc::new(dev)])
            .scheduler(Scheduler::Dmda),
    )
    .unwrap();
    let node = rt.device_nodes()[0];
    (rt, node)
}

/// A task that writes `h` on device `node` (its body leaves it as it is).
fn device_write_task(node: usize, h: &DataHandle<Vec<f64>>) -> TaskBuilder {
    TaskBuilder::new(&Codelet::new("write"))
        .rw(h)
        .on_node(node)
        .device_body(|_ctx| Ok(()))
}

/// Submit [`device_write_task`].
fn device_write(rt: &Runtime, node: usize, h: &DataHandle<Vec<f64>>) {
    rt.submit(device_write_task(node, h)).unwrap();
}

/// Copies back run on the device's copy thread: wait (10 s at most) until
/// `bytes` have come into the host.
fn wait_for_host_in(rt: &Runtime, bytes: u64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while host_in(rt) < bytes && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn clean_copies_go_before_the_only_copy_of_data_a_device_wrote() {
    with_timeout(LIMIT, || {
        let sim = Simulation::with_models(platform(), Arc::default(), false, false);
        let rt = Runtime::new(Config::simulated(sim.node(0)).scheduler(Scheduler::Dmda)).unwrap();
        let dev = rt.device_nodes()[0];
        let cl = Codelet::new("t");
        let owned = virtual_handle(&rt, "owned");
        let (b, c, d) = (
            virtual_handle(&rt, "b"),
            virtual_handle(&rt, "c"),
            virtual_handle(&rt, "d"),
        );
        // The device writes `owned` first: its only valid copy, the oldest.
        // Then it reads three others, one after the other (explicit edges:
        // no prefetch runs ahead): the third needs room.
        let mut prev = rt
            .submit(TaskBuilder::new(&cl).rw(&owned).flops(1e6).on_node(dev))
            .unwrap();
        for h in [&b, &c, &d] {
            prev = rt
                .submit(
                    TaskBuilder::new(&cl)
                        .read(h)
                        .flops(1e6)
                        .on_node(dev)
                        .after(&prev),
                )
                .unwrap();
        }
        rt.wait_all().unwrap();
        let stats = rt.memory_stats();
        assert_eq!(stats.nodes[dev].evictions, 1, "{stats}");
        assert_eq!(
            host_in(&rt),
            0,
            "evicting a clean copy writes nothing back: {stats}"
        );
    });
}

#[test]
fn write_through_copies_back_at_once_and_eviction_is_free() {
    with_timeout(LIMIT, || {
        for through in [false, true] {
            let sim = Simulation::with_models(platform(), Arc::default(), false, false);
            let rt =
                Runtime::new(Config::simulated(sim.node(0)).scheduler(Scheduler::Dmda)).unwrap();
            let dev = rt.device_nodes()[0];
            let cl = Codelet::new("t");
            let hs: Vec<_> = (0..4)
                .map(|i| virtual_handle(&rt, &format!("h{i}")))
                .collect();
            for h in &hs {
                h.set_write_through(through);
            }
            // Four outputs through a device with room for three, one after
            // the other.
            let mut prev: Option<tessera_engine::TaskHandle> = None;
            for h in &hs {
                let mut t = TaskBuilder::new(&cl).rw(h).flops(1e6).on_node(dev);
                if let Some(p) = &prev {
                    t = t.after(p);
                }
                prev = Some(rt.submit(t).unwrap());
            }
            rt.wait_all().unwrap();
            let stats = rt.memory_stats();
            assert_eq!(stats.nodes[dev].evictions, 1, "{stats}");
            // Both ways, one replica had to leave. Write-through copied all
            // four back as they were written (and the eviction was free);
            // write-back copied only the evicted one.
            let want = if through { 4 * KB } else { KB };
            assert_eq!(host_in(&rt), want, "write-through {through}: {stats}");
        }
    });
}

#[test]
fn write_through_on_an_emulated_device_leaves_the_host_copy_valid() {
    with_timeout(LIMIT, || {
        let (rt, node) = emu_runtime();
        let h = rt.register_replicable(vec![1.0f64; 1000]);
        h.set_write_through(true);
        device_write(&rt, node, &h);
        rt.wait_all().unwrap();
        wait_for_host_in(&rt, 8000);
        assert_eq!(host_in(&rt), 8000, "{}", rt.memory_stats());
        assert_eq!(rt.unregister(h).unwrap(), vec![1.0; 1000]);
    });
}

/// `wont_write`: of three device writes of one handle, only the last
/// submitted before the call is copied home, once, in the background (1000
/// bytes into the host, not 3000 as with write-through); a handle whose last
/// writer ran before the call, or that nobody writes, is not copied.
#[test]
fn wont_write_brings_home_the_last_write_only() {
    with_timeout(LIMIT, || {
        let sim = Simulation::with_models(platform_mem(1.0), Arc::default(), false, false);
        let rt = Runtime::new(Config::simulated(sim.node(0)).scheduler(Scheduler::Dmda)).unwrap();
        let dev = rt.device_nodes()[0];
        let cl = Codelet::new("t");
        let (h, done, idle) = (
            virtual_handle(&rt, "h"),
            virtual_handle(&rt, "done"),
            virtual_handle(&rt, "idle"),
        );
        rt.submit(TaskBuilder::new(&cl).rw(&done).flops(1e6).on_node(dev))
            .unwrap();
        rt.wait_all().unwrap();
        // Ran already: asking now sends nothing.
        done.wont_write();
        idle.wont_write();
        for _ in 0..3 {
            rt.submit(TaskBuilder::new(&cl).rw(&h).flops(1e6).on_node(dev))
                .unwrap();
        }
        h.wont_write();
        rt.wait_all().unwrap();
        let stats = rt.memory_stats();
        assert_eq!(host_in(&rt), KB, "{stats}");
        // The host copy is valid: unregistering copies nothing more.
        rt.unregister_virtual(h).unwrap();
        assert_eq!(host_in(&rt), KB, "{}", rt.memory_stats());
    });
}

/// `wont_write` on an emulated device with its own memory: the copy home
/// runs during the run (the device's copy thread), before `unregister`,
/// which then copies nothing more.
#[test]
fn wont_write_on_an_emulated_device_brings_the_final_value_home() {
    with_timeout(LIMIT, || {
        let (rt, node) = emu_runtime();
        let h = rt.register_replicable(vec![1.0f64; 1000]);
        // The device's write waits behind a gate opened only after
        // `wont_write`: `wont_write` names a writer still pending, as
        // documented. Without the gate the write could end before the call
        // (a slow or preempted test thread), and then nothing is asked
        // home (CI, stop 60: "left: 0, right: 8000").
        let (gate, go) = gate(&rt);
        rt.submit(device_write_task(node, &h).after(&gate)).unwrap();
        h.wont_write();
        go.send(()).unwrap();
        rt.wait_all().unwrap();
        wait_for_host_in(&rt, 8000);
        assert_eq!(host_in(&rt), 8000, "{}", rt.memory_stats());
        assert_eq!(rt.unregister(h).unwrap(), vec![1.0; 1000]);
        assert_eq!(host_in(&rt), 8000, "{}", rt.memory_stats());
    });
}

/// A device that lists more replicas than a scan should sort per victim
/// (`EVICT_BATCH_FROM`, 4096) evicts a batch, the least recently used first,
/// when it must make room: here 5000 replicas fill it, and the 5001st read
/// evicts the 21 oldest (its own 1000 bytes past the limit plus 1/256 of
/// the limit), from one scan. The 22nd oldest is still there; the oldest
/// comes back over the link. (A device with few replicas evicts one at a
/// time: `clean_copies_go_before_the_only_copy_of_data_a_device_wrote`.)
#[test]
fn a_device_with_many_replicas_evicts_the_oldest_in_a_batch() {
    with_timeout(LIMIT, || {
        const FIT: u64 = 5000;
        let limit = FIT * KB + 500;
        let sim = Simulation::with_models(
            platform_mem(limit as f64 / (1u64 << 30) as f64),
            Arc::default(),
            false,
            false,
        );
        let rt = Runtime::new(Config::simulated(sim.node(0)).scheduler(Scheduler::Dmda)).unwrap();
        let dev = rt.device_nodes()[0];
        assert_eq!(rt.memory_stats().nodes[dev].limit, Some(limit));
        let cl = Codelet::new("t");
        let hs: Vec<_> = (0..=FIT)
            .map(|i| virtual_handle(&rt, &format!("h{i}")))
            .collect();
        let mut prev: Option<tessera_engine::TaskHandle> = None;
        let mut read = |h: &DataHandle<Vec<f64>>| {
            let mut t = TaskBuilder::new(&cl).read(h).flops(1e3).on_node(dev);
            if let Some(p) = &prev {
                t = t.after(p);
            }
            prev = Some(rt.submit(t).unwrap());
            rt.wait_all().unwrap();
            let s = rt.memory_stats();
            (s.nodes[dev].evictions, s.nodes[dev].bytes_in)
        };
        for h in &hs[..FIT as usize] {
            read(h);
        }
        let (evicted, bytes) = read(&hs[FIT as usize]);
        assert_eq!(evicted, 21, "{}", rt.memory_stats());
        assert_eq!(bytes, (FIT + 1) * KB);
        assert_eq!(read(&hs[21]), (21, (FIT + 1) * KB), "the 22nd oldest stays");
        assert_eq!(read(&hs[0]).1, (FIT + 2) * KB, "the oldest was evicted");
    });
}
