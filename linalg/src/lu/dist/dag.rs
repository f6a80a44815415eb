//! The distributed LU's DAG: its task classes (roots, predecessor counts,
//! successors, each task's codelet and data, its owner) and what flows along
//! its remote edges.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use tessera_engine::dist::symbolic::DistClasses;
use tessera_engine::dist::{Collectives, DataRef, Net};
use tessera_engine::symbolic::TaskClasses;
use tessera_engine::{DataHandle, Read, ReadWrite, Rendezvous, Task, TaskBuilder};
use tessera_tasks::codelets::lu_dist::{
    PartArgs, RowsArgs, BCAST, PANEL_PART, SWAPIN, SWAPOUT, SWAPTOP,
};
use tessera_tasks::tile::Tile;

use super::column::ColumnNet;
use super::storage::{Key, Slot};
use super::{DistLu, DistLuTask};
use crate::lu::tasks::{
    column_priority, gemm_task, panel_priority, panel_task, swap_task, trsm_task,
};

impl DistLu {
    /// The one-process LU's priorities; the panel's sends rank just below it.
    fn priority(&self, task: DistLuTask) -> i32 {
        let t = self.t;
        match task {
            DistLuTask::Panel(k) | DistLuTask::Part(k, _) => panel_priority(t, k),
            DistLuTask::Bcast(k, _) => panel_priority(t, k) - 1,
            DistLuTask::Swap(_, j)
            | DistLuTask::SwapOut(_, j, _)
            | DistLuTask::SwapTop(_, j)
            | DistLuTask::SwapIn(_, j, _)
            | DistLuTask::Trsm(_, j)
            | DistLuTask::Gemm(_, _, j) => column_priority(t, j),
        }
    }

    fn rows_args(&self, k: usize, j: usize, p: usize) -> RowsArgs {
        RowsArgs {
            k,
            j,
            p,
            grid_p: self.grid().p,
            nb: self.nb,
            w: self.rows(k),
            cols: self.rows(j),
            m: self.n - k * self.nb,
            prows: self.prows(k).iter().fold(0u64, |m, &p| m | (1 << p)),
        }
    }

    /// Tiles `(i, j)`, `i > k`, `i mod P = p`, top to bottom.
    fn below(&self, k: usize, j: usize, p: usize) -> Vec<DataHandle<Tile>> {
        (k + 1..self.t)
            .filter(|i| i % self.grid().p == p)
            .map(|i| self.tile(i, j))
            .collect()
    }

    /// `PANEL_PART(k, p)`: process row `p`'s tiles of panel `k`, with the
    /// members' ranks for the exchanges, and the rendezvous the simulator
    /// needs: one exchange per panel column, carrying two rows and a
    /// candidate (`2w + 2` values), plus the recursion steps' `U` blocks
    /// (about `w²/2` values in all, spread here over the `w` exchanges).
    fn part_task(&self, k: usize, p: usize, prio: i32) -> TaskBuilder {
        let rows = self.part_rows(k, p);
        let members = self.members(k);
        let me = members
            .iter()
            .position(|&q| q == p)
            .expect("a part's process row is a member");
        let col = self.layout.pcol(k);
        let ranks: Vec<usize> = members.iter().map(|&q| self.grid().rank(q, col)).collect();
        let w = self.rows(k);
        let exchange = Arc::new(ColumnNet {
            net: self.panel_net.get().cloned(),
            ranks,
            me,
            k,
            round: AtomicU64::new(0),
        });
        let tiles: Vec<ReadWrite<Tile>> = rows.iter().map(|&i| self.tile(i, k).rw()).collect();
        let task = Task::new(&PANEL_PART, (self.piv(k).w(), tiles))
            .args(PartArgs {
                k,
                p,
                col0: k * self.nb,
                nb: self.nb,
                shape: (self.n - k * self.nb, w),
                index: rows.iter().map(|&i| i - k).collect(),
                exchange,
            })
            .priority(prio)
            // The kernel runs on host cores only. (The simulator's devices take any
            // codelet their platform gives a rate for: without this they would run it
            // at the device panel rate, which no real run can.)
            .cpu_only();
        let task = match self.panel_team {
            Some(size) => task.team(size),
            None => task,
        };
        if members.len() == 1 {
            return task.into();
        }
        task.rendezvous(Rendezvous {
            key: k as u64,
            members: members.len(),
            rounds: w as u64,
            bytes: 8 * (2 * w as u64 + 2) + 4 * w as u64,
        })
        .into()
    }

