//! Proves the light front-end (`tessera_engine::light`): random DAGs give
//! the sequential result at 1..4 workers, every task runs once and only
//! after all its predecessors; a task's error or panic ends the run with
//! the task's key and starts none of its successors, an interrupt ends it
//! before the next task starts; predecessor counts
//! that do not match the edges, numbers out of range and a simulated
//! runtime are refused by name, never a hang (every test under a timeout).

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tessera_engine::dist::light::DistLightClasses;
use tessera_engine::light::{self, LightClasses};
use tessera_engine::{BodyError, Config, Error, Runtime};
use tessera_tests::random_dag::Shape;
use tessera_tests::with_timeout;

const LIMIT: Duration = Duration::from_secs(60);

/// A [`Shape`] as light tasks: task `t` mixes its predecessors' outputs
/// into its own, and checks that each ran once, before it.
struct ShapeLight {
    shape: Shape,
    outputs: Vec<UnsafeCell<Vec<u64>>>,
    /// Per task: times run.
    ran: Vec<AtomicU8>,
    /// Declared predecessor counts (a test makes some wrong).
    counts: Vec<usize>,
    /// Tasks that fail (`Err`) or panic.
    fail: Option<usize>,
    panic: Option<usize>,
    /// Numbers dealt (a test makes one too small).
    slots: usize,
    /// Whether `run` checks that its predecessors ran (a test whose counts
    /// are wrong on purpose turns it off, to see what the engine finds).
    check_order: bool,
    /// A task that interrupts this runtime (Ctrl-C's call) when it runs.
    interrupts: Option<(usize, Arc<Runtime>)>,
    /// The rank this value runs on (the distributed tests).
    rank: usize,
    /// A task whose successors' description panics.
    panic_in_successors: Option<usize>,
    /// A task that sleeps this long before it works.
    slow: Option<(usize, Duration)>,
}

// SAFETY: task t's output is written only by t's `run` and read only by its
// successors', which `light::run` calls after t's returned.
unsafe impl Sync for ShapeLight {}

impl ShapeLight {
    fn new(shape: Shape) -> ShapeLight {
        let n = shape.preds.len();
        ShapeLight {
            counts: shape.preds.iter().map(Vec::len).collect(),
            outputs: (0..n).map(|_| UnsafeCell::new(Vec::new())).collect(),
            ran: (0..n).map(|_| AtomicU8::new(0)).collect(),
            fail: None,
            panic: None,
            slots: n,
            check_order: true,
            interrupts: None,
            rank: 0,
            panic_in_successors: None,
            slow: None,
            shape,
        }
    }

    fn outputs(&self) -> Vec<Vec<u64>> {
        // SAFETY: the run is over: no task runs.
        self.outputs
            .iter()
            .map(|o| unsafe { (*o.get()).clone() })
            .collect()
    }
}

impl LightClasses for ShapeLight {
    type Key = usize;

    fn roots(&self) -> Vec<usize> {
        (0..self.shape.preds.len())
            .filter(|&t| self.shape.preds[t].is_empty())
            .collect()
    }

    fn predecessor_count(&self, &t: &usize) -> usize {
        self.counts[t]
    }

    fn successors(&self, &t: &usize, out: &mut Vec<usize>) {
        if self.panic_in_successors == Some(t) {
            panic!("successors of {t} panicked on purpose");
        }
        out.extend_from_slice(&self.shape.succs[t]);
    }

    fn slots(&self) -> usize {
        self.slots
    }

    fn slot(&self, &t: &usize) -> usize {
        t
    }

