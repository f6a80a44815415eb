//! The physical range of every platform value, checked once a description is
//! parsed: a rate of 1e-12 GFLOP/s or a latency of 1e300 µs is a typing
//! mistake, not a machine, and would overflow the simulated clock (u64 ns,
//! about 584 years) or `Duration` (issue 28). Each refusal names the file,
//! the key, the value and the range, in the file's own units.
//!
//! The ranges are generous on purpose (from a 1 MFLOP/s core to a
//! 10 PFLOP/s accelerator, up to a million nodes): they catch slips of
//! many orders of magnitude, never a real or planned machine.

use super::platform::{err, LinkSpec, Platform, PlatformError, Processor, Rate};

/// Nodes in a cluster: the largest machines have about 160,000.
pub const MAX_NODES: usize = 1_000_000;
/// Ranks in all (`nodes × ranks_per_node`).
pub const MAX_RANKS: usize = 1_000_000;
/// Cores of one node (today's largest: a few hundred).
pub const MAX_CORES: usize = 4096;
/// Accelerators of one node: each is a memory node of its rank's runtime,
/// which has [`crate::memory::MAX_NODES`] in all, the host's included.
pub const MAX_ACCELERATORS: usize = crate::memory::MAX_NODES - 1;

/// GFLOP/s of one core or accelerator (`gflops`, `peak_gflops`, a codelet's).
const GFLOPS: (f64, f64) = (1e-3, 1e7);
/// GB/s of a processor's copies, a link, a NIC or a node's memory.
const GBS: (f64, f64) = (1e-3, 1e6);
/// Microseconds of a latency, a launch or a per-task overhead (up to 1 s).
const MICROS: (f64, f64) = (0.0, 1e6);
/// Seconds of one task at a codelet's fixed time (up to a day).
const SECONDS: (f64, f64) = (1e-12, 86_400.0);
/// Flops at half rate (`half_flops`).
const HALF_FLOPS: (f64, f64) = (0.0, 1e15);
/// GiB of an accelerator's memory (1 KiB to 1 PiB).
const MEMORY_GIB: (f64, f64) = (1.0 / (1u64 << 20) as f64, (1u64 << 20) as f64);
/// A core's relative time with others busy (`slowdown` entries).
const SLOWDOWN: (f64, f64) = (0.01, 1000.0);

/// `Ok` when the sizes of a platform are in range: checked before the
/// rest, since `nodes × ranks_per_node` decides whether a network is needed
/// (a product that wrapped to 0 skipped that check), and with more ranks
/// than cores "network missing" would be the wrong complaint.
pub(super) fn sizes(
    file: &str,
    nodes: usize,
    ranks_per_node: usize,
    cores: usize,
) -> Result<(), PlatformError> {
    count(file, "nodes", nodes, MAX_NODES)?;
    count(file, "node.cores", cores, MAX_CORES)?;
    if ranks_per_node > cores {
        return Err(err(
            file,
            "ranks_per_node",
            format!("{ranks_per_node} ranks on a node of {cores} cores: at most one rank per core"),
        ));
    }
    match nodes.checked_mul(ranks_per_node) {
        Some(r) if r <= MAX_RANKS => Ok(()),
        _ => Err(err(
            file,
            "ranks_per_node",
            format!(
                "nodes {nodes} x ranks_per_node {ranks_per_node} is more than {MAX_RANKS} ranks"
            ),
        )),
    }
}

/// `Ok` when every value of `p` (read from `file`) is in its range.
pub(super) fn check(p: &Platform, file: &str) -> Result<(), PlatformError> {
    sizes(file, p.nodes, p.ranks_per_node, p.node.cores)?;
    let accelerators = p
        .node
        .accelerators
        .iter()
        .fold(0usize, |s, a| s.saturating_add(a.count));
    if accelerators > MAX_ACCELERATORS {
        return Err(err(
            file,
            "node.accelerators",
            format!("{accelerators} accelerators per node: at most {MAX_ACCELERATORS}"),
        ));
    }
    if let Some(bw) = p.memory_bandwidth {
        range(file, "memory_gbs", bw / 1e9, GBS, "GB/s")?;
    }
    processor(file, "node.cpu", &p.node.cpu, "task_overhead_us")?;
    for (i, a) in p.node.accelerators.iter().enumerate() {
        let key = format!("node.accelerators[{i}]");
        processor(file, &key, &a.proc, "launch_us")?;
        if let Some(m) = a.memory {
            let gib = m as f64 / (1u64 << 30) as f64;
            range(file, &format!("{key}.memory_gib"), gib, MEMORY_GIB, "GiB")?;
        }
        link(file, &format!("{key}.link"), &a.link)?;
    }
    link(file, "network", &p.network.nic)
}

