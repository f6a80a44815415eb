//! `tessera trace ...`: inspect a recorded trace file (statistics, Gantt chart), and merge
//! the files of the ranks of a distributed run into one.

use std::path::PathBuf;

use tessera_engine::trace;

use crate::gantt;

/// Subcommands of `tessera trace`.
#[derive(Debug, clap::Subcommand)]
pub enum TraceCmd {
    /// Print run statistics: makespan, busy time per worker, time per codelet,
    /// critical path and efficiency.
    Summary {
        /// Trace file (Chrome JSON written by `--trace`).
        file: PathBuf,
    },
    /// Draw a Gantt chart, one row per worker, coloured by codelet.
    Gantt {
        /// Trace file (Chrome JSON written by `--trace`).
        file: PathBuf,
        /// Image to write; `.svg` or `.png`.
        #[arg(short, long)]
        output: PathBuf,
        /// Image width in pixels.
        #[arg(long, default_value_t = 1600)]
        width: u32,
        /// Image height in pixels.
        #[arg(long, default_value_t = 900)]
        height: u32,
    },
    /// Merge the traces of the ranks of a distributed run (`--trace out.json` under mpirun
    /// writes `out.rank0.json`, `out.rank1.json`, ...) into one file with a process per rank,
    /// on one clock.
    Merge {
        /// Trace files, one per rank (or merged ones), in any order.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Merged trace to write.
        #[arg(short, long)]
        output: PathBuf,
        /// Merge traces of different runs (by their run ids) anyway.
        #[arg(long)]
        force: bool,
    },
}

/// Runs one `tessera trace` subcommand; errors name the file and the problem.
pub fn run(cmd: TraceCmd) -> Result<(), String> {
    match cmd {
        TraceCmd::Summary { file } => {
            let trace = trace::load(&file).map_err(|e| e.to_string())?;
            print!("{}", trace::stats(&trace));
            Ok(())
        }
        TraceCmd::Gantt {
            file,
            output,
            width,
            height,
        } => {
            let trace = trace::load(&file).map_err(|e| e.to_string())?;
            gantt::render(&trace, &output, width, height)?;
            crate::say!("wrote {}", output.display());
            Ok(())
        }
        TraceCmd::Merge {
            files,
            output,
            force,
        } => {
            refuse_an_input_as_output(&files, &output)?;
            let traces = files
                .iter()
                .map(|f| trace::load(f).map_err(|e| e.to_string()))
                .collect::<Result<Vec<_>, _>>()?;
            match trace::check_same_run(&traces).and_then(|()| check_rank_files(&files, &traces)) {
                Err(e) if !force => return Err(e),
                Err(e) => crate::say!("tessera: warning: {e}; merged as asked"),
                Ok(()) => {}
            }
            missing_ranks(&traces);
            let merged = trace::merge(traces)?;
            trace::save(&merged, &output, &Default::default()).map_err(|e| e.to_string())?;
            println!(
                "merged {} file(s): {} rank(s), {} tasks, {} messages, written to {}",
                files.len(),
                merged.ranks.len(),
                merged.tasks.len(),
                merged.messages.len(),
                output.display()
            );
            Ok(())
        }
    }
}

/// `Err` when a single-process trace (no ranks) is merged with a rank's
/// trace: they are of different runs, whatever their clocks say (issue 42:
/// merged silently, the process becoming rank 0).
fn check_rank_files(files: &[PathBuf], traces: &[trace::Trace]) -> Result<(), String> {
    let single = traces.iter().position(|t| t.ranks.is_empty());
    let ranked = traces.iter().position(|t| !t.ranks.is_empty());
    if let (Some(s), Some(r)) = (single, ranked) {
        return Err(format!(
            "{} is the trace of a single process and {} of rank {} of a distributed run: merge the rank files of one run (use --force to merge anyway)",
            files[s].display(),
            files[r].display(),
            traces[r].ranks[0].rank
        ));
    }
    Ok(())
}

