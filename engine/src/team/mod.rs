//! Team tasks: a task run by several CPU workers at once (StarPU's parallel
//! tasks on combined workers), its body fanning work out to every member.
//!
//! A codelet (or one task) declares a [`TeamSize`]: how many CPU workers it
//! can use. When a worker pops such a task it becomes the team's *leader*:
//! it recruits idle CPU workers until the team has the size the policy chose
//! (`ws`/`prio`: the largest the runtime allows; `dmda`: the size whose
//! predicted finish is earliest), then runs the body once. The body reaches
//! the team through [`TaskContext::team`](crate::TaskContext::team) and runs
//! closures on every member with [`Team::run`]; each member sees its
//! [`Member::rank`], the team's size, a [`Member::barrier`] and a
//! [`Member::all_reduce`]. Members write disjoint parts of one buffer through
//! a [`TeamBuf`] ([`Member::part_mut`]). Recruitment, and why it can neither
//! deadlock nor lose a wake-up: `README.md` beside this file.
//!
//! ```
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use tessera_engine::team::TeamSize;
//! use tessera_engine::{Codelet, Config, Runtime};
//!
//! let rt = Runtime::new(Config::with_workers(2)).unwrap();
//! let sum = rt.register(vec![0u64; 2]);
//! let fill = Codelet::new("fill").team(TeamSize::up_to(2)).cpu(|ctx, _, v: &mut Vec<u64>| {
//!     // One slot per rank: the members write disjoint slots.
//!     let slots: Vec<AtomicUsize> = v.iter().map(|_| AtomicUsize::new(0)).collect();
//!     let size = ctx.team().run(|m| {
//!         slots[m.rank()].store(m.rank() + 1, Ordering::Relaxed);
//!         m.barrier(); // every slot is written past here
//!         m.size()
//!     })?;
//!     for (x, s) in v.iter_mut().zip(&slots) {
//!         *x = s.load(Ordering::Relaxed) as u64;
//!     }
//!     assert_eq!(size, 2);
//!     Ok(())
//! });
//! rt.task(&fill, sum.rw()).submit().unwrap();
//! rt.wait_all().unwrap();
//! assert_eq!(rt.unregister(sum).unwrap(), vec![1, 2]);
//! ```

#[cfg(all(test, loom))]
mod loom_tests;
mod parts;
pub(crate) mod recruit;
mod sync;

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};

use parts::Held;
pub use parts::{ColsMut, Part, PartError, PartMut, TeamBuf};
pub(crate) use recruit::{Board, Joined, Post, TeamJob};
use sync::TeamAborted;
pub(crate) use sync::TeamSync;

use crate::error::BodyError;
use crate::util::panic_message;

/// How many CPU workers a team task can use: at least `min`, at most `max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TeamSize {
    min: usize,
    max: usize,
}

impl TeamSize {
    /// Exactly `k` members (`k >= 1`).
    ///
    /// # Panics
    /// If `k` is 0.
    pub fn exactly(k: usize) -> TeamSize {
        TeamSize::between(k, k)
    }

    /// Any team of 1 to `k` members (`k >= 1`).
    ///
    /// # Panics
    /// If `k` is 0.
    pub fn up_to(k: usize) -> TeamSize {
        TeamSize::between(1, k)
    }

    /// Between `min` and `max` members.
    ///
    /// # Panics
    /// If `min` is 0 or `min > max`.
    pub fn between(min: usize, max: usize) -> TeamSize {
        assert!(
            min >= 1 && min <= max,
            "a team size needs 1 <= min <= max, got {min}..={max}"
        );
        TeamSize { min, max }
    }

    /// The fewest members.
    pub fn min(&self) -> usize {
        self.min
    }

    /// The most members.
    pub fn max(&self) -> usize {
        self.max
    }

    /// The size a policy without a model picks on a runtime with `cpus` CPU
    /// workers: the largest allowed (`None` when even `min` does not fit).
    pub(crate) fn largest_within(&self, cpus: usize) -> Option<usize> {
        (self.min <= cpus).then(|| self.max.min(cpus))
    }
}

