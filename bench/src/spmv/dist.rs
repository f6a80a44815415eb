//! `mpirun -np R tessera spmv ...`: the SpMV driver across ranks (`tessera_linalg::spmv_dist`).
//! Each rank generates or reads only its rows; the parameters are checked to be the same on
//! every rank before anything else; every rank's line is printed by rank 0 in rank order,
//! then one summary line: GFLOP/s and effective GB/s over the slowest rank's time, and the
//! halo bytes per iteration, measured on the transports and as the partition predicts.
//! One function per phase: check, start, load, STREAM, solve, report, traces, check rows.
//!
//! Any error after the start ends every rank (`Ranks::fail`: MPI_Abort after printing), so
//! no rank is left waiting for one that stopped.

use std::time::Instant;

use tessera_engine::dist::{Collectives, Net};
use tessera_engine::Runtime;
use tessera_linalg::solver::{check_square, CgOptions, CgVariant, Preconditioner};
use tessera_linalg::sparse::csr::compact_pays_for;
use tessera_linalg::sparse::gen::GenSpec;
use tessera_linalg::sparse::mm::scan_matrix_market_sized;
use tessera_linalg::sparse::stream::stream_triad;
use tessera_linalg::spmv_dist::{self, DistMatrix, DistStats, MatrixSource, RankInfo};
use tessera_tasks::kernels::{spmv_bytes, spmv_bytes_saved_by_compact, spmv_flops};

use super::plan::{cg_bytes, check_options, stream_elems};
use super::report::{solver_lines, stop_line, true_residual_lines};
use crate::args::SpmvArgs;
use crate::ranks::{rank_trace_path, Ranks};

/// The parameters every rank must agree on, as one string.
pub fn agreed_parameters(args: &SpmvArgs) -> String {
    let matrix = match &args.matrix {
        Some(p) => format!("--matrix {}", p.display()),
        None => format!("--gen {}", args.gen.trim()),
    };
    format!(
        "{matrix} --iters {} --solver {} --tol {:e} --pc {} --cg {} --balance {} --on-device {}",
        args.iters, args.solver, args.tol, args.pc, args.cg, args.balance, args.on_device
    )
}

/// The matrix this rank reads its rows of, checked as a one-process run
/// checks it (issue 28): a regular file (a FIFO would block, `/dev/zero`
/// fill memory), the rank's share of it within the memory budget, and the
/// same content on every rank (nodes without a shared file system can hold
/// different files at one path: size, entries and a checksum are compared).
fn load_source(
    args: &SpmvArgs,
    ranks: &Ranks,
    workers: usize,
) -> Result<(MatrixSource, String), String> {
    let threads = workers + 2;
    let share = |bytes: u64| bytes / ranks.size as u64;
    // The rank's rows of the matrix and its vectors (its own rows and the
    // halo: at most every column), as the one-process budget counts them.
    let budget = |what: &str, n: u64, m: u64, csr: u64| {
        crate::budget::check(
            &format!("{what} on rank {} of {}", ranks.rank, ranks.size),
            &[
                ("its rows of the matrix", share(csr)),
                ("vectors", 4u64.saturating_mul(n.max(m)).saturating_mul(8)),
            ],
            threads,
        )
    };
    match &args.matrix {
        Some(path) => {
            let size =
                tessera_linalg::sparse::mm::check_regular_file(path).map_err(|e| e.to_string())?;
            // Streamed a line at a time; the rank keeps its share of the entries.
            crate::budget::check(
                &format!(
                    "reading {} on rank {} of {}",
                    path.display(),
                    ranks.rank,
                    ranks.size
                ),
                &[("its share of the entries", share(size))],
                threads,
            )?;
            // The row counts (8 bytes a row, on every rank) and the vectors,
            // checked at the size line, before the counts exist.
            let rows = scan_matrix_market_sized(path, |n, m| {
                let (n, m) = (n as u64, m as u64);
                crate::budget::check(
                    &format!(
                        "spmv on {} on rank {} of {}",
                        path.display(),
                        ranks.rank,
                        ranks.size
                    ),
                    &[
                        ("the row counts", n.saturating_add(1).saturating_mul(8)),
                        ("vectors", 4u64.saturating_mul(n.max(m)).saturating_mul(8)),
                    ],
                    threads,
                )
            })
            .map_err(|e| e.to_string())?;
            let (n, m) = (rows.n_rows() as u64, rows.n_cols() as u64);
            let entries = *rows.row_ptr().last().unwrap_or(&0) as u64;
            ranks.check_same(
                &format!("the content of {}", path.display()),
                &format!(
                    "{n} x {m}, {entries} entries, {size} bytes, checksum {:016x}",
                    rows.checksum()
                ),
            )?;
            let csr = entries
                .saturating_mul(12)
                .saturating_add(n.saturating_mul(8));
            budget(&format!("spmv on {}", path.display()), n, m, csr)?;
            Ok((MatrixSource::MatrixMarket(rows), path.display().to_string()))
        }
        None => {
            let g = GenSpec::parse(&args.gen)?;
            let n = g.n_rows() as u64;
            let csr = g.csr_bytes().min(u64::MAX as u128) as u64;
            budget(&format!("spmv --gen {}", args.gen), n, n, csr)?;
            Ok((MatrixSource::Gen(g), args.gen.clone()))
        }
    }
}

