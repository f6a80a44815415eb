//! Test fixtures shared by the Chrome writer and reader tests: a sample trace and its JSON.

use super::{write_chrome_json, ChromeOptions};
use crate::trace::model::{
    MessageDir, MessageRecord, Nanos, RankInfo, TaskRecord, Trace, TransferRecord, WorkerInfo,
};

fn task(id: u64, codelet: &str, worker: u32, start: Nanos, end: Nanos) -> TaskRecord {
    TaskRecord {
        id,
        codelet: codelet.into(),
        // Every other task has a label (with a character JSON must escape).
        label: matches!(id % 2, 0).then(|| format!("{codelet}({id},\"x\")")),
        worker,
        priority: id as i32 - 3,
        flops: match id % 3 {
            0 => 0.0,
            _ => 1.0e9 / 3.0 * id as f64,
        },
        start,
        end,
        team_rank: 0,
    }
}

pub(super) fn sample() -> Trace {
    let workers = ["cpu0", "cpu1", "cuda0 stream1"]
        .iter()
        .enumerate()
        .map(|(i, n)| WorkerInfo {
            name: (*n).into(),
            memory_node: (i / 2) as u32,
        })
        .collect();
    let codelets = ["getrf", "trsm", "gemm", "transfer"];
    let tasks = (0..30)
        .map(|i| {
            let start = 1_000 * i + 7 + i * i; // odd ns: the fraction of a µs must survive
            task(
                i,
                codelets[(i % 4) as usize],
                (i % 3) as u32,
                start,
                start + 999 + i,
            )
        })
        .collect();
    let transfers = vec![
        TransferRecord {
            handle: 4,
            from_node: 0,
            to_node: 1,
            bytes: 1 << 20,
            start: 5,
            end: 2_500,
        },
        // overlaps the first on the same pair: needs a second lane
        TransferRecord {
            handle: 5,
            from_node: 0,
            to_node: 1,
            bytes: 12,
            start: 1_001,
            end: 1_002,
        },
        TransferRecord {
            handle: 4,
            from_node: 1,
            to_node: 0,
            bytes: 1 << 20,
            start: 3_000,
            end: 3_000,
        },
    ];
    let edges = (0..29)
        .map(|i| (i, i + 1))
        .chain([(0, 17), (3, 29)])
        .collect();
    Trace {
        workers,
        tasks,
        transfers,
        edges,
        ..Trace::default()
    }
}

/// Two ranks, as `tessera trace merge` makes them: rank 0 has the sample's
/// three workers and three transfers, rank 1 two workers and one transfer,
/// and both record messages (overlapping ones on one pair need two lanes).
pub(super) fn sample_ranks() -> Trace {
    let mut t = sample();
    t.workers.push(WorkerInfo {
        name: "cpu0".into(),
        memory_node: 0,
    });
    t.workers.push(WorkerInfo {
        name: "cpu1".into(),
        memory_node: 0,
    });
    for (k, task) in t.tasks.iter_mut().enumerate().filter(|(k, _)| k % 5 == 0) {
        task.worker = 3 + (k % 2) as u32;
        task.id |= 1 << crate::trace::model::RANK_ID_SHIFT;
    }
    t.edges
        .retain(|&(a, b)| (a >> 40) == 0 && (b >> 40) == 0 && a % 5 != 0 && b % 5 != 0);
    t.transfers.push(TransferRecord {
        handle: 1,
        from_node: 0,
        to_node: 1,
        bytes: 64,
        start: 10,
        end: 20,
    });
    t.ranks = vec![
        RankInfo {
            rank: 0,
            workers: 3,
            transfers: 3,
            epoch_unix_ns: 1_700_000_000_000_000_000,
            run_id: String::new(),
        },
        RankInfo {
            rank: 1,
            workers: 2,
            transfers: 1,
            epoch_unix_ns: 1_700_000_000_000_000_000,
            run_id: String::new(),
        },
    ];
    let msg = |rank, peer, dir, bytes, start, end| MessageRecord {
        rank,
        peer,
        dir,
        kind: if bytes > 100 { "halo" } else { "edge" }.into(),
        bytes,
        start,
        end,
        task: None,
    };
    t.messages = vec![
        msg(0, 1, MessageDir::Send, 4096, 100, 150),
        msg(0, 1, MessageDir::Send, 8, 120, 130),
        msg(1, 0, MessageDir::Recv, 4096, 90, 160),
        msg(1, 0, MessageDir::Recv, 8, 170, 170),
        msg(1, 0, MessageDir::Send, 12, 5_000, 5_001),
        msg(0, 1, MessageDir::Recv, 12, 4_000, 5_050),
    ];
    // The 8-byte edge came from a symbolic task (`MessageRecord::task`):
    // the sender records its id, the receiver the sending rank's task.
    t.messages[1].task = Some(3);
    t.messages[3].task = Some(crate::trace::model::remote_task_id(0, 3));
    t
}

pub(super) fn to_json(trace: &Trace, flows: bool) -> String {
    let mut buf = Vec::new();
    write_chrome_json(trace, &mut buf, &ChromeOptions { flows }).unwrap();
    String::from_utf8(buf).unwrap()
}
