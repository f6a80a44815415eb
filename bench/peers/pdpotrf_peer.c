/* Peer for `bench/peers/cholesky.sh`: ScaLAPACK's pdpotrf (lower) on the
 * N x N matrix `tessera cholesky` factors (entry (i, j) = 1 / (1 + |i - j|),
 * plus N on the diagonal), NB x NB blocks dealt 2D block-cyclic over a
 * 1 x P grid (P = the MPI ranks), as tessera deals its tiles on 2 ranks.
 * Each rep refills the local blocks outside the timed part; rank 0 prints
 * "pdpotrf N NB P GFLOPS" for the best of REPS (the slowest rank's time).
 *   mpirun -np 2 pdpotrf_peer N NB REPS */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

void Cblacs_get(int, int, int *);
void Cblacs_gridinit(int *, const char *, int, int);
void Cblacs_gridinfo(int, int *, int *, int *, int *);
void Cblacs_gridexit(int);
int numroc_(const int *, const int *, const int *, const int *, const int *);
void descinit_(int *, const int *, const int *, const int *, const int *, const int *,
               const int *, const int *, const int *, int *);
void pdpotrf_(const char *, const int *, double *, const int *, const int *, const int *, int *);

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int n = argc > 1 ? atoi(argv[1]) : 2048, nb = argc > 2 ? atoi(argv[2]) : 256;
    int reps = argc > 3 ? atoi(argv[3]) : 3;
    int ctx, nprow = 1, npcol = size, myrow, mycol, zero = 0, one = 1, info;
    Cblacs_get(-1, 0, &ctx);
    Cblacs_gridinit(&ctx, "Row", nprow, npcol);
    Cblacs_gridinfo(ctx, &nprow, &npcol, &myrow, &mycol);
    int mloc = numroc_(&n, &nb, &myrow, &zero, &nprow);
    int nloc = numroc_(&n, &nb, &mycol, &zero, &npcol);
    int lld = mloc > 1 ? mloc : 1, desc[9];
    descinit_(desc, &n, &n, &nb, &nb, &zero, &zero, &ctx, &lld, &info);
    double *a = malloc((size_t)lld * (nloc > 0 ? nloc : 1) * sizeof(double));
    if (!a) { fprintf(stderr, "pdpotrf_peer: out of memory\n"); MPI_Abort(MPI_COMM_WORLD, 1); }
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        for (int lj = 0; lj < nloc; lj++) {
            int j = ((lj / nb) * npcol + mycol) * nb + lj % nb;
            for (int li = 0; li < mloc; li++) {
                int i = ((li / nb) * nprow + myrow) * nb + li % nb;
                a[(size_t)lj * lld + li] = 1.0 / (1.0 + abs(i - j)) + (i == j ? n : 0.0);
            }
        }
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        pdpotrf_("L", &n, a, &one, &one, desc, &info);
        double t = MPI_Wtime() - t0, tmax;
        MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (info != 0) { fprintf(stderr, "pdpotrf info=%d\n", info); MPI_Abort(MPI_COMM_WORLD, 1); }
        if (tmax < best) best = tmax;
    }
    if (rank == 0) printf("pdpotrf %d %d %d %.2f\n", n, nb, size, (double)n * n * n / 3.0 / best / 1e9);
    free(a);
    Cblacs_gridexit(ctx);
    MPI_Finalize();
    return 0;
}