/// The serial fraction (Amdahl) assumed for a team task that nothing
/// measured: a team of `s` then runs `1 / (f + (1 − f) / s)` times as fast
/// as one worker. A guess, used by `dmda` before any measurement and by
/// simulated platforms that give no `team_serial`; `tessera calibrate`
/// measures it.
pub const DEFAULT_TEAM_SERIAL: f64 = 0.1;

/// Amdahl's speedup of a team of `size` with serial fraction `serial`.
pub fn speedup(size: usize, serial: f64) -> f64 {
    let s = size.max(1) as f64;
    1.0 / (serial + (1.0 - serial) / s)
}

pub(crate) fn default_speedup(size: usize) -> f64 {
    speedup(size, DEFAULT_TEAM_SERIAL)
}

/// The architecture name a team of `size` workers of architecture `arch`
/// is modelled under (perf models, platform rates): `arch` itself for one
/// member, `ARCHxSIZE` (`cpux4`) for more.
pub fn team_arch(arch: &str, size: usize) -> std::borrow::Cow<'_, str> {
    if size <= 1 {
        std::borrow::Cow::Borrowed(arch)
    } else {
        std::borrow::Cow::Owned(format!("{arch}x{size}"))
    }
}

/// The team running a task, as its body sees it. A task that is not a team
/// task (or got a team of one) has a team of one: [`Team::run`] then calls
/// the closure once, on this thread, so one body serves every size.
pub struct Team<'a> {
    inner: TeamRef<'a>,
}

enum TeamRef<'a> {
    Solo,
    Engine(&'a TeamJob),
}

thread_local! {
    /// Set while this thread runs a member's closure: a nested `run` is refused.
    static IN_RUN: Cell<bool> = const { Cell::new(false) };
}

impl<'a> Team<'a> {
    pub(crate) fn solo() -> Team<'static> {
        Team {
            inner: TeamRef::Solo,
        }
    }

    pub(crate) fn engine(job: &'a TeamJob) -> Team<'a> {
        Team {
            inner: TeamRef::Engine(job),
        }
    }

    /// Members in the team (the leader included).
    pub fn size(&self) -> usize {
        match &self.inner {
            TeamRef::Solo => 1,
            TeamRef::Engine(job) => job.sync.size(),
        }
    }

    /// Run `f` on every member at once (rank 0 on this thread) and return
    /// rank 0's result once every member has returned.
    ///
    /// # Errors
    /// A member that panicked (the first one's message); every other member
    /// is released from the barrier or reduction it waits in.
    ///
    /// # Panics
    /// When called from inside a member's closure (teams do not nest).
    ///
    /// ```
    /// use tessera_engine::team::TeamSize;
    /// use tessera_engine::{Codelet, Config, Runtime};
    ///
    /// let rt = Runtime::new(Config::with_workers(2)).unwrap();
    /// let h = rt.register((0usize, 0usize));
    /// let cl = Codelet::new("size").team(TeamSize::up_to(2)).cpu(|ctx, _, out: &mut (usize, usize)| {
    ///     // Every member runs the closure; rank 0's result comes back.
    ///     *out = ctx.team().run(|m| (m.rank(), m.size()))?;
    ///     Ok(())
    /// });
    /// rt.task(&cl, h.rw()).submit().unwrap();
    /// rt.wait_all().unwrap();
    /// let (rank, size) = rt.unregister(h).unwrap();
    /// assert_eq!(rank, 0);
    /// assert!((1..=2).contains(&size));
    /// ```
    pub fn run<R>(&self, f: impl Fn(&Member<'_>) -> R + Sync) -> Result<R, BodyError> {
        assert!(
            !IN_RUN.with(Cell::get),
            "Team::run called from inside a member's closure (teams do not nest)"
        );
        match &self.inner {
            TeamRef::Solo => {
                let sync = TeamSync::new(1);
                run_member(&sync, 0, &f).map_err(Into::into)
            }
            TeamRef::Engine(job) => job.run(&f),
        }
    }
}

/// One member of a running team, inside [`Team::run`]'s closure.
pub struct Member<'a> {
    rank: usize,
    sync: &'a TeamSync,
    /// Reductions done so far by this member (which slot set is next).
    reductions: Cell<usize>,
}

