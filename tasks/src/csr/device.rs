//! How a [`Csr`] moves between memory nodes (as its three arrays: row offsets, column
//! indices, values) and how a device task sees it ([`DevCsr`], [`DevCsrMut`]). A device
//! replica holds the `u32` column indices only, never the compact ones, and a writable view
//! exposes the values alone, so the CSR invariants hold on the device too.

use tessera_engine::device::{DevSlice, DevSliceMut, DeviceParts};
use tessera_engine::memory::DeviceData;

use super::Csr;

/// A CSR block moves between memory nodes as its three arrays.
impl tessera_engine::memory::Replicate for Csr {
    fn bytes(&self) -> usize {
        Csr::bytes(self)
    }

    /// A copy, compact column indices included: a host NUMA node's CPU workers read them
    /// there too. (A device's replica is its own memory, filled from `parts`: `u32` only.)
    fn replicate(&self) -> Self {
        self.clone()
    }

    fn copy_from(&mut self, src: &Self) {
        self.clone_from(src);
    }

    /// `row_ptr` (usize), `col_idx` (u32), `vals` (f64), in that order.
    fn parts(&self) -> Option<Vec<&[u8]>> {
        Some(vec![
            bytemuck::cast_slice(&self.row_ptr),
            bytemuck::cast_slice(&self.col_idx),
            bytemuck::cast_slice(&self.vals),
        ])
    }

    /// Drops the compact column indices: the transfer overwrites the indices they mirror.
    fn parts_mut(&mut self) -> Option<Vec<&mut [u8]>> {
        self.compact = None;
        Some(vec![
            bytemuck::cast_slice_mut(&mut self.row_ptr),
            bytemuck::cast_slice_mut(&mut self.col_idx),
            bytemuck::cast_slice_mut(&mut self.vals),
        ])
    }

    /// Rows and columns.
    fn dims(&self) -> [usize; 4] {
        [self.n_rows, self.n_cols, 0, 0]
    }
}

/// A CSR block in a device's own memory, read-only.
#[derive(Clone, Copy, Debug)]
pub struct DevCsr<'a> {
    /// Rows of the block.
    pub n_rows: usize,
    /// Columns (the length `x` must have).
    pub n_cols: usize,
    /// `n_rows + 1` offsets.
    pub row_ptr: DevSlice<'a, usize>,
    /// Column index of each nonzero.
    pub col_idx: DevSlice<'a, u32>,
    /// Value of each nonzero.
    pub vals: DevSlice<'a, f64>,
}

/// A CSR block in a device's own memory whose values a task may write; the
/// structure stays read-only, so the CSR invariants hold on the device too.
#[derive(Debug)]
pub struct DevCsrMut<'a> {
    /// Rows of the block.
    pub n_rows: usize,
    /// Columns.
    pub n_cols: usize,
    /// `n_rows + 1` offsets.
    pub row_ptr: DevSlice<'a, usize>,
    /// Column index of each nonzero.
    pub col_idx: DevSlice<'a, u32>,
    /// Value of each nonzero, writable.
    pub vals: DevSliceMut<'a, f64>,
}

impl DeviceData for Csr {
    type Ref<'a> = DevCsr<'a>;
    type Mut<'a> = DevCsrMut<'a>;

    fn view(mut parts: DeviceParts<'_>) -> Result<DevCsr<'_>, String> {
        let [n_rows, n_cols, ..] = parts.dims();
        Ok(DevCsr {
            n_rows,
            n_cols,
            row_ptr: parts.slice(0)?,
            col_idx: parts.slice(1)?,
            vals: parts.slice(2)?,
        })
    }

    fn view_mut(mut parts: DeviceParts<'_>) -> Result<DevCsrMut<'_>, String> {
        let [n_rows, n_cols, ..] = parts.dims();
        Ok(DevCsrMut {
            n_rows,
            n_cols,
            row_ptr: parts.slice(0)?,
            col_idx: parts.slice(1)?,
            vals: parts.slice_mut(2)?,
        })
    }
}
