//! The halo exchange of a distributed vector: each rank owns a contiguous
//! part of a vector (`own`) and reads some entries of other ranks' parts,
//! kept in a vector of its own (`halo`). One exchange sends every rank the
//! entries it reads and fills this rank's `halo`, as tasks:
//!
//! - one *send* task per destination rank, reading `own` (so it goes after
//!   the task that last wrote it), packs the entries that rank reads, in the
//!   order the plan lists them, and hands the message to the network;
//! - one *receive* task writing `halo` (so it goes after every task still
//!   reading the previous exchange's values), held until the messages of
//!   every source rank for this exchange have arrived, copies them in.
//!
//! Tasks that read only `own` do not wait for the network; tasks that read
//! `halo` run once the receive did. Exchanges are numbered in submission
//! order (the same on every rank), and messages carry the number, so a
//! message for a later exchange that comes early waits for its receive.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::gather::{self, Duplicate, Gather};
use super::net::{Channel, Net};
use super::wire::Reader;
use crate::access::Dynamic;
use crate::codelet::Codelet;
use crate::data::DataHandle;
use crate::error::Error;
use crate::runtime::Runtime;
use crate::task::TaskBuilder;
use crate::util::lock;
use crate::TaskHandle;

/// What one rank sends and receives in each exchange.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HaloPlan {
    /// Per destination rank (each once): the positions in `own` of the
    /// entries it reads, in the order it expects them.
    pub sends: Vec<(usize, Vec<u32>)>,
    /// Per source rank (each once): the part of `halo` its entries fill, in
    /// the order it sends them.
    pub recvs: Vec<(usize, Range<usize>)>,
}

impl HaloPlan {
    /// Entries received per exchange.
    pub fn received(&self) -> usize {
        self.recvs.iter().map(|(_, r)| r.len()).sum()
    }

    /// Entries sent per exchange.
    pub fn sent(&self) -> usize {
        self.sends.iter().map(|(_, s)| s.len()).sum()
    }

    /// Bytes of the messages one exchange sends (headers included).
    pub fn message_bytes_sent(&self) -> usize {
        self.sends
            .iter()
            .map(|(_, s)| MESSAGE_HEADER + 8 * s.len())
            .sum()
    }
}

/// Bytes of a halo message before its values: the channel id and the exchange number.
pub const MESSAGE_HEADER: usize = 4 + 8;

/// Messages of one exchange: (source rank, values as bytes), in arrival order.
type Parts = gather::Parts<Vec<u8>>;

/// A halo exchange between the ranks of a network (see the module doc).
pub struct HaloExchange {
    net: Arc<Net>,
    ch: Channel,
    plan: Arc<HaloPlan>,
    state: Arc<Mutex<Gather<Vec<u8>>>>,
    /// Number of the next exchange (the same on every rank).
    next: AtomicU64,
    /// Labels from (exchange, destination rank), built only when traced.
    send: Codelet<Dynamic, (u64, usize)>,
    /// Labels from the exchange's number.
    recv: Codelet<Dynamic, u64>,
}

