//! The entry lines of one piece of a Matrix Market file → triplets: a one-pass fast path for
//! the common `row col value` line, a token-by-token path for the rest and the messages.

use super::header::{parse_size_line, Field, Header, Symmetry};
use super::lex::{show, Tokens};
use super::number::{parse_integer, parse_real, parse_real_fast};

/// What an entry line must look like, from the banner and the size line.
pub(super) struct EntryFormat {
    pub(super) field: Field,
    pub(super) symmetry: Symmetry,
    pub(super) n_rows: usize,
    pub(super) n_cols: usize,
}

impl EntryFormat {
    /// The format the banner's `header` and the size line `line` declare,
    /// and the declared number of entries; a non-square symmetric matrix or
    /// more columns than 32-bit indices hold is an error. (Both readers, the
    /// whole file's and a row range's, start here.)
    pub(super) fn from_size_line(
        header: &Header,
        line: &[u8],
    ) -> Result<(EntryFormat, usize), String> {
        let (n_rows, n_cols, declared) = parse_size_line(line)?;
        if header.symmetry != Symmetry::General && n_rows != n_cols {
            return Err(format!(
                "a {} matrix must be square, got {n_rows} × {n_cols}",
                header.symmetry.name()
            ));
        }
        if u32::try_from(n_cols).is_err() {
            return Err(crate::sparse::csr::CsrError::TooManyColumns { n_cols }.to_string());
        }
        let format = EntryFormat {
            field: header.field,
            symmetry: header.symmetry,
            n_rows,
            n_cols,
        };
        Ok((format, declared))
    }
}

/// NaN or an infinity (written so, or a value past f64's range) makes every
/// product with its row NaN or infinite, and checks that fold with `max`
/// would not see it: entry `(i, j)` (0-based) is refused.
#[inline(always)]
pub(super) fn check_finite(i: usize, j: usize, v: f64) -> Result<(), String> {
    if v.is_finite() {
        Ok(())
    } else {
        Err(format!(
            "entry ({}, {}) is {v}: not a finite number",
            i + 1,
            j + 1
        ))
    }
}

/// The triplets of one piece of entry lines (symmetric storage already expanded).
pub(super) struct Piece {
    pub(super) rows: Vec<usize>,
    pub(super) cols: Vec<u32>,
    pub(super) vals: Vec<f64>,
    /// Entry lines seen (not counting blank and comment lines).
    pub(super) entries: usize,
    /// Lines in the piece.
    pub(super) lines: usize,
}

#[derive(Debug)]
pub(super) enum PieceError {
    /// At the piece's `line`-th line (1-based), after `entries_before` entry lines.
    Parse {
        line: usize,
        entries_before: usize,
        message: String,
    },
    Alloc(std::collections::TryReserveError),
}

