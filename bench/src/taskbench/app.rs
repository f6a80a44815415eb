//! Task Bench's command line (`-steps 100 -width 4 -type stencil_1d -and
//! ...`): the graphs of a run, parsed as Task Bench's core parses them, but
//! strictly — a value that is not a number, an unknown flag or a flag
//! without its value is an error naming it, where Task Bench reads 0 or
//! aborts.

use super::graph::{Graph, Pattern, PATTERNS};
use super::kernel::{KernelKind, KERNELS};

/// The graphs of a run and the options that apply to all of them.
#[derive(Clone, Debug, PartialEq)]
pub struct App {
    /// The task graphs, run at the same time.
    pub graphs: Vec<Graph>,
    /// Nodes to estimate local and nonlocal dependencies for (`-nodes`; 0:
    /// none).
    pub nodes: i64,
    /// `-v` (1) lists each timestep's points and dependencies; `-vv` (2)
    /// the reverse dependencies too.
    pub verbose: u32,
}

/// Task Bench's flags, with what they take, for the help text.
pub const FLAGS: &[(&str, &str)] = &[
    ("-steps N", "height of the task graph (timesteps)"),
    ("-width N", "width of the task graph (points per timestep)"),
    ("-type DEP", "dependence pattern (list below)"),
    (
        "-radix N",
        "neighbours of nearest, spread and random_nearest",
    ),
    ("-period N", "period of spread and random_nearest"),
    (
        "-fraction F",
        "fraction of random_nearest's edges kept, 0 to 1",
    ),
    ("-kernel K", "kernel each task runs (list below)"),
    ("-iter N", "kernel iterations"),
    ("-output BYTES", "bytes each task writes (at least 16)"),
    (
        "-scratch BYTES",
        "scratch bytes per point (memory and dgemm kernels)",
    ),
    (
        "-sample N",
        "samples the scratch is cut into (memory kernels)",
    ),
    ("-imbalance F", "load imbalance of load_imbalance, 0 to 2"),
    (
        "-field N",
        "output buffers per point, reused round-robin (default: one per timestep)",
    ),
    (
        "-nodes N",
        "estimate local and nonlocal dependencies over N nodes",
    ),
    ("-and", "start the next task graph"),
    (
        "-v, -vv",
        "list every timestep's dependencies (and reverse ones)",
    ),
    (
        "-skip-graph-validation",
        "accepted for compatibility (graphs are always checked)",
    ),
];

/// The help text of Task Bench's flags.
pub fn help() -> String {
    let mut s = String::from("Task Bench flags (single dash, after Tessera's own options):\n");
    for (f, what) in FLAGS {
        s += &format!("  {f:<24} {what}\n");
    }
    s += "Dependence patterns: ";
    s += &PATTERNS.map(|(n, _)| n).join(", ");
    s += "\nKernels: ";
    s += &KERNELS.map(|(n, _)| n).join(", ");
    s.push('\n');
    s
}

fn int(flag: &str, v: &str, min: i64) -> Result<i64, String> {
    let n: i64 = v
        .parse()
        .map_err(|_| format!("{flag} {v:?}: not a whole number"))?;
    if n < min {
        return Err(format!("{flag} {n}: must be at least {min}"));
    }
    Ok(n)
}

fn real(flag: &str, v: &str, lo: f64, hi: f64) -> Result<f64, String> {
    let x: f64 = v
        .parse()
        .map_err(|_| format!("{flag} {v:?}: not a number"))?;
    if !(lo..=hi).contains(&x) {
        return Err(format!("{flag} {v}: must be between {lo} and {hi}"));
    }
    Ok(x)
}

/// The most tasks one run may have: Tessera keeps a handle per task output
/// with the default `-field`, and each costs a few hundred bytes.
pub const MAX_TASKS: u64 = 1 << 28;

