//! Collective operations over point-to-point messages: all-to-all and
//! all-gather, and on them barrier, sum all-reduce and the start-up check
//! that every rank runs with the same parameters. Each rank sends its part to every other rank
//! directly (R−1 messages per rank: fine at the rank counts a node or a
//! small cluster has; a tree would be the next step). Results are combined
//! in rank order on every rank, so every rank gets bit-identical sums.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::net::{Channel, Net};
use super::wire::Reader;
use crate::util::lock;

use super::Awaiting;

/// The collectives of one group of ranks (all of them), on their own channel.
pub struct Collectives {
    net: Arc<Net>,
    ch: Channel,
    rx: Mutex<Receiver<(usize, Vec<u8>)>>,
    /// Sequence number of the next operation (the same on every rank).
    seq: AtomicU64,
    /// Parts of later operations that arrived early: (from, seq, body).
    early: Mutex<Vec<(usize, u64, Vec<u8>)>>,
}

impl Collectives {
    /// Open the collectives' channel (every rank in the same order).
    pub fn new(net: &Arc<Net>) -> Collectives {
        let (ch, rx) = net.open_mailbox();
        Collectives {
            net: Arc::clone(net),
            ch: ch.named("collective"),
            rx: Mutex::new(rx),
            seq: AtomicU64::new(0),
            early: Mutex::new(Vec::new()),
        }
    }

    /// Every rank's `value`, in rank order (this rank's included).
    pub fn allgather(&self, value: &[u8]) -> Result<Vec<Vec<u8>>, String> {
        self.exchange(|_| value)
    }

    /// Personalised all-to-all: this rank sends `parts[r]` to rank `r`
    /// (`parts.len()` must be the number of ranks) and gets back, in rank
    /// order, what each rank sent it (its own part included).
    pub fn alltoall(&self, parts: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, String> {
        if parts.len() != self.net.size() {
            return Err(format!(
                "all-to-all: {} parts for {} ranks",
                parts.len(),
                self.net.size()
            ));
        }
        self.exchange(|r| &parts[r])
    }

    /// All-gather among `ranks` only (this rank among them; every member calls it with the
    /// same `ranks`, in the same order, and the same `tag`): every member's `part`, in the
    /// order of `ranks`. Tags tell one exchange from another, so members may be in
    /// different exchanges of this channel at once (the distributed LU's panels, each
    /// among the ranks of its process column). Use a `Collectives` either with tags or with
    /// the numbered operations above, not both: their numbers would mix.
    ///
    /// # Errors
    /// Another rank aborted, the network shut down, or this rank is not in `ranks`.
    pub fn allgather_among(
        &self,
        ranks: &[usize],
        tag: u64,
        part: &[u8],
    ) -> Result<Vec<Vec<u8>>, String> {
        let me = self.net.rank();
        let at = ranks.iter().position(|&r| r == me).ok_or_else(|| {
            format!("all-gather {tag} among ranks {ranks:?}: rank {me} is not one of them")
        })?;
        let mut parts = self.gather(tag, ranks, |_| part)?;
        parts[at] = part.to_vec();
        Ok(parts)
    }

    /// Sends `part(r)` to every other rank `r` and waits for theirs.
    fn exchange<'a>(&self, part: impl Fn(usize) -> &'a [u8]) -> Result<Vec<Vec<u8>>, String> {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        let all: Vec<usize> = (0..self.net.size()).collect();
        let mut out = self.gather(seq, &all, &part)?;
        out[self.net.rank()] = part(self.net.rank()).to_vec();
        Ok(out)
    }

