//! `--simulate PLATFORM`: the drivers' runs predicted on a described machine
//! in simulated time (`tessera_engine::simulate`), printing the same result
//! block as a real run, marked as simulated.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use tessera_engine::simulate::{Platform, Simulation};
use tessera_engine::{Config, Runtime, Scheduler};
use tessera_linalg::hpl::hpl_flops;
use tessera_linalg::lu::{lu_simulate, Front};

use crate::args::{LuArgs, SpmvArgs};
use crate::placement::PlacementArgs;
use crate::report::{print_hpl_block, print_lu_shape, print_split_shares};
use crate::simulate_checks as checks;

/// Load a platform file and make a simulation of it, once the options
/// and the file pass `simulate_checks` (no option of this machine, no
/// unknown codelet, `--workers` within the cap).
pub fn load(path: &Path, placement: &PlacementArgs) -> Result<Arc<Simulation>, String> {
    checks::placement(placement, path)?;
    let platform = Platform::load(path).map_err(|e| e.to_string())?;
    checks::codelet_names(&platform, path)?;
    checks::workers(placement.workers, &platform)?;
    Simulation::new(platform)
}

/// The simulated runtime of rank `rank` for the drivers' options.
fn config(
    sim: &Arc<Simulation>,
    rank: usize,
    workers: Option<usize>,
    sched: &str,
    cpu_default: Scheduler,
    trace: bool,
) -> Result<Config, String> {
    let mut config = Config::simulated(sim.node(rank)).trace(trace);
    if let Some(w) = workers {
        if w == 0 {
            return Err("--workers must be at least 1".into());
        }
        config.workers = w;
    }
    config.scheduler = crate::placement::resolve_sched(sched, config.devices.len(), cpu_default)?;
    Ok(config)
}

/// The simulation of `path` and the simulated runtime of a driver that
/// plays one rank (`what` names the driver where a platform of several
/// ranks is refused), for the drivers' options.
pub fn one_rank(
    path: &Path,
    placement: &PlacementArgs,
    sched: &str,
    trace: bool,
    what: &str,
) -> Result<(Arc<Simulation>, Runtime), String> {
    let sim = load(path, placement)?;
    let ranks = sim.platform().ranks();
    if ranks > 1 {
        return Err(format!(
            "{}: {ranks} ranks; the simulated {what} runs one rank",
            path.display()
        ));
    }
    let config = config(&sim, 0, placement.workers, sched, Scheduler::Ws, trace)?;
    let rt = Runtime::new(config).map_err(|e| e.to_string())?;
    Ok((sim, rt))
}

/// Seconds of the host's triangular solves after the factorisation: they
/// read the factors once, at the platform's memory bandwidth (or at one
/// core's rate when it gives none).
/// `gflops` as a share of `p`'s peak; past 100 % only when the perf models
/// time tasks faster than the processors' `peak_gflops` (the platform's
/// rates cannot pass it), which is then said (issue 42).
fn of_peak(gflops: f64, p: &Platform) -> String {
    let peak = p.peak_gflops();
    let share = gflops / peak * 100.0;
    let mut text = format!("{share:.1} % of the platform's peak ({peak:.1} GFLOP/s)");
    if share > 100.0 {
        text += ": past its peak, because its perf models run tasks faster than its peak_gflops, which is set too low";
    }
    text
}

fn solve_seconds(p: &Platform, n: usize) -> f64 {
    let bytes = (n as f64) * (n as f64) * 8.0;
    match p.memory_bandwidth {
        Some(bw) => bytes / bw,
        None => 2.0 * (n as f64) * (n as f64) / (p.node.cpu.gflops * 1e9),
    }
}

