//! Tasks run by several workers at once: CPU teams of one runtime (the
//! recruiting board, `crate::team`'s protocol played in virtual time) and
//! rendezvous of tasks across ranks ([`crate::Rendezvous`]).
//!
//! Invariants: one team recruits at a time per runtime (`SimRt::recruit`,
//! as on the real board); a recruiting leader and each member are busy
//! (`SimRt::busy`) from the moment they join until the team's task ends or
//! is abandoned (`SimRt::release_members`); a worker's member entry names
//! its leader. A rendezvous ends all its members at one time, scheduled
//! once, when its last member has started.

use super::events::Kind;
use super::workers::RtView;
use super::Simulation;
use crate::sched::{ReadyTask, WorkerQueue};
use crate::util::lock;

/// A started member of a rendezvous: (runtime slot, worker, start ns,
/// modelled seconds).
pub(super) type Member = (usize, usize, u64, f64);

/// A team being recruited: its leader (busy), its task, the size it needs
/// and the members so far.
pub(super) struct Recruit {
    leader: usize,
    task: ReadyTask,
    size: usize,
    members: Vec<usize>,
}

impl Recruit {
    /// Whether worker `w` leads this team.
    pub(super) fn led_by(&self, w: usize) -> bool {
        self.leader == w
    }
}

impl RtView<'_> {
    /// Worker `w` pops team task `task` and leads its team of `size`: it
    /// recruits every idle CPU worker now, and the others as they finish
    /// (`poll`); the task starts when the team is complete. One team
    /// recruits at a time, as on the real board: if one does, `w` hands its
    /// task back and joins that one.
    pub(super) fn recruit(&self, w: usize, task: ReadyTask, size: usize, q: &mut dyn WorkerQueue) {
        {
            let mut r = lock(&self.sim.recruit);
            if r.is_some() {
                drop(r);
                let pushed = q.push(task);
                self.shared.wake(pushed);
                self.try_join(w);
                return;
            }
            *r = Some(Recruit {
                leader: w,
                task,
                size,
                members: Vec::new(),
            });
        }
        for m in 0..self.shared.cpu_workers {
            if m != w && !self.sim.busy(m) {
                if let Some(done) = self.join(m) {
                    self.start_task(w, done.task, q, done.members);
                    return;
                }
            }
        }
    }

    /// CPU worker `m` joins the recruiting team, if there is one; the team
    /// starts when `m` completes it. Returns whether `m` joined.
    pub(super) fn try_join(&self, m: usize) -> bool {
        if lock(&self.sim.recruit).is_none() {
            return false;
        }
        if let Some(done) = self.join(m) {
            let mut q = self.sim.take_queue(done.leader);
            self.start_task(done.leader, done.task, &mut *q, done.members);
            self.sim.put_queue(done.leader, q);
        }
        true
    }

    /// Add `m` to the recruiting team (there is one); the team, taken off
    /// the board, when `m` completes it.
    fn join(&self, m: usize) -> Option<Recruit> {
        let mut r = lock(&self.sim.recruit);
        let rec = r.as_mut()?;
        rec.members.push(m);
        lock(&self.sim.member_of)[m] = Some(rec.leader);
        if rec.members.len() + 1 == rec.size {
            r.take()
        } else {
            None
        }
    }
}

impl Simulation {
    /// Member `(slot, w)` of rendezvous `r` started at `start` for `secs`: it
    /// keeps its worker until the last member starts; then all end together
    /// (see [`crate::Rendezvous`]).
    pub(super) fn meet(&self, r: &crate::Rendezvous, slot: usize, w: usize, start: u64, secs: f64) {
        let met = {
            let mut m = lock(&self.meetings);
            let here = m.entry(r.key).or_default();
            here.push((slot, w, start, secs));
            if here.len() < r.members {
                return;
            }
            m.remove(&r.key).expect("present")
        };
        // Each round: the latency, and this member's bytes to every other one
        // through its NIC.
        let others = r.members.saturating_sub(1) as u64;
        let exchange = if r.members > 1 {
            r.rounds as f64 * self.platform.network.nic.seconds(others * r.bytes)
        } else {
            0.0
        };
        let first = met.iter().map(|m| m.2).max().unwrap_or(0);
        let longest = met.iter().map(|m| m.3).fold(0.0f64, f64::max);
        let end = self.after(first, longest + exchange);
        for (slot, worker, _, _) in met {
            self.schedule(end, Kind::TaskEnd { slot, worker });
        }
    }
}
