//! Performance models: measured execution times per (codelet, architecture, size), robust to spikes, persisted as JSON.
//!
//! Workers [`record`](PerfModels::record) each task's duration; schedulers ask
//! for a [`predict`](PerfModels::predict)ion, and explore an architecture while
//! it is still [`calibrating`](PerfModels::calibrating) (StarPU's calibration
//! mode). The estimate at a size is the median of its recent history; spikes
//! farther than `outlier_k`·MAD from the median are counted and left out, so a
//! 100× timing glitch cannot send all work to one device. Sizes never measured
//! get a regression `t = a·size^b` over the per-size medians.
//!
//! # Concurrency
//!
//! Two levels of [`DashMap`]: (codelet, architecture) → family, then size →
//! history. Recording locks one shard of each (read on the outer, write on the
//! inner), so workers finishing different tasks rarely meet and no global lock
//! sits on the completion path.
//!
//! Lock order: an outer shard, then an inner shard of a family in it. No code
//! takes an outer guard while holding an inner one, nor two outer guards at
//! once (no `get` on `families` while iterating it), so there is no cycle.
//!
//! # Files
//!
//! One JSON file per codelet, `<dir>/<codelet>.json` (see [`file_name`] for
//! names that are not safe as file names), holding the accepted samples of each
//! (architecture, size) so that a load rebuilds the same medians. A save writes
//! a temporary file and renames it over the old one: a crash mid-save leaves the
//! previous model, never half a file. Two processes saving the same codelet:
//! the last rename wins.

use std::borrow::Borrow;
use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::fs;
use std::hash::{Hash, Hasher};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use dashmap::DashMap;

use crate::{FileError, FileErrorKind};
use serde::{Deserialize, Serialize};

/// Default for [`PerfModelConfig::min_samples`].
pub const DEFAULT_MIN_SAMPLES: usize = 3;
/// Default for [`PerfModelConfig::history_len`].
pub const DEFAULT_HISTORY_LEN: usize = 64;
/// Default for [`PerfModelConfig::outlier_k`].
pub const DEFAULT_OUTLIER_K: f64 = 5.0;

/// Samples a history needs before spikes are rejected: with fewer, median and
/// MAD are too unstable to judge a sample by.
pub const ESTABLISHED: usize = 5;

/// The rejection band is at least this fraction of the median: a history of
/// identical samples (MAD 0) still accepts small jitter.
const REL_FLOOR: f64 = 0.05;

/// ... and at least this many seconds (clock resolution), for a median of 0.
const ABS_FLOOR: f64 = 1e-9;

/// Consecutive, mutually consistent outliers that replace the history: the
/// timings have moved (another kernel version, clock frequency, contention)
/// rather than spiked. Without this, a model whose true time doubled would
/// reject every new sample forever.
const REGIME_RUN: usize = 8;

/// Format tag and version written in each file.
const FORMAT: &str = "tessera-perfmodel";
const VERSION: u64 = 1;

/// Environment variable naming the model directory (see [`default_dir`]).
pub const DIR_ENV: &str = "TESSERA_PERFMODEL_DIR";

/// The model directory used when none is given: `$TESSERA_PERFMODEL_DIR`, else
/// `~/.tessera/perfmodels`; `None` when neither that variable nor a home
/// directory (`HOME`, or `USERPROFILE` on Windows) is set.
pub fn default_dir() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var(DIR_ENV) {
        return Some(PathBuf::from(dir));
    }
    let home = var("HOME").or_else(|| var("USERPROFILE"))?;
    Some(Path::new(&home).join(".tessera").join("perfmodels"))
}

// ---------------------------------------------------------------------------
// Configuration and results
// ---------------------------------------------------------------------------

/// How a [`PerfModels`] collects and persists samples.
#[derive(Clone, Debug, PartialEq)]
pub struct PerfModelConfig {
    /// Where [`PerfModels::save`] writes; `None` keeps the models in memory
    /// only (use [`default_dir`] for the usual place).
    pub dir: Option<PathBuf>,
    /// Accepted samples a size needs before its median is trusted; below it
    /// the key is [`calibrating`](PerfModels::calibrating). At least 1.
    pub min_samples: usize,
    /// Accepted samples kept per (codelet, architecture, size), newest last.
    /// At least `min_samples`.
    pub history_len: usize,
    /// A sample farther than `outlier_k`·max(MAD, 5 % of the median) from the
    /// median of an established history is an outlier. Finite and positive.
    pub outlier_k: f64,
}

impl Default for PerfModelConfig {
    /// In memory, 3 samples to calibrate, 64 kept, outliers beyond 5·MAD.
    fn default() -> Self {
        Self {
            dir: None,
            min_samples: DEFAULT_MIN_SAMPLES,
            history_len: DEFAULT_HISTORY_LEN,
            outlier_k: DEFAULT_OUTLIER_K,
        }
    }
}

/// What [`PerfModels::record`] did with a sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recorded {
    /// Added to the history.
    Accepted,
    /// A spike: counted as an outlier, not used by the estimate.
    Outlier,
    /// Completed a run of consistent outliers, which replaced the history
    /// (the timings moved for good).
    Shifted,
    /// Not a finite, non-negative number of seconds; ignored.
    Invalid,
}

/// Where a [`Prediction`] comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PredictionSource {
    /// The median of the measurements at that size.
    History,
    /// The fit `t = a·size^b` over the other sizes of that codelet and architecture.
    Regression,
}

/// An expected execution time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Prediction {
    /// Expected time in seconds.
    pub seconds: f64,
    /// How it was obtained.
    pub source: PredictionSource,
    /// Accepted samples behind it: at that size ([`History`](PredictionSource::History)),
    /// or over all sizes of the fit ([`Regression`](PredictionSource::Regression)).
    pub samples: usize,
}

