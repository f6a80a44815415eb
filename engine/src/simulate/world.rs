//! The discrete-event loop: a heap of timed events (task ends, message
//! arrivals) drives the real runtimes' virtual workers in virtual time.
//!
//! One thread runs everything: [`Simulation::run_until`] is called by a
//! simulated runtime's waits (`Runtime::wait_all`, `wait`, `unregister`) or
//! by a multi-rank driver. Steps (README.md beside this file):
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
//! Locks: `state`, `dirty` and a runtime's slots are leaves — never held
//! while engine code (which may call back into the simulation) runs.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::durations::{model_seconds, Durations};
use super::platform::{LinkSpec, Platform, Processor};
use super::vdevice::VirtualDevice;
use crate::dist::Net;
use crate::memory::{NodeId, VirtualLinks};
use crate::perfmodel::PerfModels;
use crate::runtime::Shared;
use crate::sched::{ReadyTask, WorkerQueue};
use crate::task::{Once, TaskContext, TaskNode};
use crate::trace::model::{TaskRecord, Trace, TransferRecord, WorkerInfo};
use crate::util::{lock, panic_message};
use crate::worker::{self, Chosen, CurrentGuard, Outcome};

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

#[derive(Debug)]
enum Kind {
    TaskEnd { slot: usize, worker: usize },
    Message { id: u64 },
}

#[derive(Debug)]
struct Event {
    time: u64,
    seq: u64,
    kind: Kind,
}

impl PartialEq for Event {
    fn eq(&self, o: &Self) -> bool {
        (self.time, self.seq) == (o.time, o.seq)
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Event {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.time, self.seq).cmp(&(o.time, o.seq))
    }
}

/// One message in flight: sender rank, receiver rank, bytes.
type Message = (usize, usize, Vec<u8>);

/// Per-link FIFO state: the time each direction is free again (ns).
#[derive(Clone, Copy, Debug, Default)]
struct Lane {
    free: u64,
}

#[derive(Default)]
struct State {
    events: BinaryHeap<Reverse<Event>>,
    seq: u64,
    /// (runtime slot, handle id, memory node) → when that replica is
    /// ready (a copy into it is still in flight until then). Absent: ready.
    ready: HashMap<(usize, u64, NodeId), u64>,
    /// Per runtime slot, per device: (link, host→device lane, device→host lane).
    links: Vec<Vec<(LinkSpec, Lane, Lane)>>,
    /// Per platform node: NIC out and in lanes.
    nics: Vec<(Lane, Lane)>,
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
    /// run then fails, saying so, instead of wrapping (issue 28).
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
            // Issue 42: timings of this machine stood for any platform's
            // processors without a word.
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

