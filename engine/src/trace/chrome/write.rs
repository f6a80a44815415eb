//! The Chrome trace writer: a [`Trace`] as trace event JSON, one event per line.

use std::collections::{BinaryHeap, HashMap};
use std::io::{self, BufWriter, Write};

use super::{ChromeOptions, FORMAT_NAME, FORMAT_VERSION, PID, TID_BASE};
use crate::trace::colors::CodeletColors;
use crate::trace::model::{Nanos, Trace, TransferRecord};

/// Writes `ns` as microseconds with an exact three-digit fraction.
fn write_us(w: &mut impl Write, ns: Nanos) -> io::Result<()> {
    write!(w, "{}.{:03}", ns / 1000, ns % 1000)
}

/// Writes `s` as a JSON string (quoted, escaped).
fn write_str(w: &mut impl Write, s: &str) -> io::Result<()> {
    serde_json::to_writer(&mut *w, s).map_err(io::Error::from)
}

/// Writes `x` as a JSON number, or `null` when it is not finite (JSON has no NaN).
fn write_f64(w: &mut impl Write, x: f64) -> io::Result<()> {
    if x.is_finite() {
        serde_json::to_writer(&mut *w, &x).map_err(io::Error::from)
    } else {
        w.write_all(b"null")
    }
}

fn invalid_input(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// Rejects what the reader would reject, so every file we write can be read back.
fn check_writable(trace: &Trace) -> io::Result<()> {
    let workers = trace.workers.len();
    for t in &trace.tasks {
        if t.end < t.start {
            return Err(invalid_input(format!(
                "task {} ends before it starts (start {} ns, end {} ns)",
                t.id, t.start, t.end
            )));
        }
        if t.worker as usize >= workers {
            return Err(invalid_input(format!(
                "task {} ran on worker {} but the trace has {} workers",
                t.id, t.worker, workers
            )));
        }
    }
    for (i, x) in trace.transfers.iter().enumerate() {
        if x.end < x.start {
            return Err(invalid_input(format!(
                "transfer {i} (handle {}) ends before it starts (start {} ns, end {} ns)",
                x.handle, x.start, x.end
            )));
        }
    }
    Ok(())
}

/// One track of transfers: a `(from, to)` node pair, and a lane number so that
/// overlapping transfers between the same pair go to separate tracks (viewers
/// drop or mis-nest complete events that overlap on one track).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct TransferTrack {
    from: u32,
    to: u32,
    lane: u32,
}

/// Assigns each transfer to a track; returns the tracks (sorted) and, per
/// transfer, the index of its track. O(M log M).
fn transfer_tracks(transfers: &[TransferRecord]) -> (Vec<TransferTrack>, Vec<usize>) {
    // Per pair, transfers by start time; a min-heap of (lane end, lane) reuses
    // the lane that frees up first (interval partitioning, optimal lane count).
    let mut by_pair: HashMap<(u32, u32), Vec<usize>> = HashMap::new();
    for (i, x) in transfers.iter().enumerate() {
        by_pair.entry((x.from_node, x.to_node)).or_default().push(i);
    }
    let mut lane_of = vec![0u32; transfers.len()];
    let mut tracks = Vec::new();
    for (&(from, to), idx) in by_pair.iter_mut() {
        idx.sort_unstable_by_key(|&i| (transfers[i].start, transfers[i].end));
        let mut heap: BinaryHeap<std::cmp::Reverse<(Nanos, u32)>> = BinaryHeap::new();
        let mut lanes = 0u32;
        for &i in idx.iter() {
            let x = &transfers[i];
            let lane = match heap.peek() {
                Some(&std::cmp::Reverse((end, lane))) if end <= x.start => {
                    heap.pop();
                    lane
                }
                _ => {
                    lanes += 1;
                    lanes - 1
                }
            };
            heap.push(std::cmp::Reverse((x.end, lane)));
            lane_of[i] = lane;
        }
        tracks.extend((0..lanes).map(|lane| TransferTrack { from, to, lane }));
    }
    tracks.sort_unstable();
    let index: HashMap<TransferTrack, usize> =
        tracks.iter().enumerate().map(|(i, t)| (*t, i)).collect();
    let track_of = transfers
        .iter()
        .zip(&lane_of)
        .map(|(x, &lane)| {
            index[&TransferTrack {
                from: x.from_node,
                to: x.to_node,
                lane,
            }]
        })
        .collect();
    (tracks, track_of)
}

