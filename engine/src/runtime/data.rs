//! Data registration and unregistration: the runtime handle's `register*`
//! and `unregister*`, and [`Registrar`], which registers from anywhere.
//!
//! Invariants kept here:
//! - Every handle gets a fresh id from `Shared::next_handle` and carries its
//!   runtime's id, by which submission (`crate::stf`) refuses another
//!   runtime's data.
//! - Virtual data (no value) is registered only with a simulated runtime.
//! - `unregister` takes a value only after marking the handle unregistered
//!   (no task can be submitted on it afterwards) and waiting for every task
//!   that declared it; the value is then back on the host.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use super::{Runtime, Shared};
use crate::data::DataHandle;
use crate::error::Error;
use crate::memory::Replicate;
use crate::task::TaskNode;
use crate::util::lock;

impl Shared {
    /// Virtual data of `bytes` bytes shaped `dims` (see
    /// [`Runtime::register_virtual`]); refused by a real runtime.
    fn register_virtual<T: Replicate>(
        &self,
        bytes: u64,
        dims: [usize; 4],
        name: String,
    ) -> Result<DataHandle<T>, Error> {
        if self.sim.is_none() {
            return Err(Error::Config(format!(
                "cannot register virtual data '{name}' ({bytes} bytes, no value) with a real runtime: only a simulated one (Config::simulated) can run tasks on it"
            )));
        }
        let id = self.next_handle.fetch_add(1, Ordering::Relaxed);
        Ok(DataHandle::new_virtual(
            bytes,
            dims,
            id,
            self.id,
            Some(name),
            Arc::clone(&self.memory),
        ))
    }
}

/// Registers data with a runtime from anywhere (a symbolic DAG making the
/// local copy of another rank's data, say). Holds the runtime weakly.
#[derive(Clone)]
pub struct Registrar(Weak<Shared>);

impl Registrar {
    /// A registrar of no runtime: every registration through it fails
    /// ("the runtime was dropped"). For values that only plan, such as a
    /// distributed DAG asked for its shape before any data exists.
    pub fn detached() -> Registrar {
        Registrar(Weak::new())
    }

    fn shared(&self) -> Result<Arc<Shared>, Error> {
        self.0
            .upgrade()
            .ok_or_else(|| Error::Config("the runtime was dropped".into()))
    }

    /// Like [`Runtime::register_named`].
    pub fn register_named<T: Send + Sync + 'static>(
        &self,
        value: T,
        name: impl Into<String>,
    ) -> Result<DataHandle<T>, Error> {
        let s = self.shared()?;
        let id = s.next_handle.fetch_add(1, Ordering::Relaxed);
        Ok(DataHandle::new(value, id, s.id, Some(name.into())))
    }

    /// Like [`Runtime::register_virtual`] (a simulated runtime's copy of
    /// another rank's virtual data, say).
    pub fn register_virtual<T: Replicate>(
        &self,
        bytes: u64,
        dims: [usize; 4],
        name: impl Into<String>,
    ) -> Result<DataHandle<T>, Error> {
        self.shared()?.register_virtual(bytes, dims, name.into())
    }

    /// Like [`Runtime::register_replicable_named`].
    pub fn register_replicable_named<T: Replicate>(
        &self,
        value: T,
        name: impl Into<String>,
    ) -> Result<DataHandle<T>, Error> {
        let s = self.shared()?;
        let id = s.next_handle.fetch_add(1, Ordering::Relaxed);
        Ok(DataHandle::new_replicable(
            value,
            id,
            s.id,
            Some(name.into()),
            Arc::clone(&s.memory),
        ))
    }
}

impl Runtime {
    /// Register *virtual* data: `bytes` bytes with no value. Tasks declare
    /// it like any data, the coherence protocol tracks its replicas and the
    /// link model charges its transfers, but bodies never see it (they do
    /// not run in simulated time). Only a simulated runtime takes it: an
    /// N = 10^6 LU's tiles need no memory there.
    ///
    /// `dims` is the shape a real value of type `T` would report through
    /// [`Replicate::dims`]: the figures a device view needs besides the
    /// size, e.g. `[rows, cols, 0, 0]` for a tile, `[len, 0, 0, 0]` for a
    /// `Vec`. `bytes` alone is the size that transfers and device memory
    /// are charged for; `[0; 4]` will do when nothing reads the shape.
    pub fn register_virtual<T: Replicate>(
        &self,
        bytes: u64,
        dims: [usize; 4],
        name: impl Into<String>,
    ) -> Result<DataHandle<T>, Error> {
        self.shared.register_virtual(bytes, dims, name.into())
    }

