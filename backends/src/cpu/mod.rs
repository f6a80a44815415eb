//! The host CPU: machine topology, thread binding and the placement of workers on cores.
//!
//! The engine's worker start-up goes:
//! 1. [`Topology::detect`] (hwloc with the `hwloc` feature, sysfs otherwise);
//! 2. [`plan`] with a [`PlacementConfig`] → a [`WorkerMap`];
//! 3. one host memory node per entry of [`numa_nodes`];
//! 4. each CPU worker calls [`bind_current_thread`] with its
//!    [`WorkerSlot::pu`] and steals in [`steal_order`]; each device worker
//!    binds to the PUs of its [`WorkerMap::device_cores`] entry.
//!
//! [`describe`] prints the lot for `tessera topology`.

mod binding;
mod engine_config;
#[cfg(feature = "hwloc")]
mod hwloc;
mod placement;
mod sysfs;
mod topology;

pub use binding::{bind_current_thread, current_thread_cpus, BindError};
pub use engine_config::apply_worker_map;
#[cfg(feature = "hwloc")]
pub use hwloc::{alloc_on_numa_node, NumaBuffer};
pub use placement::{
    describe, home_numa_node, numa_nodes, plan, share_cpus, steal_order, CpuSelection,
    PlacementConfig, PlacementError, WorkerMap, WorkerSlot,
};
pub use topology::{
    format_cpu_list, parse_cpu_list, Core, CpuListError, NumaNode, Package, Pu, Topology,
    TopologyError,
};
