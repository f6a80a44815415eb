/* Peer for `bench/peers/cholesky.sh`: OpenBLAS (LAPACK) dpotrf, lower, on
 * the N x N matrix `tessera cholesky` factors (entry (i, j) = 1 / (1 + |i - j|),
 * plus N on the diagonal), best of REPS; the copy is outside the timed part.
 * Prints "dpotrf N GFLOPS". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void dpotrf_(const char *, const int *, double *, const int *, int *);

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 2048;
    int reps = argc > 2 ? atoi(argv[2]) : 3;
    size_t nn = (size_t)n * n;
    double *a = malloc(nn * sizeof(double)), *l = malloc(nn * sizeof(double));
    if (!a || !l) { fprintf(stderr, "potrf_peer: out of memory for n=%d\n", n); return 1; }
    for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++)
            a[(size_t)j * n + i] = 1.0 / (1.0 + abs(i - j)) + (i == j ? n : 0.0);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        memcpy(l, a, nn * sizeof(double));
        int info = 0;
        double t0 = now();
        dpotrf_("L", &n, l, &n, &info);
        double t = now() - t0;
        if (info != 0) { fprintf(stderr, "dpotrf info=%d\n", info); return 1; }
        if (t < best) best = t;
    }
    printf("dpotrf %d %.2f\n", n, (double)n * n * n / 3.0 / best / 1e9);
    return 0;
}
