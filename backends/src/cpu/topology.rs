//! The machine's shape as plain data: packages, NUMA nodes, cores, PUs and the GPUs near them.
//!
//! Identities used everywhere in `cpu`:
//! - a **core** is named by its *logical index*, its position in
//!   [`Topology::cores`] (the OS's `core_id` is unique only inside a package);
//! - a **PU** (hardware thread) is named by its OS index, the number that
//!   `sched_setaffinity` and `/sys/devices/system/cpu/cpuN` use;
//! - a **NUMA node** and a **package** are named by their OS index.

use std::fmt;
use std::path::{Path, PathBuf};

/// One processor package (socket).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Package {
    /// OS index (`physical_package_id`).
    pub os_index: usize,
    /// OS indices of the PUs in this package, sorted.
    pub cpuset: Vec<usize>,
}

/// One NUMA node: a memory bank and the PUs local to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NumaNode {
    /// OS index (the `N` of `/sys/devices/system/node/nodeN`).
    pub os_index: usize,
    /// Local memory in bytes (0 when unknown).
    pub memory_bytes: u64,
    /// OS indices of the PUs local to this node, sorted; empty for a
    /// memory-only node (HBM, CXL).
    pub cpuset: Vec<usize>,
}

/// One physical core.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Core {
    /// The OS's core id; unique only inside its package.
    pub os_index: usize,
    /// OS index of its package.
    pub package: usize,
    /// OS index of its NUMA node.
    pub numa: usize,
    /// OS indices of its PUs (hardware threads), sorted.
    pub pus: Vec<usize>,
}

/// One processing unit (hardware thread).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pu {
    /// OS index, as `sched_setaffinity` counts CPUs.
    pub os_index: usize,
    /// Logical index of its core in [`Topology::cores`].
    pub core: usize,
}

/// The machine: what [`plan`](super::plan) places workers on.
///
/// Invariants (checked by [`Topology::validate`], which every constructor
/// runs): `cores` are sorted by (package, NUMA node, first PU); every PU
/// belongs to exactly one core; every core's NUMA node and package exist.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// Packages, sorted by OS index.
    pub packages: Vec<Package>,
    /// NUMA nodes, sorted by OS index.
    pub numa_nodes: Vec<NumaNode>,
    /// Cores in logical order: package by package, NUMA node by NUMA node.
    pub cores: Vec<Core>,
    /// PUs, sorted by OS index.
    pub pus: Vec<Pu>,
    /// GPUs (PCI bus id such as `0000:3b:00.0`) and the NUMA node they sit
    /// on, where known, sorted by PCI bus id: entry `d` is CUDA device `d`
    /// when `CUDA_DEVICE_ORDER=PCI_BUS_ID`.
    pub gpus_near: Vec<(String, usize)>,
}

/// Why a topology could not be read.
#[derive(Debug)]
#[non_exhaustive]
pub enum TopologyError {
    /// A file or directory could not be read.
    Io {
        /// The path that failed.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A file held text that does not parse.
    Parse {
        /// The file.
        path: PathBuf,
        /// The offending text.
        text: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The pieces do not fit together (no CPU online, a core on an unknown node...).
    Inconsistent(String),
    /// hwloc failed.
    Hwloc(String),
}

impl fmt::Display for TopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io { path, source } => write!(f, "cannot read {}: {source}", path.display()),
            Self::Parse { path, text, reason } => {
                write!(f, "{}: cannot parse {text:?}: {reason}", path.display())
            }
            Self::Inconsistent(why) => write!(f, "inconsistent topology: {why}"),
            Self::Hwloc(why) => write!(f, "hwloc: {why}"),
        }
    }
}

impl std::error::Error for TopologyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The error of [`parse_cpu_list`]: the whole input and what is wrong in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuListError {
    /// The text that failed to parse.
    pub text: String,
    /// What is wrong with it.
    pub reason: String,
}

