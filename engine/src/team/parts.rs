//! Disjoint mutable parts of one buffer for the members of a team: a column-major buffer
//! ([`TeamBuf`]) that members borrow in rectangles of rows × columns
//! ([`Member::part_mut`](super::Member::part_mut), [`Member::part`](super::Member::part)),
//! each request checked against the parts lent at that moment.
//!
//! The spirit is `split_at_mut`'s (and rayon's `par_chunks_mut`, built on it): a `&mut`
//! buffer becomes several `&mut` parts that cannot overlap. `split_at_mut` proves it when
//! the split is made, once; a team kernel re-partitions the same buffer at every phase (rows
//! in one, columns in the next, with a barrier between), so here each part is a lease, like
//! `RefCell::borrow_mut` over a rectangle: granted only if no part lent now overlaps it where
//! either one writes, returned when the part is dropped. A program whose phases are disjoint
//! never sees a refusal; one whose phases overlap gets a [`PartError`] naming both parts,
//! never two `&mut` to one entry.
//!
//! Lifetimes: a part borrows its buffer and the [`Member`](super::Member) that asked for it,
//! and a member exists only inside `Team::run`'s closure, so no part outlives the run; the
//! buffer borrows the data by `&mut`, so nothing but parts reaches the data while it lives.

use std::fmt;
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::Mutex;

use crate::util::lock;

/// A column-major buffer (`rows` × `cols`, leading dimension `rows`) that the members of a
/// team write in disjoint parts. Made from a `&mut` slice outside the team's run, shared by
/// reference with every member; each member borrows its parts with
/// [`Member::part_mut`](super::Member::part_mut) (to write) and
/// [`Member::part`](super::Member::part) (to read). A slice is a buffer of one column.
pub struct TeamBuf<'a, T> {
    /// The first entry of the borrowed slice; entry (`r`, `c`) is at `r + c * rows`.
    ptr: *mut T,
    rows: usize,
    cols: usize,
    /// The parts lent now. Invariant: no two of them overlap where either writes. Taking a
    /// part and returning it both lock this mutex, which also orders a part's accesses
    /// before those of any later part of the same entries.
    lent: Mutex<Lent>,
    _data: PhantomData<&'a mut [T]>,
}

// SAFETY: a `TeamBuf` is an exclusive borrow of a `[T]` (`new` takes it by `&mut` for `'a`);
// moving it to another thread moves that borrow, as for `&mut [T]`, which is `Send` when `T`
// is.
unsafe impl<T: Send> Send for TeamBuf<'_, T> {}
// SAFETY: shared, it hands out `&mut T` on several threads (hence `T: Send`), and `&T` to
// several threads at once through read parts (hence `T: Sync`); the leases keep every `&mut T`
// exclusive.
unsafe impl<T: Send + Sync> Sync for TeamBuf<'_, T> {}

/// The parts a [`TeamBuf`] lends now.
#[derive(Default)]
struct Lent {
    /// The id the next part gets.
    next: u64,
    leases: Vec<Lease>,
}

struct Lease {
    id: u64,
    rank: usize,
    rows: Range<usize>,
    cols: Range<usize>,
    write: bool,
}

/// Why a part was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PartError {
    /// The rectangle is not within the buffer (or a range is reversed).
    OutOfRange {
        /// The rows asked for.
        rows: Range<usize>,
        /// The columns asked for.
        cols: Range<usize>,
        /// The buffer's rows.
        buf_rows: usize,
        /// The buffer's columns.
        buf_cols: usize,
    },
    /// The rectangle overlaps a part lent now, and one of the two writes.
    Overlap {
        /// The member that asked.
        rank: usize,
        /// The rows asked for.
        rows: Range<usize>,
        /// The columns asked for.
        cols: Range<usize>,
        /// Whether the request was to write.
        write: bool,
        /// The member holding the part it overlaps.
        held_by: usize,
        /// That part's rows.
        held_rows: Range<usize>,
        /// That part's columns.
        held_cols: Range<usize>,
        /// Whether that part is held for writing.
        held_write: bool,
    },
}

fn verb(write: bool) -> &'static str {
    if write {
        "writing"
    } else {
        "reading"
    }
}

