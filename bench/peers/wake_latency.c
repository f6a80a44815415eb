/* Wake-up latency of a parked thread: the platform fact behind the idle
 * workers' search window (engine/src/sleep/mod.rs, YIELD_WINDOW). A thread
 * pinned to CPU 1 waits on a condition variable; the main thread, pinned to
 * CPU 0, signals it every 200 us (CPU 1 idle in between) and the waiter
 * notes the time from the signal to its return from the wait. Also the cost
 * of one sched_yield, the unit of the search window's rounds.
 * Written by hand: it is one measurement of the OS, no library does it.
 *   gcc -O2 -pthread wake_latency.c -o wake_latency && ./wake_latency [N] */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int flag; /* 1: signalled, not yet taken */
static double sent_us;
static double *lat;
static int n;

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

static void *waiter(void *arg) {
    (void)arg;
    pin(1);
    for (int i = 0; i < n; i++) {
        pthread_mutex_lock(&lock);
        while (!flag) pthread_cond_wait(&cond, &lock);
        lat[i] = now_us() - sent_us;
        flag = 0;
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    n = argc > 1 ? atoi(argv[1]) : 2000;
    if (n < 100) {
        fprintf(stderr, "wake_latency: N must be at least 100 (got %s)\n", argv[1]);
        return 2;
    }
    lat = malloc(sizeof *lat * n);
    pin(0);
    pthread_t t;
    pthread_create(&t, NULL, waiter, NULL);
    for (int i = 0; i < n; i++) {
        usleep(200);
        for (;;) { /* the previous wake-up taken */
            pthread_mutex_lock(&lock);
            int taken = !flag;
            if (taken) {
                flag = 1;
                sent_us = now_us();
                pthread_cond_signal(&cond);
            }
            pthread_mutex_unlock(&lock);
            if (taken) break;
            usleep(10);
        }
    }
    pthread_join(t, NULL);
    qsort(lat, n, sizeof *lat, by_value);
    printf("wake-up of a parked thread on an idle CPU, us (%d wake-ups): p10 %.1f median %.1f p90 %.1f p99 %.1f\n",
           n, lat[n / 10], lat[n / 2], lat[n * 9 / 10], lat[n * 99 / 100]);
    double t0 = now_us();
    for (int i = 0; i < 100000; i++) sched_yield();
    printf("sched_yield with nothing else to run: %.3f us\n", (now_us() - t0) / 100000);
    return 0;
}
