//! StarPU's history-based perf-model files (`codelets/45/SYMBOL.MACHINE`),
//! format version 45: per combination of devices (one CPU core, one CUDA
//! device, a combined worker of several cores) and implementation, the
//! mean, deviation and sample count of each data size measured.
//!
//! The format is line-oriented: every line starting with `#` is a comment
//! (the shipped files differ in those only: spaces or tabs, an
//! `MPI_MS - 5` in the device-type legend, a missing version comment), and
//! each value line holds what StarPU's `fscanf` expects next, in this order:
//!
//! ```text
//! 45                                   version
//! C                                    combinations
//!   D                                  devices of the combination; then D times:
//!     TYPE / ID / CORES                three lines (0 CPU, 1 CUDA, 2 OpenCL, 3 MIC, 5 MPI_MS)
//!   I                                  implementations; then I times:
//!     E                                entries
//!     sumlnx .. maxx                   linear regression (9 values, may be nan)
//!     a b c                            non-linear regression (may be nan)
//!     K [K coefficients]               multiple regression (0: none; idgraf's
//!                                      files put this line before `a b c`)
//!     hash size flops mean dev sum sum2 n      E lines, times in µs
//! ```
//!
//! Errors name the file and the line; values are checked as read (a
//! NaN, negative or infinite mean, a size of 0, no samples), so what
//! comes out can feed the simulator as it is.

use std::path::Path;

use super::StarpuError;

/// The only version read: others lay the lines out differently.
pub const VERSION: u32 = 45;

/// A kind of StarPU worker (`enum starpu_worker_archtype`'s file codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceKind {
    /// `0`: CPU cores.
    Cpu,
    /// `1`: a CUDA device.
    Cuda,
    /// `2`: an OpenCL device.
    OpenCl,
    /// `3`: a MIC (Xeon Phi) device.
    Mic,
    /// `5`: an MPI master-slave device.
    MpiMs,
}

/// One device of a combination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Device {
    /// What it is.
    pub kind: DeviceKind,
    /// Its number among devices of its kind (`cuda2`: 2).
    pub id: u32,
    /// Cores it spans: 1, or more for a combined CPU worker.
    pub cores: u32,
}

/// One measured size of one (combination, implementation).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Entry {
    /// StarPU's footprint hash of the task's data layout.
    pub footprint: u32,
    /// Bytes of the task's data (the sum of its handles' sizes).
    pub size: u64,
    /// Flops the codelet declared (0: none).
    pub flops: f64,
    /// Mean time, microseconds.
    pub mean_us: f64,
    /// Standard deviation, microseconds.
    pub dev_us: f64,
    /// Samples behind the mean.
    pub samples: u64,
    /// Line of the entry in its file, for messages.
    pub line: usize,
}

impl Entry {
    /// The mean in seconds: `mean_us / 1e6`, the one conversion every
    /// user of the import makes (a division by 1e6 is correctly rounded;
    /// `* 1e-6` is not always the same number).
    pub fn mean_seconds(&self) -> f64 {
        self.mean_us / 1e6
    }
}

/// One combination of devices and its implementations' entries.
#[derive(Clone, Debug, PartialEq)]
pub struct Combination {
    /// The devices (one, except for combined or parallel workers).
    pub devices: Vec<Device>,
    /// Per implementation, its entries in file order.
    pub implementations: Vec<Vec<Entry>>,
}

impl Combination {
    /// Tessera's architecture name for this combination, if Tessera has
    /// one: `cpu` (one core), `cpux{N}` (a combined worker of N cores, as
    /// `tessera_engine::team::team_arch` names team tasks), `cuda{ID}`
    /// (each CUDA device its own architecture: StarPU measured each apart,
    /// and the import keeps them apart). `None` for OpenCL, MIC, MPI and
    /// multi-device combinations.
    pub fn arch(&self) -> Option<String> {
        match self.devices.as_slice() {
            [Device {
                kind: DeviceKind::Cpu,
                cores,
                ..
            }] => Some(crate::team::team_arch("cpu", *cores as usize).into_owned()),
            [Device {
                kind: DeviceKind::Cuda,
                id,
                cores: 1,
            }] => Some(format!("cuda{id}")),
            _ => None,
        }
    }
}

/// A whole perf-model file.
#[derive(Clone, Debug, PartialEq)]
pub struct PerfModelFile {
    /// The file read (for messages).
    pub file: String,
    /// Its combinations, in file order.
    pub combinations: Vec<Combination>,
    /// The combination count the file declares (fewer than
    /// `combinations.len()` when more follow it).
    pub declared: usize,
}

/// At most this many bytes are read: the shipped files are below 40 KB.
const MAX_FILE_BYTES: u64 = 64 << 20;

