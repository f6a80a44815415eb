//! Sequential task flow across ranks (StarPU-MPI-style): a program written
//! as ordinary task submission runs on many ranks.
//!
//! Every rank registers the same data in the same order, each handle with
//! an owner rank, and submits the same task sequence. A task runs on the
//! owner of the first data it writes (or on an explicit `on_rank`); every
//! rank sees every task, so each one knows, without talking, who sends what:
//! - a rank that runs a task reading data it does not own *receives* the
//!   current version (a held receive task, released when the message comes),
//!   unless it still holds that version from an earlier receive: received
//!   data is cached until someone writes it, so a tile read by many tasks on
//!   one rank crosses the network once;
//! - the owner of that data *sends* it as the version's writer finishes,
//!   once per version and destination (see `DistRuntime::post_send`);
//! - a task that writes data its rank does not own sends the new version
//!   back to the owner;
//! - a rank with no part in a task skips it (it only bumps the version of
//!   what the task writes).
//!
//! Messages are matched by (data id, version), so they may arrive before the
//! receive that wants them; they wait in `arrived`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use rustc_hash::FxBuildHasher;
use smallvec::SmallVec;

use super::log::Tick;
use super::net::{Channel, Message, Net};
use super::wire::{DataRef, Reader};
use crate::access::{AccessMode, Accesses, Dynamic};
use crate::codelet::Codelet;
use crate::data::DataHandle;
use crate::error::{BodyError, Error};
use crate::memory::Replicate;
use crate::runtime::{Hold, Runtime};
use crate::task::{Task, TaskBuilder, TaskHandle};
use crate::util::lock;

/// A handle registered with a [`DistRuntime`]: the local handle (dereference
/// it to declare accesses: `h.r()`, `h.rw()`) and its owner.
pub struct DistHandle<T> {
    local: DataHandle<T>,
    gid: u64,
    owner: usize,
}

impl<T> std::ops::Deref for DistHandle<T> {
    type Target = DataHandle<T>;
    fn deref(&self) -> &DataHandle<T> {
        &self.local
    }
}

impl<T> DistHandle<T> {
    /// `local`, known on every rank as `gid`, owned by `owner`.
    pub(crate) fn new(local: DataHandle<T>, gid: u64, owner: usize) -> Self {
        DistHandle { local, gid, owner }
    }

    /// The local handle, given back.
    pub(crate) fn into_local(self) -> DataHandle<T> {
        self.local
    }

    /// The rank that owns this data.
    pub fn owner(&self) -> usize {
        self.owner
    }

    /// Its id, the same on every rank (registration order).
    pub fn id(&self) -> u64 {
        self.gid
    }
}

/// What every rank knows of one handle (the same on every rank: each
/// sees every task).
struct Entry {
    owner: usize,
    data: DataRef,
    /// Writes so far.
    version: u64,
    /// Ranks that hold the current version (or will, once the receives
    /// already posted complete): its writer, its owner, and the ranks it was
    /// sent to since.
    holders: RankSet,
}

/// A set of ranks, one bit each: ranks below 64 in one word, others in a
/// vector allocated only past 64 ranks (the set is rewritten at every write
/// of its data and asked at every read, on every rank: as a `SmallVec` of
/// words, each call cost about 50 instructions, 400 per step of a 2-rank
/// Task Bench stencil).
#[derive(Default)]
struct RankSet {
    low: u64,
    /// Ranks 64 and up: word `i` holds ranks `64 (i + 1)` to `64 (i + 2) - 1`.
    high: Vec<u64>,
}

impl RankSet {
    /// The set of `a` and `b`, reusing this one's storage.
    #[inline]
    fn reset_to(&mut self, a: usize, b: usize) {
        self.low = 0;
        self.high.iter_mut().for_each(|w| *w = 0);
        self.insert(a);
        self.insert(b);
    }

    /// Add `r`; `true` if it was not in the set.
    #[inline]
    fn insert(&mut self, r: usize) -> bool {
        let bit = 1u64 << (r % 64);
        let word = match r / 64 {
            0 => &mut self.low,
            w => {
                if self.high.len() < w {
                    self.high.resize(w, 0);
                }
                &mut self.high[w - 1]
            }
        };
        let had = *word & bit != 0;
        *word |= bit;
        !had
    }
}

/// A received version: its message, kept whole (no copy out of the
/// transport's buffer), and where the data's bytes are in its body.
struct Received {
    msg: Message,
    at: std::ops::Range<usize>,
    /// The bytes were read straight into the data when the message came
    /// (`recv_in_place`): the receive task has nothing left to copy.
    written: bool,
}

impl Received {
    fn bytes(&self) -> &[u8] {
        &self.msg[self.at.clone()]
    }
}

/// The received version for a held receive task: filled before it is released.
type Slot = Arc<OnceLock<Received>>;

/// What a receive task's label is made of, built only when traced:
/// (data id, version).
type RecvArgs = (u64, u64);
/// What a send task's label is made of: (data id, version, destination).
type SendArgs = (u64, u64, usize);

/// `Flow::by_local`'s mark of a local handle not registered here.
const UNREGISTERED: u64 = u64::MAX;

/// Message kinds on the runtime's channel.
const DATA: u32 = 0;
/// "This rank's `wait_all` is done": see `DistRuntime::wait_all`.
const DONE: u32 = 1;

