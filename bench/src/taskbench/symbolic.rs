//! A run's graphs as a symbolic task graph (`--frontend symbolic`): the
//! same tasks, data and bodies as [`super::run`], described by their
//! dependence functions instead of being submitted one by one, as PaRSEC's
//! Task Bench implementation describes them (PTG). Nothing submits: a task
//! is made on the worker that finished its last predecessor, and lands in
//! that worker's queue. Under mpirun each rank makes only its points' tasks
//! (dealt as [`rank_of`] deals them), and an output read on another rank
//! travels with the edge's message ([`tessera_engine::dist::symbolic`]).
//!
//! The edges are Task Bench's, plus, when points reuse output buffers
//! (`-field` below the step count), the write-after-read ones: task
//! `(t, p)` overwrites the buffer that the readers of `(t − F, p)` read
//! (`F` the buffers per point), so those readers, tasks of step
//! `t − F + 1`, are its predecessors too. The STF front-end finds them from
//! the accesses in submission order; a symbolic description must name them,
//! since a task may be made before an older reader of the same buffer is.
//! Where they order every buffer's accesses (checked for each task:
//! `Classes::reuse_ordered`), the classes promise their order, and the
//! runtime infers nothing from the data, as with a buffer per timestep.

use std::sync::{Arc, OnceLock};

use smallvec::SmallVec;
use tessera_engine::dist::light::DistLightClasses;
use tessera_engine::dist::symbolic::DistClasses;
use tessera_engine::dist::DataRef;
use tessera_engine::light::LightClasses;
use tessera_engine::symbolic::{DescribedOrder, TaskClasses};
use tessera_engine::{Codelet, DataHandle, Registrar, Runtime, Task, TaskBuilder};

use super::app::App;
use super::deps::Deps;
use super::graph::Graph;
use super::run::{codelet, dependence_lists, rank_of, Data, Point};

/// A task: (graph, timestep, point).
pub type Key = (u32, i64, i64);

/// The run's graphs as task classes, with this rank's output buffers and
/// its copies of other ranks' (registered when first used).
pub struct Classes {
    graphs: Vec<Graph>,
    /// Per graph, its dependence lists (computed once, shared with the
    /// bodies).
    deps: Arc<[Deps]>,
    /// Per graph: its buffers per point (`F`), and the index of its first
    /// buffer in `buffers`.
    fields: Vec<i64>,
    base: Vec<usize>,
    buffers: Vec<OnceLock<DataHandle<Vec<u8>>>>,
    registrar: Registrar,
    codelet: Codelet<Data, Point>,
    ranks: usize,
    /// Per graph, per point: the rank that runs it ([`rank_of`], looked up
    /// once per point instead of once per edge).
    owners: Vec<Box<[u32]>>,
    roots: Vec<Key>,
    /// Tasks per rank.
    owned: Vec<usize>,
    /// Per graph, the number of its first task (`TaskClasses::slot`), and
    /// the numbers dealt in all (0 above `MAX_SLOTS`).
    first_slot: Vec<usize>,
    slots: usize,
    /// Whether the edges order every two accesses of a buffer, one of them
    /// a write ([`Classes::reuse_ordered`]): the classes then describe
    /// their order.
    ordered: bool,
    /// Per numbered task (its slot), its predecessor count, found once while
    /// the classes are made (they walk every task already); empty past
    /// [`MAX_COUNTED`] tasks, where each count is computed when asked. The
    /// engine asks once per task, on the worker that finished its first
    /// predecessor: computed there, the count walked the task's input list
    /// and, with buffers reused, the readers of its buffer's previous
    /// version against that list (about 400 instructions per `nearest`
    /// task, radix 5, `callgrind`).
    counts: Vec<u16>,
}

/// At most this many tasks are numbered (4 bytes of counter each, for the
/// whole run); a larger run counts in the engine's map of pending tasks.
const MAX_SLOTS: usize = 1 << 26;

/// Most tasks whose predecessor counts are kept (2 bytes each: 32 MiB).
const MAX_COUNTED: usize = 1 << 24;

fn active(g: &Graph, t: i64, p: i64) -> bool {
    (0..g.steps).contains(&t) && (g.offset_at(t)..g.offset_at(t) + g.width_at(t)).contains(&p)
}

