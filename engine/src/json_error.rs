//! Where and why a JSON file (a trace, a perf model) could not be parsed:
//! one error shape and one wording for every file format the engine reads.

use std::fmt;

/// A JSON document that could not be parsed, with its position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JsonError {
    /// The JSON ends early (a file cut short, e.g. by a crash while writing).
    Truncated {
        /// 1-based line of the end of input.
        line: usize,
        /// Column of the end of input.
        column: usize,
    },
    /// Not JSON, or JSON of the wrong shape.
    Syntax {
        /// 1-based line.
        line: usize,
        /// Column.
        column: usize,
        /// What the JSON parser expected.
        message: String,
    },
}

impl JsonError {
    /// `e` as a truncation, at its position.
    pub(crate) fn truncated(e: &serde_json::Error) -> Self {
        JsonError::Truncated {
            line: e.line(),
            column: e.column(),
        }
    }

    /// `e` as a syntax error, at its position, with serde_json's message.
    pub(crate) fn syntax(e: &serde_json::Error) -> Self {
        JsonError::Syntax {
            line: e.line(),
            column: e.column(),
            message: crate::util::json_message(e),
        }
    }
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonError::Truncated { line, column } => {
                write!(f, "truncated JSON at line {line} column {column}")
            }
            JsonError::Syntax {
                line,
                column,
                message,
            } => write!(f, "invalid JSON at line {line} column {column}: {message}"),
        }
    }
}
