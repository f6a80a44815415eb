//! The perf-model store: every (codelet, architecture, size) seen, shared by all workers.
//!
//! Two levels of [`DashMap`]: (codelet, architecture) → family, then size →
//! history. Recording locks one shard of each (read on the outer, write on the
//! inner), so workers finishing different tasks rarely meet and no global lock
//! sits on the completion path.
//!
//! Lock order: an outer shard, then an inner shard of a family in it. No code
//! takes an outer guard while holding an inner one, nor two outer guards at
//! once (no `get` on `families` while iterating it), so there is no cycle.

use dashmap::DashMap;

use super::history::History;
use super::key::{FamilyKey, FamilyName};
use super::regression::{fit_power_law, Fit};
use super::{ModelSummary, PerfModelConfig, Prediction, PredictionSource, Recorded};

/// Execution-time models of every (codelet, architecture, size) seen: shared
/// by all workers (`&self` everywhere; `Send + Sync`).
#[derive(Debug)]
pub struct PerfModels {
    pub(super) config: PerfModelConfig,
    /// (codelet, arch) → sizes. Lock order: see the module docs.
    pub(super) families: DashMap<FamilyKey, Family>,
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
    /// Once the key has [`ESTABLISHED`](super::ESTABLISHED) samples, a sample farther than
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

    /// Takes `measured`'s models of every (codelet, architecture) it has,
    /// replacing this store's models of those pairs, all sizes (the sizes of
    /// one pair share a fit: two kernels that happen to share a name must
    /// not mix). Each size keeps its accepted samples; one with fewer than
    /// this store's `min_samples` is padded with its median, so a size
    /// measured once is predicted from that measurement rather than guessed
    /// (what a simulation of a measured run wants, see
    /// `Simulation::with_calibrated`).
    pub fn adopt(&self, measured: &PerfModels) {
        // A snapshot first: no guard of `measured` is held while this store
        // is written (`measured` may be this store).
        let mut taken: Vec<(FamilyKey, Vec<(u64, History)>)> = Vec::new();
        for family in measured.families.iter() {
            let key = family.key();
            let sizes = family
                .sizes
                .iter()
                .filter(|h| !h.samples.is_empty())
                .map(|h| {
                    let mut samples: Vec<f64> = h.samples.iter().copied().collect();
                    samples.resize(samples.len().max(self.config.min_samples), h.median);
                    let history =
                        History::from_samples(samples, h.outliers, self.config.history_len);
                    (*h.key(), history)
                })
                .collect();
            let key = FamilyKey {
                codelet: key.codelet.clone(),
                arch: key.arch.clone(),
            };
            taken.push((key, sizes));
        }
        for (key, sizes) in taken {
            let family = Family::default();
            for (size, history) in sizes {
                family.sizes.insert(size, history);
            }
            self.families.insert(key, family);
        }
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
}

/// All sizes of one (codelet, arch).
#[derive(Debug, Default)]
pub(super) struct Family {
    pub(super) sizes: DashMap<u64, History>,
}

impl Family {
    /// Least-squares power law over the per-size medians; `None` with fewer
    /// than two usable sizes (size > 0, median > 0).
    fn fit(&self) -> Option<Fit> {
        fit_power_law(
            self.sizes
                .iter()
                .map(|h| (*h.key(), h.median, h.samples.len())),
        )
    }
}

#[cfg(test)]
mod tests {
    // Proves that bad samples are ignored, that calibration ends after
    // `min_samples` per key, and that concurrent recording loses no sample.
    use super::super::ESTABLISHED;
    use super::*;

    fn row<'a>(rows: &'a [ModelSummary], codelet: &str, arch: &str, size: u64) -> &'a ModelSummary {
        rows.iter()
            .find(|r| r.codelet == codelet && r.arch == arch && r.size == size)
            .unwrap()
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
    fn adopt_replaces_whole_codelets_and_trusts_single_measurements() {
        let platform = PerfModels::default();
        for _ in 0..3 {
            platform.record("gemm", "cpu", 100, 1.0);
            platform.record("gemm", "cpu", 200, 8.0);
            platform.record("trsm", "cpu", 100, 0.5);
        }
        let measured = PerfModels::default();
        measured.record("gemm", "cpu", 100, 3.0);
        measured.record("mine", "cpu", 7, 0.25);
        measured.record("mine", "cpu", 7, 0.75);
        platform.adopt(&measured);
        // One sample, or two, is enough once adopted: padded with the median.
        let p = platform.predict("gemm", "cpu", 100).unwrap();
        assert_eq!((p.seconds, p.source), (3.0, PredictionSource::History));
        let mine = platform.predict("mine", "cpu", 7).unwrap();
        assert_eq!(mine.source, PredictionSource::History);
        assert_eq!(mine.seconds, measured.summary()[1].median);
        // The measured codelet replaced every size of the platform's one
        // (no fit over both); the others are untouched.
        assert_eq!(platform.predict("gemm", "cpu", 200), None);
        assert_eq!(platform.predict("trsm", "cpu", 100).unwrap().seconds, 0.5);
        // The measured models themselves are unchanged, and adopting
        // oneself pads in place.
        assert_eq!(measured.predict("gemm", "cpu", 100), None);
        measured.adopt(&measured);
        assert_eq!(measured.predict("gemm", "cpu", 100).unwrap().seconds, 3.0);
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
}
