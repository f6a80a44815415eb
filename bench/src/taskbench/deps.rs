//! A graph's dependencies computed once: every point's inputs and outputs
//! per dependence set, as points, so a task reads a slice instead of running
//! its dependence function. Task Bench's MPI implementation caches them the
//! same way (`mpi/bulk_synchronous.cc`, "Cache dependencies"), once before
//! its timestep loop. `Graph::inputs` / `Graph::outputs` stay the
//! definition; [`Deps`] must list exactly what they list, in the same order
//! (the test `cached_lists_equal_the_dependence_functions` checks every
//! pattern).
//!
//! Measured (`callgrind`, a one-worker symbolic `stencil_1d`, empty
//! kernel): a task took 4,818 instructions on the worker with the lists
//! cached, 5,416 with the dependence functions run per task.

use std::ops::Deref;

use smallvec::SmallVec;

use super::graph::{Graph, Pattern, Span};

/// At most this many points are cached per direction (8 bytes each, 8 MiB
/// at most; a run keeps one copy, `run::dependence_lists`); a larger graph
/// (`all_to_all` wider than 1024) computes its lists per call.
const MAX_CACHED: usize = 1 << 20;

/// One direction's lists: point `p`'s in dependence set `d` at
/// `points[starts[d·width + p] .. starts[d·width + p + 1]]` (before
/// clipping to a timestep's points).
struct Lists {
    starts: Vec<usize>,
    points: Vec<i64>,
}

impl Lists {
    /// The lists `spans_of(dset, p, out)` gives, or `None` past
    /// [`MAX_CACHED`] points.
    fn build(g: &Graph, spans_of: impl Fn(i64, i64, &mut Vec<Span>)) -> Option<Lists> {
        let width = g.width.max(0);
        let sets = g.dependence_sets().max(1);
        let mut starts = Vec::with_capacity((sets * width + 1) as usize);
        let (mut points, mut spans) = (Vec::new(), Vec::new());
        for dset in 0..sets {
            for p in 0..width {
                starts.push(points.len());
                spans.clear();
                spans_of(dset, p, &mut spans);
                for &(a, b) in &spans {
                    if points.len() + (b - a + 1).max(0) as usize > MAX_CACHED {
                        return None;
                    }
                    points.extend(a..=b);
                }
            }
        }
        starts.push(points.len());
        Some(Lists { starts, points })
    }

    fn get(&self, width: i64, dset: i64, p: i64) -> &[i64] {
        let i = (dset * width + p) as usize;
        &self.points[self.starts[i]..self.starts[i + 1]]
    }
}

/// A task's list of points: a cached slice, or made for the call (clipped
/// to a timestep's points, or computed when the graph is too large to
/// cache; inline up to four points, no allocation).
pub enum Points<'a> {
    Cached(&'a [i64]),
    Made(SmallVec<[i64; 4]>),
}

impl Deref for Points<'_> {
    type Target = [i64];

    fn deref(&self) -> &[i64] {
        match self {
            Points::Cached(s) => s,
            Points::Made(v) => v,
        }
    }
}

/// A graph with its dependence lists cached (when they fit).
pub struct Deps {
    graph: Graph,
    /// Every timestep has all `width` points (all patterns but `dom` and
    /// `tree`): a cached list needs no clipping.
    full: bool,
    /// Its dependence sets (one for most patterns: no division per call).
    sets: i64,
    cached: Option<(Lists, Lists)>,
}

impl Deps {
    /// `g`'s lists, computed now.
    pub fn new(g: &Graph) -> Deps {
        let inputs = Lists::build(g, |d, p, out| g.dependencies(d, p, out));
        let outputs = inputs
            .is_some()
            .then(|| Lists::build(g, |d, p, out| g.reverse_dependencies(d, p, out)))
            .flatten();
        Deps {
            graph: g.clone(),
            full: !matches!(g.pattern, Pattern::Dom | Pattern::Tree),
            sets: g.dependence_sets(),
            cached: inputs.zip(outputs),
        }
    }

