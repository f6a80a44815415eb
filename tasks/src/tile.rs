//! Tiles: column-major, 64-byte-aligned blocks of `f64`, the unit of data that kernels work on.
//!
//! A [`Tile`] owns its buffer (like a `Vec<f64>` with a stronger alignment) and hands out
//! faer views over it. The leading dimension is always `rows`: a tile is contiguous, so the
//! runtime can move it as one block and a device can copy it with one transfer.

use std::alloc::{self, Layout};
use std::fmt;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use tessera_engine::device::{DevSlice, DevSliceMut, DeviceParts};

/// Alignment of every tile buffer, in bytes: one cache line, and one AVX-512 register.
pub const TILE_ALIGN: usize = 64;

/// A dense `rows × cols` block of `f64`, column-major with leading dimension `rows`.
pub struct Tile {
    rows: usize,
    cols: usize,
    /// Start of `rows * cols` initialised `f64`s, aligned to [`TILE_ALIGN`]. When the tile is
    /// empty it is a dangling, aligned pointer that owns nothing.
    ptr: NonNull<f64>,
    /// Where the buffer goes when the tile is dropped (a [`TilePool`]'s tiles), instead of
    /// back to the allocator.
    pool: Option<Arc<TilePool>>,
}

/// The allocation a tile asked for could not be made: it overflows `usize` or the allocator
/// refused it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TileAllocError {
    /// Requested number of rows.
    pub rows: usize,
    /// Requested number of columns.
    pub cols: usize,
}

impl fmt::Display for TileAllocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cannot allocate a {}x{} tile of f64",
            self.rows, self.cols
        )
    }
}

impl std::error::Error for TileAllocError {}

/// Stands in for the address of an empty tile: `NonNull::dangling` of a type aligned like
/// a tile buffer, so even empty tiles satisfy the alignment invariant.
#[repr(C, align(64))]
struct AlignedBlock {
    _bytes: [u8; TILE_ALIGN],
}

const _: () = assert!(std::mem::align_of::<AlignedBlock>() == TILE_ALIGN);

fn layout_for(len: usize) -> Option<Layout> {
    Layout::array::<f64>(len).ok()?.align_to(TILE_ALIGN).ok()
}

impl Tile {
    /// A `rows × cols` tile of zeros.
    ///
    /// # Panics
    /// If `rows * cols` overflows; aborts through [`alloc::handle_alloc_error`] if the
    /// allocator refuses. Use [`Tile::try_zeros`] to get an `Err` instead.
    pub fn zeros(rows: usize, cols: usize) -> Self {
        match Self::try_zeros(rows, cols) {
            Ok(tile) => tile,
            Err(e) => match rows.checked_mul(cols).and_then(layout_for) {
                Some(layout) => alloc::handle_alloc_error(layout),
                None => panic!("{e}"),
            },
        }
    }

    /// A `rows × cols` tile of zeros.
    ///
    /// # Errors
    /// [`TileAllocError`] if `rows * cols` entries overflow `usize` or `isize::MAX` bytes, or
    /// the allocator refuses them.
    pub fn try_zeros(rows: usize, cols: usize) -> Result<Self, TileAllocError> {
        let err = TileAllocError { rows, cols };
        let len = rows.checked_mul(cols).ok_or(err)?;
        if len == 0 {
            return Ok(Self {
                rows,
                cols,
                ptr: NonNull::<AlignedBlock>::dangling().cast(),
                pool: None,
            });
        }
        let layout = layout_for(len).ok_or(err)?;
        // SAFETY: `layout` has a non-zero size because `len > 0` and `f64` is not a ZST.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw.cast::<f64>()).ok_or(err)?;
        Ok(Self {
            rows,
            cols,
            ptr,
            pool: None,
        })
    }

    /// A tile holding a copy of `data`, read column-major with leading dimension `rows`.
    ///
    /// # Panics
    /// If `data.len() != rows * cols`.
    pub fn from_col_major(rows: usize, cols: usize, data: &[f64]) -> Self {
        assert_eq!(
            data.len(),
            rows * cols,
            "Tile::from_col_major: {rows}x{cols} tile, {} values",
            data.len()
        );
        let mut tile = Self::zeros(rows, cols);
        tile.as_mut_slice().copy_from_slice(data);
        tile
    }