impl PerfModelFile {
    /// Read and check `path`.
    pub fn load(path: &Path) -> Result<PerfModelFile, StarpuError> {
        let text = super::read_text(path, MAX_FILE_BYTES)?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parse `text`; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<PerfModelFile, StarpuError> {
        let mut r = Lines::new(text, file);
        let (line, version) = r.one::<u32>("the format version")?;
        if version != VERSION {
            return Err(r.err_at(
                line,
                format!(
                    "perf-model format version {version}: only version {VERSION} is read (the layout of the shipped sampling files)"
                ),
            ));
        }
        let (_, ncombs) = r.one::<usize>("the number of combinations")?;
        r.plausible(ncombs, 4096, "combinations")?;
        let mut combinations = Vec::with_capacity(ncombs);
        for _ in 0..ncombs {
            combinations.push(r.combination()?);
        }
        // sirocco's overlap_sleep model declares 4 combinations and holds
        // 5: StarPU stops at the count; the extra ones are read too (each
        // must be whole), and `declared` keeps the count.
        while let Some(l) = r.next_values() {
            r.pending = Some(l);
            combinations.push(r.combination()?);
        }
        Ok(PerfModelFile {
            file: file.to_string(),
            declared: ncombs,
            combinations,
        })
    }

    /// The entries of implementation 0 of the combination Tessera calls
    /// `arch` (see [`Combination::arch`]), if the file has one.
    pub fn entries(&self, arch: &str) -> Option<&[Entry]> {
        self.combinations
            .iter()
            .find(|c| c.arch().as_deref() == Some(arch))
            .and_then(|c| c.implementations.first())
            .map(Vec::as_slice)
    }

    /// The mean time, in seconds, of `arch` at `size` bytes (implementation 0).
    pub fn mean_seconds(&self, arch: &str, size: u64) -> Option<f64> {
        self.entries(arch)?
            .iter()
            .find(|e| e.size == size)
            .map(Entry::mean_seconds)
    }
}

/// The value lines of a file, comments and blank lines skipped, with
/// their line numbers (from 1).
struct Lines<'a> {
    lines: std::iter::Enumerate<std::str::Lines<'a>>,
    file: &'a str,
    /// The last line read, for "ends early" messages.
    last: usize,
    /// A line read ahead and given back, returned first.
    pending: Option<(usize, Vec<&'a str>)>,
}

impl<'a> Lines<'a> {
    fn new(text: &'a str, file: &'a str) -> Self {
        Lines {
            lines: text.lines().enumerate(),
            file,
            last: 0,
            pending: None,
        }
    }

    fn err_at(&self, line: usize, problem: impl Into<String>) -> StarpuError {
        StarpuError::at(self.file, line, problem)
    }

    /// The next value line, split on white space.
    fn next_values(&mut self) -> Option<(usize, Vec<&'a str>)> {
        if let Some(l) = self.pending.take() {
            return Some(l);
        }
        for (i, l) in self.lines.by_ref() {
            self.last = i + 1;
            let t = l.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            return Some((i + 1, t.split_whitespace().collect()));
        }
        None
    }

    /// The next value line, which must exist: `what` says what was expected.
    fn values(&mut self, what: &str) -> Result<(usize, Vec<&'a str>), StarpuError> {
        self.next_values().ok_or_else(|| {
            self.err_at(
                self.last.max(1),
                format!("the file ends here, before {what} (truncated?)"),
            )
        })
    }

    /// A line of exactly one value.
    fn one<T: std::str::FromStr>(&mut self, what: &str) -> Result<(usize, T), StarpuError> {
        let (line, v) = self.values(what)?;
        match v.as_slice() {
            [x] => x
                .parse()
                .map(|x| (line, x))
                .map_err(|_| self.err_at(line, format!("expected {what}, got '{x}'"))),
            _ => Err(self.err_at(
                line,
                format!("expected {what} alone on its line, got {} values", v.len()),
            )),
        }
    }

    /// A count past `max` is a damaged file, not a machine: refused before
    /// anything is allocated for it.
    fn plausible(&self, n: usize, max: usize, what: &str) -> Result<(), StarpuError> {
        if n > max {
            return Err(self.err_at(
                self.last,
                format!("{n} {what}: more than {max}, a damaged file?"),
            ));
        }
        Ok(())
    }

