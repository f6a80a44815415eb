//! Proves the engine runs task graphs correctly under concurrency: inferred
//! dependencies match a sequential replay, at 1..4 workers, with every test
//! bounded by a timeout so a lost wake-up or a deadlock fails instead of hanging.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tessera_engine::{Codelet, Config, Error, Runtime, TaskBuilder, TaskGraph};
use tessera_tests::dist_dag::RankDag;
use tessera_tests::random_dag::{Params, Program, Shape};
use tessera_tests::with_timeout;

const WORKERS: [usize; 4] = [1, 2, 3, 4];
const LIMIT: Duration = Duration::from_secs(60);

fn rt(workers: usize, sched: &str) -> Runtime {
    Runtime::new(Config::with_workers(workers).scheduler(sched.parse().unwrap()))
        .expect("runtime starts")
}

#[test]
fn smoke() {
    with_timeout(LIMIT, || {
        for sched in ["ws", "prio"] {
            for w in WORKERS {
                let rt = rt(w, sched);
                let cl = Codelet::new("add");
                let a = rt.register(1u64);
                let b = rt.register(0u64);
                let (a2, b2) = (a.clone(), b.clone());
                rt.submit(TaskBuilder::new(&cl).read(&a).rw(&b).body(move |ctx| {
                    *ctx.write(&b2)? += *ctx.read(&a2)? + 41;
                    Ok(())
                }))
                .unwrap();
                rt.wait_all().unwrap();
                assert_eq!(rt.unregister(b).unwrap(), 42);
                assert_eq!(rt.unregister(a).unwrap(), 1);
            }
        }
    });
}

/// Run `prog` (one-lane handles) on `rt`, each task with its priority;
/// returns the handles' final values.
fn run_program(rt: &Runtime, prog: &Program) -> Vec<u64> {
    let cl = Codelet::new("op");
    let hs = prog.register_scalars(rt);
    for (k, op) in prog.ops.iter().enumerate() {
        let t = TaskBuilder::new(&cl)
            .label(format!("op{k}"))
            .priority(op.priority());
        rt.submit(op.declare(t, &hs).body(op.body(&hs)))
            .expect("submit");
    }
    rt.wait_all_timeout(LIMIT).expect("dag finishes");
    hs.into_iter().map(|h| rt.unregister(h).unwrap()).collect()
}

#[test]
fn random_dags_match_sequential_replay() {
    with_timeout(Duration::from_secs(240), || {
        let runtimes: Vec<Runtime> = WORKERS
            .iter()
            .flat_map(|&w| [rt(w, "ws"), rt(w, "prio")])
            .collect();
        for seed in 0..1000u64 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let params = Params::new(rng.random_range(1..12), rng.random_range(1..60));
            let prog = Program::draw(&mut rng, &params);
            let rt = &runtimes[(seed as usize) % runtimes.len()];
            assert_eq!(
                run_program(rt, &prog),
                prog.expected_scalars(),
                "seed {seed}: {} workers, {} scheduler differs from sequential replay",
                rt.workers(),
                rt.scheduler_name()
            );
        }
    });
}

/// Random symbolic DAGs in one process (every other task numbered, so
/// predecessors are counted both in the unfolding's counters and in its
/// map) give the sequential result at 1..4 workers.
#[test]
fn random_symbolic_dags_match_sequential() {
    with_timeout(LIMIT, || {
        for seed in 0..48u64 {
            let workers = WORKERS[seed as usize % WORKERS.len()];
            let n = 20 + (seed as usize * 37) % 200;
            let shape = Arc::new(Shape::random(seed, n, 1));
            let rt = rt(workers, "ws");
            let dag = Arc::new(RankDag::new(&rt, Arc::clone(&shape), 0, None));
            tessera_engine::symbolic::run(&rt, Arc::clone(&dag)).unwrap();
            let got: Vec<Vec<u64>> = dag.outputs(&rt).into_iter().map(|(_, v)| v).collect();
            assert_eq!(got, shape.expected(), "seed {seed}, {workers} workers");
        }
    });
}