/// What the submitting thread knows of the run: every handle's owner,
/// version and holders (the same on every rank), and the counters. Only
/// submission and registration lock it, never the message callback, so a
/// delivered message never waits for a submission in progress (which holds
/// this lock while it submits the local tasks). Lock order: `Flow`, then
/// `Inbox`.
#[derive(Default)]
struct Flow {
    entries: Vec<Entry>,
    /// Local handle id → global id ([`UNREGISTERED`] for none): local ids
    /// are a runtime's registration count, so a vector indexed by them.
    by_local: Vec<u64>,
    /// Counters.
    sends: u64,
    receives: u64,
    pruned: u64,
}

/// Where posted receives and arriving messages meet, shared with the
/// message callback (held briefly, never across a submission).
#[derive(Default)]
struct Inbox {
    /// Receives posted and not matched yet, by (gid, version). Fx-hashed:
    /// the keys are data ids and versions of this run's own ranks (no input
    /// to defend against), and SipHash cost a hash per remote edge on each
    /// side of it.
    waiting: HashMap<(u64, u64), Waiting, FxBuildHasher>,
    /// Messages that came before their receive: (gid, version) → bytes.
    arrived: HashMap<(u64, u64), Received, FxBuildHasher>,
    /// `DONE`s received from other ranks (all `wait_all` rounds).
    done_peers: u64,
    /// `wait_all` rounds this rank finished.
    rounds: u64,
}

/// The priority of a send or receive task for a task of priority `prio`:
/// one above it (as StarPU-MPI gives a task's communications the task's
/// priority), so that on a priority scheduler the communication goes
/// before the computation of its consumer's priority, which it unblocks,
/// and not before more urgent work. For the runtimes whose communication
/// runs as tasks (traced, or with devices: `DistRuntime::eager` false).
/// At the default 0, a user's tiled Cholesky on 2 ranks (`tessera
/// cholesky --nb 128`, the `prio` scheduler, traced) had its send and
/// receive tasks wait behind queued updates: remote edges took 0.9–2.9 ms
/// (median) from the producer's end to the consumer's start, against
/// 70–121 µs with both raised, and 2.3–4.7 ms with the sends alone. An
/// eager runtime sends from the writer's end, with no task, and its
/// receives mostly run inside a worker's poll of the network: raising
/// them too read 0.93–1.11 of main over 2-rank runs at NB 64–256, no gain
/// within this VM's spread, so they keep the default (CHANGELOG, issue 41).
fn comm_priority(prio: i32) -> i32 {
    prio.saturating_add(1)
}

/// A receive posted and not matched yet.
struct Waiting {
    /// Where its message goes.
    slot: Slot,
    /// Its task's hold, released when the message is in `slot`.
    hold: Hold,
    /// When it was posted, on the trace clock.
    posted: Option<Tick>,
    /// The copy its task writes.
    data: DataRef,
}

impl Waiting {
    /// Hand the receive its message (`size` bytes from `from`) and let it
    /// run: the receive only unpacks, so it may run right here, on a worker
    /// polling the network; unless its copy's bytes are lent (`dist::lent`):
    /// its write would wait for a send this thread may be the one to
    /// progress, so it is queued. (No loan of the copy can start meanwhile:
    /// loans are made by the copy's earlier writer's completion or its
    /// readers, which this receive follows.)
    fn matched(self, got: Received, net: &Net, ch: &Channel, from: usize, size: usize) {
        let _ = self.slot.set(got);
        net.transport().awaiting(-1);
        ch.record_recv(from, size, self.posted);
        if super::lent::is_lent(self.data.handle.core()) {
            self.hold.release();
        } else {
            self.hold.release_received();
        }
    }
}

/// Counters of a distributed STF run on this rank.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StfStats {
    /// Data versions sent.
    pub sends: u64,
    /// Data versions received.
    pub receives: u64,
    /// Submitted tasks this rank took no part in.
    pub pruned: u64,
}

