/* OSU-style collective sweep: every common collective at every power-of-two
 * size from 1 B (4 B for reductions) to max_bytes, on MPI_COMM_WORLD.
 *
 * Why not OSU itself: its averages over one loop swallow a scheduler hiccup
 * on a 2-core VM whole, so curves look non-monotonic for reasons that are
 * not the library's. Here each size runs BATCHES timed batches of about
 * min_seconds / BATCHES; a batch's time is the slowest rank's average per
 * call, and the size reports the best batch (what the library can do) and
 * the median batch (what it usually does).
 *
 * Sizes: bcast, reduce, allreduce, scan: the whole vector; gather, scatter,
 * allgather, alltoall: the block per rank; reduce_scatter_block: the block
 * each rank gets. Reductions use MPI_FLOAT and MPI_SUM (as OSU), data
 * movement MPI_BYTE, roots are rank 0. Barrier reports size 0.
 *
 * Output (rank 0), one line per size: "op bytes best_us median_us".
 * Usage: coll_sweep [max_bytes] [min_seconds] [op,op,...]. Plain MPI. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCHES 5

enum { BARRIER, BCAST, REDUCE, ALLREDUCE, SCAN, GATHER, SCATTER, ALLGATHER, ALLTOALL, REDUCE_SCATTER, OP_COUNT };
static const char *const NAMES[OP_COUNT] = {"barrier", "bcast", "reduce", "allreduce", "scan",
                                            "gather", "scatter", "allgather", "alltoall",
                                            "reduce_scatter_block"};
static const int IS_REDUCTION[OP_COUNT] = {0, 0, 1, 1, 1, 0, 0, 0, 0, 1};

static void run_once(int op, long bytes, char *a, char *b) {
    int count = (int)(IS_REDUCTION[op] ? bytes / 4 : bytes);
    switch (op) {
    case BARRIER: MPI_Barrier(MPI_COMM_WORLD); break;
    case BCAST: MPI_Bcast(a, count, MPI_BYTE, 0, MPI_COMM_WORLD); break;
    case REDUCE: MPI_Reduce(a, b, count, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD); break;
    case ALLREDUCE: MPI_Allreduce(a, b, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case SCAN: MPI_Scan(a, b, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case GATHER: MPI_Gather(a, count, MPI_BYTE, b, count, MPI_BYTE, 0, MPI_COMM_WORLD); break;
    case SCATTER: MPI_Scatter(a, count, MPI_BYTE, b, count, MPI_BYTE, 0, MPI_COMM_WORLD); break;
    case ALLGATHER: MPI_Allgather(a, count, MPI_BYTE, b, count, MPI_BYTE, MPI_COMM_WORLD); break;
    case ALLTOALL: MPI_Alltoall(a, count, MPI_BYTE, b, count, MPI_BYTE, MPI_COMM_WORLD); break;
    case REDUCE_SCATTER:
        MPI_Reduce_scatter_block(a, b, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
    }
}

/* The slowest rank's average seconds per call over `iterations` calls. */
static double time_batch(int op, long bytes, int iterations, char *a, char *b) {
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (int i = 0; i < iterations; i++)
        run_once(op, bytes, a, b);
    double mine = (MPI_Wtime() - start) / iterations, slowest;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return slowest;
}

/* Whether `name` is one of the comma-separated names in `list`. */
static int listed(const char *list, const char *name) {
    size_t length = strlen(name);
    for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (strncmp(p, name, length) == 0 && (p[length] == ',' || p[length] == '\0'))
            return 1;
    return 0;
}

static int by_value(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long max_bytes = argc > 1 ? atol(argv[1]) : 1 << 20;
    double min_seconds = argc > 2 ? atof(argv[2]) : 0.05;
    const char *only = argc > 3 && strcmp(argv[3], "all") != 0 ? argv[3] : NULL;
    /* Block-per-rank collectives move size * bytes through one buffer. */
    size_t room = (size_t)max_bytes * (size_t)size;
    char *a = malloc(room), *b = malloc(room);
    if (!a || !b) {
        fprintf(stderr, "coll_sweep: cannot allocate %zu bytes\n", room);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(a, 0, room);
    memset(b, 0, room);
    for (int op = 0; op < OP_COUNT; op++) {
        if (only && !listed(only, NAMES[op]))
            continue;
        long first = op == BARRIER ? 0 : IS_REDUCTION[op] ? 4 : 1;
        long last = op == BARRIER ? 0 : max_bytes;
        for (long bytes = first; bytes <= last; bytes = bytes ? bytes * 2 : 1) {
            double per_call = time_batch(op, bytes, 10, a, b);
            int iterations = (int)(min_seconds / BATCHES / (per_call > 1e-9 ? per_call : 1e-9));
            if (iterations < 5) iterations = 5;
            if (iterations > 100000) iterations = 100000;
            MPI_Bcast(&iterations, 1, MPI_INT, 0, MPI_COMM_WORLD);
            double batches[BATCHES];
            for (int k = 0; k < BATCHES; k++)
                batches[k] = time_batch(op, bytes, iterations, a, b);
            qsort(batches, BATCHES, sizeof batches[0], by_value);
            if (rank == 0) {
                printf("%s %ld %.3f %.3f\n", NAMES[op], bytes, batches[0] * 1e6,
                       batches[BATCHES / 2] * 1e6);
                fflush(stdout);
            }
            if (bytes == 0)
                break;
        }
    }
    free(a);
    free(b);
    MPI_Finalize();
    return 0;
}
