//! Where the LU's trailing updates run when there are devices: left to the
//! scheduler (`dmda` weighs every tile task), dealt column-cyclically over the
//! devices (Hetero-HPL), or split between the host and the devices by the
//! TianHe-1 adaptive splitter, learnt from the measured rate of each side per
//! update size.
//!
//! A split moves whole tile columns: every task that updates column `j` at
//! step `k` (its swap, TRSM and GEMMs) runs on the side that owns `j` at that
//! step, so a column's tiles stay on one memory node during the step. The
//! device side takes the rightmost columns, the host the leftmost, which hold
//! the next panels (the panel runs on the CPU, as in TianHe-1 and HPL).
//!
//! Learning (TianHe-1, seed 003 §4.2): when step `k`'s split is fixed (as its
//! first task is made), each side's rate is its measured tile-GEMM rate
//! (the engine's perf models: the median time of the GEMMs it has run, per
//! architecture and size) times its workers; it is recorded in the splitter
//! under the step's workload `W = 2·m·n·nb`, and the split is the splitter's
//! for `W`. TianHe-1 times each side's whole part of a step instead; in a DAG
//! with look-ahead that time is not known before later steps must be placed
//! (the host runs the panels ahead while the device still works on earlier
//! steps), so the per-task measurements the runtime already keeps stand in
//! for it. They leave out transfers: the device's columns stay resident
//! across steps, and only the panel's `L` tiles move each step.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tessera_engine::perfmodel::PerfModels;
use tessera_engine::util::lock;
use tessera_engine::Runtime;
use tessera_tasks::kernels::gemm_flops;

use crate::balance::AdaptiveSplitter;

/// How tile columns are placed when the runtime has devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    /// Column-cyclic over two or more devices, else the scheduler decides.
    Auto,
    /// The scheduler decides per task (`dmda`).
    Scheduler,
    /// Columns dealt cyclically over the devices (Hetero-HPL).
    Cyclic,
    /// TianHe-1's adaptive host/device split of each step's columns.
    Adaptive,
}

impl std::str::FromStr for Split {
    type Err = String;
    fn from_str(s: &str) -> Result<Split, String> {
        match s {
            "auto" => Ok(Split::Auto),
            "sched" => Ok(Split::Scheduler),
            "cyclic" => Ok(Split::Cyclic),
            "adaptive" => Ok(Split::Adaptive),
            other => Err(format!(
                "unknown split '{other}' (known: auto, sched, cyclic, adaptive)"
            )),
        }
    }
}

