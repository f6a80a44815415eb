//! Task Bench's result lines (`Total Tasks`, `Total Dependencies`, `Elapsed
//! Time ... seconds`, `FLOP/s`, `B/s`), counted from the graphs as its core
//! counts them, in its number format, so that the scripts that read Task
//! Bench's output read Tessera's.

use super::app::App;

/// `x` as C's `printf("%e")` writes it (`1.234568e-02`).
pub fn c_exp(x: f64) -> String {
    if !x.is_finite() {
        return format!("{x}");
    }
    let s = format!("{x:.6e}");
    match s.split_once('e') {
        Some((m, e)) => {
            let e: i32 = e.parse().unwrap_or(0);
            format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
        }
        None => s,
    }
}

/// What a run's graphs amount to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Tasks.
    pub tasks: u64,
    /// Edges (inputs summed over the tasks).
    pub deps: u64,
    /// Edges within one node's points, and across nodes, with `-nodes`.
    pub local: u64,
    /// See `local`.
    pub nonlocal: u64,
    /// Floating-point operations of the kernels.
    pub flops: u64,
    /// Bytes the kernels move.
    pub bytes: u64,
    /// Output bytes carried by local and nonlocal edges.
    pub local_bytes: u64,
    /// See `local_bytes`.
    pub nonlocal_bytes: u64,
}

/// Counts `app`'s tasks, edges, flops and bytes (Task Bench's
/// `report_timing`; with `-nodes`, points dealt to nodes in blocks).
pub fn totals(app: &App) -> Totals {
    let mut s = Totals::default();
    let (mut spans, mut ins) = (Vec::new(), Vec::new());
    for g in &app.graphs {
        let (mut local, mut nonlocal) = (0, 0);
        for t in 0..g.steps {
            let lo = g.offset_at(t);
            for p in lo..lo + g.width_at(t) {
                s.tasks += 1;
                g.inputs(t, p, &mut spans, &mut ins);
                s.deps += ins.len() as u64;
                s.flops += g.kernel.flops(g.scratch_bytes, g.index, t, p);
                s.bytes += g.kernel.bytes(g.scratch_bytes);
                if app.nodes > 0 {
                    let node = p * app.nodes / g.width;
                    let first = node * g.width / app.nodes;
                    let last = (node + 1) * g.width / app.nodes - 1;
                    let here = ins.iter().filter(|&&d| first <= d && d <= last).count() as u64;
                    local += here;
                    nonlocal += ins.len() as u64 - here;
                }
            }
        }
        s.local += local;
        s.nonlocal += nonlocal;
        s.local_bytes += local * g.output_bytes as u64;
        s.nonlocal_bytes += nonlocal * g.output_bytes as u64;
    }
    s
}

/// The configuration block Task Bench prints before running.
pub fn display(app: &App) -> String {
    let mut s = String::from("Running Task Benchmark\n  Configuration:\n");
    for (i, g) in app.graphs.iter().enumerate() {
        s += &format!("    Task Graph {}:\n", i + 1);
        s += &format!(
            "      Time Steps: {}\n      Max Width: {}\n",
            g.steps, g.width
        );
        s += &format!("      Dependence Type: {}\n", g.pattern.name());
        s += &format!("      Radix: {}\n      Period: {}\n", g.radix, g.period);
        s += &format!(
            "      Fraction Connected: {:.6}\n      Kernel:\n",
            g.fraction
        );
        s += &format!("        Type: {}\n", g.kernel.kind.name());
        s += &format!("        Iterations: {}\n", g.kernel.iterations);
        s += &format!("        Samples: {}\n", g.kernel.samples);
        s += &format!("        Imbalance: {:.6}\n", g.kernel.imbalance);
        s += &format!("      Output Bytes: {}\n", g.output_bytes);
        s += &format!("      Scratch Bytes: {}\n", g.scratch_bytes);
        if app.verbose > 0 {
            s += &timesteps(g, app.verbose > 1);
        }
    }
    s
}

