//! Where a platform file and its perf-model folder are written (`calibrate`,
//! `platform import`): the destination checked before any work, then both
//! replaced together or neither (issue 28 for calibrate; issue 42: a failed
//! `platform import` had already overwritten the models beside its `--out`).

use std::path::{Path, PathBuf};

use tessera_engine::perfmodel::PerfModels;

/// A checked destination: the platform file and its models' folder.
#[derive(Debug)]
pub struct PlatformOut {
    /// The platform file (a symlink is written through).
    pub file: PathBuf,
    /// `NAME.perfmodels/` beside it, as the platform file names it.
    pub models: PathBuf,
    /// The folder's name, as the platform file gives it.
    pub models_name: String,
}

impl PlatformOut {
    /// Check `--out` before anything is measured or written: a regular file
    /// or none yet (a device, a FIFO or a folder is refused: the models go
    /// beside it), its models' path a folder or none, and its folder (or the
    /// nearest one that exists) writable, tried with a temporary file.
    pub fn check(out: &Path) -> Result<PlatformOut, String> {
        let bad = |why: &str| format!("--out {}: {why}", out.display());
        let file = match std::fs::metadata(out) {
            Ok(m) if m.is_file() => out.to_path_buf(),
            Ok(_) => {
                return Err(bad(
                    "not a regular file (a platform file is written there and its perf models in a folder beside it)",
                ))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => out.to_path_buf(),
            Err(e) => return Err(bad(&e.to_string())),
        };
        let stem = file
            .file_stem()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| bad("not a file name"))?
            .to_string_lossy()
            .into_owned();
        let models_name = format!("{stem}.perfmodels");
        if file.file_name().is_some_and(|n| *n == *models_name) {
            return Err(bad(
                "the platform file would be its own models' folder: give it another extension (.toml)",
            ));
        }
        if models_name.len() > 255 {
            return Err(bad(&format!(
                "the name is too long for its perf models' folder, {models_name}"
            )));
        }
        let models = folder_of(&file).join(&models_name);
        match std::fs::metadata(&models) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(bad(&format!(
                    "{} is in the way of its perf models: not a folder",
                    models.display()
                )))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(bad(&format!("{}: {e}", models.display()))),
        }
        // The nearest folder that exists is where the first write will go.
        let probe_dir = nearest_existing(&folder_of(&file));
        let probe = probe_dir.join(format!(".tessera-platform.{}.tmp", std::process::id()));
        std::fs::File::create(&probe)
            .map_err(|e| bad(&format!("cannot write in {}: {e}", probe_dir.display())))?;
        let _ = std::fs::remove_file(&probe);
        Ok(PlatformOut {
            file,
            models,
            models_name,
        })
    }

    /// Write the models, then the platform file `text` that names them, so
    /// that either both are new or both are as they were (issue 28: a
    /// truncating write after the models' left a platform file cut at
    /// `panel = ` under `ulimit -f 1`). The models go to a temporary folder,
    /// which takes the place of the old one (kept aside until the platform
    /// file is written, then removed); the platform file is written
    /// atomically, and if that fails, the old models come back and any folder
    /// made for them is removed.
    pub fn save(&self, perf: &PerfModels, text: &str) -> Result<(), String> {
        let folder = folder_of(&self.models);
        let made = first_missing(&folder);
        let undo_made = || {
            if let Some(m) = &made {
                let _ = std::fs::remove_dir_all(m);
            }
        };
        std::fs::create_dir_all(&folder).map_err(|e| format!("{}: {e}", folder.display()))?;
        let pid = std::process::id();
        let aside = |what: &str| folder.join(format!(".tessera-platform.{pid}.models.{what}"));
        let (fresh, old) = (aside("tmp"), aside("old"));
        let _ = std::fs::remove_dir_all(&fresh);
        if let Err(e) = perf.save_to(&fresh) {
            let _ = std::fs::remove_dir_all(&fresh);
            undo_made();
            return Err(e.to_string());
        }
        let had_old = self.models.exists();
        let swapped = (|| {
            if had_old {
                std::fs::rename(&self.models, &old)?;
            }
            std::fs::rename(&fresh, &self.models)
        })();
        if let Err(e) = swapped {
            if had_old && !self.models.exists() {
                let _ = std::fs::rename(&old, &self.models);
            }
            let _ = std::fs::remove_dir_all(&fresh);
            undo_made();
            return Err(format!("{}: {e}", self.models.display()));
        }
        let written = tessera_engine::util::write_atomically(&self.file, |mut f| {
            use std::io::Write;
            f.write_all(text.as_bytes())
        });
        if let Err(e) = written {
            let _ = std::fs::remove_dir_all(&self.models);
            if had_old {
                let _ = std::fs::rename(&old, &self.models);
            }
            undo_made();
            return Err(format!("{}: {e}", self.file.display()));
        }
        if had_old {
            let _ = std::fs::remove_dir_all(&old);
        }
        Ok(())
    }
}

/// The folder holding `file` (`.` for a bare name).
fn folder_of(file: &Path) -> PathBuf {
    match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// `dir` or its nearest ancestor that exists.
fn nearest_existing(dir: &Path) -> PathBuf {
    let mut at = dir;
    while !at.exists() {
        at = match at.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => return PathBuf::from("."),
        };
    }
    at.to_path_buf()
}

/// The outermost folder of `dir`'s ancestry that does not exist yet (what
/// `create_dir_all(dir)` would make first), or `None` if `dir` exists.
fn first_missing(dir: &Path) -> Option<PathBuf> {
    let mut missing = None;
    let mut at = dir;
    while !at.as_os_str().is_empty() && !at.exists() {
        missing = Some(at.to_path_buf());
        match at.parent() {
            Some(p) => at = p,
            None => break,
        }
    }
    missing
}