#[test]
fn chain() {
    with_timeout(LIMIT, || {
        for w in WORKERS {
            let rt = rt(w, "ws");
            let cl = Codelet::new("inc");
            let h = rt.register(0u64);
            for _ in 0..100_000 {
                let h2 = h.clone();
                rt.submit(TaskBuilder::new(&cl).rw(&h).body(move |ctx| {
                    *ctx.write(&h2)? += 1;
                    Ok(())
                }))
                .unwrap();
            }
            rt.wait_all().unwrap();
            assert_eq!(rt.unregister(h).unwrap(), 100_000);
        }
    });
}

#[test]
fn fan_out_fan_in() {
    with_timeout(LIMIT, || {
        for w in WORKERS {
            let rt = rt(w, "prio");
            let cl = Codelet::new("fan");
            let src = rt.register(3u64);
            let sum = Arc::new(AtomicUsize::new(0));
            let outs: Vec<_> = (0..100_000).map(|_| rt.register(0u64)).collect();
            for o in &outs {
                let (s, o2) = (src.clone(), o.clone());
                rt.submit(TaskBuilder::new(&cl).read(&src).write(o).body(move |ctx| {
                    *ctx.write(&o2)? = *ctx.read(&s)? * 2;
                    Ok(())
                }))
                .unwrap();
            }
            // fan-in: one task reads all outputs
            let mut t = TaskBuilder::new(&cl).label("gather");
            for o in &outs {
                t = t.read(o);
            }
            let (outs2, sum2) = (outs.clone(), sum.clone());
            t = t.body(move |ctx| {
                let mut s = 0;
                for o in &outs2 {
                    s += *ctx.read(o)? as usize;
                }
                sum2.store(s, Ordering::SeqCst);
                Ok(())
            });
            rt.submit(t).unwrap();
            rt.wait_all().unwrap();
            assert_eq!(sum.load(Ordering::SeqCst), 600_000);
        }
    });
}

#[test]
fn stampede() {
    with_timeout(Duration::from_secs(120), || {
        for sched in ["ws", "prio"] {
            let rt = rt(4, sched);
            let cl = Codelet::new("empty");
            let ran = Arc::new(AtomicUsize::new(0));
            for _ in 0..1_000_000 {
                let r = ran.clone();
                rt.submit(TaskBuilder::new(&cl).body(move |_| {
                    r.fetch_add(1, Ordering::Relaxed);
                    Ok(())
                }))
                .unwrap();
            }
            rt.wait_all().unwrap();
            assert_eq!(ran.load(Ordering::SeqCst), 1_000_000);
        }
    });
}

#[test]
fn submission_from_four_threads() {
    with_timeout(LIMIT, || {
        for w in WORKERS {
            let rt = rt(w, "ws");
            let cl = Codelet::new("inc");
            let shared = rt.register(0u64);
            let privates: Vec<_> = (0..4).map(|_| rt.register(0u64)).collect();
            std::thread::scope(|s| {
                for p in &privates {
                    let (rt, cl, shared) = (&rt, &cl, &shared);
                    s.spawn(move || {
                        for i in 0..5_000u64 {
                            let (p2, s2) = (p.clone(), shared.clone());
                            rt.submit(TaskBuilder::new(cl).rw(p).rw(shared).body(move |ctx| {
                                *ctx.write(&p2)? += i;
                                *ctx.write(&s2)? += 1;
                                Ok(())
                            }))
                            .unwrap();
                        }
                    });
                }
            });
            rt.wait_all().unwrap();
            assert_eq!(rt.unregister(shared).unwrap(), 20_000);
            for p in privates {
                assert_eq!(rt.unregister(p).unwrap(), (0..5_000).sum::<u64>());
            }
        }
    });
}

