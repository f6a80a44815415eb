//! The codelets of the LU (the tile LU's and the distributed LU's own) and SpMV.
//!
//! Each is declared once, with its CPU body, its bodies for the devices that
//! have kernels for it (a CUDA GPU with feature `cuda`; the emulated device with
//! its own memory, whose bodies run the CPU kernels on copies of its buffers
//! so CI exercises the GPU data path), its flop model and its label.
//! Algorithms (`tessera-linalg`) only name a codelet, its data and its
//! arguments.
//!
//! Adding a device backend: implement `Device` (and `DeviceMemory`) in
//! `tessera-backends`, then give each codelet here a
//! `.device::<YourDevice>(..)` body built on its safe, typed operations.

pub mod lu;
pub mod lu_blocks;
pub mod lu_dist;
pub mod spmv;

use tessera_backends::emu::EmuDevice;
use tessera_engine::BodyError;

use crate::tile::{DevTile, DevTileMut, Tile};

/// The emulated device's memory is host memory: a copy of a read-only tile.
fn sim_tile(dev: &EmuDevice, t: DevTile<'_>) -> Result<Tile, BodyError> {
    Ok(Tile::from_col_major(
        t.rows,
        t.cols,
        &dev.host(t.data)?[..t.rows * t.cols],
    ))
}

/// A writable tile of the emulated device's memory, as a host tile to run a CPU
/// kernel on, and the buffer to write it back to ([`store`]).
fn sim_tile_mut<'a>(
    dev: &EmuDevice,
    t: DevTileMut<'a>,
) -> Result<(Tile, &'a mut [f64]), BodyError> {
    let (rows, cols) = (t.rows, t.cols);
    let buf = &mut dev.host_mut(t.data)?[..rows * cols];
    Ok((Tile::from_col_major(rows, cols, buf), buf))
}

/// Write back tiles a CPU kernel changed (see [`sim_tile_mut`]).
fn store(tiles: &[Tile], bufs: &mut [&mut [f64]]) {
    for (t, b) in tiles.iter().zip(bufs.iter_mut()) {
        b.copy_from_slice(t.as_slice());
    }
}
