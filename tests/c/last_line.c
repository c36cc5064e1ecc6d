/* last_line: a rank that prints a line and is killed at once has not lost
 * it. Rank 1 prints "rank 1: last line" (no fflush) and raises SIGKILL; the
 * others print "rank R: done". Run under --failure-policy continue, with
 * stdout a pipe to mpiexec (fully buffered by default in the C library;
 * resmpi line-buffers it at MPI_Init, RESMPI_LINE_BUFFERED=off keeps the
 * default). */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        printf("rank 1: last line\n");
        raise(SIGKILL);
    }
    printf("rank %d: done\n", rank);
    MPI_Finalize();
    return 0;
}
