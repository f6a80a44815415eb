//! `tessera overhead`: end-to-end runtime cost per task (submit + schedule +
//! run an empty body + release), on three graph shapes. A regression check:
//! the figures are compared with StarPU's own `tasks_overhead` example when it
//! is installed, run by this same command.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tessera_engine::{AccessMode, Codelet, ReadWrite, Runtime, TaskBuilder};

/// Which graph shape to time.
#[derive(Clone, Copy, Debug)]
pub enum Case {
    /// Independent empty tasks.
    Independent,
    /// A chain of RW tasks on one handle.
    Chain,
    /// Tasks with 4 handles each, random modes, over a pool of handles.
    Random4,
}

impl Case {
    pub fn name(self) -> &'static str {
        match self {
            Case::Independent => "independent",
            Case::Chain => "chain",
            Case::Random4 => "random4",
        }
    }
}

/// How the timed tasks are described.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Api {
    /// Typed tasks of a codelet with its own (empty) body.
    Typed,
    /// Dynamic `TaskBuilder`s with a closure body each (the pre-redesign API).
    Dynamic,
}

/// Submit `n` tasks of the given shape and wait; returns seconds from the first
/// submission to the end of `wait_all`. Handles are registered beforehand.
/// `random4` draws its access modes at run time, so it is always described
/// with the dynamic builder (what that builder is for).
pub fn time_case(rt: &Runtime, case: Case, api: Api, n: usize, seed: u64) -> f64 {
    try_time_case(rt, case, api, n, seed).expect("tasks succeed")
}

/// [`time_case`], with the runtime's error (Ctrl-C: interrupted) returned.
pub fn try_time_case(
    rt: &Runtime,
    case: Case,
    api: Api,
    n: usize,
    seed: u64,
) -> Result<f64, tessera_engine::Error> {
    let cl = Codelet::new(case.name());
    match (case, api) {
        (Case::Independent, Api::Typed) => {
            let cl = Codelet::<()>::new(case.name()).cpu(|_, _, ()| Ok(()));
            let t0 = Instant::now();
            for _ in 0..n {
                rt.task(&cl, ()).submit()?;
            }
            rt.wait_all()?;
            Ok(t0.elapsed().as_secs_f64())
        }
        (Case::Chain, Api::Typed) => {
            let cl = Codelet::<ReadWrite<u64>>::new(case.name()).cpu(|_, _, _| Ok(()));
            let h = rt.register(0u64);
            let t0 = Instant::now();
            for _ in 0..n {
                rt.task(&cl, h.rw()).submit()?;
            }
            rt.wait_all()?;
            Ok(t0.elapsed().as_secs_f64())
        }
        (Case::Independent, Api::Dynamic) => {
            let t0 = Instant::now();
            for _ in 0..n {
                rt.submit(TaskBuilder::new(&cl).body(|_| Ok(())))?;
            }
            rt.wait_all()?;
            Ok(t0.elapsed().as_secs_f64())
        }
        (Case::Chain, Api::Dynamic) => {
            let h = rt.register(0u64);
            let t0 = Instant::now();
            for _ in 0..n {
                rt.submit(TaskBuilder::new(&cl).rw(&h).body(|_| Ok(())))?;
            }
            rt.wait_all()?;
            Ok(t0.elapsed().as_secs_f64())
        }
        (Case::Random4, _) => {
            const POOL: usize = 1024;
            let hs: Vec<_> = (0..POOL).map(|_| rt.register(0u64)).collect();
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            // Draw the pattern before timing: 4 distinct handles per task.
            let pattern: Vec<[(usize, AccessMode); 4]> = (0..n)
                .map(|_| {
                    let mut picked = [(0usize, AccessMode::R); 4];
                    let mut k = 0;
                    while k < 4 {
                        let h = rng.random_range(0..POOL);
                        if picked[..k].iter().any(|p| p.0 == h) {
                            continue;
                        }
                        let mode = match rng.random_range(0..3) {
                            0 => AccessMode::R,
                            1 => AccessMode::W,
                            _ => AccessMode::RW,
                        };
                        picked[k] = (h, mode);
                        k += 1;
                    }
                    picked
                })
                .collect();
            let t0 = Instant::now();
            for p in &pattern {
                let mut t = TaskBuilder::new(&cl);
                for &(h, mode) in p {
                    t = t.access(&hs[h], mode);
                }
                rt.submit(t.body(|_| Ok(())))?;
            }
            rt.wait_all()?;
            Ok(t0.elapsed().as_secs_f64())
        }
    }
}

