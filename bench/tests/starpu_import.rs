//! Proves `tessera platform import`: a hand-made StarPU machine imports to
//! the figures worked out by hand; the shipped machines import to platform
//! files `--simulate` accepts, with their cores, devices and memories; a
//! simulated LU's GEMM, TRSM and panel tasks last exactly what StarPU's
//! files say at the sampled sizes; and damaged copies of the files are
//! refused with the file and the line. Tests on the shipped files skip,
//! saying so, where `starpu-examples` is not installed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

mod common;

use tessera_bench::starpu_import::{self, CodeletMap, PANEL_TILES};
use tessera_engine::perfmodel::PerfModels;
use tessera_engine::simulate::starpu::{PerfModelFile, SAMPLING_DIR};
use tessera_engine::simulate::{Platform, Simulation};
use tessera_engine::{Config, Runtime, Scheduler};
use tessera_linalg::lu::{lu_simulate, Front, LuOptions};
use tessera_tasks::kernels::{gemm_flops, getrf_panel_flops, trsm_flops};

/// A fresh folder, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!(
            "tessera-starpu-import-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("bus")).unwrap();
        std::fs::create_dir_all(d.join("codelets/45")).unwrap();
        Scratch(d)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The shipped sampling folder, or `None` (saying so).
fn sampling() -> Option<&'static Path> {
    let d = Path::new(SAMPLING_DIR);
    if d.is_dir() {
        Some(d)
    } else {
        eprintln!("skipped: {SAMPLING_DIR} is absent (apt-get install starpu-examples)");
        None
    }
}

/// A StarPU perf-model file: one core (`cpu`) and CUDA device 0, each
/// with `(size, mean µs)` entries.
fn model(cpu: &[(u64, f64)], gpu: &[(u64, f64)]) -> String {
    let mut t = String::from("# Performance Model Version\n45\n# number of combinations\n2\n");
    for (kind, entries) in [(0, cpu), (1, gpu)] {
        t += &format!("1\n{kind}\n0\n1\n1\n{}\n", entries.len());
        t += "0 0 0 0 nan nan 0 0 0\nnan nan nan\n0\n";
        for (size, mean) in entries {
            t += &format!("0000abcd\t{size}\t0\t{mean:e}\t1\t{mean:e}\t0\t1\n");
        }
    }
    t
}

/// A machine of 2 cores and one GPU of 1 GiB; RAM -> GPU 4 GB/s and
/// 10 µs, back 5 GB/s and 12 µs; models at nb = 100 and 200.
fn hand_made(dir: &Path) {
    let bus = dir.join("bus");
    std::fs::write(
        bus.join("tiny.config"),
        "2 # Number of CPUs\n1 # Number of CUDA devices\n0 # Number of OpenCL devices\n",
    )
    .unwrap();
    std::fs::write(
        bus.join("tiny.bandwidth"),
        "# to 0\tto 1\n0\t4000\n5000\t0\n",
    )
    .unwrap();
    std::fs::write(bus.join("tiny.latency"), "0\t10\n12\t0\n").unwrap();
    std::fs::write(bus.join("tiny.affinity"), "# GPU CPU0 CPU1\n0\t1\t0\n").unwrap();
    std::fs::write(
        bus.join("tiny.platform.xml"),
        r#"<?xml version='1.0'?>
<platform version="4"><AS id="AS0" routing="Full">
 <host id="CPU0" speed="1f"/><host id="CPU1" speed="1f"/>
 <host id="CUDA0" speed="1f"><prop id="memsize" value="1073741824"/></host>
 <host id="RAM" speed="1f"/>
 <link id="down" bandwidth="4000000000" latency="0.00001"/>
 <link id="up" bandwidth="5000000000" latency="0.000012"/>
 <route src="RAM" dst="CUDA0"><link_ctn id="down"/></route>
 <route src="CUDA0" dst="RAM"><link_ctn id="up"/></route>
</AS></platform>
"#,
    )
    .unwrap();
    // Bytes of t tiles of nb: t·nb²·8.
    let b = |t: u64, nb: u64| t * nb * nb * 8;
    let m = dir.join("codelets/45");
    let w =
        |name: &str, text: String| std::fs::write(m.join(format!("{name}.tiny")), text).unwrap();
    w(
        "starpu_dlu_lu_model_22",
        model(
            &[(b(3, 100), 1000.0), (b(3, 200), 8000.0)],
            &[(b(3, 100), 100.0), (b(3, 200), 400.0)],
        ),
    );
    w(
        "starpu_dlu_lu_model_12",
        model(&[(b(2, 100), 600.0)], &[(b(2, 100), 60.0)]),
    );
    w(
        "starpu_dlu_lu_model_11",
        model(&[(b(1, 100), 500.0)], &[(b(1, 100), 250.0)]),
    );
    w(
        "starpu_dlu_lu_model_21",
        model(&[(b(2, 100), 300.0)], &[(b(2, 100), 30.0)]),
    );
}

