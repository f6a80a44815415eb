//! Chrome trace event JSON: export for Perfetto UI / chrome://tracing, and import back.
//!
//! # File layout
//!
//! ```text
//! {"traceEvents":[
//! {"ph":"M","name":"process_name",...}          process "tessera", its tracks' names
//! {"ph":"X","name":"gemm(3,4,5)","cat":"gemm",...}   one complete event per task
//! {"ph":"X","name":"handle 7","cat":"transfer",...}  one per transfer, on "transfer 0→1" tracks
//! {"ph":"s",...} {"ph":"f","bp":"e",...}         dependency arrows, only with `ChromeOptions::flows`
//! ],
//! "displayTimeUnit":"ns",
//! "tessera":{"format":"tessera-trace","version":1,"tasks":N,"transfers":M,
//!            "workers":[{"name":"cpu0","memory_node":0},...],"edges":[[1,2],...]}}
//! ```
//!
//! `traceEvents` comes first and our own `tessera` key last on purpose: Perfetto's
//! JSON tokenizer stops reading at the first top-level key it does not know, so
//! anything unknown placed before the events would hide the whole trace.
//!
//! Viewers read `ts`/`dur` in µs; they are written as exact decimals
//! (`12.345` = 12 345 ns). The reader takes times from `args.start_ns` /
//! `args.end_ns`, which hold the exact nanoseconds, so a write/read round trip
//! gives back an equal [`Trace`]. One event per line, so that a parse error's
//! line number points at the event.
//!
//! `write` holds the writer, `read` the streaming reader; codelet colours are
//! shared with the Gantt chart ([`crate::trace::colors`]).

#[cfg(test)]
mod fixtures;
mod read;
mod write;

use std::fs::File;
use std::io;
use std::path::Path;

use super::model::Trace;
use crate::FileError;

pub use read::{read_chrome_json, read_chrome_json_slice};
pub use write::write_chrome_json;

/// Value of `tessera.format`: marks a file as written by [`write_chrome_json`].
const FORMAT_NAME: &str = "tessera-trace";
/// Version of the layout described in the module docs.
const FORMAT_VERSION: u64 = 1;
/// The single process every track belongs to.
const PID: u64 = 1;
/// Worker `i` is drawn on thread id `TID_BASE + i`; transfer tracks follow the workers.
/// Not 0 or 1: some viewers give tid 0 and tid == pid special meaning.
const TID_BASE: u64 = 10;

/// What [`write_chrome_json`] emits besides tasks, tracks and transfers.
#[derive(Clone, Debug, Default)]
pub struct ChromeOptions {
    /// Draw one arrow per dependency edge (flow events). Off by default: on a
    /// 10^6-task graph the arrows hide the timeline and slow the viewers.
    /// The edges are stored in the file's metadata either way.
    pub flows: bool,
}

/// Writes `trace` to the file at `path`, atomically (a temporary file
/// beside it, renamed over it: an interrupted or failed save leaves the
/// previous file whole); errors name the file.
pub fn save(trace: &Trace, path: impl AsRef<Path>, opts: &ChromeOptions) -> Result<(), FileError> {
    let path = path.as_ref();
    crate::util::write_atomically(path, |file| write_chrome_json(trace, file, opts))
        .map_err(|e: io::Error| FileError::from(e).with_path(path))
}

/// Reads the trace file at `path`; errors name the file. Only a regular
/// file is read (a FIFO or `/dev/zero` is refused, see
/// [`FileError::check_regular_file`]), and only as many bytes as it had when
/// it was checked, plus one to notice growth.
pub fn load(path: impl AsRef<Path>) -> Result<Trace, FileError> {
    use std::io::Read;
    let path = path.as_ref();
    let size = FileError::check_regular_file(path)?;
    let with_path = |e: io::Error| FileError::from(e).with_path(path);
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(size as usize).map_err(|e| {
        FileError::format(format!("cannot allocate {size} bytes to read it: {e}")).with_path(path)
    })?;
    File::open(path)
        .map_err(with_path)?
        .take(size.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(with_path)?;
    read_chrome_json_slice(&bytes).map_err(|e| e.with_path(path))
}

#[cfg(test)]
mod tests {
    // Proves that a trace survives write → read unchanged, through memory and
    // through a file, and that file errors name the path.
    use super::fixtures::{sample, to_json};
    use super::*;
    use crate::trace::model::Trace;

    #[test]
    fn round_trip() {
        let trace = sample();
        for flows in [false, true] {
            let json = to_json(&trace, flows);
            assert_eq!(read_chrome_json(json.as_bytes()).unwrap(), trace);
            assert_eq!(read_chrome_json_slice(json.as_bytes()).unwrap(), trace);
        }
        let empty = Trace::default();
        assert_eq!(
            read_chrome_json(to_json(&empty, true).as_bytes()).unwrap(),
            empty
        );
    }

    #[test]
    fn save_and_load_name_the_path() {
        let dir = std::env::temp_dir().join(format!("tessera-chrome-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("trace.json");
        save(&sample(), &path, &ChromeOptions::default()).unwrap();
        assert_eq!(load(&path).unwrap(), sample());
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, &text[..text.len() / 2]).unwrap();
        let msg = load(&path).unwrap_err().to_string();
        assert!(
            msg.starts_with(&format!("{}: truncated JSON at line", path.display())),
            "{msg}"
        );
        let missing = dir.join("missing.json");
        let msg = load(&missing).unwrap_err().to_string();
        assert!(msg.starts_with(&missing.display().to_string()), "{msg}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
