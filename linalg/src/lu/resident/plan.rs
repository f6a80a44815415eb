//! The device-resident LU as a stream program: which operation goes on
//! which stream, and which events order the streams. Pure: the CUDA
//! executor issues it, the emulated executor runs it in an adversarial
//! order, the race check proves it, and the predictor times it.
//!
//! Blocks are the LU's tile columns (`nb` wide, the last one narrower);
//! "rows from `k`" means tile rows `k..t`. Per step `k`:
//! - `Panel(k)`: factor rows from `k` of block `k` (pivots stay on the
//!   device);
//! - `Swap/Trsm/Gemm { k, cols }`: step `k`'s interchanges, triangular
//!   solve and trailing product on the blocks `cols`, one call each.
//!
//! With look-ahead (HPL's depth 1, on two compute streams): the panel
//! stream updates block `k+1` with panel `k` and factors panel `k+1` while
//! the update stream runs step `k` on blocks `k+2..`. Without it every
//! computation is on the update stream in LAPACK order. Either way block
//! `j` goes up on the copy-in stream, issued a little ahead of its first
//! use (step 0 updates each block as soon as it has arrived) and comes home on the copy-out stream as soon as panel
//! `j` is done: in HPL's layout nothing writes block `j` after its panel.

use std::ops::Range;

/// The four streams (their indices are the CUDA executor's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stream {
    /// Host → device copies.
    CopyIn = 0,
    /// Look-ahead and panels (the device's highest priority).
    Panel = 1,
    /// Trailing updates.
    Update = 2,
    /// Device → host copies.
    CopyOut = 3,
}

/// Every stream, in index order.
pub const STREAMS: [Stream; 4] = [
    Stream::CopyIn,
    Stream::Panel,
    Stream::Update,
    Stream::CopyOut,
];

/// One operation of the program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Block `j` from the host.
    Upload(usize),
    /// Factor rows from `k` of block `k`.
    Panel(usize),
    /// Apply panel `k`'s pivots to rows from `k` of blocks `cols`.
    Swap { k: usize, cols: Range<usize> },
    /// Tile row `k` of blocks `cols` := `L(k,k)⁻¹ ·` itself.
    Trsm { k: usize, cols: Range<usize> },
    /// Rows from `k+1` of blocks `cols` −= `L(k+1.., k) · U(k, cols)`.
    Gemm { k: usize, cols: Range<usize> },
    /// Block `j` home.
    Download(usize),
    /// Record event `e` on the stream.
    Record(usize),
    /// The stream waits for event `e`.
    Wait(usize),
}

impl Op {
    /// Short name, as in traces and the timing summary.
    pub fn kind(&self) -> &'static str {
        match self {
            Op::Upload(_) => "upload",
            Op::Panel(_) => "panel",
            Op::Swap { .. } => "swap",
            Op::Trsm { .. } => "trsm",
            Op::Gemm { .. } => "gemm",
            Op::Download(_) => "download",
            Op::Record(_) => "record",
            Op::Wait(_) => "wait",
        }
    }

    /// Whether the operation does work (not an event).
    pub fn is_work(&self) -> bool {
        !matches!(self, Op::Record(_) | Op::Wait(_))
    }
}

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Op::Upload(j) => write!(f, "upload({j})"),
            Op::Panel(k) => write!(f, "panel({k})"),
            Op::Swap { k, cols } => write!(f, "swap({k},{}..{})", cols.start, cols.end),
            Op::Trsm { k, cols } => write!(f, "trsm({k},{}..{})", cols.start, cols.end),
            Op::Gemm { k, cols } => write!(f, "gemm({k},{}..{})", cols.start, cols.end),
            Op::Download(j) => write!(f, "download({j})"),
            Op::Record(e) => write!(f, "record(e{e})"),
            Op::Wait(e) => write!(f, "wait(e{e})"),
        }
    }
}

