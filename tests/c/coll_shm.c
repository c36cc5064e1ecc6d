/* coll_shm: the blocking collectives of the shared-memory fast path
 * (barrier, bcast, reduce, allreduce, allgather, alltoall, scan, exscan,
 * gather, scatter, reduce_scatter_block and equal-count reduce_scatter)
 * against references every rank computes itself, for many sizes (below,
 * at and above the fast path's limits), types, ops (a non-commutative user
 * op among them), roots and MPI_IN_PLACE, on MPI_COMM_WORLD and on split
 * sub-communicators; floating-point reductions must be bit-identical on
 * every rank; blocking collectives interleave with nonblocking ones and
 * with point-to-point traffic; a slow rank makes the others run ahead
 * through the slots.
 *
 * Modes (arguments): "all" (the default) runs the checks above.
 * "kill": the last rank kills itself (SIGKILL) while the others are in a
 * loop of allreduces on MPI_COMM_WORLD; every survivor must get
 * MPIX_ERR_PROC_FAILED, then run collectives on a communicator of the
 * survivors (split before the death) with correct results, and print
 * "rank R: world proc_failed, survivors ok". Run it under
 * --failure-policy continue. "kill inject": the same, but the last rank
 * does not kill itself: mpiexec's --inject kill:RANK@sends=N must (each
 * fast-path publication counts as a send). */
#include <signal.h>
#include <time.h>

#include "common.h"

#define MAX_COUNT 40000 /* ints: 160000 bytes, above every fast-path limit */

static const int counts[] = {0, 1, 2, 3, 7, 64, 255, 1000, 1024, 4096, 4097, 16384, 20000, MAX_COUNT};
#define NCOUNTS ((int)(sizeof counts / sizeof counts[0]))

/* The value rank `r` contributes at index `i` in round `round`. */
static int value(int r, int i, int round) { return (r + 1) * 1000 + i * 7 + round * 13; }

/* A non-commutative, associative op: composition of affine maps x -> a*x + b
 * (mod 2^32): (f op g)(x) = f(g(x)). */
typedef struct { uint32_t a, b; } affine_t;
static void affine_compose(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)type;
    affine_t *f = in, *g = inout;
    for (int i = 0; i < *len; i++) {
        affine_t r = {f[i].a * g[i].a, f[i].a * g[i].b + f[i].b};
        g[i] = r;
    }
}
static affine_t affine_of(int r, int i) {
    affine_t f = {(uint32_t)(2 * r + 3 + i), (uint32_t)(r * 5 + i + 1)};
    return f;
}

static double magnitude(double x) { return x < 0 ? -x : x; }

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int *ibuf(size_t n) {
    int *p = malloc((n ? n : 1) * sizeof(int));
    if (!p) FAIL("out of memory");
    return p;
}

/* Barrier: nobody leaves before the last one arrives (rank `late` enters
 * 50 ms late; everyone checks it left after the late rank's arrival). */
static void check_barrier(MPI_Comm comm, int rank, int size) {
    for (int late = 0; late < size; late++) {
        double arrived = 0;
        if (rank == late) {
            usleep(50000);
            arrived = now_seconds();
        }
        MPI_OK(MPI_Barrier(comm));
        double left = now_seconds();
        MPI_OK(MPI_Bcast(&arrived, 1, MPI_DOUBLE, late, comm));
        CHECK(left >= arrived, "left the barrier %.6f s before rank %d arrived", arrived - left, late);
    }
    for (int i = 0; i < 200; i++) MPI_OK(MPI_Barrier(comm));
}

static void check_bcast(MPI_Comm comm, int rank, int size, int round) {
    int *buf = ibuf(MAX_COUNT);
    for (int c = 0; c < NCOUNTS; c++) {
        int n = counts[c];
        for (int root = 0; root < size; root++) {
            for (int i = 0; i < n; i++) buf[i] = rank == root ? value(root, i, round) : -1;
            MPI_OK(MPI_Bcast(buf, n, MPI_INT, root, comm));
            for (int i = 0; i < n; i++)
                CHECK(buf[i] == value(root, i, round), "bcast n=%d root=%d [%d]=%d", n, root, i, buf[i]);
        }
    }
    /* Bytes, odd sizes. */
    char bytes[5000];
    for (int n = 1; n <= 5000; n = n * 3 + 1) {
        int root = n % size;
        for (int i = 0; i < n; i++) bytes[i] = rank == root ? (char)(i * 31 + n) : 0;
        MPI_OK(MPI_Bcast(bytes, n, MPI_CHAR, root, comm));
        for (int i = 0; i < n; i++) CHECK(bytes[i] == (char)(i * 31 + n), "byte bcast n=%d [%d]", n, i);
    }
    free(buf);
}

