//! `mpirun -np R tessera spmv ...`: the SpMV driver across ranks (`tessera_linalg::spmv_dist`).
//! Each rank generates or reads only its rows; the parameters are checked to be the same on
//! every rank before anything else; every rank's line is printed by rank 0 in rank order,
//! then one summary line: GFLOP/s and effective GB/s over the slowest rank's time, and the
//! halo bytes per iteration, measured on the transports and as the partition predicts.
//!
//! Any error after the start ends every rank (`Ranks::fail`: MPI_Abort after printing), so
//! no rank is left waiting for one that stopped.

use std::time::Instant;

use tessera_engine::Runtime;
use tessera_linalg::solver::cg::check_rtol;
use tessera_linalg::solver::{check_square, CgOptions, CgVariant, Preconditioner};
use tessera_linalg::sparse::csr::compact_pays_for;
use tessera_linalg::sparse::gen::GenSpec;
use tessera_linalg::sparse::mm::scan_matrix_market_sized;
use tessera_linalg::sparse::stream::stream_triad;
use tessera_linalg::spmv_dist::{self, DistMatrix, MatrixSource};
use tessera_tasks::kernels::{spmv_bytes, spmv_bytes_saved_by_compact, spmv_flops};

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

fn run_inner(args: &SpmvArgs, ranks: &Ranks) -> Result<(), String> {
    let (net, coll) = ranks.net.as_ref().ok_or("no network")?;
    // First, before anything a rank could do differently.
    ranks.check_same("the spmv parameters", &agreed_parameters(args))?;
    if args.iters == 0 {
        return Err("--iters must be at least 1".into());
    }
    // The same checks, and messages, as in one process.
    if !matches!(args.solver.as_str(), "spmv" | "power" | "cg") {
        return Err(format!(
            "unknown --solver '{}' (known: spmv, power, cg)",
            args.solver
        ));
    }
    check_rtol(args.tol)?;
    let pc: Preconditioner = args.pc.parse()?;
    let variant: CgVariant = args.cg.parse()?;
    crate::spmv::plan::check_cg_options(&args.solver, pc, variant)?;
    if args.balance || args.on_device {
        return Err(
            "--balance and --on-device are single-process options (one node's CPU and device); \
             run without mpirun for them"
                .into(),
        );
    }
    let config = crate::placement::runtime_config_ranks(
        &args.placement,
        &args.sched,
        tessera_engine::Scheduler::Ws,
        ranks,
    )?
    .trace(args.trace.is_some());
    let rt = Runtime::new(config).map_err(|e| e.to_string())?;
    let workers = rt.workers();
    let (rank, size) = (ranks.rank, ranks.size);
    let all_workers = crate::ranks::per_rank(&ranks.gather_counts(workers)?);

    let t_load = Instant::now();
    let (source, name) = load_source(args, ranks, workers)?;
    if args.solver != "spmv" {
        check_square(&args.solver, source.n_rows(), source.n_cols())?;
    }
    // Compact column indices where they pay for the whole matrix (`compact_pays_for`: the
    // same rule on every rank).
    let pays = compact_pays_for(source.row_ptr()[source.n_rows()], source.n_rows());
    let mat = DistMatrix::new(
        &rt,
        net,
        coll,
        &source,
        workers.saturating_mul(args.row_blocks_per_worker()),
        !args.no_compact && pays,
    )?;
    let load_s = t_load.elapsed().as_secs_f64();
    let (n, m, nnz) = mat.shape();
    let info = mat.info();
    if ranks.is_root() {
        println!(
            "matrix {name}: {n} x {m}, {nnz} nonzeros, split over {size} ranks by nonzeros; each rank {} only its rows",
            if args.matrix.is_some() { "reads" } else { "generates" }
        );
    }
    let own = mat.own_rows();
    let x_at = |i: usize| 1.0 + (i % 7) as f64 * 0.125;
    let x_own: Vec<f64> = mat.own_cols().map(x_at).collect();
    let rank_bytes = spmv_bytes(info.nnz, own.len(), mat.own_cols().len() + info.halo_in)
        - spmv_bytes_saved_by_compact(info.compact.0, info.compact.1);
    // The solvers' rates are compared with the STREAM triad run on every rank at once (the
    // node's bandwidth when the ranks share one), measured here like in one process.
    let stream = if args.solver == "spmv" {
        0.0
    } else {
        let elems = crate::spmv::plan::stream_elems(args.stream_mi)?;
        coll.barrier()?;
        let mut s = [stream_triad(elems, workers, 5) / 1e9];
        coll.allreduce_sum(&mut s)?;
        if ranks.is_root() {
            println!(
                "STREAM triad ({size} ranks x {workers} threads at once, 3 x {} MiB each): {:.1} GB/s in total",
                args.stream_mi * 8,
                s[0]
            );
        }
        s[0]
    };

    let (what, st, y) = match args.solver.as_str() {
        "spmv" => {
            let (y, st) = spmv_dist::repeated_spmv(&rt, coll, &mat, x_own, args.iters)
                .map_err(|e| e.to_string())?;
            ("spmv", st, Some(y))
        }
        "power" => {
            let (_, st) = spmv_dist::power_iteration(&rt, coll, &mat, x_own, args.iters)
                .map_err(|e| e.to_string())?;
            if ranks.is_root() {
                for (i, l) in st.iter.history.iter().enumerate() {
                    println!("power {:>4}: ||A x|| = {l:.12e}", i + 1);
                }
            }
            ("power", st, None)
        }
        "cg" => {
            let b = vec![1.0; own.len()];
            let opts = CgOptions {
                rtol: args.tol,
                max_iters: args.iters,
                pc,
                variant,
            };
            let (xs, st) = spmv_dist::conjugate_gradient_with(&rt, coll, &mat, &b, &opts)
                .map_err(|e| e.to_string())?;
            // True residual ||b − A·x|| / ||b||, with one more distributed multiply.
            let ax = mat.apply(&rt, xs).map_err(|e| e.to_string())?;
            let mut sums = [
                ax.iter()
                    .zip(&b)
                    .map(|(p, q)| (p - q) * (p - q))
                    .sum::<f64>(),
                b.len() as f64,
            ];
            coll.allreduce_sum(&mut sums)?;
            if ranks.is_root() {
                for (i, r) in st.iter.history.iter().enumerate() {
                    println!("cg {:>4}: ||r||/||b|| = {r:.3e}", i + 1);
                }
                println!("{}", crate::spmv::report::stop_line(&st.iter, &opts));
                print!(
                    "{}",
                    crate::spmv::report::true_residual_lines(
                        (sums[0] / sums[1]).sqrt(),
                        &st.iter,
                        &opts
                    )
                );
            }
            ("cg", st, None)
        }
        other => {
            return Err(format!(
                "unknown --solver '{other}' (known: spmv, power, cg)"
            ))
        }
    };
    let k = st.iter.iterations as f64;
    let t = st.iter.spmv_seconds.max(f64::MIN_POSITIVE);

    // Every rank's line, printed by rank 0 in rank order.
    let mine = format!(
        "rank {rank}: rows {}..{} ({} rows, {} nonzeros), {workers} worker(s), blocks {} interior + {} boundary ({:.1} % of nonzeros on boundary rows, {:.1} % with 16-bit column gaps), halo in {} entries from {} rank(s), out {} entries to {} rank(s); set-up {load_s:.2} s; {} iterations, {t:.3} s in SpMV: {:.2} GFLOP/s, effective {:.1} GB/s on its rows",
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
        st.iter.iterations,
        spmv_flops(info.nnz) * k / t / 1e9,
        rank_bytes * k / t / 1e9,
    );
    let vector_bytes = match args.solver.as_str() {
        "cg" => crate::spmv::plan::cg_bytes(own.len(), pc, variant),
        "power" => 24.0 * own.len() as f64,
        _ => 0.0,
    };
    let mine = if what == "spmv" {
        mine
    } else {
        // This rank's split, its rates against its share of the triad.
        let lines = crate::spmv::report::solver_lines(
            &st.iter,
            rank_bytes,
            vector_bytes,
            stream / size as f64,
            None,
        );
        format!(
            "{mine}\nrank {rank}: {}",
            lines.trim_end().replace('\n', &format!("\nrank {rank}: "))
        )
    };
    let lines = coll.allgather(mine.as_bytes())?;
    if ranks.is_root() {
        for l in &lines {
            println!("{}", String::from_utf8_lossy(l));
        }
    }

    // The summary: the slowest rank's time; halo bytes measured and predicted.
    let slowest = coll.allreduce_max(t.to_bits())?;
    let slowest = f64::from_bits(slowest);
    let slowest_total = f64::from_bits(coll.allreduce_max(st.iter.total_seconds.to_bits())?);
    let total_vector_bytes = match args.solver.as_str() {
        "cg" => crate::spmv::plan::cg_bytes(n, pc, variant),
        "power" => 24.0 * n as f64,
        _ => 0.0,
    };
    let mut halo = [
        st.bytes_sent as f64,
        st.messages_sent as f64,
        info.halo_bytes_out as f64,
        info.halo_in as f64,
        spmv_bytes_saved_by_compact(info.compact.0, info.compact.1),
    ];
    coll.allreduce_sum(&mut halo)?;
    let [sent, messages, predicted, entries, saved] = halo;
    let flops = spmv_flops(nnz) * k;
    let spmv_traffic = spmv_bytes(nnz, n, m) - saved;
    let bytes = spmv_traffic * k;
    if ranks.is_root() {
        println!(
            "distributed {what}: {size} ranks x {all_workers} worker(s), {} iterations in {slowest:.3} s (slowest rank, SpMV part): {:.2} GFLOP/s, effective {:.1} GB/s; halo {:.0} bytes per iteration ({:.0} entries x 8 B + {:.0} messages x 12 B of headers, measured on the transports), predicted by the partition {:.0} bytes",
            st.iter.iterations,
            flops / slowest / 1e9,
            bytes / slowest / 1e9,
            sent / k.max(1.0),
            entries,
            messages / k.max(1.0),
            predicted,
        );
        if what != "spmv" {
            // The same lines as in one process, for the whole matrix over the slowest rank.
            let mut whole = st.iter.clone();
            whole.spmv_seconds = slowest;
            print!(
                "{}",
                crate::spmv::report::solver_lines(
                    &whole,
                    spmv_traffic,
                    total_vector_bytes,
                    stream,
                    Some(slowest_total),
                )
            );
        }
        if what == "spmv" && (sent / k.max(1.0) - predicted).abs() > 0.5 {
            eprintln!(
                "tessera: warning: the transports sent {} bytes per iteration, the partition predicts {predicted}",
                sent / k.max(1.0)
            );
        }
    }

    if let Some(path) = &args.trace {
        let out = rank_trace_path(path, rank);
        crate::save_rank_trace(&rt, &out, &ranks.run_id)?;
        coll.barrier()?;
        if ranks.is_root() {
            let files: Vec<String> = (0..size)
                .map(|r| rank_trace_path(path, r).display().to_string())
                .collect();
            println!(
                "trace: one file per rank; merge with: tessera trace merge {} -o {}",
                files.join(" "),
                path.display()
            );
        }
    }

    // Check this rank's rows against the plain loop on the same rows, built again.
    mat.unregister(&rt).map_err(|e| e.to_string())?;
    if let Some(y) = y {
        let rows = source.rows(own.clone())?;
        let x: Vec<f64> = (0..m).map(x_at).collect();
        let mut reference = vec![0.0; own.len()];
        rows.spmv_reference(&x, &mut reference);
        let err = y
            .iter()
            .zip(&reference)
            .map(|(got, r)| (got - k * r).abs() / (k * r.abs()).max(1e-300))
            .fold(0.0f64, f64::max);
        let worst = coll.allreduce_max(err.to_bits())?;
        let worst = f64::from_bits(worst);
        if ranks.is_root() {
            println!("check: max relative difference from the reference loop {worst:.1e} (every rank's rows)");
        }
        if worst.is_nan() || worst > 1e-10 {
            return Err(format!(
                "SpMV result differs from the reference ({worst:e})"
            ));
        }
    }
    // The ranks end together: no rank finalises MPI while another still sends to it.
    coll.barrier()
}
