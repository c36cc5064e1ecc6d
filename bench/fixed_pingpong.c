/* Ping-pong of one size, a fixed number of round trips (bench/loss_recovery.sh):
 * prints "MB/s seconds" of the second of two passes. Usage: fixed_pingpong ITERATIONS BYTES */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long n = argc > 2 ? atol(argv[2]) : (4L << 20); int iters = argc > 1 ? atoi(argv[1]) : 200;
    char *b = malloc(n); memset(b, rank + 1, n);
    int peer = 1 - rank;
    for (int round = 0; round < 2; round++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t = MPI_Wtime();
        for (int i = 0; i < iters; i++) {
            if (rank == 0) { MPI_Send(b, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD); MPI_Recv(b, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE); }
            else { MPI_Recv(b, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE); MPI_Send(b, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD); }
        }
        t = MPI_Wtime() - t;
        if (rank == 0 && round == 1) printf("%.1f MB/s %.3f s\n", 2.0 * iters * n / t / 1e6, t);
    }
    MPI_Finalize();
}