    /// Process events until none is left (a multi-rank run: every rank's
    /// tasks were started, this plays them all). `Err` if tasks are left
    /// unfinished when nothing more can happen (issue 42: a program whose
    /// tasks wait for something no simulated rank does ended "fine" at
    /// simulated time 0).
    pub fn run(&self) -> Result<(), String> {
        self.run_until(&|| false, true)?;
        let left: Vec<String> = lock(&self.runtimes)
            .iter()
            .enumerate()
            .filter_map(|(slot, rt)| {
                let n = rt.upgrade()?.in_flight();
                (n > 0).then(|| format!("{n} on runtime {slot}"))
            })
            .collect();
        if left.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "the simulation stalled at {:.6} s: no event is pending but tasks are unfinished ({}): they wait for data, a message or a hold that no simulated rank provides",
                self.now(),
                left.join(", ")
            ))
        }
    }

    /// Process events until `done()` holds. `Err` if nothing is left to
    /// happen and `done()` still does not hold (unless `drain`: then running
    /// out of events is the end).
    pub(crate) fn run_until(&self, done: &dyn Fn() -> bool, drain: bool) -> Result<(), String> {
        loop {
            self.poll_dirty();
            if done() {
                return Ok(());
            }
            if crate::runtime::all_interrupted() {
                // Ctrl-C: a long simulation stops as a real run does.
                return Err(format!(
                    "{} at {:.6} s of simulated time",
                    crate::runtime::INTERRUPTED,
                    self.now()
                ));
            }
            let batch = {
                let mut st = lock(&self.state);
                let Some(Reverse(first)) = st.events.pop() else {
                    if drain {
                        return Ok(());
                    }
                    return Err(format!(
                        "the simulation stalled at {:.6} s: no event is pending but the awaited tasks have not finished (a task waits for data, a message or a hold that never comes; in a multi-rank simulation, every rank's tasks must be submitted before any rank waits: see Simulation::run)",
                        self.now()
                    ));
                };
                let t = first.time;
                let mut batch = vec![first];
                while st.events.peek().is_some_and(|e| e.0.time == t) {
                    batch.push(st.events.pop().expect("peeked").0);
                }
                st.stats.events += batch.len() as u64;
                batch
            };
            self.now.store(batch[0].time, Ordering::Relaxed);
            for ev in batch {
                self.process(ev.kind);
            }
            if self.clock_overflow.load(Ordering::Relaxed) {
                return Err(format!(
                    "the simulated clock overflowed: an event fell more than {:.0} years after the start (the clock counts u64 nanoseconds); the platform's rates or times are absurd for this run",
                    CLOCK_LIMIT_NS as f64 * 1e-9 / (365.25 * 86_400.0)
                ));
            }
        }
    }

    /// The time `secs` seconds after `start` (ns), saturated at
    /// [`CLOCK_LIMIT_NS`] and noted ([`run_until`](Self::run_until) then
    /// fails): a plain cast and add would wrap, and a run of centuries
    /// would be reported as one of milliseconds.
    fn after(&self, start: u64, secs: f64) -> u64 {
        let ns = (secs * 1e9).round();
        // A NaN fails both tests: it is an overflow too.
        if ns >= 0.0 && ns < CLOCK_LIMIT_NS.saturating_sub(start) as f64 {
            start + ns as u64
        } else if ns < 0.0 {
            start
        } else {
            self.clock_overflow.store(true, Ordering::Relaxed);
            CLOCK_LIMIT_NS
        }
    }

    fn schedule(&self, time: u64, kind: Kind) {
        let mut st = lock(&self.state);
        let seq = st.seq;
        st.seq += 1;
        st.events.push(Reverse(Event { time, seq, kind }));
        let n = st.events.len();
        st.stats.peak_events = st.stats.peak_events.max(n);
    }

    fn process(&self, kind: Kind) {
        match kind {
            Kind::TaskEnd { slot, worker } => {
                let rt = lock(&self.runtimes).get(slot).and_then(Weak::upgrade);
                if let Some(shared) = rt {
                    self.end_task(&shared, worker);
                }
            }
            Kind::Message { id } => {
                let msg = {
                    let mut st = lock(&self.state);
                    let m = st.messages.remove(&id);
                    if let Some((from, _, _)) = &m {
                        st.pending_sends[*from] -= 1;
                    }
                    m
                };
                if let Some((from, to, bytes)) = msg {
                    let net = lock(&self.nets).get(to).and_then(Weak::upgrade);
                    if let Some(net) = net {
                        net.deliver(from, bytes);
                    }
                }
            }
        }
    }

    // ---- runtimes -------------------------------------------------------

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

    pub(crate) fn attach(&self, slot: usize, shared: &Arc<Shared>) {
        lock(&self.runtimes)[slot] = Arc::downgrade(shared);
    }

    fn mark_dirty(&self, slot: usize) {
        lock(&self.dirty).push(slot);
    }

    fn poll_dirty(&self) {
        loop {
            let slots = std::mem::take(&mut *lock(&self.dirty));
            if slots.is_empty() {
                return;
            }
            for slot in slots {
                let rt = lock(&self.runtimes).get(slot).and_then(Weak::upgrade);
                if let Some(shared) = rt {
                    self.poll(&shared);
                }
            }
        }
    }

    /// Let every idle worker of `shared` take a task. A CPU worker joins a
    /// recruiting team first, as a real one looks at the team board before
    /// its queue (`crate::team`).
    fn poll(&self, shared: &Arc<Shared>) {
        let sim = shared.sim.as_ref().expect("a simulated runtime");
        sim.dirty.store(false, Ordering::Relaxed);
        for w in 0..shared.kinds.len() {
            loop {
                if sim.busy(w) {
                    break;
                }
                if w < shared.cpu_workers && self.try_join(shared, w) {
                    break;
                }
                let mut q = sim.take_queue(w);
                let task = q.pop();
                match task {
                    Some(t) => {
                        let is_device = shared.kinds[w].is_device();
                        match worker::team_size(shared, &t.0, is_device) {
                            Some(size) if size > 1 && !t.0.cancelled.load(Ordering::Acquire) => {
                                self.recruit(shared, w, t, size, &mut *q);
                            }
                            _ => self.start_task(shared, w, t, &mut *q, Vec::new()),
                        }
                        sim.put_queue(w, q);
                    }
                    None => {
                        sim.put_queue(w, q);
                        break;
                    }
                }
            }
        }
    }

    /// Worker `w` pops team task `task` and leads its team of `size`: it
    /// recruits every idle CPU worker now, and the others as they finish
    /// (`poll`); the task starts when the team is complete. One team
    /// recruits at a time, as on the real board: if one does, `w` hands its
    /// task back and joins that one.
    fn recruit(
        &self,
        shared: &Arc<Shared>,
        w: usize,
        task: ReadyTask,
        size: usize,
        q: &mut dyn WorkerQueue,
    ) {
        let sim = shared.sim.as_ref().expect("a simulated runtime");
        {
            let mut r = lock(&sim.recruit);
            if r.is_some() {
                drop(r);
                let pushed = q.push(task);
                shared.wake(pushed);
                self.try_join(shared, w);
                return;
            }
            *r = Some(Recruit {
                leader: w,
                task,
                size,
                members: Vec::new(),
            });
        }
        for m in 0..shared.cpu_workers {
            if m != w && !sim.busy(m) {
                if let Some(done) = self.join(shared, m) {
                    self.start_task(shared, w, done.task, q, done.members);
                    return;
                }
            }
        }
    }

    /// CPU worker `m` joins the recruiting team, if there is one; the team
    /// starts when `m` completes it. Returns whether `m` joined.
    fn try_join(&self, shared: &Arc<Shared>, m: usize) -> bool {
        let sim = shared.sim.as_ref().expect("a simulated runtime");
        if lock(&sim.recruit).is_none() {
            return false;
        }
        if let Some(done) = self.join(shared, m) {
            let mut q = sim.take_queue(done.leader);
            self.start_task(shared, done.leader, done.task, &mut *q, done.members);
            sim.put_queue(done.leader, q);
        }
        true
    }

    /// Add `m` to the recruiting team (there is one); the team, taken off
    /// the board, when `m` completes it.
    fn join(&self, shared: &Arc<Shared>, m: usize) -> Option<Recruit> {
        let sim = shared.sim.as_ref().expect("a simulated runtime");
        let mut r = lock(&sim.recruit);
        let rec = r.as_mut()?;
        rec.members.push(m);
        lock(&sim.member_of)[m] = Some(rec.leader);
        if rec.members.len() + 1 == rec.size {
            r.take()
        } else {
            None
        }
    }

    fn start_task(
        &self,
        shared: &Arc<Shared>,
        w: usize,
        task: ReadyTask,
        q: &mut dyn WorkerQueue,
        members: Vec<usize>,
    ) {
        let sim = shared.sim.as_ref().expect("a simulated runtime");
        let kind = &shared.kinds[w];
        if kind.is_device() && !task.0.can_run_on(&shared.memory, kind.node) {
            let pushed = shared.policy.push_cpu_only(task);
            shared.wake(pushed);
            return;
        }
        let node = task.0;
        // SAFETY: this virtual worker popped the task from a ready queue.
        let once = unsafe { node.take_once() };
        if node.cancelled.load(Ordering::Acquire) {
            sim.release_members(&members);
            self.complete(shared, w, &node, Outcome::Cancelled, q);
            return;
        }
        let mem_node = kind.node;
        let now = self.now_ns();
        let mut start = now;
        if shared.multi_node {
            for (i, a) in node.accesses.iter().enumerate() {
                if let Err(e) = a.handle.acquire(&a.handle, mem_node, a.mode, true) {
                    for b in &node.accesses[..i] {
                        b.handle.unpin(mem_node, b.mode);
                    }
                    sim.release_members(&members);
                    self.complete(shared, w, &node, Outcome::Failed(e), q);
                    return;
                }
            }
            let st = lock(&self.state);
            for a in node.accesses.iter().filter(|a| a.mode.reads()) {
                if let Some(&t) = st.ready.get(&(sim.slot, a.handle.core().id, mem_node)) {
                    start = start.max(t);
                }
            }
        }
        let team = 1 + members.len();
        let mut secs = self.task_seconds(shared, w, &node, team);
        let slowdown = &self.platform.node.cpu.slowdown;
        if !kind.is_device() && !slowdown.is_empty() {
            // Shared memory bandwidth: the cores of the platform node busy
            // now (every rank on it), this one (and its team) included.
            let mut busy_cpus = lock(&self.busy_cpus);
            if busy_cpus.len() <= sim.platform_node {
                busy_cpus.resize(sim.platform_node + 1, 0);
            }
            busy_cpus[sim.platform_node] += team;
            let busy = busy_cpus[sim.platform_node];
            let at = |b: usize| slowdown[b.min(slowdown.len()) - 1];
            secs *= at(busy) / at(slowdown.len());
        }
        let end = self.after(start, secs);
        let rendezvous = node.rendezvous().cloned();
        lock(&sim.running)[w] = Some(Running {
            node,
            once,
            mem_node,
            start,
            secs,
            members,
        });
        match rendezvous {
            Some(r) => self.meet(&r, sim.slot, w, start, secs),
            None => self.schedule(
                end,
                Kind::TaskEnd {
                    slot: sim.slot,
                    worker: w,
                },
            ),
        }
    }

    /// Member `(slot, w)` of rendezvous `r` started at `start` for `secs`: it
    /// keeps its worker until the last member starts; then all end together
    /// (see [`crate::Rendezvous`]).
    fn meet(&self, r: &crate::Rendezvous, slot: usize, w: usize, start: u64, secs: f64) {
        let met = {
            let mut m = lock(&self.meetings);
            let here = m.entry(r.key).or_default();
            here.push((slot, w, start, secs));
            if here.len() < r.members {
                return;
            }
            m.remove(&r.key).expect("present")
        };
        // Each round: the latency, and this member's bytes to every other one
        // through its NIC.
        let others = r.members.saturating_sub(1) as u64;
        let exchange = if r.members > 1 {
            r.rounds as f64 * self.platform.network.nic.seconds(others * r.bytes)
        } else {
            0.0
        };
        let first = met.iter().map(|m| m.2).max().unwrap_or(0);
        let longest = met.iter().map(|m| m.3).fold(0.0f64, f64::max);
        let end = self.after(first, longest + exchange);
        for (slot, worker, _, _) in met {
            self.schedule(end, Kind::TaskEnd { slot, worker });
        }
    }

    /// Finish a task that never ran (cancelled, or its data could not be had).
    fn complete(
        &self,
        shared: &Arc<Shared>,
        w: usize,
        node: &Arc<TaskNode>,
        outcome: Outcome,
        q: &mut dyn WorkerQueue,
    ) {
        shared.policy.finished(w, ReadyTask::of(node));
        worker::complete(shared, node, outcome, q);
        self.mark_dirty(shared.sim.as_ref().expect("simulated").slot);
    }

    fn end_task(&self, shared: &Arc<Shared>, w: usize) {
        let sim = shared.sim.as_ref().expect("a simulated runtime");
        let Some(r) = lock(&sim.running)[w].take() else {
            return;
        };
        if !shared.kinds[w].is_device() && !self.platform.node.cpu.slowdown.is_empty() {
            lock(&self.busy_cpus)[sim.platform_node] -= 1 + r.members.len();
        }
        sim.release_members(&r.members);
        let node = r.node;
        let mut q = sim.take_queue(w);
        let Once {
            cpu,
            device: _,
            then,
        } = r.once;
        let run_body = self.execute_bodies && !node.accesses.iter().any(|a| a.handle.is_virtual());
        let mut outcome = Outcome::Ok;
        {
            let _current = CurrentGuard::set(shared.id, w, &mut *q);
            if run_body {
                let ctx = TaskContext::new(&node, w, r.mem_node, &shared.sleep, None);
                outcome = match catch_unwind(AssertUnwindSafe(|| {
                    worker::call(&node, &ctx, Chosen::Cpu(cpu), None)
                })) {
                    Ok(Ok(())) => Outcome::Ok,
                    Ok(Err(e)) => Outcome::Failed(e.to_string()),
                    Err(p) => Outcome::Failed(format!("panicked: {}", panic_message(&*p))),
                };
            }
            if shared.multi_node {
                worker::release_all(&node, r.mem_node);
                let mut st = lock(&self.state);
                for a in node.accesses.iter().filter(|a| a.mode.writes()) {
                    st.ready.remove(&(sim.slot, a.handle.core().id, r.mem_node));
                }
                drop(st);
                if shared.kinds[w].is_device() && crate::sched::writes_through(&node) {
                    shared
                        .policy
                        .write_back(&ReadyTask(Arc::clone(&node)), r.mem_node);
                }
            }
            if let (Outcome::Ok, Some(then)) = (&outcome, then) {
                outcome = match catch_unwind(AssertUnwindSafe(|| then(node.id))) {
                    Ok(Ok(())) => Outcome::Ok,
                    Ok(Err(e)) => Outcome::Failed(e.to_string()),
                    Err(p) => Outcome::Failed(format!("panicked: {}", panic_message(&*p))),
                };
            }
        }
        if let Some(trace) = &sim.trace {
            let end = self.now_ns();
            let label = node.label().map(|l| l.into_owned());
            let mut t = lock(trace);
            for (rank, &m) in std::iter::once(&w).chain(&r.members).enumerate() {
                t.tasks.push(TaskRecord {
                    id: node.id,
                    codelet: node.codelet.name.clone(),
                    label: label.clone(),
                    worker: m as u32,
                    priority: node.priority,
                    // Counted once, on the leader's record.
                    flops: if rank == 0 { node.flops } else { 0.0 },
                    start: r.start,
                    end,
                    team_rank: rank as u32,
                });
            }
            drop(t);
            if let Some(p) = node.preds.get() {
                let mut t = lock(trace);
                t.edges.extend(p.as_slice().iter().map(|&x| (x, node.id)));
            }
        }
        if shared.calibrate && matches!(outcome, Outcome::Ok) {
            let kind = &shared.kinds[w];
            let overhead = self.processor(shared, w).overhead;
            let arch = crate::team::team_arch(kind.arch, 1 + r.members.len());
            self.durations.perf().record(
                &node.codelet.name,
                &arch,
                node.size_key(),
                (r.secs - overhead).max(0.0),
            );
        }
        {
            let mut st = lock(&self.state);
            st.stats.tasks += 1;
            st.stats.peak_in_flight = st.stats.peak_in_flight.max(shared.in_flight());
        }
        shared.policy.finished(w, ReadyTask::of(&node));
        worker::complete(shared, &node, outcome, &mut *q);
        sim.put_queue(w, q);
        self.mark_dirty(sim.slot);
    }

    // ---- durations ------------------------------------------------------

    fn processor<'a>(&'a self, shared: &'a Shared, w: usize) -> &'a Processor {
        match &shared.kinds[w].device {
            Some(d) => match d.as_any().downcast_ref::<VirtualDevice>() {
                Some(v) => &v.spec.proc,
                None => &self.platform.node.cpu,
            },
            None => &self.platform.node.cpu,
        }
    }

    /// Modelled duration of `node` on worker `w` (leading a team of `team`),
    /// in seconds.
    fn task_seconds(&self, shared: &Shared, w: usize, node: &TaskNode, team: usize) -> f64 {
        self.durations
            .seconds(self.processor(shared, w), shared.kinds[w].arch, node, team)
    }

    // ---- links ----------------------------------------------------------

    /// Schedule a copy of `bytes` of handle `handle` of runtime `slot` from
    /// node `from` to node `to` (host = 0, device d = d + 1): FIFO on each
    /// link direction it crosses (device → device goes through the host,
    /// one link after the other), starting when its source is ready.
    /// Returns its duration in ns.
    fn transfer(
        &self,
        slot: usize,
        trace: Option<&Mutex<Trace>>,
        handle: u64,
        from: NodeId,
        to: NodeId,
        bytes: u64,
    ) -> u64 {
        let now = self.now_ns();
        let mut st = lock(&self.state);
        let mut t = st
            .ready
            .get(&(slot, handle, from))
            .copied()
            .unwrap_or(0)
            .max(now);
        let mut first_start = None;
        let legs: [Option<(usize, bool)>; 2] = [
            from.checked_sub(1).map(|d| (d, false)),
            to.checked_sub(1).map(|d| (d, true)),
        ];
        for (d, up) in legs.into_iter().flatten() {
            let Some((spec, upl, downl)) = st.links.get_mut(slot).and_then(|l| l.get_mut(d)) else {
                continue;
            };
            let lane = if up { upl } else { downl };
            let start = t.max(lane.free);
            let end = self.after(start, spec.seconds(bytes));
            lane.free = end;
            first_start.get_or_insert(start);
            t = end;
        }
        st.ready.insert((slot, handle, to), t);
        st.stats.transfers += 1;
        st.stats.transfer_bytes += bytes;
        drop(st);
        let start = first_start.unwrap_or(t);
        if let Some(trace) = trace {
            lock(trace).transfers.push(TransferRecord {
                handle,
                from_node: from as u32,
                to_node: to as u32,
                bytes,
                start,
                end: t,
            });
        }
        t - start
    }

    // ---- network --------------------------------------------------------

    /// The network end of rank `rank`: a [`Net`] over a simulated transport
    /// whose messages are events of this simulation (see `transport.rs`).
    pub fn net(self: &Arc<Self>, rank: usize) -> Arc<Net> {
        let t = Arc::new(super::transport::SimTransport::new(Arc::clone(self), rank));
        let net = Net::manual(t);
        let mut nets = lock(&self.nets);
        if nets.len() <= rank {
            nets.resize(rank + 1, Weak::new());
        }
        nets[rank] = Arc::downgrade(&net);
        net
    }

    /// Send `msg` (charged as `bytes` bytes) from rank `from` to `to`: it
    /// leaves when the sender's NIC is free and arrives after the latency
    /// and its bytes at the NIC bandwidth (ranks of one node: through
    /// memory, at the NIC's latency and the node's memory bandwidth), and
    /// not before the pair's previous message.
    pub(crate) fn send_message(&self, from: usize, to: usize, msg: Vec<u8>, bytes: u64) {
        let now = self.now_ns();
        let p = &self.platform;
        let (na, nb) = (from / p.ranks_per_node, to / p.ranks_per_node);
        let mut st = lock(&self.state);
        let arrive = if na == nb {
            let bw = p.memory_bandwidth.unwrap_or(p.network.nic.bandwidth);
            self.after(now, p.network.nic.latency + bytes as f64 / bw)
        } else {
            let start = now.max(st.nics[na].0.free).max(st.nics[nb].1.free);
            let end = self.after(start, p.network.nic.seconds(bytes));
            st.nics[na].0.free = end;
            st.nics[nb].1.free = end;
            end
        };
        // Equal times are delivered in scheduling order: FIFO.
        let last = st.last_arrival.entry((from, to)).or_insert(0);
        let arrive = arrive.max(*last);
        *last = arrive;
        let id = st.next_message;
        st.next_message += 1;
        st.messages.insert(id, (from, to, msg));
        st.pending_sends[from] += 1;
        st.stats.messages += 1;
        st.stats.message_bytes += bytes;
        drop(st);
        self.schedule(arrive, Kind::Message { id });
    }

    pub(crate) fn pending_sends(&self, rank: usize) -> usize {
        lock(&self.state)
            .pending_sends
            .get(rank)
            .copied()
            .unwrap_or(0)
    }
}

