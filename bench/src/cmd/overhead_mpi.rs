//! `mpirun -np 2 tessera overhead-mpi`: what a remote edge costs between two ranks, beside
//! plain MPI measured in the same run. A regression check of the distributed engine's
//! per-message costs (not a showcase).
//!
//! Tessera side: the symbolic front-end (`tessera_engine::dist::symbolic`) with empty tasks
//! whose output (8 bytes or 1 MiB) is read by a task on the other rank:
//! - *chain*: task `i` on rank `i mod 2` reads task `i − 1`'s output, so every edge waits for
//!   the one before: time per edge, against MPI's one-way latency (`osu_latency`: half a
//!   blocking ping-pong round trip);
//! - *stream*: `n` independent tasks on rank 0, each read by one task on rank 1, all edges in
//!   flight at once: bytes per second, against MPI's bandwidth (`osu_bw`: a window of 64
//!   non-blocking sends, then an acknowledgement).
//!
//! The classes describe their DAG as a PTG user (PaRSEC's, or Task Bench's `--frontend
//! symbolic`) would: tasks numbered (`TaskClasses::slot`: counters, no locked map) and the
//! order promised (`TaskClasses::described_order`: no dependency inferred from the data), so
//! what is measured is the remote edge and not the local bookkeeping around it. The chain
//! runs a second time with dependencies inferred from the data, as an STF-minded user's
//! classes would leave them: its line shows what that inference adds to each edge.
//!
//! The chain runs a third time as light tasks (`tessera_engine::dist::light`, `LightChain`):
//! each task a call over two buffers the benchmark keeps, its output packed into the edge's
//! message.
//!
//! Rounds alternate MPI and Tessera measurements; medians are printed with the ratios.

use std::sync::{Arc, LazyLock};
use std::time::Instant;

use tessera_engine::dist::light::{self, DistLightClasses};
use tessera_engine::dist::symbolic::{self, DistClasses};
use tessera_engine::dist::{Collectives, DataRef, Net};
use tessera_engine::light::LightClasses;
use tessera_engine::symbolic::{DescribedOrder, TaskClasses};
use tessera_engine::{Codelet, Config, DataHandle, Read, Runtime, Task, TaskBuilder, Write};

use crate::ranks::Ranks;

/// Options of `tessera overhead-mpi`.
#[derive(clap::Args, Debug)]
pub struct OverheadMpiArgs {
    /// Edges in each chain measurement.
    #[arg(long, default_value_t = 2000)]
    pub chain: usize,
    /// Edges in each stream measurement of 8-byte payloads (1 MiB ones use a sixteenth).
    #[arg(long, default_value_t = 4096)]
    pub stream: usize,
    /// Rounds (each: MPI then Tessera, every measurement); medians are reported.
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// Worker threads per rank.
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// After the rounds, run one more 8-byte chain with tracing and write each rank's trace
    /// (`FILE` → `FILE.rank0.json`, ...; `tessera trace merge` puts them on one clock): where
    /// a remote edge's time goes.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<std::path::PathBuf>,
}

const SMALL: usize = 8;
const LARGE: usize = 1 << 20;
/// MPI's window in a stream (`osu_bw`'s): non-blocking sends posted before an
/// acknowledgement.
const WINDOW: usize = 64;
/// Bytes of distinct outputs a stream registers at most per rank. Its
/// producers write distinct handles, so they are independent: when they
/// reused 64 handles in turn, each handle's producers ran back to back (a
/// finished task's released successor runs next on its worker), their
/// messages came back to back, and each found the copy on the receiver
/// still to be read by the previous version's consumer, so it could not be
/// read in place (70 % of the 1 MiB messages). Past this many bytes (a long
/// 1 MiB stream) producers reuse handles in turn.
const STREAM_BYTES: usize = 256 << 20;

/// The two shapes (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Chain,
    Stream,
}

/// A task key: (side, index). Chain: side 0, owner `i mod 2`. Stream: side 0 on rank 0
/// (producers), side 1 on rank 1 (consumers).
type Key = (u8, u64);

type Produce = (Vec<Read<Vec<u8>>>, Write<Vec<u8>>);

static PRODUCE: LazyLock<Codelet<Produce>> =
    LazyLock::new(|| Codelet::<Produce>::new("edge").cpu(|_, _, _| Ok(())));
