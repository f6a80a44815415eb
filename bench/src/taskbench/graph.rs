//! Task Bench's task graphs: a grid of `steps × width` points, each task
//! `(timestep, point)` reading the outputs of its dependencies at the
//! previous timestep. The dependence patterns are Task Bench's (Slaughter et
//! al., SC20), written from the definitions in its `core/core.cc`; a graph
//! here and there has the same tasks and the same edges, which the tests
//! check on hand-worked cases.

use super::kernel::Kernel;
use super::random::random_uniform;

/// A dependence pattern (`-type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// No dependencies.
    Trivial,
    /// Each point on its own previous value.
    NoComm,
    /// Points `p-1 ..= p+1` (clipped at the edges).
    Stencil1d,
    /// Points `p-1 ..= p+1`, wrapping around.
    Stencil1dPeriodic,
    /// A wavefront: a growing then shrinking diagonal band.
    Dom,
    /// A binary tree widening each step.
    Tree,
    /// Butterflies at distance `2^k`.
    Fft,
    /// Every point on every point.
    AllToAll,
    /// `radix` neighbouring points.
    Nearest,
    /// `radix` points spread across the width, shifting with the period.
    Spread,
    /// A random subset (`-fraction`) of `radix` neighbours.
    RandomNearest,
    /// Named by Task Bench, but its core defines no dependencies for it.
    RandomSpread,
}

/// Every pattern with its name on the command line, in Task Bench's order.
pub const PATTERNS: [(&str, Pattern); 12] = [
    ("trivial", Pattern::Trivial),
    ("no_comm", Pattern::NoComm),
    ("stencil_1d", Pattern::Stencil1d),
    ("stencil_1d_periodic", Pattern::Stencil1dPeriodic),
    ("dom", Pattern::Dom),
    ("tree", Pattern::Tree),
    ("fft", Pattern::Fft),
    ("all_to_all", Pattern::AllToAll),
    ("nearest", Pattern::Nearest),
    ("spread", Pattern::Spread),
    ("random_nearest", Pattern::RandomNearest),
    ("random_spread", Pattern::RandomSpread),
];

impl Pattern {
    /// The pattern called `name`, if any.
    pub fn parse(name: &str) -> Option<Pattern> {
        PATTERNS.iter().find(|(n, _)| *n == name).map(|&(_, p)| p)
    }

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        PATTERNS
            .iter()
            .find(|(_, p)| *p == self)
            .map_or("?", |(n, _)| n)
    }

    /// Whether it repeats with a `-period` (Task Bench's `needs_period`).
    pub fn needs_period(self) -> bool {
        matches!(self, Pattern::Spread | Pattern::RandomNearest)
    }
}

/// An inclusive range of points, `(first, last)`, as Task Bench lists them.
pub type Span = (i64, i64);

/// One task graph of a run (`-and` separates several).
#[derive(Clone, Debug, PartialEq)]
pub struct Graph {
    /// Its place among the run's graphs (seeds `random_nearest` and the
    /// load imbalance).
    pub index: usize,
    /// Timesteps (`-steps`).
    pub steps: i64,
    /// Points per timestep at most (`-width`).
    pub width: i64,
    /// Dependence pattern (`-type`).
    pub pattern: Pattern,
    /// Neighbours per task (`-radix`; nearest, spread, random_nearest).
    pub radix: i64,
    /// Timesteps after which the pattern repeats (`-period`; spread,
    /// random_nearest).
    pub period: i64,
    /// Probability of each edge of `random_nearest` (`-fraction`).
    pub fraction: f64,
    /// What each task computes.
    pub kernel: Kernel,
    /// Bytes each task writes (`-output`, at least 16).
    pub output_bytes: usize,
    /// Scratch bytes each point keeps (`-scratch`; memory and dgemm kernels).
    pub scratch_bytes: usize,
    /// Output buffers per point, used round-robin over the timesteps
    /// (`-field`; default one per timestep, so no task waits for the
    /// readers of an older output before writing).
    pub fields: i64,
}

