//! A sum all-reduce as tasks, which no thread waits for: one *send* task computes this
//! rank's part (after the tasks it is given) and hands it to every other rank; one *combine*
//! task, held until every other rank's part of the same reduction has arrived (the way the
//! halo exchange's receive is, `super::halo`), sums the parts in rank order, so every rank
//! gets bit-identical sums, as `super::Collectives::allreduce_sum` does, and hands them on.
//! Tasks that need the sums go after the combine; everything else (an SpMV, say) runs while
//! the messages are on the way, and no worker blocks on the network.
//!
//! Reductions are numbered in submission order (the same on every rank), and messages carry
//! the number, so a part of a later reduction that comes early waits for its combine.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::gather::{self, Duplicate, Gather};
use super::net::{Channel, Net};
use super::wire::Reader;
use crate::access::Dynamic;
use crate::codelet::Codelet;
use crate::error::{BodyError, Error};
use crate::runtime::Runtime;
use crate::task::{TaskBuilder, TaskHandle};
use crate::util::lock;

/// Ranks' parts of one reduction: (rank, values).
type Parts = gather::Parts<Vec<f64>>;

/// The sums a combine hands on, then what it does with them.
pub type Then = Box<dyn FnOnce(&[f64]) -> Result<(), BodyError> + Send>;
/// What a send task computes: this rank's part.
pub type Part = Box<dyn FnOnce() -> Vec<f64> + Send>;

/// Sum all-reduces over every rank of a network, as tasks (see the module doc).
pub struct AsyncAllreduce {
    net: Arc<Net>,
    ch: Channel,
    state: Arc<Mutex<Gather<Vec<f64>>>>,
    /// Number of the next reduction (the same on every rank).
    next: AtomicU64,
    send: Codelet<Dynamic, u64>,
    combine: Codelet<Dynamic, u64>,
}

impl AsyncAllreduce {
    /// Open its channel over `net` (every rank in the same order relative to its other
    /// channels).
    pub fn new(net: &Arc<Net>) -> AsyncAllreduce {
        let state: Arc<Mutex<Gather<Vec<f64>>>> =
            Arc::new(Mutex::new(Gather::new(Arc::clone(net.transport()))));
        let ch = net.channel().named("allreduce");
        let (st, net2, ch2, others) = (
            Arc::clone(&state),
            Arc::clone(net),
            ch.clone(),
            net.size() - 1,
        );
        ch.on_message(move |from, body| {
            let result = (|| -> Result<(), String> {
                let mut r = Reader::new(body);
                let seq = r.u64()?;
                let values: Vec<f64> = r
                    .rest()
                    .chunks_exact(8)
                    .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")))
                    .collect();
                let (posted, ready) = lock(&st)
                    .arrive(seq, from, values, others)
                    .map_err(|Duplicate| format!("two parts of all-reduce {seq}"))?;
                ch2.record_recv(from, body.len() + 4, posted);
                if let Some(hold) = ready {
                    hold.release();
                }
                Ok(())
            })();
            if let Err(e) = result {
                net2.abort(&format!("all-reduce message from rank {from}: {e}"));
            }
        });
        AsyncAllreduce {
            net: Arc::clone(net),
            ch,
            state,
            next: AtomicU64::new(0),
            send: Codelet::with_args("allreduce-send")
                .label_args(|seq| format!("allreduce-send({seq})")),
            combine: Codelet::with_args("allreduce-combine")
                .label_args(|seq| format!("allreduce-combine({seq})")),
        }
    }

