//! Platform descriptions: the machine a simulated run models (nodes, cores,
//! accelerators, links, network), read from TOML (or JSON) with errors that
//! name the file, the key and the problem.
//!
//! ```toml
//! name = "one H100 node"
//! nodes = 1                      # nodes in the cluster (all alike)
//! ranks_per_node = 1             # MPI ranks per node (each gets node/ranks cores)
//! perf_models = "perfmodels"     # optional: measured models, relative to this file
//!
//! [node]
//! cores = 16
//! reserve_core_per_accelerator = true   # TSUBAME: a host core drives each device
//! task_overhead_us = 5                   # runtime cost per task
//!
//! [node.cpu]                     # one core
//! arch = "cpu"                   # the perf models' architecture name
//! gflops = 40                    # default rate for tasks with a flop count
//! peak_gflops = 48               # theoretical peak (reports in % of peak)
//! gbs = 6                        # rate for tasks with bytes but no flops
//! codelets = { gemm = { gflops = 45 }, swap = { gbs = 4 } }
//! slowdown = [1.0, 1.15]        # a core's time with 1, 2.. cores busy (rates: the last)
//!
//! [[node.accelerators]]
//! name = "h100"
//! arch = "cuda"
//! count = 1
//! gflops = 50000
//! half_flops = 2e9               # accelerators want large granularity
//! launch_us = 8
//! memory_gib = 80
//! link = { latency_us = 10, gbs = 25 }
//! only = ["gemm", "trsm"]        # optional: the codelets it can run
//!
//! [network]
//! latency_us = 2
//! gbs = 25                       # per NIC and direction
//! topology = "full-bisection"    # or "fat-tree": no contention in the core
//! ```
//!
//! A task's duration (see `simulate::durations`): the perf models' prediction
//! for (codelet, arch, size) when `perf_models` is given and has one (history
//! or regression); else the processor's rate for the codelet; else its
//! default rate (`gflops` for tasks with flops, `gbs` for the others), with
//! a warning naming the codelet; plus the per-task overhead (cores) or
//! launch latency (accelerators). `codelets` entries and perf models are
//! matched by codelet *name*: any codelet called `gemm` gets `gemm`'s rate.
//!
//! Every value must lie in a physical range (`simulate::bounds`: a slip of
//! many orders of magnitude would otherwise overflow the simulated clock).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// How fast a processor runs one codelet's tasks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rate {
    /// The task's flops at this many GFLOP/s (with the processor's `half_flops`).
    Gflops(f64),
    /// The task's data bytes at this many GB/s (memory-bound kernels).
    Gbs(f64),
    /// A fixed time per task, in seconds.
    Seconds(f64),
}

/// One kind of processor: a CPU core, or one accelerator.
#[derive(Clone, Debug, PartialEq)]
pub struct Processor {
    /// Architecture name, as the perf models know it (`cpu`, `cuda`, ...).
    pub arch: String,
    /// Default rate for tasks that declare flops, GFLOP/s.
    pub gflops: f64,
    /// Theoretical peak, GFLOP/s (`peak_gflops`; default: the fastest of
    /// `gflops` and the codelets' `gflops`), for reports in % of peak; no
    /// rate may pass it, and a codelet's fixed `seconds` is never shorter
    /// than its flops at this rate.
    pub peak: f64,
    /// Flops at which the processor reaches half its rate (0: none);
    /// efficiency is `flops / (flops + half_flops)`.
    pub half_flops: f64,
    /// Default rate for tasks with no flops, over their data bytes, GB/s.
    pub gbs: Option<f64>,
    /// Per-codelet rates (override the defaults), by codelet name: every
    /// codelet of that name gets it, whoever wrote it.
    pub codelets: BTreeMap<String, Rate>,
    /// Team tasks (`tessera_engine::team`): the serial fraction of a team's
    /// run (Amdahl: a team of `s` runs `1 / (f + (1 − f) / s)` times as fast
    /// as one core), per codelet (`codelets.NAME.team_serial`), else this
    /// processor's `team_serial`, else [`DEFAULT_TEAM_SERIAL`](crate::team::DEFAULT_TEAM_SERIAL).
    pub team_serial: f64,
    /// Per-codelet serial fractions (see `team_serial`).
    pub team_serials: BTreeMap<String, f64>,
    /// Cost added to every task: runtime overhead on a core, launch latency
    /// on an accelerator; seconds.
    pub overhead: f64,
    /// Cores only: a task's relative time when `i + 1` cores of the node
    /// are busy (shared memory bandwidth and caches); the models and rates
    /// hold for the last entry's count. Empty: no such effect.
    pub slowdown: Vec<f64>,
}

