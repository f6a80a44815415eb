//! The discrete-event loop: a heap of timed events (task ends, message
//! arrivals) drives the real runtimes' virtual workers in virtual time.
//!
//! One thread runs everything: [`Simulation::run_until`] is called by a
//! simulated runtime's waits (`Runtime::wait_all`, `wait`, `unregister`) or
//! by a multi-rank driver. Steps (README.md beside this folder):
//! 1. *Poll*: every runtime marked dirty (a task was pushed: `Shared::wake`,
//!    or one of its tasks ended) lets each idle virtual worker pop from its
//!    real `WorkerQueue`. A popped task acquires its data on the worker's
//!    memory node through the real coherence protocol (virtual copies: the
//!    link model schedules them and remembers when each replica is ready),
//!    starts when its inputs are there, and its end is scheduled at
//!    `start + duration` (`durations.rs`: perf models, else platform rates).
//! 2. *Advance*: take every event of the earliest time, set the clock, and
//!    process them in the order they were scheduled: a task end runs the
//!    real completion path (release of data, `then` hooks with the worker's
//!    queue as the current one — so the symbolic front-end unfolds into it —,
//!    `SchedulerPolicy::finished`, `worker::complete`); a message arrival
//!    hands the bytes to the receiving rank's `Net`.
//!
//! Files, one concern each: `events` (the event queue and the loop),
//! `workers` (virtual workers: poll, start, end, durations), `teams` (CPU
//! teams and rendezvous), `links` (copies between memory nodes), `net`
//! (messages between ranks). This file holds the state they share and the
//! public face: [`Simulation`], [`SimNode`], [`SimStats`].
//!
//! Locks: `state`, `dirty` and a runtime's slots are leaves — never held
//! while engine code (which may call back into the simulation) runs.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::durations::Durations;
use super::platform::{LinkSpec, Platform};
use super::vdevice::VirtualDevice;
use crate::dist::Net;
use crate::memory::NodeId;
use crate::perfmodel::PerfModels;
use crate::runtime::Shared;
use crate::util::lock;

mod events;
mod links;
mod net;
mod teams;
mod workers;

use events::Event;
use links::Lane;
use teams::Member;
pub(crate) use workers::SimRt;

/// The latest simulated time, in ns (about 292 years): half the u64 range,
/// so that no sum of two times below it wraps.
pub(crate) const CLOCK_LIMIT_NS: u64 = u64::MAX / 2;

/// Counters of a simulation.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SimStats {
    /// Tasks simulated (ended), all runtimes.
    pub tasks: u64,
    /// Events processed.
    pub events: u64,
    /// Data transfers between memory nodes, and their bytes.
    pub transfers: u64,
    /// Bytes of those transfers.
    pub transfer_bytes: u64,
    /// Messages between ranks, and their bytes (data the simulated network
    /// charges, virtual payloads included).
    pub messages: u64,
    /// Bytes of those messages.
    pub message_bytes: u64,
    /// Allocations that found no room and over-committed a device (a real
    /// run would have waited for room).
    pub overcommits: u64,
    /// Largest number of events pending at once.
    pub peak_events: usize,
    /// Largest number of tasks submitted and not finished at once, on one
    /// runtime (the ready window, with the symbolic front-end).
    pub peak_in_flight: usize,
}

/// One message in flight: sender rank, receiver rank, bytes.
type Message = (usize, usize, Vec<u8>);

/// What the loop, the links and the network change as time passes, behind
/// one lock (`Simulation::state`, a leaf).
#[derive(Default)]
struct State {
    /// Pending events, earliest first (`events.rs`).
    events: BinaryHeap<Reverse<Event>>,
    /// Events scheduled so far: the next one's tie-breaker.
    seq: u64,
    /// (runtime slot, handle id, memory node) → when that replica is
    /// ready (a copy into it is still in flight until then). Absent: ready.
    ready: HashMap<(usize, u64, NodeId), u64>,
    /// Per runtime slot, per device: (link, host→device lane, device→host lane).
    links: Vec<Vec<(LinkSpec, Lane, Lane)>>,
    /// Per platform node: NIC out and in lanes.
    nics: Vec<(Lane, Lane)>,
    /// Messages in flight, by id (the id its arrival event names).
    messages: HashMap<u64, Message>,
    next_message: u64,
    /// Per rank: messages sent and not yet arrived.
    pending_sends: Vec<usize>,
    /// Per (sender, receiver): when its last message arrives. A message
    /// never arrives before an earlier one of the pair (`Transport`'s
    /// order: between ranks of one node, a short message would otherwise
    /// overtake a long one).
    last_arrival: HashMap<(usize, usize), u64>,
    stats: SimStats,
}

