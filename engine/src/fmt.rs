//! Text for people: durations, byte counts, aligned tables and panic payloads, spelt one way
//! by every crate.

pub use crate::util::panic_message;

/// Nanoseconds with a unit chosen for the magnitude: `1.234 s`, `1.234 ms`,
/// `1.234 µs`, `12 ns`.
pub fn duration_ns(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.3} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// A byte count in binary units: `512 B`, `1.5 KiB`, `12.0 MiB`, ... up to PiB.
pub fn bytes(b: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut x = b as f64;
    let mut unit = 0;
    while x >= 1024.0 && unit + 1 < UNITS.len() {
        x /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{b} B")
    } else {
        format!("{x:.1} {}", UNITS[unit])
    }
}

/// `rows` as aligned columns, one line each (a header is just the first row):
/// the first `left` columns left-aligned, the others right-aligned, two spaces
/// between columns, each line after `indent`, no trailing spaces. Widths count
/// characters, so `µs` lines up.
pub fn table(rows: &[Vec<String>], left: usize, indent: &str) -> String {
    let ncols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let width: Vec<usize> = (0..ncols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = indent.to_owned();
        for (c, cell) in row.iter().enumerate() {
            if c > 0 {
                line.push_str("  ");
            }
            let pad = " ".repeat(width[c] - cell.chars().count());
            if c < left {
                line.push_str(cell);
                line.push_str(&pad);
            } else {
                line.push_str(&pad);
                line.push_str(cell);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    // Proves that each formatter picks the unit at the boundaries and keeps its precision.
    use super::*;

    #[test]
    fn durations_change_unit_at_each_thousand() {
        assert_eq!(duration_ns(0.0), "0 ns");
        assert_eq!(duration_ns(999.0), "999 ns");
        assert_eq!(duration_ns(1e3), "1.000 µs");
        assert_eq!(duration_ns(2.5e6), "2.500 ms");
        assert_eq!(duration_ns(1.5e9), "1.500 s");
        assert_eq!(duration_ns(7200e9), "7200.000 s");
    }

    #[test]
    fn bytes_change_unit_at_each_kibi() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1024), "1.0 KiB");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(3 << 30), "3.0 GiB");
        assert_eq!(bytes(5 << 50), "5.0 PiB");
        assert_eq!(bytes(u64::MAX), "16384.0 PiB");
    }

    #[test]
    fn table_aligns_left_then_right() {
        let rows = [
            vec!["name".to_owned(), "kind".into(), "time".into()],
            vec!["gemm".into(), "cuda".into(), "125.000 µs".into()],
            vec!["getrf_panel".into(), "cpu".into(), "1.500 s".into()],
        ];
        let text = table(&rows, 2, "  ");
        assert_eq!(
            text,
            "  name         kind        time\n  \
             gemm         cuda  125.000 µs\n  \
             getrf_panel  cpu      1.500 s\n"
        );
        assert_eq!(table(&[], 1, ""), "");
    }

    #[test]
    fn panic_payloads_read_as_text() {
        let text = |p: Box<dyn std::any::Any + Send>| panic_message(&*p);
        assert_eq!(text(Box::new("static")), "static");
        assert_eq!(text(Box::new(String::from("owned"))), "owned");
        assert_eq!(text(Box::new(7)), "panic with a non-string payload");
    }
}
