/* Groups: construction, set algebra, translation, comparison, freeing, and
 * the errors for bad groups and ranks.  usage: group  (any number of ranks) */
#include "common.h"
#include "expect.h"

static int group_size(MPI_Group g) { int s = -1; MPI_OK(MPI_Group_size(g, &s)); return s; }
static int group_rank(MPI_Group g) { int r = -2; MPI_OK(MPI_Group_rank(g, &r)); return r; }

/* world rank of each member of g, via translation to the world group */
static void members(MPI_Group g, MPI_Group world, int *out) {
    int n = group_size(g);
    int in[64];
    for (int i = 0; i < n; i++) in[i] = i;
    MPI_OK(MPI_Group_translate_ranks(g, n, in, world, out));
}

static void expect_members(MPI_Group g, MPI_Group world, const int *want, int n, const char *what) {
    int got[64];
    CHECK(group_size(g) == n, "%s: size %d, expected %d", what, group_size(g), n);
    members(g, world, got);
    for (int i = 0; i < n; i++)
        CHECK(got[i] == want[i], "%s: member %d is world %d, expected %d", what, i, got[i], want[i]);
    int mine = MPI_UNDEFINED;
    for (int i = 0; i < n; i++) if (want[i] == g_rank) mine = i;
    CHECK(group_rank(g) == mine, "%s: own rank %d, expected %d", what, group_rank(g), mine);
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    int n = g_size, res = -1;
    int want[64], ranks[64];
    MPI_Group world, self, evens, odds, rev, u, x, d, g, empty_result;

    MPI_OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    for (int i = 0; i < n; i++) want[i] = i;
    expect_members(world, world, want, n, "world group");
    MPI_OK(MPI_Comm_group(MPI_COMM_SELF, &self));
    want[0] = g_rank;
    expect_members(self, world, want, 1, "self group");
    CHECK(group_size(MPI_GROUP_EMPTY) == 0, "GROUP_EMPTY size");
    CHECK(group_rank(MPI_GROUP_EMPTY) == MPI_UNDEFINED, "GROUP_EMPTY rank");

    /* incl: even world ranks; range_incl of the odd ones */
    int ne = 0;
    for (int i = 0; i < n; i += 2) ranks[ne++] = i;
    MPI_OK(MPI_Group_incl(world, ne, ranks, &evens));
    expect_members(evens, world, ranks, ne, "incl evens");
    int no = n / 2;
    if (no > 0) {
        int range[1][3] = {{1, n - 1 - ((n - 1) % 2 == 0), 2}};
        MPI_OK(MPI_Group_range_incl(world, 1, range, &odds));
        for (int i = 0; i < no; i++) want[i] = 2 * i + 1;
        expect_members(odds, world, want, no, "range_incl odds");
    } else {
        MPI_OK(MPI_Group_excl(world, ne, ranks, &odds));   /* empty */
        CHECK(odds == MPI_GROUP_EMPTY || group_size(odds) == 0, "excl everything is empty");
    }
    /* reversed world via a negative stride */
    int rrange[1][3] = {{n - 1, 0, -1}};
    MPI_OK(MPI_Group_range_incl(world, 1, rrange, &rev));
    for (int i = 0; i < n; i++) want[i] = n - 1 - i;
    expect_members(rev, world, want, n, "reversed");
    MPI_OK(MPI_Group_compare(world, rev, &res));
    CHECK(res == (n == 1 ? MPI_IDENT : MPI_SIMILAR), "compare(world, reversed) = %d", res);
    MPI_OK(MPI_Group_compare(world, world, &res));
    CHECK(res == MPI_IDENT, "compare(world, world) = %d", res);
    if (n > 1) {
        MPI_OK(MPI_Group_compare(world, evens, &res));
        CHECK(res == MPI_UNEQUAL, "compare(world, evens) = %d", res);
    }

    /* union(odds, evens) = odds then evens; intersection(rev, evens) in rev order */
    MPI_OK(MPI_Group_union(odds, evens, &u));
    int k = 0;
    for (int i = 1; i < n; i += 2) want[k++] = i;
    for (int i = 0; i < n; i += 2) want[k++] = i;
    expect_members(u, world, want, n, "union(odds, evens)");
    MPI_OK(MPI_Group_compare(u, world, &res));
    CHECK(res == (n <= 1 ? MPI_IDENT : MPI_SIMILAR), "compare(union, world) = %d", res);
    MPI_OK(MPI_Group_intersection(rev, evens, &x));
    k = 0;
    for (int i = n - 1; i >= 0; i--) if (i % 2 == 0) want[k++] = i;
    expect_members(x, world, want, k, "intersection(reversed, evens)");
    MPI_OK(MPI_Group_difference(world, evens, &d));
    MPI_OK(MPI_Group_compare(d, odds, &res));
    CHECK(res == MPI_IDENT, "difference(world, evens) vs odds = %d", res);
    MPI_OK(MPI_Group_intersection(evens, odds, &empty_result));
    CHECK(group_size(empty_result) == 0, "evens ∩ odds not empty");
    MPI_OK(MPI_Group_compare(empty_result, MPI_GROUP_EMPTY, &res));
    CHECK(res == MPI_IDENT, "empty intersection vs GROUP_EMPTY = %d", res);

    /* excl and range_excl: drop world rank 0 and every third rank */
    MPI_OK(MPI_Group_excl(world, 1, (int[]){0}, &g));
    for (int i = 1; i < n; i++) want[i - 1] = i;
    expect_members(g, world, want, n - 1, "excl 0");
    MPI_OK(MPI_Group_free(&g));
    CHECK(g == MPI_GROUP_NULL, "free sets GROUP_NULL");
    int xr[1][3] = {{0, n - 1, 3}};
    MPI_OK(MPI_Group_range_excl(world, 1, xr, &g));
    k = 0;
    for (int i = 0; i < n; i++) if (i % 3 != 0) want[k++] = i;
    expect_members(g, world, want, k, "range_excl every third");

    /* translate: world ranks into the reversed group, PROC_NULL passes */
    int in[3] = {0, n - 1, MPI_PROC_NULL}, out[3];
    MPI_OK(MPI_Group_translate_ranks(world, 3, in, rev, out));
    CHECK(out[0] == n - 1 && out[1] == 0 && out[2] == MPI_PROC_NULL,
          "translate to reversed: %d %d %d", out[0], out[1], out[2]);
    if (n > 1) {
        MPI_OK(MPI_Group_translate_ranks(world, 1, (int[]){1}, evens, out));
        CHECK(out[0] == MPI_UNDEFINED, "odd rank in evens translates to %d", out[0]);
    }

    /* errors */
    EXPECT_CLASS(MPI_Group_incl(world, 1, (int[]){n}, &g), MPI_ERR_RANK);
    EXPECT_CLASS(MPI_Group_incl(world, 1, (int[]){-1}, &g), MPI_ERR_RANK);
    EXPECT_CLASS(MPI_Group_excl(world, 1, (int[]){n}, &g), MPI_ERR_RANK);
    EXPECT_CLASS(MPI_Group_translate_ranks(world, 1, (int[]){n}, rev, out), MPI_ERR_RANK);
    EXPECT_CLASS(MPI_Group_size(MPI_GROUP_NULL, &k), MPI_ERR_GROUP);
    EXPECT_CLASS(MPI_Group_union(MPI_GROUP_NULL, world, &g), MPI_ERR_GROUP);
    MPI_Group freed = x;
    MPI_OK(MPI_Group_free(&x));
    EXPECT_CLASS(MPI_Group_free(&x), MPI_ERR_GROUP);   /* x is GROUP_NULL now */
    (void)freed;

    MPI_Group all[] = {world, self, evens, odds, rev, u, d, g, empty_result};
    for (unsigned i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i] != MPI_GROUP_EMPTY) MPI_OK(MPI_Group_free(&all[i]));
    return test_finish();
}