impl<'a> Member<'a> {
    pub(crate) fn new(rank: usize, sync: &'a TeamSync) -> Member<'a> {
        Member {
            rank,
            sync,
            reductions: Cell::new(0),
        }
    }

    /// This member's rank, `0..size` (0: the leader).
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Members in the team.
    pub fn size(&self) -> usize {
        self.sync.size()
    }

    /// Wait until every member has reached this barrier (as many times as
    /// this one). Returns at once in a team of one. What a member wrote
    /// before it is visible to every member after it.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use tessera_engine::team::run_threads;
    ///
    /// let arrived = AtomicUsize::new(0);
    /// let seen = run_threads(4, |m| {
    ///     arrived.fetch_add(1, Ordering::Relaxed);
    ///     m.barrier(); // no member passes before all four arrived
    ///     arrived.load(Ordering::Relaxed)
    /// })
    /// .unwrap();
    /// assert_eq!(seen, 4);
    /// ```
    pub fn barrier(&self) {
        self.sync.barrier();
    }

    /// Every member's `value` combined in rank order
    /// (`combine(combine(v0, v1), v2)…`), returned to every member: with
    /// the same `combine` everywhere, every member gets the same result,
    /// and it is the one a sequential loop over the ranks would give. Ends
    /// with a barrier's synchronisation.
    pub fn all_reduce<T: Clone + Send + 'static>(
        &self,
        value: T,
        combine: impl Fn(T, T) -> T,
    ) -> T {
        let r = self.reductions.get();
        self.reductions.set(r + 1);
        self.sync.all_reduce(r, self.rank, value, combine)
    }

    /// Rows `0..n` split into `size` contiguous ranges in rank order, each a
    /// multiple of `align` long except the last: this member's range. Rank
    /// order keeps a scan over the ranges in the order a sequential scan
    /// takes them (first-maximum searches give the same answer).
    ///
    /// ```
    /// use std::sync::Mutex;
    /// use tessera_engine::team::run_threads;
    ///
    /// // 10 rows among 3 members, in pieces of multiples of 4 rows.
    /// let shares = Mutex::new(Vec::new());
    /// run_threads(3, |m| shares.lock().unwrap().push((m.rank(), m.share(10, 4)))).unwrap();
    /// let mut shares = shares.into_inner().unwrap();
    /// shares.sort_by_key(|s| s.0);
    /// assert_eq!(shares, [(0, 0..4), (1, 4..8), (2, 8..10)]);
    /// ```
    pub fn share(&self, n: usize, align: usize) -> std::ops::Range<usize> {
        share(n, align, self.size(), self.rank)
    }

