//! Task timelines: the trace model, Chrome/Perfetto export and import, run statistics.

pub mod model;
