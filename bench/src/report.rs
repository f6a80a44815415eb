//! What an LU run prints, real, distributed or simulated: HPL's result block
//! and residual line, and the adaptive split's device shares. The commands
//! (`cmd/`) and the simulation (`simulate.rs`) both print through it.

use tessera_linalg::hpl::HPL_THRESHOLD;

/// The line under a one-process LU's block: its workers, scheduler, front-end and
/// tiles, and the update's shape where it is not the plain tiles'.
pub fn print_lu_shape(
    rt: &tessera_engine::Runtime,
    n: usize,
    nb: usize,
    opts: &tessera_linalg::lu::LuOptions,
) {
    println!(
        "workers {}  scheduler {}  front {:?}  tiles {}x{}",
        rt.workers(),
        rt.scheduler_name(),
        opts.front,
        n.div_ceil(nb),
        n.div_ceil(nb)
    );
    if opts.panel_team.is_some() || opts.update != tessera_linalg::lu::Update::Tiles {
        println!("{}", crate::args::describe(opts));
    }
}

/// HPL's result block: the `T/V N NB P Q Time Gflops` table with one row,
/// then `verdict` (the residual line, or what a simulated run says instead)
/// between the rules. Shared by the real, distributed and simulated runs.
pub fn print_hpl_block(
    tv: &str,
    n: usize,
    nb: usize,
    (p, q): (usize, usize),
    time: f64,
    gflops: f64,
    verdict: &str,
) {
    let line = "=".repeat(80);
    let dash = "-".repeat(80);
    println!("{line}");
    println!("T/V                N    NB     P     Q               Time                 Gflops");
    println!("{dash}");
    println!(
        "{tv:<10}{n:>9}{nb:>6}{p:>6}{q:>6}{time:>19.2}{:>23}",
        sci(gflops, 4)
    );
    println!("{dash}");
    println!("{verdict}");
    println!("{line}");
}

/// TianHe-1's adaptive split: the device share of each step's columns (a
/// line only when the split is adaptive, `shares` empty otherwise).
pub fn print_split_shares(shares: &[(usize, f64)]) {
    if !shares.is_empty() {
        let list: Vec<String> = shares
            .iter()
            .map(|(k, s)| format!("{k}:{:.0}%", s * 100.0))
            .collect();
        println!("adaptive split, device share per step: {}", list.join(" "));
    }
}

/// Whether HPL's scaled residual passes its check.
pub fn passed(resid: f64) -> bool {
    resid.is_finite() && resid < HPL_THRESHOLD
}

/// HPL's residual line with its PASSED/FAILED verdict.
pub fn residual_line(resid: f64) -> String {
    let verdict = if passed(resid) { "PASSED" } else { "FAILED" };
    format!(
        "||Ax-b||_oo/(eps*(||A||_oo*||x||_oo+||b||_oo)*N)= {:>15} ...... {verdict}",
        sci(resid, 8)
    )
}

/// C-style scientific notation as HPL prints it: `1.4770e+02`.
pub fn sci(x: f64, digits: usize) -> String {
    let s = format!("{x:.digits$e}");
    match s.split_once('e') {
        Some((m, e)) => {
            let e: i32 = e.parse().unwrap_or(0);
            format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
        }
        None => s, // inf / NaN
    }
}
