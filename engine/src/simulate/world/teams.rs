//! Tasks run by several workers at once: CPU teams of one runtime
//! (`crate::team`'s protocol, its board's steps played in virtual time) and
//! rendezvous of tasks across ranks ([`crate::Rendezvous`]).
//!
//! Invariants: the board (`SimRt::board`, one NUMA node) is the real one, so
//! one team recruits at a time per runtime; a recruiting leader and each
//! member are busy (`SimRt::busy`) from the moment they join until the
//! team's task ends or is abandoned (`SimRt::release_members`); a worker's
//! member entry names its leader. What differs from real workers: nobody
//! waits on a thread; the leader enlists every idle CPU worker when it
//! posts, the others join as they go idle (`poll`), and whoever completes
//! the team starts its task on the leader. A rendezvous ends all its
//! members at one time, scheduled once, when its last member has started.

use super::events::Kind;
use super::workers::RtView;
use super::Simulation;
use crate::sched::{ReadyTask, WorkerQueue};
use crate::team::{Joined, Post};
use crate::util::lock;

/// A started member of a rendezvous: (runtime slot, worker, start ns,
/// modelled seconds).
pub(super) type Member = (usize, usize, u64, f64);

impl RtView<'_> {
    /// Worker `w` pops team task `task` and leads its team of `size`: it
    /// posts the job and enlists every idle CPU worker now, and the others
    /// join as they finish (`poll`); the task starts when the team is
    /// complete. If another team recruits, `w` hands its task back and
    /// joins that one ([`crate::team::Board::post`]).
    pub(super) fn recruit(&self, w: usize, task: ReadyTask, size: usize, q: &mut dyn WorkerQueue) {
        let give_back = |task| {
            let pushed = q.push(task);
            self.shared.wake(pushed);
        };
        match self
            .sim
            .board
            .post(task, size, w, self.shared.cpu_workers(), give_back)
        {
            // The board holds the task: the member that completes the
            // team starts it.
            Post::Recruiting(..) => {}
            Post::Helping(joined) => {
                if let Some(joined) = joined {
                    self.enlist(w, joined, None);
                }
                return;
            }
        }
        for m in 0..self.shared.cpu_workers() {
            if m != w && !self.sim.busy(m) {
                if let Some(joined) = self.sim.board.try_join(m) {
                    if joined.completes() {
                        self.enlist(m, joined, Some(q));
                        return;
                    }
                    self.enlist(m, joined, None);
                }
            }
        }
    }

    /// CPU worker `m` joins the recruiting team, if there is one; the team
    /// starts when `m` completes it. Returns whether `m` joined.
    pub(super) fn try_join(&self, m: usize) -> bool {
        match self.sim.board.try_join(m) {
            Some(joined) => {
                self.enlist(m, joined, None);
                true
            }
            None => false,
        }
    }

    /// Worker `m` joined: it is busy until the team's task ends; if it
    /// completed the team, the leader starts the task (with its queue
    /// `leader_queue` when the caller holds it out).
    fn enlist(&self, m: usize, joined: Joined, leader_queue: Option<&mut dyn WorkerQueue>) {
        let job = &joined.job;
        let leader = job.leader();
        lock(&self.sim.member_of)[m] = Some(leader);
        if !joined.completes() {
            return;
        }
        match leader_queue {
            Some(q) => self.start_task(leader, job.task(), q, job.members()),
            None => {
                let mut q = self.sim.take_queue(leader);
                self.start_task(leader, job.task(), &mut *q, job.members());
                self.sim.put_queue(leader, q);
            }
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