    /// One combination: its devices and implementations.
    fn combination(&mut self) -> Result<Combination, StarpuError> {
        let (_, ndev) = self.one::<usize>("the number of devices of a combination")?;
        self.plausible(ndev, 4096, "devices")?;
        let mut devices = Vec::with_capacity(ndev);
        for _ in 0..ndev {
            let (line, code) = self.one::<u32>("a device type")?;
            let kind = match code {
                0 => DeviceKind::Cpu,
                1 => DeviceKind::Cuda,
                2 => DeviceKind::OpenCl,
                3 => DeviceKind::Mic,
                5 => DeviceKind::MpiMs,
                other => {
                    return Err(self.err_at(
                        line,
                        format!(
                        "unknown device type {other} (0 CPU, 1 CUDA, 2 OpenCL, 3 MIC, 5 MPI_MS)"
                    ),
                    ))
                }
            };
            let (_, id) = self.one::<u32>("a device id")?;
            let (line, cores) = self.one::<u32>("a device's number of cores")?;
            if cores == 0 {
                return Err(self.err_at(line, "a device of 0 cores"));
            }
            devices.push(Device { kind, id, cores });
        }
        let (_, nimpl) = self.one::<usize>("the number of implementations")?;
        self.plausible(nimpl, 64, "implementations")?;
        let mut implementations = Vec::with_capacity(nimpl);
        for _ in 0..nimpl {
            implementations.push(self.implementation()?);
        }
        Ok(Combination {
            devices,
            implementations,
        })
    }

    /// One implementation: its entry count, regressions and entries.
    fn implementation(&mut self) -> Result<Vec<Entry>, StarpuError> {
        let (_, nentries) = self.one::<usize>("the number of entries")?;
        self.plausible(nentries, 1 << 20, "entries")?;
        // Linear regression: 9 values; non-linear: 3. Tessera fits its own
        // regression over the imported sizes, so these are checked for
        // shape only.
        self.numbers(9, "the linear regression's 9 values")?;
        // The non-linear regression's a, b, c, then the multiple
        // regression's line `K [K coefficients]`. idgraf's files have the
        // two swapped (a `0` line, then `nan nan nan`): read either order.
        let (line, first) = self.values("the non-linear regression's a, b, c")?;
        let mr = if first.len() == 1 && first[0] == "0" {
            self.numbers(3, "the non-linear regression's a, b, c")?;
            (line, first)
        } else {
            if first.len() != 3 || first.iter().any(|x| x.parse::<f64>().is_err()) {
                return Err(self.err_at(
                    line,
                    format!(
                        "expected the non-linear regression's a, b, c, got '{}'",
                        first.join(" ")
                    ),
                ));
            }
            self.values("the multiple regression's coefficient count")?
        };
        let (line, v) = mr;
        let k: usize = v[0].parse().map_err(|_| {
            self.err_at(
                line,
                format!(
                    "expected the multiple regression's coefficient count, got '{}'",
                    v[0]
                ),
            )
        })?;
        if v.len() != k + 1 {
            return Err(self.err_at(
                line,
                format!(
                    "a multiple regression of {k} coefficients needs {} values on its line, got {}",
                    k + 1,
                    v.len()
                ),
            ));
        }
        let mut entries = Vec::with_capacity(nentries);
        for _ in 0..nentries {
            entries.push(self.entry()?);
        }
        Ok(entries)
    }

    /// A line of `n` numbers (NaN allowed: StarPU writes `nan` for an
    /// unfitted regression).
    fn numbers(&mut self, n: usize, what: &str) -> Result<(), StarpuError> {
        let (line, v) = self.values(what)?;
        if v.len() != n {
            return Err(self.err_at(line, format!("expected {what}, got {} values", v.len())));
        }
        for x in &v {
            if x.parse::<f64>().is_err() {
                return Err(self.err_at(line, format!("'{x}' is not a number (in {what})")));
            }
        }
        Ok(())
    }

    /// `hash size flops mean dev sum sum2 n`.
    fn entry(&mut self) -> Result<Entry, StarpuError> {
        let what = "an entry (hash size flops mean dev sum sum2 n)";
        let (line, v) = self.values(what)?;
        if v.len() != 8 {
            return Err(self.err_at(line, format!("expected {what}, got {} values", v.len())));
        }
        let footprint = u32::from_str_radix(v[0], 16)
            .map_err(|_| self.err_at(line, format!("footprint '{}' is not 8 hex digits", v[0])))?;
        let size: u64 = v[1]
            .parse()
            .map_err(|_| self.err_at(line, format!("size '{}' is not a whole number", v[1])))?;
        let num = |i: usize, name: &str| -> Result<f64, StarpuError> {
            let x: f64 = v[i]
                .parse()
                .map_err(|_| self.err_at(line, format!("{name} '{}' is not a number", v[i])))?;
            if !x.is_finite() || x < 0.0 {
                return Err(self.err_at(
                    line,
                    format!(
                        "{name} is {}: a measured value must be a finite number, not negative",
                        v[i]
                    ),
                ));
            }
            Ok(x)
        };
        let flops = num(2, "flops")?;
        let mean_us = num(3, "mean")?;
        let dev_us = num(4, "deviation")?;
        num(5, "sum")?;
        num(6, "sum2")?;
        let samples: u64 = v[7].parse().map_err(|_| {
            self.err_at(
                line,
                format!("sample count '{}' is not a whole number", v[7]),
            )
        })?;
        if size == 0 {
            return Err(self.err_at(line, "size 0: an entry must have data"));
        }
        if samples == 0 || mean_us == 0.0 {
            return Err(self.err_at(
                line,
                format!("mean {mean_us} µs over {samples} samples: nothing was measured"),
            ));
        }
        Ok(Entry {
            footprint,
            size,
            flops,
            mean_us,
            dev_us,
            samples,
            line,
        })
    }
}

#[cfg(test)]
mod tests {
    //! Proves that a hand-written file of every shape the format allows
    //! parses to the values written, and that damaged copies are refused
    //! with the file and the line.
    use super::*;

