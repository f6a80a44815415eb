//! hwloc through hwlocality (feature `hwloc`): topology detection, thread binding, NUMA-bound memory.
//!
//! Needs the system packages `libhwloc-dev` (hwloc ≥ 2.8) and `libudev-dev`.
//! One hwloc topology of this machine is loaded on first use and kept for
//! the process's lifetime ([`shared`]); binding and allocation go through it.

use std::mem::MaybeUninit;
use std::ops::{Deref, DerefMut};
use std::sync::OnceLock;

use hwlocality::cpu::binding::CpuBindingFlags;
use hwlocality::cpu::cpuset::CpuSet;
use hwlocality::memory::binding::{Bytes, MemoryBindingFlags, MemoryBindingPolicy};
use hwlocality::memory::nodeset::NodeSet;
use hwlocality::object::attributes::ObjectAttributes;
use hwlocality::object::types::ObjectType;
use hwlocality::object::TopologyObject;
use hwlocality::topology::builder::TypeFilter;

use super::binding::BindError;
use super::topology::{format_cpu_list, RawCore, Topology, TopologyError};

/// This machine's hwloc topology, loaded once (with GPUs and other
/// important I/O devices); the error of the first load is kept too.
fn shared() -> Result<&'static hwlocality::Topology, String> {
    static SHARED: OnceLock<Result<hwlocality::Topology, String>> = OnceLock::new();
    SHARED
        .get_or_init(load_this_machine)
        .as_ref()
        .map_err(Clone::clone)
}

fn load_this_machine() -> Result<hwlocality::Topology, String> {
    hwlocality::Topology::builder()
        .with_io_type_filter(TypeFilter::KeepImportant)
        .map_err(|e| format!("keeping I/O devices: {e}"))?
        .build()
        .map_err(|e| format!("loading this machine's topology: {e}"))
}

pub(crate) fn detect() -> Result<Topology, TopologyError> {
    Topology::from_hwloc(shared().map_err(TopologyError::Hwloc)?)
}

impl Topology {
    /// Converts an hwloc topology. Objects hwloc gives no OS index
    /// (synthetic topologies may not) are numbered by their logical index.
    ///
    /// A core belongs to the first NUMA node (by OS index) whose cpuset
    /// holds its PUs, so a memory-only node sharing a cpuset with a DRAM
    /// node (HBM, CXL) ends up with no CPUs, as in sysfs. GPUs are PCI
    /// devices passing the same class/vendor test as the sysfs reader, near
    /// the NUMA node of their first non-I/O ancestor when that is a single
    /// node (or the machine has only one).
    ///
    /// # Errors
    /// [`TopologyError::Inconsistent`] if the pieces do not fit together.
    pub fn from_hwloc(hw: &hwlocality::Topology) -> Result<Topology, TopologyError> {
        let os_index = |o: &TopologyObject| o.os_index().unwrap_or_else(|| o.logical_index());
        let cpus_of = |o: &TopologyObject| -> Vec<usize> {
            o.cpuset()
                .map(|set| set.iter_set().map(usize::from).collect())
                .unwrap_or_default()
        };

        let mut nodes: Vec<(usize, u64, Vec<usize>)> = hw
            .objects_with_type(ObjectType::NUMANode)
            .map(|n| {
                let memory = match n.attributes() {
                    Some(ObjectAttributes::NUMANode(attr)) => {
                        attr.local_memory().map_or(0, |m| m.get())
                    }
                    _ => n.total_memory(),
                };
                (os_index(n), memory, cpus_of(n))
            })
            .collect();
        nodes.sort_by_key(|n| n.0);
        if nodes.is_empty() {
            return Err(TopologyError::Inconsistent(
                "hwloc reports no NUMA node".into(),
            ));
        }

        // Cores keyed by hwloc's persistent id; a PU without a Core ancestor
        // is a core of its own.
        let mut cores: Vec<(Option<u64>, RawCore)> = Vec::new();
        for pu in hw.objects_with_type(ObjectType::PU) {
            let pu_os = os_index(pu);
            let core = pu.first_ancestor_with_type(ObjectType::Core);
            let key = core.map(TopologyObject::global_persistent_index);
            let package = pu
                .first_ancestor_with_type(ObjectType::Package)
                .map_or(0, os_index);
            let numa = nodes
                .iter()
                .find(|(_, _, cpus)| cpus.binary_search(&pu_os).is_ok())
                .unwrap_or(&nodes[0])
                .0;
            match cores.iter_mut().find(|(k, _)| key.is_some() && *k == key) {
                Some((_, raw)) => raw.pus.push(pu_os),
                None => cores.push((
                    key,
                    RawCore {
                        os_index: core.map_or(pu_os, os_index),
                        package,
                        numa,
                        pus: vec![pu_os],
                    },
                )),
            }
        }

        let single_node = (nodes.len() == 1).then(|| nodes[0].0);
        let mut gpus = Vec::new();
        for dev in hw.objects_with_type(ObjectType::PCIDevice) {
            let Some(ObjectAttributes::PCIDevice(pci)) = dev.attributes() else {
                continue;
            };
            if !super::sysfs::is_gpu(u32::from(pci.class_id()), u32::from(pci.vendor_id())) {
                continue;
            }
            let near = dev
                .first_non_io_ancestor()
                .and_then(|a| a.nodeset())
                .filter(|set| set.weight() == Some(1))
                .and_then(|set| set.first_set())
                .map(usize::from)
                .or(single_node);
            if let Some(numa) = near {
                let bdf = format!(
                    "{:04x}:{:02x}:{:02x}.{:x}",
                    pci.domain(),
                    pci.bus_id(),
                    pci.bus_device(),
                    pci.function()
                );
                gpus.push((bdf, numa));
            }
        }

        let numa_memory = nodes.iter().map(|&(os, mem, _)| (os, mem)).collect();
        Topology::assemble(
            cores.into_iter().map(|(_, raw)| raw).collect(),
            numa_memory,
            gpus,
        )
    }

