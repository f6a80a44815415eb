//! The README's first DAG: register data, submit tasks that declare how
//! they use it, wait, take the result back.
//!
//! `cargo run --example readme_dag`

use tessera_engine::{Codelet, Config, Error, Runtime, Scheduler};

fn main() -> Result<(), Error> {
    // Two CPU workers under the priority policy (larger priorities first).
    let rt = Runtime::new(Config::with_workers(2).scheduler(Scheduler::Prio))?;
    let x = rt.register(vec![1.0f64; 1000]);
    let sum = rt.register(0.0f64);
    // Kernels known by name (traces and perf models are keyed by it). Their
    // bodies are given per task here, typed by the task's accesses.
    let (scale, reduce) = (Codelet::new("scale"), Codelet::new("reduce"));

    // `x.rw()`: the body gets `&mut Vec<f64>`.
    rt.task(&scale, x.rw())
        .priority(1)
        .cpu(|x| {
            x.iter_mut().for_each(|v| *v *= 2.0);
            Ok(())
        })
        .submit()?;
    // Reads `x`, submitted after the task that writes it: it runs after it
    // (sequential task flow). The body gets `(&Vec<f64>, &mut f64)`.
    rt.task(&reduce, (x.r(), sum.w()))
        .cpu(|(x, sum)| {
            *sum = x.iter().sum();
            Ok(())
        })
        .submit()?;
    rt.wait_all()?; // a panicking body would be an Err naming the task
    let sum = rt.unregister(sum)?;
    println!("readme_dag: the sum of 2·x over 1000 ones is {sum}");
    assert_eq!(sum, 2000.0);
    Ok(())
}

#[test]
fn runs() {
    main().unwrap();
}
