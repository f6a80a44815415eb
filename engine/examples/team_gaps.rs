//! Measures how long CPU workers stay idle while a task is ready, around
//! team tasks (issue 41, item 7): a chain of team tasks (a team of all the
//! workers), each releasing `fan` ordinary tasks that the next team task
//! waits for. Prints, from the trace, the gaps longer than 500 µs during
//! which a worker ran nothing although some task was ready (a task's ready
//! time: the latest end among its predecessors).
//!
//! `cargo run --release -p tessera-engine --example team_gaps -- [sched] [workers] [steps] [fan] [task_us] [team_us]`

use std::time::{Duration, Instant};

use tessera_engine::team::TeamSize;
use tessera_engine::{Codelet, Config, Runtime, TaskBuilder};

/// Busy-waits for `d`; with `GAPS_SLEEP` set, sleeps instead, so that more
/// workers than cores measure the runtime's wake-ups, not the OS's sharing.
fn spin(d: Duration) {
    if std::env::var_os("GAPS_SLEEP").is_some() {
        return std::thread::sleep(d);
    }
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, d: u64| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let sched = args.first().cloned().unwrap_or_else(|| "ws".into());
    let workers = arg(1, 2) as usize;
    let steps = arg(2, 40);
    let fan = arg(3, 6);
    let task = Duration::from_micros(arg(4, 1000));
    let team_t = Duration::from_micros(arg(5, 2000));

    let rt = Runtime::new(
        Config::with_workers(workers)
            .scheduler(sched.parse().unwrap())
            .trace(true),
    )
    .expect("runtime starts");
    let team = Codelet::new("team");
    let single = Codelet::new("single");
    let mut prev: Vec<tessera_engine::TaskHandle> = Vec::new();
    let t0 = Instant::now();
    for _ in 0..steps {
        let mut b = TaskBuilder::new(&team)
            .team(TeamSize::exactly(workers))
            .priority(1)
            .body(move |ctx| {
                ctx.team().run(|_| spin(team_t))?;
                Ok(())
            });
        for p in &prev {
            b = b.after(p);
        }
        let t = rt.submit(b).unwrap();
        prev = (0..fan)
            .map(|_| {
                rt.submit(TaskBuilder::new(&single).after(&t).body(move |_| {
                    spin(task);
                    Ok(())
                }))
                .unwrap()
            })
            .collect();
    }
    rt.wait_all().unwrap();
    let wall = t0.elapsed();
    let trace = rt.trace();
    let (count, total) = idle_while_ready(&trace, 500_000);
    println!(
        "sched={sched} workers={workers} steps={steps} fan={fan} wall={:.1} ms gaps>500us={count} idle_while_ready={:.2} ms",
        wall.as_secs_f64() * 1e3,
        total as f64 * 1e-6
    );
}

/// Gaps of a worker longer than `min` ns that overlap some task's ready
/// interval (ready time to start) by more than `min`: their number, and
/// the summed overlap.
fn idle_while_ready(trace: &tessera_engine::trace::Trace, min: u64) -> (usize, u64) {
    use std::collections::HashMap;
    let tasks = &trace.tasks;
    let mut end: HashMap<u64, u64> = HashMap::new();
    let mut start: HashMap<u64, u64> = HashMap::new();
    for t in tasks {
        let e = end.entry(t.id).or_insert(0);
        *e = (*e).max(t.end);
        let s = start.entry(t.id).or_insert(u64::MAX);
        *s = (*s).min(t.start);
    }
    let mut ready: HashMap<u64, u64> = HashMap::new();
    for &(p, s) in &trace.edges {
        let r = ready.entry(s).or_insert(0);
        *r = (*r).max(end.get(&p).copied().unwrap_or(0));
    }
    let waits: Vec<(u64, u64)> = start
        .iter()
        .map(|(id, &s)| (ready.get(id).copied().unwrap_or(0), s))
        .collect();
    let (mut count, mut total) = (0, 0);
    for w in 0..trace.workers.len() as u32 {
        let mut mine: Vec<(u64, u64)> = tasks
            .iter()
            .filter(|t| t.worker == w)
            .map(|t| (t.start, t.end))
            .collect();
        mine.sort_unstable();
        for pair in mine.windows(2) {
            let (g0, g1) = (pair[0].1, pair[1].0);
            if g1 <= g0 + min {
                continue;
            }
            let overlap = waits
                .iter()
                .map(|&(r, s)| s.min(g1).saturating_sub(r.max(g0)))
                .max()
                .unwrap_or(0);
            if overlap > min {
                if std::env::var_os("GAPS_VERBOSE").is_some() {
                    let name = |at: u64| {
                        tasks
                            .iter()
                            .find(|t| t.worker == w && t.start == at)
                            .map(|t| format!("{}#{}r{}", t.codelet, t.id, t.team_rank))
                            .unwrap_or_default()
                    };
                    eprintln!(
                        "w{w} idle {:>8} .. {:>8} us ({} us) after {} before {}",
                        g0 / 1000,
                        g1 / 1000,
                        (g1 - g0) / 1000,
                        name(pair[0].0),
                        name(pair[1].0)
                    );
                    let mut around: Vec<_> = tasks
                        .iter()
                        .filter(|t| t.end + 3_000_000 > g0 && t.start < g1 + 1_000_000)
                        .collect();
                    around.sort_by_key(|t| t.start);
                    for t in around {
                        eprintln!(
                            "    w{} {}#{}r{} {:>8}..{:>8} ready {:>8}",
                            t.worker,
                            t.codelet,
                            t.id,
                            t.team_rank,
                            t.start / 1000,
                            t.end / 1000,
                            ready.get(&t.id).copied().unwrap_or(0) / 1000
                        );
                    }
                }
                count += 1;
                total += overlap;
            }
        }
    }
    (count, total)
}
