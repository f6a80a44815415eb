//! The MPI transport (rsmpi over Open MPI). Every MPI call after `init` is
//! made by one thread at a time, holding the transport's `progress` lock;
//! any thread may be that thread:
//! - **a sender** posts its message's `MPI_Isend` itself when the lock is
//!   free (a worker finishing a task: no hand-over to another thread on the
//!   way out). It only posts sends: it may hold locks that a delivered
//!   message's callback takes;
//! - **an idle worker watching the network** (`tessera_engine`'s `watch`:
//!   one idle CPU worker of a runtime on this transport, while a message is
//!   expected) runs whole rounds of progress through `Transport::poll`, so
//!   a message reaches the task it releases on that worker, at once;
//! - **the communication thread** runs the rounds when nobody else does.
//!
//! A round of progress: post an `MPI_Isend` for every queued message, up to
//! `MAX_IN_FLIGHT` in flight (the buffer is owned by the transport until
//! the send completes; the others wait, in order), test the sends in
//! flight, and receive every message that has arrived, delivering
//! each to the network's routing function on the same thread. Each rank
//! keeps one receive posted (any source, any tag, `SHORT` = 8 KiB), which
//! `MPI_Test` completes in the call that pulls the message in (a probe
//! matched it one call later; see `Posted`). A message longer than
//! `SHORT` goes as a header with its length and pieces of at most
//! [`MAX_PIECE`] (MPI counts are `i32`); the posted receive takes the header
//! in its sender's order, then the pieces are received, and one message is
//! delivered. A message sent head first (`Transport::send_split`) goes as
//! a header carrying its head (`TAG_SPLIT`) and its tail in pieces; the
//! receiving thread delivers the head with an `MpiTail`, which the
//! receiver reads straight into the data the tail belongs to.
//!
//! The communication thread backs off when a round finds nothing to do: a
//! few spins (none while a worker watches: it polled less than `WATCHED`
//! ago), then it sleeps, 20 µs doubling up to `MAX_NAP` (woken at once when
//! a message is queued and its sender could not post it; only a round that
//! posts or completes sends starts the naps at 20 µs again), with the thread's
//! timer slack set to 1 µs so a nap is not stretched to Linux's default
//! 50 µs. While the rank awaits a reply (`Transport::awaiting`: a halo
//! exchange, a task all-reduce, an STF receive, a symbolic run, a blocking
//! collective), the naps stop growing at `AWAIT_NAP`, 1 ms: a busy worker
//! polls the network between two tasks (at most every 50 µs, engine
//! `watch::BETWEEN_TASKS`), so the thread only covers tasks longer than
//! that. While a worker watches, it naps at least `WATCHED_NAP`, 1 ms, and
//! skips a round
//! whose lock that worker holds (it would only wait for the lock, and the
//! worker's unlock would wake it). It never polls
//! between naps: on oversubscribed cores a polling thread takes the core
//! from the workers that compute. Whoever waits for a message polls
//! instead: an idle worker watching, or a thread in a blocking collective
//! (`Collectives`).
//!
//! Rule: the naps are never on the critical path while a worker is idle to
//! watch; they remain only where every worker is busy, where a late message
//! costs least, and they are long because each wake-up costs the rank's core
//! a probe of Open MPI's progress engine and a preempted worker (the
//! measurements behind both caps are in the CHANGELOG, issue 41).
//!
//! MPI is initialised once per process with `MPI_THREAD_MULTIPLE` requested;
//! since the lock serialises every call, `MPI_THREAD_SERIALIZED` is enough,
//! and anything less is refused with a message saying what the library
//! offers. When the [`Mpi`] value is dropped, the communication thread
//! finishes the sends in flight and closes the transport (no thread enters
//! MPI after that), and MPI is finalised on the thread that initialised it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mpi::collective::CommunicatorCollectives;
use mpi::datatype::{DynBufferMut, Equivalence};
use mpi::environment::Universe;
use mpi::point_to_point::{Destination, Source};
use mpi::request::{Request, StaticScope};
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::Threading;
use tessera_engine::dist::{Counters, Lent, Sink, Tail, Transport};
use tessera_engine::util::lock;

/// The tag of every message of at most [`SHORT`] bytes (messages are told
/// apart by their content).
const TAG: i32 = 7;
/// The tag of a longer message's header: its length, 8 bytes little-endian;
/// its bytes follow in pieces tagged [`TAG_PIECE`].
const TAG_LONG: i32 = 8;
/// The largest message sent as one MPI message, into the receive each rank
/// keeps posted (see [`Posted`]); a longer one goes as a header and pieces.
/// 8 KiB: above Open MPI's shared-memory eager limit (4 KiB), so every
/// message MPI delivers eagerly is short; copying one out of the posted
/// buffer costs well under a microsecond.
const SHORT: usize = 8 << 10;
/// The most messages a rank keeps in flight (posted and not completed);
/// more wait in the transport's queue, in order, until older ones complete.
/// Open MPI's progress engine walks its list of sends waiting for
/// shared-memory buffers at every call, so with every message posted at
/// once a round cost grew with the messages in flight: a stream of 65 536
/// 8-byte edges (`overhead-mpi --stream 65536`) ran at 14 000–19 000 edges/s
/// against 150 000–250 000 for 4 096, the communication thread 45 % in
/// Open MPI's locks (`perf`).
const MAX_IN_FLIGHT: usize = 64;
/// The tag of a piece of a longer message.
const TAG_PIECE: i32 = 9;
/// The tag of a long message's header when it goes head first
/// (`Transport::send_split`): the length of its tail, 8 bytes
/// little-endian, then its head; the tail follows in pieces tagged
/// [`TAG_PIECE`], which the receiver reads where it wants them (see
/// [`MpiTail`]).
const TAG_SPLIT: i32 = 10;
/// The largest MPI message the transport sends: MPI counts are `i32`, so one
/// MPI message carries less than 2 GiB (a tile column of the distributed LU
/// reaches that at N·NB·8 bytes, e.g. N = 600 000, NB = 448). Messages
/// longer than `SHORT` (8 KiB) go as a header and pieces of at most this size,
/// which the receiver reassembles before delivering the message (see
/// `MpiTransport::progress`).
pub const MAX_PIECE: usize = 1 << 30;
/// Longest sleep of an idle communication thread (see the module doc).
const MAX_NAP: Duration = Duration::from_millis(5);
/// Longest sleep of the communication thread while this rank awaits a reply
/// or messages wait for room in flight (see the module doc). 1 ms, not the
/// 250 µs it was before busy workers polled between their tasks: the
/// thread's wake-ups preempt a computing worker, and 2-rank Task Bench
/// `stencil_1d` at `-iter 65536` (tasks of about 200 µs) ran 4–6 % faster
/// with the longer nap (5 alternated runs each front-end).
const AWAIT_NAP: Duration = Duration::from_millis(1);
/// Shortest sleep of the communication thread while a worker watches the
/// network, a reply awaited or not. The thread is then only the fallback
/// for when every worker is busy, and a busy worker could not run what a
/// message releases anyway (an idle one takes the watch). At
/// 250 µs, its wake-ups preempted the rank's computing worker 680
/// times in a 0.12 s Task Bench run (`stencil_1d`, 2 ranks, `-iter 4096`).
const WATCHED_NAP: Duration = Duration::from_millis(1);
/// How long after the last message a watching worker keeps polling although
/// no reply is awaited (`Transport::expecting`): the next message of a burst
/// usually comes within it.
const HOT: Duration = Duration::from_millis(2);
/// Idle rounds the communication thread spins before it naps.
const SPINS: u32 = 64;
/// How recently another thread must have polled (`Transport::poll`: an idle
/// worker watching the network) for the communication thread to leave the
/// polling to it and nap.
const WATCHED: Duration = Duration::from_micros(100);
/// A watching worker stamps the time of one poll in this many (a poll round
/// is well under a microsecond, so the stamp is at most a few µs stale,
/// far under [`WATCHED`]): each stamp is a clock read, and reading the
/// clock at every round was the largest single cost of an idle poll.
const STAMP_EVERY: u32 = 16;

