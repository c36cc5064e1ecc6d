/* The direct path of one-sided communication on one host (issue 17 item 4):
 * the same program on MPI_Win_allocate and MPI_Win_allocate_shared windows,
 * run with RESMPI_RMA_SHM=1 (loads and stores in shared memory) and =0
 * (active messages), must check its own results and print the same window
 * digest.  Usage:
 *   rma_direct compare allocate|shared   every operation and sync mode; rank 0 prints "digest HEX"
 *   rma_direct reversed allocate|shared  a window on the world's ranks reversed
 *   rma_direct no_target_engine         rank 0 computes outside MPI while the others
 *                                       accumulate under lock_all(MPI_MODE_NOCHECK)
 *   rma_direct failure_fence            (ULFM) a member dies; the survivors' fences and
 *                                       locks toward it end with MPIX_ERR_PROC_FAILED */
#include "expect.h"
#include <signal.h>
#include <time.h>

#define WORDS (BIG + 8192)
/* words [BIG, WORDS): the region every rank accumulates into at once */
#define BIG 1024
#define ROUNDS 50
/* accumulates of the whole [BIG, WORDS) region per rank in the contention phase */
#define CONTENTION_ROUNDS 1000

static unsigned long long fnv(const void *data, size_t bytes, unsigned long long hash) {
    const unsigned char *p = data;
    for (size_t i = 0; i < bytes; i++) hash = (hash ^ p[i]) * 1099511628211ULL;
    return hash;
}

static void make_window(const char *flavor, int **base, MPI_Win *win) {
    MPI_Aint bytes = WORDS * sizeof(int);
    if (!strcmp(flavor, "shared"))
        MPI_OK(MPI_Win_allocate_shared(bytes, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, base, win));
    else if (!strcmp(flavor, "allocate"))
        MPI_OK(MPI_Win_allocate(bytes, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, base, win));
    else
        FAIL("unknown flavor %s", flavor);
}

/* Fence: put and get with derived datatypes on both sides, then
 * accumulates from every rank to every rank through a strided target type. */
static void fence_phase(int *base, MPI_Win win) {
    int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
    MPI_Datatype target_type, origin_type, acc_type;
    /* 16 blocks of 3 ints every 5 ints: 48 ints over words [0, 78) */
    MPI_OK(MPI_Type_vector(16, 3, 5, MPI_INT, &target_type));
    MPI_OK(MPI_Type_commit(&target_type));
    /* every other int of a 96-int buffer */
    MPI_OK(MPI_Type_vector(48, 1, 2, MPI_INT, &origin_type));
    MPI_OK(MPI_Type_commit(&origin_type));
    int origin[96], fetched[96];
    for (int i = 0; i < 96; i++) {
        origin[i] = i % 2 ? -7 : g_rank * 1000 + i / 2;
        fetched[i] = -9;
    }
    MPI_OK(MPI_Win_fence(0, win));
    MPI_OK(MPI_Put(origin, 1, origin_type, right, 0, 1, target_type, win));
    MPI_OK(MPI_Win_fence(0, win));
    for (int b = 0; b < 16; b++)
        for (int k = 0; k < 5; k++) {
            int word = b * 5 + k, want = k < 3 ? left * 1000 + b * 3 + k : -1 - word;
            CHECK(base[word] == want, "fence put: word %d is %d, expected %d", word, base[word], want);
        }
    MPI_OK(MPI_Get(fetched, 1, origin_type, right, 0, 1, target_type, win));
    MPI_OK(MPI_Win_fence(0, win));
    for (int i = 0; i < 96; i++) {
        int want = i % 2 ? -9 : g_rank * 1000 + i / 2;
        CHECK(fetched[i] == want, "fence get: element %d is %d, expected %d", i, fetched[i], want);
    }
    /* 10 ints at words 100, 102, ..., 118 */
    MPI_OK(MPI_Type_vector(10, 1, 2, MPI_INT, &acc_type));
    MPI_OK(MPI_Type_commit(&acc_type));
    int addend[10];
    for (int k = 0; k < 10; k++) addend[k] = (g_rank + 1) * (k + 1);
    for (int target = 0; target < g_size; target++)
        MPI_OK(MPI_Accumulate(addend, 10, MPI_INT, target, 100, 1, acc_type, MPI_SUM, win));
    MPI_OK(MPI_Win_fence(0, win));
    int ranks_sum = g_size * (g_size + 1) / 2;
    for (int k = 0; k < 10; k++) {
        int word = 100 + 2 * k, want = -1 - word + ranks_sum * (k + 1);
        CHECK(base[word] == want, "fence accumulate: word %d is %d, expected %d", word, base[word], want);
        CHECK(base[word + 1] == -2 - word, "fence accumulate wrote word %d", word + 1);
    }
    MPI_OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    MPI_OK(MPI_Type_free(&target_type));
    MPI_OK(MPI_Type_free(&origin_type));
    MPI_OK(MPI_Type_free(&acc_type));
}

