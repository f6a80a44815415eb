//! `tessera lu`: the HPL-style driver. Generates a seeded random matrix,
//! factors it with the task-graph LU, solves, and prints HPL's result block
//! with the scaled residual check.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tessera_engine::Runtime;
use tessera_linalg::hpl::{generate_matrix, generate_rhs, hpl_flops, hpl_residual, HPL_THRESHOLD};
use tessera_linalg::lu::dist::{Grid, Layout};
use tessera_linalg::lu::{lu_factor, solve_from_factors};

use crate::args::{Balance, LuArgs};
use crate::lu_sizing::{
    check_grid_ranks, progress_bar, warn_if_overhead_bound, DIST_FRONT_ONLY, TILE_HANDLE_BYTES,
};
use crate::report::{passed, print_hpl_block, print_split_shares, residual_line};

/// Check the sizes before allocating anything.
pub fn validate(n: usize, nb: usize) -> Result<(), String> {
    if n == 0 {
        return Err("--n must be at least 1".into());
    }
    if nb == 0 {
        return Err("--nb must be at least 1".into());
    }
    if nb > n {
        return Err(format!("--nb {nb} is larger than --n {n}; use nb <= n"));
    }
    Ok(())
}

/// Every big buffer of an LU run, for [`crate::budget::check`]: the tiled
/// matrix, each tile's handle (with its dependency state: about 2 KiB, see
/// `tests/tests/lu_memory.rs`), replicas on emulated devices (host memory, up to
/// each device's limit), the solve's vectors, and the runtime itself.
fn buffers(n: usize, nb: usize, sim_devices: &[Option<u64>]) -> Vec<(&'static str, u64)> {
    let matrix = (n as u64).saturating_mul(n as u64).saturating_mul(8);
    let tiles = (n.div_ceil(nb) as u64).pow(2);
    let replicas = sim_devices
        .iter()
        .map(|limit| limit.map_or(matrix, |l| l.min(matrix)))
        .fold(0u64, u64::saturating_add);
    vec![
        ("the matrix", matrix),
        ("tile handles", tiles.saturating_mul(TILE_HANDLE_BYTES)),
        ("replicas on emulated devices", replicas),
        ("vectors", 4 * 8 * n as u64),
        ("the runtime", 64 << 20),
    ]
}

pub fn run(args: LuArgs) -> Result<(), String> {
    if let Some(platform) = &args.simulate {
        if args.balance == Balance::Speed {
            return Err("--balance speed measures the ranks' own cores; a simulated run (--simulate) deals by --balance work or cyclic".into());
        }
        return crate::simulate::lu(&args, platform);
    }
    validate(args.n, args.nb)?;
    let resident = crate::lu_resident::options(&args)?;
    let ranks = crate::ranks::Ranks::join()?;
    if resident.is_some() && (ranks.size > 1 || args.grid.is_some()) {
        return Err(
            "--update resident runs on one device of one process (no --grid, no mpirun)".into(),
        );
    }
    if args.balance == Balance::Speed && ranks.size == 1 && args.grid.is_none() {
        return Err("--balance speed deals tile columns over the ranks of a distributed run (mpirun with --grid); one process balances its workers by itself".into());
    }
    if ranks.size > 1 || args.grid.is_some() {
        return match run_dist(&args, &ranks) {
            Ok(()) => Ok(()),
            // No rank may be left waiting for this one: end the job.
            Err(e) if ranks.size > 1 => ranks.fail(&e),
            Err(e) => Err(e),
        };
    }
    let config = crate::placement::runtime_config(
        &args.placement,
        &args.sched,
        tessera_engine::Scheduler::Prio,
    )?
    .trace(args.trace.is_some());
    let (sims, threads) = crate::budget::config_needs(&config);
    crate::budget::check(
        &format!("lu --n {} --nb {}", args.n, args.nb),
        &buffers(args.n, args.nb, &sims),
        threads,
    )?;
    warn_if_overhead_bound(args.n, args.nb);
    // The GPUs' own dgemm rate (cuBLAS, measured when each was opened): the
    // LU's physical reference on a GPU run.
    let gpu_dgemm: f64 = config
        .devices
        .iter()
        .filter(|d| d.arch() == "cuda")
        .map(|d| d.peak_flops())
        .sum();
    let rt = Runtime::new(config).map_err(|e| e.to_string())?;
    let resident = resident.or_else(|| crate::lu_resident::auto(&args, &rt));
    crate::lu_resident::check_no_pin(&args, resident)?;
    if let Some(resident) = resident {
        return crate::lu_resident::run(&args, &rt, resident, gpu_dgemm);
    }
    let opts = args.lu_options(&rt)?;
    let (n, nb) = (args.n, args.nb);

    let a = generate_matrix(n, nb, args.seed);
    let b = generate_rhs(n, args.seed);

    let t0 = Instant::now();
    let finished = AtomicBool::new(false);
    let (result, time) = std::thread::scope(|s| {
        let (rt, finished) = (&rt, &finished);
        let bar = s.spawn(move || progress_bar(hpl_flops(n), || rt.flops_done(), finished));
        let result = crate::interrupt::watch(rt, || lu_factor(rt, a, &opts));
        let result = result.map(|lu| {
            let x = solve_from_factors(&lu.factors, &lu.ipiv, &b);
            (lu.device_shares, x)
        });
        let time = t0.elapsed().as_secs_f64();
        finished.store(true, Ordering::Relaxed);
        let _ = bar.join();
        (result, time)
    });
    let (shares, x) = match result {
        Ok(r) => r,
        Err(_) if rt.is_interrupted() => {
            return crate::interrupt::stopped(&rt, args.trace.as_deref())
        }
        Err(e) => return Err(format!("LU failed: {e}")),
    };
    let gflops = hpl_flops(n) / time / 1e9;
    let resid = hpl_residual(n, nb, args.seed, &x, &b);

    let tv = format!("TS{}{}", rt.scheduler_name().to_uppercase(), rt.workers());
    print_hpl_block(&tv, n, nb, (1, 1), time, gflops, &residual_line(resid));
    println!(
        "workers {}  scheduler {}  front {:?}  tiles {}x{}",
        rt.workers(),
        rt.scheduler_name(),
        opts.front,
        n.div_ceil(nb),
        n.div_ceil(nb)
    );
    if opts.panel_team.is_some() || opts.update != tessera_linalg::lu::Update::Tiles {
        println!("{}", crate::args::describe(&opts));
    }

    print_split_shares(&shares);
    if gpu_dgemm > 0.0 {
        println!(
            "LU {gflops:.1} GFLOP/s = {:.1} % of the GPUs' cuBLAS dgemm ({:.1} GFLOP/s, measured in this run)",
            gflops * 1e9 / gpu_dgemm * 100.0,
            gpu_dgemm / 1e9
        );
    }
    crate::wrap_up(&rt, args.trace.as_deref(), &args.placement)?;
    if !passed(resid) {
        return Err(format!(
            "residual check FAILED ({resid:e} >= {HPL_THRESHOLD})"
        ));
    }
    Ok(())
}

