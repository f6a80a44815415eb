//! The Chrome trace writer: a [`Trace`] as trace event JSON, one event per line.

use std::collections::{BinaryHeap, HashMap};
use std::io::{self, BufWriter, Write};

use super::{ChromeOptions, FORMAT_NAME, FORMAT_VERSION, PID, TID_BASE};
use crate::trace::colors::CodeletColors;
use crate::trace::model::{MessageDir, MessageRecord, Nanos, TaskRecord, Trace, TransferRecord};

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
    for (i, m) in trace.messages.iter().enumerate() {
        if m.end < m.start {
            return Err(invalid_input(format!(
                "message {i} (rank {} {} rank {}) ends before it starts (start {} ns, end {} ns)",
                m.rank,
                m.dir.name(),
                m.peer,
                m.start,
                m.end
            )));
        }
    }
    super::check_ranks(trace).map_err(invalid_input)
}

/// One track of transfers or messages: a group (rank, then a `(from, to)`
/// node pair for transfers, a `(direction, peer)` for messages), and a lane
/// number so that overlapping events of one group go to separate tracks
/// (viewers drop or mis-nest complete events that overlap on one track).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Track<G> {
    group: G,
    lane: u32,
}

/// Assigns each event (its group and `(start, end)`) to a track; returns the
/// tracks (sorted) and, per event, the index of its track. O(M log M).
fn lanes<G: Copy + Ord + std::hash::Hash>(
    events: impl ExactSizeIterator<Item = (G, Nanos, Nanos)>,
) -> (Vec<Track<G>>, Vec<usize>) {
    let events: Vec<(G, Nanos, Nanos)> = events.collect();
    // Per group, events by start time; a min-heap of (lane end, lane) reuses
    // the lane that frees up first (interval partitioning, optimal lane count).
    let mut by_group: HashMap<G, Vec<usize>> = HashMap::new();
    for (i, e) in events.iter().enumerate() {
        by_group.entry(e.0).or_default().push(i);
    }
    let mut lane_of = vec![0u32; events.len()];
    let mut tracks = Vec::new();
    for (&group, idx) in by_group.iter_mut() {
        idx.sort_unstable_by_key(|&i| (events[i].1, events[i].2));
        let mut heap: BinaryHeap<std::cmp::Reverse<(Nanos, u32)>> = BinaryHeap::new();
        let mut n = 0u32;
        for &i in idx.iter() {
            let (_, start, end) = events[i];
            let lane = match heap.peek() {
                Some(&std::cmp::Reverse((free, lane))) if free <= start => {
                    heap.pop();
                    lane
                }
                _ => {
                    n += 1;
                    n - 1
                }
            };
            heap.push(std::cmp::Reverse((end, lane)));
            lane_of[i] = lane;
        }
        tracks.extend((0..n).map(|lane| Track { group, lane }));
    }
    tracks.sort_unstable();
    let index: HashMap<Track<G>, usize> = tracks.iter().enumerate().map(|(i, t)| (*t, i)).collect();
    let track_of = events
        .iter()
        .zip(&lane_of)
        .map(|(e, &lane)| index[&Track { group: e.0, lane }])
        .collect();
    (tracks, track_of)
}

/// Tracks of one kind, and each record's track.
type Lanes<G> = (Vec<Track<G>>, Vec<usize>);

/// Transfer tracks: group (rank, from node, to node).
fn transfer_tracks(transfers: &[TransferRecord], ranks: &[u32]) -> Lanes<(u32, u32, u32)> {
    lanes(
        transfers
            .iter()
            .zip(ranks)
            .map(|(x, &r)| ((r, x.from_node, x.to_node), x.start, x.end)),
    )
}

/// Message tracks: group (rank, direction, peer).
fn message_tracks(messages: &[MessageRecord]) -> Lanes<(u32, MessageDir, u32)> {
    lanes(
        messages
            .iter()
            .map(|m| ((m.rank, m.dir, m.peer), m.start, m.end)),
    )
}

fn lane_suffix(lane: u32) -> String {
    match lane {
        0 => String::new(),
        lane => format!(" #{}", lane + 1),
    }
}

/// Where each rank's events go: its process id and the thread id of each of
/// its tracks.
struct Layout {
    /// Rank → pid (rank + 1: a one-process trace keeps pid 1).
    pids: Vec<(u32, u64)>,
    /// Per worker: (pid, tid).
    workers: Vec<(u64, u64)>,
    /// Per transfer track: (pid, tid).
    transfers: Vec<(u64, u64)>,
    /// Per message track: (pid, tid).
    messages: Vec<(u64, u64)>,
    /// Track metadata in order: (pid, tid, sort index, name).
    names: Vec<(u64, u64, usize, String)>,
}

fn pid_of(rank: u32) -> u64 {
    PID + u64::from(rank)
}

