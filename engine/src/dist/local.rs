//! A transport between threads of one process: `n` ranks, each an endpoint,
//! for tests of the distributed layer without MPI (and for simulation).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{Counters, Transport};
use crate::util::lock;

/// One rank's endpoint.
pub struct LocalTransport {
    rank: usize,
    peers: Vec<Sender<(usize, Vec<u8>)>>,
    inbox: Mutex<Receiver<(usize, Vec<u8>)>>,
    sent: AtomicU64,
    bytes_sent: AtomicU64,
    received: AtomicU64,
    bytes_received: AtomicU64,
}

/// `n` connected endpoints, rank `i` at index `i`.
pub fn world(n: usize) -> Vec<Arc<LocalTransport>> {
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..n).map(|_| channel()).unzip();
    rxs.into_iter()
        .enumerate()
        .map(|(rank, rx)| {
            Arc::new(LocalTransport {
                rank,
                peers: txs.clone(),
                inbox: Mutex::new(rx),
                sent: AtomicU64::new(0),
                bytes_sent: AtomicU64::new(0),
                received: AtomicU64::new(0),
                bytes_received: AtomicU64::new(0),
            })
        })
        .collect()
}

impl Transport for LocalTransport {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.peers.len()
    }

    fn send(&self, to: usize, msg: Vec<u8>) {
        self.sent.fetch_add(1, Ordering::Relaxed);
        self.bytes_sent
            .fetch_add(msg.len() as u64, Ordering::Relaxed);
        // A peer that finished and dropped its endpoint receives nothing.
        let _ = self.peers[to].send((self.rank, msg));
    }

    fn recv(&self, timeout: Duration) -> Option<(usize, Vec<u8>)> {
        let m = lock(&self.inbox).recv_timeout(timeout).ok()?;
        self.received.fetch_add(1, Ordering::Relaxed);
        self.bytes_received
            .fetch_add(m.1.len() as u64, Ordering::Relaxed);
        Some(m)
    }

    fn pending_sends(&self) -> usize {
        0
    }

    fn counters(&self) -> Counters {
        Counters {
            sent: self.sent.load(Ordering::Relaxed),
            bytes_sent: self.bytes_sent.load(Ordering::Relaxed),
            received: self.received.load(Ordering::Relaxed),
            bytes_received: self.bytes_received.load(Ordering::Relaxed),
        }
    }
}

/// For tests of `Transport::awaiting`: a local endpoint that counts the exchanges its
/// rank awaits (now, and the most at once).
#[cfg(test)]
pub(crate) struct Counting {
    inner: Arc<LocalTransport>,
    pub(crate) now: std::sync::atomic::AtomicIsize,
    pub(crate) most: std::sync::atomic::AtomicIsize,
}

#[cfg(test)]
impl Counting {
    pub(crate) fn new(inner: Arc<LocalTransport>) -> Arc<Counting> {
        Arc::new(Counting {
            inner,
            now: Default::default(),
            most: Default::default(),
        })
    }
}

#[cfg(test)]
impl Transport for Counting {
    fn rank(&self) -> usize {
        self.inner.rank()
    }
    fn size(&self) -> usize {
        self.inner.size()
    }
    fn send(&self, to: usize, msg: Vec<u8>) {
        self.inner.send(to, msg)
    }
    fn recv(&self, timeout: Duration) -> Option<(usize, Vec<u8>)> {
        self.inner.recv(timeout)
    }
    fn pending_sends(&self) -> usize {
        self.inner.pending_sends()
    }
    fn awaiting(&self, delta: isize) {
        let now = self.now.fetch_add(delta, Ordering::SeqCst) + delta;
        self.most.fetch_max(now, Ordering::SeqCst);
    }
}
