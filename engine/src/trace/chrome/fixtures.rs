//! Test fixtures shared by the Chrome writer and reader tests: a sample trace and its JSON.

use super::{write_chrome_json, ChromeOptions};
use crate::trace::model::{Nanos, TaskRecord, Trace, TransferRecord, WorkerInfo};

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
    }
}

pub(super) fn to_json(trace: &Trace, flows: bool) -> String {
    let mut buf = Vec::new();
    write_chrome_json(trace, &mut buf, &ChromeOptions { flows }).unwrap();
    String::from_utf8(buf).unwrap()
}
