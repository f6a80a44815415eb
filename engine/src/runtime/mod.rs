//! The runtime handle, [`Runtime`]: what it is, and what it reports (its
//! workers, memory, perf models, trace and graph). Its other rooms, one
//! concern each: the state it shares with its workers and the completion
//! protocol in `shared`, data registration in `data`, submission handles in
//! `submit`, the waits in `wait`, how far a submitter may run ahead in
//! `window`, interrupts in `interrupt`, [`Config`] in `config`, start-up in
//! `start`, and task submission itself (sequential task flow, with the lock
//! order) in [`crate::stf`].
//!
//! Invariant kept here: dropping a `Runtime` shuts its workers down and
//! joins every thread it started.

mod config;
mod data;
mod interrupt;
mod shared;
mod start;
mod submit;
mod wait;
mod window;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

pub use config::{Config, WorkerHook, DEFAULT_SUBMIT_WINDOW};
pub use data::Registrar;
pub use interrupt::interrupt_all;
pub(crate) use interrupt::{all_interrupted, InterruptFlag, INTERRUPTED};
pub(crate) use shared::{GraphEntry, Shared};
pub use start::{worker_cap, MIN_WORKER_CAP};
pub(crate) use submit::Hold;
pub use submit::Submitter;

use crate::error::Error;
use crate::memory::MemoryStats;
use crate::perfmodel::PerfModels;
use crate::recorder::TraceLog;
use crate::trace::model::Trace;
use crate::util::lock;

/// A task-graph runtime: its workers (CPU worker threads, one device worker
/// per accelerator, or virtual workers in simulated time), the data
/// registered with it, and the tasks submitted to it.
///
/// Register data, submit tasks that declare how they access it (their
/// dependencies follow from the order of submission), wait, take the data
/// back:
///
/// ```
/// use tessera_engine::{Codelet, Config, Read, ReadWrite, Runtime};
///
/// let rt = Runtime::new(Config::with_workers(2).trace(true))?;
/// let (x, y) = (rt.register(vec![1.0f64; 4]), rt.register(vec![0.0f64; 4]));
/// // y += a x, with `a` as the task's argument.
/// let axpy = Codelet::<(Read<Vec<f64>>, ReadWrite<Vec<f64>>), f64>::with_args("axpy")
///     .cpu(|_, &a, (x, y): (&Vec<f64>, &mut Vec<f64>)| {
///         y.iter_mut().zip(x).for_each(|(y, x)| *y += a * x);
///         Ok(())
///     });
/// for a in [1.0, 2.0, 3.0] {
///     // Each task reads x and updates y: they run one after the other.
///     rt.task(&axpy, (x.r(), y.rw())).args(a).submit()?;
/// }
/// rt.wait_all()?;
/// assert_eq!(rt.unregister(y)?, vec![6.0; 4]);
///
/// // With `Config::trace`, the timeline: save it for Perfetto UI or
/// // chrome://tracing (what `--trace FILE` does on the command line).
/// let trace = rt.trace();
/// assert_eq!(trace.tasks.len(), 3);
/// let path = std::env::temp_dir().join(format!("axpy-{}.json", std::process::id()));
/// tessera_engine::trace::save(&trace, &path, &Default::default())?;
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Dropping it stops the workers after their current task; tasks not yet
/// started are cancelled (dropped unrun). Call [`wait_all`](Self::wait_all)
/// first to let them finish.
pub struct Runtime {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    config: Config,
}

impl Runtime {
    /// A runtime with `n` workers and the default policy.
    pub fn with_workers(n: usize) -> Result<Runtime, Error> {
        Runtime::new(Config::with_workers(n))
    }

    /// The configuration this runtime runs with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Number of workers, device workers included: the `Config::workers`
    /// CPU workers plus one per device (e.g. 5 for 4 CPU workers and a
    /// GPU), as threads, or virtual workers in simulated time.
    pub fn workers(&self) -> usize {
        self.shared.kinds.len()
    }

    /// Whether this runtime runs in simulated time (`Config::simulated`).
    pub fn is_simulated(&self) -> bool {
        self.shared.sim.is_some()
    }

    /// Virtual time of a simulated runtime's simulation, in seconds (`None`
    /// on a real runtime).
    pub fn simulated_time(&self) -> Option<f64> {
        self.shared.sim.as_ref().map(|s| s.world.now())
    }