/// A simulated machine and its virtual clock (see the module doc).
///
/// Load a platform, make a runtime of one of its ranks, submit as usual: the
/// runtime's waits play the tasks in virtual time, and [`now`](Self::now)
/// is the predicted time.
///
/// ```
/// use tessera_engine::simulate::{Platform, Simulation};
/// use tessera_engine::{Codelet, Config, ReadWrite, Runtime};
///
/// // `Platform::load("bench/platforms/h100-node.toml")` reads a file; this
/// // one is given inline: one node of 4 cores, a `step` at 10 GFLOP/s.
/// let platform = Platform::parse(r#"
///     name = "four cores"
///     [node]
///     cores = 4
///     task_overhead_us = 5
///     [node.cpu]
///     gflops = 20
///     codelets = { step = { gflops = 10 } }
/// "#, false, "inline").unwrap();
/// let sim = Simulation::new(platform).unwrap();
/// let rt = Runtime::new(Config::simulated(sim.node(0))).unwrap();
///
/// let step = Codelet::<ReadWrite<u64>>::new("step")
///     .flops(|_| 1e9)
///     .cpu(|_, _, x| { *x += 1; Ok(()) }); // not run: only its time is
/// let x = rt.register(0u64);
/// for _ in 0..3 {
///     rt.task(&step, x.rw()).submit().unwrap(); // a chain of three tasks
/// }
/// rt.wait_all().unwrap(); // runs the event loop: no thread, no body
/// // Predicted: 3 × (1 GFLOP at 10 GFLOP/s + 5 µs of overhead).
/// assert!((sim.now() - 0.300_015).abs() < 1e-9);
/// assert!(sim.warnings().is_empty()); // every codelet had a rate
/// ```
pub struct Simulation {
    pub(crate) platform: Arc<Platform>,
    /// The perf models and rates tasks are timed by, and the warnings of
    /// codelets that came to a default rate.
    pub(super) durations: Durations,
    execute_bodies: bool,
    now: AtomicU64,
    /// Set when an event would have fallen past [`CLOCK_LIMIT_NS`]: the
    /// run then fails, saying so, instead of wrapping.
    clock_overflow: AtomicBool,
    state: Mutex<State>,
    runtimes: Mutex<Vec<Weak<Shared>>>,
    dirty: Mutex<Vec<usize>>,
    /// Per platform node: CPU tasks running now, on any of its ranks.
    busy_cpus: Mutex<Vec<usize>>,
    /// Tasks of a rendezvous that started, waiting for the others, by key.
    meetings: Mutex<HashMap<u64, Vec<Member>>>,
    nets: Mutex<Vec<Weak<Net>>>,
}

/// One rank's place in a simulation: what `Config::simulated` takes.
#[derive(Clone)]
pub struct SimNode {
    pub(crate) sim: Arc<Simulation>,
    pub(crate) rank: usize,
}

impl std::fmt::Debug for SimNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SimNode(rank {} of {})",
            self.rank, self.sim.platform.name
        )
    }
}

impl SimNode {
    /// The platform node this rank runs on.
    pub fn node(&self) -> usize {
        self.rank / self.sim.platform.ranks_per_node
    }

    /// The GEMM rate of one of this platform's CPU cores, GFLOP/s (the
    /// platform's `cpu.gflops`).
    pub fn cpu_gflops(&self) -> f64 {
        self.sim.platform.node.cpu.gflops
    }

    /// CPU workers this rank gets by default.
    pub fn cpu_workers(&self) -> usize {
        self.sim
            .platform
            .node
            .cpu_workers(self.sim.platform.ranks_per_node)
    }

    /// One virtual device per accelerator of this rank's share of its node
    /// (accelerators are dealt round robin over the node's ranks).
    pub fn devices(&self) -> Vec<Arc<dyn crate::device::Device>> {
        let p = &self.sim.platform;
        let local = self.rank % p.ranks_per_node;
        let mut out: Vec<Arc<dyn crate::device::Device>> = Vec::new();
        let mut k = 0;
        for a in &p.node.accelerators {
            for i in 0..a.count {
                if k % p.ranks_per_node == local {
                    out.push(Arc::new(VirtualDevice::new(a, i)));
                }
                k += 1;
            }
        }
        out
    }

    /// The simulation.
    pub fn simulation(&self) -> &Arc<Simulation> {
        &self.sim
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }
}