static CONSUME: LazyLock<Codelet<Read<Vec<u8>>>> =
    LazyLock::new(|| Codelet::<Read<Vec<u8>>>::new("sink").cpu(|_, _, _| Ok(())));

struct EdgeBench {
    shape: Shape,
    n: u64,
    /// Whether the classes promise their order (see the module doc); the
    /// run infers it from the data otherwise.
    described: bool,
    /// Distinct outputs of a stream (handles written in turn).
    outputs: u64,
    /// This rank's handle per data key (0, 1, ...): its outputs and its
    /// copies of the other rank's, all registered before the clock starts.
    /// Indexed, not looked up in a locked map: the map's lock and hash,
    /// four times per remote edge, were the benchmark's cost, not the
    /// runtime's.
    handles: Vec<DataHandle<Vec<u8>>>,
}

impl EdgeBench {
    /// The bench with every handle it will use registered, its pages
    /// written: MPI's side allocates and fills its buffers before its clock
    /// starts too, so neither measures first-touch page faults.
    fn new(rt: &Runtime, shape: Shape, n: usize, bytes: usize, described: bool) -> EdgeBench {
        let reg = rt.registrar();
        let outputs = n.min((STREAM_BYTES / bytes.max(1)).max(WINDOW)) as u64;
        let keys = match shape {
            Shape::Chain => 2,
            Shape::Stream => outputs,
        };
        let handles = (0..keys)
            .map(|k| {
                reg.register_replicable_named(vec![1u8; bytes], format!("out{k}"))
                    .expect("the runtime is alive during the run")
            })
            .collect();
        EdgeBench {
            shape,
            n: n as u64,
            described,
            outputs,
            handles,
        }
    }

    /// The data key task `key` writes.
    fn output(&self, key: &Key) -> u64 {
        match self.shape {
            // Two handles, one per rank, written in turn.
            Shape::Chain => key.1 % 2,
            Shape::Stream => key.1 % self.outputs,
        }
    }

    fn handle(&self, k: u64) -> DataHandle<Vec<u8>> {
        self.handles[k as usize].clone()
    }

