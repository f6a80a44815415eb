//! The symbolic front-end across ranks (PaRSEC-style owner-computes).
//!
//! Every rank runs the same [`DistClasses`]; each unfolds only the tasks it
//! owns. When a task finishes, its successors owned by other ranks are
//! grouped by rank, and one message per destination rank carries the
//! task's key and, once each, the bytes of the data the task wrote that
//! those successors read ([`DistClasses::flows`]). On arrival the receiving
//! rank writes each data item into its local copy before it satisfies the
//! successors: at once, on the routing thread, when no task uses the copy
//! and the item is small (`Shared::write_now`: no task, no queue round);
//! otherwise through a *receive task* that declares the copy W and writes
//! the bytes in its body, so the engine orders it after every task still
//! reading the previous version (no write-after-read hazard across
//! versions) and before the successors. Classes that promise their order
//! ([`TaskClasses::described_order`]) have no inference: the copy is
//! written at once (their contract puts every reader of the previous
//! version before the message), and the successors of a message that
//! needed receive tasks are made by the last of them to end.
//!
//! Termination: each rank knows how many tasks it owns
//! ([`DistClasses::owned`]); its run ends when they have all finished and
//! every message it sent has left. A task that fails makes its rank abort
//! the run everywhere (see [`Net::abort`]); a rank waiting for data that
//! will never come stops with that message.

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;
use smallvec::SmallVec;

use super::net::Net;
use super::wire::{DataRef, Reader, Writer};
use crate::access::Dynamic;
use crate::codelet::Codelet;
use crate::error::Error;
use crate::runtime::Runtime;
use crate::symbolic::{TaskClasses, UnfoldStats, Unfolder};
use crate::task::TaskBuilder;

/// A symbolic DAG whose tasks are spread over ranks by `owner`.
pub trait DistClasses: TaskClasses
where
    Self::Key: Serialize + DeserializeOwned,
{
    /// The data `from` wrote that `to` (a successor owned by another rank)
    /// reads, as data keys: appended to `out`. The same data may be named
    /// for several successors on one rank; it is sent once.
    fn flows(&self, from: &Self::Key, to: &Self::Key, out: &mut Vec<u64>);

    /// This rank's handle for data `key`: its own data, or its copy of
    /// another rank's (which the application makes when first asked for,
    /// with the right shape, and may drop once no task of this rank reads it).
    fn data(&self, key: u64) -> DataRef;

    /// How many tasks `rank` owns.
    fn owned(&self, rank: usize) -> usize;

    /// The run is starting on `net`: open the channels the application's
    /// task bodies talk on (every rank opens the same ones in the same
    /// order, before the run's own). The default opens none.
    fn open(&self, _net: &Arc<Net>) {}

    /// Task `key` of this rank finished and the data its remote successors
    /// read has been packed into messages: the application may now drop
    /// copies of other ranks' data that no later task of this rank reads.
    fn finished(&self, _key: &Self::Key) {}
}

/// What a rank did in a distributed symbolic run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DistStats {
    /// The unfolding's counters on this rank.
    pub unfold: UnfoldStats,
    /// Messages this rank sent (one per finished task and destination rank).
    pub messages: u64,
    /// Data items they carried, and their bytes.
    pub items: u64,
    /// Bytes of data sent.
    pub bytes: u64,
}

/// Message kinds on a run's channel.
const EDGE: u32 = 0;
/// "This rank's tasks are all done": a rank ends its run only once every
/// other rank said so (or one aborted), so no rank reports success while the
/// run failed elsewhere; it comes after the rank's last edge (FIFO).
const DONE: u32 = 1;