/// MPI for this process: initialised by [`init`], finalised on drop.
pub struct Mpi {
    transport: Arc<MpiTransport>,
    /// The threading level the library provides.
    threading: Threading,
    thread: Option<JoinHandle<()>>,
    /// Dropped last, on the thread that made it: `MPI_Finalize`.
    universe: Option<Universe>,
}

/// Whether this process was started by an MPI launcher (Open MPI's
/// `mpirun` sets `OMPI_COMM_WORLD_SIZE`; MPICH/Hydra `PMI_SIZE`).
pub fn launched() -> bool {
    std::env::var_os("OMPI_COMM_WORLD_SIZE").is_some() || std::env::var_os("PMI_SIZE").is_some()
}

/// Whether this process has initialised MPI (finalised since or not).
pub fn is_initialized() -> bool {
    mpi::environment::is_initialized()
}

/// [`Mpi::abort`] from any thread (a Ctrl-C watcher holds no [`Mpi`]):
/// `MPI_Abort` on the world communicator, after [`init`].
pub fn abort_job(code: i32) -> ! {
    SimpleCommunicator::world().abort(code)
}

/// Initialise MPI and start this rank's communication thread.
pub fn init() -> Result<Mpi, String> {
    let (universe, provided) = mpi::initialize_with_threading(Threading::Multiple)
        .ok_or("MPI was already initialised in this process")?;
    if provided < Threading::Serialized {
        return Err(format!(
            "the MPI library offers only {provided:?} threading; Tessera's communication thread needs at least Serialized (MPI_THREAD_SERIALIZED)"
        ));
    }
    let world = universe.world();
    let (rank, size) = (world.rank() as usize, world.size() as usize);
    let (out_tx, out_rx) = channel::<Outgoing>();
    let (in_tx, in_rx) = channel::<(usize, Vec<u8>)>();
    let transport = Arc::new(MpiTransport {
        rank,
        size,
        outbox: Mutex::new(out_tx),
        inbox: Mutex::new(in_rx),
        progress: Mutex::new(Progress {
            queued: out_rx,
            inflight: VecDeque::new(),
            backlog: VecDeque::new(),
            inbox: in_tx,
            posted: None,
            sink: None,
        }),
        outside_poll: AtomicU64::new(0),
        outside_polls: AtomicU32::new(0),
        activity: AtomicU64::new(0),
        activity_seen: AtomicU64::new(0),
        activity_seen_at: AtomicU64::new(0),
        epoch: Instant::now(),
        pending: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
        thread: Mutex::new(None),
        counters: Default::default(),
        sink: Mutex::new(None),
        sink_set: AtomicBool::new(false),
        bind: Mutex::new(None),
        bind_pending: AtomicBool::new(false),
        max_piece: AtomicUsize::new(MAX_PIECE),
        awaiting: AtomicIsize::new(0),
        closed: AtomicBool::new(false),
    });
    let t = Arc::clone(&transport);
    let thread = std::thread::Builder::new()
        .name(format!("tessera-mpi{rank}"))
        .spawn(move || comm_loop(&t))
        .map_err(|e| format!("cannot start the MPI communication thread: {e}"))?;
    *lock(&transport.thread) = Some(thread.thread().clone());
    Ok(Mpi {
        transport,
        threading: provided,
        thread: Some(thread),
        universe: Some(universe),
    })
}

impl Mpi {
    /// The transport for the engine's network (`tessera_engine::dist::Net`).
    pub fn transport(&self) -> Arc<MpiTransport> {
        Arc::clone(&self.transport)
    }

    /// Bind the communication thread to `cpus` (the core the placement plan
    /// reserved for it). The thread binds itself between two rounds of its
    /// loop; this waits for its answer.
    pub fn bind_progress_thread(&self, cpus: &[usize]) -> Result<(), String> {
        let (tx, rx) = channel();
        *lock(&self.transport.bind) = Some((cpus.to_vec(), tx));
        self.transport.bind_pending.store(true, Ordering::Release);
        if let Some(t) = lock(&self.transport.thread).as_ref() {
            t.unpark();
        }
        match rx.recv_timeout(std::time::Duration::from_secs(10)) {
            Ok(r) => {
                r.map_err(|e| format!("binding the MPI communication thread to {cpus:?}: {e}"))
            }
            Err(_) => {
                Err("the MPI communication thread did not answer a binding request in 10 s".into())
            }
        }
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.transport.rank
    }

    /// Number of ranks.
    pub fn size(&self) -> usize {
        self.transport.size
    }

    /// Send messages longer than `bytes` (at least 1) as pieces of at most
    /// that size ([`MAX_PIECE`] by default): for tests of the long-message
    /// path without 2-GiB buffers. Only the sender's setting matters.
    pub fn set_max_piece(&self, bytes: usize) {
        self.transport
            .max_piece
            .store(bytes.clamp(1, MAX_PIECE), Ordering::Relaxed);
    }

    /// Raw MPI point-to-point figures beside the transport's, for benchmarks
    /// (the `osu_latency` / `osu_bw` pattern, on a communicator of their own,
    /// called from this thread while the communication thread idles: needs
    /// `MPI_THREAD_MULTIPLE`). Collective: every rank calls it; ranks 0 and 1
    /// measure, the others only take part in the set-up.
    pub fn raw(&self) -> Result<RawMpi, String> {
        if self.threading < Threading::Multiple {
            return Err(format!(
                "raw MPI figures need MPI_THREAD_MULTIPLE; the library offers {:?}",
                self.threading
            ));
        }
        Ok(RawMpi {
            comm: SimpleCommunicator::world().duplicate(),
        })
    }

    /// End every rank of the job now (`MPI_Abort`), with exit code `code`:
    /// for failures after the error was reported, so that no rank is left
    /// waiting in a receive or in `MPI_Finalize`.
    pub fn abort(&self, code: i32) -> ! {
        SimpleCommunicator::world().abort(code)
    }
}

