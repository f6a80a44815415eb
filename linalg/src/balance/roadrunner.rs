//! The Roadrunner balancer: the host/device row split of an iterative kernel, found online.
//!
//! Seed 001, Sancho & Kerbyson, "Dynamic Load Balancing of Matrix-Vector Multiplications on
//! Roadrunner Compute Nodes", Section 3 "The Dynamic Load Balance Algorithm". An iterative
//! kernel is run many times; the balancer picks the host/device row split of each iteration
//! from the times of the previous ones: iteration 1 uses the peak ratio (state 1,
//! accelerator-centric), iteration 2 the measured processing rates (state 2,
//! performance-based, compute time only — transfer time is measured and reported
//! separately), then trial-and-error steps (states 3 and 4) until the iteration time stops
//! improving (stop₂), or drops the host altogether (stop₁). The paper's Section 4 Greedy
//! baseline, which walks the ratio from the peak ratio down to "all work on the host", is
//! in the tests: the yardstick the balancer is measured against.
//!
//! Where this departs from the paper, and why (each is marked in the code):
//!
//! - *ratio* is read as rows in proportion to speed (below), so a host faster
//!   than its device can be expressed.
//! - Trial steps are relative to the ratio ([`BalancerConfig::step`]), the
//!   paper's one-unit step at its ratios of 4–6, for any ratio.
//! - States 3/4 pick the side that finished last; this equals the paper's
//!   T_opt vs T_cell test for non-overlapped and fully overlapped transfers
//!   and also handles partly overlapped ones (`device_side_is_last`).
//! - If the first trial step is already worse, the other direction is tried
//!   once before stop₂ (the direction test is noise near a tie).
//! - stop₁ applies only when the peak-ratio share was small
//!   ([`BalancerConfig::stop1_share`]), its premise, and is mirrored for a
//!   slow device.
//! - A search is capped at [`BalancerConfig::max_iterations`] (7).
//! - A re-run after a workload change starts from the split in force, not
//!   the peak ratio, and a change is detected from jumps in any measured time.
//!
//! Vocabulary. A *fraction* is the device's share of the rows (0 = all on the
//! host, 1 = all on the device). The paper's *ratio* is kept as
//! `ratio = device rows / host rows` (so `fraction = ratio / (1 + ratio)`); the
//! paper starts it at `Peak_cell / Peak_opt` and sets it to `B_cell / B_opt`,
//! i.e. rows in proportion to speed. (The paper's text also reads "ratio = 1"
//! as "all work on the Opteron", which cannot express a host faster than its
//! accelerator; the proportional reading is the one that both of its formulas
//! use, and it is symmetric between the two sides.)

use std::fmt;

/// The times of one iteration of a split kernel, in seconds.
///
/// The paper's Figure 2 breakdown: `host_compute` is T_opt, `device_compute`
/// is T_cell, `transfer` is T_transfer (T_recv + T_send: the device's inputs
/// in and its results out) and `total` is T_iteration, the wall time of the
/// whole iteration however much of the transfer was overlapped. A side that
/// got no rows reports 0 compute time.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct IterationTimes {
    /// Compute time of the host's rows (T_opt).
    pub host_compute: f64,
    /// Compute time of the device's rows, transfers excluded (T_cell).
    pub device_compute: f64,
    /// Time moving the device's inputs in and results out (T_transfer).
    pub transfer: f64,
    /// Wall time of the whole iteration (T_iteration).
    pub total: f64,
}

/// What the processing rate of the device is computed from in state 2.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RateBasis {
    /// `B_cell = device rows / T_cell`: compute time only, transfer measured
    /// apart. The paper's "Optimized balance" technique (the default).
    #[default]
    ComputeOnly,
    /// `B_cell = device rows / (T_cell + T_transfer)`. The paper's "Balance
    /// T_transfer" comparison technique, which it shows ends too far on the
    /// host side when transfers are expensive (Section 4.1): there both
    /// sides wait for the transfers (Figure 2). Where only the device does
    /// (the host computes while the device's inputs and results move, as in a
    /// task runtime), its transfers are part of its rate and this is the
    /// right basis; stop₁ then also weighs them.
    ComputePlusTransfer,
}

