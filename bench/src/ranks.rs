//! The ranks of a distributed run, as the drivers see them: under `mpirun`
//! (with the `mpi` feature) MPI is initialised, and every rank gets the
//! network (`Net`) and its collectives; otherwise there is one rank.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tessera_engine::dist::{Collectives, Net};

#[cfg(feature = "mpi")]
pub use tessera_backends::mpi::RawMpi;

/// Stand-in for plain MPI in a build without it: never made.
#[cfg(not(feature = "mpi"))]
pub enum RawMpi {}

#[cfg(not(feature = "mpi"))]
impl RawMpi {
    /// See `tessera_backends::mpi::RawMpi::latency`.
    pub fn latency(&self, _bytes: usize, _iters: usize) -> f64 {
        match *self {}
    }

    /// See `tessera_backends::mpi::RawMpi::bandwidth`.
    pub fn bandwidth(&self, _bytes: usize, _window: usize, _iters: usize) -> f64 {
        match *self {}
    }
}

/// This process's place in the run.
pub struct Ranks {
    /// This rank.
    pub rank: usize,
    /// Number of ranks.
    pub size: usize,
    /// The network and its collectives (one rank: none).
    pub net: Option<(Arc<Net>, Collectives)>,
    /// This run's id, the same on every rank (rank 0's, sent to all at
    /// start-up): recorded in each rank's trace, so that `tessera trace
    /// merge` can refuse traces of different runs.
    pub run_id: String,
    #[cfg(feature = "mpi")]
    mpi: Option<tessera_backends::mpi::Mpi>,
}

/// A new run id: the time and this process's id, in hex (unique enough to
/// tell the runs whose traces one would merge apart).
fn new_run_id() -> String {
    let ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{ns:x}-{:x}", std::process::id())
}

/// The launchers' (size, rank) variables: Open MPI's `mpirun`, then
/// MPICH/Hydra's.
const LAUNCHER_VARS: [(&str, &str); 2] = [
    ("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"),
    ("PMI_SIZE", "PMI_RANK"),
];

/// Whether a launcher started this process as one rank of several: its
/// size variable and its rank variable both set. A size set alone (by hand,
/// or left in the environment) is no launch: said once on stderr, and the
/// process runs alone. Every command decides through this, so `lu` and
/// `topology` agree (issue 42: `lu` refused a hand-set
/// `OMPI_COMM_WORLD_SIZE=2` that `topology` ignored).
pub fn launched_ranks() -> Option<usize> {
    for (size, rank) in LAUNCHER_VARS {
        let Ok(n) = std::env::var(size) else {
            continue;
        };
        if std::env::var_os(rank).is_some() {
            return n.trim().parse().ok();
        }
        static SAID: std::sync::Once = std::sync::Once::new();
        SAID.call_once(|| {
            crate::say!(
                "tessera: warning: {size}={n} is set but {rank} is not: not started by a launcher (mpirun); running as one process"
            )
        });
    }
    None
}

impl Ranks {
    /// Join the run: initialise MPI when started by mpirun.
    pub fn join() -> Result<Ranks, String> {
        match launched_ranks() {
            None => Ok(Ranks::single()),
            #[cfg(not(feature = "mpi"))]
            Some(n) if n <= 1 => Ok(Ranks::single()),
            #[cfg(feature = "mpi")]
            Some(_) => {
                let m = tessera_backends::mpi::init()?;
                if m.size() > 1 {
                    watch_ctrl_c(m.rank(), m.size());
                }
                let net = Net::new(m.transport());
                let coll = Collectives::new(&net);
                let ids = coll.allgather(new_run_id().as_bytes())?;
                let run_id = String::from_utf8_lossy(&ids[0]).into_owned();
                Ok(Ranks {
                    rank: m.rank(),
                    size: m.size(),
                    net: Some((net, coll)),
                    run_id,
                    mpi: Some(m),
                })
            }
            #[cfg(not(feature = "mpi"))]
            Some(n) => Err(format!(
                "started by mpirun with {n} ranks, but this tessera was built without MPI: rebuild with `cargo build --release --features mpi`"
            )),
        }
    }

