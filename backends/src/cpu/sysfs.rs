//! Reading the topology from Linux's sysfs, without hwloc.
//!
//! Files read, all under the given root (`/` for this machine):
//! - `sys/devices/system/cpu/online`: the CPUs to describe (if absent, every
//!   `cpuN` directory);
//! - `sys/devices/system/cpu/cpuN/topology/{physical_package_id,core_id,thread_siblings_list}`:
//!   a CPU without a `topology/` directory is a core of its own in package 0;
//! - `sys/devices/system/node/nodeN/{cpulist,meminfo}`: NUMA nodes; without a
//!   `node/` directory (kernels built without NUMA, some containers) there is
//!   one NUMA node 0 holding every online CPU, sized by `proc/meminfo`;
//! - `sys/bus/pci/devices/*/{class,vendor,numa_node}`: GPUs, best effort
//!   (an unreadable device is skipped, not an error).

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use super::topology::{parse_cpu_list, RawCore, Topology, TopologyError};

pub(crate) fn read(root: &Path) -> Result<Topology, TopologyError> {
    let cpu_dir = root.join("sys/devices/system/cpu");
    let online = online_cpus(&cpu_dir)?;
    if online.is_empty() {
        return Err(TopologyError::Inconsistent(format!(
            "{} lists no CPU",
            cpu_dir.join("online").display()
        )));
    }

    // Cores are keyed by (package, thread siblings): `core_id` repeats across
    // dies and packages, a sibling list does not.
    let mut cores: BTreeMap<(usize, Vec<usize>), RawCore> = BTreeMap::new();
    for &cpu in &online {
        let topo_dir = cpu_dir.join(format!("cpu{cpu}/topology"));
        let (package, core_id, siblings) =
            match read_optional(&topo_dir.join("physical_package_id"))? {
                None => (0, cpu, vec![cpu]),
                Some(_) => {
                    // -1 means "unknown" (some VMs and ARM boards): one package, then.
                    let package = usize::try_from(read_int(&topo_dir.join("physical_package_id"))?)
                        .unwrap_or(0);
                    let core_id =
                        usize::try_from(read_int(&topo_dir.join("core_id"))?).unwrap_or(cpu);
                    let path = topo_dir.join("thread_siblings_list");
                    let mut siblings: Vec<usize> = read_cpu_list(&path)?
                        .into_iter()
                        .filter(|c| online.binary_search(c).is_ok())
                        .collect();
                    if !siblings.contains(&cpu) {
                        siblings.push(cpu);
                        siblings.sort_unstable();
                    }
                    (package, core_id, siblings)
                }
            };
        cores
            .entry((package, siblings))
            .or_insert_with(|| RawCore {
                os_index: core_id,
                package,
                numa: 0,
                pus: Vec::new(),
            })
            .pus
            .push(cpu);
    }

    let node_dir = root.join("sys/devices/system/node");
    let mut nodes = numa_nodes(&node_dir)?;
    if nodes.is_empty() {
        let meminfo = root.join("proc/meminfo");
        let memory = mem_total(&meminfo, &read_string(&meminfo)?)?;
        nodes.push((0, memory, online.clone()));
    }
    let node_of = |cpu: usize| {
        nodes
            .iter()
            .find(|(_, _, cpus)| cpus.binary_search(&cpu).is_ok())
            .or_else(|| nodes.iter().find(|(_, _, cpus)| !cpus.is_empty()))
            .unwrap_or(&nodes[0])
            .0
    };
    let mut raw: Vec<RawCore> = cores.into_values().collect();
    for core in &mut raw {
        core.numa = node_of(core.pus[0]);
    }
    let numa_memory: Vec<(usize, u64)> = nodes.iter().map(|&(os, mem, _)| (os, mem)).collect();
    let single_node = (numa_memory.len() == 1).then(|| numa_memory[0].0);
    let gpus = pci_gpus(&root.join("sys/bus/pci/devices"), single_node)
        .into_iter()
        .filter(|(_, numa)| numa_memory.iter().any(|&(os, _)| os == *numa))
        .collect();
    Topology::assemble(raw, numa_memory, gpus)
}

/// The online CPUs, from `online` or, failing that, the `cpuN` directories.
fn online_cpus(cpu_dir: &Path) -> Result<Vec<usize>, TopologyError> {
    let online = cpu_dir.join("online");
    if let Some(text) = read_optional(&online)? {
        return parse_cpu_list(&text).map_err(|e| parse_error(&online, &e.text, e.reason));
    }
    let mut cpus: Vec<usize> =
        numbered_entries(cpu_dir, "cpu").map_err(|source| TopologyError::Io {
            path: online,
            source,
        })?;
    cpus.sort_unstable();
    Ok(cpus)
}