    /// Sends `part(r)` to every other member `r` of `ranks` under `tag` and waits for
    /// theirs: the parts in the order of `ranks` (this rank's own left empty).
    fn gather<'a>(
        &self,
        tag: u64,
        ranks: &[usize],
        part: impl Fn(usize) -> &'a [u8],
    ) -> Result<Vec<Vec<u8>>, String> {
        let me = self.net.rank();
        let since = self.ch.now();
        for &to in ranks.iter().filter(|&&r| r != me) {
            let value = part(to);
            let mut w = self.ch.writer(8 + value.len());
            w.u64(tag);
            w.0.extend_from_slice(value);
            self.ch.send(to, w);
        }
        let slot = |from: usize| ranks.iter().position(|&r| r == from);
        let mut out: Vec<Option<Vec<u8>>> = vec![None; ranks.len()];
        if let Some(at) = slot(me) {
            out[at] = Some(Vec::new());
        }
        let mut missing = out.iter().filter(|o| o.is_none()).count();
        // Parts of this operation that came early.
        lock(&self.early).retain(|(from, s, body)| match slot(*from) {
            Some(at) if *s == tag && out[at].is_none() => {
                out[at] = Some(body.clone());
                missing -= 1;
                false
            }
            _ => true,
        });
        let rx = lock(&self.rx);
        // This rank now waits for the others' parts: the transport may poll for them
        // more often meanwhile (`Transport::awaiting`), until this function returns.
        let _awaiting = (missing > 0).then(|| Awaiting::new(self.net.transport()));
        let transport = self.net.transport();
        let mut polls = 0u32;
        while missing > 0 {
            if let Some(a) = self.net.aborted() {
                return Err(a);
            }
            // A transport this thread may poll (MPI) is polled here, as an idle
            // worker watching it would: the parts reach this wait with no thread
            // woken (`crate::watch`); else the routing thread delivers them.
            let received = if transport.polled() {
                match rx.try_recv() {
                    Ok(m) => Ok(m),
                    Err(TryRecvError::Empty) => {
                        if !transport.poll() {
                            crate::watch::pause(&mut polls);
                        }
                        Err(RecvTimeoutError::Timeout)
                    }
                    Err(TryRecvError::Disconnected) => Err(RecvTimeoutError::Disconnected),
                }
            } else {
                rx.recv_timeout(Duration::from_millis(20))
            };
            match received {
                Ok((from, msg)) => {
                    let mut r = Reader::new(&msg);
                    let s = r.u64()?;
                    let body = r.rest().to_vec();
                    match slot(from) {
                        Some(at) if s == tag && out[at].is_none() => {
                            self.ch.record_recv(from, msg.len() + 4, since);
                            out[at] = Some(body);
                            missing -= 1;
                        }
                        _ => {
                            self.ch.record_recv(from, msg.len() + 4, None);
                            lock(&self.early).push((from, s, body));
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    return Err("the network was shut down during a collective".into())
                }
            }
        }
        Ok(out
            .into_iter()
            .map(|v| v.expect("all parts arrived"))
            .collect())
    }

    /// Wait until every rank got here.
    pub fn barrier(&self) -> Result<(), String> {
        self.allgather(&[]).map(|_| ())
    }

    /// `v := Σ over ranks of v`, summed in rank order on every rank.
    pub fn allreduce_sum(&self, v: &mut [f64]) -> Result<(), String> {
        let mine: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        let all = self.allgather(&mine)?;
        v.iter_mut().for_each(|x| *x = 0.0);
        for (rank, part) in all.iter().enumerate() {
            if part.len() != mine.len() {
                return Err(format!(
                    "all-reduce: rank {rank} contributed {} values, this rank {}",
                    part.len() / 8,
                    v.len()
                ));
            }
            for (x, b) in v.iter_mut().zip(part.chunks_exact(8)) {
                *x += f64::from_le_bytes(b.try_into().expect("8 bytes"));
            }
        }
        Ok(())
    }

    /// Every rank's `v`, in rank order.
    pub fn allgather_f64(&self, v: f64) -> Result<Vec<f64>, String> {
        self.allgather(&v.to_le_bytes())?
            .iter()
            .enumerate()
            .map(|(rank, b)| {
                let bytes: [u8; 8] = b.as_slice().try_into().map_err(|_| {
                    format!(
                        "all-gather: rank {rank} contributed {} bytes, not one value",
                        b.len()
                    )
                })?;
                Ok(f64::from_le_bytes(bytes))
            })
            .collect()
    }

    /// The largest `v` over ranks.
    pub fn allreduce_max(&self, v: u64) -> Result<u64, String> {
        let all = self.allgather(&v.to_le_bytes())?;
        Ok(all
            .iter()
            .filter_map(|b| b.as_slice().try_into().ok().map(u64::from_le_bytes))
            .max()
            .unwrap_or(v))
    }

    /// Refuse to go on unless every rank has the same `value` for `what`
    /// (e.g. `"N=8192 NB=448 seed=1"`): the error names the first rank that
    /// differs from rank 0, and both values.
    pub fn check_same(&self, what: &str, value: &str) -> Result<(), String> {
        let all = self.allgather(value.as_bytes())?;
        let first = String::from_utf8_lossy(&all[0]).into_owned();
        for (rank, v) in all.iter().enumerate().skip(1) {
            let v = String::from_utf8_lossy(v);
            if v != first {
                return Err(format!(
                    "ranks disagree on {what}: rank 0 has '{first}', rank {rank} has '{v}'"
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    // Proves that a blocking collective counts itself as awaited in the transport while it
    // waits for another rank's part, and not after it returns.
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use super::*;
    use crate::dist::local::{self, Counting};
    use crate::dist::Transport;

    #[test]
    fn a_collective_is_awaited_while_it_waits() {
        let handles: Vec<_> = local::world(2)
            .into_iter()
            .map(|inner| {
                std::thread::spawn(move || {
                    let rank = inner.rank();
                    let t = Counting::new(inner);
                    let net = Net::new(Arc::clone(&t) as Arc<dyn Transport>);
                    let c = Collectives::new(&net);
                    if rank == 1 {
                        // Rank 0 waits for this part.
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    c.allgather_among(&[0, 1], 7, &[rank as u8]).unwrap();
                    (
                        rank,
                        t.now.load(Ordering::SeqCst),
                        t.most.load(Ordering::SeqCst),
                    )
                })
            })
            .collect();
        for h in handles {
            let (rank, now, most) = h.join().unwrap();
            assert_eq!(now, 0, "rank {rank}: still counted after the collective");
            if rank == 0 {
                assert_eq!(most, 1, "rank 0 waited without being counted");
            }
        }
    }
}
