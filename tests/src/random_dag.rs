//! The tests' one random task-graph generator, with the sequential reference
//! each run is checked against.
//!
//! Two kinds of graph, one per way of submitting:
//! - a [`Program`] is a sequence of tasks over shared handles, whose
//!   dependencies the runtime infers from the accesses (sequential task
//!   flow): each task reads some handles and updates (RW) or overwrites (W)
//!   another; [`Params`] sets its size, fan-in, modes and, for the
//!   distributed tests, the owners and pinned tasks;
//! - a [`Shape`] is a graph with explicit predecessors (the symbolic
//!   front-end): task `t` reads the outputs of up to 3 earlier tasks and
//!   writes its own.
//!
//! Values are vectors of `u64` lanes ([`Lanes`]: a `u64` is one lane), and
//! every task computes lane `i` of its result from lane `i` of its inputs in
//! the same way ([`Op::apply`], [`Shape::mix`]), so one reference serves
//! scalar, vector, typed, device and distributed runs. The mix is
//! order-sensitive: a run that lets a task read a stale or a too-new value
//! gives a different result.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tessera_engine::{AccessMode, BodyError, DataHandle, Runtime, TaskBuilder, TaskContext};

/// Lanes of a [`Shape`] task's output (and of the distributed programs' handles).
pub const LEN: usize = 16;

/// A value a random task reads or writes: one or more `u64` lanes.
pub trait Lanes {
    /// The lanes, read.
    fn lanes(&self) -> &[u64];
    /// The lanes, written.
    fn lanes_mut(&mut self) -> &mut [u64];
}

impl Lanes for u64 {
    fn lanes(&self) -> &[u64] {
        std::slice::from_ref(self)
    }
    fn lanes_mut(&mut self) -> &mut [u64] {
        std::slice::from_mut(self)
    }
}

impl Lanes for [u64] {
    fn lanes(&self) -> &[u64] {
        self
    }
    fn lanes_mut(&mut self) -> &mut [u64] {
        self
    }
}

impl Lanes for Vec<u64> {
    fn lanes(&self) -> &[u64] {
        self
    }
    fn lanes_mut(&mut self) -> &mut [u64] {
        self
    }
}

/// Lane `i` of a task's result before any update of its target: the salt
/// folded with lane `i` of each input, in order.
fn mix_lane(salt: u64, i: usize, inputs: impl Iterator<Item = u64>) -> u64 {
    inputs.fold(salt.wrapping_add(i as u64), |a, v| {
        a.wrapping_mul(0x9E37_79B9).wrapping_add(v)
    })
}

/// What a random [`Program`] draws from.
#[derive(Clone, Debug)]
pub struct Params {
    /// Handles the tasks work on.
    pub handles: usize,
    /// Tasks in the program.
    pub tasks: usize,
    /// Lanes of each handle's value (1 for `u64` handles).
    pub lanes: usize,
    /// Reads a task draws at most (0 to this many, uniformly); a read of its
    /// own target is dropped and repeats merge, so it may read fewer.
    pub max_reads: usize,
    /// The chance that a task overwrites its target (W) rather than updates
    /// it (RW).
    pub overwrite: f64,
    /// Ranks owning the handles, drawn at random; `None` on one process (no
    /// owners and no pinned tasks drawn).
    pub ranks: Option<usize>,
    /// With `ranks`, the chance that a task is forced onto a random rank
    /// rather than left to its target's owner.
    pub pinned: f64,
}

impl Params {
    /// `tasks` tasks over `handles` one-lane handles on one process, each
    /// reading up to 3 handles and overwriting its target half the time.
    pub fn new(handles: usize, tasks: usize) -> Params {
        Params {
            handles,
            tasks,
            lanes: 1,
            max_reads: 3,
            overwrite: 0.5,
            ranks: None,
            pinned: 0.0,
        }
    }

