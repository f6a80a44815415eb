//! Starting a runtime, in steps: check the configuration, lay out the
//! workers and memory nodes, build the state they share, then start one
//! thread per worker (or hand the virtual workers to their simulation).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use super::{Config, Runtime, Shared};
use crate::error::{Error, RunError};
use crate::memory::{Memory, MAX_NODES};
use crate::perfmodel::{PerfModelConfig, PerfModels};
use crate::recorder::TraceLog;
use crate::sched::{build_policy, SchedulerPolicy, WorkerKind};
use crate::simulate::SimRt;
use crate::sleep::Sleep;
use crate::worker::run_worker;

/// Most worker threads a runtime starts per available CPU (and at least
/// `MIN_WORKER_CAP` in all): beyond that, threads only cost memory and
/// start-up time (10^5 workers took 15 GB and never started).
const WORKERS_PER_CPU: usize = 16;
/// The least [`worker_cap`] is on any machine (a simulated run's cap per
/// rank too, where the platform's node has fewer cores).
pub const MIN_WORKER_CAP: usize = 256;

static NEXT_RUNTIME_ID: AtomicU64 = AtomicU64::new(0);

/// The workers of a runtime, as its configuration lays them out.
struct Layout {
    /// Host memory nodes: one per NUMA node the CPU workers are on.
    host_nodes: usize,
    /// What each worker is: the CPU workers first, then one per device.
    kinds: Vec<WorkerKind>,
    /// Each worker's name (its thread's, and its row in traces).
    names: Vec<String>,
}

impl Runtime {
    /// Start a runtime with `config.workers` CPU worker threads, plus one
    /// thread per device (or, with [`Config::simulated`], virtual workers and
    /// no thread). `Err` names what is wrong with the configuration, or the
    /// worker whose [`WorkerHook`](super::WorkerHook) failed.
    pub fn new(config: Config) -> Result<Runtime, Error> {
        check_workers(&config)?;
        check_steal_order(&config)?;
        let layout = Layout::new(&config)?;
        let (shared, policy) = build_shared(&config, &layout);
        if shared.sim.is_some() {
            Ok(attach_to_simulation(shared, &*policy, config))
        } else {
            start_threads(shared, &*policy, layout.names, config)
        }
    }
}

/// The most worker threads a runtime starts on this machine: 16 per CPU, at
/// least 256 (a bound against counts typed by mistake; oversubscribing a few
/// times over stays possible). Tools that start threads of their own
/// (`tessera lu-kernels`) use the same bound.
pub fn worker_cap() -> usize {
    cpus_and_worker_cap().1
}

fn cpus_and_worker_cap() -> (usize, usize) {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    (
        cpus,
        WORKERS_PER_CPU.saturating_mul(cpus).max(MIN_WORKER_CAP),
    )
}

/// At least one CPU worker, not more than the machine can start (unless
/// simulated), and no more devices than memory nodes.
fn check_workers(config: &Config) -> Result<(), Error> {
    if config.workers == 0 {
        return Err(Error::Config("at least one worker is needed".into()));
    }
    let (cpus, cap) = cpus_and_worker_cap();
    if config.workers > cap && config.simulate.is_none() {
        return Err(Error::Config(format!(
            "{} workers asked for, but this machine has {cpus} CPU(s); at most {cap} workers are allowed ({WORKERS_PER_CPU} per CPU, at least {MIN_WORKER_CAP})",
            config.workers
        )));
    }
    if config.devices.len() + 1 > MAX_NODES {
        return Err(Error::Config(format!(
            "at most {} devices are supported",
            MAX_NODES - 1
        )));
    }
    Ok(())
}

/// A given steal order lists, for each CPU worker, other CPU workers.
fn check_steal_order(config: &Config) -> Result<(), Error> {
    let Some(order) = &config.steal_order else {
        return Ok(());
    };
    let bad = order.len() != config.workers
        || order
            .iter()
            .enumerate()
            .any(|(w, v)| v.iter().any(|&x| x >= config.workers || x == w));
    if bad {
        return Err(Error::Config(format!(
            "steal order must list, for each of the {} workers, other worker indices",
            config.workers
        )));
    }
    Ok(())
}

