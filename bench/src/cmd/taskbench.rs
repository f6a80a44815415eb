//! `tessera taskbench`: Task Bench's task graphs and kernels run on Tessera
//! (see [`crate::taskbench`]), in one process, as one rank of several under
//! mpirun, or in simulated time (`--simulate`). Tessera's own options come
//! first, then Task Bench's single-dash flags, as its implementations take
//! them: `tessera taskbench --workers 2 -steps 1000 -width 2 -type
//! stencil_1d -kernel compute_bound -iter 1024`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use tessera_engine::dist::stf::DistRuntime;
use tessera_engine::dist::{self, Submit};
use tessera_engine::{light, symbolic, Runtime, Scheduler};

use crate::ranks::Ranks;
use crate::taskbench::app::{help, App};
use crate::taskbench::report::{display, timing, totals};
use crate::taskbench::run::{prepare, Point};
use crate::taskbench::symbolic::{Classes, Light};

/// Options of `tessera taskbench`.
#[derive(clap::Args, Debug)]
#[command(after_help = help())]
pub struct TaskbenchArgs {
    #[command(flatten)]
    pub placement: crate::placement::PlacementArgs,
    /// Scheduler: ws, prio or dmda.
    #[arg(long, default_value = "ws")]
    pub sched: String,
    /// How the tasks reach the runtime: `stf`, submitted one by one with
    /// their data accesses (StarPU's way); `symbolic`, described by their
    /// dependence functions and made by the worker that finished their last
    /// predecessor (PaRSEC's PTG way); or `light`, the same description with
    /// each task a call of its body over buffers the program keeps, no task
    /// object and no runtime data (Taskflow's and OpenMP's way).
    #[arg(long, value_enum, default_value_t = Frontend::Stf)]
    pub frontend: Frontend,
    /// Predict the run on the platform described by this file instead of
    /// running it (simulated time; the kernels' flops at the platform's CPU
    /// rate).
    #[arg(long, value_name = "PLATFORM")]
    pub simulate: Option<PathBuf>,
    /// Record a trace of the run and write it here (Chrome/Perfetto JSON;
    /// under mpirun one file per rank, `NAME.rankR.json`).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// For tests of the validation: task `GRAPH:TIMESTEP:POINT` (graphs
    /// numbered from 1) writes a wrong timestep into its output.
    #[arg(long, value_name = "G:T:P", hide = true)]
    pub corrupt: Option<String>,
    /// Task Bench's flags (`-steps`, `-width`, `-type`, `-kernel`, `-iter`,
    /// ..., `-and`): see below.
    #[arg(allow_hyphen_values = true, trailing_var_arg = true, num_args = 0.., value_name = "TASK BENCH FLAGS")]
    pub flags: Vec<String>,
}

/// `--frontend`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Frontend {
    Stf,
    Symbolic,
    Light,
}

/// `--corrupt G:T:P`, checked against the graphs.
fn corrupt_point(spec: &str, app: &App) -> Result<Point, String> {
    let parts: Vec<i64> = spec
        .split(':')
        .map(|s| {
            s.parse()
                .map_err(|_| format!("--corrupt {spec:?}: expected G:T:P"))
        })
        .collect::<Result<_, _>>()?;
    let [g, t, p] = parts[..] else {
        return Err(format!("--corrupt {spec:?}: expected G:T:P"));
    };
    let graph = app
        .graphs
        .get((g - 1).max(0) as usize)
        .filter(|_| g >= 1)
        .ok_or_else(|| format!("--corrupt {spec}: no graph {g}"))?;
    if !(0..graph.steps).contains(&t)
        || !(graph.offset_at(t)..graph.offset_at(t) + graph.width_at(t)).contains(&p)
    {
        return Err(format!(
            "--corrupt {spec}: graph {g} has no task ({t}, {p})"
        ));
    }
    Ok(Point {
        graph: (g - 1) as usize,
        t,
        p,
    })
}

/// Runs `app` on `s` (registration first, then the clock): the seconds from
/// the first submission to the end of `wait_all` on every rank.
fn time_run<S: Submit>(
    s: &S,
    app: &App,
    corrupt: Option<Point>,
    barrier: impl Fn() -> Result<(), String>,
) -> Result<f64, String> {
    let prepared = prepare(s, app, corrupt);
    barrier()?;
    let t0 = Instant::now();
    let submitted = prepared.submit_all(s, app);
    // Wait even after a failed submission: every rank must reach wait_all.
    let waited = s.wait_all();
    let elapsed = t0.elapsed().as_secs_f64();
    submitted.map_err(|e| e.to_string())?;
    waited.map_err(|e| e.to_string())?;
    Ok(elapsed)
}

pub fn run(args: TaskbenchArgs) -> Result<(), String> {
    let app = App::parse(&args.flags)?;
    let corrupt = args
        .corrupt
        .as_deref()
        .map(|c| corrupt_point(c, &app))
        .transpose()?;
    if let Some(path) = &args.simulate {
        if args.frontend != Frontend::Stf {
            return Err("--simulate runs the STF front-end only (drop --frontend)".into());
        }
        return simulate(&args, &app, path);
    }
    let ranks = Ranks::join()?;
    match run_ranks(&args, &app, corrupt, &ranks) {
        Ok(()) => Ok(()),
        Err(e) if ranks.size > 1 => ranks.fail(&e),
        Err(e) => Err(e),
    }
}