/// Which state of the paper's Figure 3 produced an iteration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// State 1, accelerator-centric: `ratio = Peak_cell / Peak_opt`.
    PeakRatio,
    /// Iteration 1 of a re-run after the workload changed: the split in force
    /// when the change was seen stands in for the peak ratio.
    Restart,
    /// State 2, performance-based: `ratio = B_cell / B_opt` from the measured
    /// compute rates of the previous iteration.
    PerformanceBased,
    /// State 3, trial and error: ratio decreased, more rows to the host.
    MoreToHost,
    /// State 4, trial and error: ratio increased, more rows to the device.
    MoreToDevice,
    /// stop₁: one side was dropped (the host in the paper; the device in the
    /// mirrored case) and everything runs on the other.
    Stop1,
    /// stop₂: the iteration time stopped improving; the best tested ratio is
    /// kept for the following iterations.
    Stop2,
}

impl State {
    fn label(self) -> &'static str {
        match self {
            State::PeakRatio => "state 1 (peak ratio)",
            State::Restart => "restart (workload changed)",
            State::PerformanceBased => "state 2 (performance-based)",
            State::MoreToHost => "state 3 (more to host)",
            State::MoreToDevice => "state 4 (more to device)",
            State::Stop1 => "stop1 (one side dropped)",
            State::Stop2 => "stop2 (best ratio kept)",
        }
    }
}

/// One iteration as the balancer saw it: the row a driver prints.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LogEntry {
    /// Which search this iteration belongs to: 0 for the first, +1 for each
    /// re-balancing after a workload change.
    pub search: usize,
    /// 1-based iteration number within its search.
    pub iteration: usize,
    /// The state that chose `fraction`.
    pub state: State,
    /// The device's share of the rows in this iteration.
    pub fraction: f64,
    /// What the iteration measured.
    pub times: IterationTimes,
}

impl LogEntry {
    /// The paper's ratio for this iteration: device rows per host row
    /// (infinite when the host had no rows).
    pub fn ratio(&self) -> f64 {
        ratio_of(self.fraction)
    }
}

impl fmt::Display for LogEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = &self.times;
        write!(
            f,
            "search {} iter {:>2}  {:<28} fraction {:.4} (ratio {:>7.3})  host {:.6} s  device {:.6} s  transfer {:.6} s  total {:.6} s",
            self.search,
            self.iteration,
            self.state.label(),
            self.fraction,
            self.ratio(),
            t.host_compute,
            t.device_compute,
            t.transfer,
            t.total
        )
    }
}

/// Tuning of a [`Balancer`]. `Default` gives the values the docs of each field name.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BalancerConfig {
    /// Trial-and-error step of states 3 and 4, relative to the ratio: each
    /// trial multiplies (state 4) or divides (state 3) the ratio by `1 + step`.
    /// The paper steps its ratio by one unit; in its Figure 5 that is 4 → 5
    /// → 6, i.e. +25 % then +20 %. A relative step keeps that granularity
    /// whatever the ratio and whichever side is faster. Default 0.25, chosen
    /// because over a grid of 752 synthetic cases (rate ratios 1:1 to 1:28 and
    /// 20:1, transfer 0–60 % of device compute, latencies 0–15 %, overlapped
    /// or not, peaks right or 2–7× off) it kept every final split within
    /// 4.8 % of the brute-force best in ≤ 7 iterations (mean 5.3), where 0.1
    /// ran out of iterations on far optima (35 % off) and 0.3–0.4 lost to
    /// granularity (6–8 %).
    pub step: f64,
    /// Most iterations one search may take, the final run at the chosen split
    /// included (the paper converges in 5–7). When trials are still improving
    /// at this budget the best tested split is kept. Default 7.
    pub max_iterations: usize,
    /// stop₁ threshold: in state 2, the host is dropped when its peak-ratio
    /// share is at most this and it still took at least as long as the device
    /// (its compute, plus its transfers under [`RateBasis::ComputePlusTransfer`])
    /// ("the ratio was set up already small, and hence, those processors
    /// should no longer be considered"); mirrored for a device that is slower
    /// than its small peak share. Default 0.04 (Roadrunner's 1:28 peak ratio
    /// gives the host 3.4 %).
    pub stop1_share: f64,
    /// A share below this is rounded to 0 (that side gets no rows). Default 0.002.
    pub min_share: f64,
    /// After convergence, times (any of the four parts, or the total) that
    /// differ from those of the converged iteration by more than this
    /// relative amount are taken as a workload change and re-run the search (the paper re-runs the algorithm once "the
    /// number of changes in the matrix A are larger than a given threshold").
    /// Default 0.15.
    pub jump_tolerance: f64,
    /// How state 2 computes the device's processing rate.
    pub rate_basis: RateBasis,
}