impl Layout {
    /// The CPU workers on their NUMA nodes (each node a host memory node),
    /// then one worker per device, on a memory node of its own.
    fn new(config: &Config) -> Result<Layout, Error> {
        let numa: Vec<usize> = match &config.worker_numa {
            Some(v) if v.len() == config.workers => v.clone(),
            Some(v) => {
                return Err(Error::Config(format!(
                    "worker_numa lists {} workers, but there are {}",
                    v.len(),
                    config.workers
                )))
            }
            None => vec![0; config.workers],
        };
        let host_nodes = numa.iter().max().map_or(1, |m| m + 1);
        if host_nodes + config.devices.len() > MAX_NODES {
            return Err(Error::Config(format!(
                "{host_nodes} NUMA nodes and {} devices exceed {MAX_NODES} memory nodes",
                config.devices.len(),
            )));
        }
        let mut kinds: Vec<WorkerKind> = numa
            .iter()
            .map(|&n| WorkerKind {
                node: n,
                ..WorkerKind::cpu()
            })
            .collect();
        let mut names: Vec<String> = (0..config.workers).map(|i| format!("cpu{i}")).collect();
        for (d, dev) in config.devices.iter().enumerate() {
            kinds.push(WorkerKind {
                node: host_nodes + d,
                arch: dev.arch(),
                device: Some(Arc::clone(dev)),
            });
            names.push(dev.name());
        }
        Ok(Layout {
            host_nodes,
            kinds,
            names,
        })
    }

    /// Each worker's trace row: its name and memory node.
    fn rows(&self) -> Vec<(String, u32)> {
        self.names
            .iter()
            .cloned()
            .zip(self.kinds.iter().map(|k| k.node as u32))
            .collect()
    }

    /// The configured steal order of the CPU workers, completed for the
    /// device workers: these steal from everyone; CPU workers try them last.
    fn steal_order(&self, config: &Config) -> Option<Vec<Vec<usize>>> {
        let total = self.kinds.len();
        config.steal_order.as_ref().map(|order| {
            let mut o = order.clone();
            for v in &mut o {
                v.extend(config.workers..total);
            }
            for d in config.workers..total {
                o.push((1..total).map(|k| (d + k) % total).collect());
            }
            o
        })
    }
}

/// The state the runtime handle and its workers share (with its policy,
/// which the workers' queues come from).
fn build_shared(config: &Config, layout: &Layout) -> (Arc<Shared>, Arc<dyn SchedulerPolicy>) {
    let trace = config.trace.then(|| Arc::new(TraceLog::new(layout.rows())));
    let mut memory = Memory::new(layout.host_nodes, config.devices.clone(), trace.clone());
    // Simulated time: virtual workers in a slot of the simulation, and
    // transfers handed to its link model.
    let sim = config.simulate.as_ref().map(|node| {
        let world = Arc::clone(node.simulation());
        let slot = world.reserve_slot(&config.devices);
        SimRt::new(world, slot, node.node(), layout.rows(), config.trace)
    });
    if let Some(s) = &sim {
        memory.virtual_links = Some(s.links());
    }
    let memory = Arc::new(memory);
    let perf = config
        .perf_models
        .clone()
        .unwrap_or_else(|| Arc::new(PerfModels::new(PerfModelConfig::default())));
    let policy = build_policy(
        config.scheduler,
        config.custom_policy.as_ref(),
        &layout.kinds,
        layout.steal_order(config).as_deref(),
        &memory,
        &perf,
    );
    let calibrate = config
        .calibrate
        .unwrap_or(!config.devices.is_empty() || config.scheduler.is_data_aware());
    let id = NEXT_RUNTIME_ID.fetch_add(1, Ordering::Relaxed);
    let shared = Arc::new(Shared {
        id,
        policy: Arc::clone(&policy),
        sleep: Sleep::new(layout.kinds.len()),
        nodes: crate::task::NodePool::default(),
        watch: crate::watch::Watch::default(),
        next_task: crate::counter::Ids::new(id),
        next_handle: AtomicU64::new(0),
        submitted: crate::counter::Sharded::default(),
        finished: crate::counter::Sharded::default(),
        all_waiters: AtomicUsize::new(0),
        task_waiters: AtomicUsize::new(0),
        window: super::window::Window::new(if config.simulate.is_some() {
            0
        } else {
            config.submit_window as u64
        }),
        wait_lock: Mutex::new(()),
        wait_cond: Condvar::new(),
        errors: Mutex::new(RunError::default()),
        has_errors: AtomicBool::new(false),
        trace,
        graph: config.record_graph.then(|| Mutex::new(Vec::new())),
        multi_node: !config.devices.is_empty() || layout.host_nodes > 1,
        kinds: layout.kinds.clone(),
        cpu_workers: config.workers,
        // The CPU workers' NUMA nodes: teams recruit on one where they can.
        board: crate::team::Board::new(
            layout.kinds[..config.workers]
                .iter()
                .map(|k| k.node)
                .collect(),
        ),
        memory,
        perf,
        calibrate,
        flops_done: crate::counter::Sharded::default(),
        interrupted: AtomicBool::new(false),
        fallbacks: AtomicU64::new(0),
        first_fallback: std::sync::OnceLock::new(),
        sim,
    });
    (shared, policy)
}

