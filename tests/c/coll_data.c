/* Data-movement collectives: Bcast, Gather(v), Scatter(v), Allgather(v),
 * Alltoall(v,w), each at several message sizes (0, 1, small, above the 16 KiB
 * eager limit, ~1 MiB in total), several roots, and with MPI_IN_PLACE where
 * the standard allows it. Expected values are computed from (rank, index).
 * usage: coll_data [bcast|gather|scatter|allgather|alltoall ...] (default: all) */
#include "common.h"

/* Elements per rank: 0, 1, small, above the eager limit, ~1 MiB in total. */
static int sizes[5];
#define NSIZES 5
#define SENTINEL (-77)

static int val(int rank, int i, int seed) { return rank * 1000003 + i * 7 + seed * 13; }

static int *ints(size_t n) {
    int *p = malloc((n ? n : 1) * sizeof(int));
    if (!p) FAIL("out of memory");
    for (size_t i = 0; i < n; i++) p[i] = SENTINEL;
    return p;
}

static void test_bcast(void) {
    for (int s = 0; s < NSIZES; s++) {
        int n = sizes[s] * (s == NSIZES - 1 ? g_size : 1); /* 1 MiB whole */
        for (int root = 0; root < g_size; root++) {
            if (n > 10 && root != s % g_size) continue; /* every root for small ones */
            int *b = ints(n);
            if (g_rank == root)
                for (int i = 0; i < n; i++) b[i] = val(root, i, s);
            MPI_OK(MPI_Bcast(b, n, MPI_INT, root, MPI_COMM_WORLD));
            for (int i = 0; i < n; i++)
                CHECK(b[i] == val(root, i, s), "Bcast n=%d root=%d elem %d: %d", n, root, i, b[i]);
            free(b);
        }
    }
}

static void test_gather(void) {
    for (int s = 0; s < NSIZES; s++) {
        int n = sizes[s];
        for (int root = 0; root < g_size; root++) {
            if (n > 10 && root != (s + 1) % g_size) continue;
            for (int in_place = 0; in_place < 2; in_place++) {
                int *mine = ints(n), *all = ints((size_t)n * g_size);
                for (int i = 0; i < n; i++) mine[i] = val(g_rank, i, s);
                if (in_place && g_rank == root) {
                    memcpy(all + (size_t)root * n, mine, n * sizeof(int));
                    MPI_OK(MPI_Gather(MPI_IN_PLACE, n, MPI_INT, all, n, MPI_INT, root, MPI_COMM_WORLD));
                } else {
                    MPI_OK(MPI_Gather(mine, n, MPI_INT, all, n, MPI_INT, root, MPI_COMM_WORLD));
                }
                if (g_rank == root)
                    for (int r = 0; r < g_size; r++)
                        for (int i = 0; i < n; i++)
                            CHECK(all[(size_t)r * n + i] == val(r, i, s), "Gather n=%d root=%d in_place=%d from %d elem %d",
                                  n, root, in_place, r, i);
                free(mine);
                free(all);
            }
        }
        /* Gatherv: rank r sends n + r elements; the root leaves a one-int gap after each. */
        int root = s % g_size;
        int *counts = malloc(g_size * sizeof(int)), *displs = malloc(g_size * sizeof(int));
        int total = 0;
        for (int r = 0; r < g_size; r++) {
            counts[r] = n + r;
            displs[r] = total;
            total += counts[r] + 1;
        }
        for (int in_place = 0; in_place < 2; in_place++) {
            int mine_n = n + g_rank;
            int *mine = ints(mine_n), *all = ints(total);
            for (int i = 0; i < mine_n; i++) mine[i] = val(g_rank, i, s + 10);
            if (in_place && g_rank == root) {
                memcpy(all + displs[root], mine, mine_n * sizeof(int));
                MPI_OK(MPI_Gatherv(MPI_IN_PLACE, mine_n, MPI_INT, all, counts, displs, MPI_INT, root, MPI_COMM_WORLD));
            } else {
                MPI_OK(MPI_Gatherv(mine, mine_n, MPI_INT, all, counts, displs, MPI_INT, root, MPI_COMM_WORLD));
            }
            if (g_rank == root)
                for (int r = 0; r < g_size; r++) {
                    for (int i = 0; i < counts[r]; i++)
                        CHECK(all[displs[r] + i] == val(r, i, s + 10), "Gatherv n=%d from %d elem %d", n, r, i);
                    CHECK(all[displs[r] + counts[r]] == SENTINEL, "Gatherv wrote into the gap after rank %d", r);
                }
            free(mine);
            free(all);
        }
        free(counts);
        free(displs);
    }
}

