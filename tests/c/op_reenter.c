/* A user reduction op that makes an MPI call needing the library state
 * (MPI_Barrier) while the library runs it: the job must end with a message
 * naming the mistake, not deadlock on the library lock. */
#include "common.h"

static void sum_then_barrier(void *in, void *inout, int *count, MPI_Datatype *type) {
    (void)type;
    for (int i = 0; i < *count; i++) ((int *)inout)[i] += ((int *)in)[i];
    MPI_Barrier(MPI_COMM_WORLD);
    fprintf(stderr, "FAIL: MPI_Barrier returned inside a reduction op\n");
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Op op;
    MPI_Op_create(sum_then_barrier, 1, &op);
    int in[2] = {1, 2}, inout[2] = {3, 4};
    /* Calls made before the op runs take and release the lock normally. */
    MPI_Barrier(MPI_COMM_WORLD);
    printf("calling the op\n");
    fflush(stdout);
    MPI_Reduce_local(in, inout, 2, MPI_INT, op);
    printf("FAIL: MPI_Reduce_local returned\n");
    MPI_Finalize();
    return 0;
}
