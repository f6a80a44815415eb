//! How much memory a driver may still allocate, and the check `lu` and
//! `spmv` run before allocating: the least of what the kernel reports
//! available (`MemAvailable`), the headroom under the address-space limit
//! (`ulimit -v`, RLIMIT_AS) and the headroom under the cgroup's limit (v2
//! `memory.max`, v1 `memory.limit_in_bytes`, over every ancestor). A refusal
//! names every buffer counted, the total, and the limit that refused it.

use std::path::{Path, PathBuf};

use tessera_engine::fmt::bytes;

/// Address space each thread may take beyond the buffers counted: faer's
/// x86 GEMM gives each thread that calls it a 520 MiB scratch buffer
/// (`private_gemm_x86`'s thread-local pages: reserved, touched lazily;
/// found as the 545,259,520-byte allocation that aborted `lu --n 256` under
/// `ulimit -v 1048576`), glibc an arena of 64 MiB, plus a stack. Counted
/// only against the address-space limit, which sees reservations, not use.
const PER_THREAD_ADDRESS_SPACE: u64 = 600 << 20;

/// One limit on what this process may allocate now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Headroom {
    /// Bytes that may still be allocated under this limit.
    pub bytes: u64,
    /// The limit, as a user would look it up.
    pub source: String,
}

/// Every limit that applies here, each with its headroom (none found: empty).
pub fn headrooms(threads: usize) -> Vec<Headroom> {
    let mut out = Vec::new();
    if let Some(b) = mem_available() {
        out.push(Headroom {
            bytes: b,
            source: "MemAvailable in /proc/meminfo".into(),
        });
    }
    if let Some((limit, used)) = address_space() {
        let reserved = used.saturating_add(PER_THREAD_ADDRESS_SPACE * threads as u64);
        out.push(Headroom {
            bytes: limit.saturating_sub(reserved),
            source: format!(
                "the address-space limit (ulimit -v, RLIMIT_AS) of {}, {} of it in use or reserved by {threads} threads",
                bytes(limit),
                bytes(reserved)
            ),
        });
    }
    if let Some((limit, used, file)) = cgroup() {
        out.push(Headroom {
            bytes: limit.saturating_sub(used),
            source: format!(
                "the cgroup memory limit of {} ({}), {} of it in use",
                bytes(limit),
                file.display(),
                bytes(used)
            ),
        });
    }
    out
}

/// `Ok` when every buffer of `items` (what, bytes) fits together under every
/// limit; else an error naming the buffers, their total and the limit.
/// `what` says which run needs them; `threads` is the number of threads the
/// run will start (see `PER_THREAD_ADDRESS_SPACE`).
pub fn check(what: &str, items: &[(&str, u64)], threads: usize) -> Result<(), String> {
    check_against(what, items, &headrooms(threads))
}

/// [`check`] against given limits (tests).
pub fn check_against(what: &str, items: &[(&str, u64)], limits: &[Headroom]) -> Result<(), String> {
    let need = items
        .iter()
        .fold(0u64, |sum, (_, b)| sum.saturating_add(*b));
    let Some(tightest) = limits.iter().min_by_key(|h| h.bytes) else {
        return Ok(());
    };
    if need <= tightest.bytes {
        return Ok(());
    }
    let parts = items
        .iter()
        .filter(|(_, b)| *b > 0)
        .map(|(w, b)| format!("{w} {}", bytes(*b)))
        .collect::<Vec<_>>()
        .join(", ");
    Err(format!(
        "{what} needs about {} ({parts}), but only {} can be allocated under {}",
        bytes(need),
        bytes(tightest.bytes),
        tightest.source
    ))
}

/// `MemAvailable`, in bytes.
fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    kib_field(&text, "MemAvailable:")
}

/// A `Name:   N kB` field of a /proc file, in bytes.
fn kib_field(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

/// The soft address-space limit and the address space in use (`VmSize`),
/// when there is a limit.
fn address_space() -> Option<(u64, u64)> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max address space"))?;
    let soft = line
        .trim_start_matches("Max address space")
        .split_whitespace()
        .next()?;
    let limit: u64 = soft.parse().ok()?; // "unlimited" does not parse
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    Some((limit, kib_field(&status, "VmSize:").unwrap_or(0)))
}

/// The tightest cgroup memory limit over this process's cgroup and its
/// ancestors: (limit, usage, the limit's file).
fn cgroup() -> Option<(u64, u64, PathBuf)> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mut best: Option<(u64, u64, PathBuf)> = None;
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
        let (root, max, current) = if controllers.is_empty() {
            ("/sys/fs/cgroup", "memory.max", "memory.current")
        } else if controllers.split(',').any(|c| c == "memory") {
            (
                "/sys/fs/cgroup/memory",
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
            )
        } else {
            continue;
        };
        // The cgroup and each ancestor up to the mount's root (inside a
        // namespace the listed path may not exist: the root is then ours).
        let mut dir = Path::new(root).join(path.trim_start_matches('/'));
        loop {
            if let (Some(limit), Some(used)) =
                (read_u64(&dir.join(max)), read_u64(&dir.join(current)))
            {
                // v1 writes "no limit" as a huge page-rounded number.
                if limit < (1 << 62)
                    && best
                        .as_ref()
                        .is_none_or(|b| limit - used.min(limit) < b.0 - b.1.min(b.0))
                {
                    best = Some((limit, used, dir.join(max)));
                }
            }
            if dir == Path::new(root) || !dir.pop() {
                break;
            }
        }
    }
    best
}

/// A file holding one number (`max`: none).
fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// What a run's configuration adds to its memory: the limit of each sim
/// device (its replicas live in host memory), and the threads it starts
/// (workers, device workers, and two helpers), for [`check`].
pub fn config_needs(config: &tessera_engine::Config) -> (Vec<Option<u64>>, usize) {
    let sims = config
        .devices
        .iter()
        .filter(|d| d.arch() == "emu")
        .map(|d| d.memory_limit())
        .collect();
    (sims, config.workers + config.devices.len() + 2)
}

#[cfg(test)]
mod tests {
    //! Proves the check adds every buffer, refuses by the tightest limit and
    //! names it, and that this machine's limits can be read.
    use super::*;

    #[test]
    fn tightest_limit_refuses_and_is_named() {
        let limits = [
            Headroom {
                bytes: 10 << 30,
                source: "MemAvailable".into(),
            },
            Headroom {
                bytes: 1 << 30,
                source: "ulimit -v".into(),
            },
        ];
        let items = [("the matrix", 600 << 20), ("vectors", 600 << 20)];
        let e = check_against("lu --n 9000", &items, &limits).unwrap_err();
        assert!(
            e.contains("1.2 GiB") && e.contains("the matrix 600.0 MiB") && e.contains("ulimit -v"),
            "{e}"
        );
        assert!(check_against("x", &items[..1], &limits).is_ok());
        assert!(check_against("x", &[("huge", u64::MAX), ("more", 1)], &limits).is_err());
        assert!(check_against("x", &items, &[]).is_ok(), "no limit known");
    }

    #[test]
    fn this_machine_has_memory_available() {
        let h = headrooms(2);
        assert!(h.iter().any(|h| h.source.contains("MemAvailable")), "{h:?}");
        assert!(check("a small run", &[("a buffer", 1 << 20)], 2).is_ok());
    }
}
