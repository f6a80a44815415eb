//! Light tasks across ranks (`crate::light`, owner-computes): every rank
//! runs the same [`DistLightClasses`] and runs only the tasks it owns. When
//! a task finishes, its successors on other ranks are grouped by rank, and
//! one message per rank carries the task's key, those successors' keys and
//! the bytes the classes pack for them ([`DistLightClasses::pack`]). The
//! receiving rank unpacks the bytes where its tasks will read them, then
//! counts the successors' predecessors down, on the thread that routes the
//! message: an idle member of its light team, which polls the network
//! instead of sleeping (the network's own thread when none does), so the
//! released task runs with no thread woken.
//!
//! A rank whose tasks have all run tells the others (`DONE`, after its last
//! edge: messages between two ranks keep their order) and ends once every
//! other rank has said so, or one failed: a task's error ends every rank
//! with it ([`Net::abort`]). Predecessor counts that do not match the edges
//! leave a rank waiting for tasks that never come (one process finds them
//! at the end of the run; here no rank knows that the others are idle).
//!
//! Message layout (channel `light`, one per run): a kind byte (`EDGE`,
//! `DONE`); for an edge, the finished task's key and its successors' keys
//! on the receiving rank in postcard, then the packed bytes to the end.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use serde::de::DeserializeOwned;
use serde::Serialize;

use super::net::{Channel, Net};
use crate::error::Error;
use crate::light::{Group, LightClasses, LightStats, Remote};
use crate::runtime::Runtime;

/// Light task classes spread over ranks by `owner`.
pub trait DistLightClasses: LightClasses
where
    Self::Key: Serialize + DeserializeOwned,
{
    /// The rank that runs `key`.
    fn owner(&self, key: &Self::Key) -> usize;

    /// How many tasks `rank` runs.
    fn owned(&self, rank: usize) -> usize;

    /// What task `from` (of this rank, finished) sends to the rank of its
    /// successors `to`: the bytes of its output they read, appended to
    /// `out` (none for an edge that only orders them).
    fn pack(&self, from: &Self::Key, to: &[Self::Key], out: &mut Vec<u8>);

    /// Store on this rank what [`pack`](Self::pack) sent for `from`'s
    /// successors here, before they are counted down. No task of this rank
    /// may use what it writes now: the classes' edges order it (the tasks
    /// that read an older version precede `from`, and its readers follow
    /// it). `Err`: the bytes are not what `from` sends (named in the error).
    fn unpack(&self, from: &Self::Key, bytes: &[u8]) -> Result<(), String>;
}

/// An edge message's keys: the finished task's, and its successors' on
/// the receiving rank.
type EdgeKeys<K> = (K, Vec<K>);

/// Message kinds.
const EDGE: u8 = 0;
const DONE: u8 = 1;

/// Run the tasks this rank owns in `classes` on `rt`, exchanging the edges
/// between ranks over `net`, and wait until every rank's tasks are done
/// (or one failed).
///
/// # Errors
/// As [`crate::light::run`]; another rank's failure ([`Error::Remote`]);
/// a message that does not decode, or bytes `unpack` refuses.
pub fn run<C>(rt: &Runtime, net: &Arc<Net>, classes: Arc<C>) -> Result<LightStats, Error>
where
    C: DistLightClasses,
    C::Key: Serialize + DeserializeOwned,
{
    let ch = net.channel().named("light");
    let ranks = Arc::new(Ranks {
        net: Arc::clone(net),
        ch,
        me: net.rank(),
        size: net.size(),
        owned: classes.owned(net.rank()),
        classes: Arc::clone(&classes),
        done_peers: AtomicUsize::new(0),
        light: OnceLock::new(),
    });
    let remote: Arc<dyn Remote<C::Key>> = ranks.clone();
    let light = match crate::light::prepare(rt, classes, Some(remote)) {
        Ok(l) => l,
        Err(e) => {
            // The other ranks would wait for this one's DONE.
            net.abort(&e.to_string());
            ranks.ch.close();
            return Err(e);
        }
    };
    let _ = ranks.light.set(Arc::downgrade(&light));
    // Messages that came before the route are delivered now, in order.
    let r2 = Arc::clone(&ranks);
    ranks
        .ch
        .on_message(move |from, body| r2.received(from, body));
    // Idle members poll the network themselves (`Remote::poll`); this
    // tells the transport a reply is awaited while the run lasts.
    let awaiting = super::Awaiting::new(net.transport());
    let started = light.start(rt);
    let result = started.and_then(|()| light.finish(rt));
    if let Err(e) = &result {
        // A task's failure was told already (`Light::fail`), another rank's
        // came from there; anything else (the team task refused) is told
        // now, the first abort being the one every rank reports.
        if !matches!(e, Error::Remote(_)) {
            net.abort(&e.to_string());
        }
    }
    drop(awaiting);
    // Every edge and `DONE` handed over has left before the route goes.
    net.flush();
    ranks.ch.close();
    result
}

