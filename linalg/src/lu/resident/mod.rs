//! The device-resident LU (`--update resident`, as MAGMA's `dgetrf_gpu`):
//! when the matrix fits in one device's memory it goes up once, column
//! block by column block, and stays there; each step is a few large calls
//! over every column it updates (cuSOLVER's `dgetrf` for the panel, one
//! row-interchange kernel, one TRSM, one GEMM); the panel stream looks
//! ahead (block `k+1` updated and panel `k+1` factored while step `k`'s
//! trailing update runs); and each block comes home as soon as its panel
//! is done, overlapped with the steps that follow.
//!
//! The host's tiles are page-locked first (`pin`), so both ways run at the
//! link's DMA rate; where the driver refuses, the copies are staged by the
//! driver and the report says so.
//!
//! This is a stream program, not a task graph: within one device the
//! order is fixed, and what a task runtime would add (a scheduler's
//! choices, per-task data tracking) only costs latency on the critical
//! path. It is written once as a [`plan::Plan`]; the CUDA executor issues
//! it, the emulated device runs it in random interleavings of its streams
//! with the CPU LU's kernels (bit-identical factors), a vector-clock check
//! proves it race-free before a GPU sees it, and [`predict`] times it for
//! `--simulate`.

mod check;
#[cfg(feature = "cuda")]
mod cuda;
mod emu;
pub mod plan;
pub mod predict;

use std::collections::BTreeMap;
#[cfg(feature = "cuda")]
use std::time::Instant;

use tessera_backends::emu::EmuDevice;
use tessera_engine::device::Device;
use tessera_engine::Runtime;

use self::plan::{Op, Stream};
use super::LuFactors;
use crate::tiled::TileMatrix;

/// How the resident LU runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResidentOptions {
    /// Depth-1 look-ahead on a second compute stream.
    pub lookahead: bool,
    /// Page-lock the host's tiles (off: the driver stages the copies).
    pub pin: bool,
    /// On an emulated device, the seed of the streams' interleaving
    /// (`None`: issue order).
    pub seed: Option<u64>,
}

impl Default for ResidentOptions {
    fn default() -> Self {
        ResidentOptions {
            lookahead: true,
            pin: true,
            seed: None,
        }
    }
}

/// One working operation's times (seconds from the run's first operation).
#[derive(Clone, Debug, PartialEq)]
pub struct OpTime {
    /// Its stream.
    pub stream: Stream,
    /// The operation.
    pub op: Op,
    /// Start.
    pub start: f64,
    /// End.
    pub end: f64,
}

/// Whether the host's tiles were page-locked.
#[derive(Clone, Debug, PartialEq)]
pub enum Pinning {
    /// Registered with the driver: bytes, and the seconds it took (before
    /// the timed factorisation, as HPL allocates its buffers).
    Pinned(u64, f64),
    /// Not asked for (`pin: false`).
    Off,
    /// The driver refused (its reason): the copies are staged.
    Refused(String),
    /// An emulated device (its link model stands for the copies).
    Emulated,
}

/// What a resident run reports beside the factors.
#[derive(Clone, Debug)]
pub struct ResidentReport {
    /// The device's name.
    pub device: String,
    /// Host memory.
    pub pinning: Pinning,
    /// Every working operation's times (device events on a GPU).
    pub times: Vec<OpTime>,
    /// Seconds the solve took after the factorisation (wall clock).
    pub solve: f64,
}

/// The device a resident LU runs on.
enum Target<'rt> {
    #[cfg(feature = "cuda")]
    Cuda(&'rt tessera_backends::cuda::CudaDevice),
    Emu(&'rt EmuDevice),
}

/// The one device of `rt`, if the resident LU can run on it.
fn target(rt: &Runtime) -> Result<Target<'_>, String> {
    let devices = &rt.config().devices;
    let dev = match devices.as_slice() {
        [d] => d.as_ref(),
        [] => return Err("the resident LU needs a device (--gpus or --emu)".into()),
        more => {
            return Err(format!(
                "the resident LU runs on one device; this run has {} (--gpus 0 picks one)",
                more.len()
            ))
        }
    };
    #[cfg(feature = "cuda")]
    if let Some(d) = dev
        .as_any()
        .downcast_ref::<tessera_backends::cuda::CudaDevice>()
    {
        return Ok(Target::Cuda(d));
    }
    if let Some(d) = dev.as_any().downcast_ref::<EmuDevice>() {
        return Ok(Target::Emu(d));
    }
    Err(format!(
        "the resident LU has no executor for device {}",
        dev.name()
    ))
}

