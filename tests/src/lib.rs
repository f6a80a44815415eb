//! Shared helpers for Tessera's cross-crate tests.

pub mod dist_dag;
pub mod dist_spmv;
pub mod lazy_handles;
pub mod mpirun;
pub mod random_dag;

use std::sync::Arc;
use std::time::Duration;

use tessera_engine::dist::{local, Net};

/// Run `f(rank, net)` on `ranks` threads connected by a local transport,
/// and return each rank's result in rank order.
pub fn spmd<R: Send + 'static>(
    ranks: usize,
    f: impl Fn(usize, Arc<Net>) -> R + Send + Sync + 'static,
) -> Vec<R> {
    let f = Arc::new(f);
    let handles: Vec<_> = local::world(ranks)
        .into_iter()
        .enumerate()
        .map(|(rank, t)| {
            let f = Arc::clone(&f);
            std::thread::spawn(move || f(rank, Net::new(t)))
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

/// Run `f` on its own thread and fail the test if it does not finish within
/// `limit`, so no test can hang CI. A panic inside `f` is re-raised.
pub fn with_timeout<F: FnOnce() + Send + 'static>(limit: Duration, f: F) {
    let (tx, rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    match rx.recv_timeout(limit) {
        Ok(()) => t.join().expect("test body finished"),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            if let Err(p) = t.join() {
                std::panic::resume_unwind(p)
            }
        }
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("test did not finish within {limit:?} (deadlock or lost wake-up?)")
        }
    }
}

/// Submit a CPU-only task whose body blocks until the returned sender sends
/// (or is dropped): tasks submitted `after` it wait until the test opens it,
/// so they become ready together, or only once the test has done what it
/// must do first.
pub fn gate(
    rt: &tessera_engine::Runtime,
) -> (tessera_engine::TaskHandle, std::sync::mpsc::Sender<()>) {
    let (go, wait) = std::sync::mpsc::channel::<()>();
    let gate = rt
        .submit(
            tessera_engine::TaskBuilder::new(&tessera_engine::Codelet::new("gate"))
                .cpu_only()
                .body(move |_| {
                    wait.recv().ok();
                    Ok(())
                }),
        )
        .expect("a gate task is accepted");
    (gate, go)
}

/// Task bodies that must run at the same time: each [`attend`](Self::attend)s,
/// waiting (yielding its core) until `n` have arrived or `limit` has passed.
/// [`met`](Self::met) counts the bodies that saw all `n`: `n` when they ran
/// together. Bounded, so a runtime that leaves a worker asleep fails the
/// caller's assertion rather than its timeout.
#[derive(Clone)]
pub struct Meeting {
    arrived: Arc<std::sync::atomic::AtomicUsize>,
    met: Arc<std::sync::atomic::AtomicUsize>,
    n: usize,
    limit: Duration,
}

impl Meeting {
    pub fn new(n: usize, limit: Duration) -> Meeting {
        Meeting {
            arrived: Arc::default(),
            met: Arc::default(),
            n,
            limit,
        }
    }

    /// Arrive, and wait for the others (at most `limit`).
    pub fn attend(&self) {
        use std::sync::atomic::Ordering::SeqCst;
        self.arrived.fetch_add(1, SeqCst);
        let until = std::time::Instant::now() + self.limit;
        while self.arrived.load(SeqCst) < self.n {
            if std::time::Instant::now() > until {
                return;
            }
            std::thread::yield_now();
        }
        self.met.fetch_add(1, SeqCst);
    }

    /// Bodies that saw every other arrive.
    pub fn met(&self) -> usize {
        self.met.load(std::sync::atomic::Ordering::SeqCst)
    }
}
