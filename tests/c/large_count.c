/* MPI-4's large-count "_c" functions: each family called with ordinary
 * counts and checked against its int form; datatypes whose size and extent
 * need 64 bits; a real transfer and a broadcast above 2 GiB ("big", 2
 * ranks); negative counts; an MPI-IO round trip.
 *
 * Subtests: p2p coll datatype negative io big (no argument: all but big). */
#include "expect.h"

#define N 64
#define BIG_BYTES (((MPI_Count)1 << 31) + ((MPI_Count)1 << 22)) /* 2 GiB + 4 MiB */

static int next_rank(void) { return (g_rank + 1) % g_size; }
static int prev_rank(void) { return (g_rank + g_size - 1) % g_size; }

static void fill_ints(int *v, int n, int seed) {
    for (int i = 0; i < n; i++) v[i] = seed * 1000 + i;
}
static void check_ints(const int *v, int n, int seed, const char *what) {
    for (int i = 0; i < n; i++)
        CHECK(v[i] == seed * 1000 + i, "%s: [%d] = %d, expected %d", what, i, v[i], seed * 1000 + i);
}

/* ---------------------------------------------------------------- p2p */
static void test_p2p(void) {
    int send[N], recv[N];
    MPI_Status status;
    MPI_Count count_c = -1, elements_c = -1;
    int count = -1, elements = -1;
    fill_ints(send, N, g_rank);

    /* Send_c/Recv_c around the ring, status counts against the int forms. */
    MPI_Request request;
    MPI_OK(MPI_Irecv_c(recv, N, MPI_INT, prev_rank(), 1, MPI_COMM_WORLD, &request));
    MPI_OK(MPI_Send_c(send, N, MPI_INT, next_rank(), 1, MPI_COMM_WORLD));
    MPI_OK(MPI_Wait(&request, &status));
    check_ints(recv, N, prev_rank(), "Send_c/Irecv_c");
    MPI_OK(MPI_Get_count(&status, MPI_INT, &count));
    MPI_OK(MPI_Get_count_c(&status, MPI_INT, &count_c));
    MPI_OK(MPI_Get_elements(&status, MPI_INT, &elements));
    MPI_OK(MPI_Get_elements_c(&status, MPI_INT, &elements_c));
    CHECK(count == N && count_c == N && elements == N && elements_c == N,
          "counts %d %ld %d %ld", count, (long)count_c, elements, (long)elements_c);

    /* Every send mode, blocking and not; the buffered ones through a
     * buffer attached and detached with the _c forms. */
    MPI_Count pack_bytes = 0;
    MPI_OK(MPI_Pack_size_c(N, MPI_INT, MPI_COMM_WORLD, &pack_bytes));
    MPI_Count attach_bytes = 2 * (pack_bytes + MPI_BSEND_OVERHEAD);
    char *attached = malloc((size_t)attach_bytes);
    MPI_OK(MPI_Buffer_attach_c(attached, attach_bytes));
    for (int mode = 0; mode < 7; mode++) {
        memset(recv, 0, sizeof recv);
        MPI_OK(MPI_Irecv_c(recv, N, MPI_INT, prev_rank(), 10 + mode, MPI_COMM_WORLD, &request));
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD)); /* the receive is posted (Rsend) */
        MPI_Request sent = MPI_REQUEST_NULL;
        switch (mode) {
        case 0: MPI_OK(MPI_Ssend_c(send, N, MPI_INT, next_rank(), 10, MPI_COMM_WORLD)); break;
        case 1: MPI_OK(MPI_Rsend_c(send, N, MPI_INT, next_rank(), 11, MPI_COMM_WORLD)); break;
        case 2: MPI_OK(MPI_Isend_c(send, N, MPI_INT, next_rank(), 12, MPI_COMM_WORLD, &sent)); break;
        case 3: MPI_OK(MPI_Issend_c(send, N, MPI_INT, next_rank(), 13, MPI_COMM_WORLD, &sent)); break;
        case 4: MPI_OK(MPI_Irsend_c(send, N, MPI_INT, next_rank(), 14, MPI_COMM_WORLD, &sent)); break;
        case 5: MPI_OK(MPI_Bsend_c(send, N, MPI_INT, next_rank(), 15, MPI_COMM_WORLD)); break;
        case 6: MPI_OK(MPI_Ibsend_c(send, 0, MPI_INT, next_rank(), 16, MPI_COMM_WORLD, &sent)); break;
        }
        MPI_OK(MPI_Wait(&sent, MPI_STATUS_IGNORE));
        MPI_OK(MPI_Wait(&request, &status));
        MPI_OK(MPI_Get_count_c(&status, MPI_INT, &count_c));
        if (mode == 6) {
            CHECK(count_c == 0, "Ibsend_c of 0: count %ld", (long)count_c);
        } else {
            check_ints(recv, N, prev_rank(), "send modes _c");
            CHECK(count_c == N, "mode %d: count %ld", mode, (long)count_c);
        }
    }
    void *detached = NULL;
    MPI_Count detached_bytes = 0;
    MPI_OK(MPI_Buffer_detach_c(&detached, &detached_bytes));
    CHECK(detached == attached && detached_bytes == attach_bytes, "Buffer_detach_c");
    free(attached);

    /* Sendrecv_c, Sendrecv_replace_c, Isendrecv_c, Isendrecv_replace_c. */
    memset(recv, 0, sizeof recv);
    MPI_OK(MPI_Sendrecv_c(send, N, MPI_INT, next_rank(), 2, recv, N, MPI_INT, prev_rank(), 2,
                          MPI_COMM_WORLD, &status));
    check_ints(recv, N, prev_rank(), "Sendrecv_c");
    int replace[N];
    fill_ints(replace, N, g_rank);
    MPI_OK(MPI_Sendrecv_replace_c(replace, N, MPI_INT, next_rank(), 3, prev_rank(), 3,
                                  MPI_COMM_WORLD, &status));
    check_ints(replace, N, prev_rank(), "Sendrecv_replace_c");
    MPI_OK(MPI_Get_count_c(&status, MPI_INT, &count_c));
    CHECK(count_c == N, "Sendrecv_replace_c count %ld", (long)count_c);
    memset(recv, 0, sizeof recv);
    MPI_OK(MPI_Isendrecv_c(send, N, MPI_INT, next_rank(), 4, recv, N, MPI_INT, prev_rank(), 4,
                           MPI_COMM_WORLD, &request));
    MPI_OK(MPI_Wait(&request, MPI_STATUS_IGNORE));
    check_ints(recv, N, prev_rank(), "Isendrecv_c");
    fill_ints(replace, N, g_rank);
    MPI_OK(MPI_Isendrecv_replace_c(replace, N, MPI_INT, next_rank(), 5, prev_rank(), 5,
                                   MPI_COMM_WORLD, &request));
    MPI_OK(MPI_Wait(&request, MPI_STATUS_IGNORE));
    check_ints(replace, N, prev_rank(), "Isendrecv_replace_c");

    /* Matched receives. */
    MPI_Message message;
    MPI_OK(MPI_Isend_c(send, N, MPI_INT, next_rank(), 6, MPI_COMM_WORLD, &request));
    MPI_OK(MPI_Mprobe(prev_rank(), 6, MPI_COMM_WORLD, &message, &status));
    memset(recv, 0, sizeof recv);
    MPI_OK(MPI_Mrecv_c(recv, N, MPI_INT, &message, &status));
    check_ints(recv, N, prev_rank(), "Mrecv_c");
    MPI_OK(MPI_Wait(&request, MPI_STATUS_IGNORE));
    MPI_OK(MPI_Isend_c(send, N, MPI_INT, next_rank(), 7, MPI_COMM_WORLD, &request));
    MPI_OK(MPI_Mprobe(prev_rank(), 7, MPI_COMM_WORLD, &message, &status));
    MPI_Request received;
    memset(recv, 0, sizeof recv);
    MPI_OK(MPI_Imrecv_c(recv, N, MPI_INT, &message, &received));
    MPI_OK(MPI_Wait(&received, &status));
    check_ints(recv, N, prev_rank(), "Imrecv_c");
    MPI_OK(MPI_Wait(&request, MPI_STATUS_IGNORE));

    /* Persistent forms, started twice. */
    MPI_Request persistent[2];
    MPI_OK(MPI_Recv_init_c(recv, N, MPI_INT, prev_rank(), 8, MPI_COMM_WORLD, &persistent[0]));
    MPI_OK(MPI_Send_init_c(send, N, MPI_INT, next_rank(), 8, MPI_COMM_WORLD, &persistent[1]));
    for (int round = 0; round < 2; round++) {
        memset(recv, 0, sizeof recv);
        MPI_OK(MPI_Startall(2, persistent));
        MPI_Status statuses[2];
        MPI_OK(MPI_Waitall(2, persistent, statuses));
        check_ints(recv, N, prev_rank(), "Send_init_c/Recv_init_c");
    }
    MPI_OK(MPI_Request_free(&persistent[0]));
    MPI_OK(MPI_Request_free(&persistent[1]));
    MPI_Request others[3];
    MPI_OK(MPI_Ssend_init_c(send, N, MPI_INT, next_rank(), 9, MPI_COMM_WORLD, &others[0]));
    MPI_OK(MPI_Rsend_init_c(send, N, MPI_INT, next_rank(), 9, MPI_COMM_WORLD, &others[1]));
    MPI_OK(MPI_Bsend_init_c(send, 0, MPI_INT, next_rank(), 9, MPI_COMM_WORLD, &others[2]));
    for (int i = 0; i < 3; i++) MPI_OK(MPI_Request_free(&others[i]));
}

