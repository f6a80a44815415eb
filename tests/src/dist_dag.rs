//! A random symbolic DAG spread over ranks, for the distributed tests (in
//! one process over the local transport, and under mpirun over MPI): task
//! `t` reads the outputs of its predecessors and writes its own output, a
//! vector of `LEN` integers; its owner is drawn at random.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tessera_engine::dist::symbolic::DistClasses;
use tessera_engine::dist::DataRef;
use tessera_engine::symbolic::TaskClasses;
use tessera_engine::{Codelet, DataHandle, Read, Runtime, Task, TaskBuilder, Write};

/// Entries of each task's output.
pub const LEN: usize = 16;

/// The DAG's shape, the same on every rank (drawn from a seed).
#[derive(Clone, Debug)]
pub struct Shape {
    pub preds: Vec<Vec<usize>>,
    pub succs: Vec<Vec<usize>>,
    pub owner: Vec<usize>,
    pub salt: Vec<u64>,
}

impl Shape {
    /// `n` tasks over `ranks` ranks; each task has up to 3 earlier predecessors.
    pub fn random(seed: u64, n: usize, ranks: usize) -> Shape {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut preds: Vec<Vec<usize>> = vec![Vec::new()];
        let mut succs = vec![Vec::new(); n];
        for t in 1..n {
            let k = rng.random_range(0..=3.min(t));
            let mut p: Vec<usize> = (0..k).map(|_| rng.random_range(0..t)).collect();
            p.sort_unstable();
            p.dedup();
            for &q in &p {
                succs[q].push(t);
            }
            preds.push(p);
        }
        preds.truncate(n);
        Shape {
            preds,
            succs,
            owner: (0..n).map(|_| rng.random_range(0..ranks)).collect(),
            salt: (0..n).map(|_| rng.random()).collect(),
        }
    }

    /// Output `t` from its inputs.
    pub fn mix(salt: u64, inputs: &[&Vec<u64>]) -> Vec<u64> {
        (0..LEN)
            .map(|i| {
                inputs.iter().fold(salt.wrapping_add(i as u64), |a, v| {
                    a.wrapping_mul(0x9E37_79B9).wrapping_add(v[i])
                })
            })
            .collect()
    }

    /// Every output, computed sequentially.
    pub fn expected(&self) -> Vec<Vec<u64>> {
        let mut out: Vec<Vec<u64>> = Vec::with_capacity(self.preds.len());
        for t in 0..self.preds.len() {
            let inputs: Vec<&Vec<u64>> = self.preds[t].iter().map(|&p| &out[p]).collect();
            let v = Shape::mix(self.salt[t], &inputs);
            out.push(v);
        }
        out
    }
}

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
    register: Box<dyn Fn(usize) -> DataHandle<Vec<u64>> + Send + Sync>,
    pub handles: Mutex<HashMap<usize, DataHandle<Vec<u64>>>>,
}

impl RankDag {
    pub fn new(rt: &Runtime, shape: Arc<Shape>, rank: usize, fail: Option<usize>) -> RankDag {
        let reg = rt.registrar();
        RankDag {
            shape,
            rank,
            fail,
            register: Box::new(move |t| {
                reg.register_replicable_named(vec![0u64; LEN], format!("out{t}"))
                    .expect("the runtime is alive during the run")
            }),
            handles: Mutex::new(HashMap::new()),
        }
    }

    fn handle(&self, t: usize) -> DataHandle<Vec<u64>> {
        let mut h = self.handles.lock().unwrap();
        h.entry(t).or_insert_with(|| (self.register)(t)).clone()
    }