/// A least-squares fit of `ln t = ln a + b·ln size` over the per-size medians
/// of one (codelet, architecture).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Fit {
    /// Seconds at size 1.
    pub a: f64,
    /// Exponent (3 for a GEMM on n×n tiles keyed by n).
    pub b: f64,
    /// Distinct sizes fitted (at least 2).
    pub sizes: usize,
    /// Accepted samples over those sizes.
    pub samples: usize,
    /// Coefficient of determination on the log scale (1 = exact power law).
    pub r2: f64,
}

impl Fit {
    /// The fitted time at `size`, in seconds.
    pub fn eval(&self, size: u64) -> f64 {
        self.a * (size as f64).powf(self.b)
    }
}

impl fmt::Display for Fit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "t = {:.4e} s · size^{:.3}  ({} sizes, {} samples, r² {:.4})",
            self.a, self.b, self.sizes, self.samples, self.r2
        )
    }
}

/// The state of one (codelet, architecture, size), as shown by `tessera perfmodel show`.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelSummary {
    /// Codelet name.
    pub codelet: String,
    /// Architecture ("cpu", "sim", "cuda", ...).
    pub arch: String,
    /// Size key.
    pub size: u64,
    /// Accepted samples in the history.
    pub samples: usize,
    /// Samples rejected as outliers.
    pub outliers: u64,
    /// Median of the history, seconds.
    pub median: f64,
    /// Median absolute deviation of the history, seconds.
    pub mad: f64,
}

/// [`ModelSummary`] rows drawn as an aligned text table (one line per row).
#[derive(Clone, Copy, Debug)]
pub struct SummaryTable<'a> {
    rows: &'a [ModelSummary],
}

impl<'a> SummaryTable<'a> {
    /// A table of `rows`, in their order.
    pub fn new(rows: &'a [ModelSummary]) -> Self {
        Self { rows }
    }
}

impl fmt::Display for SummaryTable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.rows.is_empty() {
            return writeln!(f, "no performance models");
        }
        let header = [
            "codelet", "arch", "size", "samples", "outliers", "median", "MAD",
        ];
        let cells: Vec<[String; 7]> = self
            .rows
            .iter()
            .map(|r| {
                let rel = if r.median > 0.0 {
                    format!(" ({:.1}%)", 100.0 * r.mad / r.median)
                } else {
                    String::new()
                };
                [
                    r.codelet.clone(),
                    r.arch.clone(),
                    r.size.to_string(),
                    r.samples.to_string(),
                    r.outliers.to_string(),
                    format_seconds(r.median),
                    format!("{}{rel}", format_seconds(r.mad)),
                ]
            })
            .collect();
        let mut width = header.map(|h| h.chars().count());
        for row in &cells {
            for (w, c) in width.iter_mut().zip(row) {
                *w = (*w).max(c.chars().count());
            }
        }
        // Names left-aligned, numbers right-aligned; no trailing spaces.
        let line = |f: &mut fmt::Formatter<'_>, row: [&str; 7]| -> fmt::Result {
            let mut out = String::new();
            for (i, (c, w)) in row.iter().zip(width).enumerate() {
                let pad = w - c.chars().count();
                if i > 0 {
                    out.push_str("  ");
                }
                if i < 2 {
                    out.push_str(c);
                    out.push_str(&" ".repeat(pad));
                } else {
                    out.push_str(&" ".repeat(pad));
                    out.push_str(c);
                }
            }
            writeln!(f, "{}", out.trim_end())
        };
        line(f, header)?;
        for row in &cells {
            line(f, row.each_ref().map(String::as_str))?;
        }
        Ok(())
    }
}

/// `1.234 ms`, `56.7 µs`, ...: seconds with a readable unit.
fn format_seconds(s: f64) -> String {
    let a = s.abs();
    if a == 0.0 {
        "0 s".to_owned()
    } else if a >= 1.0 {
        format!("{s:.3} s")
    } else if a >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else if a >= 1e-6 {
        format!("{:.3} µs", s * 1e6)
    } else {
        format!("{:.1} ns", s * 1e9)
    }
}

// ---------------------------------------------------------------------------
// Keys: (codelet, arch) looked up by `&str` without allocating
// ---------------------------------------------------------------------------

/// Owned key of a family.
#[derive(Debug)]
struct FamilyKey {
    codelet: String,
    arch: String,
}

/// A (codelet, arch) pair, owned or borrowed: lets the map be searched with
/// `(&str, &str)` (no `String`s built on the completion path).
trait FamilyName {
    fn names(&self) -> (&str, &str);
}

impl FamilyName for FamilyKey {
    fn names(&self) -> (&str, &str) {
        (&self.codelet, &self.arch)
    }
}

impl FamilyName for (&str, &str) {
    fn names(&self) -> (&str, &str) {
        (self.0, self.1)
    }
}

impl<'a> Borrow<dyn FamilyName + 'a> for FamilyKey {
    fn borrow(&self) -> &(dyn FamilyName + 'a) {
        self
    }
}

// `Borrow` requires equal hashes and equality for owned and borrowed forms:
// both hash and compare `names()`.
impl Hash for dyn FamilyName + '_ {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.names().hash(state);
    }
}

impl PartialEq for dyn FamilyName + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.names() == other.names()
    }
}

impl Eq for dyn FamilyName + '_ {}

impl Hash for FamilyKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.names().hash(state);
    }
}

impl PartialEq for FamilyKey {
    fn eq(&self, other: &Self) -> bool {
        self.names() == other.names()
    }
}

impl Eq for FamilyKey {}

// ---------------------------------------------------------------------------
// Histories
// ---------------------------------------------------------------------------

/// The samples of one (codelet, arch, size). Only the holder of its shard's
/// write lock touches it.
#[derive(Debug, Default)]
struct History {
    /// Accepted samples, oldest first; at most `history_len`.
    samples: VecDeque<f64>,
    /// The same samples in ascending order, kept up to date on every change so
    /// that median and MAD cost O(len) per sample instead of two sorts (chosen
    /// because sorting measured ~700 ns per `record` at 64 samples).
    sorted: Vec<f64>,
    /// Median and MAD of `samples` (0 when empty), updated on every change.
    median: f64,
    mad: f64,
    /// Samples rejected and not (yet) adopted by a regime shift.
    outliers: u64,
    /// The current run of consecutive outliers, oldest first (< `REGIME_RUN`).
    run: Vec<f64>,
}

