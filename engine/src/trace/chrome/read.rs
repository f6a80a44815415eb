//! The Chrome trace reader: streams a file written by the writer back into a [`Trace`],
//! naming the event, the field or the position of anything wrong.

use std::fmt;
use std::io::{BufReader, Read};

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::{FORMAT_NAME, FORMAT_VERSION, MIN_FORMAT_VERSION};
use crate::trace::model::{
    MessageDir, MessageRecord, RankInfo, TaskRecord, Trace, TransferRecord, WorkerInfo,
};
use crate::{FileError, FileErrorKind};

/// The `tessera` top-level object.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Meta {
    format: String,
    version: u64,
    tasks: u64,
    transfers: u64,
    /// Version 2 on.
    #[serde(default)]
    messages: u64,
    workers: Vec<WorkerInfo>,
    /// Version 2 on.
    #[serde(default)]
    ranks: Vec<RankInfo>,
    edges: Vec<(u64, u64)>,
}

/// What the parser has gathered so far; filled while `serde_json` streams the file.
#[derive(Default)]
struct Builder {
    tasks: Vec<TaskRecord>,
    transfers: Vec<TransferRecord>,
    messages: Vec<MessageRecord>,
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

/// Latest time an event may have, in ns from the trace's start: 2^53 (104
/// days), where f64 microseconds (the `ts` viewers read) stop being exact,
/// and far enough from u64's end that sums over millions of tasks stay
/// meaningful (they saturate beyond it).
pub(crate) const MAX_EVENT_NS: u64 = 1 << 53;

/// Most bytes one transfer or message may move: 2^53 (8 PiB, past any
/// machine's memory), where sums of millions of them stay exact in f64 and
/// far from u64's end (issue 42: bounded the way times are).
const MAX_EVENT_BYTES: u64 = 1 << 53;

/// Most flops a task record may declare per nanosecond of its duration
/// (plus one, so that a task rounded to 0 ns keeps its flops): the fastest
/// processor the simulator accepts (10^7 GFLOP/s, `simulate::bounds`) times
/// its largest team (4096 cores). Issue 42: `args.flops = 1e300` gave
/// 300-digit GFLOP/s in `trace summary`.
const MAX_FLOPS_PER_NS: f64 = 1e7 * 4096.0;

/// `bytes` of an event, at most [`MAX_EVENT_BYTES`].
fn bounded_bytes(bytes: u64) -> Result<u64, String> {
    if bytes > MAX_EVENT_BYTES {
        return Err(format!(
            "args.bytes {bytes} is more than any transfer moves: at most {MAX_EVENT_BYTES} (2^53, 8 PiB)"
        ));
    }
    Ok(bytes)
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
        if end > MAX_EVENT_NS {
            // Sums of such times wrap u64 ("total work 6.956 ms, efficiency
            // 100.0 %" for an end_ns of 2^64-1, issue 17).
            return Err(format!(
                "args.end_ns {end} is past any run: more than {MAX_EVENT_NS} ns (2^53, 104 days) after the trace's start"
            ));
        }
        if args.map.contains_key("dir") && !args.map.contains_key("codelet") {
            let dir = match args.str("dir")? {
                "send" => MessageDir::Send,
                "recv" => MessageDir::Recv,
                other => {
                    return Err(format!(
                        "field `args.dir` must be \"send\" or \"recv\", found {other:?}"
                    ))
                }
            };
            self.messages.push(MessageRecord {
                rank: args.u32("rank")?,
                peer: args.u32("peer")?,
                dir,
                kind: args.str("kind")?.to_owned(),
                bytes: bounded_bytes(args.u64("bytes")?)?,
                start,
                end,
                task: match args.map.get("task") {
                    None => None,
                    Some(_) => Some(args.u64("task")?),
                },
            });
        } else if args.map.contains_key("handle") && !args.map.contains_key("codelet") {
            self.transfers.push(TransferRecord {
                handle: args.u64("handle")?,
                from_node: args.u32("from_node")?,
                to_node: args.u32("to_node")?,
                bytes: bounded_bytes(args.u64("bytes")?)?,
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
            let most = (end - start + 1) as f64 * MAX_FLOPS_PER_NS;
            if flops < 0.0 || flops > most {
                return Err(format!(
                    "args.flops {flops:e} is not a task's: at least 0 and at most {most:e} in {} ns ({MAX_FLOPS_PER_NS:e} a nanosecond, past any processor)",
                    end - start
                ));
            }
            self.tasks.push(TaskRecord {
                id: args.u64("id")?,
                codelet: args.str("codelet")?.to_owned(),
                label,
                worker: args.u32("worker")?,
                priority: args.i32("priority")?,
                flops,
                start,
                end,
                team_rank: match args.map.get("team_rank") {
                    None => 0,
                    Some(_) => args.u32("team_rank")?,
                },
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
        if !(MIN_FORMAT_VERSION..=FORMAT_VERSION).contains(&meta.version) {
            return Err(FileError::format(format!(
                "unsupported trace version {} (this build reads versions {MIN_FORMAT_VERSION} to {FORMAT_VERSION})",
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
        if meta.messages != self.messages.len() as u64 {
            return Err(FileError::format(format!(
                "the metadata declares {} messages but the file holds {} message events",
                meta.messages,
                self.messages.len()
            )));
        }
        let nworkers = meta.workers.len();
        if let Some(t) = self.tasks.iter().find(|t| t.worker as usize >= nworkers) {
            return Err(FileError::format(format!(
                "task {} ran on worker {} but the metadata lists {nworkers} workers",
                t.id, t.worker
            )));
        }
        let trace = Trace {
            workers: meta.workers,
            tasks: self.tasks,
            transfers: self.transfers,
            edges: meta.edges,
            messages: self.messages,
            ranks: meta.ranks,
        };
        super::check_ranks(&trace).map_err(FileError::format)?;
        Ok(trace)
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

/// Reads a trace written by [`write_chrome_json`](super::write_chrome_json). Never panics: truncated,
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

#[cfg(test)]
mod tests {
    // Proves that bad input gives a named error, not a panic: truncation at
    // every byte, garbage, and fields of the wrong type.
    use super::super::fixtures::{sample, sample_ranks, to_json};
    use super::*;

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
        let msg = case("\"version\":2", "\"version\":3");
        assert!(msg.contains("unsupported trace version 3"), "{msg}");
        let msg = case("\"memory_node\":0", "\"memory_node\":\"zero\"");
        assert!(msg.starts_with("`tessera` metadata at line"), "{msg}");
        assert!(msg.contains("invalid type: string \"zero\""), "{msg}");
        // Issue 17: an end_ns of 2^64-1 made sums wrap.
        let msg = case("\"end_ns\":", "\"end_ns\":18446744073709551615,\"x\":");
        assert!(
            msg.contains("args.end_ns 18446744073709551615 is past any run"),
            "{msg}"
        );
        let msg = case("{\"ph\":\"X\"", "3,{\"ph\":\"X\"");
        assert!(
            msg.starts_with("event 14: expected an object, found number 3"),
            "{msg}"
        );
        // A message's task (`MessageRecord::task`).
        let ranks = to_json(&sample_ranks(), false);
        assert!(ranks.contains("\"task\":3,"));
        let msg = err(&ranks.replacen("\"task\":3,", "\"task\":\"3\",", 1));
        assert!(
            msg.contains("field `args.task` must be an unsigned integer, found string"),
            "{msg}"
        );
    }
}