impl fmt::Display for PartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PartError::OutOfRange {
                rows,
                cols,
                buf_rows,
                buf_cols,
            } => write!(
                f,
                "rows {rows:?} × columns {cols:?} are out of range of a {buf_rows} × {buf_cols} \
                 team buffer"
            ),
            PartError::Overlap {
                rank,
                rows,
                cols,
                write,
                held_by,
                held_rows,
                held_cols,
                held_write,
            } => write!(
                f,
                "member {rank} asked for rows {rows:?} × columns {cols:?} for {}, which overlap \
                 rows {held_rows:?} × columns {held_cols:?} held by member {held_by} for {}",
                verb(*write),
                verb(*held_write)
            ),
        }
    }
}

impl std::error::Error for PartError {}

fn overlaps(a: &Range<usize>, b: &Range<usize>) -> bool {
    a.start.max(b.start) < a.end.min(b.end)
}

impl<'a, T> TeamBuf<'a, T> {
    /// `data` as a `rows` × `cols` column-major matrix (leading dimension `rows`), borrowed
    /// until the buffer is dropped.
    ///
    /// # Panics
    /// If `data.len() != rows * cols`.
    pub fn new(data: &'a mut [T], rows: usize, cols: usize) -> TeamBuf<'a, T> {
        assert!(
            rows.checked_mul(cols) == Some(data.len()),
            "TeamBuf::new: {} entries are not {rows} × {cols}",
            data.len()
        );
        TeamBuf {
            ptr: data.as_mut_ptr(),
            rows,
            cols,
            lent: Mutex::new(Lent::default()),
            _data: PhantomData,
        }
    }

    /// `data` as one column: parts are ranges of it (columns `0..1`).
    pub fn from_slice(data: &'a mut [T]) -> TeamBuf<'a, T> {
        let rows = data.len();
        TeamBuf::new(data, rows, 1)
    }

    /// Rows (the leading dimension).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Lends rows × cols to member `rank`, or says why not.
    fn lease(
        &self,
        rank: usize,
        rows: Range<usize>,
        cols: Range<usize>,
        write: bool,
    ) -> Result<u64, PartError> {
        if rows.start > rows.end
            || rows.end > self.rows
            || cols.start > cols.end
            || cols.end > self.cols
        {
            return Err(PartError::OutOfRange {
                rows,
                cols,
                buf_rows: self.rows,
                buf_cols: self.cols,
            });
        }
        let mut lent = lock(&self.lent);
        if let Some(l) = lent
            .leases
            .iter()
            .find(|l| (write || l.write) && overlaps(&l.rows, &rows) && overlaps(&l.cols, &cols))
        {
            return Err(PartError::Overlap {
                rank,
                rows,
                cols,
                write,
                held_by: l.rank,
                held_rows: l.rows.clone(),
                held_cols: l.cols.clone(),
                held_write: l.write,
            });
        }
        let id = lent.next;
        lent.next += 1;
        lent.leases.push(Lease {
            id,
            rank,
            rows,
            cols,
            write,
        });
        Ok(id)
    }

    /// Takes back the part `id`.
    fn give_back(&self, id: u64) {
        let mut lent = lock(&self.lent);
        if let Some(i) = lent.leases.iter().position(|l| l.id == id) {
            lent.leases.swap_remove(i);
        }
    }

    /// Where entry (`r`, `c`) lies; `r <= rows`, `c < cols` (or the end of the buffer).
    fn entry(&self, r: usize, c: usize) -> *mut T {
        self.ptr.wrapping_add(r + c * self.rows)
    }
}

/// A lease on rows × columns of a buffer, returned when dropped: what [`PartMut`] and
/// [`Part`] hold.
pub(super) struct Held<'p, T> {
    buf: &'p TeamBuf<'p, T>,
    id: u64,
    rows: Range<usize>,
    cols: Range<usize>,
}

impl<'p, T> Held<'p, T> {
    pub(super) fn take(
        buf: &'p TeamBuf<'_, T>,
        rank: usize,
        rows: Range<usize>,
        cols: Range<usize>,
        write: bool,
    ) -> Result<Held<'p, T>, PartError> {
        let id = buf.lease(rank, rows.clone(), cols.clone(), write)?;
        Ok(Held {
            buf,
            id,
            rows,
            cols,
        })
    }

    /// The first of this part's rows of column `c`.
    ///
    /// # Panics
    /// If `c` is not one of the part's columns.
    fn col_start(&self, c: usize) -> *mut T {
        assert!(
            self.cols.contains(&c),
            "column {c} is not one of this part's columns {:?}",
            self.cols
        );
        self.buf.entry(self.rows.start, c)
    }