/// A bus bandwidth finite in MB/s but past f64 in B/s is refused naming
/// the file, its line and the figure (it was imported and printed as "inf
/// MB/s" in the note comparing it with the platform file).
#[test]
fn a_bandwidth_past_any_bus_is_refused_naming_its_line() {
    let s = Scratch::new("tiny-huge");
    hand_made(&s.0);
    std::fs::write(
        s.0.join("bus/tiny.bandwidth"),
        "# to 0\tto 1\n0\t4000\n1e305\t0\n",
    )
    .unwrap();
    let Err(e) = starpu_import::import(&s.0, "tiny", &CodeletMap::default()) else {
        panic!("imported a bandwidth of 1e305 MB/s");
    };
    let e = e.to_string();
    assert!(e.contains("tiny.bandwidth:3"), "{e}");
    assert!(e.contains("1e305 MB/s, past any bus"), "{e}");
    assert!(!e.contains("inf"), "{e}");
}

#[test]
fn a_hand_made_machine_imports_to_the_figures_worked_out_by_hand() {
    let s = Scratch::new("tiny");
    hand_made(&s.0);
    let imp = starpu_import::import(&s.0, "tiny", &CodeletMap::default()).unwrap();
    // GEMM of nb 100: 2·10^6 flops in 1 ms on a core (2 GFLOP/s), 0.1 ms
    // on the GPU (20 GFLOP/s); one core drives the GPU, so the bound is
    // 1·2 + 20 = 22 GFLOP/s. At nb 200: 16·10^6 flops, 8 ms and 0.4 ms:
    // 2 + 40 = 42.
    assert_eq!(imp.sampled_nbs(), vec![100, 200]);
    assert!((imp.gemm_bound(100).unwrap() - 22.0).abs() < 1e-9);
    assert!((imp.gemm_bound(200).unwrap() - 42.0).abs() < 1e-9);
    let out = s.0.join("out/tiny.toml");
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let models_dir = starpu_import::save(&imp, &out).unwrap();
    let p = Platform::load(&out).unwrap();
    assert_eq!((p.node.cores, p.node.accelerators.len()), (2, 1));
    let gpu = &p.node.accelerators[0];
    assert_eq!(
        (gpu.proc.arch.as_str(), gpu.memory),
        ("cuda0", Some(1 << 30))
    );
    // Both ways the slower: 4 GB/s, 12 µs.
    assert_eq!(gpu.link.bandwidth, 4e9);
    assert!((gpu.link.latency - 12e-6).abs() < 1e-15);
    // Default rates: GEMM at the largest nb (2 and 40 GFLOP/s).
    assert_eq!((p.node.cpu.gflops, gpu.proc.gflops), (2.0, 40.0));
    let m = PerfModels::load(&models_dir).unwrap();
    let at = |c: &str, arch: &str, key: f64| m.predict(c, arch, key as u64).unwrap().seconds;
    assert_eq!(at("gemm", "cpu", gemm_flops(100, 100, 100)), 1e-3);
    assert_eq!(at("gemm", "cuda0", gemm_flops(200, 200, 200)), 4e-4);
    assert_eq!(at("trsm", "cuda0", trsm_flops(100, 100)), 6e-5);
    // A panel of 3 tiles of 100: GETRF 500 µs + 2 TRSMs of 300 µs on a
    // core; 250 + 2·30 on the GPU.
    assert_eq!(
        at("panel", "cpu", getrf_panel_flops(300, 100)),
        5e-4 + 2.0 * 3e-4
    );
    assert_eq!(
        at("panel", "cuda0", getrf_panel_flops(300, 100)),
        2.5e-4 + 2.0 * 3e-5
    );
    assert_eq!(at("panel", "cpu", getrf_panel_flops(100, 100)), 5e-4);
    let tallest = getrf_panel_flops(PANEL_TILES * 100, 100);
    assert_eq!(
        at("panel", "cpu", tallest),
        5e-4 + (PANEL_TILES - 1) as f64 * 3e-4
    );
}