/// Message layout: kind, the successors it satisfies on the receiving rank
/// (their count, then their keys in postcard back to back, as one byte
/// string), the predecessor's task id, item count, then per item its data
/// key and bytes. The sender names the successors: it has just found them
/// (`TaskClasses::successors`), and the receiver, which used to find them
/// again from the predecessor's key, saves that call and the owner of each
/// on the remote edge's critical path (about 450 instructions of a 2-rank
/// Task Bench `stencil_1d` step, `callgrind`). Written straight into the
/// channel's message (`ch.writer`), sized beforehand: the data is copied
/// once, not packed into a buffer that is then copied again behind the
/// header.
///
/// Returns the message, the bytes of data it carries, where the last
/// item's bytes start (when there are any): the message may go head first
/// (`Channel::send_split_since`), and the receiver read that item straight
/// into its copy (`read_in_place`); and that item's bytes when they are
/// lent instead (`dist::lent`: the message ends before them, and goes with
/// `Channel::send_lent_since`).
fn encode_items<K: Serialize>(
    ch: &super::net::Channel,
    succ: &[K],
    id: u64,
    items: &[(u64, DataRef)],
) -> Result<(Writer, u64, Option<usize>, Option<super::Lent>), String> {
    let bytes: u64 = items.iter().map(|(_, d)| d.bytes()).sum();
    let lent = match items.last() {
        Some((_, d)) => ch.lend(d)?,
        None => None,
    };
    let in_message = (bytes as usize).saturating_sub(lent.as_ref().map_or(0, |l| l.len()));
    let keys = succ.len() * (std::mem::size_of::<K>() + 8);
    let mut w = ch.writer(keys + 40 + in_message + 16 * items.len());
    w.u32(EDGE).u32(succ.len() as u32);
    write_keys(&mut w, succ)?;
    w.u64(id).u32(items.len() as u32);
    let mut last = None;
    for (i, (dk, d)) in items.iter().enumerate() {
        w.u64(*dk);
        match &lent {
            // The last item's length ends the message; its bytes are lent.
            Some(l) if i + 1 == items.len() => {
                w.u64(l.len() as u64);
                last = Some(w.0.len());
            }
            _ => {
                let at = w.0.len();
                d.pack(&mut w)?;
                // The item's bytes follow its 8-byte length.
                last = Some(at + 8).filter(|&b| b < w.0.len());
            }
        }
    }
    Ok((w, bytes, last, lent))
}

/// Append `keys` as one length-prefixed byte string: each key in postcard,
/// back to back (the receiver takes them one by one, [`read_keys`]). Each
/// key goes through the stack when it fits (a few integers do): no
/// allocation per message for it.
fn write_keys<K: Serialize>(w: &mut Writer, keys: &[K]) -> Result<(), String> {
    let mut small = [0u8; 64];
    w.bytes_with(|out| {
        for key in keys {
            match postcard::to_slice(key, &mut small) {
                Ok(k) => out.extend_from_slice(k),
                Err(postcard::Error::SerializeBufferFull) => {
                    let k = postcard::to_allocvec(key)
                        .map_err(|e| format!("cannot encode task key: {e}"))?;
                    out.extend_from_slice(&k);
                }
                Err(e) => return Err(format!("cannot encode task key: {e}")),
            }
        }
        Ok(())
    })?;
    Ok(())
}

/// The successors an edge message from rank `from` satisfies on rank `me`
/// (see [`encode_items`]): `n` keys in `bytes`. A key that does not decode,
/// bytes left over, or a task another rank owns is an error naming it.
fn read_keys<C: DistClasses>(
    classes: &C,
    me: usize,
    from: usize,
    n: u32,
    mut bytes: &[u8],
) -> Result<SmallVec<[C::Key; 4]>, String>
where
    C::Key: Serialize + DeserializeOwned,
{
    let mut keys = SmallVec::new();
    for i in 0..n {
        let (key, rest) = postcard::take_from_bytes::<C::Key>(bytes).map_err(|e| {
            format!(
                "undecodable task key {} of {n} from rank {from}: {e}",
                i + 1
            )
        })?;
        let owner = classes.owner(&key);
        if owner != me {
            return Err(format!(
                "rank {from} sent an edge to task {key:?}, which rank {owner} owns, not this rank ({me})"
            ));
        }
        keys.push(key);
        bytes = rest;
    }
    if !bytes.is_empty() {
        return Err(format!(
            "{} bytes follow the {n} task key(s) from rank {from}",
            bytes.len()
        ));
    }
    Ok(keys)
}

