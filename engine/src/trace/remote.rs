//! Remote edges in a merged trace: which task of one rank fed which task of
//! another, found only from what the ranks' traces prove, and how long each
//! edge took to cross.
//!
//! Two sources, both exact:
//! - dependency edges whose ends are tasks of different ranks: the symbolic
//!   layer records the sending task of every remote edge it receives
//!   ([`REMOTE_TASK`](super::model::REMOTE_TASK)), which `merge` resolves;
//! - the labels of the send and receive tasks of the distributed layers,
//!   which name what they carry: STF `send(gid@ver→to)` on the sender and
//!   `recv(gid@ver)` on the receiver (a version reaches a rank once, from
//!   one rank), halo `halo-send(seq→to)` and `halo-recv(seq)`, and the task
//!   all-reduce's `allreduce-send(seq)` (to every other rank) and
//!   `allreduce-combine(seq)`. A pair is matched only when its key names
//!   exactly one sending task on the sender's rank and exactly one receiving
//!   task on the receiver's (and, for STF, one sender in the whole trace): a
//!   key seen twice (two runs in one file, a codelet of the same name) draws
//!   nothing rather than a guess. [`merge`](super::merge()) adds these pairs to
//!   the merged trace's edges.
//!
//! The message records are not used to find edges: most do not name their
//! tasks, and the data and edge channels record the sends of their
//! end-of-run `DONE`s but not their receipt, so the i-th send and the i-th
//! receive of a channel are not always one message. A symbolic edge's
//! records do name their sending task ([`MessageRecord::task`](super::model::MessageRecord::task)), on both
//! ranks: with them an edge's latency splits into three parts
//! ([`EdgeSplit`]).
//!
//! Latency of a remote edge: from the end of the sending task (for STF and
//! halo sends, when the message was handed to the transport; for a symbolic
//! edge, the end of the producing task's body, whose successors' messages
//! leave right after it, from its `then`) to the start of the receiving
//! task, on the merged clock.
//! Negative when the ranks' clocks disagree by more than the edge took.

use std::collections::{HashMap, HashSet};

use super::model::Trace;

/// One remote edge: indices into [`Trace::tasks`] of the sending and the
/// receiving task, which ran on different ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RemoteEdge {
    /// The sending task.
    pub from: usize,
    /// The receiving task.
    pub to: usize,
}

/// Remote edges' latencies, in ns (see the module doc for what is measured).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EdgeLatency {
    /// Remote edges found.
    pub count: usize,
    /// Median latency (nearest rank); `None` without edges.
    pub median: Option<i64>,
    /// 99th percentile latency (nearest rank); `None` without edges.
    pub p99: Option<i64>,
    /// Where the time went, over the edges whose message names its
    /// sending task (symbolic edges); `None` without such edges.
    pub split: Option<EdgeSplit>,
}

/// A remote edge's latency in three parts, medians in ns (nearest rank)
/// over the edges whose message records name the sending task
/// ([`MessageRecord::task`](super::model::MessageRecord::task): a symbolic edge's). The parts are timed
/// between the sending task's end, its message's hand-over to the
/// transport (the end of the send record), its routing on the receiving
/// rank (the receive record) and the receiving task's start. The first
/// and last are read on one rank's clock each; the network's part spans
/// both, so it takes the merged clock's error (the two ranks' epochs).
/// Medians of parts need not add up to the median of the whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EdgeSplit {
    /// Edges split.
    pub count: usize,
    /// The sending task's end to its message handed to the transport:
    /// finding the successors, packing, posting.
    pub sender: i64,
    /// Handed over to routed on the receiving rank: the transport, and
    /// until the receiving rank looked.
    pub network: i64,
    /// Routed to the receiving task's start: writing the data, making and
    /// queueing the task, and any wait for a free worker.
    pub receiver: i64,
}

