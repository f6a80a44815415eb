//! Proves the typed task API: access lists hand bodies exactly the declared
//! borrows (tuples, `Vec`s), random typed DAGs match a sequential replay at
//! 1..4 workers under every policy, codelet bodies are picked per device,
//! misuse is refused with a message naming the task or data, and tasks
//! submitted from bodies run (they go to the submitting worker's queue).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tessera_backends::emu::{EmuConfig, EmuDevice};
use tessera_engine::{
    AccessMode, Codelet, Config, Read, ReadWrite, Runtime, Scheduler, Task, Write,
};
use tessera_tests::random_dag::{Op, Params, Program};
use tessera_tests::with_timeout;

const LIMIT: Duration = Duration::from_secs(60);
const POLICIES: [Scheduler; 3] = [Scheduler::Ws, Scheduler::Prio, Scheduler::Dmda];

#[test]
fn smoke_tuple_vec_and_single() {
    with_timeout(LIMIT, || {
        let rt = Runtime::new(Config::with_workers(2)).unwrap();
        let col: Vec<_> = (0..4).map(|i| rt.register(vec![i as f64; 3])).collect();
        let s = rt.register(10.0f64);
        let total = rt.register(0.0f64);
        let add = Codelet::new("add");
        rt.task(
            &add,
            (s.r(), col.iter().map(|h| h.rw()).collect::<Vec<_>>()),
        )
        .cpu(|(s, col)| {
            assert_eq!(col.len(), 4);
            for v in col {
                v.iter_mut().for_each(|x| *x += s);
            }
            Ok(())
        })
        .submit()
        .unwrap();
        let sum = Codelet::new("sum");
        rt.task(
            &sum,
            (col.iter().map(|h| h.r()).collect::<Vec<_>>(), total.w()),
        )
        .cpu(|(col, t)| {
            *t = col.iter().flat_map(|v| v.iter()).sum();
            Ok(())
        })
        .submit()
        .unwrap();
        let double = Codelet::new("double");
        rt.task(&double, total.rw())
            .cpu(|t| {
                *t *= 2.0;
                Ok(())
            })
            .submit()
            .unwrap();
        rt.wait_all().unwrap();
        // (0+1+2+3)·3 + 4·3·10 = 138, doubled.
        assert_eq!(rt.unregister(total).unwrap(), 276.0);
    });
}

#[test]
fn random_typed_dags_match_sequential_replay() {
    with_timeout(LIMIT, || {
        let mixrw = Codelet::<(Vec<Read<u64>>, ReadWrite<u64>), Op>::with_args("mixrw").cpu(
            |_ctx, op, (reads, t)| {
                op.apply(&reads, t);
                Ok(())
            },
        );
        let mixw = Codelet::<(Vec<Read<u64>>, Write<u64>), Op>::with_args("mixw").cpu(
            |_ctx, op, (reads, t)| {
                op.apply(&reads, t);
                Ok(())
            },
        );
        for seed in 0..40u64 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let params = Params {
                overwrite: 0.3,
                ..Params::new(rng.random_range(1..8), rng.random_range(1..200))
            };
            let prog = Program::draw(&mut rng, &params);
            let expected = prog.expected_scalars();
            let sched = POLICIES[seed as usize % 3];
            let workers = 1 + seed as usize % 4;
            let rt = Runtime::new(Config::with_workers(workers).scheduler(sched)).unwrap();
            let hs = prog.register_scalars(&rt);
            for op in &prog.ops {
                let reads = op.reads.iter().map(|&i| hs[i].r()).collect::<Vec<_>>();
                match op.mode {
                    AccessMode::W => rt
                        .task(&mixw, (reads, hs[op.target].w()))
                        .args(op.clone())
                        .submit(),
                    _ => rt
                        .task(&mixrw, (reads, hs[op.target].rw()))
                        .args(op.clone())
                        .submit(),
                }
                .unwrap();
            }
            rt.wait_all().unwrap();
            let got: Vec<u64> = hs.into_iter().map(|h| rt.unregister(h).unwrap()).collect();
            assert_eq!(got, expected, "seed {seed}, {workers} workers");
        }
    });
}