impl fmt::Display for CpuListError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad cpu list {:?}: {}", self.text, self.reason)
    }
}

impl std::error::Error for CpuListError {}

/// Larger CPU numbers than this are taken for typos: Linux's `NR_CPUS` tops out at 8192.
const MAX_CPU: usize = 1 << 16;

/// Parses Linux cpu-list syntax (`0-3,8,10-11`, also `0-15:2/4`: in each
/// group of 4 starting at 0, the first 2) into sorted, deduplicated CPU numbers.
///
/// Surrounding whitespace is ignored and an empty list is valid (a
/// memory-only NUMA node's `cpulist` is a bare newline).
///
/// # Errors
/// Anything else: empty items (`1,,2`), reversed ranges (`3-1`), non-numbers,
/// numbers past 65535, a zero or oversized group.
pub fn parse_cpu_list(text: &str) -> Result<Vec<usize>, CpuListError> {
    let fail = |reason: String| CpuListError {
        text: text.to_string(),
        reason,
    };
    let trimmed = text.trim();
    let mut cpus = Vec::new();
    if trimmed.is_empty() {
        return Ok(cpus);
    }
    for item in trimmed.split(',') {
        let item = item.trim();
        if item.is_empty() {
            return Err(fail("empty item".into()));
        }
        let (range, group) = match item.split_once(':') {
            Some((range, group)) => (range, Some(group)),
            None => (item, None),
        };
        let number = |s: &str| -> Result<usize, CpuListError> {
            let s = s.trim();
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(fail(format!("{s:?} in {item:?} is not a CPU number")));
            }
            match s.parse::<usize>() {
                Ok(n) if n < MAX_CPU => Ok(n),
                _ => Err(fail(format!(
                    "CPU {s} in {item:?} is out of range (max {})",
                    MAX_CPU - 1
                ))),
            }
        };
        let (first, last) = match range.split_once('-') {
            Some((a, b)) => (number(a)?, number(b)?),
            None => {
                let n = number(range)?;
                (n, n)
            }
        };
        if first > last {
            return Err(fail(format!("range {range:?} runs backwards")));
        }
        let (used, size) = match group {
            None => (1, 1),
            Some(group) => {
                let (used, size) = group
                    .split_once('/')
                    .ok_or_else(|| fail(format!("group {group:?} in {item:?} is not USED/SIZE")))?;
                let (used, size) = (number(used)?, number(size)?);
                if used == 0 || size == 0 || used > size {
                    return Err(fail(format!(
                        "group {group:?} in {item:?} needs 0 < USED <= SIZE"
                    )));
                }
                (used, size)
            }
        };
        cpus.extend((first..=last).filter(|cpu| (cpu - first) % size < used));
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// Writes CPU numbers back in cpu-list syntax (`0-3,8,10-11`); the inverse
/// of [`parse_cpu_list`] for sorted, deduplicated input.
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out = String::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        if !out.is_empty() {
            out.push(',');
        }
        if j == i {
            out.push_str(&sorted[i].to_string());
        } else {
            out.push_str(&format!("{}-{}", sorted[i], sorted[j]));
        }
        i = j + 1;
    }
    out
}

/// A core as a constructor first finds it, before logical indices exist.
#[derive(Clone, Debug)]
pub(crate) struct RawCore {
    pub(crate) os_index: usize,
    pub(crate) package: usize,
    pub(crate) numa: usize,
    pub(crate) pus: Vec<usize>,
}

impl Topology {
    /// Reads this machine's topology: through hwloc when the `hwloc` feature
    /// is on, from `/sys` otherwise (Linux only).
    ///
    /// # Errors
    /// When the source cannot be read or is inconsistent; see [`TopologyError`].
    pub fn detect() -> Result<Topology, TopologyError> {
        #[cfg(feature = "hwloc")]
        {
            super::hwloc::detect()
        }
        #[cfg(not(feature = "hwloc"))]
        {
            Topology::from_sysfs(Path::new("/"))
        }
    }

