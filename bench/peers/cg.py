"""PETSc's side of bench/peers/cg.sh: KSPCG on the same matrix as `tessera spmv`, timed.

Run as `mpirun -np R python3 cg.py SPEC ITERS RTOL PC`. SPEC is `stencil27:N` (built here
exactly like Tessera's generator: 26 on the diagonal, -1 for each of the up to 26 neighbours
in the N^3 grid) or a Matrix Market file. Prints one line that cg.sh parses:
  petsc: ranks R rows N nnz Z iterations K reason W iteration_ms T matmult_ms M
"""
import sys
import time

import numpy as np
import scipy.io
import scipy.sparse as sp
from mpi4py import MPI
import petsc4py

petsc4py.init(sys.argv[:1])
from petsc4py import PETSc  # noqa: E402

spec, iters, rtol, pc = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
comm = PETSc.COMM_WORLD


def stencil27(n):
    t = sp.diags([1.0, 1.0, 1.0], [-1, 0, 1], shape=(n, n), format="csr")
    k = sp.kron(t, sp.kron(t, t, format="csr"), format="csr")
    return (27.0 * sp.identity(n ** 3, format="csr") - k).tocsr()


if spec.startswith("stencil27:"):
    a = stencil27(int(spec.split(":")[1]))
else:
    a = scipy.io.mmread(spec).tocsr()
a.sum_duplicates()
a.sort_indices()
n = a.shape[0]
A = PETSc.Mat().createAIJ(size=a.shape, comm=comm)
A.setUp()
lo, hi = A.getOwnershipRange()
rows = a[lo:hi]
A.setPreallocationCSR((rows.indptr.astype(PETSc.IntType), rows.indices.astype(PETSc.IntType), rows.data))
A.assemble()
del a, rows
nnz = int(A.getInfo(PETSc.Mat.InfoType.GLOBAL_SUM)["nz_used"])

b = A.createVecLeft()
b.set(1.0)
x = A.createVecRight()
ksp = PETSc.KSP().create(comm)
ksp.setOperators(A)
ksp.setType("cg")
ksp.getPC().setType(pc)
ksp.setNormType(PETSc.KSP.NormType.UNPRECONDITIONED)
ksp.setTolerances(rtol=rtol, atol=0.0, max_it=iters)
ksp.setUp()

comm.barrier()
t0 = time.perf_counter()
ksp.solve(b, x)
comm.barrier()
t = time.perf_counter() - t0
k = max(ksp.getIterationNumber(), 1)

y = A.createVecLeft()
comm.barrier()
t0 = time.perf_counter()
for _ in range(k):
    A.mult(x, y)
comm.barrier()
tm = time.perf_counter() - t0
if comm.getRank() == 0:
    print(
        f"petsc: ranks {comm.getSize()} rows {n} nnz {nnz} iterations {ksp.getIterationNumber()} "
        f"reason {ksp.getConvergedReason()} iteration_ms {t / k * 1e3:.3f} matmult_ms {tm / k * 1e3:.3f}"
    )