    fn run(&self, &t: &usize) -> Result<(), BodyError> {
        if self.ran[t].fetch_add(1, Ordering::AcqRel) != 0 {
            return Err(format!("task {t} ran twice").into());
        }
        // A predecessor on another rank is checked by its output having
        // come: an empty one fails the mix below.
        let here = |&&p: &&usize| self.shape.owner[p] == self.rank;
        for &p in self.shape.preds[t]
            .iter()
            .filter(|_| self.check_order)
            .filter(here)
        {
            if self.ran[p].load(Ordering::Acquire) != 1 {
                return Err(format!("task {t} ran before its predecessor {p}").into());
            }
        }
        if let Some((_, d)) = self.slow.filter(|(s, _)| *s == t) {
            std::thread::sleep(d);
        }
        if let Some((_, rt)) = self.interrupts.as_ref().filter(|(i, _)| *i == t) {
            rt.interrupt();
        }
        if self.fail == Some(t) {
            return Err("failed on purpose".into());
        }
        if self.panic == Some(t) {
            panic!("panicked on purpose");
        }
        if !self.check_order {
            // Its predecessors may not have run: their outputs are not read.
            unsafe { *self.outputs[t].get() = vec![0; tessera_tests::random_dag::LEN] };
            return Ok(());
        }
        // SAFETY: see the `Sync` impl.
        if let Some(p) =
            (self.shape.preds[t].iter()).find(|&&p| unsafe { (*self.outputs[p].get()).is_empty() })
        {
            return Err(format!("task {t} ran before predecessor {p}'s output came").into());
        }
        let inputs: Vec<&Vec<u64>> = self.shape.preds[t]
            .iter()
            .map(|&p| unsafe { &*self.outputs[p].get() })
            .collect();
        let v = Shape::mix(self.shape.salt[t], &inputs);
        unsafe { *self.outputs[t].get() = v };
        Ok(())
    }
}

fn rt(workers: usize) -> Runtime {
    Runtime::new(Config::with_workers(workers)).unwrap()
}

#[test]
fn random_light_dags_match_sequential_at_1_to_4_workers() {
    with_timeout(LIMIT, || {
        let runtimes: Vec<Runtime> = (1..=4).map(rt).collect();
        for seed in 0..200u64 {
            let rt = &runtimes[seed as usize % runtimes.len()];
            let n = 1 + (seed as usize * 37) % 400;
            let dag = Arc::new(ShapeLight::new(Shape::random(seed, n, 1)));
            let stats = light::run(rt, Arc::clone(&dag)).unwrap();
            assert_eq!(stats.tasks, n, "seed {seed}");
            assert!(dag.ran.iter().all(|r| r.load(Ordering::Relaxed) == 1));
            assert_eq!(
                dag.outputs(),
                dag.shape.expected(),
                "seed {seed}, {} workers",
                rt.workers()
            );
        }
    });
}

