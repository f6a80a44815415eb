//! Regression check: runtime cost per task (submit + run an empty body +
//! release) on the three shapes of `tessera overhead`, under criterion.
//! Run with `cargo bench -p tessera-bench --bench overhead`.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use tessera_bench::cmd::overhead::{time_case, Api, Case};
use tessera_engine::{Config, Runtime};

fn per_task(c: &mut Criterion) {
    let mut group = c.benchmark_group("overhead");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(5));
    for (case, n) in [
        (Case::Independent, 100_000),
        (Case::Chain, 20_000),
        (Case::Random4, 20_000),
    ] {
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new(case.name(), n), &n, |b, &n| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for i in 0..iters {
                    let rt = Runtime::new(Config::default()).expect("runtime starts");
                    total += Duration::from_secs_f64(time_case(&rt, case, Api::Typed, n, i));
                }
                total
            })
        });
    }
    group.finish();
}

criterion_group!(benches, per_task);
criterion_main!(benches);
