//! Why a file (a trace, a perf model, a Matrix Market matrix) could not be read or written:
//! one error type and one wording for every reader in the workspace.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// A file that could not be read or written. Its message names the file
/// (when there is one), the place in it and the problem:
/// `run.json: truncated JSON at line 7 column 12`, `a.mtx:3: column index 0 out of range 1..=5`.
#[derive(Debug)]
pub struct FileError {
    path: Option<PathBuf>,
    kind: FileErrorKind,
}

/// What is wrong with a file, and where in it.
#[derive(Debug)]
#[non_exhaustive]
pub enum FileErrorKind {
    /// Reading or writing failed.
    Io(io::Error),
    /// The JSON ends early (a file cut short, e.g. by a crash while writing).
    TruncatedJson {
        /// 1-based line of the end of input.
        line: usize,
        /// Column of the end of input.
        column: usize,
    },
    /// Not JSON, or JSON of the wrong shape.
    InvalidJson {
        /// 1-based line.
        line: usize,
        /// Column.
        column: usize,
        /// What the JSON parser expected.
        message: String,
    },
    /// One line of a text file is wrong (or, for a file cut short, the line
    /// after its end).
    Line {
        /// 1-based line.
        line: usize,
        /// What is wrong, e.g. `column index 0 out of range 1..=5`.
        message: String,
    },
    /// One event of a trace file is malformed.
    Event {
        /// 0-based index in the file's list of events.
        index: usize,
        /// What is wrong, naming the field.
        message: String,
    },
    /// Well-formed, but not content this build can use (format, version, a
    /// bad sample, a duplicate, ...).
    Format(String),
    /// Performance models configured without a directory were asked to save.
    NoDir,
}

impl FileError {
    /// An error of this kind, in no named file (yet: see [`with_path`](Self::with_path)).
    pub fn new(kind: FileErrorKind) -> Self {
        Self { path: None, kind }
    }

    /// A [`Format`](FileErrorKind::Format) error: well-formed, unusable content.
    pub(crate) fn format(message: impl Into<String>) -> Self {
        Self::new(FileErrorKind::Format(message.into()))
    }

    /// The same error, in the file (or directory) at `path`.
    pub fn with_path(mut self, path: &Path) -> Self {
        self.path = Some(path.to_owned());
        self
    }

    /// What went wrong.
    pub fn kind(&self) -> &FileErrorKind {
        &self.kind
    }

    /// The file or directory involved, if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }
}

impl FileErrorKind {
    /// A serde_json error at its position: [`TruncatedJson`](Self::TruncatedJson)
    /// when the input ended early, [`InvalidJson`](Self::InvalidJson) otherwise.
    pub(crate) fn json(e: &serde_json::Error) -> Self {
        let (line, column) = (e.line(), e.column());
        if e.is_eof() {
            FileErrorKind::TruncatedJson { line, column }
        } else {
            FileErrorKind::InvalidJson {
                line,
                column,
                message: crate::util::json_message(e),
            }
        }
    }
}

impl fmt::Display for FileErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileErrorKind::Io(e) => write!(f, "{e}"),
            FileErrorKind::TruncatedJson { line, column } => {
                write!(f, "truncated JSON at line {line} column {column}")
            }
            FileErrorKind::InvalidJson {
                line,
                column,
                message,
            } => write!(f, "invalid JSON at line {line} column {column}: {message}"),
            FileErrorKind::Line { line, message } => write!(f, "line {line}: {message}"),
            FileErrorKind::Event { index, message } => write!(f, "event {index}: {message}"),
            FileErrorKind::Format(message) => f.write_str(message),
            FileErrorKind::NoDir => f.write_str("performance models have no directory to save to"),
        }
    }
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.path, &self.kind) {
            // `file:line: problem`, as compilers write it.
            (Some(path), FileErrorKind::Line { line, message }) => {
                write!(f, "{}:{line}: {message}", path.display())
            }
            (Some(path), kind) => write!(f, "{}: {kind}", path.display()),
            (None, kind) => write!(f, "{kind}"),
        }
    }
}

impl std::error::Error for FileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            FileErrorKind::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl FileError {
    /// `Ok(bytes)` when `path` is a regular file (symbolic links followed),
    /// checked without opening it: opening a FIFO blocks until a writer
    /// comes, and a device such as `/dev/zero` reads without end (issue 17).
    pub fn check_regular_file(path: &Path) -> Result<u64, FileError> {
        let meta = std::fs::metadata(path).map_err(|e| FileError::from(e).with_path(path))?;
        if meta.is_file() {
            return Ok(meta.len());
        }
        let what = if meta.is_dir() {
            "a directory"
        } else {
            use std::os::unix::fs::FileTypeExt;
            let t = meta.file_type();
            if t.is_fifo() {
                "a FIFO"
            } else if t.is_char_device() || t.is_block_device() {
                "a device"
            } else if t.is_socket() {
                "a socket"
            } else {
                "not a regular file"
            }
        };
        Err(FileError::format(format!(
            "{what}, not a regular file: refused (it could block or never end)"
        ))
        .with_path(path))
    }
}

impl From<io::Error> for FileError {
    fn from(e: io::Error) -> Self {
        Self::new(FileErrorKind::Io(e))
    }
}

#[cfg(test)]
mod tests {
    // Proves the wording of each kind, with and without a file name.
    use super::*;

    #[test]
    fn messages_name_the_file_and_the_place() {
        let p = Path::new("dir/m.mtx");
        let line = || {
            FileError::new(FileErrorKind::Line {
                line: 3,
                message: "bad".into(),
            })
        };
        assert_eq!(line().to_string(), "line 3: bad");
        assert_eq!(line().with_path(p).to_string(), "dir/m.mtx:3: bad");
        let e = serde_json::from_str::<serde_json::Value>("{\"a\":").unwrap_err();
        let e = FileError::new(FileErrorKind::json(&e)).with_path(p);
        assert_eq!(
            e.to_string(),
            "dir/m.mtx: truncated JSON at line 1 column 5"
        );
        let e = serde_json::from_str::<serde_json::Value>("\n x").unwrap_err();
        let e = FileError::new(FileErrorKind::json(&e));
        assert_eq!(
            e.to_string(),
            "invalid JSON at line 2 column 2: expected value"
        );
        let e = FileError::from(io::Error::new(io::ErrorKind::NotFound, "gone")).with_path(p);
        assert_eq!(e.to_string(), "dir/m.mtx: gone");
        assert!(std::error::Error::source(&e).is_some());
        assert_eq!(
            FileError::new(FileErrorKind::NoDir).to_string(),
            "performance models have no directory to save to"
        );
    }
}
