//! Proves the `tessera` binary answers hostile platform files and
//! `--simulate` runs (issue 28) with a clear error naming the file, the key
//! and the problem, or a warning, never a hang, a panic, an abort or a
//! wrapped clock: devices, FIFOs and huge files as platforms, values out of
//! their physical range, sizes that overflow, runs past the budget, and
//! mistakes (a misspelt folder or codelet, a peak below the rate, NaN,
//! options of this machine); and `trace merge` given traces of different
//! runs.

use std::path::PathBuf;
use std::time::{Duration, Instant};

mod common;

use common::Out;

/// Run the binary with `args`, at most 30 s (killed then: a hang).
fn tessera(args: &[&str]) -> Out {
    common::tessera_within(args, Duration::from_secs(30))
}

/// A fresh directory for one test, removed at the end.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("tessera-plat-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
    fn file(&self, name: &str, text: &str) -> String {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A small platform: one node of 2 cores of 10 GFLOP/s.
const BASE: &str = "name = \"t\"\n[node]\ncores = 2\n[node.cpu]\ngflops = 10\ngbs = 5\n";

/// A platform with one accelerator.
const ACCEL: &str = "name = \"t\"\n[node]\ncores = 4\n[node.cpu]\ngflops = 10\ngbs = 5\n[[node.accelerators]]\ngflops = 100\nlaunch_us = 8\nlink = { latency_us = 10, gbs = 25 }\n";

/// `tessera lu --n N --nb NB --simulate PLATFORM EXTRA..`.
fn sim_lu(platform: &str, n: &str, nb: &str, extra: &[&str]) -> Out {
    let mut args = vec!["lu", "--n", n, "--nb", nb, "--simulate", platform];
    args.extend_from_slice(extra);
    tessera(&args)
}

#[test]
fn platform_files_that_are_devices_fifos_or_huge_are_refused() {
    sim_lu("/dev/zero", "256", "64", &[]).refused("/dev/zero: a device, not a regular file");
    sim_lu("/dev/urandom", "256", "64", &[]).refused("a device, not a regular file");
    let d = Dir::new("fifo");
    let fifo = d.0.join("p.toml");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    sim_lu(fifo.to_str().unwrap(), "256", "64", &[]).refused("a FIFO, not a regular file");
    let big = format!("{BASE}{}", "# padding\n".repeat(200_000));
    let f = d.file("big.toml", &big);
    sim_lu(&f, "256", "64", &[]).refused("too large for a platform description");
    let f = d.file("ok.toml", BASE);
    sim_lu(&f, "256", "64", &[]).ok();
}

#[test]
fn absurd_platform_values_are_refused_with_key_and_range() {
    let d = Dir::new("range");
    let cases = [
        (
            BASE.replace("gflops = 10", "gflops = 1e-12"),
            "node.cpu.gflops: 1e-12 GFLOP/s is outside the physical range",
        ),
        (
            BASE.replace(
                "gbs = 5",
                "gbs = 5\ncodelets = { panel = { seconds = 1e300 } }",
            ),
            "node.cpu.codelets.panel.seconds: 1e300 s is outside the physical range",
        ),
        (
            ACCEL.replace("latency_us = 10", "latency_us = 1e300"),
            "node.accelerators[0].link.latency_us: 1e300",
        ),
        (
            ACCEL.replace("launch_us = 8", "launch_us = 1e300"),
            "node.accelerators[0].launch_us: 1e300",
        ),
        (
            ACCEL.replace("launch_us = 8", "launch_us = 8\nhalf_flops = 1e308"),
            "node.accelerators[0].half_flops: 1e308",
        ),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let f = d.file(&format!("p{i}.toml"), text);
        let out = sim_lu(&f, "256", "64", &[]);
        out.refused(want);
        assert!(out.stderr.contains(&f), "names the file: {}", out.stderr);
    }
}

#[test]
fn platform_and_run_sizes_are_bounded() {
    let d = Dir::new("sizes");
    let f = d.file(
        "nodes.toml",
        &BASE.replace("name = \"t\"", "nodes = 1000000000\n[network]\ngbs = 10"),
    );
    sim_lu(&f, "256", "64", &[]).refused("nodes: 1000000000 is more than 1000000");
    let f = d.file(
        "wrap.toml",
        &BASE
            .replace(
                "name = \"t\"",
                "nodes = 8589934592\nranks_per_node = 2147483648",
            )
            .replace("cores = 2", "cores = 4294967296"),
    );
    sim_lu(&f, "256", "64", &[]).refused("is more than");
    let f = d.file("cores.toml", &BASE.replace("cores = 2", "cores = 1000000"));
    sim_lu(&f, "256", "64", &[]).refused("node.cores: 1000000 is more than 4096");
    let f = d.file("ok.toml", BASE);
    sim_lu(&f, "256", "64", &["--workers", "100000000"]).refused("at most 256 virtual workers");
    let t0 = Instant::now();
    sim_lu(&f, "200000", "16", &[]).refused("use a larger --nb");
    sim_lu(&f, "16384", "8", &[]).refused("use a larger --nb");
    sim_lu(&f, "18446744073709551615", "448", &[]).refused("too many to count");
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    let out = sim_lu(&f, "96", "8", &[]);
    out.ok();
    assert!(out.stderr.contains("per-task overhead"), "{}", out.stderr);
    // The simulated SpMV builds its matrix for real: the real run's budget.
    tessera(&[
        "spmv",
        "--gen",
        "dense:100000",
        "--iters",
        "1",
        "--simulate",
        &f,
    ])
    .refused("needs about");
    tessera(&[
        "spmv",
        "--gen",
        "stencil7:4",
        "--iters",
        "1000000000",
        "--simulate",
        &f,
    ])
    .refused("more than the 1000000000 a simulation may run");
}

#[test]
fn platform_mistakes_are_refused_or_said() {
    let d = Dir::new("mistakes");
    let f = d.file(
        "pm.toml",
        &BASE.replace("name = \"t\"", "perf_models = \"perfmodles\""),
    );
    sim_lu(&f, "256", "64", &[]).refused("perf_models: 'perfmodles'");
    let f = d.file(
        "cl.toml",
        &BASE.replace("gbs = 5", "gbs = 5\ncodelets = { gemmm = { gflops = 12 } }"),
    );
    sim_lu(&f, "256", "64", &[]).refused("node.cpu.codelets: no codelet is called 'gemmm'");
    let f = d.file(
        "only.toml",
        &format!("{ACCEL}only = [\"gemm\", \"trsn\"]\n"),
    );
    sim_lu(&f, "256", "64", &[]).refused("node.accelerators[0].only: no codelet is called 'trsn'");
    let f = d.file(
        "only-ok.toml",
        &format!("{ACCEL}only = [\"gemm\", \"trsm\"]\n"),
    );
    sim_lu(&f, "256", "64", &[]).ok();
    let f = d.file(
        "peak.toml",
        &BASE.replace("gbs = 5", "gbs = 5\npeak_gflops = 1"),
    );
    sim_lu(&f, "256", "64", &[]).refused("peak_gflops: 1 GFLOP/s is below the rate gflops = 10");
    let f = d.file(
        "rpn.toml",
        &BASE.replace("name = \"t\"", "ranks_per_node = 4"),
    );
    sim_lu(&f, "256", "64", &[]).refused("ranks_per_node: 4 ranks on a node of 2 cores");
    let f = d.file("nan.toml", &BASE.replace("gflops = 10", "gflops = nan"));
    sim_lu(&f, "256", "64", &[]).refused("node.cpu.gflops: nan is not a number");
    let f = d.file("ok.toml", BASE);
    for extra in [
        &["--gpus", "1"][..],
        &["--emu", "1"],
        &["--cpus", "0"],
        &["--perfmodel-dir", d.0.to_str().unwrap()],
    ] {
        sim_lu(&f, "256", "64", extra).refused(&format!("{} describes this machine", extra[0]));
    }
}

#[test]
fn traces_of_different_runs_merge_only_with_force() {
    use tessera_engine::trace::{save, ChromeOptions, RankInfo, TaskRecord, Trace, WorkerInfo};
    let d = Dir::new("merge");
    let rank_trace = |rank: u32, id: &str| Trace {
        workers: vec![WorkerInfo {
            name: "w0".into(),
            memory_node: 0,
        }],
        tasks: vec![TaskRecord {
            id: 1,
            codelet: "gemm".into(),
            label: None,
            worker: 0,
            priority: 0,
            flops: 1e6,
            start: 0,
            end: 1000,
            team_rank: 0,
        }],
        ranks: vec![RankInfo {
            rank,
            workers: 1,
            transfers: 0,
            epoch_unix_ns: 1_700_000_000_000_000_000,
            run_id: id.into(),
        }],
        ..Trace::default()
    };
    let file = |name: &str, t: &Trace| {
        let p = d.0.join(name);
        save(t, &p, &ChromeOptions::default()).unwrap();
        p.display().to_string()
    };
    let a0 = file("a0.json", &rank_trace(0, "run-a"));
    let a1 = file("a1.json", &rank_trace(1, "run-a"));
    let b1 = file("b1.json", &rank_trace(1, "run-b"));
    let out = d.0.join("m.json").display().to_string();
    tessera(&["trace", "merge", &a0, &a1, "-o", &out]).ok();
    tessera(&["trace", "merge", &a0, &b1, "-o", &out])
        .refused("trace 1 is of run run-a and trace 2 of run run-b");
    let forced = tessera(&["trace", "merge", &a0, &b1, "-o", &out, "--force"]);
    forced.ok();
    assert!(
        forced.stderr.contains("merged as asked"),
        "{}",
        forced.stderr
    );
    // The id survives a save and a load.
    let t = tessera_engine::trace::load(&a0).unwrap();
    assert_eq!(t.ranks[0].run_id, "run-a");
}

/// The share of the platform's peak a simulated LU printed.
fn share_of_peak(out: &Out) -> f64 {
    let line = out
        .stdout
        .lines()
        .find(|l| l.contains("% of the platform's peak"))
        .unwrap_or_else(|| panic!("no peak line:\n{}", out.stdout));
    let before = line.split(" % of the platform's peak").next().unwrap();
    before.rsplit(' ').next().unwrap().parse().unwrap()
}

/// Issue 42, item 4: codelet rates could beat the processor's peak:
/// `gflops = 1e7` for gemm read as 2893 % of the platform's peak, and
/// `seconds = 1e-12` as 740 %. Now a codelet rate above an explicit
/// `peak_gflops` is refused naming the file and key, a peak left out is the
/// fastest rate the file gives, and a fixed time is never shorter than the
/// task's flops at the peak (said once).
#[test]
fn no_codelet_rate_beats_the_peak() {
    let d = Dir::new("peak-rates");
    let f = d.file(
        "over.toml",
        &BASE.replace(
            "gbs = 5",
            "gbs = 5\npeak_gflops = 20\ncodelets = { gemm = { gflops = 1e7 } }",
        ),
    );
    let out = sim_lu(&f, "1024", "128", &[]);
    out.refused(
        "node.cpu.codelets.gemm.gflops: 10000000 GFLOP/s is above the processor's peak_gflops = 20",
    );
    assert!(out.stderr.contains(&f), "{}", out.stderr);
    let f = d.file(
        "fast.toml",
        &BASE.replace("gbs = 5", "gbs = 5\ncodelets = { gemm = { gflops = 1e7 } }"),
    );
    let out = sim_lu(&f, "1024", "128", &[]);
    out.ok();
    assert!(share_of_peak(&out) <= 100.0, "{}", out.stdout);
    let f = d.file(
        "instant.toml",
        &BASE.replace(
            "gbs = 5",
            "gbs = 5\ncodelets = { gemm = { seconds = 1e-12 } }",
        ),
    );
    let out = sim_lu(&f, "1024", "128", &[]);
    out.ok();
    assert!(share_of_peak(&out) <= 100.0, "{}", out.stdout);
    assert!(
        out.stderr.contains("codelet 'gemm' on cpu")
            && out.stderr.contains("past the processor's peak_gflops = 10"),
        "{}",
        out.stderr
    );
    assert_eq!(out.stderr.matches("past the processor's peak").count(), 1);
}

/// Issue 42, item 9: `spmv --simulate` ignored the platform's `memory_gbs`
/// and printed 126 GB/s on a 10 GB/s platform. Now the simulated SpMV is
/// bound by the memory bandwidth, and says which bound held.
#[test]
fn simulated_spmv_never_passes_the_memory_bandwidth() {
    let d = Dir::new("spmv-memory");
    let f = d.file(
        "mem.toml",
        &BASE.replace("name = \"t\"", "name = \"t\"\nmemory_gbs = 10"),
    );
    let out = tessera(&[
        "spmv",
        "--gen",
        "stencil7:30",
        "--iters",
        "20",
        "--simulate",
        &f,
    ]);
    out.ok();
    let gbs: f64 = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("effective "))
        .and_then(|l| l.split(' ').next())
        .unwrap_or_else(|| panic!("no effective rate:\n{}", out.stdout))
        .parse()
        .unwrap();
    assert!(
        gbs <= 10.0 + 1e-9,
        "{gbs} GB/s on a 10 GB/s platform:\n{}",
        out.stdout
    );
    assert!(out.stdout.contains("memory bound"), "{}", out.stdout);
}