/// Host ↔ accelerator link (or a NIC): `latency + bytes / bandwidth`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkSpec {
    /// Seconds per transfer.
    pub latency: f64,
    /// Bytes per second.
    pub bandwidth: f64,
}

impl LinkSpec {
    /// Seconds to move `bytes`.
    pub fn seconds(&self, bytes: u64) -> f64 {
        self.latency + bytes as f64 / self.bandwidth
    }
}

/// Accelerators of one kind on each node.
#[derive(Clone, Debug, PartialEq)]
pub struct Accelerator {
    /// Name (track names are `NAME0`, `NAME1`, ...; `NAME` alone for a single device given a name).
    pub name: String,
    /// How many per node.
    pub count: usize,
    /// Its speed.
    pub proc: Processor,
    /// Device memory in bytes (`None`: unlimited).
    pub memory: Option<u64>,
    /// Its link to the host.
    pub link: LinkSpec,
    /// The codelets it can run (`None`: all).
    pub only: Option<Vec<String>>,
}

/// What every node has.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeSpec {
    /// CPU cores.
    pub cores: usize,
    /// One core per accelerator drives it (not a CPU worker).
    pub reserve_core_per_accelerator: bool,
    /// One core's speed.
    pub cpu: Processor,
    /// Accelerator kinds.
    pub accelerators: Vec<Accelerator>,
}

impl NodeSpec {
    /// Accelerators per node, all kinds.
    pub fn accelerator_count(&self) -> usize {
        self.accelerators.iter().map(|a| a.count).sum()
    }

    /// CPU workers of one rank when `ranks` ranks share the node.
    pub fn cpu_workers(&self, ranks: usize) -> usize {
        let reserved = if self.reserve_core_per_accelerator {
            self.accelerator_count()
        } else {
            0
        };
        (self.cores.saturating_sub(reserved) / ranks.max(1)).max(1)
    }

    /// Peak of one node in GFLOP/s: every core and accelerator at its
    /// theoretical peak (`peak_gflops`, else its default rate).
    pub fn peak_gflops(&self) -> f64 {
        self.cores as f64 * self.cpu.peak
            + self
                .accelerators
                .iter()
                .map(|a| a.count as f64 * a.proc.peak)
                .sum::<f64>()
    }
}

/// The interconnect.
#[derive(Clone, Debug, PartialEq)]
pub struct Network {
    /// One NIC per node, each direction: latency and bandwidth.
    pub nic: LinkSpec,
    /// `full-bisection` / `fat-tree` (no contention past the NICs).
    pub topology: String,
}

/// A machine to simulate (see the module doc for the file format).
#[derive(Clone, Debug, PartialEq)]
pub struct Platform {
    /// Name for reports.
    pub name: String,
    /// Nodes (all alike).
    pub nodes: usize,
    /// MPI ranks per node.
    pub ranks_per_node: usize,
    /// Each node.
    pub node: NodeSpec,
    /// The network between nodes.
    pub network: Network,
    /// Measured perf models to predict durations from (resolved path).
    pub perf_models: Option<PathBuf>,
    /// Memory bandwidth of a node in bytes/s (the host part of a solve).
    pub memory_bandwidth: Option<f64>,
}

/// A problem in a platform description: the file, the key, what is wrong.
#[derive(Clone, Debug, PartialEq)]
pub struct PlatformError {
    /// The file (empty for a description given as text).
    pub file: String,
    /// The key, dotted (`node.accelerators[0].link.gbs`), or empty.
    pub key: String,
    /// The problem.
    pub problem: String,
}

impl std::fmt::Display for PlatformError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let file = if self.file.is_empty() {
            "platform"
        } else {
            &self.file
        };
        if self.key.is_empty() {
            write!(f, "{file}: {}", self.problem)
        } else {
            write!(f, "{file}: {}: {}", self.key, self.problem)
        }
    }
}

impl std::error::Error for PlatformError {}

