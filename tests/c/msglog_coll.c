/* Message logging, collectives: a loop of MPI_Allreduce, MPI_Bcast and
 * MPI_Reduce whose inputs depend on the previous results; every rank
 * prints its final values. A rank killed mid-loop replays its collectives
 * from the others' sender logs.  Usage: msglog_coll ITERATIONS */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iterations = argc > 1 ? atoi(argv[1]) : 30;
    double x[4] = {rank + 1.0, rank * 2.0, 1.0 / (rank + 1), rank * rank};
    long token = 0;
    for (int it = 0; it < iterations; it++) {
        double sum[4];
        MPI_Allreduce(x, sum, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        for (int i = 0; i < 4; i++) x[i] = x[i] * 0.5 + sum[i] / size + it;
        int root = it % size;
        if (rank == root) token = (token * 31 + it + (long)sum[0]) % 1000003;
        MPI_Bcast(&token, 1, MPI_LONG, root, MPI_COMM_WORLD);
        long reduced = 0;
        long mine = token % 1000 + rank;
        MPI_Reduce(&mine, &reduced, 1, MPI_LONG, MPI_MAX, (root + 1) % size, MPI_COMM_WORLD);
        if (rank == (root + 1) % size) token += reduced;
    }
    printf("rank %d x %.6f %.6f %.6f %.6f token %ld\n", rank, x[0], x[1], x[2], x[3], token);
    MPI_Finalize();
    return 0;
}