    /// The same over `ranks` ranks, a task pinned with chance `pinned`.
    pub fn over_ranks(self, ranks: usize, pinned: f64) -> Params {
        Params {
            ranks: Some(ranks),
            pinned,
            ..self
        }
    }
}

/// One task of a [`Program`]: combine `reads` into `target`.
#[derive(Clone, Debug)]
pub struct Op {
    /// Handles read, sorted, without repeats or the target.
    pub reads: Vec<usize>,
    /// The handle written.
    pub target: usize,
    /// `RW` (the result depends on the old value) or `W` (it does not).
    pub mode: AccessMode,
    /// Makes each task's result its own.
    pub salt: u64,
    /// The rank it must run on, if pinned (distributed programs only).
    pub on_rank: Option<usize>,
}

impl Op {
    /// A priority in `0..5`, derived from the salt (so drawing it changes
    /// no other draw), for the policies that order by priority.
    pub fn priority(&self) -> i32 {
        (self.salt % 5) as i32
    }

    /// Run the task: `inputs` are the values of `reads`, in order, and
    /// `target` holds the old value (RW) or only its lanes (W).
    pub fn apply<I: Lanes + ?Sized, T: Lanes + ?Sized>(&self, inputs: &[&I], target: &mut T) {
        for (i, t) in target.lanes_mut().iter_mut().enumerate() {
            let acc = mix_lane(self.salt, i, inputs.iter().map(|v| v.lanes()[i]));
            *t = match self.mode {
                AccessMode::RW => t.wrapping_mul(31).wrapping_add(acc),
                _ => acc,
            };
        }
    }

    /// `t` with this task's accesses to `hs`: a read of each of `reads`,
    /// then the target in `mode`.
    pub fn declare<T: Send + Sync + 'static>(
        &self,
        t: TaskBuilder,
        hs: &[DataHandle<T>],
    ) -> TaskBuilder {
        let t = self.reads.iter().fold(t, |t, &r| t.read(&hs[r]));
        t.access(&hs[self.target], self.mode)
    }

    /// A CPU body that runs this task on `hs` through the task context (for
    /// a task built with [`Op::declare`]).
    pub fn body<T: Lanes + Send + Sync + 'static>(
        &self,
        hs: &[DataHandle<T>],
    ) -> impl FnOnce(&TaskContext<'_>) -> Result<(), BodyError> + Send + 'static {
        let reads: Vec<_> = self.reads.iter().map(|&r| hs[r].clone()).collect();
        let target = hs[self.target].clone();
        let op = self.clone();
        move |ctx| {
            let inputs = reads
                .iter()
                .map(|h| ctx.read(h))
                .collect::<Result<Vec<&T>, _>>()?;
            op.apply(&inputs, ctx.write(&target)?);
            Ok(())
        }
    }
}

/// A random sequential-task-flow program, the same on every rank (drawn
/// from a seed).
#[derive(Clone, Debug)]
pub struct Program {
    /// How many handles the tasks work on.
    pub handles: usize,
    /// Lanes of each handle's value.
    pub lanes: usize,
    /// Each handle's owner (empty on one process).
    pub owners: Vec<usize>,
    /// The tasks, in submission order.
    pub ops: Vec<Op>,
}

impl Program {
    /// The program `params` draws from `seed`.
    pub fn random(seed: u64, params: &Params) -> Program {
        Program::draw(&mut ChaCha8Rng::seed_from_u64(seed), params)
    }