    /// The data keys a task reads that may be copies (for `used`).
    pub(super) fn reads(&self, task: &DistLuTask) -> Vec<Key> {
        match *task {
            DistLuTask::Panel(_) | DistLuTask::Part(..) => Vec::new(),
            DistLuTask::Bcast(k, _) => std::iter::once(Key::Piv(k))
                .chain((k..self.t).map(|i| Key::Tile(i, k)))
                .collect(),
            DistLuTask::Swap(k, _) | DistLuTask::SwapOut(k, _, _) => vec![Key::Piv(k)],
            DistLuTask::SwapTop(k, j) => std::iter::once(Key::Piv(k))
                .chain(self.prows(k).into_iter().map(|p| Key::Up(k, j, p)))
                .collect(),
            DistLuTask::SwapIn(k, j, _) => vec![Key::Piv(k), Key::Down(k, j)],
            DistLuTask::Trsm(k, _) => vec![Key::Tile(k, k)],
            DistLuTask::Gemm(k, i, j) => vec![Key::Tile(i, k), Key::Tile(k, j)],
        }
    }
}

impl TaskClasses for DistLu {
    type Key = DistLuTask;

    fn roots(&self) -> Vec<DistLuTask> {
        if self.grid().p == 1 {
            vec![DistLuTask::Panel(0)]
        } else {
            self.members(0)
                .into_iter()
                .map(|p| DistLuTask::Part(0, p))
                .collect()
        }
    }

    fn predecessor_count(&self, key: &DistLuTask) -> usize {
        let t = self.t;
        let after = |k: usize, n: usize| if k > 0 { n } else { 0 };
        match *key {
            DistLuTask::Panel(0) | DistLuTask::Part(0, _) => 0,
            DistLuTask::Panel(k) => t - k,
            DistLuTask::Part(k, p) => self.part_rows(k, p).len(),
            DistLuTask::Bcast(..) => 1,
            DistLuTask::Swap(k, _) => 1 + after(k, t - k),
            DistLuTask::SwapOut(k, _, p) => 1 + after(k, self.rows_of(k, p)),
            DistLuTask::SwapTop(k, _) => 1 + after(k, 1) + self.prows(k).len(),
            DistLuTask::SwapIn(..) | DistLuTask::Trsm(..) => 1,
            DistLuTask::Gemm(..) => {
                if self.grid().p == 1 {
                    1
                } else {
                    2
                }
            }
        }
    }

