//! The emulated device: a virtual accelerator with its own memory node (separate
//! allocations, explicit copies), driven by its own device worker, running
//! the codelet's CPU body on its replicas, with a cost model from its
//! configuration: relative speed, per-launch latency, a small-size penalty
//! (accelerators want large granularity — the TSUBAME paper), and a link with
//! a bandwidth and a latency. Executions and transfers really take the
//! modelled time (the device worker sleeps for the rest), so schedulers are
//! exercised for real, and a task with a flop hint takes a deterministic time.
//!
//! The model is a lower bound: the body runs on a host thread, so a task can
//! never finish faster than the CPU body itself takes.
//!
//! With `own_memory` (spec key `own-mem=1`) the device behaves like a GPU for
//! data: its replicas are raw byte buffers the engine reaches only through
//! [`DeviceMemory`] uploads and downloads, CPU bodies never run on it, and
//! device bodies see their data as typed device views
//! ([`DevSlice`]), which [`EmuDevice::host`]
//! and [`EmuDevice::host_mut`] turn back into host slices (the buffers are
//! host memory here). CI runs the GPU data path this way.

use std::time::{Duration, Instant};

use tessera_engine::device::{
    DevSlice, DevSliceMut, Device, DeviceBuffer, DeviceKey, DeviceMemory, Link, TaskCost,
};

/// Cost model of one emulated device.
#[derive(Clone, Debug, PartialEq)]
pub struct EmuConfig {
    /// Speed relative to `reference_gflops` (2.0: twice as fast).
    pub speed: f64,
    /// Per-launch latency.
    pub latency: Duration,
    /// Flops at which the device reaches half its speed: efficiency is
    /// `flops / (flops + half_speed_flops)` (0: no small-size penalty).
    pub half_speed_flops: f64,
    /// The rate of speed 1.0, in GFLOP/s.
    pub reference_gflops: f64,
    /// Host ↔ device link.
    pub link: Link,
    /// Device memory the runtime may use (`None`: unlimited).
    pub memory: Option<u64>,
    /// Replicas are raw buffers reached only by device bodies (GPU-like).
    pub own_memory: bool,
}

impl Default for EmuConfig {
    fn default() -> Self {
        EmuConfig {
            speed: 1.0,
            latency: Duration::from_micros(20),
            half_speed_flops: 1e6,
            reference_gflops: 50.0,
            link: Link {
                latency: Duration::from_micros(10),
                bandwidth: 10e9,
            },
            memory: None,
            own_memory: false,
        }
    }
}

impl EmuConfig {
    /// Modelled execution time of a task.
    pub fn exec_time(&self, flops: f64) -> Duration {
        if flops <= 0.0 {
            return self.latency;
        }
        let eff = flops / (flops + self.half_speed_flops.max(0.0));
        let rate = self.speed * self.reference_gflops * 1e9 * eff;
        // Saturating: a config built in code may hold any figures.
        let run = Duration::try_from_secs_f64(flops / rate.max(1.0)).unwrap_or(Duration::MAX);
        self.latency.saturating_add(run)
    }