impl History {
    /// A history of `samples` (oldest first), keeping the newest `len`.
    fn from_samples(samples: Vec<f64>, outliers: u64, len: usize) -> Self {
        let mut h = History {
            samples: samples.into(),
            outliers,
            ..History::default()
        };
        h.reset_sorted(len);
        h
    }

    fn record(&mut self, x: f64, cfg: &PerfModelConfig) -> Recorded {
        if self.samples.len() >= ESTABLISHED && !within(x, self.median, self.mad, cfg.outlier_k) {
            self.outliers += 1;
            self.run.push(x);
            if self.run.len() == REGIME_RUN {
                // Consistent: as tight around its own median as the history
                // is (relative MAD), so scattered spikes never qualify.
                let (m, _) = median_mad(&self.run);
                let rel = if self.median > 0.0 {
                    self.mad / self.median
                } else {
                    0.0
                };
                if self
                    .run
                    .iter()
                    .all(|&y| within(y, m, rel * m, cfg.outlier_k))
                {
                    self.outliers -= REGIME_RUN as u64;
                    self.samples.clear();
                    self.samples.extend(self.run.drain(..));
                    self.reset_sorted(cfg.history_len);
                    return Recorded::Shifted;
                }
                self.run.remove(0);
            }
            return Recorded::Outlier;
        }
        self.run.clear();
        self.samples.push_back(x);
        let at = self.sorted.partition_point(|&y| y < x);
        self.sorted.insert(at, x);
        while self.samples.len() > cfg.history_len {
            let old = self
                .samples
                .pop_front()
                .expect("longer than history_len ≥ 1");
            // Any copy of an equal value will do.
            let at = self.sorted.partition_point(|&y| y < old);
            debug_assert_eq!(self.sorted[at], old);
            self.sorted.remove(at);
        }
        self.update_stats();
        Recorded::Accepted
    }

    /// Keeps the newest `len` samples and rebuilds `sorted` and the statistics.
    fn reset_sorted(&mut self, len: usize) {
        while self.samples.len() > len {
            self.samples.pop_front();
        }
        self.sorted.clear();
        self.sorted.extend(self.samples.iter().copied());
        self.sorted.sort_unstable_by(f64::total_cmp);
        self.update_stats();
    }

    fn update_stats(&mut self) {
        (self.median, self.mad) = sorted_median_mad(&self.sorted);
    }
}

/// Median and MAD of an ascending slice in O(len): the absolute deviations
/// are two ascending sequences (walking left and right from the median), and
/// their middle elements are found by merging from the small end.
fn sorted_median_mad(v: &[f64]) -> (f64, f64) {
    let n = v.len();
    if n == 0 {
        return (0.0, 0.0);
    }
    let m = 0.5 * (v[(n - 1) / 2] + v[n / 2]);
    // v[..p] < m ≤ v[p..]
    let p = v.partition_point(|&y| y < m);
    let (mut l, mut r) = (p, p);
    let (k1, k2) = ((n - 1) / 2, n / 2);
    let mut mad = 0.0;
    for k in 0..=k2 {
        let dl = if l > 0 { m - v[l - 1] } else { f64::INFINITY };
        let dr = if r < n { v[r] - m } else { f64::INFINITY };
        let d = if dl <= dr {
            l -= 1;
            dl
        } else {
            r += 1;
            dr
        };
        if k == k1 {
            mad += 0.5 * d;
        }
        if k == k2 {
            mad += 0.5 * d;
        }
    }
    (m, mad)
}

/// Whether `x` lies within `k`·max(MAD, 5 % of the median, 1 ns) of the median.
fn within(x: f64, median: f64, mad: f64, k: f64) -> bool {
    let band = mad.max(REL_FLOOR * median).max(ABS_FLOOR);
    (x - median).abs() <= k * band
}

/// Median and median absolute deviation of `xs` (0, 0 for none).
fn median_mad(xs: &[f64]) -> (f64, f64) {
    let mut v = xs.to_vec();
    v.sort_unstable_by(f64::total_cmp);
    sorted_median_mad(&v)
}

/// All sizes of one (codelet, arch).
#[derive(Debug, Default)]
struct Family {
    sizes: DashMap<u64, History>,
}

impl Family {
    /// Least-squares power law over the per-size medians; `None` with fewer
    /// than two usable sizes (size > 0, median > 0).
    fn fit(&self) -> Option<Fit> {
        let mut pts = Vec::new();
        let mut samples = 0;
        for h in self.sizes.iter() {
            if *h.key() > 0 && h.median > 0.0 && !h.samples.is_empty() {
                pts.push(((*h.key() as f64).ln(), h.median.ln()));
                samples += h.samples.len();
            }
        }
        if pts.len() < 2 {
            return None;
        }
        let n = pts.len() as f64;
        let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
        let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
        let (mut sxx, mut sxy, mut syy) = (0.0, 0.0, 0.0);
        for &(x, y) in &pts {
            sxx += (x - mx) * (x - mx);
            sxy += (x - mx) * (y - my);
            syy += (y - my) * (y - my);
        }
        // Distinct sizes give distinct logs, so sxx > 0.
        let b = sxy / sxx;
        let a = (my - b * mx).exp();
        let r2 = if syy > 0.0 {
            sxy * sxy / (sxx * syy)
        } else {
            1.0
        };
        Some(Fit {
            a,
            b,
            sizes: pts.len(),
            samples,
            r2,
        })
    }
}

// ---------------------------------------------------------------------------
// The store
// ---------------------------------------------------------------------------

/// Execution-time models of every (codelet, architecture, size) seen: shared
/// by all workers (`&self` everywhere; `Send + Sync`).
#[derive(Debug)]
pub struct PerfModels {
    config: PerfModelConfig,
    /// (codelet, arch) → sizes. Lock order: see the module docs.
    families: DashMap<FamilyKey, Family>,
}

