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
            eprintln!("wrote {}", output.display());
            Ok(())
        }
        TraceCmd::Merge { files, output } => {
            let traces = files
                .iter()
                .map(|f| trace::load(f).map_err(|e| e.to_string()))
                .collect::<Result<Vec<_>, _>>()?;
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
            TraceCmd::Merge { files, output } => {
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
