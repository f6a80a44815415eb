//! Small shared helpers.

use std::sync::{Mutex, MutexGuard};

/// Lock a mutex, ignoring poisoning: no engine code panics while holding one
/// of its locks (task bodies run outside every lock), so a poisoned mutex can
/// only come from a bug that is already being reported.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The text of a panic payload (public as [`crate::fmt::panic_message`]).
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_string()
    }
}

/// A serde_json error's message without the " at line L column C" that
/// serde_json appends: callers print the position themselves.
pub(crate) fn json_message(e: &serde_json::Error) -> String {
    let msg = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    msg.strip_suffix(&suffix).map(str::to_owned).unwrap_or(msg)
}

/// FNV-1a: a hash that is the same in every process, on every platform and
/// Rust version (unlike `std`'s), for names that must stay stable from one
/// run to the next (trace colours, perf-model file names).
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
