/* Topologies: Dims_create, Cartesian grids (coords, rank, shift at edges
 * and periodic, sub-grids, map), graphs, distributed graphs (adjacent and
 * general), Topo_test, and the errors.  usage: topo  (any number of ranks) */
#include "common.h"
#include "expect.h"

static void dims_case(int nnodes, int nd, const int *given, const int *want) {
    int d[8];
    memcpy(d, given, nd * sizeof(int));
    MPI_OK(MPI_Dims_create(nnodes, nd, d));
    for (int i = 0; i < nd; i++)
        CHECK(d[i] == want[i], "Dims_create(%d, %d): dim %d = %d, expected %d", nnodes, nd, i, d[i], want[i]);
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    errors_return();
    int n = g_size, status = -1, r = -1, s = -1;

    dims_case(12, 2, (int[]){0, 0}, (int[]){4, 3});
    dims_case(16, 3, (int[]){0, 0, 0}, (int[]){4, 2, 2});
    dims_case(7, 2, (int[]){0, 0}, (int[]){7, 1});
    dims_case(24, 3, (int[]){0, 2, 0}, (int[]){4, 2, 3});
    dims_case(6, 2, (int[]){2, 3}, (int[]){2, 3});
    EXPECT_CLASS(MPI_Dims_create(10, 2, (int[]){3, 0}), MPI_ERR_DIMS);

    MPI_OK(MPI_Topo_test(MPI_COMM_WORLD, &status));
    CHECK(status == MPI_UNDEFINED, "world topology %d", status);

    /* a 2-D grid over all ranks: rows periodic, columns not */
    int dims[2] = {0, 0}, periods[2] = {1, 0};
    MPI_OK(MPI_Dims_create(n, 2, dims));
    MPI_Comm cart;
    MPI_OK(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart));
    MPI_OK(MPI_Topo_test(cart, &status));
    CHECK(status == MPI_CART, "cart topology %d", status);
    int nd = -1, gd[2], gp[2], gc[2], c[2];
    MPI_OK(MPI_Cartdim_get(cart, &nd));
    CHECK(nd == 2, "cartdim %d", nd);
    MPI_OK(MPI_Comm_rank(cart, &r));
    MPI_OK(MPI_Cart_get(cart, 2, gd, gp, gc));
    CHECK(gd[0] == dims[0] && gd[1] == dims[1] && gp[0] == 1 && gp[1] == 0, "cart_get dims/periods");
    CHECK(gc[0] == r / dims[1] && gc[1] == r % dims[1], "own coords (%d,%d) for rank %d", gc[0], gc[1], r);
    for (int q = 0; q < n; q++) {
        int back = -1;
        MPI_OK(MPI_Cart_coords(cart, q, 2, c));
        CHECK(c[0] == q / dims[1] && c[1] == q % dims[1], "coords of %d", q);
        MPI_OK(MPI_Cart_rank(cart, c, &back));
        CHECK(back == q, "rank of coords of %d = %d", q, back);
    }
    /* periodic wrap in dim 0 */
    c[0] = -1; c[1] = 0;
    MPI_OK(MPI_Cart_rank(cart, c, &s));
    CHECK(s == (dims[0] - 1) * dims[1], "wrapped rank %d", s);
    /* shifts: dim 0 periodic, dim 1 not */
    int src, dst;
    MPI_OK(MPI_Cart_shift(cart, 0, 1, &src, &dst));
    CHECK(src == ((gc[0] - 1 + dims[0]) % dims[0]) * dims[1] + gc[1], "dim0 source %d", src);
    CHECK(dst == ((gc[0] + 1) % dims[0]) * dims[1] + gc[1], "dim0 dest %d", dst);
    MPI_OK(MPI_Cart_shift(cart, 1, 1, &src, &dst));
    CHECK(src == (gc[1] == 0 ? MPI_PROC_NULL : r - 1), "dim1 source %d", src);
    CHECK(dst == (gc[1] == dims[1] - 1 ? MPI_PROC_NULL : r + 1), "dim1 dest %d", dst);
    /* a halo exchange along dim 1 with PROC_NULL at the edges */
    int left = -1, right = -1;
    MPI_OK(MPI_Sendrecv(&r, 1, MPI_INT, dst, 1, &left, 1, MPI_INT, src, 1, cart, MPI_STATUS_IGNORE));
    CHECK(left == (src == MPI_PROC_NULL ? -1 : src), "halo from left %d", left);
    (void)right;
    /* sub-grid keeping dim 1: a row */
    MPI_Comm row;
    MPI_OK(MPI_Cart_sub(cart, (int[]){0, 1}, &row));
    MPI_OK(MPI_Comm_size(row, &s));
    MPI_OK(MPI_Comm_rank(row, &r));
    CHECK(s == dims[1] && r == gc[1], "row size %d rank %d", s, r);
    MPI_OK(MPI_Cartdim_get(row, &nd));
    CHECK(nd == 1, "row cartdim %d", nd);
    int rowsum = -1;
    MPI_OK(MPI_Allreduce(&g_rank, &rowsum, 1, MPI_INT, MPI_SUM, row));
    int want = 0;
    for (int j = 0; j < dims[1]; j++) want += gc[0] * dims[1] + j;
    CHECK(rowsum == want, "row sum %d, expected %d", rowsum, want);
    MPI_OK(MPI_Comm_free(&row));
    /* dup keeps the topology */
    MPI_Comm cdup;
    MPI_OK(MPI_Comm_dup(cart, &cdup));
    MPI_OK(MPI_Topo_test(cdup, &status));
    CHECK(status == MPI_CART, "dup of cart has topology %d", status);
    MPI_OK(MPI_Comm_free(&cdup));
    /* cart errors */
    EXPECT_CLASS(MPI_Cart_coords(cart, n, 2, c), MPI_ERR_RANK);
    EXPECT_CLASS(MPI_Cart_coords(MPI_COMM_WORLD, 0, 2, c), MPI_ERR_TOPOLOGY);
    EXPECT_CLASS(MPI_Cartdim_get(MPI_COMM_WORLD, &nd), MPI_ERR_TOPOLOGY);
    EXPECT_CLASS(MPI_Cart_shift(MPI_COMM_NULL, 0, 1, &src, &dst), MPI_ERR_COMM);
    c[0] = 0; c[1] = dims[1];
    EXPECT_CLASS(MPI_Cart_rank(cart, c, &s), MPI_ERR_ARG);
    MPI_OK(MPI_Comm_free(&cart));

    /* a grid smaller than the world: extra ranks get COMM_NULL */
    int small = n > 1 ? n - 1 : 1;
    MPI_Comm line;
    MPI_OK(MPI_Cart_create(MPI_COMM_WORLD, 1, &small, (int[]){1}, 0, &line));
    CHECK((g_rank < small) == (line != MPI_COMM_NULL), "line membership");
    int newrank = -2;
    MPI_OK(MPI_Cart_map(MPI_COMM_WORLD, 1, &small, (int[]){1}, &newrank));
    CHECK(newrank == (g_rank < small ? g_rank : MPI_UNDEFINED), "cart_map %d", newrank);
    if (line != MPI_COMM_NULL) {
        MPI_OK(MPI_Cart_shift(line, 0, 2, &src, &dst));
        CHECK(dst == (g_rank + 2) % small && src == ((g_rank - 2) % small + small) % small,
              "periodic line shift by 2: %d %d", src, dst);
        MPI_OK(MPI_Comm_free(&line));
    }
    int too_big = n + 1;
    EXPECT_CLASS(MPI_Cart_create(MPI_COMM_WORLD, 1, &too_big, (int[]){0}, 0, &line), MPI_ERR_ARG);

    /* graph: a ring, node i linked to i-1 and i+1 */
    int index[64], edges[128], ne = 0;
    for (int i = 0; i < n; i++) {
        if (n > 1) {
            edges[ne++] = (i + n - 1) % n;
            edges[ne++] = (i + 1) % n;
        }
        index[i] = ne;
    }
    MPI_Comm graph;
    MPI_OK(MPI_Graph_create(MPI_COMM_WORLD, n, index, edges, 0, &graph));
    MPI_OK(MPI_Topo_test(graph, &status));
    CHECK(status == MPI_GRAPH, "graph topology %d", status);
    int nn = -1, nedges = -1, gi[64], ge[128], cnt = -1, nb[4];
    MPI_OK(MPI_Graphdims_get(graph, &nn, &nedges));
    CHECK(nn == n && nedges == ne, "graphdims %d %d", nn, nedges);
    MPI_OK(MPI_Graph_get(graph, n, ne, gi, ge));
    for (int i = 0; i < n; i++) CHECK(gi[i] == index[i], "graph index %d", i);
    for (int i = 0; i < ne; i++) CHECK(ge[i] == edges[i], "graph edge %d", i);
    MPI_OK(MPI_Graph_neighbors_count(graph, g_rank, &cnt));
    CHECK(cnt == (n > 1 ? 2 : 0), "neighbour count %d", cnt);
    if (n > 1) {
        MPI_OK(MPI_Graph_neighbors(graph, g_rank, 2, nb));
        CHECK(nb[0] == (g_rank + n - 1) % n && nb[1] == (g_rank + 1) % n, "neighbours %d %d", nb[0], nb[1]);
    }
    MPI_OK(MPI_Graph_map(MPI_COMM_WORLD, n, index, edges, &newrank));
    CHECK(newrank == g_rank, "graph_map %d", newrank);
    EXPECT_CLASS(MPI_Graph_neighbors_count(graph, n, &cnt), MPI_ERR_RANK);
    EXPECT_CLASS(MPI_Graphdims_get(MPI_COMM_WORLD, &nn, &nedges), MPI_ERR_TOPOLOGY);
    MPI_OK(MPI_Comm_free(&graph));

    /* distributed graph, adjacent: in from rank-1, out to rank+1 (weights = source rank + 1) */
    int from = (g_rank + n - 1) % n, to = (g_rank + 1) % n;
    int w_in = from + 1, w_out = g_rank + 1;
    MPI_Comm dg;
    MPI_OK(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &from, &w_in, 1, &to, &w_out,
                                          MPI_INFO_NULL, 0, &dg));
    MPI_OK(MPI_Topo_test(dg, &status));
    CHECK(status == MPI_DIST_GRAPH, "dist graph topology %d", status);
    int indeg = -1, outdeg = -1, weighted = -1, srcs[8], sw[8], dsts[8], dw[8];
    MPI_OK(MPI_Dist_graph_neighbors_count(dg, &indeg, &outdeg, &weighted));
    CHECK(indeg == 1 && outdeg == 1 && weighted == 1, "adjacent counts %d %d %d", indeg, outdeg, weighted);
    MPI_OK(MPI_Dist_graph_neighbors(dg, 1, srcs, sw, 1, dsts, dw));
    CHECK(srcs[0] == from && sw[0] == from + 1 && dsts[0] == to && dw[0] == g_rank + 1,
          "adjacent neighbours %d/%d %d/%d", srcs[0], sw[0], dsts[0], dw[0]);
    MPI_OK(MPI_Comm_free(&dg));

    /* distributed graph, general and unweighted: rank 0 declares every edge i -> (i+1)%n */
    int gsrc[64], gdeg[64], gdst[64], gn = 0;
    if (g_rank == 0)
        for (int i = 0; i < n; i++) { gsrc[gn] = i; gdeg[gn] = 1; gdst[gn] = (i + 1) % n; gn++; }
    MPI_OK(MPI_Dist_graph_create(MPI_COMM_WORLD, gn, gsrc, gdeg, gdst, MPI_UNWEIGHTED,
                                 MPI_INFO_NULL, 0, &dg));
    MPI_OK(MPI_Dist_graph_neighbors_count(dg, &indeg, &outdeg, &weighted));
    CHECK(indeg == 1 && outdeg == 1 && weighted == 0, "general counts %d %d %d", indeg, outdeg, weighted);
    MPI_OK(MPI_Dist_graph_neighbors(dg, 1, srcs, MPI_UNWEIGHTED, 1, dsts, MPI_UNWEIGHTED));
    CHECK(srcs[0] == from && dsts[0] == to, "general neighbours %d %d", srcs[0], dsts[0]);
    /* traffic along the graph */
    int token = -1;
    MPI_OK(MPI_Sendrecv(&g_rank, 1, MPI_INT, dsts[0], 4, &token, 1, MPI_INT, srcs[0], 4, dg, MPI_STATUS_IGNORE));
    CHECK(token == from, "token from %d", token);
    MPI_OK(MPI_Comm_free(&dg));
    EXPECT_CLASS(MPI_Dist_graph_neighbors_count(MPI_COMM_WORLD, &indeg, &outdeg, &weighted), MPI_ERR_TOPOLOGY);
    return test_finish();
}