fn run_ranks(
    args: &TaskbenchArgs,
    app: &App,
    corrupt: Option<Point>,
    ranks: &Ranks,
) -> Result<(), String> {
    ranks.check_same("the Task Bench flags", &args.flags.join(" "))?;
    let config =
        crate::placement::runtime_config_ranks(&args.placement, &args.sched, Scheduler::Ws, ranks)?
            .trace(args.trace.is_some());
    let rt = Runtime::new(config).map_err(|e| e.to_string())?;
    let (workers, sched) = (rt.workers(), rt.scheduler_name());
    if ranks.is_root() {
        print!("{}", display(app));
    }
    let elapsed = match (&ranks.net, args.frontend) {
        (None, Frontend::Symbolic) => {
            let classes = Arc::new(Classes::new(&rt, app, 0, 1, corrupt));
            let t0 = Instant::now();
            symbolic::run(&rt, classes).map_err(|e| e.to_string())?;
            let elapsed = t0.elapsed().as_secs_f64();
            crate::wrap_up(&rt, args.trace.as_deref(), &args.placement)?;
            elapsed
        }
        (None, Frontend::Light) => {
            let light = Arc::new(Light::new(&rt, app, 0, 1, corrupt)?);
            let t0 = Instant::now();
            light::run(&rt, light).map_err(|e| e.to_string())?;
            let elapsed = t0.elapsed().as_secs_f64();
            crate::wrap_up(&rt, args.trace.as_deref(), &args.placement)?;
            elapsed
        }
        (Some((net, coll)), Frontend::Light) => {
            let light = Arc::new(Light::new(&rt, app, ranks.rank, ranks.size, corrupt)?);
            coll.barrier()?;
            let t0 = Instant::now();
            let run = dist::light::run(&rt, net, light).map_err(|e| e.to_string());
            let elapsed = t0.elapsed().as_secs_f64();
            run?;
            f64::from_bits(coll.allreduce_max(elapsed.to_bits())?)
        }
        (Some((net, coll)), Frontend::Symbolic) => {
            let classes = Arc::new(Classes::new(&rt, app, ranks.rank, ranks.size, corrupt));
            coll.barrier()?;
            let t0 = Instant::now();
            let run = dist::symbolic::run(&rt, net, classes).map_err(|e| e.to_string());
            let elapsed = t0.elapsed().as_secs_f64();
            run?;
            if let Some(path) = &args.trace {
                let mine = crate::ranks::rank_trace_path(path, ranks.rank);
                crate::save_rank_trace(&rt, &mine, &ranks.run_id)?;
            }
            f64::from_bits(coll.allreduce_max(elapsed.to_bits())?)
        }
        (None, Frontend::Stf) => {
            let elapsed = time_run(&rt, app, corrupt, || Ok(()))?;
            crate::wrap_up(&rt, args.trace.as_deref(), &args.placement)?;
            elapsed
        }
        (Some((net, coll)), Frontend::Stf) => {
            let dist = DistRuntime::new(rt, Arc::clone(net));
            let elapsed = time_run(&dist, app, corrupt, || coll.barrier())?;
            if let Some(path) = &args.trace {
                let mine = crate::ranks::rank_trace_path(path, ranks.rank);
                crate::save_rank_trace(dist.runtime(), &mine, &ranks.run_id)?;
            }
            // The slowest rank's time is the run's.
            f64::from_bits(coll.allreduce_max(elapsed.to_bits())?)
        }
    };
    if ranks.is_root() {
        print!("{}", timing(app, &totals(app), elapsed));
        println!(
            "tessera: {} rank(s) x {workers} worker(s), scheduler {sched}, front-end {}",
            ranks.size,
            match args.frontend {
                Frontend::Stf => "stf",
                Frontend::Symbolic => "symbolic",
                Frontend::Light => "light",
            }
        );
    }
    Ok(())
}

/// `--simulate`: the same tasks on a simulated runtime (bodies not run; each
/// task takes its kernel's flops at the platform's rate).
fn simulate(args: &TaskbenchArgs, app: &App, path: &std::path::Path) -> Result<(), String> {
    let (sim, rt) = crate::simulate::one_rank(
        path,
        &args.placement,
        &args.sched,
        args.trace.is_some(),
        "taskbench",
    )?;
    let p = sim.platform().clone();
    print!("{}", display(app));
    let wall = Instant::now();
    time_run(&rt, app, None, || Ok(()))?;
    let wall = wall.elapsed().as_secs_f64();
    let t = sim.now();
    print!("{}", timing(app, &totals(app), t));
    let stats = sim.stats();
    println!(
        "tessera: SIMULATED on '{}' ({}): predicted, not run; {} worker(s), scheduler {}; {} tasks simulated in {wall:.2} s",
        p.name,
        path.display(),
        rt.workers(),
        rt.scheduler_name(),
        stats.tasks
    );
    if let Some(path) = &args.trace {
        crate::save_trace(&rt, path)?;
    }
    Ok(())
}
