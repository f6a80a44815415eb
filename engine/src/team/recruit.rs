//! Recruiting a team among a runtime's CPU workers (the board), and the
//! running team's dispatch of closures to its members (the job).
//!
//! One team recruits at a time. The leader posts its job on the board
//! ([`Board::post`]) and wakes the parked CPU workers; every CPU worker looks
//! at the board before it pops a task (one relaxed load while nobody
//! recruits) and joins ([`Board::try_join`]); the board is cleared when the
//! team is complete, and the leader, which waited for that
//! ([`Board::wait_complete`]), runs the body. A worker that pops a team
//! task while another team recruits gives it back and joins that team.
//! These steps are the protocol's only copy: the real workers
//! (`crate::worker`) and the simulator (`crate::simulate::world::teams`)
//! both call them, and differ only in how they wait (threads, or virtual
//! time). Why this cannot deadlock or lose a wake-up: `README.md` beside
//! this file.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use crossbeam_utils::CachePadded;

use super::sync::{wait_until, wake_all, TeamSync};
use super::{run_member, Member};
use crate::error::BodyError;
use crate::sched::ReadyTask;
use crate::sync::{lock, AtomicBool, AtomicUsize, Condvar, Mutex, Ordering};
use crate::task::TaskNode;

/// A lifetime-erased reference to the closure members run (see
/// [`TeamJob::run`] for why it stays valid while they use it).
#[derive(Clone, Copy)]
struct WorkRef(*const (dyn Fn(&Member<'_>) + Sync + 'static));

// SAFETY: the pointee is `Sync` (shared references to it may cross
// threads), and `TeamJob::run` keeps it alive while any member holds it.
unsafe impl Send for WorkRef {}

/// One team: its task, its members, their synchronisation, and the closure
/// they run now.
pub(crate) struct TeamJob {
    /// The task the team runs.
    pub(crate) node: Arc<TaskNode>,
    /// Barrier and reductions, sized for the whole team.
    pub(crate) sync: TeamSync,
    /// The worker that posted the job (rank 0).
    leader: usize,
    /// The worker of each rank, in joining order (the leader is rank 0).
    /// Complete when its length is the team's size.
    workers: Mutex<Vec<usize>>,
    /// Members that joined so far, the leader not counted (a copy of
    /// `workers.len() - 1` the leader can wait on without the lock).
    joined: AtomicUsize,
    /// Only workers of this NUMA node may join (set when the node has
    /// enough CPU workers for the whole team).
    numa: Option<usize>,
    /// The closure of the current `run`, and its generation: members run
    /// each generation once.
    work: Mutex<Option<WorkRef>>,
    work_gen: AtomicUsize,
    /// Members done with the current generation.
    work_done: AtomicUsize,
    /// The body has returned: members go back to their queues.
    released: AtomicBool,
    /// Members gone back (after recording the task on their timelines).
    checked_out: AtomicUsize,
    park: (Mutex<()>, Condvar),
    sleepers: AtomicUsize,
    /// When the body started and ended (the recorder's clock), for the
    /// members' trace events: written by the leader before `release`, read
    /// by each member after it (`Joined::serve`); (0, 0) when not traced.
    span: Mutex<(u64, u64)>,
}

impl TeamJob {
    /// A job for `node` with `size` members, led by worker `leader`.
    fn new(node: Arc<TaskNode>, size: usize, leader: usize, numa: Option<usize>) -> TeamJob {
        TeamJob {
            node,
            sync: TeamSync::new(size),
            leader,
            workers: Mutex::new(vec![leader]),
            joined: AtomicUsize::new(0),
            numa,
            work: Mutex::new(None),
            work_gen: AtomicUsize::new(0),
            work_done: AtomicUsize::new(0),
            released: AtomicBool::new(false),
            checked_out: AtomicUsize::new(0),
            park: (Mutex::new(()), Condvar::new()),
            sleepers: AtomicUsize::new(0),
            span: Mutex::new((0, 0)),
        }
    }

    /// Members wanted besides the leader.
    fn wanted(&self) -> usize {
        self.sync.size() - 1
    }

    /// Worker `worker` joins: its rank, or `None` when the team is full.
    fn join(&self, worker: usize) -> Option<usize> {
        let mut w = lock(&self.workers);
        if w.len() >= self.sync.size() {
            return None;
        }
        w.push(worker);
        let rank = w.len() - 1;
        self.joined.store(rank, Ordering::SeqCst);
        drop(w);
        wake_all(&self.park, &self.sleepers);
        Some(rank)
    }

    /// The worker that leads the team (rank 0).
    pub(crate) fn leader(&self) -> usize {
        self.leader
    }

    /// The task the team runs, as its leader starts it.
    pub(crate) fn task(&self) -> ReadyTask {
        ReadyTask(Arc::clone(&self.node))
    }

    /// The workers of ranks 1 and up (the members besides the leader), in
    /// rank order.
    pub(crate) fn members(&self) -> Vec<usize> {
        lock(&self.workers)[1..].to_vec()
    }

    /// Whether every member has joined.
    pub(crate) fn is_complete(&self) -> bool {
        self.joined.load(Ordering::SeqCst) == self.wanted()
    }

    /// The leader, after the body: when it started and ended (recorder's
    /// clock), for the members' trace events. Before `release`.
    pub(crate) fn set_span(&self, start: u64, end: u64) {
        *lock(&self.span) = (start, end);
    }

    /// Run `f` on every member (rank 0 here, on the leader's thread) and
    /// return rank 0's result when all have returned.
    pub(crate) fn run<R>(&self, f: &(impl Fn(&Member<'_>) -> R + Sync)) -> Result<R, BodyError> {
        let others = self.wanted();
        if others > 0 {
            let g = |m: &Member<'_>| {
                let _ = f(m);
            };
            let g: &(dyn Fn(&Member<'_>) + Sync) = &g;
            // SAFETY: only the lifetime is erased. Members call the closure
            // between seeing this generation and counting themselves in
            // `work_done`; this function waits for all of them to count
            // (member panics are caught before they count) before it
            // returns and `g` goes out of scope.
            let ptr: *const (dyn Fn(&Member<'_>) + Sync + 'static) =
                unsafe { std::mem::transmute(g as *const (dyn Fn(&Member<'_>) + Sync)) };
            *lock(&self.work) = Some(WorkRef(ptr));
            self.work_done.store(0, Ordering::SeqCst);
            self.work_gen.fetch_add(1, Ordering::SeqCst);
            wake_all(&self.park, &self.sleepers);
        }
        let mine = run_member(&self.sync, 0, f);
        if others > 0 {
            wait_until(
                || self.work_done.load(Ordering::SeqCst) == others,
                &self.park,
                &self.sleepers,
            );
            *lock(&self.work) = None;
        }
        // A member may fail after rank 0 returned: ask once all are done.
        match (mine, self.sync.failure()) {
            (Ok(r), None) => Ok(r),
            (_, Some(e)) | (Err(e), None) => Err(BodyError::from(format!(
                "{e} (team of {})",
                self.sync.size()
            ))),
        }
    }

    /// A member of rank `rank` (M2): run every closure the leader hands
    /// out, until the body returns.
    fn serve(&self, rank: usize) {
        let mut seen = 0;
        loop {
            wait_until(
                || {
                    self.work_gen.load(Ordering::SeqCst) != seen
                        || self.released.load(Ordering::SeqCst)
                },
                &self.park,
                &self.sleepers,
            );
            let gen = self.work_gen.load(Ordering::SeqCst);
            if gen == seen {
                return; // released, no new work
            }
            seen = gen;
            let work = lock(&self.work)
                .as_ref()
                .copied()
                .expect("the work of the current generation is set until every member is done");
            // SAFETY: see `run`: the closure lives until this member counts
            // itself done below.
            let f = unsafe { &*work.0 };
            // A panic is recorded in `sync` (and reported by the leader).
            let _ = catch_unwind(AssertUnwindSafe(|| run_member(&self.sync, rank, &|m| f(m))));
            self.work_done.fetch_add(1, Ordering::SeqCst);
            wake_all(&self.park, &self.sleepers);
        }
    }

    /// The leader (L5): the body has returned: release the members, and
    /// wait until each has checked out (so the task completes after every member's trace
    /// event is recorded, and with its workers free).
    pub(crate) fn release(&self) {
        self.released.store(true, Ordering::SeqCst);
        wake_all(&self.park, &self.sleepers);
        let joined = self.joined.load(Ordering::SeqCst);
        wait_until(
            || self.checked_out.load(Ordering::SeqCst) == joined,
            &self.park,
            &self.sleepers,
        );
    }

    /// A member is done with this team (M3).
    fn check_out(&self) {
        self.checked_out.fetch_add(1, Ordering::SeqCst);
        wake_all(&self.park, &self.sleepers);
    }
}

/// A place in a team, taken on the board (M1).
pub(crate) struct Joined {
    /// The team joined.
    pub(crate) job: Arc<TeamJob>,
    /// This member's rank (1 and up: the leader is rank 0).
    pub(crate) rank: usize,
}

impl Joined {
    /// Whether this join completed the team: the team's task may start
    /// (the leader, waiting in [`Board::wait_complete`], sees it too).
    pub(crate) fn completes(&self) -> bool {
        self.rank == self.job.wanted()
    }

    /// Serve the team (M2) until its body returns, then (M3) call
    /// `record(node, rank, span)` to put the task on this worker's
    /// timeline (`span` is the leader's, (0, 0) when the task was cancelled
    /// or not traced), and check out.
    pub(crate) fn serve(self, record: impl FnOnce(&TaskNode, usize, (u64, u64))) {
        self.job.serve(self.rank);
        let span = *lock(&self.job.span);
        record(&self.job.node, self.rank, span);
        self.job.check_out();
    }
}

/// What a worker that popped a team task got from the board (L2).
pub(crate) enum Post {
    /// Its job is posted: it leads the team. It recruits (wakes the CPU
    /// workers, or enlists the idle ones), then starts the task, given back
    /// here, when the team is complete.
    Recruiting(Arc<TeamJob>, ReadyTask),
    /// Another team recruits: the task went back to the policy, and this
    /// worker joined that team, unless it was complete already (or keeps
    /// to another NUMA node).
    Helping(Option<Joined>),
}

/// Where a recruiting team waits for members (one per runtime).
///
/// Invariants, under `job`'s lock: `recruiting` is set exactly while `job`
/// holds a job; a job on the board is never complete (the member that
/// completes it takes it off in the same critical section); a job leaves the
/// board only complete, or withdrawn by its leader.
pub(crate) struct Board {
    /// A job is posted (checked by every CPU worker before each pop): on a
    /// line of its own, so that idle workers polling it do not share a line
    /// with what busy workers write at every task.
    recruiting: CachePadded<AtomicBool>,
    job: Mutex<Option<Arc<TeamJob>>>,
    /// NUMA node of each worker (empty: one node).
    numa: Vec<usize>,
}

impl Board {
    /// A board for workers on NUMA nodes `numa` (empty: one node, as the
    /// simulator models teams).
    pub(crate) fn new(numa: Vec<usize>) -> Board {
        Board {
            recruiting: CachePadded::new(AtomicBool::new(false)),
            job: Mutex::new(None),
            numa,
        }
    }

    /// Whether a team is recruiting (a hint: `try_join` decides). Relaxed
    /// is enough: a worker about to park re-checks after the sleep
    /// protocol's SeqCst fence (W2–W3), and `post` is followed by the
    /// pusher's fence (P2) before it reads who sleeps.
    #[inline]
    pub(crate) fn is_recruiting(&self) -> bool {
        self.recruiting.load(Ordering::Relaxed)
    }

    /// Whether worker `w` leads the team recruiting now.
    pub(crate) fn is_led_by(&self, w: usize) -> bool {
        lock(&self.job).as_ref().is_some_and(|j| j.leader == w)
    }

    /// NUMA node of worker `w` (0 when unknown).
    fn numa_of(&self, w: usize) -> usize {
        self.numa.get(w).copied().unwrap_or(0)
    }

    /// How many CPU workers among `cpus` (worker indexes) are on `node`.
    fn count_on(&self, node: usize, cpus: usize) -> usize {
        (0..cpus).filter(|&w| self.numa_of(w) == node).count()
    }

    /// L2: worker `leader` popped team task `task` and leads its team of
    /// `size` (> 1) among the runtime's `cpus` CPU workers, recruiting on
    /// its own NUMA node when that node has enough of them. If another team
    /// recruits (one at a time), `give_back(task)` returns the task to the
    /// policy (and wakes for it), and `leader` joins that team instead
    /// (M1), so that no worker waits for a team while it holds another.
    pub(crate) fn post(
        &self,
        task: ReadyTask,
        size: usize,
        leader: usize,
        cpus: usize,
        give_back: impl FnOnce(ReadyTask),
    ) -> Post {
        debug_assert!(size > 1, "a team of one is an ordinary task");
        let here = self.numa_of(leader);
        let numa = (self.count_on(here, cpus) >= size).then_some(here);
        let job = Arc::new(TeamJob::new(Arc::clone(&task.0), size, leader, numa));
        {
            let mut slot = lock(&self.job);
            if slot.is_none() {
                *slot = Some(Arc::clone(&job));
                self.recruiting.store(true, Ordering::SeqCst);
                return Post::Recruiting(job, task);
            }
        }
        give_back(task);
        Post::Helping(self.try_join(leader))
    }

    /// M1: worker `worker` joins the recruiting team, if any will have it.
    /// The member that completes a team clears the board.
    pub(crate) fn try_join(&self, worker: usize) -> Option<Joined> {
        if !self.is_recruiting() {
            return None;
        }
        let mut slot = lock(&self.job);
        let job = slot.as_ref()?;
        if job.numa.is_some_and(|n| n != self.numa_of(worker)) {
            return None;
        }
        let job = Arc::clone(job);
        let rank = job
            .join(worker)
            .expect("a job on the board is not complete (its last member clears it)");
        let joined = Joined { job, rank };
        if joined.completes() {
            *slot = None;
            self.recruiting.store(false, Ordering::SeqCst);
        }
        Some(joined)
    }

    /// L3, for a leader on a thread: wait until `job`'s team is complete,
    /// or `stop()` holds (the runtime shuts down). Stopped, it withdraws the
    /// job if it is still posted and releases whoever joined (they check
    /// out). Returns whether the team is complete: its task may run.
    pub(crate) fn wait_complete(&self, job: &Arc<TeamJob>, stop: impl Fn() -> bool) -> bool {
        wait_until(|| job.is_complete() || stop(), &job.park, &job.sleepers);
        if job.is_complete() {
            return true;
        }
        self.withdraw(job);
        job.release();
        false
    }

    /// The runtime shuts down (its flag, which the leaders' `stop()` reads,
    /// already stored): wake the leader waiting for the posted job's team,
    /// if any, so that it withdraws the job. Workers stop taking work at
    /// shutdown, so a team still recruiting would never fill, and its
    /// leader parked in `wait_complete` kept the runtime's drop waiting
    /// for it forever.
    pub(crate) fn shut_down(&self) {
        let job = lock(&self.job).clone();
        if let Some(job) = job {
            wake_all(&job.park, &job.sleepers);
        }
    }

    /// Take `job` off the board if it is still there (its leader gives up).
    fn withdraw(&self, job: &Arc<TeamJob>) {
        let mut slot = lock(&self.job);
        if slot.as_ref().is_some_and(|j| Arc::ptr_eq(j, job)) {
            *slot = None;
            self.recruiting.store(false, Ordering::SeqCst);
        }
    }
}
