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
    pub(crate) fn new(spec: &Accelerator, index: usize) -> VirtualDevice {
        VirtualDevice {
            name: format!("{}{index}", spec.name),
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
            latency: Duration::from_secs_f64(self.spec.link.latency),
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
        Duration::from_secs_f64(model_seconds(
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
