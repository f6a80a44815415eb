//! Tessera's codelet library, in layers: data types (tiles, CSR blocks), in-place kernels
//! on them, one file per operation (`kernels`), and the codelets that wrap the kernels with a
//! body per architecture (`codelets`: CPU, CUDA, the emulated device).

pub mod codelets;
pub mod csr;
pub mod kernels;
pub mod tile;
