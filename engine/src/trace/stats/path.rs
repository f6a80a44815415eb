//! The critical path of a trace: the longest duration-weighted path through
//! its dependency edges, with the edges it had to leave out (unknown ids) and
//! the tasks on a cycle. A team task counts once, by its leader's record.

use std::collections::HashMap;

use crate::trace::model::{Nanos, Trace};

pub(super) struct PathResult {
    pub(super) length: Option<Nanos>,
    pub(super) tasks: Vec<u64>,
    pub(super) ignored_edges: usize,
    pub(super) cyclic_tasks: usize,
    pub(super) duplicate_ids: usize,
}

/// Longest duration-weighted path, by Kahn's topological order: O(T + E).
/// Tasks left unvisited when the queue empties sit on or after a cycle.
pub(super) fn critical_path(trace: &Trace) -> PathResult {
    let tasks = &trace.tasks;
    let n = tasks.len();
    let mut index: HashMap<u64, usize> = HashMap::with_capacity(n);
    let mut duplicate_ids = 0;
    // A team's members repeat its leader's id and times: the leader stands
    // for the task.
    for (i, t) in tasks.iter().enumerate().filter(|(_, t)| t.team_rank == 0) {
        match index.entry(t.id) {
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(i);
            }
            // The first task with an id keeps it.
            std::collections::hash_map::Entry::Occupied(_) => duplicate_ids += 1,
        }
    }
    let mut result = PathResult {
        length: None,
        tasks: Vec::new(),
        ignored_edges: 0,
        cyclic_tasks: 0,
        duplicate_ids,
    };
    if trace.edges.is_empty() {
        return result;
    }

    let edges: Vec<(usize, usize)> = trace
        .edges
        .iter()
        .filter_map(|(a, b)| Some((*index.get(a)?, *index.get(b)?)))
        .collect();
    // Edges from another rank's task (a remote edge seen from one rank's
    // trace) are expected to name an absent task: not counted as ignored.
    let local = trace
        .edges
        .iter()
        .filter(|(a, b)| (a | b) & crate::trace::model::REMOTE_TASK == 0)
        .count();
    result.ignored_edges = local.saturating_sub(edges.len());

    // Successor lists in CSR form.
    let mut offsets = vec![0usize; n + 1];
    let mut indegree = vec![0usize; n];
    for &(a, b) in &edges {
        offsets[a + 1] += 1;
        indegree[b] += 1;
    }
    for i in 0..n {
        offsets[i + 1] += offsets[i];
    }
    let mut fill = offsets.clone();
    let mut succ = vec![0usize; edges.len()];
    for &(a, b) in &edges {
        succ[fill[a]] = b;
        fill[a] += 1;
    }

    let dur = |i: usize| tasks[i].end.saturating_sub(tasks[i].start);
    // dist[v]: longest path ending with v, v included; final once v is dequeued.
    let mut dist: Vec<Nanos> = (0..n).map(dur).collect();
    let mut pred = vec![usize::MAX; n];
    let mut queue: Vec<usize> = (0..n).filter(|&i| indegree[i] == 0).collect();
    let mut head = 0;
    while head < queue.len() {
        let u = queue[head];
        head += 1;
        for &v in &succ[offsets[u]..offsets[u + 1]] {
            let through_u = dist[u].saturating_add(dur(v));
            if through_u > dist[v] || pred[v] == usize::MAX && through_u == dist[v] {
                dist[v] = through_u;
                pred[v] = u;
            }
            indegree[v] -= 1;
            if indegree[v] == 0 {
                queue.push(v);
            }
        }
    }
    if queue.len() < n {
        result.cyclic_tasks = n - queue.len();
        return result;
    }
    let Some(mut last) = (0..n).max_by_key(|&i| (dist[i], std::cmp::Reverse(i))) else {
        return result;
    };
    result.length = Some(dist[last]);
    let mut chain = vec![tasks[last].id];
    while pred[last] != usize::MAX {
        last = pred[last];
        chain.push(tasks[last].id);
    }
    chain.reverse();
    result.tasks = chain;
    result
}