/// The rank of each task (from its worker).
pub(crate) fn task_ranks(trace: &Trace) -> Vec<u32> {
    let wranks = trace.worker_ranks();
    trace
        .tasks
        .iter()
        .map(|t| wranks.get(t.worker as usize).copied().unwrap_or(0))
        .collect()
}

/// Each task id's index in [`Trace::tasks`]: a team task once, by its
/// leader's record (members share its id and times), and the first record
/// of an id that repeats.
pub(crate) fn task_index(trace: &Trace) -> HashMap<u64, usize> {
    let mut index = HashMap::with_capacity(trace.tasks.len());
    for (i, t) in trace
        .tasks
        .iter()
        .enumerate()
        .filter(|(_, t)| t.team_rank == 0)
    {
        index.entry(t.id).or_insert(i);
    }
    index
}

/// The remote edges of `trace`: edges across ranks first (in the order of
/// [`Trace::edges`]), then send/receive pairs matched by label (see the module
/// doc), each once. Empty for a trace of one rank.
pub fn remote_edges(trace: &Trace) -> Vec<RemoteEdge> {
    let ranks = task_ranks(trace);
    let index = task_index(trace);
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (a, b) in &trace.edges {
        if let (Some(&from), Some(&to)) = (index.get(a), index.get(b)) {
            if ranks[from] != ranks[to] && seen.insert((from, to)) {
                out.push(RemoteEdge { from, to });
            }
        }
    }
    for e in matched_by_labels(trace, &ranks) {
        if seen.insert((e.from, e.to)) {
            out.push(e);
        }
    }
    out
}

/// Count, median and p99 of `receiving start − sending end` over `edges`.
pub fn edge_latency(trace: &Trace, edges: &[RemoteEdge]) -> EdgeLatency {
    let mut v: Vec<i64> = edges
        .iter()
        .map(|e| {
            let (s, r) = (&trace.tasks[e.from], &trace.tasks[e.to]);
            // Times are at most 2^53 ns (the readers' bound): no overflow.
            r.start as i64 - s.end as i64
        })
        .collect();
    v.sort_unstable();
    EdgeLatency {
        count: v.len(),
        median: nearest_rank(&v, 0.5),
        p99: nearest_rank(&v, 0.99),
        split: edge_split(trace, edges),
    }
}

/// [`EdgeSplit`] of `edges`: each edge whose sending task's id names
/// exactly one send record of its rank to the receiving rank, and exactly
/// one receive record of the receiving rank from it (a task id seen twice,
/// as two runs in one file would give, splits nothing rather than guess).
pub fn edge_split(trace: &Trace, edges: &[RemoteEdge]) -> Option<EdgeSplit> {
    use super::model::MessageDir;
    // (task id, sending rank, receiving rank, direction) → the record's
    // end, `None` once seen twice.
    let mut records: HashMap<(u64, u32, u32, MessageDir), Option<u64>> = HashMap::new();
    for m in &trace.messages {
        let Some(task) = m.task else { continue };
        let (from, to) = match m.dir {
            MessageDir::Send => (m.rank, m.peer),
            MessageDir::Recv => (m.peer, m.rank),
        };
        records
            .entry((task, from, to, m.dir))
            .and_modify(|e| *e = None)
            .or_insert(Some(m.end));
    }
    if records.is_empty() {
        return None;
    }
    let ranks = task_ranks(trace);
    let (mut sender, mut network, mut receiver) = (Vec::new(), Vec::new(), Vec::new());
    for e in edges {
        let (s, r) = (&trace.tasks[e.from], &trace.tasks[e.to]);
        let key = |dir| (s.id, ranks[e.from], ranks[e.to], dir);
        let (Some(Some(sent)), Some(Some(routed))) = (
            records.get(&key(MessageDir::Send)),
            records.get(&key(MessageDir::Recv)),
        ) else {
            continue;
        };
        // Times are at most 2^53 ns (the readers' bound): no overflow.
        let (end, sent, routed, start) =
            (s.end as i64, *sent as i64, *routed as i64, r.start as i64);
        sender.push(sent - end);
        network.push(routed - sent);
        receiver.push(start - routed);
    }
    for v in [&mut sender, &mut network, &mut receiver] {
        v.sort_unstable();
    }
    Some(EdgeSplit {
        count: sender.len(),
        sender: nearest_rank(&sender, 0.5)?,
        network: nearest_rank(&network, 0.5)?,
        receiver: nearest_rank(&receiver, 0.5)?,
    })
}

