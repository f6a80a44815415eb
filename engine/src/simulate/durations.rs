//! How long a simulated task lasts: the perf models' prediction for its
//! (codelet, architecture, size), else the processor's rate for its codelet,
//! else the processor's default rate — and a warning, once per codelet,
//! when it came to the default, or when the models' regression predicts a
//! size far outside the sizes they were measured at.
//!
//! Codelets are matched by name: a platform's `codelets` entries and perf
//! models apply to every codelet of that name, whoever wrote it. The warning
//! covers the case of a name the platform does not know (its tasks would
//! otherwise take a guessed rate silently); the converse, a name it knows
//! for another kernel, is the user's to avoid (README.md beside this file).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use super::platform::{Processor, Rate};
use crate::perfmodel::{PerfModels, PredictionSource};
use crate::task::TaskNode;
use crate::util::lock;

/// Codelets the engine itself makes: the distributed layer's sends and
/// receives, whose tasks copy a message's bytes at the processor's default
/// `gbs` on purpose (the network's time is the transport's). Never warned
/// about; `tests::engine_codelets_are_not_warned_about` keeps the list in
/// step with `dist`.
const ENGINE_CODELETS: [&str; 4] = ["send", "recv", "halo-send", "halo-recv"];

/// How far (as a ratio of size keys) a regression may reach beyond the
/// smallest or largest measured size before the prediction is warned about:
/// 8x in flops is 2x in a cubic kernel's tile size. Issue 28: a calibration
/// extrapolated to 100.9 s where another one of the same machine gave
/// 1.09 s, without a word.
const FAR: f64 = 8.0;

/// Duration of a task on `proc` (a team of `team` of them) from the
/// platform's rates, in seconds (the codelet's own rate, else the default
/// one, a team's sped up by the processor's `team_serial`), plus its
/// overhead.
pub(crate) fn model_seconds(
    proc: &Processor,
    codelet: &str,
    flops: f64,
    bytes: u64,
    team: usize,
) -> f64 {
    let eff = |f: f64| {
        if proc.half_flops > 0.0 {
            f / (f + proc.half_flops)
        } else {
            1.0
        }
    };
    let run = match proc.codelets.get(codelet) {
        Some(Rate::Gflops(r)) if flops > 0.0 => flops / (r * 1e9 * eff(flops)),
        Some(Rate::Gflops(_)) => 0.0,
        Some(Rate::Gbs(r)) => bytes as f64 / (r * 1e9),
        // A fixed time is never shorter than the task's flops at the
        // processor's peak (issue 42: `seconds = 1e-12` read as 740 % of it).
        Some(Rate::Seconds(s)) => s.max(flops / (proc.peak * 1e9)),
        None if flops > 0.0 => flops / (proc.gflops * 1e9 * eff(flops)),
        None => proc.gbs.map_or(0.0, |b| bytes as f64 / b),
    };
    let run = if team > 1 {
        run / proc.team_speedup(codelet, team)
    } else {
        run
    };
    run + proc.overhead
}

/// The durations of one simulation: its models, and the codelets that came
/// to a default rate so far (each warned about once).
pub(crate) struct Durations {
    perf: std::sync::Arc<PerfModels>,
    /// Whether `perf` holds measured models to predict from.
    use_models: bool,
    /// The platform's name, for the warnings.
    platform: String,
    /// A leaf lock, taken only when a task came to a default rate.
    defaulted: Mutex<Defaulted>,
    /// A leaf lock, taken only for a size predicted by a regression:
    /// (codelet, arch) → the measured sizes' range, once looked up.
    measured: Mutex<HashMap<(String, String), MeasuredRange>>,
    /// Whether each warning is also printed on stderr as it is given.
    echo: AtomicBool,
    /// How many warnings were printed on stderr.
    echoed: AtomicUsize,
    /// Whether [`note`](Self::note) kept warnings not printed yet (they are
    /// the first ones: notes come while the simulation is built).
    pending: AtomicBool,
}

/// The smallest and largest measured size of a (codelet, arch); `None`:
/// none measured.
type MeasuredRange = Option<(u64, u64)>;

