/* A user reduction op may query its datatype (MPI_Type_get_extent,
 * MPI_Type_size, as mpi4py's op wrapper does) while the library runs it,
 * in MPI_Reduce_local and in a collective. */
#include "common.h"

static void sum_with_queries(void *in, void *inout, int *count, MPI_Datatype *type) {
    MPI_Aint lb = -1, extent = -1;
    int size = -1;
    if (MPI_Type_get_extent(*type, &lb, &extent) != MPI_SUCCESS || MPI_Type_size(*type, &size) != MPI_SUCCESS ||
        lb != 0 || extent != (MPI_Aint)sizeof(int) || size != (int)sizeof(int)) {
        fprintf(stderr, "FAIL: queries inside the op gave lb %ld extent %ld size %d\n", (long)lb, (long)extent, size);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    for (int i = 0; i < *count; i++) ((int *)inout)[i] += ((int *)in)[i];
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    MPI_Op op;
    MPI_Op_create(sum_with_queries, 1, &op);
    int in[4] = {1, 2, 3, 4}, inout[4] = {10, 20, 30, 40};
    MPI_Reduce_local(in, inout, 4, MPI_INT, op);
    for (int i = 0; i < 4; i++) CHECK(inout[i] == 11 * (i + 1), "reduce_local [%d] = %d", i, inout[i]);
    int mine[3] = {g_rank, 2 * g_rank, 1}, total[3];
    MPI_Allreduce(mine, total, 3, MPI_INT, op, MPI_COMM_WORLD);
    int ranks = g_size * (g_size - 1) / 2;
    CHECK(total[0] == ranks && total[1] == 2 * ranks && total[2] == g_size, "allreduce %d %d %d", total[0], total[1],
          total[2]);
    MPI_Op_free(&op);
    if (g_rank == 0) printf("OK\n");
    MPI_Finalize();
    return 0;
}