/// Read the last data item of an edge message delivered head first (`head`,
/// see [`encode_items`]) from `tail` straight into this rank's copy of the
/// data, when no task uses the copy now (`Submitter::write_now`): no message
/// buffer, no copy out of it, no receive task. `Ok(false)`: not done, the
/// tail is still unread (a task uses the copy, or the head is not such a
/// message: the whole message then goes the usual way, which reports what is
/// wrong with it). `Err`: the copy is not of the size that arrived.
fn read_in_place<C: DistClasses>(
    classes: &C,
    submitter: &crate::Submitter,
    head: &[u8],
    tail: &mut dyn super::Tail,
) -> Result<bool, String>
where
    C::Key: Serialize + DeserializeOwned,
{
    let mut r = Reader::new(head);
    let last = (|| -> Result<Option<(u64, usize)>, String> {
        if r.u32()? != EDGE {
            return Ok(None);
        }
        r.u32()?;
        r.bytes()?;
        r.u64()?;
        let n = r.u32()?;
        for _ in 1..n {
            r.u64()?;
            r.bytes()?;
        }
        let dk = r.u64()?;
        let len = usize::try_from(r.u64()?).map_err(|_| "length overflows usize")?;
        Ok((n > 0 && r.rest().is_empty() && len == tail.len()).then_some((dk, len)))
    })();
    let Ok(Some((dk, len))) = last else {
        return Ok(false);
    };
    let data = classes.data(dk);
    // SAFETY: `write_now` runs the closure only while no task uses the
    // data, holding its dependency lock, as a receive task declaring it W
    // would run.
    let write = || unsafe {
        data.handle
            .fill_parts(len, &mut |parts| tail.read_into(parts))
    };
    match submitter.write_now(&data.handle, write) {
        Some(written) => written.map(|()| true),
        None => Ok(false),
    }
}

thread_local! {
    /// The data keys of one finished task's message, reused by its thread
    /// (an allocation per remote edge saved).
    static FLOW_SCRATCH: std::cell::Cell<Vec<u64>> = const { std::cell::Cell::new(Vec::new()) };
}

/// The largest data item written into its copy by the routing callback
/// itself when no task uses the copy (`Shared::write_now`), with no receive
/// task: a submission, a queue round and a completion per remote edge
/// saved. A larger one is copied by a receive task on a worker, so the
/// thread that routes messages is not held by a long copy.
const INLINE_MAX: usize = 64 << 10;

/// The successors one message satisfies, held until its receive tasks have
/// written their data (an ordered run, where no inference orders them).
struct ReceiveGate<K> {
    /// Receives still to end.
    left: std::sync::atomic::AtomicUsize,
    succ: std::sync::Mutex<SmallVec<[K; 4]>>,
}

impl<K> ReceiveGate<K> {
    /// One receive ended: the last one hands every successor to `satisfy`.
    fn passed(&self, mut satisfy: impl FnMut(K)) {
        // AcqRel: the last receive's decrement follows every other's write.
        if self.left.fetch_sub(1, std::sync::atomic::Ordering::AcqRel) == 1 {
            std::mem::take(&mut *crate::util::lock(&self.succ))
                .into_iter()
                .for_each(&mut satisfy);
        }
    }
}

/// The codelet of receive tasks; a task's arguments, (data key, source
/// rank), make its label only when a trace or a message needs it.
fn recv_codelet() -> Codelet<Dynamic, (u64, usize)> {
    Codelet::with_args("recv").label_args(|&(dk, from)| format!("recv({dk} from {from})"))
}

/// The receive task of data item `dk` from rank `from`: it writes the
/// item's bytes, `msg[range]`, into this rank's copy `data`.
fn recv_task(
    recv: &Codelet<Dynamic, (u64, usize)>,
    data: DataRef,
    dk: u64,
    from: usize,
    msg: Arc<super::net::Message>,
    range: std::ops::Range<usize>,
) -> TaskBuilder {
    let handle = Arc::clone(&data.handle);
    // The highest priority: a receive is a short copy, and the work it
    // unblocks is usually on the critical path (the next panel's column);
    // at the default 0 it waited behind every queued update.
    TaskBuilder::with_args(recv, (dk, from))
        .priority(i32::MAX)
        .access_erased(handle, crate::AccessMode::W)
        .body(move |_ctx| {
            // SAFETY: this task declared the handle W and runs on a CPU
            // worker (the handle's host replica).
            unsafe { data.unpack(&msg[range]) }?;
            Ok(())
        })
        .cpu_only()
}