impl Classes {
    /// The classes of `app` for `rank` of `ranks`: registers this rank's
    /// output buffers on `rt`, and the buffers of other ranks' points its
    /// tasks read (before the clock starts, as the STF front-end registers
    /// every buffer). Registered on their first message instead, they put a
    /// registration and fresh pages on every remote edge's path: 12–25 % of
    /// a 2-rank `stencil_1d` run with one buffer per timestep.
    pub fn new(
        rt: &Runtime,
        app: &App,
        rank: usize,
        ranks: usize,
        corrupt: Option<Point>,
    ) -> Classes {
        let graphs = app.graphs.clone();
        let fields: Vec<i64> = graphs
            .iter()
            .map(|g| g.fields.min(g.steps).max(1))
            .collect();
        let mut base = Vec::with_capacity(graphs.len());
        let mut total = 0;
        for (g, f) in graphs.iter().zip(&fields) {
            base.push(total);
            total += (g.width * f) as usize;
        }
        let mut first_slot = Vec::with_capacity(graphs.len());
        let mut slots = 0usize;
        for g in &graphs {
            first_slot.push(slots);
            slots = slots
                .saturating_add((g.steps.max(0) as usize).saturating_mul(g.width.max(0) as usize));
        }
        if slots > MAX_SLOTS {
            slots = 0;
        }
        let owners = graphs
            .iter()
            .map(|g| {
                (0..g.width)
                    .map(|p| rank_of(p, g.width, ranks) as u32)
                    .collect()
            })
            .collect();
        let deps = dependence_lists(app);
        let mut classes = Classes {
            first_slot,
            slots,
            graphs,
            fields,
            base,
            buffers: (0..total).map(|_| OnceLock::new()).collect(),
            registrar: rt.registrar(),
            codelet: codelet(app, &deps, rank, ranks, corrupt),
            deps,
            ranks,
            owners,
            roots: Vec::new(),
            owned: vec![0; ranks],
            ordered: true,
            counts: Vec::new(),
        };
        let mut counts = match slots {
            1..=MAX_COUNTED => vec![0u16; slots],
            _ => Vec::new(),
        };
        // Every task, once: who owns it, whether it waits for nothing, and
        // whether its write of its buffer is ordered after the buffer's
        // previous uses.
        for (gi, g) in classes.graphs.iter().enumerate() {
            let f = classes.fields[gi];
            // Per buffer (point, field): the step of its last writer so far.
            // With a buffer per timestep each is written once: none kept.
            let reused = f < g.steps;
            let mut last_writer = match reused {
                true => vec![-1i64; (g.width * f) as usize],
                false => Vec::new(),
            };
            for t in 0..g.steps {
                let lo = g.offset_at(t);
                for p in lo..lo + g.width_at(t) {
                    classes.owned[rank_of(p, g.width, ranks)] += 1;
                    let key = (gi as u32, t, p);
                    let count = classes.count_predecessors(&key);
                    if count == 0 {
                        classes.roots.push(key);
                    }
                    if let Some(c) = classes.slot(&key).and_then(|i| counts.get_mut(i)) {
                        // A count too large for the table is computed when asked.
                        *c = u16::try_from(count).unwrap_or(u16::MAX);
                    }
                    if reused {
                        let last = &mut last_writer[(p * f + t % f) as usize];
                        let ordered = classes.reuse_ordered(gi, *last, t, p);
                        classes.ordered &= ordered;
                        *last = t;
                    }
                }
            }
        }
        classes.counts = counts;
        for (gi, g) in classes.graphs.iter().enumerate() {
            for p in (0..g.width).filter(|&p| rank_of(p, g.width, ranks) == rank) {
                for field in 0..classes.fields[gi] {
                    classes.handle(classes.data_key(gi, p, field));
                }
            }
            classes.register_remote_inputs(gi, rank);
        }
        classes
    }

