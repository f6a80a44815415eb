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

use std::collections::{BinaryHeap, HashMap};
use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::Path;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::model::{Nanos, TaskRecord, Trace, TransferRecord, WorkerInfo};
use crate::util::fnv1a;
use crate::{FileError, FileErrorKind};

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

// ---------------------------------------------------------------------------
// Colours
// ---------------------------------------------------------------------------

/// Chrome's reserved colour names (catapult `color_scheme.js`) with the RGB
/// each stands for, so that other renderers (the Gantt chart) draw the same
/// colour as chrome://tracing. Only names that read well on white and differ
/// clearly from each other (several reserved names are near-duplicates).
pub const CHROME_COLORS: [(&str, [u8; 3]); 16] = [
    ("thread_state_iowait", [255, 140, 0]),
    ("rail_response", [67, 135, 253]),
    ("good", [0, 125, 0]),
    ("detailed_memory_dump", [180, 0, 180]),
    ("rail_animation", [244, 74, 63]),
    ("background_memory_dump", [0, 180, 180]),
    ("olive", [100, 100, 0]),
    ("thread_state_uninterruptible", [182, 125, 143]),
    ("light_memory_dump", [0, 0, 180]),
    ("cq_build_passed", [153, 238, 102]),
    ("terrible", [180, 0, 0]),
    ("thread_state_unknown", [199, 155, 125]),
    ("thread_state_running", [126, 200, 148]),
    ("cq_build_failed", [238, 136, 136]),
    ("bad", [180, 125, 0]),
    ("thread_state_runnable", [133, 160, 210]),
];

/// A colour (index into [`CHROME_COLORS`]) for every codelet of a trace.
///
/// Each codelet starts at the slot its name hashes to; when two codelets of
/// the same trace hash to the same slot, the later one (in name order) takes
/// the next free slot, so a legend never shows two codelets in one colour
/// unless there are more codelets than colours.
#[derive(Clone, Debug)]
pub struct CodeletColors {
    slots: HashMap<String, usize>,
}

impl CodeletColors {
    /// Assigns colours to the given codelet names (duplicates are fine).
    pub fn new<'a>(codelets: impl IntoIterator<Item = &'a str>) -> Self {
        let mut names: Vec<&str> = codelets.into_iter().collect();
        names.sort_unstable();
        names.dedup();
        let n = CHROME_COLORS.len();
        let mut taken = [false; CHROME_COLORS.len()];
        let mut slots = HashMap::with_capacity(names.len());
        for (i, name) in names.iter().enumerate() {
            let mut slot = (fnv1a(name.as_bytes()) % n as u64) as usize;
            // Probe only while free slots remain; past that, collisions are unavoidable.
            if i < n {
                while taken[slot] {
                    slot = (slot + 1) % n;
                }
                taken[slot] = true;
            }
            slots.insert((*name).to_owned(), slot);
        }
        Self { slots }
    }

    /// Colours for the codelets of `trace`.
    pub fn for_trace(trace: &Trace) -> Self {
        Self::new(trace.tasks.iter().map(|t| t.codelet.as_str()))
    }

    /// Index into [`CHROME_COLORS`]; a codelet not seen by `new` gets its hash slot.
    pub fn index(&self, codelet: &str) -> usize {
        self.slots
            .get(codelet)
            .copied()
            .unwrap_or_else(|| (fnv1a(codelet.as_bytes()) % CHROME_COLORS.len() as u64) as usize)
    }

    /// Chrome's reserved colour name (`cname`) for `codelet`.
    pub fn cname(&self, codelet: &str) -> &'static str {
        CHROME_COLORS[self.index(codelet)].0
    }

    /// RGB of the colour of `codelet`.
    pub fn rgb(&self, codelet: &str) -> [u8; 3] {
        CHROME_COLORS[self.index(codelet)].1
    }
}

// ---------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------

/// The `tessera` top-level object.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Meta {
    format: String,
    version: u64,
    tasks: u64,
    transfers: u64,
    workers: Vec<WorkerInfo>,
    edges: Vec<(u64, u64)>,
}

