//! Regression for sizes never measured: a least-squares power law `t = a·size^b` over the
//! per-size medians of one (codelet, architecture).

use std::fmt;

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

/// Least-squares power law through `(size, median seconds, accepted samples)`
/// points; `None` with fewer than two usable points (size > 0, median > 0,
/// at least one sample).
pub(super) fn fit_power_law(points: impl IntoIterator<Item = (u64, f64, usize)>) -> Option<Fit> {
    let mut pts = Vec::new();
    let mut samples = 0;
    for (size, median, n) in points {
        if size > 0 && median > 0.0 && n > 0 {
            pts.push(((size as f64).ln(), median.ln()));
            samples += n;
        }
    }
    if pts.len() < 2 {
        return None;
    }
    // In order of size: the callers' sizes come from a hash map, whose order changes from
    // run to run, and floating-point sums in another order differ in their last bits. Those
    // bits moved dmda's estimates by a nanosecond, which changed its ties and then its
    // choices: one simulated LU (`lu --n 41472 --nb 864 --simulate
    // bench/platforms/tsubame-node.toml`) predicted 506.749, 509.463 or 510.002 s from run to
    // run.
    pts.sort_by(|p, q| p.0.total_cmp(&q.0));
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

#[cfg(test)]
mod tests {
    // Proves that the regression recovers a power law, predicts unseen sizes
    // with it, needs two sizes, and does not depend on the order of its points.
    use super::super::testing::Jitter;
    use super::super::{PerfModels, PredictionSource};

    #[test]
    fn the_fit_is_the_same_in_any_order_of_points() {
        let mut j = Jitter(3);
        let pts: Vec<(u64, f64, usize)> = (1..=12u64)
            .map(|k| (k * 1000, 1e-9 * (k * 1000) as f64 * (1.0 + j.next(0.3)), 4))
            .collect();
        let first = super::fit_power_law(pts.clone()).unwrap();
        let mut rotated = pts.clone();
        for r in 1..pts.len() {
            rotated.rotate_left(1);
            let mut reversed = rotated.clone();
            reversed.reverse();
            for order in [&rotated, &reversed] {
                let f = super::fit_power_law(order.clone()).unwrap();
                assert_eq!(
                    (f.a.to_bits(), f.b.to_bits(), f.r2.to_bits()),
                    (first.a.to_bits(), first.b.to_bits(), first.r2.to_bits()),
                    "rotation {r}"
                );
            }
        }
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
}