    /// Bind this rank's MPI communication thread to `cpus` (nothing to do
    /// with one rank).
    pub fn bind_progress_thread(&self, cpus: &[usize]) -> Result<(), String> {
        #[cfg(feature = "mpi")]
        if let Some(m) = &self.mpi {
            return m.bind_progress_thread(cpus);
        }
        let _ = cpus;
        Ok(())
    }

    /// One rank, no network.
    pub fn single() -> Ranks {
        Ranks {
            rank: 0,
            size: 1,
            net: None,
            run_id: new_run_id(),
            #[cfg(feature = "mpi")]
            mpi: None,
        }
    }

    /// Whether this rank prints the run's summary.
    pub fn is_root(&self) -> bool {
        self.rank == 0
    }

    /// The collectives (a one-rank run has none).
    pub fn collectives(&self) -> Option<&Collectives> {
        self.net.as_ref().map(|(_, c)| c)
    }

    /// Refuse to go on unless every rank runs with the same `value` for
    /// `what` (the sizes, the seed): a mismatch is found at start-up.
    pub fn check_same(&self, what: &str, value: &str) -> Result<(), String> {
        match self.collectives() {
            Some(c) => c.check_same(what, value),
            None => Ok(()),
        }
    }

    /// Where this rank shares `cpus`, exactly, with other ranks of its node
    /// (a launcher that did not bind them): its place among them and their
    /// number, in rank order; `None` when no other rank of this node was
    /// given the same CPUs. Collective. The node is the host name.
    pub fn node_share(&self, cpus: &[usize]) -> Result<Option<(usize, usize)>, String> {
        let Some(c) = self.collectives() else {
            return Ok(None);
        };
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let me = format!(
            "{}|{}",
            host.trim(),
            tessera_backends::cpu::format_cpu_list(cpus)
        );
        let all = c.allgather(me.as_bytes())?;
        let same: Vec<usize> = (0..all.len())
            .filter(|&r| all[r] == me.as_bytes())
            .collect();
        let place = same.iter().position(|&r| r == self.rank);
        Ok(place.filter(|_| same.len() > 1).map(|i| (i, same.len())))
    }

    /// Every rank's `count` (its workers), in rank order; collective. A
    /// one-rank run gives `[count]`.
    pub fn gather_counts(&self, count: usize) -> Result<Vec<usize>, String> {
        match self.collectives() {
            Some(c) => Ok(c
                .allgather_f64(count as f64)?
                .into_iter()
                .map(|v| v as usize)
                .collect()),
            None => Ok(vec![count]),
        }
    }

    /// Plain MPI for benchmarks (see `tessera_backends::mpi::Mpi::raw`);
    /// collective. `Err` in a run without MPI.
    pub fn raw_mpi(&self) -> Result<RawMpi, String> {
        #[cfg(feature = "mpi")]
        if let Some(m) = &self.mpi {
            return m.raw();
        }
        Err("no MPI in this run (start it with mpirun, from a build with --features mpi)".into())
    }

    /// End the whole job after this rank reported `error`: with several
    /// ranks, MPI_Abort, so no rank is left waiting.
    pub fn fail(&self, error: &str) -> ! {
        #[cfg(feature = "mpi")]
        if let (Some(m), true, true) = (&self.mpi, self.size > 1, crate::interrupt::requested()) {
            // The run failed because Ctrl-C stopped it: say that, not its error.
            crate::say!(
                "tessera: interrupted (Ctrl-C) on rank {} of {}: ending the job on every rank",
                self.rank,
                self.size
            );
            m.abort(i32::from(crate::interrupt::EXIT_STATUS));
        }
        crate::say!(
            "tessera: error (rank {} of {}): {error}",
            self.rank,
            self.size
        );
        #[cfg(feature = "mpi")]
        if let (Some(m), true) = (&self.mpi, self.size > 1) {
            // Let the other ranks print theirs (they were told through the
            // engine's abort messages where a run was under way).
            std::thread::sleep(std::time::Duration::from_millis(200));
            m.abort(1);
        }
        std::process::exit(1)
    }
}

