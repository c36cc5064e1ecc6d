/* Ring token pass + allreduce loop (used oversubscribed: 8 ranks, 2 cores).
 * usage: ring [ITERATIONS] */
#include "common.h"
int main(int argc, char **argv) {
    test_init(&argc, &argv);
    int iters = argc > 1 ? atoi(argv[1]) : 300;
    int to = (g_rank + 1) % g_size, from = (g_rank - 1 + g_size) % g_size;
    double t0 = MPI_Wtime();
    for (int it = 0; it < iters; it++) {
        int token = -1;
        if (g_rank == 0) {
            token = it;
            MPI_OK(MPI_Send(&token, 1, MPI_INT, to, it, MPI_COMM_WORLD));
            MPI_OK(MPI_Recv(&token, 1, MPI_INT, from, it, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CHECK(token == it + g_size - 1, "iteration %d: token came back as %d", it, token);
        } else {
            MPI_OK(MPI_Recv(&token, 1, MPI_INT, from, it, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CHECK(token == it + g_rank - 1, "iteration %d: token %d", it, token);
            token++;
            MPI_OK(MPI_Send(&token, 1, MPI_INT, to, it, MPI_COMM_WORLD));
        }
        long v = g_rank + it, s = 0;
        MPI_OK(MPI_Allreduce(&v, &s, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
        CHECK(s == (long)g_size * (g_size - 1) / 2 + (long)g_size * it, "iteration %d: allreduce %ld", it, s);
    }
    if (g_rank == 0) printf("%d iterations in %.2f s\n", iters, MPI_Wtime() - t0);
    return test_finish();
}
