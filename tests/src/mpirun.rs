//! Running a test binary under `mpirun`: the test re-executes itself with
//! `-np N`, oversubscribed (ranks may outnumber cores), as root when the
//! tests run as root, and with a timeout so a hung rank fails the test.

use std::process::{Command, Stdio};
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

/// Run test `name` of this test binary on `np` ranks; kill it after `limit`.
pub fn mpirun(np: usize, name: &str, extra_env: &[(&str, &str)], limit: Duration) -> Outcome {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut cmd = Command::new("mpirun");
    cmd.args(["--oversubscribe", "-np", &np.to_string()]);
    // Shared memory between ranks of one node; no network probing.
    cmd.args(["--mca", "btl", "self,vader"]);
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