/// A task on a virtual worker: popped, data acquired, waiting for its end event.
struct Running {
    node: Arc<TaskNode>,
    once: Once,
    mem_node: NodeId,
    /// When its body starts (its inputs are there), ns.
    start: u64,
    /// Modelled duration, seconds.
    secs: f64,
    /// The other members of its team (busy until it ends).
    members: Vec<usize>,
}

/// A started member of a rendezvous: (runtime slot, worker, start ns,
/// modelled seconds).
type Member = (usize, usize, u64, f64);

/// A team being recruited: its leader (busy), its task, the size it needs
/// and the members so far.
struct Recruit {
    leader: usize,
    task: ReadyTask,
    size: usize,
    members: Vec<usize>,
}

/// A simulated runtime's virtual workers (held by its `Shared`).
pub(crate) struct SimRt {
    pub(crate) world: Arc<Simulation>,
    pub(crate) slot: usize,
    /// The platform node its rank runs on (cores busy are counted per node:
    /// the ranks of one node share its memory bandwidth).
    platform_node: usize,
    running: Mutex<Vec<Option<Running>>>,
    /// Per worker: the leader of the team it serves (busy until the team's
    /// task ends).
    member_of: Mutex<Vec<Option<usize>>>,
    /// The team recruiting now (one at a time, as on the real board).
    recruit: Mutex<Option<Recruit>>,
    /// Each worker's queue; taken out while the event loop uses it.
    queues: Mutex<Vec<Option<Box<dyn WorkerQueue>>>>,
    dirty: AtomicBool,
    trace: Option<Arc<Mutex<Trace>>>,
}