    /// Number of rows (also the leading dimension).
    #[inline]
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of columns.
    #[inline]
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Number of entries, `rows * cols`.
    #[inline]
    pub fn len(&self) -> usize {
        self.rows * self.cols
    }

    /// Whether the tile holds no entry.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entries, column-major.
    #[inline]
    pub fn as_slice(&self) -> &[f64] {
        // SAFETY: `ptr` is non-null and aligned, and points to `len()` initialised `f64`s that
        // this tile owns (or to nothing when `len() == 0`); `&self` forbids writes meanwhile.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len()) }
    }

    /// The entries, column-major, writable.
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [f64] {
        // SAFETY: as in `as_slice`, and `&mut self` makes this the only access to the buffer.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len()) }
    }

    /// Column `j`, contiguous.
    #[inline]
    pub fn col(&self, j: usize) -> &[f64] {
        &self.as_slice()[j * self.rows..(j + 1) * self.rows]
    }

    /// Column `j`, contiguous and writable.
    #[inline]
    pub fn col_mut(&mut self, j: usize) -> &mut [f64] {
        let rows = self.rows;
        &mut self.as_mut_slice()[j * rows..(j + 1) * rows]
    }

    /// A faer view of the tile.
    #[inline]
    pub fn as_ref(&self) -> faer::MatRef<'_, f64> {
        faer::MatRef::from_column_major_slice(self.as_slice(), self.rows, self.cols)
    }

    /// A writable faer view of the tile.
    #[inline]
    pub fn as_mut(&mut self) -> faer::MatMut<'_, f64> {
        let (rows, cols) = (self.rows, self.cols);
        faer::MatMut::from_column_major_slice_mut(self.as_mut_slice(), rows, cols)
    }
}

impl Default for Tile {
    /// The empty `0 × 0` tile; it allocates nothing, so `std::mem::take` on a tile is free.
    fn default() -> Self {
        Self::zeros(0, 0)
    }
}

impl Clone for Tile {
    fn clone(&self) -> Self {
        let mut copy = Self::zeros(self.rows, self.cols);
        copy.as_mut_slice().copy_from_slice(self.as_slice());
        copy
    }
}

impl Drop for Tile {
    fn drop(&mut self) {
        let len = self.len();
        if len == 0 {
            return;
        }
        if let Some(pool) = self.pool.take() {
            if pool.keep(len, self.ptr) {
                return;
            }
        }
        // SAFETY: a non-empty tile's `ptr` came from `alloc_zeroed` with `layout_for(len)`
        // (same `len`, since `rows` and `cols` never change; a pooled buffer keeps the `len`
        // it was made with) and is freed only here or by the pool that kept it.
        unsafe { free_buffer(self.ptr, len) }
    }
}

/// Free a tile buffer of `len > 0` entries.
///
/// # Safety
/// `ptr` came from `alloc_zeroed(layout_for(len))` and is not used afterwards.
unsafe fn free_buffer(ptr: NonNull<f64>, len: usize) {
    let layout = layout_for(len).expect("layout was valid at allocation");
    // SAFETY: forwarded to the caller.
    unsafe { alloc::dealloc(ptr.as_ptr().cast(), layout) }
}

/// Buffers of dropped tiles, kept for new tiles of the same size.
///
/// For tiles made in the middle of a run, such as a distributed LU's copies of other ranks'
/// tiles: a new buffer is fresh memory, whose first touch costs a page fault per 4 KiB
/// (measured 1.7 µs a page on the 2-core VM, where writing a mapped page costs 0.35 µs; a
/// 448×448 tile has 392 pages). [`reserve`](Self::reserve) makes and touches the buffers
/// at set-up instead, and buffers of dropped tiles are kept for the next ones (glibc gives
/// such blocks back to the kernel above its `mmap` threshold, or keeps them in the arena of
/// the thread that allocated them, so it does not reuse them reliably).
///
/// A pooled tile's entries are unspecified (an old tile's, or zeros): the caller overwrites
/// them all. Invariant: every kept buffer was allocated by a tile with `layout_for(len)` for
/// the `len` it is kept under, and holds `len` initialised `f64`s.
pub struct TilePool {
    free: Mutex<Vec<(usize, NonNull<f64>)>>,
    /// Buffers kept at most.
    max_kept: usize,
}

// SAFETY: the pool owns the buffers it keeps (no one else refers to them), like a
// `Vec<Vec<f64>>`; all access goes through the mutex.
unsafe impl Send for TilePool {}
// SAFETY: see `Send`.
unsafe impl Sync for TilePool {}

