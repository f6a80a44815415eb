//! Perf models on disk: the JSON files they are loaded from and saved to.
//!
//! One JSON file per codelet, `<dir>/<codelet>.json` (see [`file_name`] for
//! names that are not safe as file names), holding the accepted samples of each
//! (architecture, size) so that a load rebuilds the same medians. A save writes
//! a temporary file and renames it over the old one: a crash mid-save leaves the
//! previous model, never half a file. Two processes saving the same codelet:
//! the last rename wins.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::history::History;
use super::key::FamilyKey;
use super::{PerfModelConfig, PerfModels};
use crate::{FileError, FileErrorKind};

/// Format tag and version written in each file.
const FORMAT: &str = "tessera-perfmodel";
const VERSION: u64 = 1;

/// Longest execution time a model file may hold for one task, in seconds
/// (a day): anything longer is a corrupted or hand-made file, and once
/// loaded it would dominate `dmda`'s estimates.
pub const MAX_SAMPLE_SECONDS: f64 = 86_400.0;

/// Environment variable naming the model directory (see [`default_dir`]).
pub const DIR_ENV: &str = "TESSERA_PERFMODEL_DIR";

/// The model directory used when none is given: `$TESSERA_PERFMODEL_DIR`, else
/// `~/.tessera/perfmodels`; `None` when neither that variable nor a home
/// directory (`HOME`, or `USERPROFILE` on Windows) is set.
pub fn default_dir() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var(DIR_ENV) {
        return Some(PathBuf::from(dir));
    }
    let home = var("HOME").or_else(|| var("USERPROFILE"))?;
    Some(Path::new(&home).join(".tessera").join("perfmodels"))
}

impl PerfModels {
    /// Loads every `*.json` model in `dir`, with otherwise default settings; a
    /// missing directory gives empty models (the first run on a machine).
    pub fn load(dir: impl Into<PathBuf>) -> Result<PerfModels, FileError> {
        Self::load_with(PerfModelConfig {
            dir: Some(dir.into()),
            ..PerfModelConfig::default()
        })
    }

    /// Loads the models in `config.dir` (none: empty models) with `config`'s
    /// settings; histories longer than `history_len` keep their newest samples.
    ///
    /// # Panics
    ///
    /// As [`new`](Self::new), on a bad `config`.
    pub fn load_with(config: PerfModelConfig) -> Result<PerfModels, FileError> {
        let models = Self::new(config);
        let Some(dir) = models.config.dir.clone() else {
            return Ok(models);
        };
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(models),
            Err(e) => return Err(FileError::from(e).with_path(&dir)),
        };
        let mut files = Vec::new();
        for entry in entries {
            let path = entry
                .map_err(|e| FileError::from(e).with_path(&dir))?
                .path();
            if crate::util::is_stale_tmp(&path, None) && path.to_string_lossy().contains(".json.") {
                // A save killed before its rename (kill -9): nobody will
                // finish it. Best effort; the models load either way.
                let _ = fs::remove_file(&path);
                continue;
            }
            if path.extension().is_some_and(|x| x == "json") && path.is_file() {
                files.push(path);
            }
        }
        files.sort();
        // codelet → the file it came from, to report duplicates.
        let mut seen: BTreeMap<String, PathBuf> = BTreeMap::new();
        for path in files {
            let file = read_file(&path)?;
            if let Some(first) = seen.get(&file.codelet) {
                return Err(FileError::format(format!(
                    "codelet '{}' is also in {}",
                    file.codelet,
                    first.display()
                ))
                .with_path(&path));
            }
            for entry in file.entries {
                let h =
                    History::from_samples(entry.samples, entry.outliers, models.config.history_len);
                models
                    .families
                    .entry(FamilyKey {
                        codelet: file.codelet.clone(),
                        arch: entry.arch,
                    })
                    .or_default()
                    .sizes
                    .insert(entry.size, h);
            }
            seen.insert(file.codelet, path);
        }
        Ok(models)
    }

    /// Writes every codelet's models to `config.dir` (created if needed).
    pub fn save(&self) -> Result<(), FileError> {
        match &self.config.dir {
            Some(dir) => self.save_to(dir),
            None => Err(FileError::new(FileErrorKind::NoDir)),
        }
    }

    /// Writes every codelet's models to `dir` (created if needed), one
    /// [`file_name`] per codelet. Other files in `dir` are left alone.
    pub fn save_to(&self, dir: &Path) -> Result<(), FileError> {
        // Snapshot first, then write: no lock is held during file I/O.
        let mut files: BTreeMap<String, Vec<Entry>> = BTreeMap::new();
        for family in self.families.iter() {
            let key = family.key();
            let entries = files.entry(key.codelet.clone()).or_default();
            for h in family.sizes.iter() {
                entries.push(Entry {
                    arch: key.arch.clone(),
                    size: *h.key(),
                    outliers: h.outliers,
                    samples: h.samples.iter().copied().collect(),
                });
            }
        }
        fs::create_dir_all(dir).map_err(|e| FileError::from(e).with_path(dir))?;
        for (codelet, mut entries) in files {
            entries.sort_by(|x, y| (&x.arch, x.size).cmp(&(&y.arch, y.size)));
            let path = dir.join(file_name(&codelet));
            write_file(&path, &codelet, &entries)
                .map_err(|e| FileError::from(e).with_path(&path))?;
        }
        Ok(())
    }
}

