/* Helper for launcher-behaviour tests.  usage: launcher MODE [args]
 *   exit CODE RANK   RANK exits with CODE after MPI_Finalize (others 0)
 *   abort CODE RANK  RANK calls MPI_Abort(WORLD, CODE); others block in Recv
 *   hang             every rank blocks forever in MPI_Recv
 *   block            prints "PID <rank> <pid>" then blocks in MPI_Recv
 *   env VAR...       each rank prints "<rank> VAR=<value|(unset)>"
 *   hello            each rank prints "hello from <rank> of <size>"
 *   stdin            rank 0 reads stdin, prints "lines=<n> bytes=<n>", bcasts the count
 *   crash RANK       RANK raises SIGSEGV after MPI_Init */
#include "common.h"
#include <signal.h>

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    const char *mode = argc > 1 ? argv[1] : "hello";
    int dummy = 0;
    if (!strcmp(mode, "exit")) {
        int code = atoi(argv[2]), who = atoi(argv[3]);
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        MPI_OK(MPI_Finalize());
        return g_rank == who ? code : 0;
    } else if (!strcmp(mode, "abort")) {
        int code = atoi(argv[2]), who = atoi(argv[3]);
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        if (g_rank == who) MPI_Abort(MPI_COMM_WORLD, code);
        MPI_Recv(&dummy, 1, MPI_INT, MPI_ANY_SOURCE, 12345, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        printf("FAIL: rank %d returned from a Recv nobody satisfied\n", g_rank);
        return 1;
    } else if (!strcmp(mode, "hang") || !strcmp(mode, "block")) {
        if (!strcmp(mode, "block")) {
            printf("PID %d %d\n", g_rank, (int)getpid());
            fflush(stdout);
        }
        MPI_Recv(&dummy, 1, MPI_INT, MPI_ANY_SOURCE, 12345, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        printf("FAIL: rank %d returned from a Recv nobody satisfied\n", g_rank);
        return 1;
    } else if (!strcmp(mode, "env")) {
        for (int i = 2; i < argc; i++) {
            const char *v = getenv(argv[i]);
            printf("%d %s=%s\n", g_rank, argv[i], v ? v : "(unset)");
        }
        fflush(stdout);
    } else if (!strcmp(mode, "hello")) {
        printf("hello from %d of %d\n", g_rank, g_size);
        fflush(stdout);
    } else if (!strcmp(mode, "stdin")) {
        long counts[2] = {0, 0};
        if (g_rank == 0) {
            int ch;
            while ((ch = getchar()) != EOF) {
                counts[1]++;
                if (ch == '\n') counts[0]++;
            }
            printf("lines=%ld bytes=%ld\n", counts[0], counts[1]);
            fflush(stdout);
        }
        MPI_OK(MPI_Bcast(counts, 2, MPI_LONG, 0, MPI_COMM_WORLD));
    } else if (!strcmp(mode, "crash")) {
        int who = atoi(argv[2]);
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        if (g_rank == who) raise(SIGSEGV);
        MPI_Recv(&dummy, 1, MPI_INT, MPI_ANY_SOURCE, 12345, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        return 1;
    } else {
        FAIL("unknown mode %s", mode);
    }
    return test_finish();
}
