//! The simulated network: messages between ranks, charged on the NICs and
//! delivered as events to the receiving rank's [`Net`].
//!
//! Invariants: a message between nodes holds the sender's NIC out lane and
//! the receiver's in lane for its whole time (one message at a time per
//! lane, FIFO; no contention past the NICs); a message never arrives before
//! an earlier one of the same (sender, receiver) pair (the transport's
//! order, which DONE relies on); `State::pending_sends[r]` counts rank `r`'s
//! messages scheduled and not yet delivered.

use std::sync::{Arc, Weak};

use super::events::Kind;
use super::Simulation;
use crate::dist::Net;
use crate::simulate::transport::SimTransport;
use crate::util::lock;

impl Simulation {
    /// The network end of rank `rank`: a [`Net`] over a simulated transport
    /// whose messages are events of this simulation (see `transport.rs`).
    pub fn net(self: &Arc<Self>, rank: usize) -> Arc<Net> {
        let t = Arc::new(SimTransport::new(Arc::clone(self), rank));
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

    /// Message `id` arrives: its bytes go to the receiving rank's `Net`
    /// (which submits receive tasks and releases successors, as the MPI
    /// dispatcher thread would), with no lock of the simulation held.
    pub(super) fn deliver(&self, id: u64) {
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

    /// Messages rank `rank` sent that have not arrived yet.
    pub(crate) fn pending_sends(&self, rank: usize) -> usize {
        lock(&self.state)
            .pending_sends
            .get(rank)
            .copied()
            .unwrap_or(0)
    }
}
