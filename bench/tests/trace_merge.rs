//! Proves that `tessera trace merge` of the rank traces of a real two-rank
//! STF run (threads over the in-process transport) draws each remote edge as
//! a flow arrow, that `trace summary` of the merged file names workers by
//! rank and times the remote edges, and that `trace gantt` draws their lines.

use tessera_engine::dist::{local, stf::DistRuntime, Net};
use tessera_engine::trace::{self, ChromeOptions, Trace};
use tessera_engine::{Codelet, Config, Read, ReadWrite, Runtime};

mod common;
use common::tessera;

/// Each rank's trace: `a` (owner 0) read on rank 1 at versions 0 and 1,
/// `b` (owner 1) read on rank 0 once: three remote edges.
fn two_rank_traces() -> Vec<Trace> {
    type Add = (Read<Vec<f64>>, ReadWrite<Vec<f64>>);
    let ranks: Vec<_> = local::world(2)
        .into_iter()
        .map(|t| {
            std::thread::spawn(move || {
                let rt = Runtime::new(Config::with_workers(1).trace(true)).unwrap();
                let d = DistRuntime::new(rt, Net::new(t));
                let (a, b) = (d.register(0, vec![2.0f64]), d.register(1, vec![1.0f64]));
                let add =
                    Codelet::<Add>::new("add").cpu(|_, _, (x, y): (&Vec<f64>, &mut Vec<f64>)| {
                        y[0] += x[0];
                        Ok(())
                    });
                d.task(&add, (a.r(), b.rw())).submit().unwrap();
                d.task(&add, (b.r(), a.rw())).submit().unwrap();
                d.task(&add, (a.r(), b.rw())).submit().unwrap();
                d.wait_all().unwrap();
                d.runtime().trace()
            })
        })
        .collect();
    ranks.into_iter().map(|r| r.join().unwrap()).collect()
}

#[test]
fn a_merged_trace_shows_its_remote_edges() {
    let dir = std::env::temp_dir().join(format!("tessera-trace-merge-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = |name: &str| dir.join(name).display().to_string();
    for (r, t) in two_rank_traces().iter().enumerate() {
        trace::save(
            t,
            path(&format!("t.rank{r}.json")),
            &ChromeOptions::default(),
        )
        .unwrap();
    }
    tessera(&[
        "trace",
        "merge",
        &path("t.rank1.json"),
        &path("t.rank0.json"),
        "-o",
        &path("m.json"),
    ])
    .ok();

    // One flow per remote edge, from each send task to its receive task.
    let m = trace::load(path("m.json")).unwrap();
    let edges = trace::remote_edges(&m);
    let label = |i: usize| {
        let rank = m.worker_ranks()[m.tasks[i].worker as usize];
        (rank, m.tasks[i].label.clone().unwrap_or_default())
    };
    let mut pairs: Vec<_> = edges.iter().map(|e| (label(e.from), label(e.to))).collect();
    pairs.sort();
    let s = |r: u32, l: &str| (r, l.to_owned());
    assert_eq!(
        pairs,
        [
            (s(0, "send(0@0→1)"), s(1, "recv(0@0)")),
            (s(0, "send(0@1→1)"), s(1, "recv(0@1)")),
            (s(1, "send(1@1→0)"), s(0, "recv(1@1)")),
        ]
    );
    // The file holds the arrows: one event per line.
    let json = std::fs::read_to_string(path("m.json")).unwrap();
    let flows = |ph: &str| {
        json.lines()
            .filter(|l| l.contains(ph) && l.contains("\"cat\":\"remote\""))
            .count()
    };
    assert_eq!(flows("{\"ph\":\"s\","), 3, "{json}");
    assert_eq!(flows("{\"ph\":\"f\",\"bp\":\"e\","), 3, "{json}");

    let out = tessera(&["trace", "summary", &path("m.json")]);
    out.ok();
    for needle in [
        "r0 cpu0",
        "r1 cpu0",
        "Remote edges: 3, latency median ",
        "from the end of the sending task to the start of the receiving task",
    ] {
        assert!(out.stdout.contains(needle), "{needle:?} in\n{}", out.stdout);
    }

    tessera(&["trace", "gantt", &path("m.json"), "-o", &path("m.svg")]).ok();
    let svg = std::fs::read_to_string(path("m.svg")).unwrap();
    let lines = svg
        .lines()
        .filter(|l| l.contains("<polyline") && l.contains("stroke=\"#141414\""))
        .count();
    assert_eq!(lines, 3, "{svg}");
    assert!(svg.contains("remote edge (3)"), "legend");
    std::fs::remove_dir_all(&dir).unwrap();
}
