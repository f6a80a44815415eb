//! Proves `tessera taskbench` runs Task Bench's graphs as Task Bench defines
//! them: every dependence pattern and kernel runs to the end with each task
//! validating its inputs, at 1, 2 and 4 workers, with every front-end (STF,
//! symbolic, light) and with output buffers reused (`-field`), and under the
//! three schedulers; an input corrupted on purpose fails the run naming the task
//! that read it; the counts it prints are Task Bench's; a simulated run has
//! the real run's tasks; bad flags are refused by name.

mod common;

use common::tessera;

/// A Task Bench line's value (`Total Tasks 40` → "40").
fn field<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.trim_start().strip_prefix(name))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no `{name}` line in:\n{out}"))
}

const PATTERNS: [&[&str]; 11] = [
    &["-type", "trivial"],
    &["-type", "no_comm"],
    &["-type", "stencil_1d"],
    &["-type", "stencil_1d_periodic"],
    &["-type", "dom"],
    &["-type", "tree"],
    &["-type", "fft"],
    &["-type", "all_to_all"],
    &["-type", "nearest", "-radix", "5"],
    &["-type", "spread", "-radix", "3", "-period", "2"],
    &["-type", "random_nearest", "-radix", "5", "-fraction", "0.5"],
];

#[test]
fn every_pattern_validates_at_1_2_4_workers() {
    for (workers, frontend, fields) in [
        ("1", "stf", "20"),
        ("2", "stf", "20"),
        ("4", "stf", "20"),
        ("2", "stf", "2"),
        ("1", "symbolic", "20"),
        ("2", "symbolic", "20"),
        ("4", "symbolic", "20"),
        ("2", "symbolic", "2"),
        ("4", "symbolic", "3"),
        ("1", "light", "20"),
        ("2", "light", "20"),
        ("4", "light", "20"),
    ] {
        for pattern in PATTERNS {
            let mut args = vec![
                "taskbench",
                "--workers",
                workers,
                "--frontend",
                frontend,
                "-steps",
                "20",
                "-width",
                "7",
                "-field",
                fields,
            ];
            args.extend_from_slice(pattern);
            args.extend_from_slice(&["-kernel", "compute_bound", "-iter", "16", "-output", "48"]);
            let out = tessera(&args);
            out.ok();
            let s = &out.stdout;
            assert!(field(s, "Total Tasks").parse::<u64>().unwrap() > 0, "{s}");
            assert!(s.contains("Elapsed Time"), "{s}");
        }
    }
}

#[test]
fn every_kernel_runs_under_every_scheduler() {
    for sched in ["ws", "prio", "dmda"] {
        for kernel in [
            &["-kernel", "empty"][..],
            &["-kernel", "busy_wait", "-iter", "100"],
            &[
                "-kernel",
                "memory_bound",
                "-iter",
                "8",
                "-scratch",
                "65536",
                "-sample",
                "4",
            ],
            &[
                "-kernel",
                "memory_daxpy",
                "-iter",
                "8",
                "-scratch",
                "65536",
                "-sample",
                "4",
            ],
            &[
                "-kernel",
                "compute_dgemm",
                "-iter",
                "2",
                "-scratch",
                "24576",
            ],
            &["-kernel", "compute_bound", "-iter", "64"],
            &["-kernel", "compute_bound2", "-iter", "64"],
            &[
                "-kernel",
                "load_imbalance",
                "-iter",
                "64",
                "-imbalance",
                "1.5",
            ],
        ] {
            let mut args = vec![
                "taskbench",
                "--workers",
                "2",
                "--sched",
                sched,
                "-steps",
                "12",
                "-width",
                "4",
                "-type",
                "stencil_1d",
            ];
            args.extend_from_slice(kernel);
            tessera(&args).ok();
        }
    }
}

#[test]
fn several_graphs_run_together() {
    let out = tessera(&[
        "taskbench",
        "--workers",
        "2",
        "-steps",
        "10",
        "-width",
        "4",
        "-type",
        "dom",
        "-and",
        "-steps",
        "25",
        "-width",
        "3",
        "-type",
        "fft",
        "-kernel",
        "busy_wait",
        "-iter",
        "10",
    ]);
    out.ok();
    // dom 10 x 4: widths 1 2 3 4 4 4 4 3 2 1 = 28 tasks; fft 25 x 3 = 75.
    assert_eq!(field(&out.stdout, "Total Tasks"), "103");
}

/// Task Bench's own core prints, for these flags: 40 tasks, 90
/// dependencies (72 local, 18 nonlocal over 2 nodes), 43520 FLOPs.
#[test]
fn counts_are_task_bench_s() {
    let out = tessera(&[
        "taskbench",
        "-steps",
        "10",
        "-width",
        "4",
        "-type",
        "stencil_1d",
        "-kernel",
        "compute_bound",
        "-iter",
        "8",
        "-nodes",
        "2",
    ]);
    out.ok();
    let s = &out.stdout;
    assert_eq!(field(s, "Total Tasks"), "40");
    assert_eq!(field(s, "Total Dependencies"), "90");
    assert_eq!(field(s, "Local Dependencies"), "72 (estimated)");
    assert_eq!(field(s, "Nonlocal Dependencies"), "18 (estimated)");
    assert_eq!(field(s, "Total FLOPs"), "43520");
}

