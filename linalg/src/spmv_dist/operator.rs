//! A rank's part of a distributed matrix as the solvers' operator (`crate::solver`): the
//! multiply's blocks, sums as non-blocking all-reduces, waits that notice other ranks'
//! aborts.

use std::ops::Range;
use std::sync::Arc;

use tessera_engine::dist::allreduce::{Part, Then};
use tessera_engine::dist::Collectives;
use tessera_engine::{Error, Runtime, TaskHandle};

use super::multiply::Gather;
use super::DistMatrix;
use crate::solver::{phases, HaloClock, MultiplyDot, Operator, SharedVec};

/// A rank's part of a distributed matrix with its collectives: the solvers' operator
/// (`crate::solver`), dot products all-reduced over the ranks.
pub struct DistOperator<'a> {
    /// The matrix.
    pub a: &'a DistMatrix,
    /// The collectives of its ranks.
    pub coll: &'a Collectives,
    /// The halo waits of its multiplies.
    clock: Arc<HaloClock>,
}

impl<'a> DistOperator<'a> {
    /// The operator of `a` over `coll`.
    pub fn new(a: &'a DistMatrix, coll: &'a Collectives) -> DistOperator<'a> {
        DistOperator {
            a,
            coll,
            clock: Arc::default(),
        }
    }
}

impl Operator for DistOperator<'_> {
    fn shape(&self) -> (usize, usize) {
        (self.a.n_rows, self.a.n_cols)
    }

    fn row_blocks(&self) -> &[Range<usize>] {
        &self.a.block_rows
    }

    fn local_rows(&self) -> usize {
        self.a.own_rows().len()
    }

    fn first_row(&self) -> usize {
        self.a.own_rows().start
    }

    fn submit_multiply_dot(
        &self,
        rt: &Runtime,
        m: &MultiplyDot<'_>,
    ) -> Result<Vec<TaskHandle>, Error> {
        let a = self.a;
        // The gather reads `x` as the blocks do: what writes `x` next must go after it too.
        // The interior blocks go after the halo's (last) send: submitted first, the sends
        // would still run after every interior block under `ws` with one worker (a LIFO
        // deque), and the halo would leave at the end of the multiply, so the other rank's
        // boundary blocks would wait for it. With the halo out early, the wait moves to the
        // all-reduce after the multiply, whose parts idle workers watch for
        // (`Transport::awaiting`, engine `watch.rs`).
        let (gather, sends) = a.submit_exchange(rt, Gather::Shared(m.x, m.after))?;
        let mut out: Vec<TaskHandle> = gather.into_iter().collect();
        let interior = MultiplyDot {
            after: sends.last().or(m.after),
            ..*m
        };
        // Interior blocks first: they need nothing from the network.
        for boundary in [false, true] {
            for (k, b) in a.blocks.iter().enumerate() {
                if b.boundary == boundary {
                    let halo = boundary.then_some(&a.halo);
                    out.push(phases::submit_multiply_dot(
                        rt,
                        a.block_ref(k),
                        halo,
                        if boundary { m } else { &interior },
                        Some(&self.clock),
                    )?);
                }
            }
        }
        Ok(out)
    }

    fn submit_diagonal(&self, rt: &Runtime, d: &Arc<SharedVec>) -> Result<(), Error> {
        for k in 0..self.a.blocks.len() {
            phases::submit_diagonal(rt, self.a.block_ref(k), d)?;
        }
        Ok(())
    }

    fn wait(&self, rt: &Runtime) -> Result<(), Error> {
        self.a.wait(rt)
    }

    fn wait_for(&self, rt: &Runtime, task: &TaskHandle) -> Result<(), Error> {
        // Poll, so that another rank's abort ends the wait; a failure here (every solver
        // task is a successor of the ones before, so `task` then fails or is cancelled)
        // goes through `wait`, which tells the other ranks.
        loop {
            match rt.wait_timeout(task, std::time::Duration::from_millis(20)) {
                Ok(()) => return Ok(()),
                Err(Error::Timeout(_)) => {
                    if let Some(why) = self.a.net.aborted() {
                        return Err(Error::Remote(why));
                    }
                }
                Err(e) => return Err(self.wait(rt).err().unwrap_or(e)),
            }
        }
    }

    fn sum(&self, v: &mut [f64]) -> Result<(), Error> {
        self.coll.allreduce_sum(v).map_err(Error::Remote)
    }

    fn submit_sum(
        &self,
        rt: &Runtime,
        after: &[TaskHandle],
        part: Part,
        then: Then,
    ) -> Result<TaskHandle, Error> {
        self.a.allreduce.submit(rt, after, part, then)
    }

    fn halo_clock(&self) -> Option<Arc<HaloClock>> {
        Some(Arc::clone(&self.clock))
    }
}