/// The file holding `codelet`'s models: the name itself plus `.json` when it is
/// made of ASCII letters, digits, `-`, `_` and `.` (not leading), at most 100
/// characters; otherwise the other characters become `_`, and a hash of the
/// full name is appended so that `a/b` and `a_b` get different files. The
/// file stores the real name; loading does not depend on the file name.
pub fn file_name(codelet: &str) -> String {
    const MAX: usize = 100;
    let safe = |i: usize, c: char| {
        c.is_ascii_alphanumeric() || c == '-' || c == '_' || (c == '.' && i > 0)
    };
    let mut name: String = codelet
        .chars()
        .enumerate()
        .map(|(i, c)| if safe(i, c) { c } else { '_' })
        .take(MAX)
        .collect();
    if name.is_empty() || name != codelet {
        name.push_str(&format!("-{:016x}", crate::util::fnv1a(codelet.as_bytes())));
    }
    name.push_str(".json");
    name
}

/// One file on disk.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    format: String,
    version: u64,
    codelet: String,
    entries: Vec<Entry>,
}

/// One (arch, size) of a file.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    arch: String,
    size: u64,
    outliers: u64,
    samples: Vec<f64>,
}

/// Writes `<path>` atomically (through symlinks, never over a non-regular
/// file: [`crate::util::write_atomically`]). One entry per line, so an
/// error's line number points at it.
fn write_file(path: &Path, codelet: &str, entries: &[Entry]) -> io::Result<()> {
    crate::util::write_atomically(path, |file| {
        let mut w = io::BufWriter::new(file);
        write!(
            w,
            "{{\"format\":\"{FORMAT}\",\"version\":{VERSION},\"codelet\":"
        )?;
        serde_json::to_writer(&mut w, codelet)?;
        w.write_all(b",\"entries\":[")?;
        for (i, e) in entries.iter().enumerate() {
            w.write_all(if i == 0 { b"\n" } else { b",\n" })?;
            serde_json::to_writer(&mut w, e)?;
        }
        w.write_all(b"\n]}\n")?;
        w.flush()
    })
}