    /// Reads the topology from a sysfs tree mounted under `root` (`/` for
    /// this machine; tests pass a fake tree).
    ///
    /// Reads `sys/devices/system/cpu/online` (or, without it, the `cpuN`
    /// directories), each online CPU's
    /// `topology/{physical_package_id,core_id,thread_siblings_list}` (a CPU
    /// without them is a core of its own in package 0), and
    /// `sys/devices/system/node/nodeN/{cpulist,meminfo}`; with no `node/`
    /// directory, one NUMA node 0 holds every online CPU, sized by
    /// `proc/meminfo`. GPUs come from `sys/bus/pci/devices/*/{class,vendor,numa_node}`,
    /// best effort.
    ///
    /// # Errors
    /// A file that is missing (where no fallback exists) or malformed names
    /// the file and, for a parse error, the bad text.
    pub fn from_sysfs(root: &Path) -> Result<Topology, TopologyError> {
        super::sysfs::read(root)
    }

    /// A regular machine for tests: `packages` × `numa_per_package` NUMA
    /// nodes × `cores_per_numa` cores × `pus_per_core` PUs, numbered in
    /// order (core 0 has PUs 0..pus_per_core, as hwloc's synthetic
    /// topologies number them), 16 GiB per NUMA node, no GPUs.
    ///
    /// # Panics
    /// If any count is zero.
    pub fn synthetic(
        packages: usize,
        numa_per_package: usize,
        cores_per_numa: usize,
        pus_per_core: usize,
    ) -> Topology {
        assert!(
            packages > 0 && numa_per_package > 0 && cores_per_numa > 0 && pus_per_core > 0,
            "Topology::synthetic needs non-zero counts, got {packages}×{numa_per_package}×{cores_per_numa}×{pus_per_core}"
        );
        let mut numa_memory = Vec::new();
        let mut raw = Vec::new();
        let mut next_pu = 0;
        for package in 0..packages {
            for local_numa in 0..numa_per_package {
                let numa = package * numa_per_package + local_numa;
                numa_memory.push((numa, 16u64 << 30));
                for local_core in 0..cores_per_numa {
                    let pus: Vec<usize> = (next_pu..next_pu + pus_per_core).collect();
                    next_pu += pus_per_core;
                    raw.push(RawCore {
                        os_index: local_numa * cores_per_numa + local_core,
                        package,
                        numa,
                        pus,
                    });
                }
            }
        }
        Topology::assemble(raw, numa_memory, Vec::new())
            .expect("a synthetic topology is consistent by construction")
    }

