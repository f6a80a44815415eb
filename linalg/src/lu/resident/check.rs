//! Runs a [`Plan`] in an interleaving of its streams and proves it free of
//! races: each operation's reads and writes (tiles on the device, each
//! panel's pivots, each block's host copy) are checked against the
//! happens-before order that the streams and events give (vector clocks,
//! one entry per stream). The order does not depend on the interleaving,
//! so one run proves the plan; the emulated device also runs it in random
//! interleavings, so a missing event changes its bits as well.
//!
//! Beside races it checks coverage: every device tile is uploaded before it
//! is read, no tile is written after its block went home, and every block
//! goes home exactly once.

use super::plan::{Op, Plan, Stream, STREAMS};

type Clock = [u64; 4];

fn leq(a: &Clock, b: &Clock) -> bool {
    a.iter().zip(b).all(|(x, y)| x <= y)
}

/// The last accesses to one cell.
#[derive(Clone, Default)]
struct Cell {
    /// The last write: its clock and operation.
    write: Option<(Clock, String)>,
    /// Reads since that write.
    reads: Vec<(Clock, String)>,
}

/// What one operation touches.
enum Place {
    /// Device tile (i, j).
    Tile(usize, usize),
    /// Panel k's pivots (on the device).
    Piv(usize),
    /// Host copy of block j.
    Host(usize),
}

fn accesses(t: usize, op: &Op) -> (Vec<Place>, Vec<Place>) {
    use Place::*;
    let col = |j: usize, from: usize| (from..t).map(move |i| Tile(i, j));
    match op {
        Op::Upload(j) => (vec![Host(*j)], col(*j, 0).collect()),
        Op::Download(j) => (col(*j, 0).collect(), vec![Host(*j)]),
        Op::Panel(k) => (
            col(*k, *k).collect(),
            col(*k, *k).chain([Piv(*k)]).collect(),
        ),
        Op::Swap { k, cols } => {
            let rw: Vec<_> = cols.clone().flat_map(|j| col(j, *k)).collect();
            let mut r: Vec<_> = cols.clone().flat_map(|j| col(j, *k)).collect();
            r.push(Piv(*k));
            (r, rw)
        }
        Op::Trsm { k, cols } => {
            let mut r: Vec<_> = cols.clone().map(|j| Tile(*k, j)).collect();
            r.push(Tile(*k, *k));
            (r, cols.clone().map(|j| Tile(*k, j)).collect())
        }
        Op::Gemm { k, cols } => {
            let mut r: Vec<_> = col(*k, k + 1).collect();
            r.extend(cols.clone().map(|j| Tile(*k, j)));
            r.extend(cols.clone().flat_map(|j| col(j, k + 1)));
            (r, cols.clone().flat_map(|j| col(j, k + 1)).collect())
        }
        Op::Record(_) | Op::Wait(_) => (Vec::new(), Vec::new()),
    }
}

/// The race and coverage checker's state.
struct Checker {
    t: usize,
    clocks: [Clock; 4],
    events: Vec<Option<Clock>>,
    tiles: Vec<Cell>,
    piv: Vec<Cell>,
    host: Vec<Cell>,
    /// Whether block j went home.
    home: Vec<bool>,
}

impl Checker {
    fn cell(&mut self, p: &Place) -> Result<&mut Cell, String> {
        let t = self.t;
        let c = match *p {
            Place::Tile(i, j) if i < t && j < t => self.tiles.get_mut(i + j * t),
            Place::Piv(k) => self.piv.get_mut(k),
            Place::Host(j) => self.host.get_mut(j),
            Place::Tile(..) => None,
        };
        c.ok_or_else(|| "an operation names a block outside the matrix".to_string())
    }

    fn step(&mut self, s: Stream, op: &Op) -> Result<(), String> {
        let si = s as usize;
        self.clocks[si][si] += 1;
        match *op {
            Op::Record(e) => {
                *self
                    .events
                    .get_mut(e)
                    .ok_or_else(|| format!("event {e} out of range"))? = Some(self.clocks[si]);
                return Ok(());
            }
            Op::Wait(e) => {
                let ev = self.events.get(e).copied().flatten().ok_or_else(|| {
                    format!("{s:?} waits for event {e}, which has not been recorded")
                })?;
                for (c, v) in self.clocks[si].iter_mut().zip(ev) {
                    *c = (*c).max(v);
                }
                return Ok(());
            }
            _ => {}
        }
        let now = self.clocks[si];
        let me = format!("{op} on {s:?}");
        let (reads, writes) = accesses(self.t, op);
        for p in &reads {
            let cell = self.cell(p)?;
            match &cell.write {
                Some((w, by)) if !leq(w, &now) => {
                    return Err(format!("race: {me} reads what {by} writes, unordered"))
                }
                None if !matches!(p, Place::Host(_)) => {
                    return Err(format!(
                        "{me} reads device data before it was uploaded or computed"
                    ))
                }
                _ => {}
            }
            cell.reads.push((now, me.clone()));
        }
        for p in &writes {
            if let Place::Tile(_, j) = p {
                if self.home[*j] {
                    return Err(format!("{me} writes block {j} after it went home"));
                }
            }
            let cell = self.cell(p)?;
            if let Some((w, by)) = &cell.write {
                if !leq(w, &now) {
                    return Err(format!(
                        "race: {me} and {by} write the same data, unordered"
                    ));
                }
            }
            if let Some((_, by)) = cell.reads.iter().find(|(r, _)| !leq(r, &now)) {
                return Err(format!("race: {me} writes what {by} reads, unordered"));
            }
            cell.write = Some((now, me.clone()));
            cell.reads.clear();
        }
        if let Op::Download(j) = op {
            if std::mem::replace(&mut self.home[*j], true) {
                return Err(format!("block {j} goes home twice"));
            }
        }
        Ok(())
    }
}