/// Plain MPI between ranks 0 and 1, measured the way the OSU micro-benchmarks
/// do (see [`Mpi::raw`]).
pub struct RawMpi {
    comm: SimpleCommunicator,
}

impl RawMpi {
    /// One-way latency of `bytes`-byte messages in seconds (`osu_latency`: half
    /// the round trip of blocking send/receive ping-pongs, after `iters / 10`
    /// warm-up ones). Collective; on ranks other than 0 and 1 it returns 0.
    pub fn latency(&self, bytes: usize, iters: usize) -> f64 {
        let rank = self.comm.rank();
        let mut buf = vec![0u8; bytes];
        self.comm.barrier();
        let mut t0 = std::time::Instant::now();
        let warm = iters / 10;
        for i in 0..warm + iters {
            if i == warm {
                t0 = std::time::Instant::now();
            }
            match rank {
                0 => {
                    self.comm.process_at_rank(1).send(&buf[..]);
                    self.comm.process_at_rank(1).receive_into(&mut buf[..]);
                }
                1 => {
                    self.comm.process_at_rank(0).receive_into(&mut buf[..]);
                    self.comm.process_at_rank(0).send(&buf[..]);
                }
                _ => {}
            }
        }
        let t = t0.elapsed().as_secs_f64();
        self.comm.barrier();
        if rank < 2 {
            t / iters.max(1) as f64 / 2.0
        } else {
            0.0
        }
    }

    /// Bandwidth in bytes/s from rank 0 to rank 1 (`osu_bw`: `window`
    /// non-blocking sends of `bytes` each, matched by as many posted
    /// receives, then a 1-byte acknowledgement; `iters` times after a few
    /// warm-up rounds). Collective; other ranks return 0.
    pub fn bandwidth(&self, bytes: usize, window: usize, iters: usize) -> f64 {
        let rank = self.comm.rank();
        let mut bufs: Vec<Vec<u8>> = (0..window).map(|_| vec![1u8; bytes]).collect();
        let mut ack = [0u8; 1];
        self.comm.barrier();
        let warm = (iters / 5).max(1);
        let mut t0 = std::time::Instant::now();
        for i in 0..warm + iters {
            if i == warm {
                t0 = std::time::Instant::now();
            }
            match rank {
                0 => {
                    mpi::request::scope(|scope| {
                        let reqs: Vec<_> = bufs
                            .iter()
                            .map(|b| self.comm.process_at_rank(1).immediate_send(scope, &b[..]))
                            .collect();
                        for r in reqs {
                            r.wait();
                        }
                    });
                    self.comm.process_at_rank(1).receive_into(&mut ack[..]);
                }
                1 => {
                    mpi::request::scope(|scope| {
                        let reqs: Vec<_> = bufs
                            .iter_mut()
                            .map(|b| {
                                self.comm
                                    .process_at_rank(0)
                                    .immediate_receive_into(scope, &mut b[..])
                            })
                            .collect();
                        for r in reqs {
                            r.wait();
                        }
                    });
                    self.comm.process_at_rank(0).send(&ack[..]);
                }
                _ => {}
            }
        }
        let t = t0.elapsed().as_secs_f64();
        self.comm.barrier();
        if rank < 2 {
            (bytes * window * iters) as f64 / t
        } else {
            0.0
        }
    }
}

impl Drop for Mpi {
    fn drop(&mut self) {
        self.transport.stop.store(true, Ordering::SeqCst);
        if let Some(t) = lock(&self.transport.thread).as_ref() {
            t.unpark();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        drop(self.universe.take());
    }
}

#[derive(Default)]
struct Traffic {
    sent: AtomicU64,
    bytes_sent: AtomicU64,
    received: AtomicU64,
    bytes_received: AtomicU64,
}

/// One rank's MPI transport (see the module doc).
pub struct MpiTransport {
    rank: usize,
    size: usize,
    outbox: Mutex<Sender<Outgoing>>,
    inbox: Mutex<Receiver<(usize, Vec<u8>)>>,
    /// Everything one round of progress touches (see [`MpiTransport::progress`]):
    /// held by the one thread in MPI at a time.
    progress: Mutex<Progress>,
    /// When a thread other than the communication thread polled
    /// (`Transport::poll`; one poll in [`STAMP_EVERY`]), in nanoseconds since
    /// `epoch`: while recent, the communication thread naps instead of
    /// polling beside it.
    outside_poll: AtomicU64,
    /// Polls by other threads so far (one in [`STAMP_EVERY`] is stamped).
    outside_polls: AtomicU32,
    /// Messages sent or received so far (`Transport::expecting`), counted
    /// with no clock read: the readers, which read the clock anyway, note
    /// when they first see it change (`recently_active`). A stamp of the
    /// time at every send and receive cost two clock reads a remote edge
    /// (`clock_gettime` measured 34 ns on stop 67's VM), both on the
    /// edge's critical path.
    activity: AtomicU64,
    /// The `activity` count `recently_active` last saw, and when (ns since
    /// `epoch`) it saw it change. Readers race benignly: one may take a
    /// change for a little older or newer than it is, and the next poll
    /// sets it right.
    activity_seen: AtomicU64,
    activity_seen_at: AtomicU64,
    epoch: Instant,
    /// Messages queued or in flight.
    pending: AtomicUsize,
    stop: AtomicBool,
    /// The communication thread, to wake it when a message is queued.
    thread: Mutex<Option<std::thread::Thread>>,
    counters: Traffic,
    /// Where received messages go when not queued on `inbox`
    /// (`Transport::deliver_to`); run on the communication thread.
    sink: Mutex<Option<Sink>>,
    /// Set when `sink` changes: the next round first delivers what was
    /// queued on `inbox` before (so each sender's order is kept).
    sink_set: AtomicBool,
    /// A request to bind the communication thread (CPUs, where to answer),
    /// taken by the thread itself; `bind_pending` says one is waiting.
    bind: Mutex<Option<BindRequest>>,
    bind_pending: AtomicBool,
    /// The largest MPI message sent ([`MAX_PIECE`]; smaller in tests).
    max_piece: AtomicUsize,
    /// Exchanges whose reply this rank awaits (`Transport::awaiting`): while above 0, the
    /// thread's naps are at most [`AWAIT_NAP`].
    awaiting: AtomicIsize,
    /// Set by the communication thread, holding `progress`, when it stops:
    /// MPI is about to be finalised, and no thread may enter it again.
    closed: AtomicBool,
}

/// CPUs to bind the communication thread to, and where it answers.
type BindRequest = (Vec<usize>, Sender<Result<(), String>>);

impl Transport for MpiTransport {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn send(&self, to: usize, msg: Vec<u8>) {
        self.send_split(to, msg, 0);
    }

    fn send_split(&self, to: usize, msg: Vec<u8>, head: usize) {
        self.hand_over(Outgoing {
            to,
            msg,
            head,
            lent: None,
        });
    }

