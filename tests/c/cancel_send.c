/* MPI_Cancel of sends: a message no receive has matched yet is withdrawn
 * (eager, rendezvous, synchronous, persistent), so the receiver never sees
 * it and a later message with the same envelope is the one received; a
 * message already received is not cancelled and completes normally.
 * Rank 0 sends to the last rank; a barrier orders "cancelled" before
 * "the receiver looks". */
#include "common.h"
#include <stdlib.h>
#include <string.h>

static int last;

/* Start a send with `start`, cancel it, wait: it must report cancelled. */
static void cancel_unmatched(const char *what, int bytes, int synchronous, int persistent) {
    char *buffer = malloc(bytes);
    memset(buffer, 0x5a, bytes);
    int cancelled = 0;
    if (g_rank == 0) {
        MPI_Request request;
        if (persistent)
            MPI_OK(MPI_Send_init(buffer, bytes, MPI_CHAR, last, 77, MPI_COMM_WORLD, &request));
        if (persistent)
            MPI_OK(MPI_Start(&request));
        else if (synchronous)
            MPI_OK(MPI_Issend(buffer, bytes, MPI_CHAR, last, 77, MPI_COMM_WORLD, &request));
        else
            MPI_OK(MPI_Isend(buffer, bytes, MPI_CHAR, last, 77, MPI_COMM_WORLD, &request));
        MPI_OK(MPI_Cancel(&request));
        MPI_Status status;
        MPI_OK(MPI_Wait(&request, &status));
        MPI_OK(MPI_Test_cancelled(&status, &cancelled));
        CHECK(cancelled, "%s of %d bytes to an idle rank was not cancelled", what, bytes);
        if (persistent) MPI_OK(MPI_Request_free(&request));
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    /* The cancelled message is gone: the next one with its envelope is a
     * one-int marker. */
    if (g_rank == 0) {
        int marker = bytes;
        MPI_OK(MPI_Send(&marker, 1, MPI_INT, last, 77, MPI_COMM_WORLD));
    } else if (g_rank == last) {
        int flag = 1;
        MPI_Status status;
        int count = -1, marker = -1;
        MPI_OK(MPI_Probe(0, 77, MPI_COMM_WORLD, &status));
        MPI_OK(MPI_Get_count(&status, MPI_CHAR, &count));
        CHECK(count == (int)sizeof(int), "%s of %d bytes: a %d-byte message arrived, not the marker",
              what, bytes, count);
        MPI_OK(MPI_Recv(&marker, 1, MPI_INT, 0, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(marker == bytes, "marker %d", marker);
        MPI_OK(MPI_Iprobe(0, 77, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
        CHECK(!flag, "%s: another message is still waiting", what);
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    free(buffer);
}

/* A cancelled send to this rank itself is decided inside MPI_Cancel:
 * MPI_Request_get_status reports it complete and cancelled at once (as
 * mpi4py's test_p2p_obj expects). */
static void cancel_to_self(int bytes) {
    char *buffer = malloc(bytes);
    MPI_Request request;
    MPI_OK(MPI_Issend(buffer, bytes, MPI_CHAR, g_rank, 79, MPI_COMM_WORLD, &request));
    MPI_OK(MPI_Cancel(&request));
    int flag = 0, cancelled = 0;
    MPI_Status status;
    MPI_OK(MPI_Request_get_status(request, &flag, &status));
    CHECK(flag, "a cancelled %d-byte send to self is not complete at once", bytes);
    MPI_OK(MPI_Test_cancelled(&status, &cancelled));
    CHECK(cancelled, "a %d-byte send to self was not cancelled", bytes);
    MPI_OK(MPI_Wait(&request, MPI_STATUS_IGNORE));
    MPI_OK(MPI_Iprobe(g_rank, 79, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
    CHECK(!flag, "the cancelled send to self still arrived");
    free(buffer);
}

/* A send the receiver has already received cannot be cancelled. */
static void cancel_after_receipt(int bytes) {
    char *buffer = malloc(bytes);
    memset(buffer, 0x33, bytes);
    if (g_rank == 0) {
        MPI_Request request;
        MPI_OK(MPI_Isend(buffer, bytes, MPI_CHAR, last, 78, MPI_COMM_WORLD, &request));
        int done = 0;
        while (!done) MPI_OK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD)); /* the receiver has it */
        MPI_OK(MPI_Isend(buffer, bytes, MPI_CHAR, last, 78, MPI_COMM_WORLD, &request));
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD)); /* the receiver has this one too */
        MPI_OK(MPI_Cancel(&request));
        MPI_Status status;
        int cancelled = 1;
        MPI_OK(MPI_Wait(&request, &status));
        MPI_OK(MPI_Test_cancelled(&status, &cancelled));
        CHECK(!cancelled, "a send of %d bytes already received was reported cancelled", bytes);
    } else {
        if (g_rank == last)
            MPI_OK(MPI_Recv(buffer, bytes, MPI_CHAR, 0, 78, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        if (g_rank == last) {
            memset(buffer, 0, bytes);
            MPI_OK(MPI_Recv(buffer, bytes, MPI_CHAR, 0, 78, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CHECK(buffer[0] == 0x33 && buffer[bytes - 1] == 0x33, "payload lost");
        }
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    free(buffer);
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    last = g_size - 1;
    int sizes[3] = {1, 1000, 1 << 20};
    for (int i = 0; i < 3 && selected(argc, argv, "unmatched"); i++) {
        cancel_unmatched("MPI_Isend", sizes[i], 0, 0);
        cancel_unmatched("MPI_Issend", sizes[i], 1, 0);
        cancel_unmatched("persistent MPI_Send_init", sizes[i], 0, 1);
        cancel_to_self(sizes[i]);
    }
    if (g_size > 1 && selected(argc, argv, "received")) {
        cancel_after_receipt(8);
        cancel_after_receipt(1 << 20);
    }
    return test_finish();
}