#[test]
fn misuse_is_refused_naming_what_is_wrong() {
    let rt = Runtime::new(Config::with_workers(1)).unwrap();
    let a = rt.register_named(1u64, "a");
    let cl = Codelet::new("dup");
    let e = rt
        .task(&cl, (a.r(), a.rw()))
        .cpu(|_| Ok(()))
        .submit()
        .unwrap_err()
        .to_string();
    assert!(e.contains("'a' is declared twice"), "{e}");

    let with_args: Codelet<ReadWrite<u64>, u32> = Codelet::with_args("needs_args");
    let e = rt
        .task(&with_args, a.rw())
        .submit()
        .unwrap_err()
        .to_string();
    assert!(e.contains("needs_args") && e.contains(".args("), "{e}");

    let other = Runtime::new(Config::with_workers(1)).unwrap();
    let b = other.register_named(0u64, "b");
    let e = rt
        .task(&Codelet::new("foreign"), b.rw())
        .cpu(|_| Ok(()))
        .submit()
        .unwrap_err()
        .to_string();
    assert!(e.contains("'b' belongs to another runtime"), "{e}");

    // A codelet body gets its data as arguments; the context will not hand
    // any of it out again (that could alias the `&mut`).
    let a2 = a.clone();
    let sneaky = Codelet::<ReadWrite<u64>>::new("sneaky").cpu(move |ctx, _, v| {
        *v += 1;
        let e = ctx.read(&a2).map(|_| ()).unwrap_err();
        Err(e.to_string().into())
    });
    rt.task(&sneaky, a.rw()).submit().unwrap();
    let e = rt.wait_all().unwrap_err().to_string();
    assert!(e.contains("typed arguments"), "{e}");
}

#[test]
fn codelet_bodies_are_chosen_per_device() {
    with_timeout(LIMIT, || {
        let cpu_runs = Arc::new(AtomicUsize::new(0));
        let sim_runs = Arc::new(AtomicUsize::new(0));
        let (c2, s2) = (Arc::clone(&cpu_runs), Arc::clone(&sim_runs));
        let inc = Codelet::<ReadWrite<Vec<u64>>>::new("inc")
            .cpu(move |_ctx, _, v| {
                c2.fetch_add(1, Ordering::SeqCst);
                v.iter_mut().for_each(|x| *x += 1);
                Ok(())
            })
            .device::<EmuDevice, _>(move |dev, _, v| {
                s2.fetch_add(1, Ordering::SeqCst);
                dev.host_mut(v)?.iter_mut().for_each(|x| *x += 1);
                Ok(())
            });
        let sim = EmuDevice::new(
            0,
            EmuConfig {
                own_memory: true,
                ..EmuConfig::default()
            },
        );
        let rt = Runtime::new(
            Config::with_workers(1)
                .scheduler(Scheduler::Dmda)
                .device(Arc::new(sim)),
        )
        .unwrap();
        let node = rt.device_nodes()[0];
        let h = rt.register_replicable(vec![0u64; 16]);
        for i in 0..20 {
            let t = rt.task(&inc, h.rw());
            let t = if i % 2 == 0 {
                t.on_node(node)
            } else {
                t.on_node(0)
            };
            t.submit().unwrap();
        }
        rt.wait_all().unwrap();
        assert_eq!(rt.unregister(h).unwrap(), vec![20u64; 16]);
        assert_eq!(sim_runs.load(Ordering::SeqCst), 10);
        assert_eq!(cpu_runs.load(Ordering::SeqCst), 10);
    });
}

#[test]
fn submissions_from_bodies_run() {
    with_timeout(LIMIT, || {
        for sched in POLICIES {
            for workers in 1..=4 {
                let rt =
                    Arc::new(Runtime::new(Config::with_workers(workers).scheduler(sched)).unwrap());
                let count = rt.register(0u64);
                let spawn: Codelet<(), u32> = Codelet::with_args("spawn");
                let leaf = Codelet::<ReadWrite<u64>>::new("leaf").cpu(|_, _, c| {
                    *c += 1;
                    Ok(())
                });
                for _ in 0..50 {
                    let (sub2, count2, leaf2) = (rt.submitter(), count.clone(), leaf.clone());
                    rt.task(&spawn, ())
                        .args(0)
                        .cpu(move |()| {
                            for _ in 0..4 {
                                sub2.submit(Task::new(&leaf2, count2.rw()))?;
                            }
                            Ok(())
                        })
                        .submit()
                        .unwrap();
                }
                // A child is in flight from its submission, before its
                // parent finishes: one wait covers both.
                rt.wait_all().unwrap();
                assert_eq!(rt.unregister(count).unwrap(), 200, "{sched:?} {workers}");
            }
        }
    });
}
