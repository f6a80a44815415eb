//! The sim device: a virtual accelerator with its own memory node (separate
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

use std::time::{Duration, Instant};

use tessera_engine::device::{Device, Link, TaskCost};

/// Cost model of one sim device.
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
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
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            speed: 1.0,
            latency: Duration::from_micros(20),
            half_speed_flops: 1e6,
            reference_gflops: 50.0,
            link: Link {
                latency: Duration::from_micros(10),
                bandwidth: 10e9,
            },
            memory: None,
        }
    }
}

impl SimConfig {
    /// Modelled execution time of a task.
    pub fn exec_time(&self, flops: f64) -> Duration {
        if flops <= 0.0 {
            return self.latency;
        }
        let eff = flops / (flops + self.half_speed_flops.max(0.0));
        let rate = self.speed * self.reference_gflops * 1e9 * eff;
        self.latency + Duration::from_secs_f64(flops / rate.max(1.0))
    }

    /// Parse `N[:key=value,...]` (the CLI's `--sim`): keys `speed`,
    /// `latency` (e.g. `20us`, `1ms`), `bandwidth` (e.g. `10GB`, bytes/s),
    /// `mem` (e.g. `256MiB`), `half` (flops at half speed), `gflops`
    /// (reference rate). Returns the device count and the model.
    pub fn parse_spec(spec: &str) -> Result<(usize, SimConfig), String> {
        let (count, rest) = match spec.split_once(':') {
            Some((c, r)) => (c, Some(r)),
            None => (spec, None),
        };
        let count: usize = count
            .trim()
            .parse()
            .map_err(|_| format!("--sim '{spec}': the device count '{count}' is not a number"))?;
        let mut cfg = SimConfig::default();
        for kv in rest
            .into_iter()
            .flat_map(|r| r.split(','))
            .filter(|s| !s.is_empty())
        {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("--sim '{spec}': '{kv}' is not key=value"))?;
            let bad = |what: &str| format!("--sim '{spec}': {k}={v}: {what}");
            match k.trim() {
                "speed" => cfg.speed = parse_f64(v).filter(|s| *s > 0.0).ok_or_else(|| bad("expected a positive number"))?,
                "latency" => cfg.latency = parse_duration(v).ok_or_else(|| bad("expected a time like 20us or 1ms"))?,
                "link-latency" => {
                    cfg.link.latency = parse_duration(v).ok_or_else(|| bad("expected a time like 10us"))?
                }
                "bandwidth" => {
                    cfg.link.bandwidth = parse_bytes(v)
                        .filter(|b| *b > 0)
                        .ok_or_else(|| bad("expected bytes per second like 10GB"))? as f64
                }
                "mem" => cfg.memory = Some(parse_bytes(v).ok_or_else(|| bad("expected a size like 256MiB"))?),
                "half" => cfg.half_speed_flops = parse_f64(v).ok_or_else(|| bad("expected flops"))?,
                "gflops" => cfg.reference_gflops = parse_f64(v).filter(|g| *g > 0.0).ok_or_else(|| bad("expected GFLOP/s"))?,
                other => {
                    return Err(format!(
                        "--sim '{spec}': unknown key '{other}' (known: speed, latency, link-latency, bandwidth, mem, half, gflops)"
                    ))
                }
            }
        }
        Ok((count, cfg))
    }
}

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
    Some(Duration::from_secs_f64(secs))
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
pub struct SimDevice {
    name: String,
    config: SimConfig,
}

impl SimDevice {
    /// Device `index` (named `sim<index>`) with the given model.
    pub fn new(index: usize, config: SimConfig) -> SimDevice {
        SimDevice {
            name: format!("sim{index}"),
            config,
        }
    }

    /// The model.
    pub fn config(&self) -> &SimConfig {
        &self.config
    }
}

/// Run `f`, then sleep until `modelled` has passed since the start.
fn take_modelled(modelled: Duration, f: &mut dyn FnMut()) -> Duration {
    let start = Instant::now();
    f();
    let actual = start.elapsed();
    if modelled > actual {
        std::thread::sleep(modelled - actual);
    }
    start.elapsed()
}

impl Device for SimDevice {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn arch(&self) -> &'static str {
        "sim"
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

    fn expected_time(&self, cost: &TaskCost<'_>) -> Duration {
        self.config.exec_time(cost.flops)
    }

    fn run(&self, cost: &TaskCost<'_>, body: &mut dyn FnMut()) -> Duration {
        // Report the model (deterministic) unless the body itself was slower.
        let modelled = self.config.exec_time(cost.flops);
        take_modelled(modelled, body).max(modelled)
    }

    fn copy(&self, bytes: u64, copy: &mut dyn FnMut()) -> Duration {
        take_modelled(self.config.link.time(bytes), copy)
    }
}

#[cfg(test)]
mod tests {
    //! Proves the sim device's model: times, the small-size penalty, the spec parser.
    use super::*;

    #[test]
    fn exec_time_follows_the_model() {
        let c = SimConfig {
            speed: 2.0,
            latency: Duration::from_micros(10),
            half_speed_flops: 0.0,
            reference_gflops: 50.0,
            ..SimConfig::default()
        };
        // 1e9 flops at 100 GFLOP/s = 10 ms, plus 10 µs.
        assert_eq!(c.exec_time(1e9), Duration::from_micros(10_010));
        let small = SimConfig {
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
        let d = SimDevice::new(
            0,
            SimConfig {
                latency: Duration::from_millis(5),
                ..SimConfig::default()
            },
        );
        let mut ran = false;
        let t = d.run(
            &TaskCost {
                codelet: "k",
                flops: 0.0,
                bytes: 0,
            },
            &mut || ran = true,
        );
        assert!(ran && t >= Duration::from_millis(5), "{t:?}");
    }

    #[test]
    fn spec_parsing() {
        let (n, c) =
            SimConfig::parse_spec("2:speed=0.5,latency=1ms,bandwidth=8GB,mem=256MiB").unwrap();
        assert_eq!(n, 2);
        assert_eq!(c.speed, 0.5);
        assert_eq!(c.latency, Duration::from_millis(1));
        assert_eq!(c.link.bandwidth, 8e9);
        assert_eq!(c.memory, Some(256 << 20));
        assert_eq!(SimConfig::parse_spec("1").unwrap().0, 1);
        for bad in [
            "x",
            "1:speed",
            "1:speed=-1",
            "1:latency=3 parsecs",
            "1:colour=red",
            "1:mem=lots",
        ] {
            let e = SimConfig::parse_spec(bad).unwrap_err();
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
