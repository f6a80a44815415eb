//! Turning shares (any non-negative weights) into whole item counts that add up.

/// Splits `n` items by `shares` (any non-negative weights) into counts that
/// sum to `n`, by largest remainder. All-zero or empty weights give all to
/// the first part (or an empty vector).
pub fn partition(n: usize, shares: &[f64]) -> Vec<usize> {
    if shares.is_empty() {
        return Vec::new();
    }
    let w: Vec<f64> = shares
        .iter()
        .map(|s| if s.is_finite() && *s > 0.0 { *s } else { 0.0 })
        .collect();
    let sum: f64 = w.iter().sum();
    let mut out = vec![0usize; w.len()];
    if sum <= 0.0 {
        out[0] = n;
        return out;
    }
    let exact: Vec<f64> = w.iter().map(|x| x / sum * n as f64).collect();
    for (o, e) in out.iter_mut().zip(&exact) {
        *o = e.floor() as usize;
    }
    let mut given: usize = out.iter().sum();
    let mut order: Vec<usize> = (0..w.len()).collect();
    order.sort_by(|&a, &b| (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor())));
    for &i in order.iter().cycle() {
        if given >= n {
            break;
        }
        if w[i] > 0.0 {
            out[i] += 1;
            given += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    // Proves that the counts add up to `n` for any `n`, that a zero share gets
    // nothing, and that remainders go to the largest fractions.
    use super::*;

    #[test]
    fn partitions_add_up() {
        for n in [0, 1, 2, 3, 7, 100, 1001] {
            let p = partition(n, &[0.2, 0.3, 0.5, 0.0]);
            assert_eq!(p.iter().sum::<usize>(), n);
            assert_eq!(p[3], 0);
        }
        assert_eq!(partition(10, &[1.0, 1.0, 1.0]), vec![4, 3, 3]);
        assert_eq!(partition(5, &[0.0, 0.0]), vec![5, 0]);
        assert!(partition(5, &[]).is_empty());
    }
}
