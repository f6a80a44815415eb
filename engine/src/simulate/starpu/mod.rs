//! StarPU's sampled files, read for the simulator: the perf models of
//! kernels measured on real machines (`perfmodel`), the bus calibration
//! (`bus`) and the SimGrid platform (`xml`) of each machine, and
//! [`Machine`], one machine's bus folder read whole and checked file
//! against file. `tessera platform import` turns them into a platform
//! file and a perf-model folder for `--simulate` (bench/src/starpu_import.rs).
//!
//! Debian's `starpu-examples` ships such files for six machines under
//! [`SAMPLING_DIR`]. Every error names the file, and the line where one
//! applies; nothing here panics on a file's content.

pub mod bus;
pub mod perfmodel;
#[cfg(test)]
mod shipped;
pub mod xml;

use std::fmt;
use std::path::{Path, PathBuf};

pub use perfmodel::{Combination, Device, DeviceKind, Entry, PerfModelFile};
pub use xml::{Link, SimgridPlatform};

/// Where Debian's `starpu-examples` installs the sampled files
/// (`codelets/45/`, `bus/`).
pub const SAMPLING_DIR: &str = "/usr/share/starpu/perfmodels/sampling";

/// A problem with one of StarPU's files: which file, which line (when one
/// applies), what.
#[derive(Clone, Debug, PartialEq)]
pub struct StarpuError {
    /// The file.
    pub file: String,
    /// Its line, from 1.
    pub line: Option<usize>,
    /// What is wrong.
    pub problem: String,
}

impl StarpuError {
    pub(crate) fn at(file: &str, line: usize, problem: impl Into<String>) -> Self {
        StarpuError {
            file: file.to_string(),
            line: Some(line),
            problem: problem.into(),
        }
    }

    pub(crate) fn file(file: &str, problem: impl Into<String>) -> Self {
        StarpuError {
            file: file.to_string(),
            line: None,
            problem: problem.into(),
        }
    }
}

impl fmt::Display for StarpuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{l}: {}", self.file, self.problem),
            None => write!(f, "{}: {}", self.file, self.problem),
        }
    }
}

impl std::error::Error for StarpuError {}

/// The text of a regular file of at most `max` bytes (a FIFO would block,
/// `/dev/zero` never end).
pub(crate) fn read_text(path: &Path, max: u64) -> Result<String, StarpuError> {
    use std::io::Read;
    let file = path.display().to_string();
    let strip = |e: String| {
        e.strip_prefix(&format!("{file}: "))
            .unwrap_or(&e)
            .to_string()
    };
    let size = crate::FileError::check_regular_file(path)
        .map_err(|e| StarpuError::file(&file, strip(e.to_string())))?;
    if size > max {
        return Err(StarpuError::file(
            &file,
            format!("{size} bytes: too large for this kind of file (at most {max})"),
        ));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(max + 1).read_to_end(&mut bytes))
        .map_err(|e| StarpuError::file(&file, e.to_string()))?;
    if bytes.len() as u64 > max {
        return Err(StarpuError::file(
            &file,
            "grew past the size limit while read",
        ));
    }
    String::from_utf8(bytes).map_err(|e| StarpuError::file(&file, format!("not text: {e}")))
}

/// One CUDA device of a [`Machine`].
#[derive(Clone, Debug, PartialEq)]
pub struct Gpu {
    /// Its CUDA number.
    pub id: usize,
    /// Memory, bytes (the platform file's `memsize`).
    pub memory: u64,
    /// RAM → device, one flow alone (the platform file's route).
    pub to_device: Link,
    /// Device → RAM.
    pub from_device: Link,
    /// Whether it copies to its peers directly (`memcpy_peer`).
    pub memcpy_peer: bool,
    /// Device → each other device, when it copies to its peers: (peer id, route).
    pub peers: Vec<(usize, Link)>,
    /// The CPUs nearest first (`.affinity`).
    pub near_cpus: Vec<usize>,
}

/// One machine's bus folder, read whole: CPU count, CUDA devices with
/// their memory and links. OpenCL devices (the same GPUs seen through
/// OpenCL on these machines) and the disk are left out.
#[derive(Clone, Debug, PartialEq)]
pub struct Machine {
    /// The machine's name (`mirage`).
    pub name: String,
    /// CPU cores.
    pub cpus: usize,
    /// CUDA devices, by id.
    pub gpus: Vec<Gpu>,
    /// The files read, for provenance.
    pub files: Vec<PathBuf>,
    /// Disagreements between the files that do not stop the import, each
    /// naming the file and line (hannibal-pitch's platform file routes
    /// its copies 3.6x slower than its `.bandwidth` says: pitched copies).
    pub notes: Vec<String>,
}

/// How far the `.bandwidth` file and the platform file may disagree on a
/// RAM ↔ device bandwidth before a note says so: they are two computations
/// from one calibration (within 1 % on five of the shipped machines).
const AGREE: f64 = 2.0;

