//! `tessera gpu-check`: the CUDA backend's self-check (`cuda::check`) on each
//! GPU asked for — what to run first on a machine with GPUs.
//!
//! It runs the backend's raw operations (cuBLAS dgemm and dtrsm, the panel LU,
//! the NVRTC row-swap and CSR SpMV kernels) against plain CPU references on
//! seeded data, upload and download round trips, and measures the GPU's own
//! cuBLAS dgemm and device-to-device copy rates. It does not run the codelets
//! (`tessera_tasks::codelets`) nor the typed `views` their CUDA bodies call: a
//! real run checks those, e.g. `tessera lu --gpus all` with its residual.

/// Options of `tessera gpu-check`.
#[derive(clap::Args, Debug)]
pub struct GpuCheckArgs {
    /// GPUs to check: `all`, a count, or a list of indices.
    #[arg(long, default_value = "all")]
    pub gpus: String,
}

/// Run the self-check on every GPU asked for; fails if any line fails or
/// there is no GPU.
#[cfg(feature = "cuda")]
pub fn run(args: GpuCheckArgs) -> Result<(), String> {
    use tessera_backends::cuda;
    let infos = cuda::detect()?;
    println!("{} GPU(s) found", infos.len());
    let gpus = cuda::open_spec(&args.gpus)?;
    if gpus.is_empty() {
        return Err(format!("--gpus {}: no GPU selected", args.gpus));
    }
    let mut failed = 0;
    for g in &gpus {
        println!("{}", g.info());
        for line in cuda::check::self_check(g)? {
            let verdict = if line.passed { "ok    " } else { "FAILED" };
            failed += usize::from(!line.passed);
            println!(
                "  {verdict} {:<40} max rel err {:.1e}  {}",
                line.what, line.max_rel_err, line.detail
            );
        }
    }
    if failed > 0 {
        return Err(format!("{failed} GPU check(s) failed"));
    }
    Ok(())
}

/// Without the `cuda` feature there is nothing to check.
#[cfg(not(feature = "cuda"))]
pub fn run(args: GpuCheckArgs) -> Result<(), String> {
    Err(format!(
        "--gpus {}: this tessera was built without the cuda feature (cargo build --release --features cuda)",
        args.gpus
    ))
}
