//! The worker map: which core each CPU worker, device worker and the progress thread runs on.
//!
//! Rules, in the order [`plan`] applies them:
//! 1. the selected PUs ([`CpuSelection`]) pick the usable cores; one worker
//!    per core, bound to its first selected PU (hyperthread siblings are not
//!    extra workers: they share the core's FPU and caches);
//! 2. each device takes `reserve_per_device` cores (TSUBAME, TianHe-1: a
//!    device needs a semi-dedicated host core to drive it) on the device's
//!    NUMA node when known ([`Topology::gpus_near`] entry `d` is device `d`),
//!    else in its package, else anywhere; a device of unknown locality goes
//!    to the NUMA node with the most cores still free, so devices spread;
//!    within a node the highest-numbered cores go first, leaving core 0
//!    (where the OS does its housekeeping) to CPU workers;
//! 3. the progress thread takes one more core the same way, locality unknown;
//! 4. the remaining cores become CPU workers in logical order (package by
//!    package, NUMA node by NUMA node), so consecutive worker ids share a
//!    NUMA node and [`steal_order`] can go sibling first.

use std::collections::BTreeSet;
use std::fmt::{self, Write as _};

use super::topology::{format_cpu_list, Topology};

/// Which CPUs Tessera may use.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum CpuSelection {
    /// Every PU of the topology.
    #[default]
    All,
    /// These PUs (OS indices). To honour a binding inherited from `taskset`
    /// or `mpirun`, pass [`current_thread_cpus`](super::current_thread_cpus)'s answer.
    List(Vec<usize>),
}

/// What [`plan`] is asked to place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlacementConfig {
    /// The CPUs to use.
    pub cpus: CpuSelection,
    /// Host cores left free for each device's worker thread (TSUBAME,
    /// TianHe-1: one host core per accelerator). With 0, device workers
    /// still get a core near their device but share it with a CPU worker.
    pub reserve_per_device: usize,
    /// Number of devices (each gets one device worker).
    pub devices: usize,
    /// Keep one core free for the MPI progress thread.
    pub reserve_for_progress_thread: bool,
}

impl Default for PlacementConfig {
    /// All CPUs, no device, one reserved core per device should one be added, no progress thread.
    fn default() -> Self {
        PlacementConfig {
            cpus: CpuSelection::All,
            reserve_per_device: 1,
            devices: 0,
            reserve_for_progress_thread: false,
        }
    }
}

/// Where one CPU worker runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkerSlot {
    /// Worker id (its index in [`WorkerMap::cpu_workers`]).
    pub worker: usize,
    /// Core, by logical index into [`Topology::cores`].
    pub core: usize,
    /// The PU (OS index) to bind the worker thread to.
    pub pu: usize,
    /// NUMA node (OS index) of the core: the worker's home memory node.
    pub numa: usize,
    /// Package (OS index) of the core.
    pub package: usize,
}

/// The outcome of [`plan`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerMap {
    /// CPU workers, by worker id; consecutive ids share a NUMA node.
    pub cpu_workers: Vec<WorkerSlot>,
    /// Core (logical index) for device worker `d`, chosen near the device's
    /// NUMA node where known; one entry per device. Bind the device worker
    /// to that core's PUs.
    pub device_cores: Vec<usize>,
    /// NUMA node (OS index) of `device_cores[d]`: where device `d`'s pinned
    /// staging buffers belong.
    pub device_numa: Vec<usize>,
    /// Core (logical index) for the MPI progress thread, if one was reserved.
    pub progress_core: Option<usize>,
    /// Every core kept from CPU workers (device cores, extra cores when
    /// `reserve_per_device > 1`, the progress core), sorted.
    pub reserved_cores: Vec<usize>,
}

/// Why no worker map fits.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PlacementError {
    /// `CpuSelection::List` was empty.
    EmptySelection,
    /// A listed CPU is not a PU of the topology.
    UnknownCpu {
        /// The CPU asked for.
        cpu: usize,
        /// The machine's CPUs, in cpu-list syntax.
        known: String,
    },
    /// A CPU listed twice.
    DuplicateCpu(usize),
    /// The reservations leave no core for CPU workers.
    NoCoreLeft {
        /// Cores the selection covers.
        usable: usize,
        /// Cores the devices and the progress thread would take.
        reserved: usize,
    },
}