    /// A CPU core, a combined worker of 4 cores and CUDA device 1; the
    /// comments laid out both ways the shipped files do.
    pub(crate) const SMALL: &str = "##################
# Performance Model Version
45

####################
# COMBs
# number of combinations
3
# COMB_0
# number of types devices
1
# device type (CPU - 0, CUDA - 1, OPENCL - 2, MIC - 3)
0
# device id
0
# number of cores
1
# number of implementations
1
#\tnumber\tof\tentries
2
0.000000e+00\t0\t0\t0\tnan\tnan\t0\t0\t0
nan\tnan\tnan
# not multiple-regression-base
0
# hash\t\tsize\t\tflops\t\tmean (us)\tdev (us)\tsum\t\tsum2\t\tn
0000000a\t24576\t0.000000e+00\t1.000000e+03\t1.0e+01\t3.0e+03\t3.0e+06\t3
0000000b\t196608\t2.0e+06\t8.000000e+03\t2.0e+01\t1.6e+04\t1.28e+08\t2
# COMB_1
1
0
0
4
1
1
0 0 0 0 nan nan 0 0 0
nan nan nan
2 1.5 2.5
0000000a 24576 0 3.000000e+02 1 600 180000 2
# COMB_2
1
1
1
1
1
1
0 0 0 0 nan nan 0 0 0
nan nan nan
0
0000000a 24576 0 2.5e+01 1 50 1250 2
";

    #[test]
    fn a_small_file_reads_as_written() {
        let f = PerfModelFile::parse(SMALL, "small").unwrap();
        assert_eq!(f.combinations.len(), 3);
        let archs: Vec<_> = f.combinations.iter().map(|c| c.arch()).collect();
        assert_eq!(
            archs,
            [
                Some("cpu".to_string()),
                Some(crate::team::team_arch("cpu", 4).into_owned()),
                Some("cuda1".to_string())
            ]
        );
        let cpu = f.entries("cpu").unwrap();
        assert_eq!(cpu.len(), 2);
        assert_eq!(
            cpu[1],
            Entry {
                footprint: 0xb,
                size: 196608,
                flops: 2e6,
                mean_us: 8000.0,
                dev_us: 20.0,
                samples: 2,
                line: 28,
            }
        );
        assert_eq!(f.mean_seconds("cpu", 24576), Some(1e-3));
        assert_eq!(f.mean_seconds("cuda1", 24576), Some(2.5e-5));
        assert_eq!(f.mean_seconds("cuda0", 24576), None);
    }

    fn error(text: &str) -> String {
        PerfModelFile::parse(text, "bad.model")
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn damaged_copies_name_the_file_and_the_line() {
        assert_eq!(
            error(&SMALL.replacen("\n45\n", "\n44\n", 1)),
            "bad.model:3: perf-model format version 44: only version 45 is read (the layout of the shipped sampling files)"
        );
        let cut: String = SMALL.lines().take(27).collect::<Vec<_>>().join("\n");
        assert_eq!(
            error(&cut),
            "bad.model:27: the file ends here, before an entry (hash size flops mean dev sum sum2 n) (truncated?)"
        );
        assert_eq!(
            error(&SMALL.replace("1.000000e+03", "nan")),
            "bad.model:27: mean is nan: a measured value must be a finite number, not negative"
        );
        assert_eq!(
            error(&SMALL.replace("1.000000e+03", "-1")),
            "bad.model:27: mean is -1: a measured value must be a finite number, not negative"
        );
        assert_eq!(
            error(&SMALL.replace("2 1.5 2.5", "2 1.5")),
            "bad.model:38: a multiple regression of 2 coefficients needs 3 values on its line, got 2"
        );
        assert_eq!(
            error(&format!("{SMALL}7\n")),
            "bad.model:51: the file ends here, before a device type (truncated?)"
        );
        assert_eq!(
            error(&SMALL.replacen("\n0\n# device id", "\n7\n# device id", 1)),
            "bad.model:13: unknown device type 7 (0 CPU, 1 CUDA, 2 OpenCL, 3 MIC, 5 MPI_MS)"
        );
        assert_eq!(
            error(""),
            "bad.model:1: the file ends here, before the format version (truncated?)"
        );
    }
}
