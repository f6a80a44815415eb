//! Task Bench's deterministic random numbers: SipHash-2-4 of a key of
//! 64-bit integers (little-endian), with Task Bench's fixed hash key, scaled
//! to `[0, 1)`. The same draws as its `core_random.c`, so `random_nearest`
//! graphs and load-imbalance iteration counts match Task Bench's exactly.

use std::hash::Hasher;

use siphasher::sip::SipHasher24;

/// Task Bench's hash key: bytes 1 to 15, then 0.
const KEY: [u8; 16] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0];

/// A uniform draw in `[0, 1)` determined by `key`.
pub fn random_uniform(key: &[i64]) -> f64 {
    let mut h = SipHasher24::new_with_key(&KEY);
    for k in key {
        h.write(&k.to_le_bytes());
    }
    // 64 random bits times 2^-64 (as Task Bench: `bits * 0x1.p-64`).
    h.finish() as f64 * (-64f64).exp2()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values printed by Task Bench's own `random_uniform` (core_random.c
    /// with its siphash.c, compiled with gcc) for the same keys.
    #[test]
    fn matches_task_bench() {
        assert_eq!(random_uniform(&[0, 3, 0, 1, 2]), 0.916_872_347_157_932_1);
        assert_eq!(random_uniform(&[1, 5, 2, 7, 6]), 0.780_370_697_007_485_8);
        assert_eq!(random_uniform(&[0, 5, 1]), 0.029_345_763_107_124_376);
    }
}
