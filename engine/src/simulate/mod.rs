//! Simulated time: the real front-ends (STF, symbolic), the real scheduling
//! policies and the real coherence protocol, driven by a discrete-event loop
//! over virtual workers instead of threads (StarPU-SimGrid's idea, native).
//!
//! A [`Simulation`] models a [`Platform`] (nodes, cores, accelerators,
//! links, network). A runtime built with `Config::simulated(sim.node(rank))`
//! has one virtual worker per core and accelerator of its rank, starts no
//! thread, and runs its tasks when it waits: bodies are not executed (unless
//! asked, for checking), a task lasts what the perf models or the platform's
//! rates say, a transfer `latency + bytes / bandwidth` on each link it
//! crosses (one transfer at a time per link direction, FIFO), a message the
//! same on the NICs. Data may be *virtual* (`Runtime::register_virtual`: a
//! size and a shape, no value), so an N = 10^6 LU fits in this machine.
//!
//! Task durations come from the platform's perf models and per-codelet
//! rates, matched by codelet name; a codelet they do not know takes the
//! processor's default rate, with a warning ([`Simulation::warnings`]). To
//! time your own codelets, measure them in a real run and predict with
//! [`Simulation::with_calibrated`].
//!
//! Modules: `platform` (the description and its file format), `world` (the
//! event loop, one file per concern: events, workers, teams, links,
//! network), `durations` (task times and the default-rate
//! warnings), `vdevice` (virtual accelerators), `transport` (the simulated
//! network under `dist`), `starpu` (StarPU's sampled perf models and bus
//! files of real machines, read for `tessera platform import`). README.md beside this file describes the loop,
//! the models, calibrating one's own codelets and what the simulation
//! leaves out.

pub mod bounds;
mod durations;
pub mod platform;
pub mod starpu;
mod transport;
mod vdevice;
mod world;

pub use platform::{
    Accelerator, LinkSpec, Network, NodeSpec, Platform, PlatformError, Processor, Rate,
};
pub(crate) use vdevice::VirtualDevice;
pub(crate) use world::SimRt;
pub use world::{SimNode, SimStats, Simulation};

#[cfg(test)]
mod tests;
