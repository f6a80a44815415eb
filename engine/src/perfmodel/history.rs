//! The history of one (codelet, architecture, size): recent samples, their median and MAD,
//! spikes rejected as outliers, and regime shifts adopted.

use std::collections::VecDeque;

use super::{PerfModelConfig, Recorded};

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

/// The samples of one (codelet, arch, size). Only the holder of its shard's
/// write lock touches it.
#[derive(Debug, Default)]
pub(super) struct History {
    /// Accepted samples, oldest first; at most `history_len`.
    pub(super) samples: VecDeque<f64>,
    /// The same samples in ascending order, kept up to date on every change so
    /// that median and MAD cost O(len) per sample instead of two sorts (chosen
    /// because sorting measured ~700 ns per `record` at 64 samples).
    sorted: Vec<f64>,
    /// Median and MAD of `samples` (0 when empty), updated on every change.
    pub(super) median: f64,
    pub(super) mad: f64,
    /// Samples rejected and not (yet) adopted by a regime shift.
    pub(super) outliers: u64,
    /// The current run of consecutive outliers, oldest first (< `REGIME_RUN`).
    run: Vec<f64>,
}

impl History {
    /// A history of `samples` (oldest first), keeping the newest `len`.
    pub(super) fn from_samples(samples: Vec<f64>, outliers: u64, len: usize) -> Self {
        let mut h = History {
            samples: samples.into(),
            outliers,
            ..History::default()
        };
        h.reset_sorted(len);
        h
    }

    /// Takes in one measured time: accepted, an outlier, or the end of a
    /// run of outliers that replaces the history.
    pub(super) fn record(&mut self, x: f64, cfg: &PerfModelConfig) -> Recorded {
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
    // Halves first: `0.5 * (a + b)` overflows to inf for samples near f64::MAX.
    let m = 0.5 * v[(n - 1) / 2] + 0.5 * v[n / 2];
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

/// [`median_mad`], for the file tests.
#[cfg(test)]
pub(super) fn median_mad_for_tests(xs: &[f64]) -> (f64, f64) {
    median_mad(xs)
}

/// Median and median absolute deviation of `xs` (0, 0 for none).
fn median_mad(xs: &[f64]) -> (f64, f64) {
    let mut v = xs.to_vec();
    v.sort_unstable_by(f64::total_cmp);
    sorted_median_mad(&v)
}

#[cfg(test)]
mod tests {
    // Proves that estimates are robust: median and MAD kept incrementally equal
    // those of a sort, spikes are rejected, jitter is not, regime shifts are
    // adopted, and the history is bounded.
    use super::super::testing::Jitter;
    use super::super::{PerfModels, PredictionSource};
    use super::*;

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
}
