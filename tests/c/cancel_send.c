/* MPI_Cancel of sends: a message no receive has matched yet is withdrawn
 * (eager, rendezvous, synchronous, persistent, buffered), so the receiver never sees
 * it and a later message with the same envelope is the one received; a
 * message already received is not cancelled and completes normally.
 * Rank 0 sends to the last rank; a barrier orders "cancelled" before
 * "the receiver looks". */
#include "common.h"
#include <stdlib.h>
#include <string.h>

static int last;

enum send_kind { STANDARD, SYNCHRONOUS, PERSISTENT, BUFFERED, PERSISTENT_BUFFERED };

/* Start a send of `kind`, cancel it, wait: it must report cancelled. A
 * buffered send's attached buffer holds exactly one message, so a second
 * Ibsend after the cancel fits only if the cancel gave the space back. */
static void cancel_unmatched(const char *what, int bytes, enum send_kind kind) {
    char *buffer = malloc(bytes);
    memset(buffer, 0x5a, bytes);
    int cancelled = 0;
    int buffered = kind == BUFFERED || kind == PERSISTENT_BUFFERED;
    int attached_bytes = bytes + MPI_BSEND_OVERHEAD;
    char *attached = buffered ? malloc(attached_bytes) : NULL;
    if (buffered && g_rank == 0) MPI_OK(MPI_Buffer_attach(attached, attached_bytes));
    if (g_rank == 0) {
        MPI_Request request;
        if (kind == PERSISTENT)
            MPI_OK(MPI_Send_init(buffer, bytes, MPI_CHAR, last, 77, MPI_COMM_WORLD, &request));
        if (kind == PERSISTENT_BUFFERED)
            MPI_OK(MPI_Bsend_init(buffer, bytes, MPI_CHAR, last, 77, MPI_COMM_WORLD, &request));
        if (kind == PERSISTENT || kind == PERSISTENT_BUFFERED)
            MPI_OK(MPI_Start(&request));
        else if (kind == SYNCHRONOUS)
            MPI_OK(MPI_Issend(buffer, bytes, MPI_CHAR, last, 77, MPI_COMM_WORLD, &request));
        else if (kind == BUFFERED)
            MPI_OK(MPI_Ibsend(buffer, bytes, MPI_CHAR, last, 77, MPI_COMM_WORLD, &request));
        else
            MPI_OK(MPI_Isend(buffer, bytes, MPI_CHAR, last, 77, MPI_COMM_WORLD, &request));
        MPI_OK(MPI_Cancel(&request));
        MPI_Status status;
        MPI_OK(MPI_Wait(&request, &status));
        MPI_OK(MPI_Test_cancelled(&status, &cancelled));
        CHECK(cancelled, "%s of %d bytes to an idle rank was not cancelled", what, bytes);
        if (kind == PERSISTENT || kind == PERSISTENT_BUFFERED) MPI_OK(MPI_Request_free(&request));
        if (buffered) {
            /* The space is free again: one more message of the same size
             * fits, and is cancelled too (freed before its answer). */
            MPI_OK(MPI_Ibsend(buffer, bytes, MPI_CHAR, last, 77, MPI_COMM_WORLD, &request));
            MPI_OK(MPI_Cancel(&request));
            MPI_OK(MPI_Request_free(&request));
            void *detached;
            int detached_bytes;
            MPI_OK(MPI_Buffer_detach(&detached, &detached_bytes));
            CHECK(detached == attached && detached_bytes == attached_bytes, "detached %p of %d bytes", detached,
                  detached_bytes);
        }
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
    free(attached);
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

/* A send the receiver has already received cannot be cancelled (the
 * second send is buffered when `buffered`). */
static void cancel_after_receipt(int bytes, int buffered) {
    char *buffer = malloc(bytes);
    memset(buffer, 0x33, bytes);
    int attached_bytes = bytes + MPI_BSEND_OVERHEAD;
    char *attached = malloc(attached_bytes);
    if (g_rank == 0) {
        MPI_Request request;
        if (buffered) MPI_OK(MPI_Buffer_attach(attached, attached_bytes));
        MPI_OK(MPI_Isend(buffer, bytes, MPI_CHAR, last, 78, MPI_COMM_WORLD, &request));
        int done = 0;
        while (!done) MPI_OK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD)); /* the receiver has it */
        if (buffered)
            MPI_OK(MPI_Ibsend(buffer, bytes, MPI_CHAR, last, 78, MPI_COMM_WORLD, &request));
        else
            MPI_OK(MPI_Isend(buffer, bytes, MPI_CHAR, last, 78, MPI_COMM_WORLD, &request));
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD)); /* the receiver has this one too */
        MPI_OK(MPI_Cancel(&request));
        MPI_Status status;
        int cancelled = 1;
        MPI_OK(MPI_Wait(&request, &status));
        MPI_OK(MPI_Test_cancelled(&status, &cancelled));
        CHECK(!cancelled, "a %s send of %d bytes already received was reported cancelled",
              buffered ? "buffered" : "standard", bytes);
        if (buffered) {
            void *detached;
            int detached_bytes;
            MPI_OK(MPI_Buffer_detach(&detached, &detached_bytes));
        }
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
    free(attached);
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    last = g_size - 1;
    int sizes[3] = {1, 1000, 1 << 20};
    for (int i = 0; i < 3 && selected(argc, argv, "unmatched"); i++) {
        cancel_unmatched("MPI_Isend", sizes[i], STANDARD);
        cancel_unmatched("MPI_Issend", sizes[i], SYNCHRONOUS);
        cancel_unmatched("persistent MPI_Send_init", sizes[i], PERSISTENT);
        cancel_unmatched("MPI_Ibsend", sizes[i], BUFFERED);
        cancel_unmatched("persistent MPI_Bsend_init", sizes[i], PERSISTENT_BUFFERED);
        cancel_to_self(sizes[i]);
    }
    if (g_size > 1 && selected(argc, argv, "received")) {
        cancel_after_receipt(8, 0);
        cancel_after_receipt(1 << 20, 0);
        cancel_after_receipt(8, 1);
        cancel_after_receipt(1 << 20, 1);
    }
    return test_finish();
}
