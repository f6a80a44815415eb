//! The options of `tessera lu` and `tessera spmv`, apart from their commands
//! (`cmd/lu.rs`, `cmd/spmv.rs`) because the simulation of their runs
//! (`simulate.rs`) reads them too.

use std::path::PathBuf;

use tessera_engine::team::TeamSize;
use tessera_engine::Runtime;
use tessera_linalg::lu::dist::{Grid, Layout};
use tessera_linalg::lu::{Front, LuOptions, Split, Update};

/// `tessera lu`'s tile size when `--nb` is not given (and N is not smaller).
pub const DEFAULT_NB: usize = 448;

/// Options of `tessera lu`.
#[derive(clap::Args, Debug)]
pub struct LuArgs {
    /// Matrix order N.
    #[arg(long, default_value_t = 8192)]
    pub n: usize,
    /// Tile size NB [default: 448, or N when N is smaller]. 448 was the
    /// fastest at N=8192 on the faster VM type; on the slower one (issue 16)
    /// it fell off faer's GEMM cache cliff, which the GEMM kernel now avoids
    /// with row blocks sized from the L2 it reads at run time, and 448 is
    /// again the fastest there: `tessera lu --n 8192 --nb X` alternated over
    /// 320/384/448/512, 3 rounds, load 4.4–4.7, medians 89.6 / 86.3 / 94.3 /
    /// 88.1 GFLOP/s.
    // The run's tile size is `LuArgs::nb`.
    #[arg(long = "nb", value_name = "NB")]
    pub nb_given: Option<usize>,
    #[command(flatten)]
    pub placement: crate::placement::PlacementArgs,
    /// Scheduler: ws, prio (prio gives the look-ahead), dmda (data-aware,
    /// for devices), or auto (dmda with devices, else prio).
    #[arg(long, default_value = "auto")]
    pub sched: String,
    /// Seed of the random matrix and right-hand side.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// With devices: how tile columns are placed. auto (cyclic over two or
    /// more devices, else the scheduler), sched (dmda decides per task),
    /// cyclic (columns dealt over the devices, Hetero-HPL), adaptive (each
    /// step's columns split between host and devices by the TianHe-1
    /// splitter, learnt from measured rates; needs --front symbolic).
    #[arg(long, default_value = "auto")]
    pub split: String,
    /// Task-graph front-end: symbolic (lazily unfolded) or stf.
    #[arg(long, default_value = "symbolic")]
    pub front: String,
    /// The panel as a team task on K CPU workers (a team of every CPU
    /// worker it can get, at most K; `dmda` picks the size), or auto: all
    /// CPU workers with devices (the host factors panels while the devices
    /// update, Hetero-HPL), one worker without.
    #[arg(long, value_name = "K|auto", default_value = "auto")]
    pub panel_team: String,
    /// How the trailing updates are cut: tiles (a task per tile), merged
    /// (one task per device and step over every column it owns, plus one
    /// for the next panel's column: Hetero-HPL), streamed or streamed:ROWS (a device's
    /// GEMMs in blocks of ROWS tile rows through its memory: TianHe-1), or
    /// resident (one device holds the whole matrix, a few large calls per
    /// step, the panel on its own stream one step ahead: MAGMA's
    /// dgetrf_gpu; resident:no-lookahead without the second stream), or
    /// auto (resident with one GPU that holds the matrix; else tiles
    /// without devices or where a tile's GEMM already runs near the
    /// devices' large-call rate; merged when each device holds its share of
    /// the matrix, else streamed).
    #[arg(long, value_name = "SHAPE", default_value = "auto")]
    pub update: String,
    /// With --update resident: copy from pageable host memory (the driver
    /// stages it) instead of page-locking the matrix first, for comparison.
    #[arg(long)]
    pub no_pin: bool,
    /// Write a Chrome/Perfetto trace of the factorisation to FILE (under
    /// mpirun: one file per rank, FILE with `.rankR` before its extension).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Predict this run on the machine described in PLATFORM (TOML, see
    /// bench/platforms/) in simulated time instead of running it here.
    #[arg(long, value_name = "PLATFORM")]
    pub simulate: Option<PathBuf>,
    /// Process grid PxQ of a distributed run under mpirun (tiles dealt
    /// 2-D block-cyclically; default 1xR for R ranks; needs a tessera built
    /// with `--features mpi`). With --simulate every rank is simulated in
    /// this process, and the platform must have P·Q ranks.
    #[arg(long, value_name = "PxQ")]
    pub grid: Option<String>,
    /// How a distributed run deals tile columns over the process columns:
    /// `work` (the default) starts from HPL's block-cyclic dealing and moves
    /// a few columns so that every process column gets the same predicted
    /// work (later columns carry more updates, the last one is often
    /// narrow, and all but the first process column wait for panel 0);
    /// `cyclic` is HPL's block-cyclic dealing; `speed` first measures each
    /// rank's GEMM rate (about 0.1 s, before the timed region, like the
    /// matrix generation) and deals columns in proportion, so a slower core
    /// or node gets fewer (for ranks of unequal speed; see
    /// bench/peers/lu_balance.sh). Tile rows are always cyclic.
    #[arg(long, value_enum, default_value_t = Balance::Work)]
    pub balance: Balance,
}

