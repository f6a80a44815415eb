//! StarPU's sampled perf models and bus files of one machine turned into a
//! Tessera platform file and perf-model folder for `--simulate`
//! (`tessera platform import`): which StarPU model times which of the LU's
//! codelets, how StarPU's sizes become the sizes Tessera looks up, how a
//! panel is timed, and the per-processor rates the models imply.
//!
//! **Sizes.** StarPU keys a model by the bytes of the task's data; the
//! simulator looks a task up by its codelet's size key, which for the LU's
//! codelets is their flop count (`TaskNode::size_key`: they declare flops
//! and no size function). So each StarPU size is turned into the tile size
//! `nb` (GEMM: three `nb × nb` tiles of doubles; TRSM: two; GETRF: one)
//! and then into the flops of Tessera's task of that `nb`. The time at that
//! key is StarPU's mean, stored as the whole history (three copies: its
//! median is the mean, exactly), so a task of a sampled size lasts the
//! mean (the machine's figures, with no per-task overhead or launch
//! latency added: StarPU's means are the whole codelet as its worker timed
//! it). Sizes between samples take the store's `a·size^b` fit.
//!
//! **The panel.** Tessera factors a whole tile column (`PANEL(k)`: GETRF
//! with partial pivoting over the `rows × nb` block below the diagonal);
//! StarPU's LU factors the diagonal tile (`model_11`, GETRF of `nb × nb`)
//! and then solves each tile below it (`model_21`, TRSM with `U(k,k)`).
//! A panel of `t` tiles is timed as StarPU timed the same column's work:
//! `model_11(nb) + (t − 1) · model_21(nb)`, on the same processor. Why
//! this one: it has the panel's flops exactly to leading order
//! (`m·nb² − nb³/3`), and both parts are kernels measured on that
//! machine; scaling `model_11` alone by the flops would time the rows
//! below at a diagonal GETRF's rate (2.5 GFLOP/s on a mirage core, where
//! its TRSM runs at 10), making every tall panel 4x slower than any
//! kernel StarPU measured there. What it leaves out: the pivot search and
//! row interchanges over the whole column, which StarPU's tile kernels
//! do not do; so a panel is predicted somewhat fast. Panels are stored
//! for `t = 1..=`[`PANEL_TILES`] at every `nb` both models sampled: an `N`
//! that is a multiple of a sampled `nb` finds every panel in the history.
//!
//! **Rates.** Each processor's default rate (tasks with no model: the
//! merged `update` and streamed `gemmb` of `--update merged|streamed`) is
//! its GEMM rate at the largest sampled `nb`; so is its `peak_gflops`
//! (the files give no peak). The row swaps have no StarPU model: their
//! rates are guesses, marked so in the file.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use tessera_engine::perfmodel::{PerfModelConfig, PerfModels, Recorded};
use tessera_engine::simulate::starpu::{Machine, PerfModelFile, StarpuError};
use tessera_tasks::kernels::{gemm_flops, getrf_panel_flops, trsm_flops};

use crate::platform_out::PlatformOut;

/// Panels of up to this many tiles get a history entry per height
/// (`N = PANEL_TILES · nb`: 245 760 at `nb` 960, past any of the shipped
/// machines' device memories).
pub const PANEL_TILES: usize = 256;

/// The row swaps' rates: StarPU's LU has no model for them. Guessed for
/// the shipped machines (2010–2014 Xeon cores; Fermi and Kepler GPUs).
const SWAP_GBS_CPU: f64 = 5.0;
/// See [`SWAP_GBS_CPU`].
const SWAP_GBS_GPU: f64 = 50.0;

/// Which StarPU model gives which part of Tessera's LU.
#[derive(Clone, Debug, PartialEq)]
pub struct CodeletMap {
    /// Tessera's `gemm`: StarPU's GEMM update (`model_22`), three tiles.
    pub gemm: String,
    /// Tessera's `trsm` (the `U` row, `L(k,k)⁻¹·A(k,j)`): `model_12`, two tiles.
    pub trsm: String,
    /// The panel's diagonal tile: `model_11` (GETRF), one tile.
    pub getrf: String,
    /// The panel's tiles below the diagonal: `model_21` (TRSM), two tiles.
    pub trsm_below: String,
}

impl Default for CodeletMap {
    /// StarPU's double-precision LU example (`starpu_dlu_lu_model_*`).
    fn default() -> Self {
        CodeletMap {
            gemm: "starpu_dlu_lu_model_22".into(),
            trsm: "starpu_dlu_lu_model_12".into(),
            getrf: "starpu_dlu_lu_model_11".into(),
            trsm_below: "starpu_dlu_lu_model_21".into(),
        }
    }
}

