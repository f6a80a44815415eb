//! One tile column's update by one panel: its row interchanges, the TRSM of
//! its `U` tile and the GEMMs of the tiles below — SWAP, TRSM and the GEMMs
//! of one column in one call, for the LU's device-sized update tasks.

use super::{gemm_update, laswp, trsm_unit_lower};
use crate::tile::Tile;

/// Update tile column `col` (its tiles from the panel's row down, top to
/// bottom) by the panel whose factors are `l` (the same tile rows of the
/// panel's column) and pivots `ipiv`: `laswp`, then `U := L₁₁⁻¹ U` on the
/// first tile, then `C_i −= L_i · U` below it.
///
/// # Panics
/// If `l` and `col` do not have the same number of tiles with matching
/// shapes (as the kernels it calls).
pub fn update_column(ipiv: &[usize], l: &[&Tile], col: &mut [&mut Tile]) {
    assert_eq!(
        l.len(),
        col.len(),
        "update_column: {} panel tiles for {} column tiles",
        l.len(),
        col.len()
    );
    laswp(col, ipiv);
    let Some((u, below)) = col.split_first_mut() else {
        return;
    };
    trsm_unit_lower(l[0], u);
    gemm_rows(&l[1..], u, below);
}

/// `C_i −= L_i · U` for each tile `C_i` of `c` (a block of tile rows of one
/// column) and the panel tile `L_i` of the same row.
pub fn gemm_rows(l: &[&Tile], u: &Tile, c: &mut [&mut Tile]) {
    assert_eq!(
        l.len(),
        c.len(),
        "gemm_rows: {} L tiles, {} C tiles",
        l.len(),
        c.len()
    );
    for (li, ci) in l.iter().zip(c.iter_mut()) {
        gemm_update(li, u, ci);
    }
}

#[cfg(test)]
mod tests {
    //! Proves that `update_column` equals SWAP, TRSM and GEMM applied one by
    //! one, on a column of three tiles with a short last one.
    use super::*;
    use crate::kernels::getrf_panel;
    use crate::kernels::test_support::random_dense;

    fn tiles(m: usize, w: usize, nb: usize, seed: u64) -> Vec<Tile> {
        let d = random_dense(m, w, seed);
        (0..m)
            .step_by(nb)
            .map(|r0| {
                let r = nb.min(m - r0);
                let mut t = Tile::zeros(r, w);
                for c in 0..w {
                    t.col_mut(c).copy_from_slice(&d[c * m + r0..c * m + r0 + r]);
                }
                t
            })
            .collect()
    }

    #[test]
    fn equals_swap_trsm_gemm_one_by_one() {
        let (m, nb) = (23, 8);
        let mut panel = tiles(m, nb, nb, 1);
        let ipiv = getrf_panel(&mut panel.iter_mut().collect::<Vec<_>>(), 0).unwrap();
        let l: Vec<&Tile> = panel.iter().collect();
        let mut fused = tiles(m, 5, nb, 2);
        let mut steps = fused.clone();
        update_column(&ipiv, &l, &mut fused.iter_mut().collect::<Vec<_>>());
        laswp(&mut steps.iter_mut().collect::<Vec<_>>(), &ipiv);
        let (u, below) = steps.split_first_mut().unwrap();
        trsm_unit_lower(l[0], u);
        for (i, c) in below.iter_mut().enumerate() {
            gemm_update(l[i + 1], u, c);
        }
        for (a, b) in fused.iter().zip(&steps) {
            assert_eq!(a.as_slice(), b.as_slice());
        }
    }
}
