/* Who each process of a replicated job is: one line per process,
 * "process P rank R size S universe U replica K", P being the process
 * manager's rank for it (PMI_RANK under hydra and resmpi's mpiexec,
 * SLURM_PROCID under srun), so a test can check the mapping of PMI rank p
 * to rank p % N, replica p / N, MPI_UNIVERSE_SIZE in ranks, and the
 * RESMPI_REPLICA the library sets. Run it with RESMPI_REPLICA_OUTPUT=all
 * under another process manager (replicas other than 0 print nothing
 * otherwise). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, flag = 0, *universe = NULL;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_UNIVERSE_SIZE, &universe, &flag);
    const char *process = getenv("SLURM_PROCID");
    if (process == NULL)
        process = getenv("PMI_RANK");
    const char *replica = getenv("RESMPI_REPLICA");
    printf("process %s rank %d size %d universe %d replica %s\n", process ? process : "-", rank,
           size, flag ? *universe : -1, replica ? replica : "-");
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