static void test_scatter(void) {
    for (int s = 0; s < NSIZES; s++) {
        int n = sizes[s];
        for (int root = 0; root < g_size; root++) {
            if (n > 10 && root != (s + 2) % g_size) continue;
            for (int in_place = 0; in_place < 2; in_place++) {
                int *all = ints((size_t)n * g_size), *mine = ints(n);
                if (g_rank == root)
                    for (int r = 0; r < g_size; r++)
                        for (int i = 0; i < n; i++) all[(size_t)r * n + i] = val(r, i, s);
                if (in_place && g_rank == root) {
                    MPI_OK(MPI_Scatter(all, n, MPI_INT, MPI_IN_PLACE, n, MPI_INT, root, MPI_COMM_WORLD));
                    memcpy(mine, all + (size_t)root * n, n * sizeof(int));
                } else {
                    MPI_OK(MPI_Scatter(all, n, MPI_INT, mine, n, MPI_INT, root, MPI_COMM_WORLD));
                }
                for (int i = 0; i < n; i++)
                    CHECK(mine[i] == val(g_rank, i, s), "Scatter n=%d root=%d in_place=%d elem %d: %d", n, root,
                          in_place, i, mine[i]);
                free(all);
                free(mine);
            }
        }
        /* Scatterv: rank r gets n + 2r elements from displacements with gaps. */
        int root = (s + 1) % g_size;
        int *counts = malloc(g_size * sizeof(int)), *displs = malloc(g_size * sizeof(int));
        int total = 0;
        for (int r = 0; r < g_size; r++) {
            counts[r] = n + 2 * r;
            displs[r] = total + 3;
            total += counts[r] + 3;
        }
        int *all = ints(total), *mine = ints(n + 2 * g_rank + 1);
        if (g_rank == root)
            for (int r = 0; r < g_size; r++)
                for (int i = 0; i < counts[r]; i++) all[displs[r] + i] = val(r, i, s + 20);
        MPI_OK(MPI_Scatterv(all, counts, displs, MPI_INT, mine, n + 2 * g_rank, MPI_INT, root, MPI_COMM_WORLD));
        for (int i = 0; i < n + 2 * g_rank; i++)
            CHECK(mine[i] == val(g_rank, i, s + 20), "Scatterv n=%d elem %d", n, i);
        CHECK(mine[n + 2 * g_rank] == SENTINEL, "Scatterv wrote past the receive count");
        free(all);
        free(mine);
        free(counts);
        free(displs);
    }
}