/// Device memory a resident LU of an `n × n` matrix needs (the matrix, its
/// pivots; cuSOLVER's workspaces come on top, a few MiB).
pub fn device_bytes(n: usize, nb: usize) -> u64 {
    (n as u64) * (n as u64) * 8 + 4 * (n as u64 + n.div_ceil(nb.max(1)) as u64)
}

/// Whether the resident LU fits the one device of `rt` (with `margin`
/// left of its memory limit for workspaces).
pub fn fits(rt: &Runtime, n: usize, nb: usize) -> bool {
    let devices = &rt.config().devices;
    match devices.as_slice() {
        [d] => d
            .memory_limit()
            .is_none_or(|limit| device_bytes(n, nb) + (256 << 20) <= limit),
        _ => false,
    }
}

/// A matrix on its way to the device: checked, and its host memory
/// page-locked ([`Prepared::new`], untimed), ready to factor
/// ([`Prepared::factor`], the timed part).
pub struct Prepared<'rt> {
    /// Declared first: dropped (every stream drained) before the host
    /// memory is unregistered and the tiles freed.
    #[cfg(feature = "cuda")]
    device: Option<tessera_backends::cuda::resident::ResidentLu<'rt>>,
    #[cfg(feature = "cuda")]
    registration: Option<tessera_backends::cuda::resident::HostRegistration<'rt>>,
    target: Target<'rt>,
    a: TileMatrix,
    opts: ResidentOptions,
    pinning: Pinning,
    plan: plan::Plan,
    setup: f64,
    /// The pivots, once factored.
    ipiv: Option<Vec<usize>>,
}

impl<'rt> Prepared<'rt> {
    /// Checks that `a` is square and fits `rt`'s one device, and page-locks
    /// its tiles if `opts.pin`.
    pub fn new(rt: &'rt Runtime, a: TileMatrix, opts: ResidentOptions) -> Result<Self, String> {
        let (n, nb) = (a.n_rows(), a.nb());
        if a.n_cols() != n {
            return Err(format!(
                "LU needs a square matrix, got {n} x {}",
                a.n_cols()
            ));
        }
        let target = target(rt)?;
        if !fits(rt, n, nb) {
            let limit = rt.config().devices[0].memory_limit().unwrap_or(0);
            return Err(format!(
                "the resident LU's {:.1} GiB matrix does not fit the device's {:.1} GiB (use --update merged or streamed)",
                device_bytes(n, nb) as f64 / (1u64 << 30) as f64,
                limit as f64 / (1u64 << 30) as f64
            ));
        }
        // Proved race-free before a device sees it (the proof does not
        // depend on the interleaving).
        let plan = plan::plan(a.mt(), opts.lookahead);
        check::execute(&plan, None, |_, _| Ok(()))?;
        #[cfg_attr(not(feature = "cuda"), allow(unused_mut))]
        let mut me = Prepared {
            #[cfg(feature = "cuda")]
            device: None,
            #[cfg(feature = "cuda")]
            registration: None,
            target,
            a,
            opts,
            pinning: Pinning::Emulated,
            plan,
            setup: 0.0,
            ipiv: None,
        };
        #[cfg(feature = "cuda")]
        if let Target::Cuda(dev) = me.target {
            me.pinning = if !opts.pin {
                Pinning::Off
            } else {
                let t0 = Instant::now();
                match cuda::register(dev, &mut me.a) {
                    Ok(r) => {
                        me.registration = Some(r);
                        Pinning::Pinned((n * n * 8) as u64, t0.elapsed().as_secs_f64())
                    }
                    Err(e) => Pinning::Refused(e),
                }
            };
            let t0 = Instant::now();
            me.device = Some(cuda::prepare(dev, &me.a, &me.plan)?);
            me.setup = t0.elapsed().as_secs_f64();
        }
        Ok(me)
    }

    /// Seconds the device's set-up took (allocation, streams, handles,
    /// kernels, a warm-up call of each operation): 0 where there is none.
    pub fn setup_seconds(&self) -> f64 {
        self.setup
    }

    /// How the host memory was prepared.
    pub fn pinning(&self) -> &Pinning {
        &self.pinning
    }

