//! Proves the `tessera` binary's second round of hostile cases (issue 28) stay fixed: a
//! closed or full stdout ends a run the Unix way (quietly at EPIPE, an error at ENOSPC),
//! saves write through symlinks and never replace a device or other non-regular file,
//! `calibrate` checks its options and `--out` before measuring and replaces nothing on
//! failure, and the first Ctrl-C stops every subcommand cleanly.

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{command, drain, finish, tessera, wait, Out, BIN};

const PLATFORM: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/platforms/h100-node.toml");

/// A fresh directory for one test, removed at the end.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("tessera-io-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
    fn s(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }
    /// Names of the temporary files left in the directory.
    fn temporaries(&self) -> Vec<String> {
        let mut left = Vec::new();
        let mut stack = vec![self.0.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let e = e.unwrap();
                let name = e.file_name().to_string_lossy().into_owned();
                if name.ends_with(".tmp") || name.ends_with(".old") {
                    left.push(name);
                } else if e.file_type().unwrap().is_dir() {
                    stack.push(e.path());
                }
            }
        }
        left
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

// ---- 1. A closed or full stdout ----

/// Run `args` with stdout into a pipe nobody reads (its reader closed
/// before the run starts, as in `tessera ... | true`).
fn into_closed_pipe(args: &[&str]) -> Out {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    finish(
        command(args).stdout(writer).spawn().unwrap(),
        Duration::from_secs(30),
        &args.join(" "),
    )
}

fn assert_sigpipe(args: &[&str], out: &Out) {
    out.no_panic();
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGPIPE),
        "{args:?}: {:?}\nstderr: {}",
        out.status,
        out.stderr
    );
    assert!(!out.stderr.contains("error"), "{args:?}: {}", out.stderr);
}

/// Issue 28, item 1: every subcommand panicked ("failed printing to stdout:
/// Broken pipe", exit 101) when its stdout was closed. Now each ends by
/// SIGPIPE, quietly, as `cat` does (the shell's status 141).
#[test]
fn a_closed_stdout_ends_the_run_quietly_by_sigpipe() {
    let d = Dir::new("closed");
    let trace = d.s("t.json");
    let cases: [&[&str]; 5] = [
        &[
            "spmv",
            "--gen",
            "stencil7:8",
            "--iters",
            "2",
            "--no-faer",
            "--stream-mi",
            "4",
        ],
        &["lu", "--n", "128", "--nb", "64", "--trace", &trace],
        &["lu", "--n", "128", "--nb", "64", "--simulate", PLATFORM],
        &["topology"],
        &["perfmodel", "show", "--dir", &d.s("models")],
    ];
    for args in cases {
        let out = into_closed_pipe(args);
        assert_sigpipe(args, &out);
    }
}

/// Item 1: `spmv ... | head -1` never exited: the failed print unwound
/// inside the Ctrl-C watcher's scope, whose thread nothing stopped. Now the
/// run ends (by SIGPIPE, or normally if it had written everything already).
#[test]
fn spmv_into_head_ends() {
    for solver in ["power", "cg"] {
        let args = [
            "spmv",
            "--gen",
            "stencil27:40",
            "--iters",
            "2",
            "--no-faer",
            "--stream-mi",
            "4",
            "--solver",
            solver,
        ];
        let mut child = command(&args).spawn().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        stdout.read_line(&mut first).unwrap();
        drop(stdout);
        let out = finish(child, Duration::from_secs(30), &args.join(" "));
        assert!(!first.is_empty(), "no first line: {}", out.stderr);
        if out.code() != Some(0) {
            assert_sigpipe(&args, &out);
        }
    }
}

/// Item 1: a full disk (`> /dev/full`) is an error, said on stderr, exit 1.
#[test]
fn a_full_stdout_is_an_error() {
    for args in [&["topology"][..], &["lu", "--n", "64", "--nb", "32"]] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let out = finish(
            command(args).stdout(full).spawn().unwrap(),
            Duration::from_secs(30),
            "> /dev/full",
        );
        out.refused("writing to stdout: No space left on device");
    }
}