    /// This part's rows of column `c`.
    ///
    /// # Panics
    /// If `c` is not one of the part's columns.
    fn col(&self, c: usize) -> &[T] {
        let start = self.col_start(c);
        // SAFETY: rows `self.rows` of column `c` lie in the buffer (checked when lent, and
        // `c` by `col_start`); no part lent meanwhile writes them (the lease), and the
        // `&self` borrow keeps a `PartMut`'s own `&mut` accessors from running while the
        // slice lives.
        unsafe { std::slice::from_raw_parts(start, self.rows.len()) }
    }
}

impl<T> Drop for Held<'_, T> {
    fn drop(&mut self) {
        self.buf.give_back(self.id);
    }
}

/// The accessors [`PartMut`] and [`Part`] share (through their `held`).
macro_rules! part_accessors {
    ($part:ident) => {
        impl<T> $part<'_, T> {
            /// The buffer's rows this part holds.
            pub fn rows(&self) -> Range<usize> {
                self.held.rows.clone()
            }

            /// The buffer's columns this part holds.
            pub fn cols(&self) -> Range<usize> {
                self.held.cols.clone()
            }

            /// The buffer's leading dimension (its rows): the distance between columns.
            pub fn ld(&self) -> usize {
                self.held.buf.rows
            }

            /// Column `c` of the buffer (`c` in `cols()`), this part's rows: index 0 is row
            /// `rows().start`.
            ///
            /// # Panics
            /// If `c` is not one of the part's columns.
            pub fn col(&self, c: usize) -> &[T] {
                self.held.col(c)
            }
        }
    };
}

/// Rows × columns of a [`TeamBuf`] that one member writes: no other part lent meanwhile
/// touches them. Returned to the buffer when dropped.
pub struct PartMut<'p, T> {
    pub(super) held: Held<'p, T>,
}

/// Rows × columns of a [`TeamBuf`] that one member reads: no part lent meanwhile writes them.
/// Returned to the buffer when dropped.
pub struct Part<'p, T> {
    pub(super) held: Held<'p, T>,
}

part_accessors!(PartMut);
part_accessors!(Part);

impl<T> PartMut<'_, T> {
    /// Column `c` of the buffer (`c` in [`cols`](PartMut::cols)), this part's rows, writable.
    ///
    /// # Panics
    /// If `c` is not one of the part's columns.
    pub fn col_mut(&mut self, c: usize) -> &mut [T] {
        let start = self.held.col_start(c);
        // SAFETY: in bounds (as in `col`); no part lent meanwhile touches these entries (the
        // lease), and `&mut self` keeps every other accessor of this part away while it lives.
        unsafe { std::slice::from_raw_parts_mut(start, self.held.rows.len()) }
    }

    /// Columns `a` and `b` (distinct, both the part's) of this part's rows, both writable:
    /// `split_at_mut` for two columns.
    ///
    /// # Panics
    /// If `a == b`, or either is not one of the part's columns.
    pub fn col_pair_mut(&mut self, a: usize, b: usize) -> (&mut [T], &mut [T]) {
        assert_ne!(a, b, "PartMut::col_pair_mut: one column asked for twice");
        let (a, b) = (self.held.col_start(a), self.held.col_start(b));
        let n = self.held.rows.len();
        // SAFETY: two columns of this part, in bounds and exclusive as in `col_mut`; distinct
        // columns do not overlap (`ld = rows >= n` apart).
        unsafe {
            (
                std::slice::from_raw_parts_mut(a, n),
                std::slice::from_raw_parts_mut(b, n),
            )
        }
    }

    /// Every column of the part (in [`cols`](PartMut::cols) order), this part's rows, each
    /// writable: `chunks_mut` for columns, without a check per column.
    pub fn cols_mut(&mut self) -> ColsMut<'_, T> {
        let h = &self.held;
        ColsMut {
            next: h.buf.entry(h.rows.start, h.cols.start),
            ld: h.buf.rows,
            rows: h.rows.len(),
            left: h.cols.len(),
            _part: PhantomData,
        }
    }

    /// The part's entries as one slice when they are contiguous (the part holds whole columns,
    /// or one column): column `c`'s rows start at `(c − cols().start) · ld()`.
    pub fn as_mut_slice(&mut self) -> Option<&mut [T]> {
        let h = &self.held;
        let whole = h.rows == (0..h.buf.rows) || h.cols.len() <= 1;
        if h.cols.is_empty() || h.rows.is_empty() {
            return Some(&mut []);
        }
        let len = (h.cols.len() - 1) * h.buf.rows + h.rows.len();
        // SAFETY: the entries from the first to the last of the part, which are the part's
        // alone when it holds whole columns or one column; exclusive as in `col_mut`.
        whole.then(|| unsafe {
            std::slice::from_raw_parts_mut(h.buf.entry(h.rows.start, h.cols.start), len)
        })
    }

    /// The part's first entry (row `rows().start`, column `cols().start`), for a strided view
    /// (`ld()` apart) by a library that takes raw parts; the part must outlive the view.
    pub fn as_mut_ptr(&mut self) -> *mut T {
        self.held
            .buf
            .entry(self.held.rows.start, self.held.cols.start)
    }
}

