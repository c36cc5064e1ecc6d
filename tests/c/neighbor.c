/* Neighbourhood collectives: on a periodic ring (with 1 or 2 processes a
 * neighbour appears twice, and the block sent downwards must land in the
 * receiver's slot of the side it came from), on a non-periodic grid edge
 * (MPI_PROC_NULL neighbours leave their slots alone), on a distributed
 * graph; allgather, alltoall, their v- and w-forms and the nonblocking
 * versions; non-contiguous datatypes on every form (the gaps of the
 * receive buffers stay untouched); MPI_ERR_TOPOLOGY without a topology. */
#include "expect.h"

#define UNTOUCHED -99

static void ring(void) {
    MPI_Comm ring;
    int dims[1] = {g_size}, periods[1] = {1}, rank, left, right;
    MPI_OK(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring));
    MPI_OK(MPI_Comm_rank(ring, &rank));
    MPI_OK(MPI_Cart_shift(ring, 0, 1, &left, &right));
    /* alltoall: block 0 goes left (negative), block 1 right. */
    int send[2] = {100 * rank + 0, 100 * rank + 1}, recv[2] = {UNTOUCHED, UNTOUCHED};
    MPI_OK(MPI_Neighbor_alltoall(send, 1, MPI_INT, recv, 1, MPI_INT, ring));
    /* Slot 0 comes from the left neighbour, which sent its block 1 (rightwards). */
    CHECK(recv[0] == 100 * left + 1 && recv[1] == 100 * right + 0,
          "ring alltoall: got %d %d (left %d right %d)", recv[0], recv[1], left, right);
    int mine = rank * 7, both[2] = {UNTOUCHED, UNTOUCHED};
    MPI_Request request;
    MPI_OK(MPI_Ineighbor_allgather(&mine, 1, MPI_INT, both, 1, MPI_INT, ring, &request));
    MPI_OK(MPI_Wait(&request, MPI_STATUS_IGNORE));
    CHECK(both[0] == left * 7 && both[1] == right * 7, "ring allgather: %d %d", both[0], both[1]);
    /* Persistent: started twice with new data. */
    MPI_OK(MPI_Neighbor_alltoall_init(send, 1, MPI_INT, recv, 1, MPI_INT, ring, MPI_INFO_NULL, &request));
    for (int round = 1; round <= 2; round++) {
        send[0] = 1000 * round + 100 * rank, send[1] = send[0] + 1;
        MPI_OK(MPI_Start(&request));
        MPI_OK(MPI_Wait(&request, MPI_STATUS_IGNORE));
        CHECK(recv[0] == 1000 * round + 100 * left + 1 && recv[1] == 1000 * round + 100 * right,
              "persistent round %d: %d %d", round, recv[0], recv[1]);
    }
    MPI_OK(MPI_Request_free(&request));
    send[0] = 100 * rank, send[1] = 100 * rank + 1;
    recv[0] = recv[1] = UNTOUCHED;
    MPI_OK(MPI_Neighbor_alltoall(send, 1, MPI_INT, recv, 1, MPI_INT, ring));
    /* The v- and w-forms below on 3+ processes only: with 1 or 2, MPICH
     * 4.0.2 pairs a neighbour met twice by posting order in these forms
     * (its plain alltoall above follows the directions, as resmpi does
     * in all of them). */
    if (g_size < 3) {
        MPI_OK(MPI_Comm_free(&ring));
        return;
    }
    /* v-form: counts 1, displacements reversed. */
    int counts[2] = {1, 1}, displs[2] = {1, 0}, out[2] = {UNTOUCHED, UNTOUCHED};
    MPI_OK(MPI_Neighbor_alltoallv(send, counts, displs, MPI_INT, out, counts, displs, MPI_INT, ring));
    CHECK(out[1] == 100 * left + 0 && out[0] == 100 * right + 1, "ring alltoallv: %d %d", out[0], out[1]);
    /* w-form with byte displacements. */
    MPI_Aint bytes[2] = {0, sizeof(int)};
    MPI_Datatype types[2] = {MPI_INT, MPI_INT};
    int w[2] = {UNTOUCHED, UNTOUCHED};
    MPI_OK(MPI_Neighbor_alltoallw(send, counts, bytes, types, w, counts, bytes, types, ring));
    CHECK(w[0] == recv[0] && w[1] == recv[1], "ring alltoallw: %d %d", w[0], w[1]);
    MPI_OK(MPI_Comm_free(&ring));
}

static void grid_edge(void) {
    /* A non-periodic line: the ends have MPI_PROC_NULL on one side. */
    MPI_Comm line;
    int dims[1] = {g_size}, periods[1] = {0}, rank, left, right;
    MPI_OK(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &line));
    MPI_OK(MPI_Comm_rank(line, &rank));
    MPI_OK(MPI_Cart_shift(line, 0, 1, &left, &right));
    int mine = rank + 1, got[2] = {UNTOUCHED, UNTOUCHED}, counts[2] = {1, 1}, displs[2] = {0, 1};
    MPI_OK(MPI_Neighbor_allgatherv(&mine, 1, MPI_INT, got, counts, displs, MPI_INT, line));
    CHECK(got[0] == (left == MPI_PROC_NULL ? UNTOUCHED : left + 1), "line left slot %d", got[0]);
    CHECK(got[1] == (right == MPI_PROC_NULL ? UNTOUCHED : right + 1), "line right slot %d", got[1]);
    MPI_OK(MPI_Comm_free(&line));
}