#[derive(Default)]
struct Defaulted {
    /// The codelets warned about.
    seen: HashSet<String>,
    /// The warnings, in the order they were given.
    warnings: Vec<String>,
}

impl Durations {
    pub(crate) fn new(perf: std::sync::Arc<PerfModels>, use_models: bool, platform: &str) -> Self {
        Durations {
            perf,
            use_models,
            platform: platform.to_string(),
            defaulted: Mutex::new(Defaulted::default()),
            measured: Mutex::new(HashMap::new()),
            echo: AtomicBool::new(true),
            echoed: AtomicUsize::new(0),
            pending: AtomicBool::new(false),
        }
    }

    /// Whether warnings are printed on stderr as well (on at first).
    pub(crate) fn set_echo(&self, on: bool) {
        self.echo.store(on, Ordering::Relaxed);
    }

    /// How many warnings went to stderr.
    #[cfg(test)]
    pub(crate) fn echoed(&self) -> usize {
        self.echoed.load(Ordering::Relaxed)
    }

    /// Keeps `text` among the warnings, and prints it unless silenced.
    fn warn(&self, d: &mut Defaulted, text: String) {
        if self.echo.load(Ordering::Relaxed) {
            eprintln!("tessera: simulate: warning: {text}");
            self.echoed.fetch_add(1, Ordering::Relaxed);
        }
        d.warnings.push(text);
    }

    /// A warning given while the simulation is built (once per `key`): kept
    /// now, printed with the first task timed, so that
    /// [`set_echo`](Self::set_echo) made in between applies to it too.
    pub(crate) fn note(&self, key: &str, text: String) {
        let mut d = lock(&self.defaulted);
        if d.seen.insert(key.to_string()) {
            d.warnings.push(text);
            self.pending.store(true, Ordering::Relaxed);
        }
    }