impl HaloExchange {
    /// Open the exchange's channel over `net` (every rank in the same order
    /// relative to its other channels) for `plan`, this rank's part of a plan
    /// every rank agrees on (what `a` sends `b` is what `b` receives from `a`).
    pub fn new(net: &Arc<Net>, plan: HaloPlan) -> HaloExchange {
        let plan = Arc::new(plan);
        let state: Arc<Mutex<Gather<Vec<u8>>>> =
            Arc::new(Mutex::new(Gather::new(Arc::clone(net.transport()))));
        let ch = net.channel().named("halo");
        let (st, p2, net2, ch2) = (
            Arc::clone(&state),
            Arc::clone(&plan),
            Arc::clone(net),
            ch.clone(),
        );
        let sources = plan.recvs.len();
        ch.on_message(move |from, body| {
            let result = (|| -> Result<(), String> {
                let mut r = Reader::new(body);
                let seq = r.u64()?;
                let values = r.rest();
                let Some((_, range)) = p2.recvs.iter().find(|(src, _)| *src == from) else {
                    return Err("this rank expects no halo from it".into());
                };
                if values.len() != 8 * range.len() {
                    return Err(format!(
                        "halo message of exchange {seq} has {} bytes of values, expected {} ({} entries)",
                        values.len(),
                        8 * range.len(),
                        range.len()
                    ));
                }
                let (posted, ready) = lock(&st)
                    .arrive(seq, from, values.to_vec(), sources)
                    .map_err(|Duplicate| format!("two halo messages for exchange {seq}"))?;
                ch2.record_recv(from, body.len() + 4, posted);
                if let Some(hold) = ready {
                    hold.release();
                }
                Ok(())
            })();
            if let Err(e) = result {
                net2.abort(&format!("halo message from rank {from}: {e}"));
            }
        });
        HaloExchange {
            net: Arc::clone(net),
            ch,
            plan,
            state,
            next: AtomicU64::new(0),
            send: Codelet::with_args("halo-send")
                .label_args(|&(seq, to)| format!("halo-send({seq}→{to})")),
            recv: Codelet::with_args("halo-recv").label_args(|seq| format!("halo-recv({seq})")),
        }
    }

    /// This rank's plan.
    pub fn plan(&self) -> &HaloPlan {
        &self.plan
    }

    /// Submit one exchange on `rt` (see the module doc): sends that read
    /// `own`, a receive that writes `halo` (`halo` must have
    /// [`HaloPlan::received`] entries). Does not wait. Returns the send tasks (one per
    /// destination), for work that should go after the halo has left.
    pub fn submit(
        &self,
        rt: &Runtime,
        own: &DataHandle<Vec<f64>>,
        halo: &DataHandle<Vec<f64>>,
    ) -> Result<Vec<TaskHandle>, Error> {
        let seq = self.next.fetch_add(1, Ordering::Relaxed);
        rt.watch_network(self.net.transport());
        let mut sends = Vec::with_capacity(self.plan.sends.len());
        for (to, idx) in &self.plan.sends {
            sends.push(rt.submit(self.send_task(seq, *to, idx.clone(), own))?);
        }
        if self.plan.recvs.is_empty() {
            return Ok(sends);
        }
        let slot: Arc<Mutex<Parts>> = Arc::default();
        let (_, hold) = rt.submit_held(self.recv_task(seq, halo, Arc::clone(&slot)))?;
        let expected = self.plan.recvs.len();
        let ready = lock(&self.state).post(seq, hold, slot, expected, self.ch.now());
        if let Some(hold) = ready {
            hold.release();
        }
        Ok(sends)
    }

    /// The task of exchange `seq` that sends rank `to` the entries `idx`
    /// of `own`.
    fn send_task(
        &self,
        seq: u64,
        to: usize,
        idx: Vec<u32>,
        own: &DataHandle<Vec<f64>>,
    ) -> TaskBuilder {
        let (ch, h, st) = (self.ch.clone(), own.clone(), Arc::clone(&self.state));
        let sources = self.plan.recvs.len();
        TaskBuilder::with_args(&self.send, (seq, to))
            .read(own)
            .cpu_only()
            .body(move |ctx| {
                let own = ctx.read(&h)?;
                let start = ch.now();
                let mut w = ch.writer(8 + 8 * idx.len());
                w.u64(seq);
                w.0.reserve(8 * idx.len());
                for &i in &idx {
                    let v = own.get(i as usize).ok_or_else(|| {
                        format!("halo entry {i} is past the {} owned entries", own.len())
                    })?;
                    w.0.extend_from_slice(&v.to_le_bytes());
                }
                ch.send_since(to, w, start);
                lock(&st).sent(seq, sources);
                Ok(())
            })
    }

