//! Release latency: how long each task waited to start after its last
//! predecessor on its own rank ended. In a run whose workers are not all
//! busy, that is what a local dependency costs the runtime: completing the
//! predecessor, releasing the task, queueing it, waking or reaching a
//! worker, popping it. (A task that waited for a free worker waited for
//! that too.) Split by where the task ran: on the worker that ran that
//! predecessor (it took the task from its own queue), or on another (it
//! stole the task, or was woken for it), the two paths whose costs differ.
//! Edges across ranks are left out: they have their own line
//! ([`remote`](crate::trace::remote)).

use std::collections::HashMap;

use crate::trace::model::Trace;
use crate::trace::remote::{nearest_rank, task_index, task_ranks};

/// Latencies of the tasks that ran after one of the tasks on their rank
/// (signed ns: negative only in a trace whose records disagree).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReleaseLatency {
    /// Tasks with a predecessor on their rank.
    pub count: usize,
    /// Median, 90th and 99th percentile (nearest rank).
    pub median: Option<i64>,
    /// See `median`.
    pub p90: Option<i64>,
    /// See `median`.
    pub p99: Option<i64>,
    /// Tasks run by the worker that ran their last-ending predecessor.
    pub same_worker: LatencySplit,
    /// Tasks run by another worker than that predecessor's.
    pub other_worker: LatencySplit,
}

/// One side of [`ReleaseLatency`]'s split.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LatencySplit {
    /// Tasks on this side.
    pub count: usize,
    /// Their median latency (nearest rank).
    pub median: Option<i64>,
}

/// The release latency of `trace`'s tasks; `None` when no task has a
/// recorded predecessor on its own rank.
pub(super) fn release_latency(trace: &Trace) -> Option<ReleaseLatency> {
    let tasks = &trace.tasks;
    let ranks = task_ranks(trace);
    let index = task_index(trace);
    // Each task's last-ending predecessor on its rank.
    let mut last: HashMap<usize, usize> = HashMap::new();
    for (a, b) in &trace.edges {
        let (Some(&from), Some(&to)) = (index.get(a), index.get(b)) else {
            continue;
        };
        if ranks[from] != ranks[to] {
            continue;
        }
        let pred = last.entry(to).or_insert(from);
        if tasks[from].end > tasks[*pred].end {
            *pred = from;
        }
    }
    if last.is_empty() {
        return None;
    }
    let (mut all, mut same, mut other) = (Vec::new(), Vec::new(), Vec::new());
    for (&to, &from) in &last {
        let (p, t) = (&tasks[from], &tasks[to]);
        // Times are at most 2^53 ns (the readers' bound): no overflow.
        let latency = t.start as i64 - p.end as i64;
        all.push(latency);
        match p.worker == t.worker {
            true => same.push(latency),
            false => other.push(latency),
        }
    }
    for v in [&mut all, &mut same, &mut other] {
        v.sort_unstable();
    }
    let split = |v: &[i64]| LatencySplit {
        count: v.len(),
        median: nearest_rank(v, 0.5),
    };
    Some(ReleaseLatency {
        count: all.len(),
        median: nearest_rank(&all, 0.5),
        p90: nearest_rank(&all, 0.9),
        p99: nearest_rank(&all, 0.99),
        same_worker: split(&same),
        other_worker: split(&other),
    })
}
