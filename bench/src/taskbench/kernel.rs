//! Task Bench's kernels: what each task computes, its flop and byte counts
//! (for the `FLOP/s` and `B/s` lines), and the checks of its options. Written
//! from Task Bench's `core/core_kernel.cc`: the same loops and the same
//! counts, so that a Tessera figure compares with a peer's.

use std::hint::black_box;

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};

use super::random::random_uniform;

/// A kernel type (`-kernel`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelKind {
    /// Does nothing.
    Empty,
    /// An integer multiply-modulo loop (no flops counted).
    BusyWait,
    /// Copies half of a scratch sample onto its other half.
    MemoryBound,
    /// `y += x` over a scratch sample (no flops counted, as Task Bench).
    MemoryDaxpy,
    /// `C += A·B` on three square matrices in the scratch.
    ComputeDgemm,
    /// 64 chains of `a = a·a + a`.
    ComputeBound,
    /// 32 lanes of `c += a·b`.
    ComputeBound2,
    /// Named by Task Bench, not implemented by its core.
    IoBound,
    /// `compute_bound` with iterations drawn per task (`-imbalance`).
    LoadImbalance,
}

/// Every kernel with its name on the command line.
pub const KERNELS: [(&str, KernelKind); 9] = [
    ("empty", KernelKind::Empty),
    ("busy_wait", KernelKind::BusyWait),
    ("memory_bound", KernelKind::MemoryBound),
    ("memory_daxpy", KernelKind::MemoryDaxpy),
    ("compute_dgemm", KernelKind::ComputeDgemm),
    ("compute_bound", KernelKind::ComputeBound),
    ("compute_bound2", KernelKind::ComputeBound2),
    ("io_bound", KernelKind::IoBound),
    ("load_imbalance", KernelKind::LoadImbalance),
];

impl KernelKind {
    /// The kernel called `name`, if any.
    pub fn parse(name: &str) -> Option<KernelKind> {
        KERNELS.iter().find(|(n, _)| *n == name).map(|&(_, k)| k)
    }

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        KERNELS
            .iter()
            .find(|(_, k)| *k == self)
            .map_or("?", |(n, _)| n)
    }

    /// Whether it works in the scratch memory.
    fn uses_scratch(self) -> bool {
        matches!(
            self,
            KernelKind::MemoryBound | KernelKind::MemoryDaxpy | KernelKind::ComputeDgemm
        )
    }
}

/// What a task computes: the kernel and its parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Kernel {
    /// The kernel (`-kernel`).
    pub kind: KernelKind,
    /// Its iterations (`-iter`).
    pub iterations: i64,
    /// Samples the scratch is cut into (`-sample`; memory kernels).
    pub samples: i64,
    /// Spread of the iterations drawn per task, 0 to 2 (`-imbalance`).
    pub imbalance: f64,
}

impl Default for Kernel {
    /// Task Bench's defaults: empty, 0 iterations, 16 samples, no imbalance.
    fn default() -> Kernel {
        Kernel {
            kind: KernelKind::Empty,
            iterations: 0,
            samples: 16,
            imbalance: 0.0,
        }
    }
}

/// The first scratch word of every point, checked before each kernel runs
/// (Task Bench's `MAGIC_VALUE`): a kernel that overran a neighbour's
/// scratch, or scratch never prepared, is found.
pub const SCRATCH_MAGIC: u64 = 0x5C4A_7C8B;

/// Scratch memory of `bytes` bytes (a whole number of 8-byte words), every
/// word the magic value, as Task Bench prepares it.
pub fn prepare_scratch(bytes: usize) -> Vec<f64> {
    vec![f64::from_bits(SCRATCH_MAGIC); bytes / 8]
}