    /// Register `value`; tasks reach it through the returned handle.
    pub fn register<T: Send + Sync + 'static>(&self, value: T) -> DataHandle<T> {
        let id = self.shared.next_handle.fetch_add(1, Ordering::Relaxed);
        DataHandle::new(value, id, self.shared.id, None)
    }

    /// Register `value` under a name used in error messages and traces.
    pub fn register_named<T: Send + Sync + 'static>(
        &self,
        value: T,
        name: impl Into<String>,
    ) -> DataHandle<T> {
        let id = self.shared.next_handle.fetch_add(1, Ordering::Relaxed);
        DataHandle::new(value, id, self.shared.id, Some(name.into()))
    }

    /// Register `value` so that it can also live on devices' memory nodes
    /// (explicit copies, made by the engine when a task on a device needs it).
    pub fn register_replicable<T: Replicate>(&self, value: T) -> DataHandle<T> {
        self.register_replicable_named_opt(value, None)
    }

    /// [`register_replicable`](Self::register_replicable) with a name.
    pub fn register_replicable_named<T: Replicate>(
        &self,
        value: T,
        name: impl Into<String>,
    ) -> DataHandle<T> {
        self.register_replicable_named_opt(value, Some(name.into()))
    }

    fn register_replicable_named_opt<T: Replicate>(
        &self,
        value: T,
        name: Option<String>,
    ) -> DataHandle<T> {
        let id = self.shared.next_handle.fetch_add(1, Ordering::Relaxed);
        DataHandle::new_replicable(
            value,
            id,
            self.shared.id,
            name,
            Arc::clone(&self.shared.memory),
        )
    }

    /// Register data whose value `make` makes at its first use (another
    /// rank's data, registered by shape: [`DistRuntime::register_with`]).
    /// `make` is called once now for the shape, and that value dropped.
    ///
    /// [`DistRuntime::register_with`]: crate::dist::stf::DistRuntime::register_with
    pub(crate) fn register_deferred<T: Replicate>(
        &self,
        make: impl Fn() -> T + Send + 'static,
    ) -> DataHandle<T> {
        let id = self.shared.next_handle.fetch_add(1, Ordering::Relaxed);
        DataHandle::new_deferred(
            make,
            id,
            self.shared.id,
            None,
            Arc::clone(&self.shared.memory),
        )
    }

    /// A handle that registers data with this runtime from anywhere (it does
    /// not keep the runtime alive).
    pub fn registrar(&self) -> Registrar {
        Registrar(Arc::downgrade(&self.shared))
    }

    /// [`unregister`](Self::unregister) for virtual data (simulated time):
    /// waits for its users and brings it back to the host, so that a device
    /// holding its only copy sends it over its link in simulated time, as a
    /// real run's `unregister` would; there is no value to return.
    /// `Err(Poisoned)` if its last writer failed or was cancelled.
    pub fn unregister_virtual<T: Send + Sync + 'static>(
        &self,
        handle: DataHandle<T>,
    ) -> Result<(), Error> {
        if !crate::data::AnyHandle::is_virtual(&*handle.inner) {
            return Err(Error::Config(format!(
                "'{}' is not virtual data: unregister it to get its value",
                handle.name()
            )));
        }
        match self.release(&handle)? {
            Some(task) => Err(Error::Poisoned {
                handle: handle.name(),
                task,
            }),
            None => Ok(()),
        }
    }

    /// Wait for every task using `handle`, then take its value back. No task
    /// can be submitted on the handle afterwards. `Err(Poisoned)` if its last
    /// writer failed or was cancelled.
    pub fn unregister<T: Send + Sync + 'static>(&self, handle: DataHandle<T>) -> Result<T, Error> {
        let poisoned = self.release(&handle)?;
        if crate::data::AnyHandle::is_virtual(&*handle.inner) {
            return Err(Error::Config(format!(
                "'{}' is virtual data: it has no value to give back (unregister_virtual releases it)",
                handle.name()
            )));
        }
        // SAFETY: `release` waited for every task that declared the handle
        // before `unregistered` was set (the last writer and the readers
        // since it; earlier tasks are predecessors of those, hence done too),
        // and no task can be submitted on it any more.
        let value = unsafe { handle.take_value() }
            .map_err(Error::Config)?
            .expect("value is present until unregistered");
        match poisoned {
            Some(task) => Err(Error::Poisoned {
                handle: handle.name(),
                task,
            }),
            None => Ok(value),
        }
    }

    /// The common part of the unregisters: marks `handle` unregistered, waits
    /// for every task using it, and brings it back to the host if a device
    /// holds the only valid copy. Returns the task that poisoned it, if any.
    fn release<T: Send + Sync + 'static>(
        &self,
        handle: &DataHandle<T>,
    ) -> Result<Option<String>, Error> {
        self.shared.not_from_a_body("unregister")?;
        let users: Vec<Arc<TaskNode>> = {
            let mut deps = lock(&handle.inner.core.deps);
            if deps.unregistered {
                return Err(Error::Submit {
                    task: "unregister".into(),
                    reason: format!("data '{}' was already unregistered", handle.name()),
                });
            }
            deps.unregistered = true;
            deps.users()
        };
        for t in &users {
            t.awaited.store(true, Ordering::SeqCst);
        }
        self.shared
            .wait_until(false, || users.iter().all(|t| t.is_done()), None)?;
        let me: Arc<dyn crate::data::AnyHandle> = handle.erased();
        if !me.valid_on(crate::memory::HOST) {
            me.acquire(&me, crate::memory::HOST, crate::access::AccessMode::R, true)
                .inspect(|()| me.unpin(crate::memory::HOST, crate::access::AccessMode::R))
                .map_err(|e| {
                    Error::Config(format!(
                        "cannot bring '{}' back to the host: {e}",
                        handle.name()
                    ))
                })?;
        }
        drop(me);
        let poisoned = lock(&handle.inner.core.deps).poisoned_by.clone();
        Ok(poisoned)
    }
}
