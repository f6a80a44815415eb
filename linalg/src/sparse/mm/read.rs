//! Matrix Market file → CSR: the whole file read at once, its entry lines cut into pieces
//! parsed in parallel, then counted and checked in file order.

use std::io::BufRead;
use std::path::Path;

use tessera_engine::{FileError, FileErrorKind};

use super::entries::{parse_piece, EntryFormat, Piece, PieceError};
use super::header::{parse_banner, BANNER_FORM};
use super::lex::{Lines, Tokens};
use crate::sparse::csr::Csr;

/// Reads the Matrix Market file at `path` into CSR. Only a regular file is
/// read ([`check_regular_file`]), and only as many bytes as it had then.
pub fn read_matrix_market(path: impl AsRef<Path>) -> Result<Csr, FileError> {
    read_matrix_market_sized(path, |_, _| Ok(()))
}

/// [`read_matrix_market`], calling `sized(rows, cols)` with the size line's
/// dimensions before anything of their size is allocated; its `Err` is
/// reported at the size line. A three-line file may declare billions of
/// rows: the row pointers alone (8 bytes a row) can then pass the
/// allocator's overcommit and end the process when filled, so a caller
/// checks them, and what it will build from them, against the memory it has.
pub fn read_matrix_market_sized(
    path: impl AsRef<Path>,
    sized: impl FnOnce(usize, usize) -> Result<(), String>,
) -> Result<Csr, FileError> {
    use std::io::Read;
    let path = path.as_ref();
    let size = check_regular_file(path)?;
    let io_err = |e: std::io::Error| FileError::from(e).with_path(path);
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(size as usize).map_err(|e| {
        in_file(
            FileError::new(FileErrorKind::Io(std::io::Error::other(format!(
                "cannot allocate {size} bytes to read it: {e}"
            )))),
            Some(path),
        )
    })?;
    std::fs::File::open(path)
        .map_err(io_err)?
        .take(size.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io_err)?;
    parse_sized(&bytes, Some(path), None, sized)
}

/// `Ok(bytes)` when `path` is a regular file; a FIFO (whose open blocks
/// until a writer comes), a device such as `/dev/zero` (which never ends) or
/// a directory is refused by name, without being opened.
pub fn check_regular_file(path: impl AsRef<Path>) -> Result<u64, FileError> {
    FileError::check_regular_file(path.as_ref())
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
pub(super) fn in_file(e: FileError, name: Option<&Path>) -> FileError {
    match name {
        Some(path) => e.with_path(path),
        None => e,
    }
}

/// Smallest piece of the entry lines worth a thread of its own.
pub const MIN_CHUNK_BYTES: usize = 4 << 20;

/// [`parse_matrix_market_bytes`] with the number of pieces forced (tests use it to cut small
/// files into several pieces); `None` picks it from the input size and the cores.
pub(super) fn parse_with_threads(
    bytes: &[u8],
    name: Option<&Path>,
    threads: Option<usize>,
) -> Result<Csr, FileError> {
    parse_sized(bytes, name, threads, |_, _| Ok(()))
}

/// [`parse_with_threads`], with `sized` called on the size line's dimensions
/// (see [`read_matrix_market_sized`]).
fn parse_sized(
    bytes: &[u8],
    name: Option<&Path>,
    threads: Option<usize>,
    sized: impl FnOnce(usize, usize) -> Result<(), String>,
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
    let (format, declared) =
        EntryFormat::from_size_line(&header, size).map_err(|m| err(size_line, m))?;
    let (n_rows, n_cols) = (format.n_rows, format.n_cols);
    sized(n_rows, n_cols).map_err(|m| err(size_line, m))?;

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
    crate::sparse::coo::try_csr_from_parts(n_rows, n_cols, &parts)
        .map_err(|e| err(size_line, format!("cannot allocate the CSR matrix: {e}")))
}

/// `buf` cut into at most `parts` pieces, each ending just after a `\n` (the last: at the end).
pub(super) fn split_at_lines(buf: &[u8], parts: usize) -> Vec<&[u8]> {
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
pub(super) fn line_of_entry(piece: &[u8], skip: usize) -> usize {
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

#[cfg(test)]
mod tests {
    // Proves that every supported variant reads to the expected CSR, that a count or entry
    // error names the right line whatever the piece count, and that errors name the file.
    use super::super::testing::{dense, fails, fails_err, parse, H};
    use super::super::write::{write_matrix_market, write_matrix_market_to};
    use super::*;

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
