/* bench/stream_gaps.c: tests/c/stream.c (a content-checked stream of 8 B,
 * 1000 B, 70000 B and 1 MiB messages in both directions around the ring)
 * plus timing, for bench/network_ft.sh: how long the application stalls
 * when a rail goes down.
 *
 * usage: stream_gaps [ITERATIONS]
 *
 * Every rank times each iteration (its MPI_Sendrecv and the content check).
 * Rank 0 prints "started" after the first iteration, then at the end:
 *   digest HEX after N iterations          (as tests/c/stream.c)
 *   iterations N seconds S                 (wall time of the loop, rank 0)
 *   median_us M                            (median iteration, over all ranks)
 *   max_gap_us G at_s T iteration I rank R (the longest single iteration of
 *                                           any rank, when it began, seconds
 *                                           after MPI_Init returned)
 *   slow_iterations K slow_ms S window_ms W from_s F rank R
 *                      iterations longer than SLOW_MS (env, default 20 ms) on
 *                      the rank where they add up most: how many, their sum,
 *                      and the span from the start of the first to the end
 *                      of the last (the degraded period), starting F s after
 *                      MPI_Init
 * The longest stall seen by the application is about max_gap_us - median_us. */
#include "../tests/c/common.h"

static uint64_t mix(uint64_t h, const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    double t_init = MPI_Wtime();
    int iterations = argc > 1 ? atoi(argv[1]) : 200;
    if (iterations < 1) iterations = 1;
    const size_t sizes[] = {8, 1000, 70000, 1 << 20};
    enum { KINDS = 4 };
    size_t largest = 1 << 20;
    unsigned char *out = malloc(largest), *in = malloc(largest);
    double *took = malloc(sizeof(double) * (size_t)iterations);
    int right = (g_rank + 1) % g_size, left = (g_rank - 1 + g_size) % g_size;
    uint64_t digest = 1469598103934665603ull;
    struct { double value; int index; } longest = {0.0, 0}, longest_all;
    double longest_at = 0;
    double slow_limit = getenv("SLOW_MS") ? atof(getenv("SLOW_MS")) / 1e3 : 0.020;
    int slow_count = 0;
    double slow_total = 0, slow_first = -1, slow_last_end = -1;
    double loop_start = MPI_Wtime();
    for (int it = 0; it < iterations; it++) {
        double t0 = MPI_Wtime();
        size_t n = sizes[it % KINDS];
        for (size_t i = 0; i < n; i++) out[i] = pat(g_rank * 7919 + it, i);
        MPI_OK(MPI_Sendrecv(out, (int)n, MPI_BYTE, right, it, in, (int)n, MPI_BYTE, left, it, MPI_COMM_WORLD,
                            MPI_STATUS_IGNORE));
        for (size_t i = 0; i < n; i++)
            if (in[i] != pat(left * 7919 + it, i)) FAIL("iteration %d byte %zu corrupt", it, i);
        digest = mix(digest, in, n);
        double dt = MPI_Wtime() - t0;
        took[it] = dt;
        if (dt > slow_limit) {
            slow_count++;
            slow_total += dt;
            if (slow_first < 0) slow_first = t0 - t_init;
            slow_last_end = t0 + dt - t_init;
        }
        if (dt > longest.value) {
            longest.value = dt;
            longest.index = it;
            longest_at = t0 - t_init;
        }
        if (it == 0 && g_rank == 0) {
            printf("started\n");
            fflush(stdout);
        }
    }
    double loop_seconds = MPI_Wtime() - loop_start;
    uint64_t all = 0;
    MPI_OK(MPI_Allreduce(&digest, &all, 1, MPI_UINT64_T, MPI_BXOR, MPI_COMM_WORLD));

    /* The longest iteration of any rank, and where/when it happened. */
    struct { double value; int index; } mine = {longest.value, g_rank};
    MPI_OK(MPI_Allreduce(&mine, &longest_all, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD));
    double info[2] = {longest_at, (double)longest.index};
    if (longest_all.index != 0) {
        if (g_rank == longest_all.index) MPI_OK(MPI_Send(info, 2, MPI_DOUBLE, 0, 77, MPI_COMM_WORLD));
        if (g_rank == 0)
            MPI_OK(MPI_Recv(info, 2, MPI_DOUBLE, longest_all.index, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    }
    /* The rank whose slow iterations add up most. */
    struct { double value; int index; } slow_mine = {slow_total, g_rank}, slow_all;
    MPI_OK(MPI_Allreduce(&slow_mine, &slow_all, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD));
    double slow_info[3] = {(double)slow_count, slow_first, slow_last_end};
    if (slow_all.index != 0) {
        if (g_rank == slow_all.index) MPI_OK(MPI_Send(slow_info, 3, MPI_DOUBLE, 0, 79, MPI_COMM_WORLD));
        if (g_rank == 0)
            MPI_OK(MPI_Recv(slow_info, 3, MPI_DOUBLE, slow_all.index, 79, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    }
    /* Median iteration over all ranks: gather everything at rank 0. */
    double *every = g_rank == 0 ? malloc(sizeof(double) * (size_t)iterations * (size_t)g_size) : NULL;
    /* (point to point: resmpi has no MPI_Gather yet) */
    if (g_rank == 0) {
        memcpy(every, took, sizeof(double) * (size_t)iterations);
        for (int r = 1; r < g_size; r++)
            MPI_OK(MPI_Recv(every + (size_t)r * (size_t)iterations, iterations, MPI_DOUBLE, r, 78, MPI_COMM_WORLD,
                            MPI_STATUS_IGNORE));
    } else {
        MPI_OK(MPI_Send(took, iterations, MPI_DOUBLE, 0, 78, MPI_COMM_WORLD));
    }
    if (g_rank == 0) {
        size_t count = (size_t)iterations * (size_t)g_size;
        qsort(every, count, sizeof(double), cmp_double);
        printf("digest %016llx after %d iterations\n", (unsigned long long)all, iterations);
        printf("iterations %d seconds %.3f\n", iterations, loop_seconds);
        printf("median_us %.1f\n", every[count / 2] * 1e6);
        printf("max_gap_us %.1f at_s %.3f iteration %d rank %d\n", longest_all.value * 1e6, info[0],
               (int)info[1], longest_all.index);
        printf("slow_iterations %d slow_ms %.1f window_ms %.1f from_s %.3f rank %d\n", (int)slow_info[0],
               slow_all.value * 1e3, slow_info[0] > 0 ? (slow_info[2] - slow_info[1]) * 1e3 : 0.0,
               slow_info[0] > 0 ? slow_info[1] : 0.0, slow_all.index);
        fflush(stdout);
        free(every);
    }
    free(took);
    free(out);
    free(in);
    return test_finish();
}
