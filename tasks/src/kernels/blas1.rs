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

/// Pipelined CG's vectors on one row block (Ghysels–Vanroose; see
/// `tessera_linalg::solver::pipelined`). Without a preconditioner `u` is `r`, `m` is `w` and
/// `q` is `s`, and `pre` is `None`.
pub struct PipeBlock<'a> {
    /// `A·m` of this iteration (read).
    pub n: &'a [f64],
    /// The solution, residual and `w = A·u` (read and written).
    pub x: &'a mut [f64],
    pub r: &'a mut [f64],
    pub w: &'a mut [f64],
    /// The recurrences of `A·q`, `A·p` and the direction (read and written).
    pub z: &'a mut [f64],
    pub s: &'a mut [f64],
    pub p: &'a mut [f64],
    /// With a preconditioner: `u = M⁻¹·r`, `q = M⁻¹·s` (read and written), `m = M⁻¹·w`
    /// (read).
    pub pre: Option<PipePre<'a>>,
}

/// [`PipeBlock`]'s preconditioned vectors.
pub struct PipePre<'a> {
    pub u: &'a mut [f64],
    pub q: &'a mut [f64],
    pub m: &'a [f64],
}

/// One pipelined CG update of a block, in one pass:
/// `z = n + β·z`, `q = m + β·q`, `s = w + β·s`, `p = u + β·p`, then `x += α·p`, `r −= α·s`,
/// `u −= α·q`, `w −= α·z`; returns the next iteration's `(r·u, w·u, r·r)`.
///
/// # Panics
/// If the slices differ in length.
pub fn pipecg_update(alpha: f64, beta: f64, v: PipeBlock<'_>) -> [f64; 3] {
    let len = v.n.len();
    assert!(
        [
            v.x.len(),
            v.r.len(),
            v.w.len(),
            v.z.len(),
            v.s.len(),
            v.p.len()
        ]
        .iter()
        .all(|&l| l == len),
        "pipecg_update: lengths differ"
    );
    let (mut ru, mut wu, mut rr) = (0.0, 0.0, 0.0);
    match v.pre {
        None => {
            for i in 0..len {
                v.z[i] = v.n[i] + beta * v.z[i];
                v.s[i] = v.w[i] + beta * v.s[i];
                v.p[i] = v.r[i] + beta * v.p[i];
                v.x[i] += alpha * v.p[i];
                v.r[i] -= alpha * v.s[i];
                v.w[i] -= alpha * v.z[i];
                rr += v.r[i] * v.r[i];
                wu += v.w[i] * v.r[i];
            }
            ru = rr;
        }
        Some(pre) => {
            assert!(
                pre.u.len() == len && pre.q.len() == len && pre.m.len() == len,
                "pipecg_update: lengths differ"
            );
            for i in 0..len {
                v.z[i] = v.n[i] + beta * v.z[i];
                pre.q[i] = pre.m[i] + beta * pre.q[i];
                v.s[i] = v.w[i] + beta * v.s[i];
                v.p[i] = pre.u[i] + beta * v.p[i];
                v.x[i] += alpha * v.p[i];
                v.r[i] -= alpha * v.s[i];
                pre.u[i] -= alpha * pre.q[i];
                v.w[i] -= alpha * v.z[i];
                ru += v.r[i] * pre.u[i];
                wu += v.w[i] * pre.u[i];
                rr += v.r[i] * v.r[i];
            }
        }
    }
    [ru, wu, rr]
}

/// Bytes [`pipecg_update`] streams per row: reads `n`, reads and writes `x`, `r`, `w`, `z`,
/// `s`, `p` (104); preconditioned also reads `m` and reads and writes `u`, `q` (144), and the
/// phase `m = D⁻¹·w` reads `dinv`, `w` and writes `m` (24).
pub fn pipecg_vector_bytes(rows: usize, jacobi: bool) -> f64 {
    rows as f64 * if jacobi { 144.0 + 24.0 } else { 104.0 }
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

    #[test]
    fn pipecg_update_equals_its_unfused_form() {
        let n = 37;
        let v = |k: usize| -> Vec<f64> {
            (0..n)
                .map(|i| ((i * 7 + k * 13) % 11) as f64 - 5.0)
                .collect()
        };
        let (alpha, beta) = (0.375, 0.625);
        for jacobi in [false, true] {
            let (nn, mm) = (v(0), v(1));
            let (mut x, mut r, mut w, mut z, mut s, mut p, mut u, mut q) =
                (v(2), v(3), v(4), v(5), v(6), v(7), v(8), v(9));
            if !jacobi {
                u.clone_from(&r);
            }
            // Unfused, one vector at a time.
            let mut ez: Vec<f64> = (0..n).map(|i| nn[i] + beta * z[i]).collect();
            let m = if jacobi { mm.clone() } else { w.clone() };
            let eq: Vec<f64> = if jacobi {
                (0..n).map(|i| m[i] + beta * q[i]).collect()
            } else {
                Vec::new()
            };
            let es: Vec<f64> = (0..n).map(|i| w[i] + beta * s[i]).collect();
            let ep: Vec<f64> = (0..n).map(|i| u[i] + beta * p[i]).collect();
            let ex: Vec<f64> = (0..n).map(|i| x[i] + alpha * ep[i]).collect();
            let er: Vec<f64> = (0..n).map(|i| r[i] - alpha * es[i]).collect();
            let eu: Vec<f64> = if jacobi {
                (0..n).map(|i| u[i] - alpha * eq[i]).collect()
            } else {
                er.clone()
            };
            let ew: Vec<f64> = (0..n).map(|i| w[i] - alpha * ez[i]).collect();
            let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).fold(0.0, |s, (x, y)| s + x * y);
            let want = [dot(&er, &eu), dot(&ew, &eu), dot(&er, &er)];
            let got = pipecg_update(
                alpha,
                beta,
                PipeBlock {
                    n: &nn,
                    x: &mut x,
                    r: &mut r,
                    w: &mut w,
                    z: &mut z,
                    s: &mut s,
                    p: &mut p,
                    pre: jacobi.then_some(PipePre {
                        u: &mut u,
                        q: &mut q,
                        m: &mm,
                    }),
                },
            );
            assert_eq!(got, want, "jacobi {jacobi}");
            assert_eq!((x, r, w, p, s), (ex, er, ew, ep, es), "jacobi {jacobi}");
            ez.truncate(n);
            assert_eq!(z, ez);
            if jacobi {
                assert_eq!((u, q), (eu, eq));
            }
        }
    }
}
