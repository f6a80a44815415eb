//! The distributed LU under mpirun (`tessera_linalg::lu::dist`), one function per
//! phase: `plan` checks the grid and the problem and deals the tile columns,
//! `distribute` builds this rank's share, `factor` factors and solves with
//! distributed norms, and `report` prints every rank's line and, on rank 0,
//! HPL's block with the real P and Q.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tessera_engine::dist::{symbolic, Collectives, Net};
use tessera_engine::{Config, Runtime};
use tessera_linalg::hpl::{hpl_flops, HPL_THRESHOLD};
use tessera_linalg::lu::dist::{DistLu, Grid, Layout};

use super::plan::{check_grid_ranks, rank_buffers, DIST_FRONT_ONLY};
use crate::args::{Balance, LuArgs};
use crate::ranks::Ranks;
use crate::report::{passed, print_hpl_block, residual_line};

/// This rank's part of a checked distributed run: the grid, the runtime's
/// configuration, every rank's worker count and the dealing of tile columns.
struct Plan {
    grid: Grid,
    config: Config,
    all_workers: String,
    layout: Layout,
}

/// What [`factor`] measured on this rank, for [`report`].
struct Factored {
    stats: symbolic::DistStats,
    factor_time: f64,
    mine: f64,
    time: f64,
    resid: f64,
    /// Bytes the model says this rank sends, and all it sent (the solve and
    /// the residual included).
    predicted: u64,
    sent: u64,
}

/// Every rank factors its share, the solve and the residual use distributed
/// norms, and rank 0 prints HPL's block with the real P and Q.
pub fn run(args: &LuArgs, ranks: &Ranks) -> Result<(), String> {
    let grid = grid_of(args, ranks)?;
    let (net, coll) = net_of(args, ranks, grid)?;
    let plan = plan(args, ranks, coll, grid)?;
    let (rt, lu) = distribute(args, ranks.rank, plan.config.clone(), &plan.layout)?;
    let done = factor(&rt, &lu, net, coll)?;
    report(args, ranks, &plan, &rt, coll, done)
}

/// The problem, checked the same on every rank, and the front-end, before
/// the network is asked for.
fn net_of<'a>(
    args: &LuArgs,
    ranks: &'a Ranks,
    grid: Grid,
) -> Result<(&'a Arc<Net>, &'a Collectives), String> {
    let (n, nb) = (args.n, args.nb());
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
    Ok((net, coll))
}

/// `--grid PxQ`, or one row of all the ranks; it must name as many ranks as
/// mpirun started.
fn grid_of(args: &LuArgs, ranks: &Ranks) -> Result<Grid, String> {
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
    Ok(grid)
}