/// Writes `trace` as Chrome trace event JSON (see the module docs for the layout).
///
/// Streams: memory beyond the trace itself is O(workers + transfers), plus
/// O(tasks) for the id map when `opts.flows` is set. Fails with
/// `InvalidInput` on a trace the reader would reject (a task that ends before
/// it starts, a task on a worker index the trace does not have).
pub fn write_chrome_json(trace: &Trace, w: impl Write, opts: &ChromeOptions) -> io::Result<()> {
    check_writable(trace)?;
    let mut w = BufWriter::with_capacity(1 << 16, w);
    let colors = CodeletColors::for_trace(trace);
    let nworkers = trace.workers.len() as u64;
    let (tracks, track_of) = transfer_tracks(&trace.transfers);
    let transfer_tid = |track: usize| TID_BASE + nworkers + track as u64;

    w.write_all(b"{\"traceEvents\":[\n")?;
    write!(
        w,
        "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{PID},\"tid\":0,\"args\":{{\"name\":\"tessera\"}}}}"
    )?;
    write!(
        w,
        ",\n{{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":{PID},\"tid\":0,\"args\":{{\"sort_index\":0}}}}"
    )?;
    // Track names and order: workers first, then transfer tracks.
    let track_names = trace
        .workers
        .iter()
        .map(|wk| wk.name.clone())
        .chain(tracks.iter().map(|t| match t.lane {
            0 => format!("transfer {}→{}", t.from, t.to),
            lane => format!("transfer {}→{} #{}", t.from, t.to, lane + 1),
        }));
    for (i, name) in track_names.enumerate() {
        let tid = TID_BASE + i as u64;
        write!(
            w,
            ",\n{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{PID},\"tid\":{tid},\"args\":{{\"name\":"
        )?;
        write_str(&mut w, &name)?;
        write!(
            w,
            "}}}},\n{{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":{PID},\"tid\":{tid},\"args\":{{\"sort_index\":{i}}}}}"
        )?;
    }

    for t in &trace.tasks {
        w.write_all(b",\n{\"ph\":\"X\",\"name\":")?;
        write_str(&mut w, t.label.as_deref().unwrap_or(&t.codelet))?;
        w.write_all(b",\"cat\":")?;
        write_str(&mut w, &t.codelet)?;
        write!(
            w,
            ",\"pid\":{PID},\"tid\":{},\"cname\":\"{}\",\"ts\":",
            TID_BASE + u64::from(t.worker),
            colors.cname(&t.codelet)
        )?;
        write_us(&mut w, t.start)?;
        w.write_all(b",\"dur\":")?;
        write_us(&mut w, t.end - t.start)?;
        write!(w, ",\"args\":{{\"id\":{},\"codelet\":", t.id)?;
        write_str(&mut w, &t.codelet)?;
        if let Some(label) = &t.label {
            w.write_all(b",\"label\":")?;
            write_str(&mut w, label)?;
        }
        write!(w, ",\"priority\":{},\"flops\":", t.priority)?;
        write_f64(&mut w, t.flops)?;
        write!(
            w,
            ",\"worker\":{},\"start_ns\":{},\"end_ns\":{}}}}}",
            t.worker, t.start, t.end
        )?;
    }

    for (x, &track) in trace.transfers.iter().zip(&track_of) {
        write!(
            w,
            ",\n{{\"ph\":\"X\",\"name\":\"handle {}\",\"cat\":\"transfer\",\"pid\":{PID},\"tid\":{},\"cname\":\"generic_work\",\"ts\":",
            x.handle,
            transfer_tid(track)
        )?;
        write_us(&mut w, x.start)?;
        w.write_all(b",\"dur\":")?;
        write_us(&mut w, x.end - x.start)?;
        write!(
            w,
            ",\"args\":{{\"handle\":{},\"from_node\":{},\"to_node\":{},\"bytes\":{},\"start_ns\":{},\"end_ns\":{}}}}}",
            x.handle, x.from_node, x.to_node, x.bytes, x.start, x.end
        )?;
    }

    if opts.flows {
        write_flows(&mut w, trace)?;
    }

    write!(
        w,
        "\n],\n\"displayTimeUnit\":\"ns\",\n\"tessera\":{{\"format\":\"{FORMAT_NAME}\",\"version\":{FORMAT_VERSION},\"tasks\":{},\"transfers\":{},\"workers\":[",
        trace.tasks.len(),
        trace.transfers.len()
    )?;
    for (i, wk) in trace.workers.iter().enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        w.write_all(b"{\"name\":")?;
        write_str(&mut w, &wk.name)?;
        write!(w, ",\"memory_node\":{}}}", wk.memory_node)?;
    }
    w.write_all(b"],\n\"edges\":[")?;
    for (i, (a, b)) in trace.edges.iter().enumerate() {
        if i > 0 {
            // A line break now and then keeps lines short for editors and error messages.
            w.write_all(if i % 16 == 0 { b",\n" } else { b"," })?;
        }
        write!(w, "[{a},{b}]")?;
    }
    w.write_all(b"]}}\n")?;
    w.flush()
}