    fn send_lent(&self, to: usize, msg: Vec<u8>, tail: Lent) {
        let head = msg.len();
        self.hand_over(Outgoing {
            to,
            msg,
            head,
            lent: Some(tail),
        });
    }

    fn sends_in_place(&self) -> bool {
        true
    }

    fn progress_sends(&self) {
        if let Ok(mut p) = self.progress.try_lock() {
            if !self.closed.load(Ordering::SeqCst) {
                self.complete_sends(&mut p);
            }
        }
    }

    fn poll(&self) -> bool {
        if self
            .outside_polls
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(STAMP_EVERY)
        {
            self.outside_poll.store(self.now_ns(), Ordering::Relaxed);
        }
        match self.progress.try_lock() {
            Ok(mut p) => self.progress(&mut p, false).any(),
            Err(_) => false,
        }
    }

    fn polled(&self) -> bool {
        true
    }

    fn expecting(&self) -> bool {
        self.awaiting.load(Ordering::Relaxed) > 0 || self.recently_active()
    }

    fn recv(&self, timeout: Duration) -> Option<(usize, Vec<u8>)> {
        lock(&self.inbox).recv_timeout(timeout).ok()
    }

    fn pending_sends(&self) -> usize {
        self.pending.load(Ordering::SeqCst)
    }

    fn deliver_to(&self, sink: Option<Sink>) -> bool {
        *lock(&self.sink) = sink;
        self.sink_set.store(true, Ordering::Release);
        true
    }

    fn awaiting(&self, delta: isize) {
        self.awaiting.fetch_add(delta, Ordering::Relaxed);
    }

    fn counters(&self) -> Counters {
        let c = &self.counters;
        Counters {
            sent: c.sent.load(Ordering::Relaxed),
            bytes_sent: c.bytes_sent.load(Ordering::Relaxed),
            received: c.received.load(Ordering::Relaxed),
            bytes_received: c.bytes_received.load(Ordering::Relaxed),
        }
    }
}

/// What one round of progress did.
#[derive(Clone, Copy)]
struct Round {
    /// Posted or completed sends.
    sends: bool,
    /// Delivered messages.
    received: bool,
    /// Messages wait to be posted (queued, or held back behind
    /// [`MAX_IN_FLIGHT`]) after the round.
    held_back: bool,
}

impl Round {
    fn any(self) -> bool {
        self.sends || self.received
    }
}

/// A send in flight: its requests (one, or a header and the pieces of a
/// long message) and the buffers MPI reads until they all complete. The
/// buffers are neither touched nor dropped before then: the requests read
/// their heap allocations, which stay put when the `Vec`s move.
struct InFlight {
    /// One request for a short message (inline: no allocation per send).
    requests: smallvec::SmallVec<[Request<'static, [u8], StaticScope>; 1]>,
    buffer: Vec<u8>,
    /// A long message's header (its length).
    _header: Vec<u8>,
    /// The lent tail MPI reads, returned when the send completes (dropped
    /// with this).
    _lent: Option<Lent>,
}

/// A message to send: to rank `to`; `head` > 0 when it may go head first
/// (`Transport::send_split`: its bytes after the first `head` are one data
/// item's, see [`post_send`]).
struct Outgoing {
    to: usize,
    msg: Vec<u8>,
    head: usize,
    /// The message's tail, lent (`Transport::send_lent`): sent from where
    /// it lies, after `msg` (then its head, `head == msg.len()`).
    lent: Option<Lent>,
}

impl Outgoing {
    /// Bytes of the whole message.
    fn len(&self) -> usize {
        self.msg.len() + self.lent.as_ref().map_or(0, Lent::len)
    }
}

/// What one round of progress works on: the queue of messages to send, the
/// sends in flight, and where received messages go without a sink.
struct Progress {
    queued: Receiver<Outgoing>,
    /// Oldest first; at most [`MAX_IN_FLIGHT`].
    inflight: VecDeque<InFlight>,
    /// Messages taken from `queued` (or sent while the lock was free) and
    /// held back while [`MAX_IN_FLIGHT`] were in flight, oldest first.
    /// Invariant: each is older than every message still in `queued`
    /// (`post_now` moves the queue in before it adds one), so posting the
    /// backlog first keeps every destination's order.
    backlog: VecDeque<Outgoing>,
    inbox: Sender<(usize, Vec<u8>)>,
    /// The receive kept posted (made at the first round; cancelled when the
    /// transport closes).
    posted: Option<Posted>,
    /// `MpiTransport::sink` as the rounds use it: copied when `sink_set`
    /// says it changed, not locked and cloned for every message delivered
    /// (a lock and two reference counts on each remote edge's path).
    sink: Option<Sink>,
}

/// The one receive a rank keeps posted: any source, any tag, [`SHORT`]
/// bytes, posted by the round that tests it next ([`Posted::test`]).
/// Chosen over probing (`MPI_Improbe`, then `MPI_Mrecv`) because
/// Open MPI's probe pulls an arrived message off the shared-memory
/// transport only after it has looked for a match and found none, so the
/// message was matched one whole idle-loop round later, by the next probe
/// (0.4 µs of each 8-byte remote edge); a posted receive is matched as the
/// message is pulled in, by the same `MPI_Test`. Exactly one is posted, and
/// it is posted again only after the message it received was handled, a
/// long message's pieces all received (a head-first message's tail too:
/// read by its receiver or dropped):
/// a second posted receive, or one posted while pieces are on their way,
/// could match a piece longer than its buffer. Messages from one sender
/// match it in their sending order (MPI's non-overtaking rule), headers of
/// long messages included.
struct Posted {
    request: Option<Request<'static, [u8], StaticScope>>,
    /// The receive's buffer, [`SHORT`] bytes; MPI writes it while the
    /// request is in flight, and nothing else touches it then.
    buffer: Box<[u8]>,
}

impl Posted {
    /// A buffer for the receive, not yet posted.
    fn new() -> Posted {
        Posted {
            request: None,
            buffer: vec![0u8; SHORT].into_boxed_slice(),
        }
    }

    /// Post the receive (none may be in flight).
    fn post(&mut self, world: &SimpleCommunicator) {
        debug_assert!(self.request.is_none());
        // SAFETY: MPI gets a 'static view of the boxed buffer, which is
        // neither read, written nor dropped while the request is in flight:
        // `test` hands out the status only once the request completed (the
        // buffer is read after that), and `Posted`'s drop leaks the buffer
        // of a request still in flight rather than free it under MPI.
        let view: &'static mut [u8] =
            unsafe { std::slice::from_raw_parts_mut(self.buffer.as_mut_ptr(), self.buffer.len()) };
        self.request = Some(
            world
                .any_process()
                .immediate_receive_into(StaticScope, view),
        );
    }

