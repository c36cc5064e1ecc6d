/* Multi-host smoke test.  usage: hosts [block | barrier VICTIM]
 * Each rank prints
 *   "HOST <rank> <size> <processor name> <netns> <RESMPI_HOST_KEY|->"
 * where <netns> is the target of /proc/self/ns/net ("net:[inode]"), since
 * network namespaces on one machine share the hostname.  Then a ring of
 * small and large messages (checked contents) and allreduces (checked sums);
 * rank 0 prints OK.
 * block: after the checks, prints "PID <rank> <pid>" and blocks in MPI_Recv
 * (for failure tests).
 * barrier VICTIM: after the checks, prints "PID <rank> <pid>"; rank VICTIM
 * sleeps outside MPI while the others wait in MPI_Barrier (a death seen
 * from inside a shared-memory collective). */
#include "common.h"

#define BIG (1 << 20) /* ints: 4 MiB, past any eager limit */

static int expected(int source, int i) { return source * 1000003 + i * 7 + 1; }

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    char name[MPI_MAX_PROCESSOR_NAME + 1] = {0};
    int len = 0;
    MPI_OK(MPI_Get_processor_name(name, &len));
    char ns[128] = "?";
    ssize_t n = readlink("/proc/self/ns/net", ns, sizeof ns - 1);
    if (n > 0) ns[n] = 0;
    const char *key = getenv("RESMPI_HOST_KEY");
    printf("HOST %d %d %s %s %s\n", g_rank, g_size, name, ns, key ? key : "-");
    fflush(stdout);

    int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
    /* Small ring message. */
    int token = g_rank * 11 + 5, got = -1;
    MPI_OK(MPI_Sendrecv(&token, 1, MPI_INT, right, 1, &got, 1, MPI_INT, left, 1, MPI_COMM_WORLD,
                        MPI_STATUS_IGNORE));
    CHECK(got == left * 11 + 5, "small ring: got %d from %d", got, left);
    /* Large ring message, checked element by element. */
    int *out = malloc(BIG * sizeof(int)), *in = malloc(BIG * sizeof(int));
    CHECK(out && in, "malloc");
    for (int i = 0; i < BIG; i++) out[i] = expected(g_rank, i), in[i] = -1;
    MPI_Request reqs[2];
    MPI_OK(MPI_Irecv(in, BIG, MPI_INT, left, 2, MPI_COMM_WORLD, &reqs[0]));
    MPI_OK(MPI_Isend(out, BIG, MPI_INT, right, 2, MPI_COMM_WORLD, &reqs[1]));
    MPI_OK(MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE));
    for (int i = 0; i < BIG; i++)
        CHECK(in[i] == expected(left, i), "large ring: element %d is %d", i, in[i]);
    /* Allreduce: a scalar and a vector. */
    long mine = g_rank + 1, sum = 0;
    MPI_OK(MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
    CHECK(sum == (long)g_size * (g_size + 1) / 2, "allreduce scalar: %ld", sum);
    enum { V = 4096 };
    static double vin[V], vout[V];
    for (int i = 0; i < V; i++) vin[i] = g_rank * 0.5 + i;
    MPI_OK(MPI_Allreduce(vin, vout, V, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    for (int i = 0; i < V; i++) {
        double want = 0.25 * g_size * (g_size - 1) + (double)g_size * i;
        CHECK(vout[i] == want, "allreduce vector: [%d] = %g, want %g", i, vout[i], want);
    }
    free(out);
    free(in);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (argc > 1 && !strcmp(argv[1], "block")) {
        int dummy = 0;
        printf("PID %d %d\n", g_rank, (int)getpid());
        fflush(stdout);
        MPI_Recv(&dummy, 1, MPI_INT, MPI_ANY_SOURCE, 12345, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        printf("FAIL: rank %d returned from a Recv nobody satisfied\n", g_rank);
        return 1;
    }
    if (argc > 2 && !strcmp(argv[1], "barrier")) {
        printf("PID %d %d\n", g_rank, (int)getpid());
        fflush(stdout);
        if (g_rank == atoi(argv[2])) {
            for (;;) pause();
        }
        MPI_Barrier(MPI_COMM_WORLD);
        printf("FAIL: rank %d left a barrier rank %s never entered\n", g_rank, argv[2]);
        return 1;
    }
    MPI_OK(MPI_Finalize());
    if (g_rank == 0) {
        printf("OK\n");
        fflush(stdout);
    }
    return 0;
}
