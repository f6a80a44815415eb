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

/// The program for `t` blocks, with or without look-ahead.
pub fn plan(t: usize, lookahead: bool) -> Plan {
    let mut b = Builder {
        t,
        ops: Vec::new(),
        events: 0,
        up: Vec::new(),
    };
    if t == 0 {
        return Plan {
            t,
            ops: b.ops,
            events: b.events,
            lookahead,
        };
    }
    let panel_stream = if lookahead {
        Stream::Panel
    } else {
        Stream::Update
    };
    // Panel 0, and block 0 home as soon as it is done.
    b.wait_upload(panel_stream, 0);
    b.push(panel_stream, Op::Panel(0));
    let mut panel_done = b.record(panel_stream);
    b.push(Stream::CopyOut, Op::Wait(panel_done));
    b.push(Stream::CopyOut, Op::Download(0));
    // The update stream's last step, which the look-ahead waits for.
    let mut trailing_done: Option<usize> = None;
    for k in 0..t {
        if lookahead {
            let next_panel = (k + 1 < t).then(|| {
                // Block k+1: updated by step k-1 on the update stream.
                let s = Stream::Panel;
                match trailing_done {
                    Some(e) => b.push(s, Op::Wait(e)),
                    None => b.wait_upload(s, k + 1),
                }
                b.update(s, k, k + 1..k + 2);
                b.push(s, Op::Panel(k + 1));
                b.record(s)
            });
            if k + 2 < t {
                let s = Stream::Update;
                b.push(s, Op::Wait(panel_done));
                if k == 0 {
                    b.first_update(s, 2..t);
                } else {
                    b.update(s, k, k + 2..t);
                }
                trailing_done = Some(b.record(s));
            } else {
                trailing_done = None;
            }
            if let Some(e) = next_panel {
                panel_done = e;
                b.push(Stream::CopyOut, Op::Wait(e));
                b.push(Stream::CopyOut, Op::Download(k + 1));
            }
        } else if k + 1 < t {
            let s = Stream::Update;
            if k == 0 {
                b.first_update(s, 1..t);
            } else {
                b.update(s, k, k + 1..t);
            }
            b.push(s, Op::Panel(k + 1));
            let e = b.record(s);
            b.push(Stream::CopyOut, Op::Wait(e));
            b.push(Stream::CopyOut, Op::Download(k + 1));
        }
    }
    Plan {
        t,
        ops: b.ops,
        events: b.events,
        lookahead,
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
            Op::Wait(e) => {
                if !recorded.get(e).copied().unwrap_or(false) {
                    return Err(format!(
                        "op {i} ({s:?}): waits for event {e} before its record"
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(())
}
