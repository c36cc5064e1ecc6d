/* rejoin: a killed rank is started again and talks with the survivors
 * (mpiexec --failure-policy continue --respawn 1; a test-only protocol
 * for re-join, issue 9).
 *
 * The victim (the last rank, incarnation 0) streams numbered messages
 * {incarnation 0, number i} to every survivor, round robin, until it is
 * killed (`--inject kill:V@sends=N`). Each survivor receives them until a
 * receive fails: every message must be incarnation 0 and in order, and the
 * receive must fail with MPIX_ERR_PROC_FAILED.
 *
 * Then each survivor sends a hello {rank, 0} to the victim's rank until
 * the send succeeds (it fails with MPIX_ERR_PROC_FAILED while the rank is
 * dead; an MPI_Iprobe in between lets the library take the launcher's
 * re-join notice). The replacement (RESMPI_INCARNATION=1) prints that it
 * joined, takes each survivor's hello, and then they exchange ROUNDS
 * rounds both ways, the last one by rendezvous (LARGE_BYTES): the
 * replacement's messages say incarnation 1 and the round, the survivors'
 * their rank and the round. A survivor receives from the victim's rank
 * with MPI_ANY_TAG, so a message of the old process delivered after the
 * re-join would be caught (it says incarnation 0). Everyone finalizes.
 *
 * Output: survivors print "rank R: N messages from incarnation 0 in order,
 * then proc_failed", "rank R: exchanged ROUNDS rounds with incarnation 1";
 * the replacement prints "rank V: incarnation 1 joined" and "rank V:
 * exchanged ROUNDS rounds with S survivors". A "FAIL" line (stderr) and
 * exit code 3 say what went wrong. Argument: how many seconds a survivor
 * waits for the victim's rank to come back (default 20).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define OLD_TAG 1
#define HELLO_TAG 2
#define ROUND_TAG 3
#define ROUNDS 5
#define LARGE_BYTES (64 * 1024)

static int rank = -1;
/* How long a survivor waits for the victim's rank to come back (argument 1). */
static int hello_wait_seconds = 20;

#define FAIL(...)                                                   \
    do {                                                            \
        fprintf(stderr, "FAIL rank %d line %d: ", rank, __LINE__);  \
        fprintf(stderr, __VA_ARGS__);                               \
        fprintf(stderr, "\n");                                      \
        fflush(stderr);                                             \
        exit(3);                                                    \
    } while (0)

static int error_class(int code) {
    int class_code = code;
    if (code != MPI_SUCCESS) MPI_Error_class(code, &class_code);
    return class_code;
}

/* Message of `length` longs: {who, round, who ^ round ^ index ...}. */
static void fill(long *message, int length, long who, long round) {
    message[0] = who;
    message[1] = round;
    for (int index = 2; index < length; index++) message[index] = who ^ round ^ index;
}

static int matches(const long *message, int length, long who, long round) {
    if (message[0] != who || message[1] != round) return 0;
    for (int index = 2; index < length; index++)
        if (message[index] != (who ^ round ^ index)) return 0;
    return 1;
}

static int round_length(int round) {
    return round == ROUNDS - 1 ? LARGE_BYTES / (int)sizeof(long) : 4;
}

static double now_seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec + now.tv_nsec * 1e-9;
}

static void replacement(int victim, int size) {
    static long message[LARGE_BYTES / sizeof(long)];
    printf("rank %d: incarnation 1 joined\n", rank);
    fflush(stdout);
    for (int survivor = 0; survivor < size; survivor++) {
        if (survivor == victim) continue;
        long hello[2];
        int rc = MPI_Recv(hello, 2, MPI_LONG, survivor, HELLO_TAG, MPI_COMM_WORLD,
                          MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || hello[0] != survivor || hello[1] != 0)
            FAIL("hello from rank %d: rc %d, {%ld, %ld}", survivor, rc, hello[0], hello[1]);
    }
    for (int round = 0; round < ROUNDS; round++) {
        int length = round_length(round);
        for (int survivor = 0; survivor < size; survivor++) {
            if (survivor == victim) continue;
            fill(message, length, 1, round);
            int rc = MPI_Send(message, length, MPI_LONG, survivor, ROUND_TAG, MPI_COMM_WORLD);
            if (rc != MPI_SUCCESS) FAIL("round %d send to rank %d: rc %d", round, survivor, rc);
            rc = MPI_Recv(message, length, MPI_LONG, survivor, ROUND_TAG, MPI_COMM_WORLD,
                          MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS || !matches(message, length, survivor, round))
                FAIL("round %d from rank %d: rc %d, {%ld, %ld}", round, survivor, rc, message[0],
                     message[1]);
        }
    }
    printf("rank %d: exchanged %d rounds with %d survivors\n", rank, ROUNDS, size - 1);
    fflush(stdout);
}