impl Graph {
    /// Task Bench's defaults for graph number `index`.
    pub fn default_at(index: usize) -> Graph {
        Graph {
            index,
            steps: 4,
            width: 4,
            pattern: Pattern::Trivial,
            radix: 3,
            period: -1,
            fraction: 0.25,
            kernel: Kernel::default(),
            output_bytes: 16,
            scratch_bytes: 0,
            fields: 0,
        }
    }

    /// First point at `timestep` (0 before the first).
    pub fn offset_at(&self, timestep: i64) -> i64 {
        match self.pattern {
            _ if timestep < 0 => 0,
            Pattern::Dom => (timestep + self.width - self.steps).max(0),
            _ => 0,
        }
    }

    /// Number of points at `timestep` (0 before the first).
    pub fn width_at(&self, timestep: i64) -> i64 {
        match self.pattern {
            _ if timestep < 0 => 0,
            Pattern::Dom => self.width.min((timestep + 1).min(self.steps - timestep)),
            Pattern::Tree => self.width.min(1i64 << timestep.min(62)),
            _ => self.width,
        }
    }

    /// Number of distinct dependence sets the timesteps cycle through.
    pub fn dependence_sets(&self) -> i64 {
        match self.pattern {
            // ceil(log2(width)), in integers.
            Pattern::Fft => i64::from(64 - (self.width.max(1) as u64 - 1).leading_zeros()),
            Pattern::Spread | Pattern::RandomNearest | Pattern::RandomSpread => self.period,
            _ => 1,
        }
    }

    /// The dependence set timestep `timestep` uses.
    pub fn dependence_set_at(&self, timestep: i64) -> i64 {
        let sets = self.dependence_sets();
        match self.pattern {
            Pattern::Fft => (timestep + sets - 1) % sets,
            Pattern::Spread | Pattern::RandomNearest | Pattern::RandomSpread => timestep % sets,
            _ => 0,
        }
    }

    /// Appends to `out` the spans of points (of the previous timestep) that
    /// `point` depends on in dependence set `dset`. Before clipping to the
    /// previous timestep's points: see [`Graph::inputs`].
    pub fn dependencies(&self, dset: i64, point: i64, out: &mut Vec<Span>) {
        let w = self.width;
        match self.pattern {
            Pattern::Trivial | Pattern::RandomSpread => {}
            Pattern::NoComm => out.push((point, point)),
            Pattern::Stencil1d => out.push(((point - 1).max(0), (point + 1).min(w - 1))),
            Pattern::Stencil1dPeriodic => {
                out.push(((point - 1).max(0), (point + 1).min(w - 1)));
                if point - 1 < 0 {
                    out.push((w - 1, w - 1));
                }
                if point + 1 >= w {
                    out.push((0, 0));
                }
            }
            Pattern::Dom => out.push(((point - 1).max(0), point)),
            Pattern::Tree => out.push((point / 2, point / 2)),
            Pattern::Fft => {
                let d = 1i64 << dset;
                if point - d >= 0 {
                    out.push((point - d, point - d));
                }
                out.push((point, point));
                if point + d < w {
                    out.push((point + d, point + d));
                }
            }
            Pattern::AllToAll => out.push((0, w - 1)),
            Pattern::Nearest => {
                if self.radix > 0 {
                    out.push((
                        (point - self.radix / 2).max(0),
                        (point + (self.radix - 1) / 2).min(w - 1),
                    ));
                }
            }
            Pattern::Spread => {
                for i in 0..self.radix {
                    let dep =
                        (point + i * w / self.radix + if i > 0 { dset } else { 0 }).rem_euclid(w);
                    out.push((dep, dep));
                }
            }
            Pattern::RandomNearest => {
                let first = (point - self.radix / 2).max(0);
                let last = (point + (self.radix - 1) / 2).min(w - 1);
                // An edge from `dep` to `point` exists with probability
                // `fraction` (the task's own point always), drawn from a
                // hash of (graph, radix, dset, dep, point).
                self.random_runs(first, last, out, |dep| {
                    [self.index as i64, self.radix, dset, dep, point]
                });
            }
        }
    }