/// Every `nodeN` under `node_dir`: (N, MemTotal bytes, cpus), sorted by N;
/// empty when the directory does not exist.
fn numa_nodes(node_dir: &Path) -> Result<Vec<(usize, u64, Vec<usize>)>, TopologyError> {
    let ids = match numbered_entries(node_dir, "node") {
        Ok(ids) => ids,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(TopologyError::Io {
                path: node_dir.to_path_buf(),
                source,
            })
        }
    };
    let mut nodes = Vec::with_capacity(ids.len());
    for id in ids {
        let dir = node_dir.join(format!("node{id}"));
        let cpus = read_cpu_list(&dir.join("cpulist"))?;
        let meminfo = dir.join("meminfo");
        let memory = mem_total(&meminfo, &read_string(&meminfo)?)?;
        nodes.push((id, memory, cpus));
    }
    nodes.sort_by_key(|n| n.0);
    Ok(nodes)
}

/// GPUs on the PCI bus and their NUMA node: class 3D controller (0x0302),
/// or a VGA / other display controller (0x0300, 0x0380) from NVIDIA or AMD,
/// which leaves out the BMC and emulated VGA of servers and VMs. A device
/// whose node is unknown (-1) is placed on `single_node` if the machine has
/// only one, and left out otherwise.
fn pci_gpus(pci_dir: &Path, single_node: Option<usize>) -> Vec<(String, usize)> {
    let Ok(entries) = std::fs::read_dir(pci_dir) else {
        return Vec::new();
    };
    let mut gpus = Vec::new();
    for entry in entries.flatten() {
        let dir = entry.path();
        let hex = |file: &str| {
            let text = std::fs::read_to_string(dir.join(file)).ok()?;
            u32::from_str_radix(text.trim().trim_start_matches("0x"), 16).ok()
        };
        let (Some(class), Some(vendor)) = (hex("class"), hex("vendor")) else {
            continue;
        };
        if !is_gpu(class >> 8, vendor) {
            continue;
        }
        let numa = std::fs::read_to_string(dir.join("numa_node"))
            .ok()
            .and_then(|t| t.trim().parse::<i64>().ok())
            .and_then(|n| usize::try_from(n).ok())
            .or(single_node);
        if let Some(numa) = numa {
            gpus.push((entry.file_name().to_string_lossy().into_owned(), numa));
        }
    }
    gpus.sort();
    gpus
}

/// The GPU test shared with the hwloc reader: `class` is the 16-bit PCI
/// class (base class and subclass), `vendor` the PCI vendor id.
pub(crate) fn is_gpu(class: u32, vendor: u32) -> bool {
    const NVIDIA: u32 = 0x10de;
    const AMD: u32 = 0x1002;
    match class {
        0x0302 => true,
        0x0300 | 0x0380 => vendor == NVIDIA || vendor == AMD,
        _ => false,
    }
}

/// N for every entry named `{prefix}N` in `dir`.
fn numbered_entries(dir: &Path, prefix: &str) -> std::io::Result<Vec<usize>> {
    let mut ids = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name();
        let name = name.to_string_lossy();
        if let Some(id) = name
            .strip_prefix(prefix)
            .and_then(|n| n.parse::<usize>().ok())
        {
            ids.push(id);
        }
    }
    ids.sort_unstable();
    Ok(ids)
}

/// Bytes of the `MemTotal:` line of a meminfo file (`/proc/meminfo` or a
/// node's `Node N MemTotal:   123 kB`).
fn mem_total(path: &Path, text: &str) -> Result<u64, TopologyError> {
    let line = text
        .lines()
        .find(|l| l.contains("MemTotal:"))
        .ok_or_else(|| {
            parse_error(
                path,
                text.lines().next().unwrap_or(""),
                "no MemTotal line".into(),
            )
        })?;
    let mut after = line
        .split_once("MemTotal:")
        .map(|(_, rest)| rest.split_whitespace())
        .into_iter()
        .flatten();
    let kib = after.next().and_then(|n| n.parse::<u64>().ok());
    match (kib, after.next()) {
        (Some(kib), Some("kB") | None) => Ok(kib * 1024),
        _ => Err(parse_error(
            path,
            line,
            "expected `MemTotal: <number> kB`".into(),
        )),
    }
}