/// A runtime taking part in a distributed sequential task flow (see the
/// module doc). Every rank creates one, in the same order relative to its
/// other channels, and runs the same program: the same registrations (each
/// with an owner rank) and the same tasks, in the same order. To write that
/// program once for one process and for many, see [`Submit`](super::Submit).
///
/// Two ranks, here threads of one process over the in-process transport
/// ([`local::world`](super::local::world)):
///
/// ```
/// use tessera_engine::dist::stf::DistRuntime;
/// use tessera_engine::dist::{local, Net};
/// use tessera_engine::{Codelet, Read, ReadWrite, Runtime};
///
/// type Add = (Read<Vec<f64>>, ReadWrite<Vec<f64>>);
/// let ranks: Vec<_> = local::world(2)
///     .into_iter()
///     .map(|transport| {
///         std::thread::spawn(move || {
///             let dist = DistRuntime::new(Runtime::with_workers(1).unwrap(), Net::new(transport));
///             // `x` lives on rank 0, `y` on rank 1 (every rank registers both).
///             let (x, y) = (dist.register(0, vec![2.0f64]), dist.register(1, vec![1.0f64]));
///             let add = Codelet::<Add>::new("add").cpu(|_, _, (x, y): (&Vec<f64>, &mut Vec<f64>)| {
///                 y[0] += x[0];
///                 Ok(())
///             });
///             // Runs on rank 1, the owner of what it writes; rank 0 sends `x`.
///             dist.task(&add, (x.r(), y.rw())).submit().unwrap();
///             dist.wait_all().unwrap();
///             (dist.rank(), dist.unregister(y).unwrap())
///         })
///     })
///     .collect();
/// for r in ranks {
///     let (rank, y) = r.join().unwrap();
///     if rank == 1 {
///         assert_eq!(y, [3.0]);
///     }
/// }
/// ```
///
/// Predicted on a platform instead (simulated time, [`crate::simulate`]):
/// one runtime per simulated rank, all driven by one thread, which submits
/// the program on every rank and then plays it with `Simulation::run`
/// (bodies do not run; a task lasts what the platform's rates say, a
/// message what its network does):
///
/// ```
/// use std::sync::Arc;
/// use tessera_engine::dist::stf::DistRuntime;
/// use tessera_engine::simulate::{Platform, Simulation};
/// use tessera_engine::{Codelet, Config, Read, ReadWrite, Runtime};
///
/// type Add = (Read<Vec<f64>>, ReadWrite<Vec<f64>>);
/// let platform = Platform::parse(
///     "nodes = 2\nranks_per_node = 1\n[node]\ncores = 1\n[node.cpu]\ngflops = 1\n\
///      [network]\nlatency_us = 1000\ngbs = 1\n",
///     false,
///     "two-nodes.toml",
/// )
/// .unwrap();
/// let sim = Simulation::with_models(platform, Arc::default(), false, false);
/// let add = Codelet::<Add>::new("add")
///     .cpu(|_, _, (x, y): (&Vec<f64>, &mut Vec<f64>)| {
///         y[0] += x[0];
///         Ok(())
///     })
///     .flops(|_| 1e9); // 1 s at the platform's 1 GFLOP/s
/// let ranks: Vec<DistRuntime> = (0..2)
///     .map(|r| DistRuntime::new(Runtime::new(Config::simulated(sim.node(r))).unwrap(), sim.net(r)))
///     .collect();
/// // Every rank registers and submits the same program.
/// for d in &ranks {
///     let (x, y) = (d.register(0, vec![2.0f64]), d.register(1, vec![1.0f64]));
///     d.task(&add, (x.r(), y.rw())).submit().unwrap(); // on rank 1: x crosses
///     d.task(&add, (y.r(), x.rw())).submit().unwrap(); // on rank 0: y crosses back
/// }
/// sim.run().unwrap();
/// let t = ranks[0].runtime().simulated_time().unwrap();
/// assert!(t > 2.0 && t < 2.01, "two 1 s tasks and two 1 ms messages: {t} s");
/// ```
///
/// Under `mpirun`, each process makes its rank's network from MPI (feature
/// `mpi` of `tessera-backends`). The `tessera_backends::mpi::Mpi` value
/// that `mpi::init` returns must outlive the runtime, the network and
/// everything using them: dropping it stops the communication thread and
/// finalises MPI, after which no message moves (a rank still waiting hangs,
/// or MPI aborts). Declare it first, so it is dropped last:
///
/// ```ignore
/// let mpi = tessera_backends::mpi::init()?; // first: dropped last
/// let net = Net::new(mpi.transport());
/// let dist = DistRuntime::new(Runtime::new(Config::default())?, Arc::clone(&net));
/// // ... register, submit, wait_all, unregister ...
/// // `dist`, `net`, then `mpi` are dropped, in that order.
/// ```
pub struct DistRuntime {
    rt: Runtime,
    net: Arc<Net>,
    ch: Channel,
    flow: Mutex<Flow>,
    inbox: Arc<Mutex<Inbox>>,
    /// Notified when a `DONE` arrives.
    wake: Arc<(Mutex<()>, std::sync::Condvar)>,
    recv: Codelet<Dynamic, RecvArgs>,
    send: Codelet<Dynamic, SendArgs>,
    /// Send a version as its writer finishes, with no send task (see
    /// [`post_send`](Self::post_send)).
    eager: bool,
}

impl DistRuntime {
    /// Take part in the distributed run over `net` with the runtime `rt`
    /// (whose trace, with `Config::trace`, records this rank's messages too).
    /// With MPI, the `Mpi` handle must outlive it (see [`DistRuntime`]).
    pub fn new(rt: Runtime, net: Arc<Net>) -> DistRuntime {
        let inbox: Arc<Mutex<Inbox>> = Arc::default();
        let wake: Arc<(Mutex<()>, std::sync::Condvar)> = Arc::default();
        net.record_messages(rt.message_log(net.rank()));
        rt.watch_network(net.transport());
        let ch = net.channel().named("data");
        let st = Arc::clone(&inbox);
        let wake2 = Arc::clone(&wake);
        let net2 = Arc::clone(&net);
        let ch2 = ch.clone();
        let on_whole = move |from, body: Message| {
            let r = (|| -> Result<(), String> {
                let mut r = Reader::new(&body);
                if r.u32()? == DONE {
                    lock(&st).done_peers += 1;
                    let _g = lock(&wake2.0);
                    wake2.1.notify_all();
                    return Ok(());
                }
                let (gid, version) = (r.u64()?, r.u64()?);
                let len = r.bytes()?.len();
                let end = r.position();
                let size = body.len() + 4;
                let bytes = Received {
                    msg: body,
                    at: end - len..end,
                    written: false,
                };
                let mut s = lock(&st);
                match s.waiting.remove(&(gid, version)) {
                    Some(w) => {
                        drop(s);
                        w.matched(bytes, &net2, &ch2, from, size);
                    }
                    None => {
                        s.arrived.insert((gid, version), bytes);
                        drop(s);
                        ch2.record_recv(from, size, None);
                    }
                }
                Ok(())
            })();
            if let Err(e) = r {
                net2.abort(&format!("data message from rank {from}: {e}"));
            }
        };
        let on_whole = Arc::new(on_whole);
        let whole = Arc::clone(&on_whole);
        let (st3, net3, ch3) = (Arc::clone(&inbox), Arc::clone(&net), ch.clone());
        // As `Submitter::write_now`: no device copies to keep coherent, and
        // no trace, whose receive task would be recorded as having run.
        let in_place = !rt.is_simulated() && rt.host_only() && !rt.traced();
        ch.on_message_split(
            move |from, body| whole(from, body),
            move |from, head, tail| {
                if in_place {
                    match recv_in_place(&st3, &net3, &ch3, from, head, tail) {
                        Ok(None) => {}
                        Ok(Some(head)) => {
                            on_whole(from, Message::whole(tail.read_all(head.into_bytes())))
                        }
                        Err(e) => net3.abort(&format!("data message from rank {from}: {e}")),
                    }
                } else {
                    on_whole(from, Message::whole(tail.read_all(head.into_bytes())));
                }
            },
        );
        // Simulated: always (a simulation runs no body, so a send task
        // would send nothing; the hook runs in the event loop as the
        // writer's virtual end comes, and charges the message's bytes).
        let eager = rt.is_simulated() || (rt.host_only() && !rt.traced());
        DistRuntime {
            rt,
            net,
            ch,
            flow: Mutex::default(),
            inbox,
            wake,
            recv: Codelet::with_args("recv")
                .label_args(|&(gid, version)| format!("recv({gid}@{version})")),
            send: Codelet::with_args("send")
                .label_args(|&(gid, version, to)| format!("send({gid}@{version}→{to})")),
            eager,
        }
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.net.rank()
    }

