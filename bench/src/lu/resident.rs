//! `tessera lu --update resident[:no-lookahead]`: the device-resident LU
//! (`tessera_linalg::lu::resident`), run on the one device of the runtime
//! or predicted on a platform's accelerator. Prints HPL's block, where the
//! device's time went (from its own events), and, with `--trace`, writes
//! the streams' timeline as a trace that `tessera trace` reads.

use std::path::Path;
use std::time::Instant;

use tessera_engine::simulate::platform::{Platform, Rate};
use tessera_engine::trace::model::{TaskRecord, Trace, TransferRecord, WorkerInfo};
use tessera_engine::Runtime;
use tessera_linalg::hpl::{generate_matrix, generate_rhs, hpl_flops, hpl_residual, HPL_THRESHOLD};
use tessera_linalg::lu::resident::plan::{plan, Op, STREAMS};
use tessera_linalg::lu::resident::predict::{op_work, predict, Rates};
use tessera_linalg::lu::resident::{OpTime, Pinning, Prepared, ResidentOptions, ResidentReport};

use crate::args::LuArgs;
use crate::report::{passed, print_hpl_block, residual_line};

/// The names of the resident LU's rates in a platform's accelerator
/// `codelets` table (its operations are not codelets: see
/// `tessera_linalg::lu::resident`).
pub const RATE_NAMES: [&str; 5] = [
    "resident_gemm",
    "resident_trsm",
    "resident_panel",
    "resident_swap",
    "resident_copy",
];

/// `--update resident` (look-ahead) or `resident:no-lookahead`; `None` for
/// every other shape (`auto` is resolved later, by [`auto`] or
/// [`auto_simulated`], once the devices are known).
pub fn options(args: &LuArgs) -> Result<Option<ResidentOptions>, String> {
    let lookahead = match args.update.as_str() {
        "resident" => true,
        "resident:no-lookahead" => false,
        s if s.starts_with("resident") => {
            return Err(format!(
                "--update: expected resident or resident:no-lookahead, got '{s}'"
            ))
        }
        _ => return Ok(None),
    };
    if args.split != "auto" {
        return Err(format!(
            "--split {}: the resident LU keeps every column on its one device",
            args.split
        ));
    }
    Ok(Some(ResidentOptions {
        lookahead,
        pin: !args.no_pin,
        seed: None,
    }))
}

/// `--no-pin` belongs to the resident LU alone.
pub fn check_no_pin(args: &LuArgs, resident: Option<ResidentOptions>) -> Result<(), String> {
    if args.no_pin && resident.is_none() {
        return Err(format!(
            "--no-pin is for the resident LU (--update resident, or auto with one GPU the matrix fits); --update {} stages its copies",
            args.update
        ));
    }
    Ok(())
}

/// What `--update auto` resolves to on `rt`: the resident LU where the run
/// has exactly one device, a GPU, that holds the whole matrix, the columns
/// placed automatically and no process grid (verified on an H200 at stop
/// 46; emulated devices keep the task-graph shapes, which CI tests).
pub fn auto(args: &LuArgs, rt: &Runtime) -> Option<ResidentOptions> {
    let devices = &rt.config().devices;
    let one_gpu = devices.len() == 1 && devices[0].arch() == "cuda";
    (args.update == "auto"
        && args.split == "auto"
        && args.grid.is_none()
        && one_gpu
        && tessera_linalg::lu::resident::fits(rt, args.n, args.nb()))
    .then_some(ResidentOptions {
        lookahead: true,
        pin: !args.no_pin,
        seed: None,
    })
}

/// [`auto`] for a run simulated on `p`: one accelerator of arch `cuda`
/// whose memory holds the matrix and which gives the resident LU's rates.
pub fn auto_simulated(args: &LuArgs, p: &Platform) -> Option<ResidentOptions> {
    let acc = match p.node.accelerators.as_slice() {
        [a] if a.count == 1 && a.proc.arch == "cuda" => a,
        _ => return None,
    };
    let fits = acc.memory.is_none_or(|m| {
        tessera_linalg::lu::resident::device_bytes(args.n, args.nb()) + (256 << 20) <= m
    });
    let rated = RATE_NAMES
        .iter()
        .all(|r| acc.proc.codelets.contains_key(*r));
    (args.update == "auto"
        && args.split == "auto"
        && args.grid.is_none()
        && p.ranks() == 1
        && fits
        && rated)
        .then_some(ResidentOptions {
            lookahead: true,
            pin: !args.no_pin,
            seed: None,
        })
}

