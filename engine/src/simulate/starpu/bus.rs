//! StarPU's bus calibration files of one machine (`bus/MACHINE.*`):
//! `.config` (how many CPUs and devices were calibrated), `.bandwidth` and
//! `.latency` (matrices between memory nodes: row = from, column = to;
//! node 0 is RAM, then each CUDA device, then each OpenCL device; MB/s
//! and µs, `nan` where no node is), `.affinity` (per GPU, the CPUs
//! nearest first).
//!
//! Errors name the file and the line.

use std::path::Path;

use super::StarpuError;

/// The bus files are a few KB: anything past this is not one.
const MAX_FILE_BYTES: u64 = 4 << 20;

/// What `.config` says was calibrated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BusConfig {
    /// CPU cores.
    pub cpus: usize,
    /// CUDA devices.
    pub cuda: usize,
    /// OpenCL devices (often the same GPUs seen through OpenCL).
    pub opencl: usize,
}

/// Read `.config`: lines `VALUE # Number of WHAT`.
pub fn read_config(path: &Path) -> Result<BusConfig, StarpuError> {
    let file = path.display().to_string();
    let text = super::read_text(path, MAX_FILE_BYTES)?;
    let (mut cpus, mut cuda, mut opencl) = (None, None, None);
    for (i, l) in text.lines().enumerate() {
        let t = l.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let (value, label) = t.split_once('#').unwrap_or((t, ""));
        let value: usize = value.trim().parse().map_err(|_| {
            StarpuError::at(
                &file,
                i + 1,
                format!("expected 'COUNT # Number of ...', got '{t}'"),
            )
        })?;
        let slot = if label.contains("CPU") {
            &mut cpus
        } else if label.contains("CUDA") {
            &mut cuda
        } else if label.contains("OpenCL") {
            &mut opencl
        } else {
            // MIC, MPI_MS, ...: devices Tessera does not model.
            continue;
        };
        if slot.replace(value).is_some() {
            return Err(StarpuError::at(
                &file,
                i + 1,
                format!("'{label}' given twice"),
            ));
        }
    }
    let cpus = cpus.ok_or_else(|| StarpuError::file(&file, "no '# Number of CPUs' line"))?;
    if cpus == 0 {
        return Err(StarpuError::file(&file, "0 CPUs"));
    }
    Ok(BusConfig {
        cpus,
        cuda: cuda.unwrap_or(0),
        opencl: opencl.unwrap_or(0),
    })
}

/// A `.bandwidth` or `.latency` matrix: `values[from][to]`, and the line
/// of each row (for messages about a value).
#[derive(Clone, Debug, PartialEq)]
pub struct Matrix {
    /// The file read.
    pub file: String,
    /// Rows as written (`nan` kept).
    pub values: Vec<Vec<f64>>,
    /// The file line of each row.
    pub lines: Vec<usize>,
}