    /// Parse `N[:key=value,...]` (the CLI's `--emu`): keys `speed`,
    /// `latency` (e.g. `20us`, `1ms`), `bandwidth` (e.g. `10GB`, bytes/s),
    /// `mem` (e.g. `256MiB`), `half` (flops at half speed), `gflops`
    /// (reference rate). Returns the device count and the model.
    pub fn parse_spec(spec: &str) -> Result<(usize, EmuConfig), String> {
        let (count, rest) = match spec.split_once(':') {
            Some((c, r)) => (c, Some(r)),
            None => (spec, None),
        };
        let count: usize = count
            .trim()
            .parse()
            .map_err(|_| format!("--emu '{spec}': the device count '{count}' is not a number"))?;
        let mut cfg = EmuConfig::default();
        let mut seen: Vec<&str> = Vec::new();
        for kv in rest
            .into_iter()
            .flat_map(|r| r.split(','))
            .filter(|s| !s.is_empty())
        {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("--emu '{spec}': '{kv}' is not key=value"))?;
            let bad = |what: &str| format!("--emu '{spec}': {k}={v}: {what}");
            if seen.contains(&k.trim()) {
                return Err(format!("--emu '{spec}': key '{}' is given twice", k.trim()));
            }
            seen.push(k.trim());
            match k.trim() {
                "speed" => cfg.speed = parse_f64(v).filter(|s| *s > 0.0).ok_or_else(|| bad("expected a positive number"))?,
                "latency" => cfg.latency = parse_duration(v).ok_or_else(|| bad("expected a time like 20us or 1ms, at most 60s"))?,
                "link-latency" => {
                    cfg.link.latency = parse_duration(v).ok_or_else(|| bad("expected a time like 10us, at most 60s"))?
                }
                "bandwidth" => {
                    cfg.link.bandwidth = parse_bytes(v)
                        .filter(|b| *b > 0)
                        .ok_or_else(|| bad("expected bytes per second like 10GB"))? as f64
                }
                "mem" => {
                    cfg.memory = Some(
                        parse_bytes(v)
                            .filter(|b| *b > 0)
                            .ok_or_else(|| bad("expected a positive size like 256MiB"))?,
                    )
                }
                "half" => cfg.half_speed_flops = parse_f64(v).ok_or_else(|| bad("expected flops"))?,
                "gflops" => cfg.reference_gflops = parse_f64(v).filter(|g| *g > 0.0).ok_or_else(|| bad("expected GFLOP/s"))?,
                "own-mem" => {
                    cfg.own_memory = match v.trim() {
                        "1" | "yes" | "true" => true,
                        "0" | "no" | "false" => false,
                        _ => return Err(bad("expected 1 or 0")),
                    }
                }
                other => {
                    return Err(format!(
                        "--emu '{spec}': unknown key '{other}' (known: speed, latency, link-latency, bandwidth, mem, half, gflops, own-mem)"
                    ))
                }
            }
        }
        let most = tessera_engine::memory::MAX_NODES - 1;
        if count == 0 || count > most {
            return Err(format!(
                "--emu '{spec}': the device count must be between 1 and {most}"
            ));
        }
        Ok((count, cfg))
    }
}

/// Longest latency `--emu` accepts: a modelled wait is really slept, so a
/// larger one would only hang the run.
const MAX_LATENCY_SECS: f64 = 60.0;

fn parse_f64(v: &str) -> Option<f64> {
    v.trim().parse::<f64>().ok().filter(|x| x.is_finite())
}

fn split_unit(v: &str) -> (&str, &str) {
    let v = v.trim();
    let i = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == 'e' || c == 'E' || c == '-'))
        .unwrap_or(v.len());
    (&v[..i], v[i..].trim())
}

fn parse_duration(v: &str) -> Option<Duration> {
    let (num, unit) = split_unit(v);
    let x: f64 = num
        .parse()
        .ok()
        .filter(|x: &f64| x.is_finite() && *x >= 0.0)?;
    let secs = match unit {
        "ns" => x * 1e-9,
        "us" | "µs" => x * 1e-6,
        "ms" => x * 1e-3,
        "s" | "" => x,
        _ => return None,
    };
    if secs > MAX_LATENCY_SECS {
        return None;
    }
    Duration::try_from_secs_f64(secs).ok()
}

