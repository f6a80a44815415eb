//! One trace from the traces of the ranks of a distributed run: each rank
//! becomes a process of its own, times are put on one clock, and task ids
//! are made distinct across ranks.

use std::collections::{HashMap, HashSet};

use super::chrome::MAX_EVENT_NS;
use super::model::{RankInfo, Trace, RANK_ID_SHIFT, REMOTE_TASK};

/// `Err` when `inputs` come from different runs: their ranks name more than
/// one run id ([`RankInfo::run_id`]; traces without one say nothing). A
/// merge of different runs aligns unrelated clocks and reports a makespan
/// and an efficiency of nothing real (issue 28).
pub fn check_same_run(inputs: &[Trace]) -> Result<(), String> {
    let mut first: Option<(&str, usize)> = None;
    for (i, t) in inputs.iter().enumerate() {
        for r in t.ranks.iter().filter(|r| !r.run_id.is_empty()) {
            match first {
                None => first = Some((&r.run_id, i)),
                Some((id, j)) if id != r.run_id => {
                    return Err(format!(
                        "trace {} is of run {id} and trace {} of run {} (rank {}): traces of different runs do not merge (--force merges them anyway)",
                        j + 1,
                        i + 1,
                        r.run_id,
                        r.rank
                    ))
                }
                Some(_) => {}
            }
        }
    }
    Ok(())
}

