/* MPI-4's MPI_Comm_create_from_group and MPI_Intercomm_create_from_groups
 * with groups taken from MPI_COMM_WORLD: collective over the group only
 * (the other half is busy elsewhere meanwhile), the error handler given is
 * the result's, and the results carry traffic. Needs 2+ ranks. */
#include "expect.h"

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    if (g_size < 2) return test_finish();
    MPI_Group world, evens, odds;
    MPI_OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    int even_range[1][3] = {{0, g_size - 1, 2}}, odd_range[1][3] = {{1, g_size - 1, 2}};
    MPI_OK(MPI_Group_range_incl(world, 1, even_range, &evens));
    MPI_OK(MPI_Group_range_incl(world, 1, odd_range, &odds));
    int side = g_rank % 2;
    MPI_Group mine = side ? odds : evens, theirs = side ? evens : odds;

    /* Only my half calls it. */
    MPI_Comm half;
    MPI_OK(MPI_Comm_create_from_group(mine, side ? "org.resmpi.odd" : "org.resmpi.even", MPI_INFO_NULL,
                                      MPI_ERRORS_RETURN, &half));
    int size = -1, rank = -1, sum = 0;
    MPI_OK(MPI_Comm_size(half, &size));
    MPI_OK(MPI_Comm_rank(half, &rank));
    CHECK(size == (g_size + 1 - side) / 2 && rank == g_rank / 2, "half: rank %d of %d", rank, size);
    MPI_OK(MPI_Allreduce(&g_rank, &sum, 1, MPI_INT, MPI_SUM, half));
    int want = 0;
    for (int r = side; r < g_size; r += 2) want += r;
    CHECK(sum == want, "half sums to %d, expected %d", sum, want);
    MPI_Errhandler handler;
    MPI_OK(MPI_Comm_get_errhandler(half, &handler));
    CHECK(handler == MPI_ERRORS_RETURN, "the error handler given was not kept");
    MPI_OK(MPI_Errhandler_free(&handler));
    MPI_OK(MPI_Comm_free(&half));

    MPI_Comm inter;
    MPI_OK(MPI_Intercomm_create_from_groups(mine, 0, theirs, 0, "org.resmpi.pair", MPI_INFO_NULL,
                                            MPI_ERRORS_RETURN, &inter));
    int is_inter = 0, remote_size = -1;
    MPI_OK(MPI_Comm_test_inter(inter, &is_inter));
    MPI_OK(MPI_Comm_remote_size(inter, &remote_size));
    CHECK(is_inter && remote_size == (g_size + side) / 2, "inter %d remote size %d", is_inter, remote_size);
    int from = -1, local_rank;
    MPI_OK(MPI_Comm_rank(inter, &local_rank));
    if (local_rank == 0) MPI_OK(MPI_Send(&g_rank, 1, MPI_INT, 0, 1, inter));
    if (local_rank == 0) {
        MPI_OK(MPI_Recv(&from, 1, MPI_INT, 0, 1, inter, MPI_STATUS_IGNORE));
        CHECK(from == 1 - side, "the remote leader is world rank %d", from);
    }
    MPI_OK(MPI_Barrier(inter));
    MPI_OK(MPI_Comm_free(&inter));
    MPI_OK(MPI_Group_free(&evens));
    MPI_OK(MPI_Group_free(&odds));
    MPI_OK(MPI_Group_free(&world));
    return test_finish();
}