impl App {
    /// Parses Task Bench's flags (`args` without the program name).
    pub fn parse<S: AsRef<str>>(args: &[S]) -> Result<App, String> {
        let mut app = App {
            graphs: Vec::new(),
            nodes: 0,
            verbose: 0,
        };
        let mut g = Graph::default_at(0);
        let mut it = args.iter().map(AsRef::as_ref);
        while let Some(flag) = it.next() {
            let mut value = || {
                it.next()
                    .ok_or_else(|| format!("{flag} needs a value (see `tessera taskbench --help`)"))
            };
            match flag {
                "-steps" => g.steps = int(flag, value()?, 1)?,
                "-width" => g.width = int(flag, value()?, 1)?,
                "-type" => {
                    let v = value()?;
                    g.pattern = Pattern::parse(v).ok_or_else(|| {
                        format!(
                            "-type {v:?}: no such dependence pattern (one of {})",
                            PATTERNS.map(|(n, _)| n).join(", ")
                        )
                    })?;
                }
                "-radix" => g.radix = int(flag, value()?, 0)?,
                "-period" => g.period = int(flag, value()?, 0)?,
                "-fraction" => g.fraction = real(flag, value()?, 0.0, 1.0)?,
                "-kernel" => {
                    let v = value()?;
                    g.kernel.kind = KernelKind::parse(v).ok_or_else(|| {
                        format!(
                            "-kernel {v:?}: no such kernel (one of {})",
                            KERNELS.map(|(n, _)| n).join(", ")
                        )
                    })?;
                }
                "-iter" => g.kernel.iterations = int(flag, value()?, 0)?,
                "-output" => g.output_bytes = int(flag, value()?, 16)? as usize,
                "-scratch" => g.scratch_bytes = int(flag, value()?, 0)? as usize,
                "-sample" => g.kernel.samples = int(flag, value()?, 0)?,
                "-imbalance" => g.kernel.imbalance = real(flag, value()?, 0.0, 2.0)?,
                "-field" => g.fields = int(flag, value()?, 1)?,
                "-nodes" => app.nodes = int(flag, value()?, 1)?,
                "-v" => app.verbose += 1,
                "-vv" => app.verbose += 2,
                "-skip-graph-validation" => {}
                "-and" => {
                    let next = Graph::default_at(app.graphs.len() + 1);
                    app.graphs.push(std::mem::replace(&mut g, next));
                }
                f if f.starts_with("--") => {
                    return Err(format!(
                        "{f}: Tessera's own options go before Task Bench's flags (`tessera taskbench {f} ... -steps ...`)"
                    ))
                }
                f => {
                    return Err(format!(
                        "{f:?}: not a Task Bench flag (see `tessera taskbench --help`)"
                    ))
                }
            }
        }
        app.graphs.push(g);
        let mut tasks = 0u64;
        for (i, g) in app.graphs.iter_mut().enumerate() {
            let which = format!("graph {}", i + 1);
            if g.period < 0 {
                // Task Bench's default: 3 where the pattern repeats, else none.
                g.period = if g.pattern.needs_period() { 3 } else { 0 };
            }
            if g.fields == 0 {
                g.fields = g.steps;
            }
            if g.fields == 1 && g.steps > 1 && g.pattern != Pattern::Trivial {
                return Err(format!(
                    "{which}: -field 1 would make a task read and write its point's only output buffer: use -field 2 or more"
                ));
            }
            if g.output_bytes > 1 << 30 {
                return Err(format!(
                    "{which}: -output {} is over 1 GiB per task",
                    g.output_bytes
                ));
            }
            tasks = tasks.saturating_add((g.steps as u64).saturating_mul(g.width as u64));
            if tasks > MAX_TASKS {
                return Err(format!(
                    "{which}: -steps {} -width {} makes the run over {MAX_TASKS} tasks",
                    g.steps, g.width
                ));
            }
            g.check(&which)?;
        }
        Ok(app)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_graphs() {
        let app = App::parse(&[
            "-steps", "9", "-width", "9", "-type", "spread", "-and", "-width", "7",
        ])
        .unwrap();
        assert_eq!(app.graphs.len(), 2);
        let (a, b) = (&app.graphs[0], &app.graphs[1]);
        assert_eq!(
            (a.steps, a.width, a.pattern, a.period, a.fields),
            (9, 9, Pattern::Spread, 3, 9)
        );
        assert_eq!(
            (b.index, b.steps, b.width, b.pattern, b.period),
            (1, 4, 7, Pattern::Trivial, 0)
        );
    }

    #[test]
    fn bad_flags_are_named() {
        let e = |args: &[&str]| App::parse(args).unwrap_err();
        assert!(e(&["-steps", "x"]).contains("-steps \"x\""));
        assert!(e(&["-steps"]).contains("-steps needs a value"));
        assert!(e(&["-width", "0"]).contains("-width 0"));
        assert!(e(&["-type", "ring"]).contains("no such dependence pattern"));
        assert!(e(&["-kernel", "fast"]).contains("no such kernel"));
        assert!(e(&["-fraction", "1.5"]).contains("-fraction 1.5"));
        assert!(e(&["-output", "8"]).contains("at least 16"));
        assert!(e(&["-steps", "3", "--workers", "2"]).contains("before Task Bench's flags"));
        assert!(e(&["-bogus"]).contains("not a Task Bench flag"));
        assert!(e(&["-type", "stencil_1d", "-period", "2"]).contains("takes no -period"));
        assert!(e(&["-type", "spread", "-period", "0"]).contains("needs a non-zero period"));
        assert!(e(&["-type", "fft", "-width", "1"]).contains("-width 2"));
        assert!(e(&["-type", "random_spread"]).contains("random_spread"));
        assert!(e(&["-and", "-type", "spread", "-radix", "0"]).starts_with("graph 2:"));
        assert!(
            e(&["-type", "spread", "-width", "2", "-radix", "4", "-period", "1"])
                .contains("depend twice")
        );
        assert!(e(&["-type", "no_comm", "-field", "1"]).contains("-field 1"));
        assert!(e(&["-steps", "100000", "-width", "100000"]).contains("tasks"));
    }
}