    /// Converts one of hwloc's synthetic topologies, such as
    /// `"pack:2 numa:2 core:4 pu:1"` (see hwloc's "Synthetic topologies").
    ///
    /// # Errors
    /// [`TopologyError::Hwloc`] for a description hwloc rejects.
    pub fn from_hwloc_synthetic(description: &str) -> Result<Topology, TopologyError> {
        let hw = hwlocality::Topology::builder()
            .from_synthetic(description)
            .map_err(|e| TopologyError::Hwloc(format!("synthetic topology {description:?}: {e}")))?
            .build()
            .map_err(|e| {
                TopologyError::Hwloc(format!("synthetic topology {description:?}: {e}"))
            })?;
        Topology::from_hwloc(&hw)
    }
}

pub(crate) fn bind_current_thread(cpus: &[usize]) -> Result<(), BindError> {
    let hw = shared().map_err(BindError::Hwloc)?;
    let mut set = CpuSet::new();
    for &cpu in cpus {
        set.set(cpu);
    }
    hw.bind_cpu(&set, CpuBindingFlags::THREAD).map_err(|e| {
        BindError::Hwloc(format!(
            "binding this thread to CPUs {}: {e}",
            format_cpu_list(cpus)
        ))
    })
}

pub(crate) fn current_thread_cpus() -> Result<Vec<usize>, BindError> {
    let hw = shared().map_err(BindError::Hwloc)?;
    let set = hw
        .cpu_binding(CpuBindingFlags::THREAD)
        .map_err(|e| BindError::Hwloc(format!("reading this thread's binding: {e}")))?;
    Ok(set.iter_set().map(usize::from).collect())
}

/// Memory whose pages hwloc bound to one NUMA node (policy "bind": the
/// kernel allocates them there or fails, it does not spill). Freed on drop.
///
/// Starts uninitialised, as `[MaybeUninit<u8>]`: a host memory node writes
/// its replica into it before reading.
#[derive(Debug)]
pub struct NumaBuffer {
    bytes: Bytes<'static>,
    numa: usize,
}

impl NumaBuffer {
    /// The NUMA node (OS index) the memory is bound to.
    pub fn numa_node(&self) -> usize {
        self.numa
    }
}

impl Deref for NumaBuffer {
    type Target = [MaybeUninit<u8>];
    fn deref(&self) -> &Self::Target {
        &self.bytes
    }
}

impl DerefMut for NumaBuffer {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.bytes
    }
}

/// Allocates `len` bytes bound to NUMA node `numa` (OS index): staging and
/// replica memory for the host memory node of that NUMA node.
///
/// # Errors
/// `len == 0`, an unknown node, or a system that cannot bind memory.
pub fn alloc_on_numa_node(numa: usize, len: usize) -> Result<NumaBuffer, BindError> {
    if len == 0 {
        return Err(BindError::Hwloc("cannot allocate 0 bytes".into()));
    }
    let hw = shared().map_err(BindError::Hwloc)?;
    if numa >= super::binding::MAX_CPU || !hw.nodeset().is_set(numa) {
        return Err(BindError::Hwloc(format!(
            "NUMA node {numa} is not on this machine"
        )));
    }
    let mut nodes = NodeSet::new();
    nodes.set(numa);
    let bytes = hw
        .allocate_bound_memory(
            len,
            &nodes,
            MemoryBindingPolicy::Bind,
            MemoryBindingFlags::empty(),
        )
        .map_err(|e| {
            BindError::Hwloc(format!("allocating {len} bytes on NUMA node {numa}: {e}"))
        })?;
    Ok(NumaBuffer { bytes, numa })
}