impl Default for PerfModels {
    /// Empty, in memory, default thresholds.
    fn default() -> Self {
        Self::new(PerfModelConfig::default())
    }
}

impl PerfModels {
    /// Empty models with `config`.
    ///
    /// # Panics
    ///
    /// If `min_samples` is 0, `history_len < min_samples`, or `outlier_k` is
    /// not finite and positive.
    pub fn new(config: PerfModelConfig) -> Self {
        assert!(
            config.min_samples >= 1,
            "perf model: min_samples must be at least 1"
        );
        assert!(
            config.history_len >= config.min_samples,
            "perf model: history_len ({}) must be at least min_samples ({})",
            config.history_len,
            config.min_samples
        );
        assert!(
            config.outlier_k.is_finite() && config.outlier_k > 0.0,
            "perf model: outlier_k must be finite and positive, not {}",
            config.outlier_k
        );
        Self {
            config,
            families: DashMap::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &PerfModelConfig {
        &self.config
    }

    /// Whether nothing has been recorded (or loaded).
    pub fn is_empty(&self) -> bool {
        self.families.is_empty()
    }

    /// Adds one measured execution time of `codelet` on `arch` at `size`.
    ///
    /// Once the key has [`ESTABLISHED`] samples, a sample farther than
    /// `outlier_k`·max(MAD, 5 % of the median) from the median is counted as an
    /// outlier and left out of the estimate; a run of 8 consecutive outliers
    /// that agree with each other replaces the history instead (the timings
    /// moved). Beyond `history_len` samples the oldest is dropped.
    pub fn record(&self, codelet: &str, arch: &str, size: u64, seconds: f64) -> Recorded {
        if !(seconds.is_finite() && seconds >= 0.0) {
            return Recorded::Invalid;
        }
        let name: &dyn FamilyName = &(codelet, arch);
        // Usual case: a read lock on one outer shard, a write lock on one inner shard.
        if let Some(family) = self.families.get(name) {
            return Self::record_in(&family, size, seconds, &self.config);
        }
        // First sample of this (codelet, arch). `entry` re-checks under the
        // write lock, so racing first samples share one family.
        let family = self
            .families
            .entry(FamilyKey {
                codelet: codelet.to_owned(),
                arch: arch.to_owned(),
            })
            .or_default()
            .downgrade();
        Self::record_in(&family, size, seconds, &self.config)
    }

    fn record_in(family: &Family, size: u64, seconds: f64, cfg: &PerfModelConfig) -> Recorded {
        family.sizes.entry(size).or_default().record(seconds, cfg)
    }

    /// Expected time of `codelet` on `arch` at `size`: the median of that
    /// size's history once it has `min_samples` accepted samples; otherwise
    /// the [`fit`](Self::fit) over this codelet's other sizes on `arch` (needs
    /// two, and `size > 0`); otherwise `None`.
    pub fn predict(&self, codelet: &str, arch: &str, size: u64) -> Option<Prediction> {
        let family = self.families.get(&(codelet, arch) as &dyn FamilyName)?;
        if let Some(h) = family.sizes.get(&size) {
            if h.samples.len() >= self.config.min_samples {
                return Some(Prediction {
                    seconds: h.median,
                    source: PredictionSource::History,
                    samples: h.samples.len(),
                });
            }
        }
        if size == 0 {
            return None;
        }
        let fit = family.fit()?;
        Some(Prediction {
            seconds: fit.eval(size),
            source: PredictionSource::Regression,
            samples: fit.samples,
        })
    }

    /// Whether `codelet` on `arch` at `size` has fewer than `min_samples`
    /// accepted samples: a scheduler should still run it there to measure it,
    /// rather than trust [`predict`](Self::predict).
    pub fn calibrating(&self, codelet: &str, arch: &str, size: u64) -> bool {
        let Some(family) = self.families.get(&(codelet, arch) as &dyn FamilyName) else {
            return true;
        };
        let n = family.sizes.get(&size).map_or(0, |h| h.samples.len());
        n < self.config.min_samples
    }

    /// The power law `t = a·size^b` fitted to the per-size medians of `codelet`
    /// on `arch`; `None` with fewer than two sizes measured.
    pub fn fit(&self, codelet: &str, arch: &str) -> Option<Fit> {
        self.families
            .get(&(codelet, arch) as &dyn FamilyName)?
            .fit()
    }

    /// One row per (codelet, arch, size), sorted by them.
    pub fn summary(&self) -> Vec<ModelSummary> {
        let mut rows = Vec::new();
        for family in self.families.iter() {
            let key = family.key();
            for h in family.sizes.iter() {
                rows.push(ModelSummary {
                    codelet: key.codelet.clone(),
                    arch: key.arch.clone(),
                    size: *h.key(),
                    samples: h.samples.len(),
                    outliers: h.outliers,
                    median: h.median,
                    mad: h.mad,
                });
            }
        }
        rows.sort_by(|x, y| (&x.codelet, &x.arch, x.size).cmp(&(&y.codelet, &y.arch, y.size)));
        rows
    }

    // -----------------------------------------------------------------------
    // Persistence
    // -----------------------------------------------------------------------

    /// Loads every `*.json` model in `dir`, with otherwise default settings; a
    /// missing directory gives empty models (the first run on a machine).
    pub fn load(dir: impl Into<PathBuf>) -> Result<PerfModels, FileError> {
        Self::load_with(PerfModelConfig {
            dir: Some(dir.into()),
            ..PerfModelConfig::default()
        })
    }

    /// Loads the models in `config.dir` (none: empty models) with `config`'s
    /// settings; histories longer than `history_len` keep their newest samples.
    ///
    /// # Panics
    ///
    /// As [`new`](Self::new), on a bad `config`.
    pub fn load_with(config: PerfModelConfig) -> Result<PerfModels, FileError> {
        let models = Self::new(config);
        let Some(dir) = models.config.dir.clone() else {
            return Ok(models);
        };
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(models),
            Err(e) => return Err(FileError::from(e).with_path(&dir)),
        };
        let mut files = Vec::new();
        for entry in entries {
            let path = entry
                .map_err(|e| FileError::from(e).with_path(&dir))?
                .path();
            if path.extension().is_some_and(|x| x == "json") && path.is_file() {
                files.push(path);
            }
        }
        files.sort();
        // codelet → the file it came from, to report duplicates.
        let mut seen: BTreeMap<String, PathBuf> = BTreeMap::new();
        for path in files {
            let file = read_file(&path)?;
            if let Some(first) = seen.get(&file.codelet) {
                return Err(FileError::format(format!(
                    "codelet '{}' is also in {}",
                    file.codelet,
                    first.display()
                ))
                .with_path(&path));
            }
            for entry in file.entries {
                let h =
                    History::from_samples(entry.samples, entry.outliers, models.config.history_len);
                models
                    .families
                    .entry(FamilyKey {
                        codelet: file.codelet.clone(),
                        arch: entry.arch,
                    })
                    .or_default()
                    .sizes
                    .insert(entry.size, h);
            }
            seen.insert(file.codelet, path);
        }
        Ok(models)
    }

    /// Writes every codelet's models to `config.dir` (created if needed).
    pub fn save(&self) -> Result<(), FileError> {
        match &self.config.dir {
            Some(dir) => self.save_to(dir),
            None => Err(FileError::new(FileErrorKind::NoDir)),
        }
    }

    /// Writes every codelet's models to `dir` (created if needed), one
    /// [`file_name`] per codelet. Other files in `dir` are left alone.
    pub fn save_to(&self, dir: &Path) -> Result<(), FileError> {
        // Snapshot first, then write: no lock is held during file I/O.
        let mut files: BTreeMap<String, Vec<Entry>> = BTreeMap::new();
        for family in self.families.iter() {
            let key = family.key();
            let entries = files.entry(key.codelet.clone()).or_default();
            for h in family.sizes.iter() {
                entries.push(Entry {
                    arch: key.arch.clone(),
                    size: *h.key(),
                    outliers: h.outliers,
                    samples: h.samples.iter().copied().collect(),
                });
            }
        }
        fs::create_dir_all(dir).map_err(|e| FileError::from(e).with_path(dir))?;
        for (codelet, mut entries) in files {
            entries.sort_by(|x, y| (&x.arch, x.size).cmp(&(&y.arch, y.size)));
            let path = dir.join(file_name(&codelet));
            write_file(&path, &codelet, &entries)
                .map_err(|e| FileError::from(e).with_path(&path))?;
        }
        Ok(())
    }
}

impl fmt::Display for PerfModels {
    /// The [`summary`](Self::summary) as a [`SummaryTable`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        SummaryTable::new(&self.summary()).fmt(f)
    }
}