impl<T> Part<'_, T> {
    /// The part's first entry (row `rows().start`, column `cols().start`), for a strided view
    /// (`ld()` apart) by a library that takes raw parts; the part must outlive the view.
    pub fn as_ptr(&self) -> *const T {
        self.held
            .buf
            .entry(self.held.rows.start, self.held.cols.start)
    }
}

/// The columns of a [`PartMut`], each writable ([`PartMut::cols_mut`]).
pub struct ColsMut<'b, T> {
    /// The next column's first entry of the part.
    next: *mut T,
    ld: usize,
    rows: usize,
    /// Columns not yet yielded.
    left: usize,
    _part: PhantomData<&'b mut T>,
}

impl<'b, T> Iterator for ColsMut<'b, T> {
    type Item = &'b mut [T];

    fn next(&mut self) -> Option<&'b mut [T]> {
        if self.left == 0 {
            return None;
        }
        // SAFETY: the part's rows of one of its columns, in bounds (checked when lent), this
        // part's alone while the part is borrowed for `'b` (its lease and the `&mut` borrow
        // `cols_mut` took); each column is yielded once, and columns `ld >= rows` apart do
        // not overlap.
        let col = unsafe { std::slice::from_raw_parts_mut(self.next, self.rows) };
        self.left -= 1;
        self.next = self.next.wrapping_add(self.ld);
        Some(col)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<T> ExactSizeIterator for ColsMut<'_, T> {}

#[cfg(test)]
mod tests {
    //! Proves that members writing disjoint parts of one buffer (a slice's ranges, a matrix's
    //! rows, then its columns after a barrier) give the sequential result at team sizes 1..4,
    //! and that an overlapping or out-of-range request is refused with a message naming it.
    use super::*;
    use crate::team::{run_threads, share};

    #[test]
    fn disjoint_ranges_of_a_slice() {
        for size in 1..=4 {
            for n in [0, 1, 7, 8, 33] {
                let mut v = vec![0usize; n];
                let buf = TeamBuf::from_slice(&mut v);
                run_threads(size, |m| {
                    let rows = m.share(n, 1);
                    let mut part = m.part_mut(&buf, rows.clone(), 0..1).unwrap();
                    for (x, i) in part.col_mut(0).iter_mut().zip(rows) {
                        *x = 10 * i + m.rank();
                    }
                })
                .unwrap();
                drop(buf);
                let want: Vec<usize> = (0..n)
                    .map(|i| {
                        10 * i
                            + (0..size)
                                .find(|&r| share(n, 1, size, r).contains(&i))
                                .unwrap()
                    })
                    .collect();
                assert_eq!(v, want, "size {size} n {n}");
            }
        }
    }

    #[test]
    fn rows_then_columns_of_a_matrix() {
        // Phase 1: each member sets its rows (in pieces of 3); phase 2, after a barrier,
        // each doubles its columns, every row: the second partition crosses the first.
        let (rows, cols) = (11, 5);
        for size in 1..=4 {
            let mut a = vec![0.0f64; rows * cols];
            let buf = TeamBuf::new(&mut a, rows, cols);
            run_threads(size, |m| {
                {
                    let mine = m.share(rows, 3);
                    let mut part = m.part_mut(&buf, mine.clone(), 0..cols).unwrap();
                    assert_eq!(part.cols_mut().len(), cols);
                    for (c, col) in part.cols_mut().enumerate() {
                        for (x, r) in col.iter_mut().zip(mine.clone()) {
                            *x = (r + 100 * c) as f64;
                        }
                    }
                }
                m.barrier();
                let mine = m.share(cols, 1);
                let mut part = m.part_mut(&buf, 0..rows, mine.clone()).unwrap();
                for x in part.as_mut_slice().unwrap() {
                    *x *= 2.0;
                }
            })
            .unwrap();
            drop(buf);
            for c in 0..cols {
                for r in 0..rows {
                    assert_eq!(a[r + c * rows], 2.0 * (r + 100 * c) as f64, "size {size}");
                }
            }
        }
    }

