/* A stream of small and large messages in both directions between every
 * pair of neighbours, content-checked, for ITERATIONS rounds; rank 0 prints
 * "started" after the first round (so a test can break a link mid-stream)
 * and, at the end, a digest of everything received everywhere, which a
 * faulty run must reproduce exactly. usage: stream [ITERATIONS] */
#include "common.h"

static uint64_t mix(uint64_t h, const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    int iterations = argc > 1 ? atoi(argv[1]) : 200;
    const size_t sizes[] = {8, 1000, 70000, 1 << 20};
    enum { KINDS = 4 };
    size_t largest = 1 << 20;
    unsigned char *out = malloc(largest), *in = malloc(largest);
    int right = (g_rank + 1) % g_size, left = (g_rank - 1 + g_size) % g_size;
    uint64_t digest = 1469598103934665603ull;
    for (int it = 0; it < iterations; it++) {
        size_t n = sizes[it % KINDS];
        for (size_t i = 0; i < n; i++) out[i] = pat(g_rank * 7919 + it, i);
        MPI_OK(MPI_Sendrecv(out, (int)n, MPI_BYTE, right, it, in, (int)n, MPI_BYTE, left, it, MPI_COMM_WORLD,
                            MPI_STATUS_IGNORE));
        for (size_t i = 0; i < n; i++)
            if (in[i] != pat(left * 7919 + it, i)) FAIL("iteration %d byte %zu corrupt", it, i);
        digest = mix(digest, in, n);
        if (it == 0 && g_rank == 0) {
            printf("started\n");
            fflush(stdout);
        }
    }
    uint64_t all = 0;
    MPI_OK(MPI_Allreduce(&digest, &all, 1, MPI_UINT64_T, MPI_BXOR, MPI_COMM_WORLD));
    if (g_rank == 0) printf("digest %016llx after %d iterations\n", (unsigned long long)all, iterations);
    free(out);
    free(in);
    return test_finish();
}