    fn release(&self, rt: &Runtime) -> Result<(), String> {
        for d in &self.handles {
            rt.unregister(d.clone()).map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

impl TaskClasses for EdgeBench {
    type Key = Key;

    fn roots(&self) -> Vec<Key> {
        match self.shape {
            Shape::Chain => vec![(0, 0)],
            Shape::Stream => (0..self.n).map(|i| (0, i)).collect(),
        }
    }

    fn predecessor_count(&self, key: &Key) -> usize {
        match (self.shape, key) {
            (Shape::Chain, (_, 0)) | (Shape::Stream, (0, _)) => 0,
            _ => 1,
        }
    }

    fn successors(&self, key: &Key, out: &mut Vec<Key>) {
        match (self.shape, *key) {
            (Shape::Chain, (_, i)) if i + 1 < self.n => out.push((0, i + 1)),
            (Shape::Stream, (0, i)) => out.push((1, i)),
            _ => {}
        }
    }

    fn task(&self, key: &Key) -> TaskBuilder {
        match (self.shape, *key) {
            (Shape::Chain, (_, i)) => {
                let inputs = if i == 0 {
                    vec![]
                } else {
                    vec![self.handle((i - 1) % 2).r()]
                };
                Task::new(&PRODUCE, (inputs, self.handle(self.output(key)).w())).into()
            }
            (Shape::Stream, (0, _)) => {
                Task::new(&PRODUCE, (vec![], self.handle(self.output(key)).w())).into()
            }
            (Shape::Stream, (_, i)) => {
                Task::new(&CONSUME, self.handle(i % self.outputs).r()).into()
            }
        }
    }

    fn slots(&self) -> usize {
        match self.shape {
            Shape::Chain => self.n as usize,
            Shape::Stream => 2 * self.n as usize,
        }
    }

    fn slot(&self, &(side, i): &Key) -> Option<usize> {
        Some(side as usize * self.n as usize + i as usize)
    }

    fn described_order(&self) -> Option<DescribedOrder> {
        // The chain is one path through every task: any two are joined.
        // A stream's producers are joined to nothing but their consumer, so
        // only with a handle each (`outputs == n`) are two users of a
        // handle joined; with handles reused, the run infers the order.
        // `the_described_order_holds` checks both with `check_order`.
        let holds = match self.shape {
            Shape::Chain => true,
            Shape::Stream => self.outputs >= self.n,
        };
        // SAFETY: it holds (above); the predecessor counts are the
        // successor lists' (checked by the same test), and nothing else
        // uses the handles while a run lasts.
        (self.described && holds).then(|| unsafe { DescribedOrder::new() })
    }

    fn owner(&self, key: &Key) -> usize {
        match self.shape {
            Shape::Chain => (key.1 % 2) as usize,
            Shape::Stream => key.0 as usize,
        }
    }
}

impl DistClasses for EdgeBench {
    fn flows(&self, from: &Key, _to: &Key, out: &mut Vec<u64>) {
        out.push(self.output(from));
    }

    fn data(&self, key: u64) -> DataRef {
        DataRef::of(&self.handle(key))
    }

    fn owned(&self, rank: usize) -> usize {
        let n = self.n as usize;
        match (self.shape, rank) {
            (Shape::Chain, 0) => n.div_ceil(2),
            (Shape::Chain, 1) => n / 2,
            (Shape::Stream, 0 | 1) => n,
            _ => 0,
        }
    }
}

/// The chain as light tasks: task `i` on rank `i mod 2` checks that its input holds
/// `i − 1` and writes `i` into its output; outputs alternate between two buffers, which
/// the chain's order keeps apart (task `i` writes one while nothing reads it: `i − 1`'s
/// readers are `i` alone).
struct LightChain {
    n: u64,
    bytes: usize,
    /// Task `i`'s output is `outputs[i % 2]` (on its rank, and its copy on the other).
    outputs: [std::cell::UnsafeCell<Vec<u8>>; 2],
}

// SAFETY: see `LightChain`: one task of the chain uses a buffer at a time,
// and the message that carries `i − 1`'s output to `i`'s rank is unpacked
// before `i` runs.
unsafe impl Sync for LightChain {}

impl LightChain {
    fn new(n: usize, bytes: usize) -> LightChain {
        LightChain {
            n: n as u64,
            bytes,
            outputs: [
                std::cell::UnsafeCell::new(vec![0u8; bytes]),
                std::cell::UnsafeCell::new(vec![0u8; bytes]),
            ],
        }
    }
}

impl LightClasses for LightChain {
    type Key = u64;

    fn roots(&self) -> Vec<u64> {
        vec![0]
    }

    fn predecessor_count(&self, &i: &u64) -> usize {
        usize::from(i > 0)
    }

    fn successors(&self, &i: &u64, out: &mut Vec<u64>) {
        if i + 1 < self.n {
            out.push(i + 1);
        }
    }

    fn slots(&self) -> usize {
        self.n as usize
    }

    fn slot(&self, &i: &u64) -> usize {
        i as usize
    }

    fn run(&self, &i: &u64) -> Result<(), tessera_engine::BodyError> {
        // SAFETY: see `LightChain`.
        if i > 0 {
            let input = unsafe { &*self.outputs[(i - 1) as usize % 2].get() };
            if input[..8] != (i - 1).to_le_bytes() {
                return Err(format!("chain task {i}: its input does not hold {}", i - 1).into());
            }
        }
        let out = unsafe { &mut *self.outputs[i as usize % 2].get() };
        out[..8].copy_from_slice(&i.to_le_bytes());
        Ok(())
    }
}

impl DistLightClasses for LightChain {
    fn owner(&self, &i: &u64) -> usize {
        (i % 2) as usize
    }

    fn owned(&self, rank: usize) -> usize {
        match rank {
            0 => self.n.div_ceil(2) as usize,
            1 => (self.n / 2) as usize,
            _ => 0,
        }
    }

    fn pack(&self, &i: &u64, _to: &[u64], out: &mut Vec<u8>) {
        // SAFETY: see `LightChain`.
        out.extend_from_slice(unsafe { &*self.outputs[i as usize % 2].get() });
    }

    fn unpack(&self, &i: &u64, bytes: &[u8]) -> Result<(), String> {
        if bytes.len() != self.bytes {
            return Err(format!("{} bytes, expected {}", bytes.len(), self.bytes));
        }
        // SAFETY: see `LightChain`.
        unsafe { &mut *self.outputs[i as usize % 2].get() }.copy_from_slice(bytes);
        Ok(())
    }
}

/// The light chain's measurement: seconds from a barrier to every rank's end.
fn light_run(
    net: &Arc<Net>,
    coll: &Collectives,
    workers: usize,
    n: usize,
    bytes: usize,
) -> Result<f64, String> {
    let rt = Runtime::new(Config::with_workers(workers)).map_err(|e| e.to_string())?;
    let chain = Arc::new(LightChain::new(n, bytes));
    coll.barrier()?;
    let t0 = Instant::now();
    light::run(&rt, net, chain).map_err(|e| e.to_string())?;
    let t = t0.elapsed().as_secs_f64();
    Ok(f64::from_bits(coll.allreduce_max(t.to_bits())?))
}

/// One Tessera measurement: seconds from a barrier to every rank's end (the slowest rank's).
fn tessera_run(
    net: &Arc<Net>,
    coll: &Collectives,
    workers: usize,
    (shape, described): (Shape, bool),
    n: usize,
    bytes: usize,
) -> Result<f64, String> {
    tessera_run_traced(net, coll, workers, (shape, described), n, bytes, None)
}

/// [`tessera_run`], writing this rank's trace to `trace` if given.
fn tessera_run_traced(
    net: &Arc<Net>,
    coll: &Collectives,
    workers: usize,
    (shape, described): (Shape, bool),
    n: usize,
    bytes: usize,
    trace: Option<&std::path::Path>,
) -> Result<f64, String> {
    let config = Config::with_workers(workers).trace(trace.is_some());
    let rt = Runtime::new(config).map_err(|e| e.to_string())?;
    let bench = Arc::new(EdgeBench::new(&rt, shape, n, bytes, described));
    coll.barrier()?;
    let t0 = Instant::now();
    symbolic::run(&rt, net, Arc::clone(&bench)).map_err(|e| e.to_string())?;
    let t = t0.elapsed().as_secs_f64();
    bench.release(&rt)?;
    if let Some(path) = trace {
        crate::save_trace(&rt, path)?;
    }
    let slowest = coll.allreduce_max(t.to_bits())?;
    Ok(f64::from_bits(slowest))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs the benchmark (see the module doc); under mpirun with at least 2 ranks.
pub fn run(args: OverheadMpiArgs) -> Result<(), String> {
    let ranks = Ranks::join()?;
    if ranks.size < 2 {
        return Err(
            "overhead-mpi measures between two ranks: run it as `mpirun -np 2 tessera overhead-mpi` (a build with --features mpi)"
                .into(),
        );
    }
    if ranks.size > 2 {
        // Issue 42: under -np 3 the third rank sat idle and the figures were
        // printed as if the run had two.
        return Err(format!(
            "overhead-mpi measures one link between exactly two ranks; this run has {} (ranks 2.. would sit idle): run it as `mpirun -np 2 tessera overhead-mpi`",
            ranks.size
        ));
    }
    match run_ranks(&args, &ranks) {
        Ok(()) => Ok(()),
        Err(e) => ranks.fail(&e),
    }
}

// `drop(raw)` ends the raw MPI measurements (its buffers) before the traced
// run; without the mpi feature `RawMpi` is an empty stand-in with no `Drop`.
#[allow(clippy::drop_non_drop)]
fn run_ranks(args: &OverheadMpiArgs, ranks: &Ranks) -> Result<(), String> {
    let (net, coll) = ranks.net.as_ref().ok_or("no network")?;
    ranks.check_same(
        "the overhead-mpi parameters",
        &format!("{} {} {}", args.chain, args.stream, args.rounds),
    )?;
    if args.chain < 2 || args.stream < 16 || args.rounds == 0 || args.workers == 0 {
        return Err(
            "--chain must be at least 2, --stream at least 16, --rounds and --workers at least 1"
                .into(),
        );
    }
    let raw = ranks.raw_mpi()?;
    let root = ranks.is_root();
    let large_stream = (args.stream / 16).max(WINDOW);
    // Per measurement, its values over the rounds.
    let mut mpi_lat = [Vec::new(), Vec::new()];
    let mut mpi_bw = [Vec::new(), Vec::new()];
    let mut chain = [Vec::new(), Vec::new()];
    let mut inferred = [Vec::new(), Vec::new()];
    let mut light_chain = [Vec::new(), Vec::new()];
    let mut stream = [Vec::new(), Vec::new()];
    for round in 0..args.rounds {
        for (k, bytes) in [SMALL, LARGE].into_iter().enumerate() {
            let lat_iters = if bytes == SMALL { 20_000 } else { 400 };
            mpi_lat[k].push(raw.latency(bytes, lat_iters));
            let bw_iters = if bytes == SMALL { 200 } else { 8 };
            mpi_bw[k].push(raw.bandwidth(bytes, WINDOW, bw_iters));
            let n_chain = if bytes == SMALL {
                args.chain
            } else {
                (args.chain / 8).max(2)
            };
            // The order described, then inferred from the data.
            for (described, per_edge) in [(true, &mut chain[k]), (false, &mut inferred[k])] {
                let shape = (Shape::Chain, described);
                let t = tessera_run(net, coll, args.workers, shape, n_chain, bytes)?;
                per_edge.push(t / (n_chain - 1) as f64);
            }
            let t = light_run(net, coll, args.workers, n_chain, bytes)?;
            light_chain[k].push(t / (n_chain - 1) as f64);
            let n_stream = if bytes == SMALL {
                args.stream
            } else {
                large_stream
            };
            let t = tessera_run(
                net,
                coll,
                args.workers,
                (Shape::Stream, true),
                n_stream,
                bytes,
            )?;
            stream[k].push(t / n_stream as f64);
        }
        if root {
            crate::say!("round {}/{} done", round + 1, args.rounds);
        }
    }
    drop(raw);
    if let Some(path) = &args.trace {
        let mine = crate::ranks::rank_trace_path(path, ranks.rank);
        tessera_run_traced(
            net,
            coll,
            args.workers,
            (Shape::Chain, true),
            200,
            SMALL,
            Some(&mine),
        )?;
    }
    if root {
        println!(
            "remote edges between 2 ranks ({} worker(s) each), medians of {} alternating rounds; MPI measured in the same processes",
            args.workers, args.rounds
        );
        for (k, (bytes, name)) in [(SMALL, "8 B"), (LARGE, "1 MiB")].into_iter().enumerate() {
            let lat = median(mpi_lat[k].clone());
            let bw = median(mpi_bw[k].clone());
            let per_edge = median(chain[k].clone());
            let per_inferred = median(inferred[k].clone());
            let per_stream_edge = median(stream[k].clone());
            println!(
                "{name:>6}: MPI one-way latency {:>9.2} µs | chain: {:>9.2} µs per remote edge = {:.2}x MPI latency",
                lat * 1e6,
                per_edge * 1e6,
                per_edge / lat
            );
            println!(
                "{name:>6}: {:>31} | chain, dependencies inferred from the data: {:>9.2} µs = {:.2}x",
                "",
                per_inferred * 1e6,
                per_inferred / lat
            );
            let per_light = median(light_chain[k].clone());
            println!(
                "{name:>6}: {:>31} | chain of light tasks: {:>9.2} µs per remote edge = {:.2}x MPI latency",
                "",
                per_light * 1e6,
                per_light / lat
            );
            println!(
                "{name:>6}: MPI bandwidth {:>9.3} GB/s ({:>10.0} msg/s) | stream: {:>9.3} GB/s ({:>10.0} edges/s) = {:.1} % of MPI bandwidth",
                bw / 1e9,
                bw / bytes as f64,
                bytes as f64 / per_stream_edge / 1e9,
                1.0 / per_stream_edge,
                100.0 * (bytes as f64 / per_stream_edge) / bw
            );
        }
    }
    coll.barrier()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The order both shapes promise holds (`check_order`: predecessor
    /// counts and a path between any two users of a handle), and a stream
    /// that reuses its handles promises none.
    #[test]
    fn the_described_order_holds() {
        let rt = Runtime::with_workers(1).unwrap();
        for (shape, n) in [(Shape::Chain, 7), (Shape::Stream, 9)] {
            let bench = EdgeBench::new(&rt, shape, n, SMALL, true);
            assert!(bench.described_order().is_some(), "{shape:?}");
            tessera_engine::symbolic::check_order(&bench).unwrap();
            bench.release(&rt).unwrap();
        }
        let mut reused = EdgeBench::new(&rt, Shape::Stream, 9, SMALL, true);
        reused.outputs = 4;
        assert!(reused.described_order().is_none());
        assert!(
            tessera_engine::symbolic::check_order(&reused).is_err(),
            "two producers of one handle share no path"
        );
        reused.release(&rt).unwrap();
    }
}
