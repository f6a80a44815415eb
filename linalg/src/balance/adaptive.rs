//! The TianHe-1 adaptive splitter: each worker class's share of a task, learnt from measured
//! rates per workload size.
//!
//! Seed 003, Section 4.2 "Two-Level Adaptive Task Mapping": measured GFLOP/s of each worker
//! class, kept per workload size, give the split of the next task of that size
//! (`Gsplit = P_GPU / (P_GPU + P_CPU)`, eq. 1), for any number of worker classes (eq. 5 is
//! the same formula over CPU cores). [`partition`](super::partition) turns the shares into
//! rows or columns.

use std::collections::BTreeMap;

/// Learns each worker class's measured rate per workload size and splits new
/// tasks by it (TianHe-1, Section 4.2).
///
/// `Gsplit = P_GPU / (P_GPU + P_CPU)` (eq. 1) with `P = flops / T` of each
/// side's part (eqs. 2–3), stored in a table indexed by the workload (the
/// paper's *database_g*, indexed by W = 2MKN, eq. 4). Sizes are bucketed on a
/// log scale; between learnt buckets a class's rate is interpolated linearly in
/// log(size), beyond them the nearest bucket holds. A class never measured at
/// any size is assumed to reach the same fraction of its peak as the measured
/// classes do at that size; with nothing measured the split follows the peaks.
///
/// The second level (*database_c*, eq. 5: the CPU part split over cores by
/// each core's rate) is the same formula over N classes: an `AdaptiveSplitter`
/// with one class per core, used at a single size.
///
/// Unlike the [`Balancer`](super::Balancer) there is no trial-and-error stage to correct for
/// transfers: record for each class the time until its part is done, transfers
/// it waits for included, so that equal rates mean equal finish times.
///
/// ```
/// use tessera_linalg::balance::AdaptiveSplitter;
/// let mut s = AdaptiveSplitter::new(vec![10.0, 100.0]); // host, device peaks
/// assert!((s.split(1e6) - 100.0 / 110.0).abs() < 1e-12); // nothing learnt: peaks
/// s.record(AdaptiveSplitter::HOST, 1e6, 8e6, 1.0);   // 8 flop/s measured
/// s.record(AdaptiveSplitter::DEVICE, 1e6, 24e6, 1.0); // 24 flop/s measured
/// assert!((s.split(1e6) - 0.75).abs() < 1e-12);
/// ```
#[derive(Clone, Debug)]
pub struct AdaptiveSplitter {
    peaks: Vec<f64>,
    buckets_per_octave: f64,
    weight: f64,
    min_share: f64,
    /// bucket index (round(log2(size) · buckets_per_octave)) → rate per class.
    table: BTreeMap<i64, Vec<Option<f64>>>,
}

impl AdaptiveSplitter {
    /// Class index of the host in a two-class splitter.
    pub const HOST: usize = 0;
    /// Class index of the device in a two-class splitter.
    pub const DEVICE: usize = 1;

    /// A splitter over `peaks.len()` worker classes (at least 2) with these
    /// peak rates, in the unit `record` measures (flop/s if flops and seconds).
    /// Four buckets per octave of size, new measurements weigh 1/2, no
    /// minimum share.
    ///
    /// # Panics
    /// With fewer than two classes or a peak that is not finite and positive.
    pub fn new(peaks: Vec<f64>) -> Self {
        assert!(
            peaks.len() >= 2,
            "AdaptiveSplitter: needs at least two worker classes"
        );
        assert!(
            peaks.iter().all(|p| p.is_finite() && *p > 0.0),
            "AdaptiveSplitter: peaks must be finite and positive: {peaks:?}"
        );
        AdaptiveSplitter {
            peaks,
            buckets_per_octave: 4.0,
            weight: 0.5,
            min_share: 0.0,
            table: BTreeMap::new(),
        }
    }

    /// A host/device splitter ([`HOST`](Self::HOST) = 0, [`DEVICE`](Self::DEVICE) = 1).
    pub fn two_class(peak_host: f64, peak_device: f64) -> Self {
        Self::new(vec![peak_host, peak_device])
    }

    /// Bucket resolution: `n` buckets per doubling of the size. Set it before
    /// recording: learnt buckets are not re-keyed.
    ///
    /// # Panics
    /// If `n` is not finite and positive.
    pub fn with_buckets_per_octave(mut self, n: f64) -> Self {
        assert!(
            n.is_finite() && n > 0.0,
            "AdaptiveSplitter: buckets per octave must be positive"
        );
        self.buckets_per_octave = n;
        self
    }

    /// Weight of a new measurement against the stored rate (exponential
    /// average); 1 keeps only the latest, as TianHe-1's databases do.
    ///
    /// # Panics
    /// If `w` is not in (0, 1].
    pub fn with_weight(mut self, w: f64) -> Self {
        assert!(
            w > 0.0 && w <= 1.0,
            "AdaptiveSplitter: weight must be in (0, 1]"
        );
        self.weight = w;
        self
    }