/// `-v`: each timestep's points and dependencies (`-vv`: and successors).
fn timesteps(g: &super::graph::Graph, reverse: bool) -> String {
    let (mut spans, mut ins) = (Vec::new(), Vec::new());
    let mut s = String::new();
    for t in 0..g.steps {
        let (lo, n) = (g.offset_at(t), g.width_at(t));
        s += &format!(
            "      Timestep {t} (offset {lo}, width {n}, last offset {}, last width {}):\n        Points:",
            g.offset_at(t - 1),
            g.width_at(t - 1)
        );
        for p in lo..lo + n {
            s += &format!(" {p}");
        }
        s += "\n        Dependencies:\n";
        for p in lo..lo + n {
            g.inputs(t, p, &mut spans, &mut ins);
            s += &format!("          Point {p}:");
            ins.iter().for_each(|d| s += &format!(" {d}"));
            s.push('\n');
        }
        if reverse {
            s += "        Reverse Dependencies:\n";
            let (plo, pn) = (g.offset_at(t - 1), g.width_at(t - 1));
            for p in plo..plo + pn {
                g.outputs(t - 1, p, &mut spans, &mut ins);
                s += &format!("          Point {p}:");
                ins.iter().for_each(|d| s += &format!(" {d}"));
                s.push('\n');
            }
        }
    }
    s
}

/// Task Bench's result lines for a run of `elapsed` seconds.
pub fn timing(app: &App, t: &Totals, elapsed: f64) -> String {
    let mut s = format!("Total Tasks {}\nTotal Dependencies {}\n", t.tasks, t.deps);
    if app.nodes > 0 {
        s += &format!(
            "  Local Dependencies {} (estimated)\n  Nonlocal Dependencies {} (estimated)\n  Number of Nodes (used for estimate) {}\n",
            t.local, t.nonlocal, app.nodes
        );
    } else {
        s += "  Unable to estimate local/nonlocal dependencies\n";
    }
    s += &format!("Total FLOPs {}\nTotal Bytes {}\n", t.flops, t.bytes);
    s += &format!("Elapsed Time {} seconds\n", c_exp(elapsed));
    s += &format!("FLOP/s {}\n", c_exp(t.flops as f64 / elapsed));
    s += &format!("B/s {}\n", c_exp(t.bytes as f64 / elapsed));
    s += "Transfer (estimated):\n";
    if app.nodes > 0 {
        s += &format!(
            "  Local Bytes {}\n  Nonlocal Bytes {}\n  Local Bandwidth {} B/s\n  Nonlocal Bandwidth {} B/s\n",
            t.local_bytes,
            t.nonlocal_bytes,
            c_exp(t.local_bytes as f64 / elapsed),
            c_exp(t.nonlocal_bytes as f64 / elapsed)
        );
    } else {
        s += "  Unable to estimate local/nonlocal transfer\n";
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_as_c_does() {
        assert_eq!(c_exp(0.012345678), "1.234568e-02");
        assert_eq!(c_exp(123456.0), "1.234560e+05");
        assert_eq!(c_exp(0.0), "0.000000e+00");
    }

    #[test]
    fn totals_match_task_bench() {
        // Task Bench prints, for `-steps 10 -width 4 -type stencil_1d
        // -kernel compute_bound -iter 8 -nodes 2`: 40 tasks, 90 dependencies
        // (18 nonlocal), 43520 FLOPs.
        let app = App::parse(&[
            "-steps",
            "10",
            "-width",
            "4",
            "-type",
            "stencil_1d",
            "-kernel",
            "compute_bound",
            "-iter",
            "8",
            "-nodes",
            "2",
        ])
        .unwrap();
        let t = totals(&app);
        assert_eq!((t.tasks, t.deps, t.local, t.nonlocal), (40, 90, 72, 18));
        assert_eq!(t.flops, 40 * (2 * 64 * 8 + 64));
        assert_eq!((t.local_bytes, t.nonlocal_bytes), (72 * 16, 18 * 16));
    }
}
