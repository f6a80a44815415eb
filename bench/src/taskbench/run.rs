//! A run's graphs as Tessera tasks, written once against `dist::Submit` as
//! a user would: on one process (`Runtime`) or as one rank of several
//! (`DistRuntime`, points dealt to ranks in blocks as Task Bench's MPI
//! implementation deals them, outputs carried by remote edges).
//!
//! Each point keeps `fields` output buffers; task `(t, p)` writes buffer
//! `t mod fields` of `p` and reads buffer `(t - 1) mod fields` of each point
//! it depends on, so the dependencies Tessera infers from the accesses are
//! Task Bench's edges (and, with fewer fields than timesteps, the
//! write-after-read edges of reusing a buffer). Each task checks that every
//! input holds the (timestep, point) it should before writing its own.

use std::sync::{Arc, Mutex};

use tessera_engine::dist::stf::DistHandle;
use tessera_engine::dist::Submit;
use tessera_engine::{BodyError, Codelet, Error, Read, Task, Write};

use super::app::App;
use super::deps::Deps;
use super::graph::Graph;
use super::kernel::{prepare_scratch, SCRATCH_MAGIC};

/// Which task a body runs: the codelet's arguments.
#[derive(Clone, Copy, Debug)]
pub struct Point {
    /// The graph's index.
    pub graph: usize,
    /// Timestep.
    pub t: i64,
    /// Point.
    pub p: i64,
}

/// A task's data: its inputs (the previous timestep's outputs it reads),
/// then its output.
pub type Data = (Vec<Read<Vec<u8>>>, Write<Vec<u8>>);

/// What the bodies share.
pub(super) struct Shared {
    graphs: Vec<Graph>,
    /// Per graph, its dependence lists (computed once, shared with the
    /// front-end that makes the tasks).
    deps: Arc<[Deps]>,
    /// Per graph, per point: its scratch (points this rank runs only, when
    /// the kernel uses scratch).
    scratch: Vec<Vec<Option<Mutex<Vec<f64>>>>>,
    /// A task made to write a wrong output (tests of the validation).
    corrupt: Option<Point>,
}

/// The rank that runs point `p` of a `width`-wide graph over `ranks` ranks:
/// rank `r` runs points `r·width/ranks ..= (r+1)·width/ranks − 1` (Task
/// Bench's `mpi/nonblock`).
pub fn rank_of(p: i64, width: i64, ranks: usize) -> usize {
    let r = ranks as i64;
    // The last rank whose first point is at most p.
    let mut guess = ((p * r) / width).clamp(0, r - 1);
    while guess + 1 < r && (guess + 1) * width / r <= p {
        guess += 1;
    }
    while guess > 0 && guess * width / r > p {
        guess -= 1;
    }
    guess as usize
}

/// A run's data and codelet, registered on `S` before the clock starts.
pub struct Prepared {
    /// Per graph, per point, per field: the output buffers.
    outputs: Vec<Vec<Vec<DistHandle<Vec<u8>>>>>,
    /// Per graph, its dependence lists (computed before the clock starts).
    deps: Arc<[Deps]>,
    codelet: Codelet<Data, Point>,
}

/// Writes `(t, p)` pairs into `out` (Task Bench's output: the pair, repeated).
fn fill(out: &mut [u8], t: i64, p: i64) {
    for pair in out.chunks_exact_mut(16) {
        pair[..8].copy_from_slice(&t.to_le_bytes());
        pair[8..].copy_from_slice(&p.to_le_bytes());
    }
}

/// Checks that input `i` of task `at`, from point `dep`, holds
/// `(at.t − 1, dep)` in every pair.
fn check_input(at: Point, i: usize, dep: i64, input: &[u8], bytes: usize) -> Result<(), BodyError> {
    if input.len() != bytes {
        return Err(format!(
            "graph {} task (timestep {}, point {}): input {i} from point {dep} has {} bytes, expected {bytes}",
            at.graph + 1, at.t, at.p, input.len()
        )
        .into());
    }
    for (k, pair) in input.chunks_exact(16).enumerate() {
        let t = i64::from_le_bytes(pair[..8].try_into().expect("8 bytes"));
        let p = i64::from_le_bytes(pair[8..].try_into().expect("8 bytes"));
        if (t, p) != (at.t - 1, dep) {
            return Err(format!(
                "graph {} task (timestep {}, point {}): corrupted input {i}: at pair {k} it holds (timestep {t}, point {p}), expected (timestep {}, point {dep})",
                at.graph + 1, at.t, at.p, at.t - 1
            )
            .into());
        }
    }
    Ok(())
}

