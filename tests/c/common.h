/* Shared helpers for the resmpi system-test programs.
 * Every program is self-checking: rank 0 prints "OK" and all ranks exit 0 on
 * success; on failure a "FAIL ..." line goes to stderr and the job aborts. */
#ifndef RESMPI_TEST_COMMON_H
#define RESMPI_TEST_COMMON_H
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <unistd.h>

static int g_rank = -1, g_size = -1;

#define FAIL(...)                                                              \
    do {                                                                       \
        fprintf(stderr, "FAIL rank %d %s:%d: ", g_rank, __FILE__, __LINE__);   \
        fprintf(stderr, __VA_ARGS__);                                          \
        fprintf(stderr, "\n");                                                 \
        fflush(stderr);                                                        \
        MPI_Abort(MPI_COMM_WORLD, 3);                                          \
        exit(3);                                                               \
    } while (0)

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "FAIL rank %d %s:%d: check `%s` failed: ", g_rank, \
                    __FILE__, __LINE__, #cond);                                \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                             \
            fflush(stderr);                                                    \
            MPI_Abort(MPI_COMM_WORLD, 3);                                      \
            exit(3);                                                           \
        }                                                                      \
    } while (0)

#define MPI_OK(call)                                                           \
    do {                                                                       \
        int rc_ = (call);                                                      \
        if (rc_ != MPI_SUCCESS) FAIL("%s returned %d", #call, rc_);           \
    } while (0)

static inline void test_init(int *argc, char ***argv) {
    MPI_OK(MPI_Init(argc, argv));
    MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &g_rank));
    MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &g_size));
}

/* Collective success: barrier, rank 0 prints OK, finalize. */
static inline int test_finish(void) {
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Finalize());
    if (g_rank == 0) {
        printf("OK\n");
        fflush(stdout);
    }
    return 0;
}

static inline void sleep_ms(int ms) { usleep((useconds_t)ms * 1000); }

/* Deterministic byte pattern for (seed, index). */
static inline unsigned char pat(unsigned seed, size_t i) {
    uint32_t x = seed * 2654435761u ^ (uint32_t)i * 40503u ^ (uint32_t)(i >> 13);
    return (unsigned char)(x ^ (x >> 8) ^ (x >> 16));
}
static inline void fill_pat(unsigned char *b, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) b[i] = pat(seed, i);
}
/* returns index of first mismatch, or (size_t)-1 */
static inline size_t check_pat(const unsigned char *b, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++)
        if (b[i] != pat(seed, i)) return i;
    return (size_t)-1;
}

/* Is subtest `name` selected by argv (no args or "all" = everything)? */
static inline int selected(int argc, char **argv, const char *name) {
    if (argc < 2) return 1;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "all") || !strcmp(argv[i], name)) return 1;
    return 0;
}
#endif
