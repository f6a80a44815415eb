//! Access modes and typed access lists: how a task uses its data, from which
//! dependencies are inferred and with which the body is handed its borrows.
//!
//! A typed task declares its data as a tuple of [`Read`], [`Write`] and
//! [`ReadWrite`] descriptors (or a `Vec` of them, for a tile column):
//! `(a.r(), b.r(), c.rw())`. The same tuple type decides what the body gets,
//! `(&A, &B, &mut C)`, so a mode and the borrow it allows can never disagree,
//! and nothing is looked up or cloned by hand. Soundness rests on two checks
//! made at submission: every handle of a task is distinct (so a `&mut` never
//! aliases) and belongs to the runtime; dependencies then keep any other
//! task that writes a handle from running beside one that uses it.

use std::marker::PhantomData;
use std::sync::Arc;

use crate::data::{AnyHandle, DataHandle};
use crate::device::DeviceParts;
use crate::error::AccessError;
use crate::memory::{DeviceData, NodeId};

/// How a task accesses one data handle.
///
/// Submission order plus access modes define the dependencies (sequential task
/// flow): a reader waits for the last writer (read-after-write), a writer waits
/// for the last writer and for every reader since (write-after-write,
/// write-after-read).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessMode {
    /// Read only: the body gets `&T`.
    R,
    /// Write only: the body gets `&mut T` and must not rely on the old contents.
    W,
    /// Read and write: the body gets `&mut T` (or `&T`).
    RW,
}

impl AccessMode {
    /// Whether a task with this mode changes the data.
    pub fn writes(self) -> bool {
        matches!(self, AccessMode::W | AccessMode::RW)
    }

    /// Whether a task with this mode observes the previous contents.
    pub fn reads(self) -> bool {
        matches!(self, AccessMode::R | AccessMode::RW)
    }
}

impl std::fmt::Display for AccessMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AccessMode::R => "R",
            AccessMode::W => "W",
            AccessMode::RW => "RW",
        })
    }
}

/// One (handle, mode) pair of a task, type-erased.
pub(crate) struct Access {
    pub(crate) handle: Arc<dyn AnyHandle>,
    pub(crate) mode: AccessMode,
}

impl Access {
    pub(crate) fn core(&self) -> &crate::data::HandleCore {
        self.handle.core()
    }

    pub(crate) fn lock_deps(&self) -> std::sync::MutexGuard<'_, crate::data::DepState> {
        crate::util::lock(&self.core().deps)
    }
}

/// A read of `T`: the body gets `&T` (`&T`'s device view on a device).
pub struct Read<T>(DataHandle<T>);
/// A write of `T` that ignores the old contents: the body gets `&mut T`.
pub struct Write<T>(DataHandle<T>);
/// A read and write of `T`: the body gets `&mut T`.
pub struct ReadWrite<T>(DataHandle<T>);

impl<T> DataHandle<T> {
    /// Declare a read of this handle (the body gets `&T`).
    pub fn r(&self) -> Read<T> {
        Read(self.clone())
    }

    /// Declare a write of this handle that ignores its old contents (`&mut T`).
    pub fn w(&self) -> Write<T> {
        Write(self.clone())
    }

    /// Declare a read and write of this handle (`&mut T`).
    pub fn rw(&self) -> ReadWrite<T> {
        ReadWrite(self.clone())
    }
}

/// What a typed task declared, erased: the accesses in order, and the length
/// of every `Vec` in the list (in the order the cursor meets them).
#[derive(Default)]
pub struct Declared {
    pub(crate) accesses: Vec<Access>,
    pub(crate) lens: Lens,
}

/// The lengths of a typed access list's `Vec`s as they are declared: inline
/// for up to four (a `Vec` grew by one allocation, then shrank into the
/// node's boxed slice by a reallocation, per task).
pub(crate) type Lens = smallvec::SmallVec<[u32; 4]>;

