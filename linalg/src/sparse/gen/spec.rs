//! The `name:args` spec of the generators (see the parent module's table): parsed and
//! checked into a [`GenSpec`] before anything is allocated, then built whole or by a range
//! of rows. A spec never names more than `MAX_SPEC_NNZ` entries nor more rows than the
//! 32-bit column indices hold.

use std::ops::Range;

use super::{
    banded_len, banded_rows, dense_rows, powerlaw_lengths, powerlaw_rows, stencil27_len,
    stencil27_rows, stencil7_len, stencil7_rows,
};
use crate::sparse::csr::Csr;

/// Largest entry count a spec may ask for: 2³⁴ entries are 192 GiB of CSR, beyond any node
/// this runs on; refusing earlier gives a message instead of an allocation failure.
const MAX_SPEC_NNZ: u128 = 1 << 34;

const SPEC_FORMS: &str =
    "stencil7:N, stencil27:N, powerlaw:N[:AVG[:ALPHA[:SEED]]], banded:N:HALFBW, dense:N[:SEED]";

/// Builds the matrix a spec names (see the module doc), e.g. `stencil27:64`,
/// `powerlaw:100000:16:2.2`, `banded:1000000:8`, `dense:4000`. Errors name the spec and the
/// bad part; sizes are checked before anything is allocated.
pub fn parse_gen_spec(spec: &str) -> Result<Csr, String> {
    Ok(GenSpec::parse(spec)?.build())
}

/// A generator spec, parsed and checked but not built (see the module doc, "A range of rows
/// alone").
#[derive(Clone, Debug, PartialEq)]
pub enum GenSpec {
    /// [`stencil7`](super::stencil7)`(n)`.
    Stencil7 {
        /// Grid side.
        n: usize,
    },
    /// [`stencil27`](super::stencil27)`(n)`.
    Stencil27 {
        /// Grid side.
        n: usize,
    },
    /// [`banded`](super::banded)`(n, half_bandwidth)`.
    Banded {
        /// Order.
        n: usize,
        /// Half-width of the band.
        half_bandwidth: usize,
    },
    /// [`powerlaw`](super::powerlaw)`(n, avg, alpha, seed)`.
    Powerlaw {
        /// Order.
        n: usize,
        /// Average entries per row.
        avg: f64,
        /// Exponent of the power law.
        alpha: f64,
        /// Seed.
        seed: u64,
    },
    /// [`dense_as_sparse`](super::dense_as_sparse)`(n, seed)`.
    Dense {
        /// Order.
        n: usize,
        /// Seed.
        seed: u64,
    },
}

impl GenSpec {
    /// The whole matrix.
    pub fn build(&self) -> Csr {
        self.rows(0..self.n_rows())
    }

    /// Rows.
    pub fn n_rows(&self) -> usize {
        match *self {
            GenSpec::Stencil7 { n } | GenSpec::Stencil27 { n } => n * n * n,
            GenSpec::Banded { n, .. } | GenSpec::Powerlaw { n, .. } | GenSpec::Dense { n, .. } => n,
        }
    }

    /// Entries of the matrix, without building it (for `powerlaw`, the
    /// expected count `avg × n`; the others exactly, or an upper bound at
    /// the stencils' and band's edges): what a driver checks against memory
    /// before allocating.
    pub fn nnz(&self) -> u128 {
        match *self {
            GenSpec::Stencil7 { n } => (n as u128).pow(3) * 7,
            GenSpec::Stencil27 { n } => (n as u128).pow(3) * 27,
            GenSpec::Banded { n, half_bandwidth } => {
                n as u128 * (2 * half_bandwidth.min(n) as u128 + 1)
            }
            GenSpec::Powerlaw { n, avg, .. } => (avg.max(0.0) * n as f64) as u128,
            GenSpec::Dense { n, .. } => n as u128 * n as u128,
        }
    }

    /// Bytes of the CSR matrix (values, 32-bit column indices, row
    /// offsets), from [`GenSpec::nnz`].
    pub fn csr_bytes(&self) -> u128 {
        self.nnz() * 12 + (self.n_rows() as u128 + 1) * 8
    }

    /// Columns (every generated matrix is square).
    pub fn n_cols(&self) -> usize {
        self.n_rows()
    }

    /// Row offsets of the whole matrix (`row_ptr[i + 1] − row_ptr[i]` entries in row `i`),
    /// without building it: O(rows) time and memory.
    pub fn row_ptr(&self) -> Vec<usize> {
        let n_rows = self.n_rows();
        let lens: Box<dyn Fn(usize) -> usize> = match *self {
            GenSpec::Stencil7 { n } => Box::new(move |i| stencil7_len(n, i)),
            GenSpec::Stencil27 { n } => Box::new(move |i| stencil27_len(n, i)),
            GenSpec::Banded { n, half_bandwidth } => {
                let hb = half_bandwidth.min(n.saturating_sub(1));
                Box::new(move |i| banded_len(n, hb, i))
            }
            GenSpec::Dense { n, .. } => Box::new(move |_| n),
            GenSpec::Powerlaw {
                n,
                avg,
                alpha,
                seed,
            } => {
                if n == 0 {
                    return vec![0];
                }
                return powerlaw_lengths(n, avg, alpha, seed).1;
            }
        };
        let mut row_ptr = Vec::with_capacity(n_rows + 1);
        row_ptr.push(0usize);
        for i in 0..n_rows {
            row_ptr.push(row_ptr[i] + lens(i));
        }
        row_ptr
    }

