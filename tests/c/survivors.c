/* survivors: survivors of a dead process go on (mpiexec --failure-policy continue).
 *
 * The victim (the last rank) streams numbered messages to rank 0, eager and
 * rendezvous sizes mixed, until it is killed (`--inject kill:V@...`). Then
 * every survivor must see, in bounded time:
 *   - rank 0: every message it received is whole and in order (message i
 *     carries i), then its receive from the victim fails with
 *     MPIX_ERR_PROC_FAILED;
 *   - rank 1: the wait for a wildcard receive pending on MPI_COMM_WORLD
 *     returns MPIX_ERR_PROC_FAILED_PENDING (ULFM: the receive stays posted
 *     until the failure is acknowledged; it is cancelled), then a receive
 *     from the victim fails with MPIX_ERR_PROC_FAILED;
 *     other ranks: a receive from the victim fails the same way;
 *   - a send to the victim fails, a barrier and an allreduce on
 *     MPI_COMM_WORLD (which holds the victim) return MPIX_ERR_PROC_FAILED;
 *   - point-to-point among survivors still works: a ring of 50 rounds gives
 *     the same number as in a fault-free job;
 *   - MPI_Finalize returns.
 * Each survivor prints one line; the output is the same whatever the
 * moment of the kill, except rank 0's count of messages received.
 *
 * Arguments: [reference] [SURVIVORS]. SURVIVORS (default size - 1) is how
 * many ranks live: ranks SURVIVORS .. size-2 wait to be killed with the
 * victim (a whole host going down). "reference" runs only the ring among
 * the survivors, fault-free, and prints "rank R: ring X".
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LARGE_BYTES (64 * 1024)

static const char *class_name(int code) {
    int class_code;
    if (code == MPI_SUCCESS) return "success";
    MPI_Error_class(code, &class_code);
    if (class_code == MPIX_ERR_PROC_FAILED) return "proc_failed";
    if (class_code == MPIX_ERR_PROC_FAILED_PENDING) return "proc_failed_pending";
    static char other[64];
    snprintf(other, sizeof other, "class_%d", class_code);
    return other;
}

/* Point-to-point ring among ranks 0..survivors-1: each round every rank
 * adds its rank and round to the token it received. */
static long survivor_ring(int rank, int survivors) {
    long token = 0;
    int next = (rank + 1) % survivors, previous = (rank + survivors - 1) % survivors;
    if (survivors == 1) return 0;
    for (int round = 0; round < 50; round++) {
        if (rank == 0) {
            token += round;
            MPI_Send(&token, 1, MPI_LONG, next, 100 + round, MPI_COMM_WORLD);
            MPI_Recv(&token, 1, MPI_LONG, previous, 100 + round, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(&token, 1, MPI_LONG, previous, 100 + round, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            token += rank * round;
            MPI_Send(&token, 1, MPI_LONG, next, 100 + round, MPI_COMM_WORLD);
        }
    }
    return token;
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int victim = size - 1, survivors = size - 1, reference = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "reference") == 0) reference = 1;
        else survivors = atoi(argv[i]);
    }
    if (size < 2 || survivors < 1 || survivors > size - 1) {
        fprintf(stderr, "survivors needs at least 2 ranks and 1 <= SURVIVORS < size\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (reference) {
        /* Fault-free: the ring among the survivors. */
        if (rank < survivors) {
            long token = survivor_ring(rank, survivors);
            printf("rank %d: ring %ld\n", rank, token);
        }
        MPI_Finalize();
        return 0;
    }
    if (rank >= survivors && rank != victim) {
        for (;;) sleep(1); /* dies with the victim */
    }
    char *buffer = calloc(LARGE_BYTES, 1);
    if (rank == victim) {
        for (long sent = 0;; sent++) {
            int bytes = (sent % 5 == 4) ? LARGE_BYTES : (int)sizeof(long);
            memcpy(buffer, &sent, sizeof sent);
            memcpy(buffer + bytes - sizeof sent, &sent, sizeof sent);
            if (MPI_Send(buffer, bytes, MPI_BYTE, 0, 1, MPI_COMM_WORLD) != MPI_SUCCESS) break;
        }
        fprintf(stderr, "victim: a send failed instead of the process being killed\n");
        return 3;
    }
    int failed_how = MPI_SUCCESS;
    long in_order = 0;
    int bad = 0;
    if (rank == 0) {
        for (;;) {
            MPI_Status status;
            int code = MPI_Recv(buffer, LARGE_BYTES, MPI_BYTE, victim, 1, MPI_COMM_WORLD, &status);
            if (code != MPI_SUCCESS) {
                failed_how = code;
                break;
            }
            int bytes;
            MPI_Get_count(&status, MPI_BYTE, &bytes);
            long first, last;
            memcpy(&first, buffer, sizeof first);
            memcpy(&last, buffer + bytes - sizeof last, sizeof last);
            int expected_bytes = (in_order % 5 == 4) ? LARGE_BYTES : (int)sizeof(long);
            if (first != in_order || last != in_order || bytes != expected_bytes) {
                fprintf(stderr, "rank 0: message %ld arrived as %ld/%ld (%d bytes)\n", in_order, first, last, bytes);
                bad = 1;
                break;
            }
            in_order++;
        }
    } else if (rank == 1) {
        MPI_Request request;
        MPI_Irecv(buffer, 1, MPI_LONG, MPI_ANY_SOURCE, 2, MPI_COMM_WORLD, &request);
        int wildcard_how = MPI_Wait(&request, MPI_STATUS_IGNORE);
        printf("rank 1: wildcard wait ended with %s\n", class_name(wildcard_how));
        if (wildcard_how != MPI_SUCCESS) {
            MPI_Cancel(&request);
            MPI_Request_free(&request);
        }
        /* The wildcard stops at the first death noticed; with a whole host
         * lost that may be another rank's. Wait until the victim's is known
         * too (its send below then fails whatever the order of notices). */
        failed_how = MPI_Recv(buffer, 1, MPI_LONG, victim, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        failed_how = MPI_Recv(buffer, 1, MPI_LONG, victim, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    long one = 1;
    int send_code = MPI_Send(&one, 1, MPI_LONG, victim, 3, MPI_COMM_WORLD);
    long token = survivor_ring(rank, survivors);
    int barrier_code = MPI_Barrier(MPI_COMM_WORLD);
    long sum = 0;
    int allreduce_code = MPI_Allreduce(&one, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d: %s, ring %ld, send %s, barrier %s, allreduce %s\n", rank,
           rank == 0 ? "receive from victim" : rank == 1 ? "wildcard receive" : "receive from victim",
           token, class_name(send_code), class_name(barrier_code), class_name(allreduce_code));
    printf("rank %d: waiting ended with %s\n", rank, class_name(failed_how));
    if (rank == 0) fprintf(stderr, "rank 0: %ld messages from the victim, in order\n", in_order);
    fflush(stdout);
    free(buffer);
    int finalize_code = MPI_Finalize();
    if (finalize_code != MPI_SUCCESS) {
        fprintf(stderr, "rank %d: MPI_Finalize returned %d\n", rank, finalize_code);
        return 4;
    }
    return bad ? 5 : 0;
}