/// Run `tessera spmv` as one rank of several; never returns on error (every rank ends).
pub fn run(args: SpmvArgs, ranks: Ranks) -> Result<(), String> {
    match run_inner(&args, &ranks) {
        Ok(()) => Ok(()),
        Err(e) => ranks.fail(&e),
    }
}

/// This rank's run once started: the options, the ranks and their collectives, the
/// runtime, and the checked solver options.
struct Rank<'a> {
    args: &'a SpmvArgs,
    ranks: &'a Ranks,
    coll: &'a Collectives,
    rt: Runtime,
    workers: usize,
    all_workers: String,
    pc: Preconditioner,
    variant: CgVariant,
}

/// This rank's rows: where they come from, their blocks and halo, and the bytes a
/// product streams on them.
struct Share {
    source: MatrixSource,
    mat: DistMatrix,
    info: RankInfo,
    load_s: f64,
    rank_bytes: f64,
}

/// What a solver returns: its name, its statistics, and (products only) this rank's `y`.
type Solved = (&'static str, DistStats, Option<Vec<f64>>);

fn run_inner(args: &SpmvArgs, ranks: &Ranks) -> Result<(), String> {
    let (net, coll) = ranks.net.as_ref().ok_or("no network")?;
    let (pc, variant) = check(args, ranks)?;
    let r = start(args, ranks, coll, pc, variant)?;
    let share = r.load(net)?;
    let stream = r.stream()?;
    let solved = r.solve(&share)?;
    r.rank_lines(&share, &solved, stream)?;
    r.summary(&share, &solved, stream)?;
    r.save_traces()?;
    r.check_rows(share, solved)?;
    // The ranks end together: no rank finalises MPI while another still sends to it.
    coll.barrier()
}

/// The parameters, the same on every rank first, then the same checks, and messages, as
/// in one process; `--balance` and `--on-device` are one process's.
fn check(args: &SpmvArgs, ranks: &Ranks) -> Result<(Preconditioner, CgVariant), String> {
    ranks.check_same("the spmv parameters", &agreed_parameters(args))?;
    let (pc, variant) = check_options(args, false)?;
    if args.balance || args.on_device {
        return Err(
            "--balance and --on-device are single-process options (one node's CPU and device); \
             run without mpirun for them"
                .into(),
        );
    }
    Ok((pc, variant))
}

/// This rank's runtime, and every rank's worker count.
fn start<'a>(
    args: &'a SpmvArgs,
    ranks: &'a Ranks,
    coll: &'a Collectives,
    pc: Preconditioner,
    variant: CgVariant,
) -> Result<Rank<'a>, String> {
    let config = crate::placement::runtime_config_ranks(
        &args.placement,
        &args.sched,
        tessera_engine::Scheduler::Ws,
        ranks,
    )?
    .trace(args.trace.is_some());
    let rt = Runtime::new(config).map_err(|e| e.to_string())?;
    let workers = rt.workers();
    let all_workers = crate::ranks::per_rank(&ranks.gather_counts(workers)?);
    Ok(Rank {
        args,
        ranks,
        coll,
        rt,
        workers,
        all_workers,
        pc,
        variant,
    })
}