/// A whole number of at most `max`.
fn count(file: &str, key: &str, v: usize, max: usize) -> Result<(), PlatformError> {
    if v > max {
        return Err(err(file, key, format!("{v} is more than {max}")));
    }
    Ok(())
}

/// `v` (in `unit`) within `lo..=hi`; a NaN is out of every range.
fn range(
    file: &str,
    key: &str,
    v: f64,
    (lo, hi): (f64, f64),
    unit: &str,
) -> Result<(), PlatformError> {
    if v >= lo && v <= hi {
        return Ok(());
    }
    Err(err(
        file,
        key,
        format!("{v:e} {unit} is outside the physical range {lo:e} to {hi:e} {unit}"),
    ))
}

fn processor(
    file: &str,
    key: &str,
    p: &Processor,
    overhead_key: &str,
) -> Result<(), PlatformError> {
    let k = |name: &str| format!("{key}.{name}");
    range(file, &k("gflops"), p.gflops, GFLOPS, "GFLOP/s")?;
    range(file, &k("peak_gflops"), p.peak, GFLOPS, "GFLOP/s")?;
    if p.peak < p.gflops {
        return Err(err(
            file,
            &k("peak_gflops"),
            format!(
                "{} GFLOP/s is below the rate gflops = {}: a peak cannot be beaten",
                p.peak, p.gflops
            ),
        ));
    }
    range(file, &k("half_flops"), p.half_flops, HALF_FLOPS, "flops")?;
    if let Some(b) = p.gbs {
        range(file, &k("gbs"), b / 1e9, GBS, "GB/s")?;
    }
    // The CPU's overhead is the node's `task_overhead_us` unless the
    // processor gives its own; the key named is where it is usually set.
    let overhead_key = if key == "node.cpu" {
        format!("node.{overhead_key}")
    } else {
        k(overhead_key)
    };
    range(file, &overhead_key, p.overhead * 1e6, MICROS, "µs")?;
    for (name, rate) in &p.codelets {
        let ck = format!("{key}.codelets.{name}");
        match *rate {
            Rate::Gflops(r) => {
                range(file, &format!("{ck}.gflops"), r, GFLOPS, "GFLOP/s")?;
                if r > p.peak {
                    return Err(err(
                        file,
                        &format!("{ck}.gflops"),
                        format!(
                            "{r} GFLOP/s is above the processor's peak_gflops = {}: a peak cannot be beaten",
                            p.peak
                        ),
                    ));
                }
            }
            Rate::Gbs(r) => range(file, &format!("{ck}.gbs"), r, GBS, "GB/s")?,
            Rate::Seconds(s) => range(file, &format!("{ck}.seconds"), s, SECONDS, "s")?,
        }
    }
    for &s in &p.slowdown {
        range(file, &k("slowdown"), s, SLOWDOWN, "x")?;
    }
    Ok(())
}

fn link(file: &str, key: &str, l: &LinkSpec) -> Result<(), PlatformError> {
    range(
        file,
        &format!("{key}.latency_us"),
        l.latency * 1e6,
        MICROS,
        "µs",
    )?;
    range(file, &format!("{key}.gbs"), l.bandwidth / 1e9, GBS, "GB/s")
}

#[cfg(test)]
mod tests {
    //! Proves that values out of their physical range, NaN and sizes that
    //! would overflow are refused naming the file, the key and the range,
    //! and that the shipped platforms pass.
    use super::super::Platform;

    const BASE: &str = "nodes = 2\n[node]\ncores = 4\n[node.cpu]\ngflops = 10\n[[node.accelerators]]\ngflops = 100\nlink = { latency_us = 10, gbs = 25 }\n[network]\nlatency_us = 2\ngbs = 12.5\n";