impl fmt::Display for PlacementError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::EmptySelection => write!(f, "the CPU list is empty"),
            Self::UnknownCpu { cpu, known } => {
                write!(f, "CPU {cpu} is not on this machine (its CPUs are {known})")
            }
            Self::DuplicateCpu(cpu) => write!(f, "CPU {cpu} is listed twice"),
            Self::NoCoreLeft { usable, reserved } => write!(
                f,
                "{usable} usable core(s) and {reserved} reserved for device workers and the progress \
                 thread leave no core for CPU workers; select more CPUs or reserve fewer cores"
            ),
        }
    }
}

impl std::error::Error for PlacementError {}

/// A core the selection covers.
#[derive(Clone, Copy, Debug)]
struct Usable {
    core: usize,
    pu: usize,
    numa: usize,
    package: usize,
}

/// Places CPU workers, device workers and the progress thread on `topo`;
/// the rules are in the module documentation.
///
/// # Errors
/// An empty list, a CPU listed twice or unknown, or reservations that
/// leave no core for CPU workers.
pub fn plan(topo: &Topology, cfg: &PlacementConfig) -> Result<WorkerMap, PlacementError> {
    let selected: BTreeSet<usize> = match &cfg.cpus {
        CpuSelection::All => topo.pus.iter().map(|p| p.os_index).collect(),
        CpuSelection::List(list) => {
            if list.is_empty() {
                return Err(PlacementError::EmptySelection);
            }
            let mut set = BTreeSet::new();
            for &cpu in list {
                if topo.pu(cpu).is_none() {
                    let known =
                        format_cpu_list(&topo.pus.iter().map(|p| p.os_index).collect::<Vec<_>>());
                    return Err(PlacementError::UnknownCpu { cpu, known });
                }
                if !set.insert(cpu) {
                    return Err(PlacementError::DuplicateCpu(cpu));
                }
            }
            set
        }
    };
    let usable: Vec<Usable> = topo
        .cores
        .iter()
        .enumerate()
        .filter_map(|(core, c)| {
            let pu = *c.pus.iter().find(|pu| selected.contains(pu))?;
            Some(Usable {
                core,
                pu,
                numa: c.numa,
                package: c.package,
            })
        })
        .collect();

    let reserved = cfg
        .devices
        .saturating_mul(cfg.reserve_per_device)
        .saturating_add(usize::from(cfg.reserve_for_progress_thread));
    if reserved >= usable.len() {
        return Err(PlacementError::NoCoreLeft {
            usable: usable.len(),
            reserved,
        });
    }

    // `taken[i]`: usable[i] is kept from CPU workers.
    let mut taken = vec![false; usable.len()];
    let mut device_cores = Vec::with_capacity(cfg.devices);
    let mut device_numa = Vec::with_capacity(cfg.devices);
    // Devices that reserve nothing still get spread: they claim cores in a
    // scratch copy that CPU workers ignore.
    let mut scratch = vec![false; usable.len()];
    for d in 0..cfg.devices {
        let near = topo.gpus_near.get(d).map(|&(_, numa)| numa);
        // From the topology, not `usable`: the selection may leave the node no core.
        let near_package = near
            .and_then(|n| topo.cores.iter().find(|c| c.numa == n))
            .map(|c| c.package);
        if cfg.reserve_per_device == 0 {
            if scratch.iter().all(|&t| t) {
                scratch.fill(false);
            }
            let i = pick(&usable, &scratch, near, near_package).expect("scratch has a free core");
            scratch[i] = true;
            device_cores.push(usable[i].core);
            device_numa.push(usable[i].numa);
            continue;
        }
        for k in 0..cfg.reserve_per_device {
            let i = pick(&usable, &taken, near, near_package).expect("counted above: enough cores");
            taken[i] = true;
            if k == 0 {
                device_cores.push(usable[i].core);
                device_numa.push(usable[i].numa);
            }
        }
    }
    let progress_core = cfg.reserve_for_progress_thread.then(|| {
        let i = pick(&usable, &taken, None, None).expect("counted above: enough cores");
        taken[i] = true;
        usable[i].core
    });

    let cpu_workers: Vec<WorkerSlot> = usable
        .iter()
        .zip(&taken)
        .filter(|(_, &t)| !t)
        .enumerate()
        .map(|(worker, (u, _))| WorkerSlot {
            worker,
            core: u.core,
            pu: u.pu,
            numa: u.numa,
            package: u.package,
        })
        .collect();
    let reserved_cores = usable
        .iter()
        .zip(&taken)
        .filter(|(_, &t)| t)
        .map(|(u, _)| u.core)
        .collect();
    Ok(WorkerMap {
        cpu_workers,
        device_cores,
        device_numa,
        progress_core,
        reserved_cores,
    })
}

