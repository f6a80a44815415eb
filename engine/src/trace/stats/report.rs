//! The text report of [`TraceStats`]: a summary, then one table per kind of
//! figure (workers, codelets, transfers, ranks, local and remote edges) and the
//! warnings; a table is left out when the trace has nothing for it.

use std::fmt;

use super::TraceStats;
use crate::fmt::duration_ns;

impl fmt::Display for TraceStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nworkers = self.workers.len();
        writeln!(
            f,
            "Run: {} tasks on {} workers, {} transfers",
            self.tasks, nworkers, self.transfers.count
        )?;
        let critical = match (self.critical_path, self.cyclic_tasks) {
            (Some(cp), _) => format!(
                "{} over {} tasks",
                duration_ns(cp as f64),
                self.critical_path_tasks.len()
            ),
            (None, 0) => "unknown: no dependency edges recorded".to_owned(),
            (None, _) => "not computed: the dependency edges form a cycle".to_owned(),
        };
        let efficiency = match self.efficiency {
            Some(e) => format!(
                "{:.1} %  (max(critical path, area bound) / makespan)",
                100.0 * e
            ),
            None => "n/a (zero makespan)".to_owned(),
        };
        let summary = [
            ("makespan", duration_ns(self.makespan as f64)),
            ("total work", duration_ns(self.total_work as f64)),
            ("critical path", critical),
            (
                "area bound",
                format!(
                    "{}  (total work / {nworkers} workers)",
                    duration_ns(self.area_bound)
                ),
            ),
            ("efficiency", efficiency),
        ];
        for (k, v) in summary {
            writeln!(f, "  {k:<14} {v}")?;
        }

        if !self.workers.is_empty() {
            writeln!(f)?;
            let mut rows = vec![vec![
                "worker".to_owned(),
                "tasks".into(),
                "busy".into(),
                "busy %".into(),
                "idle %".into(),
            ]];
            rows.extend(self.workers.iter().map(|w| {
                vec![
                    w.name.clone(),
                    w.tasks.to_string(),
                    duration_ns(w.busy as f64),
                    format!("{:.1}", w.busy_pct),
                    format!("{:.1}", w.idle_pct),
                ]
            }));
            f.write_str(&crate::fmt::table(&rows, 1, "  "))?;
        }

        if !self.codelets.is_empty() {
            writeln!(f)?;
            let mut rows = vec![vec![
                "codelet".to_owned(),
                "count".into(),
                "total".into(),
                "mean".into(),
                "GFLOP/s".into(),
            ]];
            rows.extend(self.codelets.iter().map(|c| {
                vec![
                    c.codelet.clone(),
                    c.count.to_string(),
                    duration_ns(c.total as f64),
                    duration_ns(c.mean),
                    c.gflops
                        .map_or_else(|| "-".to_owned(), |g| format!("{g:.2}")),
                ]
            }));
            f.write_str(&crate::fmt::table(&rows, 1, "  "))?;
        }

        if self.transfers.count > 0 {
            let t = &self.transfers;
            writeln!(f)?;
            let rows = [
                vec![
                    "transfers".to_owned(),
                    "count".into(),
                    "bytes".into(),
                    "time".into(),
                    "GB/s".into(),
                ],
                vec![
                    String::new(),
                    t.count.to_string(),
                    crate::fmt::bytes(t.bytes),
                    duration_ns(t.time as f64),
                    t.gbytes_per_s
                        .map_or_else(|| "-".to_owned(), |g| format!("{g:.2}")),
                ],
            ];
            f.write_str(&crate::fmt::table(&rows, 1, "  "))?;
        }

        if !self.ranks.is_empty() {
            writeln!(f)?;
            let mut rows = vec![vec![
                "rank".to_owned(),
                "workers".into(),
                "tasks".into(),
                "busy".into(),
                "sent".into(),
                "bytes sent".into(),
                "received".into(),
                "bytes received".into(),
                "network wait".into(),
            ]];
            rows.extend(self.ranks.iter().map(|r| {
                vec![
                    r.rank.to_string(),
                    r.workers.to_string(),
                    r.tasks.to_string(),
                    duration_ns(r.busy as f64),
                    r.sent.to_string(),
                    crate::fmt::bytes(r.bytes_sent),
                    r.received.to_string(),
                    crate::fmt::bytes(r.bytes_received),
                    duration_ns(r.network_wait as f64),
                ]
            }));
            f.write_str(&crate::fmt::table(&rows, 1, "  "))?;
            writeln!(
                f,
                "  (network wait: time a receive was outstanding while none of the rank's workers ran a task)"
            )?;
        }

        if let Some(r) = &self.release {
            let d = |v: Option<i64>| v.map_or_else(|| "-".to_owned(), signed_duration);
            writeln!(f)?;
            writeln!(
                f,
                "Local edges: {} tasks started after their last predecessor on their rank, median {}, p90 {}, p99 {}",
                r.count,
                d(r.median),
                d(r.p90),
                d(r.p99)
            )?;
            writeln!(
                f,
                "  on that predecessor's worker: {}, median {}; on another worker: {}, median {}",
                r.same_worker.count,
                d(r.same_worker.median),
                r.other_worker.count,
                d(r.other_worker.median)
            )?;
            writeln!(
                f,
                "  (from the end of the task's last-ending predecessor to its start: completion, release, queue and wake-up, and any wait for a free worker)"
            )?;
        }

        if let Some(e) = &self.remote_edges {
            writeln!(f)?;
            match (e.median, e.p99) {
                (Some(median), Some(p99)) => writeln!(
                    f,
                    "Remote edges: {}, latency median {}, p99 {}",
                    e.count,
                    signed_duration(median),
                    signed_duration(p99)
                )?,
                _ => writeln!(f, "Remote edges: none found")?,
            }
            writeln!(
                f,
                "  (latency: from the end of the sending task to the start of the receiving task, on the merged clock)"
            )?;
            if let Some(s) = &e.split {
                writeln!(
                    f,
                    "  split, medians over the {} whose message names its task: sender {}, network {}, receiver {}",
                    s.count,
                    signed_duration(s.sender),
                    signed_duration(s.network),
                    signed_duration(s.receiver)
                )?;
                writeln!(
                    f,
                    "  (sender: task end to message handed to the transport; network: to its routing on the receiving rank, across the ranks' clocks; receiver: routing to task start)"
                )?;
            }
        }

        let warnings = self.warnings();
        if !warnings.is_empty() {
            writeln!(f)?;
            writeln!(f, "Warnings:")?;
            for w in warnings {
                writeln!(f, "  - {w}")?;
            }
        }
        Ok(())
    }
}

/// `ns` as [`duration_ns`] writes it, with a `-` when negative.
fn signed_duration(ns: i64) -> String {
    let text = duration_ns(ns.unsigned_abs() as f64);
    if ns < 0 {
        format!("-{text}")
    } else {
        text
    }
}
