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