    /// Shares below `m` are given to the other classes instead: a part too
    /// small to pay for its launch (TianHe-1 finds all-CPU best for small N).
    pub fn with_min_share(mut self, m: f64) -> Self {
        self.min_share = m.clamp(0.0, 1.0);
        self
    }

    /// Number of worker classes.
    pub fn classes(&self) -> usize {
        self.peaks.len()
    }

    /// Records that `class` did `flops` of work (its part of a task whose
    /// whole workload is `size`) in `seconds`. Returns false, recording
    /// nothing, for an unknown class or a non-positive or non-finite value.
    pub fn record(&mut self, class: usize, size: f64, flops: f64, seconds: f64) -> bool {
        let ok = |x: f64| x.is_finite() && x > 0.0;
        if class >= self.peaks.len() || !ok(size) || !ok(flops) || !ok(seconds) {
            return false;
        }
        let measured = flops / seconds;
        let key = self.position(size).round() as i64;
        let n = self.peaks.len();
        let slot = &mut self.table.entry(key).or_insert_with(|| vec![None; n])[class];
        *slot = Some(match *slot {
            Some(old) => old + self.weight * (measured - old),
            None => measured,
        });
        true
    }

    /// The learnt rate of `class` at workload `size`, interpolated between
    /// learnt sizes; `None` if the class was never measured.
    pub fn rate(&self, class: usize, size: f64) -> Option<f64> {
        if class >= self.peaks.len() || !(size.is_finite() && size > 0.0) {
            return None;
        }
        let x = self.position(size);
        let below = self
            .table
            .range(..=x.floor() as i64)
            .rev()
            .find_map(|(k, rates)| rates[class].map(|r| (*k as f64, r)));
        let above = self
            .table
            .range(x.ceil() as i64..)
            .find_map(|(k, rates)| rates[class].map(|r| (*k as f64, r)));
        match (below, above) {
            (Some((x0, r0)), Some((x1, r1))) if x1 > x0 => {
                let t = ((x - x0) / (x1 - x0)).clamp(0.0, 1.0);
                Some(r0 + t * (r1 - r0))
            }
            (Some((_, r)), _) | (None, Some((_, r))) => Some(r),
            (None, None) => None,
        }
    }

    /// Each class's share of a task of workload `size`; the shares sum to 1.
    pub fn split_n(&self, size: f64) -> Vec<f64> {
        let known: Vec<Option<f64>> = (0..self.peaks.len()).map(|c| self.rate(c, size)).collect();
        // Mean achieved fraction of peak among the measured classes, assumed
        // for the unmeasured ones (1 when none is measured: the peak ratio).
        let (eff_sum, eff_n) = known
            .iter()
            .zip(&self.peaks)
            .filter_map(|(r, p)| r.map(|r| r / p))
            .fold((0.0, 0usize), |(s, n), e| (s + e, n + 1));
        let efficiency = if eff_n == 0 {
            1.0
        } else {
            eff_sum / eff_n as f64
        };
        let mut rates: Vec<f64> = known
            .iter()
            .zip(&self.peaks)
            .map(|(r, p)| r.unwrap_or(p * efficiency).max(0.0))
            .collect();
        normalize(&mut rates, &self.peaks);
        if self.min_share > 0.0 {
            // Drop parts that are too small, smallest first, keeping at least one.
            loop {
                let smallest = rates
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| **s > 0.0)
                    .min_by(|a, b| a.1.total_cmp(b.1))
                    .map(|(i, s)| (i, *s));
                let alive = rates.iter().filter(|s| **s > 0.0).count();
                match smallest {
                    Some((i, s)) if s < self.min_share && alive > 1 => {
                        rates[i] = 0.0;
                        normalize(&mut rates, &self.peaks);
                    }
                    _ => break,
                }
            }
        }
        rates
    }

    /// The device's share of a task of workload `size` (class
    /// [`DEVICE`](Self::DEVICE); the others share the rest).
    pub fn split(&self, size: f64) -> f64 {
        self.split_n(size)[Self::DEVICE]
    }

    /// Continuous bucket coordinate of a size.
    fn position(&self, size: f64) -> f64 {
        size.log2() * self.buckets_per_octave
    }
}

/// Scales `v` to sum to 1; if it sums to 0 (or is not finite) uses `fallback`'s proportions.
fn normalize(v: &mut [f64], fallback: &[f64]) {
    let sum: f64 = v.iter().sum();
    if sum > 0.0 && sum.is_finite() {
        v.iter_mut().for_each(|x| *x /= sum);
    } else {
        let fs: f64 = fallback.iter().sum();
        v.iter_mut().zip(fallback).for_each(|(x, f)| *x = f / fs);
    }
}