impl Default for BalancerConfig {
    fn default() -> Self {
        BalancerConfig {
            step: 0.25,
            max_iterations: 7,
            stop1_share: 0.04,
            min_share: 0.002,
            jump_tolerance: 0.15,
            rate_basis: RateBasis::ComputeOnly,
        }
    }
}

/// Where the search stands; private so the states stay consistent.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    /// Waiting for the times of iteration 1 (peak ratio, or the split in
    /// force at a restart).
    First,
    /// Waiting for the times of the performance-based iteration.
    PerfBased,
    /// Waiting for the times of a trial step.
    Trial {
        /// State 4 (true) or state 3 (false).
        to_device: bool,
        /// Whether the direction was already reversed once.
        reversed: bool,
    },
    /// Stopped (stop₁ or stop₂); waiting for the first run at the chosen split.
    Settling { stop: State },
    /// Converged and watching for a jump in the times.
    Settled { reference: IterationTimes },
}

/// The Roadrunner dynamic load balancer for one host/device pair.
///
/// Drive it from the iteration loop: run at [`fraction`](Self::fraction),
/// hand the times to [`next_fraction`](Self::next_fraction), repeat.
///
/// ```
/// use tessera_linalg::balance::{Balancer, IterationTimes};
/// // Host 1 row/s, device 4 rows/s, transfers not overlapped (Figure 2).
/// let run = |f: f64| {
///     let (h, d, x) = (1.0 - f, f / 4.0, 0.02 * f);
///     IterationTimes { host_compute: h, device_compute: d, transfer: x, total: h.max(d) + x }
/// };
/// let mut b = Balancer::new(1.0, 8.0); // peaks overstate the device
/// let mut f = b.fraction();
/// for _ in 0..20 {
///     f = b.next_fraction(&run(f)).unwrap_or(b.fraction());
/// }
/// assert!(b.converged());
/// assert!((b.fraction() - 0.8).abs() < 0.02);
/// ```
#[derive(Clone, Debug)]
pub struct Balancer {
    peak_host: f64,
    peak_device: f64,
    config: BalancerConfig,
    phase: Phase,
    /// The fraction the next iteration runs at: the one whose times the next
    /// call to `next_fraction` receives.
    current: f64,
    /// T_iteration of the previous iteration of this search (stop₂ compares).
    prev_total: f64,
    /// The performance-based split of this search (a reversed trial restarts from it).
    perf_fraction: f64,
    /// Search number (0 = first).
    search: usize,
    /// Index in `log` where the current search starts.
    search_start: usize,
    log: Vec<LogEntry>,
}

impl Balancer {
    /// A balancer whose first iteration splits rows in proportion to the
    /// peak rates (any unit, the same for both).
    ///
    /// # Panics
    /// If a peak is not finite and positive.
    pub fn new(peak_host: f64, peak_device: f64) -> Self {
        Self::with_config(peak_host, peak_device, BalancerConfig::default())
    }

    /// [`new`](Self::new) with explicit tuning.
    ///
    /// # Panics
    /// If a peak is not finite and positive, `config.step` is not positive,
    /// or `config.max_iterations < 3` (peak ratio, performance-based, and the
    /// run at the chosen split).
    pub fn with_config(peak_host: f64, peak_device: f64, config: BalancerConfig) -> Self {
        assert!(
            peak_host.is_finite()
                && peak_host > 0.0
                && peak_device.is_finite()
                && peak_device > 0.0,
            "Balancer: peaks must be finite and positive (host {peak_host}, device {peak_device})"
        );
        assert!(
            config.step.is_finite() && config.step > 0.0,
            "Balancer: step must be positive"
        );
        assert!(
            config.max_iterations >= 3,
            "Balancer: max_iterations must be at least 3"
        );
        let mut b = Balancer {
            peak_host,
            peak_device,
            config,
            phase: Phase::First,
            current: 0.0,
            prev_total: f64::INFINITY,
            perf_fraction: 0.0,
            search: 0,
            search_start: 0,
            log: Vec::new(),
        };
        // State 1 (accelerator-centric): ratio = Peak_cell / Peak_opt, "available a priori".
        b.current = b.snap(fraction_of(peak_device / peak_host));
        b
    }

    /// The tuning in force.
    pub fn config(&self) -> &BalancerConfig {
        &self.config
    }

    /// The device's share of the rows for the next iteration: the split under
    /// trial while searching, the chosen split once converged.
    pub fn fraction(&self) -> f64 {
        self.current
    }