/// The free core best for something near NUMA node `near` (in package
/// `near_package`): same node, then same package, then anywhere; among
/// equals the node with most free cores, then the highest core.
fn pick(
    usable: &[Usable],
    taken: &[bool],
    near: Option<usize>,
    near_package: Option<usize>,
) -> Option<usize> {
    let free_in = |numa: usize| {
        usable
            .iter()
            .zip(taken)
            .filter(|(u, &t)| !t && u.numa == numa)
            .count()
    };
    (0..usable.len()).filter(|&i| !taken[i]).min_by_key(|&i| {
        let u = usable[i];
        let distance = if Some(u.numa) == near {
            0
        } else if Some(u.package) == near_package {
            1
        } else {
            2
        };
        (
            distance,
            std::cmp::Reverse(free_in(u.numa)),
            std::cmp::Reverse(i),
        )
    })
}

/// The workers `worker` should try to steal from, in order: its NUMA
/// siblings, then workers on the other NUMA nodes of its package, then
/// those of other packages. Every other CPU worker appears exactly once.
///
/// Within each group the scan rotates: a worker starts just after itself
/// among its siblings, and at its own rank within remote nodes, so
/// neighbours begin with different victims instead of all hitting one.
///
/// # Panics
/// If `worker` is not a CPU worker of `map`.
pub fn steal_order(map: &WorkerMap, worker: usize) -> Vec<usize> {
    let me = slot(map, worker);
    // packages → NUMA nodes → workers, each in first-appearance order.
    let mut tree: Vec<PackageWorkers> = Vec::new();
    for s in &map.cpu_workers {
        let pi = match tree.iter().position(|(p, _)| *p == s.package) {
            Some(pi) => pi,
            None => {
                tree.push((s.package, Vec::new()));
                tree.len() - 1
            }
        };
        let nodes = &mut tree[pi].1;
        match nodes.iter_mut().find(|(n, _)| *n == s.numa) {
            Some((_, workers)) => workers.push(s.worker),
            None => nodes.push((s.numa, vec![s.worker])),
        }
    }
    let my_pkg = tree
        .iter()
        .position(|(p, _)| *p == me.package)
        .expect("own package");
    let my_node = tree[my_pkg]
        .1
        .iter()
        .position(|(n, _)| *n == me.numa)
        .expect("own node");
    let siblings = &tree[my_pkg].1[my_node].1;
    let rank = siblings
        .iter()
        .position(|&w| w == worker)
        .expect("own slot");

    let rotated = |list: &[usize], start: usize| -> Vec<usize> {
        (0..list.len())
            .map(|k| list[(start + k) % list.len()])
            .collect()
    };
    let mut order: Vec<usize> = (1..siblings.len())
        .map(|k| siblings[(rank + k) % siblings.len()])
        .collect();
    let nodes = &tree[my_pkg].1;
    for k in 1..nodes.len() {
        let workers = &nodes[(my_node + k) % nodes.len()].1;
        order.extend(rotated(workers, rank % workers.len()));
    }
    for k in 1..tree.len() {
        let nodes = &tree[(my_pkg + k) % tree.len()].1;
        for j in 0..nodes.len() {
            let workers = &nodes[(my_node + j) % nodes.len()].1;
            order.extend(rotated(workers, rank % workers.len()));
        }
    }
    order
}

/// A NUMA node (OS index) and its workers, in id order.
type NodeWorkers = (usize, Vec<usize>);
/// A package (OS index) and its NUMA nodes, in first-appearance order.
type PackageWorkers = (usize, Vec<NodeWorkers>);

