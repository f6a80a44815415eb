//! One rank's end of the network: a dispatcher thread that takes every
//! received message off the transport and routes it to the channel it was
//! sent on, plus the control channel that carries aborts.
//!
//! Channels are opened in the same order on every rank (SPMD), so the n-th
//! channel of one rank talks to the n-th of every other. A message for a
//! channel this rank has not opened yet is kept until it is.
//!
//! A transport with a thread of its own (MPI's communication thread) may run
//! the routing itself ([`Transport::deliver_to`]): then there is no
//! dispatcher thread, and a message reaches its channel without a hand-over
//! between threads (measured: one thread wake-up less per remote edge). Either
//! way, callbacks run on one thread, in arrival order, and must not wait for
//! the network (they would stop it).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use rustc_hash::FxBuildHasher;

use super::log::{MessageLog, Tick};
use super::wire::{Reader, Writer};
use super::{Tail, Transport};
use crate::util::lock;

/// Channel 0 carries control messages (aborts).
const CONTROL: u32 = 0;
/// How long the dispatcher waits for a message before checking for shutdown.
const POLL: Duration = Duration::from_millis(20);

type Callback = Arc<dyn Fn(usize, Message) + Send + Sync>;
/// A channel's handler of messages delivered head first: `(from, head, tail)`.
type SplitCallback = Arc<dyn Fn(usize, Message, &mut dyn Tail) + Send + Sync>;
/// Messages `(from, whole message)` kept per channel until it is routed.
type Early = HashMap<u32, Vec<(usize, Vec<u8>)>>;

enum Route {
    /// Run on the routing thread for each message; a message delivered
    /// head first goes to the second callback if there is one, else it is
    /// read whole and goes to the first.
    Callback(Callback, Option<SplitCallback>),
    /// Queued for a thread that waits for them.
    Mailbox(Sender<(usize, Vec<u8>)>),
}

struct Shared {
    transport: Arc<dyn Transport>,
    next_channel: AtomicU32,
    /// Looked up for every message: Fx-hashed (channel numbers are this
    /// run's own, and SipHash of one was most of the lookup).
    routes: Mutex<HashMap<u32, Route, FxBuildHasher>>,
    /// Messages for channels not opened yet.
    early: Mutex<Early>,
    /// The first abort seen (from this rank or another), with its message.
    abort: Mutex<Option<String>>,
    abort_cond: Condvar,
    aborted: AtomicBool,
    stop: AtomicBool,
    /// Where sends are recorded (see [`Net::record_messages`]); `tracing`
    /// says whether there is one, so an untraced send takes no lock.
    log: RwLock<Option<MessageLog>>,
    tracing: AtomicBool,
    /// Whether this network is registered as a lender (`lent::register`,
    /// at its first loan).
    lends: AtomicBool,
}

/// A received message's body, owned (no copy out of the transport's buffer):
/// dereferences to the bytes after the channel header.
pub struct Message {
    buf: Vec<u8>,
}

impl Message {
    /// A message as the network would hand it over: `buf` holds the channel
    /// header (4 bytes), then the body.
    pub(crate) fn whole(buf: Vec<u8>) -> Message {
        Message { buf }
    }

    /// The bytes as they arrived, channel header included.
    pub(crate) fn into_bytes(mut self) -> Vec<u8> {
        std::mem::take(&mut self.buf)
    }
}

impl std::ops::Deref for Message {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[4..]
    }
}

impl Drop for Message {
    /// The buffer goes back to the pool (`buffers`) for the next message.
    fn drop(&mut self) {
        super::buffers::give(std::mem::take(&mut self.buf));
    }
}

/// One rank's view of the network (see the module doc).
pub struct Net {
    shared: Arc<Shared>,
    dispatcher: Mutex<Option<JoinHandle<()>>>,
}

/// A channel: messages sent on it reach the same channel on other ranks.
#[derive(Clone)]
pub struct Channel {
    id: u32,
    shared: Arc<Shared>,
    /// What its messages are called in traces.
    kind: &'static str,
}