    /// The program `params` draws from `rng` (whose earlier draws may have
    /// chosen the sizes): the owners first, then each task's target, reads,
    /// mode, salt and pinning, in that order.
    pub fn draw(rng: &mut ChaCha8Rng, params: &Params) -> Program {
        let handles = params.handles;
        let owners = match params.ranks {
            Some(ranks) => (0..handles).map(|_| rng.random_range(0..ranks)).collect(),
            None => Vec::new(),
        };
        let ops = (0..params.tasks)
            .map(|_| {
                let target = rng.random_range(0..handles);
                let mut reads: Vec<usize> = (0..rng.random_range(0..=params.max_reads))
                    .map(|_| rng.random_range(0..handles))
                    .filter(|&r| r != target)
                    .collect();
                reads.sort_unstable();
                reads.dedup();
                let mode = if rng.random_bool(params.overwrite) {
                    AccessMode::W
                } else {
                    AccessMode::RW
                };
                let salt = rng.random();
                let on_rank = params.ranks.and_then(|ranks| {
                    rng.random_bool(params.pinned)
                        .then(|| rng.random_range(0..ranks))
                });
                Op {
                    reads,
                    target,
                    mode,
                    salt,
                    on_rank,
                }
            })
            .collect();
        Program {
            handles,
            lanes: params.lanes,
            owners,
            ops,
        }
    }

    /// The value of handle `h` before the program runs.
    pub fn initial(&self, h: usize) -> Vec<u64> {
        (0..self.lanes as u64)
            .map(|i| h as u64 * 1000 + i)
            .collect()
    }

    /// The handles registered on `rt` with their initial values, for a
    /// one-lane program on `u64` handles.
    pub fn register_scalars(&self, rt: &Runtime) -> Vec<DataHandle<u64>> {
        assert_eq!(self.lanes, 1, "only one-lane values fit a u64");
        (0..self.handles)
            .map(|h| rt.register(self.initial(h)[0]))
            .collect()
    }

    /// [`Program::expected`] of a one-lane program, as `u64`s.
    pub fn expected_scalars(&self) -> Vec<u64> {
        assert_eq!(self.lanes, 1, "only one-lane values fit a u64");
        self.expected().into_iter().map(|v| v[0]).collect()
    }

    /// Every handle's final value, computed sequentially.
    pub fn expected(&self) -> Vec<Vec<u64>> {
        let mut v: Vec<Vec<u64>> = (0..self.handles).map(|h| self.initial(h)).collect();
        for op in &self.ops {
            // A task never reads its own target (the draw drops such reads).
            let mut target = std::mem::take(&mut v[op.target]);
            let inputs: Vec<&Vec<u64>> = op.reads.iter().map(|&r| &v[r]).collect();
            op.apply(&inputs, &mut target);
            v[op.target] = target;
        }
        v
    }
}

/// A random graph with explicit predecessors, the same on every rank (drawn
/// from a seed): task `t` reads its predecessors' outputs and writes its own,
/// [`LEN`] lanes long.
#[derive(Clone, Debug)]
pub struct Shape {
    /// Each task's predecessors, earlier tasks, sorted.
    pub preds: Vec<Vec<usize>>,
    /// Each task's successors.
    pub succs: Vec<Vec<usize>>,
    /// Each task's rank.
    pub owner: Vec<usize>,
    /// Makes each task's output its own.
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

    /// `n` tasks on rank 0 joined by `edges` (predecessor, successor), task
    /// `t` salted `salt(t)`; each task's predecessors sorted.
    pub fn from_edges(
        n: usize,
        edges: impl IntoIterator<Item = (usize, usize)>,
        salt: impl Fn(u64) -> u64,
    ) -> Shape {
        let mut preds = vec![Vec::new(); n];
        let mut succs = vec![Vec::new(); n];
        for (p, s) in edges {
            preds[s].push(p);
            succs[p].push(s);
        }
        for p in &mut preds {
            p.sort_unstable();
        }
        Shape {
            preds,
            succs,
            owner: vec![0; n],
            salt: (0..n as u64).map(salt).collect(),
        }
    }

    /// A task's output from its salt and its predecessors' outputs, in
    /// order (the lanes an overwriting [`Op`] computes).
    pub fn mix(salt: u64, inputs: &[&Vec<u64>]) -> Vec<u64> {
        (0..LEN)
            .map(|i| mix_lane(salt, i, inputs.iter().map(|v| v[i])))
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