/// A simulated runtime: its virtual workers take their queues, and its
/// simulation runs them (no thread).
fn attach_to_simulation(
    shared: Arc<Shared>,
    policy: &dyn SchedulerPolicy,
    config: Config,
) -> Runtime {
    let s = SimRt::of(&shared);
    s.set_queues(
        (0..shared.kinds.len())
            .map(|i| policy.worker_queue(i))
            .collect(),
    );
    s.world.attach(s.slot, &shared);
    Runtime {
        shared,
        threads: Vec::new(),
        config,
    }
}

/// One thread per worker; returns once each has run the configuration's
/// [`WorkerHook`](super::WorkerHook) (the first failure is the error, and
/// the threads already started are stopped).
fn start_threads(
    shared: Arc<Shared>,
    policy: &dyn SchedulerPolicy,
    names: Vec<String>,
    config: Config,
) -> Result<Runtime, Error> {
    let total = names.len();
    let (started_tx, started_rx) = std::sync::mpsc::channel::<Result<(), String>>();
    let hook = config.on_worker_start.clone();
    let mut rt = Runtime {
        shared,
        threads: Vec::new(),
        config,
    };
    for (i, name) in names.into_iter().enumerate() {
        let queue = policy.worker_queue(i);
        let s = Arc::clone(&rt.shared);
        let hook = hook.clone();
        let tx = started_tx.clone();
        let t = std::thread::Builder::new()
            .name(format!("tessera-{name}"))
            .spawn(move || {
                let started = hook.map_or(Ok(()), |h| (h.0)(i));
                let ok = started.is_ok();
                let _ = tx.send(started.map_err(|e| format!("worker {i}: {e}")));
                drop(tx);
                if ok {
                    run_worker(s, queue, i)
                }
            })
            .map_err(|e| Error::Config(format!("cannot start worker thread {i}: {e}")))?;
        rt.threads.push(t);
    }
    drop(started_tx);
    // Dropping `rt` on error stops and joins the workers already started.
    for _ in 0..total {
        match started_rx.recv() {
            Ok(r) => r.map_err(Error::Config)?,
            Err(_) => return Err(Error::Config("a worker thread exited at start-up".into())),
        }
    }
    Ok(rt)
}

#[cfg(test)]
mod tests {
    //! Proves start-up's checks: configurations it cannot run are errors
    //! that say why, and device workers complete a given steal order.
    use super::*;

    #[test]
    fn bad_configurations_are_errors() {
        let e = Runtime::new(Config::with_workers(0))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("at least one worker"), "{e}");
        let e = Runtime::new(Config::with_workers(1_000_000))
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("1000000 workers") && e.contains("at most"),
            "{e}"
        );
        let e = Runtime::new(Config::with_workers(2).steal_order(vec![vec![0], vec![0]]))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("steal order"), "{e}");
        let e = Runtime::new(Config::with_workers(2).worker_numa(vec![0]))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("worker_numa lists 1 workers"), "{e}");
    }

    #[test]
    fn device_workers_complete_the_steal_order() {
        // Two CPU workers and (standing in for a device) a third worker.
        let layout = Layout {
            host_nodes: 1,
            kinds: vec![WorkerKind::cpu(); 3],
            names: Vec::new(),
        };
        let config = Config::with_workers(2).steal_order(vec![vec![1], vec![0]]);
        assert_eq!(
            layout.steal_order(&config),
            Some(vec![vec![1, 2], vec![0, 2], vec![0, 1]])
        );
        assert_eq!(layout.steal_order(&Config::with_workers(2)), None);
    }
}