/// Flow arrows, one per edge whose both ends are known tasks. Each end sits at
/// the middle of its task, strictly inside the slice when it has a duration, so
/// that "enclosing slice" binding is unambiguous for back-to-back tasks.
fn write_flows(w: &mut impl Write, trace: &Trace) -> io::Result<()> {
    let index: HashMap<u64, usize> = trace
        .tasks
        .iter()
        .enumerate()
        .rev() // with duplicate ids, the first task wins
        .map(|(i, t)| (t.id, i))
        .collect();
    for (k, (a, b)) in trace.edges.iter().enumerate() {
        let (Some(&a), Some(&b)) = (index.get(a), index.get(b)) else {
            continue;
        };
        for (ph, t) in [("s", &trace.tasks[a]), ("f", &trace.tasks[b])] {
            let bind = if ph == "f" { ",\"bp\":\"e\"" } else { "" };
            write!(
                w,
                ",\n{{\"ph\":\"{ph}\"{bind},\"id\":{k},\"name\":\"dep\",\"cat\":\"dep\",\"pid\":{PID},\"tid\":{},\"ts\":",
                TID_BASE + u64::from(t.worker)
            )?;
            write_us(w, t.start + (t.end - t.start) / 2)?;
            w.write_all(b"}")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    // Proves that the written JSON is what viewers expect, and that the writer
    // refuses what the reader would refuse.
    use super::super::fixtures::{sample, to_json};
    use super::*;
    use serde_json::Value;

    #[test]
    fn events_are_what_viewers_expect() {
        let trace = sample();
        let doc: Value = serde_json::from_str(&to_json(&trace, true)).unwrap();
        let events = doc["traceEvents"].as_array().unwrap();
        let mut seen = vec![0; trace.tasks.len()];
        for e in events
            .iter()
            .filter(|e| e["ph"] == "X" && e["cat"] != "transfer")
        {
            let id = e["args"]["id"].as_u64().unwrap() as usize;
            seen[id] += 1;
            let t = &trace.tasks[id];
            let (ts, dur) = (e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap());
            assert!(dur > 0.0, "start < end");
            assert!((ts - t.start as f64 / 1e3).abs() < 1e-9);
            assert_eq!(e["name"], t.label.as_deref().unwrap_or(&t.codelet));
            assert_eq!(
                e["cname"],
                CodeletColors::for_trace(&trace).cname(&t.codelet)
            );
        }
        // The codelet named "transfer" shares the category with transfers; count it apart.
        let transfer_cat_tasks = events
            .iter()
            .filter(|e| e["ph"] == "X" && e["cat"] == "transfer" && e["args"]["id"].is_u64())
            .count();
        assert_eq!(transfer_cat_tasks, 7);
        for e in events
            .iter()
            .filter(|e| e["ph"] == "X" && e["cat"] == "transfer")
        {
            if let Some(id) = e["args"]["id"].as_u64() {
                seen[id as usize] += 1;
            }
        }
        assert!(
            seen.iter().all(|&n| n == 1),
            "every task exactly once: {seen:?}"
        );
        let names: Vec<&str> = events
            .iter()
            .filter(|e| e["name"] == "thread_name")
            .map(|e| e["args"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "cpu0",
                "cpu1",
                "cuda0 stream1",
                "transfer 0→1",
                "transfer 0→1 #2",
                "transfer 1→0"
            ]
        );
        let flows = events
            .iter()
            .filter(|e| e["ph"] == "s" || e["ph"] == "f")
            .count();
        assert_eq!(flows, 2 * trace.edges.len());
        assert!(events
            .iter()
            .filter(|e| e["ph"] == "f")
            .all(|e| e["bp"] == "e"));
    }

    #[test]
    fn writer_rejects_what_reader_would() {
        let mut trace = sample();
        trace.tasks[3].end = trace.tasks[3].start - 1;
        let e = write_chrome_json(&trace, io::sink(), &ChromeOptions::default()).unwrap_err();
        assert!(
            e.to_string().contains("task 3 ends before it starts"),
            "{e}"
        );
    }
}