/// What the parser has gathered so far; filled while `serde_json` streams the file.
#[derive(Default)]
struct Builder {
    tasks: Vec<TaskRecord>,
    transfers: Vec<TransferRecord>,
    meta: Option<Meta>,
    saw_events: bool,
    /// Set when an event is rejected: (index, message). The serde error that
    /// aborts the parse only carries the position.
    event_error: Option<(usize, String)>,
    /// True while the `tessera` object is being parsed, to name it in errors.
    in_meta: bool,
}

/// Short description of a JSON value for error messages.
fn describe(v: &Value) -> String {
    let kind = match v {
        Value::Null => return "null".into(),
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => return "an array".into(),
        Value::Object(_) => return "an object".into(),
    };
    let mut text = v.to_string();
    if text.len() > 40 {
        let mut cut = 37;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("...");
    }
    format!("{kind} {text}")
}

/// Typed field access with messages that name the field (`args.start_ns`).
struct Fields<'a> {
    map: &'a Map<String, Value>,
    prefix: &'static str,
}

impl<'a> Fields<'a> {
    fn get(&self, key: &str) -> Result<&'a Value, String> {
        self.map
            .get(key)
            .ok_or_else(|| format!("missing field `{}{key}`", self.prefix))
    }

    fn wrong(&self, key: &str, want: &str, v: &Value) -> String {
        format!(
            "field `{}{key}` must be {want}, found {}",
            self.prefix,
            describe(v)
        )
    }

    fn u64(&self, key: &str) -> Result<u64, String> {
        let v = self.get(key)?;
        v.as_u64()
            .ok_or_else(|| self.wrong(key, "an unsigned integer", v))
    }

    fn u32(&self, key: &str) -> Result<u32, String> {
        let v = self.get(key)?;
        v.as_u64()
            .and_then(|x| u32::try_from(x).ok())
            .ok_or_else(|| self.wrong(key, "an unsigned 32-bit integer", v))
    }

    fn i32(&self, key: &str) -> Result<i32, String> {
        let v = self.get(key)?;
        v.as_i64()
            .and_then(|x| i32::try_from(x).ok())
            .ok_or_else(|| self.wrong(key, "a 32-bit integer", v))
    }

    fn number(&self, key: &str) -> Result<f64, String> {
        let v = self.get(key)?;
        v.as_f64().ok_or_else(|| self.wrong(key, "a number", v))
    }

    fn str(&self, key: &str) -> Result<&'a str, String> {
        let v = self.get(key)?;
        v.as_str().ok_or_else(|| self.wrong(key, "a string", v))
    }

    fn object(&self, key: &str) -> Result<Fields<'a>, String> {
        let v = self.get(key)?;
        match v {
            Value::Object(map) => Ok(Fields {
                map,
                prefix: "args.",
            }),
            _ => Err(self.wrong(key, "an object", v)),
        }
    }
}

impl Builder {
    /// Takes in one element of `traceEvents`. Only complete events (`X`)
    /// carry data; metadata and flow events are for viewers and are skipped.
    fn push_event(&mut self, event: Value) -> Result<(), String> {
        let Value::Object(map) = &event else {
            return Err(format!("expected an object, found {}", describe(&event)));
        };
        let ev = Fields { map, prefix: "" };
        if ev.str("ph")? != "X" {
            return Ok(());
        }
        ev.number("ts")?;
        ev.number("dur")?;
        let args = ev.object("args")?;
        let (start, end) = (args.u64("start_ns")?, args.u64("end_ns")?);
        if end < start {
            return Err(format!(
                "ends before it starts (args.start_ns {start}, args.end_ns {end})"
            ));
        }
        if args.map.contains_key("handle") && !args.map.contains_key("codelet") {
            self.transfers.push(TransferRecord {
                handle: args.u64("handle")?,
                from_node: args.u32("from_node")?,
                to_node: args.u32("to_node")?,
                bytes: args.u64("bytes")?,
                start,
                end,
            });
        } else {
            let label = match args.map.get("label") {
                None | Some(Value::Null) => None,
                Some(_) => Some(args.str("label")?.to_owned()),
            };
            let flops = match args.get("flops")? {
                Value::Null => f64::NAN, // written for a non-finite value
                _ => args.number("flops")?,
            };
            self.tasks.push(TaskRecord {
                id: args.u64("id")?,
                codelet: args.str("codelet")?.to_owned(),
                label,
                worker: args.u32("worker")?,
                priority: args.i32("priority")?,
                flops,
                start,
                end,
            });
        }
        Ok(())
    }

