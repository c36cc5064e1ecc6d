/* Message rate between pairs of ranks, in the style of OSU's osu_mbw_mr:
 * rank i of the first half sends to rank i + n/2. Each iteration the sender
 * posts a window of WINDOW MPI_Isend of `bytes` bytes and waits for them,
 * the receiver posts WINDOW MPI_Irecv and waits, then sends a 4-byte ack
 * that the sender receives before its next window.
 * Output (rank 0): "pairs bytes window messages_per_second", the sum over
 * pairs of each sender's messages / its elapsed time.
 * Usage: msgrate [bytes] [min_seconds]
 * Plain MPI-1: builds against any MPI (resmpi, MPICH, Open MPI). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW 64

/* One timed run of `iterations` windows; returns this rank's elapsed seconds. */
static double run(int iterations, int bytes, int peer, int sender, char *buffers, MPI_Request *requests,
                  MPI_Status *statuses)
{
    char ack[4] = {0};
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (int i = 0; i < iterations; i++) {
        if (sender) {
            for (int w = 0; w < WINDOW; w++)
                MPI_Isend(buffers + (size_t)w * bytes, bytes, MPI_BYTE, peer, 100, MPI_COMM_WORLD, &requests[w]);
            MPI_Waitall(WINDOW, requests, statuses);
            MPI_Recv(ack, 4, MPI_BYTE, peer, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            for (int w = 0; w < WINDOW; w++)
                MPI_Irecv(buffers + (size_t)w * bytes, bytes, MPI_BYTE, peer, 100, MPI_COMM_WORLD, &requests[w]);
            MPI_Waitall(WINDOW, requests, statuses);
            MPI_Send(ack, 4, MPI_BYTE, peer, 101, MPI_COMM_WORLD);
        }
    }
    return MPI_Wtime() - start;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2 || size % 2 != 0) {
        if (rank == 0) fprintf(stderr, "msgrate needs an even number of ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int bytes = argc > 1 ? atoi(argv[1]) : 8;
    double min_seconds = argc > 2 ? atof(argv[2]) : 0.5;
    if (bytes < 1) bytes = 1;
    int pairs = size / 2;
    int sender = rank < pairs;
    int peer = sender ? rank + pairs : rank - pairs;
    char *buffers = malloc((size_t)WINDOW * bytes);
    memset(buffers, rank + 1, (size_t)WINDOW * bytes);
    MPI_Request requests[WINDOW];
    MPI_Status statuses[WINDOW];

    /* Warm up, then size the run from the slowest rank's warm-up time. */
    int iterations = 20;
    double elapsed = run(iterations, bytes, peer, sender, buffers, requests, statuses);
    double slowest;
    MPI_Allreduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double per_iteration = slowest / iterations;
    iterations = (int)(min_seconds / (per_iteration > 1e-9 ? per_iteration : 1e-9));
    if (iterations < 20) iterations = 20;
    if (iterations > 10000000) iterations = 10000000;

    elapsed = run(iterations, bytes, peer, sender, buffers, requests, statuses);
    double rate = sender ? (double)iterations * WINDOW / elapsed : 0.0;
    double total = 0;
    MPI_Reduce(&rate, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("%d %d %d %.0f\n", pairs, bytes, WINDOW, total);
        fflush(stdout);
    }
    free(buffers);
    MPI_Finalize();
    return 0;
}