    /// Factors the matrix and solves `A·x = b` (the timed part; on a GPU
    /// the solve runs on the device, where the factors are): `x` and the
    /// run's report. The factors stay with `self` until
    /// [`Prepared::release`].
    pub fn factor(&mut self, b: &[f64]) -> Result<(Vec<f64>, ResidentReport), String> {
        if b.len() != self.a.n_rows() {
            return Err(format!(
                "b has {} entries for n = {}",
                b.len(),
                self.a.n_rows()
            ));
        }
        if self.ipiv.is_some() {
            return Err("the matrix is factored already".into());
        }
        let (ran, device) = match self.target {
            #[cfg(feature = "cuda")]
            Target::Cuda(dev) => {
                let lu = self.device.as_ref().ok_or("the device was not set up")?;
                (cuda::run(lu, &mut self.a, &self.plan, b)?, dev.name())
            }
            Target::Emu(dev) => (
                emu::run(dev, &mut self.a, &self.plan, self.opts.seed, b)?,
                dev.name(),
            ),
        };
        self.ipiv = Some(ran.ipiv);
        Ok((
            ran.x,
            ResidentReport {
                device,
                pinning: self.pinning.clone(),
                times: ran.times,
                solve: ran.solve,
            },
        ))
    }

    /// Gives the device and the page-locked host memory back (untimed, as
    /// HPL's deallocation: unlocking 32 GiB took a good part of a second on
    /// an H200 node) and returns the factors, in HPL's layout as the
    /// task-graph LU leaves them.
    pub fn release(mut self) -> Result<LuFactors, String> {
        #[cfg(feature = "cuda")]
        {
            drop(self.device.take());
            drop(self.registration.take());
        }
        let ipiv = self
            .ipiv
            .take()
            .ok_or("release: the matrix was not factored")?;
        Ok(LuFactors {
            factors: self.a,
            ipiv,
            device_shares: Vec::new(),
        })
    }
}

/// What an executor returns.
struct Ran {
    /// Global pivots.
    ipiv: Vec<usize>,
    /// The solution.
    x: Vec<f64>,
    /// Each working operation's times.
    times: Vec<OpTime>,
    /// Seconds the solve took.
    solve: f64,
}

impl ResidentReport {
    /// From the first operation's start to the last one's end.
    pub fn span(&self) -> f64 {
        let start = self
            .times
            .iter()
            .map(|t| t.start)
            .fold(f64::INFINITY, f64::min);
        let end = self.times.iter().map(|t| t.end).fold(0.0, f64::max);
        if start.is_finite() {
            end - start
        } else {
            0.0
        }
    }