impl CodeletMap {
    /// The keys `--map KEY=SYMBOL` takes.
    pub const KEYS: [&'static str; 4] = ["gemm", "trsm", "getrf", "trsm-below"];

    /// Apply `KEY=SYMBOL`.
    pub fn set(&mut self, assignment: &str) -> Result<(), String> {
        let (k, v) = assignment
            .split_once('=')
            .ok_or_else(|| format!("--map {assignment}: expected KEY=SYMBOL"))?;
        let slot = match k {
            "gemm" => &mut self.gemm,
            "trsm" => &mut self.trsm,
            "getrf" => &mut self.getrf,
            "trsm-below" => &mut self.trsm_below,
            _ => {
                return Err(format!(
                    "--map {assignment}: unknown key '{k}' (known: {})",
                    Self::KEYS.join(", ")
                ))
            }
        };
        *slot = v.to_string();
        Ok(())
    }
}

/// One architecture's figures, for the platform file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ArchFigures {
    /// GEMM GFLOP/s at each sampled `nb`.
    pub gemm_gflops: BTreeMap<usize, f64>,
}

/// What an import produced.
pub struct Imported {
    /// The machine's bus figures.
    pub machine: Machine,
    /// The perf models, keyed as the simulator looks them up.
    pub models: PerfModels,
    /// Per architecture (`cpu`, `cuda0`, ...): its GEMM rates.
    pub archs: BTreeMap<String, ArchFigures>,
    /// The map used.
    pub map: CodeletMap,
    /// The model files read.
    pub files: Vec<PathBuf>,
}

impl Imported {
    /// GFLOP/s of the machine's workers all running GEMMs of `nb`: each
    /// CPU worker (cores less one per GPU, as the platform reserves them)
    /// and each GPU at its modelled rate. `None` when an architecture has
    /// no GEMM sample at `nb`.
    pub fn gemm_bound(&self, nb: usize) -> Option<f64> {
        let cpu_workers = self
            .machine
            .cpus
            .saturating_sub(self.machine.gpus.len())
            .max(1);
        let mut sum = cpu_workers as f64 * self.archs.get("cpu")?.gemm_gflops.get(&nb)?;
        for g in &self.machine.gpus {
            sum += self
                .archs
                .get(&format!("cuda{}", g.id))?
                .gemm_gflops
                .get(&nb)?;
        }
        Some(sum)
    }

    /// The `nb` every architecture has a GEMM sample at, ascending.
    pub fn sampled_nbs(&self) -> Vec<usize> {
        let mut nbs: Vec<usize> = self
            .archs
            .get("cpu")
            .map(|a| a.gemm_gflops.keys().copied().collect())
            .unwrap_or_default();
        nbs.retain(|nb| self.gemm_bound(*nb).is_some());
        nbs
    }
}

/// `nb` of a task whose data is `tiles` square tiles of doubles taking
/// `bytes` in all, or an error naming the entry.
fn tile_nb(bytes: u64, tiles: u64, file: &str, line: usize) -> Result<usize, StarpuError> {
    let per = bytes / tiles / 8;
    let nb = (per as f64).sqrt().round() as u64;
    if nb == 0 || nb * nb * 8 * tiles != bytes {
        return Err(StarpuError {
            file: file.to_string(),
            line: Some(line),
            problem: format!(
                "size {bytes} bytes is not {tiles} square tile(s) of doubles: is this model's codelet the one mapped here?"
            ),
        });
    }
    Ok(nb as usize)
}

/// The rates (GFLOP/s) a simulated processor may have: `simulate::bounds`'
/// range, checked here too so that a refusal names the StarPU file and line.
const GFLOPS: (f64, f64) = (1e-3, 1e7);