    /// Rows `rows` × columns `cols` of `buf` for this member alone to write, until the part
    /// is dropped; it cannot outlive this member's closure. Refused while another part lent
    /// now (by any member, this one included) overlaps it: a kernel drops its parts of a
    /// phase before the barrier that ends the phase, and the next phase may then
    /// re-partition the buffer. `split_at_mut` checked at each request.
    ///
    /// # Errors
    /// [`PartError::OutOfRange`] when the rectangle is not within `buf` (or a range is
    /// reversed); [`PartError::Overlap`] naming the part, and the member holding it, that the
    /// rectangle overlaps. Empty rectangles overlap nothing.
    ///
    /// ```
    /// use tessera_engine::team::{run_threads, TeamBuf};
    ///
    /// // Each member writes its share of one slice (a buffer of one column).
    /// let mut v = vec![0usize; 10];
    /// let buf = TeamBuf::from_slice(&mut v);
    /// run_threads(3, |m| {
    ///     let mut part = m.part_mut(&buf, m.share(10, 1), 0..1).unwrap();
    ///     part.col_mut(0).fill(m.rank() + 1);
    /// })
    /// .unwrap();
    /// drop(buf);
    /// assert_eq!(v, [1, 1, 1, 1, 2, 2, 2, 3, 3, 3]);
    ///
    /// // Rows of a column-major 4 × 2 matrix; a part overlapping a lent one is refused.
    /// let mut a = vec![0.0; 8];
    /// let buf = TeamBuf::new(&mut a, 4, 2);
    /// run_threads(1, |m| {
    ///     let top = m.part_mut(&buf, 0..2, 0..2).unwrap();
    ///     let e = m.part_mut(&buf, 1..3, 1..2).err().unwrap();
    ///     assert!(e.to_string().contains("overlap rows 0..2 × columns 0..2 held by member 0"));
    ///     drop(top);
    ///     m.part_mut(&buf, 1..3, 1..2).unwrap().col_mut(1).fill(1.0);
    /// })
    /// .unwrap();
    /// drop(buf);
    /// assert_eq!(a, [0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0]);
    /// ```
    pub fn part_mut<'p, T>(
        &'p self,
        buf: &'p TeamBuf<'_, T>,
        rows: std::ops::Range<usize>,
        cols: std::ops::Range<usize>,
    ) -> Result<PartMut<'p, T>, PartError> {
        Held::take(buf, self.rank, rows, cols, true).map(|held| PartMut { held })
    }

    /// Rows `rows` × columns `cols` of `buf` for this member to read, until the part is
    /// dropped; several members may read one entry at once. Refused while a part lent now
    /// writes an entry of it (see [`Member::part_mut`]).
    ///
    /// # Errors
    /// As [`Member::part_mut`]'s.
    ///
    /// ```
    /// use tessera_engine::team::{run_threads, TeamBuf};
    ///
    /// let mut v: Vec<u32> = (0..8).collect();
    /// let buf = TeamBuf::from_slice(&mut v);
    /// // Every member reads the whole slice at once.
    /// let sum = run_threads(2, |m| m.part(&buf, 0..8, 0..1).unwrap().col(0).iter().sum::<u32>());
    /// assert_eq!(sum.unwrap(), 28);
    /// ```
    pub fn part<'p, T>(
        &'p self,
        buf: &'p TeamBuf<'_, T>,
        rows: std::ops::Range<usize>,
        cols: std::ops::Range<usize>,
    ) -> Result<Part<'p, T>, PartError> {
        Held::take(buf, self.rank, rows, cols, false).map(|held| Part { held })
    }
}

/// Range `rank` of `0..n` split into `size` contiguous, `align`-multiple
/// pieces (see [`Member::share`]).
pub fn share(n: usize, align: usize, size: usize, rank: usize) -> std::ops::Range<usize> {
    let align = align.max(1);
    let units = n.div_ceil(align);
    let (q, r) = (units / size, units % size);
    let start = rank * q + rank.min(r);
    let len = q + usize::from(rank < r);
    (start * align).min(n)..((start + len) * align).min(n)
}