/// `tessera lu --simulate PLATFORM`.
pub fn lu(args: &LuArgs, path: &Path) -> Result<(), String> {
    let sim = load(path, &args.placement)?;
    let p = sim.platform().clone();
    let (n, nb) = (args.n, args.nb());
    if n == 0 || nb == 0 || nb > n {
        return Err(format!("--n {n} --nb {nb}: need 1 <= nb <= n"));
    }
    checks::lu_size(n, nb, p.ranks())?;
    let resident = crate::lu::resident::options(args)?
        .or_else(|| crate::lu::resident::auto_simulated(args, &p));
    crate::lu::resident::check_no_pin(args, resident)?;
    if let Some(resident) = resident {
        if args.grid.is_some() {
            return Err("--update resident runs on one device of one process (no --grid)".into());
        }
        return crate::lu::resident::simulate(args, &p, path, resident);
    }
    let front = args.front()?;
    if let Some(g) = &args.grid {
        return lu_grid(args, path, &sim, g, front);
    }
    if p.ranks() > 1 {
        return Err(format!(
            "{}: {} ranks: give the process grid (--grid PxQ with P·Q = {})",
            path.display(),
            p.ranks(),
            p.ranks()
        ));
    }
    let config = config(
        &sim,
        0,
        args.placement.workers,
        &args.sched,
        Scheduler::Prio,
        args.trace.is_some(),
    )?;
    let rt = Runtime::new(config).map_err(|e| e.to_string())?;
    let opts = args.lu_options(&rt)?;
    let wall = Instant::now();
    // Issue 42: a simulation of 10^8 tasks ran for minutes without a word;
    // the bar follows the simulated flops as the real run's follows its own.
    let finished = std::sync::atomic::AtomicBool::new(false);
    let shares = std::thread::scope(|s| {
        let (rt, finished) = (&rt, &finished);
        let bar = s.spawn(move || {
            crate::lu::plan::progress_bar(hpl_flops(n), || rt.flops_done(), finished)
        });
        let shares = lu_simulate(rt, n, nb, &opts);
        finished.store(true, std::sync::atomic::Ordering::Relaxed);
        let _ = bar.join();
        shares
    })
    .map_err(|e| format!("LU failed: {e}"))?;
    let wall = wall.elapsed().as_secs_f64();
    // The factors a device holds the only copy of go home after the last
    // task, as in a real run (`unregister`): their copies end the timed part.
    let home = sim.settled() - sim.now();
    let factor = sim.settled();
    let solve = solve_seconds(&p, n);
    let time = factor + solve;
    let gflops = hpl_flops(n) / time / 1e9;
    let stats = sim.stats();

    let tv = format!("SIM{}{}", rt.scheduler_name().to_uppercase(), rt.workers());
    let verdict = format!(
        "SIMULATED on '{}' ({}): predicted, not run; no residual check",
        p.name,
        path.display()
    );
    print_hpl_block(&tv, n, nb, (1, 1), time, gflops, &verdict);
    print_lu_shape(&rt, n, nb, &opts);
    println!(
        "simulated: factorisation {factor:.3} s (the last {home:.3} s the factors' copies home) + solve {solve:.3} s (modelled); {}",
        of_peak(gflops, &p)
    );
    println!(
        "simulator: {} tasks, {} transfers ({}) in {wall:.2} s wall = {:.0} tasks/s; at most {} tasks in flight and {} events pending; {} over-committed allocations",
        stats.tasks,
        stats.transfers,
        tessera_engine::fmt::bytes(stats.transfer_bytes),
        stats.tasks as f64 / wall.max(1e-9),
        stats.peak_in_flight,
        stats.peak_events,
        stats.overcommits
    );
    print_split_shares(&shares);
    if let Some(path) = &args.trace {
        crate::save_trace(&rt, path)?;
    }
    if rt.memory_stats().nodes.len() > 1 {
        print!("{}", rt.memory_stats());
    }
    Ok(())
}