    /// The points of timestep `t − 1` that task `(t, p)` reads, as
    /// [`Graph::inputs`] lists them (none outside the graph's timesteps).
    #[inline]
    pub fn inputs(&self, t: i64, p: i64) -> Points<'_> {
        let g = &self.graph;
        match &self.cached {
            _ if t <= 0 || t >= g.steps => Points::Cached(&[]),
            Some((ins, _)) => self.clip(ins.get(g.width, self.set_at(t), p), t - 1),
            None => self.computed(t, p, Graph::inputs),
        }
    }

    /// The points of timestep `t + 1` that read `(t, p)`'s output, as
    /// [`Graph::outputs`] lists them (none outside the graph's timesteps).
    #[inline]
    pub fn outputs(&self, t: i64, p: i64) -> Points<'_> {
        let g = &self.graph;
        match &self.cached {
            _ if t < 0 || t + 1 >= g.steps => Points::Cached(&[]),
            Some((_, outs)) => self.clip(outs.get(g.width, self.set_at(t + 1), p), t + 1),
            None => self.computed(t, p, Graph::outputs),
        }
    }

    /// A list of a graph too large to cache, from its dependence function
    /// (`Graph::inputs` or `Graph::outputs`): out of line, as is
    /// [`clipped`](Self::clipped).
    #[inline(never)]
    fn computed(
        &self,
        t: i64,
        p: i64,
        list: fn(&Graph, i64, i64, &mut Vec<Span>, &mut Vec<i64>),
    ) -> Points<'_> {
        let mut out = Vec::new();
        list(&self.graph, t, p, &mut Vec::new(), &mut out);
        Points::Made(SmallVec::from_vec(out))
    }

    /// The dependence set of timestep `t`.
    fn set_at(&self, t: i64) -> i64 {
        match self.sets {
            1 => 0,
            _ => self.graph.dependence_set_at(t),
        }
    }

    /// `list` without the points timestep `t` lacks.
    #[inline]
    fn clip<'a>(&self, list: &'a [i64], t: i64) -> Points<'a> {
        match self.full {
            true => Points::Cached(list),
            false => self.clipped(list, t),
        }
    }

    /// [`clip`](Self::clip) where timesteps lack points (`dom`, `tree`):
    /// out of line, so the common case inlines into every lookup (called
    /// for every list, it was about 130 instructions of each `stencil_1d`
    /// task, `callgrind`).
    #[inline(never)]
    fn clipped<'a>(&self, list: &'a [i64], t: i64) -> Points<'a> {
        let lo = self.graph.offset_at(t);
        let hi = lo + self.graph.width_at(t);
        Points::Made(
            list.iter()
                .copied()
                .filter(|q| (lo..hi).contains(q))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::app::App;
    use super::*;

    /// Every pattern (with the options that change its lists), at widths
    /// that clip, wrap and repeat: the cached lists are the dependence
    /// functions' lists, point for point and in order, at every task.
    #[test]
    fn cached_lists_equal_the_dependence_functions() {
        let cases: &[&str] = &[
            "-type trivial -width 3",
            "-type no_comm -width 4",
            "-type stencil_1d -width 1",
            "-type stencil_1d -width 5",
            "-type stencil_1d_periodic -width 3",
            "-type stencil_1d_periodic -width 6",
            "-type dom -width 5 -steps 9",
            "-type tree -width 9 -steps 6",
            "-type fft -width 7 -steps 8",
            "-type all_to_all -width 5",
            "-type nearest -width 9 -radix 5",
            "-type nearest -width 4 -radix 0",
            "-type spread -width 9 -radix 3 -period 2",
            "-type random_nearest -width 9 -radix 5 -period 3 -fraction 0.5",
        ];
        for case in cases {
            let mut args: Vec<&str> = vec!["-steps", "7"];
            args.extend(case.split(' '));
            let app = App::parse(&args).unwrap_or_else(|e| panic!("{case}: {e}"));
            let g = &app.graphs[0];
            let deps = Deps::new(g);
            assert!(deps.cached.is_some(), "{case}: cached");
            let (mut spans, mut want) = (Vec::new(), Vec::new());
            for t in -1..=g.steps {
                for p in 0..g.width {
                    want.clear();
                    if (0..g.steps).contains(&t) {
                        g.inputs(t, p, &mut spans, &mut want);
                    }
                    assert_eq!(&*deps.inputs(t, p), &want[..], "{case} inputs ({t}, {p})");
                    want.clear();
                    if (0..g.steps).contains(&t) {
                        g.outputs(t, p, &mut spans, &mut want);
                    }
                    assert_eq!(&*deps.outputs(t, p), &want[..], "{case} outputs ({t}, {p})");
                }
            }
        }
    }

    /// Past the cap the lists are computed per call, and are the same.
    #[test]
    fn a_graph_too_large_to_cache_computes_its_lists() {
        let width = (MAX_CACHED as f64).sqrt() as i64 + 8;
        let w = width.to_string();
        let app = App::parse(&["-steps", "3", "-type", "all_to_all", "-width", &w]).unwrap();
        let g = &app.graphs[0];
        let deps = Deps::new(g);
        assert!(deps.cached.is_none());
        let (mut spans, mut want) = (Vec::new(), Vec::new());
        g.inputs(1, 3, &mut spans, &mut want);
        assert_eq!(&*deps.inputs(1, 3), &want[..]);
        assert_eq!(deps.inputs(1, 3).len(), width as usize);
        assert!(deps.inputs(0, 3).is_empty());
        assert_eq!(deps.outputs(1, 3).len(), width as usize);
        assert!(deps.outputs(2, 3).is_empty());
    }
}
