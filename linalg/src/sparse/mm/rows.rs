//! A range of rows of a Matrix Market file, for a rank of a distributed run that keeps only
//! its own rows: one pass counts the entries of every row (to split the rows between ranks
//! by entries), another keeps the entries of the rank's rows. Both stream the file line by
//! line (memory: one line, the row counts, and the kept entries), check it as the whole-file
//! reader does, with the same messages and line numbers, and so fail the same way on every
//! rank.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::ops::Range;
use std::path::{Path, PathBuf};

use tessera_engine::{FileError, FileErrorKind};

use super::entries::{check_finite, fast_entry, parse_entry_line, EntryFormat, Fast};
use super::header::{parse_banner, Symmetry, BANNER_FORM};
use super::lex::Tokens;
use crate::sparse::csr::Csr;

/// A Matrix Market file whose shape and row lengths are known (from
/// [`scan_matrix_market`]), to read a range of its rows ([`MatrixMarketRows::rows`]).
#[derive(Clone, Debug)]
pub struct MatrixMarketRows {
    path: PathBuf,
    n_rows: usize,
    n_cols: usize,
    row_ptr: Vec<usize>,
    checksum: u64,
}

impl MatrixMarketRows {
    /// Rows.
    pub fn n_rows(&self) -> usize {
        self.n_rows
    }

    /// Columns.
    pub fn n_cols(&self) -> usize {
        self.n_cols
    }

    /// Stored entries before each row (symmetric storage expanded; a position the file
    /// repeats counts each time, so this may exceed the matrix's entries).
    pub fn row_ptr(&self) -> &[usize] {
        &self.row_ptr
    }

    /// A checksum of the stored entries (row, column and the value's bits,
    /// in file order, mirrors included): ranks of a distributed run that
    /// read different files at the same path (nodes without a shared file
    /// system) see different sums (issue 28).
    pub fn checksum(&self) -> u64 {
        self.checksum
    }

    /// Rows `range` as a `range.len() × n_cols` matrix, equal to rows `range` of
    /// [`read_matrix_market`](super::read_matrix_market) of the same file (repeats summed in
    /// file order, columns sorted). Scans the whole file again and keeps only those rows.
    pub fn rows(&self, range: Range<usize>) -> Result<Csr, FileError> {
        if range.start > range.end || range.end > self.n_rows {
            return Err(FileError::new(FileErrorKind::Format(format!(
                "rows {range:?} are not within the {} rows of {}",
                self.n_rows,
                self.path.display()
            ))));
        }
        let kept = self.row_ptr[range.end] - self.row_ptr[range.start];
        let mut rows = Vec::with_capacity(kept);
        let mut cols = Vec::with_capacity(kept);
        let mut vals = Vec::with_capacity(kept);
        scan(&self.path, |i, j, v| {
            if range.contains(&i) {
                rows.push(i - range.start);
                cols.push(j as u32);
                vals.push(v);
            }
        })?;
        crate::sparse::coo::try_csr_from_parts(
            range.len(),
            self.n_cols,
            &[(&rows[..], &cols[..], &vals[..])],
        )
        .map_err(|e| {
            FileError::new(FileErrorKind::Format(format!(
                "cannot allocate rows {range:?}: {e}"
            )))
            .with_path(&self.path)
        })
    }
}

/// Reads the shape and the row lengths of the Matrix Market file at `path` (one pass, no
/// entry kept); errors as [`read_matrix_market`](super::read_matrix_market) gives them.
pub fn scan_matrix_market(path: impl AsRef<Path>) -> Result<MatrixMarketRows, FileError> {
    scan_matrix_market_sized(path, |_, _| Ok(()))
}

/// [`scan_matrix_market`], calling `sized(rows, cols)` with the size line's
/// dimensions before the row counts (8 bytes a row) are allocated; its `Err`
/// is reported at the size line (see
/// [`read_matrix_market_sized`](super::read_matrix_market_sized)).
pub fn scan_matrix_market_sized(
    path: impl AsRef<Path>,
    sized: impl FnOnce(usize, usize) -> Result<(), String>,
) -> Result<MatrixMarketRows, FileError> {
    let path = path.as_ref();
    let counts = std::cell::RefCell::new(Vec::new());
    // FNV-1a over each entry's row, column and value bits.
    let mut checksum = 0xcbf2_9ce4_8422_2325u64;
    let (n_rows, n_cols) = scan_with(
        path,
        |n_rows, n_cols| {
            sized(n_rows, n_cols)?;
            let mut c = counts.borrow_mut();
            c.try_reserve_exact(n_rows.saturating_add(1))
                .map_err(|e| format!("cannot allocate the row counts of {n_rows} rows: {e}"))?;
            c.resize(n_rows + 1, 0usize);
            Ok(())
        },
        |i, j, v| {
            counts.borrow_mut()[i + 1] += 1;
            for x in [i as u64, j as u64, v.to_bits()] {
                checksum = (checksum ^ x).wrapping_mul(0x0000_0100_0000_01b3);
            }
        },
    )?;
    let mut counts = counts.into_inner();
    for i in 0..n_rows {
        counts[i + 1] += counts[i];
    }
    Ok(MatrixMarketRows {
        path: path.to_owned(),
        n_rows,
        n_cols,
        row_ptr: counts,
        checksum,
    })
}