    /// Number of ranks.
    pub fn size(&self) -> usize {
        self.net.size()
    }

    /// The local runtime.
    pub fn runtime(&self) -> &Runtime {
        &self.rt
    }

    /// Register `value` as data owned by `owner`. Every rank registers the
    /// same data in the same order; on other ranks `value` only gives the
    /// shape (the owner's contents arrive when a task there needs them), and
    /// it is held for the whole run: [`register_with`](Self::register_with)
    /// makes it on other ranks only where it arrives.
    pub fn register<T: Replicate>(&self, owner: usize, value: T) -> DistHandle<T> {
        self.register_local(owner, self.rt.register_replicable(value))
    }

    /// Register data owned by `owner`, made by `make` (StarPU-MPI's data
    /// registered with no home): the owner makes it now; another rank makes
    /// it only when the data first arrives there (or when it unregisters it),
    /// so a rank holds no memory for the data it never receives. `make` must
    /// make the same shape every time (it is called once at registration on
    /// every rank, for the shape, and that value is dropped at once); a
    /// message of another size fails the receive naming the data. On another
    /// rank its contents are overwritten by the data's arrival: a `make`
    /// that only allocates there (zeroes of the right size, as `tessera
    /// cholesky` makes) saves computing them twice per copy.
    pub fn register_with<T: Replicate>(
        &self,
        owner: usize,
        make: impl Fn() -> T + Send + 'static,
    ) -> DistHandle<T> {
        let local = if owner == self.rank() {
            self.rt.register_replicable(make())
        } else {
            self.rt.register_deferred(make)
        };
        self.register_local(owner, local)
    }

    /// Record `local` as the next data of the run, owned by `owner`.
    fn register_local<T: Replicate>(&self, owner: usize, local: DataHandle<T>) -> DistHandle<T> {
        let mut s = lock(&self.flow);
        let gid = s.entries.len() as u64;
        let at = local.id() as usize;
        if s.by_local.len() <= at {
            s.by_local.resize(at + 1, UNREGISTERED);
        }
        s.by_local[at] = gid;
        let mut holders = RankSet::default();
        holders.insert(owner);
        s.entries.push(Entry {
            owner,
            data: DataRef::of(&local),
            version: 0,
            holders,
        });
        DistHandle { local, gid, owner }
    }