/// A stream program over `t` blocks, in issue order.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Tile columns (and rows).
    pub t: usize,
    /// Operations in the order they are issued.
    pub ops: Vec<(Stream, Op)>,
    /// Events used (ids `0..events`).
    pub events: usize,
    /// Whether the panel stream looks ahead.
    pub lookahead: bool,
}

/// Uploads are issued this many blocks ahead of the first operation that
/// needs them. Issue order matters to the host only (the streams run
/// apart), and issuing a block's copies takes the host a good part of the
/// time they take the link (about 7.7 of 10.4 ms per 1024-wide block on an
/// H200 node): issued all at once, they held panel 0 back by half a second.
const UPLOAD_AHEAD: usize = 2;

struct Builder {
    t: usize,
    ops: Vec<(Stream, Op)>,
    events: usize,
    /// The event recorded after each block's upload, for the blocks issued.
    up: Vec<usize>,
}

impl Builder {
    fn push(&mut self, s: Stream, op: Op) {
        self.ops.push((s, op));
    }

    /// Records a new event on `s`; returns its id.
    fn record(&mut self, s: Stream) -> usize {
        let e = self.events;
        self.events += 1;
        self.push(s, Op::Record(e));
        e
    }

    /// Issues the uploads of blocks up to `j + UPLOAD_AHEAD` not yet issued.
    fn upload_through(&mut self, j: usize) {
        while self.up.len() < self.t.min(j + UPLOAD_AHEAD + 1) {
            self.push(Stream::CopyIn, Op::Upload(self.up.len()));
            let e = self.record(Stream::CopyIn);
            self.up.push(e);
        }
    }

    /// Makes `s` wait for block `j`'s upload (issuing it first if needed).
    fn wait_upload(&mut self, s: Stream, j: usize) {
        self.upload_through(j);
        self.push(s, Op::Wait(self.up[j]));
    }

    /// Step `k`'s update of `cols` on `s`, one call of each kind.
    fn update(&mut self, s: Stream, k: usize, cols: Range<usize>) {
        self.push(
            s,
            Op::Swap {
                k,
                cols: cols.clone(),
            },
        );
        self.push(
            s,
            Op::Trsm {
                k,
                cols: cols.clone(),
            },
        );
        self.push(s, Op::Gemm { k, cols });
    }

    /// Step 0's update of `cols` on `s`, block by block as each arrives.
    fn first_update(&mut self, s: Stream, cols: Range<usize>) {
        for j in cols {
            self.wait_upload(s, j);
            self.update(s, 0, j..j + 1);
        }
    }
}

/// Steps each block is updated by as soon as it arrives, before the
/// right-looking steps start (look-ahead plans). The first steps' trailing
/// updates span the whole matrix, so they wait for its last block: while
/// the matrix goes up (0.66 s for 32 GiB on an H200 node) the update stream
/// had only step 0's share of each block to do and sat idle 0.37 s of it
/// (`bench/results/h200-stop46/r2`). Two steps per arriving block keep it busier; past that, a
/// block's arrival updates take longer than its upload (with 2048-wide
/// blocks: about 10 ms of GEMM per step against 20 ms of copy).
pub const STEPS_ON_ARRIVAL: usize = 2;

/// The program for `t` blocks, with or without look-ahead.
pub fn plan(t: usize, lookahead: bool) -> Plan {
    plan_with(t, lookahead, STEPS_ON_ARRIVAL)
}

/// [`plan`] with `arrival` steps on each arriving block (look-ahead plans;
/// at least 1).
pub fn plan_with(t: usize, lookahead: bool, arrival: usize) -> Plan {
    let mut b = Builder {
        t,
        ops: Vec::new(),
        events: 0,
        up: Vec::new(),
    };
    if t > 0 {
        if lookahead {
            looking_ahead(&mut b, arrival.max(1));
        } else {
            lapack_order(&mut b);
        }
    }
    Plan {
        t,
        ops: b.ops,
        events: b.events,
        lookahead,
    }
}