    /// Cross-checks events against the metadata once the whole file is read.
    fn finish(self) -> Result<Trace, FileError> {
        if !self.saw_events {
            return Err(FileError::format(
                "missing top-level field `traceEvents` (not a Chrome trace object)",
            ));
        }
        let Some(meta) = self.meta else {
            return Err(FileError::format(
                "missing top-level field `tessera`: not a trace written by Tessera, \
                 or cut short before its metadata",
            ));
        };
        if meta.format != FORMAT_NAME {
            return Err(FileError::format(format!(
                "`tessera.format` is {:?}, expected {FORMAT_NAME:?}",
                meta.format
            )));
        }
        if meta.version != FORMAT_VERSION {
            return Err(FileError::format(format!(
                "unsupported trace version {} (this build reads version {FORMAT_VERSION})",
                meta.version
            )));
        }
        if meta.tasks != self.tasks.len() as u64 {
            return Err(FileError::format(format!(
                "the metadata declares {} tasks but the file holds {} task events",
                meta.tasks,
                self.tasks.len()
            )));
        }
        if meta.transfers != self.transfers.len() as u64 {
            return Err(FileError::format(format!(
                "the metadata declares {} transfers but the file holds {} transfer events",
                meta.transfers,
                self.transfers.len()
            )));
        }
        let nworkers = meta.workers.len();
        if let Some(t) = self.tasks.iter().find(|t| t.worker as usize >= nworkers) {
            return Err(FileError::format(format!(
                "task {} ran on worker {} but the metadata lists {nworkers} workers",
                t.id, t.worker
            )));
        }
        Ok(Trace {
            workers: meta.workers,
            tasks: self.tasks,
            transfers: self.transfers,
            edges: meta.edges,
        })
    }
}

/// Seed for the top-level object.
struct DocSeed<'b>(&'b mut Builder);

impl<'de> DeserializeSeed<'de> for DocSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for DocSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Chrome trace object with `traceEvents` and `tessera` fields")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "traceEvents" => {
                    self.0.saw_events = true;
                    map.next_value_seed(EventsSeed(&mut *self.0))?;
                }
                "tessera" => {
                    self.0.in_meta = true;
                    self.0.meta = Some(map.next_value::<Meta>()?);
                    self.0.in_meta = false;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// Seed for the `traceEvents` array: one event at a time, so memory stays
/// O(one event) beyond the records themselves.
struct EventsSeed<'b>(&'b mut Builder);

impl<'de> DeserializeSeed<'de> for EventsSeed<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for EventsSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of trace events")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut index = 0;
        while let Some(event) = seq.next_element::<Value>()? {
            if let Err(msg) = self.0.push_event(event) {
                self.0.event_error = Some((index, msg));
                return Err(de::Error::custom("invalid trace event"));
            }
            index += 1;
        }
        Ok(())
    }
}

fn parse<'de, R: serde_json::de::Read<'de>>(
    mut de: serde_json::Deserializer<R>,
) -> Result<Trace, FileError> {
    use serde_json::error::Category;
    let mut builder = Builder::default();
    let result = DocSeed(&mut builder)
        .deserialize(&mut de)
        .and_then(|()| de.end());
    if let Err(e) = result {
        let (line, column) = (e.line(), e.column());
        let kind = match e.classify() {
            Category::Io => FileErrorKind::Io(e.into()),
            Category::Eof if line <= 1 && column == 0 => {
                FileErrorKind::Format("empty input: no JSON at all".into())
            }
            Category::Eof | Category::Syntax => FileErrorKind::json(&e),
            Category::Data => match builder.event_error.take() {
                // serde_json's position here is past the event and its separator,
                // so only the index is reliable.
                Some((index, message)) => FileErrorKind::Event { index, message },
                None if builder.in_meta => FileErrorKind::Format(format!(
                    "`tessera` metadata at line {line} column {column}: {}",
                    crate::util::json_message(&e)
                )),
                None => FileErrorKind::Format(format!(
                    "at line {line} column {column}: {}",
                    crate::util::json_message(&e)
                )),
            },
        };
        return Err(FileError::new(kind));
    }
    builder.finish()
}