/// Options of `tessera overhead`.
#[derive(clap::Args, Debug)]
pub struct OverheadArgs {
    #[command(flatten)]
    pub placement: crate::placement::PlacementArgs,
    /// Scheduler: ws, prio or dmda.
    #[arg(long, default_value = "ws")]
    pub sched: String,
    /// Independent tasks in case (a).
    #[arg(long, default_value_t = 1_000_000, value_parser = crate::placement::at_least_one)]
    pub independent: usize,
    /// Chain length in case (b), and task count in case (c).
    #[arg(long, default_value_t = 100_000, value_parser = crate::placement::at_least_one)]
    pub chain: usize,
    /// Repetitions; the median is printed.
    #[arg(long, default_value_t = 5, value_parser = crate::placement::at_least_one)]
    pub reps: usize,
    /// How independent and chain tasks are described: typed (a codelet with
    /// its body) or dynamic (a TaskBuilder with a closure each, as before
    /// the typed API; to compare with older binaries).
    #[arg(long, value_enum, default_value = "typed")]
    pub api: Api,
    /// Record a trace while measuring (to measure tracing's cost).
    #[arg(long)]
    pub traced: bool,
    /// Measure each case with tracing off and on, alternating, and print the ratio.
    #[arg(long)]
    pub compare_tracing: bool,
    /// Skip running StarPU's tasks_overhead even if it is installed.
    #[arg(long)]
    pub no_starpu: bool,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub fn run(args: OverheadArgs) -> Result<(), String> {
    let config = crate::placement::runtime_config(
        &args.placement,
        &args.sched,
        tessera_engine::Scheduler::Ws,
    )?
    .trace(args.traced);
    let rt = Runtime::new(config).map_err(|e| e.to_string())?;
    println!(
        "tessera overhead: {} workers, scheduler {}, tracing {}, median of {}",
        rt.workers(),
        rt.scheduler_name(),
        if args.traced { "on" } else { "off" },
        args.reps.max(1)
    );
    for (case, n) in [
        (Case::Independent, args.independent),
        (Case::Chain, args.chain),
        (Case::Random4, args.chain),
    ] {
        if n == 0 {
            continue;
        }
        // A fresh runtime per repetition keeps trace buffers from growing
        // across repetitions.
        let time_with = |trace: bool, r: usize| -> Result<f64, String> {
            let rt = Runtime::new(rt.config().clone().trace(trace)).map_err(|e| e.to_string())?;
            let t = try_time_case(&rt, case, args.api, n, r as u64).map_err(|e| e.to_string())?;
            Ok(t / n as f64 * 1e9)
        };
        if args.compare_tracing {
            // Alternate off/on so both see the same machine load.
            let (mut off, mut on) = (Vec::new(), Vec::new());
            for r in 0..args.reps.max(1) {
                off.push(time_with(false, r)?);
                on.push(time_with(true, r)?);
            }
            let (off, on) = (median(off), median(on));
            println!(
                "{:<12} {:>8} tasks {:>8.0} ns/task untraced {:>8.0} ns/task traced  ratio {:.3}",
                case.name(),
                n,
                off,
                on,
                on / off
            );
        } else {
            let times: Vec<f64> = (0..args.reps.max(1))
                .map(|r| time_with(args.traced, r))
                .collect::<Result<_, _>>()?;
            println!(
                "{:<12} {:>8} tasks {:>8.0} ns/task",
                case.name(),
                n,
                median(times)
            );
        }
    }
    if !args.no_starpu && !crate::interrupt::requested() {
        let n = args.chain;
        for (buffers, shape) in [(0, "independent"), (1, "chain")] {
            match starpu_overhead(n, buffers) {
                Some(us) => println!(
                    "{:<12} {n:>8} tasks {:>8.0} ns/task (StarPU tasks_overhead -b {buffers}, same run)",
                    format!("starpu-{shape}"),
                    us * 1e3
                ),
                None => {
                    println!("starpu       not installed (apt-get install starpu-examples): no peer figure");
                    break;
                }
            }
        }
    }
    Ok(())
}

/// Run StarPU's `tasks_overhead` example, if present, with `ntasks` tasks of
/// `buffers` RW buffers each (0: independent tasks, 1: a chain on one buffer);
/// returns its "Per task" figure (submit + execute) in µs.
fn starpu_overhead(ntasks: usize, buffers: usize) -> Option<f64> {
    let exe = "/usr/lib/x86_64-linux-gnu/starpu/examples/tasks_overhead";
    if !Path::new(exe).exists() {
        return None;
    }
    let out = Command::new(exe)
        .args(["-i", &ntasks.to_string(), "-b", &buffers.to_string()])
        .env("STARPU_SILENT", "1")
        .output()
        .ok()?;
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    text.lines()
        .find_map(|l| l.strip_prefix("Per task:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
}
