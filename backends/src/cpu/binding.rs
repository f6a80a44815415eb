//! Pinning the calling thread to CPUs, and reading where it may run.
//!
//! With the `hwloc` feature this goes through hwloc; without it through
//! `sched_setaffinity` / `sched_getaffinity` (Linux only; elsewhere every
//! call returns [`BindError::Unsupported`]). CPUs are OS indices, as in
//! [`Pu::os_index`](super::Pu::os_index).

use std::fmt;

/// CPU numbers at or past this are refused rather than turned into a huge mask.
pub(crate) const MAX_CPU: usize = 1 << 16;

/// Why a thread could not be bound or its binding read.
#[derive(Debug)]
#[non_exhaustive]
pub enum BindError {
    /// The CPU list was empty.
    EmptySet,
    /// A CPU number past any real machine's.
    BadCpu(usize),
    /// The OS refused.
    Os {
        /// The call that failed (`sched_setaffinity`...).
        op: &'static str,
        /// The CPUs asked for, in cpu-list syntax (empty for a read).
        cpus: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// This platform has no thread binding ("binding not supported on this platform").
    Unsupported,
    /// hwloc refused.
    Hwloc(String),
}

impl fmt::Display for BindError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::EmptySet => write!(f, "cannot bind a thread to an empty CPU list"),
            Self::BadCpu(cpu) => write!(f, "CPU {cpu} is out of range (max {})", MAX_CPU - 1),
            Self::Os { op, cpus, source } if cpus.is_empty() => write!(f, "{op}: {source}"),
            Self::Os { op, cpus, source } => write!(f, "{op} to CPUs {cpus}: {source}"),
            Self::Unsupported => write!(f, "binding not supported on this platform"),
            Self::Hwloc(why) => write!(f, "hwloc: {why}"),
        }
    }
}

impl std::error::Error for BindError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Os { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Restricts the calling thread to `cpus` (OS indices). A worker calls this
/// once, first thing, with the PU of its [`WorkerSlot`](super::WorkerSlot).
///
/// # Errors
/// An empty or out-of-range list, a set the OS refuses (CPUs offline or
/// outside the process's cgroup), or [`BindError::Unsupported`].
pub fn bind_current_thread(cpus: &[usize]) -> Result<(), BindError> {
    check(cpus)?;
    #[cfg(feature = "hwloc")]
    {
        super::hwloc::bind_current_thread(cpus)
    }
    #[cfg(all(not(feature = "hwloc"), target_os = "linux"))]
    {
        affinity::set(cpus)
    }
    #[cfg(all(not(feature = "hwloc"), not(target_os = "linux")))]
    {
        Err(BindError::Unsupported)
    }
}

/// The CPUs the calling thread may run on, sorted (OS indices).
///
/// # Errors
/// When the OS or hwloc cannot tell, or [`BindError::Unsupported`].
pub fn current_thread_cpus() -> Result<Vec<usize>, BindError> {
    #[cfg(feature = "hwloc")]
    {
        super::hwloc::current_thread_cpus()
    }
    #[cfg(all(not(feature = "hwloc"), target_os = "linux"))]
    {
        affinity::get()
    }
    #[cfg(all(not(feature = "hwloc"), not(target_os = "linux")))]
    {
        Err(BindError::Unsupported)
    }
}

fn check(cpus: &[usize]) -> Result<(), BindError> {
    if cpus.is_empty() {
        return Err(BindError::EmptySet);
    }
    match cpus.iter().find(|&&c| c >= MAX_CPU) {
        Some(&cpu) => Err(BindError::BadCpu(cpu)),
        None => Ok(()),
    }
}

/// The `sched_{set,get}affinity` path. Masks are `Vec<c_ulong>` sized to
/// the CPUs at hand rather than a fixed 1024-bit `cpu_set_t`, so machines
/// with more than 1024 CPUs work too (the syscalls take any multiple of
/// `sizeof(long)` bytes).
#[cfg(all(target_os = "linux", any(not(feature = "hwloc"), test)))]
pub(crate) mod affinity {
    use super::{BindError, MAX_CPU};
    use crate::cpu::format_cpu_list;

    const WORD_BITS: usize = libc::c_ulong::BITS as usize;