/// An architecture name as devices give them (`cpu`, `emu`, `cuda`): 1 to 32
/// lowercase ASCII letters, digits, `-` or `_`.
fn valid_arch(arch: &str) -> bool {
    (1..=32).contains(&arch.len())
        && arch
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

/// Reads and checks one model file.
fn read_file(path: &Path) -> Result<File, FileError> {
    let text = fs::read_to_string(path).map_err(|e| FileError::from(e).with_path(path))?;
    let file: File = serde_json::from_str(&text)
        .map_err(|e| FileError::new(FileErrorKind::json(&e)).with_path(path))?;
    if file.format != FORMAT {
        return Err(
            FileError::format(format!("format is '{}', expected '{FORMAT}'", file.format))
                .with_path(path),
        );
    }
    if file.version != VERSION {
        return Err(FileError::format(format!(
            "version {} is not supported (this build reads {VERSION})",
            file.version
        ))
        .with_path(path));
    }
    let mut keys = std::collections::BTreeSet::new();
    for (i, e) in file.entries.iter().enumerate() {
        let what = || {
            format!(
                "codelet '{}', entry {i} (arch '{}', size {})",
                file.codelet, e.arch, e.size
            )
        };
        let bad = |m: String| Err(FileError::format(format!("{}: {m}", what())).with_path(path));
        if !keys.insert((&e.arch, e.size)) {
            return bad("is a duplicate".into());
        }
        if !valid_arch(&e.arch) {
            return bad(
                "the architecture must be 1 to 32 of a-z, 0-9, '-', '_' (cpu, emu, cuda, ...)"
                    .into(),
            );
        }
        if e.samples.is_empty() {
            return bad("has no samples".into());
        }
        if let Some(x) = e.samples.iter().find(|x| !(x.is_finite() && **x >= 0.0)) {
            return bad(format!("sample {x} is not a time in seconds"));
        }
        if let Some(x) = e.samples.iter().find(|x| **x > MAX_SAMPLE_SECONDS) {
            return bad(format!(
                "sample {x:e} s is not a plausible task time (more than {MAX_SAMPLE_SECONDS} s)"
            ));
        }
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    // Proves that files round-trip, that file names are safe and distinct,
    // that a missing directory is an empty model, and that bad files are
    // reported by name and place.
    use super::super::testing::{Jitter, TempDir};
    use super::*;

    #[test]
    fn json_round_trip() {
        let tmp = TempDir::new("roundtrip");
        let m = PerfModels::new(PerfModelConfig {
            dir: Some(tmp.0.clone()),
            ..PerfModelConfig::default()
        });
        let mut j = Jitter(3);
        for codelet in ["gemm", "trsm", "a/b", "a_b", "", "..", "ünïcode"] {
            for arch in ["cpu", "cuda"] {
                for size in [1u64, 64, 1 << 40] {
                    for _ in 0..7 {
                        m.record(codelet, arch, size, 1e-3 * (1.0 + j.next(0.03)));
                    }
                    m.record(codelet, arch, size, 1.0);
                }
            }
        }
        m.save().unwrap();
        let back = PerfModels::load(&tmp.0).unwrap();
        assert_eq!(back.summary(), m.summary());
        assert!(m.summary().iter().all(|r| r.outliers == 1));
        // 7 codelets, 7 files, none hidden or temporary left behind.
        let names: Vec<String> = fs::read_dir(&tmp.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 7, "{names:?}");
        assert!(names.contains(&"gemm.json".to_owned()));
        assert!(names
            .iter()
            .all(|n| n.ends_with(".json") && !n.starts_with('.')));
        // Saving again overwrites in place.
        back.save().unwrap();
        assert_eq!(PerfModels::load(&tmp.0).unwrap().summary(), m.summary());
    }

    /// Issue 17: kill -9 during a save left `.NAME.json.PID.tmp` for ever.
    #[test]
    fn stale_temporary_files_are_removed_on_load() {
        let tmp = TempDir::new("stale");
        let m = PerfModels::default();
        m.record("gemm", "cpu", 8, 1.0);
        m.save_to(&tmp.0).unwrap();
        // No process has pid u32::MAX - 1 (Linux caps pids at 2^22).
        let dead = tmp.0.join(format!(".gemm.json.{}.tmp", u32::MAX - 1));
        let mine = tmp.0.join(format!(".trsm.json.{}.tmp", std::process::id()));
        let other = tmp.0.join(".notes.tmp");
        for f in [&dead, &mine, &other] {
            fs::write(f, "{").unwrap();
        }
        let back = PerfModels::load(&tmp.0).unwrap();
        assert_eq!(back.summary(), m.summary());
        assert!(!dead.exists(), "a dead process's save is removed");
        assert!(
            mine.exists() && other.exists(),
            "live saves and other files stay"
        );
    }

    /// Issue 17: samples of 1e308 printed "inf s (NaN%)": the median of two
    /// huge samples overflowed. Recorded in code (loading refuses them).
    #[test]
    fn median_of_huge_samples_does_not_overflow() {
        let (m, mad) = super::super::history::median_mad_for_tests(&[1e308, 1.2e308]);
        assert!(m.is_finite() && mad.is_finite(), "{m} {mad}");
        assert_eq!(m, 1.1e308);
    }

    #[test]
    fn file_names_are_safe_and_distinct() {
        assert_eq!(file_name("gemm_f64"), "gemm_f64.json");
        let odd = ["a/b", "a_b", "a\\b", "..", "", "x y", "é"];
        let names: std::collections::BTreeSet<String> = odd.iter().map(|c| file_name(c)).collect();
        assert_eq!(names.len(), odd.len());
        for n in &names {
            assert!(
                !n.starts_with('.') && !n.contains('/') && !n.contains('\\'),
                "{n}"
            );
            assert!(n.is_ascii());
        }
        assert!(file_name(&"x".repeat(500)).len() < 130);
    }

    #[test]
    fn missing_dir_is_empty() {
        let tmp = TempDir::new("missing");
        let m = PerfModels::load(tmp.0.join("nope")).unwrap();
        assert!(m.is_empty());
        let e = PerfModels::default().save().unwrap_err();
        assert!(matches!(e.kind(), FileErrorKind::NoDir));
    }

    #[test]
    fn corrupted_file_is_named() {
        let tmp = TempDir::new("corrupt");
        let m = PerfModels::default();
        for n in [8u64, 16] {
            m.record("gemm", "cpu", n, 1.0);
        }
        m.save_to(&tmp.0).unwrap();
        let path = tmp.0.join("gemm.json");
        let good = fs::read_to_string(&path).unwrap();

        // Cut short.
        fs::write(&path, &good[..good.len() / 2]).unwrap();
        let e = PerfModels::load(&tmp.0).unwrap_err();
        assert_eq!(e.path(), Some(path.as_path()));
        assert!(
            matches!(e.kind(), FileErrorKind::TruncatedJson { .. }),
            "{e}"
        );
        assert!(e
            .to_string()
            .starts_with(&format!("{}: truncated JSON", path.display())));

        // Garbage on line 2.
        let bad = good.replacen("\n{\"arch\"", "\n{\"arch\" oops", 1);
        fs::write(&path, bad).unwrap();
        let e = PerfModels::load(&tmp.0).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("gemm.json") && msg.contains("line 2 column"),
            "{msg}"
        );

        // Valid JSON, bad content.
        for (from, to, want) in [
            ("\"version\":1", "\"version\":9", "version 9"),
            ("\"samples\":[1.0]", "\"samples\":[-1.0]", "sample -1"),
            ("\"size\":16", "\"size\":8", "duplicate"),
            ("\"outliers\":0", "\"outlier\":0", "unknown field"),
            // Issue 17: overflowing medians, absurd and missing samples, odd arches.
            ("\"samples\":[1.0]", "\"samples\":[1e308]", "sample 1e308"),
            ("\"samples\":[1.0]", "\"samples\":[]", "no samples"),
            ("\"arch\":\"cpu\"", "\"arch\":\"\"", "architecture"),
            ("\"arch\":\"cpu\"", "\"arch\":\"CPU 1\"", "architecture"),
        ] {
            assert!(good.contains(from), "{good}");
            fs::write(&path, good.replacen(from, to, 1)).unwrap();
            let msg = PerfModels::load(&tmp.0).unwrap_err().to_string();
            let entry = from.contains("samples") || from.contains("arch");
            assert!(msg.contains("gemm.json") && msg.contains(want), "{msg}");
            assert!(!entry || msg.contains("codelet 'gemm'"), "{msg}");
        }

        // The same codelet in two files.
        fs::write(&path, &good).unwrap();
        fs::write(tmp.0.join("copy.json"), &good).unwrap();
        let msg = PerfModels::load(&tmp.0).unwrap_err().to_string();
        assert!(
            msg.contains("gemm.json") && msg.contains("copy.json"),
            "{msg}"
        );
    }
}
