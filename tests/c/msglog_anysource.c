/* Message logging, non-determinism: rank 0 takes one message from every
 * other rank per round with MPI_ANY_SOURCE, and the order in which they
 * match decides what it answers (a running hash of the sources in match
 * order), which decides what the others send next. Workers sleep a
 * rank- and round-dependent time so that the order differs between runs.
 * A restarted rank 0 must match in the logged order, or its answers (and
 * everybody's output) change.  Usage: msglog_anysource ROUNDS */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rounds = argc > 1 ? atoi(argv[1]) : 10;
    unsigned long long hash = 1469598103934665603ULL;
    long value = rank;
    for (int round = 0; round < rounds; round++) {
        if (rank == 0) {
            char order[256];
            int at = 0;
            for (int i = 1; i < size; i++) {
                long got;
                MPI_Status status;
                MPI_Recv(&got, 1, MPI_LONG, MPI_ANY_SOURCE, round, MPI_COMM_WORLD, &status);
                hash = (hash ^ (unsigned long long)(status.MPI_SOURCE * 7919 + got)) * 1099511628211ULL;
                at += snprintf(order + at, sizeof order - at, " %d", status.MPI_SOURCE);
            }
            printf("round %d order%s\n", round, order);
            for (int i = 1; i < size; i++) {
                long answer = (long)(hash % 100000) + i;
                MPI_Send(&answer, 1, MPI_LONG, i, round, MPI_COMM_WORLD);
            }
        } else {
            usleep(((rank * 37 + round * 11) % 7) * 300);
            MPI_Send(&value, 1, MPI_LONG, 0, round, MPI_COMM_WORLD);
            long answer;
            MPI_Recv(&answer, 1, MPI_LONG, 0, round, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            value = value * 3 + answer;
        }
    }
    if (rank == 0)
        printf("rank 0 hash %llu\n", hash);
    else
        printf("rank %d value %ld\n", rank, value);
    MPI_Finalize();
    return 0;
}
