//! A graph shaped at run time: adaptive integration of √x over [0, 1].
//! A task estimates the integral over an interval; where the estimate is
//! not good enough it submits two tasks for the halves, from its own body,
//! else one that adds its estimate into the total. How many tasks there
//! are, and where, depends on the integrand (√x is steep near 0, so the
//! intervals there are split far more): the engine sees the graph grow as
//! it runs.
//!
//! `cargo run --example dynamic`

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tessera_engine::{Codelet, Config, DataHandle, Error, ReadWrite, Runtime, Submitter, Task};

/// Simpson's rule for √x on [a, b].
fn simpson(a: f64, b: f64) -> f64 {
    (b - a) / 6.0 * (a.sqrt() + 4.0 * ((a + b) / 2.0).sqrt() + b.sqrt())
}

/// What every task of the run shares.
struct Quad {
    /// Submits from task bodies; it does not keep the runtime alive.
    sub: Submitter,
    total: DataHandle<f64>,
    split: Codelet<()>,
    add: Codelet<ReadWrite<f64>, f64>,
    tasks: AtomicUsize,
}

/// Submit the task that integrates over [a, b] to within `tol`.
fn integrate(q: &Arc<Quad>, a: f64, b: f64, tol: f64) -> Result<(), Error> {
    q.tasks.fetch_add(1, Ordering::Relaxed);
    let q2 = Arc::clone(q);
    let task = Task::new(&q.split, ()).cpu(move |()| {
        let m = (a + b) / 2.0;
        let (whole, halves) = (simpson(a, b), simpson(a, m) + simpson(m, b));
        if (whole - halves).abs() <= 15.0 * tol {
            // Good enough. The adds all write the total: they run one at a time.
            q2.sub
                .submit(Task::new(&q2.add, q2.total.rw()).args(halves))?;
            return Ok(());
        }
        integrate(&q2, a, m, tol / 2.0)?;
        integrate(&q2, m, b, tol / 2.0)?;
        Ok(())
    });
    q.sub.submit(task)?;
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rt = Runtime::new(Config::default())?;
    let q = Arc::new(Quad {
        sub: rt.submitter(),
        total: rt.register(0.0),
        split: Codelet::new("quad-split"),
        add: Codelet::<ReadWrite<f64>, f64>::with_args("quad-add").cpu(|_, &x, total| {
            *total += x;
            Ok(())
        }),
        tasks: AtomicUsize::new(0),
    });
    integrate(&q, 0.0, 1.0, 1e-10)?;
    // A task submitted from a body is in flight from then on, before its
    // parent ends: one wait covers the whole tree.
    rt.wait_all()?;
    let total = rt.unregister(q.total.clone())?;
    let splits = q.tasks.load(Ordering::Relaxed);
    println!(
        "dynamic: ∫√x dx over [0, 1] = {total:.12} (exactly 2/3), from {splits} interval tasks"
    );
    assert!((total - 2.0 / 3.0).abs() < 1e-9, "{total}");
    Ok(())
}

#[test]
fn runs() {
    main().unwrap();
}
