/* The ping-pong of the O2P paper's figure 3(b): every receive is an
 * MPI_ANY_SOURCE one, so every reception is a determinant, and every one
 * is followed at once by a send. Pessimistic logging holds that send until
 * the event logger acked the determinant (an fsync away); optimistic
 * logging sends at once. A fixed count of round trips (a replayed rank
 * must make the same calls).  Usage: msglog_anysource ITERATIONS
 * Output: "anysource BYTES MICROSECONDS" per size, the half round trip. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int iterations = argc > 1 ? atoi(argv[1]) : 1000;
    static char buffer[65536];
    const int sizes[] = {8, 1024, 65536};
    for (int s = 0; s < 3; s++) {
        int bytes = sizes[s];
        MPI_Barrier(MPI_COMM_WORLD);
        double start = MPI_Wtime();
        for (int i = 0; i < iterations; i++) {
            if (rank == 0) {
                MPI_Send(buffer, bytes, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
                MPI_Recv(buffer, bytes, MPI_CHAR, MPI_ANY_SOURCE, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                MPI_Recv(buffer, bytes, MPI_CHAR, MPI_ANY_SOURCE, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buffer, bytes, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
            }
        }
        double elapsed = MPI_Wtime() - start;
        if (rank == 0)
            printf("anysource %d %.3f\n", bytes, elapsed * 1e6 / iterations / 2);
    }
    MPI_Finalize();
    return 0;
}