static void check_reductions(MPI_Comm comm, int rank, int size, int round, MPI_Op affine) {
    int *in = ibuf(MAX_COUNT), *out = ibuf(MAX_COUNT);
    for (int c = 0; c < NCOUNTS; c++) {
        int n = counts[c];
        /* Allreduce SUM / MAX, out of place and in place. */
        for (int i = 0; i < n; i++) in[i] = value(rank, i, round);
        MPI_OK(MPI_Allreduce(in, out, n, MPI_INT, MPI_SUM, comm));
        for (int i = 0; i < n; i++) {
            long expected = 0;
            for (int r = 0; r < size; r++) expected += value(r, i, round);
            CHECK(out[i] == (int)expected, "allreduce sum n=%d [%d]=%d expected %ld", n, i, out[i], expected);
        }
        for (int i = 0; i < n; i++) out[i] = value(rank, i, round) * ((rank % 2) ? -1 : 1);
        MPI_OK(MPI_Allreduce(MPI_IN_PLACE, out, n, MPI_INT, MPI_MAX, comm));
        for (int i = 0; i < n; i++) {
            int expected = value(0, i, round);
            for (int r = 1; r < size; r++) {
                int v = value(r, i, round) * ((r % 2) ? -1 : 1);
                if (v > expected) expected = v;
            }
            CHECK(out[i] == expected, "allreduce in-place max n=%d [%d]=%d expected %d", n, i, out[i], expected);
        }
        /* Reduce at every root (PROD of small values, in place at the root every other round). */
        for (int root = 0; root < size; root++) {
            for (int i = 0; i < n; i++) in[i] = (rank + i) % 3 + 1;
            int in_place = rank == root && (root + round) % 2;
            if (in_place) memcpy(out, in, n * sizeof(int));
            else for (int i = 0; i < n; i++) out[i] = -7;
            MPI_OK(MPI_Reduce(in_place ? MPI_IN_PLACE : in, out, n, MPI_INT, MPI_PROD, root, comm));
            if (rank == root) {
                for (int i = 0; i < n; i++) {
                    int expected = 1;
                    for (int r = 0; r < size; r++) expected *= (r + i) % 3 + 1;
                    CHECK(out[i] == expected, "reduce prod n=%d root=%d [%d]=%d expected %d", n, root, i, out[i], expected);
                }
            } else if (!in_place) {
                for (int i = 0; i < n; i++) CHECK(out[i] == -7, "reduce wrote a non-root's receive buffer");
            }
        }
        /* Scan and exscan SUM, out of place and in place. */
        for (int i = 0; i < n; i++) in[i] = value(rank, i, round);
        int in_place = round % 2;
        if (in_place) memcpy(out, in, n * sizeof(int));
        MPI_OK(MPI_Scan(in_place ? MPI_IN_PLACE : in, out, n, MPI_INT, MPI_SUM, comm));
        for (int i = 0; i < n; i++) {
            long expected = 0;
            for (int r = 0; r <= rank; r++) expected += value(r, i, round);
            CHECK(out[i] == (int)expected, "scan n=%d [%d]=%d expected %ld", n, i, out[i], expected);
        }
        if (in_place) memcpy(out, in, n * sizeof(int));
        else for (int i = 0; i < n; i++) out[i] = -5;
        MPI_OK(MPI_Exscan(in_place ? MPI_IN_PLACE : in, out, n, MPI_INT, MPI_SUM, comm));
        if (rank > 0) {
            for (int i = 0; i < n; i++) {
                long expected = 0;
                for (int r = 0; r < rank; r++) expected += value(r, i, round);
                CHECK(out[i] == (int)expected, "exscan n=%d [%d]=%d expected %ld", n, i, out[i], expected);
            }
        }
    }
    /* Reduce_scatter_block SUM, out of place and in place, and
     * Reduce_scatter with equal counts: block b of the result is the sum of
     * every rank's block b. Blocks of n/size ints (the input is n). */
    for (int c = 0; c < NCOUNTS; c++) {
        int block = counts[c] / size, n = block * size;
        for (int i = 0; i < n; i++) in[i] = value(rank, i, round);
        int in_place = (round + c) % 2;
        if (in_place) memcpy(out, in, n * sizeof(int));
        else for (int i = 0; i < n; i++) out[i] = -9;
        MPI_OK(MPI_Reduce_scatter_block(in_place ? MPI_IN_PLACE : in, out, block, MPI_INT, MPI_SUM, comm));
        for (int i = 0; i < block; i++) {
            long expected = 0;
            for (int r = 0; r < size; r++) expected += value(r, rank * block + i, round);
            CHECK(out[i] == (int)expected, "reduce_scatter_block n=%d [%d]=%d expected %ld", n, i, out[i], expected);
        }
        if (!in_place) for (int i = block; i < n; i++) CHECK(out[i] == -9, "reduce_scatter_block wrote past its block");
        int *equal = malloc(size * sizeof(int));
        for (int r = 0; r < size; r++) equal[r] = block;
        MPI_OK(MPI_Reduce_scatter(in, out, equal, MPI_INT, MPI_MAX, comm));
        for (int i = 0; i < block; i++) {
            int expected = value(size - 1, rank * block + i, round);
            CHECK(out[i] == expected, "reduce_scatter max n=%d [%d]=%d expected %d", n, i, out[i], expected);
        }
        free(equal);
    }
    /* The non-commutative op: rank order, in allreduce, reduce, scan and
     * reduce_scatter_block. */
    for (int n = 1; n <= 4096; n *= 8) {
        affine_t *f = malloc(n * sizeof *f), *g = malloc(n * sizeof *g), *ref = malloc(n * sizeof *ref);
        for (int i = 0; i < n; i++) f[i] = affine_of(rank, i);
        MPI_Datatype pair;
        MPI_OK(MPI_Type_contiguous(2, MPI_UINT32_T, &pair));
        MPI_OK(MPI_Type_commit(&pair));
        for (int kind = 0; kind < 4; kind++) {
            int upto = kind == 2 ? rank : size - 1, root = round % size;
            /* reduce_scatter_block: blocks of n/size pairs, block `rank` here. */
            int block = n / size, first = kind == 3 ? rank * block : 0, m = kind == 3 ? block : n;
            if (kind == 0) MPI_OK(MPI_Allreduce(f, g, n, pair, affine, comm));
            if (kind == 1) MPI_OK(MPI_Reduce(f, g, n, pair, affine, root, comm));
            if (kind == 2) MPI_OK(MPI_Scan(f, g, n, pair, affine, comm));
            if (kind == 3) MPI_OK(MPI_Reduce_scatter_block(f, g, block, pair, affine, comm));
            if (kind == 1 && rank != root) continue;
            for (int j = 0; j < m; j++) {
                int i = first + j;
                ref[i] = affine_of(0, i);
                for (int r = 1; r <= upto; r++) {
                    affine_t next = affine_of(r, i);
                    affine_t composed = {ref[i].a * next.a, ref[i].a * next.b + ref[i].b};
                    ref[i] = composed;
                }
                CHECK(g[j].a == ref[i].a && g[j].b == ref[i].b, "non-commutative kind %d n=%d [%d]: (%u,%u) expected (%u,%u)",
                      kind, n, i, g[j].a, g[j].b, ref[i].a, ref[i].b);
            }
        }
        MPI_OK(MPI_Type_free(&pair));
        free(f), free(g), free(ref);
    }
    /* Doubles whose sum depends on the order: close to the exact sum and
     * bit-identical on every rank. */
    for (int n = 1; n <= 2048; n *= 4) {
        double *d = malloc(n * sizeof *d), *sum = malloc(n * sizeof *sum), *theirs = malloc(n * sizeof *theirs);
        for (int i = 0; i < n; i++) d[i] = (rank % 2 ? 1e16 : 1.0) * (rank + 1) + i * 0.1 + rank * 1e-3;
        MPI_OK(MPI_Allreduce(d, sum, n, MPI_DOUBLE, MPI_SUM, comm));
        for (int i = 0; i < n; i++) {
            double exact = 0;
            for (int r = 0; r < size; r++) exact += (r % 2 ? 1e16 : 1.0) * (r + 1) + i * 0.1 + r * 1e-3;
            CHECK(magnitude(sum[i] - exact) <= 1e-12 * magnitude(exact) + 64, "double sum n=%d [%d]=%g expected %g", n, i, sum[i], exact);
        }
        /* Every rank's result, bit for bit, against rank 0's (point-to-point). */
        if (rank == 0) {
            for (int r = 1; r < size; r++) {
                MPI_OK(MPI_Recv(theirs, n, MPI_DOUBLE, r, 77, comm, MPI_STATUS_IGNORE));
                CHECK(memcmp(theirs, sum, n * sizeof(double)) == 0, "rank %d's double allreduce differs from rank 0's (n=%d)", r, n);
            }
        } else {
            MPI_OK(MPI_Send(sum, n, MPI_DOUBLE, 0, 77, comm));
        }
        free(d), free(sum), free(theirs);
    }
    free(in), free(out);
}