fn read_string(path: &Path) -> Result<String, TopologyError> {
    std::fs::read_to_string(path).map_err(|source| TopologyError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// The file's text, or `None` if it does not exist.
fn read_optional(path: &Path) -> Result<Option<String>, TopologyError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(source) => Err(TopologyError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn read_cpu_list(path: &Path) -> Result<Vec<usize>, TopologyError> {
    parse_cpu_list(&read_string(path)?).map_err(|e| parse_error(path, &e.text, e.reason))
}

fn read_int(path: &Path) -> Result<i64, TopologyError> {
    let text = read_string(path)?;
    text.trim()
        .parse()
        .map_err(|_| parse_error(path, &text, "not an integer".into()))
}

fn parse_error(path: &Path, text: &str, reason: String) -> TopologyError {
    TopologyError::Parse {
        path: PathBuf::from(path),
        text: text.trim_end().to_string(),
        reason,
    }
}

// Proves `from_sysfs` rebuilds packages, NUMA nodes, cores, hyperthreads and
// GPUs from fake sysfs trees, falls back to one NUMA node when `node/` is
// missing, and names the file and text when a file is malformed.
#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// A temporary directory removed on drop; unique per test.
    pub(crate) struct TempTree(pub(crate) PathBuf);

    impl TempTree {
        pub(crate) fn new(name: &str) -> TempTree {
            let dir =
                std::env::temp_dir().join(format!("tessera-sysfs-{}-{name}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            TempTree(dir)
        }

        pub(crate) fn write(&self, rel: &str, text: &str) {
            let path = self.0.join(rel);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        }
    }

    impl Drop for TempTree {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn cpu(t: &TempTree, cpu: usize, package: i64, core: usize, siblings: &str) {
        let dir = format!("sys/devices/system/cpu/cpu{cpu}/topology");
        t.write(
            &format!("{dir}/physical_package_id"),
            &format!("{package}\n"),
        );
        t.write(&format!("{dir}/core_id"), &format!("{core}\n"));
        t.write(
            &format!("{dir}/thread_siblings_list"),
            &format!("{siblings}\n"),
        );
    }

    /// One package, 2 NUMA nodes of 4 cores; node 1's cores have two
    /// hyperthreads each, numbered the Linux way (cpu N and N+8: CPUs 8-11
    /// do not exist); cpu 15 is offline.
    fn two_node_tree(name: &str) -> TempTree {
        let t = TempTree::new(name);
        t.write("sys/devices/system/cpu/online", "0-7,12-14\n");
        for c in 0..4 {
            cpu(&t, c, 0, c, &c.to_string());
        }
        for c in 4..8 {
            cpu(&t, c, 0, c, &format!("{c},{}", c + 8));
            cpu(&t, c + 8, 0, c, &format!("{c},{}", c + 8));
        }
        t.write("sys/devices/system/node/node0/cpulist", "0-3\n");
        t.write(
            "sys/devices/system/node/node0/meminfo",
            "Node 0 MemTotal:       16777216 kB\nNode 0 MemFree:  1 kB\n",
        );
        t.write("sys/devices/system/node/node1/cpulist", "4-7,12-15\n");
        t.write(
            "sys/devices/system/node/node1/meminfo",
            "Node 1 MemTotal:       33554432 kB\n",
        );
        t.write("sys/devices/system/node/online", "0-1\n");
        // An H100 on node 1, an ASPEED BMC VGA (not a GPU), a NIC.
        for (bdf, class, vendor, node) in [
            ("0000:c1:00.0", "0x030200", "0x10de", "1"),
            ("0000:02:00.0", "0x030000", "0x1a03", "0"),
            ("0000:41:00.0", "0x020000", "0x15b3", "0"),
        ] {
            t.write(&format!("sys/bus/pci/devices/{bdf}/class"), class);
            t.write(&format!("sys/bus/pci/devices/{bdf}/vendor"), vendor);
            t.write(&format!("sys/bus/pci/devices/{bdf}/numa_node"), node);
        }
        t
    }

    #[test]
    fn two_numa_nodes_with_hyperthreads() {
        let t = two_node_tree("two-nodes");
        let topo = Topology::from_sysfs(&t.0).unwrap();
        assert_eq!(topo.packages.len(), 1);
        assert_eq!(topo.numa_nodes.len(), 2);
        assert_eq!(topo.numa_nodes[0].memory_bytes, 16 << 30);
        assert_eq!(topo.numa_nodes[1].memory_bytes, 32 << 30);
        assert_eq!(topo.numa_nodes[0].cpuset, vec![0, 1, 2, 3]);
        // cpu 15 is offline, so it is in no cpuset and its core has one PU.
        assert_eq!(topo.numa_nodes[1].cpuset, vec![4, 5, 6, 7, 12, 13, 14]);
        assert_eq!(topo.cores.len(), 8);
        assert_eq!(topo.pus.len(), 11);
        for (i, core) in topo.cores.iter().enumerate() {
            assert_eq!(core.numa, usize::from(i >= 4), "core {i}");
            assert_eq!(core.os_index, i);
        }
        assert_eq!(topo.cores[0].pus, vec![0]);
        assert_eq!(topo.cores[4].pus, vec![4, 12]);
        assert_eq!(topo.cores[7].pus, vec![7]);
        assert_eq!(topo.pu(12).unwrap().core, 4);
        assert_eq!(topo.gpus_near, vec![("0000:c1:00.0".to_string(), 1)]);
        assert_eq!(topo.shape(), vec![vec![vec![1; 4], vec![2, 2, 2, 1]]]);
    }

    #[test]
    fn no_node_dir_falls_back_to_one_node() {
        let t = TempTree::new("no-node");
        t.write("sys/devices/system/cpu/online", "0-3\n");
        cpu(&t, 0, 0, 0, "0,2");
        cpu(&t, 2, 0, 0, "0,2");
        cpu(&t, 1, 0, 1, "1,3");
        cpu(&t, 3, 0, 1, "1,3");
        t.write(
            "proc/meminfo",
            "MemTotal:       8218836 kB\nMemFree:         4684640 kB\n",
        );
        let topo = Topology::from_sysfs(&t.0).unwrap();
        assert_eq!(topo.numa_nodes.len(), 1);
        assert_eq!(topo.numa_nodes[0].os_index, 0);
        assert_eq!(topo.numa_nodes[0].memory_bytes, 8218836 * 1024);
        assert_eq!(topo.numa_nodes[0].cpuset, vec![0, 1, 2, 3]);
        assert_eq!(topo.cores.len(), 2);
        assert_eq!(topo.cores[0].pus, vec![0, 2]);
        assert_eq!(topo.cores[1].pus, vec![1, 3]);
        assert!(topo.gpus_near.is_empty());
    }

    #[test]
    fn bare_tree_without_topology_or_online_files() {
        // Only cpuN directories: each CPU is its own core, package 0.
        let t = TempTree::new("bare");
        t.write("sys/devices/system/cpu/cpu0/uevent", "");
        t.write("sys/devices/system/cpu/cpu1/uevent", "");
        t.write("sys/devices/system/cpu/cpufreq/x", "");
        t.write("proc/meminfo", "MemTotal: 1024 kB\n");
        let topo = Topology::from_sysfs(&t.0).unwrap();
        assert_eq!(topo.cores.len(), 2);
        assert_eq!(topo.pus.len(), 2);
        assert_eq!(topo.packages[0].os_index, 0);
    }

    #[test]
    fn unknown_package_id_means_package_zero() {
        let t = TempTree::new("pkg-minus-one");
        t.write("sys/devices/system/cpu/online", "0\n");
        cpu(&t, 0, -1, 0, "0");
        t.write("proc/meminfo", "MemTotal: 1024 kB\n");
        let topo = Topology::from_sysfs(&t.0).unwrap();
        assert_eq!(topo.cores[0].package, 0);
    }

    #[test]
    fn malformed_files_are_named_with_their_text() {
        let t = two_node_tree("bad-cpulist");
        t.write("sys/devices/system/node/node1/cpulist", "4-x\n");
        let err = Topology::from_sysfs(&t.0).unwrap_err().to_string();
        assert!(
            err.contains("node1/cpulist") && err.contains("4-x"),
            "{err}"
        );

        let t = two_node_tree("bad-online");
        t.write("sys/devices/system/cpu/online", "0-,3\n");
        let err = Topology::from_sysfs(&t.0).unwrap_err().to_string();
        assert!(err.contains("cpu/online") && err.contains("0-,3"), "{err}");

        let t = two_node_tree("bad-meminfo");
        t.write(
            "sys/devices/system/node/node0/meminfo",
            "Node 0 MemTotal: lots\n",
        );
        let err = Topology::from_sysfs(&t.0).unwrap_err().to_string();
        assert!(
            err.contains("node0/meminfo") && err.contains("lots"),
            "{err}"
        );

        let t = two_node_tree("bad-core-id");
        t.write("sys/devices/system/cpu/cpu2/topology/core_id", "two\n");
        let err = Topology::from_sysfs(&t.0).unwrap_err().to_string();
        assert!(
            err.contains("cpu2/topology/core_id") && err.contains("two"),
            "{err}"
        );

        let t = TempTree::new("no-meminfo");
        t.write("sys/devices/system/cpu/online", "0\n");
        let err = Topology::from_sysfs(&t.0).unwrap_err().to_string();
        assert!(err.contains("proc/meminfo"), "{err}");

        let t = TempTree::new("nothing");
        let err = Topology::from_sysfs(&t.0).unwrap_err().to_string();
        assert!(err.contains("cpu/online"), "{err}");
    }

    #[test]
    fn this_machine_reads() {
        if !Path::new("/sys/devices/system/cpu/online").exists() {
            println!("note: no /sys/devices/system/cpu/online here; skipped");
            return;
        }
        let topo = Topology::from_sysfs(Path::new("/")).unwrap();
        assert!(!topo.cores.is_empty());
        assert!(topo.numa_nodes.iter().all(|n| n.memory_bytes > 0));
    }
}