/// Merges the traces of several ranks (each written by one rank, or merged
/// before) into one, ranks in increasing order.
///
/// - Times: each input is shifted by the difference between its epoch
///   ([`RankInfo::epoch_unix_ns`]) and the earliest one, so that every time
///   is on the earliest rank's clock (the ranks' wall clocks are assumed to
///   agree, as on one node or under NTP). An input whose epoch is unknown is
///   not shifted.
/// - Task ids and edges of rank `r` become `r << RANK_ID_SHIFT | id`
///   (idempotent: merging a merged trace again keeps its ids).
/// - An input that names no rank counts as rank 0.
/// - Send and receive tasks of different ranks whose labels prove they are
///   the two ends of one message become a dependency edge
///   ([`remote`](super::remote); merging again adds none).
///
/// Errors: no input, a rank present in two inputs, an id too large to tag.
pub fn merge(inputs: Vec<Trace>) -> Result<Trace, String> {
    if inputs.is_empty() {
        return Err("nothing to merge: no trace given".into());
    }
    let mut inputs: Vec<Trace> = inputs
        .into_iter()
        .map(|mut t| {
            if t.ranks.is_empty() {
                t.ranks.push(RankInfo::unstamped(
                    0,
                    t.worker_count() as u32,
                    t.transfers.len() as u32,
                ));
                // A worker index past the list: give it a (nameless) entry so
                // that the counts cover the workers exactly.
                while t.workers.len() < t.worker_count() {
                    t.workers.push(super::model::WorkerInfo {
                        name: format!("#{}", t.workers.len()),
                        memory_node: 0,
                    });
                }
            }
            t
        })
        .collect();
    for t in &inputs {
        super::chrome::check_ranks(t)?;
    }
    let mut seen: HashMap<u32, usize> = HashMap::new();
    for (i, t) in inputs.iter().enumerate() {
        for r in &t.ranks {
            if let Some(j) = seen.insert(r.rank, i) {
                return Err(format!(
                    "rank {} is in trace {} and in trace {} (given the same rank's file twice?)",
                    r.rank,
                    j + 1,
                    i + 1
                ));
            }
        }
    }
    inputs.sort_by_key(|t| t.ranks.iter().map(|r| r.rank).min());
    let epoch = inputs
        .iter()
        .flat_map(|t| t.ranks.iter().map(|r| r.epoch_unix_ns))
        .filter(|&e| e > 0)
        .min()
        .unwrap_or(0);

    let mut out = Trace::default();
    for mut t in inputs {
        // An input's ranks share its clock (a merged input has one epoch).
        let own = t
            .ranks
            .iter()
            .map(|r| r.epoch_unix_ns)
            .find(|&e| e > 0)
            .unwrap_or(0);
        let shift = if own > 0 { own - epoch } else { 0 };
        // The readers refuse a time past MAX_EVENT_NS: so does the merge,
        // rather than write a file they refuse (issue 42: an epoch of
        // 2^64-1 merged, and `summary` then refused the result).
        let rank = t.ranks[0].rank;
        let shifted = |time: u64| -> Result<u64, String> {
            time.checked_add(shift)
                .filter(|&s| s <= MAX_EVENT_NS)
                .ok_or_else(|| {
                    format!(
                        "rank {rank}'s clock starts {shift} ns after the earliest rank's (epoch_unix_ns {own} against {epoch}): \
                         its times would pass {MAX_EVENT_NS} ns (2^53, 104 days), which no reader accepts; are its epochs right?"
                    )
                })
        };
        let wranks = t.worker_ranks();
        let tag = |rank: u32, id: u64| -> Result<u64, String> {
            if id >> RANK_ID_SHIFT != 0 && id >> RANK_ID_SHIFT != u64::from(rank) {
                return Err(format!(
                    "task id {id} of rank {rank} is too large to tag with its rank (ids must stay below 2^{RANK_ID_SHIFT})"
                ));
            }
            Ok(u64::from(rank) << RANK_ID_SHIFT | id)
        };
        // A task id as an edge's end or a message's task: one marked as
        // another rank's task (`REMOTE_TASK`) is already tagged; any other
        // is `rank`'s.
        let merged_id = |rank: u32, x: u64| -> Result<u64, String> {
            if x & REMOTE_TASK != 0 {
                Ok(x & !REMOTE_TASK)
            } else {
                tag(rank, x)
            }
        };
        let mut rank_of_id: HashMap<u64, u32> = HashMap::with_capacity(t.tasks.len());
        let worker_base = out.workers.len() as u32;
        for task in &mut t.tasks {
            let rank = wranks[task.worker as usize];
            rank_of_id.entry(task.id).or_insert(rank);
            task.id = tag(rank, task.id)?;
            task.worker += worker_base;
            task.start = shifted(task.start)?;
            task.end = shifted(task.end)?;
        }
        let first = t.ranks[0].rank;
        for (a, b) in &mut t.edges {
            // Each end is tagged with its own task's rank (in a merged input
            // the ends of an edge may be on different ranks); an end naming
            // an unknown task takes the other end's; one marked as another
            // rank's task (`REMOTE_TASK`) is already tagged.
            let known = |x: &u64| rank_of_id.get(x).copied();
            let other = known(b).or_else(|| known(a)).unwrap_or(first);
            *a = merged_id(known(a).unwrap_or(other), *a)?;
            *b = merged_id(known(b).unwrap_or(other), *b)?;
        }
        for x in &mut t.transfers {
            x.start = shifted(x.start)?;
            x.end = shifted(x.end)?;
        }
        for m in &mut t.messages {
            m.start = shifted(m.start)?;
            m.end = shifted(m.end)?;
            // As an edge's end: the sender's own task, of its rank; the
            // receiver's names the sending rank's (`REMOTE_TASK`).
            m.task = m.task.map(|x| merged_id(m.rank, x)).transpose()?;
        }
        for r in &mut t.ranks {
            r.epoch_unix_ns = if r.epoch_unix_ns > 0 { epoch } else { 0 };
        }
        out.workers.append(&mut t.workers);
        out.tasks.append(&mut t.tasks);
        out.transfers.append(&mut t.transfers);
        out.edges.append(&mut t.edges);
        out.messages.append(&mut t.messages);
        out.ranks.append(&mut t.ranks);
    }
    out.tasks.sort_by_key(|t| t.start);
    // Send and receive tasks whose labels name each other (STF, halo,
    // all-reduce) stand for a dependency across ranks that no rank could
    // record: added once, so that the critical path and the arrows follow it.
    let ranks = super::remote::task_ranks(&out);
    let mut have: HashSet<(u64, u64)> = out.edges.iter().copied().collect();
    for e in super::remote::matched_by_labels(&out, &ranks) {
        let pair = (out.tasks[e.from].id, out.tasks[e.to].id);
        if have.insert(pair) {
            out.edges.push(pair);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    // Proves that merging keeps every rank's tasks, transfers and messages,
    // aligns the clocks on the epochs, tags ids by rank (idempotently), and
    // refuses a rank given twice.
    use super::*;
    use crate::trace::model::{MessageDir, MessageRecord, TaskRecord, WorkerInfo};

    /// Tasks 0, 1, 2 of `rank`, chained; rank 1's task 2 also follows rank
    /// 0's task 1 (a remote edge, as rank 1 records it).
    fn rank_trace(rank: u32, epoch: u64) -> Trace {
        let mut edges = vec![(0, 1), (1, 2)];
        if rank == 1 {
            edges.push((crate::trace::model::remote_task_id(0, 1), 2));
        }
        Trace {
            workers: vec![WorkerInfo {
                name: "cpu0".into(),
                memory_node: 0,
            }],
            tasks: (0..3)
                .map(|id| TaskRecord {
                    id,
                    codelet: "k".into(),
                    label: None,
                    worker: 0,
                    priority: 0,
                    flops: 0.0,
                    start: 100 * id,
                    end: 100 * id + 50,
                    team_rank: 0,
                })
                .collect(),
            edges,
            messages: vec![MessageRecord {
                rank,
                peer: 1 - rank,
                dir: MessageDir::Send,
                kind: "edge".into(),
                bytes: 8,
                start: 10,
                end: 20,
                task: None,
            }],
            ranks: vec![RankInfo {
                rank,
                workers: 1,
                transfers: 0,
                epoch_unix_ns: epoch,
                run_id: String::new(),
            }],
            ..Trace::default()
        }
    }

    #[test]
    fn traces_of_different_runs_are_told_apart() {
        let with_id = |rank, id: &str| {
            let mut t = rank_trace(rank, 1_000);
            t.ranks[0].run_id = id.into();
            t
        };
        assert!(check_same_run(&[with_id(0, "a"), with_id(1, "a")]).is_ok());
        assert!(check_same_run(&[with_id(0, "a"), with_id(1, "")]).is_ok());
        let e = check_same_run(&[with_id(0, "a"), with_id(1, "b")]).unwrap_err();
        assert!(
            e.contains("trace 1 is of run a and trace 2 of run b"),
            "{e}"
        );
    }

    #[test]
    fn merges_two_ranks_on_one_clock() {
        let m = merge(vec![rank_trace(1, 5_000), rank_trace(0, 1_000)]).unwrap();
        assert_eq!(m.ranks.iter().map(|r| r.rank).collect::<Vec<_>>(), [0, 1]);
        assert!(m.ranks.iter().all(|r| r.epoch_unix_ns == 1_000));
        assert_eq!(m.workers.len(), 2);
        assert_eq!(m.tasks.len(), 6);
        assert_eq!(m.worker_ranks(), [0, 1]);
        // Rank 1 started 4 µs later: its times move by 4000 ns.
        let r1: Vec<_> = m.tasks.iter().filter(|t| t.worker == 1).collect();
        assert_eq!(r1[0].start, 4_000);
        assert_eq!(r1[0].id, 1 << 40);
        let msg1 = m.messages.iter().find(|x| x.rank == 1).unwrap();
        assert_eq!((msg1.start, msg1.end), (4_010, 4_020));
        assert!(m.edges.contains(&(1 << 40 | 1, 1 << 40 | 2)));
        assert!(m.edges.contains(&(0, 1)));
        // Rank 1's task 2 waited for rank 0's task 1 (a remote edge).
        assert!(m.edges.contains(&(1, 1 << 40 | 2)));
        // Merging again changes nothing.
        assert_eq!(merge(vec![m.clone()]).unwrap(), m);
        let e = merge(vec![rank_trace(0, 1), rank_trace(0, 2)]).unwrap_err();
        assert!(e.contains("rank 0 is in trace 1 and in trace 2"), "{e}");
        assert!(merge(vec![]).is_err());
    }

    /// Issue 42, item 7: an `epoch_unix_ns` of 2^64-1 merged (its times
    /// wrapped), and `summary` and `gantt` then refused the merged file. Now
    /// the merge refuses times the readers would refuse, naming the rank.
    #[test]
    fn epochs_that_push_times_past_the_readers_are_refused() {
        let e = merge(vec![rank_trace(0, 1_000), rank_trace(1, u64::MAX)]).unwrap_err();
        assert!(e.contains("rank 1's clock starts"), "{e}");
        assert!(e.contains("which no reader accepts"), "{e}");
        // 2^53 ns later is the last time a reader takes.
        let late = 1_000 + MAX_EVENT_NS - 250;
        merge(vec![rank_trace(0, 1_000), rank_trace(1, late)]).unwrap();
        let e = merge(vec![rank_trace(0, 1_000), rank_trace(1, late + 1)]).unwrap_err();
        assert!(e.contains("rank 1's clock"), "{e}");
    }
}
