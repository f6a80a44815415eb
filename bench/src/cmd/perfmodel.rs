//! `tessera perfmodel ...`: inspect the recorded performance models.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::PathBuf;

use tessera_engine::fmt::{duration_ns, table};
use tessera_engine::perfmodel::{self, ModelSummary, PerfModels};

/// Subcommands of `tessera perfmodel`.
#[derive(Debug, clap::Subcommand)]
pub enum PerfmodelCmd {
    /// Print each (codelet, architecture, size): samples, outliers rejected,
    /// median and MAD; then the fit t = a·size^b per (codelet, architecture).
    Show {
        /// Model directory [default: $TESSERA_PERFMODEL_DIR, else ~/.tessera/perfmodels].
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Show only this codelet.
        codelet: Option<String>,
    },
}

/// Runs one `tessera perfmodel` subcommand; errors name the file and the problem.
pub fn run(cmd: PerfmodelCmd) -> Result<(), String> {
    print!("{}", render(cmd)?);
    Ok(())
}

/// What [`run`] prints.
fn render(cmd: PerfmodelCmd) -> Result<String, String> {
    let PerfmodelCmd::Show { dir, codelet } = cmd;
    let dir = dir.or_else(perfmodel::default_dir).ok_or_else(|| {
        format!(
            "no model directory: pass --dir, or set {} or HOME",
            perfmodel::DIR_ENV
        )
    })?;
    let models = PerfModels::load(&dir).map_err(|e| e.to_string())?;
    let mut rows = models.summary();
    if let Some(name) = &codelet {
        let known: BTreeSet<String> = rows.iter().map(|r| r.codelet.clone()).collect();
        rows.retain(|r| &r.codelet == name);
        if rows.is_empty() {
            let known: Vec<String> = known.into_iter().collect();
            return Err(format!(
                "no model for codelet '{name}' in {} (models: {})",
                dir.display(),
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            ));
        }
    }
    let mut out = String::new();
    if rows.is_empty() {
        // A missing folder is not an error (nothing recorded yet), but a
        // mistyped `--dir` should not read like an empty one.
        let missing = if dir.is_dir() {
            ""
        } else {
            " (no such folder yet)"
        };
        writeln!(out, "no performance models in {}{missing}", dir.display()).unwrap();
        return Ok(out);
    }
    writeln!(out, "performance models in {}\n", dir.display()).unwrap();
    out.push_str(&summary_table(&rows));
    // `rows` is sorted, so the (codelet, arch) pairs come out sorted and once.
    let mut pairs: Vec<(&str, &str)> = rows.iter().map(|r| (&*r.codelet, &*r.arch)).collect();
    pairs.dedup();
    let fits: Vec<String> = pairs
        .into_iter()
        .filter_map(|(c, a)| models.fit(c, a).map(|fit| format!("  {c} on {a}: {fit}")))
        .collect();
    if !fits.is_empty() {
        writeln!(out, "\nregression for unseen sizes:").unwrap();
        for line in fits {
            writeln!(out, "{line}").unwrap();
        }
    }
    Ok(out)
}

/// `rows` as an aligned text table, one line per row: names left-aligned,
/// numbers right-aligned.
fn summary_table(rows: &[ModelSummary]) -> String {
    if rows.is_empty() {
        return "no performance models\n".to_owned();
    }
    let seconds = |s: f64| duration_ns(s * 1e9);
    let header = [
        "codelet", "arch", "size", "samples", "outliers", "median", "MAD",
    ];
    let mut cells = vec![header.map(str::to_owned).to_vec()];
    cells.extend(rows.iter().map(|r| {
        let rel = if r.median > 0.0 {
            format!(" ({:.1}%)", 100.0 * r.mad / r.median)
        } else {
            String::new()
        };
        vec![
            r.codelet.clone(),
            r.arch.clone(),
            r.size.to_string(),
            r.samples.to_string(),
            r.outliers.to_string(),
            seconds(r.median),
            format!("{}{rel}", seconds(r.mad)),
        ]
    }));
    table(&cells, 2, "")
}