/// Walks a running task's accesses in declaration order, handing out typed
/// borrows or device views.
pub struct Cursor<'a> {
    accesses: std::slice::Iter<'a, Access>,
    lens: std::slice::Iter<'a, u32>,
    node: NodeId,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(accesses: &'a [Access], lens: &'a [u32], node: NodeId) -> Self {
        Cursor {
            accesses: accesses.iter(),
            lens: lens.iter(),
            node,
        }
    }

    fn next_access(&mut self) -> &'a Access {
        self.accesses
            .next()
            .expect("an access list hands out exactly what it declared")
    }

    fn next_len(&mut self) -> usize {
        *self
            .lens
            .next()
            .expect("an access list hands out exactly what it declared") as usize
    }

    /// The next access's value on this cursor's node, as `*mut T`.
    ///
    /// # Safety
    /// The task owning the accesses is running with every replica acquired on
    /// `node` (host-addressable), and the next access was declared with
    /// element type `T`.
    unsafe fn value<T: 'static>(&mut self) -> *mut T {
        let a = self.next_access();
        debug_assert_eq!(a.handle.value_type(), std::any::TypeId::of::<T>());
        // SAFETY: forwarded to the caller.
        unsafe { a.handle.value_ptr(self.node).cast::<T>() }
    }

    /// The next access's replica in device memory, as typed parts.
    fn parts(&mut self) -> Result<DeviceParts<'a>, AccessError> {
        let node = self.node;
        let a = self.next_access();
        // SAFETY: a cursor exists only inside a running task's body (it is
        // made by the engine, `Cursor::new` is crate-private), whose
        // replicas on `node` are acquired and pinned until the body returns.
        unsafe { a.handle.device_parts(node) }.ok_or_else(|| {
            AccessError(format!(
                "data '{}' has no replica in device memory on node {node}",
                a.core().display_name()
            ))
        })
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A list of typed accesses: a [`Read`], [`Write`] or [`ReadWrite`], a `Vec`
/// of one kind, or a tuple of those (up to 8 elements, or `()` for none).
///
/// Sealed: the engine relies on `declare` and `cpu` agreeing with each other.
pub trait Accesses: sealed::Sealed + Send + 'static {
    /// What a CPU body receives: `&T` for reads, `&mut T` for writes, a
    /// `Vec` of those for a `Vec`, a tuple for a tuple.
    type Cpu<'a>;

    /// Append the accesses to `out`.
    #[doc(hidden)]
    fn declare(self, out: &mut Declared);

    /// How many accesses [`declare`](Self::declare) appends: the task's
    /// list is allocated once (pushed one by one, a list of five reads and
    /// a write grew twice).
    #[doc(hidden)]
    fn count(&self) -> usize;

    /// Take this list's borrows from `cur`.
    ///
    /// # Safety
    /// `cur` walks the accesses this type declared, of a running task whose
    /// replicas are acquired on the cursor's (host-addressable) node.
    #[doc(hidden)]
    unsafe fn cpu<'a>(cur: &mut Cursor<'a>) -> Self::Cpu<'a>;
}

/// An access list whose data can live in a device's own memory: device
/// bodies receive typed views ([`DeviceData::Ref`] / [`DeviceData::Mut`]).
pub trait DeviceAccesses: Accesses {
    /// What a device body receives.
    type Device<'a>;

    /// Take this list's device views from `cur`.
    #[doc(hidden)]
    fn device<'a>(cur: &mut Cursor<'a>) -> Result<Self::Device<'a>, AccessError>;
}

macro_rules! single {
    ($ty:ident, $mode:ident, $cpu:ty, $dev:ident, $view:ident) => {
        impl<T: Send + Sync + 'static> sealed::Sealed for $ty<T> {}

        impl<T: Send + Sync + 'static> Accesses for $ty<T> {
            type Cpu<'a> = $cpu;

            fn count(&self) -> usize {
                1
            }

            fn declare(self, out: &mut Declared) {
                out.accesses.push(Access {
                    handle: self.0.into_erased(),
                    mode: AccessMode::$mode,
                });
            }

            unsafe fn cpu<'a>(cur: &mut Cursor<'a>) -> Self::Cpu<'a> {
                // SAFETY: per the contract; the handle is distinct from every
                // other access of the task (checked at submission) and no
                // other task writing it runs now (dependencies), so this
                // borrow is the only one with its mutability.
                unsafe { single!(@borrow $mode, cur) }
            }
        }

        impl<T: DeviceData> DeviceAccesses for $ty<T> {
            type Device<'a> = T::$dev<'a>;

            fn device<'a>(cur: &mut Cursor<'a>) -> Result<Self::Device<'a>, AccessError> {
                let parts = cur.parts()?;
                T::$view(parts).map_err(AccessError)
            }
        }
    };
    (@borrow R, $cur:ident) => { &*$cur.value::<T>() };
    (@borrow W, $cur:ident) => { &mut *$cur.value::<T>() };
    (@borrow RW, $cur:ident) => { &mut *$cur.value::<T>() };
}

