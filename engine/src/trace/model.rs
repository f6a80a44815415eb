//! The trace data model: what a recorded run is, independent of how it is stored.
//!
//! The recorder (per-worker buffers in the worker loop) produces a [`Trace`];
//! exporters write it as Chrome/Perfetto JSON and the parser reads it back into
//! the same type, so statistics and Gantt charts work on live runs and on files.

/// All times are nanoseconds since the runtime's epoch (one monotonic clock,
/// `std::time::Instant`, shared by every worker).
pub type Nanos = u64;

/// A recorded run.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Trace {
    /// One entry per worker (execution track), indexed by [`TaskRecord::worker`].
    pub workers: Vec<WorkerInfo>,
    /// Every task that ran, in no particular order.
    pub tasks: Vec<TaskRecord>,
    /// Data transfers between memory nodes.
    pub transfers: Vec<TransferRecord>,
    /// Dependency edges `(predecessor task id, successor task id)`, when recorded.
    pub edges: Vec<(u64, u64)>,
    /// Messages between ranks (distributed runs), in no particular order.
    pub messages: Vec<MessageRecord>,
    /// The ranks this trace covers, in order: empty for a trace of one
    /// process that did not say its rank (rank 0). The workers and the
    /// transfers of rank `ranks[0]` come first in [`Trace::workers`] and
    /// [`Trace::transfers`], then those of `ranks[1]`, and so on.
    pub ranks: Vec<RankInfo>,
}

/// One rank (process) of a distributed run, in a trace.
///
/// In a merged trace (`tessera trace merge`) the task ids of rank `r` are
/// `r · 2⁴⁰ + ` its own ids ([`RANK_ID_SHIFT`]), so that ids and dependency
/// edges stay distinct across ranks, and every time is on the clock of the
/// rank with the earliest epoch.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RankInfo {
    /// The rank.
    pub rank: u32,
    /// How many of [`Trace::workers`] are this rank's (the next ones in order).
    pub workers: u32,
    /// How many of [`Trace::transfers`] are this rank's (the next ones in order).
    pub transfers: u32,
    /// Wall-clock time of this rank's trace epoch (time 0), in nanoseconds
    /// since the Unix epoch; 0 when unknown. Merging aligns ranks on it.
    pub epoch_unix_ns: u64,
    /// The run this rank belonged to: the same on every rank of one run,
    /// different between runs (empty when unknown, as in older traces).
    /// `tessera trace merge` refuses traces of different runs.
    #[serde(default)]
    pub run_id: String,
}

impl RankInfo {
    /// Rank `rank` with `workers` workers and `transfers` transfers, of no
    /// known epoch or run (a trace written without them, or a test's).
    pub fn unstamped(rank: u32, workers: u32, transfers: u32) -> RankInfo {
        RankInfo {
            rank,
            workers,
            transfers,
            epoch_unix_ns: 0,
            run_id: String::new(),
        }
    }
}

/// Task ids of rank `r` in a merged trace are `r << RANK_ID_SHIFT | id`.
pub const RANK_ID_SHIFT: u32 = 40;

/// Marks a dependency edge's end that is a task of another rank (a remote
/// edge's sender, recorded by the rank that received its data):
/// `REMOTE_TASK | r << RANK_ID_SHIFT | id` names task `id` of rank `r`.
/// `tessera trace merge` turns it into that task's merged id; a single
/// rank's summary skips such edges (the task is not in its trace).
pub const REMOTE_TASK: u64 = 1 << 63;

/// The edge end naming task `id` of rank `rank` (see [`REMOTE_TASK`]).
pub fn remote_task_id(rank: usize, id: u64) -> u64 {
    REMOTE_TASK | (rank as u64) << RANK_ID_SHIFT | id
}

/// Which way a message went, seen from the rank that recorded it.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum MessageDir {
    /// Sent to `peer`.
    Send,
    /// Received from `peer`.
    Recv,
}

impl MessageDir {
    /// `"send"` or `"recv"`.
    pub fn name(self) -> &'static str {
        match self {
            MessageDir::Send => "send",
            MessageDir::Recv => "recv",
        }
    }
}

