//! The random graphs of [`crate::random_dag`] run over ranks, for the
//! distributed tests (in one process over the local transport, and under
//! mpirun over MPI): a [`Shape`] through the symbolic front-end
//! ([`RankDag`]), a [`Program`] through the distributed STF front-end
//! ([`run_stf`]).

use std::sync::{Arc, LazyLock};

use tessera_engine::dist::stf::{DistRuntime, DistTask};
use tessera_engine::dist::symbolic::DistClasses;
use tessera_engine::dist::DataRef;
use tessera_engine::symbolic::{DescribedOrder, TaskClasses};
use tessera_engine::{
    AccessMode, Accesses, Codelet, DataHandle, Error, Read, ReadWrite, Runtime, Task, TaskBuilder,
    Write,
};

use crate::lazy_handles::LazyHandles;
use crate::random_dag::{Op, Params, Program, Shape, LEN};

type MixData = (Vec<Read<Vec<u64>>>, Write<Vec<u64>>);

static MIX: LazyLock<Codelet<MixData, u64>> = LazyLock::new(|| {
    Codelet::<MixData, u64>::with_args("mix").cpu(|_ctx, salt, (inputs, out)| {
        *out = Shape::mix(*salt, &inputs);
        Ok(())
    })
});

/// One rank's view of the DAG: its outputs and the copies of other ranks'
/// outputs it reads, registered when first needed.
pub struct RankDag {
    pub shape: Arc<Shape>,
    pub rank: usize,
    /// A task body fails if it is this one (to test aborts).
    pub fail: Option<usize>,
    /// Promise the order (`TaskClasses::described_order`): no dependency
    /// is inferred from the data, and tasks are made ahead beyond remote
    /// edges. False from [`RankDag::new`].
    pub ordered: bool,
    handles: LazyHandles<usize>,
}

impl RankDag {
    pub fn new(rt: &Runtime, shape: Arc<Shape>, rank: usize, fail: Option<usize>) -> RankDag {
        RankDag {
            shape,
            rank,
            fail,
            ordered: false,
            handles: LazyHandles::new(rt, LEN, "out"),
        }
    }

    fn handle(&self, t: usize) -> DataHandle<Vec<u64>> {
        self.handles.get(t)
    }

    /// This rank's outputs, unregistered (after the run).
    pub fn outputs(&self, rt: &Runtime) -> Vec<(usize, Vec<u64>)> {
        let mut out: Vec<(usize, Vec<u64>)> = self
            .handles
            .take_all()
            .into_iter()
            .filter(|(t, _)| self.shape.owner[*t] == self.rank)
            .map(|(t, hd)| (t, rt.unregister(hd).unwrap()))
            .collect();
        out.sort_unstable();
        out
    }
}

impl TaskClasses for RankDag {
    type Key = usize;

    fn roots(&self) -> Vec<usize> {
        (0..self.shape.preds.len())
            .filter(|&t| self.shape.preds[t].is_empty())
            .collect()
    }

    fn predecessor_count(&self, t: &usize) -> usize {
        self.shape.preds[*t].len()
    }

    fn successors(&self, t: &usize, out: &mut Vec<usize>) {
        out.extend_from_slice(&self.shape.succs[*t]);
    }

    fn task(&self, t: &usize) -> TaskBuilder {
        let inputs: Vec<_> = self.shape.preds[*t]
            .iter()
            .map(|&p| self.handle(p).r())
            .collect();
        let task = Task::new(&MIX, (inputs, self.handle(*t).w())).args(self.shape.salt[*t]);
        if self.fail == Some(*t) {
            let t = *t;
            return task
                .cpu(move |_| Err(format!("task {t} fails on purpose").into()))
                .into();
        }
        task.into()
    }

    fn owner(&self, t: &usize) -> usize {
        self.shape.owner[*t]
    }

    fn slots(&self) -> usize {
        self.shape.preds.len()
    }

    /// Every other task numbered: one run counts predecessors both in the
    /// engine's array of counters and in its map.
    fn slot(&self, t: &usize) -> Option<usize> {
        t.is_multiple_of(2).then_some(*t)
    }

    fn described_order(&self) -> Option<DescribedOrder> {
        // SAFETY: each task writes its own output, once, and only its
        // successors read it: every two tasks that declare a datum are
        // joined by an edge; the predecessor counts are the successor
        // lists' (`Shape` builds both from one list of edges).
        self.ordered.then(|| unsafe { DescribedOrder::new() })
    }
}

impl DistClasses for RankDag {
    fn flows(&self, from: &usize, _to: &usize, out: &mut Vec<u64>) {
        out.push(*from as u64);
    }

    fn data(&self, key: u64) -> DataRef {
        DataRef::of(&self.handle(key as usize))
    }

    fn owned(&self, rank: usize) -> usize {
        self.shape.owner.iter().filter(|&&o| o == rank).count()
    }
}

/// The distributed tests' random program: `tasks` tasks over `handles`
/// handles of [`LEN`] lanes with random owners among `ranks`; a quarter of
/// the tasks overwrite their target and 15 % are forced onto a random rank.
pub fn stf_program(seed: u64, handles: usize, tasks: usize, ranks: usize) -> Program {
    let params = Params {
        lanes: LEN,
        overwrite: 0.25,
        ..Params::new(handles, tasks).over_ranks(ranks, 0.15)
    };
    Program::random(seed, &params)
}

/// Run `prog` on `dist` (every rank calls this); returns the values of the
/// handles this rank owns.
pub fn run_stf(prog: &Program, dist: &DistRuntime) -> Result<Vec<(usize, Vec<u64>)>, Error> {
    type Rw = (Vec<Read<Vec<u64>>>, ReadWrite<Vec<u64>>);
    type W = (Vec<Read<Vec<u64>>>, Write<Vec<u64>>);
    let mix_rw = Codelet::<Rw, Op>::with_args("mix_rw").cpu(|_, op, (inputs, t)| {
        op.apply(&inputs, t);
        Ok(())
    });
    let lanes = prog.lanes;
    let mix_w = Codelet::<W, Op>::with_args("mix_w").cpu(move |_, op, (inputs, t)| {
        // An overwritten value's old contents are not to be relied on, its
        // length included.
        *t = vec![0; lanes];
        op.apply(&inputs, t);
        Ok(())
    });
    let hs: Vec<_> = (0..prog.handles)
        .map(|h| dist.register(prog.owners[h], prog.initial(h)))
        .collect();
    for op in &prog.ops {
        let reads: Vec<_> = op.reads.iter().map(|&r| hs[r].r()).collect();
        let args = op.clone();
        match op.mode {
            AccessMode::W => submit(dist.task(&mix_w, (reads, hs[op.target].w())), args),
            _ => submit(dist.task(&mix_rw, (reads, hs[op.target].rw())), args),
        }?;
    }
    dist.wait_all()?;
    let me = dist.rank();
    let mut out = Vec::new();
    for (h, dh) in hs.into_iter().enumerate() {
        let owner = dh.owner();
        let v = dist.unregister(dh)?;
        if owner == me {
            out.push((h, v));
        }
    }
    Ok(out)
}

/// Submit `t` with `op` as its arguments, on the rank `op` is pinned to if any.
fn submit<A: Accesses>(t: DistTask<'_, A, Op>, op: Op) -> Result<(), Error> {
    let on_rank = op.on_rank;
    let t = t.args(op);
    match on_rank {
        Some(r) => t.on_rank(r).submit(),
        None => t.submit(),
    }
    .map(drop)
}