    /// A typed task (every rank submits the same ones).
    pub fn task<A: Accesses, P: Send + Sync + 'static>(
        &self,
        codelet: &Codelet<A, P>,
        accesses: A,
    ) -> DistTask<'_, A, P> {
        DistTask {
            dist: self,
            task: Task::new(codelet, accesses),
            on_rank: None,
        }
    }

    /// This rank sends the current version of `gid` to `to`.
    ///
    /// Eagerly where it can (data that can travel, on a runtime with no
    /// device and no trace, or in simulated time): packed and handed to the
    /// transport by the thread that completes the version's writer, before
    /// that writer's successors are released, or at once if it has finished (see
    /// `Shared::after_last_writer`). As StarPU-MPI's and PaRSEC's
    /// communication engines do, no task carries the send: a send task cost
    /// a submission and a scheduling round per remote edge, and its worker's
    /// hop delayed the message. Otherwise a send task reads the data (it
    /// acquires it on the host from a device, and a trace shows it).
    fn post_send(&self, s: &mut Flow, gid: u64, to: usize, prio: i32) -> Result<(), Error> {
        let e = &s.entries[gid as usize];
        let (data, version) = (e.data.clone(), e.version);
        s.sends += 1;
        if self.eager && data.handle.replicable() {
            let (ch, net) = (self.ch.clone(), Arc::clone(&self.net));
            let handle = Arc::clone(&data.handle);
            self.rt.after_last_writer(
                &*handle,
                Box::new(move |valid| {
                    // An invalid version is not sent: the writer's failure
                    // ends every rank (`wait_local`), as the send task it
                    // would have cancelled did.
                    if valid {
                        if let Err(e) = send_version(&ch, &data, gid, version, to) {
                            net.abort(&format!("sending data '{}': {e}", data.name()));
                        }
                    }
                }),
            );
        } else {
            self.rt
                .submit(self.send_task(data, gid, version, to, prio))?;
        }
        Ok(())
    }

    /// The task that sends `data`, version `version` of `gid`, to `to`,
    /// for a task of priority `prio` there (see [`comm_priority`]).
    fn send_task(
        &self,
        data: DataRef,
        gid: u64,
        version: u64,
        to: usize,
        prio: i32,
    ) -> TaskBuilder {
        let ch = self.ch.clone();
        TaskBuilder::with_args(&self.send, (gid, version, to))
            .priority(comm_priority(prio))
            .access_erased(Arc::clone(&data.handle), AccessMode::R)
            .cpu_only()
            .body(move |_| Ok(send_version(&ch, &data, gid, version, to)?))
    }

    /// This rank receives the current version of `gid`: a receive task,
    /// held until the message is here (it may be already). The inbox is
    /// locked only to match, after the submission.
    fn post_recv(&self, s: &mut Flow, gid: u64, prio: i32) -> Result<(), Error> {
        let e = &s.entries[gid as usize];
        let version = e.version;
        let slot: Slot = Arc::new(OnceLock::new());
        let task = self.recv_task(e.data.clone(), gid, version, Arc::clone(&slot), prio);
        s.receives += 1;
        let (_, hold) = self.rt.submit_held(task)?;
        let mut inbox = lock(&self.inbox);
        match inbox.arrived.remove(&(gid, version)) {
            Some(bytes) => {
                drop(inbox);
                let _ = slot.set(bytes);
                hold.release();
            }
            None => {
                // Idle workers watch the network until it comes
                // (`crate::watch`); counted before the callback can match it.
                self.net.transport().awaiting(1);
                let waiting = Waiting {
                    slot,
                    hold,
                    posted: self.ch.now(),
                    data: e.data.clone(),
                };
                inbox.waiting.insert((gid, version), waiting);
            }
        }
        Ok(())
    }

    /// Submit a task on every rank (a typed [`Task`] made with `Task::new`,
    /// or a [`TaskBuilder`]): the rank that runs it (the owner of the first
    /// data it writes, else of the first it reads) submits the task, the
    /// others their sends and receives, or nothing. Returns the local task
    /// on the rank that runs it.
    pub fn submit(&self, task: impl Into<TaskBuilder>) -> Result<Option<TaskHandle>, Error> {
        self.submit_on(task.into(), None)
    }

    /// [`submit`](Self::submit), run on `on_rank` if given.
    fn submit_on(
        &self,
        builder: TaskBuilder,
        on_rank: Option<usize>,
    ) -> Result<Option<TaskHandle>, Error> {
        let me = self.net.rank();
        let prio = builder.priority;
        let mut s = lock(&self.flow);
        let mut accesses: SmallVec<[(u64, AccessMode); 8]> = SmallVec::new();
        for a in &builder.declared.accesses {
            match s.by_local.get(a.core().id as usize) {
                Some(&g) if g != UNREGISTERED => accesses.push((g, a.mode)),
                _ => {
                    return Err(Error::Submit {
                        task: builder.display_name(),
                        reason: format!(
                            "data '{}' was not registered with the distributed runtime",
                            a.core().display_name()
                        ),
                    })
                }
            }
        }
        let exec = on_rank.unwrap_or_else(|| {
            let first = accesses
                .iter()
                .find(|(_, m)| m.writes())
                .or(accesses.first());
            first.map_or(0, |&(g, _)| s.entries[g as usize].owner)
        });
        if exec >= self.net.size() {
            return Err(Error::Submit {
                task: builder.display_name(),
                reason: format!("rank {exec} does not exist ({} ranks)", self.net.size()),
            });
        }
        // Reads: the data's current version must reach the running rank,
        // from its owner, unless that rank holds it already (the cache).
        for &(gid, mode) in &accesses {
            let e = &mut s.entries[gid as usize];
            if !mode.reads() || !e.holders.insert(exec) {
                continue;
            }
            let owner = e.owner;
            if exec == me {
                self.post_recv(&mut s, gid, prio)?;
            } else if owner == me {
                self.post_send(&mut s, gid, exec, prio)?;
            }
        }
        let mut handle = None;
        if exec == me {
            handle = Some(self.rt.submit(builder)?);
        } else if !accesses
            .iter()
            .any(|&(g, _)| s.entries[g as usize].owner == me)
        {
            s.pruned += 1;
        }
        // Writes: a new version, held by the rank that ran the task; its
        // owner gets it back if another rank wrote it.
        for &(gid, mode) in &accesses {
            if !mode.writes() {
                continue;
            }
            let e = &mut s.entries[gid as usize];
            e.version += 1;
            let owner = e.owner;
            e.holders.reset_to(exec, owner);
            if exec != owner {
                if exec == me {
                    self.post_send(&mut s, gid, owner, prio)?;
                } else if owner == me {
                    self.post_recv(&mut s, gid, prio)?;
                }
            }
        }
        Ok(handle)
    }

    /// The task that writes version `version` of `gid` into `data` from the
    /// bytes `slot` holds once it is released, for a task of priority
    /// `prio` (see [`comm_priority`]).
    fn recv_task(
        &self,
        data: DataRef,
        gid: u64,
        version: u64,
        slot: Slot,
        prio: i32,
    ) -> TaskBuilder {
        let handle = Arc::clone(&data.handle);
        // An eager runtime's receive keeps the default (see `comm_priority`).
        let prio = if self.eager { 0 } else { comm_priority(prio) };
        TaskBuilder::with_args(&self.recv, (gid, version))
            .priority(prio)
            .access_erased(handle, AccessMode::W)
            .cpu_only()
            .body(move |_| {
                let got = slot.get().ok_or("released before its message came")?;
                if !got.written {
                    // SAFETY: this task declared the handle W, on a CPU worker.
                    unsafe { data.unpack(got.bytes()) }?;
                }
                Ok(())
            })
    }

    /// Wait for every task of this rank and every send to finish, then for
    /// every other rank to get there too; `Err` if a task failed here (the
    /// other ranks are told) or another rank aborted — so no rank reports
    /// success while the run failed elsewhere. Every rank calls it the same
    /// number of times.
    pub fn wait_all(&self) -> Result<(), Error> {
        self.wait_local()?;
        let round = {
            let mut s = lock(&self.inbox);
            s.rounds += 1;
            s.rounds
        };
        let me = self.net.rank();
        for to in (0..self.net.size()).filter(|&r| r != me) {
            let mut w = self.ch.writer(4);
            w.u32(DONE);
            self.ch.send(to, w);
        }
        let need = round * (self.net.size() as u64 - 1);
        self.net
            .wait_until(&self.wake, || lock(&self.inbox).done_peers >= need)
            .map_err(Error::Remote)
    }

    /// This rank's tasks and sends. A failure here ends every rank
    /// (`halo::wait_all`: after a grace for the tasks that do not wait for
    /// the network, the failure is sent as an abort): the failed task's
    /// remote readers would otherwise wait for data that never comes, and
    /// two ranks failing at once waited for each other forever.
    fn wait_local(&self) -> Result<(), Error> {
        super::halo::wait_all(&self.rt, &self.net)?;
        self.net.flush();
        Ok(())
    }

    /// The counters of this rank.
    pub fn stats(&self) -> StfStats {
        let s = lock(&self.flow);
        StfStats {
            sends: s.sends,
            receives: s.receives,
            pruned: s.pruned,
        }
    }

    /// Wait for the data's tasks, then take the value back (on its owner:
    /// the final contents; elsewhere: whatever copy this rank last held).
    pub fn unregister<T: Send + Sync + 'static>(&self, h: DistHandle<T>) -> Result<T, Error> {
        self.rt.unregister(h.local)
    }
}

