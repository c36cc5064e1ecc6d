/* A rank computes for a long time without calling MPI while its peer waits
 * on it; its peer's frames to it stay unacknowledged unless something acks
 * for it. usage: busy SECONDS
 * Rank 1 receives a message, computes SECONDS (no MPI calls), then answers;
 * rank 0 sends a stream of messages meanwhile (Isend), then waits. */
#include "common.h"
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    double seconds = argc > 1 ? atof(argv[1]) : 5.0;
    enum { STREAM = 64 };
    int token = 7, data[STREAM][256];
    if (g_rank == 0) {
        MPI_Request rq[STREAM];
        MPI_OK(MPI_Send(&token, 1, MPI_INT, 1, 0, MPI_COMM_WORLD));
        for (int i = 0; i < STREAM; i++) {
            for (int j = 0; j < 256; j++) data[i][j] = i * 1000 + j;
            MPI_OK(MPI_Isend(data[i], 256, MPI_INT, 1, 1, MPI_COMM_WORLD, &rq[i]));
        }
        MPI_OK(MPI_Recv(&token, 1, MPI_INT, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        MPI_OK(MPI_Waitall(STREAM, rq, MPI_STATUSES_IGNORE));
        CHECK(token == 8, "answer %d, expected 8", token);
    } else if (g_rank == 1) {
        MPI_OK(MPI_Recv(&token, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        double start = now();
        volatile double sink = 0;
        while (now() - start < seconds) sink += 1.0; /* compute, no MPI */
        for (int i = 0; i < STREAM; i++) {
            int got[256];
            MPI_OK(MPI_Recv(got, 256, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            for (int j = 0; j < 256; j++) CHECK(got[j] == i * 1000 + j, "message %d element %d", i, j);
        }
        token += 1;
        MPI_OK(MPI_Send(&token, 1, MPI_INT, 0, 2, MPI_COMM_WORLD));
    }
    return test_finish();
}