/// Item 1 again: the run's error said to a full stderr still ends with the
/// error's status, 1, not with the panic's 101 (the failed print of the
/// final message was not caught).
#[test]
fn a_full_stderr_still_ends_with_the_error_status() {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = finish(
        command(&["lu", "--n", "64", "--nb", "128"])
            .stderr(full)
            .spawn()
            .unwrap(),
        Duration::from_secs(30),
        "2> /dev/full",
    );
    assert_eq!(
        out.code(),
        Some(1),
        "{:?}\nstdout: {}",
        out.status,
        out.stdout
    );
}

// ---- 5. Saves never replace what is not a regular file ----

fn is_symlink(p: &Path) -> bool {
    std::fs::symlink_metadata(p)
        .unwrap()
        .file_type()
        .is_symlink()
}

fn lu_traced(trace: &str) -> Out {
    tessera(&["lu", "--n", "64", "--nb", "32", "--trace", trace])
}

/// A character device like `/dev/null` (1, 3) in `d`, made with mknod (as
/// root), or the machine's own `/dev/null` where that cannot be harmed (not
/// root: nothing in /dev can be replaced); `None` if neither.
fn null_device(d: &Dir) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let p = d.path("null");
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; makedev(1, 3) is /dev/null's.
    let made = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) };
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    match made {
        0 => Some(p),
        _ if !root => Some("/dev/null".into()),
        _ => None,
    }
}

fn is_char_device(p: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::symlink_metadata(p)
        .unwrap()
        .file_type()
        .is_char_device()
}

/// Issue 28, item 5: `--trace` to a symlink replaced the link by a file (the
/// target kept the old trace); to a device it replaced the device (as root,
/// `/dev/null` became a regular file). Now a link is written through,
/// atomically, a dangling one creates its target, and a device is written
/// directly and stays a device.
#[test]
fn trace_saves_write_through_symlinks_and_into_devices() {
    let d = Dir::new("links");
    let target = d.path("target.json");
    std::fs::write(&target, "old").unwrap();
    let link = d.path("link.json");
    std::os::unix::fs::symlink("target.json", &link).unwrap();
    lu_traced(&d.s("link.json")).ok();
    assert!(is_symlink(&link), "the link was replaced");
    tessera_engine::trace::load(&target).expect("the target holds the new trace");

    let dangling = d.path("dangling.json");
    std::os::unix::fs::symlink(d.path("made.json"), &dangling).unwrap();
    lu_traced(&d.s("dangling.json")).ok();
    assert!(is_symlink(&dangling));
    tessera_engine::trace::load(d.path("made.json")).unwrap();

    // Merged traces go the same way.
    let out = tessera(&["trace", "merge", &d.s("made.json"), "-o", &d.s("link.json")]);
    out.ok();
    assert!(is_symlink(&link));
    tessera_engine::trace::load(&target).unwrap();

    if let Some(null) = null_device(&d) {
        lu_traced(null.to_str().unwrap()).ok();
        assert!(is_char_device(&null), "{} was replaced", null.display());
    }
    lu_traced("/dev/full").refused("No space left on device");
    assert!(is_char_device(Path::new("/dev/full")));
    assert!(d.temporaries().is_empty(), "{:?}", d.temporaries());
}