/// Per architecture, `nb` → mean seconds, of a model whose tasks hold
/// `tiles` tiles and `flops(nb)` flops; a mean that is not a time, or that
/// puts the task past the rates a simulated processor may have (issue 42:
/// 1e-300 µs wrote `gflops = inf`), is refused with its file and line.
///
/// A size given twice for one architecture keeps its first entry, and a
/// note in `notes` says so (issue 42: the second was dropped silently).
fn by_nb(
    m: &PerfModelFile,
    tiles: u64,
    flops: impl Fn(usize) -> f64,
    notes: &mut Vec<String>,
) -> Result<BTreeMap<String, BTreeMap<usize, f64>>, StarpuError> {
    let mut out: BTreeMap<String, BTreeMap<usize, f64>> = BTreeMap::new();
    let mut first_line: BTreeMap<(String, usize), usize> = BTreeMap::new();
    for c in &m.combinations {
        let (Some(arch), Some(entries)) = (c.arch(), c.implementations.first()) else {
            continue;
        };
        let sizes = out.entry(arch.clone()).or_default();
        for e in entries {
            let nb = tile_nb(e.size, tiles, &m.file, e.line)?;
            let s = e.mean_seconds();
            let gflops = flops(nb) / s / 1e9;
            if !(s > 0.0 && gflops >= GFLOPS.0 && gflops <= GFLOPS.1) {
                return Err(StarpuError {
                    file: m.file.clone(),
                    line: Some(e.line),
                    problem: format!(
                        "mean {:e} us for a task of nb {nb} ({:e} flops) is {gflops:e} GFLOP/s, outside what a simulated processor may run ({:e} to {:e} GFLOP/s)",
                        e.mean_us,
                        flops(nb),
                        GFLOPS.0,
                        GFLOPS.1
                    ),
                });
            }
            match first_line.entry((arch.clone(), nb)) {
                std::collections::btree_map::Entry::Occupied(first) => notes.push(format!(
                    "{}:{}: a second entry for size {} bytes on {arch} (the first at line {}): the first is kept",
                    m.file,
                    e.line,
                    e.size,
                    first.get()
                )),
                std::collections::btree_map::Entry::Vacant(v) => {
                    v.insert(e.line);
                    sizes.insert(nb, s);
                }
            }
        }
    }
    Ok(out)
}

/// Read machine `name` under `dir` (`bus/`, `codelets/45/`) and key its
/// models as the simulator looks Tessera's LU codelets up.
pub fn import(dir: &Path, name: &str, map: &CodeletMap) -> Result<Imported, String> {
    let mut machine = Machine::load(&dir.join("bus"), name).map_err(|e| e.to_string())?;
    let model = |symbol: &str| -> Result<(PathBuf, PerfModelFile), String> {
        let p = dir.join("codelets/45").join(format!("{symbol}.{name}"));
        // Only a file that is not there is "missing" (issue 42: a symlink
        // loop was said to be).
        match std::fs::metadata(&p) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(format!(
                "{}: missing: no model '{symbol}' for machine '{name}' (choose another with --map)",
                p.display()
            ))
            }
            Err(e) => return Err(format!("{}: {e}", p.display())),
            Ok(_) => {}
        }
        let m = PerfModelFile::load(&p).map_err(|e| e.to_string())?;
        Ok((p, m))
    };
    let (gemm_path, gemm) = model(&map.gemm)?;
    let (trsm_path, trsm) = model(&map.trsm)?;
    let (getrf_path, getrf) = model(&map.getrf)?;
    let (below_path, below) = model(&map.trsm_below)?;
    let e = |e: StarpuError| e.to_string();
    let mut notes = Vec::new();
    let gemm = by_nb(&gemm, 3, |nb| gemm_flops(nb, nb, nb), &mut notes).map_err(e)?;
    let trsm = by_nb(&trsm, 2, |nb| trsm_flops(nb, nb), &mut notes).map_err(e)?;
    let getrf = by_nb(&getrf, 1, |nb| getrf_panel_flops(nb, nb), &mut notes).map_err(e)?;
    let below = by_nb(&below, 2, |nb| trsm_flops(nb, nb), &mut notes).map_err(e)?;

    let models = PerfModels::new(PerfModelConfig::default());
    let store = |codelet: &str, arch: &str, key: u64, seconds: f64| -> Result<(), String> {
        // Three copies: the history is then established, and its median
        // is `seconds` itself.
        for _ in 0..3 {
            let r = models.record(codelet, arch, key, seconds);
            if r != Recorded::Accepted {
                return Err(format!(
                    "{codelet} on {arch} at size {key}: {seconds} s was not taken ({r:?}): two sampled sizes of one model map to one size?"
                ));
            }
        }
        Ok(())
    };
    let mut archs: BTreeMap<String, ArchFigures> = BTreeMap::new();
    for (arch, sizes) in &gemm {
        let figures = archs.entry(arch.clone()).or_default();
        for (&nb, &s) in sizes {
            let flops = gemm_flops(nb, nb, nb);
            store("gemm", arch, flops as u64, s)?;
            figures.gemm_gflops.insert(nb, flops / s / 1e9);
        }
    }
    for (arch, sizes) in &trsm {
        for (&nb, &s) in sizes {
            store("trsm", arch, trsm_flops(nb, nb) as u64, s)?;
        }
    }
    // The panel: GETRF of the diagonal tile, then a TRSM per tile below
    // (see the module doc for why).
    for (arch, sizes) in &getrf {
        let Some(below) = below.get(arch) else {
            continue;
        };
        for (&nb, &diag) in sizes {
            let Some(&solve) = below.get(&nb) else {
                continue;
            };
            for t in 1..=PANEL_TILES {
                let seconds = diag + (t - 1) as f64 * solve;
                store("panel", arch, getrf_panel_flops(t * nb, nb) as u64, seconds)?;
            }
        }
    }
    if !archs.contains_key("cpu") {
        return Err(format!(
            "{}: no model for one CPU core: the platform's cores need one",
            gemm_path.display()
        ));
    }
    for g in &machine.gpus {
        if !archs.contains_key(&format!("cuda{}", g.id)) {
            return Err(format!(
                "{}: no model for CUDA device {} though {} has it",
                gemm_path.display(),
                g.id,
                machine.files[4].display()
            ));
        }
    }
    machine.notes.extend(notes);
    Ok(Imported {
        machine,
        models,
        archs,
        map: map.clone(),
        files: vec![gemm_path, trsm_path, getrf_path, below_path],
    })
}