/// The largest platform file read (the shipped ones are a few KiB).
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// `Err` naming the first NaN or infinite number in `v` (at `path`): TOML
/// has them, and the JSON they are converted to does not.
fn not_finite(v: &toml::Value, path: &str, file: &str) -> Result<(), PlatformError> {
    let at = |k: &str| {
        if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        }
    };
    match v {
        toml::Value::Float(f) if f.is_nan() => Err(err(
            file,
            path,
            "nan is not a number (a finite number is required)",
        )),
        toml::Value::Float(f) if f.is_infinite() => Err(err(
            file,
            path,
            format!("{f} is infinite (a finite number is required)"),
        )),
        toml::Value::Table(t) => t.iter().try_for_each(|(k, x)| not_finite(x, &at(k), file)),
        toml::Value::Array(l) => l
            .iter()
            .enumerate()
            .try_for_each(|(i, x)| not_finite(x, &format!("{path}[{i}]"), file)),
        _ => Ok(()),
    }
}

/// Reads one table, remembering the keys used so unknown ones are errors.
struct Table<'a> {
    map: &'a serde_json::Map<String, Value>,
    path: String,
    used: Vec<&'static str>,
    file: &'a str,
}

impl<'a> Table<'a> {
    fn new(v: &'a Value, path: &str, file: &'a str) -> Result<Table<'a>, PlatformError> {
        match v {
            Value::Object(map) => Ok(Table {
                map,
                path: path.to_string(),
                used: Vec::new(),
                file,
            }),
            other => Err(err(
                file,
                path,
                format!("expected a table, got {}", kind(other)),
            )),
        }
    }

    fn key(&self, k: &str) -> String {
        if self.path.is_empty() {
            k.to_string()
        } else {
            format!("{}.{k}", self.path)
        }
    }

    fn get(&mut self, k: &'static str) -> Option<&'a Value> {
        self.used.push(k);
        self.map.get(k)
    }

    fn err(&self, k: &str, problem: impl Into<String>) -> PlatformError {
        err(self.file, &self.key(k), problem)
    }

    fn number(&mut self, k: &'static str) -> Result<Option<f64>, PlatformError> {
        match self.get(k) {
            None => Ok(None),
            Some(Value::Number(n)) => match n.as_f64() {
                Some(x) if x.is_finite() => Ok(Some(x)),
                _ => Err(self.err(k, "expected a finite number")),
            },
            Some(other) => Err(self.err(k, format!("expected a number, got {}", kind(other)))),
        }
    }

    fn positive(&mut self, k: &'static str) -> Result<Option<f64>, PlatformError> {
        match self.number(k)? {
            Some(x) if x > 0.0 => Ok(Some(x)),
            Some(x) => Err(self.err(k, format!("must be positive, got {x}"))),
            None => Ok(None),
        }
    }

    fn non_negative(&mut self, k: &'static str) -> Result<Option<f64>, PlatformError> {
        match self.number(k)? {
            Some(x) if x >= 0.0 => Ok(Some(x)),
            Some(x) => Err(self.err(k, format!("must not be negative, got {x}"))),
            None => Ok(None),
        }
    }

    fn required(&mut self, k: &'static str) -> Result<f64, PlatformError> {
        self.positive(k)?
            .ok_or_else(|| self.err(k, "missing (a positive number is required)"))
    }

    fn count(&mut self, k: &'static str) -> Result<Option<usize>, PlatformError> {
        match self.get(k) {
            None => Ok(None),
            Some(Value::Number(n)) => match n.as_u64() {
                Some(x) if x >= 1 => Ok(Some(x as usize)),
                _ => Err(self.err(k, format!("expected a whole number of at least 1, got {n}"))),
            },
            Some(other) => {
                Err(self.err(k, format!("expected a whole number, got {}", kind(other))))
            }
        }
    }

    fn string(&mut self, k: &'static str) -> Result<Option<String>, PlatformError> {
        match self.get(k) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(self.err(k, format!("expected a string, got {}", kind(other)))),
        }
    }

    fn boolean(&mut self, k: &'static str) -> Result<Option<bool>, PlatformError> {
        match self.get(k) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(self.err(k, format!("expected true or false, got {}", kind(other)))),
        }
    }

    /// Every key must have been read (keys starting with `_` are comments).
    fn finish(self) -> Result<(), PlatformError> {
        for k in self.map.keys() {
            if !k.starts_with('_') && !self.used.contains(&k.as_str()) {
                let mut known: Vec<&str> = self.used.clone();
                known.sort_unstable();
                known.dedup();
                return Err(self.err(k, format!("unknown key (known here: {})", known.join(", "))));
            }
        }
        Ok(())
    }
}

