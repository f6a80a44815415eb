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
//! One concern per module: `store` holds [`PerfModels`] (concurrency and lock
//! order are written down there), each (codelet, architecture, size) keeps a
//! `history` (median/MAD, outliers, regime shifts), `regression` fits the
//! power law, `file` loads and saves the JSON files, and `key` looks
//! (codelet, architecture) up by `&str` without allocating.

mod file;
mod history;
mod key;
mod regression;
mod store;
#[cfg(test)]
mod testing;

use std::path::PathBuf;

pub use file::{default_dir, file_name, DIR_ENV};
pub use history::ESTABLISHED;
pub use regression::Fit;
pub use store::PerfModels;

/// Default for [`PerfModelConfig::min_samples`].
pub const DEFAULT_MIN_SAMPLES: usize = 3;
/// Default for [`PerfModelConfig::history_len`].
pub const DEFAULT_HISTORY_LEN: usize = 64;
/// Default for [`PerfModelConfig::outlier_k`].
pub const DEFAULT_OUTLIER_K: f64 = 5.0;

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

/// The state of one (codelet, architecture, size), as shown by `tessera perfmodel show`.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelSummary {
    /// Codelet name.
    pub codelet: String,
    /// Architecture ("cpu", "emu", "cuda", ...).
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
