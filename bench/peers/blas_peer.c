/* Peer rates for `bench/peers/lu.sh`: OpenBLAS dgemm and dgetrf on one seeded
 * random N x N matrix, best of REPS, allocation and copies outside the timed
 * part. Prints "dgemm N GFLOPS" and "dgetrf N GFLOPS" lines.
 * With a third argument W (`blas_peer N REPS W`, for `bench/peers/lu_kernels.sh`):
 * dgetrf of one N x W panel instead, printing "dgetrf_panel N W GFLOPS". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void dgemm_(const char *, const char *, const int *, const int *, const int *, const double *,
            const double *, const int *, const double *, const int *, const double *, double *,
            const int *);
void dgetrf_(const int *, const int *, double *, const int *, int *, int *);

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 4096;
    int reps = argc > 2 ? atoi(argv[2]) : 3;
    if (argc > 3) {
        int w = atoi(argv[3]);
        size_t mw = (size_t)n * w;
        double *p = malloc(mw * sizeof(double)), *q = malloc(mw * sizeof(double));
        int *piv = malloc(w * sizeof(int));
        if (!p || !q || !piv) { fprintf(stderr, "blas_peer: out of memory\n"); return 1; }
        unsigned long long s = 12345;
        for (size_t i = 0; i < mw; i++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            p[i] = (double)(s >> 11) / 9007199254740992.0 - 0.5;
        }
        double best = 1e30;
        for (int r = 0; r < reps; r++) {
            memcpy(q, p, mw * sizeof(double));
            int info = 0;
            double t0 = now();
            dgetrf_(&n, &w, q, &n, piv, &info);
            double t = now() - t0;
            if (info != 0) { fprintf(stderr, "dgetrf info=%d\n", info); return 1; }
            if (t < best) best = t;
        }
        double k = w, m = n;
        printf("dgetrf_panel %d %d %.2f\n", n, w, (m * k * k - k * k * k / 3 - k * k / 2 + 5 * k / 6) / best / 1e9);
        return 0;
    }
    size_t nn = (size_t)n * n;
    double *a = malloc(nn * sizeof(double)), *b = malloc(nn * sizeof(double));
    double *c = malloc(nn * sizeof(double)), *lu = malloc(nn * sizeof(double));
    int *ipiv = malloc(n * sizeof(int));
    if (!a || !b || !c || !lu || !ipiv) { fprintf(stderr, "blas_peer: out of memory for n=%d\n", n); return 1; }
    unsigned long long s = 12345;
    for (size_t i = 0; i < nn; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        a[i] = (double)(s >> 11) / 9007199254740992.0 - 0.5;
        b[i] = a[(i * 7) % nn];
        c[i] = 0.0;
    }
    double one = 1.0, zero = 0.0, best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        dgemm_("N", "N", &n, &n, &n, &one, a, &n, b, &n, &zero, c, &n);
        double t = now() - t0;
        if (t < best) best = t;
    }
    printf("dgemm %d %.2f\n", n, 2.0 * n * (double)n * n / best / 1e9);
    best = 1e30;
    for (int r = 0; r < reps; r++) {
        memcpy(lu, a, nn * sizeof(double));
        int info = 0;
        double t0 = now();
        dgetrf_(&n, &n, lu, &n, ipiv, &info);
        double t = now() - t0;
        if (info != 0) { fprintf(stderr, "dgetrf info=%d\n", info); return 1; }
        if (t < best) best = t;
    }
    printf("dgetrf %d %.2f\n", n, (2.0 / 3.0 * n * (double)n * n) / best / 1e9);
    return 0;
}