    /// Test the receive, posting it first if it is not posted: the status
    /// of the message it received, if one has. The receive is posted again
    /// only here, when the next round looks for a message, not as soon as
    /// one is received: the post (`MPI_Irecv`, about 385 instructions in
    /// Open MPI) then comes after the message is delivered, off its
    /// critical path (it sat between a remote edge's arrival and the
    /// successor's start), while the worker that delivered it waits for
    /// the next; a message coming meanwhile waits in Open MPI's unexpected
    /// queue and matches the receive when it is posted.
    fn test(&mut self, world: &SimpleCommunicator) -> Option<mpi::point_to_point::Status> {
        if self.request.is_none() {
            self.post(world);
        }
        match self.request.take()?.test() {
            Ok(status) => Some(status),
            Err(r) => {
                self.request = Some(r);
                None
            }
        }
    }

    /// Cancel the receive still in flight (the transport closes).
    fn cancel(&mut self) {
        if let Some(r) = self.request.take() {
            r.cancel();
            r.wait();
        }
    }
}

impl Drop for Posted {
    fn drop(&mut self) {
        // A receive still in flight here (MPI aborted, or the process ends
        // without closing the transport): leak its buffer rather than free
        // memory MPI may still write, and leave the request to MPI.
        if let Some(r) = self.request.take() {
            std::mem::forget(r);
            std::mem::forget(std::mem::take(&mut self.buffer));
        }
    }
}

// SAFETY: the MPI requests in `inflight` are raw library handles, not tied
// to the thread that posted them: under MPI_THREAD_SERIALIZED (or more,
// which `init` requires) any thread may complete them, provided one thread
// at a time calls MPI, which the transport's `progress` lock ensures (every
// MPI call after `init`, except `RawMpi`'s under MPI_THREAD_MULTIPLE, is
// made holding it).
unsafe impl Send for Progress {}

impl MpiTransport {
    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Count `out` and post it, or queue it for whoever makes progress.
    fn hand_over(&self, out: Outgoing) {
        self.pending.fetch_add(1, Ordering::SeqCst);
        self.counters.sent.fetch_add(1, Ordering::Relaxed);
        self.counters
            .bytes_sent
            .fetch_add(out.len() as u64, Ordering::Relaxed);
        if self.closed.load(Ordering::SeqCst) {
            // MPI is finalised (shutting down): nothing to do.
            self.pending.fetch_sub(1, Ordering::SeqCst);
            return;
        }
        // Post it from this thread when no other thread is in MPI: no
        // hand-over to the communication thread on the way out, and not
        // through the queue either (the messages queued before it are
        // posted first, so each destination's order is kept). Sends only:
        // the caller may hold locks that a delivered message's callback takes.
        if let Ok(mut p) = self.progress.try_lock() {
            self.post_now(&mut p, out);
            return;
        }
        if lock(&self.outbox).send(out).is_err() {
            self.pending.fetch_sub(1, Ordering::SeqCst);
            return;
        }
        if let Some(t) = lock(&self.thread).as_ref() {
            t.unpark();
        }
    }

    /// Post an `MPI_Isend` for every message held back or queued, in that
    /// order (so each destination's messages keep theirs), while fewer than
    /// [`MAX_IN_FLIGHT`] are in flight. Returns whether there was one.
    fn post_queued(&self, p: &mut Progress) -> bool {
        if self.closed.load(Ordering::SeqCst) {
            return false;
        }
        let mut any = false;
        while p.inflight.len() < MAX_IN_FLIGHT {
            let Some(out) = p.backlog.pop_front().or_else(|| p.queued.try_recv().ok()) else {
                break;
            };
            any = true;
            self.post(p, out);
        }
        if any {
            self.touch();
        }
        any
    }

    /// Whether some message is queued or held back, waiting to be posted:
    /// `pending` counts those, the ones in flight, and `unposted` more that
    /// are in neither (a message being sent). Counted, not looked for: a
    /// look at the queue (`try_recv`) cost about 75 instructions on every
    /// remote edge's send, which found it empty.
    fn some_wait_to_post(&self, p: &Progress, unposted: usize) -> bool {
        self.pending.load(Ordering::SeqCst) > p.inflight.len() + unposted
    }

    /// Post `msg` to `to` at once, after the messages queued before it (or
    /// hold it back behind them, when [`MAX_IN_FLIGHT`] are in flight).
    fn post_now(&self, p: &mut Progress, out: Outgoing) {
        if self.closed.load(Ordering::SeqCst) {
            // Finalised (shutting down): dropped, as `send` drops it.
            self.pending.fetch_sub(1, Ordering::SeqCst);
            return;
        }
        // `out` is counted in `pending` but neither queued nor in flight.
        if self.some_wait_to_post(p, 1) {
            self.post_queued(p);
        }
        // Room in flight means nothing is held back or queued any more.
        if p.inflight.len() >= MAX_IN_FLIGHT {
            // Behind every message queued before it: the backlog only ever
            // holds messages older than the queue's (`post_queued` takes the
            // backlog first), so the queue moves into it first.
            while let Ok(queued) = p.queued.try_recv() {
                p.backlog.push_back(queued);
            }
            p.backlog.push_back(out);
            return;
        }
        self.post(p, out);
        self.touch();
    }

    /// Post the sends of `out` and keep them in flight.
    fn post(&self, p: &mut Progress, out: Outgoing) {
        let piece = self.max_piece.load(Ordering::Relaxed).max(1);
        p.inflight
            .push_back(post_send(&SimpleCommunicator::world(), out, piece));
    }

    /// Post queued sends and complete those in flight (the sends' part of
    /// a round of [`progress`](Self::progress)). Returns whether a send was
    /// posted or completed.
    fn complete_sends(&self, p: &mut Progress) -> bool {
        let mut sends = self.some_wait_to_post(p, 0) && self.post_queued(p);
        // Complete sends, oldest first, up to the first one still in
        // flight. Each `MPI_Test` enters Open MPI's progress engine (a lock
        // and a poll of every transport), so testing every send in flight
        // made a round cost O(sends in flight): in `overhead-mpi`'s stream
        // of 200 000 8-byte edges, thousands of sends were in flight and the
        // communication thread spent 96 % of its time testing them (`perf`).
        // Sends complete about in the order they were posted
        // (small ones at once, each destination's in order); one that
        // finishes before an older one is taken in the round after that one.
        while let Some(f) = p.inflight.front_mut() {
            // Each request tested once; those still in flight stay, in
            // place (no allocation per round).
            let mut i = 0;
            while i < f.requests.len() {
                if let Err(r) = f.requests.remove(i).test() {
                    f.requests.insert(i, r);
                    i += 1;
                }
            }
            if !f.requests.is_empty() {
                break;
            }
            sends = true;
            // The send has completed: MPI no longer reads the buffers.
            if let Some(f) = p.inflight.pop_front() {
                tessera_engine::dist::buffers::give(f.buffer);
            }
            self.pending.fetch_sub(1, Ordering::SeqCst);
        }
        // Room freed in flight: post what waits for it.
        if sends && self.pending.load(Ordering::SeqCst) > p.inflight.len() {
            self.post_queued(p);
        }
        sends
    }

