//! Tessera's codelet library: each kernel is one codelet, with in-place kernels on tile views underneath.

pub mod kernels;
pub mod tile;