#[test]
fn pipelined_submission_and_wait() {
    with_timeout(LIMIT, || {
        for w in WORKERS {
            let rt = rt(w, "ws");
            let cl = Codelet::new("step");
            let h = rt.register(Vec::<u32>::new());
            for i in 0..2_000u32 {
                let h2 = h.clone();
                let t = rt
                    .submit(TaskBuilder::new(&cl).rw(&h).body(move |ctx| {
                        ctx.write(&h2)?.push(i);
                        Ok(())
                    }))
                    .unwrap();
                if i % 97 == 0 {
                    rt.wait_timeout(&t, LIMIT).unwrap();
                    assert!(t.is_done());
                }
                if i % 13 == 0 {
                    // let workers go idle so they park and must be woken
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
            rt.wait_all().unwrap();
            assert_eq!(rt.unregister(h).unwrap(), (0..2_000).collect::<Vec<_>>());
        }
    });
}

/// `wait_all` and waits on single tasks from other threads while tasks are
/// submitted and finished around them: `wait_all` is woken only when the
/// count of tasks in flight reaches zero, task waits by every completion. A
/// lost wake-up hangs a waiter, which the timeout turns into a failure.
#[test]
fn waits_from_other_threads_while_submitting() {
    with_timeout(LIMIT, || {
        for w in WORKERS {
            let rt = &rt(w, "ws");
            let cl = &Codelet::new("inc");
            let counters: Vec<_> = (0..2).map(|_| rt.register(0u64)).collect();
            let submit = move |c: &tessera_engine::DataHandle<u64>, pause: Duration| {
                let c2 = c.clone();
                rt.submit(TaskBuilder::new(cl).rw(c).body(move |ctx| {
                    std::thread::sleep(pause);
                    *ctx.write(&c2)? += 1;
                    Ok(())
                }))
                .unwrap()
            };
            // wait_all alone in its thread, with tasks in flight when it
            // starts and more submitted while it waits.
            for _ in 0..10 {
                for _ in 0..20 {
                    submit(&counters[0], Duration::from_micros(100));
                }
                std::thread::scope(|s| {
                    let waiter = s.spawn(move || rt.wait_all());
                    for _ in 0..20 {
                        submit(&counters[1], Duration::ZERO);
                    }
                    waiter.join().unwrap().unwrap();
                });
            }
            // Waits on single tasks from two threads, beside busy submitters.
            std::thread::scope(|s| {
                for c in &counters {
                    let submit = &submit;
                    s.spawn(move || {
                        for _ in 0..100 {
                            let t = submit(c, Duration::ZERO);
                            submit(c, Duration::ZERO);
                            rt.wait(&t).unwrap();
                            assert!(t.is_done());
                        }
                    });
                }
            });
            rt.wait_all().unwrap();
            assert_eq!(rt.tasks_in_flight(), 0);
            let [a, b]: [_; 2] = counters.try_into().unwrap();
            assert_eq!(rt.unregister(a).unwrap(), 200 + 200);
            assert_eq!(rt.unregister(b).unwrap(), 200 + 200);
        }
    });
}

#[test]
fn panic_propagates() {
    with_timeout(LIMIT, || {
        for w in WORKERS {
            let rt = rt(w, "ws");
            let cl = Codelet::new("step");
            let a = rt.register(0u64);
            let b = rt.register(0u64);
            let a2 = a.clone();
            rt.submit(
                TaskBuilder::new(&cl)
                    .rw(&a)
                    .label("bad(7)")
                    .body(move |ctx| {
                        *ctx.write(&a2)? = 1;
                        panic!("boom at 7");
                    }),
            )
            .unwrap();
            let ran = Arc::new(AtomicUsize::new(0));
            for _ in 0..3 {
                let r = ran.clone();
                rt.submit(
                    TaskBuilder::new(&cl)
                        .rw(&a)
                        .label("dependent")
                        .body(move |_| {
                            r.fetch_add(1, Ordering::SeqCst);
                            Ok(())
                        }),
                )
                .unwrap();
            }
            // an independent task still runs
            let b2 = b.clone();
            rt.submit(TaskBuilder::new(&cl).rw(&b).body(move |ctx| {
                *ctx.write(&b2)? = 5;
                Ok(())
            }))
            .unwrap();
            let err = rt.wait_all_timeout(LIMIT).unwrap_err();
            let msg = err.to_string();
            assert!(msg.contains("bad(7)") && msg.contains("boom at 7"), "{msg}");
            match err {
                Error::Failed(e) => {
                    assert_eq!(e.failures.len(), 1);
                    assert_eq!(e.cancelled.len(), 3, "{e}");
                }
                other => panic!("unexpected {other}"),
            }
            assert_eq!(ran.load(Ordering::SeqCst), 0, "dependents must not run");
            // errors are reported once; the runtime stays usable
            rt.wait_all().unwrap();
            assert_eq!(rt.unregister(b).unwrap(), 5);
            // `a` was written by a failed task: it is poisoned, and says by whom
            let e = rt.unregister(a).unwrap_err().to_string();
            assert!(
                e.contains("bad(7)") && e.contains("cancelled because"),
                "{e}"
            );
        }
    });
}

#[test]
fn body_error_fails_task() {
    with_timeout(LIMIT, || {
        let rt = rt(2, "ws");
        let cl = Codelet::new("parse");
        rt.submit(
            TaskBuilder::new(&cl)
                .label("parse(line 3)")
                .body(|_| Err("bad number on line 3".into())),
        )
        .unwrap();
        let msg = rt.wait_all().unwrap_err().to_string();
        assert!(
            msg.contains("parse(line 3)") && msg.contains("bad number on line 3"),
            "{msg}"
        );
    });
}

#[test]
fn undeclared_or_wrong_mode_access_is_an_error() {
    with_timeout(LIMIT, || {
        let rt = rt(1, "ws");
        let cl = Codelet::new("sneaky");
        let a = rt.register(1u64);
        let b = rt.register_named(2u64, "b");
        let (a2, b2) = (a.clone(), b.clone());
        rt.submit(TaskBuilder::new(&cl).read(&a).body(move |ctx| {
            ctx.read(&b2)?;
            Ok(())
        }))
        .unwrap();
        let msg = rt.wait_all().unwrap_err().to_string();
        assert!(msg.contains("did not declare data 'b'"), "{msg}");
        rt.submit(TaskBuilder::new(&cl).read(&a).body(move |ctx| {
            *ctx.write(&a2)? = 3;
            Ok(())
        }))
        .unwrap();
        let msg = rt.wait_all().unwrap_err().to_string();
        assert!(msg.contains("may not write"), "{msg}");
        let a3 = a.clone();
        rt.submit(TaskBuilder::new(&cl).rw(&a).body(move |ctx| {
            let _r = ctx.read(&a3)?;
            ctx.write(&a3)?; // would alias the shared borrow
            Ok(())
        }))
        .unwrap();
        let msg = rt.wait_all().unwrap_err().to_string();
        assert!(msg.contains("already borrowed"), "{msg}");
        // duplicate and foreign handles are refused at submission
        let err = rt
            .submit(TaskBuilder::new(&cl).read(&a).rw(&a))
            .unwrap_err();
        assert!(err.to_string().contains("declared twice"), "{err}");
        let other = Runtime::with_workers(1).unwrap();
        let foreign = other.register(0u8);
        let err = rt.submit(TaskBuilder::new(&cl).read(&foreign)).unwrap_err();
        assert!(err.to_string().contains("another runtime"), "{err}");
    });
}

fn thread_count() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Threads:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

#[test]
fn drop_with_tasks_in_flight() {
    with_timeout(LIMIT, || {
        for w in WORKERS {
            let rt = rt(w, "ws");
            let before_drop = thread_count();
            let cl = Codelet::new("slow");
            let h = rt.register(0u64);
            for _ in 0..10_000 {
                let h2 = h.clone();
                rt.submit(TaskBuilder::new(&cl).rw(&h).body(move |ctx| {
                    *ctx.write(&h2)? += 1;
                    std::thread::sleep(Duration::from_micros(50));
                    Ok(())
                }))
                .unwrap();
            }
            drop(rt);
            let after = thread_count();
            // other tests run in parallel threads, so only check this runtime's
            // workers are gone where the count is meaningful
            assert!(
                after + w <= before_drop + 64,
                "threads leaked: {before_drop} -> {after}"
            );
            // the handle (and the closures that captured it) are freed: no cycle
            assert_eq!(Arc::strong_count(&Arc::new(())), 1);
            drop(h);
        }
    });
}

/// A long chain that never runs is unlinked iteratively when the runtime is
/// dropped: each task holds its successor, and dropping 200 000 of them
/// recursively overflows the stack.
#[test]
fn dropping_a_long_unrun_chain_does_not_overflow_the_stack() {
    with_timeout(LIMIT, || {
        let rt = rt(1, "ws");
        let cl = Codelet::new("link");
        let h = rt.register(0u64);
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let rx = std::sync::Mutex::new(rx);
        // The head holds the only worker until `tx` is dropped.
        rt.submit(TaskBuilder::new(&cl).rw(&h).body(move |_| {
            let _ = rx.lock().unwrap().recv();
            Ok(())
        }))
        .unwrap();
        for _ in 0..200_000 {
            rt.submit(TaskBuilder::new(&cl).rw(&h).body(|_| Ok(())))
                .unwrap();
        }
        // Release the head only once the runtime is shutting down.
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            drop(tx);
        });
        drop(rt);
        release.join().unwrap();
        drop(h);
    });
}