impl TilePool {
    /// A pool keeping at most `max_kept` buffers.
    pub fn new(max_kept: usize) -> Arc<TilePool> {
        Arc::new(TilePool {
            free: Mutex::new(Vec::new()),
            max_kept,
        })
    }

    /// A `rows × cols` tile whose buffer comes from the pool when one of that size is kept
    /// (its entries are then unspecified: an old tile's, zeros, or NaN in debug builds), else
    /// a new tile of zeros; either way its buffer comes back here when it is dropped.
    ///
    /// # Panics
    /// As [`Tile::zeros`].
    pub fn tile(self: &Arc<Self>, rows: usize, cols: usize) -> Tile {
        let len = rows
            .checked_mul(cols)
            .unwrap_or_else(|| panic!("{}", TileAllocError { rows, cols }));
        let kept = {
            let mut free = self.free();
            free.iter()
                .position(|&(l, _)| l == len)
                .map(|i| free.swap_remove(i).1)
        };
        match kept {
            Some(ptr) => {
                let mut t = Tile {
                    rows,
                    cols,
                    ptr,
                    pool: Some(Arc::clone(self)),
                };
                // Debug builds (the tests) poison a reused buffer, so a caller that reads
                // before overwriting computes NaNs instead of passing by luck.
                if cfg!(debug_assertions) {
                    t.as_mut_slice().fill(f64::NAN);
                }
                t
            }
            None => {
                let mut t = Tile::zeros(rows, cols);
                if len > 0 {
                    t.pool = Some(Arc::clone(self));
                }
                t
            }
        }
    }

    /// Make a `rows × cols` buffer now and keep it (unless the pool is full), its pages
    /// touched: a later [`tile`](Self::tile) of that size then costs neither an allocation
    /// nor page faults. For set-up time (HPL allocates its work space before its timer
    /// starts too).
    pub fn reserve(&self, rows: usize, cols: usize) {
        let mut t = std::mem::ManuallyDrop::new(Tile::zeros(rows, cols));
        let len = t.len();
        if len == 0 {
            return;
        }
        // `alloc_zeroed` may hand out pages the kernel has not mapped yet.
        tessera_engine::memory::touch_pages(t.as_mut_slice());
        if !self.keep(len, t.ptr) {
            // SAFETY: the tile was made by `Tile::zeros` (so with `layout_for(len)`), is
            // never dropped (`ManuallyDrop`) and owns no pool; its buffer is freed once, here.
            unsafe { free_buffer(t.ptr, len) }
        }
    }

    /// Buffers kept now.
    pub fn kept(&self) -> usize {
        self.free().len()
    }

    /// The kept buffers, locked (a panic elsewhere leaves them as they were).
    fn free(&self) -> std::sync::MutexGuard<'_, Vec<(usize, NonNull<f64>)>> {
        tessera_engine::util::lock(&self.free)
    }

    /// Keep a dropped tile's buffer of `len > 0` entries; `false` when the pool is full
    /// (the caller frees it).
    fn keep(&self, len: usize, ptr: NonNull<f64>) -> bool {
        let mut free = self.free();
        if free.len() >= self.max_kept {
            return false;
        }
        free.push((len, ptr));
        true
    }
}

impl Drop for TilePool {
    fn drop(&mut self) {
        let free = std::mem::take(self.free.get_mut().unwrap_or_else(|e| e.into_inner()));
        for (len, ptr) in free {
            // SAFETY: the pool's invariant; it owned the buffer, and is gone.
            unsafe { free_buffer(ptr, len) }
        }
    }
}

// SAFETY: a `Tile` owns its buffer exclusively, like `Vec<f64>`; no interior mutability,
// so moving it to or sharing `&Tile` with another thread is as safe as for `Vec<f64>`.
unsafe impl Send for Tile {}
// SAFETY: see `Send`; shared access only reads.
unsafe impl Sync for Tile {}

impl PartialEq for Tile {
    /// Same shape and bitwise-equal-as-`f64` entries (`NaN != NaN`, as for slices).
    fn eq(&self, other: &Self) -> bool {
        self.rows == other.rows && self.cols == other.cols && self.as_slice() == other.as_slice()
    }
}