pub(super) fn err(file: &str, key: &str, problem: impl Into<String>) -> PlatformError {
    PlatformError {
        file: file.to_string(),
        key: key.to_string(),
        problem: problem.into(),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a table",
    }
}

/// Read the keys a processor has (`arch`, `gflops`, `half_flops`, `gbs`,
/// `codelets`, and the overhead key) from `t`.
fn read_processor(
    t: &mut Table<'_>,
    default_arch: &str,
    overhead_key: &'static str,
    overhead_default_us: f64,
) -> Result<Processor, PlatformError> {
    let arch = t
        .string("arch")?
        .unwrap_or_else(|| default_arch.to_string());
    let gflops = t.required("gflops")?;
    let peak = t.positive("peak_gflops")?;
    let half_flops = t.non_negative("half_flops")?.unwrap_or(0.0);
    let gbs = t.positive("gbs")?;
    let overhead = t.non_negative(overhead_key)?.unwrap_or(overhead_default_us) * 1e-6;
    let team_serial = fraction(t, "team_serial")?.unwrap_or(crate::team::DEFAULT_TEAM_SERIAL);
    let mut team_serials = BTreeMap::new();
    let slowdown = match t.get("slowdown") {
        None => Vec::new(),
        Some(Value::Array(l)) => l
            .iter()
            .map(|x| match x.as_f64() {
                Some(v) if v > 0.0 && v.is_finite() => Ok(v),
                _ => Err(t.err("slowdown", "expected a list of positive numbers")),
            })
            .collect::<Result<Vec<_>, _>>()?,
        Some(other) => {
            return Err(t.err(
                "slowdown",
                format!("expected a list of positive numbers, got {}", kind(other)),
            ))
        }
    };
    let mut codelets = BTreeMap::new();
    if let Some(v) = t.get("codelets") {
        let path = t.key("codelets");
        let file = t.file;
        let map = match v {
            Value::Object(m) => m,
            other => {
                return Err(err(
                    file,
                    &path,
                    format!("expected a table, got {}", kind(other)),
                ))
            }
        };
        for (name, rate) in map {
            let mut r = Table::new(rate, &format!("{path}.{name}"), file)?;
            let given = [
                r.positive("gflops")?.map(Rate::Gflops),
                r.positive("gbs")?.map(Rate::Gbs),
                r.positive("seconds")?.map(Rate::Seconds),
            ];
            if let Some(f) = fraction(&mut r, "team_serial")? {
                team_serials.insert(name.clone(), f);
            }
            r.finish()?;
            let mut given = given.into_iter().flatten();
            let rate = given.next().ok_or_else(|| {
                err(
                    file,
                    &format!("{path}.{name}"),
                    "give one of gflops, gbs or seconds",
                )
            })?;
            if given.next().is_some() {
                return Err(err(
                    file,
                    &format!("{path}.{name}"),
                    "give only one of gflops, gbs or seconds",
                ));
            }
            codelets.insert(name.clone(), rate);
        }
    }
    // No peak given: the fastest rate the file allows this processor, so
    // that no codelet's rate is past it (issue 42: a codelet rate above the
    // default rate read as 2893 % of the platform's peak).
    let peak = peak.unwrap_or_else(|| {
        codelets.values().fold(gflops, |p, r| match r {
            Rate::Gflops(r) => p.max(*r),
            _ => p,
        })
    });
    Ok(Processor {
        arch,
        gflops,
        peak,
        half_flops,
        gbs: gbs.map(|g| g * 1e9),
        codelets,
        overhead,
        slowdown,
        team_serial,
        team_serials,
    })
}

/// A serial fraction: a number in `[0, 1]`.
fn fraction(t: &mut Table<'_>, k: &'static str) -> Result<Option<f64>, PlatformError> {
    match t.number(k)? {
        Some(x) if (0.0..=1.0).contains(&x) => Ok(Some(x)),
        Some(x) => Err(t.err(k, format!("must be between 0 and 1, got {x}"))),
        None => Ok(None),
    }
}

