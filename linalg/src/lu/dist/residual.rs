//! HPL's scaled residual of the distributed LU's solution, with distributed
//! norms.

use crate::hpl::generate_tile;

use super::DistLu;

impl DistLu {
    /// HPL's scaled residual of `x` (the same on every rank), computed with
    /// distributed norms: each rank regenerates only the tiles it owns and
    /// its products are summed by all-reduces. Not part of HPL's timed
    /// region (HPL times the factorisation and the solve only).
    pub fn residual(
        &self,
        x: &[f64],
        coll: &tessera_engine::dist::Collectives,
    ) -> Result<f64, String> {
        use faer::linalg::matmul::matmul;
        use faer::{Accum, Par};

        use crate::tiled::{col_mut, col_ref as col};
        let (n, nb, t) = (self.n, self.nb, self.t);
        let block = |k: usize| k * nb..(k * nb + nb).min(n);
        let b = crate::hpl::generate_rhs(n, self.seed);
        // A·x and |A|'s row sums from the tiles each rank owns.
        let mut r = vec![0.0; n];
        let mut row_sums = vec![0.0; n];
        for j in 0..t {
            for i in 0..t {
                if self.layout.owner(i, j) != self.rank {
                    continue;
                }
                let a = generate_tile(n, nb, self.seed, i, j);
                matmul(
                    col_mut(&mut r[block(i)]),
                    Accum::Add,
                    a.as_ref(),
                    col(&x[block(j)]),
                    1.0,
                    Par::Seq,
                );
                for c in 0..a.cols() {
                    for (s, v) in row_sums[block(i)].iter_mut().zip(a.col(c)) {
                        *s += v.abs();
                    }
                }
            }
        }
        coll.allreduce_sum(&mut r)?;
        coll.allreduce_sum(&mut row_sums)?;
        for (ri, bi) in r.iter_mut().zip(&b) {
            *ri -= bi;
        }
        if n == 0 {
            return Ok(0.0);
        }
        let inf = |v: &[f64]| v.iter().fold(0.0_f64, |m, e| m.max(e.abs()));
        let norm_a = row_sums.iter().fold(0.0_f64, |m, &s| m.max(s));
        Ok(inf(&r) / (crate::hpl::HPL_EPS * (norm_a * inf(x) + inf(&b)) * n as f64))
    }
}