/// The `q` quantile of `sorted` by nearest rank; `None` when it is empty.
pub(crate) fn nearest_rank(sorted: &[i64], q: f64) -> Option<i64> {
    let rank = ((q * sorted.len() as f64).ceil() as usize).max(1);
    sorted.get(rank - 1).copied()
}

/// The layers whose send and receive tasks name what they carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Layer {
    Stf,
    Halo,
    Allreduce,
}

/// What a send or receive task carries: its layer and its numbers
/// (STF: data id and version; halo and all-reduce: the exchange number).
type Key = (Layer, u64, u64);

/// A task of a distributed layer, read from its codelet and label.
enum End {
    /// Sends `key` to rank `to` (`None`: to every other rank).
    Send(Key, Option<u32>),
    Recv(Key),
}

/// `label` as `{prefix}` then `N` decimal numbers, each followed by its
/// separator in `seps` (the last one's is the closing `)`): the numbers, or
/// `None` when it is not exactly that.
fn numbers<const N: usize>(label: &str, prefix: &str, seps: [char; N]) -> Option<[u64; N]> {
    let mut rest = label.strip_prefix(prefix)?.strip_suffix(')')?;
    let mut out = [0u64; N];
    for (i, sep) in seps.iter().enumerate() {
        let (num, tail) = if i + 1 < N {
            rest.split_once(*sep)?
        } else {
            (rest, "")
        };
        if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        out[i] = num.parse().ok()?;
        rest = tail;
    }
    Some(out)
}

fn parse(codelet: &str, label: &str) -> Option<End> {
    let to = |x: u64| u32::try_from(x).ok();
    Some(match codelet {
        "send" => {
            let [gid, ver, dest] = numbers(label, "send(", ['@', '→', ')'])?;
            End::Send((Layer::Stf, gid, ver), Some(to(dest)?))
        }
        "recv" => {
            let [gid, ver] = numbers(label, "recv(", ['@', ')'])?;
            End::Recv((Layer::Stf, gid, ver))
        }
        "halo-send" => {
            let [seq, dest] = numbers(label, "halo-send(", ['→', ')'])?;
            End::Send((Layer::Halo, seq, 0), Some(to(dest)?))
        }
        "halo-recv" => End::Recv((Layer::Halo, numbers(label, "halo-recv(", [')'])?[0], 0)),
        "allreduce-send" => End::Send(
            (
                Layer::Allreduce,
                numbers(label, "allreduce-send(", [')'])?[0],
                0,
            ),
            None,
        ),
        "allreduce-combine" => End::Recv((
            Layer::Allreduce,
            numbers(label, "allreduce-combine(", [')'])?[0],
            0,
        )),
        _ => return None,
    })
}