impl Matrix {
    /// Read a matrix file.
    pub fn load(path: &Path) -> Result<Matrix, StarpuError> {
        let file = path.display().to_string();
        let text = super::read_text(path, MAX_FILE_BYTES)?;
        let mut values = Vec::new();
        let mut lines = Vec::new();
        for (i, l) in text.lines().enumerate() {
            let t = l.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            let row = t
                .split_whitespace()
                .map(|x| {
                    x.parse::<f64>().map_err(|_| {
                        StarpuError::at(&file, i + 1, format!("'{x}' is not a number"))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            if let Some(first) = values.first() {
                let first: &Vec<f64> = first;
                if row.len() != first.len() {
                    return Err(StarpuError::at(
                        &file,
                        i + 1,
                        format!(
                            "{} values where the first row has {} (truncated?)",
                            row.len(),
                            first.len()
                        ),
                    ));
                }
            }
            values.push(row);
            lines.push(i + 1);
        }
        if values.is_empty() {
            return Err(StarpuError::file(&file, "no rows (an empty file?)"));
        }
        Ok(Matrix {
            file,
            values,
            lines,
        })
    }

    /// The value from node `from` to node `to`, which must be a finite,
    /// positive number (`what` names it in the message).
    pub fn get(&self, from: usize, to: usize, what: &str) -> Result<f64, StarpuError> {
        let Some(row) = self.values.get(from) else {
            return Err(StarpuError::file(
                &self.file,
                format!(
                    "no row for memory node {from} ({what}): the file has {} rows",
                    self.values.len()
                ),
            ));
        };
        let line = self.lines[from];
        match row.get(to) {
            Some(x) if x.is_finite() && *x > 0.0 => Ok(*x),
            Some(x) => Err(StarpuError::at(
                &self.file,
                line,
                format!(
                    "{what} (node {from} to node {to}) is {x}: a measured figure must be positive"
                ),
            )),
            None => Err(StarpuError::at(
                &self.file,
                line,
                format!("no column {to} ({what})"),
            )),
        }
    }
}

/// Read `.affinity`: per GPU, its id and the CPUs nearest first. Rows
/// repeat for OpenCL after CUDA; the first row of each id is kept.
pub fn read_affinity(path: &Path, cpus: usize) -> Result<Vec<(usize, Vec<usize>)>, StarpuError> {
    let file = path.display().to_string();
    let text = super::read_text(path, MAX_FILE_BYTES)?;
    let mut out: Vec<(usize, Vec<usize>)> = Vec::new();
    for (i, l) in text.lines().enumerate() {
        let t = l.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let v = t
            .split_whitespace()
            .map(|x| {
                x.parse::<usize>().map_err(|_| {
                    StarpuError::at(&file, i + 1, format!("'{x}' is not a whole number"))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let (gpu, near) = v.split_first().expect("a non-empty line has a value");
        if near.len() != cpus || near.iter().any(|&c| c >= cpus) {
            return Err(StarpuError::at(
                &file,
                i + 1,
                format!(
                    "GPU {gpu}: expected the {cpus} CPUs 0..{cpus} nearest first, got {near:?}"
                ),
            ));
        }
        if !out.iter().any(|(g, _)| g == gpu) {
            out.push((*gpu, near.to_vec()));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    //! Proves the bus readers on small hand-written files: the values as
    //! written, and each damage named by file and line.
    use super::*;

    fn write(name: &str, text: &str) -> (super::super::Scratch, std::path::PathBuf) {
        let dir = super::super::Scratch::new("bus");
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        (dir, p)
    }

    #[test]
    fn config_matrix_and_affinity() {
        let (_d, p) = write(
            "m.config",
            "# Current configuration\n4 # Number of CPUs\n1 # Number of CUDA devices\n0 # Number of MIC devices\n",
        );
        assert_eq!(
            read_config(&p).unwrap(),
            BusConfig {
                cpus: 4,
                cuda: 1,
                opencl: 0
            }
        );
        let (_d, p) = write(
            "m.bandwidth",
            "# to 0\tto 1\n0.0\t5000\tnan\n6000\t0.0\tnan\n",
        );
        let m = Matrix::load(&p).unwrap();
        assert_eq!(m.get(0, 1, "bandwidth").unwrap(), 5000.0);
        assert_eq!(m.get(1, 0, "bandwidth").unwrap(), 6000.0);
        let e = m.get(0, 2, "bandwidth").unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "{}:2: bandwidth (node 0 to node 2) is NaN: a measured figure must be positive",
                p.display()
            )
        );
        let (_d, p) = write("m.affinity", "# GPU\tCPU0\n0\t2 3 0 1\n0\t2 3 0 1\n");
        assert_eq!(read_affinity(&p, 4).unwrap(), vec![(0, vec![2, 3, 0, 1])]);
        let e = read_affinity(&p, 3).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{}:2: GPU 0", p.display())), "{e}");
    }

    #[test]
    fn damaged_bus_files_name_file_and_line() {
        let (_d, p) = write("m.bandwidth", "0.0\t5000\n6000\n");
        let e = Matrix::load(&p).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "{}:2: 1 values where the first row has 2 (truncated?)",
                p.display()
            )
        );
        let (_d, p) = write("m.config", "twelve # Number of CPUs\n");
        let e = read_config(&p).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("{}:1: expected", p.display())),
            "{e}"
        );
        let e = read_config(Path::new("/nonexistent/m.config"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("/nonexistent/m.config: "), "{e}");
    }
}
