//! Proves the `tessera` binary answers hostile or careless input (issue 17)
//! with a clear error or a warning, never a panic, an abort or a hang: bad
//! option values, sizes that cannot fit in memory (also under `ulimit -v`),
//! files that are not regular, NaN matrices, corrupt traces and perf models,
//! and Ctrl-C during a traced run, which leaves the trace file whole.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{command, finish, tessera, Out, BIN};

/// Run it through `sh` after `ulimit -v kib` (the address-space limit).
fn tessera_under_ulimit_v(kib: u64, args: &[&str]) -> Out {
    let cmd = format!("ulimit -v {kib} && exec \"$0\" \"$@\"");
    let child = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .arg(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    finish(child, Duration::from_secs(60), &args.join(" "))
}

/// A fresh directory for one test, removed at the end.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("tessera-cli-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
    fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
    fn s(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A small, fast spmv command line.
fn spmv(extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = ["spmv", "--iters", "2", "--no-faer"]
        .map(String::from)
        .to_vec();
    if !extra.contains(&"--stream-mi") {
        v.extend(["--stream-mi".to_string(), "4".to_string()]);
    }
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

fn run_spmv(extra: &[&str]) -> Out {
    let args = spmv(extra);
    tessera(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

#[test]
fn huge_sim_latencies_are_refused_not_panics() {
    for spec in ["1:latency=1e20s", "1:link-latency=1e30s", "1:latency=1e300"] {
        tessera(&["lu", "--n", "256", "--nb", "64", "--emu", spec]).refused("at most 60s");
    }
}

#[test]
fn sim_memory_of_zero_and_duplicate_keys_are_refused() {
    tessera(&["lu", "--n", "64", "--nb", "32", "--emu", "1:mem=0"]).refused("positive size");
    tessera(&[
        "lu",
        "--n",
        "64",
        "--nb",
        "32",
        "--emu",
        "1:mem=1MiB,mem=2MiB",
    ])
    .refused("key 'mem' is given twice");
}

/// A matrix smaller than the default tile: the default tile is capped at N
/// (`tessera lu --n 256` refused the 448 it had not asked for); a tile the
/// user gives larger than N is still refused, by name.
#[test]
fn lu_default_tile_fits_a_small_matrix() {
    let out = tessera(&["lu", "--n", "64"]);
    out.ok();
    assert!(out.stdout.contains("PASSED"), "{}", out.stdout);
    tessera(&["lu", "--n", "64", "--nb", "128"]).refused("--nb 128 is larger than --n 64");
    let platform = concat!(env!("CARGO_MANIFEST_DIR"), "/platforms/this-machine.toml");
    tessera(&["lu", "--n", "64", "--simulate", platform]).ok();
}

#[test]
fn too_many_workers_is_a_clean_error() {
    let t0 = Instant::now();
    tessera(&["lu", "--n", "256", "--nb", "64", "--workers", "100000"]).refused("at most");
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
}

#[test]
fn zero_counts_are_refused_at_parse() {
    tessera(&["topology", "--workers", "0"]).refused("must be at least 1");
    tessera(&["overhead", "--reps", "0"]).refused("must be at least 1");
    run_spmv(&["--stream-mi", "0"]).refused("must be at least 1");
}

#[test]
fn stream_sizes_that_overflow_or_cannot_fit_are_refused() {
    run_spmv(&["--stream-mi", "18446744073709551615"]).refused("overflow the address space");
    run_spmv(&["--stream-mi", "100000000"]).refused("STREAM arrays");
}

#[test]
fn stream_arrays_inside_the_cache_are_warned_about() {
    let out = run_spmv(&["--gen", "stencil7:8", "--stream-mi", "1"]);
    out.ok();
    if Path::new("/sys/devices/system/cpu/cpu0/cache/index0/size").exists() {
        assert!(out.stderr.contains("measures the cache"), "{}", out.stderr);
    }
}

#[test]
fn spmv_matrices_that_cannot_fit_name_the_size_needed() {
    run_spmv(&["--gen", "dense:100000"]).refused("needs about");
    run_spmv(&["--gen", "stencil27:800"]).refused("needs about");
    let d = Dir::new("bigmtx");
    let f = d.file(
        "big.mtx",
        "%%MatrixMarket matrix coordinate real general\n4 4000000000 1\n1 1 1.0\n",
    );
    let out = run_spmv(&["--matrix", f.to_str().unwrap()]);
    out.refused("needs about");
    assert!(out.stderr.contains("vectors"), "{}", out.stderr);
    // Rows by the billion: checked at the size line, before the row pointers
    // exist (2.5e9 rows had the process killed for memory once they were
    // filled; 2^36 fail the allocation on any machine, and must say why).
    let f = d.file(
        "rows.mtx",
        "%%MatrixMarket matrix coordinate real general
68719476736 3 1
1 1 1.0
",
    );
    let f = f.to_str().unwrap();
    let out = run_spmv(&["--matrix", f]);
    out.refused("rows.mtx:2: spmv on");
    assert!(out.stderr.contains("needs about"), "{}", out.stderr);
    let platform = concat!(env!("CARGO_MANIFEST_DIR"), "/platforms/this-machine.toml");
    tessera(&["spmv", "--matrix", f, "--simulate", platform]).refused("rows.mtx:2: reading");
}

#[test]
fn lu_memory_check_honours_the_address_space_limit() {
    // 512 MiB of matrix under a 400 MiB address space: refused before any
    // allocation, naming the limit.
    tessera_under_ulimit_v(400 << 10, &["lu", "--n", "8192", "--nb", "256"]).refused("ulimit -v");
    // Each computing thread reserves about 600 MiB of address space (faer's
    // GEMM scratch, an arena, a stack): 1 GiB for 2 workers is refused
    // (it used to pass the check, then abort in faer) ...
    tessera_under_ulimit_v(
        1 << 20,
        &["lu", "--n", "256", "--nb", "64", "--workers", "2"],
    )
    .refused("ulimit -v");
    // ... and a run that passes the check completes under its limit.
    tessera_under_ulimit_v(
        4 << 20,
        &["lu", "--n", "256", "--nb", "64", "--workers", "2"],
    )
    .ok();
}

/// `--blocks-per-worker` beyond the rows: a block per row, not an allocation of the
/// count asked for (1e12 aborted with "memory allocation of 16000000000008 bytes
/// failed"), nor a product that wraps to 0 blocks (2^63 x 2 workers).
#[test]
fn blocks_per_worker_beyond_the_rows_runs_a_block_per_row() {
    for bpw in [
        "1000000000000",
        "9223372036854775808",
        "18446744073709551615",
    ] {
        run_spmv(&[
            "--gen",
            "stencil7:6",
            "--blocks-per-worker",
            bpw,
            "--workers",
            "2",
        ])
        .ok();
    }
    run_spmv(&[
        "--gen",
        "stencil7:6",
        "--blocks-per-worker",
        "18446744073709551615",
        "--solver",
        "cg",
    ])
    .ok();
}

/// `lu-kernels` refuses what it cannot measure, naming it, before allocating or spawning:
/// each of these had panicked or aborted (capacity overflow, a 16 EiB allocation, a
/// division by zero).
#[test]
fn lu_kernels_refuses_sizes_it_cannot_measure() {
    let max = "18446744073709551615";
    for (args, want) in [
        (
            vec!["--threads", max],
            "--threads 18446744073709551615: at most",
        ),
        (
            vec!["--what", "panel", "--team", max],
            "--team 18446744073709551615: at most",
        ),
        (vec!["--n", max], "needs about"),
        (vec!["--what", "gemm", "--nb", "5000000000"], "needs about"),
        (vec!["--what", "swap", "--nb", "0"], "--nb 0"),
        (vec!["--what", "gemm", "--nb", "0"], "--nb 0"),
        (vec!["--what", "panel", "--n", "0"], "--n 0"),
        (
            vec!["--what", "panel", "--n", "100", "--nb", "200"],
            "--nb 200 is larger than --n 100",
        ),
    ] {
        let mut all = vec!["lu-kernels", "--rounds", "1"];
        all.extend(args);
        tessera(&all).refused(want);
    }
}

/// `--host-peak-gflops` must give a finite positive rate: 0 and 1e308 (infinite once in
/// FLOP/s) had panicked in the balancer.
#[test]
fn host_peak_outside_positive_finite_rates_is_a_usage_error() {
    for v in ["0", "1e308", "nan", "inf", "-3"] {
        let arg = format!("--host-peak-gflops={v}");
        let out = run_spmv(&["--gen", "stencil7:5", "--balance", "--emu", "1", &arg]);
        out.refused("must be positive and at most 1e9");
    }
    run_spmv(&[
        "--gen",
        "stencil7:5",
        "--balance",
        "--emu",
        "1",
        "--host-peak-gflops",
        "20",
    ])
    .ok();
}

/// A tolerance the first residual already meets: 0 iterations, reported as such, with
/// no rates over no iterations ("SpMV inf GB/s = inf %" before).
#[test]
fn a_solver_that_runs_no_iteration_prints_no_rates() {
    for solver in ["cg", "power"] {
        let out = run_spmv(&["--gen", "stencil7:5", "--solver", solver, "--tol", "1e308"]);
        out.ok();
        assert!(!out.stdout.contains("inf"), "{solver}: {}", out.stdout);
    }
    let out = run_spmv(&["--gen", "stencil7:5", "--solver", "cg", "--tol", "1e308"]);
    assert!(out.stdout.contains("iteration: none ran"), "{}", out.stdout);
}

/// Issue 42, item 8: `--rtol 1e-30` printed "converged" beside a true residual of
/// 1.5e-13. Now a tolerance below 10 x the machine epsilon is refused before any work, and
/// a run that stops as converged while its true residual is above the tolerance says so.
#[test]
fn cg_never_claims_a_tolerance_it_did_not_reach() {
    for opt in ["--rtol", "--tol"] {
        let out = run_spmv(&["--gen", "stencil7:5", "--solver", "cg", opt, "1e-30"]);
        out.refused("--tol 1e-30: below 2.2e-15 (10 x the machine epsilon)");
        assert!(!out.stdout.contains("STREAM"), "{}", out.stdout);
    }
    for cg in ["standard", "pipelined"] {
        let out = tessera(&[
            "spmv",
            "--no-faer",
            "--stream-mi",
            "4",
            "--gen",
            "stencil27:12",
            "--solver",
            "cg",
            "--cg",
            cg,
            "--rtol",
            "3e-15",
            "--iters",
            "500",
        ]);
        out.ok();
        let res: f64 = out
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix("cg: true residual ||b - A x|| / ||b|| = "))
            .unwrap_or_else(|| panic!("no true residual:\n{}", out.stdout))
            .parse()
            .unwrap();
        let claimed = out.stdout.contains("converged: ||r||/||b|| <= rtol");
        let said = out.stdout.contains("cg: not converged to --rtol 3e-15");
        assert_eq!(claimed && res > 3e-15, said, "{cg}: {}", out.stdout);
    }
}

#[test]
fn unknown_solver_is_refused_before_any_work() {
    let out = run_spmv(&["--solver", "foo"]);
    out.refused("unknown --solver 'foo'");
    assert!(
        !out.stdout.contains("STREAM") && !out.stdout.contains("matrix"),
        "{}",
        out.stdout
    );
}

/// `--compare-compact` times the plain SpMV on CPU workers: refused, saying so, with a
/// solver, with devices, and next to `--no-compact` (clap names the conflict).
#[test]
fn compare_compact_outside_the_plain_cpu_spmv_is_refused() {
    let out = run_spmv(&["--solver", "cg", "--compare-compact"]);
    out.refused("--compare-compact times the plain SpMV (--solver spmv) on CPU workers only");
    assert!(!out.stdout.contains("STREAM"), "{}", out.stdout);
    run_spmv(&["--compare-compact", "--emu", "1"])
        .refused("--compare-compact times the CPU kernels: run it without devices");
    run_spmv(&["--compare-compact", "--no-compact"]).refused("--no-compact");
}

/// Fixed by the redesign (`resolve_sched`): kept honest here.
#[test]
fn unknown_scheduler_is_refused() {
    tessera(&["lu", "--n", "64", "--nb", "32", "--sched", "fifo"]).refused("--sched");
}

/// `--balance speed` deals columns over ranks: refused, saying why, where
/// there are none to deal over.
#[test]
fn balance_by_speed_without_ranks_is_refused() {
    tessera(&["lu", "--n", "64", "--nb", "32", "--balance", "speed"])
        .refused("--balance speed deals tile columns over the ranks of a distributed run");
    let platform = concat!(env!("CARGO_MANIFEST_DIR"), "/platforms/h100-node.toml");
    tessera(&[
        "lu",
        "--n",
        "64",
        "--nb",
        "32",
        "--balance",
        "speed",
        "--simulate",
        platform,
    ])
    .refused("a simulated run (--simulate) deals by --balance work or cyclic");
}

#[test]
fn gpu_spec_syntax_is_a_parse_error() {
    tessera(&["lu", "--n", "64", "--nb", "32", "--gpus", "abc"]).refused("not a GPU spec");
}

#[test]
fn fifos_and_devices_are_refused_unopened() {
    let d = Dir::new("fifo");
    let fifo = d.0.join("m.mtx");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    run_spmv(&["--matrix", fifo.to_str().unwrap()]).refused("a FIFO");
    run_spmv(&["--matrix", "/dev/zero"]).refused("a device");
    tessera(&["trace", "summary", "/dev/zero"]).refused("a device");
    tessera(&["trace", "summary", fifo.to_str().unwrap()]).refused("a FIFO");
}

#[test]
fn nan_and_infinite_entries_are_refused_by_line() {
    let d = Dir::new("nan");
    let f = d.file(
        "nan.mtx",
        "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1.0\n2 2 nan\n",
    );
    run_spmv(&["--matrix", f.to_str().unwrap()]).refused("nan.mtx:4: entry (2, 2) is NaN");
    let f = d.file(
        "inf.mtx",
        "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1e400\n2 2 1\n",
    );
    let out = run_spmv(&["--matrix", f.to_str().unwrap(), "--solver", "cg"]);
    out.refused("inf.mtx:3");
}

#[test]
fn on_device_with_too_little_device_memory_is_refused() {
    // x alone (256 KiB for stencil7:32) is more than the device holds.
    for mem in ["64KiB", "1KiB"] {
        let sim = format!("1:own-mem=1,mem={mem}");
        run_spmv(&["--gen", "stencil7:32", "--on-device", "--emu", &sim])
            .refused("would run on the host");
    }
}

#[test]
fn traces_with_huge_names_summarise_and_absurd_times_are_refused() {
    use tessera_engine::trace::{save, ChromeOptions, TaskRecord, Trace, WorkerInfo};
    let d = Dir::new("trace");
    let long = "g".repeat(70_000);
    let trace = |end: u64| Trace {
        workers: vec![WorkerInfo {
            name: "w".repeat(70_000),
            memory_node: 0,
        }],
        tasks: vec![TaskRecord {
            id: 0,
            codelet: long.clone(),
            label: Some(long.clone()),
            worker: 0,
            priority: 0,
            flops: 1e6,
            start: 0,
            end,
            team_rank: 0,
        }],
        transfers: vec![],
        edges: vec![],
        ..Trace::default()
    };
    let f = d.0.join("long.json");
    save(&trace(1000), &f, &ChromeOptions::default()).unwrap();
    let out = tessera(&["trace", "summary", f.to_str().unwrap()]);
    out.ok();
    assert!(out.stdout.contains(&long), "the name is printed whole");
    let f = d.0.join("end.json");
    save(&trace(u64::MAX), &f, &ChromeOptions::default()).unwrap();
    tessera(&["trace", "summary", f.to_str().unwrap()]).refused("is past any run");
}

#[test]
fn absurd_perf_model_samples_are_refused_naming_file_and_codelet() {
    let d = Dir::new("perf");
    let file = d.file(
        "gemm.json",
        "{\"format\":\"tessera-perfmodel\",\"version\":1,\"codelet\":\"gemm\",\"entries\":[\n{\"arch\":\"cpu\",\"size\":8,\"outliers\":0,\"samples\":[1e308,1e308]}\n]}\n",
    );
    let out = tessera(&["perfmodel", "show", "--dir", &d.s("")]);
    out.refused("codelet 'gemm'");
    assert!(
        out.stderr.contains(file.to_str().unwrap()),
        "{}",
        out.stderr
    );
    std::fs::write(
        &file,
        "{\"format\":\"tessera-perfmodel\",\"version\":1,\"codelet\":\"gemm\",\"entries\":[\n{\"arch\":\"cpu\",\"size\":8,\"outliers\":0,\"samples\":[]}\n]}\n",
    )
    .unwrap();
    tessera(&["perfmodel", "show", "--dir", &d.s("")]).refused("no samples");
}

#[test]
fn stale_perf_model_temporaries_are_cleaned_and_empty_saves_said() {
    let d = Dir::new("stale");
    // What kill -9 during a save leaves: no process has this pid.
    let stale = d.file(&format!(".gemm.json.{}.tmp", u32::MAX - 1), "{\"format\"");
    let out = tessera(&[
        "lu",
        "--n",
        "64",
        "--nb",
        "32",
        "--sched",
        "prio",
        "--perfmodel-dir",
        &d.s(""),
    ]);
    out.ok();
    assert!(!stale.exists(), "stale temporary file left");
    assert!(out.stdout.contains("nothing saved"), "{}", out.stdout);
}

#[test]
fn tiny_tiles_warn_that_the_run_is_overhead_bound() {
    let out = tessera(&["lu", "--n", "24", "--nb", "1", "--workers", "2"]);
    out.ok();
    assert!(out.stderr.contains("per-task overhead"), "{}", out.stderr);
}

/// A traced LU long enough to be interrupted, on a machine with 2 cores.
fn traced_lu(trace: &Path) -> Child {
    command(&[
        "lu",
        "--n",
        "6144",
        "--nb",
        "128",
        "--workers",
        "2",
        "--trace",
        trace.to_str().unwrap(),
    ])
    .spawn()
    .unwrap()
}

/// Issue 17: 2 of 13 SIGINTs landed in the trace's save and left half a
/// file, the previous one gone. Now Ctrl-C stops the run cleanly (exit 130,
/// workers joined) and the file is either the previous trace, untouched, or
/// a complete new one, whenever the signal comes; no temporary file stays.
#[test]
fn ctrl_c_leaves_the_trace_whole() {
    let d = Dir::new("sigint");
    let trace = d.0.join("run.json");
    // The previous trace.
    tessera(&[
        "lu",
        "--n",
        "64",
        "--nb",
        "32",
        "--trace",
        trace.to_str().unwrap(),
    ])
    .ok();
    let previous = std::fs::read(&trace).unwrap();
    for delay_ms in [300u64, 1500, 3000] {
        let child = traced_lu(&trace);
        let pid = child.id() as libc::pid_t;
        std::thread::sleep(Duration::from_millis(delay_ms));
        // SAFETY: signalling our own child.
        unsafe { libc::kill(pid, libc::SIGINT) };
        let out = finish(child, Duration::from_secs(120), "traced lu");
        out.no_panic();
        assert!(
            matches!(out.code(), Some(0 | 130)),
            "exit {:?}: {}",
            out.code(),
            out.stderr
        );
        if out.code() == Some(130) {
            assert!(
                out.stderr.contains("interrupted (Ctrl-C)"),
                "{}",
                out.stderr
            );
        }
        let now = std::fs::read(&trace).unwrap();
        if now != previous {
            tessera_engine::trace::load(&trace)
                .unwrap_or_else(|e| panic!("after SIGINT at {delay_ms} ms: {e}"));
        }
        let left: Vec<_> = std::fs::read_dir(&d.0)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n.to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
    std::io::stderr().flush().unwrap();
}

/// `--sim` was renamed `--emu` (issue 25: "sim" means `--simulate` only);
/// the old name still adds the emulated device, and says it was renamed.
#[test]
fn the_old_sim_flag_still_works_and_says_it_was_renamed() {
    let out = tessera(&[
        "lu",
        "--n",
        "128",
        "--nb",
        "32",
        "--workers",
        "1",
        "--sim",
        "1:speed=2",
    ]);
    out.ok();
    assert!(out.stdout.contains("PASSED"), "{}", out.stdout);
    assert!(
        out.stderr.contains("--sim was renamed --emu"),
        "stderr: {}",
        out.stderr
    );
    assert!(
        out.stdout.contains("emu0"),
        "the device is an emulated one: {}",
        out.stdout
    );
    let new = tessera(&[
        "lu",
        "--n",
        "128",
        "--nb",
        "32",
        "--workers",
        "1",
        "--emu",
        "1:speed=2",
    ]);
    new.ok();
    assert!(!new.stderr.contains("renamed"), "stderr: {}", new.stderr);
    // Under --simulate both names are refused (they describe this machine).
    let platform = concat!(env!("CARGO_MANIFEST_DIR"), "/platforms/h100-node.toml");
    tessera(&["lu", "--simulate", platform, "--sim", "1"]).refused("--sim");
    tessera(&["lu", "--simulate", platform, "--emu", "1"]).refused("--emu");
}

/// Issue 42, item 10: settings that meant nothing were taken without a word.
/// Now each is refused (or warned about) with the reason, before any work.
#[test]
fn settings_that_mean_nothing_are_refused() {
    let t0 = Instant::now();
    tessera(&["lu", "--n", "256", "--nb", "64", "--split", "cyclic"]).refused(
        "--split cyclic: places tile columns between the host and devices, and this run has none",
    );
    tessera(&["lu", "--n", "256", "--nb", "64", "--split", "adaptive"])
        .refused("--split adaptive: places tile columns");
    run_spmv(&["--gen", "stencil7:5", "--pc", "jacobi"])
        .refused("--pc jacobi: a preconditioner of CG, but --solver spmv runs no CG");
    run_spmv(&[
        "--gen",
        "stencil7:5",
        "--solver",
        "power",
        "--cg",
        "pipelined",
    ])
    .refused("--cg pipelined: an algorithm of CG, but --solver power runs no CG");
    for (opt, want) in [
        ("--share-b", "--share-b 0: at least 1 call"),
        ("--rows", "--rows 0: a GEMM call needs at least one row"),
    ] {
        tessera(&["lu-kernels", "--what", "gemm", "--nb", "64", opt, "0"]).refused(want);
    }
    let d = Dir::new("cal-runs");
    let out = d.s("cal.toml");
    let cal = |runs: &str, out: &str| {
        tessera(&[
            "calibrate",
            "--n",
            "96",
            "--nb",
            "32",
            "--runs",
            runs,
            "-o",
            out,
        ])
    };
    cal("0", &out).refused("--runs 0: calibrate needs at least one LU run");
    // Refused for its folder, after the warning (nothing measured).
    let out = cal("2", "/proc/tessera-calibrate/cal.toml");
    out.refused("cannot write in /proc");
    assert!(
        out.stderr
            .contains("--runs 2: each size's median needs 3 samples"),
        "{}",
        out.stderr
    );
    assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
}

/// Issue 42, item 10: CG ran on a matrix that is not symmetric without a word.
/// Now a `--matrix` file is checked, and one that is not symmetric is said to be.
#[test]
fn cg_on_a_matrix_that_is_not_symmetric_says_so() {
    let d = Dir::new("cg-sym");
    let header = "%%MatrixMarket matrix coordinate real general\n3 3 7\n";
    let sym = d.file(
        "sym.mtx",
        &format!("{header}1 1 4\n2 2 4\n3 3 4\n1 2 -1\n2 1 -1\n2 3 -1\n3 2 -1\n"),
    );
    let not = d.file(
        "not.mtx",
        &format!("{header}1 1 4\n2 2 4\n3 3 4\n1 2 -1\n2 1 -2\n2 3 -1\n3 2 -1\n"),
    );
    let run = |p: &Path| run_spmv(&["--matrix", p.to_str().unwrap(), "--solver", "cg"]);
    let out = run(&not);
    out.ok();
    assert!(
        out.stderr
            .contains("not.mtx is not symmetric, and CG assumes"),
        "{}",
        out.stderr
    );
    let out = run(&sym);
    out.ok();
    assert!(!out.stderr.contains("not symmetric"), "{}", out.stderr);
}

/// Issue 42, item 12: a matrix of entries near f64's end overflowed, and the
/// kernel was blamed ("SpMV result differs from the reference"). Now the
/// overflow is named as the matrix's.
#[test]
fn an_overflowing_product_is_not_blamed_on_the_kernel() {
    let d = Dir::new("overflow");
    let f = d.file(
        "big.mtx",
        "%%MatrixMarket matrix coordinate real general\n2 2 3\n1 1 1e308\n1 2 1e308\n2 2 1\n",
    );
    let out = run_spmv(&["--matrix", f.to_str().unwrap()]);
    out.refused("overflows f64 (its entries are too large)");
    assert!(
        !out.stderr.contains("differs from the reference"),
        "{}",
        out.stderr
    );
}

/// Issue 42, item 11: `lu-kernels --nb 1` ran for minutes without a word. Now
/// it says, before measuring, how many calls a figure takes and that it is long.
#[test]
fn long_kernel_runs_say_so_first() {
    let mut child = command(&[
        "lu-kernels",
        "--what",
        "gemm",
        "--nb",
        "1",
        "--rows",
        "whole",
        "--rounds",
        "1",
        "--threads",
        "1",
    ])
    .spawn()
    .unwrap();
    let stderr = common::drain(child.stderr.take());
    let stdout = common::drain(child.stdout.take());
    std::thread::sleep(Duration::from_secs(2));
    let _ = child.kill();
    let _ = child.wait();
    let (stderr, _) = (stderr.join().unwrap(), stdout.join().unwrap());
    assert!(
        stderr.contains("lu-kernels --nb 1: 2.0e9 GEMM calls a figure")
            && stderr.contains("this takes minutes"),
        "{stderr}"
    );
}

/// Issue 42, item 9: the CG's "170 % of STREAM triad" came from one triad
/// measured away from the run, in a noisy window. Now the solvers measure it
/// again right after the run and judge their rates against the better figure.
#[test]
fn solver_ratios_use_a_stream_figure_measured_next_to_the_run() {
    for solver in ["cg", "power"] {
        let out = run_spmv(&["--gen", "stencil7:12", "--solver", solver]);
        out.ok();
        let gbs = |line: &str, after: &str| -> f64 {
            let rest = &line[line.find(after).unwrap() + after.len()..];
            rest.split_whitespace().next().unwrap().parse().unwrap()
        };
        let find = |start: &str| {
            out.stdout
                .lines()
                .find(|l| l.starts_with(start))
                .unwrap_or_else(|| panic!("no '{start}' line:\n{}", out.stdout))
        };
        let before = gbs(find("STREAM triad ("), "): ");
        let again = find("STREAM triad again after the run: ");
        let after = gbs(again, "after the run: ");
        let used = gbs(again, "the ratios use the better, ");
        assert_eq!(used, before.max(after), "{}", out.stdout);
        let ratio_line = find("effective: SpMV ");
        assert!(
            ratio_line.contains(&format!("of STREAM triad ({used:.1} GB/s)")),
            "{}",
            out.stdout
        );
    }
}

/// Issue 42: a hand-set `OMPI_COMM_WORLD_SIZE=2` (no rank variable: no
/// launcher) made `lu` refuse to run while `topology` ignored it. Both now
/// run as one process and say why.
#[test]
fn a_stray_launcher_size_is_no_launch_for_any_command() {
    for args in [&["lu", "--n", "64", "--nb", "32"][..], &["topology"]] {
        let child = common::command(args)
            .env("OMPI_COMM_WORLD_SIZE", "2")
            .env_remove("OMPI_COMM_WORLD_RANK")
            .spawn()
            .unwrap();
        let out = common::finish(child, std::time::Duration::from_secs(60), &args.join(" "));
        out.ok();
        assert!(
            out.stderr
                .contains("OMPI_COMM_WORLD_SIZE=2 is set but OMPI_COMM_WORLD_RANK is not"),
            "{:?}: {}",
            args,
            out.stderr
        );
    }
}