#[test]
fn damaged_copies_are_refused_with_file_and_line() {
    let s = Scratch::new("damaged");
    hand_made(&s.0);
    let import = || {
        starpu_import::import(&s.0, "tiny", &CodeletMap::default())
            .err()
            .expect("refused")
    };
    let gemm = s.0.join("codelets/45/starpu_dlu_lu_model_22.tiny");
    let good = std::fs::read_to_string(&gemm).unwrap();
    let g = gemm.display();
    // Wrong version (line 2).
    std::fs::write(&gemm, good.replacen("\n45\n", "\n44\n", 1)).unwrap();
    assert!(
        import().starts_with(&format!("{g}:2: perf-model format version 44")),
        "{}",
        import()
    );
    // A NaN mean (the first entry, line 14).
    std::fs::write(&gemm, good.replacen("1e3", "nan", 1)).unwrap();
    assert_eq!(
        import(),
        format!("{g}:14: mean is nan: a measured value must be a finite number, not negative")
    );
    // Truncated after its first entry.
    let cut: Vec<&str> = good.lines().take(14).collect();
    std::fs::write(&gemm, cut.join("\n")).unwrap();
    assert!(
        import().starts_with(&format!("{g}:14: the file ends here")),
        "{}",
        import()
    );
    // A size that is not three square tiles: the model is not a GEMM's.
    std::fs::write(&gemm, good.replacen("240000", "240008", 1)).unwrap();
    assert!(
        import().starts_with(&format!(
            "{g}:14: size 240008 bytes is not 3 square tile(s)"
        )),
        "{}",
        import()
    );
    std::fs::write(&gemm, &good).unwrap();
    // A missing bus file.
    let lat = s.0.join("bus/tiny.latency");
    std::fs::remove_file(&lat).unwrap();
    assert!(
        import().starts_with(&format!("{}: missing", lat.display())),
        "{}",
        import()
    );
    std::fs::write(&lat, "0\t10\n12\t0\n").unwrap();
    // A NaN where the bus needs a figure.
    std::fs::write(&lat, "0\t10\nnan\t0\n").unwrap();
    assert_eq!(
        import(),
        format!(
            "{}:2: latency (node 1 to node 0) is NaN: a measured figure must be positive",
            lat.display()
        )
    );
    std::fs::write(&lat, "0\t10\n12\t0\n").unwrap();
    // A model missing for the machine.
    std::fs::remove_file(&gemm).unwrap();
    assert!(
        import().starts_with(&format!("{g}: missing: no model")),
        "{}",
        import()
    );
}