fn scan(path: &Path, visit: impl FnMut(usize, usize, f64)) -> Result<(usize, usize), FileError> {
    scan_with(path, |_, _| Ok(()), visit)
}

/// One pass over the file: `sized(n_rows, n_cols)` once the size line is read (its
/// `Err` is the size line's), then `visit(i, j, v)` (0-based) for every
/// stored entry, mirrors included. Only a regular file is read: a FIFO
/// would block in `open`, `/dev/zero` fill memory with one endless line.
fn scan_with(
    path: &Path,
    sized: impl FnOnce(usize, usize) -> Result<(), String>,
    mut visit: impl FnMut(usize, usize, f64),
) -> Result<(usize, usize), FileError> {
    let err = |line: usize, message: String| {
        FileError::new(FileErrorKind::Line { line, message }).with_path(path)
    };
    let io = |e: std::io::Error| FileError::from(e).with_path(path);
    FileError::check_regular_file(path)?;
    let mut input = BufReader::with_capacity(1 << 20, File::open(path).map_err(io)?);
    let mut buf: Vec<u8> = Vec::new();
    let mut line_no = 0usize;
    // The next line without its '\n' (false at the end of the file).
    let mut next_line = |buf: &mut Vec<u8>, line_no: &mut usize| -> Result<bool, FileError> {
        buf.clear();
        if input.read_until(b'\n', buf).map_err(io)? == 0 {
            return Ok(false);
        }
        *line_no += 1;
        if buf.last() == Some(&b'\n') {
            buf.pop();
        }
        Ok(true)
    };

    if !next_line(&mut buf, &mut line_no)? {
        return Err(err(
            1,
            format!("empty file: expected the banner '{BANNER_FORM}'"),
        ));
    }
    let header = parse_banner(&buf).map_err(|m| err(1, m))?;
    let size_line = loop {
        if !next_line(&mut buf, &mut line_no)? {
            return Err(err(
                line_no + 1,
                "missing size line 'rows cols entries' (file ends after the header)".into(),
            ));
        }
        let mut t = Tokens { line: &buf, pos: 0 };
        match t.next() {
            None => continue,
            Some(tok) if tok[0] == b'%' => continue,
            Some(_) => break line_no,
        }
    };
    let (format, declared) =
        EntryFormat::from_size_line(&header, &buf).map_err(|m| err(size_line, m))?;
    let (n_rows, n_cols) = (format.n_rows, format.n_cols);
    sized(n_rows, n_cols).map_err(|m| err(size_line, m))?;
    let mut count = 0usize;
    while next_line(&mut buf, &mut line_no)? {
        let mut pos = 0;
        let entry = match fast_entry(&buf, &mut pos, &format) {
            Fast::Entry(i, j, v) => Some((i, j, v)),
            Fast::Skip => None,
            Fast::Slow => parse_entry_line(&buf, &format).map_err(|m| {
                if count >= declared {
                    // In file order the count check comes first.
                    err(
                        line_no,
                        format!("more entries than the {declared} declared on line {size_line}"),
                    )
                } else {
                    err(line_no, m)
                }
            })?,
        };
        let Some((i, j, v)) = entry else { continue };
        if count == declared {
            return Err(err(
                line_no,
                format!("more entries than the {declared} declared on line {size_line}"),
            ));
        }
        check_finite(i, j, v).map_err(|m| err(line_no, m))?;
        count += 1;
        match format.symmetry {
            Symmetry::General => visit(i, j, v),
            Symmetry::Symmetric => {
                visit(i, j, v);
                if i != j {
                    visit(j, i, v);
                }
            }
            Symmetry::SkewSymmetric => {
                if i != j {
                    visit(i, j, v);
                    visit(j, i, -v);
                } else if v != 0.0 {
                    return Err(err(
                        line_no,
                        format!(
                            "skew-symmetric matrix has a non-zero diagonal entry ({}, {}) = {v}",
                            i + 1,
                            j + 1
                        ),
                    ));
                }
            }
        }
    }
    if count < declared {
        return Err(err(
            line_no + 1,
            format!(
                "file ends after {count} of the {declared} entries declared on line {size_line} \
                 (truncated?)"
            ),
        ));
    }
    Ok((n_rows, n_cols))
}

#[cfg(test)]
mod tests {
    // Proves that every range of rows read alone equals the same rows of the whole-file
    // reader, for each symmetry and field, with repeats and comments, and that a bad file
    // gives the whole-file reader's message.
    use super::*;