impl Kernel {
    /// Refuses options Task Bench's kernels could not run, naming them.
    pub fn check(&self, which: &str, scratch_bytes: usize) -> Result<(), String> {
        let name = self.kind.name();
        if self.kind == KernelKind::IoBound {
            return Err(format!(
                "{which}: -kernel io_bound is named by Task Bench but its core does not implement it (the kernel stops the program); no figure can be compared"
            ));
        }
        if self.kind.uses_scratch() {
            if scratch_bytes == 0 {
                return Err(format!(
                    "{which}: -kernel {name} works in scratch memory: give -scratch BYTES (e.g. -scratch 65536)"
                ));
            }
            if !scratch_bytes.is_multiple_of(8) {
                return Err(format!(
                    "{which}: -scratch {scratch_bytes} must be a multiple of 8 bytes (whole f64 words)"
                ));
            }
        }
        if matches!(self.kind, KernelKind::MemoryBound | KernelKind::MemoryDaxpy)
            && self.samples < 1
        {
            return Err(format!(
                "{which}: -kernel {name} cuts the scratch into -sample parts: -sample must be 1 or more"
            ));
        }
        if self.kind == KernelKind::ComputeDgemm && dgemm_order(scratch_bytes) == 0 {
            return Err(format!(
                "{which}: -kernel compute_dgemm needs -scratch of at least 24 bytes (three 1x1 matrices)"
            ));
        }
        Ok(())
    }

    /// Iterations of task `(timestep, point)` of graph `graph_index`: the
    /// kernel's, or for `load_imbalance` a draw around them.
    pub fn iterations_at(&self, graph_index: usize, timestep: i64, point: i64) -> i64 {
        if self.kind != KernelKind::LoadImbalance {
            return self.iterations;
        }
        let u = random_uniform(&[graph_index as i64, timestep, point]);
        ((1.0 + (u - 0.5) * self.imbalance) * self.iterations as f64).round() as i64
    }

    /// Floating-point operations of one task (Task Bench's
    /// `count_flops_per_task`).
    pub fn flops(&self, scratch_bytes: usize, graph_index: usize, t: i64, p: i64) -> u64 {
        let iters = self.iterations as u64;
        match self.kind {
            KernelKind::ComputeDgemm => {
                let n = dgemm_order(scratch_bytes) as u64;
                2 * n * n * n * iters
            }
            KernelKind::ComputeBound => 2 * 64 * iters + 64,
            KernelKind::ComputeBound2 => 2 * 32 * iters,
            KernelKind::LoadImbalance => 2 * 64 * self.iterations_at(graph_index, t, p) as u64 + 64,
            _ => 0,
        }
    }

    /// Bytes one task moves (Task Bench's `count_bytes_per_task`).
    pub fn bytes(&self, scratch_bytes: usize) -> u64 {
        match self.kind {
            KernelKind::MemoryBound | KernelKind::MemoryDaxpy => {
                scratch_bytes as u64 * self.iterations as u64 / self.samples as u64
            }
            _ => 0,
        }
    }

    /// Runs the kernel for task `(timestep, point)` in `scratch` (the
    /// point's own; empty when the kernel needs none).
    pub fn execute(&self, graph_index: usize, timestep: i64, point: i64, scratch: &mut [f64]) {
        match self.kind {
            KernelKind::Empty | KernelKind::IoBound => {}
            KernelKind::BusyWait => {
                let mut acc: i64 = 113;
                for _ in 0..self.iterations {
                    acc = black_box(acc * 139 % 2_147_483_647);
                }
                black_box(acc);
            }
            KernelKind::MemoryBound => self.memory(scratch, timestep),
            KernelKind::MemoryDaxpy => self.daxpy(scratch, timestep),
            KernelKind::ComputeDgemm => self.dgemm(scratch),
            KernelKind::ComputeBound => {
                black_box(compute_bound(self.iterations));
            }
            KernelKind::ComputeBound2 => {
                black_box(compute_bound2(self.iterations));
            }
            KernelKind::LoadImbalance => {
                black_box(compute_bound(self.iterations_at(
                    graph_index,
                    timestep,
                    point,
                )));
            }
        }
    }