/* PSCW around a ring: each rank exposes its window to its left neighbour
 * and puts into its right one; the second round waits with MPI_Win_test. */
static void pscw_phase(int *base, MPI_Win win) {
    int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
    MPI_Group world, from_left, to_right;
    MPI_OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    MPI_OK(MPI_Group_incl(world, 1, &left, &from_left));
    MPI_OK(MPI_Group_incl(world, 1, &right, &to_right));
    for (int round = 0; round < 2; round++) {
        int values[4];
        for (int k = 0; k < 4; k++) values[k] = 50000 + g_rank * 10 + k + round * 100;
        MPI_OK(MPI_Win_post(from_left, 0, win));
        MPI_OK(MPI_Win_start(to_right, 0, win));
        MPI_OK(MPI_Put(values, 4, MPI_INT, right, 200, 4, MPI_INT, win));
        int one = 1;
        MPI_OK(MPI_Accumulate(&one, 1, MPI_INT, right, 204, 1, MPI_INT, MPI_SUM, win));
        MPI_OK(MPI_Win_complete(win));
        if (round == 0) {
            MPI_OK(MPI_Win_wait(win));
        } else {
            int done = 0;
            time_t start = time(NULL);
            while (!done) {
                MPI_OK(MPI_Win_test(win, &done));
                CHECK(time(NULL) - start < 60, "MPI_Win_test never succeeded");
            }
        }
        for (int k = 0; k < 4; k++) {
            int want = 50000 + left * 10 + k + round * 100;
            CHECK(base[200 + k] == want, "pscw round %d: word %d is %d, expected %d", round, 200 + k, base[200 + k], want);
        }
        CHECK(base[204] == -1 - 204 + round + 1, "pscw accumulate: %d", base[204]);
    }
    MPI_OK(MPI_Group_free(&world));
    MPI_OK(MPI_Group_free(&from_left));
    MPI_OK(MPI_Group_free(&to_right));
}

/* Passive target: read-modify-write under exclusive locks (get, flush, put)
 * from every rank to rank 0's word 220: the total is exact only if the
 * exclusive lock excludes. */