#[test]
fn a_corrupted_input_fails_naming_the_task() {
    // Task (timestep 4, point 2) writes a wrong timestep: its readers at
    // timestep 5 (points 1, 2, 3 in a stencil) find it.
    for (workers, frontend) in [
        ("1", "stf"),
        ("2", "stf"),
        ("2", "symbolic"),
        ("1", "light"),
        ("2", "light"),
    ] {
        let out = tessera(&[
            "taskbench",
            "--workers",
            workers,
            "--frontend",
            frontend,
            "--corrupt",
            "1:4:2",
            "-steps",
            "10",
            "-width",
            "5",
            "-type",
            "stencil_1d",
        ]);
        out.refused("corrupted input");
        assert!(
            out.stderr.contains("task (timestep 5, point"),
            "{}",
            out.stderr
        );
        assert!(
            out.stderr
                .contains("holds (timestep 5, point 2), expected (timestep 4, point 2)"),
            "{}",
            out.stderr
        );
    }
    // The same flags without the corruption pass.
    tessera(&[
        "taskbench",
        "-steps",
        "10",
        "-width",
        "5",
        "-type",
        "stencil_1d",
    ])
    .ok();
}

#[test]
fn the_simulated_run_has_the_real_run_s_tasks() {
    let platform = concat!(env!("CARGO_MANIFEST_DIR"), "/platforms/this-machine.toml");
    let flags = [
        "-steps",
        "30",
        "-width",
        "6",
        "-type",
        "nearest",
        "-radix",
        "3",
        "-kernel",
        "compute_bound",
        "-iter",
        "256",
    ];
    let real = tessera(&[&["taskbench"][..], &flags].concat());
    real.ok();
    let sim = tessera(&[&["taskbench", "--simulate", platform][..], &flags].concat());
    sim.ok();
    assert!(sim.stdout.contains("SIMULATED"), "{}", sim.stdout);
    for name in ["Total Tasks", "Total Dependencies", "Total FLOPs"] {
        assert_eq!(
            field(&real.stdout, name),
            field(&sim.stdout, name),
            "{name}"
        );
    }
    // "...; 180 tasks simulated in 0.01 s"
    let line = sim
        .stdout
        .lines()
        .find(|l| l.contains(" tasks simulated"))
        .unwrap();
    let before = &line[..line.find(" tasks simulated").unwrap()];
    let simulated = before.rsplit(' ').next().unwrap();
    assert_eq!(
        simulated,
        field(&real.stdout, "Total Tasks"),
        "{}",
        sim.stdout
    );
}

#[test]
fn bad_flags_are_refused_by_name() {
    for (args, want) in [
        (
            &["taskbench", "-steps", "ten"][..],
            "-steps \"ten\": not a whole number",
        ),
        (
            &["taskbench", "-type", "ring"],
            "no such dependence pattern",
        ),
        (&["taskbench", "-kernel", "io_bound"], "io_bound"),
        (&["taskbench", "-type", "random_spread"], "random_spread"),
        (
            &["taskbench", "-kernel", "memory_bound", "-iter", "2"],
            "-scratch",
        ),
        (&["taskbench", "-type", "fft", "-width", "1"], "-width 2"),
        (
            &["taskbench", "-steps", "3", "--workers", "2"],
            "before Task Bench's flags",
        ),
        (
            &["taskbench", "-type", "stencil_1d_periodic", "-width", "2"],
            "depend twice",
        ),
        (
            &["taskbench", "--corrupt", "1:9:0", "-steps", "3"],
            "no task (9, 0)",
        ),
        (&["taskbench", "-width"], "-width needs a value"),
    ] {
        tessera(args).refused(want);
    }
}

/// The light front-end reuses buffers where the edges order them
/// (`stencil_1d`, `nearest`), refuses a graph whose reused buffers they do
/// not order (`trivial`: two writers with no path between them).
#[test]
fn light_reuses_ordered_buffers_and_refuses_the_others() {
    for (workers, pattern) in [
        ("2", &["-type", "stencil_1d"][..]),
        ("3", &["-type", "nearest", "-radix", "5"]),
    ] {
        let mut args = vec![
            "taskbench",
            "--workers",
            workers,
            "--frontend",
            "light",
            "-steps",
            "40",
            "-width",
            "8",
            "-field",
            "2",
        ];
        args.extend_from_slice(pattern);
        tessera(&args).ok();
    }
    tessera(&[
        "taskbench",
        "--frontend",
        "light",
        "-steps",
        "10",
        "-width",
        "4",
        "-field",
        "2",
        "-type",
        "trivial",
    ])
    .refused("needs every buffer's uses ordered");
}
