/* init_twice: a second MPI_Init is an error through MPI_COMM_WORLD's
 * handler: under the default MPI_ERRORS_ARE_FATAL the job stops there
 * (non-zero exit, a message naming MPI_Init); with "return" the program
 * first sets MPI_ERRORS_RETURN, gets MPI_ERR_OTHER and finishes. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int returning = argc > 1 && strcmp(argv[1], "return") == 0;
    if (returning) MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rc = MPI_Init(&argc, &argv);
    int cls = -1;
    MPI_Error_class(rc, &cls);
    printf("second MPI_Init returned class %d\n", cls);
    fflush(stdout);
    MPI_Finalize();
    return returning && cls == MPI_ERR_OTHER ? 0 : 3;
}