    /// Whether the search has stopped (stop₁ or stop₂). Stays true until a
    /// workload change re-runs it.
    pub fn converged(&self) -> bool {
        matches!(self.phase, Phase::Settling { .. } | Phase::Settled { .. })
    }

    /// The state the search is in, in the paper's terms: the state that chose
    /// the next iteration's split.
    pub fn state(&self) -> State {
        match self.phase {
            Phase::First if self.search == 0 => State::PeakRatio,
            Phase::First => State::Restart,
            Phase::PerfBased => State::PerformanceBased,
            Phase::Trial {
                to_device: true, ..
            } => State::MoreToDevice,
            Phase::Trial {
                to_device: false, ..
            } => State::MoreToHost,
            Phase::Settling { stop } => stop,
            Phase::Settled { .. } => self.log.last().map_or(State::Stop2, |e| e.state),
        }
    }

    /// The tested iteration of the current search with the lowest T_iteration.
    pub fn best(&self) -> Option<&LogEntry> {
        self.log[self.search_start..]
            .iter()
            .filter(|e| e.state != State::Stop1 && e.state != State::Stop2)
            .min_by(|a, b| total_key(&a.times).total_cmp(&total_key(&b.times)))
    }

    /// Iterations the current search has used, its first run at the chosen
    /// split included (the paper's count: "stops on the fifth iteration").
    pub fn iterations(&self) -> usize {
        self.log.len() - self.search_start
    }

    /// Every iteration the balancer directed, all searches, in order. After
    /// convergence only the first run at the chosen split is logged; the
    /// iterations that follow are not (they would grow without bound), until a
    /// jump starts a new search.
    pub fn log(&self) -> &[LogEntry] {
        &self.log
    }

    /// Takes the times of the iteration just run at [`fraction`](Self::fraction)
    /// and returns the split for the next one, or `None` when converged (keep
    /// running at `fraction()`, and keep reporting times here so a workload
    /// change is noticed: after convergence a `Some` means the search re-runs).
    ///
    /// Non-finite or negative times count as an infinitely slow iteration.
    pub fn next_fraction(&mut self, last: &IterationTimes) -> Option<f64> {
        let t = sanitize(last);
        match self.phase {
            Phase::First => {
                let state = if self.search == 0 {
                    State::PeakRatio
                } else {
                    State::Restart
                };
                self.push(state, t);
                Some(self.performance_based(&t))
            }
            Phase::PerfBased => {
                self.push(State::PerformanceBased, t);
                self.prev_total = t.total;
                self.perf_fraction = self.current;
                // States 3/4: which way to move is decided once, from the
                // performance-based iteration, by which side finished last.
                let to_device = !device_side_is_last(&t);
                self.trial(self.current, to_device, false)
            }
            Phase::Trial {
                to_device,
                reversed,
            } => {
                let state = if to_device {
                    State::MoreToDevice
                } else {
                    State::MoreToHost
                };
                let first_trial = self
                    .log
                    .last()
                    .is_some_and(|e| e.state == State::PerformanceBased);
                self.push(state, t);
                // "Convergence is achieved when the current T_iteration is
                // higher than the previous T_iteration", stopping in stop₂.
                if t.total > self.prev_total {
                    // Our one addition: when the very first trial is already
                    // worse, the direction read from the times was wrong (near
                    // a tie it is decided by noise); try the other one once,
                    // from the performance-based split, before stopping.
                    if first_trial && !reversed {
                        return self.trial(self.perf_fraction, !to_device, true);
                    }
                    return self.stop2();
                }
                self.prev_total = t.total;
                self.trial(self.current, to_device, reversed)
            }
            Phase::Settling { stop } => {
                // The first iteration at the chosen split: the paper counts it
                // as the iteration the algorithm converges on.
                let tested = self.best().map(|e| (e.fraction, e.times));
                self.push(stop, t);
                if let Some((f, bt)) = tested {
                    // The chosen split was tested during this search: if its
                    // times are now much different, the workload changed meanwhile.
                    if stop == State::Stop2 && f == self.current && self.jumped(&t, &bt) {
                        return Some(self.restart_from(&t));
                    }
                }
                self.phase = Phase::Settled { reference: t };
                None
            }
            Phase::Settled { reference } => {
                if self.jumped(&t, &reference) {
                    return Some(self.restart_from(&t));
                }
                None
            }
        }
    }

