//! Small shared helpers: the poison-ignoring [`lock`] (public: the crates
//! built on the engine use it too), and the engine's own text, hash and file
//! helpers.

use std::sync::{Mutex, MutexGuard};

/// Lock a mutex, ignoring poisoning: the one lock helper of the workspace.
///
/// A mutex is poisoned when a thread panicked while holding it. Where that
/// cannot leave the guarded state half-changed, the poison carries no
/// information and unwrapping it would turn one panic into a cascade; so
/// each caller states why its guarded state stays consistent across a panic.
/// The engine's reason: no engine code panics while holding one of its locks
/// (task bodies run outside every lock), so a poisoned mutex can only come
/// from a bug that is already being reported.
///
/// (The sleep protocol's `sync::lock` is this function, or, under
/// `cfg(loom)`, the same body over loom's mutex.)
///
/// ```
/// use std::sync::Mutex;
/// use tessera_engine::util::lock;
///
/// let m = Mutex::new(1);
/// let _ = std::panic::catch_unwind(|| {
///     let _g = m.lock().unwrap();
///     panic!("poisons the mutex");
/// });
/// assert!(m.is_poisoned());
/// *lock(&m) += 1;
/// assert_eq!(*lock(&m), 2);
/// ```
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
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

/// The temporary file a save of `path` writes before renaming it over
/// `path`: `.NAME.PID.tmp` beside it (hidden, never read back as data).
pub(crate) fn tmp_path(path: &std::path::Path) -> std::path::PathBuf {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}

/// Whether `path` is the temporary file of a save of a file named `of`
/// (`.OF.PID.tmp`, see [`tmp_path`]; `None`: of any file) whose process is
/// gone (no `/proc/PID`), or, where that cannot be told, older than an hour.
/// Such a file is what `kill -9` during a save leaves.
pub(crate) fn is_stale_tmp(path: &std::path::Path, of: Option<&str>) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    let Some((file, pid)) = name
        .strip_prefix('.')
        .and_then(|n| n.strip_suffix(".tmp"))
        .and_then(|n| n.rsplit_once('.'))
    else {
        return false;
    };
    let Ok(pid) = pid.parse::<u32>() else {
        return false;
    };
    if of.is_some_and(|of| of != file) || !path.is_file() {
        return false;
    }
    let proc = std::path::Path::new("/proc");
    if proc.join("self").exists() {
        return pid != std::process::id() && !proc.join(pid.to_string()).exists();
    }
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age > std::time::Duration::from_secs(3600))
}

/// Write `path` atomically: `write` fills a temporary file beside it
/// ([`tmp_path`]), which is synced and renamed over `path`. A failed or
/// interrupted save leaves the previous file whole (issue 17: Ctrl-C or
/// SIGXFSZ during `--trace` left half a file); a failed one removes its
/// temporary file, and stale ones of killed saves of the same file go first.
pub(crate) fn write_atomically(
    path: &std::path::Path,
    write: impl FnOnce(&std::fs::File) -> std::io::Result<()>,
) -> std::io::Result<()> {
    if let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) {
        let dir = if dir.as_os_str().is_empty() {
            std::path::Path::new(".")
        } else {
            dir
        };
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                if is_stale_tmp(&e.path(), Some(name)) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }
    let tmp = tmp_path(path);
    let result = (|| {
        let file = std::fs::File::create(&tmp)?;
        write(&file)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
