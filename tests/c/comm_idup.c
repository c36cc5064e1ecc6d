/* MPI_Comm_idup does not block: rank 0 takes part only after the others
 * have posted their idup and sent it a message (a blocking duplication
 * would deadlock); duplications of overlapping communicators in flight
 * together complete in any order (each pair of neighbours idups its
 * communicator, every rank holds two); several idups of one communicator
 * in flight at once give isolated communicators; Test-polling completes
 * one; an inter-communicator and MPI_Comm_idup_with_info work too. */
#include "expect.h"

static void check_isolated(MPI_Comm a, MPI_Comm b, const char *what) {
    int rank, size, token = 77, flag = 1, got = -1;
    MPI_OK(MPI_Comm_rank(a, &rank));
    MPI_OK(MPI_Comm_size(a, &size));
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    MPI_Request send;
    MPI_OK(MPI_Isend(&token, 1, MPI_INT, right, 5, a, &send));
    MPI_OK(MPI_Barrier(a));
    MPI_OK(MPI_Iprobe(left, 5, b, &flag, MPI_STATUS_IGNORE));
    CHECK(!flag, "%s: a message on one duplicate showed up on another", what);
    /* Nobody sends the next check's message before everyone has probed. */
    MPI_OK(MPI_Barrier(a));
    MPI_OK(MPI_Recv(&got, 1, MPI_INT, left, 5, a, MPI_STATUS_IGNORE));
    MPI_OK(MPI_Wait(&send, MPI_STATUS_IGNORE));
    CHECK(got == 77, "%s: got %d", what, got);
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    MPI_Comm dup, dups[5];
    MPI_Request request, requests[5];

    /* 1. Rank 0 joins last. */
    if (g_rank == 0) {
        for (int r = 1; r < g_size; r++) {
            int value = -1;
            MPI_OK(MPI_Recv(&value, 1, MPI_INT, r, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            CHECK(value == r, "got %d from %d", value, r);
        }
        MPI_OK(MPI_Comm_idup(MPI_COMM_WORLD, &dup, &request));
        MPI_OK(MPI_Wait(&request, MPI_STATUS_IGNORE));
    } else {
        MPI_OK(MPI_Comm_idup(MPI_COMM_WORLD, &dup, &request));
        MPI_OK(MPI_Send(&g_rank, 1, MPI_INT, 0, 0, MPI_COMM_WORLD));
        MPI_OK(MPI_Wait(&request, MPI_STATUS_IGNORE));
    }
    int sum = 0;
    MPI_OK(MPI_Allreduce(&g_rank, &sum, 1, MPI_INT, MPI_SUM, dup));
    CHECK(sum == g_size * (g_size - 1) / 2, "sum over the duplicate %d", sum);
    check_isolated(dup, MPI_COMM_WORLD, "idup vs world");

    /* 2. Overlapping duplications: pair (i, i+1) for every i (3+ ranks; with
     * two, both pairs have the same members, which MPICH cannot handle). */
    if (g_size >= 3) {
        MPI_Comm mine = MPI_COMM_NULL, left = MPI_COMM_NULL, tmp;
        for (int i = 0; i < g_size; i++) {
            int member = g_rank == i || g_rank == (i + 1) % g_size;
            MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, member ? 0 : MPI_UNDEFINED, g_rank == i ? 0 : 1, &tmp));
            if (g_rank == i)
                mine = tmp;
            else if (member)
                left = tmp;
        }
        MPI_Comm new_mine, new_left;
        MPI_Request pair[2];
        MPI_OK(MPI_Comm_idup(mine, &new_mine, &pair[0]));
        MPI_OK(MPI_Comm_idup(left, &new_left, &pair[1]));
        MPI_OK(MPI_Waitall(2, pair, MPI_STATUSES_IGNORE));
        /* Nonblocking: blocking ones, in this order, would wait in a cycle. */
        int a = 0, b = 0;
        MPI_OK(MPI_Iallreduce(&g_rank, &a, 1, MPI_INT, MPI_SUM, new_mine, &pair[0]));
        MPI_OK(MPI_Iallreduce(&g_rank, &b, 1, MPI_INT, MPI_SUM, new_left, &pair[1]));
        MPI_OK(MPI_Waitall(2, pair, MPI_STATUSES_IGNORE));
        CHECK(a == g_rank + (g_rank + 1) % g_size, "pair sum %d", a);
        CHECK(b == g_rank + (g_rank + g_size - 1) % g_size, "left pair sum %d", b);
        MPI_OK(MPI_Comm_free(&new_mine));
        MPI_OK(MPI_Comm_free(&new_left));
        MPI_OK(MPI_Comm_free(&mine));
        MPI_OK(MPI_Comm_free(&left));
    }

    /* 3. Five in flight, completed in reverse with Test polling. */
    for (int i = 0; i < 5; i++) MPI_OK(MPI_Comm_idup(dup, &dups[i], &requests[i]));
    for (int i = 4; i >= 0; i--) {
        int done = 0;
        while (!done) MPI_OK(MPI_Test(&requests[i], &done, MPI_STATUS_IGNORE));
    }
    for (int i = 0; i < 4; i++) check_isolated(dups[i], dups[i + 1], "sibling duplicates");
    for (int i = 0; i < 5; i++) MPI_OK(MPI_Comm_free(&dups[i]));

    /* 4. An inter-communicator, and idup_with_info. */
    if (g_size >= 2) {
        MPI_Comm half, inter, inter_dup;
        MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, g_rank % 2, g_rank, &half));
        MPI_OK(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, 1 - g_rank % 2, 3, &inter));
        /* World rank 1 (the odd group's leader) joins last, after a message
         * from every other process sent once its idup is posted. */
        if (g_rank == 1) {
            for (int r = 0; r < g_size; r++) {
                if (r == 1) continue;
                int value = -1;
                MPI_OK(MPI_Recv(&value, 1, MPI_INT, r, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            }
            MPI_OK(MPI_Comm_idup(inter, &inter_dup, &request));
        } else {
            MPI_OK(MPI_Comm_idup(inter, &inter_dup, &request));
            MPI_OK(MPI_Send(&g_rank, 1, MPI_INT, 1, 9, MPI_COMM_WORLD));
        }
        MPI_OK(MPI_Wait(&request, MPI_STATUS_IGNORE));
        int remote_size = -1, expected_remote = g_rank % 2 ? (g_size + 1) / 2 : g_size / 2;
        MPI_OK(MPI_Comm_remote_size(inter_dup, &remote_size));
        CHECK(remote_size == expected_remote, "inter duplicate remote size %d", remote_size);
        int root_value = g_rank % 2 == 0 ? 0 : -1, local_rank;
        MPI_OK(MPI_Comm_rank(inter_dup, &local_rank));
        if (g_rank % 2 == 0) {
            root_value = 31;
            MPI_OK(MPI_Bcast(&root_value, 1, MPI_INT, local_rank == 0 ? MPI_ROOT : MPI_PROC_NULL, inter_dup));
        } else {
            MPI_OK(MPI_Bcast(&root_value, 1, MPI_INT, 0, inter_dup));
            CHECK(root_value == 31, "broadcast over the inter duplicate gave %d", root_value);
        }
        MPI_OK(MPI_Barrier(inter_dup));
        MPI_OK(MPI_Comm_free(&inter_dup));
        MPI_OK(MPI_Comm_free(&inter));
        MPI_OK(MPI_Comm_free(&half));
    }
    MPI_Info info;
    MPI_OK(MPI_Info_create(&info));
    MPI_OK(MPI_Info_set(info, "mpi_assert_no_any_tag", "true"));
    MPI_OK(MPI_Comm_idup_with_info(dup, info, &dups[0], &request));
    MPI_OK(MPI_Wait(&request, MPI_STATUS_IGNORE));
    MPI_OK(MPI_Barrier(dups[0]));
    MPI_OK(MPI_Comm_free(&dups[0]));
    MPI_OK(MPI_Info_free(&info));
    MPI_OK(MPI_Comm_free(&dup));
    return test_finish();
}