/// The NUMA node (OS index) of CPU worker `worker`: where its tasks' data
/// should live.
///
/// # Panics
/// If `worker` is not a CPU worker of `map`.
pub fn home_numa_node(map: &WorkerMap, worker: usize) -> usize {
    slot(map, worker).numa
}

/// The NUMA nodes (OS indices, sorted) that CPU or device workers live on:
/// one host memory node each.
pub fn numa_nodes(map: &WorkerMap) -> Vec<usize> {
    let nodes: BTreeSet<usize> = map
        .cpu_workers
        .iter()
        .map(|s| s.numa)
        .chain(map.device_numa.iter().copied())
        .collect();
    nodes.into_iter().collect()
}

fn slot(map: &WorkerMap, worker: usize) -> &WorkerSlot {
    let slot = map.cpu_workers.get(worker).unwrap_or_else(|| {
        panic!(
            "worker {worker} is not one of the {} CPU workers",
            map.cpu_workers.len()
        )
    });
    assert_eq!(
        slot.worker, worker,
        "WorkerMap::cpu_workers must be indexed by worker id"
    );
    slot
}

/// The machine and the worker map as short text, in the spirit of
/// `lstopo --of console`: packages → NUMA nodes (memory in GiB) → cores →
/// PUs, then GPUs, then where each worker runs. `tessera topology` prints it.
pub fn describe(topo: &Topology, map: &WorkerMap) -> String {
    let gib = |bytes: u64| bytes as f64 / f64::from(1u32 << 30);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Machine: {} package(s), {} NUMA node(s), {} core(s), {} PU(s)",
        topo.packages.len(),
        topo.numa_nodes.len(),
        topo.cores.len(),
        topo.pus.len()
    );
    for package in &topo.packages {
        let _ = writeln!(out, "  Package {}", package.os_index);
        for node in &topo.numa_nodes {
            let cores: Vec<(usize, &super::Core)> = topo
                .cores
                .iter()
                .enumerate()
                .filter(|(_, c)| c.package == package.os_index && c.numa == node.os_index)
                .collect();
            if cores.is_empty() {
                continue;
            }
            let _ = writeln!(
                out,
                "    NUMA {} ({:.1} GiB)",
                node.os_index,
                gib(node.memory_bytes)
            );
            for (i, core) in cores {
                let pus: Vec<String> = core.pus.iter().map(|p| format!("PU {p}")).collect();
                let _ = writeln!(out, "      core {i}: {}", pus.join(", "));
            }
        }
    }
    for node in topo.numa_nodes.iter().filter(|n| n.cpuset.is_empty()) {
        let _ = writeln!(
            out,
            "  NUMA {} ({:.1} GiB, no CPUs)",
            node.os_index,
            gib(node.memory_bytes)
        );
    }
    for (gpu, numa) in &topo.gpus_near {
        let _ = writeln!(out, "  GPU {gpu} near NUMA {numa}");
    }
    let _ = writeln!(
        out,
        "Workers: {} CPU, {} device{}",
        map.cpu_workers.len(),
        map.device_cores.len(),
        if map.progress_core.is_some() {
            ", 1 progress thread"
        } else {
            ""
        }
    );
    for s in &map.cpu_workers {
        let _ = writeln!(
            out,
            "  cpu{} → core {} (PU {}, NUMA {})",
            s.worker, s.core, s.pu, s.numa
        );
    }
    let core_text = |core: usize| match topo.cores.get(core) {
        Some(c) => format!(
            "core {core} (PUs {}, NUMA {})",
            format_cpu_list(&c.pus),
            c.numa
        ),
        None => format!("core {core}"),
    };
    for (d, &core) in map.device_cores.iter().enumerate() {
        let shared = if map.reserved_cores.contains(&core) {
            ""
        } else {
            ", shared with a CPU worker"
        };
        let _ = writeln!(out, "  device{d} → {}{shared}", core_text(core));
    }
    if let Some(core) = map.progress_core {
        let _ = writeln!(out, "  progress → {}", core_text(core));
    }
    let idle: Vec<usize> = map
        .reserved_cores
        .iter()
        .copied()
        .filter(|c| !map.device_cores.contains(c) && Some(*c) != map.progress_core)
        .collect();
    if !idle.is_empty() {
        let _ = writeln!(
            out,
            "  kept free for device threads: cores {}",
            format_cpu_list(&idle)
        );
    }
    out
}