    /// This rank's outputs, unregistered (after the run).
    pub fn outputs(&self, rt: &Runtime) -> Vec<(usize, Vec<u64>)> {
        let mut h = self.handles.lock().unwrap();
        let mut out: Vec<(usize, Vec<u64>)> = h
            .drain()
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

/// A random sequential-task-flow program over `handles` vectors with random
/// owners: each task combines some handles into a target (RW or W), now and
/// then forced onto a random rank.
#[derive(Clone, Debug)]
pub struct StfProgram {
    pub owners: Vec<usize>,
    pub ops: Vec<StfOp>,
}

/// One task of an [`StfProgram`].
#[derive(Clone, Debug)]
pub struct StfOp {
    pub reads: Vec<usize>,
    pub target: usize,
    pub overwrite: bool,
    pub salt: u64,
    pub on_rank: Option<usize>,
}

impl StfProgram {
    pub fn random(seed: u64, handles: usize, tasks: usize, ranks: usize) -> StfProgram {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let owners = (0..handles).map(|_| rng.random_range(0..ranks)).collect();
        let ops = (0..tasks)
            .map(|_| {
                let target = rng.random_range(0..handles);
                let mut reads: Vec<usize> = (0..rng.random_range(0..4))
                    .map(|_| rng.random_range(0..handles))
                    .filter(|&r| r != target)
                    .collect();
                reads.sort_unstable();
                reads.dedup();
                StfOp {
                    reads,
                    target,
                    overwrite: rng.random_bool(0.25),
                    salt: rng.random(),
                    on_rank: rng.random_bool(0.15).then(|| rng.random_range(0..ranks)),
                }
            })
            .collect();
        StfProgram { owners, ops }
    }

    /// The initial value of handle `h`.
    pub fn initial(h: usize) -> Vec<u64> {
        (0..LEN as u64).map(|i| h as u64 * 1000 + i).collect()
    }

    /// The target's new value.
    pub fn apply(op: &StfOp, inputs: &[&Vec<u64>], old: &[u64]) -> Vec<u64> {
        let mixed = Shape::mix(op.salt, inputs);
        if op.overwrite {
            mixed
        } else {
            mixed
                .iter()
                .zip(old)
                .map(|(m, o)| o.wrapping_mul(31).wrapping_add(*m))
                .collect()
        }
    }

    /// Every handle's final value, computed sequentially.
    pub fn expected(&self) -> Vec<Vec<u64>> {
        let mut v: Vec<Vec<u64>> = (0..self.owners.len()).map(StfProgram::initial).collect();
        for op in &self.ops {
            let inputs: Vec<&Vec<u64>> = op.reads.iter().map(|&r| &v[r]).collect();
            let new = StfProgram::apply(op, &inputs, &v[op.target]);
            v[op.target] = new;
        }
        v
    }

    /// Run it on `dist` (every rank calls this); returns the values of the
    /// handles this rank owns.
    pub fn run(
        &self,
        dist: &tessera_engine::dist::stf::DistRuntime,
    ) -> Result<Vec<(usize, Vec<u64>)>, tessera_engine::Error> {
        use tessera_engine::ReadWrite;
        type Rw = (Vec<Read<Vec<u64>>>, ReadWrite<Vec<u64>>);
        type W = (Vec<Read<Vec<u64>>>, Write<Vec<u64>>);
        let mix_rw = Codelet::<Rw, StfOp>::with_args("mix_rw").cpu(|_, op, (inputs, t)| {
            *t = StfProgram::apply(op, &inputs, t);
            Ok(())
        });
        let mix_w = Codelet::<W, StfOp>::with_args("mix_w").cpu(|_, op, (inputs, t)| {
            *t = StfProgram::apply(op, &inputs, &[]);
            Ok(())
        });
        let hs: Vec<_> = (0..self.owners.len())
            .map(|h| dist.register(self.owners[h], StfProgram::initial(h)))
            .collect();
        for op in &self.ops {
            let reads: Vec<_> = op.reads.iter().map(|&r| hs[r].r()).collect();
            let t = if op.overwrite {
                let t = dist
                    .task(&mix_w, (reads, hs[op.target].w()))
                    .args(op.clone());
                match op.on_rank {
                    Some(r) => t.on_rank(r).submit(),
                    None => t.submit(),
                }
            } else {
                let t = dist
                    .task(&mix_rw, (reads, hs[op.target].rw()))
                    .args(op.clone());
                match op.on_rank {
                    Some(r) => t.on_rank(r).submit(),
                    None => t.submit(),
                }
            };
            t?;
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
}
