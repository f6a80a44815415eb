//! One interface for programs that run on one process or on many: the same
//! submission code drives a [`Runtime`] (one rank, which owns everything) or
//! a [`DistRuntime`] (one rank of a distributed sequential task flow).

use super::stf::{DistHandle, DistRuntime};
use crate::error::Error;
use crate::memory::Replicate;
use crate::runtime::Runtime;
use crate::task::{TaskBuilder, TaskHandle};

/// What a submission loop needs, on one process ([`Runtime`]) or on many
/// ([`DistRuntime`]): write the loop once, generic over `S: Submit`.
///
/// Every rank runs the same code: it registers the same data in the same
/// order, each with an owner rank, and submits the same tasks (sequential
/// task flow: dependencies follow from the data and the order). A
/// `Runtime` is rank 0 of 1: all its data is local, whatever the owner.
///
/// On a `Runtime`, its own methods of the same names come first
/// (`rt.register(value)`); a generic function, or `Submit::register(&rt,
/// 0, value)`, reaches these.
///
/// ```
/// use std::sync::Arc;
/// use tessera_engine::dist::stf::DistRuntime;
/// use tessera_engine::dist::{local, Net, Submit};
/// use tessera_engine::{Codelet, Error, Read, ReadWrite, Runtime, Task};
///
/// type Add = (Read<Vec<f64>>, ReadWrite<Vec<f64>>);
///
/// /// Block `i` += block `i - 1`, down a chain of blocks dealt round the
/// /// ranks; returns the blocks this rank owns, by index.
/// fn prefix_sums(s: &impl Submit) -> Result<Vec<(usize, Vec<f64>)>, Error> {
///     let add = Codelet::<Add>::new("add").cpu(|_, _, (x, y): (&Vec<f64>, &mut Vec<f64>)| {
///         y.iter_mut().zip(x).for_each(|(y, x)| *y += x);
///         Ok(())
///     });
///     let blocks: Vec<_> = (0..6)
///         .map(|i| s.register(i % s.size(), vec![i as f64; 3]))
///         .collect();
///     for i in 1..blocks.len() {
///         s.submit(Task::new(&add, (blocks[i - 1].r(), blocks[i].rw())))?;
///     }
///     s.wait_all()?;
///     let mut mine = Vec::new();
///     for (i, b) in blocks.into_iter().enumerate() {
///         let owner = b.owner();
///         let value = s.unregister(b)?;
///         if owner == s.rank() {
///             mine.push((i, value));
///         }
///     }
///     Ok(mine)
/// }
///
/// // One process.
/// let one = prefix_sums(&Runtime::with_workers(2)?)?;
/// // Two ranks (threads of this process here; MPI processes in a real run).
/// let ranks: Vec<_> = local::world(2)
///     .into_iter()
///     .map(|t| {
///         std::thread::spawn(move || {
///             let dist = DistRuntime::new(Runtime::with_workers(1)?, Net::new(t));
///             prefix_sums(&dist)
///         })
///     })
///     .collect();
/// let mut two = Vec::new();
/// for r in ranks {
///     two.extend(r.join().unwrap()?);
/// }
/// two.sort_by_key(|(i, _)| *i);
/// assert_eq!(one, two);
/// assert_eq!(one[5].1, vec![15.0; 3]);
/// # Ok::<(), Error>(())
/// ```
pub trait Submit {
    /// This process's rank (0 on a [`Runtime`]).
    fn rank(&self) -> usize;

    /// Number of ranks (1 on a [`Runtime`]).
    fn size(&self) -> usize;

    /// Register `value` as data owned by rank `owner` (see
    /// [`DistRuntime::register`]); it can live on devices too
    /// ([`Runtime::register_replicable`]). Dereference the handle to
    /// declare accesses: `h.r()`, `h.rw()`.
    fn register<T: Replicate>(&self, owner: usize, value: T) -> DistHandle<T>;

    /// Register data owned by `owner` that `make` makes: on a [`Runtime`]
    /// at once; on a [`DistRuntime`], only on its owner until it first
    /// arrives elsewhere (see [`DistRuntime::register_with`]).
    fn register_with<T: Replicate>(
        &self,
        owner: usize,
        make: impl Fn() -> T + Send + 'static,
    ) -> DistHandle<T>;

    /// Submit a task (a typed [`Task`](crate::Task) made with `Task::new`,
    /// or a [`TaskBuilder`]) on every rank. Returns the local task on the
    /// rank that runs it (always, on a [`Runtime`]).
    fn submit(&self, task: impl Into<TaskBuilder>) -> Result<Option<TaskHandle>, Error>;

