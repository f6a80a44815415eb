//! Chrome trace event JSON: export for Perfetto UI / chrome://tracing, and import back.
//!
//! # File layout
//!
//! ```text
//! {"traceEvents":[
//! {"ph":"M","name":"process_name",...}          process "tessera" (one per rank: "tessera rank 1"), its tracks' names
//! {"ph":"X","name":"gemm(3,4,5)","cat":"gemm",...}   one complete event per task
//! {"ph":"X","name":"handle 7","cat":"transfer",...}  one per transfer, on "transfer 0→1" tracks
//! {"ph":"X","name":"halo 176 KiB","cat":"message",...}  one per message, on "send → rank 1" / "recv ← rank 1" tracks
//! {"ph":"s","cat":"remote",...} {"ph":"f","bp":"e","cat":"remote",...}  remote edges' arrows: sending task → receiving task
//! {"ph":"s","cat":"dep",...} {"ph":"f","bp":"e","cat":"dep",...}  other dependency arrows, only with `ChromeOptions::flows`
//! ],
//! "displayTimeUnit":"ns",
//! "tessera":{"format":"tessera-trace","version":2,"tasks":N,"transfers":M,"messages":K,
//!            "workers":[{"name":"cpu0","memory_node":0},...],
//!            "ranks":[{"rank":0,"workers":2,"transfers":0,"epoch_unix_ns":...},...],
//!            "edges":[[1,2],...]}}
//! ```
//!
//! Rank `r` is process `pid = r + 1` (a one-process trace keeps pid 1, as in
//! version 1 files); its tracks are its workers, its transfer tracks and its
//! message tracks. Version 1 files (no messages, no ranks) are still read.
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

pub(crate) use read::MAX_EVENT_NS;
pub use read::{read_chrome_json, read_chrome_json_slice};
pub use write::write_chrome_json;

/// Value of `tessera.format`: marks a file as written by [`write_chrome_json`].
const FORMAT_NAME: &str = "tessera-trace";
/// Version of the layout described in the module docs.
const FORMAT_VERSION: u64 = 2;
/// Oldest version the reader accepts (1: no messages, no ranks).
const MIN_FORMAT_VERSION: u64 = 1;
/// The process of rank 0 (rank `r` is `PID + r`).
const PID: u64 = 1;
/// Worker `i` is drawn on thread id `TID_BASE + i`; transfer tracks follow the workers.
/// Not 0 or 1: some viewers give tid 0 and tid == pid special meaning.
const TID_BASE: u64 = 10;

/// What [`write_chrome_json`] emits besides tasks, tracks and transfers.
#[derive(Clone, Debug, Default)]
pub struct ChromeOptions {
    /// Draw one arrow per dependency edge (flow events). Off by default: on a
    /// 10^6-task graph the arrows hide the timeline and slow the viewers.
    /// The edges are stored in the file's metadata either way, and the
    /// remote edges of a merged trace ([`crate::trace::remote_edges`]) are
    /// drawn either way.
    pub flows: bool,
}