    /// Appends to `out` the spans of points (of the next timestep) that
    /// depend on `point` in dependence set `dset`: the mirror of
    /// [`Graph::dependencies`].
    pub fn reverse_dependencies(&self, dset: i64, point: i64, out: &mut Vec<Span>) {
        let w = self.width;
        match self.pattern {
            Pattern::Dom => out.push((point, (point + 1).min(w - 1))),
            Pattern::Tree => {
                let (c1, c2) = (point * 2, point * 2 + 1);
                if c2 < w {
                    out.push((c1, c2));
                } else if c1 < w {
                    out.push((c1, c1));
                }
            }
            Pattern::Nearest => {
                if self.radix > 0 {
                    out.push((
                        (point - (self.radix - 1) / 2).max(0),
                        (point + self.radix / 2).min(w - 1),
                    ));
                }
            }
            Pattern::Spread => {
                for i in 0..self.radix {
                    let dep =
                        (point - i * w / self.radix - if i > 0 { dset } else { 0 }).rem_euclid(w);
                    out.push((dep, dep));
                }
            }
            Pattern::RandomNearest => {
                let first = (point - (self.radix - 1) / 2).max(0);
                let last = (point + self.radix / 2).min(w - 1);
                self.random_runs(first, last, out, |succ| {
                    [self.index as i64, self.radix, dset, point, succ]
                });
            }
            // Symmetric patterns.
            _ => self.dependencies(dset, point, out),
        }
    }

    /// `random_nearest`'s edges between `first..=last` and one point, as
    /// runs of included neighbours; `seed(i)` is the hashed key of the edge
    /// with neighbour `i`.
    fn random_runs(
        &self,
        first: i64,
        last: i64,
        out: &mut Vec<Span>,
        seed: impl Fn(i64) -> [i64; 5],
    ) {
        let mut run_start = None;
        for i in first..=last {
            let key = seed(i);
            let own = if key[3] == key[4] {
                self.radix > 0
            } else {
                false
            };
            if random_uniform(&key) < self.fraction || own {
                run_start.get_or_insert(i);
            } else if let Some(s) = run_start.take() {
                out.push((s, i - 1));
            }
        }
        if let Some(s) = run_start {
            out.push((s, last));
        }
    }

    /// The points of timestep `timestep - 1` that task `(timestep, point)`
    /// reads, in the order its inputs are numbered: its dependencies that
    /// exist at the previous timestep.
    pub fn inputs(&self, timestep: i64, point: i64, spans: &mut Vec<Span>, out: &mut Vec<i64>) {
        out.clear();
        if timestep == 0 {
            return;
        }
        let (lo, n) = (self.offset_at(timestep - 1), self.width_at(timestep - 1));
        spans.clear();
        self.dependencies(self.dependence_set_at(timestep), point, spans);
        for &(a, b) in spans.iter() {
            out.extend(a.max(lo)..=b.min(lo + n - 1));
        }
    }

    /// The points of timestep `timestep + 1` that read `(timestep, point)`'s
    /// output, in increasing span order.
    pub fn outputs(&self, timestep: i64, point: i64, spans: &mut Vec<Span>, out: &mut Vec<i64>) {
        out.clear();
        if timestep + 1 >= self.steps {
            return;
        }
        let (lo, n) = (self.offset_at(timestep + 1), self.width_at(timestep + 1));
        spans.clear();
        self.reverse_dependencies(self.dependence_set_at(timestep + 1), point, spans);
        for &(a, b) in spans.iter() {
            out.extend(a.max(lo)..=b.min(lo + n - 1));
        }
    }

