//! Test helpers shared by the perf-model modules: seeded jitter and a temporary directory.

use std::fs;
use std::path::PathBuf;

/// A fresh directory under the system temp dir, removed on drop.
pub(super) struct TempDir(pub(super) PathBuf);

impl TempDir {
    pub(super) fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("tessera-perfmodel-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Deterministic jitter in [-amp, amp] (a 64-bit LCG; no RNG dependency).
pub(super) struct Jitter(pub(super) u64);

impl Jitter {
    pub(super) fn next(&mut self, amp: f64) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let u = (self.0 >> 11) as f64 / (1u64 << 53) as f64;
        amp * (2.0 * u - 1.0)
    }
}