/// Reads a trace written by [`write_chrome_json`]. Never panics: truncated,
/// corrupt or foreign input gives a [`FileError`] that says what and where.
pub fn read_chrome_json(r: impl Read) -> Result<Trace, FileError> {
    parse(serde_json::Deserializer::from_reader(
        BufReader::with_capacity(1 << 16, r),
    ))
}

/// Reads a trace from bytes already in memory (faster than [`read_chrome_json`]).
pub fn read_chrome_json_slice(bytes: &[u8]) -> Result<Trace, FileError> {
    parse(serde_json::Deserializer::from_slice(bytes))
}

/// Writes `trace` to the file at `path`; errors name the file.
pub fn save(trace: &Trace, path: impl AsRef<Path>, opts: &ChromeOptions) -> Result<(), FileError> {
    let path = path.as_ref();
    let with_path = |e: io::Error| FileError::from(e).with_path(path);
    let file = File::create(path).map_err(with_path)?;
    write_chrome_json(trace, &file, opts).map_err(with_path)?;
    file.sync_all().map_err(with_path)
}

/// Reads the trace file at `path`; errors name the file.
pub fn load(path: impl AsRef<Path>) -> Result<Trace, FileError> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| FileError::from(e).with_path(path))?;
    read_chrome_json_slice(&bytes).map_err(|e| e.with_path(path))
}

#[cfg(test)]
mod tests {
    // Proves that a trace survives write → read unchanged, that the written
    // JSON is what viewers expect, and that bad input gives a named error, not a panic.
    use super::*;

    fn task(id: u64, codelet: &str, worker: u32, start: Nanos, end: Nanos) -> TaskRecord {
        TaskRecord {
            id,
            codelet: codelet.into(),
            // Every other task has a label (with a character JSON must escape).
            label: matches!(id % 2, 0).then(|| format!("{codelet}({id},\"x\")")),
            worker,
            priority: id as i32 - 3,
            flops: match id % 3 {
                0 => 0.0,
                _ => 1.0e9 / 3.0 * id as f64,
            },
            start,
            end,
        }
    }

    fn sample() -> Trace {
        let workers = ["cpu0", "cpu1", "cuda0 stream1"]
            .iter()
            .enumerate()
            .map(|(i, n)| WorkerInfo {
                name: (*n).into(),
                memory_node: (i / 2) as u32,
            })
            .collect();
        let codelets = ["getrf", "trsm", "gemm", "transfer"];
        let tasks = (0..30)
            .map(|i| {
                let start = 1_000 * i + 7 + i * i; // odd ns: the fraction of a µs must survive
                task(
                    i,
                    codelets[(i % 4) as usize],
                    (i % 3) as u32,
                    start,
                    start + 999 + i,
                )
            })
            .collect();
        let transfers = vec![
            TransferRecord {
                handle: 4,
                from_node: 0,
                to_node: 1,
                bytes: 1 << 20,
                start: 5,
                end: 2_500,
            },
            // overlaps the first on the same pair: needs a second lane
            TransferRecord {
                handle: 5,
                from_node: 0,
                to_node: 1,
                bytes: 12,
                start: 1_001,
                end: 1_002,
            },
            TransferRecord {
                handle: 4,
                from_node: 1,
                to_node: 0,
                bytes: 1 << 20,
                start: 3_000,
                end: 3_000,
            },
        ];
        let edges = (0..29)
            .map(|i| (i, i + 1))
            .chain([(0, 17), (3, 29)])
            .collect();
        Trace {
            workers,
            tasks,
            transfers,
            edges,
        }
    }