impl Net {
    /// Start routing `transport`'s messages. Whatever owns the transport's
    /// machinery must outlive this network and its users: with MPI, keep
    /// the `Mpi` value of `tessera_backends::mpi::init` alive until every
    /// runtime and [`DistRuntime`](super::stf::DistRuntime) on this network
    /// is dropped (dropping it stops the communication thread and finalises
    /// MPI).
    pub fn new(transport: Arc<dyn Transport>) -> Arc<Net> {
        let shared = Shared::new(transport);
        let s = Arc::clone(&shared);
        let direct = shared
            .transport
            .deliver_to(Some(Arc::new(move |from, msg, tail| {
                s.route(from, msg, tail)
            })));
        let dispatcher = if direct {
            None
        } else {
            let s = Arc::clone(&shared);
            Some(
                std::thread::Builder::new()
                    .name(format!("tessera-net{}", shared.transport.rank()))
                    .spawn(move || {
                        while !s.stop.load(Ordering::Relaxed) {
                            if let Some((from, msg)) = s.transport.recv(POLL) {
                                s.route(from, msg, None);
                            }
                        }
                    })
                    .expect("the network dispatcher thread starts"),
            )
        };
        Arc::new(Net {
            shared,
            dispatcher: Mutex::new(dispatcher),
        })
    }

    /// A network end with no dispatcher thread: messages are handed in by
    /// [`deliver`](Self::deliver) (the simulation's event loop does, in
    /// virtual time).
    pub(crate) fn manual(transport: Arc<dyn Transport>) -> Arc<Net> {
        Arc::new(Net {
            shared: Shared::new(transport),
            dispatcher: Mutex::new(None),
        })
    }

    /// Route a message that arrived from rank `from`, on this thread.
    pub(crate) fn deliver(&self, from: usize, msg: Vec<u8>) {
        self.shared.route(from, msg, None);
    }

    /// Route a message delivered head first (`head`, then `tail`), as a
    /// transport with a thread of its own does (tests).
    #[cfg(test)]
    pub(crate) fn deliver_split(&self, from: usize, head: Vec<u8>, tail: &mut dyn Tail) {
        self.shared.route(from, head, Some(tail));
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.shared.transport.rank()
    }

    /// Number of ranks.
    pub fn size(&self) -> usize {
        self.shared.transport.size()
    }

    /// The transport (for its counters).
    pub fn transport(&self) -> &Arc<dyn Transport> {
        &self.shared.transport
    }

    /// Record this rank's messages into `log` from now on (`None`: stop):
    /// every send on any channel, and the receives the layers on this
    /// network record through [`Net::message_log`]. A distributed run sets
    /// it from its runtime (`Runtime::message_log`).
    pub fn record_messages(&self, log: Option<MessageLog>) {
        let mut slot = self.shared.log.write().unwrap_or_else(|e| e.into_inner());
        self.shared.tracing.store(log.is_some(), Ordering::Relaxed);
        *slot = log;
    }

    /// Where messages are recorded now, if anywhere.
    pub fn message_log(&self) -> Option<MessageLog> {
        self.shared.message_log()
    }

    fn next_id(&self) -> u32 {
        self.shared.next_channel.fetch_add(1, Ordering::Relaxed)
    }

    /// The next channel (every rank opens its channels in the same order).
    /// Nothing is routed to it until [`Channel::on_message`] or
    /// [`Channel::mailbox`]; messages that arrive before are kept.
    pub fn channel(&self) -> Channel {
        Channel {
            id: self.next_id(),
            shared: Arc::clone(&self.shared),
            kind: "message",
        }
    }

    /// The next channel, with its messages run by `f(from, body)` on the
    /// dispatcher thread, in arrival order.
    pub fn open_callback(&self, f: impl Fn(usize, &[u8]) + Send + Sync + 'static) -> Channel {
        let ch = self.channel();
        ch.on_message(f);
        ch
    }

    /// The next channel, with its messages (bodies) queued on the receiver.
    pub fn open_mailbox(&self) -> (Channel, Receiver<(usize, Vec<u8>)>) {
        let ch = self.channel();
        let rx = ch.mailbox();
        (ch, rx)
    }