/// Send/receive task pairs matched by their labels (see the module doc),
/// sorted; `ranks` is each task's rank.
pub(crate) fn matched_by_labels(trace: &Trace, ranks: &[u32]) -> Vec<RemoteEdge> {
    // (key, sender's rank, destination) → sending tasks; (key, rank) → receiving tasks.
    let mut sends: HashMap<(Key, u32, Option<u32>), Vec<usize>> = HashMap::new();
    let mut recvs: HashMap<(Key, u32), Vec<usize>> = HashMap::new();
    // STF: (key, destination) → ranks sending it (one, in any one run).
    let mut senders: HashMap<(Key, u32), HashSet<u32>> = HashMap::new();
    for (i, t) in trace.tasks.iter().enumerate() {
        let Some(label) = t.label.as_deref().filter(|_| t.team_rank == 0) else {
            continue;
        };
        match parse(&t.codelet, label) {
            Some(End::Send(key, to)) => {
                sends.entry((key, ranks[i], to)).or_default().push(i);
                if let (Layer::Stf, Some(to)) = (key.0, to) {
                    senders.entry((key, to)).or_default().insert(ranks[i]);
                }
            }
            Some(End::Recv(key)) => recvs.entry((key, ranks[i])).or_default().push(i),
            None => {}
        }
    }
    let mut out = Vec::new();
    for (&(key, from_rank, to), from) in &sends {
        let [from] = from[..] else { continue };
        let one_sender = |p: u32| key.0 != Layer::Stf || senders[&(key, p)].len() == 1;
        let mut receive_on = |p: u32| {
            if p == from_rank || !one_sender(p) {
                return;
            }
            if let Some([to]) = recvs.get(&(key, p)).map(|v| &v[..]) {
                out.push(RemoteEdge { from, to: *to });
            }
        };
        match to {
            Some(p) => receive_on(p),
            None => {
                let mut ps: Vec<u32> = recvs
                    .keys()
                    .filter(|(k, _)| *k == key)
                    .map(|&(_, p)| p)
                    .collect();
                ps.sort_unstable();
                ps.into_iter().for_each(&mut receive_on);
            }
        }
    }
    out.sort_unstable();
    out
}

#[cfg(test)]
mod tests {
    //! Proves that a merged two-rank trace of a real STF run (two threads
    //! over the in-process transport) has exactly its remote edges, each from
    //! the sending task to the receiving one, drawn as one flow arrow each;
    //! that edges recorded across ranks count too; and that labels match only
    //! when they prove the pair (duplicates draw nothing).
    use super::*;
    use crate::trace::model::{RankInfo, TaskRecord, WorkerInfo};
    use crate::trace::{merge, write_chrome_json, ChromeOptions};

    /// The rank traces of a two-rank STF run with three remote edges:
    /// `a` (owner 0) is read on rank 1 twice, at versions 0 and 1, and `b`
    /// (owner 1) is read on rank 0 once, at version 1.
    fn two_rank_stf_traces() -> Vec<Trace> {
        use crate::dist::{on_ranks, one_worker, stf::DistRuntime};
        use crate::{Codelet, Read, ReadWrite};
        type Add = (Read<Vec<f64>>, ReadWrite<Vec<f64>>);
        on_ranks(
            2,
            || one_worker().trace(true),
            |d: &DistRuntime| {
                let (a, b) = (d.register(0, vec![2.0f64]), d.register(1, vec![1.0f64]));
                let add =
                    Codelet::<Add>::new("add").cpu(|_, _, (x, y): (&Vec<f64>, &mut Vec<f64>)| {
                        y[0] += x[0];
                        Ok(())
                    });
                d.task(&add, (a.r(), b.rw())).submit().unwrap(); // rank 1: b = 3
                d.task(&add, (b.r(), a.rw())).submit().unwrap(); // rank 0: a = 5
                d.task(&add, (a.r(), b.rw())).submit().unwrap(); // rank 1: b = 8
                d.wait_all().unwrap();
                let trace = d.runtime().trace();
                let (a, b) = (d.unregister(a).unwrap(), d.unregister(b).unwrap());
                match d.rank() {
                    0 => assert_eq!(a, [5.0]),
                    _ => assert_eq!(b, [8.0]),
                }
                trace
            },
        )
    }

    fn label(t: &Trace, i: usize) -> (u32, &str) {
        let rank = t.worker_ranks()[t.tasks[i].worker as usize];
        (rank, t.tasks[i].label.as_deref().unwrap_or(""))
    }

