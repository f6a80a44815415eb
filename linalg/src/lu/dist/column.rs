//! How the members of a distributed panel meet (P > 1): the kernel's
//! [`ColumnExchange`] over the LU's own collectives channel, which
//! `DistClasses::open` opens when the run starts.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tessera_engine::dist::Collectives;
use tessera_tasks::kernels::ColumnExchange;

use super::codec::{f64s, from_f64s};

/// Panel `k`'s members as one of them sees them.
pub(super) struct ColumnNet {
    /// The LU's panel channel (`None`: the run did not open it).
    pub(super) net: Option<Arc<Collectives>>,
    /// The members' ranks, member 0 (the diagonal tile's) first.
    pub(super) ranks: Vec<usize>,
    /// This rank's place in `ranks`.
    pub(super) me: usize,
    /// The panel.
    pub(super) k: usize,
    /// Exchanges made so far (the same count on every member).
    pub(super) round: AtomicU64,
}

impl ColumnExchange for ColumnNet {
    fn members(&self) -> usize {
        self.ranks.len()
    }

    fn me(&self) -> usize {
        self.me
    }

    fn allgather(&self, part: Vec<f64>) -> Result<Vec<Vec<f64>>, String> {
        let net = self.net.as_ref().ok_or(
            "the LU's panel channel is not open (the run did not start through dist::symbolic)",
        )?;
        // Tags: the panel in the high half, the exchange in the low one (a panel of
        // fewer than 2^32 columns has fewer exchanges).
        let round = self.round.fetch_add(1, Ordering::Relaxed);
        let tag = (self.k as u64) << 32 | round;
        let parts = net.allgather_among(&self.ranks, tag, &f64s(&part))?;
        Ok(parts.iter().map(|b| from_f64s(b)).collect())
    }
}