impl Processor {
    /// How many times faster than one core a team of `size` runs `codelet`.
    pub fn team_speedup(&self, codelet: &str, size: usize) -> f64 {
        let f = self
            .team_serials
            .get(codelet)
            .copied()
            .unwrap_or(self.team_serial);
        crate::team::speedup(size, f)
    }
}

fn link(t: &mut Table<'_>, k: &'static str) -> Result<LinkSpec, PlatformError> {
    let v = t
        .get(k)
        .ok_or_else(|| t.err(k, "missing (a table with latency_us and gbs)"))?;
    let mut l = Table::new(v, &t.key(k), t.file)?;
    let latency = l.non_negative("latency_us")?.unwrap_or(0.0) * 1e-6;
    let bandwidth = l.required("gbs")? * 1e9;
    l.finish()?;
    Ok(LinkSpec { latency, bandwidth })
}

impl Platform {
    /// Read a platform file (`.toml`, or `.json`); a relative `perf_models`
    /// is resolved against the file's folder.
    ///
    /// Only a regular file of at most [`MAX_FILE_BYTES`] is read: a FIFO
    /// would block, `/dev/zero` never end (issue 28). A `perf_models`
    /// folder that does not exist is an error (a misspelt name would
    /// otherwise fall back to the rates without a word).
    pub fn load(path: impl AsRef<Path>) -> Result<Platform, PlatformError> {
        use std::io::Read;
        let path = path.as_ref();
        let file = path.display().to_string();
        let size = crate::FileError::check_regular_file(path).map_err(|e| {
            // The FileError names the file already.
            let text = e.to_string();
            let problem = text
                .strip_prefix(&format!("{file}: "))
                .unwrap_or(&text)
                .to_string();
            err(&file, "", problem)
        })?;
        if size > MAX_FILE_BYTES {
            return Err(err(
                &file,
                "",
                format!(
                    "{size} bytes: too large for a platform description (at most {MAX_FILE_BYTES})"
                ),
            ));
        }
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes))
            .map_err(|e| err(&file, "", e.to_string()))?;
        if bytes.len() as u64 > MAX_FILE_BYTES {
            return Err(err(&file, "", "grew past the size limit while read"));
        }
        let text = String::from_utf8(bytes).map_err(|e| err(&file, "", e.to_string()))?;
        let json = path.extension().is_some_and(|e| e == "json");
        let mut p = Self::parse(&text, json, &file)?;
        if let Some(pm) = &p.perf_models {
            let given = pm.clone();
            if pm.is_relative() {
                let base = path.parent().unwrap_or(Path::new("."));
                p.perf_models = Some(base.join(pm));
            }
            let dir = p.perf_models.as_ref().expect("set above");
            if !dir.is_dir() {
                let what = if dir.exists() {
                    "is not a folder"
                } else {
                    "does not exist"
                };
                return Err(err(
                    &file,
                    "perf_models",
                    format!(
                        "'{}' ({}) {what}: give the folder of the perf models, or no perf_models to time tasks by the rates",
                        given.display(),
                        dir.display()
                    ),
                ));
            }
        }
        Ok(p)
    }

    /// Parse a description given as text (`json`: JSON, else TOML); `file`
    /// names it in errors.
    pub fn parse(text: &str, json: bool, file: &str) -> Result<Platform, PlatformError> {
        let value: Value = if json {
            serde_json::from_str(text).map_err(|e| err(file, "", e.to_string()))?
        } else {
            let t: toml::Value = text.parse().map_err(|e: toml::de::Error| {
                err(file, "", e.to_string().trim().replace('\n', " "))
            })?;
            // JSON has no NaN: converted, it would read as "nothing".
            not_finite(&t, "", file)?;
            serde_json::to_value(t).map_err(|e| err(file, "", e.to_string()))?
        };
        let mut top = Table::new(&value, "", file)?;
        let name = top.string("name")?.unwrap_or_else(|| "unnamed".into());
        let nodes = top.count("nodes")?.unwrap_or(1);
        let ranks_per_node = top.count("ranks_per_node")?.unwrap_or(1);
        let perf_models = top.string("perf_models")?.map(PathBuf::from);
        let memory_bandwidth = top.positive("memory_gbs")?.map(|g| g * 1e9);
        let node_v = top
            .get("node")
            .ok_or_else(|| top.err("node", "missing (the [node] table)"))?;
        let mut n = Table::new(node_v, "node", file)?;
        let cores = n
            .count("cores")?
            .ok_or_else(|| n.err("cores", "missing (a whole number of at least 1)"))?;
        let reserve = n.boolean("reserve_core_per_accelerator")?.unwrap_or(true);
        let overhead_us = n.non_negative("task_overhead_us")?.unwrap_or(5.0);
        let cpu_v = n
            .get("cpu")
            .ok_or_else(|| n.err("cpu", "missing (the [node.cpu] table: one core's speed)"))?;
        let mut c = Table::new(cpu_v, "node.cpu", file)?;
        let mut cpu = read_processor(&mut c, "cpu", "overhead_us", overhead_us)?;
        c.finish()?;
        cpu.overhead = overhead_us * 1e-6;
        let mut accelerators = Vec::new();
        if let Some(v) = n.get("accelerators") {
            let list = match v {
                Value::Array(l) => l,
                other => {
                    return Err(n.err(
                        "accelerators",
                        format!(
                            "expected a list of tables ([[node.accelerators]]), got {}",
                            kind(other)
                        ),
                    ))
                }
            };
            for (i, a) in list.iter().enumerate() {
                let mut t = Table::new(a, &format!("node.accelerators[{i}]"), file)?;
                let name = t.string("name")?.unwrap_or_else(|| format!("acc{i}_"));
                let count = t.count("count")?.unwrap_or(1);
                let proc = read_processor(&mut t, "accel", "launch_us", 0.0)?;
                let memory = t
                    .positive("memory_gib")?
                    .map(|g| (g * (1u64 << 30) as f64) as u64);
                let link = link(&mut t, "link")?;
                let only = match t.get("only") {
                    None => None,
                    Some(Value::Array(l)) => Some(
                        l.iter()
                            .map(|x| match x {
                                Value::String(s) => Ok(s.clone()),
                                other => Err(t.err(
                                    "only",
                                    format!("expected codelet names, got {}", kind(other)),
                                )),
                            })
                            .collect::<Result<Vec<_>, _>>()?,
                    ),
                    Some(other) => {
                        return Err(t.err(
                            "only",
                            format!("expected a list of codelet names, got {}", kind(other)),
                        ))
                    }
                };
                t.finish()?;
                accelerators.push(Accelerator {
                    name,
                    count,
                    proc,
                    memory,
                    link,
                    only,
                });
            }
        }
        n.finish()?;
        super::bounds::sizes(file, nodes, ranks_per_node, cores)?;
        let network = match top.get("network") {
            None if nodes.saturating_mul(ranks_per_node) > 1 => {
                return Err(top.err("network", "missing (needed with more than one rank)"))
            }
            None => Network {
                nic: LinkSpec {
                    latency: 1e-6,
                    bandwidth: 10e9,
                },
                topology: "full-bisection".into(),
            },
            Some(v) => {
                let mut t = Table::new(v, "network", file)?;
                let latency = t.non_negative("latency_us")?.unwrap_or(1.0) * 1e-6;
                let bandwidth = t.required("gbs")? * 1e9;
                let topology = t
                    .string("topology")?
                    .unwrap_or_else(|| "full-bisection".into());
                if !matches!(topology.as_str(), "full-bisection" | "fat-tree") {
                    return Err(t.err(
                        "topology",
                        format!("unknown topology '{topology}' (known: full-bisection, fat-tree)"),
                    ));
                }
                t.finish()?;
                Network {
                    nic: LinkSpec { latency, bandwidth },
                    topology,
                }
            }
        };
        top.finish()?;
        let p = Platform {
            name,
            nodes,
            ranks_per_node,
            node: NodeSpec {
                cores,
                reserve_core_per_accelerator: reserve,
                cpu,
                accelerators,
            },
            network,
            perf_models,
            memory_bandwidth,
        };
        super::bounds::check(&p, file)?;
        Ok(p)
    }

    /// Ranks in all.
    pub fn ranks(&self) -> usize {
        self.nodes * self.ranks_per_node
    }

    /// Peak of the whole machine in GFLOP/s.
    pub fn peak_gflops(&self) -> f64 {
        self.nodes as f64 * self.node.peak_gflops()
    }
}

