//! Recording a rank's messages into its runtime's trace, on the trace clock:
//! the network ([`Net`](super::Net)) records sends, the layers that wait for
//! messages record receives (they know since when they waited).

use std::sync::Arc;

use crate::recorder::TraceLog;
use crate::runtime::Runtime;
use crate::trace::model::{MessageDir, MessageRecord};
use crate::util::lock;

/// A time on a runtime's trace clock (see [`MessageLog::now`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Tick(pub(crate) u64);

/// Where one rank records its messages: a runtime's trace
/// ([`Runtime::message_log`](crate::Runtime::message_log)). Cheap to clone.
#[derive(Clone)]
pub struct MessageLog {
    log: Arc<TraceLog>,
    rank: u32,
}

impl MessageLog {
    pub(crate) fn new(log: Arc<TraceLog>, rank: u32) -> MessageLog {
        MessageLog { log, rank }
    }

    /// Now, on the trace clock.
    pub fn now(&self) -> Tick {
        Tick(self.log.now())
    }

    /// A message of `bytes` to `peer`, packed since `start`, handed to the
    /// transport now; `task`: the task whose end sent it, if it is a
    /// remote edge's (`MessageRecord::task`).
    pub fn send(&self, peer: usize, kind: &str, bytes: usize, start: Tick, task: Option<u64>) {
        self.push(MessageDir::Send, peer, kind, bytes, Some(start), task);
    }

    /// A message of `bytes` from `peer`, here now; `waited_since`: when this
    /// rank began waiting for it (`None`: nobody was waiting yet); `task`:
    /// the sending rank's task it comes from, if known
    /// (`MessageRecord::task`).
    pub fn recv(
        &self,
        peer: usize,
        kind: &str,
        bytes: usize,
        waited_since: Option<Tick>,
        task: Option<u64>,
    ) {
        self.push(MessageDir::Recv, peer, kind, bytes, waited_since, task);
    }

    fn push(
        &self,
        dir: MessageDir,
        peer: usize,
        kind: &str,
        bytes: usize,
        start: Option<Tick>,
        task: Option<u64>,
    ) {
        let end = self.log.now();
        let start = start.map_or(end, |t| t.0.min(end));
        lock(&self.log.messages).push(MessageRecord {
            rank: self.rank,
            peer: peer as u32,
            dir,
            kind: kind.to_owned(),
            bytes: bytes as u64,
            start,
            end,
            task,
        });
    }
}

impl Runtime {
    /// Where the distributed layer records this rank's messages, on this
    /// runtime's trace clock (`None` unless `Config::trace`). Also marks the
    /// trace as rank `rank`'s (the first rank given stays).
    ///
    /// (Written here, beside [`MessageLog`], so that the runtime does not
    /// depend on the distributed layer.)
    pub fn message_log(&self, rank: usize) -> Option<MessageLog> {
        let log = self.trace_log()?;
        let _ = log.rank.set(rank as u32);
        Some(MessageLog::new(Arc::clone(log), rank as u32))
    }
}