static void exclusive_phase(int *base, MPI_Win win) {
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    for (int i = 0; i < ROUNDS; i++) {
        int value = -1;
        MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        MPI_OK(MPI_Get(&value, 1, MPI_INT, 0, 220, 1, MPI_INT, win));
        MPI_OK(MPI_Win_flush(0, win));
        value += 1;
        MPI_OK(MPI_Put(&value, 1, MPI_INT, 0, 220, 1, MPI_INT, win));
        MPI_OK(MPI_Win_unlock(0, win));
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (g_rank == 0) {
        MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        int want = -1 - 220 + ROUNDS * g_size;
        CHECK(base[220] == want, "exclusive-lock counter %d, expected %d", base[220], want);
        MPI_OK(MPI_Win_unlock(0, win));
    }
}

/* lock_all: fetch_and_op and compare_and_swap counters on the last rank,
 * get_accumulate (MPI_NO_OP, MPI_REPLACE), request-based operations,
 * MAXLOC on a pair type, flush_local_all. */
static void atomics_phase(int *base, MPI_Win win) {
    int last = g_size - 1;
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Win_lock_all(0, win));
    int one = 1, old = 0, seen = -1000;
    for (int i = 0; i < ROUNDS; i++) {
        MPI_OK(MPI_Fetch_and_op(&one, &old, MPI_INT, last, 221, MPI_SUM, win));
        MPI_OK(MPI_Win_flush(last, win));
        CHECK(old > seen, "fetch_and_op went backwards: %d after %d", old, seen);
        seen = old;
        /* CAS increment: read, then swap in value + 1 until nobody raced */
        int current = 0, result = 0;
        MPI_OK(MPI_Get_accumulate(NULL, 0, MPI_INT, &current, 1, MPI_INT, last, 222, 1, MPI_INT, MPI_NO_OP, win));
        MPI_OK(MPI_Win_flush(last, win));
        for (;;) {
            int next = current + 1;
            MPI_OK(MPI_Compare_and_swap(&next, &current, &result, MPI_INT, last, 222, win));
            MPI_OK(MPI_Win_flush(last, win));
            if (result == current) break;
            current = result;
        }
    }
    /* each rank replaces its own slot, then reads it back with an Rget */
    int mine = 7000 + g_rank, back = -1, previous = -1;
    MPI_Request requests[2];
    MPI_OK(MPI_Get_accumulate(&mine, 1, MPI_INT, &previous, 1, MPI_INT, last, 230 + g_rank % 16, 1, MPI_INT, MPI_REPLACE, win));
    MPI_OK(MPI_Win_flush(last, win));
    CHECK(previous == -1 - (230 + g_rank % 16) || g_size > 16, "get_accumulate replace fetched %d", previous);
    MPI_OK(MPI_Rput(&mine, 1, MPI_INT, last, 250 - g_rank % 4, 1, MPI_INT, win, &requests[0]));
    MPI_OK(MPI_Wait(&requests[0], MPI_STATUS_IGNORE));
    MPI_OK(MPI_Win_flush(last, win));
    MPI_OK(MPI_Rget(&back, 1, MPI_INT, last, 230 + g_rank % 16, 1, MPI_INT, win, &requests[1]));
    MPI_OK(MPI_Wait(&requests[1], MPI_STATUS_IGNORE));
    CHECK(back == mine || g_size > 16, "rget read %d, expected %d", back, mine);
    /* MAXLOC of (g_rank * 7 % 5, g_rank) into rank 0's words 240-241 */
    int pair[2] = {g_rank * 7 % 5, g_rank};
    MPI_OK(MPI_Accumulate(pair, 1, MPI_2INT, 0, 240, 1, MPI_2INT, MPI_MAXLOC, win));
    MPI_OK(MPI_Win_flush_local_all(win));
    MPI_OK(MPI_Win_flush_all(win));
    MPI_OK(MPI_Win_unlock_all(win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (g_rank == last) {
        MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, last, 0, win));
        int want = -1 - 221 + ROUNDS * g_size;
        CHECK(base[221] == want, "fetch_and_op counter %d, expected %d", base[221], want);
        want = -1 - 222 + ROUNDS * g_size;
        CHECK(base[222] == want, "compare_and_swap counter %d, expected %d", base[222], want);
        MPI_OK(MPI_Win_unlock(last, win));
    }
    if (g_rank == 0) {
        MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        int best = -1 - 240, where = 0;
        for (int r = 0; r < g_size; r++)
            if (r * 7 % 5 > best) best = r * 7 % 5, where = r;
        CHECK(base[240] == best && base[241] == where, "maxloc (%d, %d), expected (%d, %d)", base[240], base[241],
              best, where);
        MPI_OK(MPI_Win_unlock(0, win));
    }
}

/* Every rank adds vectors of ones into rank 0's words [BIG, WORDS) at the
 * same time, under lock_all (shared): element-wise atomicity of accumulates
 * is all that keeps the sums exact (each vector takes long enough to apply
 * that unsynchronised read-modify-writes would overlap). */
