/* held_sends: a program that relies on MPI buffering small sends. Rank 0
 * sends MESSAGES 8-byte messages to rank 1 with MPI_Send before either
 * reaches the barrier; rank 1 receives them only after it. MPI may block
 * rank 0 for ever (a standard-mode send need not be buffered): resmpi
 * does once its eager credit to rank 1 is used up, and must say so
 * (RESMPI_HELD_SEND_WARNING_S); with RESMPI_EAGER_CREDIT large enough the
 * job finishes. Prints "held_sends done" at rank 0 when it finishes. */
#include <mpi.h>
#include <stdio.h>

#define MESSAGES 20000

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long value = 0;
    if (rank == 0) {
        for (long i = 0; i < MESSAGES; i++) MPI_Send(&i, 1, MPI_LONG, 1, 0, MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        for (long i = 0; i < MESSAGES; i++) {
            MPI_Recv(&value, 1, MPI_LONG, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (value != i) {
                printf("FAIL message %ld carried %ld\n", i, value);
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
        }
    }
    if (rank == 0) printf("held_sends done\n");
    MPI_Finalize();
    return 0;
}
