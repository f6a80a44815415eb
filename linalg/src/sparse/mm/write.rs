//! Matrix Market output: a CSR matrix as `coordinate real general`, values that read back
//! to the same bits.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use crate::sparse::csr::Csr;

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

#[cfg(test)]
mod tests {
    // Proves that write → read is exact, through memory and through a file.
    use super::super::read::{parse_matrix_market, read_matrix_market};
    use super::*;

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
}