static void accumulate_contention_phase(int *base, MPI_Win win) {
    static int ones[WORDS - BIG];
    for (int i = 0; i < WORDS - BIG; i++) ones[i] = 1;
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Win_lock_all(0, win));
    for (int round = 0; round < CONTENTION_ROUNDS; round++) {
        MPI_OK(MPI_Accumulate(ones, WORDS - BIG, MPI_INT, 0, BIG, WORDS - BIG, MPI_INT, MPI_SUM, win));
        if (round % 8 == 7) MPI_OK(MPI_Win_flush(0, win));
    }
    MPI_OK(MPI_Win_unlock_all(win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (g_rank == 0) {
        MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        for (int i = BIG; i < WORDS; i++) {
            int want = -1 - i + CONTENTION_ROUNDS * g_size;
            CHECK(base[i] == want, "concurrent accumulates: word %d is %d, expected %d", i, base[i], want);
        }
        MPI_OK(MPI_Win_unlock(0, win));
    }
}

/* A shared window's neighbour memory read with loads after MPI_Win_sync. */
static void shared_loads(int *base, MPI_Win win) {
    int right = (g_rank + 1) % g_size;
    MPI_Aint size;
    int unit, *theirs;
    MPI_OK(MPI_Win_shared_query(win, right, &size, &unit, &theirs));
    MPI_OK(MPI_Win_lock_all(0, win));
    base[BIG - 1] = 90000 + g_rank;
    MPI_OK(MPI_Win_sync(win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Win_sync(win));
    CHECK(theirs[BIG - 1] == 90000 + right, "shared load of the right neighbour: %d", theirs[BIG - 1]);
    MPI_OK(MPI_Win_unlock_all(win));
}

static void compare(const char *flavor) {
    int *base;
    MPI_Win win;
    make_window(flavor, &base, &win);
    int model_flag = 0, *model;
    MPI_OK(MPI_Win_get_attr(win, MPI_WIN_MODEL, &model, &model_flag));
    CHECK(model_flag && *model == MPI_WIN_UNIFIED, "model");
    MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, g_rank, 0, win));
    for (int i = 0; i < WORDS; i++) base[i] = -1 - i;
    MPI_OK(MPI_Win_unlock(g_rank, win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    fence_phase(base, win);
    pscw_phase(base, win);
    exclusive_phase(base, win);
    atomics_phase(base, win);
    accumulate_contention_phase(base, win);
    if (!strcmp(flavor, "shared")) shared_loads(base, win);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    unsigned long long mine = fnv(base, WORDS * sizeof(int), 1469598103934665603ULL);
    unsigned long long *all = malloc(sizeof(unsigned long long) * g_size);
    MPI_OK(MPI_Gather(&mine, 1, MPI_UNSIGNED_LONG_LONG, all, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD));
    if (g_rank == 0) {
        printf("digest %016llx\n", fnv(all, sizeof(unsigned long long) * g_size, 1469598103934665603ULL));
        fflush(stdout);
    }
    free(all);
    MPI_OK(MPI_Win_free(&win));
}

/* A window on a communicator whose ranks are the world's reversed: window
 * ranks, world ranks and each member's slot in the shared control area
 * must not be confused (fence put, exclusive-lock counter, fetch_and_op,
 * PSCW and a shared lock, each checked). */
static void reversed(const char *flavor) {
    MPI_Comm comm;
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, 0, g_size - 1 - g_rank, &comm));
    int rank, size;
    MPI_OK(MPI_Comm_rank(comm, &rank));
    MPI_OK(MPI_Comm_size(comm, &size));
    CHECK(rank == g_size - 1 - g_rank, "split rank %d", rank);
    int *base;
    MPI_Win win;
    if (!strcmp(flavor, "shared"))
        MPI_OK(MPI_Win_allocate_shared(4 * sizeof(int), sizeof(int), MPI_INFO_NULL, comm, &base, &win));
    else
        MPI_OK(MPI_Win_allocate(4 * sizeof(int), sizeof(int), MPI_INFO_NULL, comm, &base, &win));
    for (int i = 0; i < 4; i++) base[i] = 0;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    MPI_OK(MPI_Win_fence(0, win));
    MPI_OK(MPI_Put(&g_rank, 1, MPI_INT, right, 0, 1, MPI_INT, win));
    MPI_OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    CHECK(base[0] == g_size - 1 - left, "put from window rank %d: %d", left, base[0]);
    for (int i = 0; i < ROUNDS; i++) {
        int value = -1, one = 1, old = -1;
        MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        MPI_OK(MPI_Get(&value, 1, MPI_INT, 0, 1, 1, MPI_INT, win));
        MPI_OK(MPI_Win_flush(0, win));
        value += 1;
        MPI_OK(MPI_Put(&value, 1, MPI_INT, 0, 1, 1, MPI_INT, win));
        MPI_OK(MPI_Win_unlock(0, win));
        MPI_OK(MPI_Win_lock_all(0, win));
        MPI_OK(MPI_Fetch_and_op(&one, &old, MPI_INT, size - 1, 2, MPI_SUM, win));
        MPI_OK(MPI_Win_unlock_all(win));
        CHECK(old >= i, "fetch_and_op fetched %d in round %d", old, i);
    }
    MPI_Group group, from_left, to_right;
    MPI_OK(MPI_Comm_group(comm, &group));
    MPI_OK(MPI_Group_incl(group, 1, &left, &from_left));
    MPI_OK(MPI_Group_incl(group, 1, &right, &to_right));
    MPI_OK(MPI_Win_post(from_left, 0, win));
    MPI_OK(MPI_Win_start(to_right, 0, win));
    int mine = 100 + rank;
    MPI_OK(MPI_Put(&mine, 1, MPI_INT, right, 3, 1, MPI_INT, win));
    MPI_OK(MPI_Win_complete(win));
    MPI_OK(MPI_Win_wait(win));
    CHECK(base[3] == 100 + left, "pscw put from window rank %d: %d", left, base[3]);
    MPI_OK(MPI_Barrier(comm));
    int counter = -1, fetched = -1;
    MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    MPI_OK(MPI_Get(&counter, 1, MPI_INT, 0, 1, 1, MPI_INT, win));
    MPI_OK(MPI_Win_unlock(0, win));
    MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, size - 1, 0, win));
    MPI_OK(MPI_Get(&fetched, 1, MPI_INT, size - 1, 2, 1, MPI_INT, win));
    MPI_OK(MPI_Win_unlock(size - 1, win));
    CHECK(counter == ROUNDS * size, "exclusive-lock counter %d, expected %d", counter, ROUNDS * size);
    CHECK(fetched == ROUNDS * size, "fetch_and_op counter %d, expected %d", fetched, ROUNDS * size);
    MPI_OK(MPI_Group_free(&group));
    MPI_OK(MPI_Group_free(&from_left));
    MPI_OK(MPI_Group_free(&to_right));
    MPI_OK(MPI_Win_free(&win));
    MPI_OK(MPI_Comm_free(&comm));
}

