/* A send buffer may be reused the moment MPI_Send returns (or MPI_Wait of
 * an MPI_Isend): rank 0 overwrites the same 3 MiB buffer with a new pattern
 * right after every send, and rank 1 checks that each message carries the
 * pattern it was sent with. Under injected loss this is what proves that a
 * layer retransmitting from the application's buffer (resmpi's reliable
 * rendezvous) completes a send only once every fragment is acknowledged.
 *
 * usage: reuse [rounds]   (default 24; 2 ranks) */
#include "common.h"

#define LENGTH_BYTES (3 * 1024 * 1024 + 123)

static unsigned char pattern(int round, size_t index) {
    return (unsigned char)(round * 131 + index * 7 + (index >> 12));
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    int rounds = argc > 1 ? atoi(argv[1]) : 24;
    CHECK(g_size == 2, "needs 2 ranks, got %d", g_size);
    unsigned char *buffer = malloc(LENGTH_BYTES);
    CHECK(buffer != NULL, "malloc");
    for (int round = 0; round < rounds; round++) {
        if (g_rank == 0) {
            for (size_t i = 0; i < LENGTH_BYTES; i++) buffer[i] = pattern(round, i);
            if (round % 2 == 0) {
                MPI_Send(buffer, LENGTH_BYTES, MPI_BYTE, 1, round, MPI_COMM_WORLD);
            } else {
                MPI_Request request;
                MPI_Isend(buffer, LENGTH_BYTES, MPI_BYTE, 1, round, MPI_COMM_WORLD, &request);
                MPI_Wait(&request, MPI_STATUS_IGNORE);
            }
            /* Reused at once: anything still read from it later is wrong. */
            memset(buffer, 0xEE, LENGTH_BYTES);
        } else {
            memset(buffer, 0, LENGTH_BYTES);
            MPI_Recv(buffer, LENGTH_BYTES, MPI_BYTE, 0, round, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            for (size_t i = 0; i < LENGTH_BYTES; i++)
                CHECK(buffer[i] == pattern(round, i), "round %d byte %zu: %u, sent %u", round, i,
                      buffer[i], pattern(round, i));
        }
    }
    free(buffer);
    if (g_rank == 0) printf("OK\n");
    MPI_Finalize();
    return 0;
}
