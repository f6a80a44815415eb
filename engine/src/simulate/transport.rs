//! The simulated network: a [`Transport`] whose sends are message events of
//! the simulation (latency + bytes / NIC bandwidth, one message at a time
//! per NIC direction), delivered to the receiving rank's `Net` on the event
//! loop's thread. Every rank of a simulated run lives in this process, so
//! the distributed layer (owners, remote edges, receive tasks) runs as it is.

use std::sync::Arc;
use std::time::Duration;

use super::world::Simulation;
use crate::dist::Transport;

/// One rank's end of the simulated network.
pub(crate) struct SimTransport {
    world: Arc<Simulation>,
    rank: usize,
}

impl SimTransport {
    pub(crate) fn new(world: Arc<Simulation>, rank: usize) -> SimTransport {
        SimTransport { world, rank }
    }
}

impl Transport for SimTransport {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.world.platform.ranks()
    }

    fn send(&self, to: usize, msg: Vec<u8>) {
        let bytes = msg.len() as u64;
        self.world.send_message(self.rank, to, msg, bytes);
    }

    fn send_charged(&self, to: usize, msg: Vec<u8>, virtual_bytes: u64) {
        let bytes = msg.len() as u64 + virtual_bytes;
        self.world.send_message(self.rank, to, msg, bytes);
    }

    fn recv(&self, _timeout: Duration) -> Option<(usize, Vec<u8>)> {
        // Messages are delivered by the event loop (`Net::deliver`).
        None
    }

    fn pending_sends(&self) -> usize {
        self.world.pending_sends(self.rank)
    }
}
