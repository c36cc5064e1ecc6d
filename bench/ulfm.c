/* ULFM latencies (issue 11, item 6): agree, shrink and revoke propagation
 * on MPI_COMM_WORLD's survivors, without and with a failure during the
 * call. Plain MPI plus the MPIX_ ULFM functions of mpi.h.
 *
 * Usage: ulfm [repetitions]. Run under `mpiexec --with-ft ulfm -n N`.
 * Output (rank 0), one line per measurement: "NAME N microseconds".
 *
 *   agree N us        mean of `repetitions` MPIX_Comm_agree calls
 *   shrink N us       mean of `repetitions` MPIX_Comm_shrink (+ free) calls
 *   revoke N us       mean over `repetitions` fresh duplicates of the time
 *                     from rank 0's MPIX_Comm_revoke to the last rank's
 *                     blocked wildcard receive failing with
 *                     MPIX_ERR_REVOKED (CLOCK_MONOTONIC, one host)
 *   agree_fail N us   one agree during which the last rank dies (it kills
 *                     itself right after a barrier the others leave into
 *                     the agree): detection, then consensus among N-1
 *   shrink_fail N us  then, the failure acknowledged, one shrink that
 *                     leaves it out
 *
 * With N = 1 only agree and shrink are measured. */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void check(int code, const char *what) {
    if (code != MPI_SUCCESS) {
        char text[MPI_MAX_ERROR_STRING];
        int length;
        MPI_Error_string(code, text, &length);
        fprintf(stderr, "ulfm bench: %s: %s\n", what, text);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size, repetitions = argc > 1 ? atoi(argv[1]) : 200;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    /* Failure-free agree and shrink. */
    int flag = 1;
    check(MPIX_Comm_agree(MPI_COMM_WORLD, &flag), "warm-up agree");
    check(MPI_Barrier(MPI_COMM_WORLD), "barrier");
    double start = now_us();
    for (int i = 0; i < repetitions; i++) {
        flag = ~0;
        check(MPIX_Comm_agree(MPI_COMM_WORLD, &flag), "agree");
    }
    double agree_us = (now_us() - start) / repetitions;
    check(MPI_Barrier(MPI_COMM_WORLD), "barrier");
    start = now_us();
    for (int i = 0; i < repetitions; i++) {
        MPI_Comm shrunk;
        check(MPIX_Comm_shrink(MPI_COMM_WORLD, &shrunk), "shrink");
        check(MPI_Comm_free(&shrunk), "free");
    }
    double shrink_us = (now_us() - start) / repetitions;
    if (rank == 0) {
        printf("agree %d %.2f\nshrink %d %.2f\n", size, agree_us, size, shrink_us);
        fflush(stdout);
    }
    if (size == 1) {
        MPI_Finalize();
        return 0;
    }

    /* Revoke propagation: rank 0 revokes a fresh duplicate while every
     * other rank waits in a wildcard receive on it. */
    double revoke_total_us = 0;
    int revoke_rounds = repetitions < 50 ? repetitions : 50;
    for (int i = 0; i < revoke_rounds; i++) {
        MPI_Comm dup;
        check(MPI_Comm_dup(MPI_COMM_WORLD, &dup), "dup");
        MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
        double stamp = 0, seen = 0, latest = 0;
        check(MPI_Barrier(MPI_COMM_WORLD), "barrier");
        if (rank == 0) {
            stamp = now_us();
            check(MPIX_Comm_revoke(dup), "revoke");
        } else {
            int x, error_class = -1;
            int code = MPI_Recv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 0, dup, MPI_STATUS_IGNORE);
            seen = now_us();
            MPI_Error_class(code, &error_class);
            if (error_class != MPIX_ERR_REVOKED) {
                fprintf(stderr, "ulfm bench: a receive on a revoked communicator ended with class %d\n", error_class);
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
        }
        check(MPI_Reduce(&seen, &latest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD), "reduce");
        if (rank == 0) revoke_total_us += latest - stamp;
        MPI_Comm_free(&dup);
    }
    if (rank == 0) {
        printf("revoke %d %.2f\n", size, revoke_total_us / revoke_rounds);
        fflush(stdout);
    }

    /* A failure during the call: the last rank dies right after the
     * barrier the others leave into an agree. */
    check(MPI_Barrier(MPI_COMM_WORLD), "barrier");
    if (rank == size - 1) raise(SIGKILL);
    flag = 1;
    start = now_us();
    int code = MPIX_Comm_agree(MPI_COMM_WORLD, &flag);
    double agree_fail_us = now_us() - start;
    int error_class = -1;
    MPI_Error_class(code, &error_class);
    if (code != MPI_SUCCESS && error_class != MPIX_ERR_PROC_FAILED) check(code, "agree during a failure");
    check(MPIX_Comm_failure_ack(MPI_COMM_WORLD), "failure_ack");
    MPI_Comm survivors;
    start = now_us();
    check(MPIX_Comm_shrink(MPI_COMM_WORLD, &survivors), "shrink after a failure");
    double shrink_fail_us = now_us() - start;
    int survivors_size;
    MPI_Comm_size(survivors, &survivors_size);
    if (survivors_size != size - 1) {
        fprintf(stderr, "ulfm bench: shrink kept %d of %d\n", survivors_size, size);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (rank == 0) {
        printf("agree_fail %d %.2f\nshrink_fail %d %.2f\n", size, agree_fail_us, size, shrink_fail_us);
        fflush(stdout);
    }
    MPI_Comm_free(&survivors);
    MPI_Finalize();
    return 0;
}
