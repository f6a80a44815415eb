//! Keys of the perf-model store: (codelet, architecture) looked up by `&str` without allocating.

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};

/// Owned key of a family.
#[derive(Debug)]
pub(super) struct FamilyKey {
    pub(super) codelet: String,
    pub(super) arch: String,
}

/// A (codelet, arch) pair, owned or borrowed: lets the map be searched with
/// `(&str, &str)` (no `String`s built on the completion path).
pub(super) trait FamilyName {
    /// The (codelet, arch) pair.
    fn names(&self) -> (&str, &str);
}

impl FamilyName for FamilyKey {
    fn names(&self) -> (&str, &str) {
        (&self.codelet, &self.arch)
    }
}

impl FamilyName for (&str, &str) {
    fn names(&self) -> (&str, &str) {
        (self.0, self.1)
    }
}

impl<'a> Borrow<dyn FamilyName + 'a> for FamilyKey {
    fn borrow(&self) -> &(dyn FamilyName + 'a) {
        self
    }
}

// `Borrow` requires equal hashes and equality for owned and borrowed forms:
// both hash and compare `names()`.
impl Hash for dyn FamilyName + '_ {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.names().hash(state);
    }
}

impl PartialEq for dyn FamilyName + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.names() == other.names()
    }
}

impl Eq for dyn FamilyName + '_ {}

impl Hash for FamilyKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.names().hash(state);
    }
}

impl PartialEq for FamilyKey {
    fn eq(&self, other: &Self) -> bool {
        self.names() == other.names()
    }
}

impl Eq for FamilyKey {}
