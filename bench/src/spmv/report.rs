//! The lines a SpMV or solver run prints, the same in one process ([`super::run`]) and
//! across ranks ([`super::dist`]): column-index layout, why CG stopped, its true residual, the
//! iteration's time split and rates against STREAM.

use tessera_linalg::solver::CgOptions;
use tessera_linalg::sparse::csr::{compact_pays_for, COMPACT_MIN_ROW_LEN};

/// What the row blocks hold as column indices, for the output.
pub fn compact_line(compact_nnz: usize, nnz: usize, rows: usize, off: bool) -> String {
    if off {
        return "column indices: u32 (--no-compact)".into();
    }
    if compact_nnz == 0 && !compact_pays_for(nnz, rows) {
        return format!(
            "column indices: u32 (rows of {:.1} entries on average, fewer than {COMPACT_MIN_ROW_LEN}: 16-bit gaps measured slower on short rows)",
            nnz as f64 / rows.max(1) as f64
        );
    }
    format!(
        "column indices: 16-bit gaps between a row's consecutive columns on {:.1} % of the nonzeros (blocks whose rows rise by at most 65,535 at a time), u32 on the rest; --no-compact keeps u32 everywhere",
        100.0 * compact_nnz as f64 / nnz.max(1) as f64
    )
}

/// A line saying why an effective rate `share` times STREAM's (past 1) is not past a
/// physical limit, or nothing (issue 42: "170 % of STREAM triad" went unexplained).
pub fn past_stream_note(share: f64) -> String {
    if share <= 1.0 {
        return String::new();
    }
    format!(
        "note: {:.0} % of STREAM is past what memory gives: part of the data this run streams sits in the caches (STREAM's arrays are made larger than them), or STREAM was measured low on a busy machine\n",
        share * 100.0
    )
}

/// `cg: stopped after N iterations: why (the limit)`.
pub fn stop_line(stats: &tessera_linalg::spmv::IterStats, opts: &CgOptions) -> String {
    let why = match stats.stop {
        Some(r) => r.to_string(),
        None => "not run".into(),
    };
    format!(
        "cg: stopped after {} iterations, {why} (--cg {}, --pc {}, --rtol {:e}, --max-iters {})",
        stats.iterations, opts.variant, opts.pc, opts.rtol, opts.max_iters
    )
}

/// `cg: true residual ...`, and, where the run stopped as converged but the true
/// residual `res` is above `--rtol`, a line saying so: the recursive residual met the
/// tolerance, the solution did not (issue 42: "converged" was printed beside a true
/// residual far above the tolerance asked).
pub fn true_residual_lines(
    res: f64,
    stats: &tessera_linalg::spmv::IterStats,
    opts: &CgOptions,
) -> String {
    let mut text = format!("cg: true residual ||b - A x|| / ||b|| = {res:.3e}\n");
    if stats.stop == Some(tessera_linalg::solver::StopReason::Converged)
        && (res > opts.rtol || res.is_nan())
    {
        text += &format!(
            "cg: not converged to --rtol {:e}: the recursive residual reached it, but the true residual stays at {res:.3e} (rounding: the tolerance is below what this solve attains)\n",
            opts.rtol
        );
    }
    text
}

/// The solvers' time split and rates, the same lines in one process and across ranks: the
/// whole iteration, its SpMV part (fused dots included), the halo wait (across ranks), vector
/// work and the sums' wait (all-reduce across ranks); effective GB/s of the SpMV and of the whole iteration (`spmv_bytes` and
/// `vector_bytes` per iteration) against the STREAM triad (GB/s); `slowest`: across ranks,
/// the slowest rank's whole-run seconds, which the rates then use.
pub fn solver_lines(
    stats: &tessera_linalg::spmv::IterStats,
    spmv_bytes: f64,
    vector_bytes: f64,
    stream: f64,
    slowest: Option<f64>,
) -> String {
    if stats.iterations == 0 {
        // Converged at the start (a tolerance above the first residual): there is no
        // iteration to split, and rates over none would print "inf GB/s".
        return "iteration: none ran, so no time split or rates\n".to_owned();
    }
    let k = stats.iterations as f64;
    let total = slowest
        .unwrap_or(stats.total_seconds)
        .max(f64::MIN_POSITIVE);
    let ms = |s: f64| s / k * 1e3;
    let pct = |s: f64| s / total * 100.0;
    let other = (stats.total_seconds
        - stats.spmv_seconds
        - stats.halo_seconds
        - stats.vector_seconds
        - stats.reduce_seconds)
        .max(0.0);
    let spmv_gbs = spmv_bytes * k / stats.spmv_seconds.max(f64::MIN_POSITIVE) / 1e9;
    let all_gbs = (spmv_bytes + vector_bytes) * k / total / 1e9;
    let note = past_stream_note(spmv_gbs.max(all_gbs) / stream);
    format!(
        "iteration: {:.3} ms = SpMV {:.3} ms ({:.0} %) + halo wait {:.3} ms ({:.0} %) + vector work {:.3} ms ({:.0} %) + allreduce {:.3} ms ({:.0} %) + other {:.3} ms\n\
         effective: SpMV {spmv_gbs:.1} GB/s = {:.0} % of STREAM triad ({stream:.1} GB/s); whole iteration {all_gbs:.1} GB/s = {:.0} %\n{note}",
        ms(total),
        ms(stats.spmv_seconds),
        pct(stats.spmv_seconds),
        ms(stats.halo_seconds),
        pct(stats.halo_seconds),
        ms(stats.vector_seconds),
        pct(stats.vector_seconds),
        ms(stats.reduce_seconds),
        pct(stats.reduce_seconds),
        ms(other),
        spmv_gbs / stream * 100.0,
        all_gbs / stream * 100.0,
    )
}
