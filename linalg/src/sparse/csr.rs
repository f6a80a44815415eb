//! Validated CSR matrices: the type lives in the codelet library
//! (`tessera_tasks::csr`), next to the SpMV codelet that uses it.

pub use tessera_tasks::csr::*;