/// The adaptive split's state, shared by the tasks' construction.
pub(crate) struct Adaptive {
    t: usize,
    nb: usize,
    n: usize,
    splitter: AdaptiveSplitter,
    perf: Arc<PerfModels>,
    /// Per side (host, device): the architecture its GEMMs are measured
    /// under and how many workers it has.
    sides: [(&'static str, usize); 2],
    /// Device columns (the rightmost) chosen for each step so far.
    device_cols: HashMap<usize, usize>,
    /// The device share chosen at each step, for reports and tests.
    history: Vec<(usize, f64)>,
}

/// Where each tile column's update tasks go.
pub(crate) enum ColumnPlacement {
    /// Nowhere in particular (the scheduler decides).
    Free,
    /// Column `j` on device node `nodes[j % nodes.len()]`.
    Cyclic(Vec<usize>),
    /// Host or devices per step, learnt.
    Adaptive {
        host: usize,
        devices: Vec<usize>,
        state: Arc<Mutex<Adaptive>>,
    },
}

impl ColumnPlacement {
    /// The placement `split` asks for on `rt` (its devices, their peaks and
    /// arch, its CPU workers, its perf models), for an `n × n` LU in tiles
    /// of `nb`.
    pub(crate) fn new(split: Split, rt: &Runtime, n: usize, nb: usize) -> ColumnPlacement {
        let devices = rt.device_nodes();
        let cpu_workers = rt.config().workers;
        let device_peak: f64 = rt.config().devices.iter().map(|d| d.peak_flops()).sum();
        match (split, devices.len()) {
            (_, 0) | (Split::Scheduler, _) => ColumnPlacement::Free,
            (Split::Auto, 1) => ColumnPlacement::Free,
            (Split::Auto | Split::Cyclic, _) => ColumnPlacement::Cyclic(devices),
            (Split::Adaptive, _) => {
                // Before anything is measured: the peaks (Roadrunner's and
                // TianHe-1's first guess). A CPU core's peak is not known to
                // the runtime; 20 GFLOP/s per core is the dgemm rate order of
                // this project's machines (PLATFORM.md), refined at once by
                // the first measured step.
                let host_peak = 20e9 * cpu_workers.max(1) as f64;
                ColumnPlacement::Adaptive {
                    host: 0,
                    devices,
                    state: Arc::new(Mutex::new(Adaptive {
                        t: n.div_ceil(nb),
                        nb,
                        n,
                        splitter: AdaptiveSplitter::two_class(host_peak, device_peak.max(1.0)),
                        perf: Arc::clone(rt.perf_models()),
                        sides: [
                            ("cpu", cpu_workers),
                            (rt.config().devices[0].arch(), rt.config().devices.len()),
                        ],
                        device_cols: HashMap::new(),
                        history: Vec::new(),
                    })),
                }
            }
        }
    }

    /// The memory node that runs the update tasks of column `j` at step `k`
    /// (`None`: the scheduler decides).
    pub(crate) fn node(&self, k: usize, j: usize) -> Option<usize> {
        match self {
            ColumnPlacement::Free => None,
            ColumnPlacement::Cyclic(nodes) => Some(nodes[j % nodes.len()]),
            ColumnPlacement::Adaptive {
                host,
                devices,
                state,
            } => {
                if j <= k {
                    // The panel's column and those left of it (their swaps):
                    // on the host, like the panel.
                    return Some(*host);
                }
                let mut st = lock(state);
                let device_cols = st.device_cols(k);
                let first_device_col = st.t - device_cols;
                Some(if j >= first_device_col {
                    devices[(j - first_device_col) % devices.len()]
                } else {
                    *host
                })
            }
        }
    }

    /// The device share chosen at each step so far, in step order.
    pub(crate) fn history(&self) -> Vec<(usize, f64)> {
        match self {
            ColumnPlacement::Adaptive { state, .. } => {
                let mut h = lock(state).history.clone();
                h.sort_by_key(|&(k, _)| k);
                h
            }
            _ => Vec::new(),
        }
    }
}

impl Adaptive {
    /// Flops of step `k`'s trailing update: `2·m·n·nb` over the remaining
    /// `m × n` matrix (TianHe-1's workload size W = 2MKN).
    fn update_flops(&self, k: usize) -> f64 {
        let rest = (self.n - (k + 1).min(self.t) * self.nb).min(self.n) as f64;
        2.0 * rest * rest * self.nb as f64
    }

    /// The device columns of step `k`, deciding its split on first use.
    fn device_cols(&mut self, k: usize) -> usize {
        if let Some(&d) = self.device_cols.get(&k) {
            return d;
        }
        let size = self.update_flops(k).max(1.0);
        let tile = gemm_flops(self.nb, self.nb, self.nb);
        for (side, (arch, workers)) in self.sides.into_iter().enumerate() {
            // The perf models' key of a full tile GEMM is its flop count.
            if let Some(p) = self.perf.predict("gemm", arch, tile as u64) {
                let rate = tile / p.seconds * workers as f64;
                self.splitter.record(side, size, rate, 1.0);
            }
        }
        let cols = self.t - k - 1;
        let share = self.splitter.split(size);
        let d = ((share * cols as f64).round() as usize).min(cols);
        self.history.push((k, share));
        self.device_cols.insert(k, d);
        d
    }
}
