//! Tessera's runtime: data handles, task graphs, scheduling policies, workers and traces.
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod trace;