impl Machine {
    /// Read `bus/NAME.{config,bandwidth,latency,affinity,platform.xml}`
    /// under `bus_dir`.
    pub fn load(bus_dir: &Path, name: &str) -> Result<Machine, StarpuError> {
        let path = |ext: &str| bus_dir.join(format!("{name}.{ext}"));
        let mut files = Vec::new();
        for ext in ["config", "bandwidth", "latency", "affinity", "platform.xml"] {
            let p = path(ext);
            // Only a file that is not there is "missing" (issue 42: a
            // symlink loop was said to be).
            match std::fs::metadata(&p) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(StarpuError::file(&p.display().to_string(), e.to_string()))
                }
                _ => {}
            }
            if !p.exists() {
                return Err(StarpuError::file(
                    &p.display().to_string(),
                    format!(
                        "missing: machine '{name}' needs its {ext} file (StarPU writes the bus files when it calibrates the bus; is '{name}' spelt as in {}?)",
                        bus_dir.display()
                    ),
                ));
            }
            files.push(p);
        }
        let config = bus::read_config(&files[0])?;
        let bandwidth = bus::Matrix::load(&files[1])?;
        let latency = bus::Matrix::load(&files[2])?;
        let affinity = bus::read_affinity(&files[3], config.cpus)?;
        let xml = SimgridPlatform::load(&files[4])?;
        let (config_file, xml_file) = (files[0].display().to_string(), xml.file.clone());
        let mismatch = |what: &str, a: usize, b: usize| {
            StarpuError::file(
                &xml_file,
                format!(
                    "{b} {what} hosts, but {config_file} says {a}: files of two machines mixed?"
                ),
            )
        };
        if xml.count("CPU") != config.cpus {
            return Err(mismatch("CPU", config.cpus, xml.count("CPU")));
        }
        if xml.count("CUDA") != config.cuda {
            return Err(mismatch("CUDA", config.cuda, xml.count("CUDA")));
        }
        let mut gpus = Vec::with_capacity(config.cuda);
        let mut notes = Vec::new();
        for id in 0..config.cuda {
            let host_id = format!("CUDA{id}");
            let host = xml.host(&host_id).ok_or_else(|| {
                StarpuError::file(
                    &xml_file,
                    format!("no host '{host_id}' (the CUDA devices are numbered from 0)"),
                )
            })?;
            let memory = host.memsize.filter(|m| *m > 0).ok_or_else(|| {
                StarpuError::at(
                    &xml_file,
                    host.line,
                    format!("host '{host_id}' has no memsize"),
                )
            })?;
            let to_device = xml.route("RAM", &host_id)?;
            let from_device = xml.route(&host_id, "RAM")?;
            // Memory node id+1 in the matrices (node 0 is RAM); MB/s.
            let node = id + 1;
            for (from, to, link) in [(0, node, to_device), (node, 0, from_device)] {
                let mbs = bandwidth.get(from, to, "bandwidth")?;
                let b = mbs * 1e6;
                if !b.is_finite() {
                    // Finite in MB/s, past f64 in B/s (it printed "inf MB/s").
                    return Err(StarpuError::at(
                        &bandwidth.file,
                        bandwidth.lines[from],
                        format!(
                            "bandwidth (node {from} to node {to}) is {mbs:e} MB/s, past any bus"
                        ),
                    ));
                }
                latency.get(from, to, "latency")?;
                let ratio = b / link.bandwidth;
                if !(1.0 / AGREE..=AGREE).contains(&ratio) {
                    notes.push(format!(
                        "{}:{}: node {from} to node {to} at {:.0} MB/s, but the platform file routes it at {:.0} MB/s: the platform file's figure is used (StarPU's simulation uses it)",
                        bandwidth.file,
                        bandwidth.lines[from],
                        b / 1e6,
                        link.bandwidth / 1e6
                    ));
                }
            }
            let mut peers = Vec::new();
            if host.memcpy_peer {
                for other in (0..config.cuda).filter(|o| *o != id) {
                    peers.push((other, xml.route(&host_id, &format!("CUDA{other}"))?));
                }
            }
            let near_cpus = affinity
                .iter()
                .find(|(g, _)| *g == id)
                .map(|(_, c)| c.clone())
                .ok_or_else(|| {
                    StarpuError::file(
                        &files[3].display().to_string(),
                        format!("no row for GPU {id}"),
                    )
                })?;
            gpus.push(Gpu {
                id,
                memory,
                to_device,
                from_device,
                memcpy_peer: host.memcpy_peer,
                peers,
                near_cpus,
            });
        }
        Ok(Machine {
            name: name.to_string(),
            cpus: config.cpus,
            gpus,
            files,
            notes,
        })
    }
}

/// A fresh directory under the system temp dir, removed on drop (tests).
#[cfg(test)]
pub(crate) struct Scratch(PathBuf);

#[cfg(test)]
impl Scratch {
    pub(crate) fn new(name: &str) -> Self {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "tessera-starpu-{}-{name}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

#[cfg(test)]
impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
