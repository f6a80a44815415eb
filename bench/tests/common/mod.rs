//! What the `tessera` binary's CLI tests share: running the binary with a
//! time limit (a hang fails the test instead of stalling it), its exit status
//! and output, and the checks every hostile case makes (a clean refusal or a
//! clean success, never a panic or an abort). Each test file takes what it
//! needs, hence `dead_code` allowed here.
#![allow(dead_code)]

use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_tessera");

/// What a run of the binary gave.
pub struct Out {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// Failed cleanly (exit 1 from the driver, or 2 from the parser), with
    /// `want` in the message and no panic or abort.
    pub fn refused(&self, want: &str) -> &Self {
        assert!(
            matches!(self.code(), Some(1 | 2)),
            "{:?}, expected exit 1 or 2\nstdout: {}\nstderr: {}",
            self.status,
            self.stdout,
            self.stderr
        );
        self.no_panic();
        assert!(
            self.stderr.contains(want),
            "stderr lacks {want:?}:\n{}",
            self.stderr
        );
        self
    }

    /// Exit 0, no panic.
    pub fn ok(&self) -> &Self {
        assert_eq!(
            self.code(),
            Some(0),
            "stdout: {}\nstderr: {}",
            self.stdout,
            self.stderr
        );
        self.no_panic();
        self
    }

    pub fn no_panic(&self) {
        for bad in [
            "panicked",
            "memory allocation",
            "RUST_BACKTRACE",
            "capacity overflow",
        ] {
            assert!(!self.stderr.contains(bad), "{bad}:\n{}", self.stderr);
        }
    }
}

/// Drain a pipe on a thread of its own (a full pipe would block the child).
pub fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut text);
        }
        String::from_utf8_lossy(&text).into_owned()
    })
}

/// Wait for `child` at most `limit` (killed then, and the test fails).
pub fn wait(child: &mut Child, limit: Duration, what: &str) -> ExitStatus {
    let t0 = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("`{what}` did not finish within {limit:?} (a hang)");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Wait for `child` at most `limit`, collecting its output.
pub fn finish(mut child: Child, limit: Duration, what: &str) -> Out {
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let status = wait(&mut child, limit, what);
    Out {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

/// The binary with `args`, stdin closed, stdout and stderr piped.
pub fn command(args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Run the binary with `args`, at most `limit`.
pub fn tessera_within(args: &[&str], limit: Duration) -> Out {
    finish(command(args).spawn().unwrap(), limit, &args.join(" "))
}

/// Run the binary with `args`, at most 60 s.
pub fn tessera(args: &[&str]) -> Out {
    tessera_within(args, Duration::from_secs(60))
}
