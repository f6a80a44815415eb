//! Ctrl-C: the first SIGINT asks the run to stop cleanly (workers finish the
//! bodies they are running, the rest is cancelled, the trace of what ran is
//! saved, atomically, and the runtime is dropped, joining its workers); a
//! second one ends the process at once (the default action). SIGXFSZ is
//! ignored, so a write past `ulimit -f` fails with an error the driver
//! reports instead of killing the process in the middle of a save.
//!
//! The first SIGINT interrupts every runtime of the process
//! (`tessera_engine::interrupt_all`), simulated ones included, so every
//! subcommand stops; drivers that loop outside a runtime check
//! [`requested`] between steps. Under mpirun, [`crate::ranks`] turns it into
//! the end of the whole job.
//!
//! The handler is installed with `sigaction` and does only async-signal-safe
//! things: atomic stores and a swap, then, on a second signal, `signal` and
//! `raise`.
//! libc is used directly (already in the tree) rather than `ctrlc`, whose
//! handler runs on a thread of its own (more than a flag needs), or
//! `signal-hook`, a new dependency for the same two calls.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Set by the first SIGINT.
static REQUESTED: AtomicBool = AtomicBool::new(false);

/// Exit status of a run stopped by Ctrl-C (128 + SIGINT, as shells report it).
pub const EXIT_STATUS: u8 = 130;

extern "C" fn on_sigint(_: libc::c_int) {
    // Every runtime, including those `watch` does not cover (calibrate's,
    // overhead's, simulated ones), stops taking tasks: an atomic store.
    tessera_engine::interrupt_all();
    if REQUESTED.swap(true, Ordering::SeqCst) {
        // SAFETY: `signal` and `raise` are async-signal-safe; restoring the
        // default action and re-raising ends the process as Ctrl-C would.
        unsafe {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            libc::raise(libc::SIGINT);
        }
    }
}

/// Install the SIGINT handler and ignore SIGXFSZ (once, from `main`).
pub fn install() {
    // SAFETY: a zeroed `sigaction` is a valid "no flags, empty mask" value;
    // the handler only touches an atomic (see the module doc).
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGINT, &action, std::ptr::null_mut());
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

/// Whether Ctrl-C was pressed.
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}

/// `Err` once Ctrl-C was pressed: drivers that measure in steps outside a
/// runtime (`lu-kernels`) call it between steps.
pub fn check() -> Result<(), String> {
    if requested() {
        return Err("interrupted (Ctrl-C): stopped between measurements".into());
    }
    Ok(())
}

/// Run `f` while a watcher thread turns Ctrl-C into `rt.interrupt()`.
pub fn watch<R>(rt: &tessera_engine::Runtime, f: impl FnOnce() -> R) -> R {
    /// Stops the watcher when `f` returns or unwinds (a panic in `f`, such
    /// as a failed print, must not leave the scope waiting on it forever).
    struct Done<'a>(&'a AtomicBool);
    impl Drop for Done<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                if requested() {
                    rt.interrupt();
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        let _done = Done(&done);
        f()
    })
}

/// After a run that `watch` interrupted: save the trace of what ran (if one
/// was asked for) and say what happened, as the driver's error.
pub fn stopped(
    rt: &tessera_engine::Runtime,
    trace: Option<&std::path::Path>,
) -> Result<(), String> {
    let saved = match trace {
        Some(path) => {
            crate::save_trace(rt, path)?;
            format!("; the trace of the tasks that ran is in {}", path.display())
        }
        None => String::new(),
    };
    Err(format!(
        "interrupted (Ctrl-C): running tasks finished, the others were cancelled{saved}"
    ))
}