static void check_gathers(MPI_Comm comm, int rank, int size, int round) {
    int *send = ibuf((size_t)MAX_COUNT), *recv = ibuf((size_t)MAX_COUNT * size);
    for (int c = 0; c < NCOUNTS; c++) {
        int n = counts[c];
        if ((long)n * size > MAX_COUNT * 2) continue;
        free(send), free(recv);
        send = ibuf((size_t)n * size), recv = ibuf((size_t)n * size);
        /* Allgather, out of place then in place. */
        for (int i = 0; i < n; i++) send[i] = value(rank, i, round);
        for (int i = 0; i < n * size; i++) recv[i] = -1;
        MPI_OK(MPI_Allgather(send, n, MPI_INT, recv, n, MPI_INT, comm));
        for (int r = 0; r < size; r++)
            for (int i = 0; i < n; i++)
                CHECK(recv[r * n + i] == value(r, i, round), "allgather n=%d from %d [%d]=%d", n, r, i, recv[r * n + i]);
        for (int i = 0; i < n * size; i++) recv[i] = i / (n ? n : 1) == rank ? value(rank, i % n, round + 1) : -1;
        MPI_OK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, n, MPI_INT, comm));
        for (int r = 0; r < size; r++)
            for (int i = 0; i < n; i++)
                CHECK(recv[r * n + i] == value(r, i, round + 1), "allgather in place n=%d from %d [%d]", n, r, i);
        /* Gather and Scatter at every root, out of place then in place. */
        for (int root = 0; root < size; root++) {
            for (int i = 0; i < n; i++) send[i] = value(rank, i, round + root);
            for (int i = 0; i < n * size; i++) recv[i] = -1;
            MPI_OK(MPI_Gather(send, n, MPI_INT, recv, n, MPI_INT, root, comm));
            if (rank == root)
                for (int r = 0; r < size; r++)
                    for (int i = 0; i < n; i++)
                        CHECK(recv[r * n + i] == value(r, i, round + root), "gather n=%d root %d from %d [%d]=%d", n, root, r, i, recv[r * n + i]);
            if (rank == root) {
                for (int i = 0; i < n * size; i++) recv[i] = i / (n ? n : 1) == rank ? value(rank, i % n, round + 1) : -1;
                MPI_OK(MPI_Gather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, n, MPI_INT, root, comm));
                for (int r = 0; r < size; r++)
                    for (int i = 0; i < n; i++)
                        CHECK(recv[r * n + i] == value(r, i, r == root ? round + 1 : round + root + 2), "gather in place n=%d root %d from %d [%d]", n, root, r, i);
            } else {
                for (int i = 0; i < n; i++) send[i] = value(rank, i, round + root + 2);
                MPI_OK(MPI_Gather(send, n, MPI_INT, NULL, 0, MPI_INT, root, comm));
            }
            /* Scatter: block r of the root's buffer is value(root*64+r, i). */
            if (rank == root)
                for (int r = 0; r < size; r++)
                    for (int i = 0; i < n; i++) recv[r * n + i] = value(root * 64 + r, i, round);
            for (int i = 0; i < n; i++) send[i] = -1;
            MPI_OK(MPI_Scatter(recv, n, MPI_INT, send, n, MPI_INT, root, comm));
            for (int i = 0; i < n; i++)
                CHECK(send[i] == value(root * 64 + rank, i, round), "scatter n=%d root %d [%d]=%d", n, root, i, send[i]);
            if (rank == root) {
                MPI_OK(MPI_Scatter(recv, n, MPI_INT, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, root, comm));
                for (int r = 0; r < size; r++)
                    for (int i = 0; i < n; i++)
                        CHECK(recv[r * n + i] == value(root * 64 + r, i, round), "scatter in place n=%d root %d left block %d", n, root, r);
            } else {
                for (int i = 0; i < n; i++) send[i] = -1;
                MPI_OK(MPI_Scatter(NULL, 0, MPI_INT, send, n, MPI_INT, root, comm));
                for (int i = 0; i < n; i++)
                    CHECK(send[i] == value(root * 64 + rank, i, round), "scatter (root in place) n=%d root %d [%d]", n, root, i);
            }
        }
        /* Alltoall: block for `to` from `rank` holds value(rank*64+to, i). */
        if ((long)n * size > MAX_COUNT) continue;
        for (int to = 0; to < size; to++)
            for (int i = 0; i < n; i++) send[to * n + i] = value(rank * 64 + to, i, round);
        MPI_OK(MPI_Alltoall(send, n, MPI_INT, recv, n, MPI_INT, comm));
        for (int from = 0; from < size; from++)
            for (int i = 0; i < n; i++)
                CHECK(recv[from * n + i] == value(from * 64 + rank, i, round), "alltoall n=%d from %d [%d]", n, from, i);
        memcpy(recv, send, (size_t)n * size * sizeof(int));
        MPI_OK(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, n, MPI_INT, comm));
        for (int from = 0; from < size; from++)
            for (int i = 0; i < n; i++)
                CHECK(recv[from * n + i] == value(from * 64 + rank, i, round), "alltoall in place n=%d from %d [%d]", n, from, i);
    }
    free(send), free(recv);
}

