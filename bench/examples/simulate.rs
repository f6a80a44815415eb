//! The simulator from Rust: a DAG run here for real, every task timed
//! (calibration on), then predicted from those measurements on described
//! machines: this one (`bench/platforms/this-machine.toml`, written by
//! `tessera calibrate`) and the same with four times the cores. In
//! simulated time no body runs and no thread starts: each task lasts what
//! it measured, and `Simulation::now` is the predicted time.
//!
//! `cargo run --release --example simulate`

use std::time::Instant;

use tessera_engine::simulate::{Platform, Simulation};
use tessera_engine::{Codelet, Config, Error, ReadWrite, Runtime};

/// 16 blocks, each smoothed 8 times in a row: 16 chains of 8 tasks.
fn dag(rt: &Runtime) -> Result<(), Error> {
    // Named for this program: a platform's rates are matched by name.
    let smooth = Codelet::<ReadWrite<Vec<f64>>>::new("example-smooth").cpu(|_, _, v| {
        for i in 1..v.len() {
            v[i] = 0.5 * (v[i] + v[i - 1]);
        }
        Ok(())
    });
    let blocks: Vec<_> = (0..16)
        .map(|b| rt.register(vec![b as f64; 1 << 16]))
        .collect();
    for _ in 0..8 {
        for b in &blocks {
            rt.task(&smooth, b.rw()).submit()?;
        }
    }
    rt.wait_all()
}

/// The predicted time of `dag` on `platform`, timed by `real`'s measurements.
fn predict(platform: Platform, real: &Runtime) -> Result<f64, Box<dyn std::error::Error>> {
    let sim = Simulation::with_calibrated(platform, real.perf_models())?;
    // This program reads the warnings itself.
    sim.print_warnings(false);
    dag(&Runtime::new(Config::simulated(sim.node(0)))?)?;
    // Every codelet was measured: the one warning says that this machine's
    // timings stand for the platform's cores (which here are this machine's).
    let w = sim.warnings();
    assert!(
        w.len() == 1 && w[0].contains("measurements of this machine"),
        "{w:?}"
    );
    Ok(sim.now())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let here = concat!(env!("CARGO_MANIFEST_DIR"), "/platforms/this-machine.toml");
    let platform = Platform::load(here)?;
    let cores = platform.node.cores;

    let real = Runtime::new(Config::with_workers(cores).calibrate(true))?;
    let t0 = Instant::now();
    dag(&real)?;
    let measured = t0.elapsed().as_secs_f64();

    let mut bigger = platform.clone();
    bigger.node.cores *= 4;
    let (same, more) = (predict(platform, &real)?, predict(bigger, &real)?);
    println!("simulate: 16 chains of 8 tasks on {cores} workers: {measured:.4} s measured");
    println!(
        "simulate: predicted {same:.4} s on {cores} cores, {more:.4} s on {}",
        4 * cores
    );
    assert!(more < same, "more cores, sooner");
    Ok(())
}

#[test]
fn runs() {
    main().unwrap();
}