static void test_allgather(void) {
    for (int s = 0; s < NSIZES; s++) {
        int n = sizes[s];
        for (int in_place = 0; in_place < 2; in_place++) {
            int *mine = ints(n), *all = ints((size_t)n * g_size);
            for (int i = 0; i < n; i++) mine[i] = val(g_rank, i, s);
            if (in_place) {
                memcpy(all + (size_t)g_rank * n, mine, n * sizeof(int));
                MPI_OK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, n, MPI_INT, MPI_COMM_WORLD));
            } else {
                MPI_OK(MPI_Allgather(mine, n, MPI_INT, all, n, MPI_INT, MPI_COMM_WORLD));
            }
            for (int r = 0; r < g_size; r++)
                for (int i = 0; i < n; i++)
                    CHECK(all[(size_t)r * n + i] == val(r, i, s), "Allgather n=%d in_place=%d from %d elem %d", n,
                          in_place, r, i);
            free(mine);
            free(all);
        }
        /* Allgatherv: rank r contributes (n + r) % (n + 3) elements (some zero) with gaps. */
        int *counts = malloc(g_size * sizeof(int)), *displs = malloc(g_size * sizeof(int));
        int total = 0;
        for (int r = 0; r < g_size; r++) {
            counts[r] = n ? n + r % 3 - 1 : r % 2;
            displs[r] = total;
            total += counts[r] + 2;
        }
        for (int in_place = 0; in_place < 2; in_place++) {
            int mine_n = counts[g_rank];
            int *mine = ints(mine_n), *all = ints(total);
            for (int i = 0; i < mine_n; i++) mine[i] = val(g_rank, i, s + 30);
            if (in_place) {
                memcpy(all + displs[g_rank], mine, mine_n * sizeof(int));
                MPI_OK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, counts, displs, MPI_INT, MPI_COMM_WORLD));
            } else {
                MPI_OK(MPI_Allgatherv(mine, mine_n, MPI_INT, all, counts, displs, MPI_INT, MPI_COMM_WORLD));
            }
            for (int r = 0; r < g_size; r++) {
                for (int i = 0; i < counts[r]; i++)
                    CHECK(all[displs[r] + i] == val(r, i, s + 30), "Allgatherv n=%d from %d elem %d", n, r, i);
                CHECK(all[displs[r] + counts[r]] == SENTINEL, "Allgatherv wrote into the gap after rank %d", r);
            }
            free(mine);
            free(all);
        }
        free(counts);
        free(displs);
    }
}