/// Runs the resident LU on `rt`'s one device.
pub fn run(
    args: &LuArgs,
    rt: &Runtime,
    opts: ResidentOptions,
    gpu_dgemm: f64,
) -> Result<(), String> {
    let (n, nb) = (args.n, args.nb());
    if nb < 1024 && rt.config().devices.iter().any(|d| d.arch() == "cuda") {
        crate::say!(
            "tessera: note: the resident LU's calls are --nb wide; on an H200 at N = 65536, --nb 2048 ran at 67 % of cuBLAS dgemm, 1024 at 64 %, 448 at 57 %"
        );
    }
    let a = generate_matrix(n, nb, args.seed);
    let b = generate_rhs(n, args.seed);
    let mut prepared = Prepared::new(rt, a, opts).map_err(|e| format!("--update resident: {e}"))?;
    let pinning = prepared.pinning().clone();
    let setup = prepared.setup_seconds();
    let t0 = Instant::now();
    let (x, report) = prepared.factor(&b).map_err(|e| format!("LU failed: {e}"))?;
    let time = t0.elapsed().as_secs_f64();
    // The device and the page-locked memory go back after the clock stops.
    let t1 = Instant::now();
    drop(prepared.release()?);
    let release = t1.elapsed().as_secs_f64();
    let resid = hpl_residual(n, nb, args.seed, &x, &b);
    let gflops = print_block(n, nb, time, &residual_line(resid));
    println!(
        "resident LU on {}: look-ahead {}; host memory {}",
        report.device,
        if opts.lookahead {
            "on (panel stream)"
        } else {
            "off"
        },
        match &pinning {
            Pinning::Pinned(bytes, s) => format!(
                "page-locked ({:.1} GiB in {s:.2} s, before the timed region)",
                *bytes as f64 / (1u64 << 30) as f64
            ),
            Pinning::Off => "pageable (--no-pin): the driver stages the copies".into(),
            Pinning::Refused(e) =>
                format!("pageable, the driver refused to page-lock it ({e}): copies staged"),
            Pinning::Emulated => "copied over the emulated device's link".into(),
        }
    );
    if setup > 0.0 {
        println!(
            "device set-up {setup:.2} s before the timed region (the matrix's allocation, streams, handles, kernels, one warm-up call of each operation)"
        );
    }
    print_times(&report, n, nb, "device time");
    println!(
        "  solve {:.3} s after the last operation (timed); release of the device and the host memory {release:.2} s (untimed)",
        report.solve
    );
    if gpu_dgemm > 0.0 {
        println!(
            "LU {gflops:.1} GFLOP/s = {:.1} % of the GPUs' cuBLAS dgemm ({:.1} GFLOP/s, measured in this run)",
            gflops * 1e9 / gpu_dgemm * 100.0,
            gpu_dgemm / 1e9
        );
    }
    if let Some(path) = &args.trace {
        save_trace(&report, n, nb, path)?;
    }
    if !passed(resid) {
        return Err(format!(
            "residual check FAILED ({resid:e} >= {HPL_THRESHOLD})"
        ));
    }
    Ok(())
}

/// HPL's result block of a resident run of `time` seconds; returns its
/// GFLOP/s.
fn print_block(n: usize, nb: usize, time: f64, verdict: &str) -> f64 {
    let gflops = hpl_flops(n) / time / 1e9;
    print_hpl_block("TSRESIDENT", n, nb, (1, 1), time, gflops, verdict);
    gflops
}

/// Each kind's total time and rate, each stream's busy share, the span.
fn print_times(report: &ResidentReport, n: usize, nb: usize, what: &str) {
    let span = report.span();
    let mut kinds = std::collections::BTreeMap::<&str, (f64, usize, f64, f64)>::new();
    for t in &report.times {
        let (flops, bytes) = op_work(&t.op, n, nb);
        let e = kinds.entry(t.op.kind()).or_default();
        e.0 += t.end - t.start;
        e.1 += 1;
        e.2 += flops;
        e.3 += bytes;
    }
    println!("{what} over {span:.3} s from the first operation to the last:");
    for (kind, (secs, count, flops, bytes)) in kinds {
        let rate = if flops > 0.0 {
            format!("{:.0} GFLOP/s", flops / secs.max(1e-12) / 1e9)
        } else {
            format!("{:.1} GB/s", bytes / secs.max(1e-12) / 1e9)
        };
        println!("  {kind:<9} {count:>5} calls {secs:>9.3} s  {rate}");
    }
    let busy = report.by_stream();
    let line: Vec<String> = STREAMS
        .iter()
        .map(|s| {
            format!(
                "{s:?} {:.0} %",
                100.0 * busy.get(s).copied().unwrap_or(0.0) / span.max(1e-12)
            )
        })
        .collect();
    println!("  streams busy: {}", line.join(", "));
}