    /// Submit one reduction on `rt`: after every task of `after`, `part()` is this rank's
    /// part (every rank must give as many values); the sums over the ranks, in rank order,
    /// go to `then`, run by the combine task, whose handle this returns. Does not wait.
    /// Every rank must submit the same reductions in the same order.
    pub fn submit(
        &self,
        rt: &Runtime,
        after: &[TaskHandle],
        part: Part,
        then: Then,
    ) -> Result<TaskHandle, Error> {
        let seq = self.next.fetch_add(1, Ordering::Relaxed);
        rt.watch_network(self.net.transport());
        let (me, size) = (self.net.rank(), self.net.size());
        let mine: Arc<Mutex<Vec<f64>>> = Arc::default();
        let mut send = TaskBuilder::with_args(&self.send, seq).cpu_only();
        for t in after {
            send = send.after(t);
        }
        let (ch, m, st) = (self.ch.clone(), Arc::clone(&mine), Arc::clone(&self.state));
        let send = rt.submit(send.body(move |_| {
            let v = part();
            let start = ch.now();
            for to in (0..size).filter(|&r| r != me) {
                let mut w = ch.writer(8 + 8 * v.len());
                w.u64(seq);
                for x in &v {
                    w.0.extend_from_slice(&x.to_le_bytes());
                }
                ch.send_since(to, w, start);
            }
            lock(&st).sent(seq, size - 1);
            *lock(&m) = v;
            Ok(())
        }))?;
        let slot: Arc<Mutex<Parts>> = Arc::default();
        let s2 = Arc::clone(&slot);
        let combine = TaskBuilder::with_args(&self.combine, seq)
            .cpu_only()
            .after(&send)
            .body(move |_| {
                let mut parts = std::mem::take(&mut *lock(&s2));
                let v = std::mem::take(&mut *lock(&mine));
                parts.push((me, v));
                parts.sort_by_key(|(r, _)| *r);
                let n = parts[0].1.len();
                let mut sums = vec![0.0; n];
                for (rank, p) in &parts {
                    if p.len() != n {
                        return Err(format!(
                            "all-reduce {seq}: rank {rank} gave {} values, rank {} gave {n}",
                            p.len(),
                            parts[0].0
                        )
                        .into());
                    }
                    for (s, x) in sums.iter_mut().zip(p) {
                        *s += x;
                    }
                }
                then(&sums)
            });
        if size == 1 {
            return rt.submit(combine);
        }
        let (handle, hold) = rt.submit_held(combine)?;
        let ready = lock(&self.state).post(seq, hold, slot, size - 1, self.ch.now());
        if let Some(hold) = ready {
            hold.release();
        }
        Ok(handle)
    }
}

impl Drop for AsyncAllreduce {
    fn drop(&mut self) {
        self.ch.close();
    }
}

#[cfg(test)]
mod tests {
    // Proves that every rank gets the same sums, summed in rank order, at 1..4 ranks, for
    // reductions submitted back to back without dependencies (so parts of later ones come
    // early and combines run in any order).
    use super::*;
    use crate::dist::{halo, local};

    #[test]
    fn every_rank_gets_the_rank_order_sums() {
        const K: usize = 20;
        let part = |rank: usize, k: usize| vec![(rank * 10 + k) as f64, 0.1 * rank as f64 + 1e-17];
        for ranks in 1..=4 {
            let handles: Vec<_> = local::world(ranks)
                .into_iter()
                .enumerate()
                .map(|(rank, t)| {
                    std::thread::spawn(move || {
                        let net = Net::new(t);
                        let rt = Runtime::with_workers(2).unwrap();
                        let ar = AsyncAllreduce::new(&net);
                        let out: Arc<Mutex<Parts>> = Arc::default();
                        for k in 0..K {
                            let o = Arc::clone(&out);
                            ar.submit(
                                &rt,
                                &[],
                                Box::new(move || part(rank, k)),
                                Box::new(move |s| {
                                    lock(&o).push((k, s.to_vec()));
                                    Ok(())
                                }),
                            )
                            .unwrap();
                        }
                        halo::wait_all(&rt, &net).unwrap();
                        let mut v = std::mem::take(&mut *lock(&out));
                        v.sort_by_key(|(k, _)| *k);
                        v
                    })
                })
                .collect();
            let got: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
            for k in 0..K {
                let mut want = vec![0.0; 2];
                for r in 0..ranks {
                    for (w, x) in want.iter_mut().zip(part(r, k)) {
                        *w += x;
                    }
                }
                for (rank, g) in got.iter().enumerate() {
                    assert_eq!(g[k], (k, want.clone()), "{ranks} ranks, rank {rank}");
                }
            }
        }
    }
}
