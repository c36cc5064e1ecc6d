/* MPI_Comm_split and MPI_Comm_create on an inter-communicator: each group
 * splits (or selects) on its own and color c's local part is paired with
 * the remote group's color c part; MPI_UNDEFINED, a color missing on the
 * other side, and processes outside the created group get MPI_COMM_NULL.
 * The results carry point-to-point and collectives (Bcast with MPI_ROOT).
 * World is cut in two groups: even and odd world ranks (needs 2+ ranks). */
#include "expect.h"
#include <stdlib.h>
#include <string.h>

static int world_rank_of(MPI_Comm comm, int rank, int remote) {
    MPI_Group group, world_group;
    int world = -1;
    if (remote)
        MPI_OK(MPI_Comm_remote_group(comm, &group));
    else
        MPI_OK(MPI_Comm_group(comm, &group));
    MPI_OK(MPI_Comm_group(MPI_COMM_WORLD, &world_group));
    MPI_OK(MPI_Group_translate_ranks(group, 1, &rank, world_group, &world));
    MPI_OK(MPI_Group_free(&group));
    MPI_OK(MPI_Group_free(&world_group));
    return world;
}

/* Rank 0 of each side sends its world rank to every remote process; each
 * checks it came from the remote rank 0 it expects. Then a Bcast from the
 * group holding `root_side` (0: even) with MPI_ROOT. */
static void exercise(MPI_Comm inter, int my_side, const char *what) {
    int rank, size, remote_size;
    MPI_OK(MPI_Comm_rank(inter, &rank));
    MPI_OK(MPI_Comm_size(inter, &size));
    MPI_OK(MPI_Comm_remote_size(inter, &remote_size));
    if (rank == 0)
        for (int r = 0; r < remote_size; r++) MPI_OK(MPI_Send(&g_rank, 1, MPI_INT, r, 3, inter));
    int from = -1;
    MPI_OK(MPI_Recv(&from, 1, MPI_INT, 0, 3, inter, MPI_STATUS_IGNORE));
    CHECK(from == world_rank_of(inter, 0, 1), "%s: got %d from the remote leader", what, from);
    int value = 4242 + my_side;
    if (my_side == 0)
        MPI_OK(MPI_Bcast(&value, 1, MPI_INT, rank == 0 ? MPI_ROOT : MPI_PROC_NULL, inter));
    else
        MPI_OK(MPI_Bcast(&value, 1, MPI_INT, 0, inter));
    if (my_side == 1) CHECK(value == 4242, "%s: broadcast gave %d", what, value);
    MPI_OK(MPI_Barrier(inter));
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    if (g_size < 2) return test_finish();
    int side = g_rank % 2;
    MPI_Comm half, inter;
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, side, g_rank, &half));
    MPI_OK(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, 1 - side, 7, &inter));
    int local_rank, local_size, remote_size;
    MPI_OK(MPI_Comm_rank(inter, &local_rank));
    MPI_OK(MPI_Comm_size(inter, &local_size));
    MPI_OK(MPI_Comm_remote_size(inter, &remote_size));

    /* Split by local rank parity, keys reversed. */
    int color = local_rank % 2, key = -local_rank;
    MPI_Comm split;
    MPI_OK(MPI_Comm_split(inter, color, key, &split));
    int local_count = (local_size + 1 - color) / 2, remote_count = (remote_size + 1 - color) / 2;
    if (remote_count == 0) {
        CHECK(split == MPI_COMM_NULL, "color %d has no remote part but got a communicator", color);
    } else {
        int is_inter = 0, size = -1, rsize = -1, rank = -1;
        CHECK(split != MPI_COMM_NULL, "color %d: MPI_COMM_NULL", color);
        MPI_OK(MPI_Comm_test_inter(split, &is_inter));
        MPI_OK(MPI_Comm_size(split, &size));
        MPI_OK(MPI_Comm_remote_size(split, &rsize));
        MPI_OK(MPI_Comm_rank(split, &rank));
        CHECK(is_inter && size == local_count && rsize == remote_count,
              "color %d: inter %d size %d remote %d (want %d, %d)", color, is_inter, size, rsize,
              local_count, remote_count);
        /* Reversed keys: the highest local rank of this color is rank 0. */
        int highest = local_size - 1 - ((local_size - 1 - color) % 2);
        CHECK(rank == (highest - local_rank) / 2, "color %d: rank %d for local rank %d", color, rank,
              local_rank);
        exercise(split, side, "split");
        MPI_OK(MPI_Comm_free(&split));
    }

    /* MPI_UNDEFINED on the odd side's rank 0 only. */
    MPI_OK(MPI_Comm_split(inter, side == 1 && local_rank == 0 ? MPI_UNDEFINED : 0, 0, &split));
    if (side == 1 && local_rank == 0) {
        CHECK(split == MPI_COMM_NULL, "MPI_UNDEFINED gave a communicator");
    } else if (side == 0 && remote_size == 1) {
        CHECK(split == MPI_COMM_NULL, "empty remote side gave a communicator");
    } else {
        int rsize = -1;
        MPI_OK(MPI_Comm_remote_size(split, &rsize));
        CHECK(rsize == remote_size - (side == 0), "remote size %d after MPI_UNDEFINED", rsize);
        MPI_OK(MPI_Comm_free(&split));
    }

    /* Comm_create: the first ceil(n/2) of each local group. */
    MPI_Group local_group, first_half, bad;
    MPI_OK(MPI_Comm_group(inter, &local_group));
    int range[1][3] = {{0, (local_size - 1) / 2, 1}};
    MPI_OK(MPI_Group_range_incl(local_group, 1, range, &first_half));
    MPI_Comm created;
    MPI_OK(MPI_Comm_create(inter, first_half, &created));
    int in_half = local_rank <= (local_size - 1) / 2;
    if (!in_half) {
        CHECK(created == MPI_COMM_NULL, "a process outside the group got a communicator");
    } else {
        int size = -1, rsize = -1;
        MPI_OK(MPI_Comm_size(created, &size));
        MPI_OK(MPI_Comm_remote_size(created, &rsize));
        CHECK(size == (local_size + 1) / 2 && rsize == (remote_size + 1) / 2, "created %d x %d", size,
              rsize);
        exercise(created, side, "create");
        MPI_OK(MPI_Comm_free(&created));
    }
    MPI_OK(MPI_Comm_create(inter, MPI_GROUP_EMPTY, &created));
    CHECK(created == MPI_COMM_NULL, "an empty group gave a communicator");

    /* A group with a process outside the local group (the remote leader). */
    errors_return();
    MPI_OK(MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN));
    MPI_Group world_group;
    MPI_OK(MPI_Comm_group(MPI_COMM_WORLD, &world_group));
    int outsider = world_rank_of(inter, 0, 1);
    MPI_OK(MPI_Group_incl(world_group, 1, &outsider, &bad));
    EXPECT_CLASS(MPI_Comm_create(inter, bad, &created), MPI_ERR_GROUP);
    /* A negative color (MPICH does not check it). */
    if (argc > 1 && !strcmp(argv[1], "strict")) EXPECT_CLASS(MPI_Comm_split(inter, -5, 0, &split), MPI_ERR_ARG);

    MPI_OK(MPI_Group_free(&bad));
    MPI_OK(MPI_Group_free(&world_group));
    MPI_OK(MPI_Group_free(&first_half));
    MPI_OK(MPI_Group_free(&local_group));
    MPI_OK(MPI_Comm_free(&inter));
    MPI_OK(MPI_Comm_free(&half));
    return test_finish();
}
