//! Matrix Market (`.mtx`) reading and writing: `coordinate` matrices with `real`, `integer` or
//! `pattern` values and `general`, `symmetric` or `skew-symmetric` storage, errors that name
//! the file and line, and a parser fast enough that input is not the slow part of a run.
//!
//! One concern per module: `read` turns a file into CSR (pieces parsed in parallel, counts
//! and line numbers checked in file order), `header` reads the banner and the size line,
//! `entries` the entry lines of one piece, `number` the values, `lex` cuts lines and tokens,
//! and `write` writes a matrix back.
//!
//! # What is read
//!
//! - The banner `%%MatrixMarket matrix coordinate <field> <symmetry>` (keywords in any case;
//!   `double` is taken as `real`). `complex`, `hermitian` and the dense `array` format are
//!   refused with a message saying so; so is `pattern skew-symmetric`, which the format's
//!   specification does not define (a pattern has no sign to flip).
//! - `%` comment lines and blank lines, before the size line and between entries.
//! - The size line `rows cols entries`, then `entries` lines `row col [value]`, 1-based.
//!   Fewer entries (a truncated file), more entries, an index of 0 or past the size, a value
//!   that is not a number (or not an integer in an `integer` file) or a wrong number of
//!   fields on a line are errors naming that line (the end of file for a truncation).
//! - `symmetric` files are expanded: each off-diagonal entry `(i, j)` also yields `(j, i)`,
//!   the diagonal is stored once. `skew-symmetric` yields `(j, i) = −a` and its diagonal must
//!   be zero (a zero diagonal entry is accepted and dropped, a non-zero one is an error). The
//!   specification asks for the lower triangle only; an entry above the diagonal is mirrored
//!   the same way, so a file listing both `(i, j)` and `(j, i)` gets both twice.
//! - Repeated positions are summed (in file order), explicit zeros are kept as entries.
//! - Values are parsed like Rust's `f64::from_str`; a value that is not finite (`nan`,
//!   `inf`, `infinity` in any case, or a number past f64's range such as `1e400`) is an
//!   error naming its line: one such entry makes every product with its row NaN or
//!   infinite, and a result check would not see it.
//! - Only regular files are read: a FIFO or a device (`/dev/zero`) is refused unopened.
//!
//! # Why not `sprs`
//!
//! `sprs::io::read_matrix_market` (0.11, read in its source) reports every malformed file as
//! `IoError::BadMatrixMarketFile`, displayed as "Bad matrix market file.", with neither line
//! nor reason; it does not range-check indices, so an index past the size reaches
//! `TriMat::from_triplets`, which panics; it loops forever on a file that ends before the
//! size line (its comment-skipping loop also skips end of file); it refuses comment lines
//! between entries; and it reads through `BufRead::read_line` into a `String` with
//! `str::parse` per field. It would also bring `ndarray` and `num-*` into the build. Errors
//! that name the line are required here, so this module has its own parser:
//!
//! - the whole file is read with one `read`, and the entry lines are cut into one piece per
//!   core (pieces of at least [`MIN_CHUNK_BYTES`], cut at line ends), parsed in parallel and
//!   checked in file order, so counts and line numbers are those of a sequential read;
//! - a one-pass fast path reads the common line `row col value`: indices by a digit loop,
//!   values by Clinger's exact fast path (a decimal with ≤ 19 significant digits, mantissa
//!   ≤ 2⁵³ and exponent within ±22 is one correctly rounded multiply or divide); any other
//!   line (comments, `\r`, long or odd numbers, errors) goes through a token-by-token path
//!   that uses `f64::from_str` and writes the error messages;
//! - COO → CSR is a counting sort by row (`O(nnz + rows)`, rows sorted only if needed).
//!
//! # Speed
//!
//! Measured (release build, the project's 2-core AMD EPYC development VM, file in the page
//! cache, best of 3): a 27-point stencil file (`stencil27:66`, 7.5 M entries, 122 MB, values
//! like `-1`) reads file → CSR at **723 MB/s** (0.17 s; on one thread, from memory: 628 MB/s);
//! a power-law file with random 17-digit values (`powerlaw:700000:10:2.5`, 234 MB; values
//! take the `f64::from_str` path) at **665 MB/s** (one thread from memory: 507 MB/s). The
//! remaining sequential parts are the `read` itself (~2.4 GB/s) and the COO → CSR sort.
//! With other builds sharing the two cores the same runs give about half (384 / 393 MB/s).
//! Command: `cargo test --release -p tessera-linalg sparse::mm::read::tests::speed -- --ignored
//! --nocapture`.

mod entries;
mod header;
mod lex;
mod number;
mod read;
mod rows;
#[cfg(test)]
mod testing;
mod write;

pub use read::{
    check_regular_file, parse_matrix_market, parse_matrix_market_bytes, read_matrix_market,
    read_matrix_market_sized, MIN_CHUNK_BYTES,
};
pub use rows::{scan_matrix_market, scan_matrix_market_sized, MatrixMarketRows};
pub use write::{write_matrix_market, write_matrix_market_to};