/// Ctrl-C on one rank of several ends the job on every rank (issue 28: the
/// interrupted rank waited for the others, which ran to the end): a thread
/// polls for the first SIGINT, says so and calls `MPI_Abort` with Ctrl-C's
/// status. A run cannot stop cleanly on one rank alone: the others would
/// wait for its messages. Saves are atomic, so none is left half-made.
#[cfg(feature = "mpi")]
fn watch_ctrl_c(rank: usize, size: usize) {
    std::thread::Builder::new()
        .name("ctrl-c".into())
        .spawn(move || loop {
            if crate::interrupt::requested() {
                crate::say!(
                    "tessera: interrupted (Ctrl-C) on rank {rank} of {size}: ending the job on every rank"
                );
                tessera_backends::mpi::abort_job(i32::from(crate::interrupt::EXIT_STATUS));
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        })
        .expect("a thread starts");
}

/// Under mpirun with several ranks, a subcommand that runs in one process
/// (`topology`, `--simulate`, `calibrate`, ...) ends the whole job with a
/// message before it starts: MPI is initialised first, so no other rank is
/// left in MPI's start-up, then `MPI_Abort` (issue 28: such a rank exited 0
/// without initialising MPI, and the others waited forever). Nothing to do
/// with one rank, or in a build without MPI (its ranks never start MPI).
pub fn refuse_under_mpirun(what: &str) {
    #[cfg(feature = "mpi")]
    if let Some(n @ 2..) = launched_ranks() {
        let m = tessera_backends::mpi::init();
        let rank = std::env::var("OMPI_COMM_WORLD_RANK")
            .or_else(|_| std::env::var("PMI_RANK"))
            .unwrap_or_else(|_| "?".into());
        crate::say!(
            "tessera: error (rank {rank} of {n}): `tessera {what}` runs in one process, not as one of {n} ranks: run it without mpirun (or with -np 1); ending the job"
        );
        match m {
            Ok(m) => m.abort(1),
            Err(e) => {
                crate::say!("tessera: error: MPI could not start: {e}");
                std::process::exit(1)
            }
        }
    }
    let _ = what;
}

/// The last thing a process does before it exits with `status`: under
/// mpirun, a rank that did not initialise MPI (a path that needs no
/// network: `topology`, `--simulate`, an early error) does so now, so that
/// the other ranks' start-up does not wait for it forever (issue 28); then,
/// after a failure, `MPI_Abort` ends the whole job with `status`, and after
/// a success MPI is finalised with the others.
pub fn before_exit(status: u8) {
    #[cfg(feature = "mpi")]
    if launched_ranks().is_some_and(|n| n > 1) && !tessera_backends::mpi::is_initialized() {
        match tessera_backends::mpi::init() {
            Ok(m) if status != 0 => m.abort(i32::from(status)),
            Ok(m) => drop(m),
            Err(e) => crate::say!("tessera: error: under mpirun, MPI could not start: {e}"),
        }
    }
    let _ = status;
}

/// `path` for rank `rank` of a distributed run: `out.json` → `out.rank3.json`.
pub fn rank_path(path: &std::path::Path, rank: usize) -> std::path::PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match path.extension() {
        Some(ext) => format!("{stem}.rank{rank}.{}", ext.to_string_lossy()),
        None => format!("{stem}.rank{rank}"),
    };
    path.with_file_name(name)
}

/// Per-rank worker counts as a report gives them: one figure where every
/// rank has it, else each rank's, said to differ (issue 42: ranks started
/// with different `--workers` were reported as rank 0's one figure).
pub fn per_rank(counts: &[usize]) -> String {
    match counts {
        [first, rest @ ..] if rest.iter().all(|c| c == first) => first.to_string(),
        _ => format!(
            "{} (ranks started with different --workers)",
            counts
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// `out.json` → `out.rank3.json`: the trace file of one rank.
pub fn rank_trace_path(path: &Path, rank: usize) -> PathBuf {
    let stem = path
        .file_stem()
        .map_or_else(|| "trace".to_owned(), |s| s.to_string_lossy().into_owned());
    let name = match path.extension() {
        Some(ext) => format!("{stem}.rank{rank}.{}", ext.to_string_lossy()),
        None => format!("{stem}.rank{rank}"),
    };
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    //! Proves that per-rank counts read as one figure only where they agree.
    use super::per_rank;

    #[test]
    fn counts_that_differ_are_given_each() {
        assert_eq!(per_rank(&[2, 2, 2]), "2");
        assert_eq!(
            per_rank(&[1, 2]),
            "1, 2 (ranks started with different --workers)"
        );
    }
}