    /// Register the buffers of other ranks' points that `rank`'s tasks of
    /// graph `gi` read.
    fn register_remote_inputs(&self, gi: usize, rank: usize) {
        let (g, f) = (&self.graphs[gi], self.fields[gi]);
        for t in 1..g.steps {
            let lo = g.offset_at(t);
            for p in (lo..lo + g.width_at(t)).filter(|&p| rank_of(p, g.width, self.ranks) == rank) {
                for &d in self.deps[gi]
                    .inputs(t, p)
                    .iter()
                    .filter(|&&d| rank_of(d, g.width, self.ranks) != rank)
                {
                    self.handle(self.data_key(gi, d, (t - 1).rem_euclid(f)));
                }
            }
        }
    }

    /// The data key of graph `gi`'s point `p`'s buffer `field`.
    fn data_key(&self, gi: usize, p: i64, field: i64) -> u64 {
        (self.base[gi] + (p * self.fields[gi] + field) as usize) as u64
    }

    /// This rank's handle for data `key`, registered on first use.
    fn handle(&self, key: u64) -> &DataHandle<Vec<u8>> {
        self.buffers[key as usize].get_or_init(|| {
            let gi = self.base.partition_point(|&b| b as u64 <= key) - 1;
            let bytes = self.graphs[gi].output_bytes;
            self.registrar
                .register_replicable_named(vec![0u8; bytes], format!("taskbench{key}"))
                .expect("the runtime outlives its run")
        })
    }

    /// Whether the edges put `(t, p)`'s write of its buffer after every
    /// earlier access to the buffer, `prev` being the step of its previous
    /// writer (−1: none). The write-after-read edges join the readers of
    /// `(t − F, p)`'s output to `(t, p)` ([`successors`](TaskClasses::successors)),
    /// and through any of them the writer `(t − F, p)` precedes `(t, p)`;
    /// earlier accesses precede `(t − F, p)` in turn. Not ordered: a previous
    /// writer with no reader (`trivial`: two writes with no path between
    /// them), or one older than `t − F` (the point was idle at `t − F`, and
    /// no edge names that writer's readers).
    fn reuse_ordered(&self, gi: usize, prev: i64, t: i64, p: i64) -> bool {
        prev < 0 || (prev == t - self.fields[gi] && !self.deps[gi].outputs(prev, p).is_empty())
    }

    /// Task `key`'s predecessors: its inputs, and the readers of its
    /// buffer's previous version that are not among them.
    fn count_predecessors(&self, &(gi, t, p): &Key) -> usize {
        self.deps[gi as usize].inputs(t, p).len() + self.war_predecessor_count(gi as usize, t, p)
    }

    /// How many readers of `(t − F, p)`'s output `(t, p)` must wait for
    /// besides its own inputs (when its buffer is reused).
    fn war_predecessor_count(&self, gi: usize, t: i64, p: i64) -> usize {
        let (g, f) = (&self.graphs[gi], self.fields[gi]);
        let older = t - f;
        if older < 0 || !active(g, older, p) {
            return 0;
        }
        // F ≤ 2: the readers are tasks of step t − 1 or later, and those
        // among its inputs are its predecessors already.
        let recent = older + 1 >= t - 1;
        let deps = &self.deps[gi];
        let readers = deps.outputs(older, p);
        if !recent {
            return readers.len();
        }
        let inputs = deps.inputs(t, p);
        readers.iter().filter(|q| !inputs.contains(q)).count()
    }
}

impl TaskClasses for Classes {
    type Key = Key;

    fn roots(&self) -> Vec<Key> {
        self.roots.clone()
    }

    fn predecessor_count(&self, key: &Key) -> usize {
        match self.slot(key).and_then(|i| self.counts.get(i)) {
            Some(&c) if c < u16::MAX => c as usize,
            _ => self.count_predecessors(key),
        }
    }

    fn successors(&self, &(gi, t, p): &Key, out: &mut Vec<Key>) {
        let (g, f) = (&self.graphs[gi as usize], self.fields[gi as usize]);
        // Write-after-read: the task that next overwrites each buffer this
        // one reads, unless it is already a successor.
        let next = t - 1 + f;
        let war = t >= 1 && next < g.steps;
        let deps = &self.deps[gi as usize];
        out.extend(deps.outputs(t, p).iter().map(|&q| (gi, t + 1, q)));
        if war {
            let first = out.len();
            for &d in deps.inputs(t, p).iter() {
                let k = (gi, next, d);
                if active(g, next, d) && !out[..first].contains(&k) {
                    out.push(k);
                }
            }
        }
    }