// Proves hwloc and our own readers agree: a synthetic hwloc machine converts
// to the shape of `Topology::synthetic`, hwloc and sysfs see this machine
// alike, and NUMA-bound memory is usable.
#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn synthetic_matches_ours() {
        for (desc, ours) in [
            ("pack:2 numa:2 core:4 pu:1", Topology::synthetic(2, 2, 4, 1)),
            ("pack:1 numa:2 core:3 pu:2", Topology::synthetic(1, 2, 3, 2)),
            ("pack:2 numa:1 core:4 pu:1", Topology::synthetic(2, 1, 4, 1)),
        ] {
            let from_hwloc = Topology::from_hwloc_synthetic(desc).unwrap();
            assert_eq!(from_hwloc.shape(), ours.shape(), "{desc}");
            assert_eq!(from_hwloc.packages.len(), ours.packages.len(), "{desc}");
            assert_eq!(from_hwloc.numa_nodes.len(), ours.numa_nodes.len(), "{desc}");
            assert_eq!(from_hwloc.cores.len(), ours.cores.len(), "{desc}");
            assert_eq!(from_hwloc.pus.len(), ours.pus.len(), "{desc}");
            for (a, b) in from_hwloc.numa_nodes.iter().zip(&ours.numa_nodes) {
                assert_eq!(a.cpuset.len(), b.cpuset.len(), "{desc}");
            }
        }
    }

    #[test]
    fn synthetic_numbering_is_hwlocs() {
        // hwloc numbers PUs in order, as `Topology::synthetic` does, so the
        // two are equal in full, memory sizes aside.
        let mut from_hwloc = Topology::from_hwloc_synthetic("pack:2 numa:2 core:4 pu:1").unwrap();
        let ours = Topology::synthetic(2, 2, 4, 1);
        for (a, b) in from_hwloc.numa_nodes.iter_mut().zip(&ours.numa_nodes) {
            a.memory_bytes = b.memory_bytes;
        }
        assert_eq!(from_hwloc.pus, ours.pus);
        assert_eq!(from_hwloc.numa_nodes, ours.numa_nodes);
        assert_eq!(
            from_hwloc
                .cores
                .iter()
                .map(|c| (c.package, c.numa, c.pus.clone()))
                .collect::<Vec<_>>(),
            ours.cores
                .iter()
                .map(|c| (c.package, c.numa, c.pus.clone()))
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn bad_synthetic_description_is_an_error() {
        let err = Topology::from_hwloc_synthetic("pack:two")
            .unwrap_err()
            .to_string();
        assert!(err.contains("pack:two"), "{err}");
    }

    #[test]
    fn hwloc_and_sysfs_agree_on_this_machine() {
        if !Path::new("/sys/devices/system/cpu/online").exists() {
            println!("note: no sysfs here; comparison skipped");
            return;
        }
        let hw = Topology::detect().unwrap();
        let fs = Topology::from_sysfs(Path::new("/")).unwrap();
        assert_eq!(hw.cores.len(), fs.cores.len(), "hwloc {hw:?}\nsysfs {fs:?}");
        assert_eq!(hw.pus.len(), fs.pus.len());
        assert_eq!(hw.numa_nodes.len(), fs.numa_nodes.len());
        assert_eq!(hw.shape(), fs.shape());
        assert_eq!(
            hw.pus.iter().map(|p| p.os_index).collect::<Vec<_>>(),
            fs.pus.iter().map(|p| p.os_index).collect::<Vec<_>>()
        );
        assert_eq!(hw.gpus_near, fs.gpus_near);
    }

    #[test]
    fn numa_bound_memory_is_usable() {
        let node = Topology::detect().unwrap().numa_nodes[0].os_index;
        let mut buf = alloc_on_numa_node(node, 1 << 20).unwrap();
        assert_eq!(buf.len(), 1 << 20);
        assert_eq!(buf.numa_node(), node);
        for (i, b) in buf.iter_mut().enumerate() {
            b.write(i as u8);
        }
        // SAFETY: every byte was written just above.
        let last = unsafe { buf[(1 << 20) - 1].assume_init() };
        assert_eq!(last, 0xff);
        assert!(alloc_on_numa_node(4096, 64).is_err());
        assert!(alloc_on_numa_node(node, 0).is_err());
    }
}