/// Pack version `version` of `gid`, which `data` holds (nobody writes it
/// meanwhile), straight into a message to `to` (no second copy) and send it,
/// head first: the receiver may read the bytes straight into its copy
/// (`recv_in_place`). Long bytes are lent instead of packed (`dist::lent`:
/// MPI reads them where they lie, and the data's next writer waits for it).
fn send_version(
    ch: &Channel,
    data: &DataRef,
    gid: u64,
    version: u64,
    to: usize,
) -> Result<(), String> {
    let start = ch.now();
    if let Some(tail) = ch.lend(data)? {
        // The bytes stay where they are (`dist::lent`); the message ends
        // with their length.
        let mut w = ch.writer(28);
        w.u32(DATA).u64(gid).u64(version).u64(tail.len() as u64);
        ch.send_lent_since(to, w, tail, start, None);
        return Ok(());
    }
    let mut w = ch.writer(28 + data.bytes() as usize);
    w.u32(DATA).u64(gid).u64(version);
    // The bytes follow their 8-byte length.
    let head = w.0.len() + 8;
    data.pack(&mut w)?;
    let head = Some(head).filter(|&h| h < w.0.len());
    ch.send_split_since(to, w, head, start, None);
    Ok(())
}

/// A data message delivered head first (`head`, see [`send_version`]): when
/// its receive task waits only for it (every task before it on the copy has
/// finished), read the bytes from `tail` straight into the copy, and let the
/// receive task run with nothing left to copy. `Ok(Some(head))`: not done,
/// the tail still unread (the receive is not posted yet or waits for a
/// reader of the copy, or the head is not such a message), for the
/// whole-message way. `Err`: the copy is not of the size that arrived.
fn recv_in_place(
    inbox: &Mutex<Inbox>,
    net: &Net,
    ch: &Channel,
    from: usize,
    head: Message,
    tail: &mut dyn super::Tail,
) -> Result<Option<Message>, String> {
    let key = (|| -> Result<Option<(u64, u64)>, String> {
        let mut r = Reader::new(&head);
        if r.u32()? != DATA {
            return Ok(None);
        }
        let (gid, version) = (r.u64()?, r.u64()?);
        let len = r.u64()?;
        Ok((r.rest().is_empty() && len == tail.len() as u64).then_some((gid, version)))
    })();
    let Ok(Some(key)) = key else {
        return Ok(Some(head));
    };
    let w = {
        let mut s = lock(inbox);
        match s.waiting.get(&key) {
            // Its pending count is the hold alone: every task it waits for
            // (the copy's earlier readers and writer) has finished, and no
            // task can use the copy before it (later ones wait for it).
            // And no transport reads the copy's bytes (lent by an earlier
            // send of this rank): this thread must not wait for that.
            Some(w) if w.hold.only_hold_left() && !super::lent::is_lent(w.data.handle.core()) => {
                s.waiting.remove(&key).expect("just found")
            }
            _ => return Ok(Some(head)),
        }
    };
    let size = head.len() + 4 + tail.len();
    let h = &w.data.handle;
    let written = h
        .acquire(h, crate::memory::HOST, AccessMode::W, true)
        .and_then(|()| {
            // SAFETY: the receive task that declared the copy W is not run yet
            // and nothing else uses the copy (above); it is acquired for writing
            // on the host.
            let r = unsafe { h.fill_parts(tail.len(), &mut |parts| tail.read_into(parts)) };
            h.release(crate::memory::HOST, AccessMode::W);
            r
        });
    // The receive runs either way: with nothing to copy, or, after a
    // failure, to fail on the empty bytes once the abort below is sent.
    let got = Received {
        msg: head,
        at: 0..0,
        written: written.is_ok(),
    };
    w.matched(got, net, ch, from, size);
    written.map(|()| None)
}