impl LuArgs {
    /// The tile size the run uses: `--nb` as given (checked with N by
    /// `lu::plan::validate`), else [`DEFAULT_NB`] capped at N (a `tessera lu
    /// --n 256` used to refuse the default it had not asked for).
    pub fn nb(&self) -> usize {
        self.nb_given.unwrap_or(DEFAULT_NB.min(self.n.max(1)))
    }

    /// The front-end (`--front`).
    pub fn front(&self) -> Result<Front, String> {
        match self.front.as_str() {
            "symbolic" => Ok(Front::Symbolic),
            "stf" => Ok(Front::Stf),
            other => Err(format!("unknown --front '{other}' (known: symbolic, stf)")),
        }
    }

    /// How this run is cut into tasks on `rt` (its CPU workers and devices
    /// resolve the `auto`s).
    /// `--panel-team` for a run on `rt`: the team a panel (or, distributed, a
    /// rank's part of a panel) may have; `None`: one worker.
    pub fn panel_team(&self, rt: &Runtime) -> Result<Option<TeamSize>, String> {
        let cpus = rt.config().workers;
        let devices = !rt.config().devices.is_empty();
        Ok(match self.panel_team.as_str() {
            "auto" if devices && cpus > 1 => Some(TeamSize::up_to(cpus)),
            "auto" => None,
            k => match k.parse::<usize>() {
                Ok(0) | Err(_) => {
                    return Err(format!(
                        "--panel-team: expected a number of workers (1 or more) or auto, got '{k}'"
                    ))
                }
                Ok(1) => None,
                Ok(k) if k > cpus => {
                    return Err(format!("--panel-team {k}: this run has {cpus} CPU workers"))
                }
                Ok(k) => Some(TeamSize::up_to(k)),
            },
        })
    }

    pub fn lu_options(&self, rt: &Runtime) -> Result<LuOptions, String> {
        let front = self.front()?;
        let split: Split = self.split.parse().map_err(|e| format!("--split: {e}"))?;
        if split == Split::Adaptive && front == Front::Stf {
            return Err(
                "--split adaptive learns as the factorisation proceeds: it needs --front symbolic"
                    .into(),
            );
        }
        let panel_team = self.panel_team(rt)?;
        let devices = !rt.config().devices.is_empty();
        if !devices && matches!(split, Split::Cyclic | Split::Adaptive) {
            // Issue 42: taken, and meaning nothing, without devices.
            return Err(format!(
                "--split {}: places tile columns between the host and devices, and this run has none (--gpus, --emu, or a platform with accelerators)",
                self.split
            ));
        }
        let update = match self.update.as_str() {
            "auto" => Update::auto(rt, self.n, self.nb()),
            "tiles" => Update::Tiles,
            "merged" => Update::Merged,
            "streamed" => match Update::auto(rt, self.n, self.nb()) {
                s @ Update::Streamed { .. } => s,
                _ => Update::Streamed { rows: 4 },
            },
            s => match s.strip_prefix("streamed:").map(str::parse::<usize>) {
                Some(Ok(rows)) if rows >= 1 => Update::Streamed { rows },
                _ => {
                    return Err(format!(
                        "--update: expected tiles, merged, streamed[:ROWS], resident[:no-lookahead] or auto, got '{s}'"
                    ))
                }
            },
        };
        if update != Update::Tiles && !devices {
            return Err(format!(
                "--update {}: the device-sized updates need devices (--gpus, --emu, or a platform with accelerators)",
                self.update
            ));
        }
        if !update.runs_on_devices(rt) {
            return Err(format!(
                "--update {}: no device may run its tasks (the platform's accelerators list other codelets in `only`): use --update tiles or auto",
                self.update
            ));
        }
        Ok(LuOptions {
            front,
            split,
            panel_team,
            update,
            home_early: true,
        })
    }
}

/// What `opts` says of the panel and the updates, for the run's report.
pub fn describe(opts: &LuOptions) -> String {
    let panel = match opts.panel_team {
        Some(t) => format!("panel: a team of up to {} workers", t.max()),
        None => "panel: one worker".to_string(),
    };
    let update = match opts.update {
        Update::Tiles => "updates: tile tasks".to_string(),
        Update::Merged => "updates: merged per device (one task per device and step, the next panel's column first)".to_string(),
        Update::Streamed { rows } => format!("updates: streamed through the devices in blocks of {rows} tile rows (written through to the host)"),
    };
    format!("{panel}; {update}")
}

/// See [`LuArgs::balance`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Balance {
    /// Equal predicted work per process column, from the cyclic dealing.
    Work,
    /// HPL's block-cyclic dealing.
    Cyclic,
    /// In proportion to each rank's measured GEMM rate.
    Speed,
}

