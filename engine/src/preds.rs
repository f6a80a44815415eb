//! Predecessor id lists kept for traces and DOT export: up to eight ids inline,
//! so recording a typical task's edges allocates nothing.

use std::sync::Arc;

const INLINE: usize = 8;

/// A short list of task ids; cheap to clone (a copy, or an `Arc` clone).
#[derive(Clone, Debug, Default)]
pub(crate) enum PredList {
    #[default]
    Empty,
    Inline([u64; INLINE], u8),
    Heap(Arc<[u64]>),
}

impl PredList {
    /// Sort, deduplicate and store `ids`.
    pub(crate) fn from_ids(ids: &mut PredBuilder) -> PredList {
        let s = ids.as_mut_slice();
        s.sort_unstable();
        let mut n = 0;
        for i in 0..s.len() {
            if i == 0 || s[i] != s[n - 1] {
                s[n] = s[i];
                n += 1;
            }
        }
        let s = &s[..n];
        match s.len() {
            0 => PredList::Empty,
            len if len <= INLINE => {
                let mut a = [0; INLINE];
                a[..len].copy_from_slice(s);
                PredList::Inline(a, len as u8)
            }
            _ => PredList::Heap(s.into()),
        }
    }

    pub(crate) fn as_slice(&self) -> &[u64] {
        match self {
            PredList::Empty => &[],
            PredList::Inline(a, n) => &a[..*n as usize],
            PredList::Heap(v) => v,
        }
    }
}

/// Collects predecessor ids during submission, spilling to the heap past eight.
#[derive(Default)]
pub(crate) struct PredBuilder {
    inline: [u64; INLINE],
    len: usize,
    spill: Vec<u64>,
}

impl PredBuilder {
    pub(crate) fn push(&mut self, id: u64) {
        if self.len < INLINE {
            self.inline[self.len] = id;
            self.len += 1;
        } else {
            if self.spill.is_empty() {
                self.spill.extend_from_slice(&self.inline);
            }
            self.spill.push(id);
        }
    }

    fn as_mut_slice(&mut self) -> &mut [u64] {
        if self.spill.is_empty() {
            &mut self.inline[..self.len]
        } else {
            &mut self.spill
        }
    }
}

#[cfg(test)]
mod tests {
    //! Proves predecessor lists keep every distinct id once, inline or spilled.
    use super::*;

    #[test]
    fn dedup_inline_and_spilled() {
        for ids in [vec![], vec![3, 3, 1], vec![5, 4, 3, 2, 1, 1, 9, 0]] {
            let mut b = PredBuilder::default();
            ids.iter().for_each(|&i| b.push(i));
            let mut want = ids.clone();
            want.sort_unstable();
            want.dedup();
            assert_eq!(PredList::from_ids(&mut b).as_slice(), &want[..]);
        }
    }
}