impl Shared {
    /// The body of task `at`: check the inputs, write the output, run the
    /// kernel in the point's scratch.
    /// [`body`](Self::body) for the typed task, whose list of inputs it
    /// takes and drops. Calling `body` with a borrow of the list from the
    /// codelet's closure ran fewer instructions but made the symbolic
    /// `stencil_1d` 1.2–4.5 % slower (`taskbench_ab.sh`, 12 alternated
    /// rounds, faster in 1–4 of 12); why is not established.
    #[inline(never)]
    fn body_owned(
        &self,
        at: Point,
        inputs: Vec<&Vec<u8>>,
        out: &mut Vec<u8>,
    ) -> Result<(), BodyError> {
        self.body(at, &inputs, out)
    }

    pub(super) fn body(
        &self,
        at: Point,
        inputs: &[&Vec<u8>],
        out: &mut Vec<u8>,
    ) -> Result<(), BodyError> {
        let g = &self.graphs[at.graph];
        let deps = self.deps[at.graph].inputs(at.t, at.p);
        if deps.len() != inputs.len() {
            return Err(format!(
                "graph {} task (timestep {}, point {}): {} inputs, expected {}",
                at.graph + 1,
                at.t,
                at.p,
                inputs.len(),
                deps.len()
            )
            .into());
        }
        for (i, (input, &dep)) in inputs.iter().zip(deps.iter()).enumerate() {
            check_input(at, i, dep, input, g.output_bytes)?;
        }
        out.resize(g.output_bytes, 0);
        let t = match self.corrupt {
            Some(c) if (c.graph, c.t, c.p) == (at.graph, at.t, at.p) => at.t + 1,
            _ => at.t,
        };
        fill(out, t, at.p);
        match &self.scratch[at.graph][at.p as usize] {
            Some(scratch) => {
                let mut s = scratch.lock().map_err(|_| "scratch poisoned")?;
                if s[0].to_bits() != SCRATCH_MAGIC {
                    return Err(format!(
                        "graph {} point {}: scratch overwritten (its first word is not the magic value)",
                        at.graph + 1,
                        at.p
                    )
                    .into());
                }
                g.kernel.execute(at.graph, at.t, at.p, &mut s);
            }
            None => g.kernel.execute(at.graph, at.t, at.p, &mut []),
        }
        Ok(())
    }
}

/// Registers every output buffer (each rank: every buffer, owned by the
/// rank that runs its point) and this rank's scratch.
pub fn prepare<S: Submit>(s: &S, app: &App, corrupt: Option<Point>) -> Prepared {
    let ranks = s.size();
    let outputs = app
        .graphs
        .iter()
        .map(|g| {
            let fields = g.fields.min(g.steps) as usize;
            (0..g.width)
                .map(|p| {
                    let owner = rank_of(p, g.width, ranks);
                    let bytes = g.output_bytes;
                    // Made on the owner; elsewhere only where it arrives.
                    (0..fields)
                        .map(|_| s.register_with(owner, move || vec![0u8; bytes]))
                        .collect()
                })
                .collect()
        })
        .collect();
    let deps = dependence_lists(app);
    Prepared {
        outputs,
        codelet: codelet(app, &deps, s.rank(), ranks, corrupt),
        deps,
    }
}

/// Every graph's dependence lists, computed once for a run (the bodies
/// and the front-end share them).
pub fn dependence_lists(app: &App) -> Arc<[Deps]> {
    app.graphs.iter().map(Deps::new).collect()
}