#[cfg(test)]
mod tests {
    // Proves that the splitter follows measured rates per size, interpolates
    // between learnt sizes, weights new measurements, drops tiny parts, and
    // falls back to the peaks.
    use super::*;

    const H: usize = AdaptiveSplitter::HOST;
    const D: usize = AdaptiveSplitter::DEVICE;

    #[test]
    fn adaptive_falls_back_to_peak_ratios() {
        let s = AdaptiveSplitter::two_class(20.0, 80.0);
        assert!((s.split(1000.0) - 0.8).abs() < 1e-12);
        let s = AdaptiveSplitter::new(vec![1.0, 2.0, 5.0]);
        let shares = s.split_n(1e9);
        assert!(
            (shares[2] - 0.625).abs() < 1e-12 && (shares.iter().sum::<f64>() - 1.0).abs() < 1e-12
        );
    }

    #[test]
    fn adaptive_splits_by_measured_rates_at_each_size() {
        let mut s = AdaptiveSplitter::two_class(10.0, 100.0);
        // Small tasks: the GPU is poor (TianHe-1, Fig. 4); large: it dominates.
        assert!(s.record(H, 1024.0, 8.0 * 1024.0, 1.0));
        assert!(s.record(D, 1024.0, 2.0 * 1024.0, 1.0));
        assert!(s.record(H, 65536.0, 9.0, 1.0));
        assert!(s.record(D, 65536.0, 81.0, 1.0));
        assert!((s.split(1024.0) - 0.2).abs() < 1e-12);
        assert!((s.split(65536.0) - 0.9).abs() < 1e-12);
        // Beyond the learnt sizes the nearest one holds.
        assert!((s.split(10.0) - 0.2).abs() < 1e-12);
        assert!((s.split(1e9) - 0.9).abs() < 1e-12);
        // Bad measurements are refused.
        assert!(!s.record(D, 1024.0, 1.0, 0.0));
        assert!(!s.record(5, 1024.0, 1.0, 1.0));
        assert!(!s.record(D, f64::NAN, 1.0, 1.0));
    }

    #[test]
    fn adaptive_interpolates_between_learnt_sizes() {
        let mut s = AdaptiveSplitter::two_class(10.0, 100.0);
        s.record(H, 1000.0, 10.0, 1.0);
        s.record(D, 1000.0, 10.0, 1.0);
        s.record(H, 16000.0, 10.0, 1.0);
        s.record(D, 16000.0, 90.0, 1.0);
        // Sizes are bucketed at 2^(1/4); rates interpolate linearly in log size
        // between bucket centres, so the geometric middle gets the mean rate.
        let mid = (1000.0f64 * 16000.0).sqrt();
        let d = s.rate(D, mid).unwrap();
        assert!((d - 50.0).abs() < 3.0, "{d}");
        let f = s.split(mid);
        assert!((f - d / (d + 10.0)).abs() < 1e-12);
        assert!(f > 0.5 && f < 0.9);
        // Monotone between the two ends.
        let mut last = 0.0;
        for k in 0..=16 {
            let size = 1000.0 * 16f64.powf(k as f64 / 16.0);
            let f = s.split(size);
            assert!(f >= last - 1e-12, "not monotone at {size}");
            last = f;
        }
    }

    #[test]
    fn adaptive_unmeasured_class_assumes_the_same_efficiency() {
        let mut s = AdaptiveSplitter::two_class(10.0, 100.0);
        // The host reaches half its peak; the device was never measured.
        s.record(H, 4096.0, 5.0, 1.0);
        let d = 100.0 * 0.5;
        assert!((s.split(4096.0) - d / (d + 5.0)).abs() < 1e-12);
    }

    #[test]
    fn adaptive_weights_new_measurements_and_drops_tiny_parts() {
        let mut s = AdaptiveSplitter::two_class(1.0, 1.0);
        s.record(D, 64.0, 10.0, 1.0);
        s.record(D, 64.0, 30.0, 1.0);
        assert!((s.rate(D, 64.0).unwrap() - 20.0).abs() < 1e-12);
        let mut latest = AdaptiveSplitter::two_class(1.0, 1.0).with_weight(1.0);
        latest.record(D, 64.0, 10.0, 1.0);
        latest.record(D, 64.0, 30.0, 1.0);
        assert!((latest.rate(D, 64.0).unwrap() - 30.0).abs() < 1e-12);
        // Second level over four cores, one slowed by the device's driver core.
        let mut cores = AdaptiveSplitter::new(vec![1.0; 4]).with_min_share(0.05);
        for (c, r) in [(0, 10.0), (1, 10.0), (2, 10.0), (3, 0.2)] {
            cores.record(c, 1.0, r, 1.0);
        }
        let shares = cores.split_n(1.0);
        assert_eq!(shares[3], 0.0);
        assert!(shares[..3].iter().all(|s| (s - 1.0 / 3.0).abs() < 1e-12));
    }
}
