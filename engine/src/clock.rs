//! The trace clock: one monotonic timebase shared by every worker.
//!
//! On x86-64 with an invariant TSC (constant rate, synchronised across cores,
//! as Linux reports with `constant_tsc` and `nonstop_tsc`) a timestamp is one
//! `rdtsc` (~10 ns), converted to nanoseconds only when the trace is read,
//! from a rate calibrated against `Instant` over the run itself. Elsewhere it
//! is `Instant::now()` (~30 ns here, measured). Chosen because two clock reads
//! per task were most of tracing's cost on the `overhead` benchmark.

use std::time::Instant;

pub(crate) struct Clock {
    epoch: Instant,
    /// Wall-clock time of `epoch`, in ns since the Unix epoch (0 if the
    /// system clock is before it): lets traces of several processes be
    /// put on one time line.
    epoch_unix_ns: u64,
    tsc0: u64,
    use_tsc: bool,
}

fn tsc_is_invariant() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::fs::read_to_string("/proc/cpuinfo")
            .map(|s| {
                s.lines()
                    .find(|l| l.starts_with("flags"))
                    .is_some_and(|l| l.contains(" constant_tsc") && l.contains(" nonstop_tsc"))
            })
            .unwrap_or(false)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[inline]
fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `rdtsc` has no preconditions; it reads a counter.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}

impl Clock {
    pub(crate) fn new() -> Clock {
        let use_tsc = tsc_is_invariant();
        let epoch = Instant::now();
        let epoch_unix_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Clock {
            epoch,
            epoch_unix_ns,
            tsc0: if use_tsc { rdtsc() } else { 0 },
            use_tsc,
        }
    }

    /// See the field.
    pub(crate) fn epoch_unix_ns(&self) -> u64 {
        self.epoch_unix_ns
    }

    /// A raw timestamp (ticks); convert with [`Clock::to_nanos`].
    #[inline]
    pub(crate) fn ticks(&self) -> u64 {
        if self.use_tsc {
            rdtsc().wrapping_sub(self.tsc0)
        } else {
            self.epoch.elapsed().as_nanos() as u64
        }
    }

    /// Ticks-to-nanoseconds factor, calibrated over the time since `new`.
    pub(crate) fn nanos_per_tick(&self) -> f64 {
        if !self.use_tsc {
            return 1.0;
        }
        let (t, ns) = (self.ticks(), self.epoch.elapsed().as_nanos() as f64);
        if t == 0 {
            1.0
        } else {
            ns / t as f64
        }
    }
}

#[cfg(test)]
mod tests {
    //! Proves the clock is monotonic and converts to wall-clock nanoseconds.
    use super::*;

    #[test]
    fn converts_to_wall_time() {
        let c = Clock::new();
        let a = c.ticks();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let b = c.ticks();
        assert!(b > a);
        let ns = (b - a) as f64 * c.nanos_per_tick();
        assert!((15e6..200e6).contains(&ns), "20 ms measured as {ns} ns");
    }
}