#[test]
fn every_shipped_machine_with_double_lu_models_imports_for_simulate() {
    let Some(dir) = sampling() else { return };
    for (name, cores, gpus, memory) in [
        ("attila", 12, 3, 3_220_897_792u64),
        ("idgraf", 12, 8, 2_817_982_464),
        ("mirage", 12, 3, 5_636_554_752),
        ("sirocco", 24, 4, 12_079_136_768),
    ] {
        let s = Scratch::new(name);
        let imp = starpu_import::import(dir, name, &CodeletMap::default()).unwrap();
        let out = s.0.join(format!("{name}.toml"));
        starpu_import::save(&imp, &out).unwrap();
        // What `--simulate` does with a platform file.
        let p = Platform::load(&out).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (p.node.cores, p.node.accelerators.len()),
            (cores, gpus),
            "{name}"
        );
        for a in &p.node.accelerators {
            assert_eq!(a.memory, Some(memory), "{name} {}", a.name);
        }
        Simulation::new(p).unwrap();
    }
    // hannibal has single-precision models only: the double LU's are named missing.
    let e = starpu_import::import(dir, "hannibal", &CodeletMap::default())
        .err()
        .unwrap();
    assert!(e.ends_with("missing: no model 'starpu_dlu_lu_model_22' for machine 'hannibal' (choose another with --map)"), "{e}");
    let mut single = CodeletMap::default();
    for m in [
        "gemm=starpu_slu_lu_model_22",
        "trsm=starpu_slu_lu_model_12",
        "getrf=starpu_slu_lu_model_11",
        "trsm-below=starpu_slu_lu_model_21",
    ] {
        single.set(m).unwrap();
    }
    let imp = starpu_import::import(dir, "hannibal", &single);
    // Single-precision tiles are 4-byte: not square tiles of doubles.
    let e = imp.err().unwrap();
    assert!(e.contains("is not 3 square tile(s) of doubles"), "{e}");
}

/// The simulated duration, in the clock's nanoseconds, of a task of
/// `seconds` (`Simulation::after` rounds to the nearest).
fn ns(seconds: f64) -> u64 {
    (seconds * 1e9).round() as u64
}

#[test]
fn a_simulated_lu_lasts_the_files_means_at_sampled_sizes() {
    let Some(dir) = sampling() else { return };
    let s = Scratch::new("exact");
    let imp = starpu_import::import(dir, "mirage", &CodeletMap::default()).unwrap();
    let out = s.0.join("mirage.toml");
    let models_dir = starpu_import::save(&imp, &out).unwrap();
    let model = |symbol: &str| {
        PerfModelFile::load(&dir.join(format!("codelets/45/{symbol}.mirage"))).unwrap()
    };
    let (gemm, trsm, getrf, below) = (
        model("starpu_dlu_lu_model_22"),
        model("starpu_dlu_lu_model_12"),
        model("starpu_dlu_lu_model_11"),
        model("starpu_dlu_lu_model_21"),
    );
    let nb = 640usize;
    let tile = (nb * nb * 8) as u64;
    // The store, as saved: the mean itself at the sampled size.
    let saved = PerfModels::load(&models_dir).unwrap();
    for arch in ["cpu", "cuda0", "cuda1", "cuda2"] {
        let want = gemm.mean_seconds(arch, 3 * tile).unwrap();
        let got = saved
            .predict("gemm", arch, gemm_flops(nb, nb, nb) as u64)
            .unwrap();
        assert_eq!(got.seconds, want, "{arch}");
    }
    // A simulated LU of 6 tiles of 640 on mirage, under the default
    // policy (the cores) and dmda (the GPUs): every task of the trace
    // lasts its model's mean on its worker's architecture.
    let mut seen = std::collections::BTreeSet::new();
    for dmda in [false, true] {
        let sim = Simulation::new(Platform::load(&out).unwrap()).unwrap();
        let mut config = Config::simulated(sim.node(0)).trace(true);
        if dmda {
            config.scheduler = Scheduler::Dmda;
        }
        let rt = Runtime::new(config).unwrap();
        let t = 6;
        lu_simulate(&rt, t * nb, nb, &LuOptions::new(Front::Stf)).unwrap();
        let trace = rt.trace();
        for task in &trace.tasks {
            let worker = &trace.workers[task.worker as usize].name;
            // Workers are named by their processor: cpu3; a device the
            // platform names alone keeps its name, its arch (cuda1).
            let arch = if worker.starts_with("cpu") {
                "cpu".to_string()
            } else {
                worker.to_string()
            };
            let want = match task.codelet.as_str() {
                "gemm" => gemm.mean_seconds(&arch, 3 * tile).unwrap(),
                "trsm" => trsm.mean_seconds(&arch, 2 * tile).unwrap(),
                "panel" => {
                    let label = task.label.as_deref().unwrap();
                    let k: usize = label["panel(".len()..label.len() - 1].parse().unwrap();
                    let tiles = t - k;
                    getrf.mean_seconds(&arch, tile).unwrap()
                        + (tiles - 1) as f64 * below.mean_seconds(&arch, 2 * tile).unwrap()
                }
                _ => continue,
            };
            assert_eq!(
                task.end - task.start,
                ns(want),
                "{} on {worker} ({arch})",
                task.label.as_deref().unwrap_or(&task.codelet)
            );
            seen.insert((task.codelet.clone(), arch == "cpu"));
        }
    }
    assert!(seen.contains(&("gemm".to_string(), false)), "{seen:?}");
    assert!(seen.iter().any(|(c, _)| c == "panel"), "{seen:?}");
    assert!(seen.iter().any(|(_, on_cpu)| *on_cpu), "{seen:?}");
}