/// A typed task of a [`DistRuntime`], submitted on every rank.
pub struct DistTask<'d, A, P> {
    dist: &'d DistRuntime,
    task: Task<A, P>,
    on_rank: Option<usize>,
}

impl<A: Accesses, P: Send + Sync + 'static> DistTask<'_, A, P> {
    /// The codelet's arguments.
    pub fn args(mut self, args: P) -> Self {
        self.task = self.task.args(args);
        self
    }

    /// Priority on the rank that runs it. Where communication runs as
    /// tasks (a traced runtime, or one with devices), the sends and
    /// receives that bring it its data (and take its result back to the
    /// data's owner) get one more, on their ranks.
    pub fn priority(mut self, p: i32) -> Self {
        self.task = self.task.priority(p);
        self
    }

    /// Run on `rank` instead of the owner of the data it writes.
    pub fn on_rank(mut self, rank: usize) -> Self {
        self.on_rank = Some(rank);
        self
    }

    /// A CPU body of this task (instead of the codelet's).
    pub fn cpu<F>(mut self, f: F) -> Self
    where
        F: for<'a> FnOnce(A::Cpu<'a>) -> Result<(), BodyError> + Send + 'static,
    {
        self.task = self.task.cpu(f);
        self
    }

    /// Submit on every rank (see [`DistRuntime::submit`]).
    pub fn submit(self) -> Result<Option<TaskHandle>, Error> {
        self.dist.submit_on(self.task.into(), self.on_rank)
    }
}

impl Drop for DistRuntime {
    fn drop(&mut self) {
        self.ch.close();
        // Receives that never came (a failed run) are awaited no more.
        let left = lock(&self.inbox).waiting.len();
        self.net.transport().awaiting(-(left as isize));
    }
}

#[cfg(test)]
mod tests {
    //! Proves that receive and send tasks carry no label string (nothing is
    //! formatted per message with tracing off), that their labels are made
    //! from their numbers when asked, and that a traced run shows them; and
    //! that a set of ranks holds ranks on both sides of 64.
    use super::*;
    use crate::dist::local;
    use crate::{Config, Read, ReadWrite, Write};

    type CopyData = (Read<Vec<f64>>, ReadWrite<Vec<f64>>);

    #[test]
    fn rank_sets_hold_ranks_below_and_past_64() {
        let mut s = RankSet::default();
        for r in [0, 63, 64, 127, 128, 300] {
            assert!(s.insert(r), "rank {r} was not in the set");
            assert!(!s.insert(r), "rank {r} is in the set now");
        }
        for r in [1, 62, 65, 129, 299, 301] {
            assert!(s.insert(r), "rank {r} was not in the set");
        }
        s.reset_to(200, 5);
        for r in [0, 63, 64, 127, 128, 300, 1, 65, 301] {
            assert!(s.insert(r), "rank {r} left after the reset");
        }
        assert!(!s.insert(200) && !s.insert(5), "the reset's ranks");
    }

    #[test]
    fn labels_are_built_only_when_asked() {
        let net = Net::new(local::world(1).pop().expect("one rank"));
        let d = DistRuntime::new(Runtime::with_workers(1).unwrap(), net);
        let h = d.register(0, vec![1.0f64; 2]);
        let send = d.send_task(DataRef::of(&h), h.id(), 3, 1, 0);
        assert!(send.label.is_none());
        assert_eq!(send.display_name(), "send(0@3→1)");
        let recv = d.recv_task(DataRef::of(&h), h.id(), 3, Arc::default(), 0);
        assert!(recv.label.is_none());
        assert_eq!(recv.display_name(), "recv(0@3)");
    }