    /// One round of progress, on whichever thread holds `p` (the
    /// communication thread, an idle worker, or a sender): post queued
    /// sends, complete the sends in flight, and receive and deliver every
    /// message that has arrived. Returns what happened. MPI is
    /// called by one thread at a time (the lock), which
    /// `MPI_THREAD_SERIALIZED` allows.
    ///
    /// `drain`: receive every message that has arrived; otherwise (an idle
    /// worker's poll) stop after the first one delivered, so the task it
    /// released runs at once instead of after one more probe (a probe that
    /// finds nothing costs a pass through Open MPI's progress engine, about
    /// 0.1–0.2 µs); the next poll, or another idle worker, takes the rest.
    fn progress(&self, p: &mut Progress, drain: bool) -> Round {
        if self.closed.load(Ordering::SeqCst) {
            return Round {
                sends: false,
                received: false,
                held_back: false,
            };
        }
        let world = SimpleCommunicator::world();
        let sends = self.complete_sends(p);
        let mut received = false;
        // Receive what has arrived. With a sink, messages queued before it
        // was set go first, so each sender's order is kept. (Read before it
        // is swapped: a swap is a locked instruction, in every round.)
        if self.sink_set.load(Ordering::Acquire) && self.sink_set.swap(false, Ordering::AcqRel) {
            p.sink = lock(&self.sink).clone();
            if let Some(deliver) = p.sink.clone() {
                match self.inbox.try_lock() {
                    Ok(queued) => {
                        while let Ok((from, buf)) = queued.try_recv() {
                            received = true;
                            deliver(from, buf, None);
                        }
                    }
                    // A reader holds the queue: the next round delivers it.
                    Err(_) => self.sink_set.store(true, Ordering::Release),
                }
            }
        }
        let sink = &p.sink;
        let posted = p.posted.get_or_insert_with(Posted::new);
        // Any tag: a long message's header is taken in its sender's order
        // among the short ones; its pieces follow it (see `Posted`).
        while let Some(status) = posted.test(&world) {
            received = true;
            let got = message_bytes(&status).min(SHORT);
            let from = status.source_rank() as usize;
            if status.tag() == TAG_SPLIT && got >= 8 {
                // Head first: the receiver reads the tail where it belongs.
                let len = u64::from_le_bytes(posted.buffer[..8].try_into().expect("8 bytes"));
                let mut head = tessera_engine::dist::buffers::take(got - 8);
                head.extend_from_slice(&posted.buffer[8..got]);
                let mut tail = MpiTail {
                    world: &world,
                    from: from as i32,
                    len: usize::try_from(len).expect("a message the sender could hold"),
                    read: false,
                };
                self.counters.received.fetch_add(1, Ordering::Relaxed);
                self.counters
                    .bytes_received
                    .fetch_add(head.len() as u64 + len, Ordering::Relaxed);
                match sink {
                    Some(deliver) => deliver(from, head, Some(&mut tail)),
                    None => {
                        let whole = tail.read_all(head);
                        let _ = p.inbox.send((from, whole));
                    }
                }
                if !tail.read {
                    // Unread by the receiver: read and dropped, so the
                    // pieces are not left for the posted receive.
                    tessera_engine::dist::buffers::give(tail.read_all(Vec::new()));
                }
                // Posted again by the next test, after the tail's pieces
                // (see `Posted`).
                if !drain && sink.is_some() {
                    break;
                }
                continue;
            }
            let buf = match status.tag() {
                TAG => {
                    // Into a buffer with room for exactly the message: a
                    // reused one when one fits (`tessera_engine::dist::buffers`).
                    let mut buf = tessera_engine::dist::buffers::take(got);
                    buf.extend_from_slice(&posted.buffer[..got]);
                    buf
                }
                TAG_LONG if got == 8 => {
                    let head: [u8; 8] = posted.buffer[..8].try_into().expect("8 bytes");
                    receive_pieces(&world, status.source_rank(), u64::from_le_bytes(head))
                }
                tag => {
                    // Not a message of this transport: say so, and drop it.
                    // (One longer than the posted buffer is truncated, which
                    // MPI reports as an error that ends the job.)
                    eprintln!(
                        "tessera: MPI message with unknown tag {tag} ({got} bytes) from rank {} dropped",
                        status.source_rank()
                    );
                    continue;
                }
            };
            // Posted again by the next test: after the message is delivered
            // (and after a long message's pieces, see `Posted`).
            let n = buf.len();
            self.counters.received.fetch_add(1, Ordering::Relaxed);
            self.counters
                .bytes_received
                .fetch_add(n as u64, Ordering::Relaxed);
            match sink {
                Some(deliver) => {
                    deliver(from, buf, None);
                    if !drain {
                        break;
                    }
                }
                None => {
                    let _ = p.inbox.send((from, buf));
                }
            }
        }
        if sends || received {
            self.touch();
        }
        Round {
            sends,
            received,
            held_back: self.pending.load(Ordering::SeqCst) > p.inflight.len(),
        }
    }

    /// Whether the time stored in `stamp` (by `now_ns`) is less than `span` ago.
    fn within(&self, stamp: &AtomicU64, span: Duration) -> bool {
        self.within_at(self.now_ns(), stamp, span)
    }

    /// [`within`](Self::within) at `now` (from `now_ns`), read by the caller.
    fn within_at(&self, now: u64, stamp: &AtomicU64, span: Duration) -> bool {
        now.saturating_sub(stamp.load(Ordering::Relaxed)) < span.as_nanos() as u64
    }

