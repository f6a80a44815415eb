//! Which members of which team entered a team panel: a panel is factored once, by one team.

use std::sync::Mutex;

use tessera_engine::team::Member;

/// The team size that claimed the panel and the ranks claimed so far.
#[derive(Default)]
pub(super) struct Claims {
    size: usize,
    ranks: Vec<bool>,
}

impl Claims {
    /// Records `member`'s rank as taken in `claims` (shared by the team kernels: this one
    /// and `DistTeamPanel`); `what` names the kernel's entry point in the panic.
    ///
    /// # Panics
    /// If the rank was taken, or the panel was claimed by a team of another size.
    pub(super) fn claim(claims: &Mutex<Claims>, member: &Member<'_>, what: &str) {
        let (rank, size) = (member.rank(), member.size());
        let taken = {
            let mut c = claims.lock().unwrap_or_else(|e| e.into_inner());
            if c.ranks.is_empty() {
                c.size = size;
                c.ranks = vec![false; size];
            }
            let taken = c.size != size || c.ranks[rank];
            if !taken {
                c.ranks[rank] = true;
            }
            taken
        };
        assert!(
            !taken,
            "{what}: rank {rank} of a team of {size} entered a panel already claimed (a panel \
             is factored once, by one team)"
        );
    }
}
