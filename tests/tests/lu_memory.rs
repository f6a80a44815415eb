//! Proves an LU run's heap stays bounded by its data, not by its task count:
//! `tessera lu --n 256 --nb 1` (5.6 M tasks on 65,536 one-element tiles)
//! grew to 1.9 GB (issue 17). A counting allocator measures the peak of live
//! heap bytes while tiny-tile factorisations run.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tessera_engine::{Config, Runtime};
use tessera_linalg::hpl::generate_matrix;
use tessera_linalg::lu::{lu_factor, Front, LuOptions};
use tessera_tests::with_timeout;

/// The system allocator, counting live bytes and their peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator; the counters are plain atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded to the caller's contract.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded to the caller's contract.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded to the caller's contract.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                let now = LIVE.fetch_add(new_size - layout.size(), Ordering::Relaxed) + new_size
                    - layout.size();
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The tests of this file share the counters: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Peak live heap bytes above the level at the start, while `f` runs.
fn peak_during(f: impl FnOnce()) -> usize {
    let base = LIVE.load(Ordering::SeqCst);
    PEAK.store(base, Ordering::SeqCst);
    f();
    PEAK.load(Ordering::SeqCst).saturating_sub(base)
}

/// Before the fix a dead reader stayed in the readers list of each tile
/// that is never written again (`U`'s tiles), and its `Weak` kept its whole
/// task allocation: 15 KB of heap per tile at n = 96 (141 MB, every task of
/// the run), with either front-end. Now the heap is the tiles, their
/// handles and one remembered writer each: about 2 KB per one-element tile.
#[test]
fn tiny_tile_lu_heap_is_bounded_by_its_tiles() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    with_timeout(Duration::from_secs(120), || {
        let n = 96; // 9,216 tiles, 295 k tasks
        let per_tile = 4096;
        for front in [Front::Symbolic, Front::Stf] {
            let rt =
                Runtime::new(Config::with_workers(2).scheduler("prio".parse().unwrap())).unwrap();
            let a = generate_matrix(n, 1, 7);
            let peak = peak_during(|| {
                lu_factor(&rt, a, &LuOptions::new(front)).unwrap();
            });
            assert!(
                peak < per_tile * n * n,
                "{front:?}: peak heap {peak} bytes for {} tiles: more than {per_tile} per tile",
                n * n
            );
        }
    });
}

/// Task Bench's default gives every timestep its own output buffer: each
/// handle is written once and never again. Its record of that last writer
/// kept the finished task's whole allocation (a `Weak`), so the heap grew by
/// a task node per task and every submission took fresh memory. Now a
/// finished writer leaves only its id, and the node is reused: the heap
/// while 20,000 such tasks run in batches stays far below a node per task.
#[test]
fn data_written_once_does_not_keep_its_writer() {
    use tessera_engine::{Codelet, Read, Task, Write};
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    with_timeout(Duration::from_secs(60), || {
        let (tasks, batch) = (20_000, 100);
        let rt = Runtime::new(Config::with_workers(2)).unwrap();
        let handles: Vec<_> = (0..=tasks).map(|i| rt.register(i as u64)).collect();
        let cl = Codelet::<(Read<u64>, Write<u64>)>::new("step").cpu(|_, _, (before, out)| {
            *out = *before + 1;
            Ok(())
        });
        let peak = peak_during(|| {
            for b in (0..tasks).step_by(batch) {
                for i in b..b + batch {
                    rt.submit(Task::new(&cl, (handles[i].r(), handles[i + 1].w())))
                        .unwrap();
                }
                rt.wait_all().unwrap();
            }
        });
        // A task node is 384 bytes: kept, 20,000 of them were 8.8 MB of
        // peak. Reused, what remains is per handle (its readers' list, 64
        // bytes), a batch's nodes and the node pool: 1.3 MB.
        assert!(
            peak < 3 << 20,
            "peak heap {peak} bytes while {tasks} tasks ran: their nodes were kept"
        );
        drop(handles);
    });
}
