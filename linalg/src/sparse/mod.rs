//! Sparse matrices for the SpMV driver: triplet assembly ([`coo`]), validated CSR with row
//! blocks and nonzero-balanced partitions ([`csr`]), Matrix Market input and output ([`mm`]),
//! benchmark generators ([`gen`]) and the STREAM-triad bandwidth that SpMV rates are judged
//! against ([`stream`]).
//!
//! The multiply itself lives in `tessera_tasks::kernels::spmv` (raw slices, so codelets need
//! no linalg types); [`csr::Csr::spmv`] calls it and [`csr::Csr::spmv_reference`] is the plain
//! loop tests compare it with.

pub mod coo;
pub mod csr;
pub mod gen;
pub mod mm;
pub mod stream;

pub use coo::Coo;
pub use csr::{Csr, CsrError};
pub use mm::{read_matrix_market, write_matrix_market};
