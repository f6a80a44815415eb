//! The LU runs of `tessera lu`: [`plan`] (the checks and sizing that the real,
//! distributed and simulated runs share), [`run`] (one process), [`dist`] (the
//! ranks of mpirun) and [`resident`] (the device-resident LU). `cmd::lu` only
//! dispatches to them; the runners import [`plan`] and not each other.

pub mod dist;
pub mod plan;
pub mod resident;
pub mod run;
