/* Message logging: rank 0 takes one message from every other rank with
 * MPI_Waitany and prints only their sum (which does not depend on the
 * order). Waitany's outcome is a logged determinant now, so under
 * --msglog MPI_Finalize must not warn of unlogged outcomes. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0) {
        long *values = malloc(sizeof(long) * size);
        MPI_Request *requests = malloc(sizeof(MPI_Request) * size);
        for (int i = 1; i < size; i++)
            MPI_Irecv(&values[i], 1, MPI_LONG, i, 0, MPI_COMM_WORLD, &requests[i - 1]);
        long sum = 0;
        for (int done = 1; done < size; done++) {
            int index;
            MPI_Waitany(size - 1, requests, &index, MPI_STATUS_IGNORE);
            sum += values[index + 1];
        }
        printf("sum %ld\n", sum);
        free(values);
        free(requests);
    } else {
        long value = rank * 10;
        MPI_Send(&value, 1, MPI_LONG, 0, 0, MPI_COMM_WORLD);
    }
    MPI_Finalize();
    return 0;
}