fn parse_bytes(v: &str) -> Option<u64> {
    let (num, unit) = split_unit(v);
    let x: f64 = num
        .parse()
        .ok()
        .filter(|x: &f64| x.is_finite() && *x >= 0.0)?;
    let mult = match unit {
        "" | "B" => 1.0,
        "K" | "KB" => 1e3,
        "M" | "MB" => 1e6,
        "G" | "GB" => 1e9,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    Some((x * mult) as u64)
}

/// A virtual accelerator.
pub struct EmuDevice {
    name: String,
    config: EmuConfig,
}

impl EmuDevice {
    /// Device `index` (named `emu<index>`) with the given model.
    pub fn new(index: usize, config: EmuConfig) -> EmuDevice {
        EmuDevice {
            name: format!("emu{index}"),
            config,
        }
    }

    /// The model.
    pub fn config(&self) -> &EmuConfig {
        &self.config
    }

    fn check_view<T>(&self, key: DeviceKey, ptr: u64, len: usize) -> Result<(), String> {
        if !self.config.own_memory {
            return Err(format!("{} has no memory of its own", self.name));
        }
        if key != DeviceKey::of(self) {
            return Err(format!(
                "a device view of another device reached {}",
                self.name
            ));
        }
        debug_assert_eq!(ptr % std::mem::align_of::<T>() as u64, 0);
        let _ = len;
        Ok(())
    }

    /// A view of this emulated device's own memory as the host slice it is.
    pub fn host<'a, T: bytemuck::Pod>(&self, v: DevSlice<'a, T>) -> Result<&'a [T], String> {
        self.check_view::<T>(v.device(), v.ptr(), v.len())?;
        if v.is_empty() {
            return Ok(&[]);
        }
        // SAFETY: the view is of this device (checked), whose memory is host
        // memory (`SimBuffer`): `ptr` is an aligned allocation (checked when
        // the view was made) of at least `len` `T`s, pinned by the running
        // task for `'a`; a read-only view means no writer runs meanwhile.
        Ok(unsafe { std::slice::from_raw_parts(v.ptr() as *const T, v.len()) })
    }

    /// A writable view of this emulated device's own memory as a host slice.
    pub fn host_mut<'a, T: bytemuck::Pod>(
        &self,
        v: DevSliceMut<'a, T>,
    ) -> Result<&'a mut [T], String> {
        self.check_view::<T>(v.device(), v.ptr(), v.len())?;
        if v.is_empty() {
            return Ok(&mut []);
        }
        // SAFETY: as in `host`; a writable view is unique (each replica part
        // is handed out once per body, and the task's write access excludes
        // every other user), and it is consumed here.
        Ok(unsafe { std::slice::from_raw_parts_mut(v.ptr() as *mut T, v.len()) })
    }
}

/// Run `f`, then sleep until `modelled` has passed since the start. Returns
/// the device time: the model, or `f`'s own time where that was longer. The
/// sleep's overshoot is not the device's: on a loaded machine a 125 µs sleep
/// can take milliseconds, and counting it made the performance model think a
/// fast device as slow as a slow one (a dmda test failed in CI so).
fn take_modelled(modelled: Duration, f: &mut dyn FnMut()) -> Duration {
    let start = Instant::now();
    f();
    let actual = start.elapsed();
    if modelled > actual {
        std::thread::sleep(modelled - actual);
    }
    actual.max(modelled)
}

impl Device for EmuDevice {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn arch(&self) -> &'static str {
        "emu"
    }

    fn memory_limit(&self) -> Option<u64> {
        self.config.memory
    }

    fn link(&self) -> Link {
        self.config.link
    }

    fn peak_flops(&self) -> f64 {
        self.config.speed * self.config.reference_gflops * 1e9
    }

    fn half_rate_flops(&self) -> f64 {
        self.config.half_speed_flops
    }

    fn expected_time(&self, cost: &TaskCost<'_>) -> Duration {
        self.config.exec_time(cost.flops)
    }

    fn run(&self, cost: &TaskCost<'_>, body: &mut dyn FnMut()) -> Result<Duration, String> {
        // Report the model (deterministic) unless the body itself was slower.
        Ok(take_modelled(self.config.exec_time(cost.flops), body))
    }

    fn copy(&self, bytes: u64, copy: &mut dyn FnMut()) -> Duration {
        take_modelled(self.config.link.time(bytes), copy)
    }

    fn memory(&self) -> Option<&dyn DeviceMemory> {
        self.config.own_memory.then_some(self as &dyn DeviceMemory)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// A emulated device buffer: 8-byte-aligned host memory owned through a raw
/// pointer, because device bodies write it through their device views.
struct SimBuffer {
    ptr: *mut u64,
    words: usize,
    bytes: usize,
}

// SAFETY: the buffer is plain memory; the engine's coherence protocol gives
// one writer or several readers at a time.
unsafe impl Send for SimBuffer {}
// SAFETY: as above.
unsafe impl Sync for SimBuffer {}

impl Drop for SimBuffer {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`words` came from `Box::into_raw` of a `[u64]` of that length.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.ptr, self.words)) });
    }
}

impl DeviceBuffer for SimBuffer {
    fn ptr(&self) -> u64 {
        self.ptr as u64
    }
    fn bytes(&self) -> usize {
        self.bytes
    }
}