/// The ranks' worker and transfer counts must cover the lists exactly, and
/// no rank may appear twice (the reader and the writer both check it).
pub(crate) fn check_ranks(trace: &Trace) -> Result<(), String> {
    if trace.ranks.is_empty() {
        return Ok(());
    }
    let workers: u64 = trace.ranks.iter().map(|r| u64::from(r.workers)).sum();
    if workers != trace.workers.len() as u64 {
        return Err(format!(
            "the ranks list {workers} workers but the trace has {}",
            trace.workers.len()
        ));
    }
    let transfers: u64 = trace.ranks.iter().map(|r| u64::from(r.transfers)).sum();
    if transfers != trace.transfers.len() as u64 {
        return Err(format!(
            "the ranks list {transfers} transfers but the trace has {}",
            trace.transfers.len()
        ));
    }
    let mut seen: Vec<u32> = trace.ranks.iter().map(|r| r.rank).collect();
    seen.sort_unstable();
    if let Some(w) = seen.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!("rank {} appears twice in the ranks list", w[0]));
    }
    Ok(())
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
    use super::fixtures::{sample, sample_ranks, to_json};
    use super::*;
    use crate::trace::model::Trace;

    #[test]
    fn round_trip() {
        let ranks = sample_ranks();
        for flows in [false, true] {
            let json = to_json(&ranks, flows);
            assert_eq!(read_chrome_json_slice(json.as_bytes()).unwrap(), ranks);
        }
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
    fn a_process_per_rank() {
        let trace = sample_ranks();
        let doc: serde_json::Value = serde_json::from_str(&to_json(&trace, true)).unwrap();
        let events = doc["traceEvents"].as_array().unwrap();
        let procs: Vec<(u64, &str)> = events
            .iter()
            .filter(|e| e["name"] == "process_name")
            .map(|e| {
                (
                    e["pid"].as_u64().unwrap(),
                    e["args"]["name"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(procs, [(1, "tessera rank 0"), (2, "tessera rank 1")]);
        // Every task sits in its rank's process; messages in the recording rank's.
        let wranks = trace.worker_ranks();
        for e in events.iter().filter(|e| e["ph"] == "X") {
            let pid = e["pid"].as_u64().unwrap();
            let args = &e["args"];
            let rank = if let Some(w) = args["worker"].as_u64() {
                wranks[w as usize]
            } else if let Some(r) = args["rank"].as_u64() {
                r as u32
            } else {
                continue; // a transfer: checked through the track names below
            };
            assert_eq!(pid, u64::from(rank) + 1, "{e}");
        }
        let tracks = |pid: u64| -> Vec<&str> {
            events
                .iter()
                .filter(|e| e["name"] == "thread_name" && e["pid"] == pid)
                .map(|e| e["args"]["name"].as_str().unwrap())
                .collect()
        };
        assert_eq!(
            tracks(2),
            [
                "cpu0",
                "cpu1",
                "transfer 0→1",
                "send → rank 0",
                "recv ← rank 0"
            ]
        );
        assert!(tracks(1).contains(&"send → rank 1 #2"), "{:?}", tracks(1));
        // Thread ids are distinct within a process.
        for pid in [1, 2] {
            let mut tids: Vec<u64> = events
                .iter()
                .filter(|e| e["name"] == "thread_name" && e["pid"] == pid)
                .map(|e| e["tid"].as_u64().unwrap())
                .collect();
            let n = tids.len();
            tids.sort_unstable();
            tids.dedup();
            assert_eq!(tids.len(), n);
        }
    }

    #[test]
    fn inconsistent_ranks_are_refused() {
        let mut t = sample_ranks();
        t.ranks[1].workers = 5;
        let e = write_chrome_json(&t, std::io::sink(), &ChromeOptions::default()).unwrap_err();
        assert!(
            e.to_string()
                .contains("the ranks list 8 workers but the trace has 5"),
            "{e}"
        );
        let mut t = sample_ranks();
        t.ranks[1].rank = 0;
        let e = write_chrome_json(&t, std::io::sink(), &ChromeOptions::default()).unwrap_err();
        assert!(e.to_string().contains("rank 0 appears twice"), "{e}");
        // The reader checks the same on a file edited by hand.
        let json = to_json(&sample_ranks(), false).replace("\"workers\":2,", "\"workers\":1,");
        let e = read_chrome_json_slice(json.as_bytes())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("the ranks list 4 workers but the trace has 5"),
            "{e}"
        );
        let json =
            to_json(&sample_ranks(), false).replace("\"dir\":\"recv\"", "\"dir\":\"sideways\"");
        let e = read_chrome_json_slice(json.as_bytes())
            .unwrap_err()
            .to_string();
        assert!(e.contains("must be \"send\" or \"recv\""), "{e}");
    }

    /// Issue 42, item 7: `args.flops = 1e300` was read, and `trace summary`
    /// printed 300-digit GFLOP/s; bytes of 2^64-1 too. Now flops past any
    /// processor's rate over the task's time, negative flops, and bytes past
    /// 2^53 are refused, as times past 2^53 ns are.
    #[test]
    fn flops_and_bytes_past_any_machine_are_refused() {
        let json = to_json(&sample(), false);
        let flops = format!(",\"flops\":{}", 1.0e9 / 3.0);
        assert!(json.contains(&flops), "{json}");
        for (bad, want) in [
            (",\"flops\":1e300", "args.flops 1e300 is not a task's"),
            (",\"flops\":-1", "args.flops -1e0 is not a task's"),
        ] {
            let e = read_chrome_json_slice(json.replacen(&flops, bad, 1).as_bytes())
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{e}");
        }
        let e = read_chrome_json_slice(
            json.replacen("\"bytes\":1048576", "\"bytes\":18446744073709551615", 1)
                .as_bytes(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("is more than any transfer moves"), "{e}");
    }

    #[test]
    fn version_1_files_are_read() {
        let json = to_json(&sample(), false)
            .replace("\"version\":2", "\"version\":1")
            .replace(",\"messages\":0", "")
            .replace("\n\"ranks\":[],", "");
        assert!(!json.contains("ranks"), "{json}");
        assert_eq!(read_chrome_json_slice(json.as_bytes()).unwrap(), sample());
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
