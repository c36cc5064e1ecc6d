/* Non-contiguous point-to-point bandwidth: a ping-pong between ranks 0 and
 * 1 of the same packed bytes sent three ways:
 *   contig   MPI_DOUBLE, contiguous (the reference)
 *   strided  MPI_Type_vector(n, 1, 2, MPI_DOUBLE): every other double
 *   blocks   MPI_Type_vector(n, 64, 128, MPI_DOUBLE): 512 B blocks, 512 B gaps
 * Each size runs about min_seconds after a warm-up; bandwidth counts the
 * packed bytes one way per half round trip.
 * Output (rank 0): "kind packed_bytes MB_per_s" per line.
 * Usage: dtype [max_bytes] [min_seconds]. Plain MPI: builds against any MPI. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double round_trips(MPI_Datatype type, int count, char *buffer, int iterations, int rank) {
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (int i = 0; i < iterations; i++) {
        if (rank == 0) {
            MPI_Send(buffer, count, type, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(buffer, count, type, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(buffer, count, type, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buffer, count, type, 0, 0, MPI_COMM_WORLD);
        }
    }
    double elapsed = MPI_Wtime() - start;
    MPI_Bcast(&elapsed, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    return elapsed / iterations;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long max_bytes = argc > 1 ? atol(argv[1]) : 8L << 20;
    double min_seconds = argc > 2 ? atof(argv[2]) : 0.2;
    /* Twice the packed bytes: both vector types span that much memory. */
    char *buffer = malloc((size_t)max_bytes * 2 + 4096);
    memset(buffer, 1, (size_t)max_bytes * 2 + 4096);
    const char *names[3] = {"contig", "strided", "blocks"};
    for (long bytes = 1024; bytes <= max_bytes; bytes *= 8) {
        int doubles = (int)(bytes / 8);
        MPI_Datatype types[3];
        int counts[3] = {doubles, 1, 1};
        types[0] = MPI_DOUBLE;
        MPI_Type_vector(doubles, 1, 2, MPI_DOUBLE, &types[1]);
        MPI_Type_vector(doubles / 64, 64, 128, MPI_DOUBLE, &types[2]);
        MPI_Type_commit(&types[1]);
        MPI_Type_commit(&types[2]);
        for (int kind = 0; kind < 3; kind++) {
            double per_trip = round_trips(types[kind], counts[kind], buffer, 4, rank);
            int iterations = (int)(min_seconds / (per_trip > 1e-9 ? per_trip : 1e-9));
            if (iterations < 4) iterations = 4;
            if (iterations > 100000) iterations = 100000;
            MPI_Bcast(&iterations, 1, MPI_INT, 0, MPI_COMM_WORLD);
            per_trip = round_trips(types[kind], counts[kind], buffer, iterations, rank);
            if (rank == 0) {
                printf("%s %ld %.1f\n", names[kind], bytes, bytes / (per_trip / 2) / 1e6);
                fflush(stdout);
            }
        }
        MPI_Type_free(&types[1]);
        MPI_Type_free(&types[2]);
    }
    free(buffer);
    MPI_Finalize();
    return 0;
}
