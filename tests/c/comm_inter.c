/* Inter-communicators: Intercomm_create between the even and odd world
 * ranks, remote size/group, point-to-point across (ranks name the remote
 * group, statuses report remote ranks, ANY_SOURCE), isolation from the
 * local communicators, dup, compare, merge in both orders, free, errors.
 * usage: comm_inter  (2 or more ranks) */
#include "common.h"
#include "expect.h"

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    errors_return();
    int n = g_size, r = -1, s = -1, flag = -1, res = -1;
    int color = g_rank % 2;
    int local_size = color ? n / 2 : (n + 1) / 2, remote_size = n - local_size;
    MPI_Comm local, inter, inter2, merged, merged_high;
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, color, g_rank, &local));
    /* leaders: local rank 0 = world 0 (evens) and world 1 (odds) */
    MPI_OK(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, color ? 0 : 1, 99, &inter));
    MPI_OK(MPI_Comm_test_inter(inter, &flag));
    CHECK(flag == 1, "test_inter = %d", flag);
    MPI_OK(MPI_Comm_size(inter, &s));
    MPI_OK(MPI_Comm_rank(inter, &r));
    CHECK(s == local_size && r == g_rank / 2, "inter local size %d rank %d", s, r);
    MPI_OK(MPI_Comm_remote_size(inter, &s));
    CHECK(s == remote_size, "remote size %d, expected %d", s, remote_size);

    /* remote group: remote rank i is world rank 2i + (1 - color) */
    MPI_Group remote, world;
    MPI_OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    MPI_OK(MPI_Comm_remote_group(inter, &remote));
    int in[64], out[64];
    for (int i = 0; i < remote_size; i++) in[i] = i;
    MPI_OK(MPI_Group_translate_ranks(remote, remote_size, in, world, out));
    for (int i = 0; i < remote_size; i++)
        CHECK(out[i] == 2 * i + 1 - color, "remote rank %d is world %d", i, out[i]);

    /* p2p: every process sends its world rank to each remote rank; a
     * message with the same tag on `local` must not be taken */
    int me = g_rank / 2;
    MPI_Request rq[130];
    int vals[64], got[64], nrq = 0, sentinel = -7, lone = -1;
    if (local_size > 1) {
        MPI_OK(MPI_Isend(&sentinel, 1, MPI_INT, (me + 1) % local_size, 5, local, &rq[nrq++]));
    }
    for (int i = 0; i < remote_size; i++) {
        vals[i] = 1000 * g_rank + i;
        MPI_OK(MPI_Isend(&vals[i], 1, MPI_INT, i, 5, inter, &rq[nrq++]));
    }
    long total = 0;
    for (int i = 0; i < remote_size; i++) {
        MPI_Status st;
        MPI_OK(MPI_Recv(&got[i], 1, MPI_INT, MPI_ANY_SOURCE, 5, inter, &st));
        int world_sender = 2 * st.MPI_SOURCE + 1 - color;
        CHECK(got[i] == 1000 * world_sender + me, "from remote %d got %d", st.MPI_SOURCE, got[i]);
        total += st.MPI_SOURCE;
    }
    CHECK(total == (long)remote_size * (remote_size - 1) / 2, "remote sources sum %ld", total);
    if (local_size > 1) {
        MPI_OK(MPI_Recv(&lone, 1, MPI_INT, MPI_ANY_SOURCE, 5, local, MPI_STATUS_IGNORE));
        CHECK(lone == -7, "local message %d", lone);
    }
    MPI_OK(MPI_Waitall(nrq, rq, MPI_STATUSES_IGNORE));
    /* a directed exchange with remote rank 0 (Sendrecv) */
    if (me < remote_size) {
        int back = -1;
        MPI_OK(MPI_Sendrecv(&g_rank, 1, MPI_INT, me, 8, &back, 1, MPI_INT, me, 8, inter, MPI_STATUS_IGNORE));
        CHECK(back == 2 * me + 1 - color, "sendrecv partner %d", back);
    }
    EXPECT_CLASS(MPI_Send(&g_rank, 1, MPI_INT, remote_size, 1, inter), MPI_ERR_RANK);

    /* dup keeps both groups and gets its own context */
    MPI_OK(MPI_Comm_dup(inter, &inter2));
    MPI_OK(MPI_Comm_compare(inter, inter2, &res));
    CHECK(res == MPI_CONGRUENT, "compare(inter, dup) = %d", res);
    MPI_OK(MPI_Comm_compare(inter, MPI_COMM_WORLD, &res));
    CHECK(res == MPI_UNEQUAL, "compare(inter, world) = %d", res);
    MPI_OK(MPI_Comm_remote_size(inter2, &s));
    CHECK(s == remote_size, "dup remote size %d", s);
    if (me == 0) {
        int a = 11 + color, b = 22 + color, x = -1, y = -1;
        MPI_OK(MPI_Send(&a, 1, MPI_INT, 0, 3, inter2));
        MPI_OK(MPI_Send(&b, 1, MPI_INT, 0, 3, inter));
        MPI_OK(MPI_Recv(&x, 1, MPI_INT, 0, 3, inter, MPI_STATUS_IGNORE));
        MPI_OK(MPI_Recv(&y, 1, MPI_INT, 0, 3, inter2, MPI_STATUS_IGNORE));
        CHECK(x == 22 + 1 - color && y == 11 + 1 - color, "dup isolation: %d %d", x, y);
    }

    /* merge: low group first; evens pass high=0 so they come first */
    MPI_OK(MPI_Intercomm_merge(inter, color, &merged));
    MPI_OK(MPI_Comm_size(merged, &s));
    MPI_OK(MPI_Comm_rank(merged, &r));
    CHECK(s == n, "merged size %d", s);
    CHECK(r == (color ? (n + 1) / 2 + me : me), "merged rank %d", r);
    int sum = -1, v = g_rank;
    MPI_OK(MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, merged));
    CHECK(sum == n * (n - 1) / 2, "merged allreduce %d", sum);
    /* odds low this time: they come first */
    MPI_OK(MPI_Intercomm_merge(inter2, !color, &merged_high));
    MPI_OK(MPI_Comm_rank(merged_high, &r));
    CHECK(r == (color ? me : n / 2 + me), "merged (odds first) rank %d", r);
    MPI_OK(MPI_Comm_test_inter(merged_high, &flag));
    CHECK(flag == 0, "merged is an intra-communicator");
    EXPECT_CLASS(MPI_Intercomm_merge(MPI_COMM_NULL, 0, &merged_high), MPI_ERR_COMM);

    MPI_OK(MPI_Comm_free(&merged));
    MPI_OK(MPI_Comm_free(&inter2));
    MPI_OK(MPI_Comm_free(&inter));
    EXPECT_CLASS(MPI_Comm_remote_size(inter, &s), MPI_ERR_COMM);
    MPI_OK(MPI_Group_free(&remote));
    MPI_OK(MPI_Group_free(&world));
    MPI_OK(MPI_Comm_free(&local));
    return test_finish();
}