single!(Read, R, &'a T, Ref, view);
single!(Write, W, &'a mut T, Mut, view_mut);
single!(ReadWrite, RW, &'a mut T, Mut, view_mut);

impl<A: Accesses> sealed::Sealed for Vec<A> {}

impl<A: Accesses> Accesses for Vec<A> {
    type Cpu<'a> = Vec<A::Cpu<'a>>;

    fn count(&self) -> usize {
        self.iter().map(A::count).sum()
    }

    fn declare(self, out: &mut Declared) {
        out.lens
            .push(u32::try_from(self.len()).expect("fewer than 2^32 accesses"));
        for a in self {
            a.declare(out);
        }
    }

    unsafe fn cpu<'a>(cur: &mut Cursor<'a>) -> Self::Cpu<'a> {
        let n = cur.next_len();
        // SAFETY: forwarded; the elements were declared in this order.
        (0..n).map(|_| unsafe { A::cpu(cur) }).collect()
    }
}

impl<A: DeviceAccesses> DeviceAccesses for Vec<A> {
    type Device<'a> = Vec<A::Device<'a>>;

    fn device<'a>(cur: &mut Cursor<'a>) -> Result<Self::Device<'a>, AccessError> {
        let n = cur.next_len();
        (0..n).map(|_| A::device(cur)).collect()
    }
}

macro_rules! tuple {
    ($($name:ident),*) => {
        impl<$($name: Accesses),*> sealed::Sealed for ($($name,)*) {}

        impl<$($name: Accesses),*> Accesses for ($($name,)*) {
            type Cpu<'a> = ($($name::Cpu<'a>,)*);

            #[allow(non_snake_case, unused_variables)]
            fn declare(self, out: &mut Declared) {
                let ($($name,)*) = self;
                $($name.declare(out);)*
            }

            #[allow(non_snake_case)]
            fn count(&self) -> usize {
                let ($($name,)*) = self;
                0 $(+ $name.count())*
            }

            #[allow(clippy::unused_unit, unused_variables, unused_unsafe)]
            unsafe fn cpu<'a>(cur: &mut Cursor<'a>) -> Self::Cpu<'a> {
                // SAFETY: forwarded; tuple elements were declared in order.
                unsafe { ($($name::cpu(cur),)*) }
            }
        }

        impl<$($name: DeviceAccesses),*> DeviceAccesses for ($($name,)*) {
            type Device<'a> = ($($name::Device<'a>,)*);

            #[allow(clippy::unused_unit, unused_variables)]
            fn device<'a>(cur: &mut Cursor<'a>) -> Result<Self::Device<'a>, AccessError> {
                Ok(($($name::device(cur)?,)*))
            }
        }
    };
}

tuple!();
tuple!(A1);
tuple!(A1, A2);
tuple!(A1, A2, A3);
tuple!(A1, A2, A3, A4);
tuple!(A1, A2, A3, A4, A5);
tuple!(A1, A2, A3, A4, A5, A6);
tuple!(A1, A2, A3, A4, A5, A6, A7);
tuple!(A1, A2, A3, A4, A5, A6, A7, A8);

/// The access list of a task whose data is declared at run time
/// ([`TaskBuilder`](crate::TaskBuilder)); bodies reach it through the
/// [`TaskContext`](crate::TaskContext).
pub struct Dynamic(PhantomData<()>);
