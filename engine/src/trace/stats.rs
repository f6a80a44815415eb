//! Run statistics from a trace: makespan, busy time per worker, time per
//! codelet, critical path, and efficiency against the two lower bounds; for
//! a distributed run, per rank: messages, bytes and time waiting on the network.

use std::collections::HashMap;
use std::fmt;

use super::model::{MessageDir, Nanos, Trace};
use super::remote::EdgeLatency;
use crate::fmt::duration_ns;

/// Time one worker spent running tasks.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkerStats {
    /// [`WorkerInfo::name`](super::model::WorkerInfo::name), after its rank
    /// in a trace of several ranks (`r1 cpu0`), or `#i` for a worker index
    /// that tasks use but the trace does not list ([`Trace::worker_labels`]).
    pub name: String,
    /// Tasks it ran.
    pub tasks: usize,
    /// Time covered by its tasks (overlapping tasks counted once).
    pub busy: Nanos,
    /// `busy` as a percentage of the makespan.
    pub busy_pct: f64,
    /// `100 - busy_pct`.
    pub idle_pct: f64,
}

/// Time spent in one codelet, over all workers.
#[derive(Clone, Debug, PartialEq)]
pub struct CodeletStats {
    /// Codelet name.
    pub codelet: String,
    /// Tasks of this codelet.
    pub count: usize,
    /// Sum of their durations.
    pub total: Nanos,
    /// `total / count`, in ns.
    pub mean: f64,
    /// Sum of their declared flops.
    pub flops: f64,
    /// `flops / total` in GFLOP/s; `None` when no flops were declared or no time was spent.
    pub gflops: Option<f64>,
}

/// Data movement between memory nodes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TransferStats {
    /// Number of transfers.
    pub count: usize,
    /// Bytes moved.
    pub bytes: u64,
    /// Sum of transfer durations (concurrent transfers add up).
    pub time: Nanos,
    /// `bytes / time` in GB/s; `None` when no time was spent.
    pub gbytes_per_s: Option<f64>,
}

/// One rank of a distributed run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RankStats {
    /// The rank.
    pub rank: u32,
    /// Its workers.
    pub workers: usize,
    /// Tasks its workers ran.
    pub tasks: usize,
    /// Time during which at least one of its workers ran a task.
    pub busy: Nanos,
    /// Messages it sent, and their bytes.
    pub sent: u64,
    /// Bytes of the messages it sent.
    pub bytes_sent: u64,
    /// Messages it received.
    pub received: u64,
    /// Bytes of the messages it received.
    pub bytes_received: u64,
    /// Time during which one of its receives was outstanding (see
    /// [`MessageRecord`](super::model::MessageRecord)) while none of its
    /// workers ran a task: the time it waited on the network.
    pub network_wait: Nanos,
}

/// Statistics of one recorded run; [`fmt::Display`] prints them as a report.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceStats {
    /// Tasks in the trace.
    pub tasks: usize,
    /// Start of the first task (0 when there are none).
    pub first_start: Nanos,
    /// End of the last task (0 when there are none).
    pub last_end: Nanos,
    /// `last_end - first_start`.
    pub makespan: Nanos,
    /// Sum of all task durations.
    pub total_work: Nanos,
    /// One entry per worker, in worker index order.
    pub workers: Vec<WorkerStats>,
    /// One entry per codelet, most total time first.
    pub codelets: Vec<CodeletStats>,
    /// Transfers.
    pub transfers: TransferStats,
    /// Longest path through the dependency edges, weighted by task durations.
    /// `None` when the trace has no edges or the edges form a cycle
    /// (see [`TraceStats::cyclic_tasks`]).
    pub critical_path: Option<Nanos>,
    /// Task ids along the critical path, first to last (empty when `critical_path` is `None`).
    pub critical_path_tasks: Vec<u64>,
    /// `total_work / workers`, in ns: no schedule can beat it.
    pub area_bound: f64,
    /// `max(critical_path, area_bound) / makespan`: 1.0 means the schedule
    /// met the best lower bound. `None` when the makespan is 0.
    pub efficiency: Option<f64>,
    /// Edges that name a task id not in the trace; left out of the critical path.
    pub ignored_edges: usize,
    /// Tasks that are on a dependency cycle or after one; non-zero means the
    /// edges are not a DAG and the critical path was not computed.
    pub cyclic_tasks: usize,
    /// Tasks whose id repeats an earlier task's; edges use the first one.
    pub duplicate_ids: usize,
    /// Per rank, in rank order: empty unless the trace comes from a
    /// distributed run ([`Trace::is_distributed`]).
    pub ranks: Vec<RankStats>,
    /// The remote edges of a trace of several ranks and their latencies,
    /// from the end of the sending task to the start of the receiving one
    /// ([`remote`](super::remote)); `None` for a trace of one rank.
    pub remote_edges: Option<EdgeLatency>,
}

