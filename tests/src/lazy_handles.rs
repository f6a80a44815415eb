//! Data registered on first use, by key: what a test's symbolic classes
//! need when a rank makes its copy of another rank's data only once a task
//! or a message first touches it. (Three test classes each kept their own
//! closure and locked map for it.)

use std::collections::HashMap;
use std::fmt::Display;
use std::hash::Hash;
use std::sync::Mutex;

use tessera_engine::{DataHandle, Registrar, Runtime};

/// Handles of `len` zeros named `{prefix}{key}`, registered on their
/// runtime when first asked for.
pub struct LazyHandles<K> {
    registrar: Registrar,
    len: usize,
    prefix: &'static str,
    handles: Mutex<HashMap<K, DataHandle<Vec<u64>>>>,
}

impl<K: Eq + Hash + Clone + Display> LazyHandles<K> {
    /// None registered yet; each will hold `len` zeros.
    pub fn new(rt: &Runtime, len: usize, prefix: &'static str) -> LazyHandles<K> {
        LazyHandles {
            registrar: rt.registrar(),
            len,
            prefix,
            handles: Mutex::new(HashMap::new()),
        }
    }

    /// The handle of `k`, registered now if it was not.
    pub fn get(&self, k: K) -> DataHandle<Vec<u64>> {
        let mut h = self.handles.lock().unwrap();
        h.entry(k.clone())
            .or_insert_with(|| {
                self.registrar
                    .register_replicable_named(vec![0u64; self.len], format!("{}{k}", self.prefix))
                    .expect("the runtime outlives the test's run")
            })
            .clone()
    }

    /// Every handle registered so far, forgotten here (to unregister them).
    pub fn take_all(&self) -> Vec<(K, DataHandle<Vec<u64>>)> {
        self.handles.lock().unwrap().drain().collect()
    }
}