    /// On a priority scheduler, a send task runs as soon as the data it
    /// sends is written, and a receive as soon as its message is here,
    /// before computation of its consumer's priority queued earlier, but
    /// after more urgent work. Each rank's one worker is held in a first
    /// task (rank 0's writes `x`) while eight fillers (priority 0, the
    /// consumer's) and one urgent task (priority 5) queue behind it: rank 0
    /// opens its gate once everything is submitted, rank 1 once `x`'s
    /// message has come. Then each runs the urgent task, then its send or
    /// receive. (At priority 0, both ran after the eight fillers; at the
    /// highest, before the urgent task.)
    #[test]
    fn sends_and_receives_go_before_queued_computation() {
        let out = crate::dist::on_ranks(
            2,
            || {
                Config::with_workers(1)
                    .trace(true)
                    .scheduler(crate::Scheduler::Prio)
            },
            |d| {
                let (x, y, z) = (
                    d.register(0, vec![0.0f64]),
                    d.register(1, vec![0.0f64]),
                    d.register(1, vec![0.0f64]),
                );
                let fillers: Vec<_> = (0..16).map(|i| d.register(i % 2, vec![0.0f64])).collect();
                // (entered, open): this rank's gated task started; it may end.
                let gate = Arc::new((
                    std::sync::Mutex::new((false, false)),
                    std::sync::Condvar::new(),
                ));
                let gated: Codelet<ReadWrite<Vec<f64>>> = Codelet::new("gated");
                for h in [&x, &z] {
                    let g = Arc::clone(&gate);
                    d.task(&gated, h.rw())
                        .cpu(move |v| {
                            let mut state = g.0.lock().unwrap();
                            state.0 = true;
                            g.1.notify_all();
                            while !state.1 {
                                state = g.1.wait(state).unwrap();
                            }
                            v[0] = 7.0;
                            Ok(())
                        })
                        .submit()
                        .unwrap();
                }
                // The worker is in the gated task before anything queues.
                let entered = gate.1.wait_timeout_while(
                    gate.0.lock().unwrap(),
                    std::time::Duration::from_secs(30),
                    |state| !state.0,
                );
                assert!(entered.unwrap().0 .0, "the gated task never started");
                let fill: Codelet<ReadWrite<Vec<f64>>> = Codelet::new("fill");
                let urgent: Codelet<ReadWrite<Vec<f64>>> = Codelet::new("urgent");
                for (i, f) in fillers.iter().enumerate() {
                    let (cl, p) = if i < 14 { (&fill, 0) } else { (&urgent, 5) };
                    d.task(cl, f.rw())
                        .cpu(|f| {
                            f[0] += 1.0;
                            Ok(())
                        })
                        .priority(p)
                        .submit()
                        .unwrap();
                }
                let copy: Codelet<CopyData> = Codelet::new("copy");
                d.task(&copy, (x.r(), y.rw()))
                    .cpu(|(x, y)| {
                        y[0] = x[0];
                        Ok(())
                    })
                    .submit()
                    .unwrap();
                if d.rank() == 1 {
                    // Until `x`'s message matched its receive (or came first).
                    let since = std::time::Instant::now();
                    while !lock(&d.inbox).waiting.is_empty() {
                        assert!(since.elapsed().as_secs() < 30, "x's message never came");
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                }
                gate.0.lock().unwrap().1 = true;
                gate.1.notify_all();
                d.wait_all().unwrap();
                let mut tasks = d.runtime().trace().tasks;
                tasks.sort_by_key(|t| t.start);
                let order: Vec<String> = tasks
                    .into_iter()
                    .map(|t| t.label.unwrap_or(t.codelet))
                    .collect();
                (d.unregister(y).unwrap(), order)
            },
        );
        assert_eq!(out[1].0, vec![7.0]);
        let (rank0, rank1) = (&out[0].1, &out[1].1);
        assert_eq!(rank0.len(), 10, "{rank0:?}");
        assert_eq!(rank0[..3], ["gated", "urgent", "send(0@1→1)"], "{rank0:?}");
        assert_eq!(rank1.len(), 11, "{rank1:?}");
        assert_eq!(rank1[..3], ["gated", "urgent", "recv(0@1)"], "{rank1:?}");
    }

    /// Rank 0 writes `x` (1), rank 1 reads it, rank 0 writes it again (2)
    /// and once more (3); `slow`: the first writer is still running when the
    /// read and the later writes are submitted (the send waits for it, as a
    /// hook on its end), else it has finished (the send leaves at once).
    /// Returns what rank 1 read, and this rank's final `x`.
    fn read_between_writes(d: &DistRuntime, slow: bool) -> (Option<u64>, u64) {
        type Set = Write<Vec<u64>>;
        type Copy = (Read<Vec<u64>>, Write<Vec<u64>>);
        let (x, y) = (d.register(0, vec![0u64; 4]), d.register(1, vec![0u64; 4]));
        let set = |v: u64, wait_ms: u64| {
            Codelet::<Set>::new("set").cpu(move |_, _, x: &mut Vec<u64>| {
                std::thread::sleep(std::time::Duration::from_millis(wait_ms));
                x.iter_mut().for_each(|e| *e = v);
                Ok(())
            })
        };
        let copy = Codelet::<Copy>::new("copy").cpu(|_, _, (x, y): (&Vec<u64>, &mut Vec<u64>)| {
            y.copy_from_slice(x);
            Ok(())
        });
        let first = d.task(&set(1, if slow { 100 } else { 0 }), x.w()).submit();
        if let (false, Some(h)) = (slow, first.unwrap()) {
            d.runtime().wait(&h).unwrap();
        }
        d.task(&copy, (x.r(), y.w())).submit().unwrap();
        d.task(&set(2, 0), x.w()).submit().unwrap();
        d.task(&set(3, 0), x.w()).submit().unwrap();
        d.wait_all().unwrap();
        let got = (d.rank() == 1).then(|| d.unregister(y).unwrap()[0]);
        (got, d.unregister(x).unwrap()[0])
    }

    /// A version is sent as its writer left it, whether the send leaves
    /// with the writer's end or at once: the later writers, submitted
    /// before the first one ends, do not overwrite it first.
    #[test]
    fn a_sent_version_is_the_one_its_reader_follows() {
        let two = || Config::with_workers(2);
        for (slow, out) in [
            (
                true,
                crate::dist::on_ranks(2, two, |d| read_between_writes(d, true)),
            ),
            (
                false,
                crate::dist::on_ranks(2, two, |d| read_between_writes(d, false)),
            ),
        ] {
            assert_eq!(out[1].0, Some(1), "slow writer: {slow}");
            assert_eq!(out[0].1, 3, "slow writer: {slow}");
        }
    }

    #[test]
    fn a_traced_run_labels_its_sends_and_receives() {
        let out = crate::dist::on_ranks(
            2,
            || Config::with_workers(1).trace(true),
            |d| {
                let (a, b) = (d.register(0, vec![2.0f64]), d.register(1, vec![0.0f64]));
                let cl: Codelet<CopyData> = Codelet::new("copy");
                d.task(&cl, (a.r(), b.rw()))
                    .cpu(|(a, b)| {
                        b[0] = a[0];
                        Ok(())
                    })
                    .submit()
                    .unwrap();
                d.wait_all().unwrap();
                let labels: Vec<String> = d
                    .runtime()
                    .trace()
                    .tasks
                    .into_iter()
                    .filter_map(|t| t.label)
                    .collect();
                (d.unregister(b).unwrap(), labels)
            },
        );
        assert_eq!(out[1].0, vec![2.0]);
        assert_eq!(out[0].1, ["send(0@0→1)"]);
        assert_eq!(out[1].1, ["recv(0@0)"]);
    }
}
