//! Matrix Market (`.mtx`) reading and writing: `coordinate` matrices with `real`, `integer` or
//! `pattern` values and `general`, `symmetric` or `skew-symmetric` storage, errors that name
//! the file and line, and a parser fast enough that input is not the slow part of a run.
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
//! - Values are parsed like Rust's `f64::from_str`, so `nan`, `inf` and `infinity` (any
//!   case, with a sign) are accepted as those values; checking them is the caller's business.
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
//! Command: `cargo test --release -p tessera-linalg sparse::mm::tests::speed -- --ignored
//! --nocapture`.

use std::fs::File;
use std::io::{self, BufRead, BufWriter, Write};
use std::path::Path;

use tessera_engine::{FileError, FileErrorKind};

use super::csr::Csr;

/// Reads the Matrix Market file at `path` into CSR.
pub fn read_matrix_market(path: impl AsRef<Path>) -> Result<Csr, FileError> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| FileError::from(e).with_path(path))?;
    parse_matrix_market_bytes(&bytes, Some(path))
}

/// Reads Matrix Market text from `reader` (all of it, then parses); `name` labels errors.
pub fn parse_matrix_market(
    mut reader: impl BufRead,
    name: Option<&Path>,
) -> Result<Csr, FileError> {
    let mut bytes = Vec::new();
    reader
        .read_to_end(&mut bytes)
        .map_err(|e| in_file(FileError::from(e), name))?;
    parse_matrix_market_bytes(&bytes, name)
}

/// Parses Matrix Market text held in memory; `name` labels errors. Large inputs are parsed
/// by several threads (one contiguous piece of lines each, at least [`MIN_CHUNK_BYTES`]).
pub fn parse_matrix_market_bytes(bytes: &[u8], name: Option<&Path>) -> Result<Csr, FileError> {
    parse_with_threads(bytes, name, None)
}

/// `e`, in the file `name` when there is one.
fn in_file(e: FileError, name: Option<&Path>) -> FileError {
    match name {
        Some(path) => e.with_path(path),
        None => e,
    }
}

/// Smallest piece of the entry lines worth a thread of its own.
pub const MIN_CHUNK_BYTES: usize = 4 << 20;

/// [`parse_matrix_market_bytes`] with the number of pieces forced (tests use it to cut small
/// files into several pieces); `None` picks it from the input size and the cores.
fn parse_with_threads(
    bytes: &[u8],
    name: Option<&Path>,
    threads: Option<usize>,
) -> Result<Csr, FileError> {
    let err = |line: usize, message: String| {
        in_file(FileError::new(FileErrorKind::Line { line, message }), name)
    };
    let mut lines = Lines {
        buf: bytes,
        pos: 0,
        line: 0,
    };

    // Banner.
    let Some(banner) = lines.next() else {
        return Err(err(
            1,
            format!("empty file: expected the banner '{BANNER_FORM}'"),
        ));
    };
    let header = parse_banner(banner).map_err(|m| err(1, m))?;

    // Size line, after comments and blank lines.
    let (size_line, size) = loop {
        let Some(line) = lines.next() else {
            return Err(err(
                lines.line + 1,
                "missing size line 'rows cols entries' (file ends after the header)".into(),
            ));
        };
        let mut t = Tokens { line, pos: 0 };
        match t.next() {
            None => continue,
            Some(tok) if tok[0] == b'%' => continue,
            Some(_) => break (lines.line, line),
        }
    };
    let (n_rows, n_cols, declared) = parse_size_line(size).map_err(|m| err(size_line, m))?;
    if header.symmetry != Symmetry::General && n_rows != n_cols {
        return Err(err(
            size_line,
            format!(
                "a {} matrix must be square, got {n_rows} × {n_cols}",
                header.symmetry.name()
            ),
        ));
    }
    if u32::try_from(n_cols).is_err() {
        let e = super::csr::CsrError::TooManyColumns { n_cols };
        return Err(err(size_line, e.to_string()));
    }
    let format = EntryFormat {
        field: header.field,
        symmetry: header.symmetry,
        n_rows,
        n_cols,
    };

    // Entries: pieces of whole lines parsed in parallel, then checked in file order.
    let region = &bytes[lines.pos.min(bytes.len())..];
    let threads = threads.unwrap_or_else(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        cores.min(region.len() / MIN_CHUNK_BYTES).max(1)
    });
    let pieces = split_at_lines(region, threads);
    // Each piece reserves its share of the declared entries, never more than its bytes could
    // hold (≥ 4 bytes per entry line), so a lying header cannot make us allocate terabytes.
    let share = |piece: &[u8]| {
        let est = (declared as u128 * piece.len() as u128 / region.len().max(1) as u128) as usize;
        (est + est / 16 + 16).min(piece.len() / 4 + 1)
    };
    let results: Vec<Result<Piece, PieceError>> = if pieces.len() == 1 {
        vec![parse_piece(pieces[0], &format, share(pieces[0]))]
    } else {
        std::thread::scope(|scope| {
            let handles: Vec<_> = pieces
                .iter()
                .map(|&piece| {
                    let format = &format;
                    let cap = share(piece);
                    scope.spawn(move || parse_piece(piece, format, cap))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("Matrix Market parser thread panicked"))
                .collect()
        })
    };
    let too_many = |line: usize| {
        err(
            line,
            format!("more entries than the {declared} declared on line {size_line}"),
        )
    };
    // `line_base`: number of the line just before the current piece.
    let (mut line_base, mut count) = (size_line, 0usize);
    for (piece, result) in pieces.iter().zip(&results) {
        match result {
            Ok(p) => {
                if count + p.entries > declared {
                    return Err(too_many(line_base + line_of_entry(piece, declared - count)));
                }
                count += p.entries;
                line_base += p.lines;
            }
            Err(PieceError::Parse {
                line,
                entries_before,
                message,
            }) => {
                // The line in error is an entry line: in file order the count check comes first.
                if count + entries_before >= declared {
                    return Err(too_many(line_base + line_of_entry(piece, declared - count)));
                }
                return Err(err(line_base + line, message.clone()));
            }
            Err(PieceError::Alloc(e)) => {
                return Err(err(
                    size_line,
                    format!("cannot allocate {declared} entries: {e}"),
                ))
            }
        }
    }
    if count < declared {
        return Err(err(
            line_base + 1,
            format!(
                "file ends after {count} of the {declared} entries declared on line {size_line} \
                 (truncated?)"
            ),
        ));
    }
    let parts: Vec<_> = results
        .iter()
        .map(|r| {
            let p = r.as_ref().expect("errors returned above");
            (&p.rows[..], &p.cols[..], &p.vals[..])
        })
        .collect();
    super::coo::try_csr_from_parts(n_rows, n_cols, &parts)
        .map_err(|e| err(size_line, format!("cannot allocate the CSR matrix: {e}")))
}

