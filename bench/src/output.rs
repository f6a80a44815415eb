//! A stdout (or stderr) that cannot be written: `println!` panics when its
//! write fails ("failed printing to stdout: ..."), which made every
//! subcommand end with a panic (exit 101) under `| head -1`, `> /dev/full`
//! or `ulimit -f 0`, and `spmv` hang (issue 28). Here a panic hook
//! recognises that panic and records the error instead of printing a panic
//! message; `main` catches the unwind (the runtime is dropped on the way,
//! joining its workers) and ends the way a Unix tool does:
//!
//! - EPIPE (the reader went away): the end of the output, not an error.
//!   The process ends by SIGPIPE, quietly, as `cat` or `yes` would (the
//!   shell reports status 141). SIGPIPE itself stays ignored (Rust's
//!   default) while the run goes on, so that a closed pipe is noticed where
//!   it is written, not by a signal in the middle of a save.
//! - Any other error (ENOSPC, EFBIG under `ulimit -f`, EIO): an error
//!   message on stderr naming the stream and the cause, exit 1.

use std::io::Write;
use std::sync::OnceLock;

/// Write `line` and a newline to stderr in one `write`. `eprintln!` writes
/// a formatted line in pieces (`tessera: error: `, the message, the
/// newline: three system calls, `strace`), and under mpirun the ranks'
/// messages share one terminal: two ranks' errors came out interleaved
/// mid-line (`tessera: error (rank tessera: error (rank 1 of 2): ...`). A
/// failed write panics with `eprintln!`'s message, so [`install`]'s hook
/// records it and the process ends as it did.
pub fn say(line: &str) {
    let mut whole = String::with_capacity(line.len() + 1);
    whole.push_str(line);
    whole.push('\n');
    if let Err(e) = std::io::stderr().lock().write_all(whole.as_bytes()) {
        // The prefix the hook looks for (`PREFIXES`), as `eprintln!`'s.
        panic!("{}{e}", PREFIXES[1].1);
    }
}

/// The first failed write to stdout or stderr: (stream, the error's text).
static FAILED: OnceLock<(&'static str, String)> = OnceLock::new();

/// The message prefix of `std`'s print macros' panic when a write fails.
const PREFIXES: [(&str, &str); 2] = [
    ("stdout", "failed printing to stdout: "),
    ("stderr", "failed printing to stderr: "),
];

/// Install the panic hook that records a failed print instead of reporting
/// a panic (once, from `main`; other panics go to the default hook).
pub fn install() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let text = tessera_engine::util::panic_message(info.payload());
        for (stream, prefix) in PREFIXES {
            if let Some(err) = text.strip_prefix(prefix) {
                let _ = FAILED.set((stream, err.to_string()));
                return;
            }
        }
        default(info);
    }));
}

/// Whether a write to stdout or stderr has failed (the panic being
/// unwound, if any, is that failure's).
pub fn failed() -> bool {
    FAILED.get().is_some()
}

/// The end of the process after the subcommand: stdout flushed, then, if
/// a write failed, the exit a Unix tool gives (see the module doc); `None`
/// when the output was all written.
pub fn finish() -> Option<u8> {
    if let Err(e) = std::io::stdout().flush() {
        let _ = FAILED.set(("stdout", e.to_string()));
    }
    let (stream, err) = FAILED.get()?;
    if *err == std::io::Error::from_raw_os_error(libc::EPIPE).to_string() {
        // SAFETY: `signal` and `raise` with a valid signal number; with the
        // default action restored, raising SIGPIPE ends the process as a
        // write to a closed pipe does in a C program.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            libc::raise(libc::SIGPIPE);
        }
        // Not reached; 128 + SIGPIPE, as a shell reports it, if it were.
        return Some(141);
    }
    let _ = writeln!(
        std::io::stderr(),
        "tessera: error: writing to {stream}: {err}"
    );
    Some(1)
}