#[test]
fn the_command_writes_a_platform_file_or_names_the_missing_file() {
    let s = Scratch::new("cli");
    hand_made(&s.0);
    let out = s.0.join("tiny.toml");
    let dir = s.0.display().to_string();
    let args = |machine: &str| {
        vec![
            "tessera".to_string(),
            "platform".into(),
            "import".into(),
            "--starpu-machine".into(),
            machine.into(),
            "--dir".into(),
            dir.clone(),
            "--out".into(),
            out.display().to_string(),
        ]
    };
    assert_eq!(tessera_bench::cli::main(args("tiny")), 0);
    let p = Platform::load(&out).unwrap();
    assert_eq!(p.name, "StarPU tiny (imported)");
    assert!(s.0.join("tiny.perfmodels/gemm.json").is_file());
    // A machine with no bus files: an error (status 1), no panic.
    std::fs::remove_file(&out).unwrap();
    assert_eq!(tessera_bench::cli::main(args("nowhere")), 1);
    assert!(!out.exists());
}

/// Everything under `dir`, path → content (`None` for a folder), for
/// before/after comparisons.
fn snapshot(dir: &Path) -> std::collections::BTreeMap<PathBuf, Option<Vec<u8>>> {
    let mut all = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let kind = std::fs::symlink_metadata(&p).unwrap().file_type();
            if kind.is_dir() {
                stack.push(p.clone());
                all.insert(p, None);
            } else if kind.is_file() {
                all.insert(p.clone(), Some(std::fs::read(&p).unwrap()));
            } else {
                all.insert(p, Some(b"(special)".to_vec()));
            }
        }
    }
    all
}

/// `tessera platform import` of the hand-made machine in `s` to `out`,
/// under `sh -c PREFIX` (a `ulimit`, or nothing).
fn import_cli(s: &Scratch, out: &Path, prefix: &str) -> common::Out {
    let child = Command::new("sh")
        .arg("-c")
        .arg(format!("{prefix} exec \"$0\" \"$@\""))
        .arg(common::BIN)
        .args(["platform", "import", "--starpu-machine", "tiny", "--dir"])
        .arg(&s.0)
        .arg("--out")
        .arg(out)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    common::finish(child, Duration::from_secs(60), "platform import")
}

/// A folder `name` under `s` holding a previous import's files by hand:
/// `tiny.toml` (unless `platform` is false) and `tiny.perfmodels/gemm.json`.
fn previous(s: &Scratch, name: &str, platform: bool) -> PathBuf {
    let d = s.0.join(name);
    std::fs::create_dir_all(d.join("tiny.perfmodels")).unwrap();
    std::fs::write(d.join("tiny.perfmodels/gemm.json"), "old models").unwrap();
    std::fs::write(d.join("tiny.perfmodels/mine.json"), "kept").unwrap();
    if platform {
        std::fs::write(d.join("tiny.toml"), "old platform").unwrap();
    }
    d
}