impl SimRt {
    /// Virtual workers named `names` (memory node of each) in `world`'s slot.
    pub(crate) fn new(
        world: Arc<Simulation>,
        slot: usize,
        platform_node: usize,
        names: Vec<(String, u32)>,
        trace: bool,
    ) -> SimRt {
        let n = names.len();
        SimRt {
            world,
            slot,
            platform_node,
            running: Mutex::new((0..n).map(|_| None).collect()),
            member_of: Mutex::new(vec![None; n]),
            recruit: Mutex::new(None),
            queues: Mutex::new((0..n).map(|_| None).collect()),
            dirty: AtomicBool::new(false),
            trace: trace.then(|| {
                Arc::new(Mutex::new(Trace {
                    workers: names
                        .into_iter()
                        .map(|(name, node)| WorkerInfo {
                            name,
                            memory_node: node,
                        })
                        .collect(),
                    ..Trace::default()
                }))
            }),
        }
    }

    /// The link model this runtime's memory hands its transfers to.
    pub(crate) fn links(&self) -> Arc<dyn VirtualLinks> {
        Arc::new(RtLinks {
            world: Arc::clone(&self.world),
            slot: self.slot,
            trace: self.trace.clone(),
        })
    }

    pub(crate) fn set_queues(&self, queues: Vec<Box<dyn WorkerQueue>>) {
        *lock(&self.queues) = queues.into_iter().map(Some).collect();
    }