/// Run the tasks this rank owns in `classes` on `rt`, exchanging remote
/// edges over `net`, and wait until they are all done (or the run aborted).
pub fn run<C>(rt: &Runtime, net: &Arc<Net>, classes: Arc<C>) -> Result<DistStats, Error>
where
    C: DistClasses,
    C::Key: Serialize + DeserializeOwned,
{
    start(rt, net, classes).wait(rt, net)
}

/// A rank's run, started: its roots submitted, its channel open. A real run
/// calls [`wait`](Self::wait); a simulation, which plays every rank in one
/// process, starts them all, runs, calls [`finish`](Self::finish) on each
/// (their DONE messages are events too), runs again, then
/// [`Finishing::wait`] on each.
pub struct Started<C: DistClasses>
where
    C::Key: Serialize + DeserializeOwned,
{
    unfolder: Arc<Unfolder<C>>,
    counters: Arc<std::sync::Mutex<DistStats>>,
    ch: super::net::Channel,
    owned: usize,
    done_peers: Arc<std::sync::atomic::AtomicUsize>,
    /// Until every rank is done, this rank expects edges: its idle workers
    /// watch the network (`crate::watch`).
    _awaiting: super::Awaiting,
}

/// A rank whose own tasks are done and that told the others so; it waits
/// for theirs ([`Finishing::wait`]).
pub struct Finishing<C: DistClasses>
where
    C::Key: Serialize + DeserializeOwned,
{
    run: Started<C>,
}