/// Item 5: a FIFO nobody reads is refused at once (not a hang, and not
/// replaced by a file); a directory is refused and left alone.
#[test]
fn trace_saves_never_replace_a_fifo_or_a_directory() {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::FileTypeExt;
    let d = Dir::new("fifo");
    let fifo = d.path("fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    lu_traced(&d.s("fifo")).refused("fifo");
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
    std::fs::create_dir(d.path("dir")).unwrap();
    lu_traced(&d.s("dir")).refused("is a directory");
    assert!(d.path("dir").is_dir());
    assert!(d.temporaries().is_empty(), "{:?}", d.temporaries());
}

/// Item 5: a perf-model file that is a symlink (models shared between
/// folders) stays a link, and its target gets the new models.
#[test]
fn perf_model_saves_write_through_symlinks() {
    let d = Dir::new("models");
    let models = d.s("models");
    // dmda with a simulated device: the run that measures models.
    let lu = [
        "lu",
        "--n",
        "128",
        "--nb",
        "32",
        "--sched",
        "dmda",
        "--emu",
        "1",
        "--perfmodel-dir",
        &models,
    ];
    tessera(&lu).ok();
    // Any model file the run wrote (codelet names change with the LU).
    let mut files: Vec<PathBuf> = std::fs::read_dir(d.path("models"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let gemm = files.pop().expect("a model file");
    let shared = d.path("shared-gemm.json");
    std::fs::rename(&gemm, &shared).unwrap();
    std::os::unix::fs::symlink(&shared, &gemm).unwrap();
    let before = std::fs::read(&shared).unwrap();
    tessera(&lu).ok();
    assert!(is_symlink(&gemm), "the link was replaced");
    assert_ne!(
        std::fs::read(&shared).unwrap(),
        before,
        "the target kept the old models"
    );
    assert!(d.temporaries().is_empty(), "{:?}", d.temporaries());
}

/// Issue 28, item 16: a legal 255-byte output name was refused, because the
/// temporary file's name (`.NAME.PID.tmp`) was longer than a name may be.
#[test]
fn names_of_255_bytes_are_saved() {
    let d = Dir::new("long");
    let name = format!("{}.json", "t".repeat(250));
    lu_traced(&d.s(&name)).ok();
    tessera_engine::trace::load(d.path(&name)).unwrap();
    let merged = format!("{}.json", "u".repeat(250));
    let out = tessera(&["trace", "merge", &d.s(&name), "-o", &d.s(&merged)]);
    out.ok();
    tessera_engine::trace::load(d.path(&merged)).unwrap();
    assert!(d.temporaries().is_empty(), "{:?}", d.temporaries());
}

/// Issue 42, item 2: `trace merge a.json -o a.json` exited 0 and replaced its
/// input. Now an output that is one of the inputs, by its name, a symlink or
/// a hard link, is refused, and the input stays as it was.
#[test]
fn trace_merge_refuses_to_write_over_an_input() {
    let d = Dir::new("merge-self");
    lu_traced(&d.s("a.json")).ok();
    let before = std::fs::read(d.path("a.json")).unwrap();
    std::os::unix::fs::symlink("a.json", d.path("link.json")).unwrap();
    std::fs::hard_link(d.path("a.json"), d.path("hard.json")).unwrap();
    for (input, output) in [
        ("a.json", "a.json"),
        ("a.json", "link.json"),
        ("a.json", "hard.json"),
        ("link.json", "a.json"),
    ] {
        tessera(&["trace", "merge", &d.s(input), "-o", &d.s(output)])
            .refused("the merge would replace it");
        assert_eq!(
            std::fs::read(d.path("a.json")).unwrap(),
            before,
            "{input} -o {output}"
        );
    }
    assert!(is_symlink(&d.path("link.json")));
    tessera(&["trace", "merge", &d.s("a.json"), "-o", &d.s("b.json")]).ok();
    assert!(d.temporaries().is_empty(), "{:?}", d.temporaries());
}

/// Make a FIFO at `p`.
fn mkfifo(p: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

fn is_fifo(p: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::symlink_metadata(p).unwrap().file_type().is_fifo()
}

/// Issue 42, item 3: `trace gantt -o fifo.svg` hung in `open()` (plotters
/// opened the path itself, blocking until a reader came). Now a chart is
/// saved as every other output: a FIFO nobody reads and a folder are
/// refused at once and left as they were, a symlink is written through, and
/// no temporary is left.
#[test]
fn gantt_saves_never_hang_on_a_fifo() {
    let d = Dir::new("gantt");
    lu_traced(&d.s("t.json")).ok();
    let gantt = |out: &str| {
        common::tessera_within(
            &["trace", "gantt", &d.s("t.json"), "-o", &d.s(out)],
            Duration::from_secs(20),
        )
    };
    for name in ["fifo.svg", "fifo.png"] {
        mkfifo(&d.path(name));
        gantt(name).refused(name);
        assert!(is_fifo(&d.path(name)), "{name} was replaced");
    }
    std::fs::create_dir(d.path("dir.png")).unwrap();
    gantt("dir.png").refused("is a directory");
    assert!(d.path("dir.png").is_dir());
    std::fs::write(d.path("target.svg"), "old").unwrap();
    std::os::unix::fs::symlink("target.svg", d.path("link.svg")).unwrap();
    gantt("link.svg").ok();
    assert!(is_symlink(&d.path("link.svg")));
    let svg = std::fs::read_to_string(d.path("target.svg")).unwrap();
    assert!(svg.starts_with("<svg"), "{svg:.80}");
    gantt("chart.png").ok();
    let png = std::fs::read(d.path("chart.png")).unwrap();
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");
    assert!(d.temporaries().is_empty(), "{:?}", d.temporaries());
}

// ---- 6 and 16. calibrate ----

/// A calibrate run of a second or two, writing to `out`.
fn calibrate_args(out: &str) -> Vec<String> {
    [
        "calibrate",
        "--n",
        "96",
        "--nb",
        "32",
        "--runs",
        "1",
        "--spmv",
        "stencil7:8",
        "--spmv-iters",
        "2",
        "--stream-mi",
        "2",
        "--workers",
        "2",
        "-o",
        out,
    ]
    .map(String::from)
    .to_vec()
}

fn run_args(args: &[String]) -> Out {
    tessera(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// Everything under `dir`, path → content, for before/after comparisons.
fn snapshot(dir: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let mut all = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                all.insert(p.clone(), std::fs::read(&p).unwrap());
            }
        }
    }
    all
}

/// Issue 28, items 6 and 16: mistakes in calibrate's options were found
/// after about 40 s of measuring (`--n` below `--nb`, a read-only or
/// non-file `--out`) or panicked (`--nb 0`); `-o` was not accepted. Now
/// each is refused at once, and nothing is made.
#[test]
fn calibrate_refuses_bad_options_before_measuring() {
    let d = Dir::new("cal-refuse");
    let out = d.s("cal.toml");
    // calibrate's quick arguments with one option's value changed.
    let with = |[opt, value]: [&str; 2]| {
        let mut a = calibrate_args(&out);
        let at = a.iter().position(|a| a == opt).unwrap();
        a[at + 1] = value.to_string();
        a
    };
    let t0 = Instant::now();
    run_args(&with(["--nb", "0"])).refused("--nb 0");
    run_args(&with(["--nb", "128"])).refused("not larger than --nb 128");
    run_args(&with(["--spmv", "nonsense:3"])).refused("--spmv");
    std::fs::create_dir(d.path("folder")).unwrap();
    run_args(&calibrate_args(&d.s("folder"))).refused("not a regular file");
    if let Some(null) = null_device(&d) {
        run_args(&calibrate_args(null.to_str().unwrap())).refused("not a regular file");
        assert!(is_char_device(&null));
        assert!(!d.path("null.perfmodels").exists() && !Path::new("/dev/null.perfmodels").exists());
    }
    run_args(&calibrate_args("/proc/tessera-calibrate/cal.toml")).refused("cannot write in /proc");
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    assert!(!d.path("cal.toml").exists() && !d.path("cal.perfmodels").exists());
    assert!(d.temporaries().is_empty(), "{:?}", d.temporaries());
}

/// Issue 26: calibrate times team panels too (`--panel-teams`, default 2 to
/// the workers), saved under the team's architecture, so that a simulated
/// `lu --panel-team 2` predicts its panels from measurements instead of
/// the one-core model sped up by a guessed serial fraction; a team larger
/// than the workers is refused before measuring.
#[test]
fn calibrate_times_team_panels_for_the_simulator() {
    let d = Dir::new("cal-teams");
    let out = d.s("cal.toml");
    let mut args = calibrate_args(&out);
    args.extend(["--panel-teams", "3"].map(String::from));
    run_args(&args).refused("--panel-teams 3: a team has 1 to 2 CPU workers here");
    assert!(!d.path("cal.toml").exists());
    run_args(&calibrate_args(&out)).ok();
    let text = std::fs::read_to_string(d.path("cal.toml")).unwrap();
    assert!(
        text.contains("with panel teams of 2 (panels saved as cpux2)"),
        "{text}"
    );
    let panel = std::fs::read_to_string(d.path("cal.perfmodels").join("panel.json")).unwrap();
    assert!(panel.contains("\"cpux2\""), "{panel}");
    let sim = tessera(&[
        "lu",
        "--n",
        "96",
        "--nb",
        "32",
        "--workers",
        "2",
        "--panel-team",
        "2",
        "--simulate",
        &out,
    ]);
    sim.ok();
    assert!(
        sim.stdout.contains("panel: a team of up to 2 workers"),
        "{}",
        sim.stdout
    );
    assert!(!sim.stderr.contains("'panel'"), "{}", sim.stderr);
}

/// Item 6: a platform file that cannot be written whole (here `ulimit -f 1`)
/// left a 1024-byte platform cut at `panel = `, after its models had been
/// replaced. Now the models and the platform are replaced together or not
/// at all: the previous ones stay, byte for byte, and no temporary is left.
#[test]
fn calibrate_replaces_both_files_or_neither() {
    let d = Dir::new("cal-atomic");
    let out = d.s("cal.toml");
    run_args(&calibrate_args(&out)).ok();
    let text = std::fs::read_to_string(d.path("cal.toml")).unwrap();
    assert!(text.contains("perf_models = \"cal.perfmodels\""), "{text}");
    assert!(d.path("cal.perfmodels").join("gemm.json").is_file());
    let before = snapshot(&d.0);
    let args = calibrate_args(&out);
    let child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -f 1 && exec \"$0\" \"$@\"")
        .arg(BIN)
        .args(&args[..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let failed = finish(
        child,
        Duration::from_secs(60),
        "calibrate under ulimit -f 1",
    );
    failed.refused("File too large");
    assert_eq!(snapshot(&d.0), before, "a file changed");
    assert!(d.temporaries().is_empty(), "{:?}", d.temporaries());
}

/// Item 16: under `ulimit -v`, calibrate's STREAM run (1.5 GiB by default)
/// aborted; now it is cut to fit, and said so.
#[test]
fn calibrate_fits_stream_under_ulimit_v() {
    let d = Dir::new("cal-ulimit");
    let mut args = calibrate_args(&d.s("cal.toml"));
    let at = args.iter().position(|a| a == "--stream-mi").unwrap();
    args[at + 1] = "64".into();
    let child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 3145728 && exec \"$0\" \"$@\"")
        .arg(BIN)
        .args(&args[..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = finish(child, Duration::from_secs(90), "calibrate under ulimit -v");
    out.ok();
    assert!(out.stderr.contains("STREAM arrays cut"), "{}", out.stderr);
    assert!(d.path("cal.toml").is_file());
}

// ---- 7. Ctrl-C ----

/// Start `args`, send SIGINT after `delay`, and expect a clean stop: exit
/// 130 within `limit` of the signal, the interrupted message, and never the
/// claim that the run had finished.
fn interrupted(args: &[&str], delay: Duration, limit: Duration) -> Out {
    let mut child = command(args).spawn().unwrap();
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    std::thread::sleep(delay);
    assert!(
        child.try_wait().unwrap().is_none(),
        "{args:?} ended before the signal"
    );
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let status = wait(&mut child, limit, &args.join(" "));
    let out = Out {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    };
    out.no_panic();
    assert_eq!(
        out.code(),
        Some(130),
        "{args:?}: {:?}\n{}",
        out.status,
        out.stderr
    );
    assert!(
        out.stderr.contains("interrupted (Ctrl-C)"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("too late"), "{}", out.stderr);
    out
}

/// Issue 28, item 7: only single-process `lu` and `spmv` obeyed the first
/// Ctrl-C; `overhead`, `lu-kernels` and `--simulate` runs went on to the
/// end. Now each stops within seconds with exit 130.
#[test]
fn the_first_ctrl_c_stops_every_subcommand() {
    let s = Duration::from_secs;
    interrupted(
        &[
            "overhead",
            "--independent",
            "3000000",
            "--chain",
            "3000000",
            "--reps",
            "20",
            "--no-starpu",
            "--workers",
            "2",
        ],
        s(2),
        s(10),
    );
    interrupted(
        &[
            "lu-kernels",
            "--what",
            "gemm,trsm",
            "--nb",
            "512,1024",
            "--rounds",
            "200",
            "--threads",
            "2",
        ],
        s(2),
        s(15),
    );
    interrupted(
        &["lu", "--simulate", PLATFORM, "--n", "40000", "--nb", "128"],
        s(2),
        s(10),
    );
}

/// Item 7: calibrate interrupted at 2 s went on for 11 s and overwrote the
/// existing platform. Now it stops and leaves the previous files as they were.
#[test]
fn ctrl_c_stops_calibrate_and_keeps_the_previous_platform() {
    let d = Dir::new("cal-sigint");
    let out = d.s("cal.toml");
    run_args(&calibrate_args(&out)).ok();
    let before = snapshot(&d.0);
    let mut args = calibrate_args(&out);
    let at = args.iter().position(|a| a == "--n").unwrap();
    args[at + 1] = "3072".into();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    interrupted(&args, Duration::from_secs(2), Duration::from_secs(15));
    assert_eq!(snapshot(&d.0), before, "a file changed");
    assert!(d.temporaries().is_empty(), "{:?}", d.temporaries());
}

// ---- 15. Extrapolated predictions ----

/// Issue 28, item 15: `--simulate` extrapolated calibrated models far beyond
/// the sizes they were measured at, without a word. Now it warns, naming
/// the codelet and the measured sizes.
#[test]
fn simulate_warns_when_it_extrapolates_far_from_calibrated_sizes() {
    let platform = concat!(env!("CARGO_MANIFEST_DIR"), "/platforms/this-machine.toml");
    // Calibrated at nb 448: nb 1024 is 12x the largest GEMM measured.
    let out = tessera(&["lu", "--simulate", platform, "--n", "8192", "--nb", "1024"]);
    out.ok();
    assert!(
        out.stderr.contains("codelet 'gemm' on cpu") && out.stderr.contains("extrapolated"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("x above the largest of the sizes"),
        "{}",
        out.stderr
    );
    let near = tessera(&["lu", "--simulate", platform, "--n", "8192", "--nb", "448"]);
    near.ok();
    assert!(!near.stderr.contains("extrapolated"), "{}", near.stderr);
    // Issue 42, item 12: a size far below the measured ones was said to be
    // "beyond" them.
    let small = tessera(&["lu", "--simulate", platform, "--n", "4096", "--nb", "64"]);
    small.ok();
    assert!(
        small.stderr.contains("x below the smallest of the sizes"),
        "{}",
        small.stderr
    );
}

// ---- 14. STREAM ----

/// Issue 28, item 14: the triad read 700 to 9,300 GB/s on a 2-core VM (the
/// clock started after the work had begun). Now each figure printed is
/// within what the threads can move (200 GB/s a thread at most), or the run
/// refuses it; five runs, since the old timing failed one run in three.
#[test]
fn stream_triad_figures_are_physically_possible() {
    for _ in 0..5 {
        let out = tessera(&[
            "spmv",
            "--gen",
            "stencil27:10",
            "--iters",
            "5",
            "--no-faer",
            "--stream-mi",
            "1",
        ]);
        if out.code() != Some(0) {
            out.refused("so the figure is refused");
            continue;
        }
        let line = out
            .stdout
            .lines()
            .find(|l| l.starts_with("STREAM triad ("))
            .unwrap_or_else(|| panic!("no STREAM line:\n{}", out.stdout));
        let threads: f64 = line["STREAM triad (".len()..]
            .split_whitespace()
            .next()
            .and_then(|t| t.parse().ok())
            .unwrap();
        let gbs: f64 = line
            .rsplit(": ")
            .next()
            .and_then(|r| r.trim_end_matches(" GB/s").parse().ok())
            .unwrap();
        assert!(gbs > 0.0 && gbs <= threads * 200.0, "{line}");
    }
}