impl TraceStats {
    /// The larger of the two lower bounds on the makespan, in ns.
    pub fn lower_bound(&self) -> f64 {
        self.critical_path
            .map_or(self.area_bound, |cp| self.area_bound.max(cp as f64))
    }

    /// Human-readable problems found in the trace (empty when none).
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if self.ignored_edges > 0 {
            w.push(format!(
                "{} dependency edge(s) name unknown task ids; ignored",
                self.ignored_edges
            ));
        }
        if self.cyclic_tasks > 0 {
            w.push(format!(
                "the dependency edges form a cycle ({} task(s) on or after it); \
                 critical path not computed",
                self.cyclic_tasks
            ));
        }
        if self.duplicate_ids > 0 {
            w.push(format!(
                "{} task(s) reuse an earlier task's id; edges refer to the first",
                self.duplicate_ids
            ));
        }
        w
    }
}

/// Computes the statistics of `trace`. O(T log T + E) for T tasks and E edges.
pub fn stats(trace: &Trace) -> TraceStats {
    let tasks = &trace.tasks;
    let dur = |i: usize| tasks[i].end.saturating_sub(tasks[i].start);
    let first_start = tasks.iter().map(|t| t.start).min().unwrap_or(0);
    let last_end = tasks.iter().map(|t| t.end).max().unwrap_or(0);
    let makespan = last_end.saturating_sub(first_start);
    let total_work: Nanos = (0..tasks.len()).map(dur).fold(0, Nanos::saturating_add);

    let workers = worker_stats(trace, makespan);
    let codelets = codelet_stats(trace);
    let transfers = transfer_stats(trace);
    let path = critical_path(trace);

    let area_bound = if workers.is_empty() {
        0.0
    } else {
        total_work as f64 / workers.len() as f64
    };
    let mut s = TraceStats {
        // A team task once (its members' records are busy time, not tasks).
        tasks: tasks.iter().filter(|t| t.team_rank == 0).count(),
        first_start,
        last_end,
        makespan,
        total_work,
        workers,
        codelets,
        transfers,
        critical_path: path.length,
        critical_path_tasks: path.tasks,
        area_bound,
        efficiency: None,
        ignored_edges: path.ignored_edges,
        cyclic_tasks: path.cyclic_tasks,
        duplicate_ids: path.duplicate_ids,
        ranks: if trace.is_distributed() {
            rank_stats(trace)
        } else {
            Vec::new()
        },
        remote_edges: (trace.ranks.len() > 1)
            .then(|| super::remote::edge_latency(trace, &super::remote::remote_edges(trace))),
    };
    if makespan > 0 {
        s.efficiency = Some(s.lower_bound() / makespan as f64);
    }
    s
}

/// `ns` as [`duration_ns`] writes it, with a `-` when negative.
fn signed_duration(ns: i64) -> String {
    let text = duration_ns(ns.unsigned_abs() as f64);
    if ns < 0 {
        format!("-{text}")
    } else {
        text
    }
}

fn pct(part: Nanos, whole: Nanos) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