    fn to_json(trace: &Trace, flows: bool) -> String {
        let mut buf = Vec::new();
        write_chrome_json(trace, &mut buf, &ChromeOptions { flows }).unwrap();
        String::from_utf8(buf).unwrap()
    }

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
    fn colours_are_distinct_and_stable() {
        let names = [
            "getrf", "trsm", "gemm", "syrk", "potrf", "spmv", "axpy", "dot",
        ];
        let c = CodeletColors::new(names);
        let mut slots: Vec<usize> = names.iter().map(|n| c.index(n)).collect();
        slots.sort_unstable();
        slots.dedup();
        assert_eq!(slots.len(), names.len());
        let again = CodeletColors::new(names.iter().rev().copied());
        assert!(names.iter().all(|n| c.index(n) == again.index(n)));
    }

    fn err(input: &str) -> String {
        let e = read_chrome_json(input.as_bytes()).unwrap_err();
        let e2 = read_chrome_json_slice(input.as_bytes()).unwrap_err();
        assert_eq!(
            std::mem::discriminant(e.kind()),
            std::mem::discriminant(e2.kind())
        );
        e2.to_string()
    }

    #[test]
    fn truncated_input_is_named() {
        let json = to_json(&sample(), true);
        // Every prefix is an error, never a panic, and names the truncation.
        // (The last byte is a newline: dropping it leaves a complete document.)
        for cut in 1..json.len() - 1 {
            let e = read_chrome_json_slice(&json.as_bytes()[..cut]).unwrap_err();
            let msg = e.to_string();
            assert!(
                matches!(e.kind(), FileErrorKind::TruncatedJson { .. }),
                "cut {cut}: {msg}"
            );
            assert!(
                msg.starts_with("truncated JSON at line"),
                "cut {cut}: {msg}"
            );
        }
        assert_eq!(err(""), "empty input: no JSON at all");
    }

    #[test]
    fn garbage_is_named() {
        assert!(
            err("hello").starts_with("invalid JSON at line 1 column 1"),
            "{}",
            err("hello")
        );
        assert!(err("{\"traceEvents\":[}").starts_with("invalid JSON at line 1"));
        let json = to_json(&sample(), false);
        assert!(err(&format!("{json} trailing")).contains("trailing characters"));
        assert!(err("[]").contains("expected a Chrome trace object"));
        assert!(err("{}").contains("missing top-level field `traceEvents`"));
        assert!(err("{\"traceEvents\":[]}").contains("missing top-level field `tessera`"));
        assert!(err("{\"traceEvents\":3}").contains("expected an array of trace events"));
        // Random bytes, including invalid UTF-8.
        const ALPHABET: &[u8] = b"{}[]\",:0123456789.e-tfnulx \n\xff";
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..200 {
            let bytes: Vec<u8> = (0..64)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    ALPHABET[(x % ALPHABET.len() as u64) as usize]
                })
                .collect();
            assert!(read_chrome_json_slice(&bytes).is_err());
        }
    }

    #[test]
    fn wrong_types_are_named() {
        let good = to_json(&sample(), false);
        let case = |from: &str, to: &str| {
            assert!(good.contains(from), "{from}");
            err(&good.replacen(from, to, 1))
        };
        // The first task event is event 14 (2 process + 2×6 track events before it).
        let msg = case("\"ts\":0.007", "\"ts\":\"0.007\"");
        assert!(
            msg.starts_with("event 14: field `ts` must be a number, found string"),
            "{msg}"
        );
        let msg = case("\"ts\":0.007,", "");
        assert_eq!(msg, "event 14: missing field `ts`");
        let msg = case("\"start_ns\":7,", "\"start_ns\":-7,");
        assert!(
            msg.contains("field `args.start_ns` must be an unsigned integer, found number -7"),
            "{msg}"
        );
        let msg = case("\"worker\":0", "\"worker\":9");
        assert!(
            msg.contains("task 0 ran on worker 9 but the metadata lists 3 workers"),
            "{msg}"
        );
        let msg = case("\"version\":1", "\"version\":2");
        assert!(msg.contains("unsupported trace version 2"), "{msg}");
        let msg = case("\"memory_node\":0", "\"memory_node\":\"zero\"");
        assert!(msg.starts_with("`tessera` metadata at line"), "{msg}");
        assert!(msg.contains("invalid type: string \"zero\""), "{msg}");
        let msg = case("{\"ph\":\"X\"", "3,{\"ph\":\"X\"");
        assert!(
            msg.starts_with("event 14: expected an object, found number 3"),
            "{msg}"
        );
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
