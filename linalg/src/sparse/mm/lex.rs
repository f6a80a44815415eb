//! Lines and whitespace-separated tokens of a Matrix Market buffer, and tokens quoted in
//! messages.

/// A token for a message: lossy UTF-8, cut to 40 characters.
pub(super) fn show(tok: &[u8]) -> String {
    let s = String::from_utf8_lossy(tok);
    if s.chars().count() > 40 {
        format!("{}…", s.chars().take(40).collect::<String>())
    } else {
        s.into_owned()
    }
}

/// Lines of a buffer split at `\n` (a trailing `\r` is left to the tokenizer, which treats
/// it as blank); `line` is the 1-based number of the line last returned.
pub(super) struct Lines<'a> {
    pub(super) buf: &'a [u8],
    pub(super) pos: usize,
    pub(super) line: usize,
}

impl<'a> Lines<'a> {
    #[inline]
    pub(super) fn next(&mut self) -> Option<&'a [u8]> {
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
pub(super) struct Tokens<'a> {
    pub(super) line: &'a [u8],
    pub(super) pos: usize,
}

impl<'a> Tokens<'a> {
    #[inline]
    pub(super) fn next(&mut self) -> Option<&'a [u8]> {
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
    pub(super) fn count_rest(&mut self) -> usize {
        let mut k = 0;
        while self.next().is_some() {
            k += 1;
        }
        k
    }
}