/// Warn when the ranks numbered past those given: a run of ranks 0 to `r`
/// whose files are not all here (issue 42: rank numbers past the file count
/// were merged without a word).
fn missing_ranks(traces: &[trace::Trace]) {
    let ranks: std::collections::BTreeSet<u32> = traces
        .iter()
        .flat_map(|t| t.ranks.iter().map(|r| r.rank))
        .collect();
    let Some(&last) = ranks.last() else { return };
    let missing: Vec<String> = (0..=last)
        .filter(|r| !ranks.contains(r))
        .map(|r| r.to_string())
        .collect();
    if !missing.is_empty() {
        crate::say!(
            "tessera: warning: the traces hold ranks up to {last}, but not rank(s) {}: their files are missing from the merge",
            missing.join(", ")
        );
    }
}

/// `trace merge -o` one of its own inputs (by any name: a symlink or a
/// hard link to it) is refused: the input would be replaced by the merge
/// (issue 42: `merge a.rank0.json a.rank1.json -o a.rank0.json` exited 0
/// and the rank-0 trace was gone).
fn refuse_an_input_as_output(files: &[PathBuf], output: &std::path::Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let Ok(out) = std::fs::metadata(output) else {
        // Not there yet (or a dangling link): it is none of the inputs,
        // which must exist to be read.
        return Ok(());
    };
    for f in files {
        if let Ok(m) = std::fs::metadata(f) {
            if (m.dev(), m.ino()) == (out.dev(), out.ino()) {
                return Err(format!(
                    "-o {}: it is the input {}: the merge would replace it; write to another file",
                    output.display(),
                    f.display()
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    // Proves that the subcommands parse as documented and report a bad file by name.
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        cmd: TraceCmd,
    }

    #[test]
    fn parses_with_defaults() {
        let cli = Cli::try_parse_from(["t", "gantt", "run.json", "-o", "run.png"]).unwrap();
        match cli.cmd {
            TraceCmd::Gantt {
                file,
                output,
                width,
                height,
            } => {
                assert_eq!((file, output), ("run.json".into(), "run.png".into()));
                assert_eq!((width, height), (1600, 900));
            }
            other => panic!("{other:?}"),
        }
        assert!(
            Cli::try_parse_from(["t", "gantt", "run.json"]).is_err(),
            "-o is required"
        );
        let cli = Cli::try_parse_from(["t", "summary", "run.json"]).unwrap();
        assert!(matches!(cli.cmd, TraceCmd::Summary { .. }));
        let cli =
            Cli::try_parse_from(["t", "merge", "a.json", "b.json", "-o", "all.json"]).unwrap();
        match cli.cmd {
            TraceCmd::Merge { files, output, .. } => {
                assert_eq!(files, [PathBuf::from("a.json"), "b.json".into()]);
                assert_eq!(output, PathBuf::from("all.json"));
            }
            other => panic!("{other:?}"),
        }
        assert!(Cli::try_parse_from(["t", "merge", "-o", "all.json"]).is_err());
    }

    #[test]
    fn summary_and_gantt_of_a_saved_trace() {
        use tessera_engine::trace::{ChromeOptions, TaskRecord, Trace, WorkerInfo};
        let dir = std::env::temp_dir().join(format!("tessera-trace-cmd-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("run.json");
        let t = Trace {
            workers: vec![WorkerInfo {
                name: "cpu0".into(),
                memory_node: 0,
            }],
            tasks: vec![TaskRecord {
                id: 0,
                codelet: "gemm".into(),
                label: None,
                worker: 0,
                priority: 0,
                flops: 2e6,
                start: 0,
                end: 1_000,
                team_rank: 0,
            }],
            transfers: vec![],
            edges: vec![],
            ..Trace::default()
        };
        trace::save(&t, &file, &ChromeOptions::default()).unwrap();
        run(TraceCmd::Summary { file: file.clone() }).unwrap();
        let output = dir.join("run.svg");
        run(TraceCmd::Gantt {
            file: file.clone(),
            output: output.clone(),
            width: 800,
            height: 400,
        })
        .unwrap();
        assert!(output.exists());

        let missing = dir.join("missing.json");
        let e = run(TraceCmd::Summary {
            file: missing.clone(),
        })
        .unwrap_err();
        assert!(e.starts_with(&missing.display().to_string()), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