    /// Re-runs the search for a new workload (say the matrix changed, as in
    /// adaptive mesh refinement, Section 3). The split in force stands in for
    /// the peak ratio of state 1 (it is a better a-priori guess than the
    /// peaks); the next call to `next_fraction` goes on to state 2.
    pub fn reset_for_new_workload(&mut self) {
        self.begin_search();
    }

    // -- states ------------------------------------------------------------

    /// State 2: from the times at the current split, the performance-based
    /// split (or stop₁). Returns the fraction to run next.
    fn performance_based(&mut self, t: &IterationTimes) -> f64 {
        let f = self.current;
        let (host_share, device_share) = (1.0 - f, f);
        // stop₁: "when T_opt ≥ T_cell then the Opteron has been assigned too
        // much data. However, the ratio was set up already small, and hence,
        // those processors should no longer be considered". Only where the
        // premise holds (a small share); mirrored for a slow device.
        // T_cell excludes T_transfer unless the Balance-T_transfer variant is
        // asked for; stop₁ compares on the same basis as the rates below (our
        // departure: with transfers on the device's path only, a host that is
        // slower than the device's compute but faster than its compute plus
        // transfers must not be dropped).
        let device_time = match self.config.rate_basis {
            RateBasis::ComputeOnly => t.device_compute,
            RateBasis::ComputePlusTransfer => t.device_compute + t.transfer,
        };
        let small = self.config.stop1_share;
        if host_share > 0.0 && host_share <= small && t.host_compute >= device_time {
            return self.stop1(1.0);
        }
        if device_share > 0.0 && device_share <= small && device_time >= t.host_compute {
            return self.stop1(0.0);
        }
        // "collecting the times, T_opt and T_cell, in order to calculate the
        // processing rates, B_cell and B_opt"; ratio = B_cell / B_opt.
        let b_opt = rate(host_share, t.host_compute);
        let b_cell = rate(device_share, device_time);
        let ratio = match (b_opt, b_cell) {
            (Some(bo), Some(bc)) => bc / bo,
            // A side that had no rows (a restart from a dropped side) has no
            // measured rate: fall back on the peak ratio.
            _ => self.peak_device / self.peak_host,
        };
        self.current = self.snap(fraction_of(ratio));
        self.phase = Phase::PerfBased;
        self.current
    }

    /// States 3 and 4: one more trial step in the chosen direction, or stop₂
    /// when the budget or the end of the range is reached.
    fn trial(&mut self, from: f64, to_device: bool, reversed: bool) -> Option<f64> {
        // Leave the last iteration of the budget for the run at the chosen split.
        if self.iterations() + 1 >= self.config.max_iterations {
            return self.stop2();
        }
        let next = self.step_from(from, to_device);
        if next == from {
            return self.stop2(); // already all on one side
        }
        self.current = next;
        self.phase = Phase::Trial {
            to_device,
            reversed,
        };
        Some(next)
    }

    /// stop₂: keep the best tested split.
    fn stop2(&mut self) -> Option<f64> {
        if let Some(best) = self.best() {
            self.current = best.fraction;
        }
        self.phase = Phase::Settling { stop: State::Stop2 };
        None
    }

    /// stop₁: everything to one side (`fraction` 1 drops the host, 0 the device).
    fn stop1(&mut self, fraction: f64) -> f64 {
        self.current = fraction;
        self.phase = Phase::Settling { stop: State::Stop1 };
        fraction
    }

    fn begin_search(&mut self) {
        self.search += 1;
        self.search_start = self.log.len();
        self.prev_total = f64::INFINITY;
        self.phase = Phase::First;
    }

    /// A jump was seen in `t`, measured at the split in force: it becomes
    /// iteration 1 of a re-run, which goes straight on to state 2.
    fn restart_from(&mut self, t: &IterationTimes) -> f64 {
        self.begin_search();
        self.push(State::Restart, *t);
        self.performance_based(t)
    }

    /// Whether `t`, run at the same split as `reference`, shows a workload
    /// change: any of the four times off by more than `jump_tolerance` of its
    /// reference. The parts are watched, not only T_iteration: when the host
    /// is the bottleneck, a faster device leaves T_iteration as it was but
    /// moves the best split. A part under `jump_tolerance` of T_iteration must
    /// move by `jump_tolerance²` of T_iteration, so noise on a sliver is ignored.
    fn jumped(&self, t: &IterationTimes, reference: &IterationTimes) -> bool {
        let tol = self.config.jump_tolerance;
        if !(t.total.is_finite() && reference.total.is_finite()) {
            return true;
        }
        let floor = tol * reference.total;
        [
            (t.host_compute, reference.host_compute),
            (t.device_compute, reference.device_compute),
            (t.transfer, reference.transfer),
            (t.total, reference.total),
        ]
        .iter()
        .any(|&(now, then)| (now - then).abs() > tol * then.max(floor))
    }