/// The file holding `codelet`'s models: the name itself plus `.json` when it is
/// made of ASCII letters, digits, `-`, `_` and `.` (not leading), at most 100
/// characters; otherwise the other characters become `_`, and a hash of the
/// full name is appended so that `a/b` and `a_b` get different files. The
/// file stores the real name; loading does not depend on the file name.
pub fn file_name(codelet: &str) -> String {
    const MAX: usize = 100;
    let safe = |i: usize, c: char| {
        c.is_ascii_alphanumeric() || c == '-' || c == '_' || (c == '.' && i > 0)
    };
    let mut name: String = codelet
        .chars()
        .enumerate()
        .map(|(i, c)| if safe(i, c) { c } else { '_' })
        .take(MAX)
        .collect();
    if name.is_empty() || name != codelet {
        name.push_str(&format!("-{:016x}", crate::util::fnv1a(codelet.as_bytes())));
    }
    name.push_str(".json");
    name
}

/// One file on disk.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    format: String,
    version: u64,
    codelet: String,
    entries: Vec<Entry>,
}

/// One (arch, size) of a file.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    arch: String,
    size: u64,
    outliers: u64,
    samples: Vec<f64>,
}

/// Writes `<path>` through a temporary file in the same directory, renamed
/// over it. One entry per line, so an error's line number points at it.
fn write_file(path: &Path, codelet: &str, entries: &[Entry]) -> io::Result<()> {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    // Leading dot and `.tmp`: never read back as a model.
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut w = io::BufWriter::new(fs::File::create(&tmp)?);
        write!(
            w,
            "{{\"format\":\"{FORMAT}\",\"version\":{VERSION},\"codelet\":"
        )?;
        serde_json::to_writer(&mut w, codelet)?;
        w.write_all(b",\"entries\":[")?;
        for (i, e) in entries.iter().enumerate() {
            w.write_all(if i == 0 { b"\n" } else { b",\n" })?;
            serde_json::to_writer(&mut w, e)?;
        }
        w.write_all(b"\n]}\n")?;
        w.into_inner()
            .map_err(io::IntoInnerError::into_error)?
            .sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Reads and checks one model file.
fn read_file(path: &Path) -> Result<File, FileError> {
    let text = fs::read_to_string(path).map_err(|e| FileError::from(e).with_path(path))?;
    let file: File = serde_json::from_str(&text)
        .map_err(|e| FileError::new(FileErrorKind::json(&e)).with_path(path))?;
    if file.format != FORMAT {
        return Err(
            FileError::format(format!("format is '{}', expected '{FORMAT}'", file.format))
                .with_path(path),
        );
    }
    if file.version != VERSION {
        return Err(FileError::format(format!(
            "version {} is not supported (this build reads {VERSION})",
            file.version
        ))
        .with_path(path));
    }
    let mut keys = std::collections::BTreeSet::new();
    for (i, e) in file.entries.iter().enumerate() {
        let what = || format!("entry {i} (arch '{}', size {})", e.arch, e.size);
        if !keys.insert((&e.arch, e.size)) {
            return Err(FileError::format(format!("{} is a duplicate", what())).with_path(path));
        }
        if let Some(x) = e.samples.iter().find(|x| !(x.is_finite() && **x >= 0.0)) {
            return Err(FileError::format(format!(
                "{}: sample {x} is not a time in seconds",
                what()
            ))
            .with_path(path));
        }
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    // Proves that estimates are robust (median/MAD, spikes rejected, regime
    // shifts adopted), that the regression recovers a power law, that
    // calibration ends after `min_samples`, that files round-trip and bad ones
    // are reported by name, and that concurrent recording loses no sample.
    use super::*;

    /// A fresh directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(name: &str) -> Self {
            let dir = std::env::temp_dir()
                .join(format!("tessera-perfmodel-{}-{name}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            Self(dir)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    /// Deterministic jitter in [-amp, amp] (a 64-bit LCG; no RNG dependency).
    struct Jitter(u64);

    impl Jitter {
        fn next(&mut self, amp: f64) -> f64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = (self.0 >> 11) as f64 / (1u64 << 53) as f64;
            amp * (2.0 * u - 1.0)
        }
    }

    fn row<'a>(rows: &'a [ModelSummary], codelet: &str, arch: &str, size: u64) -> &'a ModelSummary {
        rows.iter()
            .find(|r| r.codelet == codelet && r.arch == arch && r.size == size)
            .unwrap()
    }

    #[test]
    fn median_and_mad() {
        let m = PerfModels::default();
        for x in [1.0, 2.0, 3.0, 4.0, 100.0] {
            // Fewer than ESTABLISHED samples: nothing is rejected yet.
            assert_eq!(m.record("k", "cpu", 8, x), Recorded::Accepted);
        }
        let s = m.summary();
        assert_eq!(s.len(), 1);
        // Median 3; deviations 2,1,0,1,97 → MAD 1.
        assert_eq!((s[0].median, s[0].mad, s[0].samples), (3.0, 1.0, 5));
        // Even count: mean of the middle two.
        m.record("k", "cpu", 8, 3.5);
        assert_eq!(m.summary()[0].median, 3.25);
        let p = m.predict("k", "cpu", 8).unwrap();
        assert_eq!(p.source, PredictionSource::History);
        assert_eq!((p.seconds, p.samples), (3.25, 6));
    }

    #[test]
    fn incremental_stats_match_sorting() {
        fn naive(xs: &[f64]) -> (f64, f64) {
            let med = |v: &mut Vec<f64>| {
                v.sort_by(f64::total_cmp);
                let n = v.len();
                0.5 * (v[(n - 1) / 2] + v[n / 2])
            };
            let mut v = xs.to_vec();
            let m = med(&mut v);
            let mut d: Vec<f64> = xs.iter().map(|x| (x - m).abs()).collect();
            (m, med(&mut d))
        }
        let mut j = Jitter(11);
        for len in 1..=12 {
            let cfg = PerfModelConfig {
                history_len: len,
                outlier_k: 1e9,
                ..PerfModelConfig::default()
            };
            let mut h = History::default();
            let mut all = Vec::new();
            for i in 0..40 {
                // Few distinct values, so ties are common.
                let x = if i % 3 == 0 {
                    1.0
                } else {
                    (2.0 + j.next(2.0)).round()
                };
                assert_eq!(h.record(x, &cfg), Recorded::Accepted);
                all.push(x);
                let newest = &all[all.len().saturating_sub(len)..];
                assert_eq!((h.median, h.mad), naive(newest), "len {len}, {newest:?}");
                assert_eq!(h.sorted.len(), newest.len());
            }
        }
    }

    #[test]
    fn spike_is_rejected() {
        let m = PerfModels::default();
        let mut j = Jitter(1);
        for _ in 0..20 {
            m.record("gemm", "cuda", 512, 1e-3 * (1.0 + j.next(0.02)));
        }
        let before = m.predict("gemm", "cuda", 512).unwrap();
        assert_eq!(m.record("gemm", "cuda", 512, 0.1), Recorded::Outlier);
        assert_eq!(m.record("gemm", "cuda", 512, 1e-5), Recorded::Outlier);
        let after = m.predict("gemm", "cuda", 512).unwrap();
        assert_eq!(before, after);
        let s = &m.summary()[0];
        assert_eq!((s.samples, s.outliers), (20, 2));
        // Jitter around the median is still accepted.
        assert_eq!(m.record("gemm", "cuda", 512, 1.01e-3), Recorded::Accepted);
    }

    #[test]
    fn zero_mad_history_accepts_small_jitter() {
        let m = PerfModels::default();
        for _ in 0..10 {
            m.record("k", "cpu", 1, 1.0);
        }
        assert_eq!(m.summary()[0].mad, 0.0);
        // Band: 5 · max(0, 5 % of 1.0) = 0.25.
        assert_eq!(m.record("k", "cpu", 1, 1.2), Recorded::Accepted);
        assert_eq!(m.record("k", "cpu", 1, 0.8), Recorded::Accepted);
        assert_eq!(m.record("k", "cpu", 1, 1.3), Recorded::Outlier);
    }

    #[test]
    fn regime_shift_is_adopted() {
        let m = PerfModels::default();
        for _ in 0..10 {
            m.record("k", "cpu", 1, 1.0);
        }
        // Scattered spikes never form a run.
        for x in [10.0, 0.01, 50.0, 10.0, 0.01, 50.0, 10.0, 0.01, 50.0] {
            assert_eq!(m.record("k", "cpu", 1, x), Recorded::Outlier);
        }
        // A normal sample breaks any run.
        assert_eq!(m.record("k", "cpu", 1, 1.0), Recorded::Accepted);
        assert_eq!(m.summary()[0].outliers, 9);
        // The kernel got twice as slow for good.
        for _ in 0..REGIME_RUN - 1 {
            assert_eq!(m.record("k", "cpu", 1, 2.0), Recorded::Outlier);
        }
        assert_eq!(m.record("k", "cpu", 1, 2.0), Recorded::Shifted);
        let s = &m.summary()[0];
        assert_eq!((s.samples, s.outliers, s.median), (REGIME_RUN, 9, 2.0));
        assert_eq!(m.record("k", "cpu", 1, 2.0), Recorded::Accepted);

        // With jitter: a run as tight as the old history is adopted too.
        let m = PerfModels::default();
        let mut j = Jitter(5);
        for _ in 0..30 {
            m.record("k", "cuda", 1, 1.0 + j.next(0.05));
        }
        let shifted = (0..REGIME_RUN)
            .map(|_| m.record("k", "cuda", 1, 3.0 * (1.0 + j.next(0.05))))
            .filter(|r| *r == Recorded::Shifted)
            .count();
        assert_eq!(shifted, 1);
        let p = m.predict("k", "cuda", 1).unwrap();
        assert!((p.seconds / 3.0 - 1.0).abs() < 0.05, "{p:?}");
    }

    #[test]
    fn history_is_bounded() {
        let m = PerfModels::new(PerfModelConfig {
            history_len: 8,
            ..PerfModelConfig::default()
        });
        for i in 0..20 {
            m.record("k", "cpu", 1, 1.0 + 0.001 * i as f64);
        }
        let s = &m.summary()[0];
        assert_eq!(s.samples, 8);
        // The newest 8: 1.012 ..= 1.019.
        assert!((s.median - 1.0155).abs() < 1e-12, "{}", s.median);
    }

    #[test]
    fn invalid_samples_are_ignored() {
        let m = PerfModels::default();
        for x in [f64::NAN, f64::INFINITY, -1.0] {
            assert_eq!(m.record("k", "cpu", 1, x), Recorded::Invalid);
        }
        assert!(m.is_empty());
    }

    #[test]
    fn regression_recovers_power_law() {
        // GEMM on n×n tiles: t = a·n^3.
        let (a, b) = (2.5e-10, 3.0);
        let m = PerfModels::default();
        let mut j = Jitter(7);
        for n in [64u64, 96, 128, 192, 256, 384, 512] {
            for _ in 0..9 {
                let t = a * (n as f64).powf(b) * (1.0 + j.next(0.005));
                m.record("gemm", "cpu", n, t);
            }
        }
        let fit = m.fit("gemm", "cpu").unwrap();
        assert!((fit.a / a - 1.0).abs() < 0.01, "a = {}", fit.a);
        assert!((fit.b / b - 1.0).abs() < 0.01, "b = {}", fit.b);
        assert_eq!((fit.sizes, fit.samples), (7, 63));
        assert!(fit.r2 > 0.999, "{fit}");
        // A size never seen: predicted by the fit.
        let p = m.predict("gemm", "cpu", 1024).unwrap();
        assert_eq!(p.source, PredictionSource::Regression);
        let want = a * 1024f64.powf(b);
        assert!(
            (p.seconds / want - 1.0).abs() < 0.01,
            "{} vs {want}",
            p.seconds
        );
        // A size with too few samples also falls back to the fit.
        m.record("gemm", "cpu", 320, 1.0);
        assert_eq!(
            m.predict("gemm", "cpu", 320).unwrap().source,
            PredictionSource::Regression
        );
        // Other architectures and codelets are separate.
        assert_eq!(m.predict("gemm", "cuda", 1024), None);
        assert_eq!(m.predict("trsm", "cpu", 1024), None);
        assert_eq!(m.predict("gemm", "cpu", 0), None);
    }

    #[test]
    fn regression_needs_two_sizes() {
        let m = PerfModels::default();
        for _ in 0..5 {
            m.record("k", "cpu", 100, 1.0);
        }
        assert_eq!(m.fit("k", "cpu"), None);
        assert_eq!(m.predict("k", "cpu", 200), None);
        m.record("k", "cpu", 200, 4.0);
        // Two points: exact interpolation, t = a·n^2.
        let fit = m.fit("k", "cpu").unwrap();
        assert!((fit.b - 2.0).abs() < 1e-12);
        let p = m.predict("k", "cpu", 400).unwrap();
        assert!((p.seconds - 16.0).abs() < 1e-9);
    }

    #[test]
    fn calibration_ends_after_min_samples() {
        let m = PerfModels::new(PerfModelConfig {
            min_samples: 4,
            ..PerfModelConfig::default()
        });
        for i in 0..4 {
            assert!(m.calibrating("potrf", "cpu", 256), "after {i} samples");
            assert_eq!(m.predict("potrf", "cpu", 256), None);
            m.record("potrf", "cpu", 256, 0.5);
        }
        assert!(!m.calibrating("potrf", "cpu", 256));
        assert!(m.predict("potrf", "cpu", 256).is_some());
        // Per key: other architectures and sizes still calibrate.
        assert!(m.calibrating("potrf", "cuda", 256));
        assert!(m.calibrating("potrf", "cpu", 512));
        // Outliers do not count towards calibration.
        let m = PerfModels::default();
        for _ in 0..ESTABLISHED {
            m.record("k", "cpu", 1, 1.0);
        }
        assert!(!m.calibrating("k", "cpu", 1));
    }

    #[test]
    fn json_round_trip() {
        let tmp = TempDir::new("roundtrip");
        let m = PerfModels::new(PerfModelConfig {
            dir: Some(tmp.0.clone()),
            ..PerfModelConfig::default()
        });
        let mut j = Jitter(3);
        for codelet in ["gemm", "trsm", "a/b", "a_b", "", "..", "ünïcode"] {
            for arch in ["cpu", "cuda"] {
                for size in [1u64, 64, 1 << 40] {
                    for _ in 0..7 {
                        m.record(codelet, arch, size, 1e-3 * (1.0 + j.next(0.03)));
                    }
                    m.record(codelet, arch, size, 1.0);
                }
            }
        }
        m.save().unwrap();
        let back = PerfModels::load(&tmp.0).unwrap();
        assert_eq!(back.summary(), m.summary());
        assert!(m.summary().iter().all(|r| r.outliers == 1));
        // 7 codelets, 7 files, none hidden or temporary left behind.
        let names: Vec<String> = fs::read_dir(&tmp.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 7, "{names:?}");
        assert!(names.contains(&"gemm.json".to_owned()));
        assert!(names
            .iter()
            .all(|n| n.ends_with(".json") && !n.starts_with('.')));
        // Saving again overwrites in place.
        back.save().unwrap();
        assert_eq!(PerfModels::load(&tmp.0).unwrap().summary(), m.summary());
    }

    #[test]
    fn file_names_are_safe_and_distinct() {
        assert_eq!(file_name("gemm_f64"), "gemm_f64.json");
        let odd = ["a/b", "a_b", "a\\b", "..", "", "x y", "é"];
        let names: std::collections::BTreeSet<String> = odd.iter().map(|c| file_name(c)).collect();
        assert_eq!(names.len(), odd.len());
        for n in &names {
            assert!(
                !n.starts_with('.') && !n.contains('/') && !n.contains('\\'),
                "{n}"
            );
            assert!(n.is_ascii());
        }
        assert!(file_name(&"x".repeat(500)).len() < 130);
    }

    #[test]
    fn missing_dir_is_empty() {
        let tmp = TempDir::new("missing");
        let m = PerfModels::load(tmp.0.join("nope")).unwrap();
        assert!(m.is_empty());
        assert_eq!(m.to_string(), "no performance models\n");
        let e = PerfModels::default().save().unwrap_err();
        assert!(matches!(e.kind(), FileErrorKind::NoDir));
    }

    #[test]
    fn corrupted_file_is_named() {
        let tmp = TempDir::new("corrupt");
        let m = PerfModels::default();
        for n in [8u64, 16] {
            m.record("gemm", "cpu", n, 1.0);
        }
        m.save_to(&tmp.0).unwrap();
        let path = tmp.0.join("gemm.json");
        let good = fs::read_to_string(&path).unwrap();

        // Cut short.
        fs::write(&path, &good[..good.len() / 2]).unwrap();
        let e = PerfModels::load(&tmp.0).unwrap_err();
        assert_eq!(e.path(), Some(path.as_path()));
        assert!(
            matches!(e.kind(), FileErrorKind::TruncatedJson { .. }),
            "{e}"
        );
        assert!(e
            .to_string()
            .starts_with(&format!("{}: truncated JSON", path.display())));

        // Garbage on line 2.
        let bad = good.replacen("\n{\"arch\"", "\n{\"arch\" oops", 1);
        fs::write(&path, bad).unwrap();
        let e = PerfModels::load(&tmp.0).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("gemm.json") && msg.contains("line 2 column"),
            "{msg}"
        );

        // Valid JSON, bad content.
        for (from, to, want) in [
            ("\"version\":1", "\"version\":9", "version 9"),
            ("\"samples\":[1.0]", "\"samples\":[-1.0]", "sample -1"),
            ("\"size\":16", "\"size\":8", "duplicate"),
            ("\"outliers\":0", "\"outlier\":0", "unknown field"),
        ] {
            assert!(good.contains(from), "{good}");
            fs::write(&path, good.replacen(from, to, 1)).unwrap();
            let msg = PerfModels::load(&tmp.0).unwrap_err().to_string();
            assert!(msg.contains("gemm.json") && msg.contains(want), "{msg}");
        }

        // The same codelet in two files.
        fs::write(&path, &good).unwrap();
        fs::write(tmp.0.join("copy.json"), &good).unwrap();
        let msg = PerfModels::load(&tmp.0).unwrap_err().to_string();
        assert!(
            msg.contains("gemm.json") && msg.contains("copy.json"),
            "{msg}"
        );
    }

    #[test]
    fn stampede_loses_no_sample() {
        const THREADS: usize = 4;
        const PER_THREAD: usize = 5000;
        let m = PerfModels::new(PerfModelConfig {
            history_len: THREADS * PER_THREAD,
            ..PerfModelConfig::default()
        });
        let barrier = std::sync::Barrier::new(THREADS);
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let (m, barrier) = (&m, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    let own = format!("own{t}");
                    for i in 0..PER_THREAD {
                        // Shared keys, created concurrently, and one per thread.
                        let codelet = ["a", "b", "c"][i % 3];
                        let arch = if i % 2 == 0 { "cpu" } else { "sim" };
                        assert_eq!(
                            m.record(codelet, arch, (i % 5) as u64, 1.0),
                            Recorded::Accepted
                        );
                        assert_eq!(m.record(&own, "cpu", 7, 1.0), Recorded::Accepted);
                        // Readers race with writers.
                        let _ = m.predict(codelet, arch, 3);
                    }
                });
            }
        });
        let rows = m.summary();
        let shared: usize = rows
            .iter()
            .filter(|r| !r.codelet.starts_with("own"))
            .map(|r| r.samples)
            .sum();
        assert_eq!(shared, THREADS * PER_THREAD);
        assert_eq!(
            rows.iter().filter(|r| r.codelet.starts_with("a")).count(),
            10
        );
        for t in 0..THREADS {
            assert_eq!(row(&rows, &format!("own{t}"), "cpu", 7).samples, PER_THREAD);
        }
    }

    #[test]
    fn table_is_aligned() {
        let m = PerfModels::default();
        for _ in 0..3 {
            m.record("gemm", "cpu", 512, 2.5e-3);
            m.record("gemm", "cuda", 512, 1.25e-4);
            m.record("getrf_panel", "cpu", 4096, 1.5);
        }
        let table = m.to_string();
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 4, "{table}");
        assert!(lines[0].starts_with("codelet"));
        assert!(
            lines[1].starts_with("gemm ") && lines[1].contains("2.500 ms"),
            "{table}"
        );
        assert!(lines[2].contains("125.000 µs"), "{table}");
        assert!(lines[3].contains("1.500 s"), "{table}");
        // Right-aligned numeric columns end at the same place.
        let end = |l: &str, pat: &str| l.find(pat).unwrap() + pat.len();
        assert_eq!(
            end(lines[0], "median"),
            end(lines[1], "2.500 ms"),
            "{table}"
        );
    }
}