    /// A typed task of `codelet` over `accesses`, as [`Runtime::task`]
    /// makes one, to be completed (`.args(..)`, `.priority(..)`, ...) and
    /// submitted with `.submit()` on every rank:
    /// `s.task(&c, (a.r(), b.rw())).priority(p).submit()?`.
    fn task<A: crate::Accesses, P: Send + Sync + 'static>(
        &self,
        codelet: &crate::Codelet<A, P>,
        accesses: A,
    ) -> crate::Task<A, P, crate::task::OnSubmit<'_, Self>> {
        crate::Task::with_state(codelet, accesses, crate::task::OnSubmit::new(self))
    }

    /// This process's task timeline so far (with `Config::trace` on): the
    /// tasks of this rank; merge ranks' files with `tessera trace merge`.
    fn trace(&self) -> crate::trace::Trace;

    /// Wait for every task (on every rank: see [`DistRuntime::wait_all`]).
    fn wait_all(&self) -> Result<(), Error>;

    /// Wait for the data's tasks, then take its value back (on ranks other
    /// than its owner: the copy this rank last held).
    fn unregister<T: Replicate>(&self, handle: DistHandle<T>) -> Result<T, Error>;
}

impl Submit for Runtime {
    fn rank(&self) -> usize {
        0
    }

    fn size(&self) -> usize {
        1
    }

    fn register<T: Replicate>(&self, _owner: usize, value: T) -> DistHandle<T> {
        let local = self.register_replicable(value);
        let id = local.id();
        DistHandle::new(local, id, 0)
    }

    fn register_with<T: Replicate>(
        &self,
        owner: usize,
        make: impl Fn() -> T + Send + 'static,
    ) -> DistHandle<T> {
        Submit::register(self, owner, make())
    }

    fn submit(&self, task: impl Into<TaskBuilder>) -> Result<Option<TaskHandle>, Error> {
        Runtime::submit(self, task).map(Some)
    }

    fn wait_all(&self) -> Result<(), Error> {
        Runtime::wait_all(self)
    }

    fn trace(&self) -> crate::trace::Trace {
        Runtime::trace(self)
    }

    fn unregister<T: Replicate>(&self, handle: DistHandle<T>) -> Result<T, Error> {
        Runtime::unregister(self, handle.into_local())
    }
}

impl Submit for DistRuntime {
    fn rank(&self) -> usize {
        DistRuntime::rank(self)
    }

    fn size(&self) -> usize {
        DistRuntime::size(self)
    }

    fn register<T: Replicate>(&self, owner: usize, value: T) -> DistHandle<T> {
        DistRuntime::register(self, owner, value)
    }

    fn register_with<T: Replicate>(
        &self,
        owner: usize,
        make: impl Fn() -> T + Send + 'static,
    ) -> DistHandle<T> {
        DistRuntime::register_with(self, owner, make)
    }

    fn submit(&self, task: impl Into<TaskBuilder>) -> Result<Option<TaskHandle>, Error> {
        DistRuntime::submit(self, task)
    }

    fn wait_all(&self) -> Result<(), Error> {
        DistRuntime::wait_all(self)
    }

    fn trace(&self) -> crate::trace::Trace {
        self.runtime().trace()
    }

    fn unregister<T: Replicate>(&self, handle: DistHandle<T>) -> Result<T, Error> {
        DistRuntime::unregister(self, handle)
    }
}

#[cfg(test)]
mod tests {
    //! Proves that one generic submission function, with typed and dynamic
    //! tasks, reads and writes, gives the same data on a `Runtime` as on 2
    //! and 3 ranks of a `DistRuntime` over the in-process transport.
    use super::*;
    use crate::dist::{on_ranks, one_worker};
    use crate::{Codelet, Read, ReadWrite, Task};

    type Mix = (Read<Vec<u64>>, ReadWrite<Vec<u64>>);