static void test_alltoall(void) {
    for (int s = 0; s < NSIZES; s++) {
        int n = sizes[s];
        for (int in_place = 0; in_place < 2; in_place++) {
            size_t total = (size_t)n * g_size;
            int *out = ints(total), *in = ints(total);
            for (int d = 0; d < g_size; d++)
                for (int i = 0; i < n; i++) out[(size_t)d * n + i] = val(g_rank * 100 + d, i, s);
            if (in_place) {
                memcpy(in, out, total * sizeof(int));
                MPI_OK(MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, in, n, MPI_INT, MPI_COMM_WORLD));
            } else {
                MPI_OK(MPI_Alltoall(out, n, MPI_INT, in, n, MPI_INT, MPI_COMM_WORLD));
            }
            for (int r = 0; r < g_size; r++)
                for (int i = 0; i < n; i++)
                    CHECK(in[(size_t)r * n + i] == val(r * 100 + g_rank, i, s), "Alltoall n=%d in_place=%d from %d elem %d",
                          n, in_place, r, i);
            free(out);
            free(in);
        }
        /* Alltoallv: pair (a -> b) carries n + (a + b) % 3 elements (n > 0) or (a+b)%2, with gaps. */
#define PAIR_COUNT(a, b) (n ? n + ((a) + (b)) % 3 : ((a) + (b)) % 2)
        int *sc = malloc(g_size * sizeof(int)), *sd = malloc(g_size * sizeof(int));
        int *rc = malloc(g_size * sizeof(int)), *rd = malloc(g_size * sizeof(int));
        int stot = 0, rtot = 0;
        for (int p = 0; p < g_size; p++) {
            sc[p] = PAIR_COUNT(g_rank, p);
            sd[p] = stot;
            stot += sc[p] + 1;
            rc[p] = PAIR_COUNT(p, g_rank);
            rd[p] = rtot;
            rtot += rc[p] + 1;
        }
        int *out = ints(stot), *in = ints(rtot);
        for (int p = 0; p < g_size; p++)
            for (int i = 0; i < sc[p]; i++) out[sd[p] + i] = val(g_rank * 100 + p, i, s + 40);
        MPI_OK(MPI_Alltoallv(out, sc, sd, MPI_INT, in, rc, rd, MPI_INT, MPI_COMM_WORLD));
        for (int p = 0; p < g_size; p++) {
            for (int i = 0; i < rc[p]; i++)
                CHECK(in[rd[p] + i] == val(p * 100 + g_rank, i, s + 40), "Alltoallv n=%d from %d elem %d", n, p, i);
            CHECK(in[rd[p] + rc[p]] == SENTINEL, "Alltoallv wrote into the gap after rank %d", p);
        }
        /* Alltoallv in place: symmetric counts (a+b), same layout both ways. */
        for (int p = 0; p < g_size; p++) {
            for (int i = 0; i < rc[p]; i++) in[rd[p] + i] = val(g_rank * 100 + p, i, s + 45);
        }
        int *sym = malloc(g_size * sizeof(int));
        for (int p = 0; p < g_size; p++) sym[p] = rc[p]; /* PAIR_COUNT is symmetric */
        MPI_OK(MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, in, sym, rd, MPI_INT, MPI_COMM_WORLD));
        for (int p = 0; p < g_size; p++)
            for (int i = 0; i < rc[p]; i++)
                CHECK(in[rd[p] + i] == val(p * 100 + g_rank, i, s + 45), "Alltoallv IN_PLACE n=%d from %d elem %d", n, p, i);
        free(sym);
        free(out);
        free(in);
        /* Alltoallw: pair (a, b) uses MPI_INT when a + b is even, MPI_DOUBLE when odd;
         * byte displacements, blocks in reverse peer order. */
        MPI_Datatype *st = malloc(g_size * sizeof(MPI_Datatype)), *rt = malloc(g_size * sizeof(MPI_Datatype));
        size_t sbytes = 0, rbytes = 0;
        for (int p = g_size - 1; p >= 0; p--) {
            st[p] = (g_rank + p) % 2 ? MPI_DOUBLE : MPI_INT;
            rt[p] = st[p];
            int width = (g_rank + p) % 2 ? 8 : 4;
            sd[p] = (int)sbytes;
            sbytes += ((size_t)sc[p] * width + 7) / 8 * 8 + 8;
            rd[p] = (int)rbytes;
            rbytes += ((size_t)rc[p] * width + 7) / 8 * 8 + 8;
        }
        char *wout = calloc(sbytes + 1, 1), *win = calloc(rbytes + 1, 1);
        for (int p = 0; p < g_size; p++)
            for (int i = 0; i < sc[p]; i++) {
                if (st[p] == MPI_INT)
                    ((int *)(wout + sd[p]))[i] = val(g_rank * 100 + p, i, s + 50);
                else
                    ((double *)(wout + sd[p]))[i] = val(g_rank * 100 + p, i, s + 50) + 0.5;
            }
        MPI_OK(MPI_Alltoallw(wout, sc, sd, st, win, rc, rd, rt, MPI_COMM_WORLD));
        for (int p = 0; p < g_size; p++)
            for (int i = 0; i < rc[p]; i++) {
                if (rt[p] == MPI_INT)
                    CHECK(((int *)(win + rd[p]))[i] == val(p * 100 + g_rank, i, s + 50), "Alltoallw int from %d elem %d", p, i);
                else
                    CHECK(((double *)(win + rd[p]))[i] == val(p * 100 + g_rank, i, s + 50) + 0.5,
                          "Alltoallw double from %d elem %d", p, i);
            }
        free(wout);
        free(win);
        free(st);
        free(rt);
        free(sc);
        free(sd);
        free(rc);
        free(rd);
    }
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    sizes[0] = 0;
    sizes[1] = 1;
    sizes[2] = 7;
    sizes[3] = 5000;                      /* 20 000 bytes: above the 16 KiB eager limit */
    sizes[4] = (1 << 20) / 4 / g_size;    /* ~1 MiB over all ranks */
    if (selected(argc, argv, "bcast")) test_bcast();
    if (selected(argc, argv, "gather")) test_gather();
    if (selected(argc, argv, "scatter")) test_scatter();
    if (selected(argc, argv, "allgather")) test_allgather();
    if (selected(argc, argv, "alltoall")) test_alltoall();
    return test_finish();
}