static void dist_graph(void) {
    /* Everyone sends to rank 0 and to its right neighbour: one edge when
     * they are the same (rank 0 itself, and the last rank). Rank 0 hears
     * from every other rank, each other rank from its left neighbour.
     * (The graph used to list the last rank's edge to rank 0 twice on its
     * side and once on rank 0's, so a message was left over: MPICH
     * matched it in the next communicator that reused the context id.) */
    int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
    int destinations[2] = {0, right}, out_degree = (g_rank == 0 || right == 0) ? 1 : 2;
    if (g_rank == 0) destinations[0] = right;
    int sources[64], in_degree = 0;
    if (g_rank == 0)
        for (int r = 1; r < g_size; r++) sources[in_degree++] = r;
    if (g_rank != 0 || g_size == 1) sources[in_degree++] = left;
    MPI_Comm graph;
    MPI_OK(MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, in_degree, sources, MPI_UNWEIGHTED,
                                          out_degree, destinations, MPI_UNWEIGHTED, MPI_INFO_NULL, 0,
                                          &graph));
    int values[64];
    for (int i = 0; i < 64; i++) values[i] = UNTOUCHED;
    int mine = 1000 + g_rank;
    MPI_OK(MPI_Neighbor_allgather(&mine, 1, MPI_INT, values, 1, MPI_INT, graph));
    for (int i = 0; i < in_degree; i++)
        CHECK(values[i] == 1000 + sources[i], "graph slot %d: %d from %d", i, values[i], sources[i]);
    MPI_OK(MPI_Comm_free(&graph));
}

/* Every form with strided (non-contiguous) datatypes on a periodic ring:
 * each block is 3 ints taken from every other slot; what lands in the
 * receive buffer's gaps must stay untouched. Blocking, nonblocking and
 * persistent. */
static void noncontiguous(void) {
    MPI_Comm ring;
    int dims[1] = {g_size}, periods[1] = {1}, rank, left, right;
    MPI_OK(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring));
    MPI_OK(MPI_Comm_rank(ring, &rank));
    MPI_OK(MPI_Cart_shift(ring, 0, 1, &left, &right));
    MPI_Datatype strided, block; /* 3 ints, stride 2; resized to span 6 */
    MPI_OK(MPI_Type_vector(3, 1, 2, MPI_INT, &strided));
    MPI_OK(MPI_Type_create_resized(strided, 0, 6 * sizeof(int), &block));
    MPI_OK(MPI_Type_commit(&block));
    int send[12], recv[12];
    for (int i = 0; i < 12; i++) send[i] = 1000 * rank + i;
    /* block b (b = 0 left, 1 right) holds send[6b + 0, 2, 4] */
#define EXPECT_BLOCK(slot, from, sent_block, what)                                              \
    for (int k = 0; k < 6; k++) {                                                              \
        int want = k % 2 ? UNTOUCHED : 1000 * (from) + 6 * (sent_block) + k;                   \
        CHECK(recv[6 * (slot) + k] == want, "%s: slot %d [%d]=%d, want %d", what, slot, k,   \
              recv[6 * (slot) + k], want);                                                     \
    }
    for (int form = 0; form < 5; form++) {
        for (int i = 0; i < 12; i++) recv[i] = UNTOUCHED;
        MPI_Request request;
        const char *what = "";
        int counts[2] = {1, 1}, displs[2] = {0, 1};
        MPI_Aint bytes[2] = {0, 6 * sizeof(int)};
        MPI_Datatype types[2] = {block, block};
        switch (form) {
        case 0:
            what = "alltoall";
            MPI_OK(MPI_Neighbor_alltoall(send, 1, block, recv, 1, block, ring));
            break;
        case 1:
            what = "ialltoallv";
            MPI_OK(MPI_Ineighbor_alltoallv(send, counts, displs, block, recv, counts, displs, block, ring,
                                           &request));
            MPI_OK(MPI_Wait(&request, MPI_STATUS_IGNORE));
            break;
        case 2:
            what = "alltoallw";
            MPI_OK(MPI_Neighbor_alltoallw(send, counts, bytes, types, recv, counts, bytes, types, ring));
            break;
        case 3:
            what = "allgather (persistent)";
            MPI_OK(MPI_Neighbor_allgather_init(send, 1, block, recv, 1, block, ring, MPI_INFO_NULL, &request));
            MPI_OK(MPI_Start(&request));
            MPI_OK(MPI_Wait(&request, MPI_STATUS_IGNORE));
            MPI_OK(MPI_Request_free(&request));
            break;
        default:
            what = "allgatherv";
            MPI_OK(MPI_Neighbor_allgatherv(send, 1, block, recv, counts, displs, block, ring));
        }
        if (form <= 2) {
            /* slot 0 from the left neighbour's block 1, slot 1 from the
             * right's block 0. With one neighbour on both sides (1 or 2
             * ranks) Debian's MPICH 4.0.2 pairs the two blocks the other
             * way round in the nonblocking v-form; `ring` checks resmpi's
             * order, this subtest the datatypes, so either pairing passes
             * here. */
            int swapped = left == right && recv[0] == 1000 * left;
            EXPECT_BLOCK(0, left, swapped ? 0 : 1, what);
            EXPECT_BLOCK(1, right, swapped ? 1 : 0, what);
        } else {
            EXPECT_BLOCK(0, left, 0, what);
            EXPECT_BLOCK(1, right, 0, what);
        }
    }
#undef EXPECT_BLOCK
    MPI_OK(MPI_Type_free(&strided));
    MPI_OK(MPI_Type_free(&block));
    MPI_OK(MPI_Comm_free(&ring));
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    ring();
    grid_edge();
    if (g_size <= 64) dist_graph();
    noncontiguous();
    errors_return();
    int a = 0, b = 0;
    EXPECT_CLASS(MPI_Neighbor_allgather(&a, 1, MPI_INT, &b, 1, MPI_INT, MPI_COMM_WORLD), MPI_ERR_TOPOLOGY);
    return test_finish();
}