/* A strided (non-contiguous) datatype through bcast and allreduce: only the
 * type's elements are written, the gaps stay. */
static void check_derived(MPI_Comm comm, int rank, int size) {
    MPI_Datatype strided;
    MPI_OK(MPI_Type_vector(50, 1, 2, MPI_INT, &strided));
    MPI_OK(MPI_Type_commit(&strided));
    int a[100], b[100];
    for (int i = 0; i < 100; i++) a[i] = rank == 0 ? i : -1;
    MPI_OK(MPI_Bcast(a, 1, strided, 0, comm));
    for (int i = 0; i < 100; i++) CHECK(a[i] == (i % 2 == 0 || rank == 0 ? i : -1), "strided bcast [%d]=%d", i, a[i]);
    for (int i = 0; i < 100; i++) a[i] = rank + i, b[i] = -3;
    MPI_OK(MPI_Allreduce(a, b, 1, strided, MPI_SUM, comm));
    for (int i = 0; i < 100; i++) {
        int expected = i % 2 ? -3 : size * (size - 1) / 2 + size * i;
        CHECK(b[i] == expected, "strided allreduce [%d]=%d expected %d", i, b[i], expected);
    }
    MPI_OK(MPI_Type_free(&strided));
}

/* Ranks that describe the same bytes differently come in through different
 * doors (predefined types take the short entry, derived ones the general
 * bodies): even ranks pass n MPI_INTs, odd ones one contiguous type of n
 * ints. Both must reach the same path with the same sequence numbers. */