    fn successors(&self, key: &DistLuTask, out: &mut Vec<DistLuTask>) {
        let (t, g) = (self.t, self.grid());
        match *key {
            DistLuTask::Panel(k) => {
                let c = self.layout.pcol(k);
                out.extend(
                    (k + 1..t)
                        .filter(|&j| self.layout.pcol(j) == c)
                        .map(|j| DistLuTask::Swap(k, j)),
                );
                if let Some(&r) = self.ring(k).first() {
                    out.push(DistLuTask::Bcast(k, r));
                }
            }
            DistLuTask::Part(k, p) => {
                let (out_rows, top) = (self.prows(k).contains(&p), p == k % g.p);
                for j in k + 1..t {
                    if out_rows {
                        out.push(DistLuTask::SwapOut(k, j, p));
                    }
                    if top {
                        out.push(DistLuTask::SwapTop(k, j));
                    }
                }
            }
            DistLuTask::Bcast(k, r) => {
                out.extend(
                    (k + 1..t)
                        .filter(|&j| self.layout.pcol(j) == r)
                        .map(|j| DistLuTask::Swap(k, j)),
                );
                let ring = self.ring(k);
                let at = ring.iter().position(|&x| x == r).expect("r is on the ring");
                if let Some(&next) = ring.get(at + 1) {
                    out.push(DistLuTask::Bcast(k, next));
                }
            }
            DistLuTask::Swap(k, j) => out.push(DistLuTask::Trsm(k, j)),
            DistLuTask::SwapOut(k, j, _) => out.push(DistLuTask::SwapTop(k, j)),
            DistLuTask::SwapTop(k, j) => {
                out.extend(
                    self.prows(k)
                        .into_iter()
                        .map(|p| DistLuTask::SwapIn(k, j, p)),
                );
                out.push(DistLuTask::Trsm(k, j));
            }
            DistLuTask::SwapIn(k, j, p) => out.extend(
                (k + 1..t)
                    .filter(|i| i % g.p == p)
                    .map(|i| DistLuTask::Gemm(k, i, j)),
            ),
            DistLuTask::Trsm(k, j) => out.extend((k + 1..t).map(|i| DistLuTask::Gemm(k, i, j))),
            DistLuTask::Gemm(k, i, j) => out.push(if j == k + 1 && g.p == 1 {
                DistLuTask::Panel(k + 1)
            } else if j == k + 1 {
                DistLuTask::Part(k + 1, i % g.p)
            } else if g.p == 1 {
                DistLuTask::Swap(k + 1, j)
            } else if i == k + 1 {
                DistLuTask::SwapTop(k + 1, j)
            } else {
                DistLuTask::SwapOut(k + 1, j, i % g.p)
            }),
        }
    }

    fn task(&self, key: &DistLuTask) -> TaskBuilder {
        let prio = self.priority(*key);
        let t = self.t;
        let column = |k: usize, j: usize| -> Vec<ReadWrite<Tile>> {
            (k..t).map(|i| self.tile(i, j).rw()).collect()
        };
        match *key {
            DistLuTask::Part(k, p) => self.part_task(k, p, prio),
            DistLuTask::Panel(k) => {
                panel_task(&self.piv(k), column(k, k), k, self.n, self.nb, prio)
            }
            DistLuTask::Bcast(k, _) => {
                let tiles: Vec<Read<Tile>> = (k..t).map(|i| self.tile(i, k).r()).collect();
                Task::new(&BCAST, (self.piv(k).r(), tiles))
                    .args(k)
                    .priority(prio)
                    .into()
            }
            DistLuTask::Swap(k, j) => {
                swap_task(&self.piv(k), column(k, j), k, j, self.n, self.nb, prio)
            }
            DistLuTask::SwapOut(k, j, p) => {
                let tiles: Vec<Read<Tile>> = self.below(k, j, p).iter().map(|h| h.r()).collect();
                Task::new(
                    &SWAPOUT,
                    (self.piv(k).r(), tiles, self.buf(Key::Up(k, j, p)).w()),
                )
                .args(self.rows_args(k, j, p))
                .priority(prio)
                .into()
            }
            DistLuTask::SwapTop(k, j) => {
                let ups: Vec<Read<Vec<f64>>> = self
                    .prows(k)
                    .into_iter()
                    .map(|p| self.buf(Key::Up(k, j, p)).r())
                    .collect();
                Task::new(
                    &SWAPTOP,
                    (
                        self.piv(k).r(),
                        self.tile(k, j).rw(),
                        ups,
                        self.buf(Key::Down(k, j)).w(),
                    ),
                )
                .args(self.rows_args(k, j, k % self.grid().p))
                .priority(prio)
                .into()
            }
            DistLuTask::SwapIn(k, j, p) => {
                let tiles: Vec<ReadWrite<Tile>> =
                    self.below(k, j, p).iter().map(|h| h.rw()).collect();
                Task::new(
                    &SWAPIN,
                    (self.piv(k).r(), self.buf(Key::Down(k, j)).r(), tiles),
                )
                .args(self.rows_args(k, j, p))
                .priority(prio)
                .into()
            }
            DistLuTask::Trsm(k, j) => trsm_task(
                &self.tile(k, k),
                &self.tile(k, j),
                k,
                j,
                self.n,
                self.nb,
                prio,
            ),
            DistLuTask::Gemm(k, i, j) => gemm_task(
                [&self.tile(i, k), &self.tile(k, j), &self.tile(i, j)],
                (k, i, j),
                self.n,
                self.nb,
                prio,
            ),
        }
    }