    fn task(&self, &(gi, t, p): &Key) -> TaskBuilder {
        let (gu, f) = (gi as usize, self.fields[gi as usize]);
        let reads = self.deps[gu]
            .inputs(t, p)
            .iter()
            .map(|&d| self.handle(self.data_key(gu, d, (t - 1).rem_euclid(f))).r())
            .collect();
        let out = self.handle(self.data_key(gu, p, t % f)).w();
        Task::new(&self.codelet, (reads, out))
            .args(Point { graph: gu, t, p })
            .into()
    }

    fn owner(&self, &(gi, _, p): &Key) -> usize {
        self.owners[gi as usize][p as usize] as usize
    }

    fn slots(&self) -> usize {
        self.slots
    }

    fn slot(&self, &(gi, t, p): &Key) -> Option<usize> {
        let width = self.graphs[gi as usize].width;
        (self.slots > 0).then(|| self.first_slot[gi as usize] + (t * width + p) as usize)
    }

    fn described_order(&self) -> Option<DescribedOrder> {
        // With a buffer per timestep (Task Bench's default, `-field` at
        // least `-steps`) each buffer is written once, by a task whose
        // successors are exactly the tasks that read it, and graphs share
        // no buffer. With buffers reused (`-field 2`, as the SC20 paper's
        // scripts run PaRSEC, StarPU and Legion) the write-after-read
        // edges order each write after the buffer's previous uses where
        // `reuse_ordered` says so for every task (`stencil_1d`, `nearest`
        // and most other patterns); where it does not (two writers of a
        // `trivial` graph's buffer share no path), the runtime infers the
        // order from the data.
        //
        // SAFETY: every two accesses of one buffer are joined by a path of
        // edges: a write and the reads of its output by the write's
        // successors, and a write and the buffer's earlier accesses by
        // `reuse_ordered`'s paths (the test
        // `the_order_is_described_where_the_edges_order_the_buffers` checks
        // every pattern with `check_order`); and nothing else submits tasks
        // on these buffers while a run lasts.
        self.ordered.then(|| unsafe { DescribedOrder::new() })
    }
}

impl DistClasses for Classes {
    fn flows(&self, &(gi, t, p): &Key, &(_, to_t, to_p): &Key, out: &mut Vec<u64>) {
        // A write-after-read edge carries no data.
        if to_t == t + 1 && self.deps[gi as usize].inputs(to_t, to_p).contains(&p) {
            out.push(self.data_key(gi as usize, p, t % self.fields[gi as usize]));
        }
    }

    fn data(&self, key: u64) -> DataRef {
        DataRef::of(self.handle(key))
    }

    fn owned(&self, rank: usize) -> usize {
        self.owned.get(rank).copied().unwrap_or(0)
    }
}

/// The run's graphs as light tasks (`--frontend light`,
/// [`tessera_engine::light`]): the same DAG as [`Classes`] (its roots,
/// counts, successors and numbers), each task a call of the same body as
/// the other front-ends', over output buffers this value keeps itself
/// instead of the runtime's handles. Under mpirun each rank runs its
/// points' tasks, and an output read on another rank travels with the
/// edge's message ([`tessera_engine::dist::light`]) into that rank's copy.
pub struct Light {
    classes: Classes,
    bodies: Arc<super::run::Shared>,
    /// Per buffer ([`Classes::data_key`]): its bytes. Reached only from
    /// `run`, under the edges' order (see there).
    buffers: Box<[std::cell::UnsafeCell<Vec<u8>>]>,
}

// SAFETY: the buffers are written only by the task that owns their current
// version and read only by its successors, never at once (see `run`).
unsafe impl Sync for Light {}