    /// Builds a topology from cores found by a reader: sorts them into
    /// logical order, derives packages, NUMA cpusets and PUs, then validates.
    ///
    /// `numa_memory` lists every NUMA node (os index, bytes), including
    /// memory-only ones; a core on a node not listed is an error.
    pub(crate) fn assemble(
        mut raw: Vec<RawCore>,
        numa_memory: Vec<(usize, u64)>,
        mut gpus_near: Vec<(String, usize)>,
    ) -> Result<Topology, TopologyError> {
        for core in &mut raw {
            core.pus.sort_unstable();
            core.pus.dedup();
        }
        raw.retain(|c| !c.pus.is_empty());
        if raw.is_empty() {
            return Err(TopologyError::Inconsistent("no online CPU".into()));
        }
        raw.sort_by_key(|c| (c.package, c.numa, c.pus[0]));

        let mut numa_nodes: Vec<NumaNode> = numa_memory
            .iter()
            .map(|&(os_index, memory_bytes)| NumaNode {
                os_index,
                memory_bytes,
                cpuset: Vec::new(),
            })
            .collect();
        numa_nodes.sort_by_key(|n| n.os_index);
        numa_nodes.dedup_by_key(|n| n.os_index);

        let mut packages: Vec<Package> = Vec::new();
        let mut pus = Vec::new();
        let mut cores = Vec::with_capacity(raw.len());
        for (logical, c) in raw.into_iter().enumerate() {
            let node = numa_nodes
                .iter_mut()
                .find(|n| n.os_index == c.numa)
                .ok_or_else(|| {
                    TopologyError::Inconsistent(format!(
                        "core with PUs {} is on NUMA node {}, which does not exist",
                        format_cpu_list(&c.pus),
                        c.numa
                    ))
                })?;
            node.cpuset.extend(&c.pus);
            match packages.iter_mut().find(|p| p.os_index == c.package) {
                Some(p) => p.cpuset.extend(&c.pus),
                None => packages.push(Package {
                    os_index: c.package,
                    cpuset: c.pus.clone(),
                }),
            }
            pus.extend(c.pus.iter().map(|&os_index| Pu {
                os_index,
                core: logical,
            }));
            cores.push(Core {
                os_index: c.os_index,
                package: c.package,
                numa: c.numa,
                pus: c.pus,
            });
        }
        for cpuset in numa_nodes
            .iter_mut()
            .map(|n| &mut n.cpuset)
            .chain(packages.iter_mut().map(|p| &mut p.cpuset))
        {
            cpuset.sort_unstable();
        }
        packages.sort_by_key(|p| p.os_index);
        pus.sort_by_key(|p| p.os_index);
        gpus_near.sort();
        let topo = Topology {
            packages,
            numa_nodes,
            cores,
            pus,
            gpus_near,
        };
        topo.validate()?;
        Ok(topo)
    }

    /// Checks the invariants stated on [`Topology`].
    ///
    /// # Errors
    /// [`TopologyError::Inconsistent`] naming the first broken one.
    pub fn validate(&self) -> Result<(), TopologyError> {
        let bad = |why: String| Err(TopologyError::Inconsistent(why));
        if self.cores.is_empty() {
            return bad("no core".into());
        }
        for pair in self.pus.windows(2) {
            if pair[0].os_index == pair[1].os_index {
                return bad(format!("PU {} belongs to two cores", pair[0].os_index));
            }
        }
        let key = |c: &Core| (c.package, c.numa, c.pus.first().copied());
        if self.cores.windows(2).any(|w| key(&w[0]) > key(&w[1])) {
            return bad("cores are not in logical order".into());
        }
        for (i, core) in self.cores.iter().enumerate() {
            if core.pus.is_empty() {
                return bad(format!("core {i} has no PU"));
            }
            if self.numa_node(core.numa).is_none() {
                return bad(format!("core {i} is on unknown NUMA node {}", core.numa));
            }
            if self.package(core.package).is_none() {
                return bad(format!("core {i} is in unknown package {}", core.package));
            }
            for &pu in &core.pus {
                if self.pu(pu).map(|p| p.core) != Some(i) {
                    return bad(format!("PU {pu} of core {i} does not point back to it"));
                }
            }
        }
        if self.pus.len() != self.cores.iter().map(|c| c.pus.len()).sum::<usize>() {
            return bad("a PU belongs to no core".into());
        }
        for (gpu, numa) in &self.gpus_near {
            if self.numa_node(*numa).is_none() {
                return bad(format!("GPU {gpu} is near unknown NUMA node {numa}"));
            }
        }
        Ok(())
    }

    /// The NUMA node with this OS index.
    pub fn numa_node(&self, os_index: usize) -> Option<&NumaNode> {
        self.numa_nodes.iter().find(|n| n.os_index == os_index)
    }

    /// The package with this OS index.
    pub fn package(&self, os_index: usize) -> Option<&Package> {
        self.packages.iter().find(|p| p.os_index == os_index)
    }

    /// The PU with this OS index.
    pub fn pu(&self, os_index: usize) -> Option<&Pu> {
        self.pus
            .binary_search_by_key(&os_index, |p| p.os_index)
            .ok()
            .map(|i| &self.pus[i])
    }