impl Simulation {
    /// A simulation of `platform`. Durations come from the platform's perf
    /// models when it names a directory (loaded here), else from its rates.
    pub fn new(platform: Platform) -> Result<Arc<Simulation>, String> {
        let (perf, use_models) = match &platform.perf_models {
            Some(dir) => (
                PerfModels::load(dir).map_err(|e| format!("perf models of the platform: {e}"))?,
                true,
            ),
            None => (PerfModels::default(), false),
        };
        Ok(Self::with_models(
            platform,
            Arc::new(perf),
            use_models,
            false,
        ))
    }

    /// A simulation of `platform` that times the codelets measured in
    /// `measured` by those measurements, and everything else as
    /// [`new`](Self::new) does. `measured` is a real run's
    /// [`Runtime::perf_models`](crate::Runtime::perf_models) with
    /// [`Config::calibrate`](crate::Config::calibrate) on: run your DAG here
    /// for real, then predict it on a described machine whose cores are
    /// like this one's (more of them, more nodes, accelerators).
    ///
    /// Each (codelet, architecture) in `measured` replaces the platform's
    /// models of that name and architecture, all sizes (codelets are
    /// matched by name; see the module doc); a size measured fewer than
    /// [`PerfModelConfig::min_samples`](crate::perfmodel::PerfModelConfig)
    /// times still counts (its median is used). `Err` if the platform's
    /// own models cannot be read.
    ///
    /// To keep the result, save [`perf_models`](Self::perf_models) into a
    /// folder and name it in the platform file (`perf_models = "..."`):
    /// [`new`](Self::new) then predicts the same from the file.
    ///
    /// ```
    /// use tessera_engine::simulate::{Platform, Simulation};
    /// use tessera_engine::{Codelet, Config, ReadWrite, Runtime};
    ///
    /// let spin = Codelet::<ReadWrite<Vec<f64>>>::new("spin")
    ///     .cpu(|_, _, v| { v.iter_mut().for_each(|x| *x = x.sqrt() + 1.0); Ok(()) });
    /// let dag = |rt: &Runtime| {
    ///     let v = rt.register(vec![1.0; 1 << 16]);
    ///     for _ in 0..4 {
    ///         rt.task(&spin, v.rw()).submit().unwrap();
    ///     }
    ///     rt.wait_all().unwrap();
    /// };
    /// // 1. For real, every task timed into the runtime's perf models.
    /// let real = Runtime::new(Config::with_workers(1).calibrate(true)).unwrap();
    /// dag(&real);
    /// // 2. The same DAG on a platform, timed by those measurements.
    /// let platform = Platform::parse(
    ///     "[node]\ncores = 2\ntask_overhead_us = 0\n[node.cpu]\ngflops = 10\n",
    ///     false,
    ///     "inline",
    /// ).unwrap();
    /// let sim = Simulation::with_calibrated(platform, real.perf_models()).unwrap();
    /// dag(&Runtime::new(Config::simulated(sim.node(0))).unwrap());
    /// let spin_time = real.perf_models().summary()[0].median; // "spin" on "cpu"
    /// assert!((sim.now() - 4.0 * spin_time).abs() < 1e-6);
    /// // The one warning: this machine's timings stand for the platform's.
    /// assert!(sim.warnings()[0].contains("spin on cpu timed by measurements of this machine"));
    /// ```
    ///
    /// The measurements stand for the platform's processors of the same
    /// architecture name: a warning (in [`warnings`](Self::warnings), and
    /// on stderr unless [`print_warnings`](Self::print_warnings) is off)
    /// says which codelets they timed.
    pub fn with_calibrated(
        platform: Platform,
        measured: &PerfModels,
    ) -> Result<Arc<Simulation>, String> {
        let perf = match &platform.perf_models {
            Some(dir) => {
                PerfModels::load(dir).map_err(|e| format!("perf models of the platform: {e}"))?
            }
            None => PerfModels::default(),
        };
        perf.adopt(measured);
        let adopted: std::collections::BTreeSet<String> = measured
            .summary()
            .into_iter()
            .filter(|r| r.samples > 0)
            .map(|r| format!("{} on {}", r.codelet, r.arch))
            .collect();
        let name = platform.name.clone();
        let sim = Self::with_models(platform, Arc::new(perf), true, false);
        if !adopted.is_empty() {
            // This machine's timings stand for the platform's processors:
            // the prediction says so.
            sim.durations.note(
                "with_calibrated",
                format!(
                    "platform '{name}': {} timed by measurements of this machine (with_calibrated): the prediction holds for the platform's processors only as far as they are this machine's",
                    adopted.into_iter().collect::<Vec<_>>().join(", ")
                ),
            );
        }
        Ok(sim)
    }

