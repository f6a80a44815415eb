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

/// The longest file name the file systems Tessera writes to accept
/// (`NAME_MAX` on Linux and the BSDs).
const NAME_MAX: usize = 255;

/// The temporary file a save of `path` writes before renaming it over
/// `path`: `.NAME.PID.tmp` beside it (hidden, never read back as data).
/// Where that would be longer than a file name may be (a legal 255-byte
/// `NAME`), `NAME` is cut and a hash of it added ([`tmp_stem`]).
pub(crate) fn tmp_path(path: &std::path::Path) -> std::path::PathBuf {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    path.with_file_name(format!(".{}.{}.tmp", tmp_stem(&name), std::process::id()))
}

/// The `NAME` part of [`tmp_path`]'s `.NAME.PID.tmp` for a file named
/// `name`: `name` itself, or, where the whole would pass [`NAME_MAX`] (with
/// room for any pid), its first bytes and `~` and its hash.
fn tmp_stem(name: &str) -> String {
    // ".", ".", up to 10 pid digits, ".tmp".
    const FRAME: usize = 1 + 1 + 10 + 4;
    if name.len() + FRAME <= NAME_MAX {
        return name.to_string();
    }
    let hash = format!("~{:016x}", fnv1a(name.as_bytes()));
    let mut cut = NAME_MAX - FRAME - hash.len();
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{hash}", &name[..cut])
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
    if of.is_some_and(|of| tmp_stem(of) != file) || !path.is_file() {
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

/// The file a save of `path` replaces: `path`, or, where `path` is a
/// symlink, the file at the end of its chain of links (which need not exist
/// yet: a dangling link is written through, as `>` in a shell does).
fn resolve_links(path: &std::path::Path) -> std::io::Result<std::path::PathBuf> {
    // The kernel's own limit on links followed in one lookup (ELOOP).
    const MAX_LINKS: usize = 40;
    let mut at = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                let link = std::fs::read_link(&at)?;
                at = match at.parent() {
                    Some(dir) if link.is_relative() => dir.join(link),
                    _ => link,
                };
            }
            _ => return Ok(at),
        }
    }
    Err(std::io::Error::other(format!(
        "more than {MAX_LINKS} symbolic links to follow"
    )))
}

/// Write the file at `path`: atomically where it is (or will be) a
/// regular file, directly where it is a character device or a FIFO, and
/// never by replacing anything else (issue 28: `--trace /dev/null` as root
/// turned the machine's `/dev/null` into a regular file, and a symlink was
/// replaced by a file while its target kept the old content).
///
/// - A regular file, or none yet: `write` fills a temporary file beside it
///   (`.NAME.PID.tmp`), which is synced, given the old file's permissions and
///   renamed over it. A failed or interrupted save leaves the previous file
///   whole (issue 17: Ctrl-C or SIGXFSZ during `--trace` left half a file);
///   a failed one removes its temporary file, and stale ones of killed
///   saves of the same file go first.
/// - A symlink: the same, for the file it points to (through any chain of
///   links); the link stays a link.
/// - A character device (`/dev/null`, `/dev/stdout` on a terminal) or a
///   FIFO: `write` writes to it directly. A FIFO nobody reads is an error
///   (ENXIO), not a wait.
/// - Anything else (a directory, a socket, a block device): an error,
///   nothing written.
pub fn write_atomically(
    path: &std::path::Path,
    write: impl FnOnce(&std::fs::File) -> std::io::Result<()>,
) -> std::io::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let kind = match std::fs::metadata(path) {
        Ok(m) => Some(m.file_type()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    match kind {
        None => {}
        Some(k) if k.is_file() => {}
        Some(k) if k.is_char_device() || k.is_fifo() => return write_directly(path, write),
        Some(k) if k.is_dir() => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::IsADirectory,
                "is a directory",
            ))
        }
        Some(_) => {
            return Err(std::io::Error::other(
                "not a regular file, a character device or a FIFO: not replaced",
            ))
        }
    }
    let path = &resolve_links(path)?;
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
        if let Ok(old) = std::fs::metadata(path) {
            file.set_permissions(old.permissions())?;
        }
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// [`write_atomically`]'s way into a character device or a FIFO: opened
/// without blocking (a FIFO with no reader fails at once), then written
/// with blocking writes.
fn write_directly(
    path: &std::path::Path,
    write: impl FnOnce(&std::fs::File) -> std::io::Result<()>,
) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let kind = file.metadata()?.file_type();
    if !(kind.is_char_device() || kind.is_fifo()) {
        // Replaced between the look and the open: write nothing.
        return Err(std::io::Error::other(
            "changed while it was opened: not written",
        ));
    }
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on a descriptor `file` owns, with valid commands.
    let cleared = unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) == 0
    };
    if !cleared {
        return Err(std::io::Error::last_os_error());
    }
    write(&file)
}

#[cfg(test)]
mod tests {
    //! Proves that temporary names stay legal for the longest legal names,
    //! and that stale ones of such names are still recognised.

    use super::*;

    #[test]
    fn temporary_names_of_255_byte_names_fit() {
        for name in ["a.json".to_string(), "é".repeat(127), "t".repeat(255)] {
            let tmp = tmp_path(std::path::Path::new(&name));
            let tmp = tmp.file_name().unwrap().to_str().unwrap();
            assert!(tmp.len() <= NAME_MAX, "{} bytes", tmp.len());
            assert!(tmp.starts_with('.') && tmp.ends_with(".tmp"), "{tmp}");
        }
        assert_eq!(tmp_stem("a.json"), "a.json");
        assert_ne!(tmp_stem(&"t".repeat(255)), tmp_stem(&"t".repeat(254)));
    }
}
