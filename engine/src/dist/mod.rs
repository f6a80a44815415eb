//! Across processes: one engine per rank, the same DAG on every rank, and
//! the dependencies that cross ranks turned into messages (remote edges).
//!
//! Layers, one concern each:
//! - [`Transport`]: moves byte messages between ranks (MPI in
//!   `tessera_backends::mpi`, threads of one process in [`local`]). It never
//!   blocks a worker: `send` hands a message over and returns.
//! - [`buffers`]: large message buffers, reused instead of freshly mapped.
//! - `lent`: a long data item sent from where it lies ([`Lent`]), its next
//!   writer held until the transport has read it.
//! - `wire`: what a message is (kinds, keys, data items) as bytes.
//! - [`collective`]: barrier, all-reduce, all-gather and the start-up
//!   consistency check, over point-to-point messages.
//! - [`symbolic`]: the symbolic front-end across ranks (PaRSEC-style
//!   owner-computes): each rank unfolds its own tasks; a finished task sends
//!   one message per destination rank with the data its remote successors read.
//! - [`stf`]: sequential task flow across ranks (StarPU-MPI-style): every rank
//!   submits the same tasks, each runs on the owner of the data it writes,
//!   and the engine inserts the sends and receives.
//! - [`Submit`]: one interface over a one-process [`Runtime`](crate::Runtime)
//!   and a [`stf::DistRuntime`], so a submission loop is written once.
//! - [`halo`]: the halo exchange of distributed vectors (SpMV's `x`): each
//!   rank sends the entries others read and receives the ones it reads, as
//!   tasks ordered by the task graph.
//!
//! Traces: with a tracing runtime, [`Net::record_messages`] makes every
//! send, and every receive the layers record, a message of the runtime's
//! trace (`Trace::messages`, on its clock).
//!
//! Failure: a rank whose task fails tells every other rank (an `Abort`
//! message naming the task and the rank); every rank then stops its run with
//! that error instead of waiting for data that will never come.
//! Channels, message layout, ordering, DONE, aborts and long messages: README.md beside this file.

pub mod allreduce;
pub mod buffers;
pub mod collective;
mod gather;
pub mod halo;
pub(crate) mod lent;
pub mod light;
pub mod local;
mod log;
mod net;
pub mod stf;
mod submit;
pub mod symbolic;
mod wire;

pub use collective::Collectives;
pub use lent::Lent;
pub use log::{MessageLog, Tick};
pub use net::{Channel, Message, Net};
pub use submit::Submit;
pub use wire::DataRef;

use std::time::Duration;

/// Moves byte messages between the ranks of a distributed run.
///
/// Messages from one rank to another arrive in the order they were sent
/// (MPI's non-overtaking rule on one communicator and tag).
pub trait Transport: Send + Sync {
    /// This process's rank, `0..size()`.
    fn rank(&self) -> usize;

    /// Number of ranks.
    fn size(&self) -> usize;

    /// Hand `msg` over for rank `to` (may be this rank) and return at once;
    /// the transport sends it in the background.
    fn send(&self, to: usize, msg: Vec<u8>);

    /// Like `send`, for a message whose first `head` bytes say where the
    /// rest goes (a data item's header; the rest is its bytes): a transport
    /// may deliver the head first, with the rest as a [`Tail`] that the
    /// receiver reads straight into the data's memory (no copy out of a
    /// message buffer). The default sends the message whole.
    fn send_split(&self, to: usize, msg: Vec<u8>, head: usize) {
        let _ = head;
        self.send(to, msg)
    }

    /// Like [`send_split`](Self::send_split) with `head` the whole of
    /// `head` and the tail not in the message but lent (`tail`: a data
    /// item's bytes where they lie, see [`Lent`]): a transport that
    /// [sends in place](Self::sends_in_place) sends them from there and
    /// drops `tail` once it no longer reads them. The default copies them
    /// behind the head.
    fn send_lent(&self, to: usize, mut head: Vec<u8>, tail: Lent) {
        let at = head.len();
        head.extend_from_slice(tail.bytes());
        drop(tail);
        self.send_split(to, head, at)
    }

    /// Whether [`send_lent`](Self::send_lent) sends the lent bytes where
    /// they lie (the default: no, it copies them; senders then copy them
    /// into the message themselves).
    fn sends_in_place(&self) -> bool {
        false
    }

    /// Post queued sends and complete finished ones on the calling thread,
    /// if no other thread makes progress now; deliver nothing (the caller
    /// may be inside a task: `dist::lent`'s wait). The default does nothing.
    fn progress_sends(&self) {}

    /// Like `send`, for a message that also stands for `virtual_bytes` of
    /// virtual data it does not carry (simulated time: the network model
    /// charges them). Real transports never see virtual data.
    fn send_charged(&self, to: usize, msg: Vec<u8>, virtual_bytes: u64) {
        let _ = virtual_bytes;
        self.send(to, msg)
    }

