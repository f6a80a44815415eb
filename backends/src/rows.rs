//! Row interchanges (LAPACK `dlaswp`) as a plan of row moves: the host-side
//! step every backend's row-swap kernel starts from (the CUDA gather/scatter
//! kernels, the distributed LU's row exchanges between ranks).

use std::collections::BTreeMap;

/// Moves that apply the interchanges `ipiv` (LAPACK `dlaswp`, forward: for
/// i = 0.. swap rows i and `ipiv[i]`) to `total_rows` rows: `(dst, src)`
/// means row `dst` receives the old content of row `src`. Only rows whose
/// content changes appear, sorted by `dst`.
pub fn laswp_moves(total_rows: usize, ipiv: &[usize]) -> Result<Vec<(usize, usize)>, String> {
    if ipiv.len() > total_rows {
        return Err(format!(
            "laswp: ipiv has {} entries but the tiles hold {total_rows} rows",
            ipiv.len()
        ));
    }
    // Position -> the original row now there; absent: unmoved.
    let mut at: BTreeMap<usize, usize> = BTreeMap::new();
    for (i, &p) in ipiv.iter().enumerate() {
        if p >= total_rows {
            return Err(format!(
                "laswp: ipiv[{i}] = {p} is out of range: the tiles hold {total_rows} rows"
            ));
        }
        if p != i {
            let ri = at.get(&i).copied().unwrap_or(i);
            let rp = at.get(&p).copied().unwrap_or(p);
            at.insert(i, rp);
            at.insert(p, ri);
        }
    }
    Ok(at.into_iter().filter(|&(dst, src)| dst != src).collect())
}

#[cfg(test)]
mod tests {
    //! The plan of moves equals applying the interchanges one by one, for
    //! fixed and 500 random pivot sequences; bad pivots are named.
    use super::*;

    /// Applies the swaps to row ids, as LAPACK's dlaswp does.
    fn swapped(total: usize, ipiv: &[usize]) -> Vec<usize> {
        let mut rows: Vec<usize> = (0..total).collect();
        for (i, &p) in ipiv.iter().enumerate() {
            rows.swap(i, p);
        }
        rows
    }
    /// Applies the moves as the kernels do: gather all, then scatter.
    fn moved(total: usize, moves: &[(usize, usize)]) -> Vec<usize> {
        let mut rows: Vec<usize> = (0..total).collect();
        let gathered: Vec<usize> = moves.iter().map(|&(_, src)| rows[src]).collect();
        for (&(dst, _), v) in moves.iter().zip(gathered) {
            rows[dst] = v;
        }
        rows
    }
    fn check(total: usize, ipiv: &[usize]) {
        let moves = laswp_moves(total, ipiv).unwrap();
        assert_eq!(moved(total, &moves), swapped(total, ipiv), "ipiv {ipiv:?}");
        assert!(moves.iter().all(|&(d, s)| d != s));
        assert!(
            moves.windows(2).all(|w| w[0].0 < w[1].0),
            "sorted, unique destinations"
        );
    }
    #[test]
    fn identity_and_empty() {
        assert!(laswp_moves(5, &[]).unwrap().is_empty());
        assert!(laswp_moves(5, &[0, 1, 2]).unwrap().is_empty());
        assert!(laswp_moves(0, &[]).unwrap().is_empty());
    }
    #[test]
    fn fixed_cases() {
        // Swap back and forth cancels; chains; repeated rows; ipiv[i] == i.
        check(6, &[3, 1, 2, 3]);
        check(6, &[3, 3, 3, 3]);
        check(6, &[5, 5, 5, 5, 5, 5]);
        check(4, &[1, 0]);
        check(8, &[7, 6, 5, 4]);
        check(3, &[2, 2, 2]);
    }
    #[test]
    fn random_cases() {
        let mut s = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        for _ in 0..500 {
            let total = 1 + (next() % 40) as usize;
            let len = (next() % (total as u64 + 1)) as usize;
            let ipiv: Vec<usize> = (0..len)
                .map(|i| {
                    if next() % 4 == 0 {
                        i
                    } else {
                        (next() % total as u64) as usize
                    }
                })
                .collect();
            check(total, &ipiv);
        }
    }
    #[test]
    fn bad_ipiv_is_named() {
        let e = laswp_moves(4, &[1, 9]).unwrap_err();
        assert!(e.contains("ipiv[1] = 9"), "{e}");
        let e = laswp_moves(2, &[0, 1, 1]).unwrap_err();
        assert!(e.contains("3 entries"), "{e}");
    }
}