/// The thread id of a process's `i`-th track: from `TID_BASE`, and above the
/// pid, since some viewers treat tid == pid as the process's main thread.
fn tid_of(pid: u64, i: usize) -> u64 {
    TID_BASE.max(pid + 1) + i as u64
}

fn layout(
    trace: &Trace,
    ttracks: &[Track<(u32, u32, u32)>],
    mtracks: &[Track<(u32, MessageDir, u32)>],
) -> Layout {
    let wranks = trace.worker_ranks();
    let mut pids: Vec<(u32, u64)> = if trace.ranks.is_empty() {
        vec![(0, PID)]
    } else {
        trace
            .ranks
            .iter()
            .map(|r| (r.rank, pid_of(r.rank)))
            .collect()
    };
    // Ranks seen only in messages (or workers past the ranks' counts).
    for r in wranks
        .iter()
        .copied()
        .chain(trace.messages.iter().map(|m| m.rank))
    {
        if !pids.iter().any(|&(k, _)| k == r) {
            pids.push((r, pid_of(r)));
        }
    }
    let mut next: HashMap<u64, usize> = HashMap::new();
    let mut names = Vec::new();
    let mut place = |pid: u64, name: String| {
        let i = next.entry(pid).or_insert(0);
        let tid = tid_of(pid, *i);
        names.push((pid, tid, *i, name));
        *i += 1;
        (pid, tid)
    };
    let workers = trace
        .workers
        .iter()
        .zip(&wranks)
        .map(|(w, &r)| place(pid_of(r), w.name.clone()))
        .collect();
    let transfers = ttracks
        .iter()
        .map(|t| {
            let (r, from, to) = t.group;
            place(
                pid_of(r),
                format!("transfer {from}→{to}{}", lane_suffix(t.lane)),
            )
        })
        .collect();
    let messages = mtracks
        .iter()
        .map(|t| {
            let (r, dir, peer) = t.group;
            let arrow = match dir {
                MessageDir::Send => "→",
                MessageDir::Recv => "←",
            };
            place(
                pid_of(r),
                format!("{} {arrow} rank {peer}{}", dir.name(), lane_suffix(t.lane)),
            )
        })
        .collect();
    Layout {
        pids,
        workers,
        transfers,
        messages,
        names,
    }
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
    let (ttracks, transfer_track) = transfer_tracks(&trace.transfers, &trace.transfer_ranks());
    let (mtracks, message_track) = message_tracks(&trace.messages);
    let lay = layout(trace, &ttracks, &mtracks);

    w.write_all(b"{\"traceEvents\":[\n")?;
    // Processes: one per rank (a one-process trace: "tessera", pid 1).
    for (i, &(rank, pid)) in lay.pids.iter().enumerate() {
        let name = if trace.is_distributed() {
            format!("tessera rank {rank}")
        } else {
            "tessera".to_owned()
        };
        if i > 0 {
            w.write_all(b",\n")?;
        }
        write!(
            w,
            "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{pid},\"tid\":0,\"args\":{{\"name\":"
        )?;
        write_str(&mut w, &name)?;
        write!(
            w,
            "}}}},\n{{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":{pid},\"tid\":0,\"args\":{{\"sort_index\":{rank}}}}}"
        )?;
    }
    // Track names and order within each process: workers first, then
    // transfer tracks, then message tracks.
    for (pid, tid, i, name) in &lay.names {
        write!(
            w,
            ",\n{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"name\":"
        )?;
        write_str(&mut w, name)?;
        write!(
            w,
            "}}}},\n{{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"sort_index\":{i}}}}}"
        )?;
    }

    for t in &trace.tasks {
        let (pid, tid) = lay.workers[t.worker as usize];
        w.write_all(b",\n{\"ph\":\"X\",\"name\":")?;
        write_str(&mut w, t.label.as_deref().unwrap_or(&t.codelet))?;
        w.write_all(b",\"cat\":")?;
        write_str(&mut w, &t.codelet)?;
        write!(
            w,
            ",\"pid\":{pid},\"tid\":{tid},\"cname\":\"{}\",\"ts\":",
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
        if t.team_rank > 0 {
            write!(w, ",\"team_rank\":{}", t.team_rank)?;
        }
        write!(
            w,
            ",\"worker\":{},\"start_ns\":{},\"end_ns\":{}}}}}",
            t.worker, t.start, t.end
        )?;
    }

    for (x, &track) in trace.transfers.iter().zip(&transfer_track) {
        let (pid, tid) = lay.transfers[track];
        write!(
            w,
            ",\n{{\"ph\":\"X\",\"name\":\"handle {}\",\"cat\":\"transfer\",\"pid\":{pid},\"tid\":{tid},\"cname\":\"generic_work\",\"ts\":",
            x.handle,
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

    for (m, &track) in trace.messages.iter().zip(&message_track) {
        let (pid, tid) = lay.messages[track];
        w.write_all(b",\n{\"ph\":\"X\",\"name\":")?;
        write_str(
            &mut w,
            &format!("{} {}", m.kind, crate::fmt::bytes(m.bytes)),
        )?;
        write!(
            w,
            ",\"cat\":\"message\",\"pid\":{pid},\"tid\":{tid},\"cname\":\"{}\",\"ts\":",
            match m.dir {
                MessageDir::Send => "rail_response",
                MessageDir::Recv => "rail_load",
            }
        )?;
        write_us(&mut w, m.start)?;
        w.write_all(b",\"dur\":")?;
        write_us(&mut w, m.end - m.start)?;
        write!(
            w,
            ",\"args\":{{\"rank\":{},\"peer\":{},\"dir\":\"{}\",\"kind\":",
            m.rank,
            m.peer,
            m.dir.name()
        )?;
        write_str(&mut w, &m.kind)?;
        if let Some(task) = m.task {
            write!(w, ",\"task\":{task}")?;
        }
        write!(
            w,
            ",\"bytes\":{},\"start_ns\":{},\"end_ns\":{}}}}}",
            m.bytes, m.start, m.end
        )?;
    }

    // Remote edges always (a few per message, and what a merged trace is
    // opened to see); the other edges only when asked.
    let remote = crate::trace::remote::remote_edges(trace);
    for (k, e) in remote.iter().enumerate() {
        let (from, to) = (&trace.tasks[e.from], &trace.tasks[e.to]);
        // Ids past the dependency arrows' (0..edges), so that none is shared.
        let id = trace.edges.len() + k;
        write_flow(&mut w, id, "remote edge", "remote", from, to, &lay)?;
    }
    if opts.flows {
        write_flows(&mut w, trace, &lay)?;
    }

    write!(
        w,
        "\n],\n\"displayTimeUnit\":\"ns\",\n\"tessera\":{{\"format\":\"{FORMAT_NAME}\",\"version\":{FORMAT_VERSION},\"tasks\":{},\"transfers\":{},\"messages\":{},\"workers\":[",
        trace.tasks.len(),
        trace.transfers.len(),
        trace.messages.len()
    )?;
    for (i, wk) in trace.workers.iter().enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        w.write_all(b"{\"name\":")?;
        write_str(&mut w, &wk.name)?;
        write!(w, ",\"memory_node\":{}}}", wk.memory_node)?;
    }
    w.write_all(b"],\n\"ranks\":[")?;
    for (i, r) in trace.ranks.iter().enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        write!(
            w,
            "{{\"rank\":{},\"workers\":{},\"transfers\":{},\"epoch_unix_ns\":{}",
            r.rank, r.workers, r.transfers, r.epoch_unix_ns
        )?;
        if !r.run_id.is_empty() {
            w.write_all(b",\"run_id\":")?;
            write_str(&mut w, &r.run_id)?;
        }
        w.write_all(b"}")?;
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

/// One flow arrow from `from` to `to`: `s` on the first slice, `f` bound to
/// the enclosing slice (`bp: e`) on the second, same id and category. Each
/// end sits at the middle of its task, strictly inside the slice when it has
/// a duration, so that "enclosing slice" binding is unambiguous for
/// back-to-back tasks.
fn write_flow(
    w: &mut impl Write,
    id: usize,
    name: &str,
    cat: &str,
    from: &TaskRecord,
    to: &TaskRecord,
    lay: &Layout,
) -> io::Result<()> {
    for (ph, t) in [("s", from), ("f", to)] {
        let bind = if ph == "f" { ",\"bp\":\"e\"" } else { "" };
        let (pid, tid) = lay.workers[t.worker as usize];
        write!(
            w,
            ",\n{{\"ph\":\"{ph}\"{bind},\"id\":{id},\"name\":\"{name}\",\"cat\":\"{cat}\",\"pid\":{pid},\"tid\":{tid},\"ts\":"
        )?;
        write_us(w, t.start + (t.end - t.start) / 2)?;
        w.write_all(b"}")?;
    }
    Ok(())
}

/// Dependency arrows, one per edge whose both ends are known tasks of one
/// rank (those across ranks are the remote edges, drawn always).
fn write_flows(w: &mut impl Write, trace: &Trace, lay: &Layout) -> io::Result<()> {
    let index: HashMap<u64, usize> = trace
        .tasks
        .iter()
        .enumerate()
        .rev() // with duplicate ids, the first task wins
        .map(|(i, t)| (t.id, i))
        .collect();
    let wranks = trace.worker_ranks();
    for (k, (a, b)) in trace.edges.iter().enumerate() {
        let (Some(&a), Some(&b)) = (index.get(a), index.get(b)) else {
            continue;
        };
        let (a, b) = (&trace.tasks[a], &trace.tasks[b]);
        if wranks[a.worker as usize] != wranks[b.worker as usize] {
            continue;
        }
        write_flow(w, k, "dep", "dep", a, b, lay)?;
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