    /// Rows `range` alone, as a `range.len() × n_cols` matrix: equal to
    /// `self.build().row_block(range)`, built without the other rows.
    ///
    /// # Panics
    /// If `range` is decreasing or ends past the last row.
    pub fn rows(&self, range: Range<usize>) -> Csr {
        match *self {
            GenSpec::Stencil7 { n } => stencil7_rows(n, range),
            GenSpec::Stencil27 { n } => stencil27_rows(n, range),
            GenSpec::Banded { n, half_bandwidth } => banded_rows(n, half_bandwidth, range),
            GenSpec::Powerlaw {
                n,
                avg,
                alpha,
                seed,
            } => powerlaw_rows(n, avg, alpha, seed, range),
            GenSpec::Dense { n, seed } => dense_rows(n, seed, range),
        }
    }

    /// Parses a spec (see [`parse_gen_spec`]) without building the matrix.
    pub fn parse(spec: &str) -> Result<GenSpec, String> {
        let mut parts = spec.trim().split(':');
        let name = parts.next().unwrap_or("");
        let args: Vec<&str> = parts.collect();
        let arity = |min: usize, max: usize, form: &str| {
            if args.len() < min || args.len() > max {
                Err(format!(
                    "matrix spec '{spec}': expected {form}, got {} argument(s)",
                    args.len()
                ))
            } else {
                Ok(())
            }
        };
        let int = |k: usize, what: &str| -> Result<usize, String> {
            args[k].parse::<usize>().map_err(|e| {
                format!(
                    "matrix spec '{spec}': {what} '{}' is not a non-negative integer ({e})",
                    args[k]
                )
            })
        };
        let real = |k: usize, what: &str| -> Result<f64, String> {
            match args[k].parse::<f64>() {
                Ok(v) if v.is_finite() => Ok(v),
                _ => Err(format!(
                    "matrix spec '{spec}': {what} '{}' is not a finite number",
                    args[k]
                )),
            }
        };
        let order = |n: usize, rows: u128, nnz: u128| -> Result<(), String> {
            if n == 0 {
                return Err(format!("matrix spec '{spec}': N must be at least 1"));
            }
            if rows > u32::MAX as u128 {
                return Err(format!(
                    "matrix spec '{spec}': {rows} rows exceed the 32-bit column indices ({})",
                    u32::MAX
                ));
            }
            if nnz > MAX_SPEC_NNZ {
                return Err(format!(
                    "matrix spec '{spec}': {nnz} entries exceed the limit of {MAX_SPEC_NNZ}"
                ));
            }
            Ok(())
        };
        match name {
            "stencil7" | "stencil27" => {
                arity(1, 1, &format!("{name}:N"))?;
                let n = int(0, "N")?;
                let rows = (n as u128).pow(3);
                order(n, rows, rows * if name == "stencil7" { 7 } else { 27 })?;
                Ok(if name == "stencil7" {
                    GenSpec::Stencil7 { n }
                } else {
                    GenSpec::Stencil27 { n }
                })
            }
            "banded" => {
                arity(2, 2, "banded:N:HALFBW")?;
                let n = int(0, "N")?;
                let hb = int(1, "HALFBW")?;
                order(n, n as u128, n as u128 * (2 * hb.min(n) as u128 + 1))?;
                Ok(GenSpec::Banded {
                    n,
                    half_bandwidth: hb,
                })
            }
            "powerlaw" => {
                arity(1, 4, "powerlaw:N[:AVG[:ALPHA[:SEED]]]")?;
                let n = int(0, "N")?;
                let avg = if args.len() > 1 {
                    real(1, "AVG")?
                } else {
                    16.0
                };
                let alpha = if args.len() > 2 {
                    real(2, "ALPHA")?
                } else {
                    2.5
                };
                let seed = if args.len() > 3 {
                    int(3, "SEED")? as u64
                } else {
                    1
                };
                order(n, n as u128, (avg.max(0.0) * n as f64) as u128)?;
                if !(avg > 0.0 && avg <= n as f64) {
                    return Err(format!(
                        "matrix spec '{spec}': AVG {avg} must be in (0, N = {n}]"
                    ));
                }
                if alpha <= 1.0 {
                    return Err(format!(
                        "matrix spec '{spec}': ALPHA {alpha} must be > 1 (a power law with a \
                     finite total)"
                    ));
                }
                Ok(GenSpec::Powerlaw {
                    n,
                    avg,
                    alpha,
                    seed,
                })
            }
            "dense" => {
                arity(1, 2, "dense:N[:SEED]")?;
                let n = int(0, "N")?;
                let seed = if args.len() > 1 {
                    int(1, "SEED")? as u64
                } else {
                    1
                };
                order(n, n as u128, n as u128 * n as u128)?;
                Ok(GenSpec::Dense { n, seed })
            }
            _ => Err(format!(
                "matrix spec '{spec}': unknown generator '{name}' (expected {SPEC_FORMS})"
            )),
        }
    }
}