#[test]
fn explicit_graph_cycle_names_a_task() {
    let cl = Codelet::new("n");
    let mut g = TaskGraph::new();
    let a = g.add(TaskBuilder::new(&cl).label("a"));
    let b = g.add(TaskBuilder::new(&cl).label("b"));
    let c = g.add(TaskBuilder::new(&cl).label("c"));
    g.edge(a, b);
    g.edge(b, c);
    g.edge(c, b);
    let err = g.check().unwrap_err().to_string();
    assert!(
        err.contains("cycle through task 'b'") || err.contains("cycle through task 'c'"),
        "{err}"
    );
}

#[test]
fn explicit_graph_runs_in_edge_order() {
    with_timeout(LIMIT, || {
        for w in WORKERS {
            let rt = rt(w, "ws");
            let cl = Codelet::new("n");
            let log = Arc::new(std::sync::Mutex::new(Vec::new()));
            let mut g = TaskGraph::new();
            let ids: Vec<_> = (0..50)
                .map(|i| {
                    let l = log.clone();
                    g.add(TaskBuilder::new(&cl).label(format!("t{i}")).body(move |_| {
                        l.lock().unwrap().push(i);
                        Ok(())
                    }))
                })
                .collect();
            // a reversed chain given out of order
            for i in (1..50).rev() {
                g.edge(ids[i], ids[i - 1]);
            }
            assert!(g.to_dot().contains("t49"));
            g.submit(&rt).unwrap();
            rt.wait_all().unwrap();
            assert_eq!(*log.lock().unwrap(), (0..50).rev().collect::<Vec<_>>());
        }
    });
}