/// The starting vector's entry `i`, the same in the run and in the check.
fn x_at(i: usize) -> f64 {
    1.0 + (i % 7) as f64 * 0.125
}

impl Rank<'_> {
    /// Load this rank's rows and split them into blocks; rank 0 says what the matrix is.
    fn load(&self, net: &std::sync::Arc<Net>) -> Result<Share, String> {
        let (args, ranks) = (self.args, self.ranks);
        let t_load = Instant::now();
        let (source, name) = load_source(args, ranks, self.workers)?;
        if args.solver != "spmv" {
            check_square(&args.solver, source.n_rows(), source.n_cols())?;
        }
        // Compact column indices where they pay for the whole matrix (`compact_pays_for`:
        // the same rule on every rank).
        let pays = compact_pays_for(source.row_ptr()[source.n_rows()], source.n_rows());
        let mat = DistMatrix::new(
            &self.rt,
            net,
            self.coll,
            &source,
            self.workers.saturating_mul(args.row_blocks_per_worker()),
            !args.no_compact && pays,
        )?;
        let load_s = t_load.elapsed().as_secs_f64();
        let (n, m, nnz) = mat.shape();
        let info = mat.info();
        if ranks.is_root() {
            println!(
                "matrix {name}: {n} x {m}, {nnz} nonzeros, split over {} ranks by nonzeros; each rank {} only its rows",
                ranks.size,
                if args.matrix.is_some() { "reads" } else { "generates" }
            );
        }
        let rank_bytes = spmv_bytes(
            info.nnz,
            mat.own_rows().len(),
            mat.own_cols().len() + info.halo_in,
        ) - spmv_bytes_saved_by_compact(info.compact.0, info.compact.1);
        Ok(Share {
            source,
            mat,
            info,
            load_s,
            rank_bytes,
        })
    }

    /// The solvers' rates are compared with the STREAM triad run on every rank at once
    /// (the node's bandwidth when the ranks share one), measured here like in one
    /// process; 0 for the products.
    fn stream(&self) -> Result<f64, String> {
        let (args, coll, workers) = (self.args, self.coll, self.workers);
        if args.solver == "spmv" {
            return Ok(0.0);
        }
        let elems = stream_elems(args.stream_mi)?;
        coll.barrier()?;
        let mut s = [stream_triad(elems, workers, 5) / 1e9];
        coll.allreduce_sum(&mut s)?;
        if self.ranks.is_root() {
            println!(
                "STREAM triad ({} ranks x {workers} threads at once, 3 x {} MiB each): {:.1} GB/s in total",
                self.ranks.size,
                args.stream_mi * 8,
                s[0]
            );
        }
        Ok(s[0])
    }

    /// Run the solver `--solver` names on this rank's rows.
    fn solve(&self, share: &Share) -> Result<Solved, String> {
        let (args, rt, coll, mat) = (self.args, &self.rt, self.coll, &share.mat);
        let x_own: Vec<f64> = mat.own_cols().map(x_at).collect();
        match args.solver.as_str() {
            "spmv" => {
                let (y, st) = spmv_dist::repeated_spmv(rt, coll, mat, x_own, args.iters)
                    .map_err(|e| e.to_string())?;
                Ok(("spmv", st, Some(y)))
            }
            "power" => {
                let (_, st) = spmv_dist::power_iteration(rt, coll, mat, x_own, args.iters)
                    .map_err(|e| e.to_string())?;
                if self.ranks.is_root() {
                    for (i, l) in st.iter.history.iter().enumerate() {
                        println!("power {:>4}: ||A x|| = {l:.12e}", i + 1);
                    }
                }
                Ok(("power", st, None))
            }
            "cg" => Ok(("cg", self.cg(mat)?, None)),
            other => Err(format!(
                "unknown --solver '{other}' (known: spmv, power, cg)"
            )),
        }
    }

    /// CG on `b = 1`, and its true residual ||b − A·x|| / ||b|| with one more distributed
    /// multiply; rank 0 prints the residuals and why it stopped.
    fn cg(&self, mat: &DistMatrix) -> Result<DistStats, String> {
        let (args, rt, coll) = (self.args, &self.rt, self.coll);
        let b = vec![1.0; mat.own_rows().len()];
        let opts = CgOptions {
            rtol: args.tol,
            max_iters: args.iters,
            pc: self.pc,
            variant: self.variant,
        };
        let (xs, st) = spmv_dist::conjugate_gradient_with(rt, coll, mat, &b, &opts)
            .map_err(|e| e.to_string())?;
        let ax = mat.apply(rt, xs).map_err(|e| e.to_string())?;
        let mut sums = [
            ax.iter()
                .zip(&b)
                .map(|(p, q)| (p - q) * (p - q))
                .sum::<f64>(),
            b.len() as f64,
        ];
        coll.allreduce_sum(&mut sums)?;
        if self.ranks.is_root() {
            for (i, r) in st.iter.history.iter().enumerate() {
                println!("cg {:>4}: ||r||/||b|| = {r:.3e}", i + 1);
            }
            println!("{}", stop_line(&st.iter, &opts));
            print!(
                "{}",
                true_residual_lines((sums[0] / sums[1]).sqrt(), &st.iter, &opts)
            );
        }
        Ok(st)
    }

    /// Every rank's line (and a solver's split, its rates against its share of the
    /// triad), printed by rank 0 in rank order.
    fn rank_lines(&self, share: &Share, solved: &Solved, stream: f64) -> Result<(), String> {
        let (rank, workers) = (self.ranks.rank, self.workers);
        let (what, st, _) = solved;
        let (info, own) = (&share.info, share.mat.own_rows());
        let k = st.iter.iterations as f64;
        let t = st.iter.spmv_seconds.max(f64::MIN_POSITIVE);
        let mine = format!(
            "rank {rank}: rows {}..{} ({} rows, {} nonzeros), {workers} worker(s), blocks {} interior + {} boundary ({:.1} % of nonzeros on boundary rows, {:.1} % with 16-bit column gaps), halo in {} entries from {} rank(s), out {} entries to {} rank(s); set-up {:.2} s; {} iterations, {t:.3} s in SpMV: {:.2} GFLOP/s, effective {:.1} GB/s on its rows",
            own.start,
            own.end,
            own.len(),
            info.nnz,
            info.blocks.0,
            info.blocks.1,
            100.0 * info.boundary_nnz as f64 / info.nnz.max(1) as f64,
            100.0 * info.compact.0 as f64 / info.nnz.max(1) as f64,
            info.halo_in,
            info.sources,
            info.halo_out,
            info.destinations,
            share.load_s,
            st.iter.iterations,
            spmv_flops(info.nnz) * k / t / 1e9,
            share.rank_bytes * k / t / 1e9,
        );
        let mine = if *what == "spmv" {
            mine
        } else {
            let lines = solver_lines(
                &st.iter,
                share.rank_bytes,
                self.vector_bytes(own.len()),
                stream / self.ranks.size as f64,
                None,
            );
            format!(
                "{mine}\nrank {rank}: {}",
                lines.trim_end().replace('\n', &format!("\nrank {rank}: "))
            )
        };
        let lines = self.coll.allgather(mine.as_bytes())?;
        if self.ranks.is_root() {
            for l in &lines {
                println!("{}", String::from_utf8_lossy(l));
            }
        }
        Ok(())
    }

    /// Bytes a solver's vector work streams per iteration on `rows` rows; 0 for the
    /// products.
    fn vector_bytes(&self, rows: usize) -> f64 {
        match self.args.solver.as_str() {
            "cg" => cg_bytes(rows, self.pc, self.variant),
            "power" => 24.0 * rows as f64,
            _ => 0.0,
        }
    }

    /// The summary: the slowest rank's time; halo bytes measured and predicted.
    fn summary(&self, share: &Share, solved: &Solved, stream: f64) -> Result<(), String> {
        let coll = self.coll;
        let (what, st, _) = solved;
        let (n, m, nnz) = share.mat.shape();
        let info = &share.info;
        let k = st.iter.iterations as f64;
        let t = st.iter.spmv_seconds.max(f64::MIN_POSITIVE);
        let slowest = f64::from_bits(coll.allreduce_max(t.to_bits())?);
        let slowest_total = f64::from_bits(coll.allreduce_max(st.iter.total_seconds.to_bits())?);
        let mut halo = [
            st.bytes_sent as f64,
            st.messages_sent as f64,
            info.halo_bytes_out as f64,
            info.halo_in as f64,
            spmv_bytes_saved_by_compact(info.compact.0, info.compact.1),
        ];
        coll.allreduce_sum(&mut halo)?;
        let [sent, messages, predicted, entries, saved] = halo;
        let spmv_traffic = spmv_bytes(nnz, n, m) - saved;
        if !self.ranks.is_root() {
            return Ok(());
        }
        println!(
            "distributed {what}: {} ranks x {} worker(s), {} iterations in {slowest:.3} s (slowest rank, SpMV part): {:.2} GFLOP/s, effective {:.1} GB/s; halo {:.0} bytes per iteration ({:.0} entries x 8 B + {:.0} messages x 12 B of headers, measured on the transports), predicted by the partition {:.0} bytes",
            self.ranks.size,
            self.all_workers,
            st.iter.iterations,
            spmv_flops(nnz) * k / slowest / 1e9,
            spmv_traffic * k / slowest / 1e9,
            sent / k.max(1.0),
            entries,
            messages / k.max(1.0),
            predicted,
        );
        if *what != "spmv" {
            // The same lines as in one process, for the whole matrix over the slowest rank.
            let mut whole = st.iter.clone();
            whole.spmv_seconds = slowest;
            print!(
                "{}",
                solver_lines(
                    &whole,
                    spmv_traffic,
                    self.vector_bytes(n),
                    stream,
                    Some(slowest_total),
                )
            );
        }
        if *what == "spmv" && (sent / k.max(1.0) - predicted).abs() > 0.5 {
            crate::say!(
                "tessera: warning: the transports sent {} bytes per iteration, the partition predicts {predicted}",
                sent / k.max(1.0)
            );
        }
        Ok(())
    }

    /// `--trace`: one file per rank; rank 0 says how to merge them.
    fn save_traces(&self) -> Result<(), String> {
        let Some(path) = &self.args.trace else {
            return Ok(());
        };
        let out = rank_trace_path(path, self.ranks.rank);
        crate::save_rank_trace(&self.rt, &out, &self.ranks.run_id)?;
        self.coll.barrier()?;
        if self.ranks.is_root() {
            let files: Vec<String> = (0..self.ranks.size)
                .map(|r| rank_trace_path(path, r).display().to_string())
                .collect();
            println!(
                "trace: one file per rank; merge with: tessera trace merge {} -o {}",
                files.join(" "),
                path.display()
            );
        }
        Ok(())
    }

    /// Check this rank's rows of the products `y` against the plain loop on the same
    /// rows, built again; every rank's worst difference decides.
    fn check_rows(&self, share: Share, solved: Solved) -> Result<(), String> {
        let Share { source, mat, .. } = share;
        let (_, st, y) = solved;
        let (m, own) = (mat.shape().1, mat.own_rows());
        mat.unregister(&self.rt).map_err(|e| e.to_string())?;
        let Some(y) = y else {
            return Ok(());
        };
        let k = st.iter.iterations as f64;
        let rows = source.rows(own.clone())?;
        let x: Vec<f64> = (0..m).map(x_at).collect();
        let mut reference = vec![0.0; own.len()];
        rows.spmv_reference(&x, &mut reference);
        let err = y
            .iter()
            .zip(&reference)
            .map(|(got, r)| (got - k * r).abs() / (k * r.abs()).max(1e-300))
            .fold(0.0f64, f64::max);
        let worst = f64::from_bits(self.coll.allreduce_max(err.to_bits())?);
        if self.ranks.is_root() {
            println!("check: max relative difference from the reference loop {worst:.1e} (every rank's rows)");
        }
        if worst.is_nan() || worst > 1e-10 {
            return Err(format!(
                "SpMV result differs from the reference ({worst:e})"
            ));
        }
        Ok(())
    }
}
