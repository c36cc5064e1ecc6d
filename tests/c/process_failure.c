/* Helper for the launcher's process-failure tests (mpiexec --failure-policy,
 * --inject kill:/host-down:).  usage: process_failure MODE [args]
 *   wait             after MPI_Init and a barrier, every rank prints
 *                    "ready R" and blocks in MPI_Recv from a live rank
 *                    (rank 0 from the last rank, the others from rank 0);
 *                    nobody sends: only a teardown ends it
 *   local SECONDS    after MPI_Init and a barrier, every rank prints
 *                    "ready R", does SECONDS of local work (sleep, no MPI
 *                    call), prints "done R" and exits 0 without
 *                    MPI_Finalize: what survivors of a death can do before
 *                    the library handles failures
 * The ranks print their lines to stdout, flushed at once. */
#include "common.h"

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    const char *mode = argc > 1 ? argv[1] : "";
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    printf("ready %d\n", g_rank);
    fflush(stdout);
    if (!strcmp(mode, "wait")) {
        int dummy = 0, source = g_rank == 0 ? g_size - 1 : 0;
        MPI_Recv(&dummy, 1, MPI_INT, source, 4242, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        printf("FAIL: rank %d returned from a Recv nobody satisfied\n", g_rank);
        return 1;
    } else if (!strcmp(mode, "local") && argc > 2) {
        sleep((unsigned)atoi(argv[2]));
        printf("done %d\n", g_rank);
        fflush(stdout);
        _exit(0);
    }
    FAIL("unknown mode '%s' (expected wait or local SECONDS)", mode);
}