impl Light {
    /// The light tasks of `app`'s graphs on `rank` of `ranks`.
    ///
    /// # Errors
    /// A run whose buffers' uses the edges do not all order (a `trivial` or
    /// `tree` graph reusing its buffers: give it a buffer per timestep), or
    /// one with too many tasks to number.
    pub fn new(
        rt: &Runtime,
        app: &App,
        rank: usize,
        ranks: usize,
        corrupt: Option<Point>,
    ) -> Result<Light, String> {
        let classes = Classes::new(rt, app, rank, ranks, corrupt);
        if !classes.ordered {
            return Err("--frontend light needs every buffer's uses ordered by the graph's edges, and a graph here reuses a buffer with no path between two of its writers (trivial or tree with -field below -steps): drop -field, or use --frontend symbolic".into());
        }
        if classes.slots == 0 {
            return Err(format!(
                "--frontend light numbers every task, and this run has more than {MAX_SLOTS}: use --frontend symbolic"
            ));
        }
        let buffers = classes
            .base
            .iter()
            .zip(&classes.graphs)
            .zip(&classes.fields)
            .flat_map(|((_, g), &f)| {
                let bytes = g.output_bytes;
                (0..g.width * f).map(move |_| std::cell::UnsafeCell::new(vec![0u8; bytes]))
            })
            .collect();
        Ok(Light {
            bodies: super::run::bodies(app, &classes.deps, rank, ranks, corrupt),
            classes,
            buffers,
        })
    }
}

impl LightClasses for Light {
    type Key = Key;

    fn roots(&self) -> Vec<Key> {
        self.classes.roots.clone()
    }

    fn predecessor_count(&self, key: &Key) -> usize {
        TaskClasses::predecessor_count(&self.classes, key)
    }

    fn successors(&self, key: &Key, out: &mut Vec<Key>) {
        TaskClasses::successors(&self.classes, key, out)
    }

    fn slots(&self) -> usize {
        self.classes.slots
    }

    fn slot(&self, key: &Key) -> usize {
        TaskClasses::slot(&self.classes, key).unwrap_or(usize::MAX)
    }

    fn run(&self, &(gi, t, p): &Key) -> Result<(), tessera_engine::BodyError> {
        let (gu, f) = (gi as usize, self.classes.fields[gi as usize]);
        let deps = self.classes.deps[gu].inputs(t, p);
        let before = (t - 1).rem_euclid(f);
        // SAFETY: `light::run` calls this after every predecessor returned,
        // and the edges order every two uses of a buffer, one a write
        // (`Classes::reuse_ordered`, checked for every task by `new`): no
        // task writing an input runs now, and no other task uses the output.
        let inputs: SmallVec<[&Vec<u8>; 8]> = deps
            .iter()
            .map(|&d| unsafe {
                &*self.buffers[self.classes.data_key(gu, d, before) as usize].get()
            })
            .collect();
        let out = unsafe { &mut *self.buffers[self.classes.data_key(gu, p, t % f) as usize].get() };
        self.bodies.body(Point { graph: gu, t, p }, &inputs, out)
    }
}

impl DistLightClasses for Light {
    fn owner(&self, key: &Key) -> usize {
        TaskClasses::owner(&self.classes, key)
    }

    fn owned(&self, rank: usize) -> usize {
        self.classes.owned[rank]
    }

    fn pack(&self, &(gi, t, p): &Key, to: &[Key], out: &mut Vec<u8>) {
        let deps = &self.classes.deps[gi as usize];
        // A write-after-read edge carries no data.
        if to
            .iter()
            .any(|&(_, tt, tp)| tt == t + 1 && deps.inputs(tt, tp).contains(&p))
        {
            let f = self.classes.fields[gi as usize];
            // SAFETY: `(t, p)` wrote this buffer and has finished; only its
            // successors read it now (see `run`), and reads may overlap.
            let bytes = unsafe {
                &*self.buffers[self.classes.data_key(gi as usize, p, t % f) as usize].get()
            };
            out.extend_from_slice(bytes);
        }
    }