static void victim_streams(int victim, int size) {
    for (long number = 1;; number++) {
        for (int survivor = 0; survivor < size; survivor++) {
            if (survivor == victim) continue;
            long message[2] = {0, number};
            MPI_Send(message, 2, MPI_LONG, survivor, OLD_TAG, MPI_COMM_WORLD);
        }
        if (number > 100000) FAIL("the victim was never killed (give --inject kill:V@sends=N)");
    }
}

static void survivor(int victim) {
    static long message[LARGE_BYTES / sizeof(long)];
    long received = 0;
    int rc;
    for (;;) {
        rc = MPI_Recv(message, 2, MPI_LONG, victim, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) break;
        if (message[0] != 0 || message[1] != received + 1)
            FAIL("message %ld from the victim says {incarnation %ld, number %ld}", received + 1,
                 message[0], message[1]);
        received++;
    }
    if (error_class(rc) != MPIX_ERR_PROC_FAILED)
        FAIL("the receive from the dead victim ended with class %d, not MPIX_ERR_PROC_FAILED",
             error_class(rc));
    printf("rank %d: %ld messages from incarnation 0 in order, then proc_failed\n", rank, received);
    fflush(stdout);

    long hello[2] = {rank, 0};
    int refused = 0;
    double deadline = now_seconds() + hello_wait_seconds;
    for (;;) {
        int flag;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        rc = MPI_Send(hello, 2, MPI_LONG, victim, HELLO_TAG, MPI_COMM_WORLD);
        if (rc == MPI_SUCCESS) break;
        if (error_class(rc) != MPIX_ERR_PROC_FAILED)
            FAIL("hello to the dead victim failed with class %d", error_class(rc));
        refused++;
        if (now_seconds() > deadline)
            FAIL("the victim's rank did not come back within %d s", hello_wait_seconds);
        usleep(1000);
    }
    for (int round = 0; round < ROUNDS; round++) {
        int length = round_length(round);
        MPI_Status status;
        rc = MPI_Recv(message, length, MPI_LONG, victim, MPI_ANY_TAG, MPI_COMM_WORLD, &status);
        if (rc != MPI_SUCCESS) FAIL("round %d from the replacement: rc %d", round, rc);
        if (message[0] == 0)
            FAIL("a message of the old incarnation (number %ld, tag %d) was delivered after the "
                 "re-join", message[1], status.MPI_TAG);
        if (status.MPI_TAG != ROUND_TAG || !matches(message, length, 1, round))
            FAIL("round %d from the replacement: tag %d, {%ld, %ld}", round, status.MPI_TAG,
                 message[0], message[1]);
        fill(message, length, rank, round);
        rc = MPI_Send(message, length, MPI_LONG, victim, ROUND_TAG, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) FAIL("round %d send to the replacement: rc %d", round, rc);
    }
    printf("rank %d: exchanged %d rounds with incarnation 1 (hello refused %d times first)\n",
           rank, ROUNDS, refused);
    fflush(stdout);
}

int main(int argc, char **argv) {
    int size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const char *incarnation = getenv("RESMPI_INCARNATION");
    int replaced = incarnation != NULL && atoi(incarnation) > 0;
    int victim = size - 1;
    if (argc > 1) hello_wait_seconds = atoi(argv[1]);
    if (size < 2) FAIL("rejoin needs at least 2 ranks");
    if (replaced) {
        if (rank != victim) FAIL("rank %d was started again, but the victim is %d", rank, victim);
        replacement(victim, size);
    } else if (rank == victim) {
        victim_streams(victim, size);
    } else {
        survivor(victim);
    }
    MPI_Finalize();
    return 0;
}