    /// The task of exchange `seq` that copies the parts `slot` holds, once
    /// released, into `halo`.
    fn recv_task(
        &self,
        seq: u64,
        halo: &DataHandle<Vec<f64>>,
        slot: Arc<Mutex<Parts>>,
    ) -> TaskBuilder {
        let (plan, h) = (Arc::clone(&self.plan), halo.clone());
        TaskBuilder::with_args(&self.recv, seq)
            .write(halo)
            .cpu_only()
            .body(move |ctx| {
                let halo = ctx.write(&h)?;
                let parts = std::mem::take(&mut *lock(&slot));
                if parts.len() != plan.recvs.len() {
                    return Err(format!(
                        "halo exchange {seq} released with {} of {} messages",
                        parts.len(),
                        plan.recvs.len()
                    )
                    .into());
                }
                for (from, bytes) in parts {
                    let (_, range) = plan
                        .recvs
                        .iter()
                        .find(|(src, _)| *src == from)
                        .expect("checked on arrival");
                    let dst = halo.get_mut(range.clone()).ok_or_else(|| {
                        format!(
                            "halo of {} entries is too short for entries {range:?}",
                            range.end
                        )
                    })?;
                    for (d, b) in dst.iter_mut().zip(bytes.chunks_exact(8)) {
                        *d = f64::from_le_bytes(b.try_into().expect("8 bytes"));
                    }
                }
                Ok(())
            })
    }

    /// The network.
    pub fn net(&self) -> &Arc<Net> {
        &self.net
    }
}

impl Drop for HaloExchange {
    fn drop(&mut self) {
        self.ch.close();
    }
}

/// Wait for every task of `rt`, the distributed way: `Err` at once if another
/// rank aborted, and if a task failed here, tell every other rank (so none
/// waits for a message this rank will not send) and return the failure.
pub fn wait_all(rt: &Runtime, net: &Net) -> Result<(), Error> {
    const POLL: Duration = Duration::from_millis(20);
    let mut failed_since: Option<Instant> = None;
    loop {
        match rt.wait_all_timeout(POLL) {
            Ok(()) => break,
            Err(Error::Timeout(_)) => {
                if let Some(why) = net.aborted() {
                    return Err(Error::Remote(why));
                }
                if rt.has_failures() {
                    // Let the tasks that do not wait for the network end,
                    // so the error lists them all; then stop every rank.
                    let since = failed_since.get_or_insert_with(Instant::now);
                    if since.elapsed() > Duration::from_millis(500) {
                        let why = rt
                            .first_failure()
                            .unwrap_or_else(|| "a task failed".to_owned());
                        net.abort(&why);
                        return Err(Error::Remote(format!("rank {}: {why}", net.rank())));
                    }
                }
            }
            Err(e) => {
                net.abort(&e.to_string());
                return Err(e);
            }
        }
    }
    if let Some(why) = net.aborted() {
        return Err(Error::Remote(why));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! Proves that halo send and receive tasks carry no label string
    //! (nothing is formatted per exchange with tracing off), and that their
    //! labels are made from their numbers when asked.
    use super::*;
    use crate::dist::local;

    #[test]
    fn labels_are_built_only_when_asked() {
        let net = Net::new(local::world(1).pop().expect("one rank"));
        let halo = HaloExchange::new(&net, HaloPlan::default());
        let rt = Runtime::with_workers(1).unwrap();
        let (own, ghosts) = (rt.register(vec![0.0f64; 4]), rt.register(Vec::new()));
        let send = halo.send_task(7, 1, vec![0, 3], &own);
        assert!(send.label.is_none());
        assert_eq!(send.display_name(), "halo-send(7→1)");
        let recv = halo.recv_task(7, &ghosts, Arc::default());
        assert!(recv.label.is_none());
        assert_eq!(recv.display_name(), "halo-recv(7)");
    }
}