/// `tessera lu --simulate PLATFORM --grid PxQ`: the distributed LU
/// (`linalg::lu::dist`, the same DAG, owners and remote edges as under
/// mpirun), every rank a simulated runtime of this process, messages on the
/// simulated network.
fn lu_grid(
    args: &LuArgs,
    path: &Path,
    sim: &Arc<Simulation>,
    grid: &str,
    front: Front,
) -> Result<(), String> {
    use tessera_engine::dist::symbolic;
    use tessera_linalg::lu::dist::{DistLu, Grid};
    let p = sim.platform().clone();
    let grid = Grid::parse(grid).map_err(|e| format!("--grid: {e}"))?;
    crate::lu::plan::check_grid_ranks(grid.p, grid.q, p.ranks(), || {
        format!(
            "{} has {} (nodes {} x ranks_per_node {})",
            path.display(),
            p.ranks(),
            p.nodes,
            p.ranks_per_node
        )
    })?;
    if front != Front::Symbolic {
        return Err(crate::lu::plan::DIST_FRONT_ONLY.into());
    }
    let (n, nb) = (args.n, args.nb());
    let ranks = grid.ranks();
    let nets: Vec<_> = (0..ranks).map(|r| sim.net(r)).collect();
    let mut rts = Vec::with_capacity(ranks);
    for r in 0..ranks {
        let c = config(
            sim,
            r,
            args.placement.workers,
            &args.sched,
            Scheduler::Prio,
            args.trace.is_some(),
        )?;
        rts.push(Runtime::new(c).map_err(|e| e.to_string())?);
    }
    // The dealing a real run of these arguments would use.
    let layout = args.balance.layout(grid, n, nb);
    let team = args.panel_team(&rts[0])?;
    let wall = Instant::now();
    let mut lus = Vec::with_capacity(ranks);
    for (r, rt) in rts.iter().enumerate() {
        lus.push(Arc::new(
            DistLu::new_virtual(rt, n, nb, layout.clone(), r)
                .map_err(|e| e.to_string())?
                .with_panel_team(team),
        ));
    }
    let started: Vec<_> = (0..ranks)
        .map(|r| symbolic::start(&rts[r], &nets[r], Arc::clone(&lus[r])))
        .collect();
    sim.run().map_err(|e| format!("LU failed: {e}"))?;
    // As in a real run (`take_factors`): the factor tiles a device holds go home.
    for (lu, rt) in lus.iter().zip(&rts) {
        lu.release_virtual_factors(rt)
            .map_err(|e| format!("LU failed: {e}"))?;
    }
    let home = sim.settled() - sim.now();
    let factor = sim.settled();
    let mut finishing = Vec::with_capacity(ranks);
    for (r, s) in started.into_iter().enumerate() {
        finishing.push(
            s.finish(&rts[r], &nets[r])
                .map_err(|e| format!("LU failed: {e}"))?,
        );
    }
    sim.run().map_err(|e| format!("LU failed: {e}"))?;
    for (r, f) in finishing.into_iter().enumerate() {
        f.wait(&nets[r]).map_err(|e| format!("LU failed: {e}"))?;
    }
    let wall = wall.elapsed().as_secs_f64();
    // The solve reads each rank's share of the factors once, all ranks at once.
    let solve = solve_seconds(&p, n) / ranks as f64;
    let time = factor + solve;
    let gflops = hpl_flops(n) / time / 1e9;
    let stats = sim.stats();
    let tv = format!(
        "SIM{}{}",
        rts[0].scheduler_name().to_uppercase(),
        rts[0].workers()
    );
    let verdict = format!(
        "SIMULATED on '{}' ({}): predicted, not run; no residual check",
        p.name,
        path.display()
    );
    print_hpl_block(&tv, n, nb, (grid.p, grid.q), time, gflops, &verdict);
    println!(
        "ranks {ranks} ({} nodes x {})  workers per rank {}  scheduler {}  tiles {}x{}",
        p.nodes,
        p.ranks_per_node,
        rts[0].workers(),
        rts[0].scheduler_name(),
        n.div_ceil(nb),
        n.div_ceil(nb)
    );
    println!(
        "simulated: factorisation {factor:.3} s (the last {home:.3} s the factors' copies home) + solve {solve:.3} s (modelled); {}",
        of_peak(gflops, &p)
    );
    println!(
        "simulator: {} tasks, {} transfers ({}), {} messages ({}) in {wall:.2} s wall = {:.0} tasks/s; at most {} tasks in flight on a rank and {} events pending; {} over-committed allocations",
        stats.tasks,
        stats.transfers,
        tessera_engine::fmt::bytes(stats.transfer_bytes),
        stats.messages,
        tessera_engine::fmt::bytes(stats.message_bytes),
        stats.tasks as f64 / wall.max(1e-9),
        stats.peak_in_flight,
        stats.peak_events,
        stats.overcommits
    );
    if let Some(path) = &args.trace {
        // One trace for the whole run: rank r's workers as `r<r> <name>`.
        let mut all = tessera_engine::trace::Trace::default();
        for (r, rt) in rts.iter().enumerate() {
            let t = rt.trace();
            let base = all.workers.len() as u32;
            all.workers.extend(t.workers.into_iter().map(|mut w| {
                w.name = format!("r{r} {}", w.name);
                w
            }));
            // Task ids are per rank: rank r's become `r << RANK_ID_SHIFT | id`, as
            // `tessera trace merge` numbers them. A remote edge's sender is
            // recorded as `REMOTE_TASK | r' << RANK_ID_SHIFT | id`, already that
            // task's number once the mark is off: so the edges across ranks stay,
            // and the critical path follows the run from rank to rank instead of
            // stopping at each rank's border.
            use tessera_engine::trace::{RANK_ID_SHIFT, REMOTE_TASK};
            let off = (r as u64) << RANK_ID_SHIFT;
            let ids: std::collections::HashSet<u64> = t.tasks.iter().map(|x| x.id).collect();
            let end = |x: u64| {
                if x & REMOTE_TASK != 0 {
                    Some(x & !REMOTE_TASK)
                } else {
                    ids.contains(&x).then_some(x + off)
                }
            };
            all.edges.extend(
                t.edges
                    .iter()
                    .filter_map(|&(a, b)| Some((end(a)?, end(b)?))),
            );
            all.tasks.extend(t.tasks.into_iter().map(|mut x| {
                x.worker += base;
                x.id += off;
                x
            }));
            all.transfers.extend(t.transfers);
        }
        all.tasks.sort_by_key(|x| x.start);
        crate::write_trace(&all, path, "tasks")?;
    }
    Ok(())
}

