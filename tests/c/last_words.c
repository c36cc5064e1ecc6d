/* last_words: what a process sent just before it died is delivered, even
 * when its death is known before the receiver looks. Rank 1 sends 20
 * numbered messages to rank 0, then (mode "issend") receives one that rank
 * 0 sent synchronously, and exits without MPI_Finalize. Rank 0 sleeps
 * until the launcher has surely told it of the death (1 s), then receives
 * the 20 messages (each must arrive, in order) and completes its Issend
 * (the match acknowledgement was sent before the death), and prints
 * "rank 0: 20 last words, issend ok". Run with --failure-policy continue. */
#include "common.h"

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int token = 42;
    if (g_rank == 1) {
        for (int i = 0; i < 20; i++) MPI_OK(MPI_Send(&i, 1, MPI_INT, 0, 7, MPI_COMM_WORLD));
        int got = -1;
        MPI_OK(MPI_Recv(&got, 1, MPI_INT, 0, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(got == token, "issend payload %d", got);
        fflush(stdout);
        _exit(1);
    }
    if (g_rank == 0) {
        MPI_Request request;
        MPI_OK(MPI_Issend(&token, 1, MPI_INT, 1, 8, MPI_COMM_WORLD, &request));
        sleep(1);
        int received = 0;
        for (int i = 0; i < 20; i++) {
            int value = -1;
            int code = MPI_Recv(&value, 1, MPI_INT, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            CHECK(code == MPI_SUCCESS, "receive %d of the dead rank's messages failed (%d)", i, code);
            CHECK(value == i, "message %d carried %d", i, value);
            received++;
        }
        int code = MPI_Wait(&request, MPI_STATUS_IGNORE);
        CHECK(code == MPI_SUCCESS, "the Issend the dead rank matched failed (%d)", code);
        printf("rank 0: %d last words, issend ok\n", received);
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}