/// Parses one piece of entry lines: a fast path for the common `int int number` line, and
/// the token-by-token path ([`parse_entry_line`]) for anything else, which either accepts
/// the line (comments, `\r`, `nan`, many digits) or produces the error message.
pub(super) fn parse_piece(
    buf: &[u8],
    format: &EntryFormat,
    capacity: usize,
) -> Result<Piece, PieceError> {
    let per_entry = if format.symmetry == Symmetry::General {
        1
    } else {
        2
    };
    let mut piece = Piece {
        rows: Vec::new(),
        cols: Vec::new(),
        vals: Vec::new(),
        entries: 0,
        lines: 0,
    };
    let cap = capacity.saturating_mul(per_entry);
    piece.rows.try_reserve(cap).map_err(PieceError::Alloc)?;
    piece.cols.try_reserve(cap).map_err(PieceError::Alloc)?;
    piece.vals.try_reserve(cap).map_err(PieceError::Alloc)?;
    let mut pos = 0;
    while pos < buf.len() {
        piece.lines += 1;
        let start = pos;
        let entry = match fast_entry(buf, &mut pos, format) {
            Fast::Entry(i, j, v) => Some((i, j, v)),
            Fast::Skip => None,
            Fast::Slow => {
                let end = buf[start..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(buf.len(), |nl| start + nl);
                pos = end + 1;
                parse_entry_line(&buf[start..end], format).map_err(|message| PieceError::Parse {
                    line: piece.lines,
                    entries_before: piece.entries,
                    message,
                })?
            }
        };
        if let Some((i, j, v)) = entry {
            store(&mut piece, i, j, v, format.symmetry).map_err(|message| PieceError::Parse {
                line: piece.lines,
                entries_before: piece.entries,
                message,
            })?;
            piece.entries += 1;
        }
    }
    Ok(piece)
}

/// Adds entry `(i, j) = v` (0-based) with its mirror image under `symmetry`.
#[inline(always)]
pub(super) fn store(
    piece: &mut Piece,
    i: usize,
    j: usize,
    v: f64,
    symmetry: Symmetry,
) -> Result<(), String> {
    check_finite(i, j, v)?;
    let mut push = |i: usize, j: usize, v: f64| {
        piece.rows.push(i);
        piece.cols.push(j as u32);
        piece.vals.push(v);
    };
    match symmetry {
        Symmetry::General => push(i, j, v),
        Symmetry::Symmetric => {
            push(i, j, v);
            if i != j {
                push(j, i, v);
            }
        }
        Symmetry::SkewSymmetric => {
            if i != j {
                push(i, j, v);
                push(j, i, -v);
            } else if v != 0.0 {
                return Err(format!(
                    "skew-symmetric matrix has a non-zero diagonal entry ({}, {}) = {v}",
                    i + 1,
                    j + 1
                ));
            }
        }
    }
    Ok(())
}

pub(super) enum Fast {
    /// An entry, 0-based; `pos` is past its line.
    Entry(usize, usize, f64),
    /// A blank or comment line; `pos` is past it.
    Skip,
    /// Not the common shape: `pos` is unchanged, the line needs the careful path.
    Slow,
}

/// The common entry line `[ \t]*row[ \t]+col([ \t]+value)?[ \t\r]*` with in-range indices
/// and a value the exact fast path reads, in one pass over its bytes.
#[inline(always)]
pub(super) fn fast_entry(buf: &[u8], pos: &mut usize, format: &EntryFormat) -> Fast {
    let n = buf.len();
    let mut q = *pos;
    let blank = |b: u8| b == b' ' || b == b'\t';
    while q < n && blank(buf[q]) {
        q += 1;
    }
    if q == n {
        *pos = n;
        return Fast::Skip;
    }
    if buf[q] == b'\n' {
        *pos = q + 1;
        return Fast::Skip;
    }
    if buf[q] == b'%' {
        return Fast::Slow;
    }
    // An index: 1..=19 digits (no overflow), then a blank; `None` for anything else.
    let index = |q: &mut usize, limit: usize| -> Option<usize> {
        let start = *q;
        let mut v: u64 = 0;
        while *q < n && buf[*q].is_ascii_digit() && *q - start < 19 {
            v = v * 10 + (buf[*q] - b'0') as u64;
            *q += 1;
        }
        (*q > start && v >= 1 && v <= limit as u64).then(|| v as usize - 1)
    };
    let Some(i) = index(&mut q, format.n_rows) else {
        return Fast::Slow;
    };
    if !(q < n && blank(buf[q])) {
        return Fast::Slow;
    }
    while q < n && blank(buf[q]) {
        q += 1;
    }
    let Some(j) = index(&mut q, format.n_cols) else {
        return Fast::Slow;
    };
    let v = if format.field == Field::Pattern {
        1.0
    } else {
        if !(q < n && blank(buf[q])) {
            return Fast::Slow;
        }
        while q < n && blank(buf[q]) {
            q += 1;
        }
        let start = q;
        while q < n && !buf[q].is_ascii_whitespace() {
            q += 1;
        }
        let tok = &buf[start..q];
        let v = if format.field == Field::Real {
            parse_real_fast(tok)
        } else {
            parse_integer(tok)
        };
        let Some(v) = v else {
            return Fast::Slow;
        };
        v
    };
    while q < n && (blank(buf[q]) || buf[q] == b'\r') {
        q += 1;
    }
    if q == n {
        *pos = n;
    } else if buf[q] == b'\n' {
        *pos = q + 1;
    } else {
        return Fast::Slow;
    }
    Fast::Entry(i, j, v)
}

/// One line read token by token: `Ok(None)` for a blank or comment line, the 0-based entry,
/// or the message saying what is wrong with it.
pub(super) fn parse_entry_line(
    line: &[u8],
    format: &EntryFormat,
) -> Result<Option<(usize, usize, f64)>, String> {
    let mut t = Tokens { line, pos: 0 };
    let Some(first) = t.next() else {
        return Ok(None);
    };
    if first[0] == b'%' {
        return Ok(None);
    }
    let n_fields = if format.field == Field::Pattern { 2 } else { 3 };
    let second = t.next();
    let third = if n_fields == 3 { t.next() } else { None };
    let found = 1 + second.is_some() as usize + third.is_some() as usize + t.count_rest();
    let (Some(second), true) = (second, found == n_fields) else {
        return Err(format!(
            "expected {n_fields} fields '{}', found {found}",
            format.field.entry_form()
        ));
    };
    let i = parse_index(first, "row", format.n_rows)?;
    let j = parse_index(second, "column", format.n_cols)?;
    let v = match (format.field, third) {
        (Field::Pattern, _) => 1.0,
        (Field::Real, Some(tok)) => {
            parse_real(tok).ok_or_else(|| format!("value '{}' is not a number", show(tok)))?
        }
        (Field::Integer, Some(tok)) => {
            parse_integer(tok).ok_or_else(|| format!("value '{}' is not an integer", show(tok)))?
        }
        (_, None) => unreachable!("three fields were counted"),
    };
    Ok(Some((i, j, v)))
}

/// A 1-based index token → 0-based index in `0..n`, or the message for `what`.
#[inline]
pub(super) fn parse_index(tok: &[u8], what: &str, n: usize) -> Result<usize, String> {
    let mut v: u64 = 0;
    for &b in tok {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return Err(format!(
                "{what} index '{}' is not a positive integer",
                show(tok)
            ));
        }
        // Saturates: a huge index is reported as out of range, with its text.
        v = v.saturating_mul(10).saturating_add(d as u64);
    }
    if v == 0 || v > n as u64 {
        return Err(format!("{what} index {} out of range 1..={n}", show(tok)));
    }
    Ok(v as usize - 1)
}

