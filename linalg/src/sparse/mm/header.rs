//! The Matrix Market header: the banner (object, format, field, symmetry) and the size line.

use super::lex::{show, Tokens};

pub(super) const BANNER_FORM: &str = "%%MatrixMarket matrix coordinate <real|integer|pattern> \
                           <general|symmetric|skew-symmetric>";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Field {
    Real,
    Integer,
    Pattern,
}

impl Field {
    pub(super) fn entry_form(self) -> &'static str {
        match self {
            Field::Pattern => "row col",
            Field::Real | Field::Integer => "row col value",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Symmetry {
    General,
    Symmetric,
    SkewSymmetric,
}

impl Symmetry {
    pub(super) fn name(self) -> &'static str {
        match self {
            Symmetry::General => "general",
            Symmetry::Symmetric => "symmetric",
            Symmetry::SkewSymmetric => "skew-symmetric",
        }
    }
}

pub(super) struct Header {
    pub(super) field: Field,
    pub(super) symmetry: Symmetry,
}

pub(super) fn parse_banner(line: &[u8]) -> Result<Header, String> {
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

pub(super) fn parse_size_line(line: &[u8]) -> Result<(usize, usize, usize), String> {
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

#[cfg(test)]
mod tests {
    // Proves that each bad banner and size line is refused with a message naming it.
    use super::super::testing::{fails, H};

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
}