/// The runtime's configuration, the tile columns' dealing and this rank's
/// memory check.
fn plan(args: &LuArgs, ranks: &Ranks, coll: &Collectives, grid: Grid) -> Result<Plan, String> {
    let (n, nb, me) = (args.n, args.nb(), ranks.rank);
    let config = crate::placement::runtime_config_ranks(
        &args.placement,
        &args.sched,
        tessera_engine::Scheduler::Prio,
        ranks,
    )?
    .trace(args.trace.is_some());
    let all_workers = crate::ranks::per_rank(&ranks.gather_counts(config.workers)?);
    let layout = deal(args, ranks, coll, grid, &config)?;
    let threads = config.workers + config.devices.len() + 3;
    crate::budget::check(
        &format!(
            "lu --n {n} --nb {nb} on rank {me} of a {}x{} grid",
            grid.p, grid.q
        ),
        &rank_buffers(n, nb, &layout, me),
        threads,
    )?;
    Ok(Plan {
        grid,
        config,
        all_workers,
        layout,
    })
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

/// Deal the tile columns by `--balance`; rank 0 says how.
fn deal(
    args: &LuArgs,
    ranks: &Ranks,
    coll: &Collectives,
    grid: Grid,
    config: &Config,
) -> Result<Layout, String> {
    let (n, nb) = (args.n, args.nb());
    let t = n.div_ceil(nb);
    if args.balance == Balance::Speed {
        return deal_by_speed((n, nb), ranks, coll, grid, config);
    }
    let layout = args.balance.layout(grid, n, nb);
    if ranks.is_root() && args.balance == Balance::Work && grid.q > 1 {
        println!(
            "balance: work -> tile columns per process column {} ({} of {t} dealt otherwise than cyclically)",
            columns_per_pcol(&layout),
            layout.moved_from_cyclic(),
        );
    }
    Ok(layout)
}

/// `--balance speed`: every rank measures at once (so each core is as loaded
/// as it will be in the run), with its own workers, then all deal the same
/// columns from the same gathered rates.
fn deal_by_speed(
    (n, nb): (usize, usize),
    ranks: &Ranks,
    coll: &Collectives,
    grid: Grid,
    config: &Config,
) -> Result<Layout, String> {
    let t = n.div_ceil(nb);
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
    Ok(layout)
}

/// This rank's runtime and its share of the matrix, dealt by `layout`.
fn distribute(
    args: &LuArgs,
    me: usize,
    config: Config,
    layout: &Layout,
) -> Result<(Runtime, Arc<DistLu>), String> {
    let rt = Runtime::new(config).map_err(|e| e.to_string())?;
    let team = args.panel_team(&rt)?;
    let lu = DistLu::with_layout(&rt, args.n, args.nb(), args.seed, layout.clone(), me)
        .with_panel_team(team);
    Ok((rt, Arc::new(lu)))
}

/// Factor and solve, timed from a common barrier; HPL's time is the slowest
/// rank's factorisation and solve, and the residual check is outside it, as
/// in HPL and in the single-process driver.
fn factor(
    rt: &Runtime,
    lu: &Arc<DistLu>,
    net: &Arc<Net>,
    coll: &Collectives,
) -> Result<Factored, String> {
    coll.barrier()?;
    let t0 = Instant::now();
    let stats = symbolic::run(rt, net, Arc::clone(lu)).map_err(|e| format!("LU failed: {e}"))?;
    let factor_time = t0.elapsed().as_secs_f64();
    let held = lu.take_factors(rt).map_err(|e| e.to_string())?;
    let x = lu.solve(&held, coll)?;
    let mine = t0.elapsed().as_secs_f64();
    let time = coll.allreduce_max((mine * 1e9) as u64)? as f64 * 1e-9;
    let resid = lu.residual(&x, coll)?;
    Ok(Factored {
        stats,
        factor_time,
        mine,
        time,
        resid,
        predicted: lu.predicted_bytes_sent(),
        sent: net.transport().counters().bytes_sent,
    })
}

/// Rank `me`'s line: where it sits in `grid`, its factorisation and solve, its tasks,
/// and its messages against the model.
fn print_rank_line(me: usize, grid: Grid, done: &Factored) {
    let Factored {
        stats,
        factor_time,
        mine,
        predicted,
        sent,
        ..
    } = done;
    println!(
        "rank {me} ({},{}): factor {factor_time:.2} s, solve {:.3} s, {} tasks, {} messages with {} of data (model {}), {} sent in all",
        me / grid.q,
        me % grid.q,
        mine - factor_time,
        stats.unfold.instantiated,
        stats.messages,
        tessera_engine::fmt::bytes(stats.bytes),
        tessera_engine::fmt::bytes(*predicted),
        tessera_engine::fmt::bytes(*sent),
    );
}

/// Every rank's line and trace; rank 0's HPL block; the residual check.
fn report(
    args: &LuArgs,
    ranks: &Ranks,
    plan: &Plan,
    rt: &Runtime,
    coll: &Collectives,
    done: Factored,
) -> Result<(), String> {
    let (n, nb, me, grid) = (args.n, args.nb(), ranks.rank, plan.grid);
    print_rank_line(me, grid, &done);
    let (time, resid) = (done.time, done.resid);
    let gflops = hpl_flops(n) / time / 1e9;
    if let Some(path) = &args.trace {
        let path = crate::ranks::rank_path(path, me);
        crate::save_rank_trace(rt, &path, &ranks.run_id)?;
    }
    coll.barrier()?;
    if ranks.is_root() {
        let t = n.div_ceil(nb);
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
            "ranks {} ({}x{})  workers {} per rank  scheduler {}  tiles {t}x{t}",
            ranks.size,
            grid.p,
            grid.q,
            plan.all_workers,
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