/// The rate at the largest sampled `nb` of `arch` (GFLOP/s).
fn top_rate(f: &ArchFigures) -> f64 {
    f.gemm_gflops.values().next_back().copied().unwrap_or(1.0)
}

/// `s` as a TOML basic string, quotes included: `\\`, `"` and the control
/// characters escaped (issue 42: a name with a quote broke the platform
/// file, and a newline in `--dir` injected keys). Checked by parsing it back
/// in the tests, and every platform text is parsed before it is written.
fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `s` fit for a comment: on one line (escaped as in [`toml_string`]).
fn one_line(s: &str) -> String {
    let q = toml_string(s);
    q[1..q.len() - 1].to_string()
}

/// The platform file of an import whose perf models are saved in the
/// folder `models` (a path relative to the platform file).
pub fn platform_toml(imp: &Imported, models: &str) -> String {
    let m = &imp.machine;
    let mut t = String::new();
    let files: Vec<String> = m
        .files
        .iter()
        .chain(&imp.files)
        .map(|p| p.display().to_string())
        .collect();
    writeln!(
        t,
        "# StarPU machine '{}', imported by `tessera platform import` from:",
        m.name
    )
    .unwrap();
    for f in &files {
        writeln!(t, "#   {}", one_line(f)).unwrap();
    }
    writeln!(
        t,
        "# Kernel times: StarPU's measured means, in {models}/ (sizes keyed as Tessera's\n\
         # codelets are looked up; panel = GETRF of the diagonal tile + a TRSM per tile\n\
         # below, see bench/src/starpu_import.rs). GEMM bound (every worker running GEMMs):"
    )
    .unwrap();
    for nb in imp.sampled_nbs() {
        writeln!(
            t,
            "#   nb {nb}: {:.1} GFLOP/s",
            imp.gemm_bound(nb).expect("sampled")
        )
        .unwrap();
    }
    for n in &m.notes {
        writeln!(t, "# note: {}", one_line(n)).unwrap();
    }
    writeln!(
        t,
        "name = {}",
        toml_string(&format!("StarPU {} (imported)", m.name))
    )
    .unwrap();
    writeln!(
        t,
        "nodes = 1\nranks_per_node = 1\nperf_models = {}\n",
        toml_string(models)
    )
    .unwrap();
    writeln!(
        t,
        "[_starpu]   # where the figures come from (keys starting with _ are not read)\nmachine = {}\ngemm = {}\ntrsm = {}\npanel = [{}, {}]\n",
        toml_string(&m.name),
        toml_string(&imp.map.gemm),
        toml_string(&imp.map.trsm),
        toml_string(&imp.map.getrf),
        toml_string(&imp.map.trsm_below)
    )
    .unwrap();
    writeln!(
        t,
        "[node]\ncores = {}\nreserve_core_per_accelerator = true   # StarPU drives each GPU from a core of its own\n\
         task_overhead_us = 0   # StarPU's means are the whole codelet as its worker timed it\n",
        m.cpus
    )
    .unwrap();
    let cpu = &imp.archs["cpu"];
    let rate = top_rate(cpu);
    writeln!(
        t,
        "[node.cpu]\narch = \"cpu\"\ngflops = {rate:.3}   # GEMM at the largest sampled nb: tasks without a model\n\
         peak_gflops = {rate:.3}   # no peak in StarPU's files: the GEMM rate\n\
         gbs = {SWAP_GBS_CPU}   # guessed (no StarPU model)\n\
         codelets = {{ swap = {{ gbs = {SWAP_GBS_CPU} }}, update = {{ gflops = {rate:.3} }}, gemmb = {{ gflops = {rate:.3} }} }}   # swap guessed (no StarPU model); update, gemmb: GEMM's rate\n"
    )
    .unwrap();
    for g in &m.gpus {
        let arch = format!("cuda{}", g.id);
        let rate = top_rate(&imp.archs[&arch]);
        let bw = g.to_device.bandwidth.min(g.from_device.bandwidth);
        let lat = g.to_device.latency.max(g.from_device.latency);
        writeln!(
            t,
            "[[node.accelerators]]   # CUDA{id}: RAM -> device {:.3} GB/s {:.1} us, device -> RAM {:.3} GB/s {:.1} us (the slower taken, both ways)",
            g.to_device.bandwidth / 1e9,
            g.to_device.latency * 1e6,
            g.from_device.bandwidth / 1e9,
            g.from_device.latency * 1e6,
            id = g.id
        )
        .unwrap();
        if !g.peers.is_empty() {
            let peers: Vec<String> = g
                .peers
                .iter()
                .map(|(p, l)| format!("CUDA{p} {:.3} GB/s", l.bandwidth / 1e9))
                .collect();
            writeln!(
                t,
                "# peer copies ({}): Tessera routes device -> device through the host links",
                peers.join(", ")
            )
            .unwrap();
        }
        writeln!(
            t,
            "name = \"{arch}\"\narch = \"{arch}\"\ncount = 1\ngflops = {rate:.3}\npeak_gflops = {rate:.3}\n\
             launch_us = 0\nmemory_gib = {}\nlink = {{ latency_us = {}, gbs = {} }}\n\
             codelets = {{ swap = {{ gbs = {SWAP_GBS_GPU} }}, update = {{ gflops = {rate:.3} }}, gemmb = {{ gflops = {rate:.3} }} }}   # swap guessed (no StarPU model); update, gemmb: GEMM's rate\n",
            toml_number(g.memory as f64 / (1u64 << 30) as f64),
            toml_number(lat * 1e6),
            toml_number(bw / 1e9)
        )
        .unwrap();
    }
    t
}