    fn temp_file(name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tessera-mm-rows-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn ranges_equal_the_whole_file() {
        let cases = [
            (
                "general.mtx",
                "%%MatrixMarket matrix coordinate real general\n% comment\n\n4 5 7\n1 1 2.5\n3 2 -1\n1 5 1e3\n  4 4 7\n% between\n3 2 0.5\n2 3 -0\n4 1 3\r\n",
            ),
            (
                "sym.mtx",
                "%%MatrixMarket matrix coordinate integer symmetric\n3 3 4\n1 1 4\n2 1 -1\n3 2 -1\n3 3 4\n",
            ),
            (
                "skew.mtx",
                "%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 3\n2 1 1.5\n3 1 -2\n2 2 0\n",
            ),
            (
                "pattern.mtx",
                "%%MatrixMarket matrix coordinate pattern general\n3 3 3\n3 1\n1 2\n3 1\n",
            ),
        ];
        for (name, text) in cases {
            let path = temp_file(name, text);
            let whole = super::super::read_matrix_market(&path).unwrap();
            let scan = scan_matrix_market(&path).unwrap();
            assert_eq!(
                (scan.n_rows(), scan.n_cols()),
                (whole.n_rows(), whole.n_cols())
            );
            let n = whole.n_rows();
            for lo in 0..=n {
                for hi in lo..=n {
                    let got = scan.rows(lo..hi).unwrap();
                    let want = whole.row_block(lo..hi);
                    // NaN != NaN: compare bits.
                    assert_eq!(got.row_ptr(), want.row_ptr(), "{name} {lo}..{hi}");
                    assert_eq!(got.col_idx(), want.col_idx(), "{name} {lo}..{hi}");
                    let bits = |a: &Csr| a.vals().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&got), bits(&want), "{name} {lo}..{hi}");
                }
            }
        }
        // Row counts include repeats: row 3 of general.mtx lists (3, 2) twice.
        let scan = scan_matrix_market(temp_file("general.mtx", cases[0].1)).unwrap();
        assert_eq!(scan.row_ptr(), &[0, 2, 3, 5, 7]);
        assert!(scan.rows(2..9).is_err());
    }

    #[test]
    fn bad_files_fail_like_the_whole_file_reader() {
        for (name, text) in [
            ("empty.mtx", ""),
            ("banner.mtx", "%%MatrixMarket matrix array real general\n"),
            (
                "nosize.mtx",
                "%%MatrixMarket matrix coordinate real general\n% only\n",
            ),
            (
                "short.mtx",
                "%%MatrixMarket matrix coordinate real general\n2 2 3\n1 1 1\n2 2 1\n",
            ),
            (
                "long.mtx",
                "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1\n2 2 1\n",
            ),
            (
                "index.mtx",
                "%%MatrixMarket matrix coordinate real general\n2 2 1\n3 1 1\n",
            ),
            (
                "value.mtx",
                "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 x\n",
            ),
            (
                "nan.mtx",
                "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n2 1 nan\n",
            ),
            (
                "inf.mtx",
                "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1e999\n",
            ),
            (
                "skewdiag.mtx",
                "%%MatrixMarket matrix coordinate real skew-symmetric\n2 2 1\n1 1 1\n",
            ),
            (
                "square.mtx",
                "%%MatrixMarket matrix coordinate real symmetric\n2 3 1\n1 1 1\n",
            ),
        ] {
            let path = temp_file(name, text);
            let whole = super::super::read_matrix_market(&path)
                .unwrap_err()
                .to_string();
            let rows = scan_matrix_market(&path).unwrap_err().to_string();
            assert_eq!(rows, whole, "{name}");
        }
        let missing = std::env::temp_dir().join("tessera-no-such-file.mtx");
        let e = scan_matrix_market(&missing).unwrap_err().to_string();
        assert!(e.starts_with(&missing.display().to_string()), "{e}");
    }

    /// Both readers hand the size line's dimensions to `sized` before allocating rows of them;
    /// its refusal comes back at the size line, and the 2^36 declared rows are never allocated
    /// (their 512 GiB of row pointers would fail or, under overcommit, end the process).
    #[test]
    fn sized_sees_the_declared_dimensions_first() {
        let path = temp_file(
            "huge.mtx",
            "%%MatrixMarket matrix coordinate real general
% c
68719476736 3 1
1 1 1.0
",
        );
        let refuse = |n: usize, m: usize| -> Result<(), String> {
            assert_eq!((n, m), (1 << 36, 3));
            Err(format!("{n} rows are too many"))
        };
        let whole = super::super::read_matrix_market_sized(&path, refuse)
            .unwrap_err()
            .to_string();
        let rows = scan_matrix_market_sized(&path, refuse)
            .unwrap_err()
            .to_string();
        let want = format!("{}:3: 68719476736 rows are too many", path.display());
        assert_eq!(whole, want);
        assert_eq!(rows, want);
        // A check that passes changes nothing.
        let small = temp_file(
            "small.mtx",
            "%%MatrixMarket matrix coordinate real general
2 3 1
2 3 4.5
",
        );
        let seen = std::cell::Cell::new(None);
        let a = super::super::read_matrix_market_sized(&small, |n, m| {
            seen.set(Some((n, m)));
            Ok(())
        })
        .unwrap();
        assert_eq!(seen.get(), Some((2, 3)));
        assert_eq!(a, super::super::read_matrix_market(&small).unwrap());
        let r = scan_matrix_market_sized(&small, |_, _| Ok(())).unwrap();
        assert_eq!(r.row_ptr(), scan_matrix_market(&small).unwrap().row_ptr());
    }
}
