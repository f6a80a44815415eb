//! The MPI transport (rsmpi over Open MPI): one communication thread per
//! rank makes every MPI call; workers and the engine's network dispatcher
//! hand it messages through a queue and take received ones from another, so
//! no worker ever blocks in MPI.
//!
//! The thread's loop: post an `MPI_Isend` for every queued message (the
//! buffer is owned by the thread until the send completes), test the sends
//! in flight, and receive every message that has arrived (`MPI_Improbe`, a
//! matched probe, so the size comes from the status before the buffer is
//! made; then `MPI_Mrecv` of exactly that message). A message longer than
//! [`MAX_PIECE`] (MPI counts are `i32`) goes as a header with its length
//! and pieces; the receiver takes the header in its sender's order (the
//! probe matches any tag) and then the pieces, and delivers one message.
//! When a round finds nothing to do it backs off like the workers do, in
//! three stages:
//! - a few spins;
//! - while a message was sent or received less than `HOT` ago, it polls
//!   with `yield_now` between rounds (no sleep): a reply to what just went
//!   out, or the next message of a burst, usually comes within that window,
//!   and a sleeping thread would see it up to a nap late. Yielding gives the
//!   core to any runnable worker at once, so on oversubscribed cores this
//!   costs context switches, not compute;
//! - then it sleeps, 20 µs doubling up to `MAX_NAP` (woken at once when a
//!   message is queued), with the thread's timer slack set to 1 µs so a nap
//!   is not stretched to Linux's default 50 µs. MPI has no notification for
//!   incoming messages, so a rank idle for longer than `HOT` sees a message
//!   up to `MAX_NAP` late;
//! - except while the rank awaits a reply (`Transport::awaiting`: it sent its
//!   part of a halo exchange or a task all-reduce and another rank's part is
//!   still to come): then the naps stop growing at `AWAIT_NAP`, 250 µs.
//!   Stop 34 sent the CG's halo before the interior SpMV: the halo wait went,
//!   but the all-reduce after the multiply then met communication threads
//!   that had napped through it, and waited 15–20 ms per iteration in steps of
//!   `MAX_NAP`. With the short naps while awaited, the same change measured
//!   (`mpirun -np 2 tessera spmv --gen stencil27:150 --solver cg`, 4
//!   alternated rounds against the previous binary): halo wait 2.5–5.6 →
//!   0.1 ms, all-reduce wait 1.8–2.9 → 2.1–6.1 ms, iteration 66.0–72.0 →
//!   67.1–69.6 ms. Each wake-up costs about 60 µs (below), so an awaited
//!   reply costs at most a quarter of a core while it is late.
//!
//! Chosen because a chain of remote edges between two ranks (`tessera
//! overhead-mpi`) measured 1.7 ms per edge with naps alone: every message
//! found its receiver asleep. The cap is a trade: each wake-up costs the
//! rank's core about 60 µs (Open MPI's progress engine in the probe, and the
//! worker it preempts), so a 1 ms cap took about 6 % of a core from a 2-rank
//! LU whose ranks share their cores with their workers (4,150 wake-ups in a
//! 4.3 s run, 260 ms of CPU); with 5 ms the same runs went from 110–115 to
//! 116–119 GFLOP/s (5 alternated rounds), while CG and the remote-edge chain
//! did not change (their messages come in bursts, which `HOT` covers, and a
//! queued send wakes the thread).
//!
//! MPI is initialised once per process with `MPI_THREAD_MULTIPLE` requested;
//! since only the communication thread calls MPI after initialisation,
//! `MPI_THREAD_SERIALIZED` is enough, and anything less is refused with a
//! message saying what the library offers. MPI is finalised when the
//! [`Mpi`] value is dropped, on the thread that initialised it.

use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mpi::collective::CommunicatorCollectives;
use mpi::datatype::Equivalence;
use mpi::environment::Universe;
use mpi::point_to_point::{Destination, Source};
use mpi::request::{Request, StaticScope};
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::Threading;
use tessera_engine::dist::{Counters, Sink, Transport};
use tessera_engine::util::lock;

