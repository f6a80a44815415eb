//! Per-rank figures of a distributed run: tasks, busy time, messages and
//! bytes each way, and the time a rank waited on the network (a receive
//! outstanding while none of its workers ran a task). Interval sets here are
//! kept sorted and disjoint (by [`union`]) before they are measured.

use super::RankStats;
use crate::trace::model::{MessageDir, Nanos, Trace};

/// Sorted, disjoint intervals covering the same time as `iv`.
fn union(mut iv: Vec<(Nanos, Nanos)>) -> Vec<(Nanos, Nanos)> {
    iv.sort_unstable();
    let mut out: Vec<(Nanos, Nanos)> = Vec::with_capacity(iv.len());
    for (s, e) in iv {
        let e = e.max(s);
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// Total length of `a` minus `b`, both sorted and disjoint (from [`union`]).
pub(super) fn measure_minus(a: &[(Nanos, Nanos)], b: &[(Nanos, Nanos)]) -> Nanos {
    let mut total = 0;
    let mut k = 0;
    for &(s, e) in a {
        let mut cur = s;
        while k < b.len() && b[k].1 <= cur {
            k += 1;
        }
        let mut j = k;
        while cur < e {
            match b.get(j) {
                Some(&(bs, be)) if bs < e => {
                    if bs > cur {
                        total += bs - cur;
                    }
                    cur = cur.max(be);
                    j += 1;
                }
                _ => {
                    total += e - cur;
                    cur = e;
                }
            }
        }
    }
    total
}

pub(super) fn rank_stats(trace: &Trace) -> Vec<RankStats> {
    let wranks = trace.worker_ranks();
    let mut ranks: Vec<u32> = wranks
        .iter()
        .copied()
        .chain(trace.ranks.iter().map(|r| r.rank))
        .chain(trace.messages.iter().map(|m| m.rank))
        .collect();
    ranks.sort_unstable();
    ranks.dedup();
    let slot = |r: u32| ranks.binary_search(&r).expect("every rank listed");
    let mut out: Vec<RankStats> = ranks
        .iter()
        .map(|&rank| RankStats {
            rank,
            ..RankStats::default()
        })
        .collect();
    let mut busy: Vec<Vec<(Nanos, Nanos)>> = vec![Vec::new(); ranks.len()];
    let mut waiting: Vec<Vec<(Nanos, Nanos)>> = vec![Vec::new(); ranks.len()];
    for &r in &wranks {
        out[slot(r)].workers += 1;
    }
    for t in &trace.tasks {
        let k = slot(wranks[t.worker as usize]);
        out[k].tasks += usize::from(t.team_rank == 0);
        busy[k].push((t.start, t.end));
    }
    for m in &trace.messages {
        let k = slot(m.rank);
        let s = &mut out[k];
        match m.dir {
            MessageDir::Send => {
                s.sent += 1;
                s.bytes_sent += m.bytes;
            }
            MessageDir::Recv => {
                s.received += 1;
                s.bytes_received += m.bytes;
                waiting[k].push((m.start, m.end));
            }
        }
    }
    for (k, s) in out.iter_mut().enumerate() {
        let b = union(std::mem::take(&mut busy[k]));
        s.busy = b.iter().map(|(s, e)| e - s).sum();
        s.network_wait = measure_minus(&union(std::mem::take(&mut waiting[k])), &b);
    }
    out
}