/// Run a member's closure, turning a panic into the team's failure (which
/// releases the other members). Returns the closure's result, or the
/// team's first failure.
pub(crate) fn run_member<R>(
    sync: &TeamSync,
    rank: usize,
    f: &(impl Fn(&Member<'_>) -> R + Sync),
) -> Result<R, String> {
    let member = Member::new(rank, sync);
    IN_RUN.with(|c| c.set(true));
    let out = catch_unwind(AssertUnwindSafe(|| f(&member)));
    IN_RUN.with(|c| c.set(false));
    match out {
        Ok(r) if !sync.is_aborted() => Ok(r),
        Ok(_) => Err(sync.failure().unwrap_or_default()),
        Err(p) => {
            if !p.is::<TeamAborted>() {
                sync.abort(format!(
                    "team member {rank} panicked: {}",
                    panic_message(&*p)
                ));
            }
            Err(sync.failure().unwrap_or_default())
        }
    }
}

/// Run `f` on a team of `size` plain threads (this one as rank 0, the
/// others scoped threads), outside any runtime: for kernels' own tests and
/// benchmarks, and for code that wants a team without a task graph.
/// Returns rank 0's result.
///
/// # Errors
/// The first member's panic message.
pub fn run_threads<R>(size: usize, f: impl Fn(&Member<'_>) -> R + Sync) -> Result<R, String> {
    let sync = TeamSync::new(size.max(1));
    std::thread::scope(|s| {
        let others: Vec<_> = (1..sync.size())
            .map(|rank| {
                let (sync, f) = (&sync, &f);
                s.spawn(move || run_member(sync, rank, f).map(|_| ()))
            })
            .collect();
        let mine = run_member(&sync, 0, &f);
        for h in others {
            // A member's failure is recorded in `sync` (and returned below).
            let _ = h.join();
        }
        match sync.failure() {
            Some(e) => Err(e),
            None => mine,
        }
    })
}

#[cfg(test)]
mod tests {
    //! Proves the team primitives on plain threads: a barrier that would
    //! deadlock with a missing member, reductions in rank order, a member's
    //! panic releasing the others, and `share`'s ranges.
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    #[test]
    fn barrier_orders_phases() {
        for size in 1..=4 {
            let phase = AtomicUsize::new(0);
            run_threads(size, |m| {
                for round in 0..50 {
                    phase.fetch_add(1, Ordering::SeqCst);
                    m.barrier();
                    // Everyone arrived: the counter is exactly size × (round + 1).
                    assert_eq!(phase.load(Ordering::SeqCst), size * (round + 1));
                    m.barrier();
                }
            })
            .unwrap();
        }
    }

    #[test]
    fn all_reduce_combines_in_rank_order() {
        for size in 1..=4 {
            let seen = Mutex::new(Vec::new());
            run_threads(size, |m| {
                for i in 0..20 {
                    let s = m.all_reduce(format!("{}", m.rank() + i), |a, b| a + "," + &b);
                    let want: Vec<String> = (0..size).map(|r| format!("{}", r + i)).collect();
                    assert_eq!(s, want.join(","));
                }
                seen.lock().unwrap().push(m.rank());
            })
            .unwrap();
            let mut seen = seen.into_inner().unwrap();
            seen.sort_unstable();
            assert_eq!(seen, (0..size).collect::<Vec<_>>());
        }
    }

    #[test]
    fn a_panicking_member_fails_the_team_and_releases_the_others() {
        for bad in 0..3 {
            let e = run_threads(3, |m| {
                if m.rank() == bad {
                    panic!("boom in {bad}");
                }
                // Would wait forever without the release.
                m.barrier();
                m.all_reduce(1, |a, b| a + b)
            })
            .unwrap_err();
            assert!(
                e.contains(&format!("team member {bad} panicked: boom in {bad}")),
                "{e}"
            );
        }
    }

    #[test]
    fn share_covers_in_order_and_aligned() {
        for n in [0, 1, 7, 8, 9, 100, 1000] {
            for size in 1..=5 {
                for align in [1, 8] {
                    let mut next = 0;
                    for r in 0..size {
                        let s = share(n, align, size, r);
                        assert_eq!(s.start, next, "n {n} size {size} align {align}");
                        assert!(s.end == n || (s.end - s.start).is_multiple_of(align));
                        next = s.end;
                    }
                    assert_eq!(next, n);
                }
            }
        }
    }

    #[test]
    fn solo_team_runs_inline() {
        let t = Team::solo();
        assert_eq!(t.size(), 1);
        assert_eq!(t.run(|m| (m.rank(), m.size())).unwrap(), (0, 1));
    }
}
