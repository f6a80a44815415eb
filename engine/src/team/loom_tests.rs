//! Model-checks the team board's waits and wake-ups with loom
//! (`README.md` beside this file): a leader posts, a member joins from the
//! sleep protocol's idle path, the leader waits for the team, runs one
//! closure on it and releases it; and two workers pop team tasks at once.
//! A lost wake-up leaves a thread parked forever, and a worker waiting for
//! a team while it holds another deadlocks: loom reports either. Run:
//! `RUSTFLAGS="--cfg loom" cargo test -p tessera-engine --lib --release team::loom`.

use std::sync::atomic::AtomicUsize as StdUsize;

use super::{Board, Joined, Post};
use crate::sched::ReadyTask;
use crate::sleep::{Pop, Sleep};
use crate::sync::{Arc, AtomicUsize, Ordering};
use crate::task::{NodeParts, Once, TaskNode};
use crate::Codelet;

/// A team task (no data, no body: the model runs the protocol, not a
/// body).
fn team_task() -> ReadyTask {
    let cl: Codelet = Codelet::new("team");
    let node = TaskNode::new(
        1,
        NodeParts {
            codelet: std::sync::Arc::clone(&cl.info),
            params: Box::new(()),
            label: None,
            priority: 0,
            flops: 0.0,
            accesses: Vec::new(),
            lens: Box::default(),
            once: Once::default(),
            cpu_only: false,
            ordered: false,
            node_hint: None,
            team: Some(super::TeamSize::exactly(2)),
            rendezvous: None,
        },
    );
    ReadyTask(std::sync::Arc::new(node))
}

/// An idle CPU worker's source (`crate::worker::Source`, the queue left
/// out): the board first.
struct BoardSource {
    board: Arc<Board>,
    worker: usize,
}

impl Pop for BoardSource {
    type Item = Joined;
    fn pop(&mut self) -> Option<Joined> {
        self.board.try_join(self.worker)
    }
}

/// Bounded preemptions (loom's recommended practice, as in
/// `crate::sleep`'s model): bugs of this kind show up within two or three.
fn check(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(3);
    builder.check(f);
}

/// L2–L5 against M1–M3: worker 1 is idle (it may have parked) when worker
/// 0 posts a team of two and wakes it (L3's `notify_worker`); the member
/// must join, the leader must see the team complete, the member must run
/// the leader's closure once, and both must get past the release.
#[test]
fn post_join_run_release() {
    check(|| {
        let sleep = Arc::new(Sleep::new(2));
        let board = Arc::new(Board::new(Vec::new()));
        let runs = Arc::new(AtomicUsize::new(0));
        let member = {
            let (sleep, board, runs) = (sleep.clone(), board.clone(), runs.clone());
            loom::thread::spawn(move || {
                let mut source = BoardSource { board, worker: 1 };
                let joined = sleep.idle(1, &mut source).expect("the member joins");
                assert_eq!(joined.rank, 1);
                assert!(joined.completes());
                joined.serve(|_, rank, _| {
                    runs.fetch_add(10 * rank, Ordering::SeqCst);
                });
            })
        };
        let Post::Recruiting(job, _task) = board.post(team_task(), 2, 0, 2, |_| {
            unreachable!("nobody else recruits")
        }) else {
            panic!("the board was empty");
        };
        sleep.notify_worker(1);
        assert!(board.wait_complete(&job, || false), "the team completes");
        let rank0 = job
            .run(&|m: &super::Member<'_>| {
                runs.fetch_add(1, Ordering::SeqCst);
                m.rank()
            })
            .unwrap();
        assert_eq!(rank0, 0);
        job.release();
        member.join().unwrap();
        assert!(!board.is_recruiting(), "the member took the job off");
        // Each rank ran the closure once (1 + 1), and the member checked
        // out after recording (10).
        assert_eq!(runs.load(Ordering::SeqCst), 12);
    });
}

/// L2's other branch: workers 0 and 1 pop a team task each at once. One
/// posts; the other gives its task back and joins that team (it never
/// waits for a team while leading another), and the team completes.
#[test]
fn two_leaders_one_team() {
    check(|| {
        let board = Arc::new(Board::new(Vec::new()));
        let given_back = std::sync::Arc::new(StdUsize::new(0));
        let worker = |w: usize| {
            let (board, given_back) = (board.clone(), given_back.clone());
            move || match board.post(team_task(), 2, w, 2, |_| {
                given_back.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }) {
                Post::Recruiting(job, _task) => {
                    assert!(board.wait_complete(&job, || false));
                    job.release();
                }
                Post::Helping(joined) => {
                    let joined = joined.expect("the other team waits for this worker");
                    assert!(joined.completes());
                    joined.serve(|_, _, _| {});
                }
            }
        };
        let other = loom::thread::spawn(worker(1));
        worker(0)();
        other.join().unwrap();
        assert_eq!(given_back.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert!(!board.is_recruiting());
    });
}
