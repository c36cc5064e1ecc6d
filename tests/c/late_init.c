/* Helper for the leftover tests (issue 16, item 3): a job some of whose
 * ranks are still inside MPI_Init when something is killed.
 * usage: late_init LATE_RANK
 *   every rank prints "PID <rank> <pid>" before MPI_Init (its rank from
 *   PMI_RANK), LATE_RANK then sleeps forever before MPI_Init, so the others
 *   wait inside MPI_Init, their shared memory made; with LATE_RANK -1 all
 *   ranks get through MPI_Init, print "INIT <rank>" and block in MPI_Recv. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int late = argc > 1 ? atoi(argv[1]) : -1;
    const char *rank_text = getenv("PMI_RANK");
    int rank = rank_text ? atoi(rank_text) : -1;
    printf("PID %d %d\n", rank, (int)getpid());
    fflush(stdout);
    if (rank == late) {
        for (;;) pause();
    }
    MPI_Init(&argc, &argv);
    printf("INIT %d\n", rank);
    fflush(stdout);
    int dummy = 0;
    MPI_Recv(&dummy, 1, MPI_INT, MPI_ANY_SOURCE, 12345, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf("FAIL: rank %d returned from a Recv nobody satisfied\n", rank);
    return 1;
}