/// The codelet every task of `app` runs, with the scratch of the points
/// `rank` (of `ranks`) runs: the same for every front-end. Its bodies
/// check their inputs against `deps` ([`dependence_lists`]).
pub fn codelet(
    app: &App,
    deps: &Arc<[Deps]>,
    rank: usize,
    ranks: usize,
    corrupt: Option<Point>,
) -> Codelet<Data, Point> {
    let shared = bodies(app, deps, rank, ranks, corrupt);
    let (flops, label) = (Arc::clone(&shared), Arc::clone(&shared));
    Codelet::<Data, Point>::with_args("taskbench")
        .flops(move |at| {
            let g = &flops.graphs[at.graph];
            g.kernel.flops(g.scratch_bytes, at.graph, at.t, at.p) as f64
        })
        .label(move |at| {
            let name = label.graphs[at.graph].pattern.name();
            format!("{name}({},{})", at.t, at.p)
        })
        .cpu(move |_, &at, (inputs, out)| shared.body_owned(at, inputs, out))
}

/// What the bodies of `rank`'s tasks share: the graphs, the dependence
/// lists, the scratch of its points.
pub(super) fn bodies(
    app: &App,
    deps: &Arc<[Deps]>,
    rank: usize,
    ranks: usize,
    corrupt: Option<Point>,
) -> Arc<Shared> {
    let scratch = app
        .graphs
        .iter()
        .map(|g| {
            (0..g.width)
                .map(|p| {
                    (g.scratch_bytes > 0 && rank_of(p, g.width, ranks) == rank)
                        .then(|| Mutex::new(prepare_scratch(g.scratch_bytes)))
                })
                .collect()
        })
        .collect();
    Arc::new(Shared {
        deps: Arc::clone(deps),
        graphs: app.graphs.clone(),
        scratch,
        corrupt,
    })
}

impl Prepared {
    /// Submits every task of every graph, timestep by timestep (graphs of
    /// unlike heights side by side), in Task Bench's order within a step.
    pub fn submit_all<S: Submit>(&self, s: &S, app: &App) -> Result<(), Error> {
        let steps = app.graphs.iter().map(|g| g.steps).max().unwrap_or(0);
        for t in 0..steps {
            for (gi, g) in app.graphs.iter().enumerate() {
                if t >= g.steps {
                    continue;
                }
                let outs = &self.outputs[gi];
                let fields = outs[0].len() as i64;
                let (now, before) = ((t % fields) as usize, ((t + fields - 1) % fields) as usize);
                let lo = g.offset_at(t);
                for p in lo..lo + g.width_at(t) {
                    let reads = self.deps[gi]
                        .inputs(t, p)
                        .iter()
                        .map(|&d| outs[d as usize][before].r())
                        .collect();
                    let task = Task::new(&self.codelet, (reads, outs[p as usize][now].w()))
                        .args(Point { graph: gi, t, p });
                    s.submit(task)?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_are_dealt_in_blocks() {
        // Task Bench: rank r runs r*width/ranks ..= (r+1)*width/ranks - 1.
        for (width, ranks) in [(1, 1), (2, 2), (7, 3), (8, 3), (3, 4), (100, 7)] {
            for p in 0..width {
                let r = rank_of(p, width, ranks);
                let (first, last) = (
                    r as i64 * width / ranks as i64,
                    (r as i64 + 1) * width / ranks as i64 - 1,
                );
                assert!(
                    first <= p && p <= last,
                    "width {width} ranks {ranks} point {p} -> {r}"
                );
            }
        }
    }

    #[test]
    fn a_wrong_input_is_named() {
        let at = Point {
            graph: 0,
            t: 3,
            p: 1,
        };
        let mut good = vec![0u8; 32];
        fill(&mut good, 2, 0);
        check_input(at, 0, 0, &good, 32).unwrap();
        let mut bad = good.clone();
        bad[16] ^= 1; // second pair's timestep
        let e = check_input(at, 0, 0, &bad, 32).unwrap_err().to_string();
        assert!(e.contains("corrupted input 0: at pair 1"), "{e}");
        assert!(e.contains("expected (timestep 2, point 0)"), "{e}");
        let e = check_input(at, 0, 0, &good[..16], 32)
            .unwrap_err()
            .to_string();
        assert!(e.contains("16 bytes, expected 32"), "{e}");
    }
}
