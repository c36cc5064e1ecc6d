/* Ping-pong between ranks 0 and 1: one-way latency and bandwidth per size.
 * Output (rank 0): "size_bytes latency_us bandwidth_MBps" per line.
 * Usage: pingpong [max_bytes] [min_seconds_per_size]
 * Plain MPI-1: builds against any MPI (resmpi, MPICH, Open MPI). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (rank == 0) fprintf(stderr, "pingpong needs exactly 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    long max_bytes = argc > 1 ? atol(argv[1]) : 4L << 20;
    double min_seconds = argc > 2 ? atof(argv[2]) : 0.2;
    char *buffer = malloc(max_bytes > 0 ? max_bytes : 1);
    memset(buffer, rank + 1, max_bytes > 0 ? max_bytes : 1);
    int peer = 1 - rank;
    for (long bytes = 1; bytes <= max_bytes; bytes *= 2) {
        /* Warm up, then pick an iteration count that lasts about min_seconds. */
        int iterations = 10;
        double elapsed = 0;
        for (int round = 0; round < 2; round++) {
            MPI_Barrier(MPI_COMM_WORLD);
            double start = MPI_Wtime();
            for (int i = 0; i < iterations; i++) {
                if (rank == 0) {
                    MPI_Send(buffer, (int)bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                    MPI_Recv(buffer, (int)bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(buffer, (int)bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(buffer, (int)bytes, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                }
            }
            elapsed = MPI_Wtime() - start;
            double per_iteration = elapsed / iterations;
            int next = (int)(min_seconds / (per_iteration > 1e-9 ? per_iteration : 1e-9));
            if (next < 10) next = 10;
            if (next > 1000000) next = 1000000;
            MPI_Bcast(&next, 1, MPI_INT, 0, MPI_COMM_WORLD);
            if (round == 0) iterations = next;
        }
        if (rank == 0) {
            double one_way_us = elapsed / iterations / 2 * 1e6;
            printf("%ld %.3f %.1f\n", bytes, one_way_us, bytes / one_way_us);
            fflush(stdout);
        }
    }
    free(buffer);
    MPI_Finalize();
    return 0;
}
