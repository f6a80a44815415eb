//! Codelet colours: Chrome's reserved colour names and their RGB, one colour per codelet
//! of a trace, shared by the Chrome export (`cname`) and the Gantt chart.

use std::collections::HashMap;

use super::model::Trace;
use crate::util::fnv1a;

/// Chrome's reserved colour names (catapult `color_scheme.js`) with the RGB
/// each stands for, so that other renderers (the Gantt chart) draw the same
/// colour as chrome://tracing. Only names that read well on white and differ
/// clearly from each other (several reserved names are near-duplicates).
pub const CHROME_COLORS: [(&str, [u8; 3]); 16] = [
    ("thread_state_iowait", [255, 140, 0]),
    ("rail_response", [67, 135, 253]),
    ("good", [0, 125, 0]),
    ("detailed_memory_dump", [180, 0, 180]),
    ("rail_animation", [244, 74, 63]),
    ("background_memory_dump", [0, 180, 180]),
    ("olive", [100, 100, 0]),
    ("thread_state_uninterruptible", [182, 125, 143]),
    ("light_memory_dump", [0, 0, 180]),
    ("cq_build_passed", [153, 238, 102]),
    ("terrible", [180, 0, 0]),
    ("thread_state_unknown", [199, 155, 125]),
    ("thread_state_running", [126, 200, 148]),
    ("cq_build_failed", [238, 136, 136]),
    ("bad", [180, 125, 0]),
    ("thread_state_runnable", [133, 160, 210]),
];

/// A colour (index into [`CHROME_COLORS`]) for every codelet of a trace.
///
/// Each codelet starts at the slot its name hashes to; when two codelets of
/// the same trace hash to the same slot, the later one (in name order) takes
/// the next free slot, so a legend never shows two codelets in one colour
/// unless there are more codelets than colours.
#[derive(Clone, Debug)]
pub struct CodeletColors {
    slots: HashMap<String, usize>,
}

impl CodeletColors {
    /// Assigns colours to the given codelet names (duplicates are fine).
    pub fn new<'a>(codelets: impl IntoIterator<Item = &'a str>) -> Self {
        let mut names: Vec<&str> = codelets.into_iter().collect();
        names.sort_unstable();
        names.dedup();
        let n = CHROME_COLORS.len();
        let mut taken = [false; CHROME_COLORS.len()];
        let mut slots = HashMap::with_capacity(names.len());
        for (i, name) in names.iter().enumerate() {
            let mut slot = (fnv1a(name.as_bytes()) % n as u64) as usize;
            // Probe only while free slots remain; past that, collisions are unavoidable.
            if i < n {
                while taken[slot] {
                    slot = (slot + 1) % n;
                }
                taken[slot] = true;
            }
            slots.insert((*name).to_owned(), slot);
        }
        Self { slots }
    }

    /// Colours for the codelets of `trace`.
    pub fn for_trace(trace: &Trace) -> Self {
        Self::new(trace.tasks.iter().map(|t| t.codelet.as_str()))
    }

    /// Index into [`CHROME_COLORS`]; a codelet not seen by `new` gets its hash slot.
    pub fn index(&self, codelet: &str) -> usize {
        self.slots
            .get(codelet)
            .copied()
            .unwrap_or_else(|| (fnv1a(codelet.as_bytes()) % CHROME_COLORS.len() as u64) as usize)
    }

    /// Chrome's reserved colour name (`cname`) for `codelet`.
    pub fn cname(&self, codelet: &str) -> &'static str {
        CHROME_COLORS[self.index(codelet)].0
    }

    /// RGB of the colour of `codelet`.
    pub fn rgb(&self, codelet: &str) -> [u8; 3] {
        CHROME_COLORS[self.index(codelet)].1
    }
}

#[cfg(test)]
mod tests {
    // Proves that codelets of one trace get distinct colours whatever their order.
    use super::*;

    #[test]
    fn colours_are_distinct_and_stable() {
        let names = [
            "getrf", "trsm", "gemm", "syrk", "potrf", "spmv", "axpy", "dot",
        ];
        let c = CodeletColors::new(names);
        let mut slots: Vec<usize> = names.iter().map(|n| c.index(n)).collect();
        slots.sort_unstable();
        slots.dedup();
        assert_eq!(slots.len(), names.len());
        let again = CodeletColors::new(names.iter().rev().copied());
        assert!(names.iter().all(|n| c.index(n) == again.index(n)));
    }
}