#[test]
fn dot_export_of_submitted_graph() {
    let rt = Runtime::new(Config::with_workers(2).record_graph(true)).unwrap();
    let cl = Codelet::new("k").empty();
    let h = rt.register(0u8);
    rt.submit(TaskBuilder::new(&cl).label("first").write(&h))
        .unwrap();
    rt.submit(TaskBuilder::new(&cl).label("second").read(&h))
        .unwrap();
    rt.wait_all().unwrap();
    let dot = rt.graph_dot().unwrap();
    assert!(
        dot.contains("first") && dot.contains("second") && dot.contains("->"),
        "{dot}"
    );
}

#[test]
fn worker_hook_runs_and_its_error_is_reported() {
    with_timeout(LIMIT, || {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let s2 = seen.clone();
        let mut cfg = Config::with_workers(3);
        cfg.on_worker_start = Some(tessera_engine::WorkerHook(Arc::new(move |w| {
            s2.lock().unwrap().push(w);
            Ok(())
        })));
        let rt = Runtime::new(cfg).unwrap();
        drop(rt);
        let mut v = seen.lock().unwrap().clone();
        v.sort_unstable();
        assert_eq!(v, vec![0, 1, 2]);

        let mut cfg = Config::with_workers(2);
        cfg.on_worker_start = Some(tessera_engine::WorkerHook(Arc::new(|w| {
            if w == 1 {
                Err("cannot bind to core 7".into())
            } else {
                Ok(())
            }
        })));
        let err = Runtime::new(cfg).err().expect("start-up fails").to_string();
        assert!(err.contains("worker 1: cannot bind to core 7"), "{err}");
    });
}

#[test]
fn custom_steal_order_is_validated_and_used() {
    with_timeout(LIMIT, || {
        let mut cfg = Config::with_workers(3);
        cfg.steal_order = Some(vec![vec![1, 2], vec![0, 2], vec![1, 0]]);
        let rt = Runtime::new(cfg).unwrap();
        let prog = Program::random(5, &Params::new(6, 300));
        assert_eq!(run_program(&rt, &prog), prog.expected_scalars());
        let mut bad = Config::with_workers(2);
        bad.steal_order = Some(vec![vec![0], vec![0]]);
        assert!(Runtime::new(bad).is_err());
    });
}