    /// Whether virtual worker `w` runs a task, serves a team, or leads
    /// one that recruits.
    fn busy(&self, w: usize) -> bool {
        lock(&self.running)[w].is_some()
            || lock(&self.member_of)[w].is_some()
            || lock(&self.recruit).as_ref().is_some_and(|r| r.leader == w)
    }

    /// The team of a task that ended (or never ran) goes back to work.
    fn release_members(&self, members: &[usize]) {
        let mut of = lock(&self.member_of);
        for &m in members {
            of[m] = None;
        }
    }

    fn take_queue(&self, w: usize) -> Box<dyn WorkerQueue> {
        lock(&self.queues)[w]
            .take()
            .expect("a virtual worker's queue is used by one step at a time")
    }

    fn put_queue(&self, w: usize, q: Box<dyn WorkerQueue>) {
        lock(&self.queues)[w] = Some(q);
    }

    /// A task was pushed: poll this runtime's idle workers at the next step.
    pub(crate) fn mark_dirty(&self) {
        if !self.dirty.swap(true, Ordering::Relaxed) {
            self.world.mark_dirty(self.slot);
        }
    }

    /// Run the simulation until `done()` holds (a wait of this runtime).
    pub(crate) fn run_until(&self, done: &dyn Fn() -> bool) -> Result<(), String> {
        self.world.run_until(done, false)
    }

    /// The timeline recorded so far (virtual ns).
    pub(crate) fn trace(&self) -> Trace {
        match &self.trace {
            Some(t) => {
                let mut t = lock(t).clone();
                t.tasks.sort_by_key(|r| r.start);
                t
            }
            None => Trace::default(),
        }
    }
}

struct RtLinks {
    world: Arc<Simulation>,
    slot: usize,
    trace: Option<Arc<Mutex<Trace>>>,
}

impl VirtualLinks for RtLinks {
    fn transfer(&self, handle: u64, from: NodeId, to: NodeId, bytes: u64) -> u64 {
        self.world
            .transfer(self.slot, self.trace.as_deref(), handle, from, to, bytes)
    }

    fn overcommit(&self, _node: NodeId, _bytes: u64) {
        lock(&self.world.state).stats.overcommits += 1;
    }

    fn cpu_seconds(&self, cost: &crate::device::TaskCost<'_>, team: usize) -> f64 {
        model_seconds(
            &self.world.platform.node.cpu,
            cost.codelet,
            cost.flops,
            cost.bytes,
            team,
        )
    }
}