/// The streams' timeline as a trace: one track per stream, compute
/// operations as tasks (with their flops), copies as tasks and transfers.
fn save_trace(report: &ResidentReport, n: usize, nb: usize, path: &Path) -> Result<(), String> {
    let ns = |s: f64| (s.max(0.0) * 1e9) as u64;
    let mut trace = Trace {
        workers: STREAMS
            .iter()
            .map(|s| WorkerInfo {
                name: format!("{} {s:?}", report.device),
                memory_node: 1,
            })
            .collect(),
        ..Trace::default()
    };
    for (id, t) in report.times.iter().enumerate() {
        let (flops, bytes) = op_work(&t.op, n, nb);
        trace.tasks.push(TaskRecord {
            id: id as u64,
            codelet: t.op.kind().to_string(),
            label: Some(t.op.to_string()),
            worker: t.stream as u32,
            priority: 0,
            flops,
            start: ns(t.start),
            end: ns(t.end),
            team_rank: 0,
        });
        let (from, to) = match t.op {
            Op::Upload(_) => (0, 1),
            Op::Download(_) => (1, 0),
            _ => continue,
        };
        trace.transfers.push(TransferRecord {
            handle: id as u64,
            from_node: from,
            to_node: to,
            bytes: bytes as u64,
            start: ns(t.start),
            end: ns(t.end),
        });
    }
    crate::write_trace(&trace, path, "operations")
}

/// The codelet rate `name` of the platform's first accelerator, in units
/// per second (flop/s or bytes/s as the rate says).
fn rate(p: &Platform, file: &Path, name: &str, flops: bool) -> Result<f64, String> {
    let acc = p.node.accelerators.first().ok_or_else(|| {
        format!(
            "{}: --update resident needs an accelerator in the platform",
            file.display()
        )
    })?;
    let missing = || {
        format!(
            "{}: node.accelerators[0].codelets.{name}: missing; the resident LU's prediction needs a rate for each of its operations ({}: the first three in gflops, the last two in gbs)",
            file.display(),
            RATE_NAMES.join(", ")
        )
    };
    match (acc.proc.codelets.get(name).ok_or_else(missing)?, flops) {
        (Rate::Gflops(g), true) => Ok(g * 1e9),
        (Rate::Gbs(g), false) => Ok(g * 1e9),
        _ => Err(format!(
            "{}: node.accelerators[0].codelets.{name}: give it in {}",
            file.display(),
            if flops { "gflops" } else { "gbs" }
        )),
    }
}

/// Predicts the resident LU on `p`'s first accelerator.
pub fn simulate(
    args: &LuArgs,
    p: &Platform,
    file: &Path,
    opts: ResidentOptions,
) -> Result<(), String> {
    let (n, nb) = (args.n, args.nb());
    if p.ranks() > 1 || p.node.accelerators.iter().map(|a| a.count).sum::<usize>() != 1 {
        return Err(format!(
            "{}: the resident LU runs on one device of one process; the platform has {} rank(s) and {} accelerator(s)",
            file.display(),
            p.ranks(),
            p.node.accelerator_count()
        ));
    }
    let acc = &p.node.accelerators[0];
    let rates = Rates {
        gemm: rate(p, file, "resident_gemm", true)?,
        trsm: rate(p, file, "resident_trsm", true)?,
        panel: rate(p, file, "resident_panel", true)?,
        swap: rate(p, file, "resident_swap", false)?,
        copy: if opts.pin {
            rate(p, file, "resident_copy", false)?
        } else {
            acc.link.bandwidth
        },
        latency: acc.proc.overhead,
    };
    let need = tessera_linalg::lu::resident::device_bytes(n, nb);
    if let Some(mem) = acc.memory {
        if need > mem {
            return Err(format!(
                "--update resident: the {:.1} GiB matrix does not fit {}'s {:.1} GiB",
                need as f64 / (1u64 << 30) as f64,
                acc.name,
                mem as f64 / (1u64 << 30) as f64
            ));
        }
    }
    let plan = plan(n.div_ceil(nb), opts.lookahead);
    let times: Vec<OpTime> = predict(&plan, n, nb, &rates)?;
    let report = ResidentReport {
        device: format!("{} (simulated)", acc.name),
        pinning: if opts.pin {
            Pinning::Pinned(need, 0.0)
        } else {
            Pinning::Off
        },
        times,
        // Not modelled: the device solve reads the factors once.
        solve: 0.0,
    };
    let time = report.span();
    let gflops = print_block(n, nb, time, "(simulated: no residual)");
    println!(
        "predicted on {}: {:.1} % of the platform's peak ({:.0} GFLOP/s), {:.1} % of its resident_gemm rate; look-ahead {}; copies at {:.1} GB/s ({})",
        p.name,
        100.0 * gflops / p.peak_gflops(),
        p.peak_gflops(),
        100.0 * gflops * 1e9 / rates.gemm,
        if opts.lookahead { "on" } else { "off" },
        rates.copy / 1e9,
        if opts.pin { "resident_copy: page-locked" } else { "the link's rate: staged" }
    );
    print_times(&report, n, nb, "predicted device time");
    if let Some(path) = &args.trace {
        save_trace(&report, n, nb, path)?;
    }
    Ok(())
}