    #[test]
    fn a_merged_stf_run_has_one_flow_per_remote_edge() {
        let m = merge(two_rank_stf_traces()).unwrap();
        let edges = remote_edges(&m);
        let mut pairs: Vec<_> = edges
            .iter()
            .map(|e| (label(&m, e.from), label(&m, e.to)))
            .collect();
        pairs.sort_unstable();
        assert_eq!(
            pairs,
            [
                ((0, "send(0@0→1)"), (1, "recv(0@0)")),
                ((0, "send(0@1→1)"), (1, "recv(0@1)")),
                ((1, "send(1@1→0)"), (0, "recv(1@1)")),
            ]
        );
        // The merge wrote them as dependency edges; merging again adds none.
        for e in &edges {
            let (a, b) = (m.tasks[e.from].id, m.tasks[e.to].id);
            assert_eq!(m.edges.iter().filter(|&&x| x == (a, b)).count(), 1);
        }
        assert_eq!(merge(vec![m.clone()]).unwrap(), m);
        let lat = edge_latency(&m, &edges);
        assert_eq!(lat.count, 3);
        assert!(lat.median.is_some() && lat.p99 >= lat.median, "{lat:?}");

        // One flow per remote edge: "s" on the sending task's slice, "f"
        // (bound to the enclosing slice) on the receiving one's, same id and cat.
        let mut json = Vec::new();
        write_chrome_json(&m, &mut json, &ChromeOptions::default()).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&json).unwrap();
        let events = doc["traceEvents"].as_array().unwrap();
        let slice_of = |e: &serde_json::Value| -> usize {
            let ts = e["ts"].as_f64().unwrap() * 1e3;
            let found: Vec<usize> = events
                .iter()
                .filter(|x| x["ph"] == "X" && x["pid"] == e["pid"] && x["tid"] == e["tid"])
                .filter(|x| {
                    let (s, d) = (x["ts"].as_f64().unwrap(), x["dur"].as_f64().unwrap());
                    s * 1e3 <= ts && ts <= (s + d) * 1e3
                })
                .filter_map(|x| x["args"]["id"].as_u64())
                .map(|id| m.tasks.iter().position(|t| t.id == id).unwrap())
                .collect();
            assert_eq!(found.len(), 1, "{e}: {found:?}");
            found[0]
        };
        let starts: Vec<&serde_json::Value> = events.iter().filter(|e| e["ph"] == "s").collect();
        assert_eq!(starts.len(), 3);
        let mut drawn = Vec::new();
        for s in starts {
            let f: Vec<_> = events
                .iter()
                .filter(|e| e["ph"] == "f" && e["id"] == s["id"])
                .collect();
            assert_eq!(f.len(), 1, "{s}");
            let f = f[0];
            assert_eq!((&f["bp"], &f["cat"]), (&"e".into(), &s["cat"]), "{f}");
            assert_eq!(s["cat"], "remote");
            drawn.push(RemoteEdge {
                from: slice_of(s),
                to: slice_of(f),
            });
        }
        drawn.sort_unstable();
        let mut want = edges.clone();
        want.sort_unstable();
        assert_eq!(drawn, want);
    }

    #[test]
    fn a_merged_summary_names_ranks_and_times_remote_edges() {
        let traces = two_rank_stf_traces();
        let one = crate::trace::stats(&traces[0]).to_string();
        assert!(
            !one.contains("Remote edges") && !one.contains("r0 cpu0"),
            "{one}"
        );
        let report = crate::trace::stats(&merge(traces).unwrap()).to_string();
        for needle in [
            "\n  r0 cpu0 ",
            "\n  r1 cpu0 ",
            "Remote edges: 3, latency median ",
            ", p99 ",
            "(latency: from the end of the sending task to the start of the receiving task, on the merged clock)",
        ] {
            assert!(report.contains(needle), "{needle:?} in\n{report}");
        }
    }

    fn task(id: u64, worker: u32, codelet: &str, label: &str, start: u64) -> TaskRecord {
        TaskRecord {
            id,
            codelet: codelet.into(),
            label: (!label.is_empty()).then(|| label.into()),
            worker,
            priority: 0,
            flops: 0.0,
            start,
            end: start + 10,
            team_rank: 0,
        }
    }

    /// Three ranks of one worker each, with `tasks` as (rank, codelet, label).
    fn three_ranks(tasks: &[(u32, &str, &str)]) -> Trace {
        Trace {
            workers: (0..3)
                .map(|_| WorkerInfo {
                    name: "cpu0".into(),
                    memory_node: 0,
                })
                .collect(),
            tasks: tasks
                .iter()
                .enumerate()
                .map(|(i, &(r, c, l))| task(u64::from(r) << 40 | i as u64, r, c, l, 100 * i as u64))
                .collect(),
            ranks: (0..3).map(|rank| RankInfo::unstamped(rank, 1, 0)).collect(),
            ..Trace::default()
        }
    }

    fn pairs(t: &Trace) -> Vec<(usize, usize)> {
        remote_edges(t).iter().map(|e| (e.from, e.to)).collect()
    }

    #[test]
    fn labels_match_only_what_they_prove() {
        // STF: one sender, one receiver.
        let t = three_ranks(&[(0, "send", "send(4@2→1)"), (1, "recv", "recv(4@2)")]);
        assert_eq!(pairs(&t), [(0, 1)]);
        // Two receives of one version on one rank, two sends of it, two
        // ranks sending it, a send to a rank not in the trace, the labels of
        // another layer's codelet, a label with more to it: nothing drawn.
        for tasks in [
            &[
                (0, "send", "send(4@2→1)"),
                (1, "recv", "recv(4@2)"),
                (1, "recv", "recv(4@2)"),
            ][..],
            &[
                (0, "send", "send(4@2→1)"),
                (0, "send", "send(4@2→1)"),
                (1, "recv", "recv(4@2)"),
            ],
            &[
                (0, "send", "send(4@2→1)"),
                (2, "send", "send(4@2→1)"),
                (1, "recv", "recv(4@2)"),
            ],
            &[(0, "send", "send(4@2→7)"), (1, "recv", "recv(4@2)")],
            &[(0, "send", "send(4@2→1)"), (1, "recv", "recv(4 from 0)")],
            &[(0, "user", "send(4@2→1)"), (1, "recv", "recv(4@2)")],
            &[(0, "send", "send(4@2→1)"), (1, "recv", "recv(4@2@1)")],
            &[(0, "send", "send(4@2→0)"), (0, "recv", "recv(4@2)")],
        ] {
            assert_eq!(pairs(&three_ranks(tasks)), [], "{tasks:?}");
        }
        // Halo: every neighbour sends to a rank's one receive of the exchange.
        let t = three_ranks(&[
            (0, "halo-send", "halo-send(3→1)"),
            (2, "halo-send", "halo-send(3→1)"),
            (1, "halo-recv", "halo-recv(3)"),
            (1, "halo-recv", "halo-recv(4)"),
        ]);
        assert_eq!(pairs(&t), [(0, 2), (1, 2)]);
        // All-reduce: each rank's part goes to every other rank's combine.
        let t = three_ranks(&[
            (0, "allreduce-send", "allreduce-send(0)"),
            (1, "allreduce-send", "allreduce-send(0)"),
            (0, "allreduce-combine", "allreduce-combine(0)"),
            (1, "allreduce-combine", "allreduce-combine(0)"),
        ]);
        assert_eq!(pairs(&t), [(0, 3), (1, 2)]);
    }

    /// The traces of two ranks of a symbolic run, unmerged: rank 0's tasks 0
    /// (0..10) and 1 (100..110), rank 1's task 0 (0..10), fed by rank 0's
    /// task 1 as rank 1 records it.
    fn symbolic_ranks() -> (Trace, Trace) {
        let mut r0 = three_ranks(&[(0, "k", ""), (0, "k", "")]);
        let mut r1 = three_ranks(&[(1, "k", "")]);
        for (t, rank) in [(&mut r0, 0u32), (&mut r1, 1)] {
            t.workers.truncate(1);
            t.ranks = vec![RankInfo {
                rank,
                ..t.ranks[0].clone()
            }];
            for x in &mut t.tasks {
                x.worker = 0;
                x.id &= (1 << 40) - 1;
            }
        }
        r0.edges = vec![(0, 1)];
        r1.edges = vec![(crate::trace::model::remote_task_id(0, 1), 0)];
        (r0, r1)
    }

    #[test]
    fn edges_across_ranks_are_remote_edges() {
        // A symbolic remote edge, as rank 1 records it, merged.
        let (r0, r1) = symbolic_ranks();
        let m = merge(vec![r1, r0]).unwrap();
        let e = remote_edges(&m);
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!((m.tasks[e[0].from].id, m.tasks[e[0].to].id), (1, 1 << 40));
        // Rank 1's task starts at 0 and rank 0's task 1 ends at 110.
        let lat = edge_latency(&m, &e);
        assert_eq!(
            (lat.count, lat.median, lat.p99),
            (1, Some(-110), Some(-110))
        );
        assert_eq!(
            edge_latency(&m, &[]),
            EdgeLatency {
                count: 0,
                median: None,
                p99: None,
                split: None,
            }
        );
        assert_eq!(lat.split, None, "no message names the task");
    }

    /// A symbolic edge whose message both ranks recorded with its task
    /// (`MessageRecord::task`, through a Chrome file and the merge) splits
    /// into its sender's, network's and receiver's parts; a task that
    /// names two messages to one rank splits nothing.
    #[test]
    fn a_symbolic_edge_splits_by_its_message() {
        use crate::trace::model::{MessageDir, MessageRecord};
        let msg = |rank, dir, start, end, task| MessageRecord {
            rank,
            peer: 1 - rank,
            dir,
            kind: "edge".into(),
            bytes: 8,
            start,
            end,
            task: Some(task),
        };
        let through_file = |t: &Trace| {
            let mut json = Vec::new();
            write_chrome_json(t, &mut json, &ChromeOptions::default()).unwrap();
            crate::trace::read_chrome_json(&json[..]).unwrap()
        };
        let (mut r0, mut r1) = symbolic_ranks();
        // Rank 0's task 1 ends at 110, its message is handed over at 125
        // and routed on rank 1 at 160; rank 1's task starts at 200.
        r0.messages = vec![msg(0, MessageDir::Send, 112, 125, 1)];
        r1.messages = vec![msg(
            1,
            MessageDir::Recv,
            160,
            160,
            crate::trace::model::remote_task_id(0, 1),
        )];
        r1.tasks[0].start = 200;
        r1.tasks[0].end = 210;
        let m = merge(vec![through_file(&r1), through_file(&r0)]).unwrap();
        let lat = edge_latency(&m, &remote_edges(&m));
        assert_eq!(lat.median, Some(90));
        assert_eq!(
            lat.split,
            Some(EdgeSplit {
                count: 1,
                sender: 15,
                network: 35,
                receiver: 40,
            })
        );
        let report = crate::trace::stats(&m).to_string();
        assert!(
            report.contains(
                "split, medians over the 1 whose message names its task: sender 15 ns, network 35 ns, receiver 40 ns"
            ),
            "{report}"
        );
        // Rank 0 sent two messages of task 1 to rank 1 (two runs in one
        // file): which one fed the edge is not known.
        r0.messages.push(msg(0, MessageDir::Send, 300, 310, 1));
        let m = merge(vec![r1, r0]).unwrap();
        let split = edge_latency(&m, &remote_edges(&m)).split;
        assert_eq!(split.map(|s| s.count), None, "{split:?}");
    }
}
