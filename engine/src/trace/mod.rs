//! Task timelines: the trace model, Chrome/Perfetto export and import, codelet colours, run
//! statistics, and merging the traces of the ranks of a distributed run.
//!
//! A run's [`Trace`] is written with [`save`] (Chrome trace event JSON, opens in
//! Perfetto UI and chrome://tracing), read back with [`load`], and summarised
//! with [`stats`](fn@stats), whose [`TraceStats`] prints as a text report.
//! In a merged trace of several ranks, [`remote_edges`] are the dependencies
//! from a task of one rank to a task of another (drawn as arrows by the
//! writer and the Gantt chart, timed by the summary).

pub mod chrome;
pub mod colors;
pub mod merge;
pub mod model;
pub mod remote;
pub mod stats;

pub use chrome::{
    load, read_chrome_json, read_chrome_json_slice, save, write_chrome_json, ChromeOptions,
};
pub use colors::CodeletColors;
pub use merge::{check_same_run, merge};
pub use model::{
    remote_task_id, MessageDir, MessageRecord, Nanos, RankInfo, TaskRecord, Trace, TransferRecord,
    WorkerInfo, RANK_ID_SHIFT, REMOTE_TASK,
};
pub use remote::{edge_latency, edge_split, remote_edges, EdgeLatency, EdgeSplit, RemoteEdge};
pub use stats::{
    stats, CodeletStats, LatencySplit, RankStats, ReleaseLatency, TraceStats, TransferStats,
    WorkerStats,
};