    /// The scheduling policy's name (`ws`, `prio`, `dmda`, or a custom policy's).
    pub fn scheduler_name(&self) -> &'static str {
        self.shared.policy.name()
    }

    /// Bytes moved between memory nodes and evictions, per node.
    pub fn memory_stats(&self) -> MemoryStats {
        self.shared.memory.stats()
    }

    /// The memory nodes of the devices, in `Config::devices` order (use
    /// them with `TaskBuilder::on_node`).
    pub fn device_nodes(&self) -> Vec<usize> {
        let m = &self.shared.memory;
        (0..m.devices.len()).map(|d| m.host_nodes + d).collect()
    }

    /// The perf models this runtime records into and predicts from.
    pub fn perf_models(&self) -> &Arc<PerfModels> {
        &self.shared.perf
    }

    /// Device bodies that failed so far and whose tasks ran their CPU body
    /// instead (Cashmere's fallback), with the first failure's message.
    /// Drivers report it: a fallback keeps results right but is slow.
    pub fn device_fallbacks(&self) -> (u64, Option<String>) {
        let s = &self.shared;
        (
            s.fallbacks.load(Ordering::Relaxed),
            s.first_fallback.get().cloned(),
        )
    }

    /// Flops of the tasks that finished successfully so far (progress).
    pub fn flops_done(&self) -> u64 {
        self.shared.flops_done.sum()
    }

    /// Whether every task runs on the host with no body skipped (see
    /// `Shared::host_only`).
    pub(crate) fn host_only(&self) -> bool {
        self.shared.host_only()
    }

    /// Whether this runtime records a trace (`Config::trace`).
    pub(crate) fn traced(&self) -> bool {
        self.shared.trace.is_some()
    }

    /// The timeline recorded so far (empty unless `Config::trace`). Save it
    /// with [`trace::save`](crate::trace::save) (Chrome trace JSON, for
    /// Perfetto UI), or summarise it with [`trace::stats`](fn@crate::trace::stats);
    /// see the example on [`Runtime`].
    pub fn trace(&self) -> Trace {
        if let Some(sim) = &self.shared.sim {
            return sim.trace();
        }
        match &self.shared.trace {
            Some(log) => {
                let mut t = log.snapshot();
                if let Some(list) = &self.shared.memory.transfers {
                    t.transfers = lock(list)
                        .iter()
                        .map(|r| {
                            let mut r = r.clone();
                            r.start = log.ticks_to_ns(r.start);
                            r.end = log.ticks_to_ns(r.end);
                            r
                        })
                        .collect();
                }
                if let Some(r) = t.ranks.first_mut() {
                    r.transfers = t.transfers.len() as u32;
                }
                t
            }
            None => Trace::default(),
        }
    }

    /// The trace log, if this runtime records a trace (the distributed
    /// layer records messages into it).
    pub(crate) fn trace_log(&self) -> Option<&Arc<TraceLog>> {
        self.shared.trace.as_ref()
    }

    /// Let this runtime's idle workers poll `transport` while a message is
    /// expected (`crate::watch`); nothing if it cannot be polled.
    pub(crate) fn watch_network(&self, transport: &Arc<dyn crate::dist::Transport>) {
        self.shared.watch.set(transport);
        self.shared.sleep.share_cores();
    }

    /// Whether this runtime records a trace.
    pub fn is_tracing(&self) -> bool {
        self.shared.trace.is_some()
    }

    /// Whether predecessor ids are kept (for traces or DOT export).
    pub(crate) fn keeps_preds(&self) -> bool {
        self.shared.trace.is_some() || self.shared.graph.is_some()
    }

    /// The submitted task graph in Graphviz DOT (needs `Config::record_graph`).
    pub fn graph_dot(&self) -> Option<String> {
        let g = self.shared.graph.as_ref()?;
        let entries = lock(g);
        Some(crate::graph::dot_from_entries(&entries))
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.shared.sleep.shut_down();
        self.shared.board.shut_down();
        for t in self.threads.drain(..) {
            // A worker never panics outside a body (bodies are caught), so a
            // join error would be an engine bug; there is nothing to add.
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    //! Proves the runtime handle's count of flops done (the waits' checks
    //! are tested in `wait`).
    use super::*;
    use crate::codelet::Codelet;
    /// A runtime dropped while a team recruits: the only other worker is
    /// busy, then stops at shutdown without joining, so the team never
    /// fills. Its leader must give up and the drop return.
    #[test]
    fn dropping_a_runtime_while_a_team_recruits_returns() {
        use crate::team::TeamSize;
        use std::sync::mpsc::channel;
        use std::time::Duration;
        let (done, dropped) = channel();
        std::thread::spawn(move || {
            let rt = Runtime::with_workers(2).unwrap();
            let (started, wait_start) = channel();
            let started = std::sync::Mutex::new(started);
            let slow: Codelet<()> = Codelet::new("slow").cpu(move |_, _, ()| {
                let _ = started.lock().unwrap().send(());
                std::thread::sleep(Duration::from_millis(300));
                Ok(())
            });
            let team: Codelet<()> = Codelet::new("pair")
                .team(TeamSize::exactly(2))
                .cpu(|_ctx, _, ()| Ok(()));
            rt.task(&slow, ()).submit().unwrap();
            wait_start.recv().unwrap();
            rt.task(&team, ()).submit().unwrap();
            std::thread::sleep(Duration::from_millis(50));
            drop(rt);
            let _ = done.send(());
        });
        assert!(
            dropped.recv_timeout(Duration::from_secs(30)).is_ok(),
            "the runtime's drop waited for a team that could never fill"
        );
    }

    #[test]
    fn flops_done_counts_successful_tasks() {
        let rt = Runtime::with_workers(2).unwrap();
        let cl: Codelet<()> = Codelet::new("f");
        for i in 0..10 {
            let t = rt.task(&cl, ()).flops(1000.0);
            let t = if i == 3 {
                t.cpu(|()| Err("no".into()))
            } else {
                t.cpu(|()| Ok(()))
            };
            t.submit().unwrap();
        }
        assert!(rt.wait_all().is_err());
        assert_eq!(rt.flops_done(), 9000);
    }

    /// `wait_all` learns that the last task finished from the worker that
    /// goes idle after it (`Shared::notify_drained`), not from the
    /// completion: proves it returns, with every task run, when the tasks
    /// are submitted by the workers themselves (chains that bodies extend,
    /// as a symbolic run's), ending on any worker, at 1 to 4 workers, many
    /// rounds in a row; and with a window small enough that its waits
    /// check at every completion. `wait_all` has no deadline of its own
    /// here (a deadline would end a lost wake-up's wait as a success): a
    /// waiting thread's answer that does not come within the test's
    /// deadline fails the round.
    #[test]
    fn wait_all_returns_when_worker_made_chains_end() {
        use std::sync::atomic::AtomicU64;
        use std::sync::{mpsc, Arc};
        use std::time::Duration;
        fn extend(sub: crate::Submitter, ran: Arc<AtomicU64>, cl: Codelet<()>, left: u32) {
            let (sub2, ran2, cl2) = (sub.clone(), Arc::clone(&ran), cl.clone());
            let task = crate::Task::new(&cl, ()).cpu(move |()| {
                ran2.fetch_add(1, Ordering::Relaxed);
                if left > 0 {
                    extend(sub2, ran2, cl2, left - 1);
                }
                Ok(())
            });
            sub.submit(task).unwrap();
        }
        for (workers, window) in [(1, 8192), (2, 8192), (3, 8192), (4, 8192), (2, 4)] {
            let config = crate::Config::with_workers(workers).submit_window(window);
            let rt = Arc::new(Runtime::new(config).unwrap());
            let cl: Codelet<()> = Codelet::new("link");
            let ran = Arc::new(AtomicU64::new(0));
            for round in 0..50u32 {
                ran.store(0, Ordering::Relaxed);
                let chains = 1 + round % 5;
                for c in 0..chains {
                    extend(
                        rt.submitter(),
                        Arc::clone(&ran),
                        cl.clone(),
                        (c * 37 + round) % 60,
                    );
                }
                let expected: u64 = (0..chains)
                    .map(|c| u64::from((c * 37 + round) % 60) + 1)
                    .sum();
                let (tx, rx) = mpsc::channel();
                let waiter = Arc::clone(&rt);
                std::thread::spawn(move || tx.send(waiter.wait_all()));
                rx.recv_timeout(Duration::from_secs(20))
                    .unwrap_or_else(|_| panic!("{workers} workers, round {round}: wait_all hung"))
                    .unwrap();
                assert_eq!(ran.load(Ordering::Relaxed), expected, "round {round}");
                assert_eq!(rt.tasks_in_flight(), 0);
            }
        }
    }
}