    pub(crate) fn set(cpus: &[usize]) -> Result<(), BindError> {
        super::check(cpus)?;
        let max = cpus.iter().copied().max().unwrap_or(0);
        let mut mask: Vec<libc::c_ulong> = vec![0; max / WORD_BITS + 1];
        for &cpu in cpus {
            mask[cpu / WORD_BITS] |= 1 << (cpu % WORD_BITS);
        }
        // SAFETY: `mask` is a live, initialised buffer of exactly the byte
        // length passed, a multiple of sizeof(long) as the syscall requires;
        // the kernel only reads it. pid 0 names the calling thread.
        let rc = unsafe {
            libc::sched_setaffinity(
                0,
                std::mem::size_of_val(mask.as_slice()),
                mask.as_ptr().cast(),
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(BindError::Os {
                op: "sched_setaffinity",
                cpus: format_cpu_list(cpus),
                source: std::io::Error::last_os_error(),
            })
        }
    }

    pub(crate) fn get() -> Result<Vec<usize>, BindError> {
        // The kernel refuses (EINVAL) a buffer shorter than its CPU count:
        // start at cpu_set_t's 1024 bits and grow.
        let mut words = 1024 / WORD_BITS;
        loop {
            let mut mask: Vec<libc::c_ulong> = vec![0; words];
            // SAFETY: `mask` is a live, writable buffer of exactly the byte
            // length passed (a multiple of sizeof(long)); the kernel writes
            // at most that many bytes and glibc zeroes the rest of it.
            let rc = unsafe {
                libc::sched_getaffinity(
                    0,
                    std::mem::size_of_val(mask.as_slice()),
                    mask.as_mut_ptr().cast(),
                )
            };
            if rc == 0 {
                let cpus = (0..words * WORD_BITS)
                    .filter(|&c| mask[c / WORD_BITS] & (1 << (c % WORD_BITS)) != 0);
                return Ok(cpus.collect());
            }
            let source = std::io::Error::last_os_error();
            if source.raw_os_error() == Some(libc::EINVAL) && words * WORD_BITS < MAX_CPU {
                words *= 2;
                continue;
            }
            return Err(BindError::Os {
                op: "sched_getaffinity",
                cpus: String::new(),
                source,
            });
        }
    }
}

// Proves a thread really ends up bound to the one CPU asked for (read back
// through the OS), and that bad CPU lists are refused before reaching it.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binds_a_thread_to_one_cpu_and_reads_it_back() {
        let handle = std::thread::spawn(|| {
            let allowed = match current_thread_cpus() {
                Err(BindError::Unsupported) => {
                    println!("note: binding not supported on this platform; test skipped");
                    return;
                }
                other => other.expect("read this thread's CPUs"),
            };
            assert!(!allowed.is_empty());
            if allowed.len() < 2 {
                println!(
                    "note: this process may run on CPU {allowed:?} only; binding test skipped"
                );
                return;
            }
            // The last allowed CPU: unlikely to be where the thread runs already.
            let target = *allowed.last().unwrap();
            bind_current_thread(&[target]).expect("bind");
            assert_eq!(current_thread_cpus().unwrap(), vec![target]);
            #[cfg(target_os = "linux")]
            {
                // The kernel agrees, whichever path did the binding.
                assert_eq!(affinity::get().unwrap(), vec![target]);
                // SAFETY: sched_getcpu takes no argument and only reads the
                // calling thread's state.
                let now = unsafe { libc::sched_getcpu() };
                assert_eq!(
                    usize::try_from(now).ok(),
                    Some(target),
                    "thread runs off its binding"
                );
            }
            // Widening again works: a worker pool can be re-planned.
            bind_current_thread(&allowed).expect("unbind");
            assert_eq!(current_thread_cpus().unwrap(), allowed);
        });
        handle.join().expect("binding thread panicked");
    }

    #[test]
    fn binding_one_thread_leaves_others_alone() {
        let Ok(before) = current_thread_cpus() else {
            println!("note: binding not supported here; skipped");
            return;
        };
        if before.len() < 2 {
            println!("note: confined to one CPU; skipped");
            return;
        }
        let first = before[0];
        std::thread::spawn(move || bind_current_thread(&[first]).unwrap())
            .join()
            .unwrap();
        assert_eq!(current_thread_cpus().unwrap(), before);
    }

    #[test]
    fn refuses_bad_lists() {
        assert!(matches!(bind_current_thread(&[]), Err(BindError::EmptySet)));
        assert!(matches!(
            bind_current_thread(&[MAX_CPU]),
            Err(BindError::BadCpu(_))
        ));
        let err = std::thread::spawn(|| bind_current_thread(&[MAX_CPU - 1]))
            .join()
            .unwrap()
            .unwrap_err();
        assert!(!err.to_string().is_empty());
        #[cfg(target_os = "linux")]
        {
            let err = std::thread::spawn(|| affinity::set(&[MAX_CPU - 1]))
                .join()
                .unwrap()
                .unwrap_err();
            assert!(
                err.to_string().contains("sched_setaffinity to CPUs 65535"),
                "{err}"
            );
        }
    }
}