/// Under `ws` a finished task's successors go to its worker's deque with no
/// wake-up; the chain wake-up then wakes a sleeper per pop of a worker that
/// sees more work. A thief that stole one of them looked only at its own
/// (empty) deque, so the chain stopped there, and with the other workers
/// parked the burst's other successors waited for their owner. Here three
/// successors of a long task must run at once (they meet, each giving up
/// after 5 s): every parked worker they need must be woken.
#[test]
fn a_burst_on_one_deque_wakes_as_many_sleepers_as_it_needs() {
    with_timeout(LIMIT, || {
        for workers in [3, 4] {
            let rt = rt(workers, "ws");
            let cl = Codelet::new("burst");
            let h = rt.register(0u64);
            // Long enough for the other workers to park.
            rt.submit(TaskBuilder::new(&cl).rw(&h).body(|_| {
                std::thread::sleep(Duration::from_millis(100));
                Ok(())
            }))
            .unwrap();
            let meeting = tessera_tests::Meeting::new(3, Duration::from_secs(5));
            for _ in 0..3 {
                let m = meeting.clone();
                rt.submit(TaskBuilder::new(&cl).read(&h).body(move |_| {
                    m.attend();
                    Ok(())
                }))
                .unwrap();
            }
            rt.wait_all().unwrap();
            assert_eq!(
                meeting.met(),
                3,
                "{workers} workers: the three successors never ran at once"
            );
        }
    });
}

/// A task a worker makes ready after its body ended is kept for that
/// worker's next pop (`ws`, `WorkerQueue::push_next`), so independent
/// chains stay on their workers. Before, a worker still completing its
/// task had the successor it had just pushed stolen by a worker that was
/// itself between two tasks of its own chain: 5 % of the tasks of Task
/// Bench's `no_comm` on 2 workers changed workers, each theft leaving its
/// victim to search.
#[test]
fn independent_chains_stay_on_their_workers() {
    const STEPS: u64 = 300;
    with_timeout(LIMIT, || {
        for workers in [2, 4] {
            let mut cfg = Config::with_workers(workers).scheduler("ws".parse().unwrap());
            cfg.trace = true;
            let rt = Runtime::new(cfg).unwrap();
            let cl = Codelet::new("link");
            // Every link is submitted before the chains start: each is made
            // ready by its predecessor's end, never by its submission.
            let gate = rt.register(0u8);
            let open = Arc::new(AtomicBool::new(false));
            let o = Arc::clone(&open);
            rt.submit(
                TaskBuilder::new(&cl)
                    .label("gate")
                    .write(&gate)
                    .body(move |_| {
                        while !o.load(Ordering::Acquire) {
                            std::thread::yield_now();
                        }
                        Ok(())
                    }),
            )
            .unwrap();
            let chains: Vec<_> = (0..workers).map(|_| rt.register(0u64)).collect();
            for s in 0..STEPS {
                for (c, h) in chains.iter().enumerate() {
                    let mut t = TaskBuilder::new(&cl).label(format!("{c}/{s}")).rw(h);
                    if s == 0 {
                        t = t.read(&gate);
                    }
                    let h2 = h.clone();
                    rt.submit(t.body(move |ctx| {
                        *ctx.write(&h2)? += 1;
                        Ok(())
                    }))
                    .unwrap();
                }
            }
            open.store(true, Ordering::Release);
            rt.wait_all().unwrap();
            let t = rt.trace();
            for h in chains {
                assert_eq!(rt.unregister(h).unwrap(), STEPS);
            }
            let mut worker = std::collections::HashMap::new();
            for x in &t.tasks {
                if let Some((c, s)) = x.label.as_deref().and_then(|l| l.split_once('/')) {
                    let key = (c.parse::<usize>().unwrap(), s.parse::<u64>().unwrap());
                    worker.insert(key, x.worker);
                }
            }
            assert_eq!(worker.len(), workers * STEPS as usize);
            let moved = (0..workers)
                .flat_map(|c| (1..STEPS).map(move |s| (c, s)))
                .filter(|&(c, s)| worker[&(c, s)] != worker[&(c, s - 1)])
                .count();
            assert_eq!(
                moved, 0,
                "{workers} workers: {moved} links ran on another worker than the link before them"
            );
        }
    });
}