/// A small deterministic generator (xorshift), so an interleaving can be
/// named by its seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// Runs `plan` with `run` called for each working operation, streams
/// interleaved by `seed` (`None`: issue order), checking every access.
/// Returns the first race, coverage gap or error of `run`.
pub fn execute(
    plan: &Plan,
    seed: Option<u64>,
    mut run: impl FnMut(Stream, &Op) -> Result<(), String>,
) -> Result<(), String> {
    super::plan::check_events(plan)?;
    let t = plan.t;
    let mut ck = Checker {
        t,
        clocks: [[0; 4]; 4],
        events: vec![None; plan.events],
        tiles: vec![Cell::default(); t * t],
        piv: vec![Cell::default(); t],
        host: vec![Cell::default(); t],
        home: vec![false; t],
    };
    // Each stream's operations, in issue order.
    let mut queues: Vec<std::collections::VecDeque<&Op>> = STREAMS
        .iter()
        .map(|&s| {
            plan.ops
                .iter()
                .filter(|(x, _)| *x == s)
                .map(|(_, op)| op)
                .collect()
        })
        .collect();
    let mut rng = seed.map(|s| Rng(s.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1));
    let mut order = plan.ops.iter();
    loop {
        let next = match rng.as_mut() {
            None => match order.next() {
                Some((s, _)) => *s,
                None => break,
            },
            Some(rng) => {
                // A stream whose head can run now: anything but a wait for
                // an event not yet recorded.
                let ready: Vec<Stream> = STREAMS
                    .iter()
                    .copied()
                    .filter(|&s| match queues[s as usize].front() {
                        Some(Op::Wait(e)) => ck.events[*e].is_some(),
                        Some(_) => true,
                        None => false,
                    })
                    .collect();
                if ready.is_empty() {
                    if queues.iter().any(|q| !q.is_empty()) {
                        return Err("the plan deadlocks: every stream waits".into());
                    }
                    break;
                }
                ready[rng.below(ready.len())]
            }
        };
        let op = queues[next as usize]
            .pop_front()
            .expect("a queued operation");
        ck.step(next, op)?;
        if op.is_work() {
            run(next, op).map_err(|e| format!("{op}: {e}"))?;
        }
    }
    if let Some(j) = ck.home.iter().position(|h| !h) {
        return Err(format!("block {j} never goes home"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::plan::plan;
    use super::*;

    #[test]
    fn the_plans_are_race_free_and_complete() {
        for t in 0..9 {
            for (lookahead, arrival) in [(false, 1), (true, 1), (true, 2), (true, 3), (true, 5)] {
                let p = super::super::plan::plan_with(t, lookahead, arrival);
                execute(&p, None, |_, _| Ok(()))
                    .unwrap_or_else(|e| panic!("t {t} la {lookahead} arrival {arrival}: {e}"));
                for seed in 0..20 {
                    execute(&p, Some(seed), |_, _| Ok(())).unwrap_or_else(|e| {
                        panic!("t {t} la {lookahead} arrival {arrival} seed {seed}: {e}")
                    });
                }
            }
        }
    }

    #[test]
    fn a_missing_wait_is_a_race() {
        // Drop each wait in turn from a look-ahead plan: every one of them
        // is needed, and the checker names the conflict.
        let p = plan(5, true);
        let waits: Vec<usize> = (0..p.ops.len())
            .filter(|&i| matches!(p.ops[i].1, Op::Wait(_)))
            .collect();
        assert!(waits.len() > 8);
        for &w in &waits {
            let mut q = p.clone();
            q.ops.remove(w);
            let e = execute(&q, None, |_, _| Ok(()))
                .expect_err(&format!("without op {w} ({})", p.ops[w].1));
            assert!(
                e.contains("race") || e.contains("before it was uploaded"),
                "{e}"
            );
        }
    }

    #[test]
    fn late_writes_and_double_downloads_are_caught() {
        let mut p = plan(3, false);
        // A write to block 2 after it went home.
        p.ops.push((Stream::Update, Op::Swap { k: 2, cols: 2..3 }));
        let e = execute(&p, None, |_, _| Ok(())).unwrap_err();
        assert!(e.contains("after it went home"), "{e}");
        let mut p = plan(3, false);
        p.ops.push((Stream::CopyOut, Op::Download(1)));
        let e = execute(&p, None, |_, _| Ok(())).unwrap_err();
        assert!(e.contains("twice"), "{e}");
        let mut p = plan(3, true);
        p.ops.retain(|(_, op)| *op != Op::Download(2));
        let e = execute(&p, None, |_, _| Ok(())).unwrap_err();
        assert!(e.contains("never goes home"), "{e}");
    }

    #[test]
    fn waits_before_records_are_refused() {
        let mut p = plan(3, true);
        let first_wait = p
            .ops
            .iter()
            .position(|(_, op)| matches!(op, Op::Wait(_)))
            .unwrap();
        let op = p.ops.remove(first_wait);
        p.ops.insert(0, op);
        let e = execute(&p, None, |_, _| Ok(())).unwrap_err();
        assert!(e.contains("before its record"), "{e}");
    }
}
