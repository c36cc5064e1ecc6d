/* Message logging, deterministic exchange: a ring of nonblocking sends
 * (both directions, a halo) for ITERATIONS rounds of COUNT doubles, each
 * rank's state depending on what its neighbours sent. Every rank prints a
 * line every few rounds and its final checksum: under --msglog a rank
 * killed mid-run is restarted, replays, and the job prints exactly what a
 * fault-free run prints.  Usage:
 * msglog_ring ITERATIONS COUNT [SYNC [SLEEP_US [DIES_AFTER_FINALIZE]]]:
 * SYNC 1 sends with MPI_Issend; SLEEP_US pauses every round (so that a
 * kill at a time lands mid-run); rank DIES_AFTER_FINALIZE kills itself
 * (SIGKILL) right after MPI_Finalize. */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iterations = argc > 1 ? atoi(argv[1]) : 20;
    int count = argc > 2 ? atoi(argv[2]) : 16;
    int sync = argc > 3 ? atoi(argv[3]) : 0;
    int sleep_us = argc > 4 ? atoi(argv[4]) : 0;
    int dies_after_finalize = argc > 5 ? atoi(argv[5]) : -1;
    double *state = malloc(sizeof(double) * count);
    double *left_in = malloc(sizeof(double) * count);
    double *right_in = malloc(sizeof(double) * count);
    for (int i = 0; i < count; i++) state[i] = rank * 1000.0 + i;
    int left = (rank + size - 1) % size, right = (rank + 1) % size;
    for (int it = 0; it < iterations; it++) {
        MPI_Request requests[4];
        MPI_Irecv(left_in, count, MPI_DOUBLE, left, it, MPI_COMM_WORLD, &requests[0]);
        MPI_Irecv(right_in, count, MPI_DOUBLE, right, it, MPI_COMM_WORLD, &requests[1]);
        if (sync) {
            MPI_Issend(state, count, MPI_DOUBLE, right, it, MPI_COMM_WORLD, &requests[2]);
            MPI_Issend(state, count, MPI_DOUBLE, left, it, MPI_COMM_WORLD, &requests[3]);
        } else {
            MPI_Isend(state, count, MPI_DOUBLE, right, it, MPI_COMM_WORLD, &requests[2]);
            MPI_Isend(state, count, MPI_DOUBLE, left, it, MPI_COMM_WORLD, &requests[3]);
        }
        if (sleep_us) usleep(sleep_us);
        MPI_Waitall(4, requests, MPI_STATUSES_IGNORE);
        for (int i = 0; i < count; i++)
            state[i] = 0.5 * state[i] + 0.25 * left_in[i] + 0.25 * right_in[(i + 1) % count] + it;
        if (it % 5 == 4) {
            double sum = 0;
            for (int i = 0; i < count; i++) sum += state[i] * (i + 1);
            printf("rank %d iteration %d partial %.6f\n", rank, it, sum);
        }
    }
    double sum = 0;
    for (int i = 0; i < count; i++) sum += state[i] * (i + 1);
    printf("rank %d checksum %.6f\n", rank, sum);
    free(state);
    free(left_in);
    free(right_in);
    fflush(stdout);
    MPI_Finalize();
    if (rank == dies_after_finalize) raise(SIGKILL);
    return 0;
}