    #[test]
    fn overlapping_request_is_refused_naming_both_parts() {
        let mut v = vec![0u8; 10];
        let buf = TeamBuf::from_slice(&mut v);
        let e = run_threads(2, |m| {
            let held = (m.rank() == 0).then(|| m.part_mut(&buf, 0..5, 0..1).unwrap());
            m.barrier();
            let e = (m.rank() == 1).then(|| m.part_mut(&buf, 3..8, 0..1).err().unwrap());
            m.barrier();
            drop(held);
            m.all_reduce(e, |a, b| a.or(b))
        })
        .unwrap()
        .unwrap();
        assert_eq!(
            e,
            PartError::Overlap {
                rank: 1,
                rows: 3..8,
                cols: 0..1,
                write: true,
                held_by: 0,
                held_rows: 0..5,
                held_cols: 0..1,
                held_write: true,
            }
        );
        assert_eq!(
            e.to_string(),
            "member 1 asked for rows 3..8 × columns 0..1 for writing, which overlap rows 0..5 \
             × columns 0..1 held by member 0 for writing"
        );
    }

    #[test]
    fn reads_share_and_writes_exclude() {
        let mut a = vec![1.0f64; 12];
        let buf = TeamBuf::new(&mut a, 4, 3);
        run_threads(1, |m| {
            let r1 = m.part(&buf, 0..4, 0..2).unwrap();
            let r2 = m.part(&buf, 2..4, 1..3).unwrap();
            assert_eq!(r1.col(1), &[1.0; 4]);
            let e = m.part_mut(&buf, 3..4, 2..3).err().unwrap().to_string();
            assert!(e.ends_with("held by member 0 for reading"), "{e}");
            // Touching corners only: no shared entry.
            let w = m.part_mut(&buf, 0..2, 2..3).unwrap();
            let e = m.part(&buf, 1..2, 2..3).err().unwrap().to_string();
            assert!(
                e.contains("for reading, which overlap rows 0..2 × columns 2..3"),
                "{e}"
            );
            assert!(e.ends_with("for writing"), "{e}");
            drop((r1, r2, w));
            // Every part returned: the whole buffer is free.
            let mut all = m.part_mut(&buf, 0..4, 0..3).unwrap();
            let (x, y) = all.col_pair_mut(0, 2);
            x[0] = 5.0;
            y[3] = 7.0;
        })
        .unwrap();
        drop(buf);
        assert_eq!((a[0], a[11]), (5.0, 7.0));
    }

    #[test]
    fn out_of_range_request_is_refused() {
        let mut v = vec![0u8; 10];
        let buf = TeamBuf::from_slice(&mut v);
        run_threads(1, |m| {
            for (rows, cols) in [(0..11, 0..1), (5..12, 0..1), (0..3, 0..2), (1..3, 1..2)] {
                let e = m.part_mut(&buf, rows.clone(), cols.clone()).err().unwrap();
                assert_eq!(
                    e.to_string(),
                    format!(
                        "rows {rows:?} × columns {cols:?} are out of range of a 10 × 1 team buffer"
                    )
                );
            }
            #[allow(clippy::reversed_empty_ranges)]
            let e = m.part(&buf, 6..4, 0..1).err().unwrap();
            assert!(matches!(e, PartError::OutOfRange { .. }), "{e}");
            // Empty parts within range are granted and overlap nothing.
            let _all = m.part_mut(&buf, 0..10, 0..1).unwrap();
            m.part_mut(&buf, 4..4, 0..1).unwrap();
        })
        .unwrap();
    }

    #[test]
    #[should_panic(expected = "column 1 is not one of this part's columns 0..1")]
    fn a_column_outside_the_part_panics() {
        let mut a = vec![0u8; 4];
        let buf = TeamBuf::new(&mut a, 2, 2);
        let e = run_threads(1, |m| {
            m.part_mut(&buf, 0..2, 0..1).unwrap().col_mut(1)[0] = 1;
        });
        panic!("{}", e.unwrap_err());
    }
}