/// A wide DAG (every task of a layer feeds every task of the next) keeps
/// every worker busy, so tasks are stolen; the result is still sequential's.
#[test]
fn wide_layers_are_shared_between_workers() {
    with_timeout(LIMIT, || {
        let (layers, width) = (200, 8);
        let n = layers * width;
        let edges = (1..layers).flat_map(|l| {
            (0..width)
                .flat_map(move |i| (0..width).map(move |j| ((l - 1) * width + j, l * width + i)))
        });
        let shape = Shape::from_edges(n, edges, |s| s.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let rt = rt(4);
        let dag = Arc::new(ShapeLight::new(shape));
        let stats = light::run(&rt, Arc::clone(&dag)).unwrap();
        assert_eq!(stats.tasks, n);
        assert_eq!(dag.outputs(), dag.shape.expected());
    });
}

#[test]
fn a_failing_task_ends_the_run_naming_it_and_runs_none_of_its_successors() {
    with_timeout(LIMIT, || {
        for (workers, panics) in [(1, false), (2, false), (2, true), (4, true)] {
            // A chain of 50: task 20 fails.
            let n = 50;
            let mut dag = ShapeLight::new(chain(n));
            match panics {
                true => dag.panic = Some(20),
                false => dag.fail = Some(20),
            }
            if workers == 4 {
                // The classes' description panicking is the task's failure
                // too (a member that unwound would strand its tasks).
                dag.panic = None;
                dag.panic_in_successors = Some(20);
            }
            let dag = Arc::new(dag);
            let err = light::run(&rt(workers), Arc::clone(&dag)).unwrap_err();
            let text = err.to_string();
            assert!(matches!(err, Error::Failed(_)), "{text}");
            assert!(text.contains("'20'"), "{text}");
            let why = if panics {
                "panicked on purpose"
            } else {
                "failed on purpose"
            };
            assert!(text.contains(why), "{text}");
            assert!((21..n).all(|t| dag.ran[t].load(Ordering::Relaxed) == 0));
        }
    });
}

/// A member whose task released nothing claims a successor and runs it
/// when its last predecessor finishes: on a stencil of two points at two
/// workers (each task reads both of the step before) one task of most
/// steps is handed so. Claimed tasks run once, after their predecessors
/// (the outputs are the sequential ones); a claim withdrawn because a
/// predecessor is slow (100 ms, far beyond `CLAIM_ROUNDS`) leaves the task
/// to that predecessor. Whether a given run claims depends on timing: runs
/// repeat until one has, every run checked.
#[test]
fn claimed_successors_run_once_after_their_predecessors() {
    with_timeout(LIMIT, || {
        let two = rt(2);
        let mut claimed = Vec::new();
        for _ in 0..20 {
            let dag = Arc::new(ShapeLight::new(stencil(2, 500)));
            let stats = light::run(&two, Arc::clone(&dag)).unwrap();
            assert_eq!(stats.tasks, 1000);
            assert_eq!(dag.outputs(), dag.shape.expected());
            claimed.push(stats.claimed);
            if stats.claimed > 0 {
                break;
            }
        }
        assert!(claimed.iter().any(|&c| c > 0), "no claims: {claimed:?}");
        for workers in [2, 3] {
            let mut dag = ShapeLight::new(stencil(2, 40));
            // Step 10's second point.
            dag.slow = Some((21, Duration::from_millis(100)));
            let dag = Arc::new(dag);
            let stats = light::run(&rt(workers), Arc::clone(&dag)).unwrap();
            assert_eq!(stats.tasks, 80);
            assert_eq!(dag.outputs(), dag.shape.expected(), "{workers} workers");
        }
    });
}

/// Task Bench's `stencil_1d`: `steps` rows of `width` points, each point
/// reading its neighbours and itself in the row before.
fn stencil(width: usize, steps: usize) -> Shape {
    let edges = (1..steps).flat_map(|t| {
        (0..width).flat_map(move |p| {
            (p.saturating_sub(1)..(p + 2).min(width))
                .map(move |q| ((t - 1) * width + q, t * width + p))
        })
    });
    Shape::from_edges(width * steps, edges, |s| s * 31 + 7)
}

/// A chain of `n` tasks.
fn chain(n: usize) -> Shape {
    Shape::from_edges(n, (1..n).map(|t| (t - 1, t)), |_| 1)
}

/// `Runtime::interrupt` (what Ctrl-C calls) during a light run: the task
/// running finishes, no later one starts, and the run says it was
/// interrupted, naming the first task it did not start.
#[test]
fn an_interrupt_stops_a_light_run() {
    with_timeout(LIMIT, || {
        for workers in [1, 3] {
            let rt = Arc::new(rt(workers));
            let mut dag = ShapeLight::new(chain(100));
            dag.interrupts = Some((30, Arc::clone(&rt)));
            let dag = Arc::new(dag);
            let err = light::run(&rt, Arc::clone(&dag)).unwrap_err();
            let text = err.to_string();
            assert!(matches!(err, Error::Interrupted(_)), "{text}");
            assert!(text.contains("'31'"), "{text}");
            assert_eq!(dag.ran[30].load(Ordering::Relaxed), 1);
            assert!((31..100).all(|t| dag.ran[t].load(Ordering::Relaxed) == 0));
        }
    });
}

#[test]
fn predecessor_counts_that_do_not_match_the_edges_are_refused() {
    with_timeout(LIMIT, || {
        let shape = Shape::random(7, 300, 1);
        // A task with two predecessors that says it has one: it runs after
        // the first (one worker: nothing runs at once), and the second's
        // end finds it made.
        let t = (0..300).find(|&t| shape.preds[t].len() == 2).unwrap();
        let mut dag = ShapeLight::new(shape.clone());
        dag.counts[t] = 1;
        dag.check_order = false;
        let err = light::run(&rt(1), Arc::new(dag)).unwrap_err().to_string();
        assert!(
            err.contains(&format!("{t} has more incoming edges")),
            "{err}"
        );
        // One that says it has three: it never runs.
        let mut dag = ShapeLight::new(shape.clone());
        dag.counts[t] = 3;
        let err = light::run(&rt(2), Arc::new(dag)).unwrap_err().to_string();
        assert!(
            err.contains("never received all their predecessors"),
            "{err}"
        );
        // Numbers that do not cover the tasks.
        let mut dag = ShapeLight::new(shape);
        dag.slots = 10;
        let err = light::run(&rt(2), Arc::new(dag)).unwrap_err().to_string();
        assert!(err.contains("not below slots() = 10"), "{err}");
    });
}

#[test]
fn a_simulated_runtime_is_refused() {
    let platform = tessera_engine::simulate::Platform::parse(
        "[node]\ncores = 2\n[node.cpu]\ngflops = 1\n",
        false,
        "light",
    )
    .unwrap();
    let sim =
        tessera_engine::simulate::Simulation::with_models(platform, Arc::default(), false, false);
    let rt = Runtime::new(Config::simulated(sim.node(0))).unwrap();
    let dag = Arc::new(ShapeLight::new(Shape::random(1, 10, 1)));
    let err = light::run(&rt, dag).unwrap_err().to_string();
    assert!(err.contains("simulated runtime runs none"), "{err}");
}

impl DistLightClasses for ShapeLight {
    fn owner(&self, &t: &usize) -> usize {
        self.shape.owner[t]
    }

    fn owned(&self, rank: usize) -> usize {
        self.shape.owner.iter().filter(|&&o| o == rank).count()
    }

    fn pack(&self, &from: &usize, _to: &[usize], out: &mut Vec<u8>) {
        // SAFETY: `from` finished; its successors only read its output.
        for v in unsafe { &*self.outputs[from].get() } {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }

    fn unpack(&self, &from: &usize, bytes: &[u8]) -> Result<(), String> {
        if bytes.len() != 8 * tessera_tests::random_dag::LEN {
            return Err(format!("{} bytes", bytes.len()));
        }
        let v = bytes
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        // SAFETY: written once, before `from`'s successors here run.
        unsafe { *self.outputs[from].get() = v };
        Ok(())
    }
}

/// Random DAGs over 1–4 ranks (threads joined by the local transport),
/// each with 1–2 workers: every rank's tasks give the sequential result,
/// each run once, after its predecessors (a remote one's output unpacked).
#[test]
fn random_light_dags_over_ranks_match_sequential() {
    with_timeout(Duration::from_secs(120), || {
        for seed in 0..24u64 {
            let ranks = 1 + seed as usize % 4;
            let workers = 1 + (seed as usize / 4) % 2;
            let n = 10 + (seed as usize * 53) % 300;
            let shape = Shape::random(seed, n, ranks);
            let expected = shape.expected();
            let results = tessera_tests::spmd(ranks, move |rank, net| {
                let rt = rt(workers);
                let mut dag = ShapeLight::new(shape.clone());
                dag.rank = rank;
                let dag = Arc::new(dag);
                let stats = tessera_engine::dist::light::run(&rt, &net, Arc::clone(&dag)).unwrap();
                assert_eq!(stats.tasks, dag.owned(rank), "seed {seed} rank {rank}");
                let outs = dag.outputs();
                (0..outs.len())
                    .filter(|&t| dag.shape.owner[t] == rank)
                    .map(|t| (t, outs[t].clone()))
                    .collect::<Vec<_>>()
            });
            for (t, v) in results.into_iter().flatten() {
                assert_eq!(v, expected[t], "seed {seed}, {ranks} ranks, task {t}");
            }
        }
    });
}

/// A task failing on one rank ends every rank with its error.
#[test]
fn a_failing_task_ends_every_rank() {
    with_timeout(Duration::from_secs(60), || {
        let mut shape = chain(60);
        shape.owner = (0..60).map(|t| (t / 5) % 3).collect();
        let errors = tessera_tests::spmd(3, move |rank, net| {
            let rt = rt(1);
            let mut dag = ShapeLight::new(shape.clone());
            dag.rank = rank;
            dag.fail = Some(27);
            tessera_engine::dist::light::run(&rt, &net, Arc::new(dag))
                .unwrap_err()
                .to_string()
        });
        for (rank, e) in errors.iter().enumerate() {
            assert!(
                e.contains("'27'") && e.contains("failed on purpose"),
                "rank {rank}: {e}"
            );
        }
    });
}
