//! The distributed LU's communication model: the bytes each rank is predicted
//! to send, from the DAG's shape alone.

use super::DistLu;

impl DistLu {
    /// Bytes this rank is predicted to send over the whole factorisation
    /// (the remote edges' data, one message per destination), from the DAG's
    /// shape alone: the communication model the driver prints beside the
    /// measured counter.
    pub fn predicted_bytes_sent(&self) -> u64 {
        let (t, g, me) = (self.t, self.grid(), self.rank);
        let tile = |i: usize, j: usize| (self.rows(i) * self.rows(j) * 8) as u64;
        let piv = |k: usize| (self.rows(k) * 8) as u64;
        let mut bytes = 0u64;
        for k in 0..t {
            if g.p == 1 {
                // The ring: each hop carries the pivots and the tile column.
                let panel: u64 = piv(k) + (k..t).map(|i| tile(i, k)).sum::<u64>();
                let ring = self.ring(k);
                let hops = std::iter::once(self.layout.pcol(k)).chain(ring.iter().copied());
                let senders: Vec<usize> = hops.take(ring.len()).collect();
                bytes += panel * senders.iter().filter(|&&r| r == me).count() as u64;
                continue;
            }
            // A part's pivots and L tiles, along its process row, to every rank
            // with a column right of the panel (the panel's own exchanges go on
            // a channel of their own, not counted here).
            let (pr, pc) = g.coords(me);
            if self.factors(k) {
                let part = piv(k)
                    + self
                        .part_rows(k, pr)
                        .iter()
                        .map(|&i| tile(i, k))
                        .sum::<u64>();
                let to = (0..g.q)
                    .filter(|&c| c != pc && self.cols_of(k, c) > 0)
                    .count();
                bytes += part * to as u64;
            }
            for j in k + 1..t {
                let top = self.layout.owner(k, j);
                for p in self.prows(k) {
                    let r = g.rank(p, self.layout.pcol(j));
                    if r == top {
                        continue;
                    }
                    let buf = (self.rows(k) * self.rows(j) * 8) as u64;
                    if r == me {
                        bytes += buf; // rows sent up
                    }
                    if top == me {
                        bytes += buf; // top rows sent down
                    }
                }
                // U(k, j) down the process column.
                if top == me {
                    let others = self.prows(k).into_iter().filter(|&p| p != k % g.p).count() as u64;
                    bytes += tile(k, j) * others;
                }
            }
        }
        bytes
    }
}

#[cfg(test)]
mod tests {
    //! Proves the model on grids small enough to count every message by
    //! hand (tiles of `nb = 2`, so a full tile is 32 bytes and a panel's
    //! pivots 16).

    use tessera_engine::Registrar;

    use super::*;
    use crate::lu::dist::{Grid, Layout};

    fn sent(n: usize, nb: usize, (p, q): (usize, usize)) -> Vec<u64> {
        let layout = Layout::cyclic(Grid { p, q }, n.div_ceil(nb));
        (0..p * q)
            .map(|r| {
                DistLu::empty(n, nb, 0, layout.clone(), r, Registrar::detached(), true)
                    .predicted_bytes_sent()
            })
            .collect()
    }

    #[test]
    fn one_by_two_with_a_short_last_tile() {
        // n = 3: tiles of 2 and 1 rows. Rank 0 sends panel 0 once (pivots
        // 2·8, tiles (0,0) 2×2 and (1,0) 1×2: 16 + 32 + 16); panel 1 has no
        // column right of it, and so no ring.
        assert_eq!(sent(3, 2, (1, 2)), vec![64, 0]);
    }

    #[test]
    fn one_by_three_ring_forwards() {
        // Panel 0 (pivots + 3 tiles = 112 bytes) goes 0 → 1 → 2: ranks 0 and
        // 1 each send it. Panel 1 (pivots + 2 tiles = 80) goes 1 → 2 only: no
        // column of rank 0 is right of it. Panel 2 goes nowhere.
        assert_eq!(sent(6, 2, (1, 3)), vec![112, 112 + 80, 0]);
    }

    #[test]
    fn two_by_one_factors_in_place_and_swaps() {
        // Tile row i on rank i: both factor panel 0 where its tiles are, and
        // there is no other process column to send it to. Rank 1 sends up its
        // rows of column 1 for SWAPTOP (a 2×2 buffer, 32). Rank 0 sends the
        // top rows down for SWAPIN (32) and U(0,1) down the column (32).
        assert_eq!(sent(4, 2, (2, 1)), vec![32 + 32, 32]);
    }
}
