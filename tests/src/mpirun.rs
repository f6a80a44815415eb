//! Running a test binary under `mpirun`: the test re-executes itself with
//! `-np N`, oversubscribed (ranks may outnumber cores), as root when the
//! tests run as root, and with a timeout so a hung rank fails the test.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Whether this process is a rank started by mpirun.
pub fn is_rank() -> bool {
    std::env::var_os("OMPI_COMM_WORLD_SIZE").is_some() || std::env::var_os("PMI_SIZE").is_some()
}

/// What a run under mpirun printed and how it ended.
pub struct Outcome {
    pub success: bool,
    pub code: Option<i32>,
    pub output: String,
}

impl Outcome {
    /// Assert that the run succeeded and that each of ranks `0..np` printed
    /// `rank R: {said}` (its last line when all went well); `context` starts
    /// the failure message.
    #[track_caller]
    pub fn assert_every_rank_said(&self, np: usize, said: &str, context: &str) {
        assert!(self.success, "{context}: mpirun failed:\n{}", self.output);
        for r in 0..np {
            assert!(
                self.output.contains(&format!("rank {r}: {said}")),
                "{context}: rank {r} did not print '{said}':\n{}",
                self.output
            );
        }
    }
}

/// Launches so far in this process: each gets its own session directory.
static LAUNCHES: AtomicUsize = AtomicUsize::new(0);

/// Run test `name` of this test binary on `np` ranks; kill it after `limit`.
///
/// Each launch keeps Open MPI's session files in a directory of its own
/// (`orte_tmpdir_base`), removed after it: two `mpirun`s started at once
/// (the tests of one binary run in parallel) raced to create the shared
/// `/tmp/ompi.<host>.<uid>`, and the loser failed in `orte_init` with
/// "mkdir ... File exists".
pub fn mpirun(np: usize, name: &str, extra_env: &[(&str, &str)], limit: Duration) -> Outcome {
    let session = SessionDir::new();
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut cmd = Command::new("mpirun");
    cmd.args(["--oversubscribe", "-np", &np.to_string()]);
    // Shared memory between ranks of one node; no network probing.
    cmd.args(["--mca", "btl", "self,vader"]);
    cmd.arg("--mca").arg("orte_tmpdir_base").arg(&session.0);
    // SAFETY-free check of the effective user: root needs the flag.
    if std::env::var("USER").as_deref() == Ok("root") || is_root() {
        cmd.arg("--allow-run-as-root");
    }
    cmd.arg(&exe)
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env("TESSERA_MPI_TEST", "1")
        .envs(extra_env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .expect("mpirun starts (apt-get install openmpi-bin)");
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait for mpirun") {
            let out = child.wait_with_output().expect("mpirun output");
            return Outcome {
                success: status.success(),
                code: status.code(),
                output: format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ),
            };
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().expect("mpirun output");
            panic!(
                "mpirun -np {np} {name} did not finish within {limit:?} (a rank hung?)\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

/// A launch's own directory for Open MPI's session files, removed when
/// dropped (after the launch ended, or was killed).
struct SessionDir(PathBuf);

impl SessionDir {
    fn new() -> SessionDir {
        let n = LAUNCHES.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("tessera-mpirun-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a directory for mpirun's session files");
        SessionDir(dir)
    }
}

impl Drop for SessionDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
