//! What messages are as bytes: a little-endian writer/reader for headers,
//! keys and data items, and [`DataRef`], the type-erased handle whose bytes a
//! message carries.

use std::sync::Arc;

use crate::access::AccessMode;
use crate::data::{AnyHandle, DataHandle};
use crate::memory::{Replicate, HOST};

/// Appends fields to a message; the second field counts the bytes of
/// virtual data it stands for but does not carry (simulated time: the
/// simulated network charges them, see `Transport::send_charged`).
#[derive(Default)]
pub(crate) struct Writer(pub(crate) Vec<u8>, pub(crate) u64);

impl Writer {
    /// A writer of a message of about `n` bytes (in a reused buffer when
    /// one fits, see `buffers`).
    pub(crate) fn with_capacity(n: usize) -> Writer {
        Writer(super::buffers::take(n), 0)
    }
    #[inline]
    pub(crate) fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    #[inline]
    pub(crate) fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    /// A length-prefixed byte string.
    #[inline]
    pub(crate) fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }
    /// A length-prefixed byte string that `fill` appends in place (no
    /// buffer of its own); its length is written once `fill` is done.
    pub(crate) fn bytes_with<E>(
        &mut self,
        fill: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
    ) -> Result<&mut Self, E> {
        let at = self.0.len();
        self.u64(0);
        fill(&mut self.0)?;
        let len = (self.0.len() - at - 8) as u64;
        self.0[at..at + 8].copy_from_slice(&len.to_le_bytes());
        Ok(self)
    }
    pub(crate) fn finish(self) -> Vec<u8> {
        self.0
    }
}

/// Reads fields back, with an error naming what was short instead of a panic
/// (a message from a peer is input like any other).
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    #[inline]
    pub(crate) fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    /// The next `n` bytes. Inlined, with the error's formatting out of
    /// line: a remote edge's message is read field by field, and the calls
    /// were about 60 instructions of each (`callgrind`, `overhead-mpi`).
    #[inline]
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        match end {
            Some(e) => {
                let s = &self.buf[self.pos..e];
                self.pos = e;
                Ok(s)
            }
            None => Err(self.short(n, what)),
        }
    }

    /// Why `n` more bytes for `what` cannot be read.
    #[cold]
    #[inline(never)]
    fn short(&self, n: usize, what: &str) -> String {
        format!(
            "message truncated: {what} needs {n} bytes at offset {} of {}",
            self.pos,
            self.buf.len()
        )
    }

    #[inline]
    pub(crate) fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(
            self.take(4, "u32")?.try_into().expect("4 bytes"),
        ))
    }
    #[inline]
    pub(crate) fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(
            self.take(8, "u64")?.try_into().expect("8 bytes"),
        ))
    }
    #[inline]
    pub(crate) fn bytes(&mut self) -> Result<&'a [u8], String> {
        let n = usize::try_from(self.u64()?).map_err(|_| "length overflows usize".to_string())?;
        self.take(n, "byte string")
    }
    /// How many bytes were read so far.
    pub(crate) fn position(&self) -> usize {
        self.pos
    }

    /// The rest of the message.
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let s = &self.buf[self.pos..];
        self.pos = self.buf.len();
        s
    }
}

/// A registered handle whose contents can travel in messages: any
/// `DataHandle<T>` with `T: Replicate` (its parts are the bytes sent).
#[derive(Clone)]
pub struct DataRef {
    pub(crate) handle: Arc<dyn AnyHandle>,
}

impl DataRef {
    /// The erased reference to `h`. `h` must have been registered with
    /// `register_replicable` (its parts are what a message carries); a
    /// host-only handle fails when it is first sent or received, naming it.
    pub fn of<T: Replicate>(h: &DataHandle<T>) -> DataRef {
        DataRef { handle: h.erased() }
    }

    /// The handle's name (for messages).
    pub fn name(&self) -> String {
        self.handle.core().display_name()
    }

    /// Bytes of the value's parts.
    pub fn bytes(&self) -> u64 {
        self.handle.bytes()
    }

    /// Append the value's parts to `w`, as one byte string. The caller makes
    /// sure no task writes the handle meanwhile (the writer it follows has
    /// finished and the next one depends on a task that has not run).
    pub(crate) fn pack(&self, w: &mut Writer) -> Result<(), String> {
        let h = &self.handle;
        if h.is_virtual() {
            w.1 += h.bytes();
        }
        h.acquire(h, HOST, AccessMode::R, true)?;
        let out = h.with_parts(&mut |parts| {
            let total: usize = parts.iter().map(|p| p.len()).sum();
            w.u64(total as u64);
            for p in parts {
                w.0.extend_from_slice(p);
            }
        });
        h.unpin(HOST, AccessMode::R);
        out
    }

    /// Overwrite the host value's parts with `bytes` (a received version).
    ///
    /// # Safety
    /// The caller runs inside a task that declared this handle W on the host
    /// (so nobody else reads or writes it).
    pub(crate) unsafe fn unpack(&self, bytes: &[u8]) -> Result<(), String> {
        // SAFETY: forwarded to the caller.
        unsafe { self.handle.write_parts(bytes) }
    }
}