/// `tessera spmv --simulate PLATFORM` (repeated SpMV, `--solver spmv`):
/// the same row blocks and tasks as the real run, over virtual blocks and
/// vectors.
pub fn spmv(args: &SpmvArgs, path: &Path) -> Result<(), String> {
    use tessera_tasks::codelets::spmv::{SpmvArgs as Args, SPMV};
    use tessera_tasks::csr::Csr;
    use tessera_tasks::kernels::{spmv_bytes, spmv_flops};
    if args.solver != "spmv" || args.balance || args.on_device {
        return Err("--simulate runs --solver spmv (no --balance, --on-device)".into());
    }
    if args.iters == 0 {
        return Err("--iters must be at least 1".into());
    }
    let (sim, rt) = one_rank(
        path,
        &args.placement,
        &args.sched,
        args.trace.is_some(),
        "SpMV",
    )?;
    let p = sim.platform().clone();
    let workers = rt.workers();
    checks::spmv_tasks(args.iters, workers, args.row_blocks_per_worker())?;
    // The structure is generated (or read) for real: the partition by
    // nonzeros needs the row pointers. The blocks' data is then virtual.
    // The real run's budget: the matrix is built in this process.
    let a = match &args.matrix {
        Some(m) => {
            let size =
                tessera_linalg::sparse::mm::check_regular_file(m).map_err(|e| e.to_string())?;
            crate::budget::check(
                &format!("reading {}", m.display()),
                &[("the file", size), ("its entries", size)],
                1,
            )?;
            // Its row pointers and the reader's row cursor (8 bytes a row
            // each) checked at the size line, before they exist.
            tessera_linalg::sparse::mm::read_matrix_market_sized(m, |rows, _| {
                let row_ptrs = (rows as u64).saturating_add(1).saturating_mul(16);
                crate::budget::check(
                    &format!("reading {}", m.display()),
                    &[("its row pointers", row_ptrs)],
                    1,
                )
            })
            .map_err(|e| e.to_string())?
        }
        None => {
            let g = tessera_linalg::sparse::gen::GenSpec::parse(&args.gen)?;
            let csr = g.csr_bytes().min(u64::MAX as u128) as u64;
            crate::budget::check(
                &format!("spmv --simulate --gen {}", args.gen),
                &[("the matrix", csr)],
                1,
            )?;
            g.build()
        }
    };
    let (n, m, nnz) = (a.n_rows(), a.n_cols(), a.nnz());
    // At most a block per row (see `SpmvMatrix::new_with`).
    let blocks = workers.saturating_mul(args.row_blocks_per_worker());
    let ranges: Vec<_> = a
        .partition_by_nnz(blocks.clamp(1, n.max(1)))
        .into_iter()
        .filter(|r| !r.is_empty())
        .collect();
    let row_ptr = a.row_ptr();
    let mut handles = Vec::new();
    for (b, r) in ranges.iter().enumerate() {
        let bnnz = row_ptr[r.end] - row_ptr[r.start];
        let bytes = (r.len() + 1) * 8 + bnnz * 4 + bnnz * 8;
        let h = rt
            .register_virtual::<Csr>(
                bytes as u64,
                [r.len(), m, bnnz, 0],
                format!("A[{}..{}]", r.start, r.end),
            )
            .map_err(|e| e.to_string())?;
        let y = rt
            .register_virtual::<Vec<f64>>((r.len() * 8) as u64, [r.len(), 0, 0, 0], format!("y{b}"))
            .map_err(|e| e.to_string())?;
        handles.push((h, y, bnnz));
    }
    drop(a);
    let x = rt
        .register_virtual::<Vec<f64>>((m * 8) as u64, [m, 0, 0, 0], "x")
        .map_err(|e| e.to_string())?;
    let wall = Instant::now();
    for _ in 0..args.iters {
        for (b, (h, y, bnnz)) in handles.iter().enumerate() {
            rt.task(&SPMV, (h.r(), x.r(), y.rw()))
                .args(Args {
                    block: b,
                    nnz: *bnnz,
                })
                .submit()
                .map_err(|e| e.to_string())?;
        }
    }
    rt.wait_all().map_err(|e| e.to_string())?;
    let wall = wall.elapsed().as_secs_f64();
    let per_iter_flops = spmv_flops(nnz);
    let per_iter_bytes = spmv_bytes(nnz, n, m);
    // The tasks are timed by the processors' rates; on the host, they all
    // stream one memory, which cannot pass the node's `memory_gbs` (issue
    // 42: 126 GB/s was printed on a 10 GB/s platform). The SpMV is memory
    // bound: its time is at least its bytes at that bandwidth.
    let tasks_t = sim.now();
    let on_host = rt.memory_stats().nodes.len() == 1;
    let memory_t = match p.memory_bandwidth {
        Some(bw) if on_host => per_iter_bytes * args.iters as f64 / bw,
        _ => 0.0,
    };
    let t = tasks_t.max(memory_t);
    println!(
        "matrix {}: {n} x {m}, {nnz} nonzeros (SIMULATED on '{}', {})",
        args.matrix
            .as_ref()
            .map_or(args.gen.clone(), |p| p.display().to_string()),
        p.name,
        path.display()
    );
    println!(
        "spmv: {} iterations in {t:.3} s: {:.2} GFLOP/s (SIMULATED: predicted, not run)",
        args.iters,
        per_iter_flops * args.iters as f64 / t / 1e9
    );
    println!(
        "effective {:.1} GB/s; {} workers, scheduler {}, {} blocks",
        per_iter_bytes * args.iters as f64 / t / 1e9,
        workers,
        rt.scheduler_name(),
        handles.len()
    );
    match p.memory_bandwidth {
        Some(bw) if on_host => println!(
            "memory: {:.1} GB/s (memory_gbs) bounds it at {memory_t:.3} s; the tasks at their rates take {tasks_t:.3} s: {}",
            bw / 1e9,
            if memory_t >= tasks_t {
                "memory bound"
            } else {
                "the processors bound it"
            }
        ),
        Some(_) => println!(
            "memory: memory_gbs not applied (tasks on accelerators stream their own memory)"
        ),
        None => println!("memory: no memory_gbs in the platform: not bounded by memory bandwidth"),
    }
    let stats = sim.stats();
    println!(
        "simulator: {} tasks in {wall:.2} s wall = {:.0} tasks/s",
        stats.tasks,
        stats.tasks as f64 / wall.max(1e-9)
    );
    if let Some(path) = &args.trace {
        crate::save_trace(&rt, path)?;
    }
    Ok(())
}
