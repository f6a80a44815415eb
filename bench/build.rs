//! Derives the names of the codelets this workspace declares, so that
//! `--simulate` can refuse a platform file that gives a rate (or an `only`
//! entry) to a codelet no run makes — a misspelling would otherwise take
//! no effect without a word (issue 28). Read from the source, not kept by
//! hand: a codelet added later is known the moment it is written.
//!
//! A codelet is declared as `Codelet::<..>::with_args("NAME")` or
//! `Codelet::<..>::new("NAME")` (also `Codelet::new`, `Codelet::with_args`);
//! comment lines and test modules are skipped.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The folders whose codelets runs of the `tessera` binary make.
const SOURCES: [&str; 3] = ["../tasks/src", "../linalg/src", "../engine/src/dist"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The names declared on one line (the string after each constructor).
fn names_in(line: &str, out: &mut BTreeSet<String>) {
    let t = line.trim_start();
    if t.starts_with("//") || !line.contains("Codelet") {
        return;
    }
    for pat in ["with_args(\"", "::new(\""] {
        let mut rest = line;
        while let Some(i) = rest.find(pat) {
            rest = &rest[i + pat.len()..];
            if let Some(end) = rest.find('"') {
                out.insert(rest[..end].to_string());
            }
        }
    }
}

fn main() {
    let mut files = Vec::new();
    for dir in SOURCES {
        println!("cargo:rerun-if-changed={dir}");
        rust_files(Path::new(dir), &mut files);
    }
    files.sort();
    let mut names = BTreeSet::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        // A file's tests (its `#[cfg(test)]` module, last by custom) make
        // codelets of their own that no run of the binary does.
        for line in text.lines().take_while(|l| l.trim() != "#[cfg(test)]") {
            names_in(line, &mut names);
        }
    }
    let list: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(
        out.join("codelet_names.rs"),
        format!(
            "/// Every codelet name declared in the workspace (bench/build.rs).\npub const KNOWN_CODELETS: &[&str] = &[{}];\n",
            list.join(", ")
        ),
    )
    .expect("write codelet_names.rs");
}
