//! Graph inspection: DOT export of submitted graphs, and task graphs given
//! with explicit edges, checked for cycles before anything runs.
//!
//! petgraph builds, checks and prints these graphs; it is never on the
//! per-task hot path (ARCHITECTURE.md).

use petgraph::algo::toposort;
use petgraph::dot::{Config as DotConfig, Dot};
use petgraph::graph::{DiGraph, NodeIndex};

use crate::error::Error;
use crate::runtime::{GraphEntry, Runtime};
use crate::task::{TaskBuilder, TaskHandle};

pub(crate) fn dot_from_entries(entries: &[GraphEntry]) -> String {
    let mut g: DiGraph<String, ()> = DiGraph::new();
    let mut index = std::collections::HashMap::new();
    for (id, name, _) in entries {
        index.insert(*id, g.add_node(name.clone()));
    }
    for (id, _, preds) in entries {
        for p in preds.iter() {
            if let (Some(&a), Some(&b)) = (index.get(p), index.get(id)) {
                g.add_edge(a, b, ());
            }
        }
    }
    format!("{:?}", Dot::with_config(&g, &[DotConfig::EdgeNoLabel]))
}

/// A vertex of a [`TaskGraph`]: the index of a task added to it (not the
/// runtime's task id, nor a [`memory::NodeId`](crate::memory::NodeId)), and
/// which graph it belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Vertex {
    graph: u64,
    index: usize,
}

/// Source of [`TaskGraph`] identities.
static NEXT_GRAPH: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// A task graph given with explicit edges (Taskflow style), on top of the
/// data dependencies its tasks declare. It is checked for cycles before any
/// of its tasks is submitted.
pub struct TaskGraph {
    id: u64,
    tasks: Vec<TaskBuilder>,
    graph: DiGraph<String, ()>,
    /// The first edge given with a vertex of another graph: reported by
    /// `check` and `submit` (it used to panic inside petgraph, or, with an
    /// index that happened to exist here, join the wrong tasks).
    foreign: Option<String>,
}

impl Default for TaskGraph {
    fn default() -> Self {
        TaskGraph {
            id: NEXT_GRAPH.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            tasks: Vec::new(),
            graph: DiGraph::new(),
            foreign: None,
        }
    }
}

impl TaskGraph {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a task; returns its vertex.
    pub fn add(&mut self, task: TaskBuilder) -> Vertex {
        let name = task.display_name();
        self.tasks.push(task);
        let ix = self.graph.add_node(name);
        debug_assert_eq!(ix.index(), self.tasks.len() - 1);
        Vertex {
            graph: self.id,
            index: ix.index(),
        }
    }

    /// `to` runs after `from`. A vertex of another graph is not an edge:
    /// [`check`](Self::check) and [`submit`](Self::submit) then fail, naming it.
    pub fn edge(&mut self, from: Vertex, to: Vertex) {
        if let Some(v) = [from, to].into_iter().find(|v| v.graph != self.id) {
            self.foreign.get_or_insert_with(|| {
                format!(
                    "edge {} -> {}: vertex {} belongs to another TaskGraph",
                    from.index, to.index, v.index
                )
            });
            return;
        }
        self.graph
            .add_edge(NodeIndex::new(from.index), NodeIndex::new(to.index), ());
    }

    /// Number of tasks.
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Whether the graph has no task.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// `Err(Cycle)` naming a task on a cycle, if there is one; `Err(Config)`
    /// if an edge was given a vertex of another graph.
    pub fn check(&self) -> Result<(), Error> {
        self.order().map(|_| ())
    }

    fn order(&self) -> Result<Vec<NodeIndex>, Error> {
        if let Some(m) = &self.foreign {
            return Err(Error::Config(m.clone()));
        }
        toposort(&self.graph, None).map_err(|cycle| Error::Cycle {
            task: self.graph[cycle.node_id()].clone(),
        })
    }

    /// The graph in Graphviz DOT.
    pub fn to_dot(&self) -> String {
        format!(
            "{:?}",
            Dot::with_config(&self.graph, &[DotConfig::EdgeNoLabel])
        )
    }

    /// Check for cycles, then submit every task in a topological order with
    /// its explicit edges. Returns the handles indexed by [`Vertex`].
    pub fn submit(self, rt: &Runtime) -> Result<Vec<TaskHandle>, Error> {
        let order = self.order()?;
        let mut preds: Vec<Vec<usize>> = vec![Vec::new(); self.tasks.len()];
        for e in self.graph.raw_edges() {
            preds[e.target().index()].push(e.source().index());
        }
        let mut slots: Vec<Option<TaskBuilder>> = self.tasks.into_iter().map(Some).collect();
        let mut handles: Vec<Option<TaskHandle>> = vec![None; slots.len()];
        for ix in order {
            let i = ix.index();
            let mut task = slots[i].take().expect("each node is visited once");
            for &p in &preds[i] {
                let h = handles[p]
                    .as_ref()
                    .expect("predecessors come first in topological order");
                task = task.after(h);
            }
            handles[i] = Some(rt.submit(task)?);
        }
        Ok(handles
            .into_iter()
            .map(|h| h.expect("all submitted"))
            .collect())
    }
}
