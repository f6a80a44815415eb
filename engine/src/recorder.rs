//! Per-worker trace recording: no lock and no allocation per event.
//!
//! Each worker appends events to fixed-size chunks it owns. A slot is written
//! once, then published by a Release store of the chunk's length; readers load
//! the length with Acquire and read only published slots. A new chunk (one
//! allocation per `CHUNK` events) is registered under a per-worker mutex that
//! only the reader ever contends.

use std::cell::UnsafeCell;
use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::clock::Clock;
use crate::codelet::CodeletRef;
use crate::trace::model::{MessageRecord, RankInfo, TaskRecord, Trace, WorkerInfo};
use crate::util::lock;

/// Events per chunk: small enough (~24 KiB) to come from the allocator's
/// arenas rather than a fresh mmap each time.
const CHUNK: usize = 256;

/// One executed task, as recorded.
pub(crate) struct Event {
    pub(crate) id: u64,
    /// `Codelet::id`; names are resolved at snapshot time, so recording does
    /// not touch the codelet's shared reference count.
    pub(crate) codelet: u32,
    pub(crate) label: Option<Box<str>>,
    pub(crate) priority: i32,
    pub(crate) flops: f64,
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) preds: crate::preds::PredList,
    /// Rank in the task's team (0: the leader, or not a team task).
    pub(crate) team_rank: u32,
}

struct Chunk {
    slots: Box<[UnsafeCell<MaybeUninit<Event>>]>,
    /// Slots `[0, len)` are initialised and never written again.
    len: AtomicUsize,
}

// SAFETY: a slot is written only by the owning worker before it is published
// through `len` (Release), and read only after being observed published
// (Acquire); published slots are immutable.
unsafe impl Sync for Chunk {}
// SAFETY: Events are Send (all fields are).
unsafe impl Send for Chunk {}

impl Chunk {
    fn new() -> Arc<Chunk> {
        Arc::new(Chunk {
            slots: (0..CHUNK)
                .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
                .collect(),
            len: AtomicUsize::new(0),
        })
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        let n = *self.len.get_mut();
        for slot in &mut self.slots[..n] {
            // SAFETY: slots below `len` were initialised, and we have `&mut self`.
            unsafe { slot.get_mut().assume_init_drop() };
        }
    }
}

/// One worker's chunks and the codelets its events refer to.
#[derive(Default)]
struct WorkerLog {
    chunks: Mutex<Vec<Arc<Chunk>>>,
    codelets: Mutex<HashMap<u32, CodeletRef>>,
}

/// The whole run's log: one list of chunks per worker.
pub(crate) struct TraceLog {
    pub(crate) clock: Clock,
    workers: Vec<WorkerLog>,
    /// Track name and memory node of each worker.
    names: Vec<(String, u32)>,
    /// Messages between ranks, times in ticks (`crate::dist::MessageLog`
    /// appends; a few per task at most, so a mutex is cheap enough).
    pub(crate) messages: Mutex<Vec<MessageRecord>>,
    /// This process's rank, once a distributed layer said it.
    pub(crate) rank: std::sync::OnceLock<u32>,
}

impl TraceLog {
    pub(crate) fn new(names: Vec<(String, u32)>) -> Self {
        TraceLog {
            clock: Clock::new(),
            workers: names.iter().map(|_| WorkerLog::default()).collect(),
            names,
            messages: Mutex::new(Vec::new()),
            rank: std::sync::OnceLock::new(),
        }
    }

    pub(crate) fn now(&self) -> u64 {
        self.clock.ticks()
    }

    /// Convert a timestamp from `now` to nanoseconds since the epoch.
    pub(crate) fn ticks_to_ns(&self, ticks: u64) -> u64 {
        (ticks as f64 * self.clock.nanos_per_tick()) as u64
    }

    /// A snapshot of everything published so far.
    pub(crate) fn snapshot(&self) -> Trace {
        let mut trace = Trace {
            workers: self
                .names
                .iter()
                .map(|(name, node)| WorkerInfo {
                    name: name.clone(),
                    memory_node: *node,
                })
                .collect(),
            ..Trace::default()
        };
        let scale = self.clock.nanos_per_tick();
        let ns = |ticks: u64| (ticks as f64 * scale) as u64;
        let mut codelets: HashMap<u32, String> = HashMap::new();
        for log in &self.workers {
            for (id, c) in lock(&log.codelets).iter() {
                codelets.insert(*id, c.name.clone());
            }
        }
        for (w, log) in self.workers.iter().enumerate() {
            for chunk in lock(&log.chunks).iter() {
                let n = chunk.len.load(Ordering::Acquire);
                for slot in &chunk.slots[..n] {
                    // SAFETY: published slot (see `Chunk`).
                    let e = unsafe { (*slot.get()).assume_init_ref() };
                    trace.tasks.push(TaskRecord {
                        id: e.id,
                        codelet: codelets.get(&e.codelet).cloned().unwrap_or_default(),
                        label: e.label.as_deref().map(str::to_string),
                        worker: w as u32,
                        priority: e.priority,
                        flops: e.flops,
                        start: ns(e.start),
                        end: ns(e.end),
                        team_rank: e.team_rank,
                    });
                    trace
                        .edges
                        .extend(e.preds.as_slice().iter().map(|&p| (p, e.id)));
                }
            }
        }
        trace.tasks.sort_by_key(|t| t.start);
        trace.messages = lock(&self.messages)
            .iter()
            .map(|m| MessageRecord {
                start: ns(m.start),
                end: ns(m.end),
                ..m.clone()
            })
            .collect();
        if let Some(&rank) = self.rank.get() {
            trace.ranks.push(RankInfo {
                rank,
                workers: trace.workers.len() as u32,
                // Filled in by the runtime, which holds the transfers.
                transfers: 0,
                epoch_unix_ns: self.clock.epoch_unix_ns(),
            });
        }
        trace
    }
}

/// A worker's writing end.
pub(crate) struct Recorder {
    log: Arc<TraceLog>,
    worker: usize,
    current: Option<Arc<Chunk>>,
    /// Codelet ids already registered in this worker's log.
    known: Vec<bool>,
}

impl Recorder {
    pub(crate) fn new(log: Arc<TraceLog>, worker: usize) -> Self {
        Recorder {
            log,
            worker,
            current: None,
            known: Vec::new(),
        }
    }

    pub(crate) fn now(&self) -> u64 {
        self.log.now()
    }

    pub(crate) fn record(&mut self, event: Event, codelet: &CodeletRef) {
        let id = codelet.id as usize;
        if self.known.get(id) != Some(&true) {
            if self.known.len() <= id {
                self.known.resize(id + 1, false);
            }
            self.known[id] = true;
            lock(&self.log.workers[self.worker].codelets).insert(codelet.id, Arc::clone(codelet));
        }
        let full = match &self.current {
            Some(c) => c.len.load(Ordering::Relaxed) == CHUNK,
            None => true,
        };
        if full {
            let c = Chunk::new();
            lock(&self.log.workers[self.worker].chunks).push(Arc::clone(&c));
            self.current = Some(c);
        }
        let chunk = self.current.as_ref().expect("set above");
        // Relaxed: only this thread writes `len`.
        let i = chunk.len.load(Ordering::Relaxed);
        // SAFETY: slot `i` is unpublished, so no reader touches it, and only
        // this worker writes to its chunks.
        unsafe { (*chunk.slots[i].get()).write(event) };
        chunk.len.store(i + 1, Ordering::Release);
    }
}