    /// Prints the warnings [`note`](Self::note) kept, unless silenced.
    fn flush_notes(&self) {
        if self.pending.swap(false, Ordering::Relaxed) && self.echo.load(Ordering::Relaxed) {
            for text in lock(&self.defaulted).warnings.iter() {
                eprintln!("tessera: simulate: warning: {text}");
                self.echoed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    pub(crate) fn perf(&self) -> &std::sync::Arc<PerfModels> {
        &self.perf
    }

    /// Modelled duration of `task` on `proc`, a processor of architecture
    /// `arch` (leading a team of `team` of them), in seconds (see the
    /// module doc). A team size the models never measured takes the
    /// one-core model, sped up as the platform says teams of this codelet
    /// scale (`team_serial`).
    pub(crate) fn seconds(
        &self,
        proc: &Processor,
        arch: &'static str,
        task: &TaskNode,
        team: usize,
    ) -> f64 {
        self.flush_notes();
        let codelet = task.codelet.name.as_str();
        if self.use_models {
            let team_arch = crate::team::team_arch(arch, team);
            if let Some(s) = self.predicted(codelet, &team_arch, task) {
                return s + proc.overhead;
            }
            if team > 1 {
                if let Some(s) = self.predicted(codelet, arch, task) {
                    return s / proc.team_speedup(codelet, team) + proc.overhead;
                }
            }
        }
        match proc.codelets.get(codelet) {
            None => self.note_default(proc, arch, codelet, task.flops),
            Some(Rate::Seconds(s)) if task.flops > *s * proc.peak * 1e9 => {
                self.note_past_peak(proc, arch, codelet, task.flops, *s)
            }
            Some(_) => {}
        }
        model_seconds(proc, codelet, task.flops, task.footprint(), team)
    }

    /// The perf models' prediction for `task` under (`codelet`, `arch`), if
    /// they have a plausible one.
    fn predicted(&self, codelet: &str, arch: &str, task: &TaskNode) -> Option<f64> {
        let p = self.perf.predict(codelet, arch, task.size_key())?;
        // A fit over sizes too close together can be absurd (an exponent of
        // 678 over sizes within 0.01 %): trust a regression only with a
        // plausible exponent, else the rates.
        let plausible = p.source != PredictionSource::Regression
            || self
                .perf
                .fit(codelet, arch)
                .is_some_and(|f| f.b > 0.2 && f.b < 4.0 && p.seconds.is_finite());
        if plausible && p.source == PredictionSource::Regression {
            self.note_extrapolation(arch, codelet, task.size_key());
        }
        plausible.then_some(p.seconds)
    }

    /// `task` came to `proc`'s default rate: warn, once per codelet, on
    /// stderr and in [`warnings`](Self::warnings).
    fn note_default(&self, proc: &Processor, arch: &str, codelet: &str, flops: f64) {
        if ENGINE_CODELETS.contains(&codelet) {
            return;
        }
        let mut d = lock(&self.defaulted);
        // Every task of such a codelet comes here: no allocation once warned.
        if d.seen.contains(codelet) {
            return;
        }
        d.seen.insert(codelet.to_string());
        let rate = match proc.gbs {
            _ if flops > 0.0 => format!("its flops at {} GFLOP/s", proc.gflops),
            Some(b) => format!("its data at {} GB/s", b / 1e9),
            None => "no time (no flops, and no `gbs`)".to_string(),
        };
        let models = if self.use_models {
            "perf model or "
        } else {
            ""
        };
        let text = format!(
            "codelet '{}' has no {models}rate in platform '{}': its tasks take each processor's \
             default rate (on {}: {rate}); give it a rate in the platform's `codelets`, or \
             measure it (Simulation::with_calibrated)",
            codelet, self.platform, arch
        );
        self.warn(&mut d, text);
    }

    /// A task of `codelet` would run its `flops` in the platform's fixed
    /// `seconds`, faster than `proc`'s peak: it is timed at the peak
    /// ([`model_seconds`]); warn, once per codelet.
    fn note_past_peak(&self, proc: &Processor, arch: &str, codelet: &str, flops: f64, s: f64) {
        let mut d = lock(&self.defaulted);
        let key = format!("{codelet}\0peak");
        if d.seen.contains(&key) {
            return;
        }
        d.seen.insert(key);
        let text = format!(
            "codelet '{codelet}' on {arch} in platform '{}': seconds = {s:e} runs a task of \
             {flops:e} flops at {:.4e} GFLOP/s, past the processor's peak_gflops = {}: \
             timed at the peak instead",
            self.platform,
            flops / s / 1e9,
            proc.peak
        );
        self.warn(&mut d, text);
    }

    /// A regression predicted `codelet` on `arch` at `size`: warn, once per
    /// codelet, when `size` is more than [`FAR`] beyond the measured sizes.
    fn note_extrapolation(&self, arch: &str, codelet: &str, size: u64) {
        let range = {
            let mut m = lock(&self.measured);
            *m.entry((codelet.to_string(), arch.to_string()))
                .or_insert_with(|| {
                    let sizes = self.perf.summary().into_iter().filter_map(|r| {
                        (r.codelet == codelet && r.arch == arch && r.samples > 0).then_some(r.size)
                    });
                    sizes.fold(None, |acc: Option<(u64, u64)>, s| {
                        Some(acc.map_or((s, s), |(lo, hi)| (lo.min(s), hi.max(s))))
                    })
                })
        };
        let Some((lo, hi)) = range else {
            return;
        };
        let (size_f, lo_f, hi_f) = (size as f64, lo as f64, hi as f64);
        // Issue 42: a size 9x below the smallest measured was said "9x beyond".
        let (beyond, side) = if size_f > hi_f * FAR {
            (size_f / hi_f, "above the largest of")
        } else if size_f * FAR < lo_f {
            (lo_f / size_f.max(1.0), "below the smallest of")
        } else {
            return;
        };
        let mut d = lock(&self.defaulted);
        let key = format!("extrapolated {codelet}");
        if !d.seen.insert(key) {
            return;
        }
        let text = format!(
            "codelet '{codelet}' on {arch}: size {size} is {beyond:.0}x {side} the sizes its perf models were measured at ({lo} to {hi}), so its time is extrapolated by their regression and may be far off; calibrate at the sizes you predict (tessera calibrate --n, --nb)"
        );
        self.warn(&mut d, text);
    }

    /// The warnings given so far.
    pub(crate) fn warnings(&self) -> Vec<String> {
        lock(&self.defaulted).warnings.clone()
    }
}
