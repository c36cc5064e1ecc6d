/* The cost of process replication (issue 12): fixed iteration counts, so
 * that every replica of a rank makes the same calls (a time-based count,
 * as in pingpong.c or coll_sweep.c, differs between replicas and is not
 * send-deterministic, which replication requires).
 * Prints "NAME BYTES MICROSECONDS_PER_CALL" from rank 0 (ping-pong: one
 * way, ranks 0 and 1; collectives: over all ranks).
 * Usage: replication_cost [iterations] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double pingpong(int rank, char *buffer, int bytes, int iterations)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (int i = 0; i < iterations && rank < 2; i++) {
        if (rank == 0) {
            MPI_Send(buffer, bytes, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(buffer, bytes, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buffer, bytes, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buffer, bytes, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
        }
    }
    return (MPI_Wtime() - start) / iterations / 2 * 1e6;
}

static double collective(const char *name, char *a, char *b, int bytes, int iterations)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (int i = 0; i < iterations; i++) {
        if (!strcmp(name, "barrier"))
            MPI_Barrier(MPI_COMM_WORLD);
        else if (!strcmp(name, "bcast"))
            MPI_Bcast(a, bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
        else
            MPI_Allreduce(a, b, bytes / 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    return (MPI_Wtime() - start) / iterations * 1e6;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iterations = argc > 1 ? atoi(argv[1]) : 2000;
    char *a = calloc(1 << 20, 1), *b = calloc(1 << 20, 1);
    const int sizes[] = {8, 65536, 1 << 20};
    for (int s = 0; s < 3 && size >= 2; s++) {
        int count = sizes[s] >= 65536 ? iterations / 10 + 1 : iterations;
        pingpong(rank, a, sizes[s], count / 10 + 1);
        double us = pingpong(rank, a, sizes[s], count);
        if (rank == 0) printf("pingpong %d %.3f\n", sizes[s], us);
    }
    const char *names[] = {"barrier", "bcast", "allreduce"};
    for (int n = 0; n < 3; n++) {
        collective(names[n], a, b, 8, iterations / 10 + 1);
        double us = collective(names[n], a, b, 8, iterations);
        if (rank == 0) printf("%s 8 %.3f\n", names[n], us);
    }
    fflush(stdout);
    free(a);
    free(b);
    MPI_Finalize();
    return 0;
}
