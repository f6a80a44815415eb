//! A virtual accelerator: the `Device` a simulated runtime's device worker
//! drives. It has a name, an arch, a memory limit and a link from the
//! platform, and the platform's speed for `dmda`'s first estimates; its
//! memory is host-addressable (replicas are virtual or host values), it
//! never runs a body, and it refuses the codelets the platform says it cannot
//! run.

use std::time::Duration;

use super::durations::model_seconds;
use super::platform::Accelerator;
use crate::device::{Device, Link, TaskCost};

/// One accelerator of a simulated node.
pub(crate) struct VirtualDevice {
    name: String,
    arch: &'static str,
    pub(crate) spec: Accelerator,
}

/// Arch names live as long as the process (`Device::arch` is `&'static`):
/// one leaked string per distinct name.
fn intern(arch: &str) -> &'static str {
    static NAMES: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
    let mut names = crate::util::lock(&NAMES);
    if let Some(n) = names.iter().find(|n| **n == arch) {
        return n;
    }
    let n: &'static str = Box::leak(arch.to_string().into_boxed_str());
    names.push(n);
    n
}

impl VirtualDevice {
    /// Device `index` of `spec`'s `count`: named `NAME` where the platform
    /// names a single device (issue 42: StarPU's `cuda0` and `cuda1`
    /// became `cuda00` and `cuda10`), else `NAME` and the index (the
    /// default names, `acc0_`, give `acc0_0`, `acc0_1`, ...).
    pub(crate) fn new(spec: &Accelerator, index: usize) -> VirtualDevice {
        let name = if spec.count == 1 && !spec.name.ends_with('_') {
            spec.name.clone()
        } else {
            format!("{}{index}", spec.name)
        };
        VirtualDevice {
            name,
            arch: intern(&spec.proc.arch),
            spec: spec.clone(),
        }
    }
}

impl Device for VirtualDevice {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn arch(&self) -> &'static str {
        self.arch
    }

    fn memory_limit(&self) -> Option<u64> {
        self.spec.memory
    }

    fn link(&self) -> Link {
        Link {
            latency: saturating_duration(self.spec.link.latency),
            bandwidth: self.spec.link.bandwidth,
        }
    }

    fn peak_flops(&self) -> f64 {
        self.spec.proc.gflops * 1e9
    }

    fn half_rate_flops(&self) -> f64 {
        self.spec.proc.half_flops
    }

    fn expected_time(&self, cost: &TaskCost<'_>) -> Duration {
        saturating_duration(model_seconds(
            &self.spec.proc,
            cost.codelet,
            cost.flops,
            cost.bytes,
            1,
        ))
    }

    fn run(&self, _cost: &TaskCost<'_>, body: &mut dyn FnMut()) -> Result<Duration, String> {
        body();
        Ok(Duration::ZERO)
    }

    fn copy(&self, _bytes: u64, copy: &mut dyn FnMut()) -> Duration {
        copy();
        Duration::ZERO
    }

    fn runs(&self, codelet: &str) -> bool {
        self.spec
            .only
            .as_ref()
            .is_none_or(|only| only.iter().any(|c| c == codelet))
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// `secs` as a `Duration`, `Duration::MAX` past its range (and zero for a
/// negative or NaN time): `from_secs_f64` panics there ("cannot convert
/// float seconds to Duration", issue 28).
fn saturating_duration(secs: f64) -> Duration {
    match Duration::try_from_secs_f64(secs) {
        Ok(d) => d,
        Err(_) if secs > 0.0 => Duration::MAX,
        Err(_) => Duration::ZERO,
    }
}