#[cfg(test)]
mod tests {
    // Proves that symmetric storage expands as the specification says.
    use super::super::testing::{dense, parse};

    #[test]
    fn symmetric_variants_expand() {
        let text = |field: &str, sym: &str, v: [&str; 3]| {
            format!(
                "%%MatrixMarket matrix coordinate {field} {sym}\n3 3 3\n1 1{}\n3 1{}\n3 2{}\n",
                v[0], v[1], v[2]
            )
        };
        let a = parse(&text("real", "symmetric", [" 4", " 0.5", " -1"])).unwrap();
        assert_eq!(
            dense(&a),
            vec![
                vec![4.0, 0.0, 0.5],
                vec![0.0, 0.0, -1.0],
                vec![0.5, -1.0, 0.0]
            ]
        );
        assert_eq!(a.nnz(), 5, "the diagonal is not duplicated");
        let b = parse(&text("integer", "symmetric", [" 4", " 2", " -1"])).unwrap();
        assert_eq!(b.get(0, 2), 2.0);
        assert_eq!(b.get(2, 0), 2.0);
        let c = parse(&text("pattern", "symmetric", ["", "", ""])).unwrap();
        assert_eq!(
            dense(&c),
            vec![
                vec![1.0, 0.0, 1.0],
                vec![0.0, 0.0, 1.0],
                vec![1.0, 1.0, 0.0]
            ]
        );
        // Skew: the zero diagonal entry is dropped, the rest mirrored with a flipped sign.
        let d = parse(&text("real", "skew-symmetric", [" 0", " 0.5", " -1"])).unwrap();
        assert_eq!(
            dense(&d),
            vec![
                vec![0.0, 0.0, -0.5],
                vec![0.0, 0.0, 1.0],
                vec![0.5, -1.0, 0.0]
            ]
        );
        assert_eq!(d.nnz(), 4);
        let e = parse(&text("integer", "skew-symmetric", [" 0", " 2", " -1"])).unwrap();
        assert_eq!(e.get(0, 2), -2.0);
        assert_eq!(e.get(2, 0), 2.0);
    }
}