/// The share of `cpus` that falls to process `part` of `parts` processes
/// given the same CPUs: the ranks of one node started by a launcher that
/// did not bind them (`mpirun --bind-to none`, `srun` without
/// `--cpu-bind`). Left as they are, each rank binds its first worker to the
/// first of those CPUs, and every rank's workers pile onto the same cores
/// (2 ranks of Task Bench `stencil_1d` ran 64–76 ms instead of 34–42 ms,
/// their workers both on CPU 0). Whole cores, in logical order (package,
/// NUMA node), are dealt in contiguous blocks as even as can be, so no two
/// ranks share a core and a rank's block stays within one NUMA node where
/// it can. With more processes than cores, process `part` gets core
/// `part mod cores` (they must share). A CPU of no known core counts as a
/// core of its own.
///
/// # Panics
/// If `part >= parts`.
pub fn share_cpus(topo: &Topology, cpus: &[usize], part: usize, parts: usize) -> Vec<usize> {
    assert!(part < parts, "process {part} is not one of {parts}");
    let wanted: BTreeSet<usize> = cpus.iter().copied().collect();
    let mut cores: Vec<Vec<usize>> = topo
        .cores
        .iter()
        .map(|c| {
            c.pus
                .iter()
                .copied()
                .filter(|p| wanted.contains(p))
                .collect::<Vec<_>>()
        })
        .filter(|pus| !pus.is_empty())
        .collect();
    let known: BTreeSet<usize> = cores.iter().flatten().copied().collect();
    cores.extend(wanted.difference(&known).map(|&p| vec![p]));
    let m = cores.len();
    if parts <= 1 || m == 0 {
        return cpus.to_vec();
    }
    if m < parts {
        return cores.swap_remove(part % m);
    }
    cores[part * m / parts..(part + 1) * m / parts].concat()
}