    /// A message was sent or received (see `activity`).
    fn touch(&self) {
        self.activity.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether a message was sent or received less than [`HOT`] ago, as
    /// far as the readers tell: a count that changed since the last look
    /// is taken for activity now, which errs by the time between two looks
    /// (microseconds while a worker watches the network; at worst the
    /// network stays hot up to one [`HOT`] longer: a few more polls).
    fn recently_active(&self) -> bool {
        let now = self.now_ns();
        let count = self.activity.load(Ordering::Relaxed);
        if self.activity_seen.swap(count, Ordering::Relaxed) != count {
            self.activity_seen_at.store(now, Ordering::Relaxed);
            return true;
        }
        self.within_at(now, &self.activity_seen_at, HOT)
    }

    /// Whether a thread other than the communication thread polled within
    /// the last [`WATCHED`].
    fn watched(&self) -> bool {
        self.within(&self.outside_poll, WATCHED)
    }
}

/// The communication thread: progress when no other thread makes it (see
/// the module doc), until the `Mpi` value is dropped; then MPI is closed to
/// every other thread before it is finalised.
fn comm_loop(t: &MpiTransport) {
    let mut idle = 0u32;
    let mut naps = 0u32;
    tighten_timer_slack();
    loop {
        if t.bind_pending.swap(false, Ordering::Acquire) {
            if let Some((cpus, answer)) = lock(&t.bind).take() {
                let r = crate::cpu::bind_current_thread(&cpus).map_err(|e| e.to_string());
                let _ = answer.send(r);
            }
        }
        let watched = t.watched();
        let round = {
            // While a worker watches, that worker makes the progress: a
            // round here would wait for its lock, and the worker's unlock
            // would then wake this thread, a system call on the worker's
            // critical path and a preempted worker. So the round is skipped
            // when the lock is taken (never once stopping: the last round
            // must run).
            let mut p = if watched && !t.stop.load(Ordering::SeqCst) {
                match t.progress.try_lock() {
                    Ok(p) => p,
                    Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
                    Err(std::sync::TryLockError::WouldBlock) => {
                        nap(watched, &mut naps, t, false);
                        continue;
                    }
                }
            } else {
                lock(&t.progress)
            };
            let round = t.progress(&mut p, true);
            if t.stop.load(Ordering::SeqCst)
                && p.inflight.is_empty()
                && t.pending.load(Ordering::SeqCst) == 0
            {
                // No thread enters MPI after this (each checks `closed`
                // holding this lock), so `MPI_Finalize` may follow.
                if let Some(posted) = p.posted.as_mut() {
                    posted.cancel();
                }
                // The cached sink holds the network that holds this
                // transport: dropped here, whatever `deliver_to` said last.
                p.sink = None;
                t.closed.store(true, Ordering::SeqCst);
                break;
            }
            round
        };
        // Back off when idle (see the module doc). While a worker watches
        // the network, the worker makes the progress: this thread naps the
        // longest it may, even after a round that found work, since each of
        // its wake-ups preempts a worker on an oversubscribed core. A round
        // that only delivered messages does not shorten the naps either:
        // what it delivered went to a worker, which watches the network as
        // soon as it is idle; every worker is busy meanwhile, and the
        // thread's early wake-ups would preempt them. Counted in a 2-rank
        // Task Bench `stencil_1d` at `-iter 8192`, where the rank's worker
        // computes when a message comes, resetting them tripled the naps
        // (120 to 370 per rank, most under 100 µs) and slowed the run 12 %.
        let busy = round.any();
        if busy {
            idle = 0;
            if !watched && round.sends {
                naps = 0;
            }
        } else {
            idle = idle.saturating_add(1);
        }
        if !busy || watched {
            if idle < SPINS && !watched {
                std::hint::spin_loop();
            } else {
                nap(watched, &mut naps, t, round.held_back);
            }
        }
    }
}

/// One nap of the communication thread (see the module doc): while a
/// worker watches, the longest it may; otherwise 20 µs doubling at each nap
/// since the last work, up to the cap ([`AWAIT_NAP`] while a reply is
/// awaited or messages wait for room in flight, else [`MAX_NAP`]).
fn nap(watched: bool, naps: &mut u32, t: &MpiTransport, held_back: bool) {
    let cap = if t.awaiting.load(Ordering::Relaxed) > 0 || held_back {
        AWAIT_NAP
    } else {
        MAX_NAP
    };
    let nap = if watched {
        cap.max(WATCHED_NAP)
    } else {
        Duration::from_micros(20 << (*naps).min(8)).min(cap)
    };
    *naps += 1;
    std::thread::park_timeout(nap);
}

/// Post the sends of `out.msg` to rank `out.to`: one MPI message when it
/// has at most [`SHORT`] bytes (and at most `piece`), else a header and its
/// bytes in pieces of at most `piece` ([`TAG_PIECE`]), all posted at once.
/// The header is the message's length ([`TAG_LONG`]), or, for a message
/// that may go head first whose head fits the receiver's posted receive,
/// the tail's length and the head ([`TAG_SPLIT`]; the pieces then carry the
/// tail only).
fn post_send(world: &SimpleCommunicator, out: Outgoing, piece: usize) -> InFlight {
    let Outgoing {
        to,
        mut msg,
        head,
        lent,
    } = out;
    if let Some(tail) = lent {
        if head > 0 && head + 8 <= SHORT {
            return post_lent(world, to, msg, tail, piece);
        }
        // A head too long for the receiver's posted receive: the message
        // goes whole (a copy of the tail, which then returns at once).
        msg.extend_from_slice(tail.bytes());
    }
    let dest = world.process_at_rank(to as i32);
    // SAFETY (both views): MPI gets 'static views of the message's and the
    // header's heap buffers; `InFlight` keeps both `Vec`s unchanged until
    // every request completes (`comm_loop`), and moving a `Vec` does not
    // move its allocation.
    let view: &'static [u8] = unsafe { std::slice::from_raw_parts(msg.as_ptr(), msg.len()) };
    if msg.len() <= piece.min(SHORT) {
        let request = dest.immediate_send_with_tag(StaticScope, view, TAG);
        return InFlight {
            requests: smallvec::smallvec![request],
            buffer: msg,
            _header: Vec::new(),
            _lent: None,
        };
    }
    let split = head > 0 && head < msg.len() && head + 8 <= SHORT;
    let (header, tag, rest) = if split {
        let mut h = Vec::with_capacity(8 + head);
        h.extend_from_slice(&((msg.len() - head) as u64).to_le_bytes());
        h.extend_from_slice(&msg[..head]);
        (h, TAG_SPLIT, &view[head..])
    } else {
        let h = (msg.len() as u64).to_le_bytes().to_vec();
        (h, TAG_LONG, view)
    };
    InFlight {
        requests: header_then_pieces(&dest, &header, tag, rest, piece),
        buffer: msg,
        _header: header,
        _lent: None,
    }
}

/// Post `header` with `tag`, then `rest` in pieces of at most `piece`
/// bytes ([`TAG_PIECE`]): the requests of a long or head-first message.
/// The caller keeps `header`'s heap buffer, and the bytes `rest` views,
/// unchanged until every request completes (`InFlight`).
fn header_then_pieces(
    dest: &mpi::topology::Process<'_>,
    header: &[u8],
    tag: i32,
    rest: &'static [u8],
    piece: usize,
) -> smallvec::SmallVec<[Request<'static, [u8], StaticScope>; 1]> {
    // SAFETY: per the contract above.
    let h: &'static [u8] = unsafe { std::slice::from_raw_parts(header.as_ptr(), header.len()) };
    let mut requests: smallvec::SmallVec<[_; 1]> =
        smallvec::smallvec![dest.immediate_send_with_tag(StaticScope, h, tag)];
    requests.extend(
        rest.chunks(piece)
            .map(|p| dest.immediate_send_with_tag(StaticScope, p, TAG_PIECE)),
    );
    requests
}

/// [`post_send`] of a message whose tail is lent: the header (tag
/// [`TAG_SPLIT`]: the tail's length, then `head`, the whole message before
/// the tail), then the tail's pieces read straight from where it lies.
fn post_lent(
    world: &SimpleCommunicator,
    to: usize,
    head: Vec<u8>,
    tail: Lent,
    piece: usize,
) -> InFlight {
    let dest = world.process_at_rank(to as i32);
    let mut header = Vec::with_capacity(8 + head.len());
    header.extend_from_slice(&(tail.len() as u64).to_le_bytes());
    header.extend_from_slice(&head);
    // SAFETY: the header's heap buffer is kept unchanged in `InFlight`
    // until every request completes, and the lent bytes stay valid and
    // unchanged until the `Lent` it keeps is dropped
    // (`tessera_engine::dist::Lent`).
    let rest: &'static [u8] =
        unsafe { std::slice::from_raw_parts(tail.bytes().as_ptr(), tail.len()) };
    let requests = header_then_pieces(&dest, &header, TAG_SPLIT, rest, piece);
    tessera_engine::dist::buffers::give(head);
    InFlight {
        requests,
        buffer: Vec::new(),
        _header: header,
        _lent: Some(tail),
    }
}

/// The bytes of the message a receive or a matched probe found.
fn message_bytes(status: &mpi::point_to_point::Status) -> usize {
    usize::try_from(status.count(u8::equivalent_datatype())).unwrap_or(0)
}

/// Receive the `len` bytes of a long message from rank `from`, whose header
/// was just received: its pieces are already posted (see [`post_send`]), in
/// order, so this waits only for their transfer. A piece of no bytes ends
/// the message early (a sender of this transport sends none): the message
/// is then short, and its reader says which field ran out.
fn receive_pieces(world: &SimpleCommunicator, from: i32, len: u64) -> Vec<u8> {
    let len = usize::try_from(len).expect("a message the sender could hold");
    receive_pieces_after(world, from, tessera_engine::dist::buffers::take(len), len)
}

/// [`receive_pieces`] appended to `buf` (its spare capacity holds `len`
/// more bytes).
fn receive_pieces_after(
    world: &SimpleCommunicator,
    from: i32,
    mut buf: Vec<u8>,
    len: usize,
) -> Vec<u8> {
    let len = buf.len() + len;
    while buf.len() < len {
        let (msg, status) = world
            .process_at_rank(from)
            .matched_probe_with_tag(TAG_PIECE);
        let piece = message_bytes(&status).min(len - buf.len());
        let before = buf.len();
        receive_into_spare(&mut buf, piece, |target| msg.matched_receive_into(target));
        if buf.len() == before {
            break;
        }
    }
    buf
}

/// The tail of a message delivered head first ([`TAG_SPLIT`]): its pieces
/// are posted by the sender, in order, and received on the thread that
/// delivers the head, before the posted receive is posted again.
struct MpiTail<'a> {
    world: &'a SimpleCommunicator,
    from: i32,
    len: usize,
    /// Whether it was read (else the transport reads and drops it).
    read: bool,
}

impl Tail for MpiTail<'_> {
    fn len(&self) -> usize {
        self.len
    }