/// The tag of every message of at most [`MAX_PIECE`] bytes (messages are
/// told apart by their content).
const TAG: i32 = 7;
/// The tag of a longer message's header: its length, 8 bytes little-endian;
/// its bytes follow in pieces tagged [`TAG_PIECE`].
const TAG_LONG: i32 = 8;
/// The tag of a piece of a longer message.
const TAG_PIECE: i32 = 9;
/// The largest MPI message the transport sends: MPI counts are `i32`, so one
/// MPI message carries less than 2 GiB (a tile column of the distributed LU
/// reaches that at N·NB·8 bytes, e.g. N = 600 000, NB = 448). Longer
/// messages go as a header and pieces of at most this size, which the
/// receiver reassembles before delivering the message (see `comm_loop`).
pub const MAX_PIECE: usize = 1 << 30;
/// Longest sleep of an idle communication thread (see the module doc).
const MAX_NAP: Duration = Duration::from_millis(5);
/// Longest sleep of the communication thread while this rank awaits a reply (see the
/// module doc).
const AWAIT_NAP: Duration = Duration::from_micros(250);
/// How long after its last message the communication thread polls without
/// sleeping (see the module doc).
const HOT: Duration = Duration::from_millis(2);
/// Idle rounds spent spinning before yielding or sleeping.
const SPINS: u32 = 64;

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
    let (out_tx, out_rx) = channel::<(usize, Vec<u8>)>();
    let (in_tx, in_rx) = channel::<(usize, Vec<u8>)>();
    let transport = Arc::new(MpiTransport {
        rank,
        size,
        outbox: Mutex::new(out_tx),
        inbox: Mutex::new(in_rx),
        pending: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
        thread: Mutex::new(None),
        counters: Default::default(),
        sink: Mutex::new(None),
        bind: Mutex::new(None),
        bind_pending: AtomicBool::new(false),
        max_piece: AtomicUsize::new(MAX_PIECE),
        awaiting: AtomicIsize::new(0),
    });
    let t = Arc::clone(&transport);
    let thread = std::thread::Builder::new()
        .name(format!("tessera-mpi{rank}"))
        .spawn(move || comm_loop(&t, out_rx, in_tx))
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
    outbox: Mutex<Sender<(usize, Vec<u8>)>>,
    inbox: Mutex<Receiver<(usize, Vec<u8>)>>,
    /// Messages queued or in flight.
    pending: AtomicUsize,
    stop: AtomicBool,
    /// The communication thread, to wake it when a message is queued.
    thread: Mutex<Option<std::thread::Thread>>,
    counters: Traffic,
    /// Where received messages go when not queued on `inbox`
    /// (`Transport::deliver_to`); run on the communication thread.
    sink: Mutex<Option<Sink>>,
    /// A request to bind the communication thread (CPUs, where to answer),
    /// taken by the thread itself; `bind_pending` says one is waiting.
    bind: Mutex<Option<BindRequest>>,
    bind_pending: AtomicBool,
    /// The largest MPI message sent ([`MAX_PIECE`]; smaller in tests).
    max_piece: AtomicUsize,
    /// Exchanges whose reply this rank awaits (`Transport::awaiting`): while above 0, the
    /// thread's naps are at most [`AWAIT_NAP`].
    awaiting: AtomicIsize,
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
        self.pending.fetch_add(1, Ordering::SeqCst);
        self.counters.sent.fetch_add(1, Ordering::Relaxed);
        self.counters
            .bytes_sent
            .fetch_add(msg.len() as u64, Ordering::Relaxed);
        if lock(&self.outbox).send((to, msg)).is_err() {
            // The communication thread is gone (shutting down): nothing to do.
            self.pending.fetch_sub(1, Ordering::SeqCst);
            return;
        }
        if let Some(t) = lock(&self.thread).as_ref() {
            t.unpark();
        }
    }

    fn recv(&self, timeout: Duration) -> Option<(usize, Vec<u8>)> {
        lock(&self.inbox).recv_timeout(timeout).ok()
    }

    fn pending_sends(&self) -> usize {
        self.pending.load(Ordering::SeqCst)
    }

    fn deliver_to(&self, sink: Option<Sink>) -> bool {
        *lock(&self.sink) = sink;
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

/// A send in flight: its requests (one, or a header and the pieces of a
/// long message) and the buffers MPI reads until they all complete. The
/// buffers are neither touched nor dropped before then: the requests read
/// their heap allocations, which stay put when the `Vec`s move.
struct InFlight {
    requests: Vec<Request<'static, [u8], StaticScope>>,
    buffer: Vec<u8>,
    /// A long message's header (its length).
    _header: Vec<u8>,
}

/// The communication thread: every MPI call of the rank after `init`.
fn comm_loop(t: &MpiTransport, out: Receiver<(usize, Vec<u8>)>, inbox: Sender<(usize, Vec<u8>)>) {
    let world = SimpleCommunicator::world();
    let mut inflight: Vec<InFlight> = Vec::new();
    let mut idle = 0u32;
    let mut naps = 0u32;
    let mut last_active = Instant::now();
    tighten_timer_slack();
    loop {
        let mut busy = false;
        if t.bind_pending.swap(false, Ordering::Acquire) {
            if let Some((cpus, answer)) = lock(&t.bind).take() {
                let r = crate::cpu::bind_current_thread(&cpus).map_err(|e| e.to_string());
                let _ = answer.send(r);
            }
        }
        // Post queued sends.
        while let Ok((to, msg)) = out.try_recv() {
            busy = true;
            let piece = t.max_piece.load(Ordering::Relaxed).max(1);
            inflight.push(post_send(&world, to, msg, piece));
        }
        // Complete sends.
        let mut still = Vec::with_capacity(inflight.len());
        for mut f in inflight.drain(..) {
            let mut pending = Vec::new();
            for r in f.requests.drain(..) {
                if let Err(r) = r.test() {
                    pending.push(r);
                }
            }
            if pending.is_empty() {
                busy = true;
                // The send has completed: MPI no longer reads the buffers.
                tessera_engine::dist::buffers::give(f.buffer);
                t.pending.fetch_sub(1, Ordering::SeqCst);
            } else {
                f.requests = pending;
                still.push(f);
            }
        }
        inflight = still;
        // Receive what has arrived. With a sink, messages queued before it
        // was set go first, so each sender's order is kept.
        let sink = lock(&t.sink).clone();
        if let Some(deliver) = &sink {
            if let Ok(queued) = t.inbox.try_lock() {
                while let Ok((from, buf)) = queued.try_recv() {
                    busy = true;
                    deliver(from, buf);
                }
            }
        }
        // Any tag: a long message's header must be taken in its sender's
        // order among the short ones (MPI keeps the order of messages from
        // one sender that match the same probe); its pieces follow it.
        while let Some((msg, status)) = world.any_process().immediate_matched_probe() {
            busy = true;
            let buf = match status.tag() {
                TAG => {
                    // Into a buffer of exactly the message's size: a reused
                    // one when one fits (`tessera_engine::dist::buffers`).
                    let mut buf = tessera_engine::dist::buffers::take_len(message_bytes(&status));
                    msg.matched_receive_into(&mut buf[..]);
                    buf
                }
                TAG_LONG => {
                    let mut head = [0u8; 8];
                    msg.matched_receive_into(&mut head[..]);
                    receive_pieces(&world, status.source_rank(), u64::from_le_bytes(head))
                }
                tag => {
                    // Not a message of this transport: take it off the
                    // queue (it would be probed forever) and say so.
                    let mut sink = vec![0u8; message_bytes(&status)];
                    msg.matched_receive_into(&mut sink[..]);
                    eprintln!(
                        "tessera: MPI message with unknown tag {tag} from rank {} dropped",
                        status.source_rank()
                    );
                    continue;
                }
            };
            let n = buf.len();
            t.counters.received.fetch_add(1, Ordering::Relaxed);
            t.counters
                .bytes_received
                .fetch_add(n as u64, Ordering::Relaxed);
            let from = status.source_rank() as usize;
            match &sink {
                Some(deliver) => deliver(from, buf),
                None => {
                    let _ = inbox.send((from, buf));
                }
            }
        }
        if t.stop.load(Ordering::SeqCst)
            && inflight.is_empty()
            && t.pending.load(Ordering::SeqCst) == 0
        {
            break;
        }
        // Back off when idle (see the module doc).
        if busy {
            idle = 0;
            naps = 0;
            last_active = Instant::now();
        } else {
            idle = idle.saturating_add(1);
            if idle < SPINS {
                std::hint::spin_loop();
            } else if last_active.elapsed() < HOT {
                std::thread::yield_now();
            } else {
                let cap = if t.awaiting.load(Ordering::Relaxed) > 0 {
                    AWAIT_NAP
                } else {
                    MAX_NAP
                };
                let nap = Duration::from_micros(20 << naps.min(8)).min(cap);
                naps += 1;
                std::thread::park_timeout(nap);
            }
        }
    }
}

/// Post the sends of `msg` to rank `to`: one MPI message when it has at most
/// `piece` bytes, else a header with its length ([`TAG_LONG`]) and its
/// bytes in pieces of at most `piece` ([`TAG_PIECE`]), all posted at once.
fn post_send(world: &SimpleCommunicator, to: usize, msg: Vec<u8>, piece: usize) -> InFlight {
    let dest = world.process_at_rank(to as i32);
    // SAFETY (both views): MPI gets 'static views of the message's and the
    // header's heap buffers; `InFlight` keeps both `Vec`s unchanged until
    // every request completes (`comm_loop`), and moving a `Vec` does not
    // move its allocation.
    let view: &'static [u8] = unsafe { std::slice::from_raw_parts(msg.as_ptr(), msg.len()) };
    if msg.len() <= piece {
        let request = dest.immediate_send_with_tag(StaticScope, view, TAG);
        return InFlight {
            requests: vec![request],
            buffer: msg,
            _header: Vec::new(),
        };
    }
    let header = (msg.len() as u64).to_le_bytes().to_vec();
    let head: &'static [u8] = unsafe { std::slice::from_raw_parts(header.as_ptr(), header.len()) };
    let mut requests = vec![dest.immediate_send_with_tag(StaticScope, head, TAG_LONG)];
    requests.extend(
        view.chunks(piece)
            .map(|p| dest.immediate_send_with_tag(StaticScope, p, TAG_PIECE)),
    );
    InFlight {
        requests,
        buffer: msg,
        _header: header,
    }
}

/// The bytes of the message a matched probe found.
fn message_bytes(status: &mpi::point_to_point::Status) -> usize {
    usize::try_from(status.count(u8::equivalent_datatype())).unwrap_or(0)
}

/// Receive the `len` bytes of a long message from rank `from`, whose header
/// was just received: its pieces are already posted (see [`post_send`]), in
/// order, so this waits only for their transfer.
fn receive_pieces(world: &SimpleCommunicator, from: i32, len: u64) -> Vec<u8> {
    let len = usize::try_from(len).expect("a message the sender could hold");
    let mut buf = tessera_engine::dist::buffers::take_len(len);
    let mut at = 0;
    while at < len {
        let (msg, status) = world
            .process_at_rank(from)
            .matched_probe_with_tag(TAG_PIECE);
        let end = (at + message_bytes(&status)).min(len);
        msg.matched_receive_into(&mut buf[at..end]);
        at = end.max(at + 1);
    }
    buf
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