impl fmt::Debug for Tile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Tiles are large; print the shape, and the entries only for small ones.
        let mut s = f.debug_struct("Tile");
        s.field("rows", &self.rows).field("cols", &self.cols);
        if self.len() <= 64 {
            s.field("data", &self.as_slice());
        }
        s.finish()
    }
}

/// Tiles move between memory nodes as whole buffers.
impl tessera_engine::memory::Replicate for Tile {
    fn bytes(&self) -> usize {
        self.len() * std::mem::size_of::<f64>()
    }

    fn replicate(&self) -> Self {
        self.clone()
    }

    fn copy_from(&mut self, src: &Self) {
        assert!(
            self.rows() == src.rows() && self.cols() == src.cols(),
            "replica shapes differ"
        );
        self.as_mut_slice().copy_from_slice(src.as_slice());
    }

    fn parts(&self) -> Option<Vec<&[u8]>> {
        Some(vec![bytemuck::cast_slice(self.as_slice())])
    }

    fn parts_mut(&mut self) -> Option<Vec<&mut [u8]>> {
        Some(vec![bytemuck::cast_slice_mut(self.as_mut_slice())])
    }

    fn one_part(&self) -> Option<&[u8]> {
        Some(bytemuck::cast_slice(self.as_slice()))
    }

    fn one_part_mut(&mut self) -> Option<&mut [u8]> {
        Some(bytemuck::cast_slice_mut(self.as_mut_slice()))
    }

    /// Rows and columns.
    fn dims(&self) -> [usize; 4] {
        [self.rows, self.cols, 0, 0]
    }
}

/// A tile in a device's own memory, read-only: `rows × cols`, column-major,
/// leading dimension `rows`.
#[derive(Clone, Copy, Debug)]
pub struct DevTile<'a> {
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// The `rows * cols` entries.
    pub data: DevSlice<'a, f64>,
}

/// A tile in a device's own memory that a task may write.
#[derive(Debug)]
pub struct DevTileMut<'a> {
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// The `rows * cols` entries, writable.
    pub data: DevSliceMut<'a, f64>,
}

impl tessera_engine::memory::DeviceData for Tile {
    type Ref<'a> = DevTile<'a>;
    type Mut<'a> = DevTileMut<'a>;