    /// A simulation with the given models (`use_models`: predict from them)
    /// and, with `execute_bodies`, the bodies of tasks on real data run too
    /// (to check results; their wall time is ignored).
    pub fn with_models(
        platform: Platform,
        perf: Arc<PerfModels>,
        use_models: bool,
        execute_bodies: bool,
    ) -> Arc<Simulation> {
        let nodes = platform.nodes;
        let ranks = platform.ranks();
        Arc::new(Simulation {
            durations: Durations::new(perf, use_models, &platform.name),
            platform: Arc::new(platform),
            execute_bodies,
            now: AtomicU64::new(0),
            clock_overflow: AtomicBool::new(false),
            state: Mutex::new(State {
                nics: vec![(Lane::default(), Lane::default()); nodes],
                pending_sends: vec![0; ranks],
                ..State::default()
            }),
            runtimes: Mutex::new(Vec::new()),
            dirty: Mutex::new(Vec::new()),
            busy_cpus: Mutex::new(Vec::new()),
            meetings: Mutex::new(HashMap::new()),
            nets: Mutex::new(Vec::new()),
        })
    }

    /// The place of rank `rank` (for `Config::simulated`).
    pub fn node(self: &Arc<Self>, rank: usize) -> SimNode {
        assert!(
            rank < self.platform.ranks(),
            "rank {rank} of a {}-rank platform",
            self.platform.ranks()
        );
        SimNode {
            sim: Arc::clone(self),
            rank,
        }
    }

    /// The platform.
    pub fn platform(&self) -> &Platform {
        &self.platform
    }

    /// The perf models durations are predicted from (and simulated
    /// runtimes record into).
    pub fn perf_models(&self) -> &Arc<PerfModels> {
        self.durations.perf()
    }

    /// Virtual time now, in seconds since the simulation began.
    pub fn now(&self) -> f64 {
        self.now_ns() as f64 * 1e-9
    }

    /// Simulated seconds when everything scheduled so far has finished: the
    /// clock, or later where a copy is still on a link (the factors a
    /// device sends home after the last task, in `unregister`).
    pub fn settled(&self) -> f64 {
        let st = lock(&self.state);
        let links = st
            .links
            .iter()
            .flatten()
            .map(|(_, up, down)| up.free.max(down.free));
        let last = links.fold(self.now_ns(), u64::max);
        last as f64 * 1e-9
    }

    pub(crate) fn now_ns(&self) -> u64 {
        self.now.load(Ordering::Relaxed)
    }

    /// What the simulation warned about so far (also printed on stderr,
    /// once each, unless [`print_warnings`](Self::print_warnings) turned
    /// that off): codelets that no perf model and no rate of the platform
    /// knew, so that their tasks took the processor's default rate (each
    /// names the codelet, the architecture and the rate used), rates past a
    /// peak, extrapolated models, measurements adopted from another machine.
    pub fn warnings(&self) -> Vec<String> {
        self.durations.warnings()
    }

    /// Whether each warning is also printed on stderr as it is given (on at
    /// first, so that a command's user sees it at once). A program that
    /// reads [`warnings`](Self::warnings) itself turns it off, so that each
    /// warning reaches its user once.
    pub fn print_warnings(&self, on: bool) {
        self.durations.set_echo(on);
    }

    /// The counters so far.
    pub fn stats(&self) -> SimStats {
        lock(&self.state).stats
    }

    /// A slot for a new simulated runtime of rank `rank`, with its link
    /// state for `devices`.
    pub(crate) fn reserve_slot(&self, devices: &[Arc<dyn crate::device::Device>]) -> usize {
        let mut rts = lock(&self.runtimes);
        rts.push(Weak::new());
        let slot = rts.len() - 1;
        let links = devices
            .iter()
            .map(|d| {
                let l = d.link();
                (
                    LinkSpec {
                        latency: l.latency.as_secs_f64(),
                        bandwidth: l.bandwidth,
                    },
                    Lane::default(),
                    Lane::default(),
                )
            })
            .collect();
        let mut st = lock(&self.state);
        if st.links.len() <= slot {
            st.links.resize(slot + 1, Vec::new());
        }
        st.links[slot] = links;
        slot
    }

    /// Runtime `shared` takes slot `slot` (reserved for it by
    /// [`reserve_slot`](Self::reserve_slot)): the loop polls and ends its
    /// tasks from now on.
    pub(crate) fn attach(&self, slot: usize, shared: &Arc<Shared>) {
        lock(&self.runtimes)[slot] = Arc::downgrade(shared);
    }
}
