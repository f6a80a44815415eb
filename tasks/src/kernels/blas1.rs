//! The vector kernels of the iterative solvers (CG, power iteration) on one row block, each
//! fused with the dot products that read the same entries, so a block streams its vectors
//! once per phase.
//!
//! Every sum runs left to right over the block, so a kernel equals its unfused form (the
//! update, then [`super::spmv::dot_pair`] or a plain dot) bit for bit; the tests below check
//! it.

/// `x += α·p`, `r −= α·q`; returns `r·r` (after the update).
///
/// # Panics
/// If the slices differ in length.
pub fn update_xr(alpha: f64, p: &[f64], q: &[f64], x: &mut [f64], r: &mut [f64]) -> f64 {
    let n = x.len();
    assert!(
        p.len() == n && q.len() == n && r.len() == n,
        "update_xr: lengths differ"
    );
    let mut rr = 0.0;
    for i in 0..n {
        x[i] += alpha * p[i];
        let ri = r[i] - alpha * q[i];
        r[i] = ri;
        rr += ri * ri;
    }
    rr
}

/// `x += α·p`, `r −= α·q`, `z = d⁻¹·r` (Jacobi: `dinv` holds the inverted diagonal);
/// returns `(r·z, r·r)` after the update.
///
/// # Panics
/// If the slices differ in length.
pub fn update_xrz(
    alpha: f64,
    p: &[f64],
    q: &[f64],
    dinv: &[f64],
    x: &mut [f64],
    r: &mut [f64],
    z: &mut [f64],
) -> (f64, f64) {
    let n = x.len();
    assert!(
        p.len() == n && q.len() == n && dinv.len() == n && r.len() == n && z.len() == n,
        "update_xrz: lengths differ"
    );
    let (mut rz, mut rr) = (0.0, 0.0);
    for i in 0..n {
        x[i] += alpha * p[i];
        let ri = r[i] - alpha * q[i];
        r[i] = ri;
        let zi = dinv[i] * ri;
        z[i] = zi;
        rz += ri * zi;
        rr += ri * ri;
    }
    (rz, rr)
}

/// `p = z + β·p`.
///
/// # Panics
/// If the slices differ in length.
pub fn update_p(beta: f64, z: &[f64], p: &mut [f64]) {
    assert_eq!(z.len(), p.len(), "update_p: lengths differ");
    for (pi, &zi) in p.iter_mut().zip(z) {
        *pi = zi + beta * *pi;
    }
}

/// `x = s·y`.
///
/// # Panics
/// If the slices differ in length.
pub fn scale_into(s: f64, y: &[f64], x: &mut [f64]) {
    assert_eq!(y.len(), x.len(), "scale_into: lengths differ");
    for (xi, &yi) in x.iter_mut().zip(y) {
        *xi = s * yi;
    }
}

/// `z = d⁻¹·r`, returning `(r·z, r·r)`: the preconditioner applied to the first residual.
///
/// # Panics
/// If the slices differ in length.
pub fn precondition(dinv: &[f64], r: &[f64], z: &mut [f64]) -> (f64, f64) {
    assert!(
        dinv.len() == r.len() && z.len() == r.len(),
        "precondition: lengths differ"
    );
    let (mut rz, mut rr) = (0.0, 0.0);
    for i in 0..r.len() {
        z[i] = dinv[i] * r[i];
        rz += r[i] * z[i];
        rr += r[i] * r[i];
    }
    (rz, rr)
}

/// Bytes the solvers' vector kernels stream per row: `update_xr` reads `p`, `q` and reads
/// and writes `x`, `r` (48); `update_xrz` also reads `dinv` and writes `z` (64); `update_p`
/// reads `z` and reads and writes `p` (24).
pub fn cg_vector_bytes(rows: usize, jacobi: bool) -> f64 {
    rows as f64 * if jacobi { 64.0 + 24.0 } else { 48.0 + 24.0 }
}

#[cfg(test)]
mod tests {
    //! Proves that each fused kernel equals its unfused form (update, then dot) bit for bit.

    use super::*;
    use crate::kernels::spmv::dot_pair;

    fn v(n: usize, k: f64) -> Vec<f64> {
        (0..n).map(|i| (i as f64 * k).sin() + 0.1).collect()
    }

    #[test]
    fn fused_updates_equal_unfused() {
        for n in [0, 1, 3, 17, 100] {
            let (p, q, d) = (v(n, 0.3), v(n, 0.7), v(n, 1.1));
            let alpha = 0.37;
            let (mut x1, mut r1) = (v(n, 0.2), v(n, 0.5));
            let (mut x2, mut r2) = (x1.clone(), r1.clone());
            let rr = update_xr(alpha, &p, &q, &mut x1, &mut r1);
            for i in 0..n {
                x2[i] += alpha * p[i];
                r2[i] -= alpha * q[i];
            }
            assert_eq!(rr.to_bits(), dot_pair(&r2, &r2).0.to_bits());
            assert_eq!((x1.clone(), r1.clone()), (x2.clone(), r2.clone()));

            let mut z1 = vec![0.0; n];
            let (mut x3, mut r3) = (v(n, 0.2), v(n, 0.5));
            let (rz, rr) = update_xrz(alpha, &p, &q, &d, &mut x3, &mut r3, &mut z1);
            let z2: Vec<f64> = (0..n).map(|i| d[i] * r2[i]).collect();
            assert_eq!(
                (x3, r3.clone(), z1.clone()),
                (x2.clone(), r2.clone(), z2.clone())
            );
            assert_eq!(rz.to_bits(), dot_pair(&r2, &z2).0.to_bits());
            assert_eq!(rr.to_bits(), dot_pair(&r2, &r2).0.to_bits());

            let mut z3 = vec![0.0; n];
            let (rz, rr) = precondition(&d, &r2, &mut z3);
            assert_eq!(z3, z2);
            assert_eq!(rz.to_bits(), dot_pair(&r2, &z2).0.to_bits());
            assert_eq!(rr.to_bits(), dot_pair(&r2, &r2).0.to_bits());

            let mut p1 = p.clone();
            update_p(0.9, &z1, &mut p1);
            let p2: Vec<f64> = (0..n).map(|i| z1[i] + 0.9 * p[i]).collect();
            assert_eq!(p1, p2);

            let mut s = vec![0.0; n];
            scale_into(0.5, &q, &mut s);
            assert_eq!(s, q.iter().map(|y| 0.5 * y).collect::<Vec<_>>());
        }
    }
}
