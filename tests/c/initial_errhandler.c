/* initial_errhandler: the error handler MPI_COMM_WORLD starts with, as
 * `mpiexec --initial-errhandler` (RESMPI_INITIAL_ERRHANDLER) sets it.
 * Every rank prints MPI_INFO_ENV's mpi_initial_errhandler and which handler
 * MPI_COMM_WORLD has, then makes an erroneous call (a send to a rank that
 * does not exist): with mpi_errors_return it gets MPI_ERR_RANK back and
 * prints "returned MPI_ERR_RANK"; with the default the job ends there. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size, flag = 0, x = 0;
    char value[MPI_MAX_INFO_VAL + 1] = "unset";
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Info_get(MPI_INFO_ENV, "mpi_initial_errhandler", MPI_MAX_INFO_VAL, value, &flag);
    MPI_Errhandler handler;
    MPI_Comm_get_errhandler(MPI_COMM_WORLD, &handler);
    const char *name = handler == MPI_ERRORS_RETURN ? "return"
                       : handler == MPI_ERRORS_ARE_FATAL ? "fatal"
                       : handler == MPI_ERRORS_ABORT ? "abort" : "other";
    printf("rank %d: info %d %s, world %s\n", rank, flag, value, name);
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
    int code = MPI_Send(&x, 1, MPI_INT, size + 5, 0, MPI_COMM_WORLD);
    int cls = -1;
    MPI_Error_class(code, &cls);
    printf("rank %d: returned %s\n", rank, cls == MPI_ERR_RANK ? "MPI_ERR_RANK" : "something else");
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