/// One message between ranks, as the rank that sent or received it saw it.
///
/// A send lasts from when the rank began packing it to when it was handed to
/// the transport. A receive lasts from when the rank began waiting for it (a
/// posted receive, a collective) to its arrival; one nobody waited for yet
/// (a remote edge, a message that came before its receive) starts at its
/// arrival. Time spent waiting on the network is what receives cover while
/// no worker of the rank runs a task ([`crate::trace::TraceStats::ranks`]).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MessageRecord {
    /// The rank that recorded it.
    pub rank: u32,
    /// The other rank.
    pub peer: u32,
    /// Sent or received.
    pub dir: MessageDir,
    /// What it carried: the channel's name, e.g. `edge`, `data`, `halo`, `collective`.
    pub kind: String,
    /// Bytes of the message.
    pub bytes: u64,
    /// See the type's doc.
    pub start: Nanos,
    /// See the type's doc.
    pub end: Nanos,
    /// A symbolic remote edge's message (`dist::symbolic`): the task whose
    /// end sent it. The sender records its own id; the receiver
    /// [`remote_task_id`] of it (the sending rank's task); a merged trace
    /// holds that task's merged id on both. `None` for other messages.
    /// With it, a remote edge's latency splits into its sender's, the
    /// network's and its receiver's parts (`remote::edge_split`).
    #[serde(default)]
    pub task: Option<u64>,
}

/// One execution track.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct WorkerInfo {
    /// Track name shown in viewers, e.g. `cpu0`, `emu0`, `cuda0 stream1`.
    pub name: String,
    /// Memory node the worker computes on.
    pub memory_node: u32,
}

/// One executed task.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TaskRecord {
    /// Unique task id within the run (submission order).
    pub id: u64,
    /// Codelet name, e.g. `gemm`.
    pub codelet: String,
    /// Optional per-task label, e.g. `gemm(3,4,5)`.
    pub label: Option<String>,
    /// Index into [`Trace::workers`].
    pub worker: u32,
    /// Task priority (larger runs first under `prio`).
    pub priority: i32,
    /// Floating-point operations the codelet declared for this task (0 if unknown).
    pub flops: f64,
    /// Start of the body.
    pub start: Nanos,
    /// End of the body.
    pub end: Nanos,
    /// Rank in the task's team (see `tessera_engine::team`): 0 for the
    /// leader (whose record carries the flops) and for tasks run by one
    /// worker; members' records share the leader's id and times.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub team_rank: u32,
}

/// One data transfer.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TransferRecord {
    /// Registered data handle id.
    pub handle: u64,
    /// Source memory node.
    pub from_node: u32,
    /// Destination memory node.
    pub to_node: u32,
    /// Bytes moved.
    pub bytes: u64,
    /// Start of the copy.
    pub start: Nanos,
    /// End of the copy.
    pub end: Nanos,
}

impl Trace {
    /// Number of execution tracks: the listed workers, or more if a task
    /// names a worker index past the list.
    pub fn worker_count(&self) -> usize {
        self.tasks
            .iter()
            .map(|t| t.worker as usize + 1)
            .max()
            .unwrap_or(0)
            .max(self.workers.len())
    }

    /// The rank of each worker (`0` for all when [`Trace::ranks`] is empty;
    /// workers past the ranks' counts get the last rank).
    pub fn worker_ranks(&self) -> Vec<u32> {
        let n = self.worker_count();
        let mut out = Vec::with_capacity(n);
        for r in &self.ranks {
            out.extend(std::iter::repeat_n(r.rank, r.workers as usize));
        }
        let last = self.ranks.last().map_or(0, |r| r.rank);
        out.resize(n, last);
        out.truncate(n);
        out
    }

    /// The rank of each transfer (as [`Trace::worker_ranks`]).
    pub fn transfer_ranks(&self) -> Vec<u32> {
        let n = self.transfers.len();
        let mut out = Vec::with_capacity(n);
        for r in &self.ranks {
            out.extend(std::iter::repeat_n(r.rank, r.transfers as usize));
        }
        let last = self.ranks.last().map_or(0, |r| r.rank);
        out.resize(n, last);
        out.truncate(n);
        out
    }

    /// Each worker's name as reports show it: in a trace of several ranks,
    /// after its rank (`r1 cpu0`; a name that already starts so is kept);
    /// `#i` for a worker index that tasks use but the trace does not list.
    pub fn worker_labels(&self) -> Vec<String> {
        let wranks = (self.ranks.len() > 1).then(|| self.worker_ranks());
        (0..self.worker_count())
            .map(|i| {
                let name = self
                    .workers
                    .get(i)
                    .map_or_else(|| format!("#{i}"), |w| w.name.clone());
                match &wranks {
                    Some(r) if !name.starts_with(&format!("r{} ", r[i])) => {
                        format!("r{} {name}", r[i])
                    }
                    _ => name,
                }
            })
            .collect()
    }

    /// Whether the trace comes from a distributed run (it names ranks or
    /// records messages).
    pub fn is_distributed(&self) -> bool {
        !self.ranks.is_empty() || !self.messages.is_empty()
    }
}

fn is_zero(x: &u32) -> bool {
    *x == 0
}
