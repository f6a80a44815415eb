//! Proves the statistics on hand-built traces whose critical path, bounds,
//! busy percentages and efficiency are known exactly, and that bad edges
//! (unknown ids, cycles) are reported instead of hanging or panicking.

use super::ranks::measure_minus;
use super::*;
use crate::trace::model::{MessageDir, RankInfo, TaskRecord, TransferRecord, WorkerInfo};

fn task(id: u64, codelet: &str, worker: u32, start: Nanos, end: Nanos, flops: f64) -> TaskRecord {
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

/// A CPU worker named `name` (memory node 0).
fn cpu(name: &str) -> WorkerInfo {
    WorkerInfo {
        name: name.into(),
        memory_node: 0,
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
        workers: vec![cpu("cpu0"), cpu("cpu1")],
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
    let msg = |rank, peer, dir, bytes, start, end| MessageRecord {
        rank,
        peer,
        dir,
        kind: "edge".into(),
        bytes,
        start,
        end,
        task: None,
    };
    let t = Trace {
        workers: vec![cpu("cpu0"), cpu("cpu0")],
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

/// Two workers, five tasks, whose starts after their last-ending
/// predecessor are known:
///
/// ```text
/// cpu0: [a 0..100]      [c 130..200] [d 205..300]
/// cpu1: [b 0..120] [e 125..150]
/// edges: a→c, b→c, c→d, b→e, and one to an unknown id
/// ```
/// c waits for b (the later end) and runs on the other worker: 10 ns; d
/// and e run on their predecessor's worker: 5 ns each.
fn released() -> Trace {
    Trace {
        workers: vec![cpu("cpu0"), cpu("cpu1")],
        tasks: vec![
            task(1, "a", 0, 0, 100, 0.0),
            task(2, "b", 1, 0, 120, 0.0),
            task(3, "c", 0, 130, 200, 0.0),
            task(4, "d", 0, 205, 300, 0.0),
            task(5, "e", 1, 125, 150, 0.0),
        ],
        edges: vec![(1, 3), (2, 3), (3, 4), (2, 5), (9, 4)],
        ..Trace::default()
    }
}

#[test]
fn release_latency_is_measured_from_the_last_predecessor() {
    let s = stats(&released());
    let r = s.release.clone().expect("the trace has local edges");
    assert_eq!(
        (r.count, r.median, r.p90, r.p99),
        (3, Some(5), Some(10), Some(10))
    );
    assert_eq!((r.same_worker.count, r.same_worker.median), (2, Some(5)));
    assert_eq!((r.other_worker.count, r.other_worker.median), (1, Some(10)));
    let text = s.to_string();
    assert!(
        text.contains(
            "Local edges: 3 tasks started after their last predecessor on their rank, median 5 ns"
        ),
        "{text}"
    );
    // Without edges there is nothing to say.
    let mut bare = released();
    bare.edges.clear();
    assert_eq!(stats(&bare).release, None);
    assert!(!stats(&bare).to_string().contains("Local edges"));
}

#[test]
fn release_latency_leaves_edges_across_ranks_out() {
    // cpu0 is rank 0 and cpu1 rank 1: b→c crosses ranks, so c waits only
    // for a (30 ns, on a's worker); d and e still wait 5 ns each.
    let mut t = released();
    t.ranks = vec![RankInfo::unstamped(0, 1, 0), RankInfo::unstamped(1, 1, 0)];
    let r = stats(&t).release.expect("a→c, c→d and b→e are local");
    assert_eq!((r.count, r.median, r.p99), (3, Some(5), Some(30)));
    assert_eq!((r.same_worker.count, r.other_worker.count), (3, 0));
    assert_eq!(r.other_worker.median, None);
}
