//! Links between memory nodes: the copies a runtime's memory hands to the
//! simulation ([`VirtualLinks`]), each charged on the links it crosses.
//!
//! Invariants: each direction of an accelerator's link is one FIFO lane (a
//! copy starts when its source replica is ready and the lane is free, and
//! holds it for `latency + bytes / bandwidth`); device → device crosses the
//! source's down lane, then the destination's up lane; `State::ready` holds,
//! per (runtime slot, handle, node), the time a copy into that replica
//! ends, and a task that reads the replica starts no earlier.

use std::sync::{Arc, Mutex};

use super::Simulation;
use crate::device::TaskCost;
use crate::memory::{NodeId, VirtualLinks};
use crate::simulate::durations::model_seconds;
use crate::trace::model::{Trace, TransferRecord};
use crate::util::lock;

/// One direction of a link (or of a NIC), FIFO: the time it is free
/// again (ns).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Lane {
    pub(super) free: u64,
}

impl Simulation {
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
}

/// The link model of one simulated runtime (`SimRt::links`): its slot's
/// links in the simulation, and its trace.
pub(super) struct RtLinks {
    pub(super) world: Arc<Simulation>,
    pub(super) slot: usize,
    pub(super) trace: Option<Arc<Mutex<Trace>>>,
}

impl VirtualLinks for RtLinks {
    fn transfer(&self, handle: u64, from: NodeId, to: NodeId, bytes: u64) -> u64 {
        self.world
            .transfer(self.slot, self.trace.as_deref(), handle, from, to, bytes)
    }

    fn overcommit(&self, _node: NodeId, _bytes: u64) {
        lock(&self.world.state).stats.overcommits += 1;
    }

    fn cpu_seconds(&self, cost: &TaskCost<'_>, team: usize) -> f64 {
        model_seconds(
            &self.world.platform.node.cpu,
            cost.codelet,
            cost.flops,
            cost.bytes,
            team,
        )
    }
}