static void check_mixed_doors(MPI_Comm comm, int rank, int size) {
    static const int sizes[] = {1, 3, 16, 1000};
    for (int k = 0; k < 4; k++) {
        int n = sizes[k];
        MPI_Datatype block;
        MPI_OK(MPI_Type_contiguous(n, MPI_INT, &block));
        MPI_OK(MPI_Type_commit(&block));
        MPI_Datatype type = rank % 2 ? block : MPI_INT;
        int count = rank % 2 ? 1 : n;
        int *a = malloc(sizeof(int) * n * size), *b = malloc(sizeof(int) * n * size);
        for (int round = 0; round < 40; round++) {
            int root = round % size;
            for (int i = 0; i < n; i++) a[i] = rank == root ? value(root, i, round) : -1;
            MPI_OK(MPI_Bcast(a, count, type, root, comm));
            for (int i = 0; i < n; i++) CHECK(a[i] == value(root, i, round), "mixed bcast n=%d [%d]", n, i);
            for (int i = 0; i < n; i++) a[i] = value(rank, i, round);
            MPI_OK(MPI_Allreduce(a, b, count, type, MPI_SUM, comm));
            for (int i = 0; i < n; i++) {
                int expected = 0;
                for (int r = 0; r < size; r++) expected += value(r, i, round);
                CHECK(b[i] == expected, "mixed allreduce n=%d [%d]", n, i);
            }
            MPI_OK(MPI_Gather(a, count, type, b, count, type, root, comm));
            for (int r = 0; rank == root && r < size; r++)
                for (int i = 0; i < n; i++) CHECK(b[r * n + i] == value(r, i, round), "mixed gather n=%d", n);
            MPI_OK(MPI_Allgather(a, count, type, b, count, type, comm));
            for (int r = 0; r < size; r++)
                for (int i = 0; i < n; i++) CHECK(b[r * n + i] == value(r, i, round), "mixed allgather n=%d", n);
            MPI_OK(MPI_Barrier(comm));
        }
        free(a), free(b);
        MPI_OK(MPI_Type_free(&block));
    }
}

