/* Collective timing: MPI_Allreduce (MPI_DOUBLE, MPI_SUM) and MPI_Alltoall
 * (MPI_BYTE), 8 B .. max_bytes. For Allreduce the size is the vector, for
 * Alltoall the block sent to each peer. Each size runs about min_seconds
 * after a warm-up; the time is the slowest rank's average per call.
 * Output (rank 0): "allreduce|alltoall size_bytes time_us" per line.
 * Usage: coll [max_bytes] [min_seconds]. Plain MPI: builds against any MPI. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double time_calls(int which, int bytes, int iterations, void *a, void *b) {
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (int i = 0; i < iterations; i++) {
        if (which == 0)
            MPI_Allreduce(a, b, bytes / 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        else
            MPI_Alltoall(a, bytes, MPI_BYTE, b, bytes, MPI_BYTE, MPI_COMM_WORLD);
    }
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
    size_t room = (size_t)max_bytes * size;
    char *a = malloc(room), *b = malloc(room);
    memset(a, 0, room);
    memset(b, 0, room);
    const char *names[2] = {"allreduce", "alltoall"};
    for (int which = 0; which < 2; which++)
        for (long bytes = 8; bytes <= max_bytes; bytes *= 8) {
            double per_call = time_calls(which, (int)bytes, 10, a, b);
            int iterations = (int)(min_seconds / (per_call > 1e-9 ? per_call : 1e-9));
            if (iterations < 10) iterations = 10;
            if (iterations > 200000) iterations = 200000;
            MPI_Bcast(&iterations, 1, MPI_INT, 0, MPI_COMM_WORLD);
            per_call = time_calls(which, (int)bytes, iterations, a, b);
            if (rank == 0) {
                printf("%s %ld %.3f\n", names[which], bytes, per_call * 1e6);
                fflush(stdout);
            }
        }
    free(a);
    free(b);
    MPI_Finalize();
    return 0;
}