    fn owner(&self, key: &DistLuTask) -> usize {
        let g = self.grid();
        match *key {
            DistLuTask::Panel(k) => self.panel_rank(k),
            DistLuTask::Part(k, p) => g.rank(p, self.layout.pcol(k)),
            DistLuTask::Bcast(_, r) => r,
            DistLuTask::Swap(k, j) | DistLuTask::SwapTop(k, j) | DistLuTask::Trsm(k, j) => {
                self.layout.owner(k, j)
            }
            DistLuTask::SwapOut(_, j, p) | DistLuTask::SwapIn(_, j, p) => {
                g.rank(p, self.layout.pcol(j))
            }
            DistLuTask::Gemm(_, i, j) => self.layout.owner(i, j),
        }
    }
}

impl DistClasses for DistLu {
    fn open(&self, net: &Arc<Net>) {
        // Every rank, P = 1 too, so that channels are numbered alike.
        let _ = self.panel_net.set(Arc::new(Collectives::new(net)));
    }

    fn flows(&self, from: &DistLuTask, to: &DistLuTask, out: &mut Vec<u64>) {
        let g = self.grid();
        match (*from, *to) {
            (DistLuTask::Panel(k) | DistLuTask::Bcast(k, _), _) if g.p == 1 => {
                out.push(self.key(Key::Piv(k)));
                out.extend((k..self.t).map(|i| self.key(Key::Tile(i, k))));
            }
            // Along the process row: this part's pivots and `L` tiles.
            (DistLuTask::Part(k, p), _) => {
                out.push(self.key(Key::Piv(k)));
                out.extend(
                    self.part_rows(k, p)
                        .into_iter()
                        .map(|i| self.key(Key::Tile(i, k))),
                );
            }
            (DistLuTask::SwapOut(k, j, p), _) => out.push(self.key(Key::Up(k, j, p))),
            (DistLuTask::SwapTop(k, j), _) => out.push(self.key(Key::Down(k, j))),
            (DistLuTask::Trsm(k, j), _) => out.push(self.key(Key::Tile(k, j))),
            (from, to) => unreachable!("no data flows from {from:?} to {to:?} across ranks"),
        }
    }

    fn data(&self, key: u64) -> DataRef {
        match self.slot(key) {
            Slot::Tile(h) => DataRef::of(&h),
            Slot::Piv(h) => DataRef::of(&h),
            Slot::Rows(h) => DataRef::of(&h),
        }
    }

    fn owned(&self, rank: usize) -> usize {
        let (t, g) = (self.t, self.grid());
        let (pr, pc) = g.coords(rank);
        let mut n = 0;
        for k in 0..t {
            // PANEL(k) or PANEL_PART(k, pr).
            n += usize::from(self.factors_on(k, rank));
            let cols = self.cols_of(k, pc);
            if g.p == 1 {
                n += usize::from(self.ring(k).contains(&pc));
                // SWAP, TRSM, and a GEMM per row below, per column of mine.
                n += cols * (2 + (t - k - 1));
            } else {
                let rows = self.rows_of(k, pr);
                let top = usize::from(k % g.p == pr);
                // SWAPOUT + SWAPIN if I hold rows below, SWAPTOP + TRSM if I
                // hold the top tile, and my GEMMs.
                n += cols * (2 * usize::from(self.prows(k).contains(&pr)) + 2 * top + rows);
            }
        }
        n
    }

    fn finished(&self, key: &DistLuTask) {
        for k in self.reads(key) {
            self.used(k);
        }
        // What a task made only to send away is done once sent.
        match *key {
            DistLuTask::SwapOut(k, j, p) if self.layout.owner(k, j) != self.rank => {
                self.used(Key::Up(k, j, p))
            }
            DistLuTask::SwapTop(k, j) if self.prows(k).iter().any(|&p| p != k % self.grid().p) => {
                self.used(Key::Down(k, j))
            }
            _ => {}
        }
    }
}