fn worker_stats(trace: &Trace, makespan: Nanos) -> Vec<WorkerStats> {
    let n = trace.worker_count();
    let names = trace.worker_labels();
    let mut intervals: Vec<Vec<(Nanos, Nanos)>> = vec![Vec::new(); n];
    for t in &trace.tasks {
        intervals[t.worker as usize].push((t.start, t.end.max(t.start)));
    }
    intervals
        .into_iter()
        .enumerate()
        .map(|(i, mut iv)| {
            // Union of intervals: a worker's tasks should not overlap, but if a
            // recorder makes them, busy time must still not exceed the makespan.
            iv.sort_unstable();
            let (mut busy, mut cur): (Nanos, Option<(Nanos, Nanos)>) = (0, None);
            for &(s, e) in &iv {
                cur = match cur {
                    Some((cs, ce)) if s <= ce => Some((cs, ce.max(e))),
                    Some((cs, ce)) => {
                        busy = busy.saturating_add(ce - cs);
                        Some((s, e))
                    }
                    None => Some((s, e)),
                };
            }
            busy = busy.saturating_add(cur.map_or(0, |(s, e)| e - s));
            let busy_pct = pct(busy, makespan);
            WorkerStats {
                name: names[i].clone(),
                tasks: iv.len(),
                busy,
                busy_pct,
                idle_pct: if makespan == 0 { 0.0 } else { 100.0 - busy_pct },
            }
        })
        .collect()
}