/// Start the tasks this rank owns in `classes` on `rt` (see [`run`]).
pub fn start<C>(rt: &Runtime, net: &Arc<Net>, classes: Arc<C>) -> Started<C>
where
    C: DistClasses,
    C::Key: Serialize + DeserializeOwned,
{
    let me = net.rank();
    classes.open(net);
    net.record_messages(rt.message_log(me));
    rt.watch_network(net.transport());
    let awaiting = super::Awaiting::new(net.transport());
    let counters = Arc::new(std::sync::Mutex::new(DistStats::default()));
    // The unfolder sends through the channel, and the channel's callback
    // satisfies the unfolder's tasks: make the unfolder first (its sends go
    // through a slot filled just after), then open the channel, which may
    // at once deliver edges that arrived early.
    let send_slot: Arc<std::sync::OnceLock<super::net::Channel>> =
        Arc::new(std::sync::OnceLock::new());
    let (classes3, counters2, send_ch) = (
        Arc::clone(&classes),
        Arc::clone(&counters),
        Arc::clone(&send_slot),
    );
    let remote: crate::symbolic::RemoteEdges<C::Key> = Box::new(move |key, id, groups| {
        let ch = send_ch.get().ok_or("the run's channel is not open")?;
        // This thread's data-key scratch, taken out while used (a nested
        // call would find it empty and allocate its own).
        let mut dks = FLOW_SCRATCH.with(std::cell::Cell::take);
        for (rank, succ) in groups {
            dks.clear();
            for s in succ {
                classes3.flows(key, s, &mut dks);
            }
            dks.sort_unstable();
            dks.dedup();
            let items: SmallVec<[(u64, DataRef); 4]> =
                dks.iter().map(|&dk| (dk, classes3.data(dk))).collect();
            let start = ch.now();
            let (msg, bytes, head, lent) = encode_items(ch, succ, id, &items)?;
            match lent {
                Some(tail) => ch.send_lent_since(*rank, msg, tail, start, Some(id)),
                None => ch.send_split_since(*rank, msg, head, start, Some(id)),
            }
            let mut c = crate::util::lock(&counters2);
            c.messages += 1;
            c.items += items.len() as u64;
            c.bytes += bytes;
        }
        FLOW_SCRATCH.with(|s| s.set(dks));
        classes3.finished(key);
        Ok(())
    });
    let unfolder = Unfolder::new(rt, Arc::clone(&classes), me, Some(remote));
    let done_peers = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (peers2, wake2) = (Arc::clone(&done_peers), Arc::clone(&unfolder.wake));
    let recv = recv_codelet();
    let (u2, classes2, net2, submitter) = (
        Arc::clone(&unfolder),
        Arc::clone(&classes),
        Arc::clone(net),
        rt.submitter(),
    );
    let ch = net.channel().named("edge");
    let _ = send_slot.set(ch.clone());
    let ch2 = ch.clone();
    // What a message does on arrival; `last_read`: its last data item was
    // already read into its copy (`read_in_place`), the message is its head.
    let handle = move |from: usize, body: super::net::Message, last_read: bool| {
        let (done_peers, wake2) = (&peers2, &wake2);
        let result = (|| -> Result<(), String> {
            let mut r = Reader::new(&body);
            if r.u32()? == DONE {
                done_peers.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let _g = crate::util::lock(&wake2.0);
                wake2.1.notify_all();
                return Ok(());
            }
            let n_succ = r.u32()?;
            let succ = read_keys(&*classes2, me, from, n_succ, r.bytes()?)?;
            let pred = r.u64()?;
            // A remote edge's receive exists only once its message is here;
            // `pred` is the sender's task id: recorded as rank `from`'s
            // task, so a merged trace links the right one.
            let pred = crate::trace::model::remote_task_id(from, pred);
            ch2.record_edge_recv(from, body.len() + 4, pred);
            let n = r.u32()?;
            // Items left to receive tasks: their data and where their bytes
            // lie in the message, which the tasks then share (made shared,
            // an allocation, only for them: most items are written now).
            let mut later: SmallVec<[(DataRef, u64, std::ops::Range<usize>); 2]> = SmallVec::new();
            for i in 0..n {
                let dk = r.u64()?;
                if last_read && i + 1 == n {
                    r.u64()?;
                    break;
                }
                let bytes = r.bytes()?;
                let data = classes2.data(dk);
                if bytes.len() <= INLINE_MAX {
                    // SAFETY: `write_now` runs the closure only while no
                    // task uses the data, holding its dependency lock, as
                    // a receive task declaring it W would run.
                    let write = || unsafe { data.unpack(bytes) };
                    if let Some(written) = submitter.write_now(&data.handle, write) {
                        written?;
                        continue;
                    }
                }
                let (len, end) = (bytes.len(), r.position());
                later.push((data, dk, end - len..end));
            }
            let mut receives: SmallVec<[TaskBuilder; 2]> = SmallVec::new();
            if !later.is_empty() {
                let body = Arc::new(body);
                for (data, dk, range) in later {
                    receives.push(recv_task(&recv, data, dk, from, Arc::clone(&body), range));
                }
            }
            if receives.is_empty() || !u2.ordered() {
                // Inferred: each successor, made after the receives, follows
                // them by the data it reads.
                // Drained in place: `into_iter` moved the whole inline
                // vector (two builders) for every message, receives or not
                // (about 115 instructions a message, `callgrind`).
                for task in receives.drain(..) {
                    submitter.submit(task).map_err(|e| e.to_string())?;
                }
                for s in succ {
                    u2.satisfy(s, Some(pred));
                }
                return Ok(());
            }
            // Ordered (`TaskClasses::described_order`): nothing infers that
            // a successor follows the receives, so the last receive to end
            // makes the successors.
            let gate = Arc::new(ReceiveGate {
                left: std::sync::atomic::AtomicUsize::new(receives.len()),
                succ: std::sync::Mutex::new(succ),
            });
            for mut task in receives.drain(..) {
                let (gate, u) = (Arc::clone(&gate), Arc::clone(&u2));
                task.add_then(move |_| {
                    gate.passed(|s| u.satisfy(s, Some(pred)));
                    Ok(())
                });
                submitter.submit(task).map_err(|e| e.to_string())?;
            }
            Ok(())
        })();
        if let Err(e) = result {
            net2.abort(&format!("remote edge from rank {from}: {e}"));
        }
    };
    let handle = Arc::new(handle);
    let (whole, classes4, submitter2, net3) = (
        Arc::clone(&handle),
        Arc::clone(&classes),
        rt.submitter(),
        Arc::clone(net),
    );
    ch.on_message_split(
        // The items are read in place by their receive tasks (no copy).
        move |from, body| whole(from, body, false),
        move |from, head, tail| match read_in_place(&*classes4, &submitter2, &head, tail) {
            Ok(true) => handle(from, head, true),
            Ok(false) => {
                let body = super::net::Message::whole(tail.read_all(head.into_bytes()));
                handle(from, body, false)
            }
            Err(e) => net3.abort(&format!("remote edge from rank {from}: {e}")),
        },
    );
    let owned = classes.owned(me);
    // Wake the waiting thread once, when the last owned task is done
    // (failures and aborts are polled by `wait_until`).
    unfolder
        .wake_at
        .store(owned, std::sync::atomic::Ordering::Relaxed);
    unfolder.start();
    Started {
        owned,
        unfolder,
        counters,
        ch,
        done_peers,
        _awaiting: awaiting,
    }
}