/* Rank 0 computes outside MPI while the others accumulate into its window
 * under lock_all(MPI_MODE_NOCHECK): no lock, so nothing needs rank 0's
 * engine on the direct path. With active messages and no progress thread
 * nobody applies them, and rank 0's check says so. */
static void no_target_engine(void) {
    volatile long long *base;
    MPI_Win win;
    MPI_OK(MPI_Win_allocate(sizeof(long long), sizeof(long long), MPI_INFO_NULL, MPI_COMM_WORLD, (void *)&base, &win));
    *base = 0;
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    const long long per_rank = 50;
    if (g_rank == 0) {
        long long expected = per_rank * (g_size - 1);
        const char *wait_text = getenv("RMA_WAIT_S");
        long wait_s = wait_text ? atol(wait_text) : 30;
        time_t start = time(NULL);
        while (*base != expected) {
            CHECK(time(NULL) - start < wait_s, "target outside MPI saw %lld of %lld", *base, expected);
            __sync_synchronize();
        }
        printf("target outside MPI saw all %lld\n", expected);
        fflush(stdout);
    } else {
        long long one = 1;
        MPI_OK(MPI_Win_lock_all(MPI_MODE_NOCHECK, win));
        for (int i = 0; i < per_rank; i++) {
            MPI_OK(MPI_Accumulate(&one, 1, MPI_LONG_LONG, 0, 0, 1, MPI_LONG_LONG, MPI_SUM, win));
            MPI_OK(MPI_Win_flush(0, win));
        }
        MPI_OK(MPI_Win_unlock_all(win));
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Win_free(&win));
}