    /// A fixed pseudo-random sequence of `b = 31 b + a` (typed) and
    /// `b = a + 1` (dynamic, write-only) on eight handles; the owned
    /// handles' values, by index.
    fn mixes(s: &impl Submit) -> Result<Vec<(usize, u64)>, Error> {
        let mix = Codelet::<Mix>::new("mix").cpu(|_, _, (a, b): (&Vec<u64>, &mut Vec<u64>)| {
            b[0] = b[0].wrapping_mul(31).wrapping_add(a[0]);
            Ok(())
        });
        let set = Codelet::new("set");
        let hs: Vec<_> = (0..8)
            .map(|i| s.register(i % s.size(), vec![i as u64 + 1]))
            .collect();
        let mut x = 7u64;
        for k in 0..60 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let (a, b) = ((x >> 33) as usize % 8, (x >> 40) as usize % 8);
            if a == b {
                continue;
            }
            if k % 3 == 0 {
                let (ra, wb) = ((*hs[a]).clone(), (*hs[b]).clone());
                s.submit(
                    TaskBuilder::new(&set)
                        .read(&hs[a])
                        .write(&hs[b])
                        .body(move |ctx| {
                            let v = ctx.read(&ra)?[0];
                            ctx.write(&wb)?[0] = v + 1;
                            Ok(())
                        }),
                )?;
            } else if k % 3 == 1 {
                s.submit(Task::new(&mix, (hs[a].r(), hs[b].rw())))?;
            } else {
                // The typed builder bound to the trait (issue 42).
                s.task(&mix, (hs[a].r(), hs[b].rw())).priority(k).submit()?;
            }
        }
        s.wait_all()?;
        let mut mine = Vec::new();
        for (i, h) in hs.into_iter().enumerate() {
            let owner = h.owner();
            let v = s.unregister(h)?;
            if owner == s.rank() {
                mine.push((i, v[0]));
            }
        }
        Ok(mine)
    }

    #[test]
    fn one_submission_function_runs_on_one_process_and_on_many() {
        let rt = Runtime::with_workers(2).unwrap();
        let one = mixes(&rt).unwrap();
        assert_eq!(one.len(), 8);
        for ranks in [2, 3] {
            let mut many: Vec<(usize, u64)> = on_ranks(ranks, one_worker, |d| mixes(d).unwrap())
                .into_iter()
                .flatten()
                .collect();
            many.sort_unstable();
            assert_eq!(many, one, "{ranks} ranks");
        }
    }

    /// `b += a` on a pair and on a scalar, with the data dealt round the
    /// ranks: the final values by index.
    fn sums(s: &impl Submit) -> Result<Vec<(usize, [i64; 2], f64)>, Error> {
        let add = Codelet::<(Read<[i64; 2]>, ReadWrite<[i64; 2]>)>::new("add2").cpu(
            |_, _, (a, b): (&[i64; 2], &mut [i64; 2])| {
                b[0] += a[0];
                b[1] += a[1];
                Ok(())
            },
        );
        let scale = Codelet::<(Read<f64>, ReadWrite<f64>)>::new("scale").cpu(
            |_, _, (a, b): (&f64, &mut f64)| {
                *b = *b * 0.5 + *a;
                Ok(())
            },
        );
        let pairs: Vec<_> = (0..4)
            .map(|i| s.register(i % s.size(), [i as i64, 10 * i as i64]))
            .collect();
        let xs: Vec<_> = (0..4)
            .map(|i| s.register((i + 1) % s.size(), i as f64 + 0.25))
            .collect();
        for k in 0..12 {
            let (a, b) = (k % 4, (k * 3 + 1) % 4);
            if a != b {
                s.submit(Task::new(&add, (pairs[a].r(), pairs[b].rw())))?;
                s.submit(Task::new(&scale, (xs[a].r(), xs[b].rw())))?;
            }
        }
        s.wait_all()?;
        let mut out = Vec::new();
        for (i, (p, x)) in pairs.into_iter().zip(xs).enumerate() {
            let (po, xo) = (p.owner(), x.owner());
            let (p, x) = (s.unregister(p)?, s.unregister(x)?);
            if po == s.rank() && xo == s.rank() {
                out.push((i, p, x));
            } else if po == s.rank() {
                out.push((i, p, f64::NAN));
            } else if xo == s.rank() {
                out.push((i, [i64::MIN; 2], x));
            }
        }
        Ok(out)
    }

    #[test]
    fn arrays_and_scalars_go_between_ranks() {
        // Issue 42: only `Vec<Pod>` could be registered with a DistRuntime.
        let one = sums(&Runtime::with_workers(2).unwrap()).unwrap();
        assert_eq!(one.len(), 4);
        for ranks in [2, 3] {
            // Each value from the rank that owns it.
            let (mut pairs, mut xs) = (vec![[0i64; 2]; 4], vec![0f64; 4]);
            for rank in on_ranks(ranks, one_worker, |d| sums(d).unwrap()) {
                for (i, p, x) in rank {
                    if p != [i64::MIN; 2] {
                        pairs[i] = p;
                    }
                    if !x.is_nan() {
                        xs[i] = x;
                    }
                }
            }
            for (i, p, x) in &one {
                assert_eq!(
                    (pairs[*i], xs[*i].to_bits()),
                    (*p, x.to_bits()),
                    "{ranks} ranks, value {i}"
                );
            }
        }
    }

    #[test]
    fn the_trait_gives_each_rank_its_trace() {
        // Issue 42: no access to the trace through `Submit`.
        fn traced(s: &impl Submit) -> usize {
            sums(s).unwrap();
            s.trace().tasks.len()
        }
        let rt = Runtime::new(crate::Config::with_workers(1).trace(true)).unwrap();
        let one = traced(&rt);
        assert!(one >= 20, "{one}");
        let counts = on_ranks(2, || one_worker().trace(true), traced);
        // Every rank ran some of the tasks, and together at least the
        // one-process run's computations.
        assert!(counts.iter().all(|&c| c > 0), "{counts:?}");
        assert!(counts.iter().sum::<usize>() >= 20, "{counts:?}");
    }

    /// Two simulated ranks on nodes of one core at 1 GFLOP/s, joined by a
    /// network of 1 ms latency, each with its `DistRuntime`; `x[r]` is
    /// owned by rank r. `submitting`: the ranks that submit the program,
    /// 4 steps of x[1] += x[0] then x[0] += x[1] (every task of 1 s waits
    /// for the other rank's value). Returns the simulation's outcome and
    /// rank 0's simulated time.
    fn simulate_exchanges(submitting: &[usize]) -> (Result<(), String>, f64) {
        use crate::simulate::{Platform, Simulation};
        let add = Codelet::<(Read<Vec<f64>>, ReadWrite<Vec<f64>>)>::new("add")
            .cpu(|_, _, (a, b): (&Vec<f64>, &mut Vec<f64>)| {
                b[0] += a[0];
                Ok(())
            })
            .flops(|_| 1e9);
        let p = Platform::parse(
            "nodes = 2\nranks_per_node = 1\n[node]\ncores = 1\ntask_overhead_us = 0\n[node.cpu]\ngflops = 1\n[network]\nlatency_us = 1000\ngbs = 1\n",
            false,
            "two.toml",
        )
        .unwrap();
        let sim = Simulation::with_models(p, std::sync::Arc::default(), false, false);
        let ranks: Vec<DistRuntime> = (0..2)
            .map(|r| {
                let rt = Runtime::new(crate::Config::simulated(sim.node(r))).unwrap();
                DistRuntime::new(rt, sim.net(r))
            })
            .collect();
        let xs: Vec<Vec<DistHandle<Vec<f64>>>> = ranks
            .iter()
            .map(|d| {
                (0..2)
                    .map(|i| d.register(i, vec![i as f64 + 1.0]))
                    .collect()
            })
            .collect();
        for &r in submitting {
            let (d, x) = (&ranks[r], &xs[r]);
            for _ in 0..4 {
                d.task(&add, (x[0].r(), x[1].rw())).submit().unwrap();
                d.task(&add, (x[1].r(), x[0].rw())).submit().unwrap();
            }
        }
        let out = sim.run();
        (out, ranks[0].runtime().simulated_time().unwrap())
    }

    /// Issue 42: a program written against `Submit` is predicted on several
    /// simulated ranks (it stalled: its sends were tasks whose bodies, which
    /// a simulation does not run, made the messages). Eight 1 s tasks in a
    /// chain and eight 1 ms messages of 8 bytes at 1 GB/s.
    #[test]
    fn an_stf_program_on_simulated_ranks_is_predicted() {
        let (out, t) = simulate_exchanges(&[0, 1]);
        out.unwrap();
        let expected = 8.0 * (1.0 + 1e-3 + 8e-9);
        assert!((t - expected).abs() < 1e-6, "{t} s, expected {expected} s");
    }

    /// A rank left out (it submits nothing, so it never sends): the run
    /// stalls and says so, instead of ending "fine" at simulated time 0.
    #[test]
    fn a_rank_left_out_of_a_simulated_stf_run_stalls_and_says_so() {
        let (out, _) = simulate_exchanges(&[1]);
        let e = out.unwrap_err();
        assert!(
            e.contains("stalled") && e.contains("tasks are unfinished"),
            "{e}"
        );
    }
}