    /// One trial step: the ratio times or divided by `1 + step`, moved off an
    /// end of the range to the smallest share first.
    fn step_from(&self, f: f64, to_device: bool) -> f64 {
        let m = self.config.min_share.max(1e-9);
        let r = ratio_of(f);
        let r = if to_device {
            if f <= 0.0 {
                ratio_of(m)
            } else {
                r * (1.0 + self.config.step)
            }
        } else if f >= 1.0 {
            ratio_of(1.0 - m)
        } else {
            r / (1.0 + self.config.step)
        };
        self.snap(fraction_of(r))
    }

    /// Rounds a share below `min_share` to zero.
    fn snap(&self, f: f64) -> f64 {
        let m = self.config.min_share;
        if f.is_nan() || f <= m {
            0.0
        } else if f >= 1.0 - m {
            1.0
        } else {
            f
        }
    }

    fn push(&mut self, state: State, times: IterationTimes) {
        self.log.push(LogEntry {
            search: self.search,
            iteration: self.iterations() + 1,
            state,
            fraction: self.current,
            times,
        });
    }
}

/// Which side finished last in an iteration: true when it was the device's
/// path (its transfers plus its compute), so rows should move to the host
/// (state 3); false for state 4.
///
/// The paper decides by T_opt < T_cell (state 3) or T_opt ≥ T_cell (state 4).
/// That is exact for the two cases it analyses: non-overlapped transfers
/// (Figure 2: both sides pay T_transfer, T_iteration = max(T_opt, T_cell) +
/// T_transfer) and fully overlapped ones (T_iteration = max(T_opt, T_cell)).
/// For the "common scenario", partially overlapped transfers, the host may
/// finish before the device's transfers and compute do although T_opt > T_cell;
/// the compute times alone cannot tell, T_iteration can: it lies near
/// T_cell + T_transfer when the device's path is the last, near T_opt or
/// T_opt + T_transfer when the host is. This rule agrees with the paper's
/// everywhere except in that case.
fn device_side_is_last(t: &IterationTimes) -> bool {
    let (h, d, x, total) = (t.host_compute, t.device_compute, t.transfer, t.total);
    if h < d {
        return true;
    }
    if h >= d + x {
        return false;
    }
    let device_path = (total - (d + x)).abs();
    let host_overlapped = (total - h).abs();
    let host_not_overlapped = (total - (h + x)).abs();
    // A tie means both sides end together (non-overlapped transfers at equal
    // compute times): moving rows to the device then lengthens both T_cell
    // and T_transfer and can only lose, so the host side is tried.
    device_path <= host_overlapped.min(host_not_overlapped)
}

/// `ratio = device rows / host rows` → device fraction.
fn fraction_of(ratio: f64) -> f64 {
    if ratio.is_infinite() {
        1.0
    } else if ratio.is_nan() || ratio <= 0.0 {
        0.0
    } else {
        ratio / (1.0 + ratio)
    }
}

/// Device fraction → `ratio = device rows / host rows`.
fn ratio_of(fraction: f64) -> f64 {
    if fraction >= 1.0 {
        f64::INFINITY
    } else if fraction.is_nan() || fraction <= 0.0 {
        0.0
    } else {
        fraction / (1.0 - fraction)
    }
}

/// Processing rate in shares per second, if measurable.
fn rate(share: f64, seconds: f64) -> Option<f64> {
    (share > 0.0 && seconds > 0.0 && seconds.is_finite()).then(|| share / seconds)
}

fn total_key(t: &IterationTimes) -> f64 {
    if t.total.is_nan() {
        f64::INFINITY
    } else {
        t.total
    }
}

/// Negative or non-finite parts read as unknown (0) compute and an infinite total.
fn sanitize(t: &IterationTimes) -> IterationTimes {
    let part = |x: f64| if x.is_finite() && x >= 0.0 { x } else { 0.0 };
    let bad = [t.host_compute, t.device_compute, t.transfer, t.total]
        .iter()
        .any(|x| !x.is_finite() || *x < 0.0);
    IterationTimes {
        host_compute: part(t.host_compute),
        device_compute: part(t.device_compute),
        transfer: part(t.transfer),
        total: if bad { f64::INFINITY } else { t.total },
    }
}

#[cfg(test)]
mod tests;