impl<C: DistClasses> Started<C>
where
    C::Key: Serialize + DeserializeOwned,
{
    /// Wait until this rank's tasks are all done and every other rank's too
    /// (or the run aborted).
    pub fn wait(self, rt: &Runtime, net: &Net) -> Result<DistStats, Error> {
        self.finish(rt, net)?.wait(net)
    }

    /// Wait until this rank's own tasks are done, then tell every rank.
    pub fn finish(self, rt: &Runtime, net: &Net) -> Result<Finishing<C>, Error> {
        let me = net.rank();
        let wake = Arc::clone(&self.unfolder.wake);
        let (unfolder, owned) = (&self.unfolder, self.owned);
        let waited = net.wait_until(&wake, || {
            unfolder.done() >= owned || rt.has_failures() || unfolder.has_error()
        });
        if let Err(e) = finish(rt, net, unfolder, owned, waited) {
            self.ch.close();
            // Tasks made beyond a remote edge whose edge never came.
            self.unfolder.discard_ahead();
            return Err(e);
        }
        for to in (0..net.size()).filter(|&r| r != me) {
            let mut w = self.ch.writer(4);
            w.u32(DONE);
            self.ch.send(to, w);
        }
        Ok(Finishing { run: self })
    }
}

impl<C: DistClasses> Finishing<C>
where
    C::Key: Serialize + DeserializeOwned,
{
    /// Wait for every other rank's DONE.
    pub fn wait(self, net: &Net) -> Result<DistStats, Error> {
        let r = self.run;
        let others = net.size() - 1;
        let wake = Arc::clone(&r.unfolder.wake);
        let result = net
            .wait_until(&wake, || {
                r.done_peers.load(std::sync::atomic::Ordering::SeqCst) >= others
            })
            .map_err(Error::Remote);
        r.ch.close();
        // Every owned task ran; none is left made ahead unless a rank failed.
        r.unfolder.discard_ahead();
        result?;
        let mut stats = *crate::util::lock(&r.counters);
        stats.unfold = r.unfolder.stats();
        Ok(stats)
    }
}

/// How a rank's run ends, once `net.wait_until` returned.
fn finish<C: TaskClasses>(
    rt: &Runtime,
    net: &Net,
    unfolder: &Unfolder<C>,
    owned: usize,
    waited: Result<(), String>,
) -> Result<(), Error> {
    if let Err(why) = waited {
        // Another rank aborted: let local tasks end, then report it.
        let _ = rt.wait_all();
        return Err(Error::Remote(why));
    }
    if rt.has_failures() || unfolder.done() < owned {
        let e = match rt.wait_all() {
            Err(e) => e,
            Ok(()) => unfolder
                .take_error()
                .unwrap_or_else(|| Error::Config("the run stopped early".into())),
        };
        net.abort(&e.to_string());
        return Err(e);
    }
    rt.wait_all()?;
    net.flush();
    Ok(())
}