/* Blocking fast-path collectives between the start and the completion of
 * nonblocking ones and of point-to-point exchanges on the same
 * communicator; one slow rank lets the others run ahead. */
static void check_interleaving(MPI_Comm comm, int rank, int size) {
    for (int round = 0; round < 300; round++) {
        MPI_Request requests[4];
        int nb_in = rank + round, nb_out = -1, token = rank * 100 + round, got = -1;
        int next = (rank + 1) % size, previous = (rank + size - 1) % size;
        MPI_OK(MPI_Iallreduce(&nb_in, &nb_out, 1, MPI_INT, MPI_SUM, comm, &requests[0]));
        MPI_OK(MPI_Ibarrier(comm, &requests[1]));
        MPI_OK(MPI_Irecv(&got, 1, MPI_INT, previous, round, comm, &requests[2]));
        MPI_OK(MPI_Isend(&token, 1, MPI_INT, next, round, comm, &requests[3]));
        if (rank == size - 1 && round % 50 == 0) usleep(2000);
        int mine = rank, sum = -1, root = round % size, bc = rank == root ? round * 3 : -1;
        MPI_OK(MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, comm));
        CHECK(sum == size * (size - 1) / 2, "interleaved allreduce %d", sum);
        MPI_OK(MPI_Bcast(&bc, 1, MPI_INT, root, comm));
        CHECK(bc == round * 3, "interleaved bcast %d", bc);
        MPI_OK(MPI_Waitall(4, requests, MPI_STATUSES_IGNORE));
        CHECK(nb_out == size * (size - 1) / 2 + size * round, "iallreduce %d", nb_out);
        CHECK(got == previous * 100 + round, "ring %d", got);
    }
    /* Many in a row, different roots (a rank runs ahead through the slots). */
    for (int round = 0; round < 3000; round++) {
        int root = round % size, x = rank == root ? round : -1;
        MPI_OK(MPI_Bcast(&x, 1, MPI_INT, root, comm));
        CHECK(x == round, "bcast run %d got %d", round, x);
        if (round % 7 == 0) {
            int y = 1, total = 0;
            MPI_OK(MPI_Reduce(&y, &total, 1, MPI_INT, MPI_SUM, root, comm));
            CHECK(rank != root || total == size, "reduce run %d", total);
        }
    }
}

static void check_all(MPI_Comm comm, MPI_Op affine, int round) {
    int rank, size;
    MPI_OK(MPI_Comm_rank(comm, &rank));
    MPI_OK(MPI_Comm_size(comm, &size));
    check_barrier(comm, rank, size);
    check_bcast(comm, rank, size, round);
    check_reductions(comm, rank, size, round, affine);
    check_gathers(comm, rank, size, round);
    check_derived(comm, rank, size);
    check_mixed_doors(comm, rank, size);
    check_interleaving(comm, rank, size);
}

