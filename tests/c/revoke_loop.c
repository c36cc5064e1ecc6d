/* revoke_loop: a failing operation still lets news in. After a rank dies,
 * every survivor loops on MPI_Barrier over a duplicate of MPI_COMM_WORLD,
 * which fails at once with MPIX_ERR_PROC_FAILED, until one returns
 * MPIX_ERR_REVOKED; rank 0 revokes the duplicate on its first error. A
 * barrier that fails without looking at the paths never sees the revoke
 * and the loop never ends (ulfm-testing's api/revoke, last part). Each
 * survivor prints "rank R: revoked after N failed barriers". */
#include <mpi.h>
#include <mpi-ext.h>
#include <signal.h>
#include <stdio.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm world;
    MPI_Comm_dup(MPI_COMM_WORLD, &world);
    MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN);
    MPI_Barrier(world);
    if (rank == size / 2) raise(SIGKILL);
    long failed = 0;
    int error_class = MPI_SUCCESS;
    do {
        int rc = MPI_Barrier(world);
        MPI_Error_class(rc, &error_class);
        if (rc != MPI_SUCCESS && rank == 0) MPIX_Comm_revoke(world);
        if (error_class == MPIX_ERR_PROC_FAILED) failed++;
    } while (error_class != MPIX_ERR_REVOKED);
    printf("rank %d: revoked after %s failed barriers\n", rank, failed > 0 ? "some" : "no");
    fflush(stdout);
    MPI_Comm_free(&world);
    MPI_Finalize();
    return 0;
}