    fn unpack(&self, &(gi, t, p): &Key, bytes: &[u8]) -> Result<(), String> {
        if bytes.is_empty() {
            return Ok(());
        }
        let (gu, f) = (gi as usize, self.classes.fields[gi as usize]);
        let want = self.classes.graphs[gu].output_bytes;
        if bytes.len() != want {
            return Err(format!("{} bytes, expected {want}", bytes.len()));
        }
        // SAFETY: this rank's tasks that read the buffer's previous version
        // precede `(t, p)` (write-after-read edges, which cross ranks as
        // messages before it runs), and its readers here follow this
        // message: no task of this rank uses the copy now.
        let copy =
            unsafe { &mut *self.buffers[self.classes.data_key(gu, p, t % f) as usize].get() };
        copy.clear();
        copy.extend_from_slice(bytes);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tessera_engine::Config;

    /// Every pattern Task Bench's core defines dependencies for.
    const PATTERNS: [&str; 11] = [
        "trivial",
        "no_comm",
        "stencil_1d",
        "stencil_1d_periodic",
        "dom",
        "tree",
        "fft",
        "all_to_all",
        "nearest",
        "spread",
        "random_nearest",
    ];

    /// Every pattern, with buffers reused or not: each task's predecessor
    /// count equals its incoming edges (`unroll` checks it), every task is
    /// reached, and a run in one process validates every input.
    #[test]
    fn edges_mirror_and_runs_validate() {
        let rt = Runtime::new(Config::default().workers(2)).unwrap();
        for ty in PATTERNS {
            for field in ["9", "2", "3"] {
                let mut flags = vec![
                    "-steps", "9", "-width", "5", "-type", ty, "-radix", "3", "-field", field,
                ];
                if matches!(ty, "spread" | "random_nearest") {
                    flags.extend(["-period", "2"]);
                }
                let app = App::parse(&flags).unwrap();
                let classes = Arc::new(Classes::new(&rt, &app, 0, 1, None));
                let unrolled = tessera_engine::symbolic::unroll(&*classes)
                    .unwrap_or_else(|e| panic!("{ty} -field {field}: {e}"));
                let tasks: usize = classes.owned.iter().sum();
                assert_eq!(unrolled.len(), tasks, "{ty} -field {field}");
                tessera_engine::symbolic::run(&rt, classes)
                    .unwrap_or_else(|e| panic!("{ty} -field {field}: {e}"));
            }
        }
    }

    /// The classes describe their order only where their edges order every
    /// buffer's accesses (`check_order` on the unrolled DAG): with a buffer
    /// per timestep in every pattern, and with buffers reused in every
    /// pattern but `trivial` (whose writers share no path) and `tree`.
    #[test]
    fn the_order_is_described_where_the_edges_order_the_buffers() {
        let rt = Runtime::new(Config::default().workers(1)).unwrap();
        let (mut reused, mut undescribed) = (Vec::new(), Vec::new());
        for ty in PATTERNS {
            for field in ["9", "12", "2", "3"] {
                let mut flags = vec![
                    "-steps", "9", "-width", "5", "-type", ty, "-radix", "3", "-field", field,
                ];
                if matches!(ty, "spread" | "random_nearest") {
                    flags.extend(["-period", "2"]);
                }
                // A second graph, shorter, beside it.
                let mut and = flags.clone();
                and[1] = "7";
                flags.push("-and");
                flags.extend(and);
                let app = App::parse(&flags).unwrap();
                let classes = Classes::new(&rt, &app, 0, 1, None);
                let described = classes.described_order().is_some();
                let ordered = tessera_engine::symbolic::check_order(&classes);
                if described {
                    ordered.unwrap_or_else(|e| panic!("{ty} -field {field}: {e}"));
                } else if ordered.is_ok() {
                    undescribed.push(format!("{ty} -field {field}"));
                }
                if matches!(field, "9" | "12") {
                    assert!(described, "{ty} -field {field}: a buffer per timestep");
                } else if described {
                    reused.push(format!("{ty} -field {field}"));
                }
            }
        }
        // The graphs the METG sweep runs with reused buffers among them.
        for g in [
            "stencil_1d -field 2",
            "nearest -field 2",
            "no_comm -field 2",
        ] {
            assert!(
                reused.iter().any(|r| r == g),
                "{g} not described: {reused:?}"
            );
        }
        // Only `tree` is ordered by paths other than the write-after-read
        // edges (a point idle at `t − F`), which `reuse_ordered` does not
        // look for: its order is inferred, as before.
        assert_eq!(undescribed, ["tree -field 2", "tree -field 3"]);
        let app = App::parse(&[
            "-steps", "4", "-width", "2", "-type", "trivial", "-field", "2",
        ])
        .unwrap();
        let trivial = Classes::new(&rt, &app, 0, 1, None);
        assert!(trivial.described_order().is_none());
        let e = tessera_engine::symbolic::check_order(&trivial)
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not order its data"), "{e}");
    }
}