#[cfg(test)]
mod tests {
    // Proves that `perfmodel show` parses as documented, prints the table and
    // the fits of a saved model, filters by codelet, and reports a bad file by name.
    use super::*;
    use clap::Parser;
    use tessera_engine::perfmodel::PerfModelConfig;

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        cmd: PerfmodelCmd,
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "tessera-perfmodel-cmd-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn show(dir: &std::path::Path, codelet: Option<&str>) -> Result<String, String> {
        render(PerfmodelCmd::Show {
            dir: Some(dir.to_owned()),
            codelet: codelet.map(str::to_owned),
        })
    }

    #[test]
    fn parses() {
        let cli = Cli::try_parse_from(["t", "show", "--dir", "m", "gemm"]).unwrap();
        let PerfmodelCmd::Show { dir, codelet } = cli.cmd;
        assert_eq!((dir, codelet), (Some("m".into()), Some("gemm".to_owned())));
        let cli = Cli::try_parse_from(["t", "show"]).unwrap();
        let PerfmodelCmd::Show { dir, codelet } = cli.cmd;
        assert_eq!((dir, codelet), (None, None));
    }

    #[test]
    fn shows_table_and_fits() {
        let dir = temp_dir("show");
        let m = PerfModels::new(PerfModelConfig {
            dir: Some(dir.clone()),
            ..PerfModelConfig::default()
        });
        for n in [128u64, 256, 512] {
            for _ in 0..3 {
                m.record("gemm", "cpu", n, 1e-10 * (n as f64).powi(3));
                m.record("trsm", "cpu", n, 1e-3);
            }
        }
        m.record("gemm", "cuda", 512, 1e-3);
        m.save().unwrap();

        let out = show(&dir, None).unwrap();
        assert!(out.contains("codelet") && out.contains("trsm"), "{out}");
        // One fit per (codelet, arch) with two sizes or more; gemm is cubic.
        assert!(
            out.contains("gemm on cpu: t = 1.0000e-10 s · size^3.000"),
            "{out}"
        );
        assert!(out.contains("trsm on cpu:"), "{out}");
        assert!(!out.contains("gemm on cuda:"), "{out}");

        let out = show(&dir, Some("gemm")).unwrap();
        assert!(out.contains("gemm") && !out.contains("trsm"), "{out}");
        let e = show(&dir, Some("potrf")).unwrap_err();
        assert!(e.contains("potrf") && e.contains("gemm, trsm"), "{e}");

        // A missing directory is not an error: nothing recorded yet.
        let out = show(&dir.join("none"), None).unwrap();
        assert!(out.starts_with("no performance models in"), "{out}");
        assert!(out.contains("(no such folder yet)"), "{out}");
        let empty = dir.join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        let out = show(&empty, None).unwrap();
        assert!(!out.contains("no such folder"), "{out}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn bad_file_is_named() {
        let dir = temp_dir("bad");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("gemm.json"), "{\"format\": [").unwrap();
        let e = show(&dir, None).unwrap_err();
        assert!(e.contains("gemm.json") && e.contains("line 1"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn table_is_aligned() {
        let m = PerfModels::default();
        for _ in 0..3 {
            m.record("gemm", "cpu", 512, 2.5e-3);
            m.record("gemm", "cuda", 512, 1.25e-4);
            m.record("getrf_panel", "cpu", 4096, 1.5);
        }
        let table = summary_table(&m.summary());
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 4, "{table}");
        assert!(lines[0].starts_with("codelet"));
        assert!(
            lines[1].starts_with("gemm ") && lines[1].contains("2.500 ms"),
            "{table}"
        );
        assert!(lines[2].contains("125.000 µs"), "{table}");
        assert!(lines[3].contains("1.500 s"), "{table}");
        // Right-aligned numeric columns end at the same place.
        let end = |l: &str, pat: &str| l.find(pat).unwrap() + pat.len();
        assert_eq!(
            end(lines[0], "median"),
            end(lines[1], "2.500 ms"),
            "{table}"
        );
    }

    #[test]
    fn empty_table_says_so() {
        assert_eq!(summary_table(&[]), "no performance models\n");
    }
}