impl Balance {
    /// The dealing of `n`-order tiles of `nb` on `grid`, for the modes that
    /// need no measurement (`speed` is dealt by `run_dist`).
    pub fn layout(self, grid: Grid, n: usize, nb: usize) -> Layout {
        match self {
            Balance::Work => Layout::balanced(grid, n, nb),
            Balance::Cyclic | Balance::Speed => Layout::cyclic(grid, n.div_ceil(nb)),
        }
    }
}

/// Options of `tessera spmv`.
#[derive(clap::Args, Debug)]
pub struct SpmvArgs {
    /// Matrix Market file (coordinate real/integer/pattern; general/symmetric/skew-symmetric).
    #[arg(long, value_name = "FILE.mtx", conflicts_with = "gen")]
    pub matrix: Option<PathBuf>,
    /// Generated matrix: stencil7:N, stencil27:N, powerlaw:N[:AVG[:ALPHA]], banded:N:HALFBW, dense:N.
    // This comment is `--help`'s text, where brackets mean "optional";
    // rustdoc would read `[:ALPHA]` as a link.
    #[allow(rustdoc::broken_intra_doc_links)]
    #[arg(long, value_name = "SPEC", default_value = "stencil27:100")]
    pub gen: String,
    /// Iterations (for cg, the most it runs: also `--max-iters`).
    #[arg(long, alias = "max-iters", default_value_t = 50, value_parser = crate::placement::at_least_one)]
    pub iters: usize,
    /// What to run: spmv (y += A·x repeated), power (power iteration), cg (conjugate gradient, SPD matrices).
    #[arg(long, default_value = "spmv")]
    pub solver: String,
    /// CG stops when ||r|| <= tol·||b|| (also `--rtol`, as PETSc's -ksp_rtol).
    #[arg(long, alias = "rtol", default_value_t = 1e-8)]
    pub tol: f64,
    /// CG's preconditioner: none, or jacobi (the inverted diagonal; PETSc's -pc_type).
    #[arg(long, default_value = "none")]
    pub pc: String,
    /// CG's algorithm: standard (two all-reduces per iteration), or pipelined
    /// (Ghysels–Vanroose: one all-reduce per iteration, hidden behind the SpMV; it costs
    /// more vector traffic and stability: its recursive residual drifts from the true one,
    /// so it reaches a less accurate solution on hard problems; PETSc's -ksp_type pipecg).
    #[arg(long = "cg", default_value = "standard")]
    pub cg: String,
    /// Row blocks per worker (default 16: measured at least as fast as 4 and
    /// 32 on stencil27:150 here, finer blocks even out the two workers'
    /// finish). With --on-device the default is 4 blocks in all: each block
    /// is a device task ending in a stream synchronisation, and on an H200
    /// 256 blocks took 15.7 ms per product against 9.3 ms for 16.
    #[arg(long, value_parser = crate::placement::at_least_one)]
    pub blocks_per_worker: Option<usize>,
    /// Scheduler: ws, prio, dmda, or auto (dmda with devices, else ws).
    #[arg(long, default_value = "auto")]
    pub sched: String,
    /// Run every block on the first device (`--gpus` or `--emu`): the
    /// device's SpMV alone, compared with its device-to-device copy rate.
    #[arg(long)]
    pub on_device: bool,
    /// STREAM triad array length in Mi elements (3 arrays of 8 bytes each).
    #[arg(long, default_value_t = 64, value_parser = crate::placement::at_least_one)]
    pub stream_mi: usize,
    /// With a device (--gpus or --emu): split the rows between the CPU workers and the first
    /// device, balanced at run time (Roadrunner); runs power iteration under dmda.
    #[arg(long)]
    pub balance: bool,
    /// Host peak rate for the balancer's first split, GFLOP/s (default: 50 per CPU worker).
    #[arg(long, value_parser = crate::placement::gflops)]
    pub host_peak_gflops: Option<f64>,
    /// Skip faer's sparse×dense comparison.
    #[arg(long)]
    pub no_faer: bool,
    /// Keep the row blocks' column indices as `u32` only: by default a block whose rows'
    /// columns each rise by at most 65,535 at a time also holds them as 16-bit gaps, which the
    /// CPU kernels read instead (10 bytes per nonzero instead of 12;
    /// `Csr::with_compact_columns`). For measuring the difference side by side.
    #[arg(long)]
    pub no_compact: bool,
    /// With the plain SpMV (`--solver spmv`, CPU workers only): also time the same products
    /// with `u32` column indices, in rounds alternated with the compact ones, and print the
    /// median ratio (holds the matrix's blocks twice).
    #[arg(long, conflicts_with = "no_compact")]
    pub compare_compact: bool,
    /// Write a Chrome/Perfetto trace to FILE.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    #[command(flatten)]
    pub placement: crate::placement::PlacementArgs,
    /// Predict this run on the machine described in PLATFORM (TOML) in
    /// simulated time instead of running it here.
    #[arg(long, value_name = "PLATFORM")]
    pub simulate: Option<PathBuf>,
}

impl SpmvArgs {
    /// Row blocks per worker: `--blocks-per-worker`, or 16.
    pub fn row_blocks_per_worker(&self) -> usize {
        self.blocks_per_worker.unwrap_or(16)
    }
}