/// This rank's side of the exchange.
struct Ranks<C: DistLightClasses>
where
    C::Key: Serialize + DeserializeOwned,
{
    net: Arc<Net>,
    ch: Channel,
    me: usize,
    size: usize,
    owned: usize,
    classes: Arc<C>,
    /// Other ranks that said their tasks are done.
    done_peers: AtomicUsize,
    /// The run (weak: the run's state holds this side).
    light: OnceLock<std::sync::Weak<crate::light::Light<C>>>,
}

impl<C: DistLightClasses> Ranks<C>
where
    C::Key: Serialize + DeserializeOwned,
{
    /// Route one message of this run's channel.
    fn received(&self, from: usize, body: &[u8]) {
        let Some(light) = self.light.get().and_then(std::sync::Weak::upgrade) else {
            return;
        };
        match body.first() {
            Some(&DONE) => {
                self.done_peers.fetch_add(1, Ordering::AcqRel);
            }
            Some(&EDGE) => match self.edge(&body[1..]) {
                Ok(keys) => light.satisfy_remote(keys),
                Err(e) => light.fail_message(format!("light edge from rank {from}: {e}")),
            },
            _ => light.fail_message(format!(
                "rank {from} sent a light message of unknown kind ({} bytes)",
                body.len()
            )),
        }
    }

    /// An edge message's successors on this rank, once its bytes are
    /// unpacked.
    fn edge(&self, body: &[u8]) -> Result<Vec<C::Key>, String> {
        let (keys, data) = postcard::take_from_bytes::<EdgeKeys<C::Key>>(body)
            .map_err(|e| format!("undecodable keys: {e}"))?;
        let (from, keys) = keys;
        if let Some(k) = keys.iter().find(|k| self.classes.owner(k) != self.me) {
            return Err(format!(
                "task {from:?} names successor {k:?}, which rank {} owns, not this rank ({})",
                self.classes.owner(k),
                self.me
            ));
        }
        self.classes
            .unpack(&from, data)
            .map_err(|e| format!("task {from:?}'s data: {e}"))?;
        Ok(keys)
    }
}

impl<C: DistLightClasses> Remote<C::Key> for Ranks<C>
where
    C::Key: Serialize + DeserializeOwned,
{
    fn rank(&self) -> usize {
        self.me
    }

    fn owner(&self, key: &C::Key) -> usize {
        self.classes.owner(key)
    }

    fn owned(&self) -> usize {
        self.owned
    }

    fn send(&self, from: &C::Key, groups: &[Group<C::Key>]) -> Result<(), String> {
        for (rank, succ) in groups {
            let mut body = vec![EDGE];
            body = postcard::to_extend(&(from, succ.as_slice()), body)
                .map_err(|e| format!("cannot encode task keys: {e}"))?;
            self.classes.pack(from, succ, &mut body);
            self.ch.send_bytes(*rank, &body);
        }
        Ok(())
    }

    fn send_done(&self) {
        for r in (0..self.size).filter(|&r| r != self.me) {
            self.ch.send_bytes(r, &[DONE]);
        }
    }

    fn peers_done(&self) -> bool {
        self.done_peers.load(Ordering::Acquire) + 1 >= self.size
    }

    fn poll(&self) {
        self.net.transport().poll();
    }

    fn aborted(&self) -> Option<String> {
        self.net.aborted()
    }

    fn abort(&self, why: &str) {
        self.net.abort(why);
    }
}