static const char *class_name(int code) {
    int cls;
    if (code == MPI_SUCCESS) return "success";
    MPI_Error_class(code, &cls);
    return cls == MPIX_ERR_PROC_FAILED ? "proc_failed" : "other";
}

static int kill_mode(int self_kill) {
    int victim = g_size - 1;
    MPI_Comm survivors;
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, g_rank == victim ? MPI_UNDEFINED : 0, g_rank, &survivors));
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    long one = 1, sum = 0;
    for (long round = 0;; round++) {
        if (g_rank == victim && round == 500 && self_kill) raise(SIGKILL);
        int code = MPI_Allreduce(&one, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        if (code != MPI_SUCCESS) {
            CHECK(strcmp(class_name(code), "proc_failed") == 0, "allreduce failed with %s", class_name(code));
            break;
        }
        CHECK(sum == g_size, "allreduce %ld before the death", sum);
        /* A reduce to a moving root and a scan (trees and chains under
         * RESMPI_COLL_SHM_TREE): each either completes right or fails. */
        int root = (int)(round % g_size);
        long reduced = 0, prefix = 0;
        code = MPI_Reduce(&one, &reduced, 1, MPI_LONG, MPI_SUM, root, MPI_COMM_WORLD);
        if (code != MPI_SUCCESS) {
            CHECK(strcmp(class_name(code), "proc_failed") == 0, "reduce failed with %s", class_name(code));
            break;
        }
        CHECK(g_rank != root || reduced == g_size, "reduce %ld before the death", reduced);
        code = MPI_Scan(&one, &prefix, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        if (code != MPI_SUCCESS) {
            CHECK(strcmp(class_name(code), "proc_failed") == 0, "scan failed with %s", class_name(code));
            break;
        }
        CHECK(prefix == g_rank + 1, "scan %ld before the death", prefix);
        CHECK(round < 1000000, "never saw the death");
    }
    /* Collectives keep working among the survivors: many rounds, so every
     * survivor reuses every slot (the ones its peers gave up on too). */
    int srank, ssize;
    MPI_OK(MPI_Comm_rank(survivors, &srank));
    MPI_OK(MPI_Comm_size(survivors, &ssize));
    for (int round = 0; round < 200; round++) {
        long total = 0, x = srank == round % ssize ? round : -1;
        MPI_OK(MPI_Allreduce(&one, &total, 1, MPI_LONG, MPI_SUM, survivors));
        CHECK(total == ssize, "survivors' allreduce %ld", total);
        MPI_OK(MPI_Bcast(&x, 1, MPI_LONG, round % ssize, survivors));
        CHECK(x == round, "survivors' bcast %ld", x);
        MPI_OK(MPI_Barrier(survivors));
    }
    printf("rank %d: world proc_failed, survivors ok\n", g_rank);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    if (argc > 1 && strcmp(argv[1], "kill") == 0) return kill_mode(argc < 3 || strcmp(argv[2], "inject") != 0);
    MPI_Op affine;
    MPI_OK(MPI_Op_create(affine_compose, 0, &affine));
    check_all(MPI_COMM_WORLD, affine, 0);
    /* Sub-communicators: halves (odd/even), and the world in reverse order. */
    MPI_Comm half, reversed;
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, g_rank % 2, g_rank, &half));
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, 0, g_size - g_rank, &reversed));
    check_all(half, affine, 1);
    check_all(reversed, affine, 2);
    /* Interleaved use of two communicators sharing the ranks' slots. */
    for (int round = 0; round < 500; round++) {
        int a = 1, b = 1, sa = 0, sb = 0, hs;
        MPI_OK(MPI_Comm_size(half, &hs));
        MPI_OK(MPI_Allreduce(&a, &sa, 1, MPI_INT, MPI_SUM, half));
        MPI_OK(MPI_Allreduce(&b, &sb, 1, MPI_INT, MPI_SUM, reversed));
        CHECK(sa == hs && sb == g_size, "two communicators: %d %d", sa, sb);
    }
    MPI_OK(MPI_Comm_free(&half));
    MPI_OK(MPI_Comm_free(&reversed));
    MPI_OK(MPI_Op_free(&affine));
    return test_finish();
}