    /// Refuses a graph Task Bench would refuse or could not run, saying
    /// what is wrong (`which` names it: "graph 2"). Checks what Task Bench's
    /// `App::check` asserts — no point depends twice on one point, and the
    /// reverse dependencies mirror the dependencies — as errors.
    pub fn check(&self, which: &str) -> Result<(), String> {
        let name = self.pattern.name();
        if self.pattern == Pattern::RandomSpread {
            return Err(format!(
                "{which}: -type random_spread is named by Task Bench but its core defines no dependencies for it (every Task Bench implementation stops on it); use random_nearest or spread"
            ));
        }
        if self.pattern.needs_period() && self.period == 0 {
            return Err(format!(
                "{which}: -type {name} needs a non-zero period (-period N)"
            ));
        }
        if !self.pattern.needs_period() && self.period != 0 {
            return Err(format!(
                "{which}: -type {name} takes no -period (only spread and random_nearest do)"
            ));
        }
        if self.pattern == Pattern::Fft && self.width < 2 {
            return Err(format!("{which}: -type fft needs -width 2 or more"));
        }
        if self.pattern == Pattern::Spread {
            if self.radix == 0 {
                return Err(format!("{which}: -type spread needs -radix 1 or more"));
            }
            let spread = (self.width + self.radix - 1) / self.radix;
            if self.period > spread {
                return Err(format!(
                    "{which}: -type spread with -width {} -radix {} needs a period of at most {spread} (got -period {})",
                    self.width, self.radix, self.period
                ));
            }
        }
        self.kernel.check(which, self.scratch_bytes)?;
        // The materialized check costs width × radix per dependence set:
        // all_to_all (one span, never repeated) and very wide graphs skip it.
        if self.pattern == Pattern::AllToAll || self.width > 1 << 20 {
            return Ok(());
        }
        let (mut spans, mut seen) = (Vec::new(), Vec::new());
        for dset in 0..self.dependence_sets() {
            // deps[p] = the points p depends on in this set.
            let mut deps: Vec<Vec<i64>> = Vec::with_capacity(self.width as usize);
            for p in 0..self.width {
                spans.clear();
                self.dependencies(dset, p, &mut spans);
                seen.clear();
                for &(a, b) in &spans {
                    seen.extend(a..=b);
                }
                seen.sort_unstable();
                if let Some(w) = seen.windows(2).find(|w| w[0] == w[1]) {
                    return Err(format!(
                        "{which}: -type {name} -width {} -radix {} makes point {p} depend twice on point {} (dependence set {dset}), which Task Bench's core refuses too",
                        self.width, self.radix, w[0]
                    ));
                }
                deps.push(seen.clone());
            }
            for p in 0..self.width {
                spans.clear();
                self.reverse_dependencies(dset, p, &mut spans);
                for &(a, b) in &spans {
                    for q in a..=b {
                        if deps[q as usize].binary_search(&p).is_err() {
                            return Err(format!(
                                "{which}: -type {name}: internal error, point {q}'s dependencies lack {p} although {p}'s successors list {q} (dependence set {dset})"
                            ));
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::app::App;
    use super::super::report::totals;

    /// Each timestep's points and the points each reads, as
    /// `t1: 0<0,1, 1<0,1,2,` (the listing the reference harness printed).
    fn listing(args: &[&str]) -> String {
        let app = App::parse(args).unwrap();
        let g = &app.graphs[0];
        let (mut spans, mut ins) = (Vec::new(), Vec::new());
        let mut s = String::new();
        for t in 0..g.steps {
            s += &format!("t{t}:");
            let lo = g.offset_at(t);
            for p in lo..lo + g.width_at(t) {
                g.inputs(t, p, &mut spans, &mut ins);
                s += &format!(" {p}<");
                for d in &ins {
                    s += &format!("{d},");
                }
            }
            s.push('\n');
        }
        s
    }

    /// The reverse dependencies mirror the dependencies, at every timestep.
    fn assert_mirrored(args: &[&str]) {
        let app = App::parse(args).unwrap();
        let g = &app.graphs[0];
        let (mut spans, mut ins, mut outs) = (Vec::new(), Vec::new(), Vec::new());
        for t in 0..g.steps - 1 {
            let lo = g.offset_at(t);
            for p in lo..lo + g.width_at(t) {
                g.outputs(t, p, &mut spans, &mut outs);
                let nlo = g.offset_at(t + 1);
                let readers: Vec<i64> = (nlo..nlo + g.width_at(t + 1))
                    .filter(|&q| {
                        g.inputs(t + 1, q, &mut spans, &mut ins);
                        ins.contains(&p)
                    })
                    .collect();
                let mut sorted = outs.clone();
                sorted.sort_unstable();
                assert_eq!(sorted, readers, "{args:?}: successors of ({t}, {p})");
            }
        }
    }

    // Listings printed by a harness over Task Bench's own core (core.cc,
    // dependencies clipped to the previous timestep's points), and small
    // cases worked by hand.
    #[test]
    fn stencils() {
        assert_eq!(
            listing(&["-steps", "2", "-width", "3", "-type", "stencil_1d"]),
            "t0: 0< 1< 2<\nt1: 0<0,1, 1<0,1,2, 2<1,2,\n"
        );
        assert_eq!(
            listing(&["-steps", "2", "-width", "1", "-type", "stencil_1d"]),
            "t0: 0<\nt1: 0<0,\n"
        );
        assert_eq!(
            listing(&["-steps", "2", "-width", "4", "-type", "stencil_1d_periodic"]),
            "t0: 0< 1< 2< 3<\nt1: 0<0,1,3, 1<0,1,2, 2<1,2,3, 3<2,3,0,\n"
        );
        assert_eq!(
            listing(&["-steps", "2", "-width", "2", "-type", "no_comm"]),
            "t0: 0< 1<\nt1: 0<0, 1<1,\n"
        );
        assert_eq!(
            listing(&["-steps", "2", "-width", "2"]),
            "t0: 0< 1<\nt1: 0< 1<\n"
        );
    }

    #[test]
    fn dom_tree_fft_all_to_all() {
        assert_eq!(
            listing(&["-steps", "4", "-width", "3", "-type", "dom"]),
            "t0: 0<\nt1: 0<0, 1<0,\nt2: 1<0,1, 2<1,\nt3: 2<1,2,\n"
        );
        assert_eq!(
            listing(&["-steps", "3", "-width", "4", "-type", "tree"]),
            "t0: 0<\nt1: 0<0, 1<0,\nt2: 0<0, 1<0, 2<1, 3<1,\n"
        );
        assert_eq!(
            listing(&["-steps", "3", "-width", "5", "-type", "fft"]),
            "t0: 0< 1< 2< 3< 4<\nt1: 0<0,1, 1<0,1,2, 2<1,2,3, 3<2,3,4, 4<3,4,\nt2: 0<0,2, 1<1,3, 2<0,2,4, 3<1,3, 4<2,4,\n"
        );
        assert_eq!(
            listing(&["-steps", "2", "-width", "3", "-type", "all_to_all"]),
            "t0: 0< 1< 2<\nt1: 0<0,1,2, 1<0,1,2, 2<0,1,2,\n"
        );
    }

    #[test]
    fn nearest_spread_random() {
        assert_eq!(
            listing(&["-steps", "2", "-width", "8", "-type", "nearest", "-radix", "5"]),
            "t0: 0< 1< 2< 3< 4< 5< 6< 7<\nt1: 0<0,1,2, 1<0,1,2,3, 2<0,1,2,3,4, 3<1,2,3,4,5, 4<2,3,4,5,6, 5<3,4,5,6,7, 6<4,5,6,7, 7<5,6,7,\n"
        );
        // An even radix leans left: radix/2 before, (radix-1)/2 after.
        assert_eq!(
            listing(&["-steps", "2", "-width", "5", "-type", "nearest", "-radix", "4"]),
            "t0: 0< 1< 2< 3< 4<\nt1: 0<0,1, 1<0,1,2, 2<0,1,2,3, 3<1,2,3,4, 4<2,3,4,\n"
        );
        assert_eq!(
            listing(&["-steps", "2", "-width", "3", "-type", "nearest", "-radix", "0"]),
            "t0: 0< 1< 2<\nt1: 0< 1< 2<\n"
        );
        assert_eq!(
            listing(&["-steps", "3", "-width", "8", "-type", "spread", "-radix", "2", "-period", "3"]),
            "t0: 0< 1< 2< 3< 4< 5< 6< 7<\nt1: 0<0,5, 1<1,6, 2<2,7, 3<3,0, 4<4,1, 5<5,2, 6<6,3, 7<7,4,\nt2: 0<0,6, 1<1,7, 2<2,0, 3<3,1, 4<4,2, 5<5,3, 6<6,4, 7<7,5,\n"
        );
        // Task Bench's own draws (SipHash of the edge), fraction 0.5.
        assert_eq!(
            listing(&[
                "-steps",
                "4",
                "-width",
                "8",
                "-type",
                "random_nearest",
                "-radix",
                "5",
                "-fraction",
                "0.5"
            ]),
            "t0: 0< 1< 2< 3< 4< 5< 6< 7<\n\
             t1: 0<0,1,2, 1<1,3, 2<1,2,3,4, 3<1,2,3, 4<3,4,6, 5<3,4,5,6,7, 6<4,5,6,7, 7<6,7,\n\
             t2: 0<0,2, 1<1, 2<1,2,3,4, 3<3,5, 4<2,4,5, 5<3,5,6,7, 6<6,7, 7<5,6,7,\n\
             t3: 0<0, 1<0,1, 2<2,4, 3<1,3,4,5, 4<3,4, 5<5,6,7, 6<4,6,7, 7<7,\n"
        );
    }

    #[test]
    fn successors_mirror_inputs() {
        for args in [
            &["-steps", "5", "-width", "9", "-type", "stencil_1d"][..],
            &["-steps", "5", "-width", "9", "-type", "stencil_1d_periodic"],
            &["-steps", "9", "-width", "5", "-type", "dom"],
            &["-steps", "6", "-width", "9", "-type", "tree"],
            &["-steps", "7", "-width", "9", "-type", "fft"],
            &["-steps", "3", "-width", "4", "-type", "all_to_all"],
            &[
                "-steps", "4", "-width", "9", "-type", "nearest", "-radix", "4",
            ],
            &[
                "-steps", "7", "-width", "9", "-type", "spread", "-radix", "3", "-period", "2",
            ],
            &[
                "-steps",
                "7",
                "-width",
                "9",
                "-type",
                "random_nearest",
                "-radix",
                "5",
                "-period",
                "4",
            ],
            &["-steps", "3", "-width", "1", "-type", "no_comm"],
        ] {
            assert_mirrored(args);
        }
    }

    #[test]
    fn counts() {
        let app = App::parse(&["-steps", "10", "-width", "3", "-type", "stencil_1d"]).unwrap();
        // 30 tasks; each of the 9 later timesteps has 2 + 3 + 2 inputs.
        let t = totals(&app);
        assert_eq!((t.tasks, t.deps), (30, 9 * 7));
        let app = App::parse(&["-steps", "4", "-width", "3", "-type", "dom"]).unwrap();
        // 1 + 2 + 2 + 1 tasks; inputs 1 + 1, 2 + 1, 2 (the listing above).
        let t = totals(&app);
        assert_eq!((t.tasks, t.deps), (6, 7));
    }
}
