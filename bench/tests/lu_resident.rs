//! Proves `tessera lu --update resident` end to end on an emulated device
//! with its own memory (CI has no GPU): the run passes HPL's residual test
//! with and without look-ahead, writes a streams' trace that `tessera
//! trace` reads, is predicted on the H200 platform (and picked there by
//! `--update auto`), and every misuse is refused by name.

mod common;

use common::tessera;

const EMU: [&str; 2] = ["--emu", "1:own-mem=1"];

/// A fresh folder of this test's own (removed first if a run left it).
fn scratch(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("tessera-resident-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `lu --n 8192 --nb 2048` (and `--update update`) simulated on `platform`.
fn simulated(platform: &str, update: Option<&str>) -> common::Out {
    let mut args = vec!["lu", "--n", "8192", "--nb", "2048", "--simulate", platform];
    if let Some(u) = update {
        args.extend(["--update", u]);
    }
    tessera(&args)
}

fn lu(extra: &[&str]) -> common::Out {
    let mut args = vec!["lu", "--n", "384", "--nb", "64"];
    args.extend_from_slice(extra);
    tessera(&args)
}

#[test]
fn the_resident_lu_passes_with_and_without_look_ahead() {
    for shape in ["resident", "resident:no-lookahead"] {
        let out = lu(&[&EMU[..], &["--update", shape]].concat());
        out.ok();
        assert!(out.stdout.contains("TSRESIDENT"), "{}", out.stdout);
        assert!(out.stdout.contains("PASSED"), "{}", out.stdout);
        let want = if shape == "resident" {
            "look-ahead on"
        } else {
            "look-ahead off"
        };
        assert!(out.stdout.contains(want), "{}", out.stdout);
        // Every kind of operation ran and was timed.
        for kind in ["upload", "panel", "swap", "trsm", "gemm", "download"] {
            assert!(
                out.stdout.lines().any(|l| l.trim_start().starts_with(kind)),
                "{kind}: {}",
                out.stdout
            );
        }
    }
}

#[test]
fn the_trace_holds_every_operation_on_its_stream() {
    let dir = scratch("trace");
    let path = dir.join("res.json");
    let p = path.to_str().unwrap();
    lu(&[&EMU[..], &["--update", "resident", "--trace", p]].concat()).ok();
    let out = tessera(&["trace", "summary", p]);
    out.ok();
    for track in ["emu0 CopyIn", "emu0 Panel", "emu0 Update", "emu0 CopyOut"] {
        assert!(out.stdout.contains(track), "{track}: {}", out.stdout);
    }
    // 6 blocks: 6 uploads, panels and downloads.
    assert!(out.stdout.contains("transfers"), "{}", out.stdout);
    assert!(
        out.stdout
            .lines()
            .any(|l| l.split_whitespace().take(2).eq(["panel", "6"])),
        "{}",
        out.stdout
    );
}

#[test]
fn misuse_is_refused_by_name() {
    lu(&["--update", "resident"]).refused("needs a device");
    lu(&[&EMU[..], &["--update", "residentx"]].concat())
        .refused("resident or resident:no-lookahead");
    lu(&[&EMU[..], &["--update", "resident", "--split", "cyclic"]].concat())
        .refused("keeps every column on its one device");
    lu(&[&EMU[..], &["--update", "merged", "--no-pin"]].concat())
        .refused("--no-pin is for the resident LU");
    lu(&["--emu", "2:own-mem=1", "--update", "resident"]).refused("runs on one device");
    lu(&["--emu", "1:own-mem=1,mem=1MiB", "--update", "resident"]).refused("does not fit");
}

#[test]
fn the_h200_prediction_is_resident_by_default() {
    let platform = concat!(env!("CARGO_MANIFEST_DIR"), "/platforms/h200-node.toml");
    let out = tessera(&["lu", "--n", "65536", "--nb", "2048", "--simulate", platform]);
    out.ok();
    assert!(out.stdout.contains("TSRESIDENT"), "{}", out.stdout);
    let pct: f64 = out
        .stdout
        .split("predicted on")
        .nth(1)
        .and_then(|l| l.split(':').nth(1))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no share of peak in:\n{}", out.stdout));
    // Issue 43's target for the prediction: half the node's peak or more.
    assert!(pct >= 50.0, "{pct} % of peak:\n{}", out.stdout);
    // The task-graph shapes stay predictable on the same file.
    let merged = simulated(platform, Some("merged"));
    merged.ok();
    assert!(!merged.stdout.contains("TSRESIDENT"), "{}", merged.stdout);
}

#[test]
fn a_platform_without_the_resident_rates_is_refused_naming_the_key() {
    let dir = scratch("platform");
    let path = dir.join("gpu.toml");
    let full = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/platforms/h200-node.toml"
    ))
    .unwrap();
    let text = full.replace(", resident_copy = { gbs = 52.7 }", "");
    assert_ne!(text, full, "the H200 file's resident_copy rate moved");
    std::fs::write(&path, text).unwrap();
    let p = path.to_str().unwrap();
    simulated(p, Some("resident")).refused("codelets.resident_copy: missing");
    // Without every rate, auto keeps the task-graph shapes.
    let out = simulated(p, None);
    out.ok();
    assert!(!out.stdout.contains("TSRESIDENT"), "{}", out.stdout);
}