fn codelet_stats(trace: &Trace) -> Vec<CodeletStats> {
    let mut by_name: HashMap<&str, (usize, Nanos, f64)> = HashMap::new();
    for t in trace.tasks.iter().filter(|t| t.team_rank == 0) {
        let e = by_name.entry(&t.codelet).or_default();
        e.0 += 1;
        e.1 = e.1.saturating_add(t.end.saturating_sub(t.start));
        if t.flops.is_finite() {
            e.2 += t.flops;
        }
    }
    let mut v: Vec<CodeletStats> = by_name
        .into_iter()
        .map(|(name, (count, total, flops))| CodeletStats {
            codelet: name.to_owned(),
            count,
            total,
            mean: total as f64 / count as f64,
            flops,
            // flop per ns = GFLOP/s
            gflops: (flops > 0.0 && total > 0).then(|| flops / total as f64),
        })
        .collect();
    v.sort_by(|a, b| {
        b.total
            .cmp(&a.total)
            .then_with(|| a.codelet.cmp(&b.codelet))
    });
    v
}

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
fn measure_minus(a: &[(Nanos, Nanos)], b: &[(Nanos, Nanos)]) -> Nanos {
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

fn rank_stats(trace: &Trace) -> Vec<RankStats> {
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

fn transfer_stats(trace: &Trace) -> TransferStats {
    let bytes = trace
        .transfers
        .iter()
        .map(|x| x.bytes)
        .fold(0, u64::saturating_add);
    let time = trace
        .transfers
        .iter()
        .map(|x| x.end.saturating_sub(x.start))
        .fold(0, u64::saturating_add);
    TransferStats {
        count: trace.transfers.len(),
        bytes,
        time,
        // byte per ns = GB/s
        gbytes_per_s: (time > 0).then(|| bytes as f64 / time as f64),
    }
}

struct PathResult {
    length: Option<Nanos>,
    tasks: Vec<u64>,
    ignored_edges: usize,
    cyclic_tasks: usize,
    duplicate_ids: usize,
}

/// Longest duration-weighted path, by Kahn's topological order: O(T + E).
/// Tasks left unvisited when the queue empties sit on or after a cycle.
fn critical_path(trace: &Trace) -> PathResult {
    let tasks = &trace.tasks;
    let n = tasks.len();
    let mut index: HashMap<u64, usize> = HashMap::with_capacity(n);
    let mut duplicate_ids = 0;
    // A team's members repeat its leader's id and times: the leader stands
    // for the task.
    for (i, t) in tasks.iter().enumerate().filter(|(_, t)| t.team_rank == 0) {
        match index.entry(t.id) {
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(i);
            }
            // The first task with an id keeps it.
            std::collections::hash_map::Entry::Occupied(_) => duplicate_ids += 1,
        }
    }
    let mut result = PathResult {
        length: None,
        tasks: Vec::new(),
        ignored_edges: 0,
        cyclic_tasks: 0,
        duplicate_ids,
    };
    if trace.edges.is_empty() {
        return result;
    }

    let edges: Vec<(usize, usize)> = trace
        .edges
        .iter()
        .filter_map(|(a, b)| Some((*index.get(a)?, *index.get(b)?)))
        .collect();
    // Edges from another rank's task (a remote edge seen from one rank's
    // trace) are expected to name an absent task: not counted as ignored.
    let local = trace
        .edges
        .iter()
        .filter(|(a, b)| (a | b) & crate::trace::model::REMOTE_TASK == 0)
        .count();
    result.ignored_edges = local.saturating_sub(edges.len());

    // Successor lists in CSR form.
    let mut offsets = vec![0usize; n + 1];
    let mut indegree = vec![0usize; n];
    for &(a, b) in &edges {
        offsets[a + 1] += 1;
        indegree[b] += 1;
    }
    for i in 0..n {
        offsets[i + 1] += offsets[i];
    }
    let mut fill = offsets.clone();
    let mut succ = vec![0usize; edges.len()];
    for &(a, b) in &edges {
        succ[fill[a]] = b;
        fill[a] += 1;
    }

    let dur = |i: usize| tasks[i].end.saturating_sub(tasks[i].start);
    // dist[v]: longest path ending with v, v included; final once v is dequeued.
    let mut dist: Vec<Nanos> = (0..n).map(dur).collect();
    let mut pred = vec![usize::MAX; n];
    let mut queue: Vec<usize> = (0..n).filter(|&i| indegree[i] == 0).collect();
    let mut head = 0;
    while head < queue.len() {
        let u = queue[head];
        head += 1;
        for &v in &succ[offsets[u]..offsets[u + 1]] {
            let through_u = dist[u].saturating_add(dur(v));
            if through_u > dist[v] || pred[v] == usize::MAX && through_u == dist[v] {
                dist[v] = through_u;
                pred[v] = u;
            }
            indegree[v] -= 1;
            if indegree[v] == 0 {
                queue.push(v);
            }
        }
    }
    if queue.len() < n {
        result.cyclic_tasks = n - queue.len();
        return result;
    }
    let Some(mut last) = (0..n).max_by_key(|&i| (dist[i], std::cmp::Reverse(i))) else {
        return result;
    };
    result.length = Some(dist[last]);
    let mut chain = vec![tasks[last].id];
    while pred[last] != usize::MAX {
        last = pred[last];
        chain.push(tasks[last].id);
    }
    chain.reverse();
    result.tasks = chain;
    result
}

impl fmt::Display for TraceStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nworkers = self.workers.len();
        writeln!(
            f,
            "Run: {} tasks on {} workers, {} transfers",
            self.tasks, nworkers, self.transfers.count
        )?;
        let critical = match (self.critical_path, self.cyclic_tasks) {
            (Some(cp), _) => format!(
                "{} over {} tasks",
                duration_ns(cp as f64),
                self.critical_path_tasks.len()
            ),
            (None, 0) => "unknown: no dependency edges recorded".to_owned(),
            (None, _) => "not computed: the dependency edges form a cycle".to_owned(),
        };
        let efficiency = match self.efficiency {
            Some(e) => format!(
                "{:.1} %  (max(critical path, area bound) / makespan)",
                100.0 * e
            ),
            None => "n/a (zero makespan)".to_owned(),
        };
        let summary = [
            ("makespan", duration_ns(self.makespan as f64)),
            ("total work", duration_ns(self.total_work as f64)),
            ("critical path", critical),
            (
                "area bound",
                format!(
                    "{}  (total work / {nworkers} workers)",
                    duration_ns(self.area_bound)
                ),
            ),
            ("efficiency", efficiency),
        ];
        for (k, v) in summary {
            writeln!(f, "  {k:<14} {v}")?;
        }

        if !self.workers.is_empty() {
            writeln!(f)?;
            let mut rows = vec![vec![
                "worker".to_owned(),
                "tasks".into(),
                "busy".into(),
                "busy %".into(),
                "idle %".into(),
            ]];
            rows.extend(self.workers.iter().map(|w| {
                vec![
                    w.name.clone(),
                    w.tasks.to_string(),
                    duration_ns(w.busy as f64),
                    format!("{:.1}", w.busy_pct),
                    format!("{:.1}", w.idle_pct),
                ]
            }));
            f.write_str(&crate::fmt::table(&rows, 1, "  "))?;
        }

        if !self.codelets.is_empty() {
            writeln!(f)?;
            let mut rows = vec![vec![
                "codelet".to_owned(),
                "count".into(),
                "total".into(),
                "mean".into(),
                "GFLOP/s".into(),
            ]];
            rows.extend(self.codelets.iter().map(|c| {
                vec![
                    c.codelet.clone(),
                    c.count.to_string(),
                    duration_ns(c.total as f64),
                    duration_ns(c.mean),
                    c.gflops
                        .map_or_else(|| "-".to_owned(), |g| format!("{g:.2}")),
                ]
            }));
            f.write_str(&crate::fmt::table(&rows, 1, "  "))?;
        }

        if self.transfers.count > 0 {
            let t = &self.transfers;
            writeln!(f)?;
            let rows = [
                vec![
                    "transfers".to_owned(),
                    "count".into(),
                    "bytes".into(),
                    "time".into(),
                    "GB/s".into(),
                ],
                vec![
                    String::new(),
                    t.count.to_string(),
                    crate::fmt::bytes(t.bytes),
                    duration_ns(t.time as f64),
                    t.gbytes_per_s
                        .map_or_else(|| "-".to_owned(), |g| format!("{g:.2}")),
                ],
            ];
            f.write_str(&crate::fmt::table(&rows, 1, "  "))?;
        }

        if !self.ranks.is_empty() {
            writeln!(f)?;
            let mut rows = vec![vec![
                "rank".to_owned(),
                "workers".into(),
                "tasks".into(),
                "busy".into(),
                "sent".into(),
                "bytes sent".into(),
                "received".into(),
                "bytes received".into(),
                "network wait".into(),
            ]];
            rows.extend(self.ranks.iter().map(|r| {
                vec![
                    r.rank.to_string(),
                    r.workers.to_string(),
                    r.tasks.to_string(),
                    duration_ns(r.busy as f64),
                    r.sent.to_string(),
                    crate::fmt::bytes(r.bytes_sent),
                    r.received.to_string(),
                    crate::fmt::bytes(r.bytes_received),
                    duration_ns(r.network_wait as f64),
                ]
            }));
            f.write_str(&crate::fmt::table(&rows, 1, "  "))?;
            writeln!(
                f,
                "  (network wait: time a receive was outstanding while none of the rank's workers ran a task)"
            )?;
        }

        if let Some(e) = &self.remote_edges {
            writeln!(f)?;
            match (e.median, e.p99) {
                (Some(median), Some(p99)) => writeln!(
                    f,
                    "Remote edges: {}, latency median {}, p99 {}",
                    e.count,
                    signed_duration(median),
                    signed_duration(p99)
                )?,
                _ => writeln!(f, "Remote edges: none found")?,
            }
            writeln!(
                f,
                "  (latency: from the end of the sending task to the start of the receiving task, on the merged clock)"
            )?;
        }

        let warnings = self.warnings();
        if !warnings.is_empty() {
            writeln!(f)?;
            writeln!(f, "Warnings:")?;
            for w in warnings {
                writeln!(f, "  - {w}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    // Proves the statistics on hand-built traces whose critical path, bounds,
    // busy percentages and efficiency are known exactly, and that bad edges
    // (unknown ids, cycles) are reported instead of hanging or panicking.
    use super::*;
    use crate::trace::model::{TaskRecord, TransferRecord, WorkerInfo};

    fn task(
        id: u64,
        codelet: &str,
        worker: u32,
        start: Nanos,
        end: Nanos,
        flops: f64,
    ) -> TaskRecord {
        TaskRecord {
            id,
            codelet: codelet.into(),
            label: None,
            worker,
            priority: 0,
            flops,
            start,
            end,
            team_rank: 0,
        }
    }

    /// Two workers, five tasks:
    ///
    /// ```text
    /// cpu0: [a 0..400][b 400..700]         [e 900..1000]
    /// cpu1:      [c 100..300]  [d 500..800]
    /// edges: a→b, a→c, c→d, b→e, d→e
    /// ```
    /// Paths: a-b-e = 400+300+100 = 800, a-c-d-e = 400+200+300+100 = 1000.
    fn diamond() -> Trace {
        Trace {
            workers: vec![
                WorkerInfo {
                    name: "cpu0".into(),
                    memory_node: 0,
                },
                WorkerInfo {
                    name: "cpu1".into(),
                    memory_node: 0,
                },
            ],
            tasks: vec![
                task(1, "getrf", 0, 0, 400, 800.0),
                task(2, "gemm", 0, 400, 700, 600.0),
                task(3, "trsm", 1, 100, 300, 0.0),
                task(4, "gemm", 1, 500, 800, 1200.0),
                task(5, "gemm", 0, 900, 1000, 0.0),
            ],
            transfers: vec![TransferRecord {
                handle: 9,
                from_node: 0,
                to_node: 1,
                bytes: 2000,
                start: 0,
                end: 1000,
            }],
            edges: vec![(1, 2), (1, 3), (3, 4), (2, 5), (4, 5)],
            ..Trace::default()
        }
    }

    #[test]
    fn diamond_numbers() {
        let s = stats(&diamond());
        assert_eq!(s.tasks, 5);
        assert_eq!(s.makespan, 1000);
        assert_eq!(s.total_work, 400 + 300 + 200 + 300 + 100);
        assert_eq!(s.critical_path, Some(1000));
        assert_eq!(s.critical_path_tasks, vec![1, 3, 4, 5]);
        assert_eq!(s.area_bound, 650.0);
        assert_eq!(s.lower_bound(), 1000.0);
        assert_eq!(s.efficiency, Some(1.0));
        assert_eq!(s.workers[0].busy, 800);
        assert_eq!(s.workers[0].busy_pct, 80.0);
        assert_eq!(s.workers[0].idle_pct, 20.0);
        assert_eq!(s.workers[1].busy, 500);
        assert_eq!(s.workers[1].busy_pct, 50.0);
        assert_eq!(s.workers[1].tasks, 2);
        let gemm = &s.codelets[0];
        assert_eq!(
            (gemm.codelet.as_str(), gemm.count, gemm.total),
            ("gemm", 3, 700)
        );
        assert_eq!(gemm.mean, 700.0 / 3.0);
        assert_eq!(gemm.gflops, Some(1800.0 / 700.0));
        let trsm = s.codelets.iter().find(|c| c.codelet == "trsm").unwrap();
        assert_eq!(trsm.gflops, None);
        assert_eq!(s.transfers.gbytes_per_s, Some(2.0));
        assert!(s.warnings().is_empty());
    }

    #[test]
    fn area_bound_dominates_without_edges() {
        let mut t = diamond();
        t.edges.clear();
        let s = stats(&t);
        assert_eq!(s.critical_path, None);
        assert_eq!(s.efficiency, Some(0.65));
        assert!(s.to_string().contains("no dependency edges recorded"));
    }

    #[test]
    fn unknown_ids_and_cycles_are_reported() {
        let mut t = diamond();
        t.edges.extend([(42, 1), (5, 43)]);
        let s = stats(&t);
        assert_eq!((s.ignored_edges, s.critical_path), (2, Some(1000)));
        assert!(s
            .to_string()
            .contains("2 dependency edge(s) name unknown task ids"));
        // An edge from another rank's task (one rank's trace of a
        // distributed run) is expected to be absent: not reported.
        t.edges
            .push((crate::trace::model::remote_task_id(1, 42), 1));
        let s = stats(&t);
        assert_eq!((s.ignored_edges, s.critical_path), (2, Some(1000)));

        t.edges.push((5, 3)); // 3 → 4 → 5 → 3
        let s = stats(&t);
        assert_eq!((s.critical_path, s.cyclic_tasks), (None, 3));
        assert_eq!(s.efficiency, Some(0.65));
        assert!(s.to_string().contains("form a cycle"));

        t.edges = vec![(2, 2)];
        assert_eq!(stats(&t).cyclic_tasks, 1);
    }

    #[test]
    fn overlapping_tasks_count_once() {
        let mut t = diamond();
        t.tasks.push(task(6, "gemm", 0, 350, 450, 0.0));
        let s = stats(&t);
        assert_eq!(s.workers[0].busy, 800);
        assert_eq!(s.workers[0].tasks, 4);
    }

    #[test]
    fn empty_trace_and_report() {
        let s = stats(&Trace::default());
        assert_eq!((s.makespan, s.efficiency, s.critical_path), (0, None, None));
        let _ = s.to_string();
        let report = stats(&diamond()).to_string();
        for needle in [
            "makespan",
            "1.000 µs",
            "cpu0",
            "80.0",
            "gemm",
            "GFLOP/s",
            "100.0 %",
        ] {
            assert!(report.contains(needle), "{needle} in\n{report}");
        }
        // Columns align: every row of the worker table has the same width.
        let widths: Vec<usize> = report
            .lines()
            .skip_while(|l| !l.trim_start().starts_with("worker"))
            .take(3)
            .map(|l| l.chars().count())
            .collect();
        assert!(widths.windows(2).all(|w| w[0] == w[1]), "{report}");
    }

    /// Two ranks of one worker each; rank 1 waits for a message while idle:
    ///
    /// ```text
    /// rank 0: [task 0..100]            [task 300..400]
    /// rank 1:   [task 50..150]  recv outstanding 120..350, [task 330..380]
    /// ```
    /// Rank 1's network wait: 150..330 (the receive minus its busy time) = 180.
    #[test]
    fn per_rank_bytes_and_network_wait() {
        use crate::trace::model::{MessageRecord, RankInfo};
        let w = |name: &str| WorkerInfo {
            name: name.into(),
            memory_node: 0,
        };
        let msg = |rank, peer, dir, bytes, start, end| MessageRecord {
            rank,
            peer,
            dir,
            kind: "edge".into(),
            bytes,
            start,
            end,
        };
        let t = Trace {
            workers: vec![w("cpu0"), w("cpu0")],
            tasks: vec![
                task(0, "a", 0, 0, 100, 0.0),
                task(1, "a", 0, 300, 400, 0.0),
                task(1 << 40, "b", 1, 50, 150, 0.0),
                task(2 | 1 << 40, "b", 1, 330, 380, 0.0),
            ],
            messages: vec![
                msg(0, 1, MessageDir::Send, 1000, 90, 100),
                msg(1, 0, MessageDir::Recv, 1000, 120, 350),
                msg(1, 0, MessageDir::Send, 8, 380, 380),
                msg(0, 1, MessageDir::Recv, 8, 385, 390),
            ],
            ranks: (0..2).map(|rank| RankInfo::unstamped(rank, 1, 0)).collect(),
            ..Trace::default()
        };
        let s = stats(&t);
        assert_eq!(s.ranks.len(), 2);
        let (r0, r1) = (&s.ranks[0], &s.ranks[1]);
        assert_eq!(
            (r0.tasks, r0.busy, r0.sent, r0.bytes_sent),
            (2, 200, 1, 1000)
        );
        assert_eq!((r0.received, r0.bytes_received), (1, 8));
        assert_eq!(
            r0.network_wait, 0,
            "rank 0's receive came while it was busy"
        );
        assert_eq!(
            (r1.received, r1.bytes_received, r1.bytes_sent),
            (1, 1000, 8)
        );
        assert_eq!(r1.network_wait, 180);
        let report = s.to_string();
        assert!(report.contains("network wait"), "{report}");
        assert!(
            report.contains("1000 B") || report.contains("1000"),
            "{report}"
        );
        // A one-process trace has no rank table.
        assert!(stats(&diamond()).ranks.is_empty());
        assert_eq!(measure_minus(&[(0, 10), (20, 30)], &[(5, 25)]), 10);
        assert_eq!(measure_minus(&[(0, 10)], &[]), 10);
        assert_eq!(measure_minus(&[(0, 10)], &[(0, 3), (4, 5), (9, 20)]), 5);
    }

    #[test]
    fn long_chain_is_linear() {
        // 200 000 tasks in a chain plus a skip edge every 10: finishes at once if O(V+E).
        let n = 200_000u64;
        let tasks = (0..n)
            .map(|i| task(i, "k", 0, 10 * i, 10 * i + 10, 0.0))
            .collect();
        let edges = (1..n)
            .map(|i| (i - 1, i))
            .chain((10..n).step_by(10).map(|i| (i - 10, i)))
            .collect();
        let t = Trace {
            workers: vec![WorkerInfo {
                name: "w".into(),
                memory_node: 0,
            }],
            tasks,
            transfers: vec![],
            edges,
            ..Trace::default()
        };
        let s = stats(&t);
        assert_eq!(s.critical_path, Some(10 * n));
        assert_eq!(s.efficiency, Some(1.0));
    }
}