#[cfg(test)]
mod tests {
    //! Proves that a remote edge's receive task carries no label string
    //! (nothing is formatted per item with tracing off), and that its label
    //! is made from its numbers when asked; and that an edge's task key is
    //! written whole whether it fits the stack buffer or not.
    use super::*;

    /// Keys that are strings, owned by the rank of their length's parity.
    struct ByLength;

    impl TaskClasses for ByLength {
        type Key = String;
        fn roots(&self) -> Vec<String> {
            Vec::new()
        }
        fn predecessor_count(&self, _: &String) -> usize {
            1
        }
        fn successors(&self, _: &String, _: &mut Vec<String>) {}
        fn task(&self, _: &String) -> TaskBuilder {
            unreachable!("no task is made")
        }
        fn owner(&self, key: &String) -> usize {
            key.len() % 2
        }
    }

    impl DistClasses for ByLength {
        fn flows(&self, _: &String, _: &String, _: &mut Vec<u64>) {}
        fn data(&self, _: u64) -> DataRef {
            unreachable!("no data is named")
        }
        fn owned(&self, _: usize) -> usize {
            0
        }
    }

    #[test]
    fn task_keys_small_and_large_are_encoded_whole() {
        let net = Net::new(super::super::local::world(1).pop().expect("one rank"));
        let ch = net.channel();
        // Rank 0's tasks (even lengths): none, one, and one past the
        // stack's 64 bytes between two short ones.
        let keys = [
            vec![],
            vec!["kk".to_string()],
            vec!["k2".to_string(), "long key ".repeat(20), "k4".to_string()],
        ];
        for succ in keys {
            let (w, bytes, last, lent) = encode_items(&ch, &succ, 7, &[]).unwrap();
            assert_eq!((bytes, last, lent.is_none()), (0, None, true));
            let msg = w.finish();
            // The channel's 4-byte number, then the body.
            let mut r = Reader::new(&msg[4..]);
            assert_eq!(r.u32().unwrap(), EDGE);
            let n = r.u32().unwrap();
            let back = read_keys(&ByLength, 0, 1, n, r.bytes().unwrap()).unwrap();
            assert_eq!(back.as_slice(), succ.as_slice());
            assert_eq!((r.u64().unwrap(), r.u32().unwrap()), (7, 0));
            assert!(r.rest().is_empty());
        }
    }

    #[test]
    fn wrong_successor_keys_are_refused_by_name() {
        let net = Net::new(super::super::local::world(1).pop().expect("one rank"));
        let ch = net.channel();
        let (w, ..) = encode_items(&ch, &["odd".to_string()], 7, &[]).unwrap();
        let msg = w.finish();
        let mut r = Reader::new(&msg[8..]);
        let (n, bytes) = (r.u32().unwrap(), r.bytes().unwrap());
        // Rank 1 owns "odd": rank 0 refuses it, naming it.
        let e = read_keys(&ByLength, 0, 1, n, bytes).unwrap_err();
        assert!(e.contains("\"odd\"") && e.contains("rank 1 owns"), "{e}");
        // One key more than the bytes hold; one fewer than they hold.
        let e = read_keys(&ByLength, 1, 0, n + 1, bytes).unwrap_err();
        assert!(e.contains("undecodable task key 2 of 2 from rank 0"), "{e}");
        let e = read_keys(&ByLength, 1, 0, 0, bytes).unwrap_err();
        assert!(e.contains("bytes follow the 0 task key(s)"), "{e}");
    }

    #[test]
    fn receive_labels_are_built_only_when_asked() {
        let rt = Runtime::with_workers(1).unwrap();
        let h = rt.register_replicable(vec![0.0f64; 2]);
        let msg = Arc::new(super::super::net::Message::whole(vec![0; 4 + 16]));
        let recv = recv_task(&recv_codelet(), DataRef::of(&h), 5, 2, msg, 0..16);
        assert!(recv.label.is_none());
        assert_eq!(recv.display_name(), "recv(5 from 2)");
    }
}
