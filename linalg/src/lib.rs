//! Tessera's algorithms as task graphs: tiled layouts, LU, SpMV, generators and numerical checks.
