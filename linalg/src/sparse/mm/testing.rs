//! Test helpers shared by the Matrix Market modules: parse at every piece count, errors as
//! (line, message), dense views.

use std::path::Path;

use tessera_engine::{FileError, FileErrorKind};

use super::parse_matrix_market;
use super::read::parse_with_threads;
use crate::sparse::csr::Csr;

/// Parses `text`, checking that cutting it into 1, 2, 3 or 7 pieces for threads gives the
/// same result (compared through `Debug`, so NaN values compare equal).
pub(super) fn parse(text: &str) -> Result<Csr, FileError> {
    let name = Some(Path::new("m.mtx"));
    let auto = parse_matrix_market(text.as_bytes(), name);
    for pieces in [1, 2, 3, 7] {
        let forced = parse_with_threads(text.as_bytes(), name, Some(pieces));
        assert_eq!(
            format!("{forced:?}"),
            format!("{auto:?}"),
            "{pieces} pieces: {text:?}"
        );
    }
    auto
}

/// Dense row-major form, for readable expectations.
pub(super) fn dense(a: &Csr) -> Vec<Vec<f64>> {
    (0..a.n_rows())
        .map(|i| (0..a.n_cols()).map(|j| a.get(i, j)).collect())
        .collect()
}

/// `(line, message fragment)` of the error `text` gives.
pub(super) fn fails(text: &str) -> (usize, String) {
    let e = parse(text).unwrap_err();
    assert_eq!(e.path(), Some(Path::new("m.mtx")));
    match e.kind() {
        FileErrorKind::Line { line, message } => (*line, message.clone()),
        other => panic!("not an error on a line: {other:?}"),
    }
}

pub(super) fn fails_err(text: &str) -> FileError {
    parse(text).unwrap_err()
}

pub(super) const H: &str = "%%MatrixMarket matrix coordinate real general\n";
