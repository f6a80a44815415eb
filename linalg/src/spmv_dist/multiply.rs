//! One distributed multiply (the module doc's "One multiply"): the halo exchange, then the
//! interior blocks, then the boundary blocks; and the waits and gathers around it.

use std::sync::{Arc, LazyLock};

use tessera_engine::dist::halo;
use tessera_engine::{BodyError, Codelet, DataHandle, Error, Read, Runtime, TaskHandle, Write};
use tessera_tasks::codelets::spmv::{SpmvArgs, SPMV, SPMV_HALO};

use super::DistMatrix;
use crate::solver::{phases, SharedVec};

impl DistMatrix {
    /// A zero vector split like this rank's blocks.
    pub(super) fn register_blocked_zeros(&self, rt: &Runtime) -> Vec<DataHandle<Vec<f64>>> {
        self.blocks
            .iter()
            .map(|b| rt.register_replicable(vec![0.0; b.rows.len()]))
            .collect()
    }

    /// Submit `y_b += A_b · x` for every block of this rank (`x_own`: this rank's entries of
    /// `x`), with the halo exchange first (see the module doc). Does not wait.
    pub fn submit_multiply(
        &self,
        rt: &Runtime,
        x_own: &DataHandle<Vec<f64>>,
        y: &[DataHandle<Vec<f64>>],
    ) -> Result<(), Error> {
        assert_eq!(
            y.len(),
            self.blocks.len(),
            "y must be split like the blocks"
        );
        self.submit_exchange(rt, Gather::Handle(x_own))?;
        // Interior blocks first: they need nothing from the network.
        for boundary in [false, true] {
            for (k, (b, yb)) in self.blocks.iter().zip(y).enumerate() {
                if b.boundary != boundary {
                    continue;
                }
                let args = SpmvArgs {
                    block: k,
                    nnz: b.nnz,
                };
                if boundary {
                    rt.task(&SPMV_HALO, (b.a.r(), x_own.r(), self.halo.r(), yb.rw()))
                        .args(args)
                        .submit()?;
                } else {
                    rt.task(&SPMV, (b.a.r(), x_own.r(), yb.rw()))
                        .args(args)
                        .submit()?;
                }
            }
        }
        Ok(())
    }

    /// Submit one halo exchange of `x`: a task gathers the entries sent into `export`
    /// (`O(halo)`), then the exchange's sends read `export` and its receive writes `halo`.
    /// Gathering first lets `x` be a data handle ([`submit_multiply`](Self::submit_multiply))
    /// or a solver's shared vector (`crate::solver::vector`), which cannot be a handle.
    /// Returns the gather task, if any (the one task of the exchange that reads `x`), and
    /// the exchange's send tasks.
    pub(super) fn submit_exchange(
        &self,
        rt: &Runtime,
        x: Gather<'_>,
    ) -> Result<(Option<TaskHandle>, Vec<TaskHandle>), Error> {
        let mut reads_x = None;
        if !self.export_idx.is_empty() {
            let idx = Arc::clone(&self.export_idx);
            let gather = move |x: &[f64], out: &mut Vec<f64>| -> Result<(), BodyError> {
                for (o, &i) in out.iter_mut().zip(idx.iter()) {
                    *o = *x.get(i as usize).ok_or_else(|| {
                        format!("halo entry {i} is past the {} owned entries", x.len())
                    })?;
                }
                Ok(())
            };
            let t = match x {
                Gather::Handle(h) => rt
                    .task(&HALO_GATHER, (h.r(), self.export.w()))
                    .cpu_only()
                    .cpu(move |(x, out)| gather(x, out))
                    .submit()?,
                Gather::Shared(v, after) => {
                    let v = Arc::clone(v);
                    let mut t = rt
                        .task(&HALO_GATHER_SHARED, (self.export.w(),))
                        .cpu_only()
                        // SAFETY (vector discipline): the multiply phase only reads `x`.
                        .cpu(move |(out,)| gather(unsafe { v.all() }, out));
                    if let Some(h) = after {
                        t = t.after(h);
                    }
                    t.submit()?
                }
            };
            reads_x = Some(t);
        }
        let sends = self.exchange.submit(rt, &self.export, &self.halo)?;
        Ok((reads_x, sends))
    }

    /// Wait for this rank's tasks (see `tessera_engine::dist::halo::wait_all`).
    pub fn wait(&self, rt: &Runtime) -> Result<(), Error> {
        halo::wait_all(rt, &self.net)
    }

    /// Gather a vector split like the blocks into this rank's part.
    pub(super) fn gather(
        &self,
        rt: &Runtime,
        y: Vec<DataHandle<Vec<f64>>>,
    ) -> Result<Vec<f64>, Error> {
        let mut out = vec![0.0; self.own_rows().len()];
        for (b, h) in self.blocks.iter().zip(y) {
            out[b.rows.clone()].copy_from_slice(&rt.unregister(h)?);
        }
        Ok(out)
    }

    /// One `A·p` into a fresh vector, `p` (this rank's part) moved in and out.
    fn multiply(&self, rt: &Runtime, p: Vec<f64>) -> Result<(Vec<f64>, Vec<f64>), Error> {
        let ph = rt.register_replicable_named(p, "p");
        let q = self.register_blocked_zeros(rt);
        self.submit_multiply(rt, &ph, &q)?;
        self.wait(rt)?;
        Ok((rt.unregister(ph)?, self.gather(rt, q)?))
    }

    /// `A·x` for this rank's rows (`x_own`: this rank's part of `x`), waiting for it.
    pub fn apply(&self, rt: &Runtime, x_own: Vec<f64>) -> Result<Vec<f64>, Error> {
        Ok(self.multiply(rt, x_own)?.1)
    }

    /// Give the blocks and the halo back (unregister them).
    pub fn unregister(self, rt: &Runtime) -> Result<(), Error> {
        for b in self.blocks {
            rt.unregister(b.a)?;
        }
        rt.unregister(self.halo)?;
        rt.unregister(self.export)?;
        Ok(())
    }

    pub(super) fn block_ref(&self, k: usize) -> phases::BlockRef<'_> {
        let b = &self.blocks[k];
        phases::BlockRef {
            a: &b.a,
            index: k,
            nnz: b.nnz,
            rows: b.rows.clone(),
        }
    }
}

/// Where the halo's entries are gathered from.
pub(super) enum Gather<'a> {
    Handle(&'a DataHandle<Vec<f64>>),
    /// A shared vector, ready once the task given (if any) ended.
    Shared(&'a Arc<SharedVec>, Option<&'a TaskHandle>),
}

/// `export = x[export_idx]`, from a handle.
type GatherCodelet = Codelet<(Read<Vec<f64>>, Write<Vec<f64>>)>;
static HALO_GATHER: LazyLock<GatherCodelet> = LazyLock::new(|| Codelet::new("halo-gather"));
/// `export = x[export_idx]`, from a solver's shared vector.
static HALO_GATHER_SHARED: LazyLock<Codelet<(Write<Vec<f64>>,)>> =
    LazyLock::new(|| Codelet::new("halo-gather"));