/// Issue 42, item 1: with `--out` a folder, a FIFO, or any path whose write
/// failed later, `platform import` had already overwritten
/// `tiny.perfmodels/gemm.json` and added the other models. Now every
/// destination is checked first, and a failed import changes nothing and
/// leaves nothing new; a successful one replaces the old files.
#[test]
fn a_failed_import_changes_nothing() {
    let s = Scratch::new("atomic");
    hand_made(&s.0);
    // --out a folder.
    let d = previous(&s, "folder", false);
    std::fs::create_dir(d.join("tiny.toml")).unwrap();
    let before = snapshot(&d);
    let out = import_cli(&s, &d.join("tiny.toml"), "");
    assert_eq!(snapshot(&d), before, "a file changed");
    out.refused("not a regular file");
    // --out a FIFO nobody reads.
    let d = previous(&s, "fifo", false);
    let fifo = d.join("tiny.toml");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let before = snapshot(&d);
    let out = import_cli(&s, &fifo, "");
    assert_eq!(snapshot(&d), before, "a file changed");
    out.refused("not a regular file");
    // A write that fails part way (files of at most 1 KiB): neither file
    // changes, no temporary is left, and a folder made for them is removed.
    let d = previous(&s, "limited", true);
    let before = snapshot(&d);
    let out = import_cli(&s, &d.join("tiny.toml"), "ulimit -f 1 &&");
    assert_eq!(snapshot(&d), before, "a file changed");
    out.refused("File too large");
    import_cli(&s, &d.join("new/sub/tiny.toml"), "ulimit -f 1 &&").refused("File too large");
    assert!(!d.join("new").exists(), "a folder made by a failed import");
    // A successful import replaces both: the old models are gone.
    import_cli(&s, &d.join("tiny.toml"), "").ok();
    Platform::load(d.join("tiny.toml")).unwrap();
    let models = std::fs::read_to_string(d.join("tiny.perfmodels/gemm.json")).unwrap();
    assert!(models.contains("\"gemm\""), "{models}");
    assert!(!d.join("tiny.perfmodels/mine.json").exists());
    let left: Vec<_> = snapshot(&s.0)
        .into_keys()
        .filter(|p| p.to_string_lossy().ends_with(".tmp") || p.to_string_lossy().ends_with(".old"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// Copy the hand-made machine of `from` into `to` as machine `name`, its
/// files renamed.
fn renamed(from: &Path, to: &Path, name: &str) {
    for sub in ["bus", "codelets/45"] {
        std::fs::create_dir_all(to.join(sub)).unwrap();
        for e in std::fs::read_dir(from.join(sub)).unwrap() {
            let p = e.unwrap().path();
            let file = p
                .file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .replace("tiny", name);
            std::fs::copy(&p, to.join(sub).join(file)).unwrap();
        }
    }
}

/// Issue 42, item 6: names, `--map` symbols and paths were written into the
/// platform file unescaped (a quote broke it, a newline in `--dir` injected
/// keys), and figures `--simulate` refuses were imported. Now every string
/// is escaped, the text is read back as `--simulate` reads it before
/// anything is written, and a model's absurd mean is refused with its file
/// and line.
#[test]
fn imports_are_escaped_and_read_back_before_they_are_written() {
    let s = Scratch::new("escape");
    hand_made(&s.0);
    // A machine named with a quote and a backslash, in a folder whose name
    // holds a newline and a key, with a symbol holding a quote.
    let dir = s.0.join("d\nnodes = 7\n[evil]");
    let name = "ti\"n\\y";
    renamed(&s.0, &dir, name);
    let models = dir.join("codelets/45");
    std::fs::copy(
        models.join(format!("starpu_dlu_lu_model_22.{name}")),
        models.join(format!("g\"emm.{name}")),
    )
    .unwrap();
    let mut map = CodeletMap::default();
    map.set("gemm=g\"emm").unwrap();
    let imp = starpu_import::import(&dir, name, &map).unwrap();
    let out = s.0.join("out.toml");
    starpu_import::save(&imp, &out).unwrap();
    let p = Platform::load(&out).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.name, format!("StarPU {name} (imported)"));
    assert_eq!(p.nodes, 1);
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(!text.contains("\n[evil]"), "{text}");

    // A mean of 1e-300 µs (a rate past any processor): refused at its line.
    let s = Scratch::new("absurd");
    hand_made(&s.0);
    let gemm = s.0.join("codelets/45/starpu_dlu_lu_model_22.tiny");
    let good = std::fs::read_to_string(&gemm).unwrap();
    for bad in ["1e-300", "1e300"] {
        std::fs::write(&gemm, good.replace("1e3", bad)).unwrap();
        let e = starpu_import::import(&s.0, "tiny", &CodeletMap::default())
            .err()
            .expect("refused");
        assert!(
            e.starts_with(&format!("{}:14: mean {bad} us", gemm.display())),
            "{e}"
        );
        assert!(
            e.contains("outside what a simulated processor may run"),
            "{e}"
        );
    }
    std::fs::write(&gemm, &good).unwrap();
    // Bus figures --simulate refuses: a memory of 1 byte or 2^64-1, a
    // bandwidth of 1 byte/s, a latency of 1e300 s. Nothing is written.
    let xml = s.0.join("bus/tiny.platform.xml");
    let good_xml = std::fs::read_to_string(&xml).unwrap();
    for (from, to, key) in [
        ("value=\"1073741824\"", "value=\"1\"", "memory_gib"),
        (
            "value=\"1073741824\"",
            "value=\"18446744073709551615\"",
            "memory_gib",
        ),
        ("bandwidth=\"4000000000\"", "bandwidth=\"1\"", "link.gbs"),
        (
            "latency=\"0.00001\"",
            "latency=\"1e300\"",
            "link.latency_us",
        ),
    ] {
        std::fs::write(&xml, good_xml.replace(from, to)).unwrap();
        let out = s.0.join("bad.toml");
        let e = starpu_import::import(&s.0, "tiny", &CodeletMap::default())
            .and_then(|imp| starpu_import::save(&imp, &out))
            .err()
            .unwrap_or_else(|| panic!("{to}: imported"));
        assert!(
            e.contains(key) && e.contains("the import is refused"),
            "{to}: {e}"
        );
        assert!(e.contains(&xml.display().to_string()), "{e}");
        assert!(!out.exists() && !s.0.join("bad.perfmodels").exists());
    }
}

/// Issue 42, item 12: a symlink loop in place of a model or a bus file was
/// reported as "missing"; now the system's reason is given.
#[test]
fn a_symlink_loop_is_not_called_missing() {
    let s = Scratch::new("loop");
    hand_made(&s.0);
    for file in [
        "codelets/45/starpu_dlu_lu_model_12.tiny",
        "bus/tiny.latency",
    ] {
        let p = s.0.join(file);
        std::fs::remove_file(&p).unwrap();
        std::os::unix::fs::symlink(p.file_name().unwrap(), &p).unwrap();
        let e = starpu_import::import(&s.0, "tiny", &CodeletMap::default())
            .err()
            .expect("refused");
        assert!(e.starts_with(&p.display().to_string()), "{e}");
        assert!(
            !e.contains("missing") && e.contains("symbolic links"),
            "{e}"
        );
        std::fs::remove_file(&p).unwrap();
        hand_made(&s.0);
    }
}

/// Issue 42, item 10: a StarPU model with a size given twice silently kept
/// the first; now a note names both lines.
#[test]
fn a_size_given_twice_is_noted() {
    let s = Scratch::new("twice");
    hand_made(&s.0);
    let gemm = s.0.join("codelets/45/starpu_dlu_lu_model_22.tiny");
    let b = |nb: u64| 3 * nb * nb * 8;
    std::fs::write(
        &gemm,
        model(
            &[(b(100), 1000.0), (b(100), 2000.0), (b(200), 8000.0)],
            &[(b(100), 100.0), (b(200), 400.0)],
        ),
    )
    .unwrap();
    let imp = starpu_import::import(&s.0, "tiny", &CodeletMap::default()).unwrap();
    let note = format!(
        "{}:15: a second entry for size {} bytes on cpu (the first at line 14): the first is kept",
        gemm.display(),
        b(100)
    );
    assert!(imp.machine.notes.contains(&note), "{:?}", imp.machine.notes);
    assert_eq!(imp.archs["cpu"].gemm_gflops[&100], 2.0);
}