    fn error(text: &str) -> String {
        Platform::parse(text, false, "p.toml")
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn values_out_of_range_name_file_key_and_range() {
        Platform::parse(BASE, false, "p.toml").unwrap();
        let e = error(&BASE.replace("gflops = 10\n", "gflops = 1e-12\n"));
        assert_eq!(
            e,
            "p.toml: node.cpu.gflops: 1e-12 GFLOP/s is outside the physical range 1e-3 to 1e7 GFLOP/s"
        );
        let e = error(&BASE.replace("latency_us = 10,", "latency_us = 1e300,"));
        assert!(
            e.starts_with("p.toml: node.accelerators[0].link.latency_us: 1e300 µs is outside"),
            "{e}"
        );
        let e = error(&BASE.replace("gflops = 100\n", "gflops = 100\nlaunch_us = 1e300\n"));
        assert!(
            e.contains("node.accelerators[0].launch_us: 1e300 µs"),
            "{e}"
        );
        let e = error(&BASE.replace("gflops = 100\n", "gflops = 100\nhalf_flops = 1e308\n"));
        assert!(
            e.contains("node.accelerators[0].half_flops: 1e308 flops"),
            "{e}"
        );
        let e = error(&BASE.replace(
            "gflops = 10\n",
            "gflops = 10\ncodelets = { panel = { seconds = 1e300 } }\n",
        ));
        assert!(
            e.contains("node.cpu.codelets.panel.seconds: 1e300 s"),
            "{e}"
        );
        let e = error(&BASE.replace("latency_us = 2", "latency_us = 1e300"));
        assert!(e.contains("network.latency_us"), "{e}");
        let e = error(&BASE.replace("gflops = 10\n", "gflops = 10\npeak_gflops = 5\n"));
        assert!(
            e.contains("node.cpu.peak_gflops: 5 GFLOP/s is below the rate gflops = 10"),
            "{e}"
        );
    }

    /// Issue 42, item 4: a codelet's rate above the processor's peak was
    /// taken (2893 % of the platform's peak followed). Refused where the
    /// peak is given; where it is not, the peak is the fastest rate.
    #[test]
    fn no_codelet_rate_passes_the_peak() {
        let e = error(&BASE.replace(
            "gflops = 10\n",
            "gflops = 10\npeak_gflops = 20\ncodelets = { gemm = { gflops = 1e7 } }\n",
        ));
        assert_eq!(
            e,
            "p.toml: node.cpu.codelets.gemm.gflops: 10000000 GFLOP/s is above the processor's peak_gflops = 20: a peak cannot be beaten"
        );
        let p = Platform::parse(
            &BASE.replace(
                "gflops = 10\n",
                "gflops = 10\ncodelets = { gemm = { gflops = 30 }, swap = { gbs = 1e5 } }\n",
            ),
            false,
            "p.toml",
        )
        .unwrap();
        assert_eq!(p.node.cpu.peak, 30.0);
        // A fixed time is never shorter than the flops at the peak.
        let p = Platform::parse(
            &BASE.replace(
                "gflops = 10\n",
                "gflops = 10\ncodelets = { gemm = { seconds = 1e-12 } }\n",
            ),
            false,
            "p.toml",
        )
        .unwrap();
        let s = super::super::durations::model_seconds(&p.node.cpu, "gemm", 2e6, 0, 1);
        assert_eq!(s, 2e6 / 10e9 + p.node.cpu.overhead);
        let s = super::super::durations::model_seconds(&p.node.cpu, "gemm", 0.0, 0, 1);
        assert_eq!(s, 1e-12 + p.node.cpu.overhead);
    }

    #[test]
    fn nan_is_called_not_a_number() {
        let e = error(&BASE.replace("gflops = 10\n", "gflops = nan\n"));
        assert_eq!(
            e,
            "p.toml: node.cpu.gflops: nan is not a number (a finite number is required)"
        );
        let e = error(&BASE.replace("gbs = 12.5", "gbs = inf"));
        assert!(e.contains("network.gbs: inf is infinite"), "{e}");
    }

    #[test]
    fn sizes_are_bounded_and_do_not_overflow() {
        let e = error(&BASE.replace("nodes = 2", "nodes = 1000000000"));
        assert!(e.contains("nodes: 1000000000 is more than 1000000"), "{e}");
        let e = error(&BASE.replace("cores = 4", "cores = 1000000"));
        assert!(e.contains("node.cores: 1000000 is more than 4096"), "{e}");
        // 2^33 × 2^31 wraps a u64 to 0 (which skipped the network check).
        let e = error(
            &BASE
                .replace(
                    "nodes = 2",
                    "nodes = 8589934592\nranks_per_node = 2147483648",
                )
                .replace("cores = 4", "cores = 2147483648"),
        );
        assert!(e.contains("is more than"), "{e}");
        let e = error(
            &BASE
                .replace("nodes = 2", "nodes = 1000\nranks_per_node = 4000")
                .replace("cores = 4", "cores = 4000"),
        );
        assert!(e.contains("is more than 1000000 ranks"), "{e}");
        let e = error(&BASE.replace("nodes = 2", "nodes = 1\nranks_per_node = 8"));
        assert!(
            e.contains("ranks_per_node: 8 ranks on a node of 4 cores"),
            "not 'network missing': {e}"
        );
        let e = error(&BASE.replace("gflops = 100\n", "gflops = 100\ncount = 100\n"));
        assert!(e.contains("100 accelerators per node: at most 63"), "{e}");
    }

    #[test]
    fn shipped_platforms_are_in_range() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../bench/platforms");
        let mut n = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|x| x == "toml") {
                Platform::load(&path).unwrap_or_else(|e| panic!("{e}"));
                n += 1;
            }
        }
        assert!(n >= 5, "{n} platforms found in {dir}");
    }
}
