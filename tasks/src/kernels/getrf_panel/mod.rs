//! GETRF on a panel: LU with partial pivoting of one column of tiles, LAPACK-style pivots,
//! on one core ([`getrf_panel`]), by a team of workers ([`TeamPanel`]), spread over the
//! ranks of a process column ([`getrf_panel_dist`]), or both ([`DistTeamPanel`]).

mod claims;
mod dist;
mod dist_team;
mod single;
mod team;

pub use dist::{getrf_panel_dist, ColumnExchange, DistPanelError};
pub use dist_team::DistTeamPanel;
pub use single::{getrf_panel, getrf_panel_faer, getrf_panel_flops, SingularColumn, LEAF};
pub use team::TeamPanel;
