/* With the default MPI_ERRORS_ARE_FATAL, an invalid call aborts the job.
 * usage: fatal [RANK]  (only RANK, default 0, makes the bad call) */
#include "common.h"
int main(int argc, char **argv) {
    test_init(&argc, &argv);
    int who = argc > 1 ? atoi(argv[1]) : 0, buf = 0;
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (g_rank == who) {
        printf("rank %d making an invalid call\n", g_rank);
        fflush(stdout);
        MPI_Send(&buf, 1, MPI_INT, g_size + 5, 0, MPI_COMM_WORLD); /* must not return */
        printf("FAIL: invalid call returned under ERRORS_ARE_FATAL\n");
        fflush(stdout);
        return 0;
    }
    MPI_Recv(&buf, 1, MPI_INT, who, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* never satisfied */
    printf("FAIL: rank %d received a message nobody sent\n", g_rank);
    return 0;
}