    /// Seconds each kind of operation took in all, and how many there were.
    pub fn by_kind(&self) -> BTreeMap<&'static str, (f64, usize)> {
        let mut out = BTreeMap::new();
        for t in &self.times {
            let e = out.entry(t.op.kind()).or_insert((0.0, 0));
            e.0 += t.end - t.start;
            e.1 += 1;
        }
        out
    }

    /// Busy seconds of each stream.
    pub fn by_stream(&self) -> BTreeMap<Stream, f64> {
        let mut out = BTreeMap::new();
        for t in &self.times {
            *out.entry(t.stream).or_insert(0.0) += t.end - t.start;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tessera_backends::emu::EmuConfig;
    use tessera_engine::{Config, Runtime};

    use super::*;
    use crate::hpl::{generate_matrix, generate_rhs, hpl_residual, HPL_THRESHOLD};
    use crate::lu::seq::lu_tiled_seq;
    use crate::lu::solve_from_factors;

    fn emu_runtime(own_memory: bool, memory: Option<u64>) -> Runtime {
        let cfg = EmuConfig {
            own_memory,
            memory,
            link: tessera_engine::device::Link {
                latency: Duration::from_micros(1),
                bandwidth: 1e12,
            },
            ..EmuConfig::default()
        };
        Runtime::new(Config::with_workers(1).device(std::sync::Arc::new(EmuDevice::new(0, cfg))))
            .expect("a runtime with an emulated device")
    }

    fn factor(
        rt: &Runtime,
        n: usize,
        nb: usize,
        opts: ResidentOptions,
    ) -> (LuFactors, ResidentReport) {
        let a = generate_matrix(n, nb, 7);
        let b = generate_rhs(n, 7);
        let mut prepared = Prepared::new(rt, a, opts).unwrap();
        let (x, report) = prepared.factor(&b).unwrap();
        let lu = prepared.release().unwrap();
        // The solve from the device's factors is the host's solve.
        assert_eq!(x, solve_from_factors(&lu.factors, &lu.ipiv, &b));
        (lu, report)
    }

    #[test]
    fn factors_are_bit_identical_to_the_cpu_lu_in_every_interleaving() {
        let rt = emu_runtime(true, None);
        for (n, nb) in [(96, 32), (100, 32), (64, 64), (33, 8), (7, 16)] {
            let mut reference = generate_matrix(n, nb, 7);
            let ipiv = lu_tiled_seq(&mut reference).unwrap();
            for lookahead in [false, true] {
                for seed in [None, Some(1), Some(2), Some(3)] {
                    let opts = ResidentOptions {
                        lookahead,
                        pin: true,
                        seed,
                    };
                    let (lu, report) = factor(&rt, n, nb, opts);
                    assert_eq!(lu.ipiv, ipiv, "n {n} nb {nb} la {lookahead} seed {seed:?}");
                    assert!(
                        lu.factors.to_col_major() == reference.to_col_major(),
                        "n {n} nb {nb} la {lookahead} seed {seed:?}: factors differ"
                    );
                    assert_eq!(report.pinning, Pinning::Emulated);
                    let t = n.div_ceil(nb);
                    assert_eq!(report.by_kind()["upload"].1, t);
                    assert_eq!(report.by_kind()["download"].1, t);
                    assert_eq!(report.by_kind()["panel"].1, t);
                }
            }
        }
    }

    #[test]
    fn the_factors_pass_hpls_residual_test() {
        let rt = emu_runtime(true, None);
        let (n, nb) = (160, 32);
        let (lu, _) = factor(
            &rt,
            n,
            nb,
            ResidentOptions {
                seed: Some(9),
                ..Default::default()
            },
        );
        let b = generate_rhs(n, 7);
        let x = solve_from_factors(&lu.factors, &lu.ipiv, &b);
        let r = hpl_residual(n, nb, 7, &x, &b);
        assert!(r < HPL_THRESHOLD, "residual {r}");
    }

    #[test]
    fn look_ahead_puts_panels_on_their_own_stream() {
        let rt = emu_runtime(true, None);
        let (_, with) = factor(&rt, 96, 16, ResidentOptions::default());
        let (_, without) = factor(
            &rt,
            96,
            16,
            ResidentOptions {
                lookahead: false,
                ..Default::default()
            },
        );
        let panels = |r: &ResidentReport| {
            r.times
                .iter()
                .filter(|t| t.op.kind() == "panel")
                .map(|t| t.stream)
                .collect::<Vec<_>>()
        };
        assert!(panels(&with).iter().all(|&s| s == Stream::Panel));
        assert!(panels(&without).iter().all(|&s| s == Stream::Update));
        // Every step's trailing update is one call of each kind (after
        // step 0, which goes block by block as the blocks arrive).
        // Arrival steps: step 0 on block 1, steps 0 and 1 on blocks 2..t;
        // then one look-ahead call per step 2..t-2 and one trailing call per
        // step 2..t-3.
        assert_eq!(plan::STEPS_ON_ARRIVAL, 2);
        let gemms = with.by_kind()["gemm"].1;
        let t = 6;
        assert_eq!(
            gemms,
            1 + 2 * (t - 2) + (t - 3) + (t - 4),
            "{:?}",
            with.by_kind()
        );
    }

    #[test]
    fn refusals_name_the_problem() {
        let rt = Runtime::new(Config::with_workers(1)).unwrap();
        let e = Prepared::new(&rt, generate_matrix(64, 32, 1), ResidentOptions::default())
            .err()
            .unwrap();
        assert!(e.contains("needs a device"), "{e}");
        let rt = emu_runtime(true, Some(64 * 64 * 8));
        let e = Prepared::new(&rt, generate_matrix(64, 32, 1), ResidentOptions::default())
            .err()
            .unwrap();
        assert!(e.contains("does not fit"), "{e}");
        let rt = emu_runtime(true, None);
        let e = Prepared::new(
            &rt,
            TileMatrix::zeros(64, 32, 32),
            ResidentOptions::default(),
        )
        .err()
        .unwrap();
        assert!(e.contains("square"), "{e}");
    }

    #[test]
    fn a_singular_matrix_names_its_column() {
        let rt = emu_runtime(true, None);
        let mut a = generate_matrix(64, 16, 3);
        // Column 37 a copy of column 5: exactly singular? Not always in
        // floating point; a zero column is.
        for i in 0..64 {
            a.tile_mut(i / 16, 37 / 16).as_mut_slice()[(i % 16) + (37 % 16) * 16] = 0.0;
        }
        let e = Prepared::new(&rt, a, ResidentOptions::default())
            .unwrap()
            .factor(&[0.0; 64])
            .unwrap_err();
        assert!(e.contains("column 37"), "{e}");
    }
}