/// Two compute streams. Block `j`, as it arrives, gets steps
/// `0..min(j, arrival)` on the update stream; blocks `1..=arrival` are then
/// ready for their panels, which the panel stream factors as each is. From
/// step `arrival` on, right-looking with depth-1 look-ahead: the panel
/// stream updates block `k+1` with panel `k` and factors panel `k+1` while
/// the update stream runs step `k` on blocks `k+2..`.
fn looking_ahead(b: &mut Builder, arrival: usize) {
    let t = b.t;
    let (p, u, d) = (Stream::Panel, Stream::Update, Stream::CopyOut);
    let mut panel_done = vec![usize::MAX; t];
    // Panel k on the panel stream, and block k home as soon as it is done.
    let panel = |b: &mut Builder, k: usize, done: &mut [usize]| {
        b.push(p, Op::Panel(k));
        done[k] = b.record(p);
        b.push(d, Op::Wait(done[k]));
        b.push(d, Op::Download(k));
    };
    b.wait_upload(p, 0);
    panel(b, 0, &mut panel_done);
    // The panels the update stream has waited for.
    let mut waited = 0;
    let wait_panel = |b: &mut Builder, k: usize, waited: &mut usize, done: &[usize]| {
        if k >= *waited {
            b.push(u, Op::Wait(done[k]));
            *waited = k + 1;
        }
    };
    for j in 1..t {
        b.wait_upload(u, j);
        for k in 0..j.min(arrival) {
            wait_panel(b, k, &mut waited, &panel_done);
            b.update(u, k, j..j + 1);
        }
        if j <= arrival {
            let ready = b.record(u);
            b.push(p, Op::Wait(ready));
            panel(b, j, &mut panel_done);
        }
    }
    // Every block has had its arrival steps.
    let mut trailing_done = b.record(u);
    for k in arrival..t {
        if k + 1 < t {
            // Block k+1 has every step before k (the update stream's).
            b.push(p, Op::Wait(trailing_done));
            b.update(p, k, k + 1..k + 2);
            panel(b, k + 1, &mut panel_done);
        }
        if k + 2 < t {
            wait_panel(b, k, &mut waited, &panel_done);
            b.update(u, k, k + 2..t);
            trailing_done = b.record(u);
        }
    }
}

/// One compute stream, LAPACK's order: panel `k`, then step `k` on every
/// block right of it (step 0 block by block as each arrives).
fn lapack_order(b: &mut Builder) {
    let t = b.t;
    let (u, d) = (Stream::Update, Stream::CopyOut);
    b.wait_upload(u, 0);
    for k in 0..t {
        b.push(u, Op::Panel(k));
        let e = b.record(u);
        b.push(d, Op::Wait(e));
        b.push(d, Op::Download(k));
        if k + 1 < t {
            if k == 0 {
                b.first_update(u, 1..t);
            } else {
                b.update(u, k, k + 1..t);
            }
        }
    }
}

/// Checks what CUDA's event semantics need of the issue order: every event
/// is recorded exactly once, and before any wait on it (a wait issued
/// before its record waits for nothing).
pub fn check_events(plan: &Plan) -> Result<(), String> {
    let mut recorded = vec![false; plan.events];
    for (i, (s, op)) in plan.ops.iter().enumerate() {
        match *op {
            Op::Record(e) => {
                let slot = recorded
                    .get_mut(e)
                    .ok_or_else(|| format!("op {i} ({s:?}): event {e} of {}", plan.events))?;
                if *slot {
                    return Err(format!("op {i} ({s:?}): event {e} recorded twice"));
                }
                *slot = true;
            }
            Op::Wait(e) if !recorded.get(e).copied().unwrap_or(false) => {
                return Err(format!(
                    "op {i} ({s:?}): waits for event {e} before its record"
                ));
            }
            _ => {}
        }
    }
    Ok(())
}