impl DeviceMemory for EmuDevice {
    fn alloc(&self, bytes: usize) -> Result<Box<dyn DeviceBuffer>, String> {
        let words = bytes.div_ceil(8);
        let b: Box<[u64]> = vec![0u64; words].into_boxed_slice();
        Ok(Box::new(SimBuffer {
            ptr: Box::into_raw(b).cast(),
            words,
            bytes,
        }))
    }

    fn upload(&self, src: &[u8], dst: &dyn DeviceBuffer) -> Result<(), String> {
        if src.len() != dst.bytes() {
            return Err(format!(
                "upload of {} bytes into a {}-byte buffer",
                src.len(),
                dst.bytes()
            ));
        }
        // SAFETY: `dst` was allocated by this device (a SimBuffer of
        // `dst.bytes()` bytes at `dst.ptr()`); the engine holds it exclusively
        // during a copy.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst.ptr() as *mut u8, src.len()) };
        Ok(())
    }

    fn download(&self, src: &dyn DeviceBuffer, dst: &mut [u8]) -> Result<(), String> {
        if dst.len() != src.bytes() {
            return Err(format!(
                "download of a {}-byte buffer into {} bytes",
                src.bytes(),
                dst.len()
            ));
        }
        // SAFETY: as in `upload`; no writer runs on `src` during a copy.
        unsafe {
            std::ptr::copy_nonoverlapping(src.ptr() as *const u8, dst.as_mut_ptr(), dst.len())
        };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    //! Proves the emulated device's model: times, the small-size penalty, the spec parser.
    use super::*;

    #[test]
    fn exec_time_follows_the_model() {
        let c = EmuConfig {
            speed: 2.0,
            latency: Duration::from_micros(10),
            half_speed_flops: 0.0,
            reference_gflops: 50.0,
            ..EmuConfig::default()
        };
        // 1e9 flops at 100 GFLOP/s = 10 ms, plus 10 µs.
        assert_eq!(c.exec_time(1e9), Duration::from_micros(10_010));
        let small = EmuConfig {
            half_speed_flops: 1e6,
            ..c.clone()
        };
        // At the half-speed size, twice the ideal time.
        let ideal = 1e6 / 100e9;
        let t = small.exec_time(1e6).as_secs_f64() - 10e-6;
        assert!((t - 2.0 * ideal).abs() < 1e-12, "{t}");
    }

    #[test]
    fn run_really_takes_the_modelled_time() {
        let d = EmuDevice::new(
            0,
            EmuConfig {
                latency: Duration::from_millis(5),
                ..EmuConfig::default()
            },
        );
        let mut ran = false;
        let t = d
            .run(
                &TaskCost {
                    codelet: "k",
                    flops: 0.0,
                    bytes: 0,
                },
                &mut || ran = true,
            )
            .unwrap();
        assert!(ran && t >= Duration::from_millis(5), "{t:?}");
    }

    #[test]
    fn spec_parsing() {
        let (n, c) =
            EmuConfig::parse_spec("2:speed=0.5,latency=1ms,bandwidth=8GB,mem=256MiB").unwrap();
        assert_eq!(n, 2);
        assert_eq!(c.speed, 0.5);
        assert_eq!(c.latency, Duration::from_millis(1));
        assert_eq!(c.link.bandwidth, 8e9);
        assert_eq!(c.memory, Some(256 << 20));
        assert_eq!(EmuConfig::parse_spec("1").unwrap().0, 1);
        for bad in [
            "x",
            "1:speed",
            "1:speed=-1",
            "1:latency=3 parsecs",
            "1:colour=red",
            "1:mem=lots",
            // Issue 17: a panic ("cannot convert float seconds to Duration"), a
            // run that would sleep for ever, a device with no memory, a key
            // given twice, no device or more than a runtime can hold.
            "1:latency=1e20s",
            "1:link-latency=1e30s",
            "1:latency=61s",
            "1:mem=0",
            "1:mem=1MiB,mem=2MiB",
            "0",
            "64",
        ] {
            let e = EmuConfig::parse_spec(bad).unwrap_err();
            assert!(
                e.contains(
                    bad.split(':')
                        .nth(1)
                        .unwrap_or(bad)
                        .split('=')
                        .next()
                        .unwrap_or("")
                ),
                "{bad}: {e}"
            );
        }
    }
}