/* ULFM: the last rank dies after the first fence epoch's puts; the
 * survivors' next fence and a lock toward it end with
 * MPIX_ERR_PROC_FAILED, in bounded time (mpiexec's --timeout ends a hang). */
static void failure_fence(const char *flavor) {
    int *base;
    MPI_Win win;
    make_window(flavor, &base, &win);
    MPI_OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int victim = g_size - 1, value = g_rank;
    MPI_OK(MPI_Win_fence(0, win));
    MPI_OK(MPI_Put(&value, 1, MPI_INT, (g_rank + 1) % g_size, 0, 1, MPI_INT, win));
    MPI_OK(MPI_Win_fence(0, win));
    if (g_rank == victim) raise(SIGKILL);
    time_t start = time(NULL);
    int rc = MPI_Win_fence(0, win), cls = MPI_SUCCESS;
    MPI_OK(MPI_Error_class(rc, &cls));
    CHECK(cls == MPIX_ERR_PROC_FAILED, "fence with a dead member: class %d", cls);
    rc = MPI_SUCCESS;
    for (int i = 0; i < 100000 && rc == MPI_SUCCESS; i++) {
        rc = MPI_Win_lock(MPI_LOCK_EXCLUSIVE, victim, 0, win);
        if (rc == MPI_SUCCESS) rc = MPI_Win_unlock(victim, win);
    }
    MPI_OK(MPI_Error_class(rc, &cls));
    CHECK(cls == MPIX_ERR_PROC_FAILED, "lock toward the dead member: class %d", cls);
    CHECK(time(NULL) - start < 20, "the failure took %ld s to surface", (long)(time(NULL) - start));
    printf("rank %d: fence and lock failed with class %d\n", g_rank, cls);
    fflush(stdout);
    exit(0);
}

/* ULFM: the last rank dies inside lock_all (a shared lock on every member,
 * its accumulate applied): the survivors' exclusive locks on every member,
 * rank 0's included, are granted once the death is known (its shared
 * holds are dropped) instead of waiting for an unlock that never comes. */
static void failure_shared_holder(const char *flavor) {
    int *base;
    MPI_Win win;
    make_window(flavor, &base, &win);
    MPI_OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    base[0] = 0;
    int victim = g_size - 1, one = 1;
    /* the survivors' own communicator: a survivor that exits early would
     * look failed to the other's unlock toward it */
    MPI_Comm survivors;
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, g_rank == victim ? MPI_UNDEFINED : 0, g_rank, &survivors));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (g_rank == victim) {
        MPI_OK(MPI_Win_lock_all(0, win));
        MPI_OK(MPI_Accumulate(&one, 1, MPI_INT, 0, 0, 1, MPI_INT, MPI_SUM, win));
        MPI_OK(MPI_Win_flush(0, win));
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        raise(SIGKILL);
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD)); /* the victim holds its shared locks */
    time_t start = time(NULL);
    for (int target = 0; target < victim; target++) {
        MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, target, 0, win));
        MPI_OK(MPI_Accumulate(&one, 1, MPI_INT, target, 1, 1, MPI_INT, MPI_SUM, win));
        MPI_OK(MPI_Win_unlock(target, win));
    }
    CHECK(time(NULL) - start < 20, "exclusive locks took %ld s", (long)(time(NULL) - start));
    if (g_rank == 0) CHECK(base[0] == 1, "the dead holder's flushed accumulate: %d", base[0]);
    MPI_OK(MPI_Barrier(survivors));
    printf("rank %d: locked every survivor exclusively after the shared holder died\n", g_rank);
    fflush(stdout);
    exit(0);
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    const char *subtest = argc > 1 ? argv[1] : "compare";
    const char *flavor = argc > 2 ? argv[2] : "allocate";
    if (!strcmp(subtest, "compare")) compare(flavor);
    else if (!strcmp(subtest, "reversed")) reversed(flavor);
    else if (!strcmp(subtest, "no_target_engine")) no_target_engine();
    else if (!strcmp(subtest, "failure_fence")) failure_fence(flavor);
    else if (!strcmp(subtest, "failure_shared_holder")) failure_shared_holder(flavor);
    else FAIL("unknown subtest %s", subtest);
    return test_finish();
}