/// Write `imp` as the platform file `out` and its models beside it
/// (`out` with `.perfmodels` for its extension), after checking `out`
/// ([`PlatformOut::check`]); returns the models' folder.
pub fn save(imp: &Imported, out: &Path) -> Result<PathBuf, String> {
    let dest = PlatformOut::check(out)?;
    write(imp, &dest)?;
    Ok(dest.models)
}

/// Write `imp` to a checked destination: the models and the platform file
/// that names them replace the old ones together, or nothing changes
/// ([`PlatformOut::save`]).
pub fn write(imp: &Imported, dest: &PlatformOut) -> Result<(), String> {
    let text = platform_toml(imp, &dest.models_name);
    check_platform(imp, &text, &dest.file)?;
    dest.save(&imp.models, &text)
}

/// Read `text` as `--simulate` will read the platform file `out` (every
/// figure in its physical range), before anything is written: an import
/// `--simulate` would refuse is refused, naming the StarPU files the
/// figure came from (issue 42: bandwidths of 1 bps, a latency of 1e300 µs
/// and memories of 1 byte or 2^64-1 were imported).
fn check_platform(imp: &Imported, text: &str, out: &Path) -> Result<(), String> {
    use tessera_engine::simulate::Platform;
    let p = Platform::parse(text, false, &out.display().to_string()).map_err(|e| {
        let m = &imp.machine;
        let from: Vec<&PathBuf> = if e.key.contains(".link") || e.key.ends_with("memory_gib") {
            // Routes, latencies and memsizes: the bus files.
            m.files.iter().collect()
        } else if e.key.contains("flops") {
            imp.files.iter().collect()
        } else {
            m.files.iter().chain(&imp.files).collect()
        };
        let from: Vec<String> = from.iter().map(|f| f.display().to_string()).collect();
        format!(
            "{e}: the import is refused, as --simulate would refuse it (from {})",
            from.join(", ")
        )
    })?;
    let name = format!("StarPU {} (imported)", imp.machine.name);
    if p.name != name {
        return Err(format!(
            "{}: the platform's name reads back as {:?}, not {name:?}",
            out.display(),
            p.name
        ));
    }
    Ok(())
}

/// `x` as a TOML number: plain where that is short, else with an exponent
/// (a latency of 1e300 µs was written as a 300-digit integer, which no
/// TOML reader takes).
fn toml_number(x: f64) -> String {
    if x.is_finite() && x.abs() < 1e15 {
        format!("{x}")
    } else {
        format!("{x:e}")
    }
}