/// What an entry line must look like, from the banner and the size line.
struct EntryFormat {
    field: Field,
    symmetry: Symmetry,
    n_rows: usize,
    n_cols: usize,
}

/// The triplets of one piece of entry lines (symmetric storage already expanded).
struct Piece {
    rows: Vec<usize>,
    cols: Vec<u32>,
    vals: Vec<f64>,
    /// Entry lines seen (not counting blank and comment lines).
    entries: usize,
    /// Lines in the piece.
    lines: usize,
}

#[derive(Debug)]
enum PieceError {
    /// At the piece's `line`-th line (1-based), after `entries_before` entry lines.
    Parse {
        line: usize,
        entries_before: usize,
        message: String,
    },
    Alloc(std::collections::TryReserveError),
}

/// `buf` cut into at most `parts` pieces, each ending just after a `\n` (the last: at the end).
fn split_at_lines(buf: &[u8], parts: usize) -> Vec<&[u8]> {
    let mut pieces = Vec::with_capacity(parts);
    let mut start = 0;
    for k in 1..parts {
        let mut cut = (buf.len() / parts * k).max(start);
        match buf[cut..].iter().position(|&b| b == b'\n') {
            Some(nl) => cut += nl + 1,
            None => break,
        }
        pieces.push(&buf[start..cut]);
        start = cut;
    }
    pieces.push(&buf[start..]);
    pieces
}

/// 1-based line, within `piece`, of the entry line that follows `skip` entry lines.
fn line_of_entry(piece: &[u8], skip: usize) -> usize {
    let mut lines = Lines {
        buf: piece,
        pos: 0,
        line: 0,
    };
    let mut seen = 0;
    while let Some(line) = lines.next() {
        let mut t = Tokens { line, pos: 0 };
        if t.next().is_some_and(|tok| tok[0] != b'%') {
            if seen == skip {
                return lines.line;
            }
            seen += 1;
        }
    }
    unreachable!(
        "line_of_entry: the piece has fewer than {} entries",
        skip + 1
    )
}

