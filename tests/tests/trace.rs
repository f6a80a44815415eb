//! Proves recorded timelines are faithful: a traced run written as Chrome JSON
//! and read back has every task exactly once, start < end, no overlap on a
//! worker, and every dependency edge going from an earlier end to a later
//! start — for random DAGs at 1..4 workers and for the LU driver.

use std::collections::HashMap;
use std::time::Duration;

use tessera_engine::trace::model::Trace;
use tessera_engine::trace::{chrome, stats};
use tessera_engine::{Codelet, Config, Runtime, TaskBuilder};
use tessera_linalg::hpl::generate_matrix;
use tessera_linalg::lu::{lu_factor, Front, LuOptions};
use tessera_tests::random_dag::{Params, Program};
use tessera_tests::with_timeout;

fn check_trace(t: &Trace, submitted: usize) {
    assert_eq!(t.tasks.len(), submitted, "every task appears");
    let mut seen = HashMap::new();
    for task in &t.tasks {
        assert!(
            seen.insert(task.id, task).is_none(),
            "task {} appears twice",
            task.id
        );
        assert!(
            task.start <= task.end,
            "task {} ends before it starts",
            task.id
        );
        assert!((task.worker as usize) < t.workers.len());
    }
    for w in 0..t.workers.len() as u32 {
        let mut mine: Vec<_> = t.tasks.iter().filter(|x| x.worker == w).collect();
        mine.sort_by_key(|x| x.start);
        for pair in mine.windows(2) {
            assert!(
                pair[0].end <= pair[1].start,
                "tasks {} and {} overlap on worker {w}",
                pair[0].id,
                pair[1].id
            );
        }
    }
    for &(p, s) in &t.edges {
        let (p, s) = (seen[&p], seen[&s]);
        assert!(
            p.end <= s.start,
            "edge {} -> {} goes back in time",
            p.id,
            s.id
        );
    }
}

fn round_trip(t: &Trace) -> Trace {
    let dir = std::env::temp_dir().join(format!("tessera-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("t{}.json", t.tasks.len()));
    chrome::save(t, &path, &Default::default()).unwrap();
    let back = chrome::load(&path).unwrap();
    std::fs::remove_file(&path).ok();
    back
}

#[test]
fn random_dag_trace_round_trip() {
    with_timeout(Duration::from_secs(120), || {
        for workers in 1..=4 {
            let rt = Runtime::new(
                Config::with_workers(workers)
                    .scheduler(tessera_engine::Scheduler::Prio)
                    .trace(true),
            )
            .unwrap();
            let cl = [Codelet::new("a"), Codelet::new("b")];
            let prog = Program::random(workers as u64, &Params::new(8, 500));
            let n = prog.ops.len();
            let hs = prog.register_scalars(&rt);
            for (k, op) in prog.ops.iter().enumerate() {
                let t = TaskBuilder::new(&cl[k % 2])
                    .label(format!("t{k}"))
                    .flops(1e3);
                let run = op.body(&hs);
                rt.submit(op.declare(t, &hs).body(move |ctx| {
                    run(ctx)?;
                    std::hint::black_box((0..200).sum::<u64>());
                    Ok(())
                }))
                .unwrap();
            }
            rt.wait_all().unwrap();
            let live = rt.trace();
            check_trace(&live, n);
            assert!(!live.edges.is_empty());
            let back = round_trip(&live);
            check_trace(&back, n);
            assert_eq!(back.tasks.len(), live.tasks.len());
            assert_eq!(back.edges.len(), live.edges.len());
            let s = stats(&back);
            assert_eq!(s.workers.len(), workers);
            let got: Vec<u64> = hs.into_iter().map(|h| rt.unregister(h).unwrap()).collect();
            let expected = prog.expected_scalars();
            assert_eq!(got, expected, "{workers} workers");
        }
    });
}

#[test]
fn lu_trace_shows_every_kernel_and_symbolic_edges() {
    with_timeout(Duration::from_secs(120), || {
        for front in [Front::Stf, Front::Symbolic] {
            let rt = Runtime::new(
                Config::with_workers(2)
                    .scheduler(tessera_engine::Scheduler::Prio)
                    .trace(true),
            )
            .unwrap();
            lu_factor(&rt, generate_matrix(96, 16, 1), &LuOptions::new(front)).unwrap();
            let t = round_trip(&rt.trace());
            let t_tiles: usize = 6;
            // panels + right swaps and trsms + gemms (no left swaps: HPL's layout)
            let expected = t_tiles
                + t_tiles * (t_tiles - 1)
                + (0..t_tiles)
                    .map(|k| (t_tiles - k - 1).pow(2))
                    .sum::<usize>();
            check_trace(&t, expected);
            for c in ["panel", "swap", "trsm", "gemm"] {
                assert!(
                    t.tasks.iter().any(|x| x.codelet == c),
                    "{front:?}: no {c} task"
                );
            }
            // every task but the first panel has a recorded predecessor
            let with_preds: std::collections::HashSet<u64> = t.edges.iter().map(|e| e.1).collect();
            assert_eq!(
                with_preds.len(),
                expected - 1,
                "{front:?}: edges missing from the trace"
            );
        }
    });
}

/// A task's span is its body's: what it runs after the body (`then`, where
/// a symbolic task makes its successors) counts in its successor's release
/// latency, as StarPU's and PaRSEC's traces keep callbacks and dependency
/// release out of a task's execution. The `then` sleeps 200 ms; the
/// successor cannot start before it ends, so it starts at least 200 ms after
/// its predecessor's span (the old span, which covered the `then`, gave
/// about 0) and the predecessor's span is shorter than the sleep.
#[test]
fn a_span_ends_with_the_body_before_then() {
    with_timeout(Duration::from_secs(60), || {
        let rt = Runtime::new(Config::with_workers(2).trace(true)).unwrap();
        let h = rt.register(0u64);
        let cl = Codelet::new("step");
        let sleep = Duration::from_millis(200);
        let first = rt
            .submit(
                TaskBuilder::new(&cl)
                    .rw(&h)
                    .body(|_| Ok(()))
                    .then(move |_| {
                        std::thread::sleep(sleep);
                        Ok(())
                    }),
            )
            .unwrap();
        let second = rt
            .submit(TaskBuilder::new(&cl).rw(&h).body(|_| Ok(())))
            .unwrap();
        rt.wait_all().unwrap();
        let t = rt.trace();
        let at = |id: u64| t.tasks.iter().find(|x| x.id == id).expect("traced");
        let (a, b) = (at(first.id()), at(second.id()));
        let sleep_ns = sleep.as_nanos() as u64;
        assert!(
            b.start >= a.end + sleep_ns,
            "the successor started {} ns after its predecessor's span ended, within the {sleep_ns} ns its `then` slept: the span covered the `then`",
            b.start - a.end
        );
        assert!(
            a.end - a.start < sleep_ns,
            "the span ({} ns) covers the `then`'s {sleep_ns} ns sleep",
            a.end - a.start
        );
        let r = stats(&t).release.expect("one local edge");
        assert!(r.median.is_some_and(|m| m >= sleep_ns as i64), "{r:?}");
        rt.unregister(h).unwrap();
    });
}