/// Issue 42, item 5: `--update auto` ignored an accelerator's `only` list:
/// with `only = ["gemm"]` it picked merged updates, which the device may not
/// run, so one CPU core ran them all (7.91 s against 0.43 s in tiles). Now
/// auto picks among the shapes some device runs, and an explicit shape no
/// device runs is refused.
#[test]
fn update_shapes_respect_the_devices_only_lists() {
    let d = Dir::new("only-update");
    // A device 1000x a core: auto merges the updates where it may.
    let fast = ACCEL.replace("gflops = 100\n", "gflops = 10000\n");
    let f = d.file("any.toml", &fast);
    let out = sim_lu(&f, "2048", "128", &["--update", "auto"]);
    out.ok();
    assert!(out.stdout.contains("updates: merged"), "{}", out.stdout);
    let f = d.file("gemm.toml", &format!("{fast}only = [\"gemm\"]\n"));
    let out = sim_lu(&f, "2048", "128", &["--update", "auto"]);
    out.ok();
    assert!(!out.stdout.contains("updates: merged"), "{}", out.stdout);
    assert!(!out.stdout.contains("updates: streamed"), "{}", out.stdout);
    for shape in ["merged", "streamed", "streamed:2"] {
        sim_lu(&f, "2048", "128", &["--update", shape])
            .refused(&format!("--update {shape}: no device may run its tasks"));
    }
    // A device that runs nothing is given nothing (merged updates moved
    // 2.5 GiB to one, for a CPU core to run them).
    let f = d.file("none.toml", &format!("{fast}only = []\n"));
    let out = sim_lu(&f, "2048", "128", &["--update", "auto"]);
    out.ok();
    assert!(out.stdout.contains("updates: tile tasks"), "{}", out.stdout);
    assert!(
        out.stdout
            .contains("node acc0_0: 0.0 MiB transferred in, 0 evictions"),
        "{}",
        out.stdout
    );
    let f = d.file(
        "gemmb.toml",
        &format!("{fast}only = [\"gemm\", \"gemmb\"]\n"),
    );
    let out = sim_lu(&f, "2048", "128", &["--update", "auto"]);
    out.ok();
    assert!(out.stdout.contains("updates: streamed"), "{}", out.stdout);
}