/// How many tile columns each process column of `layout` holds, e.g. `10 9`.
fn columns_per_pcol(layout: &Layout) -> String {
    let cols: Vec<String> = layout
        .columns_per_pcol()
        .iter()
        .map(|c| c.to_string())
        .collect();
    cols.join(" ")
}

/// The distributed LU under mpirun (`tessera_linalg::lu::dist`): every rank
/// factors its share, the solve and the residual use distributed norms, and
/// rank 0 prints HPL's block with the real P and Q.
fn run_dist(args: &LuArgs, ranks: &crate::ranks::Ranks) -> Result<(), String> {
    use std::sync::Arc;
    use tessera_engine::dist::symbolic;
    use tessera_linalg::lu::dist::DistLu;

    let grid = match &args.grid {
        Some(g) => Grid::parse(g)?,
        None => Grid {
            p: 1,
            q: ranks.size,
        },
    };
    check_grid_ranks(grid.p, grid.q, ranks.size, || {
        if ranks.size == 1 {
            "this is one process (run it under `mpirun -np N`, or predict it with --simulate PLATFORM)".to_string()
        } else {
            format!("mpirun started {}", ranks.size)
        }
    })?;
    let (n, nb, me) = (args.n, args.nb, ranks.rank);
    ranks.check_same(
        "the problem (N NB seed grid front balance)",
        &format!(
            "{n} {nb} {} {}x{} {} {:?}",
            args.seed, grid.p, grid.q, args.front, args.balance
        ),
    )?;
    if args.front != "symbolic" {
        return Err(DIST_FRONT_ONLY.into());
    }
    let (net, coll) = ranks
        .net
        .as_ref()
        .ok_or("a distributed run needs mpirun (and a tessera built with --features mpi)")?;
    let config = crate::placement::runtime_config_ranks(
        &args.placement,
        &args.sched,
        tessera_engine::Scheduler::Prio,
        ranks,
    )?
    .trace(args.trace.is_some());
    let all_workers = crate::ranks::per_rank(&ranks.gather_counts(config.workers)?);
    let t = n.div_ceil(nb);
    let layout = match args.balance {
        Balance::Work | Balance::Cyclic => {
            let layout = args.balance.layout(grid, n, nb);
            if ranks.is_root() && args.balance == Balance::Work && grid.q > 1 {
                println!(
                    "balance: work -> tile columns per process column {} ({} of {t} dealt otherwise than cyclically)",
                    columns_per_pcol(&layout),
                    layout.moved_from_cyclic(),
                );
            }
            layout
        }
        Balance::Speed => {
            // Every rank measures at once (so each core is as loaded as it
            // will be in the run), with its own workers, then all deal the
            // same columns from the same gathered rates.
            let calib = Runtime::new(config.clone().trace(false)).map_err(|e| e.to_string())?;
            coll.barrier()?;
            let started = Instant::now();
            let rate = tessera_linalg::lu::dist::layout::measure_gemm_rate(
                &calib,
                nb.min(n).max(1),
                Duration::from_millis(100),
            )
            .map_err(|e| format!("measuring this rank's GEMM rate: {e}"))?;
            drop(calib);
            let speeds = coll
                .allgather_f64(rate)
                .map_err(|e| format!("gathering the ranks' GEMM rates: {e}"))?;
            let layout = Layout::weighted(grid, t, &speeds)?;
            if ranks.is_root() {
                let rates: Vec<String> = speeds.iter().map(|s| format!("{:.1}", s / 1e9)).collect();
                println!(
                    "balance: GEMM GFLOP/s per rank {} (measured in {:.2} s) -> tile columns per process column {}{}",
                    rates.join(" "),
                    started.elapsed().as_secs_f64(),
                    columns_per_pcol(&layout),
                    if layout.is_cyclic() { " (cyclic)" } else { "" },
                );
            }
            layout
        }
    };
    let threads = config.workers + config.devices.len() + 3;
    // This rank's share: its tiles, the panels it factors and keeps (P > 1:
    // the diagonal ranks keep their panels' L), its copies of other ranks'
    // tiles (`DistLu::tile_copies`: with the column-first priorities a rank
    // holds them until near the end; at N=8192 NB=448 on 1x2 that is 88 and
    // 96 tiles, 138 and 152 MiB, where "two panels in flight" said 58 MiB:
    // peak RSS measured 438 and 447 MiB per rank, more than the old total
    // allowed for; they are all allocated at set-up now, see
    // `DistLu::copy_pool`), the messages in flight (two buffers of a tile
    // column, also reserved at set-up) and the solve's vectors.
    let t = t as u64;
    let tile = (nb * nb * 8) as u64;
    let owned = (0..t)
        .flat_map(|j| (0..t).map(move |i| (i, j)))
        .filter(|&(i, j)| layout.owner(i as usize, j as usize) == me)
        .count() as u64;
    crate::budget::check(
        &format!(
            "lu --n {n} --nb {nb} on rank {me} of a {}x{} grid",
            grid.p, grid.q
        ),
        &[
            ("this rank's tiles", owned.saturating_mul(tile)),
            (
                "copies of other ranks' tiles (allocated at set-up)",
                (DistLu::tile_copies(n, nb, layout.clone(), me) as u64).saturating_mul(tile),
            ),
            ("messages in flight (two panels)", 2 * t * tile),
            ("vectors", 6 * 8 * n as u64),
            ("the runtime", 64 << 20),
        ],
        threads,
    )?;
    let rt = Runtime::new(config).map_err(|e| e.to_string())?;
    let team = args.panel_team(&rt)?;
    let lu = Arc::new(DistLu::with_layout(&rt, n, nb, args.seed, layout, me).with_panel_team(team));
    coll.barrier()?;
    let t0 = Instant::now();
    let stats = symbolic::run(&rt, net, Arc::clone(&lu)).map_err(|e| format!("LU failed: {e}"))?;
    let factor_time = t0.elapsed().as_secs_f64();
    let held = lu.take_factors(&rt).map_err(|e| e.to_string())?;
    let x = lu.solve(&held, coll)?;
    let mine = t0.elapsed().as_secs_f64();
    // HPL's time: the slowest rank's factorisation and solve; the residual
    // check is outside it, as in HPL and in the single-process driver.
    let time = coll.allreduce_max((mine * 1e9) as u64)? as f64 * 1e-9;
    let resid = lu.residual(&x, coll)?;
    let gflops = hpl_flops(n) / time / 1e9;
    let predicted = lu.predicted_bytes_sent();
    let sent = net.transport().counters();
    println!(
        "rank {me} ({},{}): factor {factor_time:.2} s, solve {:.3} s, {} tasks, {} messages with {} of data (model {}), {} sent in all",
        me / grid.q,
        me % grid.q,
        mine - factor_time,
        stats.unfold.instantiated,
        stats.messages,
        tessera_engine::fmt::bytes(stats.bytes),
        tessera_engine::fmt::bytes(predicted),
        tessera_engine::fmt::bytes(sent.bytes_sent),
    );
    if let Some(path) = &args.trace {
        let path = crate::ranks::rank_path(path, me);
        crate::save_rank_trace(&rt, &path, &ranks.run_id)?;
    }
    coll.barrier()?;
    if ranks.is_root() {
        let tv = format!("TS{}{}", rt.scheduler_name().to_uppercase(), rt.workers());
        print_hpl_block(
            &tv,
            n,
            nb,
            (grid.p, grid.q),
            time,
            gflops,
            &residual_line(resid),
        );
        println!(
            "ranks {} ({}x{})  workers {all_workers} per rank  scheduler {}  tiles {t}x{t}",
            ranks.size,
            grid.p,
            grid.q,
            rt.scheduler_name()
        );
    }
    if !passed(resid) {
        return Err(format!(
            "residual check FAILED ({resid:e} >= {HPL_THRESHOLD})"
        ));
    }
    Ok(())
}