#[cfg(test)]
mod tests {
    //! Proves that platform files parse, and that every kind of mistake is
    //! reported with the file, the key and the problem.
    use super::*;

    const GOOD: &str = r#"
name = "test"
nodes = 2
[node]
cores = 4
[node.cpu]
gflops = 10
gbs = 5
codelets = { gemm = { gflops = 12 }, swap = { gbs = 3 } }
[[node.accelerators]]
name = "gpu"
arch = "cuda"
count = 2
gflops = 100
memory_gib = 1
link = { latency_us = 10, gbs = 25 }
only = ["gemm"]
[network]
latency_us = 2
gbs = 12.5
"#;

    #[test]
    fn parses_a_description() {
        let p = Platform::parse(GOOD, false, "good.toml").unwrap();
        assert_eq!(p.nodes, 2);
        assert_eq!(p.node.cores, 4);
        assert_eq!(p.node.cpu_workers(1), 2);
        assert_eq!(p.node.cpu.codelets["gemm"], Rate::Gflops(12.0));
        assert_eq!(p.node.cpu.codelets["swap"], Rate::Gbs(3.0));
        let a = &p.node.accelerators[0];
        assert_eq!((a.count, a.memory), (2, Some(1 << 30)));
        assert_eq!(a.link.bandwidth, 25e9);
        assert_eq!(a.only.as_deref(), Some(&["gemm".to_string()][..]));
        assert_eq!(p.network.nic.latency, 2e-6);
        // No peak given: a core's is its fastest rate, gemm's 12 GFLOP/s
        // (issue 42: the default rate, 10, let gemm run past it).
        assert_eq!(p.node.cpu.peak, 12.0);
        assert_eq!(p.peak_gflops(), 2.0 * (4.0 * 12.0 + 2.0 * 100.0));
    }