    /// Iteration `i` of task at `timestep` works on sample
    /// `(timestep · iterations + i) mod samples`: consecutive samples, so a
    /// run of them is one contiguous copy (Task Bench's prologue, body and
    /// epilogue).
    fn memory(&self, scratch: &mut [f64], timestep: i64) {
        let (samples, iters) = (self.samples, self.iterations);
        let sample = scratch.len() / samples as usize;
        let mut i = 0;
        while i < iters {
            let start = (timestep * iters + i) % samples;
            let n = (samples - start).min(iters - i);
            let region = &mut scratch[start as usize * sample..(start + n) as usize * sample];
            let half = region.len() / 2;
            region.copy_within(..half, half);
            i += n;
        }
        black_box(scratch);
    }

    fn daxpy(&self, scratch: &mut [f64], timestep: i64) {
        let samples = self.samples;
        let sample = scratch.len() / samples as usize;
        for i in 0..self.iterations {
            let idx = ((timestep * self.iterations + i) % samples) as usize;
            let s = &mut scratch[idx * sample..(idx + 1) * sample];
            let (x, y) = s.split_at_mut(sample / 2);
            for (y, x) in y.iter_mut().zip(x.iter()) {
                *y += *x;
            }
        }
        black_box(scratch);
    }

    /// `C += A·B`, `iterations` times, with faer (Task Bench calls BLAS's
    /// dgemm): A, B and C are `n × n`, one after another in the scratch.
    fn dgemm(&self, scratch: &mut [f64]) {
        let n = dgemm_order(scratch.len() * 8);
        let (a, rest) = scratch.split_at_mut(n * n);
        let (b, c) = rest.split_at_mut(n * n);
        let a = MatRef::from_column_major_slice(a, n, n);
        let b = MatRef::from_column_major_slice(b, n, n);
        let mut c = MatMut::from_column_major_slice_mut(&mut c[..n * n], n, n);
        for _ in 0..self.iterations {
            matmul(c.as_mut(), Accum::Add, a, b, 1.0, Par::Seq);
        }
    }
}

/// The order of the matrices `compute_dgemm` fits in `scratch_bytes`
/// (`sqrt(scratch / 24)`, as Task Bench).
fn dgemm_order(scratch_bytes: usize) -> usize {
    let elems = scratch_bytes / 24;
    let mut n = (elems as f64).sqrt() as usize;
    while n * n > elems {
        n -= 1;
    }
    while (n + 1) * (n + 1) <= elems {
        n += 1;
    }
    n
}

/// 64 independent chains of `a = a·a + a`, `iterations` steps each.
/// Task Bench compiles it with AVX2 and FMA (16 registers of 4 lanes): with
/// those, this runs fused multiply-adds too, chosen at run time.
fn compute_bound(iterations: i64) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has AVX2 and FMA (checked just above).
        return unsafe { compute_bound_fma(iterations) };
    }
    compute_bound_body(iterations, |a| a * a + a)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn compute_bound_fma(iterations: i64) -> f64 {
    compute_bound_body(iterations, |a| a.mul_add(a, a))
}

#[inline(always)]
fn compute_bound_body(iterations: i64, step: impl Fn(f64) -> f64) -> f64 {
    let mut a = [0f64; 64];
    for (i, a) in a.iter_mut().enumerate() {
        *a = (4 - i % 4) as f64;
    }
    for _ in 0..iterations {
        for a in a.iter_mut() {
            *a = step(*a);
        }
    }
    a.iter().product()
}

/// 32 lanes of `c += a·b`, `iterations` times.
fn compute_bound2(iterations: i64) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has AVX2 and FMA (checked just above).
        return unsafe { compute_bound2_fma(iterations) };
    }
    compute_bound2_body(iterations, |c, a, b| c + a * b)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn compute_bound2_fma(iterations: i64) -> f64 {
    compute_bound2_body(iterations, |c, a, b| a.mul_add(b, c))
}