    fn read_into(&mut self, parts: &mut [&mut [u8]]) -> Result<(), String> {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        if self.read || total != self.len {
            return Err(format!(
                "a message's {} remaining bytes cannot be read into {total}",
                self.len
            ));
        }
        self.read = true;
        let mut left = self.len;
        // Where the next byte goes: part `at`, offset `off`.
        let (mut at, mut off) = (0, 0);
        while left > 0 {
            let (msg, status) = self
                .world
                .process_at_rank(self.from)
                .matched_probe_with_tag(TAG_PIECE);
            let piece = message_bytes(&status).min(left);
            if piece == 0 {
                // A sender of this transport sends no empty piece.
                msg.matched_receive_into(&mut [0u8; 0][..]);
                return Err(format!("a message ended {left} bytes early"));
            }
            while parts[at].len() == off {
                (at, off) = (at + 1, 0);
            }
            if parts[at].len() - off >= piece {
                // Straight into the data: the common case, one part.
                let status = msg.matched_receive_into(&mut parts[at][off..off + piece]);
                if message_bytes(&status) != piece {
                    return Err("a message ended early".into());
                }
                off += piece;
            } else {
                // A piece across parts: through a buffer.
                let mut buf = receive_piece(msg, piece);
                if buf.len() != piece {
                    return Err("a message ended early".into());
                }
                let mut rest = &buf[..];
                while !rest.is_empty() {
                    while parts[at].len() == off {
                        (at, off) = (at + 1, 0);
                    }
                    let n = (parts[at].len() - off).min(rest.len());
                    parts[at][off..off + n].copy_from_slice(&rest[..n]);
                    (rest, off) = (&rest[n..], off + n);
                }
                buf.clear();
                tessera_engine::dist::buffers::give(buf);
            }
            left -= piece;
        }
        Ok(())
    }

    fn read_all(&mut self, head: Vec<u8>) -> Vec<u8> {
        if self.read {
            return head;
        }
        self.read = true;
        let mut buf = tessera_engine::dist::buffers::take(head.len() + self.len);
        buf.extend_from_slice(&head);
        tessera_engine::dist::buffers::give(head);
        receive_pieces_after(self.world, self.from, buf, self.len)
    }
}

/// Receive one matched piece of `len` bytes into a buffer of its own.
fn receive_piece(msg: mpi::point_to_point::Message, len: usize) -> Vec<u8> {
    let mut buf = tessera_engine::dist::buffers::take(len);
    receive_into_spare(&mut buf, len, |target| msg.matched_receive_into(target));
    buf
}

/// Receive one matched message of at most `len` bytes into `buf`'s spare
/// capacity (`buf` has room for them) and extend `buf` by the bytes
/// received. The bytes are not zeroed first: MPI writes them, and only
/// the count its status reports becomes part of `buf`, so a message's
/// bytes are written once on the receiver, not twice (zeros, then the
/// message).
fn receive_into_spare(
    buf: &mut Vec<u8>,
    len: usize,
    receive: impl FnOnce(&mut DynBufferMut<'_>) -> mpi::point_to_point::Status,
) {
    assert!(buf.capacity() - buf.len() >= len, "room for the message");
    let count = mpi::Count::try_from(len).expect("a piece fits an MPI count (MAX_PIECE)");
    let spare = buf.spare_capacity_mut();
    // SAFETY: the view covers `len` bytes of `buf`'s allocation past its
    // length (checked above); MPI only writes them, and `buf` is neither
    // moved nor read until the receive returns.
    let status = unsafe {
        let mut target = DynBufferMut::from_raw(
            spare.as_mut_ptr().cast::<u8>(),
            count,
            u8::equivalent_datatype(),
        );
        receive(&mut target)
    };
    let got = message_bytes(&status).min(len);
    // SAFETY: MPI wrote the first `got` bytes of the spare capacity (its
    // status's count, at most the `len` it was given).
    unsafe { buf.set_len(buf.len() + got) };
}

/// Naps of this thread end when asked, not up to 50 µs later (Linux's
/// default timer slack); elsewhere nothing.
fn tighten_timer_slack() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument (nanoseconds) and
    // changes only the calling thread's timer slack.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong, 0, 0, 0);
    }
}
