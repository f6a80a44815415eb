//! Proves the readers on the files Debian's `starpu-examples` ships: every
//! machine's bus folder reads with the CPU and CUDA counts and the device
//! memory sizes the files give, and every perf-model file of
//! `codelets/45/` parses. Skipped, saying so, where the package is absent.

use std::path::Path;

use super::{Machine, PerfModelFile, SAMPLING_DIR};

/// The sampling folder, or `None` (with a message) where it is absent.
fn sampling() -> Option<&'static Path> {
    let dir = Path::new(SAMPLING_DIR);
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("skipped: {SAMPLING_DIR} is absent (apt-get install starpu-examples)");
        None
    }
}

#[test]
fn every_shipped_machine_reads_as_its_files_say() {
    let Some(dir) = sampling() else { return };
    // (machine, CPUs, CUDA devices, bytes of each), from .config and
    // the platform files' memsize.
    let machines = [
        ("attila", 12, 3, 3_220_897_792),
        ("idgraf", 12, 8, 2_817_982_464),
        ("mirage", 12, 3, 5_636_554_752),
        ("sirocco", 24, 4, 12_079_136_768),
        ("hannibal", 8, 3, 3_145_728_000),
        ("hannibal-pitch", 8, 3, 3_145_728_000),
    ];
    for (name, cpus, gpus, memory) in machines {
        let m = Machine::load(&dir.join("bus"), name).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((m.cpus, m.gpus.len()), (cpus, gpus), "{name}");
        for g in &m.gpus {
            assert_eq!(g.memory, memory, "{name} CUDA{}", g.id);
            assert!(g.to_device.bandwidth > 5e8 && g.from_device.bandwidth > 5e8);
            assert_eq!(g.near_cpus.len(), cpus);
        }
    }
    // mirage's RAM -> CUDA0 route: the slowest link is RAM-CUDA0, 6.01 GB/s.
    let m = Machine::load(&dir.join("bus"), "mirage").unwrap();
    assert_eq!(m.gpus[0].to_device.bandwidth, 6_010_679_672.232_608);
    assert!(m.gpus[0].memcpy_peer && m.gpus[0].peers.len() == 2);
}

#[test]
fn every_shipped_perf_model_parses() {
    let Some(dir) = sampling() else { return };
    let mut n = 0;
    for f in std::fs::read_dir(dir.join("codelets/45")).unwrap() {
        let f = f.unwrap().path();
        let m = PerfModelFile::load(&f).unwrap_or_else(|e| panic!("{e}"));
        assert!(!m.combinations.is_empty(), "{}", f.display());
        n += 1;
    }
    assert!(n >= 200, "{n} files");
    // The figure: mirage's double GEMM tile model, one core, 640-wide tiles
    // (three 640x640 doubles: 9 830 400 bytes), 53.19 ms.
    let m = PerfModelFile::load(&dir.join("codelets/45/starpu_dlu_lu_model_22.mirage")).unwrap();
    assert_eq!(m.mean_seconds("cpu", 9_830_400), Some(5.319005e4 / 1e6));
}

#[test]
fn a_missing_bus_file_is_named() {
    let Some(dir) = sampling() else { return };
    let tmp = super::Scratch::new("missing");
    for ext in ["config", "bandwidth", "latency", "platform.xml"] {
        let from = dir.join(format!("bus/mirage.{ext}"));
        std::fs::copy(from, tmp.path().join(format!("mirage.{ext}"))).unwrap();
    }
    let e = Machine::load(tmp.path(), "mirage").unwrap_err().to_string();
    let want = format!(
        "{}: missing: machine 'mirage' needs its affinity file",
        tmp.path().join("mirage.affinity").display()
    );
    assert!(e.starts_with(&want), "{e}");
    // A truncated matrix: named by file and the line where it stops.
    let bw = std::fs::read_to_string(dir.join("bus/mirage.bandwidth")).unwrap();
    let cut = &bw[..bw.find("\n6517.940403").unwrap() + 20];
    std::fs::write(tmp.path().join("mirage.bandwidth"), cut).unwrap();
    std::fs::copy(
        dir.join("bus/mirage.affinity"),
        tmp.path().join("mirage.affinity"),
    )
    .unwrap();
    let e = Machine::load(tmp.path(), "mirage").unwrap_err().to_string();
    let want = format!("{}:4: ", tmp.path().join("mirage.bandwidth").display());
    assert!(e.starts_with(&want), "{e}");
}