    fn error(text: &str) -> String {
        Platform::parse(text, false, "bad.toml")
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn errors_name_the_file_the_key_and_the_problem() {
        let e = error(&GOOD.replace("gbs = 25 }", "gbs = -1 }"));
        assert_eq!(
            e,
            "bad.toml: node.accelerators[0].link.gbs: must be positive, got -1"
        );
        let e = error(&GOOD.replace("gflops = 10\n", "gflops = 10\npeak_gflops = 0\n"));
        assert_eq!(e, "bad.toml: node.cpu.peak_gflops: must be positive, got 0");
        let e = error(&GOOD.replace("cores = 4", "cores = \"four\""));
        assert_eq!(
            e,
            "bad.toml: node.cores: expected a whole number, got a string"
        );
        let e = error(&GOOD.replace("cores = 4", "cores = 4\ncorse = 3"));
        assert!(
            e.starts_with("bad.toml: node.corse: unknown key (known here: "),
            "{e}"
        );
        let e = error(&GOOD.replace("gemm = { gflops = 12 }", "gemm = { speed = 12 }"));
        assert_eq!(e, "bad.toml: node.cpu.codelets.gemm.speed: unknown key (known here: gbs, gflops, seconds, team_serial)");
        let e = error(&GOOD.replace(
            "gemm = { gflops = 12 }",
            "gemm = { gflops = 12, team_serial = 1.5 }",
        ));
        assert_eq!(
            e,
            "bad.toml: node.cpu.codelets.gemm.team_serial: must be between 0 and 1, got 1.5"
        );
        let e = error(&GOOD.replace("gflops = 10\n", "gflops = 10\nteam_serial = -0.1\n"));
        assert_eq!(
            e,
            "bad.toml: node.cpu.team_serial: must be between 0 and 1, got -0.1"
        );
        let e = error(&GOOD.replace("[network]\nlatency_us = 2\ngbs = 12.5\n", ""));
        assert_eq!(
            e,
            "bad.toml: network: missing (needed with more than one rank)"
        );
        let e = error("nodes = 1\n[node]\ncores = 2\n");
        assert_eq!(
            e,
            "bad.toml: node.cpu: missing (the [node.cpu] table: one core's speed)"
        );
        let e = error("nodes = [");
        assert!(e.starts_with("bad.toml: ") && e.contains("line 1"), "{e}");
        let e = error(
            &GOOD
                .replace("topology", "x")
                .replace("gbs = 12.5", "gbs = 12.5\ntopology = \"torus\""),
        );
        assert!(
            e.contains("network.topology: unknown topology 'torus'"),
            "{e}"
        );
        let e = Platform::load("/nonexistent/platform.toml")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("/nonexistent/platform.toml: "), "{e}");
    }
}