/// Issue 42, item 10: `trace merge` took a single process's trace beside a
/// rank's (the process became rank 0), and rank numbers past the files
/// given, without a word. Now the first is refused (unless `--force`), the
/// second warned about, naming the missing ranks.
#[test]
fn merges_of_unrelated_or_incomplete_rank_files_are_said() {
    use tessera_engine::trace::{save, ChromeOptions, RankInfo, TaskRecord, Trace, WorkerInfo};
    let d = Dir::new("merge-ranks");
    let trace = |rank: Option<u32>| Trace {
        workers: vec![WorkerInfo {
            name: "w0".into(),
            memory_node: 0,
        }],
        tasks: vec![TaskRecord {
            id: 1,
            codelet: "gemm".into(),
            label: None,
            worker: 0,
            priority: 0,
            flops: 1e6,
            start: 0,
            end: 1000,
            team_rank: 0,
        }],
        ranks: rank
            .map(|rank| RankInfo {
                rank,
                workers: 1,
                transfers: 0,
                epoch_unix_ns: 1_700_000_000_000_000_000,
                run_id: "run-a".into(),
            })
            .into_iter()
            .collect(),
        ..Trace::default()
    };
    let file = |name: &str, t: &Trace| {
        let p = d.0.join(name);
        save(t, &p, &ChromeOptions::default()).unwrap();
        p.display().to_string()
    };
    let single = file("single.json", &trace(None));
    let r1 = file("r1.json", &trace(Some(1)));
    let r3 = file("r3.json", &trace(Some(3)));
    let out = d.0.join("m.json").display().to_string();
    tessera(&["trace", "merge", &single, &r1, "-o", &out])
        .refused("single.json is the trace of a single process and");
    let forced = tessera(&["trace", "merge", &single, &r1, "-o", &out, "--force"]);
    forced.ok();
    assert!(
        forced.stderr.contains("merged as asked"),
        "{}",
        forced.stderr
    );
    let gaps = tessera(&["trace", "merge", &r1, &r3, "-o", &out]);
    gaps.ok();
    assert!(
        gaps.stderr
            .contains("the traces hold ranks up to 3, but not rank(s) 0, 2"),
        "{}",
        gaps.stderr
    );
    let whole = tessera(&["trace", "merge", &single, "-o", &out]);
    whole.ok();
    assert!(!whole.stderr.contains("warning"), "{}", whole.stderr);
}