    fn view(mut parts: DeviceParts<'_>) -> Result<DevTile<'_>, String> {
        let [rows, cols, ..] = parts.dims();
        Ok(DevTile {
            rows,
            cols,
            data: parts.slice(0)?,
        })
    }

    fn view_mut(mut parts: DeviceParts<'_>) -> Result<DevTileMut<'_>, String> {
        let [rows, cols, ..] = parts.dims();
        Ok(DevTileMut {
            rows,
            cols,
            data: parts.slice_mut(0)?,
        })
    }
}

#[cfg(test)]
mod tests {
    //! Proves that tiles are aligned, column-major, zero-initialised and independently owned,
    //! including the empty and edge shapes.

    use super::*;

    #[test]
    fn a_tiles_one_part_is_its_only_part() {
        use tessera_engine::memory::Replicate;
        let mut t = Tile::zeros(3, 2);
        t.as_mut_slice()[4] = 2.5;
        let part = t.parts().unwrap()[0].to_vec();
        assert_eq!(t.one_part(), Some(&part[..]));
        assert_eq!(t.one_part_mut().map(|p| p.to_vec()), Some(part));
    }

    #[test]
    fn a_pool_reuses_a_dropped_tiles_buffer_for_the_same_size_only() {
        let pool = TilePool::new(2);
        let mut a = pool.tile(8, 3);
        assert!(
            a.as_slice().iter().all(|&x| x == 0.0),
            "a new buffer is zeroed"
        );
        a.as_mut_slice().fill(4.5);
        let addr = a.as_slice().as_ptr();
        drop(a);
        assert_eq!(pool.kept(), 1);
        // Another size does not take it.
        let other = pool.tile(3, 8 + 1);
        assert_ne!(other.as_slice().as_ptr(), addr);
        assert_eq!(pool.kept(), 1);
        // The same size does, its entries unspecified (poisoned with NaN in debug builds).
        let b = pool.tile(4, 6);
        assert_eq!(b.as_slice().as_ptr(), addr);
        assert_eq!((b.rows(), b.cols()), (4, 6));
        assert_aligned(&b);
        if cfg!(debug_assertions) {
            assert!(b.as_slice().iter().all(|x| x.is_nan()));
        }
        assert_eq!(pool.kept(), 0);
        drop((b, other));
        assert_eq!(pool.kept(), 2);
    }

    #[test]
    fn reserved_buffers_are_kept_up_to_the_bound_and_handed_out() {
        let pool = TilePool::new(2);
        for _ in 0..3 {
            pool.reserve(600, 7);
        }
        pool.reserve(0, 3);
        assert_eq!(pool.kept(), 2, "the third buffer did not fit and was freed");
        let a = pool.tile(7, 600);
        assert_eq!(a.len(), 4200);
        assert_aligned(&a);
        assert_eq!(pool.kept(), 1);
    }

    #[test]
    fn a_full_pool_frees_and_outlives_its_tiles() {
        let pool = TilePool::new(1);
        let tiles: Vec<Tile> = (0..3).map(|_| pool.tile(5, 5)).collect();
        drop(tiles);
        assert_eq!(pool.kept(), 1, "two of the three buffers were freed");
        // A tile keeps its pool alive: dropping the last handle first is fine.
        let t = pool.tile(5, 5);
        drop(pool);
        assert_eq!(t.len(), 25);
        drop(t);
        // Empty tiles own nothing and are not kept.
        let p2 = TilePool::new(4);
        drop(p2.tile(0, 7));
        assert_eq!(p2.kept(), 0);
    }

    fn assert_aligned(t: &Tile) {
        assert_eq!(
            t.as_slice().as_ptr() as usize % TILE_ALIGN,
            0,
            "{}x{}",
            t.rows(),
            t.cols()
        );
    }

    #[test]
    fn zeros_are_aligned_and_zero() {
        for (r, c) in [(1, 1), (3, 5), (7, 1), (64, 64), (65, 3), (256, 256)] {
            let t = Tile::zeros(r, c);
            assert_eq!((t.rows(), t.cols(), t.len()), (r, c, r * c));
            assert_aligned(&t);
            assert!(t.as_slice().iter().all(|&x| x == 0.0));
        }
    }

    #[test]
    fn empty_tiles() {
        for (r, c) in [(0, 0), (0, 5), (5, 0)] {
            let mut t = Tile::zeros(r, c);
            assert!(t.is_empty());
            assert_aligned(&t);
            assert_eq!(t.as_mut_slice().len(), 0);
            assert_eq!((t.as_ref().nrows(), t.as_ref().ncols()), (r, c));
            assert_eq!((t.as_mut().nrows(), t.as_mut().ncols()), (r, c));
            let u = t.clone();
            assert_eq!(u, t);
        }
        assert_eq!(Tile::default().len(), 0);
    }

    #[test]
    fn column_major_views() {
        let data: Vec<f64> = (0..12).map(f64::from).collect();
        let mut t = Tile::from_col_major(3, 4, &data);
        assert_aligned(&t);
        let v = t.as_ref();
        for j in 0..4 {
            assert_eq!(t.col(j), &data[3 * j..3 * j + 3]);
            for i in 0..3 {
                assert_eq!(v[(i, j)], (i + 3 * j) as f64);
            }
        }
        t.as_mut()[(2, 1)] = -1.0;
        assert_eq!(t.as_slice()[5], -1.0);
        t.col_mut(3)[0] = 42.0;
        assert_eq!(t.as_ref()[(0, 3)], 42.0);
    }

    #[test]
    fn clone_is_deep() {
        let mut a = Tile::zeros(5, 3);
        a.as_mut_slice()[7] = 1.5;
        let b = a.clone();
        assert_aligned(&b);
        a.as_mut_slice()[7] = 2.5;
        assert_eq!(b.as_slice()[7], 1.5);
        assert_ne!(a, b);
    }

    #[test]
    fn overflow_is_an_error() {
        let e = Tile::try_zeros(usize::MAX, 2).unwrap_err();
        assert_eq!(
            e,
            TileAllocError {
                rows: usize::MAX,
                cols: 2
            }
        );
        assert!(e.to_string().contains("cannot allocate"));
        assert!(Tile::try_zeros(usize::MAX / 4, 1).is_err());
    }

    #[test]
    fn send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Tile>();
        let t = Tile::from_col_major(2, 1, &[1.0, 2.0]);
        let sum = std::thread::spawn(move || t.as_slice().iter().sum::<f64>())
            .join()
            .unwrap();
        assert_eq!(sum, 3.0);
    }
}
