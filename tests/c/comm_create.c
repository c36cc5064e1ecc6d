/* Communicators from groups and by host: Comm_create (whole and disjoint
 * groups), Comm_create_group (only members call), Comm_split_type SHARED,
 * Comm_idup, Comm_compare results, and the errors for MPI_COMM_NULL, freed
 * communicators and groups.  usage: comm_create  (any number of ranks) */
#include "common.h"
#include "expect.h"

static int sum_over(MPI_Comm c, int v) {
    int s = -1;
    MPI_OK(MPI_Allreduce(&v, &s, 1, MPI_INT, MPI_SUM, c));
    return s;
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    errors_return();
    int n = g_size, res = -1, r = -1, s = -1, flag = -1;
    MPI_Group world, evens, odds, rev, mine;
    MPI_OK(MPI_Comm_group(MPI_COMM_WORLD, &world));

    /* Comm_create over the reversed world: new rank = n-1-rank */
    int range[1][3] = {{n - 1, 0, -1}};
    MPI_OK(MPI_Group_range_incl(world, 1, range, &rev));
    MPI_Comm reversed;
    MPI_OK(MPI_Comm_create(MPI_COMM_WORLD, rev, &reversed));
    CHECK(reversed != MPI_COMM_NULL, "member got MPI_COMM_NULL");
    MPI_OK(MPI_Comm_rank(reversed, &r));
    MPI_OK(MPI_Comm_size(reversed, &s));
    CHECK(r == n - 1 - g_rank && s == n, "reversed rank %d size %d", r, s);
    MPI_OK(MPI_Comm_compare(MPI_COMM_WORLD, reversed, &res));
    CHECK(res == (n == 1 ? MPI_CONGRUENT : MPI_SIMILAR), "compare(world, reversed) = %d", res);
    /* point to point in the new numbering: send to new rank 0 = world n-1 */
    if (r != 0) {
        MPI_OK(MPI_Send(&g_rank, 1, MPI_INT, 0, 7, reversed));
    } else {
        long total = 0;
        for (int i = 1; i < n; i++) {
            int v; MPI_Status st;
            MPI_OK(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 7, reversed, &st));
            CHECK(st.MPI_SOURCE == n - 1 - v, "source %d for world rank %d", st.MPI_SOURCE, v);
            total += v;
        }
        CHECK(total == (long)n * (n - 1) / 2 - g_rank, "sum of senders %ld", total);
    }

    /* Comm_create with the evens group: odd ranks get COMM_NULL */
    int ranks[64], ne = 0;
    for (int i = 0; i < n; i += 2) ranks[ne++] = i;
    MPI_OK(MPI_Group_incl(world, ne, ranks, &evens));
    MPI_OK(MPI_Group_difference(world, evens, &odds));
    MPI_Comm ce;
    MPI_OK(MPI_Comm_create(MPI_COMM_WORLD, evens, &ce));
    if (g_rank % 2 == 0) {
        CHECK(ce != MPI_COMM_NULL, "even rank got COMM_NULL");
        MPI_OK(MPI_Comm_rank(ce, &r));
        CHECK(r == g_rank / 2, "evens rank %d", r);
        int want = 0;
        for (int i = 0; i < n; i += 2) want += i;
        CHECK(sum_over(ce, g_rank) == want, "evens allreduce");
        MPI_OK(MPI_Comm_free(&ce));
    } else {
        CHECK(ce == MPI_COMM_NULL, "odd rank got a communicator");
    }

    /* MPI-2.2 disjoint groups: each process passes its own parity group */
    MPI_Comm parity;
    MPI_OK(MPI_Comm_create(MPI_COMM_WORLD, g_rank % 2 ? odds : evens, &parity));
    MPI_OK(MPI_Comm_size(parity, &s));
    CHECK(s == (g_rank % 2 ? n / 2 : (n + 1) / 2), "parity size %d", s);
    int want_sum = 0;
    for (int i = g_rank % 2; i < n; i += 2) want_sum += i;
    CHECK(sum_over(parity, g_rank) == want_sum, "parity allreduce");

    /* Comm_create_group: only the odd ranks call it */
    if (g_rank % 2 == 1) {
        MPI_Comm co;
        MPI_OK(MPI_Comm_create_group(MPI_COMM_WORLD, odds, 42, &co));
        MPI_OK(MPI_Comm_rank(co, &r));
        CHECK(r == g_rank / 2, "create_group rank %d", r);
        CHECK(sum_over(co, 1) == n / 2, "create_group allreduce");
        MPI_OK(MPI_Comm_compare(co, parity, &res));
        CHECK(res == MPI_CONGRUENT, "create_group vs parity = %d", res);
        MPI_OK(MPI_Comm_free(&co));
    }
    /* a group of one, created by each process alone, in reverse order of rank */
    MPI_OK(MPI_Comm_group(MPI_COMM_SELF, &mine));
    MPI_Comm alone;
    MPI_OK(MPI_Comm_create_group(MPI_COMM_WORLD, mine, 3, &alone));
    MPI_OK(MPI_Comm_size(alone, &s));
    CHECK(s == 1, "self-only create_group size %d", s);
    MPI_OK(MPI_Comm_compare(alone, MPI_COMM_SELF, &res));
    CHECK(res == MPI_CONGRUENT, "compare(alone, SELF) = %d", res);
    MPI_OK(MPI_Comm_free(&alone));

    /* split_type SHARED: the job runs on one host, so everyone is together;
     * key reverses the order */
    MPI_Comm node;
    MPI_OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, n - g_rank, MPI_INFO_NULL, &node));
    MPI_OK(MPI_Comm_size(node, &s));
    MPI_OK(MPI_Comm_rank(node, &r));
    CHECK(s == n && r == n - 1 - g_rank, "shared split rank %d size %d", r, s);
    MPI_OK(MPI_Comm_free(&node));
    MPI_OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_UNDEFINED, 0, MPI_INFO_NULL, &node));
    CHECK(node == MPI_COMM_NULL, "split_type UNDEFINED gives COMM_NULL");

    /* idup: usable after the request completes */
    MPI_Comm idup;
    MPI_Request rq;
    MPI_OK(MPI_Comm_idup(MPI_COMM_WORLD, &idup, &rq));
    MPI_OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    CHECK(rq == MPI_REQUEST_NULL, "idup request not freed by wait");
    MPI_OK(MPI_Comm_compare(MPI_COMM_WORLD, idup, &res));
    CHECK(res == MPI_CONGRUENT, "compare(world, idup) = %d", res);
    CHECK(sum_over(idup, 2) == 2 * n, "idup allreduce");
    MPI_OK(MPI_Comm_test_inter(idup, &flag));
    CHECK(flag == 0, "idup is not an inter-communicator");

    /* errors */
    MPI_Comm bad;
    EXPECT_CLASS(MPI_Comm_create(MPI_COMM_NULL, world, &bad), MPI_ERR_COMM);
    EXPECT_CLASS(MPI_Comm_create(MPI_COMM_WORLD, MPI_GROUP_NULL, &bad), MPI_ERR_GROUP);
    EXPECT_CLASS(MPI_Comm_size(MPI_COMM_NULL, &s), MPI_ERR_COMM);
    EXPECT_CLASS(MPI_Comm_group(MPI_COMM_NULL, &mine), MPI_ERR_COMM);
    EXPECT_CLASS(MPI_Comm_test_inter(MPI_COMM_NULL, &flag), MPI_ERR_COMM);
    MPI_Comm freed = idup;
    MPI_OK(MPI_Comm_free(&idup));
    CHECK(idup == MPI_COMM_NULL, "free sets COMM_NULL");
    EXPECT_CLASS(MPI_Comm_free(&idup), MPI_ERR_COMM);
    (void)freed;
    EXPECT_CLASS(MPI_Comm_free(&(MPI_Comm){MPI_COMM_WORLD}), MPI_ERR_COMM);

    MPI_OK(MPI_Comm_free(&reversed));
    MPI_OK(MPI_Comm_free(&parity));
    MPI_Group gs[] = {world, evens, odds, rev, mine};
    for (unsigned i = 0; i < 5; i++)
        if (gs[i] != MPI_GROUP_EMPTY) MPI_OK(MPI_Group_free(&gs[i]));
    return test_finish();
}
