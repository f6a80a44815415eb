//! Matrix Market values: reals by Clinger's exact fast path (else `f64::from_str`), integers.

/// Powers of ten exactly representable in `f64`.
pub(super) const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// A decimal number: the exact fast path, else `f64::from_str` (same result, slower).
#[inline]
pub(super) fn parse_real(tok: &[u8]) -> Option<f64> {
    parse_real_fast(tok).or_else(|| std::str::from_utf8(tok).ok()?.parse().ok())
}

/// Clinger's fast path: `[+-]digits[.digits][(e|E)[+-]digits]` with at most 19 significant
/// digits, a mantissa ≤ 2⁵³ and a decimal exponent within ±22 is `m · 10^e` or `m / 10^−e`
/// with both operands exact, so one IEEE operation rounds it correctly. `None` otherwise
/// (including text the slow path must judge: `nan`, `inf`, garbage).
#[inline]
pub(super) fn parse_real_fast(tok: &[u8]) -> Option<f64> {
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
pub(super) fn parse_integer(tok: &[u8]) -> Option<f64> {
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

#[cfg(test)]
mod tests {
    // Proves that the fast value parser agrees with `f64::from_str` bit for bit, and that
    // special values are read as Rust reads them.
    use super::super::testing::{parse, H};
    use super::*;

    /// Issue 17: a NaN matrix printed "max relative difference 0.0e0".
    /// Special values parse, and are then refused with their line.
    #[test]
    fn special_values_refused_by_line() {
        for (text, line, shown) in [
            ("1 1 nan", 3, "NaN"),
            ("1 2 -inf", 3, "-inf"),
            ("1 3 Infinity", 3, "inf"),
            ("1 1 1e400", 3, "inf"),
        ] {
            let e = parse(&format!("{H}1 3 2\n1 2 1.0\n{text}\n")).unwrap_err();
            let msg = e.to_string();
            assert!(
                msg.contains(&format!(":{}:", line + 1))
                    && msg.contains(shown)
                    && msg.contains("not a finite"),
                "{text}: {msg}"
            );
        }
        assert!(parse_real(b"nan").is_some_and(f64::is_nan));
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
}
