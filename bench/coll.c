/* Collective timing: MPI_Barrier, MPI_Bcast (MPI_BYTE, root 0),
 * MPI_Reduce (root 0), MPI_Allreduce, MPI_Allgather (MPI_BYTE),
 * MPI_Alltoall (MPI_BYTE) and MPI_Scan, back to back. Reductions (reduce, allreduce, scan) are
 * MPI_SUM over MPI_DOUBLE when the size is a multiple of 8, else over
 * MPI_BYTE as MPI_UNSIGNED_CHAR; size = the vector. Allgather and
 * alltoall: size = the block per rank. Barrier has size 0.
 * Sizes: 1, 8, 64, 512, 4096, 8192, 16384, 32768, 65536 up to max_bytes.
 * Each size runs about min_seconds after a warm-up; the time is the
 * slowest rank's average per call.
 * Output (rank 0): "collective size_bytes time_us" per line.
 * Usage: coll [max_bytes] [min_seconds] [collectives, comma separated].
 * Plain MPI: builds against any MPI. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BARRIER, BCAST, REDUCE, ALLREDUCE, ALLGATHER, ALLTOALL, SCAN, KINDS };
static const char *names[KINDS] = {"barrier", "bcast", "reduce", "allreduce", "allgather", "alltoall", "scan"};

static void one_call(int which, int bytes, void *a, void *b) {
    MPI_Datatype type = bytes % 8 ? MPI_UNSIGNED_CHAR : MPI_DOUBLE;
    int count = bytes % 8 ? bytes : bytes / 8;
    switch (which) {
    case BARRIER: MPI_Barrier(MPI_COMM_WORLD); break;
    case BCAST: MPI_Bcast(a, bytes, MPI_BYTE, 0, MPI_COMM_WORLD); break;
    case REDUCE: MPI_Reduce(a, b, count, type, MPI_SUM, 0, MPI_COMM_WORLD); break;
    case ALLREDUCE: MPI_Allreduce(a, b, count, type, MPI_SUM, MPI_COMM_WORLD); break;
    case ALLGATHER: MPI_Allgather(a, bytes, MPI_BYTE, b, bytes, MPI_BYTE, MPI_COMM_WORLD); break;
    case ALLTOALL: MPI_Alltoall(a, bytes, MPI_BYTE, b, bytes, MPI_BYTE, MPI_COMM_WORLD); break;
    case SCAN: MPI_Scan(a, b, count, type, MPI_SUM, MPI_COMM_WORLD); break;
    }
}

static double time_calls(int which, int bytes, int iterations, void *a, void *b) {
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (int i = 0; i < iterations; i++) one_call(which, bytes, a, b);
    double mine = (MPI_Wtime() - start) / iterations, slowest;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return slowest;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long max_bytes = argc > 1 ? atol(argv[1]) : 65536;
    double min_seconds = argc > 2 ? atof(argv[2]) : 0.2;
    const char *only = argc > 3 ? argv[3] : NULL;
    size_t room = (size_t)max_bytes * size;
    char *a = malloc(room), *b = malloc(room);
    memset(a, 0, room);
    memset(b, 0, room);
    static const long sizes[] = {1, 8, 64, 512, 4096, 8192, 16384, 32768, 65536};
    for (int which = 0; which < KINDS; which++) {
        if (only && !strstr(only, names[which])) continue;
        for (unsigned s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            long bytes = which == BARRIER ? 0 : sizes[s];
            if (bytes > max_bytes) break;
            double per_call = time_calls(which, (int)bytes, 20, a, b);
            int iterations = (int)(min_seconds / (per_call > 1e-9 ? per_call : 1e-9));
            if (iterations < 10) iterations = 10;
            if (iterations > 200000) iterations = 200000;
            MPI_Bcast(&iterations, 1, MPI_INT, 0, MPI_COMM_WORLD);
            per_call = time_calls(which, (int)bytes, iterations, a, b);
            if (rank == 0) {
                printf("%s %ld %.3f\n", names[which], bytes, per_call * 1e6);
                fflush(stdout);
            }
            if (which == BARRIER) break;
        }
    }
    free(a);
    free(b);
    MPI_Finalize();
    return 0;
}