/* ---------------------------------------------------------------- collectives */
static void sum_ints_c(void *in, void *inout, MPI_Count *len, MPI_Datatype *type) {
    (void)type;
    for (MPI_Count i = 0; i < *len; i++) ((int *)inout)[i] += ((int *)in)[i];
}

static void test_coll(void) {
    /* arrays and buffers for the world and for the two ring neighbours */
    int rank = g_rank, size = g_size < 2 ? 2 : g_size;
    int *send = malloc(sizeof(int) * N * size), *recv = malloc(sizeof(int) * N * size);
    int *expect = malloc(sizeof(int) * N * size);
    MPI_Count *counts = malloc(sizeof(MPI_Count) * size);
    MPI_Aint *displs = malloc(sizeof(MPI_Aint) * size);
    int *int_counts = malloc(sizeof(int) * size), *int_displs = malloc(sizeof(int) * size);
    MPI_Datatype *types = malloc(sizeof(MPI_Datatype) * size);
    MPI_Count *wcounts = malloc(sizeof(MPI_Count) * size);
    MPI_Aint *wdispls = malloc(sizeof(MPI_Aint) * size);
    for (int i = 0; i < size; i++) {
        counts[i] = N;
        displs[i] = (MPI_Aint)i * N;
        int_counts[i] = N;
        int_displs[i] = i * N;
        types[i] = MPI_INT;
        wcounts[i] = N;
        wdispls[i] = (MPI_Aint)i * N * (MPI_Aint)sizeof(int);
    }
    MPI_Request request;

    /* Bcast_c, Ibcast_c, Bcast_init_c */
    for (int form = 0; form < 3; form++) {
        if (rank == 1 % g_size) fill_ints(recv, N, 7 + form); else memset(recv, 0, N * sizeof(int));
        if (form == 0) MPI_OK(MPI_Bcast_c(recv, N, MPI_INT, 1 % g_size, MPI_COMM_WORLD));
        if (form == 1) {
            MPI_OK(MPI_Ibcast_c(recv, N, MPI_INT, 1 % g_size, MPI_COMM_WORLD, &request));
            MPI_OK(MPI_Wait(&request, MPI_STATUS_IGNORE));
        }
        if (form == 2) {
            MPI_OK(MPI_Bcast_init_c(recv, N, MPI_INT, 1 % g_size, MPI_COMM_WORLD, MPI_INFO_NULL, &request));
            MPI_OK(MPI_Start(&request));
            MPI_OK(MPI_Wait(&request, MPI_STATUS_IGNORE));
            MPI_OK(MPI_Request_free(&request));
        }
        check_ints(recv, N, 7 + form, "Bcast_c forms");
    }

    /* Reductions against their int forms. */
    fill_ints(send, N, rank + 1);
    int reference[N];
    MPI_OK(MPI_Allreduce(send, reference, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    MPI_OK(MPI_Allreduce_c(send, recv, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(!memcmp(recv, reference, sizeof reference), "Allreduce_c");
    MPI_OK(MPI_Iallreduce_c(send, recv, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &request));
    MPI_OK(MPI_Wait(&request, MPI_STATUS_IGNORE));
    CHECK(!memcmp(recv, reference, sizeof reference), "Iallreduce_c");
    MPI_OK(MPI_Allreduce_init_c(send, recv, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &request));
    MPI_OK(MPI_Start(&request));
    MPI_OK(MPI_Wait(&request, MPI_STATUS_IGNORE));
    MPI_OK(MPI_Request_free(&request));
    CHECK(!memcmp(recv, reference, sizeof reference), "Allreduce_init_c");
    memset(recv, 0, N * sizeof(int));
    MPI_OK(MPI_Reduce_c(send, recv, N, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD));
    if (rank == 0) CHECK(!memcmp(recv, reference, sizeof reference), "Reduce_c");
    MPI_Op user_sum;
    MPI_OK(MPI_Op_create_c(sum_ints_c, 1, &user_sum));
    MPI_OK(MPI_Allreduce_c(send, recv, N, MPI_INT, user_sum, MPI_COMM_WORLD));
    CHECK(!memcmp(recv, reference, sizeof reference), "Allreduce_c with an Op_create_c op");
    int local[N];
    fill_ints(local, N, 1);
    fill_ints(recv, N, 2);
    MPI_OK(MPI_Reduce_local_c(local, recv, N, MPI_INT, user_sum));
    for (int i = 0; i < N; i++) CHECK(recv[i] == 3000 + 2 * i, "Reduce_local_c [%d] %d", i, recv[i]);
    MPI_OK(MPI_Op_free(&user_sum));
    int scan_ref[N], exscan_ref[N];
    MPI_OK(MPI_Scan(send, scan_ref, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    MPI_OK(MPI_Scan_c(send, recv, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(!memcmp(recv, scan_ref, sizeof scan_ref), "Scan_c");
    MPI_OK(MPI_Exscan(send, exscan_ref, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    MPI_OK(MPI_Exscan_c(send, recv, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    if (rank > 0) CHECK(!memcmp(recv, exscan_ref, sizeof exscan_ref), "Exscan_c");
    for (int i = 0; i < N * size; i++) send[i] = i + rank;
    int rs_ref[N];
    MPI_OK(MPI_Reduce_scatter_block(send, rs_ref, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    MPI_OK(MPI_Reduce_scatter_block_c(send, recv, N, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(!memcmp(recv, rs_ref, sizeof rs_ref), "Reduce_scatter_block_c");
    MPI_OK(MPI_Reduce_scatter_c(send, recv, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(!memcmp(recv, rs_ref, sizeof rs_ref), "Reduce_scatter_c");

    /* Gather/scatter families: the _c result equals the int one. */
    fill_ints(send, N * size, rank);
    MPI_OK(MPI_Allgather(send, N, MPI_INT, expect, N, MPI_INT, MPI_COMM_WORLD));
    memset(recv, 0, sizeof(int) * N * size);
    MPI_OK(MPI_Allgather_c(send, N, MPI_INT, recv, N, MPI_INT, MPI_COMM_WORLD));
    CHECK(!memcmp(recv, expect, sizeof(int) * N * g_size), "Allgather_c");
    memset(recv, 0, sizeof(int) * N * size);
    MPI_OK(MPI_Allgatherv_c(send, N, MPI_INT, recv, counts, displs, MPI_INT, MPI_COMM_WORLD));
    CHECK(!memcmp(recv, expect, sizeof(int) * N * g_size), "Allgatherv_c");
    memset(recv, 0, sizeof(int) * N * size);
    MPI_OK(MPI_Iallgatherv_c(send, N, MPI_INT, recv, counts, displs, MPI_INT, MPI_COMM_WORLD, &request));
    MPI_OK(MPI_Wait(&request, MPI_STATUS_IGNORE));
    CHECK(!memcmp(recv, expect, sizeof(int) * N * g_size), "Iallgatherv_c");
    memset(recv, 0, sizeof(int) * N * size);
    MPI_OK(MPI_Gather_c(send, N, MPI_INT, recv, N, MPI_INT, 0, MPI_COMM_WORLD));
    if (rank == 0) CHECK(!memcmp(recv, expect, sizeof(int) * N * g_size), "Gather_c");
    memset(recv, 0, sizeof(int) * N * size);
    MPI_OK(MPI_Gatherv_init_c(send, N, MPI_INT, recv, counts, displs, MPI_INT, 0, MPI_COMM_WORLD,
                              MPI_INFO_NULL, &request));
    MPI_OK(MPI_Start(&request));
    MPI_OK(MPI_Wait(&request, MPI_STATUS_IGNORE));
    MPI_OK(MPI_Request_free(&request));
    if (rank == 0) CHECK(!memcmp(recv, expect, sizeof(int) * N * g_size), "Gatherv_init_c");
    int scatter_ref[N];
    MPI_OK(MPI_Scatter(send, N, MPI_INT, scatter_ref, N, MPI_INT, 0, MPI_COMM_WORLD));
    MPI_OK(MPI_Scatter_c(send, N, MPI_INT, recv, N, MPI_INT, 0, MPI_COMM_WORLD));
    CHECK(!memcmp(recv, scatter_ref, sizeof scatter_ref), "Scatter_c");
    MPI_OK(MPI_Scatterv_c(send, counts, displs, MPI_INT, recv, N, MPI_INT, 0, MPI_COMM_WORLD));
    CHECK(!memcmp(recv, scatter_ref, sizeof scatter_ref), "Scatterv_c");
    MPI_OK(MPI_Alltoall(send, N, MPI_INT, expect, N, MPI_INT, MPI_COMM_WORLD));
    MPI_OK(MPI_Alltoall_c(send, N, MPI_INT, recv, N, MPI_INT, MPI_COMM_WORLD));
    CHECK(!memcmp(recv, expect, sizeof(int) * N * g_size), "Alltoall_c");
    memset(recv, 0, sizeof(int) * N * size);
    MPI_OK(MPI_Alltoallv_c(send, counts, displs, MPI_INT, recv, counts, displs, MPI_INT, MPI_COMM_WORLD));
    CHECK(!memcmp(recv, expect, sizeof(int) * N * g_size), "Alltoallv_c");
    memset(recv, 0, sizeof(int) * N * size);
    MPI_OK(MPI_Alltoallw_c(send, wcounts, wdispls, types, recv, wcounts, wdispls, types, MPI_COMM_WORLD));
    CHECK(!memcmp(recv, expect, sizeof(int) * N * g_size), "Alltoallw_c");
    memset(recv, 0, sizeof(int) * N * size);
    MPI_OK(MPI_Ialltoallv_c(send, counts, displs, MPI_INT, recv, counts, displs, MPI_INT, MPI_COMM_WORLD,
                            &request));
    MPI_OK(MPI_Wait(&request, MPI_STATUS_IGNORE));
    CHECK(!memcmp(recv, expect, sizeof(int) * N * g_size), "Ialltoallv_c");

    /* Neighbourhood collectives on a periodic ring. */
    MPI_Comm ring;
    int dims[1] = {g_size}, periods[1] = {1};
    MPI_OK(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring));
    int ring_ref[2 * N];
    fill_ints(send, N, rank);
    MPI_OK(MPI_Neighbor_allgather(send, N, MPI_INT, ring_ref, N, MPI_INT, ring));
    memset(recv, 0, sizeof(int) * 2 * N);
    MPI_OK(MPI_Neighbor_allgather_c(send, N, MPI_INT, recv, N, MPI_INT, ring));
    CHECK(!memcmp(recv, ring_ref, sizeof ring_ref), "Neighbor_allgather_c");
    memset(recv, 0, sizeof(int) * 2 * N);
    MPI_OK(MPI_Neighbor_allgatherv_c(send, N, MPI_INT, recv, counts, displs, MPI_INT, ring));
    CHECK(!memcmp(recv, ring_ref, sizeof ring_ref), "Neighbor_allgatherv_c");
    memset(recv, 0, sizeof(int) * 2 * N);
    MPI_OK(MPI_Neighbor_allgatherv_init_c(send, N, MPI_INT, recv, counts, displs, MPI_INT, ring,
                                          MPI_INFO_NULL, &request));
    MPI_OK(MPI_Start(&request));
    MPI_OK(MPI_Wait(&request, MPI_STATUS_IGNORE));
    MPI_OK(MPI_Request_free(&request));
    CHECK(!memcmp(recv, ring_ref, sizeof ring_ref), "Neighbor_allgatherv_init_c");
    fill_ints(send, 2 * N, rank);
    /* against the int v-form (MPICH 4.0.2's Neighbor_alltoall orders
     * duplicate neighbours differently from its Neighbor_alltoallv) */
    MPI_OK(MPI_Neighbor_alltoallv(send, int_counts, int_displs, MPI_INT, ring_ref, int_counts,
                                  int_displs, MPI_INT, ring));
    memset(recv, 0, sizeof(int) * 2 * N);
    MPI_OK(MPI_Neighbor_alltoallv_c(send, counts, displs, MPI_INT, recv, counts, displs, MPI_INT, ring));
    CHECK(!memcmp(recv, ring_ref, sizeof ring_ref), "Neighbor_alltoallv_c");
    memset(recv, 0, sizeof(int) * 2 * N);
    MPI_OK(MPI_Ineighbor_alltoallw_c(send, wcounts, wdispls, types, recv, wcounts, wdispls, types, ring,
                                     &request));
    MPI_OK(MPI_Wait(&request, MPI_STATUS_IGNORE));
    CHECK(!memcmp(recv, ring_ref, sizeof ring_ref), "Ineighbor_alltoallw_c");
    MPI_OK(MPI_Comm_free(&ring));
    free(send); free(recv); free(expect); free(counts); free(displs); free(int_counts);
    free(int_displs); free(types); free(wcounts); free(wdispls);
}

/* ---------------------------------------------------------------- datatypes */
static void same_type(MPI_Datatype a, MPI_Datatype b, const char *what) {
    MPI_Count size_a, size_b, lb_a, lb_b, extent_a, extent_b;
    MPI_OK(MPI_Type_size_c(a, &size_a));
    MPI_OK(MPI_Type_size_c(b, &size_b));
    MPI_OK(MPI_Type_get_extent_c(a, &lb_a, &extent_a));
    MPI_OK(MPI_Type_get_extent_c(b, &lb_b, &extent_b));
    CHECK(size_a == size_b && lb_a == lb_b && extent_a == extent_b,
          "%s: size %ld/%ld lb %ld/%ld extent %ld/%ld", what, (long)size_a, (long)size_b,
          (long)lb_a, (long)lb_b, (long)extent_a, (long)extent_b);
    /* The same data packed. */
    int source[64];
    fill_ints(source, 64, 5);
    char packed_a[512], packed_b[512];
    MPI_Count position_c = 0;
    int position = 0;
    MPI_Datatype committed[2] = {a, b};
    MPI_OK(MPI_Type_commit(&committed[0]));
    MPI_OK(MPI_Type_commit(&committed[1]));
    MPI_OK(MPI_Pack(source, 1, a, packed_a, sizeof packed_a, &position, MPI_COMM_WORLD));
    MPI_OK(MPI_Pack_c(source, 1, b, packed_b, sizeof packed_b, &position_c, MPI_COMM_WORLD));
    CHECK(position == position_c && !memcmp(packed_a, packed_b, (size_t)position),
          "%s: Pack_c differs from Pack", what);
    int unpacked[64] = {0};
    position_c = 0;
    MPI_OK(MPI_Unpack_c(packed_b, sizeof packed_b, &position_c, unpacked, 1, b, MPI_COMM_WORLD));
    CHECK(position_c == position, "%s: Unpack_c position", what);
}

static void test_datatype(void) {
    errors_return();
    MPI_Datatype a, b;
    int blocklengths[3] = {2, 1, 3}, displacements[3] = {0, 4, 9};
    MPI_Count blocklengths_c[3] = {2, 1, 3}, displacements_c[3] = {0, 4, 9};
    MPI_Aint bytes[3] = {0, 16, 36};

    MPI_OK(MPI_Type_contiguous(5, MPI_INT, &a));
    MPI_OK(MPI_Type_contiguous_c(5, MPI_INT, &b));
    same_type(a, b, "contiguous");
    MPI_OK(MPI_Type_free(&a)); MPI_OK(MPI_Type_free(&b));
    MPI_OK(MPI_Type_vector(3, 2, 4, MPI_INT, &a));
    MPI_OK(MPI_Type_vector_c(3, 2, 4, MPI_INT, &b));
    same_type(a, b, "vector");
    /* envelope and contents: the _c constructor's counts are large counts */
    MPI_Count ni, na, nc, nd;
    int combiner, ints[8];
    MPI_Count large[8];
    MPI_Aint addresses[8];
    MPI_Datatype constituents[2];
    MPI_OK(MPI_Type_get_envelope_c(b, &ni, &na, &nc, &nd, &combiner));
    CHECK(combiner == MPI_COMBINER_VECTOR && ni == 0 && na == 0 && nc == 3 && nd == 1,
          "vector_c envelope %ld %ld %ld %ld %d", (long)ni, (long)na, (long)nc, (long)nd, combiner);
    MPI_OK(MPI_Type_get_contents_c(b, 8, 8, 8, 2, ints, addresses, large, constituents));
    CHECK(large[0] == 3 && large[1] == 2 && large[2] == 4 && constituents[0] == MPI_INT,
          "vector_c contents");
    MPI_OK(MPI_Type_get_envelope_c(a, &ni, &na, &nc, &nd, &combiner));
    CHECK(ni == 3 && nc == 0 && combiner == MPI_COMBINER_VECTOR, "vector envelope via _c");
    int ni_int, na_int, nd_int;
    /* the int form cannot give large counts back: an error (MPI_ERR_TYPE
     * here, MPI_ERR_OTHER in MPICH 4.0.2) */
    int envelope_code = MPI_Type_get_envelope(b, &ni_int, &na_int, &nd_int, &combiner), envelope_class;
    MPI_OK(MPI_Error_class(envelope_code, &envelope_class));
    CHECK(envelope_class == MPI_ERR_TYPE || envelope_class == MPI_ERR_OTHER,
          "int Type_get_envelope of a _c type: class %d", envelope_class);
    MPI_OK(MPI_Type_free(&a)); MPI_OK(MPI_Type_free(&b));
    MPI_OK(MPI_Type_create_hvector(3, 2, 20, MPI_INT, &a));
    MPI_OK(MPI_Type_create_hvector_c(3, 2, 20, MPI_INT, &b));
    same_type(a, b, "hvector");
    /* MPI-4.0 5.1.13: a _c constructor's byte strides and displacements
     * are large counts too */
    MPI_OK(MPI_Type_get_envelope_c(b, &ni, &na, &nc, &nd, &combiner));
    CHECK(combiner == MPI_COMBINER_HVECTOR && ni == 0 && na == 0 && nc == 3 && nd == 1,
          "hvector_c envelope %ld %ld %ld %ld", (long)ni, (long)na, (long)nc, (long)nd);
    MPI_OK(MPI_Type_get_contents_c(b, 8, 8, 8, 2, ints, addresses, large, constituents));
    CHECK(large[0] == 3 && large[1] == 2 && large[2] == 20, "hvector_c contents");
    MPI_OK(MPI_Type_free(&a)); MPI_OK(MPI_Type_free(&b));
    MPI_OK(MPI_Type_indexed(3, blocklengths, displacements, MPI_INT, &a));
    MPI_OK(MPI_Type_indexed_c(3, blocklengths_c, displacements_c, MPI_INT, &b));
    same_type(a, b, "indexed");
    MPI_OK(MPI_Type_free(&a)); MPI_OK(MPI_Type_free(&b));
    MPI_OK(MPI_Type_create_hindexed(3, blocklengths, bytes, MPI_INT, &a));
    MPI_OK(MPI_Type_create_hindexed_c(3, blocklengths_c, bytes, MPI_INT, &b));
    same_type(a, b, "hindexed");
    MPI_OK(MPI_Type_free(&a)); MPI_OK(MPI_Type_free(&b));
    MPI_OK(MPI_Type_create_indexed_block(3, 2, displacements, MPI_INT, &a));
    MPI_OK(MPI_Type_create_indexed_block_c(3, 2, displacements_c, MPI_INT, &b));
    same_type(a, b, "indexed_block");
    MPI_OK(MPI_Type_free(&a)); MPI_OK(MPI_Type_free(&b));
    MPI_OK(MPI_Type_create_hindexed_block(3, 2, bytes, MPI_INT, &a));
    MPI_OK(MPI_Type_create_hindexed_block_c(3, 2, bytes, MPI_INT, &b));
    same_type(a, b, "hindexed_block");
    MPI_OK(MPI_Type_free(&a)); MPI_OK(MPI_Type_free(&b));
    MPI_Datatype struct_types[3] = {MPI_INT, MPI_INT, MPI_INT};
    MPI_OK(MPI_Type_create_struct(3, blocklengths, bytes, struct_types, &a));
    MPI_OK(MPI_Type_create_struct_c(3, blocklengths_c, bytes, struct_types, &b));
    same_type(a, b, "struct");
    MPI_OK(MPI_Type_get_envelope_c(b, &ni, &na, &nc, &nd, &combiner));
    CHECK(combiner == MPI_COMBINER_STRUCT && ni == 0 && na == 0 && nc == 7 && nd == 3,
          "struct_c envelope %ld %ld %ld %ld", (long)ni, (long)na, (long)nc, (long)nd);
    MPI_Datatype struct_constituents[3];
    MPI_OK(MPI_Type_get_contents_c(b, 8, 8, 8, 3, ints, addresses, large, struct_constituents));
    CHECK(large[0] == 3 && large[1] == 2 && large[4] == 0 && large[5] == 16 && large[6] == 36,
          "struct_c contents");
    MPI_OK(MPI_Type_free(&a)); MPI_OK(MPI_Type_free(&b));
    MPI_OK(MPI_Type_create_resized(MPI_INT, -4, 16, &a));
    MPI_OK(MPI_Type_create_resized_c(MPI_INT, -4, 16, &b));
    same_type(a, b, "resized");
    MPI_OK(MPI_Type_free(&a)); MPI_OK(MPI_Type_free(&b));
    int sizes[2] = {4, 6}, subsizes[2] = {2, 3}, starts[2] = {1, 2};
    MPI_Count sizes_c[2] = {4, 6}, subsizes_c[2] = {2, 3}, starts_c[2] = {1, 2};
    MPI_OK(MPI_Type_create_subarray(2, sizes, subsizes, starts, MPI_ORDER_C, MPI_INT, &a));
    MPI_OK(MPI_Type_create_subarray_c(2, sizes_c, subsizes_c, starts_c, MPI_ORDER_C, MPI_INT, &b));
    same_type(a, b, "subarray");
    MPI_OK(MPI_Type_free(&a)); MPI_OK(MPI_Type_free(&b));
    int gsizes[2] = {8, 6}, distribs[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC};
    int dargs[2] = {MPI_DISTRIBUTE_DFLT_DARG, 2}, psizes[2] = {2, 2};
    MPI_Count gsizes_c[2] = {8, 6};
    MPI_OK(MPI_Type_create_darray(4, 3, 2, gsizes, distribs, dargs, psizes, MPI_ORDER_C, MPI_INT, &a));
    MPI_OK(MPI_Type_create_darray_c(4, 3, 2, gsizes_c, distribs, dargs, psizes, MPI_ORDER_C, MPI_INT, &b));
    same_type(a, b, "darray");
    MPI_OK(MPI_Type_free(&a)); MPI_OK(MPI_Type_free(&b));

    /* Queries of predefined types against the int forms. */
    int size_int;
    MPI_Count size_c, lb_c, extent_c, true_lb_c, true_extent_c;
    MPI_Aint lb, extent, true_lb, true_extent;
    MPI_OK(MPI_Type_size(MPI_DOUBLE_INT, &size_int));
    MPI_OK(MPI_Type_size_c(MPI_DOUBLE_INT, &size_c));
    MPI_OK(MPI_Type_get_extent(MPI_DOUBLE_INT, &lb, &extent));
    MPI_OK(MPI_Type_get_extent_c(MPI_DOUBLE_INT, &lb_c, &extent_c));
    MPI_OK(MPI_Type_get_true_extent(MPI_DOUBLE_INT, &true_lb, &true_extent));
    MPI_OK(MPI_Type_get_true_extent_c(MPI_DOUBLE_INT, &true_lb_c, &true_extent_c));
    CHECK(size_c == size_int && lb_c == lb && extent_c == extent && true_lb_c == true_lb &&
          true_extent_c == true_extent, "predefined queries _c");

    /* Pack_external(_size)_c against the int forms. */
    double values[4] = {1.5, -2.25, 3.0, 1e300}, back[4] = {0};
    char external_a[64], external_b[64];
    MPI_Aint external_size, position = 0;
    MPI_Count external_size_c, position_c = 0;
    MPI_OK(MPI_Pack_external_size("external32", 4, MPI_DOUBLE, &external_size));
    MPI_OK(MPI_Pack_external_size_c("external32", 4, MPI_DOUBLE, &external_size_c));
    CHECK(external_size == 32 && external_size_c == 32, "Pack_external_size_c");
    MPI_OK(MPI_Pack_external("external32", values, 4, MPI_DOUBLE, external_a, 64, &position));
    MPI_OK(MPI_Pack_external_c("external32", values, 4, MPI_DOUBLE, external_b, 64, &position_c));
    CHECK(position == 32 && position_c == 32 && !memcmp(external_a, external_b, 32), "Pack_external_c");
    position_c = 0;
    MPI_OK(MPI_Unpack_external_c("external32", external_b, 64, &position_c, back, 4, MPI_DOUBLE));
    CHECK(!memcmp(back, values, sizeof values), "Unpack_external_c");

    /* Counts above INT_MAX: 64-bit sizes and extents, no memory behind them. */
    const MPI_Count three_billion = 3000000000LL;
    MPI_Datatype huge;
    MPI_OK(MPI_Type_contiguous_c(three_billion, MPI_INT, &huge));
    MPI_OK(MPI_Type_commit(&huge));
    MPI_OK(MPI_Type_size_c(huge, &size_c));
    CHECK(size_c == 4 * three_billion, "contiguous_c size %ld", (long)size_c);
    MPI_OK(MPI_Type_size(huge, &size_int));
    CHECK(size_int == MPI_UNDEFINED, "int Type_size of a huge type: %d", size_int);
    MPI_OK(MPI_Type_get_extent_c(huge, &lb_c, &extent_c));
    CHECK(lb_c == 0 && extent_c == 4 * three_billion, "contiguous_c extent %ld", (long)extent_c);
    MPI_OK(MPI_Pack_size_c(1, huge, MPI_COMM_WORLD, &size_c));
    CHECK(size_c >= 4 * three_billion, "Pack_size_c %ld", (long)size_c);
    MPI_OK(MPI_Pack_size(1, huge, MPI_COMM_WORLD, &size_int));
    CHECK(size_int == MPI_UNDEFINED, "int Pack_size of a huge type: %d", size_int);
    MPI_OK(MPI_Pack_size_c(three_billion, MPI_BYTE, MPI_COMM_WORLD, &size_c));
    CHECK(size_c >= three_billion, "Pack_size_c of 3e9 bytes %ld", (long)size_c);
    MPI_OK(MPI_Type_get_envelope_c(huge, &ni, &na, &nc, &nd, &combiner));
    MPI_OK(MPI_Type_get_contents_c(huge, 8, 8, 8, 2, ints, addresses, large, constituents));
    CHECK(nc == 1 && large[0] == three_billion, "contiguous_c large count %ld", (long)large[0]);
    MPI_OK(MPI_Type_free(&huge));
    /* two blocks of 3e9 bytes 3e9 + 10 apart */
    MPI_OK(MPI_Type_vector_c(2, three_billion, three_billion + 10, MPI_BYTE, &huge));
    MPI_OK(MPI_Type_size_c(huge, &size_c));
    MPI_OK(MPI_Type_get_extent_c(huge, &lb_c, &extent_c));
    MPI_OK(MPI_Type_get_true_extent_c(huge, &true_lb_c, &true_extent_c));
    CHECK(size_c == 2 * three_billion && extent_c == 2 * three_billion + 10 &&
          true_extent_c == extent_c, "vector_c of huge blocks: size %ld extent %ld",
          (long)size_c, (long)extent_c);
    MPI_OK(MPI_Type_free(&huge));
    /* 3e9 touching blocks: one run */
    MPI_OK(MPI_Type_vector_c(three_billion, 1, 1, MPI_DOUBLE, &huge));
    MPI_OK(MPI_Type_size_c(huge, &size_c));
    CHECK(size_c == 8 * three_billion, "dense vector_c size %ld", (long)size_c);
    MPI_OK(MPI_Type_free(&huge));
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

/* ---------------------------------------------------------------- negative counts */
static void test_negative(void) {
    errors_return();
    int buffer[4] = {0};
    MPI_Datatype type;
    MPI_Request request;
    MPI_Count size_c;
    EXPECT_CLASS(MPI_Send_c(buffer, -1, MPI_INT, next_rank(), 0, MPI_COMM_WORLD), MPI_ERR_COUNT);
    EXPECT_CLASS(MPI_Isend_c(buffer, -3000000000LL, MPI_INT, next_rank(), 0, MPI_COMM_WORLD, &request),
                 MPI_ERR_COUNT);
    EXPECT_CLASS(MPI_Recv_c(buffer, -1, MPI_INT, prev_rank(), 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                 MPI_ERR_COUNT);
    EXPECT_CLASS(MPI_Bcast_c(buffer, -5, MPI_INT, 0, MPI_COMM_WORLD), MPI_ERR_COUNT);
    EXPECT_CLASS(MPI_Allreduce_c(buffer, buffer + 2, -1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), MPI_ERR_COUNT);
    EXPECT_CLASS(MPI_Type_contiguous_c(-1, MPI_INT, &type), MPI_ERR_COUNT);
    EXPECT_CLASS(MPI_Type_vector_c(-2, 1, 1, MPI_INT, &type), MPI_ERR_COUNT);
    EXPECT_CLASS(MPI_Pack_size_c(-1, MPI_INT, MPI_COMM_WORLD, &size_c), MPI_ERR_COUNT);
    EXPECT_CLASS(MPI_Send(buffer, -1, MPI_INT, next_rank(), 0, MPI_COMM_WORLD), MPI_ERR_COUNT);
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

/* ---------------------------------------------------------------- MPI-IO */
static void test_io(void) {
    MPI_File file;
    int data[N], back[N];
    MPI_Status status;
    MPI_Count count_c;
    MPI_Request request;
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, "large_count.dat", MPI_MODE_CREATE | MPI_MODE_RDWR,
                         MPI_INFO_NULL, &file));
    MPI_Offset offset = (MPI_Offset)g_rank * N * (MPI_Offset)sizeof(int);
    fill_ints(data, N, g_rank + 40);
    MPI_OK(MPI_File_write_at_c(file, offset, data, N, MPI_INT, &status));
    MPI_OK(MPI_Get_count_c(&status, MPI_INT, &count_c));
    CHECK(count_c == N, "write_at_c count %ld", (long)count_c);
    MPI_OK(MPI_File_sync(file));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_File_sync(file));
    int other = next_rank();
    MPI_Offset other_offset = (MPI_Offset)other * N * (MPI_Offset)sizeof(int);
    memset(back, 0, sizeof back);
    MPI_OK(MPI_File_read_at_c(file, other_offset, back, N, MPI_INT, &status));
    check_ints(back, N, other + 40, "read_at_c");
    MPI_OK(MPI_Get_count_c(&status, MPI_INT, &count_c));
    CHECK(count_c == N, "read_at_c count %ld", (long)count_c);
    memset(back, 0, sizeof back);
    MPI_OK(MPI_File_read_at_all_c(file, other_offset, back, N, MPI_INT, &status));
    check_ints(back, N, other + 40, "read_at_all_c");
    memset(back, 0, sizeof back);
    MPI_OK(MPI_File_iread_at_c(file, other_offset, back, N, MPI_INT, &request));
    MPI_OK(MPI_Wait(&request, &status));
    check_ints(back, N, other + 40, "iread_at_c");
    MPI_Count extent_c;
    MPI_Aint extent;
    MPI_OK(MPI_File_get_type_extent(file, MPI_DOUBLE_INT, &extent));
    MPI_OK(MPI_File_get_type_extent_c(file, MPI_DOUBLE_INT, &extent_c));
    CHECK(extent == extent_c, "File_get_type_extent_c");
    MPI_OK(MPI_File_close(&file));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (g_rank == 0) MPI_OK(MPI_File_delete("large_count.dat", MPI_INFO_NULL));
}

/* ---------------------------------------------------------------- above 2 GiB */
/* An order-dependent checksum of every byte, 8 at a time (the length is a
 * multiple of 8). */
static unsigned long long checksum(const unsigned char *bytes, MPI_Count length) {
    unsigned long long sum = 0, word;
    for (MPI_Count i = 0; i < length; i += 8) {
        memcpy(&word, bytes + i, 8);
        sum = sum * 31 + word;
    }
    return sum;
}

static void check_big(const unsigned char *buffer, unsigned seed, unsigned long long expected,
                      const char *what) {
    /* sampled offsets around every 2^31 boundary and the ends, then everything */
    MPI_Count samples[] = {0, 1, ((MPI_Count)1 << 31) - 1, (MPI_Count)1 << 31,
                           ((MPI_Count)1 << 31) + 1, BIG_BYTES - 1};
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++)
        CHECK(buffer[samples[i]] == pat(seed, (size_t)samples[i]), "%s: byte %ld", what,
              (long)samples[i]);
    CHECK(checksum(buffer, BIG_BYTES) == expected, "%s: checksum differs", what);
}

static void test_big(void) {
    CHECK(g_size == 2, "big needs 2 ranks");
    unsigned char *buffer = malloc((size_t)BIG_BYTES);
    CHECK(buffer != NULL, "no memory for %ld bytes", (long)BIG_BYTES);
    unsigned long long expected;
    /* 1. Send_c/Recv_c of MPI_BYTE, rank 0 -> rank 1 */
    fill_pat(buffer, (size_t)BIG_BYTES, 11);
    expected = checksum(buffer, BIG_BYTES);
    if (g_rank == 0) {
        MPI_OK(MPI_Send_c(buffer, BIG_BYTES, MPI_BYTE, 1, 0, MPI_COMM_WORLD));
    } else {
        memset(buffer, 0, (size_t)BIG_BYTES);
        MPI_Status status;
        MPI_OK(MPI_Recv_c(buffer, BIG_BYTES, MPI_BYTE, 0, 0, MPI_COMM_WORLD, &status));
        check_big(buffer, 11, expected, "Send_c/Recv_c");
        int count = 0;
        MPI_Count count_c = 0;
        MPI_OK(MPI_Get_count(&status, MPI_BYTE, &count));
        CHECK(count == MPI_UNDEFINED, "int Get_count of a >2 GiB message: %d", count);
        MPI_OK(MPI_Get_count_c(&status, MPI_BYTE, &count_c));
        CHECK(count_c == BIG_BYTES, "Get_count_c %ld", (long)count_c);
        MPI_OK(MPI_Get_elements_c(&status, MPI_BYTE, &count_c));
        CHECK(count_c == BIG_BYTES, "Get_elements_c %ld", (long)count_c);
    }
    /* 2. Bcast_c from rank 1 with another pattern */
    if (g_rank == 1) fill_pat(buffer, (size_t)BIG_BYTES, 12);
    else memset(buffer, 0, (size_t)BIG_BYTES);
    MPI_OK(MPI_Bcast_c(buffer, BIG_BYTES, MPI_BYTE, 1, MPI_COMM_WORLD));
    unsigned long long mine = checksum(buffer, BIG_BYTES), theirs = 0;
    MPI_OK(MPI_Sendrecv(&mine, 1, MPI_UNSIGNED_LONG_LONG, 1 - g_rank, 1, &theirs, 1,
                        MPI_UNSIGNED_LONG_LONG, 1 - g_rank, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(mine == theirs, "Bcast_c: checksums differ between the ranks");
    if (g_rank == 0) {
        for (MPI_Count i = 0; i < BIG_BYTES; i += 4099)
            CHECK(buffer[i] == pat(12, (size_t)i), "Bcast_c: byte %ld", (long)i);
        check_big(buffer, 12, mine, "Bcast_c");
    }
    free(buffer);
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    if (argc >= 2 && !strcmp(argv[1], "big")) {
        test_big();
        return test_finish();
    }
    if (selected(argc, argv, "p2p")) test_p2p();
    if (selected(argc, argv, "coll")) test_coll();
    if (selected(argc, argv, "datatype")) test_datatype();
    if (selected(argc, argv, "negative")) test_negative();
    if (selected(argc, argv, "io")) test_io();
    return test_finish();
}