    /// The next received message `(from, bytes)`, waiting up to `timeout`.
    fn recv(&self, timeout: Duration) -> Option<(usize, Vec<u8>)>;

    /// Messages handed to `send` that have not completed yet.
    fn pending_sends(&self) -> usize;

    /// Bytes and messages sent and received so far (for traces and reports).
    fn counters(&self) -> Counters {
        Counters::default()
    }

    /// Run `sink(from, message)` on the transport's own thread for every
    /// message received from now on, instead of queueing it for
    /// [`recv`](Self::recv) (`None`: queue again). Returns whether the
    /// transport does so; one without a thread of its own returns `false`
    /// (the default), and the network polls `recv` from a thread of its own.
    /// `sink` must not wait for the network.
    fn deliver_to(&self, sink: Option<Sink>) -> bool {
        let _ = sink;
        false
    }

    /// `delta` more (or, negative, fewer) exchanges whose reply this rank awaits: it sent
    /// its part and another rank's is still to come (the halo exchange and the task
    /// all-reduce say so, `gather.rs`, and a blocking collective while it waits). A
    /// transport that polls for messages may poll more often while the count is above 0;
    /// the default ignores it.
    fn awaiting(&self, delta: isize) {
        let _ = delta;
    }

    /// Make progress on the calling thread if no other thread is making it
    /// now: post queued sends, complete finished ones, and deliver arrived
    /// messages to the sink ([`deliver_to`](Self::deliver_to)). Returns
    /// whether anything happened. Idle workers of a runtime on this
    /// transport call it when [`polled`](Self::polled) says it does
    /// something, so a message reaches its receiver without waiting for the
    /// transport's thread to wake. The default does nothing.
    fn poll(&self) -> bool {
        false
    }

    /// Whether [`poll`](Self::poll) makes progress (the default: no).
    fn polled(&self) -> bool {
        false
    }

    /// Whether a message is likely soon: a reply is awaited
    /// ([`awaiting`](Self::awaiting) above 0) or messages moved very
    /// recently. An idle worker keeps polling, instead of sleeping, while it
    /// holds. The default: never.
    fn expecting(&self) -> bool {
        false
    }
}

/// A wait for other ranks' messages, counted in the transport's awaited
/// exchanges ([`Transport::awaiting`]) while it lasts.
pub(crate) struct Awaiting(std::sync::Arc<dyn Transport>);

impl Awaiting {
    pub(crate) fn new(t: &std::sync::Arc<dyn Transport>) -> Awaiting {
        t.awaiting(1);
        Awaiting(std::sync::Arc::clone(t))
    }
}

impl Drop for Awaiting {
    fn drop(&mut self) {
        self.0.awaiting(-1);
    }
}

/// `f` on `ranks` `DistRuntime`s over the in-process transport, one thread
/// each, every runtime made by `config`; the results in rank order (tests).
#[cfg(test)]
pub(crate) fn on_ranks<R: Send + 'static>(
    ranks: usize,
    config: fn() -> crate::Config,
    f: fn(&stf::DistRuntime) -> R,
) -> Vec<R> {
    let threads: Vec<_> = local::world(ranks)
        .into_iter()
        .map(|t| {
            std::thread::spawn(move || {
                let rt = crate::Runtime::new(config()).unwrap();
                f(&stf::DistRuntime::new(rt, Net::new(t)))
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

/// One worker (tests).
#[cfg(test)]
pub(crate) fn one_worker() -> crate::Config {
    crate::Config::with_workers(1)
}

/// Where a transport delivers received messages (see [`Transport::deliver_to`]):
/// `(from, message, tail)`. `tail` is `Some` for a message sent with
/// [`Transport::send_split`] whose rest the transport has not read yet:
/// `message` is then only its head.
pub type Sink = std::sync::Arc<dyn Fn(usize, Vec<u8>, Option<&mut dyn Tail>) + Send + Sync>;

/// The rest of a message delivered head first ([`Transport::send_split`]),
/// still in the transport: the receiver reads it once, either into the
/// memory it belongs in ([`read_into`](Self::read_into)) or appended to the
/// head ([`read_all`](Self::read_all)). A transport reads and drops a tail
/// its receiver did not read, so the messages after it stay in order.
pub trait Tail {
    /// Bytes of the rest.
    fn len(&self) -> usize;
    /// Whether there are none (never, for a tail a transport hands over).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Receive the rest into `parts`, in order; their lengths must sum to
    /// [`len`](Self::len) (`Err`, nothing read, when they do not, or when
    /// the tail was read already).
    fn read_into(&mut self, parts: &mut [&mut [u8]]) -> Result<(), String>;
    /// Receive the rest after `head`: the whole message.
    fn read_all(&mut self, head: Vec<u8>) -> Vec<u8>;
}

/// Traffic of one rank.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Messages sent.
    pub sent: u64,
    /// Bytes sent.
    pub bytes_sent: u64,
    /// Messages received.
    pub received: u64,
    /// Bytes received.
    pub bytes_received: u64,
}