    /// The machine's shape without OS indices or memory sizes: for each
    /// package, for each of its NUMA nodes with cores, the PU count of each
    /// core. Two topologies of the same build compare equal here even when
    /// they number things differently.
    pub fn shape(&self) -> Vec<Vec<Vec<usize>>> {
        let mut shape: Vec<Vec<Vec<usize>>> = Vec::new();
        let mut last: Option<(usize, usize)> = None;
        for core in &self.cores {
            match last {
                Some((p, _)) if p != core.package => shape.push(vec![Vec::new()]),
                Some((_, n)) if n != core.numa => {
                    shape.last_mut().expect("pushed").push(Vec::new())
                }
                Some(_) => {}
                None => shape.push(vec![Vec::new()]),
            }
            last = Some((core.package, core.numa));
            shape
                .last_mut()
                .and_then(|p| p.last_mut())
                .expect("pushed")
                .push(core.pus.len());
        }
        shape
    }
}

// Proves cpu lists parse like the kernel writes them, reject malformed text
// with a message naming it, and round-trip through `format_cpu_list`.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ranges_singles_and_groups() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11").unwrap(),
            vec![0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(parse_cpu_list("5\n").unwrap(), vec![5]);
        assert_eq!(parse_cpu_list(" 2 , 0-1 ").unwrap(), vec![0, 1, 2]);
        assert_eq!(parse_cpu_list("\n").unwrap(), Vec::<usize>::new());
        assert_eq!(parse_cpu_list("").unwrap(), Vec::<usize>::new());
        assert_eq!(parse_cpu_list("3,1-3,1").unwrap(), vec![1, 2, 3]);
        assert_eq!(
            parse_cpu_list("0-15:2/4").unwrap(),
            vec![0, 1, 4, 5, 8, 9, 12, 13]
        );
        assert_eq!(parse_cpu_list("7-7").unwrap(), vec![7]);
    }

    #[test]
    fn rejects_malformed_text_and_names_it() {
        for bad in [
            "1,,2", "3-1", "a", "1-", "-3", "0-3:0/4", "0-3:5/4", "0-3:2", "1 2", "99999999",
            "0x3", "1,", "+1",
        ] {
            let err = parse_cpu_list(bad).expect_err(bad);
            assert_eq!(err.text, bad);
            assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
        }
    }

    #[test]
    fn formats_back() {
        for text in ["0-3,8,10-11", "0", "1,3,5", "0-127", ""] {
            assert_eq!(format_cpu_list(&parse_cpu_list(text).unwrap()), text);
        }
        assert_eq!(format_cpu_list(&[3, 1, 2, 2]), "1-3");
    }

    #[test]
    fn synthetic_is_consistent() {
        let t = Topology::synthetic(2, 2, 4, 2);
        assert_eq!(t.packages.len(), 2);
        assert_eq!(t.numa_nodes.len(), 4);
        assert_eq!(t.cores.len(), 16);
        assert_eq!(t.pus.len(), 32);
        assert_eq!(t.cores[5].pus, vec![10, 11]);
        assert_eq!(t.cores[5].numa, 1);
        assert_eq!(t.numa_nodes[3].cpuset, (24..32).collect::<Vec<_>>());
        assert_eq!(t.shape(), vec![vec![vec![2; 4]; 2]; 2]);
        t.validate().unwrap();
    }

    #[test]
    fn validate_catches_broken_links() {
        let mut t = Topology::synthetic(1, 1, 2, 1);
        t.cores[1].numa = 9;
        assert!(t
            .validate()
            .unwrap_err()
            .to_string()
            .contains("unknown NUMA node 9"));
        let mut t = Topology::synthetic(1, 1, 2, 1);
        t.cores.swap(0, 1);
        assert!(t.validate().is_err());
    }
}