/// Parses one piece of entry lines: a fast path for the common `int int number` line, and
/// the token-by-token path ([`parse_entry_line`]) for anything else, which either accepts
/// the line (comments, `\r`, `nan`, many digits) or produces the error message.
fn parse_piece(buf: &[u8], format: &EntryFormat, capacity: usize) -> Result<Piece, PieceError> {
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
fn store(piece: &mut Piece, i: usize, j: usize, v: f64, symmetry: Symmetry) -> Result<(), String> {
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

enum Fast {
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
fn fast_entry(buf: &[u8], pos: &mut usize, format: &EntryFormat) -> Fast {
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
fn parse_entry_line(
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

/// Writes `a` as `%%MatrixMarket matrix coordinate real general`, 1-based, values in the
/// shortest form that reads back to the same `f64`.
pub fn write_matrix_market(a: &Csr, path: impl AsRef<Path>) -> io::Result<()> {
    let file = File::create(path)?;
    let mut w = BufWriter::with_capacity(1 << 20, file);
    write_matrix_market_to(a, &mut w)?;
    w.flush()
}

/// Writes `a` in Matrix Market form to any writer (see [`write_matrix_market`]).
pub fn write_matrix_market_to(a: &Csr, mut w: impl Write) -> io::Result<()> {
    writeln!(w, "%%MatrixMarket matrix coordinate real general")?;
    writeln!(w, "% written by tessera")?;
    writeln!(w, "{} {} {}", a.n_rows(), a.n_cols(), a.nnz())?;
    let mut line = String::with_capacity(64);
    for i in 0..a.n_rows() {
        let (cols, vals) = a.row(i);
        for (&c, &v) in cols.iter().zip(vals) {
            use std::fmt::Write as _;
            line.clear();
            let mag = v.abs();
            // Both forms are shortest round-trip; plain digits are easier to read (and parse).
            if v == 0.0 || (1e-5..1e16).contains(&mag) || !v.is_finite() {
                writeln!(line, "{} {} {v}", i + 1, c as usize + 1).expect("String write");
            } else {
                writeln!(line, "{} {} {v:e}", i + 1, c as usize + 1).expect("String write");
            }
            w.write_all(line.as_bytes())?;
        }
    }
    Ok(())
}

const BANNER_FORM: &str = "%%MatrixMarket matrix coordinate <real|integer|pattern> \
                           <general|symmetric|skew-symmetric>";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Real,
    Integer,
    Pattern,
}

impl Field {
    fn entry_form(self) -> &'static str {
        match self {
            Field::Pattern => "row col",
            Field::Real | Field::Integer => "row col value",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Symmetry {
    General,
    Symmetric,
    SkewSymmetric,
}

impl Symmetry {
    fn name(self) -> &'static str {
        match self {
            Symmetry::General => "general",
            Symmetry::Symmetric => "symmetric",
            Symmetry::SkewSymmetric => "skew-symmetric",
        }
    }
}

struct Header {
    field: Field,
    symmetry: Symmetry,
}

fn parse_banner(line: &[u8]) -> Result<Header, String> {
    let text = String::from_utf8_lossy(line);
    let words: Vec<String> = text
        .split_whitespace()
        .map(str::to_ascii_lowercase)
        .collect();
    if words.first().map(String::as_str) != Some("%%matrixmarket") {
        return Err(format!(
            "bad banner: expected '{BANNER_FORM}', found '{}'",
            show(line)
        ));
    }
    if words.len() != 5 {
        return Err(format!(
            "bad banner: expected 5 words '{BANNER_FORM}', found {}: '{}'",
            words.len(),
            show(line)
        ));
    }
    if words[1] != "matrix" {
        return Err(format!(
            "unsupported object '{}': only 'matrix' is read",
            words[1]
        ));
    }
    match words[2].as_str() {
        "coordinate" => {}
        "array" => {
            return Err(
                "unsupported format 'array' (dense storage): only sparse 'coordinate' files \
                 are read"
                    .into(),
            )
        }
        other => return Err(format!("unknown format '{other}': expected 'coordinate'")),
    }
    let field = match words[3].as_str() {
        "real" | "double" => Field::Real,
        "integer" => Field::Integer,
        "pattern" => Field::Pattern,
        "complex" => {
            return Err(
                "unsupported field 'complex': only real, integer and pattern matrices are read"
                    .into(),
            )
        }
        other => {
            return Err(format!(
                "unknown field '{other}': expected real, integer or pattern"
            ))
        }
    };
    let symmetry = match words[4].as_str() {
        "general" => Symmetry::General,
        "symmetric" => Symmetry::Symmetric,
        "skew-symmetric" => Symmetry::SkewSymmetric,
        "hermitian" => {
            return Err(
                "unsupported symmetry 'hermitian' (complex matrices are not read): expected \
                 general, symmetric or skew-symmetric"
                    .into(),
            )
        }
        other => {
            return Err(format!(
                "unknown symmetry '{other}': expected general, symmetric or skew-symmetric"
            ))
        }
    };
    if field == Field::Pattern && symmetry == Symmetry::SkewSymmetric {
        return Err(
            "'pattern skew-symmetric' is not a valid Matrix Market type (a pattern has no \
             sign to flip)"
                .into(),
        );
    }
    Ok(Header { field, symmetry })
}

fn parse_size_line(line: &[u8]) -> Result<(usize, usize, usize), String> {
    let mut t = Tokens { line, pos: 0 };
    let mut nums = [0usize; 3];
    let bad = || {
        format!(
            "bad size line: expected 'rows cols entries' (three non-negative integers), found \
             '{}'",
            show(line)
        )
    };
    for (k, num) in nums.iter_mut().enumerate() {
        let tok = t.next().ok_or_else(bad)?;
        *num = std::str::from_utf8(tok)
            .ok()
            .and_then(|s| s.parse::<usize>().ok())
            .ok_or_else(|| {
                format!(
                    "bad size line: {} '{}' is not a non-negative integer",
                    ["rows", "cols", "entries"][k],
                    show(tok)
                )
            })?;
    }
    if t.next().is_some() {
        return Err(bad());
    }
    Ok((nums[0], nums[1], nums[2]))
}

/// A 1-based index token → 0-based index in `0..n`, or the message for `what`.
#[inline]
fn parse_index(tok: &[u8], what: &str, n: usize) -> Result<usize, String> {
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

/// Powers of ten exactly representable in `f64`.
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// A decimal number: the exact fast path, else `f64::from_str` (same result, slower).
#[inline]
fn parse_real(tok: &[u8]) -> Option<f64> {
    parse_real_fast(tok).or_else(|| std::str::from_utf8(tok).ok()?.parse().ok())
}

/// Clinger's fast path: `[+-]digits[.digits][(e|E)[+-]digits]` with at most 19 significant
/// digits, a mantissa ≤ 2⁵³ and a decimal exponent within ±22 is `m · 10^e` or `m / 10^−e`
/// with both operands exact, so one IEEE operation rounds it correctly. `None` otherwise
/// (including text the slow path must judge: `nan`, `inf`, garbage).
#[inline]
fn parse_real_fast(tok: &[u8]) -> Option<f64> {
    let n = tok.len();
    let mut i = 0;
    let neg = match tok.first() {
        Some(b'-') => {
            i = 1;
            true
        }
        Some(b'+') => {
            i = 1;
            false
        }
        _ => false,
    };
    let mut m: u64 = 0;
    let mut digits = 0u32;
    let mut exp: i64 = 0;
    while i < n && tok[i].is_ascii_digit() {
        m = m.wrapping_mul(10).wrapping_add((tok[i] - b'0') as u64);
        digits += 1;
        i += 1;
    }
    if i < n && tok[i] == b'.' {
        i += 1;
        while i < n && tok[i].is_ascii_digit() {
            m = m.wrapping_mul(10).wrapping_add((tok[i] - b'0') as u64);
            digits += 1;
            exp -= 1;
            i += 1;
        }
    }
    if digits == 0 || digits > 19 {
        return None;
    }
    if i < n && (tok[i] | 0x20) == b'e' {
        i += 1;
        let eneg = match tok.get(i) {
            Some(b'-') => {
                i += 1;
                true
            }
            Some(b'+') => {
                i += 1;
                false
            }
            _ => false,
        };
        let start = i;
        let mut e: i64 = 0;
        while i < n && tok[i].is_ascii_digit() {
            e = (e * 10 + (tok[i] - b'0') as i64).min(100_000);
            i += 1;
        }
        if i == start {
            return None;
        }
        exp += if eneg { -e } else { e };
    }
    if i != n || m > (1u64 << 53) {
        return None;
    }
    let mf = m as f64;
    let v = match exp {
        0..=22 => mf * POW10[exp as usize],
        -22..=-1 => mf / POW10[(-exp) as usize],
        _ => return None,
    };
    Some(if neg { -v } else { v })
}

/// An integer token (optional sign) as `f64`.
#[inline]
fn parse_integer(tok: &[u8]) -> Option<f64> {
    let (neg, digits) = match tok.first() {
        Some(b'-') => (true, &tok[1..]),
        Some(b'+') => (false, &tok[1..]),
        _ => (false, tok),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v = if digits.len() <= 18 {
        digits.iter().fold(0i64, |a, &b| a * 10 + (b - b'0') as i64) as f64
    } else {
        // Beyond i64's exact range: the nearest f64, as the text says.
        std::str::from_utf8(digits).ok()?.parse::<f64>().ok()?
    };
    Some(if neg { -v } else { v })
}

/// A token for a message: lossy UTF-8, cut to 40 characters.
fn show(tok: &[u8]) -> String {
    let s = String::from_utf8_lossy(tok);
    if s.chars().count() > 40 {
        format!("{}…", s.chars().take(40).collect::<String>())
    } else {
        s.into_owned()
    }
}

/// Lines of a buffer split at `\n` (a trailing `\r` is left to the tokenizer, which treats
/// it as blank); `line` is the 1-based number of the line last returned.
struct Lines<'a> {
    buf: &'a [u8],
    pos: usize,
    line: usize,
}

impl<'a> Lines<'a> {
    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let rest = &self.buf[self.pos..];
        let len = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
        self.pos += len + 1;
        self.line += 1;
        Some(&rest[..len])
    }
}

/// Whitespace-separated tokens of one line (space, tab, `\r`, form feed).
struct Tokens<'a> {
    line: &'a [u8],
    pos: usize,
}

impl<'a> Tokens<'a> {
    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        let l = self.line;
        let mut i = self.pos;
        while i < l.len() && l[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == l.len() {
            self.pos = i;
            return None;
        }
        let start = i;
        while i < l.len() && !l[i].is_ascii_whitespace() {
            i += 1;
        }
        self.pos = i;
        Some(&l[start..i])
    }

    /// How many tokens remain (consumes them).
    fn count_rest(&mut self) -> usize {
        let mut k = 0;
        while self.next().is_some() {
            k += 1;
        }
        k
    }
}

#[cfg(test)]
mod tests {
    //! Proves that every supported Matrix Market variant reads to the expected CSR, that each
    //! kind of malformed file gives an error naming the right line (and never panics), that
    //! write → read is exact, and that the fast value parser agrees with `f64::from_str`.

    use super::*;

    /// Parses `text`, checking that cutting it into 1, 2, 3 or 7 pieces for threads gives the
    /// same result (compared through `Debug`, so NaN values compare equal).
    fn parse(text: &str) -> Result<Csr, FileError> {
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
    fn dense(a: &Csr) -> Vec<Vec<f64>> {
        (0..a.n_rows())
            .map(|i| (0..a.n_cols()).map(|j| a.get(i, j)).collect())
            .collect()
    }

    #[test]
    fn real_general_with_comments_blank_lines_and_crlf() {
        let a = parse(
            "%%MatrixMarket matrix coordinate real general\r\n\
             % a comment\r\n\
             \r\n\
             %another\n\
             3 4 4\n\
             1 1 1.5\n\
             \n\
             % comment between entries\n\
             3 4 -2e3\n\
             \t2   2\t0.25  \n\
             1 1 1\n",
        )
        .unwrap();
        assert_eq!(
            dense(&a),
            vec![
                vec![2.5, 0.0, 0.0, 0.0],
                vec![0.0, 0.25, 0.0, 0.0],
                vec![0.0, 0.0, 0.0, -2000.0]
            ]
        );
        assert_eq!(a.nnz(), 3, "the repeated (1, 1) is summed into one entry");
    }

    #[test]
    fn empty_matrices() {
        let a = parse("%%MatrixMarket matrix coordinate real general\n3 4 0\n").unwrap();
        assert_eq!((a.n_rows(), a.n_cols(), a.nnz()), (3, 4, 0));
        let b = parse("%%MatrixMarket matrix coordinate real general\n0 0 0").unwrap();
        assert_eq!((b.n_rows(), b.n_cols(), b.nnz()), (0, 0, 0));
    }

    #[test]
    fn integer_and_pattern_general() {
        let a = parse("%%MatrixMarket matrix coordinate integer general\n2 2 2\n1 2 -7\n2 1 +3\n")
            .unwrap();
        assert_eq!(dense(&a), vec![vec![0.0, -7.0], vec![3.0, 0.0]]);
        let b =
            parse("%%MatrixMarket MATRIX Coordinate PATTERN General\n2 3 2\n1 3\n2 1\n").unwrap();
        assert_eq!(dense(&b), vec![vec![0.0, 0.0, 1.0], vec![1.0, 0.0, 0.0]]);
    }

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

    /// `(line, message fragment)` of the error `text` gives.
    fn fails(text: &str) -> (usize, String) {
        let e = parse(text).unwrap_err();
        assert_eq!(e.path(), Some(Path::new("m.mtx")));
        match e.kind() {
            FileErrorKind::Line { line, message } => (*line, message.clone()),
            other => panic!("not an error on a line: {other:?}"),
        }
    }

    const H: &str = "%%MatrixMarket matrix coordinate real general\n";

    #[test]
    fn bad_banners() {
        let cases: &[(&str, &str)] = &[
            ("", "empty file"),
            ("3 3 1\n1 1 1\n", "bad banner"),
            (
                "%MatrixMarket matrix coordinate real general\n",
                "bad banner",
            ),
            (
                "%%MatrixMarket matrix coordinate real\n",
                "expected 5 words",
            ),
            (
                "%%MatrixMarket vector coordinate real general\n",
                "unsupported object 'vector'",
            ),
            (
                "%%MatrixMarket matrix array real general\n",
                "unsupported format 'array'",
            ),
            (
                "%%MatrixMarket matrix sparse real general\n",
                "unknown format 'sparse'",
            ),
            (
                "%%MatrixMarket matrix coordinate complex general\n",
                "unsupported field 'complex'",
            ),
            (
                "%%MatrixMarket matrix coordinate float general\n",
                "unknown field 'float'",
            ),
            (
                "%%MatrixMarket matrix coordinate real hermitian\n",
                "unsupported symmetry 'hermitian'",
            ),
            (
                "%%MatrixMarket matrix coordinate real upper\n",
                "unknown symmetry 'upper'",
            ),
            (
                "%%MatrixMarket matrix coordinate pattern skew-symmetric\n",
                "pattern skew-symmetric",
            ),
        ];
        for (text, want) in cases {
            let (line, msg) = fails(text);
            assert_eq!(line, 1, "{text:?}");
            assert!(msg.contains(want), "{text:?}: {msg}");
        }
    }

    #[test]
    fn bad_size_lines() {
        let (line, msg) = fails(&format!("{H}% only comments\n\n"));
        assert_eq!(line, 4);
        assert!(msg.contains("missing size line"), "{msg}");
        let (line, msg) = fails(&format!("{H}%c\n3 3\n"));
        assert_eq!(line, 3);
        assert!(msg.contains("bad size line"), "{msg}");
        let (line, msg) = fails(&format!("{H}3 x 1\n"));
        assert_eq!(line, 2);
        assert!(
            msg.contains("cols 'x' is not a non-negative integer"),
            "{msg}"
        );
        let (line, msg) = fails(&format!("{H}3 3 1 9\n"));
        assert_eq!(line, 2);
        assert!(msg.contains("bad size line"), "{msg}");
        let (line, msg) = fails("%%MatrixMarket matrix coordinate real symmetric\n3 4 0\n");
        assert_eq!(line, 2);
        assert!(msg.contains("must be square, got 3 × 4"), "{msg}");
        let (line, msg) = fails(&format!("{H}1 99999999999 0\n"));
        assert_eq!(line, 2);
        assert!(msg.contains("32-bit column indices"), "{msg}");
    }

    #[test]
    fn bad_entries_name_their_line() {
        let cases: &[(&str, usize, &str)] = &[
            // Truncated: too few entries, reported at the line after the last one.
            (
                "3 3 3\n1 1 1\n2 2 2\n",
                5,
                "file ends after 2 of the 3 entries declared on line 2",
            ),
            ("3 3 2\n1 1 1\n", 4, "file ends after 1 of the 2 entries"),
            // Truncated mid-line: the partial last line has too few fields.
            (
                "3 3 2\n1 1 1\n2 2",
                4,
                "expected 3 fields 'row col value', found 2",
            ),
            (
                "3 3 1\n1 1 1\n2 2 2\n",
                4,
                "more entries than the 1 declared on line 2",
            ),
            (
                "3 5 1\n% c\n1 0 1\n",
                4,
                "column index 0 out of range 1..=5",
            ),
            ("3 5 1\n1 6 1\n", 3, "column index 6 out of range 1..=5"),
            ("3 5 1\n0 1 1\n", 3, "row index 0 out of range 1..=3"),
            ("3 5 1\n4 1 1\n", 3, "row index 4 out of range 1..=3"),
            (
                "3 5 1\n99999999999999999999999 1 1\n",
                3,
                "row index 99999999999999999999999 out of range",
            ),
            (
                "3 5 1\n-1 1 1\n",
                3,
                "row index '-1' is not a positive integer",
            ),
            (
                "3 5 1\n1 1.0 1\n",
                3,
                "column index '1.0' is not a positive integer",
            ),
            ("3 5 1\n1 1 abc\n", 3, "value 'abc' is not a number"),
            ("3 5 1\n1 1 1.5.2\n", 3, "value '1.5.2' is not a number"),
            (
                "3 5 1\n1 1\n",
                3,
                "expected 3 fields 'row col value', found 2",
            ),
            (
                "3 5 1\n1 1 1 1\n",
                3,
                "expected 3 fields 'row col value', found 4",
            ),
        ];
        for &(body, line, want) in cases {
            let (got_line, msg) = fails(&format!("{H}{body}"));
            assert_eq!(got_line, line, "{body:?}: {msg}");
            assert!(msg.contains(want), "{body:?}: {msg}");
        }
        let (line, msg) =
            fails("%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 1 1.5\n");
        assert_eq!(line, 3);
        assert!(msg.contains("value '1.5' is not an integer"), "{msg}");
        let (line, msg) = fails("%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 1 1\n");
        assert_eq!(line, 3);
        assert!(
            msg.contains("expected 2 fields 'row col', found 3"),
            "{msg}"
        );
        let (line, msg) =
            fails("%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 2\n2 1 1\n2 2 3\n");
        assert_eq!(line, 4);
        assert!(msg.contains("non-zero diagonal entry (2, 2) = 3"), "{msg}");
    }

    #[test]
    fn errors_found_in_any_piece() {
        // 1000 entries on lines 4..=1003, with comments and blank lines sprinkled in; then
        // damage one line at a time and check the line number for several piece counts.
        let a = crate::sparse::gen::stencil7(4); // 64 rows, 352 entries
        let mut text = Vec::new();
        write_matrix_market_to(&a, &mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
        for k in (10..lines.len()).step_by(37) {
            lines.insert(
                k,
                if k % 2 == 0 {
                    "% note".into()
                } else {
                    "  ".into()
                },
            );
        }
        let clean = lines.join("\n");
        assert_eq!(parse(&clean).unwrap(), a);
        let n = lines.len();
        for bad in [3, 4, 50, n / 2, n - 1] {
            if lines[bad].trim().is_empty() || lines[bad].starts_with('%') {
                continue;
            }
            let mut damaged = lines.clone();
            damaged[bad] = "1 1 x".into();
            let (line, msg) = fails(&damaged.join("\n"));
            assert_eq!((line, msg.as_str()), (bad + 1, "value 'x' is not a number"));
        }
        // Too many: one extra entry in the middle is reported where the count runs out.
        let mut extra = lines.clone();
        extra.insert(n / 2, "1 1 1".into());
        let (line, msg) = fails(&extra.join("\n"));
        assert!(
            msg.starts_with("more entries than the 352 declared on line 3"),
            "{msg}"
        );
        assert_eq!(line, n + 1, "{msg}");
        // Too many, with a bad line after the overflow: the overflow is reported first.
        let mut both = extra.clone();
        both.push("1 1 1".into());
        both.push("oops".into());
        assert_eq!(fails(&both.join("\n")).0, n + 1);
        // Truncated in the middle of the last line.
        let cut = &clean[..clean.len() - 3];
        let (line, msg) = fails(cut);
        assert_eq!(line, n, "{msg}");
        // Truncated at a line end: the missing entries are reported after the last line.
        let short = lines[..n - 10].join("\n") + "\n";
        let (line, msg) = fails(&short);
        assert_eq!(line, n - 9, "{msg}");
        assert!(msg.contains("file ends after"), "{msg}");
    }

    #[test]
    fn display_names_file_and_line() {
        let e = fails_err("%%MatrixMarket matrix coordinate real general\n3 5 1\n1 0 1\n");
        assert_eq!(e.to_string(), "m.mtx:3: column index 0 out of range 1..=5");
        let e = read_matrix_market("/nonexistent/dir/x.mtx").unwrap_err();
        assert!(matches!(e.kind(), FileErrorKind::Io(_)), "{e:?}");
        assert!(e.to_string().starts_with("/nonexistent/dir/x.mtx: "), "{e}");
        let anon = parse_matrix_market(&b"junk\n"[..], None).unwrap_err();
        assert!(anon.to_string().starts_with("line 1: bad banner"), "{anon}");
    }

    fn fails_err(text: &str) -> FileError {
        parse(text).unwrap_err()
    }

    #[test]
    fn special_values_accepted() {
        let a = parse(&format!("{H}1 3 3\n1 1 nan\n1 2 -inf\n1 3 Infinity\n")).unwrap();
        assert!(a.vals()[0].is_nan());
        assert_eq!(a.vals()[1], f64::NEG_INFINITY);
        assert_eq!(a.vals()[2], f64::INFINITY);
    }

    #[test]
    fn write_read_round_trip_is_exact() {
        let mut a = crate::sparse::gen::powerlaw(300, 5.0, 2.5, 4);
        // Awkward values: tiny, huge, negative zero, subnormal, many digits.
        let specials = [1e-300, -3.5e200, -0.0, 5e-324, 0.1 + 0.2, 123456789.125];
        for (v, s) in a.vals_mut().iter_mut().zip(specials) {
            *v = s;
        }
        let mut text = Vec::new();
        write_matrix_market_to(&a, &mut text).unwrap();
        let b = parse_matrix_market(&text[..], None).unwrap();
        assert_eq!(a.row_ptr(), b.row_ptr());
        assert_eq!(a.col_idx(), b.col_idx());
        for (x, y) in a.vals().iter().zip(b.vals()) {
            assert_eq!(x.to_bits(), y.to_bits());
        }
        // And through a file.
        let path = std::env::temp_dir().join(format!("tessera-mm-{}.mtx", std::process::id()));
        write_matrix_market(&a, &path).unwrap();
        let c = read_matrix_market(&path);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(c.unwrap().col_idx(), a.col_idx());
    }

    #[test]
    fn fast_value_parser_matches_std() {
        let cases = [
            "0",
            "-0",
            "1",
            "-1",
            "+2.5",
            "3.",
            ".5",
            "1e5",
            "1E-5",
            "-2.5e+3",
            "123456789012345678",
            "9007199254740993",
            "0.1",
            "0.30000000000000004",
            "1e22",
            "1e23",
            "1e-22",
            "4.9e-324",
            "1.7976931348623157e308",
            "12345.6789e-3",
            "000123.4500",
            "1e",
            "e5",
            "-",
            ".",
            "1.2.3",
            "1e+",
            "nan",
            "inf",
            "0x10",
            "1_0",
        ];
        for c in cases {
            let want = c.parse::<f64>().ok();
            let got = parse_real(c.as_bytes());
            assert_eq!(
                got.map(f64::to_bits),
                want.map(f64::to_bits),
                "{c}: fast {got:?} vs std {want:?}"
            );
        }
        // Random decimals of many shapes.
        let mut s = 0x1234_5678u64;
        for _ in 0..20_000 {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let m = s >> 40;
            let e = ((s >> 8) % 50) as i32 - 25;
            let text = format!("{m}e{e}");
            assert_eq!(
                parse_real(text.as_bytes()).map(f64::to_bits),
                text.parse::<f64>().ok().map(f64::to_bits),
                "{text}"
            );
            let text = format!("-{}.{:06}", m % 1000, s % 1_000_000);
            assert_eq!(
                parse_real(text.as_bytes()).map(f64::to_bits),
                text.parse::<f64>().ok().map(f64::to_bits),
                "{text}"
            );
        }
    }

    #[test]
    #[ignore = "speed measurement: writes two ~100 MB files to the temp dir; run in release"]
    fn speed() {
        use crate::sparse::gen;
        use std::time::Instant;
        for (what, a) in [
            ("stencil27:66", gen::stencil27(66)),
            (
                "powerlaw:700000:10:2.5 (random 17-digit values)",
                gen::powerlaw(700_000, 10.0, 2.5, 1),
            ),
        ] {
            let path =
                std::env::temp_dir().join(format!("tessera-mm-speed-{}.mtx", std::process::id()));
            let t = Instant::now();
            write_matrix_market(&a, &path).unwrap();
            let write_s = t.elapsed().as_secs_f64();
            let mb = std::fs::metadata(&path).unwrap().len() as f64 / 1e6;
            // Warm the page cache, then time the best of 3 reads.
            drop(std::fs::read(&path).unwrap());
            let mut best = f64::INFINITY;
            for _ in 0..3 {
                let t = Instant::now();
                let b = read_matrix_market(&path).unwrap();
                best = best.min(t.elapsed().as_secs_f64());
                assert_eq!(b.nnz(), a.nnz());
            }
            let t = Instant::now();
            let bytes = std::fs::read(&path).unwrap();
            let io_s = t.elapsed().as_secs_f64();
            let mut one = f64::INFINITY;
            for _ in 0..2 {
                let t = Instant::now();
                let b = parse_with_threads(&bytes, None, Some(1)).unwrap();
                one = one.min(t.elapsed().as_secs_f64());
                assert_eq!(b.nnz(), a.nnz());
            }
            drop(bytes);
            std::fs::remove_file(&path).unwrap();
            let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
            println!(
                "{what}: {:.1} M entries, {mb:.0} MB: file → CSR {best:.3} s = {:.0} MB/s \
                 ({threads} threads; fs::read alone {:.0} MB/s; parse from memory on 1 thread \
                 {:.0} MB/s), write {:.0} MB/s",
                a.nnz() as f64 / 1e6,
                mb / best,
                mb / io_s,
                mb / one,
                mb / write_s
            );
        }
    }
}