// Proves `plan` uses every selected core once, keeps reserved cores near
// their device, honours and checks CPU lists, and that `steal_order` visits
// NUMA siblings before same-package nodes before other packages.
#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(devices: usize, reserve_per_device: usize, progress: bool) -> PlacementConfig {
        PlacementConfig {
            cpus: CpuSelection::All,
            reserve_per_device,
            devices,
            reserve_for_progress_thread: progress,
        }
    }

    /// Each core at most once across workers, devices and the progress
    /// thread; worker ids dense; each slot consistent with the topology.
    fn check_map(topo: &Topology, map: &WorkerMap) {
        let mut seen = BTreeSet::new();
        for (i, s) in map.cpu_workers.iter().enumerate() {
            assert_eq!(s.worker, i);
            assert!(seen.insert(s.core), "core {} used twice", s.core);
            let core = &topo.cores[s.core];
            assert!(core.pus.contains(&s.pu));
            assert_eq!((core.numa, core.package), (s.numa, s.package));
        }
        for &c in &map.reserved_cores {
            assert!(seen.insert(c), "reserved core {c} also runs a CPU worker");
        }
        for (d, &c) in map.device_cores.iter().enumerate() {
            assert_eq!(topo.cores[c].numa, map.device_numa[d]);
        }
        // Consecutive workers share a NUMA node: each node's workers form one run.
        let mut runs: Vec<usize> = map.cpu_workers.iter().map(|s| s.numa).collect();
        runs.dedup();
        let distinct: BTreeSet<_> = runs.iter().collect();
        assert_eq!(
            runs.len(),
            distinct.len(),
            "a NUMA node's workers are not contiguous: {runs:?}"
        );
    }

    #[test]
    fn all_cores_become_workers() {
        let topo = Topology::synthetic(2, 2, 4, 1);
        let map = plan(&topo, &cfg(0, 1, false)).unwrap();
        check_map(&topo, &map);
        assert_eq!(map.cpu_workers.len(), 16);
        assert!(
            map.device_cores.is_empty()
                && map.progress_core.is_none()
                && map.reserved_cores.is_empty()
        );
        for (i, s) in map.cpu_workers.iter().enumerate() {
            assert_eq!((s.core, s.pu, s.numa, s.package), (i, i, i / 4, i / 8));
        }
        assert_eq!(numa_nodes(&map), vec![0, 1, 2, 3]);
        assert_eq!(home_numa_node(&map, 13), 3);
    }

    #[test]
    fn hyperthreads_are_not_extra_workers() {
        let topo = Topology::synthetic(1, 1, 4, 2);
        let map = plan(&topo, &cfg(0, 1, false)).unwrap();
        check_map(&topo, &map);
        assert_eq!(
            map.cpu_workers.iter().map(|s| s.pu).collect::<Vec<_>>(),
            vec![0, 2, 4, 6]
        );
    }

    #[test]
    fn device_cores_sit_near_their_gpu() {
        let mut topo = Topology::synthetic(2, 2, 4, 1);
        topo.gpus_near = vec![("0000:17:00.0".into(), 1), ("0000:ca:00.0".into(), 2)];
        let map = plan(&topo, &cfg(2, 1, false)).unwrap();
        check_map(&topo, &map);
        assert_eq!(map.cpu_workers.len(), 14);
        assert_eq!(map.device_numa, vec![1, 2]);
        // The highest core of each node: node 1 is cores 4..8, node 2 is 8..12.
        assert_eq!(map.device_cores, vec![7, 11]);
        assert_eq!(map.reserved_cores, vec![7, 11]);
        for s in &map.cpu_workers {
            assert!(!map.device_cores.contains(&s.core));
        }
    }

    #[test]
    fn several_cores_per_device_overflow_to_the_same_package() {
        let mut topo = Topology::synthetic(2, 2, 2, 1);
        topo.gpus_near = vec![("0000:17:00.0".into(), 0)];
        let map = plan(&topo, &cfg(1, 3, false)).unwrap();
        check_map(&topo, &map);
        assert_eq!(map.device_cores, vec![1]);
        // Node 0 has 2 cores; the third reserved core comes from node 1, same package.
        assert_eq!(map.reserved_cores, vec![0, 1, 3]);
        assert_eq!(map.cpu_workers.len(), 5);
    }

    #[test]
    fn device_falls_back_to_its_package_when_its_node_is_not_selected() {
        let mut topo = Topology::synthetic(2, 2, 2, 1); // node n has cores 2n, 2n+1
        topo.gpus_near = vec![("0000:17:00.0".into(), 2)];
        let cpus = CpuSelection::List(vec![0, 1, 2, 3, 6, 7]); // node 2 left out
        let map = plan(
            &topo,
            &PlacementConfig {
                cpus,
                ..cfg(1, 1, false)
            },
        )
        .unwrap();
        check_map(&topo, &map);
        assert_eq!(
            map.device_numa,
            vec![3],
            "node 3 shares package 1 with node 2"
        );
    }

    #[test]
    fn devices_of_unknown_locality_spread_and_progress_takes_one() {
        let topo = Topology::synthetic(2, 2, 4, 1);
        let map = plan(&topo, &cfg(4, 1, true)).unwrap();
        check_map(&topo, &map);
        let nodes: BTreeSet<usize> = map.device_numa.iter().copied().collect();
        assert_eq!(
            nodes.len(),
            4,
            "four devices on four nodes: {:?}",
            map.device_numa
        );
        assert!(map.progress_core.is_some());
        assert_eq!(map.reserved_cores.len(), 5);
        assert_eq!(map.cpu_workers.len(), 11);
        assert!(
            !map.reserved_cores.contains(&0),
            "core 0 stays a CPU worker"
        );
    }

    #[test]
    fn zero_reserve_shares_device_cores() {
        let mut topo = Topology::synthetic(1, 2, 2, 1);
        topo.gpus_near = vec![("0000:17:00.0".into(), 1)];
        let map = plan(&topo, &cfg(3, 0, false)).unwrap();
        check_map(&topo, &map);
        assert_eq!(map.cpu_workers.len(), 4);
        assert_eq!(map.device_cores.len(), 3);
        assert_eq!(map.device_numa[0], 1);
        assert!(map.reserved_cores.is_empty());
        assert_eq!(
            map.device_cores.iter().collect::<BTreeSet<_>>().len(),
            3,
            "spread: {:?}",
            map.device_cores
        );
        assert!(describe(&topo, &map).contains("shared with a CPU worker"));
    }

    #[test]
    fn explicit_cpu_list_is_honoured() {
        let topo = Topology::synthetic(2, 2, 4, 2); // core c has PUs 2c, 2c+1
        let list = vec![3, 2, 17, 30, 8];
        let map = plan(
            &topo,
            &PlacementConfig {
                cpus: CpuSelection::List(list),
                ..cfg(0, 1, false)
            },
        )
        .unwrap();
        check_map(&topo, &map);
        // PUs 2 and 3 are one core; its worker takes PU 2.
        assert_eq!(
            map.cpu_workers
                .iter()
                .map(|s| (s.core, s.pu))
                .collect::<Vec<_>>(),
            vec![(1, 2), (4, 8), (8, 17), (15, 30)]
        );
    }

    #[test]
    fn bad_lists_are_rejected() {
        let topo = Topology::synthetic(1, 2, 2, 1);
        let with = |cpus: Vec<usize>| PlacementConfig {
            cpus: CpuSelection::List(cpus),
            ..cfg(0, 1, false)
        };
        assert_eq!(
            plan(&topo, &with(vec![])),
            Err(PlacementError::EmptySelection)
        );
        let err = plan(&topo, &with(vec![0, 9])).unwrap_err();
        assert_eq!(
            err,
            PlacementError::UnknownCpu {
                cpu: 9,
                known: "0-3".into()
            }
        );
        assert_eq!(
            err.to_string(),
            "CPU 9 is not on this machine (its CPUs are 0-3)"
        );
        assert_eq!(
            plan(&topo, &with(vec![1, 1])),
            Err(PlacementError::DuplicateCpu(1))
        );
    }

    #[test]
    fn reservations_must_leave_a_worker() {
        let topo = Topology::synthetic(1, 1, 2, 1);
        assert_eq!(
            plan(&topo, &cfg(1, 1, true)),
            Err(PlacementError::NoCoreLeft {
                usable: 2,
                reserved: 2
            })
        );
        assert_eq!(
            plan(&topo, &cfg(2, 1, false)),
            Err(PlacementError::NoCoreLeft {
                usable: 2,
                reserved: 2
            })
        );
        let one = plan(&topo, &cfg(1, 1, false)).unwrap();
        assert_eq!(one.cpu_workers.len(), 1);
        let picked = PlacementConfig {
            cpus: CpuSelection::List(vec![1]),
            ..cfg(1, 1, false)
        };
        assert!(plan(&topo, &picked)
            .unwrap_err()
            .to_string()
            .contains("leave no core"));
    }

    #[test]
    fn steal_order_goes_sibling_then_package_then_remote() {
        for (p, n, c) in [(2, 2, 4), (1, 1, 4), (2, 1, 3), (1, 3, 2), (3, 2, 1)] {
            let topo = Topology::synthetic(p, n, c, 1);
            let map = plan(&topo, &cfg(0, 1, false)).unwrap();
            for me in &map.cpu_workers {
                let order = steal_order(&map, me.worker);
                let mut sorted = order.clone();
                sorted.sort_unstable();
                let others: Vec<usize> = (0..map.cpu_workers.len())
                    .filter(|&w| w != me.worker)
                    .collect();
                assert_eq!(sorted, others, "each other worker once");
                let distance = |w: usize| {
                    let s = &map.cpu_workers[w];
                    if s.numa == me.numa {
                        0
                    } else if s.package == me.package {
                        1
                    } else {
                        2
                    }
                };
                let distances: Vec<u8> = order.iter().map(|&w| distance(w)).collect();
                assert!(
                    distances.windows(2).all(|w| w[0] <= w[1]),
                    "{p}x{n}x{c} worker {}: {distances:?}",
                    me.worker
                );
            }
        }
    }

    #[test]
    fn steal_order_rotates() {
        let topo = Topology::synthetic(2, 2, 4, 1);
        let map = plan(&topo, &cfg(0, 1, false)).unwrap();
        assert_eq!(steal_order(&map, 0)[..7], [1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(steal_order(&map, 2)[..7], [3, 0, 1, 6, 7, 4, 5]);
        // Siblings each start with a different victim.
        let firsts: BTreeSet<usize> = (0..4).map(|w| steal_order(&map, w)[0]).collect();
        assert_eq!(firsts.len(), 4);
        // ...and with a different worker of the remote node.
        let remote_firsts: BTreeSet<usize> = (0..4).map(|w| steal_order(&map, w)[3]).collect();
        assert_eq!(remote_firsts.len(), 4);
    }

    #[test]
    #[should_panic(expected = "not one of the 2 CPU workers")]
    fn unknown_worker_panics() {
        let map = plan(&Topology::synthetic(1, 1, 2, 1), &cfg(0, 1, false)).unwrap();
        steal_order(&map, 2);
    }

    #[test]
    fn ranks_given_the_same_cpus_share_them_by_whole_cores() {
        // 2 packages × 1 NUMA node × 4 cores × 2 PUs: cores hold PUs 0-1,
        // 2-3, ..., 14-15.
        let topo = Topology::synthetic(2, 1, 4, 2);
        let all: Vec<usize> = (0..16).collect();
        let shares: Vec<Vec<usize>> = (0..2).map(|p| share_cpus(&topo, &all, p, 2)).collect();
        assert_eq!(shares[0], (0..8).collect::<Vec<_>>(), "one package each");
        assert_eq!(shares[1], (8..16).collect::<Vec<_>>());
        // Three ranks over 8 cores: 2, 3 and 3 cores, disjoint, covering all.
        let three: Vec<Vec<usize>> = (0..3).map(|p| share_cpus(&topo, &all, p, 3)).collect();
        assert_eq!(three.iter().map(Vec::len).collect::<Vec<_>>(), [4, 6, 6]);
        let union: BTreeSet<usize> = three.iter().flatten().copied().collect();
        assert_eq!(union.len(), 16);
        // Siblings never split: each share is whole cores.
        for s in &three {
            assert!(
                s.chunks(2).all(|c| c[0] % 2 == 0 && c[1] == c[0] + 1),
                "{s:?}"
            );
        }
        // Only the CPUs given are dealt (here cores 1-3's first PUs).
        assert_eq!(share_cpus(&topo, &[2, 4, 6], 0, 2), [2]);
        assert_eq!(share_cpus(&topo, &[2, 4, 6], 1, 2), [4, 6]);
        // More ranks than cores: they share, round robin.
        let two_cores = [0, 1, 2, 3];
        let many: Vec<Vec<usize>> = (0..5)
            .map(|p| share_cpus(&topo, &two_cores, p, 5))
            .collect();
        assert_eq!(
            many,
            [vec![0, 1], vec![2, 3], vec![0, 1], vec![2, 3], vec![0, 1]]
        );
        // One process keeps everything; a CPU of no known core is a core.
        assert_eq!(share_cpus(&topo, &all, 0, 1), all);
        assert_eq!(share_cpus(&topo, &[0, 99], 1, 2), [99]);
    }

    #[test]
    fn this_machine_plans() {
        let topo = match Topology::detect() {
            Ok(topo) => topo,
            Err(e) => {
                println!("note: cannot read this machine's topology ({e}); skipped");
                return;
            }
        };
        let map = plan(&topo, &PlacementConfig::default()).unwrap();
        check_map(&topo, &map);
        assert_eq!(map.cpu_workers.len(), topo.cores.len());
        println!("{}", describe(&topo, &map));
    }

    #[test]
    fn describe_shows_tree_and_map() {
        let mut topo = Topology::synthetic(1, 2, 2, 2);
        topo.gpus_near = vec![("0000:17:00.0".into(), 1)];
        let map = plan(&topo, &cfg(1, 1, true)).unwrap();
        let text = describe(&topo, &map);
        let expected = "\
Machine: 1 package(s), 2 NUMA node(s), 4 core(s), 8 PU(s)
  Package 0
    NUMA 0 (16.0 GiB)
      core 0: PU 0, PU 1
      core 1: PU 2, PU 3
    NUMA 1 (16.0 GiB)
      core 2: PU 4, PU 5
      core 3: PU 6, PU 7
  GPU 0000:17:00.0 near NUMA 1
Workers: 2 CPU, 1 device, 1 progress thread
  cpu0 → core 0 (PU 0, NUMA 0)
  cpu1 → core 2 (PU 4, NUMA 1)
  device0 → core 3 (PUs 6-7, NUMA 1)
  progress → core 1 (PUs 2-3, NUMA 0)
";
        assert_eq!(text, expected);
    }
}
