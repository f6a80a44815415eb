//! Task timelines: the trace model, Chrome/Perfetto export and import, codelet colours, run
//! statistics.
//!
//! A run's [`Trace`] is written with [`save`] (Chrome trace event JSON, opens in
//! Perfetto UI and chrome://tracing), read back with [`load`], and summarised
//! with [`stats`](fn@stats), whose [`TraceStats`] prints as a text report.

pub mod chrome;
pub mod colors;
pub mod model;
pub mod stats;

pub use chrome::{
    load, read_chrome_json, read_chrome_json_slice, save, write_chrome_json, ChromeOptions,
};
pub use colors::CodeletColors;
pub use model::{Nanos, TaskRecord, Trace, TransferRecord, WorkerInfo};
pub use stats::{stats, CodeletStats, TraceStats, TransferStats, WorkerStats};