#[inline(always)]
fn compute_bound2_body(iterations: i64, step: impl Fn(f64, f64, f64) -> f64) -> f64 {
    let (a, b) = ([1.2345f64; 32], [1.010101f64; 32]);
    let mut c = [0f64; 32];
    for _ in 0..iterations {
        for i in 0..32 {
            c[i] = step(c[i], a[i], b[i]);
        }
    }
    c.iter().sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dgemm_order_is_the_integer_square_root() {
        assert_eq!(dgemm_order(24), 1);
        assert_eq!(dgemm_order(24 * 4 - 8), 1);
        assert_eq!(dgemm_order(24 * 4), 2);
        assert_eq!(dgemm_order(24 * 64 * 64), 64);
    }

    #[test]
    fn counts_follow_task_bench() {
        let k = Kernel {
            kind: KernelKind::ComputeBound,
            iterations: 10,
            ..Kernel::default()
        };
        assert_eq!(k.flops(0, 0, 0, 0), 2 * 64 * 10 + 64);
        let m = Kernel {
            kind: KernelKind::MemoryBound,
            iterations: 6,
            samples: 4,
            ..Kernel::default()
        };
        assert_eq!(m.bytes(4096), 4096 * 6 / 4);
        let d = Kernel {
            kind: KernelKind::ComputeDgemm,
            iterations: 3,
            ..Kernel::default()
        };
        assert_eq!(d.flops(24 * 16, 0, 0, 0), 2 * 64 * 3);
    }

    #[test]
    fn imbalance_draws_around_the_iterations() {
        let k = Kernel {
            kind: KernelKind::LoadImbalance,
            iterations: 1000,
            imbalance: 1.0,
            ..Kernel::default()
        };
        let draws: Vec<i64> = (0..100).map(|p| k.iterations_at(0, 3, p)).collect();
        assert!(draws.iter().all(|&n| (500..=1500).contains(&n)));
        assert!(draws.iter().any(|&n| n != draws[0]));
        // Deterministic: Task Bench's draw for (graph 0, timestep 5, point 1)
        // is 0.029_345_763_107_124_376.
        assert_eq!(
            k.iterations_at(0, 5, 1),
            (1000.0f64 * (1.0 + (0.029_345_763_107_124_376 - 0.5))).round() as i64
        );
    }

    #[test]
    fn kernels_keep_the_magic_word() {
        for (kind, scratch) in [
            (KernelKind::MemoryBound, 4096),
            (KernelKind::MemoryDaxpy, 4096),
            (KernelKind::ComputeDgemm, 24 * 64),
        ] {
            let k = Kernel {
                kind,
                iterations: 5,
                samples: 4,
                imbalance: 0.0,
            };
            k.check("graph 1", scratch).unwrap();
            let mut s = prepare_scratch(scratch);
            k.execute(0, 3, 0, &mut s);
            assert_eq!(s[0].to_bits(), SCRATCH_MAGIC, "{kind:?}");
        }
        // daxpy really adds: y = x + y with both the magic value.
        let k = Kernel {
            kind: KernelKind::MemoryDaxpy,
            iterations: 1,
            samples: 1,
            imbalance: 0.0,
        };
        let mut s = vec![1.0; 8];
        k.execute(0, 0, 0, &mut s);
        assert_eq!(s, [1.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 2.0]);
    }

    #[test]
    fn bad_options_are_refused_by_name() {
        let k = |kind| Kernel {
            kind,
            ..Kernel::default()
        };
        let e = k(KernelKind::MemoryBound).check("graph 1", 0).unwrap_err();
        assert!(e.contains("-scratch"), "{e}");
        let e = k(KernelKind::ComputeDgemm)
            .check("graph 1", 12)
            .unwrap_err();
        assert!(e.contains("multiple of 8"), "{e}");
        let e = k(KernelKind::IoBound).check("graph 2", 0).unwrap_err();
        assert!(e.starts_with("graph 2: -kernel io_bound"), "{e}");
        let mut m = k(KernelKind::MemoryDaxpy);
        m.samples = 0;
        assert!(m.check("graph 1", 64).unwrap_err().contains("-sample"));
    }
}
