/* Death-to-error latency: how long after a process dies does a survivor's
 * pending receive from it fail?
 *
 * Run under `mpiexec --failure-policy continue --inject kill:1@sends=1`
 * with 2 or more ranks (on one host, or on network namespaces of one
 * machine: CLOCK_MONOTONIC is shared). Rank 1 sends rank 0 the time
 * (CLOCK_MONOTONIC) just before its first and only send, and is killed by
 * the library right after it. Rank 0 receives it, posts a receive from
 * rank 1 and prints "detect_us X": the time from that stamp to the receive
 * failing with MPIX_ERR_PROC_FAILED. Other ranks just finalize.
 */
#include <mpi.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (rank == 1) {
        double stamp = now_us();
        MPI_Send(&stamp, 1, MPI_DOUBLE, 0, 1, MPI_COMM_WORLD);
        for (;;) pause(); /* killed after the send */
    }
    if (rank == 0) {
        double stamp, dummy;
        MPI_Recv(&stamp, 1, MPI_DOUBLE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        int code = MPI_Recv(&dummy, 1, MPI_DOUBLE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        double detected = now_us();
        int error_class = -1;
        MPI_Error_class(code, &error_class);
        printf("detect_us %.1f class %d\n", detected - stamp, error_class);
    }
    MPI_Finalize();
    return 0;
}