    /// Stop every rank's run: tell all the others why, and remember it here.
    pub fn abort(&self, why: &str) {
        let s = &self.shared;
        let text = format!("rank {}: {why}", s.transport.rank());
        for to in 0..s.transport.size() {
            if to != s.transport.rank() {
                let mut w = Writer::with_capacity(8 + text.len());
                w.u32(CONTROL).bytes(text.as_bytes());
                s.transport.send(to, w.finish());
            }
        }
        s.set_abort(text);
    }

    /// The first abort seen, if any.
    pub fn aborted(&self) -> Option<String> {
        if !self.shared.aborted.load(Ordering::SeqCst) {
            return None;
        }
        lock(&self.shared.abort).clone()
    }

    /// Wait until `done()` holds or an abort arrives (`Err` with its
    /// message); `done` is re-checked whenever `wake` is notified and at
    /// least every `POLL`.
    pub fn wait_until(
        &self,
        wake: &(Mutex<()>, Condvar),
        done: impl Fn() -> bool,
    ) -> Result<(), String> {
        let mut g = lock(&wake.0);
        loop {
            if let Some(a) = self.aborted() {
                return Err(a);
            }
            if done() {
                return Ok(());
            }
            g = wake
                .1
                .wait_timeout(g, POLL)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Wait until every message handed to the transport has been sent.
    pub fn flush(&self) {
        while self.shared.transport.pending_sends() > 0 && self.aborted().is_none() {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        self.shared.transport.deliver_to(None);
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = lock(&self.dispatcher).take() {
            let _ = t.join();
        }
    }
}

impl super::lent::Lender for Shared {
    fn progress_sends(&self) {
        self.transport.progress_sends();
    }

    fn aborted(&self) -> bool {
        self.aborted.load(Ordering::SeqCst)
    }
}

impl Shared {
    fn new(transport: Arc<dyn Transport>) -> Arc<Shared> {
        Arc::new(Shared {
            transport,
            next_channel: AtomicU32::new(CONTROL + 1),
            routes: Mutex::new(HashMap::default()),
            early: Mutex::new(HashMap::new()),
            abort: Mutex::new(None),
            abort_cond: Condvar::new(),
            aborted: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            log: RwLock::new(None),
            tracing: AtomicBool::new(false),
            lends: AtomicBool::new(false),
        })
    }

    fn message_log(&self) -> Option<MessageLog> {
        if !self.tracing.load(Ordering::Relaxed) {
            return None;
        }
        self.log.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn set_abort(&self, text: String) {
        let mut a = lock(&self.abort);
        if a.is_none() {
            *a = Some(text);
        }
        self.aborted.store(true, Ordering::SeqCst);
        self.abort_cond.notify_all();
    }

    /// Route `msg` from rank `from` to its channel; with a `tail`, `msg` is
    /// its head (see [`Transport::send_split`]), and the tail goes to the
    /// channel's split callback, or is read into the message when the
    /// channel has none (or is not open yet).
    fn route(&self, from: usize, msg: Vec<u8>, tail: Option<&mut dyn Tail>) {
        let msg = match tail {
            None => msg,
            Some(tail) => {
                let split = (msg.len() >= 4)
                    .then(|| u32::from_le_bytes(msg[..4].try_into().expect("4 bytes")))
                    .and_then(|id| match lock(&self.routes).get(&id) {
                        Some(Route::Callback(_, Some(g))) => Some(Arc::clone(g)),
                        _ => None,
                    });
                match split {
                    Some(g) => return g(from, Message { buf: msg }, tail),
                    None => tail.read_all(msg),
                }
            }
        };
        let mut r = Reader::new(&msg);
        let Ok(id) = r.u32() else {
            self.set_abort(format!(
                "rank {}: a {}-byte message from rank {from} has no channel header",
                self.transport.rank(),
                msg.len()
            ));
            return;
        };
        if id == CONTROL {
            let why = r
                .bytes()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .unwrap_or_else(|e| format!("rank {from} aborted ({e})"));
            self.set_abort(why);
            return;
        }
        let routes = lock(&self.routes);
        match routes.get(&id) {
            Some(Route::Callback(f, _)) => {
                let f = Arc::clone(f);
                drop(routes);
                f(from, Message { buf: msg });
            }
            Some(Route::Mailbox(tx)) => {
                let _ = tx.send((from, msg[4..].to_vec()));
                super::buffers::give(msg);
            }
            None => lock(&self.early).entry(id).or_default().push((from, msg)),
        }
    }
}

impl Channel {
    /// Route this channel's messages to `f(from, body)` on the routing
    /// thread, starting with those that arrived before.
    pub fn on_message(&self, f: impl Fn(usize, &[u8]) + Send + Sync + 'static) {
        self.on_message_owned(move |from, m| f(from, &m));
    }

    /// [`on_message`](Self::on_message), the body handed over owned (to keep
    /// it without a copy).
    pub fn on_message_owned(&self, f: impl Fn(usize, Message) + Send + Sync + 'static) {
        self.route_to(Arc::new(f), None);
    }

    /// [`on_message_owned`](Self::on_message_owned), with the messages a
    /// transport delivers head first ([`Channel::send_split_since`]) handed
    /// to `split(from, head, tail)`, which reads the tail where it belongs.
    pub(crate) fn on_message_split(
        &self,
        f: impl Fn(usize, Message) + Send + Sync + 'static,
        split: impl Fn(usize, Message, &mut dyn Tail) + Send + Sync + 'static,
    ) {
        self.route_to(Arc::new(f), Some(Arc::new(split)));
    }

    /// Route this channel's messages to `f` (and `split`), the early ones
    /// first, in order. The route is installed only once no early message
    /// is left, in the same critical section as that check (`route` keeps a
    /// message as early under the same lock): installed first, a message
    /// routed live by the transport's thread was handled while this thread
    /// still handled the early ones, concurrently and out of order (a
    /// symbolic run's version 2 of a copy was written before the reader of
    /// version 1 was submitted: `a_version_arriving_while_its_copy_is_read_
    /// waits_for_the_reader`, once in CI).
    fn route_to(&self, f: Callback, split: Option<SplitCallback>) {
        loop {
            let early = {
                let mut routes = lock(&self.shared.routes);
                match lock(&self.shared.early).remove(&self.id) {
                    Some(early) => early,
                    None => {
                        routes.insert(self.id, Route::Callback(f, split));
                        return;
                    }
                }
            };
            // Messages that come meanwhile are kept as early, for the next turn.
            for (from, msg) in early {
                f(from, Message { buf: msg });
            }
        }
    }

    /// Queue this channel's messages (bodies) on the returned receiver,
    /// starting with those that arrived before.
    pub fn mailbox(&self) -> Receiver<(usize, Vec<u8>)> {
        let (tx, rx) = channel();
        let mut routes = lock(&self.shared.routes);
        for (from, msg) in lock(&self.shared.early)
            .remove(&self.id)
            .unwrap_or_default()
        {
            let _ = tx.send((from, msg[4..].to_vec()));
        }
        routes.insert(self.id, Route::Mailbox(tx));
        rx
    }

    /// A message for this channel: write the body after the header.
    pub(crate) fn writer(&self, body: usize) -> Writer {
        let mut w = Writer::with_capacity(4 + body);
        w.u32(self.id);
        w
    }

    /// This channel, its messages called `kind` in traces (e.g. `halo`).
    pub fn named(mut self, kind: &'static str) -> Channel {
        self.kind = kind;
        self
    }

    /// What its messages are called in traces.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// Now on the clock messages are recorded on, when they are (the engine's
    /// senders pass it on as the time packing began).
    pub fn now(&self) -> Option<Tick> {
        self.shared.message_log().map(|l| l.now())
    }

    /// Send a message made by [`writer`](Self::writer) to rank `to`.
    pub(crate) fn send(&self, to: usize, w: Writer) {
        self.send_since(to, w, None);
    }

    /// [`send`](Self::send), recorded as packed since `start`.
    pub(crate) fn send_since(&self, to: usize, w: Writer, start: Option<Tick>) {
        self.send_split_since(to, w, None, start, None);
    }

    /// [`send_since`](Self::send_since); with `head`, the message's bytes
    /// after its first `head` (counted from the writer's start, channel
    /// header included) are one data item's, which the receiving channel's
    /// split callback may read in place ([`Transport::send_split`]).
    pub(crate) fn send_split_since(
        &self,
        to: usize,
        w: Writer,
        head: Option<usize>,
        start: Option<Tick>,
        task: Option<u64>,
    ) {
        // Virtual bytes the message stands for (simulated time only).
        let charged = w.1;
        let msg = w.finish();
        let log = self.shared.message_log();
        let start = log.as_ref().map(|l| start.unwrap_or_else(|| l.now()));
        let bytes = msg.len() + charged as usize;
        match head {
            _ if charged > 0 => self.shared.transport.send_charged(to, msg, charged),
            Some(head) if head < msg.len() => self.shared.transport.send_split(to, msg, head),
            _ => self.shared.transport.send(to, msg),
        }
        if let (Some(log), Some(start)) = (log, start) {
            log.send(to, self.kind, bytes, start, task);
        }
    }

    /// `data`'s bytes lent for a message of this channel
    /// ([`send_lent_since`](Self::send_lent_since)) when the transport
    /// sends them in place and they are long enough (`dist::lent`); `None`:
    /// copy them into the message. The caller makes sure no task writes
    /// the data now (as for `DataRef::pack`).
    pub(crate) fn lend(&self, data: &super::DataRef) -> Result<Option<super::Lent>, String> {
        // Short data first: most edges are (one call, no atomic write).
        if data.bytes() < super::lent::LEND_FROM as u64 || !self.shared.transport.sends_in_place() {
            return Ok(None);
        }
        if !self.shared.lends.load(Ordering::Relaxed)
            && !self.shared.lends.swap(true, Ordering::Relaxed)
        {
            let me: Arc<dyn super::lent::Lender> = self.shared.clone();
            super::lent::register(Arc::downgrade(&me));
        }
        super::lent::lend(&data.handle)
    }

    /// Send the message `w` (its head) followed by the bytes `tail` lends,
    /// which the receiving channel's split callback may read in place, as
    /// [`send_split_since`](Self::send_split_since) with the tail in the
    /// message would.
    pub(crate) fn send_lent_since(
        &self,
        to: usize,
        w: Writer,
        tail: super::Lent,
        start: Option<Tick>,
        task: Option<u64>,
    ) {
        let msg = w.finish();
        let log = self.shared.message_log();
        let start = log.as_ref().map(|l| start.unwrap_or_else(|| l.now()));
        let bytes = msg.len() + tail.len();
        self.shared.transport.send_lent(to, msg, tail);
        if let (Some(log), Some(start)) = (log, start) {
            log.send(to, self.kind, bytes, start, task);
        }
    }

    /// Stop routing this channel's messages here (later ones are kept as if
    /// it were not open yet). A finished run closes its channel so its
    /// callback, and what the callback holds, can be dropped.
    pub fn close(&self) {
        lock(&self.shared.routes).remove(&self.id);
    }

    /// Send `body` to rank `to` (one copy into the message).
    pub fn send_bytes(&self, to: usize, body: &[u8]) {
        self.send_bytes_since(to, body, None);
    }

    /// [`send_bytes`](Self::send_bytes), recorded as packed since `start`
    /// (from [`now`](Self::now)).
    pub fn send_bytes_since(&self, to: usize, body: &[u8], start: Option<Tick>) {
        let mut w = self.writer(body.len());
        w.0.extend_from_slice(body);
        self.send_since(to, w, start);
    }

    /// Record a message of `bytes` received from `from` on this channel,
    /// waited for since `waited_since` (see [`MessageLog::recv`]); nothing
    /// when messages are not recorded.
    pub fn record_recv(&self, from: usize, bytes: usize, waited_since: Option<Tick>) {
        if let Some(log) = self.shared.message_log() {
            log.recv(from, self.kind, bytes, waited_since, None);
        }
    }

    /// [`record_recv`](Self::record_recv) of a remote edge's message that
    /// nobody waited for, from task `task` of rank `from` (`MessageRecord::task`).
    pub(crate) fn record_edge_recv(&self, from: usize, bytes: usize, task: u64) {
        if let Some(log) = self.shared.message_log() {
            log.recv(from, self.kind, bytes, None, Some(task));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tail held in memory, as a transport would hold the rest of a message.
    struct HeldTail(Vec<u8>);

    impl Tail for HeldTail {
        fn len(&self) -> usize {
            self.0.len()
        }
        fn read_into(&mut self, parts: &mut [&mut [u8]]) -> Result<(), String> {
            let mut at = 0;
            for p in parts.iter_mut() {
                p.copy_from_slice(&self.0[at..at + p.len()]);
                at += p.len();
            }
            Ok(())
        }
        fn read_all(&mut self, mut head: Vec<u8>) -> Vec<u8> {
            head.extend_from_slice(&self.0);
            head
        }
    }

    /// A message of channel `ch`: its header, then `body`.
    fn message(ch: &Channel, body: &[u8]) -> Vec<u8> {
        [&ch.id.to_le_bytes()[..], body].concat()
    }

    /// A channel opened after some of its messages came gets them first, in
    /// order, and one that comes while it takes them (here: routed from
    /// inside the callback, as the transport's thread could route it
    /// meanwhile) after them, not in between.
    #[test]
    fn early_messages_come_first_and_in_order() {
        let net = Net::manual(super::super::local::world(1).remove(0));
        let ch = net.channel();
        net.deliver(0, message(&ch, b"a"));
        net.deliver(0, message(&ch, b"b"));
        let got = Arc::new(Mutex::new(Vec::<Vec<u8>>::new()));
        let (g, weak, c) = (Arc::clone(&got), Arc::downgrade(&net), ch.clone());
        ch.on_message(move |_, m| {
            lock(&g).push(m.to_vec());
            if m == b"a" {
                if let Some(net) = weak.upgrade() {
                    net.deliver(0, message(&c, b"c"));
                }
            }
        });
        net.deliver(0, message(&ch, b"d"));
        let want: Vec<Vec<u8>> = ["a", "b", "c", "d"].map(|x| x.as_bytes().to_vec()).into();
        assert_eq!(*lock(&got), want);
    }

    /// A message delivered head first goes to its channel's split callback,
    /// which reads the tail where it wants; a channel with no split
    /// callback, or not open yet, gets it whole, head and tail in order.
    #[test]
    fn a_message_delivered_head_first_is_split_or_whole_by_channel() {
        let net = Net::manual(super::super::local::world(1).remove(0));
        let (split, plain, later) = (net.channel(), net.channel(), net.channel());
        let got = Arc::new(Mutex::new(Vec::<(&str, Vec<u8>, Vec<u8>)>::new()));
        let (g1, g2, g3) = (Arc::clone(&got), Arc::clone(&got), Arc::clone(&got));
        split.on_message_split(
            move |_, m| lock(&g1).push(("whole", m.to_vec(), vec![])),
            move |_, head, tail| {
                // Into two parts of its own, 3 bytes and the rest.
                let mut a = vec![0u8; 3];
                let mut b = vec![0u8; tail.len() - 3];
                tail.read_into(&mut [&mut a[..], &mut b[..]]).unwrap();
                lock(&g2).push(("split", head.to_vec(), [a, b].concat()));
            },
        );
        plain.on_message(move |_, m| lock(&g3).push(("plain", m.to_vec(), vec![])));
        net.deliver_split(
            0,
            message(&split, b"head"),
            &mut HeldTail(b"tail bytes".to_vec()),
        );
        net.deliver(0, message(&split, b"short"));
        net.deliver_split(0, message(&plain, b"head"), &mut HeldTail(b"tail".to_vec()));
        net.deliver_split(
            0,
            message(&later, b"early "),
            &mut HeldTail(b"tail".to_vec()),
        );
        let g4 = Arc::clone(&got);
        later.on_message(move |_, m| lock(&g4).push(("later", m.to_vec(), vec![])));
        let got = lock(&got).clone();
        let want: Vec<(&str, Vec<u8>, Vec<u8>)> = vec![
            ("split", b"head".to_vec(), b"tail bytes".to_vec()),
            ("whole", b"short".to_vec(), vec![]),
            ("plain", b"headtail".to_vec(), vec![]),
            ("later", b"early tail".to_vec(), vec![]),
        ];
        assert_eq!(got, want);
    }
}
