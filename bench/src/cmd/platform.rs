//! `tessera platform import`: a platform file for `--simulate` from the
//! files StarPU measured on a real machine (its sampled perf models and
//! bus calibration), see `crate::starpu_import`.

use std::path::PathBuf;

use tessera_engine::simulate::starpu::SAMPLING_DIR;

use crate::platform_out::PlatformOut;
use crate::starpu_import::{self, CodeletMap};

/// Subcommands of `tessera platform`.
#[derive(Debug, clap::Subcommand)]
pub enum PlatformCmd {
    /// Write a platform file (and its perf-model folder beside it) from a
    /// StarPU machine's sampled perf models and bus files.
    Import(ImportArgs),
}

/// Options of `tessera platform import`.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The StarPU machine: the NAME of `bus/NAME.*` and `codelets/45/*.NAME`
    /// (the Debian package ships attila, idgraf, mirage, sirocco, hannibal,
    /// hannibal-pitch).
    #[arg(long, value_name = "NAME")]
    pub starpu_machine: String,
    /// StarPU's sampling folder (holding `bus/` and `codelets/45/`).
    #[arg(long, value_name = "DIR", default_value = SAMPLING_DIR)]
    pub dir: PathBuf,
    /// The platform file to write; its models go to the same path with the
    /// extension `.perfmodels`.
    #[arg(long, short, value_name = "FILE.toml")]
    pub out: PathBuf,
    /// Which StarPU model times which part of the LU, `KEY=SYMBOL` with KEY
    /// one of gemm, trsm, getrf, trsm-below (the panel is getrf of its
    /// diagonal tile plus trsm-below per tile under it) [default: StarPU's
    /// double LU, starpu_dlu_lu_model_22, _12, _11, _21].
    #[arg(long = "map", value_name = "KEY=SYMBOL")]
    pub map: Vec<String>,
}

/// Runs one `tessera platform` subcommand.
pub fn run(cmd: PlatformCmd) -> Result<(), String> {
    let PlatformCmd::Import(a) = cmd;
    let mut map = CodeletMap::default();
    for m in &a.map {
        map.set(m)?;
    }
    // Every destination checked before anything is read or written: a
    // failed import leaves nothing new or changed (issue 42).
    let dest = PlatformOut::check(&a.out)?;
    let imp = starpu_import::import(&a.dir, &a.starpu_machine, &map)?;
    starpu_import::write(&imp, &dest)?;
    let models = &dest.models;
    let m = &imp.machine;
    println!(
        "{}: StarPU machine '{}': {} cores, {} CUDA device(s) ({}), models in {}",
        a.out.display(),
        m.name,
        m.cpus,
        m.gpus.len(),
        m.gpus
            .iter()
            .map(|g| tessera_engine::fmt::bytes(g.memory))
            .collect::<Vec<_>>()
            .join(", "),
        models.display()
    );
    for nb in imp.sampled_nbs() {
        println!(
            "  nb {nb}: GEMM bound {:.1} GFLOP/s ({} CPU workers and {} GPUs at their modelled GEMM rates)",
            imp.gemm_bound(nb).expect("sampled"),
            m.cpus.saturating_sub(m.gpus.len()).max(1),
            m.gpus.len()
        );
    }
    for n in &m.notes {
        println!("  note: {n}");
    }
    Ok(())
}
