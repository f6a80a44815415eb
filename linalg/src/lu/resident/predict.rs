//! The resident LU's predicted time on a platform's accelerator: the same
//! plan the device runs, each stream a queue, each operation
//! `latency + work / rate`, events as on the device. Operations are timed
//! in issue order, which is exact for a plan whose waits follow their
//! records (checked): an operation's start depends only on operations
//! issued before it.
//!
//! The two compute streams are modelled as running side by side at their
//! full rates: the panel stream's work (a tall, narrow `dgetrf` and one
//! block column's update) keeps few of the device's multiprocessors busy,
//! but what the trailing GEMM loses to it is not modelled (see the rates'
//! sources in the platform file).

use tessera_tasks::kernels::{gemm_flops, getrf_panel_flops, laswp_bytes, trsm_flops};

use super::plan::{check_events, Op, Plan};
use super::OpTime;

/// The rates of the resident LU's operations on one device.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rates {
    /// GEMM, flop/s.
    pub gemm: f64,
    /// TRSM, flop/s.
    pub trsm: f64,
    /// Panel (`dgetrf`), flop/s.
    pub panel: f64,
    /// Row interchanges, bytes/s.
    pub swap: f64,
    /// Host ↔ device copies (pinned DMA, or the staged rate), bytes/s.
    pub copy: f64,
    /// Per operation (launch, or a copy's set-up), seconds.
    pub latency: f64,
}

/// The work of `op` in an `n × n` LU with `nb`-wide blocks: its flops
/// (panel, TRSM, GEMM) or the bytes it moves (copies, interchanges).
pub fn op_work(op: &Op, n: usize, nb: usize) -> (f64, f64) {
    let width = |j: usize| (n - j * nb).min(nb);
    let span = |cols: &std::ops::Range<usize>| (cols.end * nb).min(n) - cols.start * nb;
    let below = |k: usize| n - k * nb;
    match op {
        Op::Upload(j) | Op::Download(j) => (0.0, (n * width(*j) * 8) as f64),
        Op::Panel(k) => (getrf_panel_flops(below(*k), width(*k)), 0.0),
        Op::Swap { k, cols } => (0.0, laswp_bytes(width(*k), span(cols))),
        Op::Trsm { k, cols } => (trsm_flops(width(*k), span(cols)), 0.0),
        Op::Gemm { k, cols } => (
            gemm_flops(below(*k) - width(*k), span(cols), width(*k)),
            0.0,
        ),
        Op::Record(_) | Op::Wait(_) => (0.0, 0.0),
    }
}

/// `op`'s time at `rates`: its latency plus its work at its kind's rate.
pub fn op_seconds(op: &Op, n: usize, nb: usize, rates: &Rates) -> f64 {
    let (flops, bytes) = op_work(op, n, nb);
    let work = match op {
        Op::Upload(_) | Op::Download(_) => bytes / rates.copy,
        Op::Swap { .. } => bytes / rates.swap,
        Op::Panel(_) => flops / rates.panel,
        Op::Trsm { .. } => flops / rates.trsm,
        Op::Gemm { .. } => flops / rates.gemm,
        Op::Record(_) | Op::Wait(_) => return 0.0,
    };
    rates.latency + work
}

/// Each working operation's predicted start and end.
pub fn predict(plan: &Plan, n: usize, nb: usize, rates: &Rates) -> Result<Vec<OpTime>, String> {
    check_events(plan)?;
    let mut clock = [0.0f64; 4];
    let mut events = vec![0.0f64; plan.events];
    let mut out = Vec::new();
    for (s, op) in &plan.ops {
        let c = &mut clock[*s as usize];
        match op {
            Op::Record(e) => events[*e] = *c,
            Op::Wait(e) => *c = c.max(events[*e]),
            _ => {
                let start = *c;
                *c += op_seconds(op, n, nb, rates);
                out.push(OpTime {
                    stream: *s,
                    op: op.clone(),
                    start,
                    end: *c,
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::plan::plan;
    use super::*;

    const RATES: Rates = Rates {
        gemm: 60e12,
        trsm: 8e12,
        panel: 4e12,
        swap: 800e9,
        copy: 55e9,
        latency: 8e-6,
    };

    fn makespan(p: &[OpTime]) -> f64 {
        p.iter().map(|t| t.end).fold(0.0, f64::max)
    }

    #[test]
    fn the_work_adds_up_to_the_lus_flops() {
        // Every flop of the LU is in exactly one operation: the sum is
        // HPL's count up to the panels' lower-order terms.
        let (n, nb) = (4096, 256);
        for la in [false, true] {
            let p = plan(n / nb, la);
            let flops: f64 = p.ops.iter().map(|(_, op)| op_work(op, n, nb).0).sum();
            let hpl = 2.0 / 3.0 * (n as f64).powi(3);
            assert!((flops / hpl - 1.0).abs() < 0.01, "{flops} vs {hpl}");
            let up: f64 = p
                .ops
                .iter()
                .filter(|(_, op)| matches!(op, Op::Upload(_)))
                .map(|(_, op)| op_work(op, n, nb).1)
                .sum();
            assert_eq!(up, (n * n * 8) as f64);
        }
    }

    #[test]
    fn look_ahead_hides_the_panels() {
        let (n, nb) = (65536, 1024);
        let t = n / nb;
        let with = makespan(&predict(&plan(t, true), n, nb, &RATES).unwrap());
        let without = makespan(&predict(&plan(t, false), n, nb, &RATES).unwrap());
        let panels: f64 = (0..t)
            .map(|k| op_seconds(&Op::Panel(k), n, nb, &RATES))
            .sum();
        assert!(
            without - with > 0.5 * panels,
            "with {with} without {without} panels {panels}"
        );
        // No faster than the GEMMs alone, nor than the copies.
        let gemm = 2.0 / 3.0 * (n as f64).powi(3) / RATES.gemm;
        assert!(with > gemm && with > (n * n * 8) as f64 / RATES.copy);
    }

    #[test]
    fn steps_on_arrival_keep_the_update_stream_busy_while_the_matrix_goes_up() {
        // The H200 node's measured rates (`bench/platforms/h200-node.toml`): two steps per arriving
        // block beat one, as the default says.
        let rates = Rates {
            gemm: 51.3e12,
            trsm: 6.9e12,
            panel: 3.4e12,
            swap: 313e9,
            copy: 52.7e9,
            latency: 8e-6,
        };
        let (n, nb) = (65536, 2048);
        let t = n / nb;
        let span = |arrival| {
            makespan(
                &predict(
                    &super::super::plan::plan_with(t, true, arrival),
                    n,
                    nb,
                    &rates,
                )
                .unwrap(),
            )
        };
        let (one, two) = (span(1), span(2));
        assert!(two < one, "one step {one} s, two {two} s");
    }
}
