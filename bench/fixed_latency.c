/* One-way time of an 8 B ping-pong between ranks 0 and 1, a fixed number
 * of round trips (the loop of bench/p2p_profile.sh) timed with MPI_Wtime
 * after a warm-up pass of the same length: prints microseconds.
 * Usage: fixed_latency [round_trips (100000)] (bench/pingpong_ab.sh) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long n = argc > 1 ? atol(argv[1]) : 100000;
    char buffer[8] = {0};
    int peer = 1 - rank;
    for (int pass = 0; pass < 2; pass++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double start = MPI_Wtime();
        for (long i = 0; i < n; i++) {
            if (rank == 0) {
                MPI_Send(buffer, 8, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
                MPI_Recv(buffer, 8, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                MPI_Recv(buffer, 8, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buffer, 8, MPI_BYTE, peer, 1, MPI_COMM_WORLD);
            }
        }
        double seconds = MPI_Wtime() - start;
        if (rank == 0 && pass == 1) printf("%.4f\n", seconds / n / 2 * 1e6);
    }
    MPI_Finalize();
    return 0;
}
