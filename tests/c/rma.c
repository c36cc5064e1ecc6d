/* One-sided communication (issue 17): every window flavor, every operation,
 * every synchronisation mode, derived datatypes, accumulate atomicity under
 * contention, passive target progress while the target computes, and the
 * errors of bad calls.  Usage: rma SUBTEST; each subtest checks its own
 * results (works at any number of ranks >= 1). */
#include "expect.h"
#include <time.h>
#include <signal.h>

#define N 64

static void check_attributes(MPI_Win win, void *base, MPI_Aint size, int disp_unit, int flavor) {
    void *value;
    int flag;
    MPI_OK(MPI_Win_get_attr(win, MPI_WIN_BASE, &value, &flag));
    CHECK(flag && value == base, "MPI_WIN_BASE %p, expected %p", value, base);
    MPI_OK(MPI_Win_get_attr(win, MPI_WIN_SIZE, &value, &flag));
    CHECK(flag && *(MPI_Aint *)value == size, "MPI_WIN_SIZE %ld", (long)*(MPI_Aint *)value);
    MPI_OK(MPI_Win_get_attr(win, MPI_WIN_DISP_UNIT, &value, &flag));
    CHECK(flag && *(int *)value == disp_unit, "MPI_WIN_DISP_UNIT %d", *(int *)value);
    MPI_OK(MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &value, &flag));
    CHECK(flag && *(int *)value == flavor, "flavor %d, expected %d", *(int *)value, flavor);
    MPI_OK(MPI_Win_get_attr(win, MPI_WIN_MODEL, &value, &flag));
    CHECK(flag && *(int *)value == MPI_WIN_UNIFIED, "model %d", *(int *)value);
}

/* Ring exchange under fences: put my rank into the right neighbour's slot
 * [1], get the left neighbour's [0]; disp is where `base` lies at the target. */
static void ring_exchange(MPI_Win win, int *base, MPI_Aint disp0) {
    int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
    for (int i = 0; i < N; i++) base[i] = 1000 * g_rank + i;
    int mine[N], got[N];
    for (int i = 0; i < N; i++) mine[i] = -(g_rank + 1) * (i + 1);
    MPI_OK(MPI_Win_fence(0, win));
    MPI_OK(MPI_Put(mine, N / 2, MPI_INT, right, disp0 + N / 2, N / 2, MPI_INT, win));
    MPI_OK(MPI_Get(got, N / 2, MPI_INT, left, disp0, N / 2, MPI_INT, win));
    MPI_OK(MPI_Win_fence(0, win));
    for (int i = 0; i < N / 2; i++) {
        CHECK(got[i] == 1000 * left + i, "got[%d]=%d from %d", i, got[i], left);
        CHECK(base[i] == 1000 * g_rank + i, "base[%d]=%d clobbered", i, base[i]);
        CHECK(base[N / 2 + i] == -(left + 1) * (i + 1), "base[%d]=%d", N / 2 + i, base[N / 2 + i]);
    }
    MPI_OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
}

static void flavors(void) {
    /* create */
    int *memory = malloc(N * sizeof(int));
    MPI_Win win;
    MPI_OK(MPI_Win_create(memory, N * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    check_attributes(win, memory, N * sizeof(int), sizeof(int), MPI_WIN_FLAVOR_CREATE);
    ring_exchange(win, memory, 0);
    MPI_OK(MPI_Win_free(&win));
    CHECK(win == MPI_WIN_NULL, "freed window not MPI_WIN_NULL");
    free(memory);

    /* allocate */
    int *base;
    MPI_OK(MPI_Win_allocate(N * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    check_attributes(win, base, N * sizeof(int), sizeof(int), MPI_WIN_FLAVOR_ALLOCATE);
    ring_exchange(win, base, 0);
    MPI_OK(MPI_Win_free(&win));

    /* allocate_shared: real shared memory, contiguous across ranks */
    MPI_OK(MPI_Win_allocate_shared(N * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    check_attributes(win, base, N * sizeof(int), sizeof(int), MPI_WIN_FLAVOR_SHARED);
    ring_exchange(win, base, 0);
    MPI_OK(MPI_Win_lock_all(0, win));
    for (int i = 0; i < N; i++) base[i] = 7 * g_rank + i;
    MPI_OK(MPI_Win_sync(win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Win_sync(win));
    for (int r = 0; r < g_size; r++) {
        MPI_Aint size;
        int unit;
        int *theirs;
        MPI_OK(MPI_Win_shared_query(win, r, &size, &unit, &theirs));
        CHECK(size == N * sizeof(int) && unit == sizeof(int), "rank %d: size %ld unit %d", r, (long)size, unit);
        if (r > 0) {
            int *previous;
            MPI_OK(MPI_Win_shared_query(win, r - 1, &size, &unit, &previous));
            CHECK(theirs == previous + N, "shared memory not contiguous at rank %d", r);
        }
        for (int i = 0; i < N; i++) CHECK(theirs[i] == 7 * r + i, "load from rank %d [%d] = %d", r, i, theirs[i]);
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Win_unlock_all(win));
    MPI_OK(MPI_Win_free(&win));

    /* dynamic: displacements are addresses */
    MPI_OK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    memory = malloc(N * sizeof(int));
    MPI_OK(MPI_Win_attach(win, memory, N * sizeof(int)));
    MPI_Aint address, *addresses = malloc(g_size * sizeof(MPI_Aint));
    MPI_OK(MPI_Get_address(memory, &address));
    MPI_OK(MPI_Allgather(&address, 1, MPI_AINT, addresses, 1, MPI_AINT, MPI_COMM_WORLD));
    int right = (g_rank + 1) % g_size;
    for (int i = 0; i < N; i++) memory[i] = 0;
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    int value = 4242 + g_rank;
    MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win));
    MPI_OK(MPI_Put(&value, 1, MPI_INT, right, addresses[right] + 5 * sizeof(int), 1, MPI_INT, win));
    MPI_OK(MPI_Win_unlock(right, win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    int left = (g_rank + g_size - 1) % g_size;
    CHECK(memory[5] == 4242 + left, "dynamic put: %d", memory[5]);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Win_detach(win, memory));
    MPI_OK(MPI_Win_free(&win));
    free(memory);
    free(addresses);
}

static void operations(void) {
    long long *base;
    MPI_Win win;
    MPI_OK(MPI_Win_allocate(N * sizeof(long long), sizeof(long long), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    for (int i = 0; i < N; i++) base[i] = i;
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    int target = (g_rank + 1) % g_size;
    long long ones[N], result[N];
    for (int i = 0; i < N; i++) ones[i] = 1;

    /* Accumulate SUM from every rank to every rank's [0..N) */
    MPI_OK(MPI_Win_fence(0, win));
    for (int r = 0; r < g_size; r++) MPI_OK(MPI_Accumulate(ones, N, MPI_LONG_LONG, r, 0, N, MPI_LONG_LONG, MPI_SUM, win));
    MPI_OK(MPI_Win_fence(0, win));
    for (int i = 0; i < N; i++) CHECK(base[i] == i + g_size, "sum [%d]=%lld", i, base[i]);

    /* MAX, then REPLACE, then Get_accumulate with NO_OP reads */
    MPI_OK(MPI_Win_fence(0, win));
    long long big = 1000 + g_rank;
    MPI_OK(MPI_Accumulate(&big, 1, MPI_LONG_LONG, 0, 3, 1, MPI_LONG_LONG, MPI_MAX, win));
    MPI_OK(MPI_Win_fence(0, win));
    if (g_rank == 0) CHECK(base[3] == 1000 + g_size - 1, "max %lld", base[3]);
    long long seven = 7;
    MPI_OK(MPI_Accumulate(&seven, 1, MPI_LONG_LONG, target, 4, 1, MPI_LONG_LONG, MPI_REPLACE, win));
    MPI_OK(MPI_Win_fence(0, win));
    CHECK(base[4] == 7, "replace %lld", base[4]);
    MPI_OK(MPI_Get_accumulate(NULL, 0, MPI_LONG_LONG, result, N, MPI_LONG_LONG, target, 0, N, MPI_LONG_LONG, MPI_NO_OP, win));
    MPI_OK(MPI_Win_fence(0, win));
    for (int i = 0; i < N; i++) {
        long long expect = i == 4 ? 7 : (i == 3 && target == 0) ? 1000 + g_size - 1 : i + g_size;
        CHECK(result[i] == expect, "no_op fetch [%d]=%lld want %lld", i, result[i], expect);
    }

    /* Get_accumulate PROD returns the old values */
    long long twos[N];
    for (int i = 0; i < N; i++) twos[i] = 2;
    MPI_OK(MPI_Win_fence(0, win));
    if (g_rank == 0) MPI_OK(MPI_Get_accumulate(twos, 2, MPI_LONG_LONG, result, 2, MPI_LONG_LONG, target, 10, 2, MPI_LONG_LONG, MPI_PROD, win));
    MPI_OK(MPI_Win_fence(0, win));
    if (g_rank == 0) CHECK(result[0] == 10 + g_size && result[1] == 11 + g_size, "old %lld %lld", result[0], result[1]);
    if (g_rank == (g_size > 1 ? 1 : 0)) CHECK(base[10] == 2 * (10 + g_size), "prod %lld", base[10]);

    /* Fetch_and_op and Compare_and_swap under a lock */
    MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, target, 0, win));
    long long old = -1, add = 5;
    MPI_OK(MPI_Fetch_and_op(&add, &old, MPI_LONG_LONG, target, 20, MPI_SUM, win));
    MPI_OK(MPI_Win_flush(target, win));
    CHECK(old == 20 + g_size, "fetch_and_op old %lld", old);
    long long compare = 20 + g_size + 5, swap = -99, was = 0;
    MPI_OK(MPI_Compare_and_swap(&swap, &compare, &was, MPI_LONG_LONG, target, 20, win));
    MPI_OK(MPI_Win_flush(target, win));
    CHECK(was == compare, "cas old %lld", was);
    long long wrong = 12345;
    MPI_OK(MPI_Compare_and_swap(&wrong, &wrong, &was, MPI_LONG_LONG, target, 20, win));
    MPI_OK(MPI_Win_unlock(target, win));
    CHECK(was == -99, "cas must not swap: old %lld", was);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    CHECK(base[20] == -99, "after cas %lld", base[20]);

    /* Request-based forms */
    MPI_OK(MPI_Win_lock_all(0, win));
    MPI_Request requests[3];
    long long forty = 40, got = 0, fetched = 0;
    MPI_OK(MPI_Rput(&forty, 1, MPI_LONG_LONG, target, 30, 1, MPI_LONG_LONG, win, &requests[0]));
    MPI_OK(MPI_Win_flush(target, win));
    MPI_OK(MPI_Rget(&got, 1, MPI_LONG_LONG, target, 30, 1, MPI_LONG_LONG, win, &requests[1]));
    MPI_OK(MPI_Raccumulate(&forty, 1, MPI_LONG_LONG, target, 30, 1, MPI_LONG_LONG, MPI_SUM, win, &requests[2]));
    MPI_OK(MPI_Waitall(3, requests, MPI_STATUSES_IGNORE));
    CHECK(got == 40, "rget %lld", got);
    MPI_OK(MPI_Rget_accumulate(&forty, 1, MPI_LONG_LONG, &fetched, 1, MPI_LONG_LONG, target, 30, 1, MPI_LONG_LONG, MPI_SUM, win, &requests[0]));
    MPI_OK(MPI_Wait(&requests[0], MPI_STATUS_IGNORE));
    CHECK(fetched == 80, "rget_accumulate %lld", fetched);
    MPI_OK(MPI_Win_unlock_all(win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    CHECK(base[30] == 120, "after R* %lld", base[30]);
    MPI_OK(MPI_Win_free(&win));
}

/* Origin and target datatypes of different layouts. */
static void derived(void) {
    int *base;
    MPI_Win win;
    MPI_OK(MPI_Win_allocate(4 * N * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    for (int i = 0; i < 4 * N; i++) base[i] = -1;
    MPI_Datatype every_other, block3;
    MPI_OK(MPI_Type_vector(N, 1, 2, MPI_INT, &every_other));
    MPI_OK(MPI_Type_commit(&every_other));
    int lengths[2] = {3, 5}, displacements[2] = {0, 10};
    MPI_OK(MPI_Type_indexed(2, lengths, displacements, MPI_INT, &block3));
    MPI_OK(MPI_Type_commit(&block3));
    int origin[2 * N];
    for (int i = 0; i < 2 * N; i++) origin[i] = 100 * g_rank + i;
    int target = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;

    MPI_OK(MPI_Win_fence(0, win));
    /* contiguous origin -> strided target */
    MPI_OK(MPI_Put(origin, N, MPI_INT, target, 0, 1, every_other, win));
    MPI_OK(MPI_Win_fence(0, win));
    for (int i = 0; i < N; i++) {
        CHECK(base[2 * i] == 100 * left + i, "strided put [%d]=%d", 2 * i, base[2 * i]);
        CHECK(base[2 * i + 1] == -1, "hole [%d]=%d", 2 * i + 1, base[2 * i + 1]);
    }
    /* contiguous target -> strided origin get */
    int strided[2 * N];
    for (int i = 0; i < 2 * N; i++) strided[i] = -7;
    MPI_OK(MPI_Get(strided, 1, every_other, target, 0, N, MPI_INT, win));
    MPI_OK(MPI_Win_fence(0, win));
    for (int i = 0; i < 2 * N; i++) {
        int want = i % 2 ? -7 : (i / 2 % 2 ? -1 : 100 * g_rank + i / 4);
        CHECK(strided[i] == want, "strided get [%d]=%d want %d", i, strided[i], want);
    }
    /* contiguous origin -> indexed target, accumulate */
    int gathered[8];
    MPI_OK(MPI_Accumulate(origin, 8, MPI_INT, target, 3 * N, 1, block3, MPI_SUM, win));
    MPI_OK(MPI_Win_fence(0, win));
    int expect_index[8] = {0, 1, 2, 10, 11, 12, 13, 14};
    for (int k = 0; k < 8; k++)
        CHECK(base[3 * N + expect_index[k]] == -1 + 100 * left + k, "indexed acc [%d]=%d", expect_index[k], base[3 * N + expect_index[k]]);
    CHECK(base[3 * N + 3] == -1, "indexed hole %d", base[3 * N + 3]);
    /* indexed target -> contiguous origin get */
    MPI_OK(MPI_Get(gathered, 8, MPI_INT, target, 3 * N, 1, block3, win));
    MPI_OK(MPI_Win_fence(0, win));
    for (int k = 0; k < 8; k++) CHECK(gathered[k] == -1 + 100 * g_rank + k, "indexed get [%d]=%d", k, gathered[k]);
    MPI_OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    MPI_OK(MPI_Type_free(&every_other));
    MPI_OK(MPI_Type_free(&block3));
    MPI_OK(MPI_Win_free(&win));
}

static void pscw(void) {
    int *base;
    MPI_Win win;
    MPI_OK(MPI_Win_allocate(g_size * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    for (int i = 0; i < g_size; i++) base[i] = -1;
    MPI_Group world, everyone;
    MPI_OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    MPI_OK(MPI_Win_get_group(win, &everyone));
    int comparison;
    MPI_OK(MPI_Group_compare(world, everyone, &comparison));
    CHECK(comparison == MPI_IDENT, "window group differs: %d", comparison);
    for (int round = 0; round < 3; round++) {
        MPI_OK(MPI_Win_post(everyone, 0, win));
        MPI_OK(MPI_Win_start(everyone, 0, win));
        for (int r = 0; r < g_size; r++) {
            int value = round * 100 + g_rank;
            MPI_OK(MPI_Put(&value, 1, MPI_INT, r, g_rank, 1, MPI_INT, win));
        }
        MPI_OK(MPI_Win_complete(win));
        if (round == 1) {
            int flag = 0;
            while (!flag) MPI_OK(MPI_Win_test(win, &flag));
        } else {
            MPI_OK(MPI_Win_wait(win));
        }
        for (int r = 0; r < g_size; r++) CHECK(base[r] == round * 100 + r, "round %d base[%d]=%d", round, r, base[r]);
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    }
    MPI_OK(MPI_Group_free(&world));
    MPI_OK(MPI_Group_free(&everyone));
    MPI_OK(MPI_Win_free(&win));
}

/* Many ranks update one counter: the total is exact. */
static void contention(void) {
    long long *base;
    MPI_Win win;
    const int rounds = 200;
    MPI_OK(MPI_Win_allocate(4 * sizeof(long long), sizeof(long long), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    base[0] = base[1] = base[2] = base[3] = 0;
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Win_lock_all(0, win));
    long long one = 1, old, seen_max = -1;
    for (int i = 0; i < rounds; i++) {
        MPI_OK(MPI_Fetch_and_op(&one, &old, MPI_LONG_LONG, 0, 0, MPI_SUM, win));
        MPI_OK(MPI_Accumulate(&one, 1, MPI_LONG_LONG, 0, 1, 1, MPI_LONG_LONG, MPI_SUM, win));
        MPI_OK(MPI_Win_flush(0, win));
        CHECK(old > seen_max, "fetch_and_op went backwards: %lld after %lld", old, seen_max);
        seen_max = old;
    }
    MPI_OK(MPI_Win_unlock_all(win));
    /* exclusive locks: read-modify-write with get + put is atomic under them */
    for (int i = 0; i < rounds / 4; i++) {
        long long value;
        MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        MPI_OK(MPI_Get(&value, 1, MPI_LONG_LONG, 0, 2, 1, MPI_LONG_LONG, win));
        MPI_OK(MPI_Win_flush(0, win));
        value += 1;
        MPI_OK(MPI_Put(&value, 1, MPI_LONG_LONG, 0, 2, 1, MPI_LONG_LONG, win));
        MPI_OK(MPI_Win_unlock(0, win));
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (g_rank == 0) {
        CHECK(base[0] == (long long)rounds * g_size, "fetch_and_op total %lld, expected %lld", base[0], (long long)rounds * g_size);
        CHECK(base[1] == (long long)rounds * g_size, "accumulate total %lld", base[1]);
        CHECK(base[2] == (long long)rounds / 4 * g_size, "exclusive-lock total %lld", base[2]);
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Win_free(&win));
}

/* The target computes outside MPI while others lock, accumulate and unlock. */
static void passive(void) {
    volatile long long *base;
    MPI_Win win;
    MPI_OK(MPI_Win_allocate(sizeof(long long), sizeof(long long), MPI_INFO_NULL, MPI_COMM_WORLD, (void *)&base, &win));
    *base = 0;
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    const long long per_rank = 50;
    if (g_rank == 0) {
        long long expected = per_rank * (g_size - 1);
        const char *wait_text = getenv("RMA_PASSIVE_WAIT_S");
        long wait_s = wait_text ? atol(wait_text) : 60;
        time_t start = time(NULL);
        while (*base != expected) {
            CHECK(time(NULL) - start < wait_s, "target outside MPI served %lld of %lld", *base, expected);
            __sync_synchronize();
        }
    } else {
        long long one = 1;
        for (int i = 0; i < per_rank; i++) {
            MPI_OK(MPI_Win_lock(i % 2 ? MPI_LOCK_SHARED : MPI_LOCK_EXCLUSIVE, 0, 0, win));
            MPI_OK(MPI_Accumulate(&one, 1, MPI_LONG_LONG, 0, 0, 1, MPI_LONG_LONG, MPI_SUM, win));
            MPI_OK(MPI_Win_unlock(0, win));
        }
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Win_free(&win));
}

/* Operations bigger than a frame: split and reassembled exactly. */
static void large(void) {
    const int count = 1 << 20; /* 4 MiB of ints */
    int *base;
    MPI_Win win;
    MPI_OK(MPI_Win_allocate((MPI_Aint)count * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    int *mine = malloc((size_t)count * sizeof(int)), *back = malloc((size_t)count * sizeof(int));
    for (int i = 0; i < count; i++) mine[i] = i ^ (g_rank << 24);
    int target = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
    MPI_OK(MPI_Win_fence(0, win));
    MPI_OK(MPI_Put(mine, count, MPI_INT, target, 0, count, MPI_INT, win));
    MPI_OK(MPI_Win_fence(0, win));
    for (int i = 0; i < count; i++) CHECK(base[i] == (i ^ (left << 24)), "large put [%d]=%d", i, base[i]);
    /* every rank has checked its memory before the next epoch updates it */
    MPI_OK(MPI_Win_fence(0, win));
    MPI_OK(MPI_Accumulate(mine, count, MPI_INT, target, 0, count, MPI_INT, MPI_BXOR, win));
    MPI_OK(MPI_Win_fence(0, win));
    MPI_OK(MPI_Get(back, count, MPI_INT, target, 0, count, MPI_INT, win));
    MPI_OK(MPI_Win_fence(0, win));
    /* at the target: my put (its left neighbour is me), then my xor: 0 */
    for (int i = 0; i < count; i++) CHECK(back[i] == 0, "large get [%d]=%d", i, back[i]);
    MPI_OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    free(mine);
    free(back);
    MPI_OK(MPI_Win_free(&win));
}

/* Large puts and gets on windows whose memory is the application's
 * (MPI_Win_create, and a dynamic window), where resmpi's target copies
 * straight from or into the origin's buffer on one host (single copy):
 * contiguous and strided origins and targets, fence and lock epochs, an
 * accumulate after a put in one epoch, and a get into a strided buffer.
 * Every result is checked exactly. */
static void single_copy(void) {
    const int count = 1 << 18; /* 1 MiB of ints */
    int *base = calloc((size_t)count, sizeof(int));
    int *mine = malloc((size_t)count * sizeof(int)), *back = malloc(2 * (size_t)count * sizeof(int));
    int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
    MPI_Win win;
    MPI_OK(MPI_Win_create(base, (MPI_Aint)count * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    for (int i = 0; i < count; i++) mine[i] = i * 3 + (g_rank << 22);
    /* contiguous put under fences */
    MPI_OK(MPI_Win_fence(0, win));
    MPI_OK(MPI_Put(mine, count, MPI_INT, right, 0, count, MPI_INT, win));
    MPI_OK(MPI_Win_fence(0, win));
    for (int i = 0; i < count; i++) CHECK(base[i] == i * 3 + (left << 22), "put [%d]=%d", i, base[i]);
    MPI_OK(MPI_Win_fence(0, win));
    /* strided origin (every other int of `mine`) into a contiguous target
     * half, then a contiguous origin into a strided target (odd slots of
     * the other half), in one fence epoch */
    MPI_Datatype every_other;
    MPI_OK(MPI_Type_vector(count / 4, 1, 2, MPI_INT, &every_other));
    MPI_OK(MPI_Type_commit(&every_other));
    MPI_OK(MPI_Put(mine, 1, every_other, right, 0, count / 4, MPI_INT, win));
    MPI_OK(MPI_Put(mine, count / 4, MPI_INT, right, count / 2 + 1, 1, every_other, win));
    MPI_OK(MPI_Win_fence(0, win));
    for (int i = 0; i < count / 4; i++) {
        CHECK(base[i] == 2 * i * 3 + (left << 22), "strided origin [%d]=%d", i, base[i]);
        CHECK(base[count / 2 + 1 + 2 * i] == i * 3 + (left << 22), "strided target [%d]=%d", i,
              base[count / 2 + 1 + 2 * i]);
        CHECK(base[count / 2 + 2 * i] == (count / 2 + 2 * i) * 3 + (left << 22), "between [%d]=%d", i,
              base[count / 2 + 2 * i]);
    }
    MPI_OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    /* passive: get the right neighbour's window whole, then into a strided
     * buffer (even slots of `back`); a put and an accumulate on other
     * places in the same epoch */
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    memset(back, 0xff, 2 * (size_t)count * sizeof(int));
    MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win));
    MPI_OK(MPI_Get(back, count, MPI_INT, right, 0, count, MPI_INT, win));
    MPI_OK(MPI_Win_unlock(right, win));
    MPI_Datatype strided_count;
    MPI_OK(MPI_Type_vector(count / 2, 1, 2, MPI_INT, &strided_count));
    MPI_OK(MPI_Type_commit(&strided_count));
    int *spread = back + count;
    for (int i = 0; i < count; i++) spread[i] = -7;
    MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win));
    MPI_OK(MPI_Get(spread, 1, strided_count, right, 0, count / 2, MPI_INT, win));
    MPI_OK(MPI_Win_unlock(right, win));
    /* what the right neighbour's window holds: its left neighbour is me */
    for (int i = 0; i < count; i++) {
        int expected;
        if (i < count / 4) expected = 2 * i * 3 + (g_rank << 22);
        else if (i > count / 2 && (i - count / 2) % 2 == 1 && (i - count / 2 - 1) / 2 < count / 4)
            expected = ((i - count / 2 - 1) / 2) * 3 + (g_rank << 22);
        else expected = i * 3 + (g_rank << 22);
        CHECK(back[i] == expected, "get [%d]=%d, expected %d", i, back[i], expected);
        if (i < count / 2) CHECK(spread[2 * i] == expected, "strided get [%d]=%d", i, spread[2 * i]);
        if (i < count / 2) CHECK(spread[2 * i + 1] == -7, "strided get wrote a gap [%d]", 2 * i + 1);
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    for (int i = 0; i < count; i++) mine[i] = i;
    MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win));
    MPI_OK(MPI_Put(mine, count / 2, MPI_INT, right, 0, count / 2, MPI_INT, win));
    MPI_OK(MPI_Accumulate(mine, count / 2, MPI_INT, right, count / 2, count / 2, MPI_INT, MPI_SUM, win));
    MPI_OK(MPI_Win_unlock(right, win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, g_rank, 0, win));
    for (int i = 0; i < count / 2; i++) {
        CHECK(base[i] == i, "passive put [%d]=%d", i, base[i]);
        int before = (i > 0 && i % 2 == 1 && (i - 1) / 2 < count / 4) ? ((i - 1) / 2) * 3 + (left << 22)
                                                                   : (count / 2 + i) * 3 + (left << 22);
        CHECK(base[count / 2 + i] == before + i, "accumulate [%d]=%d, expected %d", i, base[count / 2 + i],
              before + i);
    }
    MPI_OK(MPI_Win_unlock(g_rank, win));
    MPI_OK(MPI_Type_free(&every_other));
    MPI_OK(MPI_Type_free(&strided_count));
    MPI_OK(MPI_Win_free(&win));
    /* a dynamic window: addresses travel by allgather */
    MPI_OK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    MPI_OK(MPI_Win_attach(win, base, (MPI_Aint)count * sizeof(int)));
    MPI_Aint mine_address, *addresses = malloc((size_t)g_size * sizeof(MPI_Aint));
    MPI_OK(MPI_Get_address(base, &mine_address));
    MPI_OK(MPI_Allgather(&mine_address, 1, MPI_AINT, addresses, 1, MPI_AINT, MPI_COMM_WORLD));
    for (int i = 0; i < count; i++) mine[i] = ~i ^ g_rank;
    MPI_OK(MPI_Win_fence(0, win));
    MPI_OK(MPI_Put(mine, count, MPI_INT, right, addresses[right], count, MPI_INT, win));
    MPI_OK(MPI_Win_fence(0, win));
    for (int i = 0; i < count; i++) CHECK(base[i] == (~i ^ left), "dynamic put [%d]=%d", i, base[i]);
    MPI_OK(MPI_Win_fence(0, win));
    MPI_OK(MPI_Get(back, count, MPI_INT, left, addresses[left], count, MPI_INT, win));
    MPI_OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    /* the left neighbour's window got its own left neighbour's ints */
    int left_of_left = (left + g_size - 1) % g_size;
    for (int i = 0; i < count; i++) CHECK(back[i] == (~i ^ left_of_left), "dynamic get [%d]=%d", i, back[i]);
    MPI_OK(MPI_Win_detach(win, base));
    MPI_OK(MPI_Win_free(&win));
    free(addresses);
    free(base);
    free(mine);
    free(back);
}

/* Fence and passive epochs over the reliable links while a rail goes down
 * (tests/test_rma.py, two namespace hosts): usage rma rails ITERATIONS.
 * Each iteration: a fence epoch (put to the right neighbour, accumulate on
 * it, get it back), checked exactly; then an exclusive lock on rank 0
 * (accumulate of the block, fetch_and_op on a counter). Rank 0 prints
 * "started" after the first iteration, and at the end checks its window and
 * prints a digest of it, the same for every correct run. */
static void rails(int iterations) {
    const int count = 16384; /* 64 KiB per operation: several frames */
    /* two blocks and a counter, padded to 16 B: Debian's MPICH 4.0.2 shifts
     * the shared-memory windows of higher ranks by the remainder when the
     * size is not a multiple of 8 (its own result was off by one element) */
    const size_t words = 2 * (size_t)count + 4;
    unsigned *base;
    MPI_Win win;
    MPI_OK(MPI_Win_allocate((MPI_Aint)(words * sizeof(unsigned)), sizeof(unsigned), MPI_INFO_NULL,
                            MPI_COMM_WORLD, &base, &win));
    memset(base, 0, words * sizeof(unsigned));
    unsigned *mine = malloc((size_t)count * sizeof(unsigned)), *back = malloc((size_t)count * sizeof(unsigned));
    int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    for (int it = 0; it < iterations; it++) {
        for (int i = 0; i < count; i++) mine[i] = (unsigned)i * 31u + (unsigned)it * 7u + (unsigned)g_rank;
        MPI_OK(MPI_Win_fence(MPI_MODE_NOPRECEDE, win));
        MPI_OK(MPI_Put(mine, count, MPI_UNSIGNED, right, 0, count, MPI_UNSIGNED, win));
        MPI_OK(MPI_Win_fence(0, win));
        for (int i = 0; i < count; i++) {
            unsigned expected = (unsigned)i * 31u + (unsigned)it * 7u + (unsigned)left;
            CHECK(base[i] == expected, "iteration %d: put [%d]=%u, expected %u", it, i, base[i], expected);
        }
        MPI_OK(MPI_Win_fence(0, win));
        MPI_OK(MPI_Accumulate(mine, count, MPI_UNSIGNED, right, 0, count, MPI_UNSIGNED, MPI_SUM, win));
        MPI_OK(MPI_Win_fence(0, win));
        MPI_OK(MPI_Get(back, count, MPI_UNSIGNED, right, 0, count, MPI_UNSIGNED, win));
        MPI_OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
        for (int i = 0; i < count; i++)
            CHECK(back[i] == 2u * mine[i], "iteration %d: get [%d]=%u, expected %u", it, i, back[i], 2u * mine[i]);
        unsigned one = 1, old;
        MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        MPI_OK(MPI_Accumulate(mine, count, MPI_UNSIGNED, 0, count, count, MPI_UNSIGNED, MPI_SUM, win));
        MPI_OK(MPI_Fetch_and_op(&one, &old, MPI_UNSIGNED, 0, 2 * count, MPI_SUM, win));
        MPI_OK(MPI_Win_unlock(0, win));
        if (it == 0 && g_rank == 0) {
            printf("started\n");
            fflush(stdout);
        }
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (g_rank == 0) {
        MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        unsigned long long digest = 1469598103934665603ull;
        for (int i = 0; i < count; i++) {
            unsigned expected = 0;
            for (int it = 0; it < iterations; it++)
                for (int r = 0; r < g_size; r++) expected += (unsigned)i * 31u + (unsigned)it * 7u + (unsigned)r;
            CHECK(base[count + i] == expected, "passive accumulate [%d]=%u, expected %u", i, base[count + i], expected);
            digest = (digest ^ base[count + i]) * 1099511628211ull;
        }
        CHECK(base[2 * count] == (unsigned)(iterations * g_size), "fetch_and_op counter %u, expected %d",
              base[2 * count], iterations * g_size);
        digest = (digest ^ base[2 * count]) * 1099511628211ull;
        MPI_OK(MPI_Win_unlock(0, win));
        printf("digest %016llx after %d iterations\n", digest, iterations);
        fflush(stdout);
    }
    free(mine);
    free(back);
    MPI_OK(MPI_Win_free(&win));
}

/* The MPI-4 large-count forms: MPI_Count counts, MPI_Aint displacement
 * units, the same results as the int forms; a count above INT_MAX is not
 * truncated (a truncating library would put one element and succeed). */
static void large_count(void) {
    int *base;
    MPI_Win win;
    MPI_OK(MPI_Win_allocate_c((MPI_Aint)N * sizeof(int), (MPI_Aint)sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD,
                              &base, &win));
    MPI_OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    for (int i = 0; i < N; i++) base[i] = 0;
    int mine[N], back[N], result[N];
    for (int i = 0; i < N; i++) mine[i] = i + 100 * g_rank;
    int target = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
    MPI_Count n = N;
    MPI_OK(MPI_Win_fence(0, win));
    MPI_OK(MPI_Put_c(mine, n, MPI_INT, target, 0, n, MPI_INT, win));
    MPI_OK(MPI_Win_fence(0, win));
    for (int i = 0; i < N; i++) CHECK(base[i] == i + 100 * left, "MPI_Put_c [%d]=%d", i, base[i]);
    MPI_OK(MPI_Win_fence(0, win));
    MPI_OK(MPI_Accumulate_c(mine, n, MPI_INT, target, 0, n, MPI_INT, MPI_SUM, win));
    MPI_OK(MPI_Win_fence(0, win));
    MPI_OK(MPI_Get_c(back, n, MPI_INT, target, 0, n, MPI_INT, win));
    MPI_OK(MPI_Win_fence(0, win));
    for (int i = 0; i < N; i++) CHECK(back[i] == 2 * mine[i], "MPI_Accumulate_c/MPI_Get_c [%d]=%d", i, back[i]);
    MPI_OK(MPI_Get_accumulate_c(mine, n, MPI_INT, result, n, MPI_INT, target, 0, n, MPI_INT, MPI_SUM, win));
    MPI_OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    for (int i = 0; i < N; i++) CHECK(result[i] == 2 * mine[i], "MPI_Get_accumulate_c [%d]=%d", i, result[i]);
    /* request-based forms in a passive epoch */
    MPI_Request requests[2];
    MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, target, 0, win));
    MPI_OK(MPI_Rget_c(back, n, MPI_INT, target, 0, n, MPI_INT, win, &requests[0]));
    MPI_OK(MPI_Wait(&requests[0], MPI_STATUS_IGNORE));
    for (int i = 0; i < N; i++) CHECK(back[i] == 3 * mine[i], "MPI_Rget_c [%d]=%d", i, back[i]);
    MPI_OK(MPI_Rput_c(mine, n, MPI_INT, target, 0, n, MPI_INT, win, &requests[0]));
    MPI_OK(MPI_Wait(&requests[0], MPI_STATUS_IGNORE));
    MPI_OK(MPI_Win_flush(target, win));
    MPI_OK(MPI_Raccumulate_c(mine, n, MPI_INT, target, 0, n, MPI_INT, MPI_SUM, win, &requests[0]));
    MPI_OK(MPI_Rget_accumulate_c(NULL, 0, MPI_INT, result, n, MPI_INT, target, 0, n, MPI_INT, MPI_NO_OP, win,
                                 &requests[1]));
    MPI_OK(MPI_Waitall(2, requests, MPI_STATUSES_IGNORE));
    MPI_OK(MPI_Win_unlock(target, win));
    for (int i = 0; i < N; i++) CHECK(result[i] == 2 * mine[i], "MPI_Rget_accumulate_c [%d]=%d", i, result[i]);
    MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, target, 0, win));
#ifdef RESMPI_VERSION /* Debian's MPICH 4.0.2 returns MPI_SUCCESS for this put past the window */
    MPI_Count huge = ((MPI_Count)1 << 32) + 1;
    EXPECT_CLASS(MPI_Put_c(mine, huge, MPI_INT, target, 0, huge, MPI_INT, win), MPI_ERR_RMA_RANGE);
#endif
    EXPECT_CLASS(MPI_Get_c(back, -1, MPI_INT, target, 0, -1, MPI_INT, win), MPI_ERR_COUNT);
    MPI_OK(MPI_Win_unlock(target, win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Win_free(&win));

    /* MPI_Win_create_c over the application's memory */
    int memory[N];
    for (int i = 0; i < N; i++) memory[i] = -1;
    MPI_OK(MPI_Win_create_c(memory, (MPI_Aint)sizeof memory, (MPI_Aint)sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD,
                            &win));
    MPI_OK(MPI_Win_fence(0, win));
    MPI_OK(MPI_Put_c(&mine[1], 1, MPI_INT, target, N - 1, 1, MPI_INT, win));
    MPI_OK(MPI_Win_fence(0, win));
    CHECK(memory[N - 1] == 1 + 100 * left && memory[0] == -1, "MPI_Win_create_c: [%d]=%d, [0]=%d", N - 1,
          memory[N - 1], memory[0]);
    MPI_OK(MPI_Win_free(&win));

    /* MPI_Win_allocate_shared_c and MPI_Win_shared_query_c */
    MPI_Comm node;
    MPI_OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    int node_rank;
    MPI_OK(MPI_Comm_rank(node, &node_rank));
    long long *mine_shared;
    MPI_OK(MPI_Win_allocate_shared_c((MPI_Aint)(node_rank + 1) * sizeof(long long), (MPI_Aint)sizeof(long long),
                                     MPI_INFO_NULL, node, &mine_shared, &win));
    mine_shared[0] = 1000 + node_rank;
    MPI_OK(MPI_Win_fence(0, win));
    MPI_Aint size = -1, disp_unit = -1;
    long long *first;
    MPI_OK(MPI_Win_shared_query_c(win, 0, &size, &disp_unit, &first));
    CHECK(size == (MPI_Aint)sizeof(long long) && disp_unit == (MPI_Aint)sizeof(long long),
          "MPI_Win_shared_query_c: size %ld, disp_unit %ld", (long)size, (long)disp_unit);
    CHECK(first[0] == 1000, "rank 0's shared memory holds %lld", first[0]);
    MPI_OK(MPI_Win_fence(0, win));
    MPI_OK(MPI_Win_free(&win));
    MPI_OK(MPI_Comm_free(&node));
}

/* An operation on the origin's own window is applied before anything that
 * follows it causally (mpi4py's MCS mutex depends on it): each round rank 0
 * resets its slot with an accumulate, tells rank 1, and rank 1 writes the
 * slot; the slot must end with rank 1's value. Rank 0 makes no MPI call
 * for a while after telling, so rank 1's write is waiting when it next
 * progresses (deterministic with RESMPI_PROGRESS_THREAD=off). */
static void self_order(void) {
    int *base;
    MPI_Win win;
    MPI_OK(MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    *base = -2;
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Win_lock_all(0, win));
    for (int round = 0; round < 20 && g_size > 1; round++) {
        int value = round;
        if (g_rank == 0) {
            int reset = -1;
            MPI_OK(MPI_Accumulate(&reset, 1, MPI_INT, 0, 0, 1, MPI_INT, MPI_REPLACE, win));
            MPI_OK(MPI_Send(&value, 1, MPI_INT, 1, 0, MPI_COMM_WORLD));
            struct timespec pause = {0, 20 * 1000 * 1000};
            nanosleep(&pause, NULL);
            MPI_OK(MPI_Recv(&value, 1, MPI_INT, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            MPI_OK(MPI_Win_flush(0, win));
            MPI_OK(MPI_Win_sync(win));
            CHECK(*base == round, "round %d: slot %d (own reset applied after rank 1's write)", round, *base);
        } else if (g_rank == 1) {
            MPI_OK(MPI_Recv(&value, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            MPI_OK(MPI_Accumulate(&value, 1, MPI_INT, 0, 0, 1, MPI_INT, MPI_REPLACE, win));
            MPI_OK(MPI_Win_flush(0, win));
            MPI_OK(MPI_Send(&value, 1, MPI_INT, 0, 1, MPI_COMM_WORLD));
        }
    }
    MPI_OK(MPI_Win_unlock_all(win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Win_free(&win));
}

static int handler_calls, handler_code;
static void window_handler(MPI_Win *win, int *code, ...) {
    (void)win;
    handler_calls++;
    handler_code = *code;
}
static int deletes;
static int count_delete(MPI_Win win, int keyval, void *value, void *extra) {
    (void)win; (void)keyval; (void)extra;
    deletes += *(int *)value;
    return MPI_SUCCESS;
}

static void errors(void) {
    errors_return();
    int *base;
    MPI_Win win;
    MPI_OK(MPI_Win_allocate(N * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    MPI_OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    int value = 1, cls;
    EXPECT_CLASS(MPI_Put(&value, 1, MPI_INT, 0, 0, 1, MPI_INT, win), MPI_ERR_RMA_SYNC);
    EXPECT_CLASS(MPI_Win_unlock(0, win), MPI_ERR_RMA_SYNC);
    EXPECT_CLASS(MPI_Win_complete(win), MPI_ERR_RMA_SYNC);
    EXPECT_CLASS(MPI_Win_wait(win), MPI_ERR_RMA_SYNC);
    EXPECT_CLASS(MPI_Win_flush(0, win), MPI_ERR_RMA_SYNC);
    EXPECT_CLASS(MPI_Put(&value, 1, MPI_INT, 0, 0, 1, MPI_INT, MPI_WIN_NULL), MPI_ERR_WIN);
    EXPECT_CLASS(MPI_Win_fence(0, MPI_WIN_NULL), MPI_ERR_WIN);
    EXPECT_CLASS(MPI_Win_lock(99, 0, 0, win), MPI_ERR_LOCKTYPE);
    MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    EXPECT_CLASS(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win), MPI_ERR_RMA_SYNC);
    EXPECT_CLASS(MPI_Put(&value, 1, MPI_INT, g_size, 0, 1, MPI_INT, win), MPI_ERR_RANK);
    EXPECT_CLASS(MPI_Put(&value, 1, MPI_INT, -5, 0, 1, MPI_INT, win), MPI_ERR_RANK);
    EXPECT_CLASS(MPI_Put(&value, 1, MPI_INT, 0, N, 1, MPI_INT, win), MPI_ERR_RMA_RANGE);
    EXPECT_CLASS(MPI_Get(&value, 1, MPI_INT, 0, -1, 1, MPI_INT, win), MPI_ERR_DISP);
    EXPECT_CLASS(MPI_Accumulate(&value, 2, MPI_INT, 0, N - 1, 2, MPI_INT, MPI_SUM, win), MPI_ERR_RMA_RANGE);
    EXPECT_CLASS(MPI_Put(&value, 2, MPI_INT, 0, 0, 1, MPI_INT, win), MPI_ERR_TYPE);
    EXPECT_CLASS(MPI_Win_shared_query(win, 0, NULL, NULL, NULL), MPI_ERR_RMA_FLAVOR);
    EXPECT_CLASS(MPI_Win_attach(win, base, 4), MPI_ERR_RMA_FLAVOR);
    MPI_Op user;
    MPI_OK(MPI_Op_create((MPI_User_function *)window_handler, 1, &user));
    EXPECT_CLASS(MPI_Accumulate(&value, 1, MPI_INT, 0, 0, 1, MPI_INT, user, win), MPI_ERR_OP);
    MPI_OK(MPI_Op_free(&user));
    /* the failed calls left the epoch usable */
    MPI_OK(MPI_Put(&value, 1, MPI_INT, 0, 0, 1, MPI_INT, win));
    MPI_OK(MPI_Win_unlock(0, win));
    MPI_OK(MPI_Win_free(&win));
    EXPECT_CLASS(MPI_Win_free(&win), MPI_ERR_WIN);
    EXPECT_CLASS(MPI_Win_create(base, -1, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win), MPI_ERR_SIZE);

    /* a user error handler gets the error; MPI_Win_call_errhandler reaches it */
    MPI_Errhandler handler;
    MPI_OK(MPI_Win_create_errhandler(window_handler, &handler));
    MPI_OK(MPI_Win_create(base, N * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    MPI_OK(MPI_Win_set_errhandler(win, handler));
    MPI_Errhandler current;
    MPI_OK(MPI_Win_get_errhandler(win, &current));
    CHECK(current == handler, "get_errhandler");
    int rc = MPI_Put(&value, 1, MPI_INT, 0, 0, 1, MPI_INT, win);
    CHECK(rc != MPI_SUCCESS && handler_calls == 1, "handler calls %d rc %d", handler_calls, rc);
    MPI_OK(MPI_Error_class(handler_code, &cls));
    CHECK(cls == MPI_ERR_RMA_SYNC, "handler got class %d", cls);
    MPI_OK(MPI_Win_call_errhandler(win, MPI_ERR_OTHER));
    CHECK(handler_calls == 2 && handler_code == MPI_ERR_OTHER, "call_errhandler %d %d", handler_calls, handler_code);

    /* names, info, attributes with delete callbacks */
    char name[MPI_MAX_OBJECT_NAME];
    int length;
    MPI_OK(MPI_Win_set_name(win, "ring window"));
    MPI_OK(MPI_Win_get_name(win, name, &length));
    CHECK(strcmp(name, "ring window") == 0 && length == 11, "name '%s'", name);
    MPI_Info info;
    MPI_OK(MPI_Win_get_info(win, &info));
    int nkeys;
    MPI_OK(MPI_Info_get_nkeys(info, &nkeys));
    CHECK(nkeys >= 1, "info keys %d", nkeys);
    MPI_OK(MPI_Info_free(&info));
    int keyval, one = 1, two = 2, flag;
    void *got;
    MPI_OK(MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, count_delete, &keyval, NULL));
    MPI_OK(MPI_Win_set_attr(win, keyval, &one));
    MPI_OK(MPI_Win_set_attr(win, keyval, &two));
    CHECK(deletes == 1, "replacing an attribute deletes the old: %d", deletes);
    MPI_OK(MPI_Win_get_attr(win, keyval, &got, &flag));
    CHECK(flag && got == &two, "get_attr");
    MPI_OK(MPI_Win_free(&win));
    CHECK(deletes == 3, "freeing the window deletes its attributes: %d", deletes);
    MPI_OK(MPI_Win_free_keyval(&keyval));
    MPI_OK(MPI_Errhandler_free(&handler));
}

/* What MPICH's suite found: pair types with holes in derived types,
 * long double accumulates (aligned kernels), an access across two adjacent
 * attached regions, zero-byte operations with any datatypes. */
typedef struct { short value; int index; } short_int_t;
static void edges(void) {
    short_int_t *pairs;
    MPI_Win win;
    const int count = 12;
    MPI_OK(MPI_Win_allocate(count * sizeof(short_int_t), sizeof(short_int_t), MPI_INFO_NULL, MPI_COMM_WORLD, &pairs, &win));
    for (int i = 0; i < count; i++) { pairs[i].value = -1; pairs[i].index = -1; }
    MPI_Datatype every_third;
    MPI_OK(MPI_Type_vector(4, 2, 3, MPI_SHORT_INT, &every_third));
    MPI_OK(MPI_Type_commit(&every_third));
    short_int_t mine[8];
    for (int i = 0; i < 8; i++) { mine[i].value = (short)(10 * g_rank + i); mine[i].index = g_rank; }
    MPI_OK(MPI_Win_fence(0, win));
    MPI_OK(MPI_Accumulate(mine, 8, MPI_SHORT_INT, 0, 0, 1, every_third, MPI_MAXLOC, win));
    MPI_OK(MPI_Win_fence(0, win));
    if (g_rank == 0) {
        for (int i = 0, k = 0; i < count; i++) {
            if (i % 3 == 2) {
                CHECK(pairs[i].value == -1 && pairs[i].index == -1, "hole %d touched", i);
                continue;
            }
            CHECK(pairs[i].value == 10 * (g_size - 1) + k && pairs[i].index == g_size - 1,
                  "maxloc [%d] = (%d, %d)", i, pairs[i].value, pairs[i].index);
            k++;
        }
    }
    MPI_OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    MPI_OK(MPI_Type_free(&every_third));
    MPI_OK(MPI_Win_free(&win));

    long double *sums;
    MPI_OK(MPI_Win_allocate(2 * sizeof(long double), sizeof(long double), MPI_INFO_NULL, MPI_COMM_WORLD, &sums, &win));
    sums[0] = sums[1] = 0;
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Win_lock_all(0, win));
    long double half = 0.5L, old;
    for (int i = 0; i < 10; i++) MPI_OK(MPI_Fetch_and_op(&half, &old, MPI_LONG_DOUBLE, 0, 1, MPI_SUM, win));
    MPI_OK(MPI_Win_unlock_all(win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (g_rank == 0) CHECK(sums[1] == 5.0L * g_size, "long double sum %Lf", sums[1]);
    MPI_OK(MPI_Win_free(&win));

    MPI_OK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    int *memory = malloc(2 * N * sizeof(int));
    for (int i = 0; i < 2 * N; i++) memory[i] = -1;
    MPI_OK(MPI_Win_attach(win, memory, N * sizeof(int)));
    MPI_OK(MPI_Win_attach(win, memory + N, N * sizeof(int)));
    MPI_Aint address, *addresses = malloc(g_size * sizeof(MPI_Aint));
    MPI_OK(MPI_Get_address(memory, &address));
    MPI_OK(MPI_Allgather(&address, 1, MPI_AINT, addresses, 1, MPI_AINT, MPI_COMM_WORLD));
    int across[N];
    for (int i = 0; i < N; i++) across[i] = g_rank * 1000 + i;
    int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
    MPI_OK(MPI_Win_fence(0, win));
    MPI_OK(MPI_Put(across, N, MPI_INT, right, addresses[right] + N / 2 * sizeof(int), N, MPI_INT, win));
    /* zero bytes: any datatypes, even mismatched, and NULL buffers */
    MPI_OK(MPI_Put(NULL, 0, MPI_INT, right, addresses[right], 0, MPI_DOUBLE, win));
    MPI_OK(MPI_Accumulate(NULL, 0, MPI_DOUBLE, right, addresses[right], 0, MPI_INT, MPI_SUM, win));
    MPI_OK(MPI_Get_accumulate(NULL, 0, MPI_INT, NULL, 0, MPI_INT, right, addresses[right], 0, MPI_SHORT, MPI_SUM, win));
    MPI_OK(MPI_Win_fence(0, win));
    for (int i = 0; i < 2 * N; i++) {
        int want = i >= N / 2 && i < N / 2 + N ? left * 1000 + i - N / 2 : -1;
        CHECK(memory[i] == want, "across regions [%d]=%d want %d", i, memory[i], want);
    }
    MPI_OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    MPI_OK(MPI_Win_detach(win, memory));
    /* detached: the first half is no longer in the window */
    MPI_OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    EXPECT_CLASS(MPI_Win_detach(win, memory), MPI_ERR_RMA_ATTACH);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD)); /* every rank has detached */
    MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win));
    MPI_OK(MPI_Put(across, 1, MPI_INT, right, addresses[right], 1, MPI_INT, win));
    EXPECT_CLASS(MPI_Win_unlock(right, win), MPI_ERR_RMA_RANGE);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Win_detach(win, memory + N));
    MPI_OK(MPI_Win_free(&win));
    free(memory);
    free(addresses);
}

/* Under ULFM: the last rank dies; synchronising with it fails with
 * MPIX_ERR_PROC_FAILED instead of hanging, and windows among the
 * survivors keep working. */
static void failure(void) {
    long long *base;
    MPI_Win win;
    MPI_OK(MPI_Win_allocate(sizeof(long long), sizeof(long long), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    MPI_OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    *base = 0;
    int victim = g_size - 1;
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (g_rank == victim) raise(SIGKILL);
    long long one = 1;
    int rc = MPI_SUCCESS, cls = MPI_SUCCESS;
    /* until the death is noticed an epoch may still succeed */
    for (int i = 0; i < 100000 && rc == MPI_SUCCESS; i++) {
        rc = MPI_Win_lock(MPI_LOCK_SHARED, victim, 0, win);
        if (rc == MPI_SUCCESS) {
            MPI_Accumulate(&one, 1, MPI_LONG_LONG, victim, 0, 1, MPI_LONG_LONG, MPI_SUM, win);
            rc = MPI_Win_unlock(victim, win);
        }
    }
    MPI_OK(MPI_Error_class(rc, &cls));
    CHECK(cls == MPIX_ERR_PROC_FAILED, "epoch toward a dead rank: class %d", cls);
    /* the window still serves this survivor's own epochs */
    long long before = *base;
    MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, g_rank, 0, win));
    MPI_OK(MPI_Accumulate(&one, 1, MPI_LONG_LONG, g_rank, 0, 1, MPI_LONG_LONG, MPI_SUM, win));
    MPI_OK(MPI_Win_unlock(g_rank, win));
    CHECK(*base == before + 1, "own window after the death: %lld", *base);
    printf("rank %d: survived with class %d\n", g_rank, cls);
    fflush(stdout);
    exit(0);
}

/* Under ULFM the last rank dies holding an exclusive lock on rank 0's
 * window: its lock goes with it, and the survivors' epochs on rank 0
 * complete instead of waiting for an unlock that never comes. */
static void failure_holder(void) {
    long long *base;
    MPI_Win win;
    MPI_OK(MPI_Win_allocate(2 * sizeof(long long), sizeof(long long), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    MPI_OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    base[0] = base[1] = 0;
    int victim = g_size - 1;
    long long one = 1, old = -1;
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (g_rank == victim) {
        MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        MPI_OK(MPI_Accumulate(&one, 1, MPI_LONG_LONG, 0, 1, 1, MPI_LONG_LONG, MPI_SUM, win));
        MPI_OK(MPI_Win_flush(0, win)); /* applied, so the lock is held */
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        raise(SIGKILL);
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD)); /* the victim holds the lock */
    MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
    MPI_OK(MPI_Fetch_and_op(&one, &old, MPI_LONG_LONG, 0, 0, MPI_SUM, win));
    MPI_OK(MPI_Win_unlock(0, win));
    CHECK(old >= 0 && old < g_size - 1, "fetch_and_op returned %lld", old);
    if (g_rank == 0) {
        long long survivors = g_size - 1, seen = 0, applied = 0;
        time_t start = time(NULL);
        while (seen != survivors) {
            MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
            seen = base[0];
            applied = base[1];
            MPI_OK(MPI_Win_unlock(0, win));
            CHECK(time(NULL) - start < 30, "counter %lld of %lld survivors", seen, survivors);
        }
        CHECK(applied == 1, "the dead holder's flushed accumulate: %lld", applied);
    }
    /* a fence needs every member: it fails rather than waits */
    int rc = MPI_Win_fence(0, win), cls = MPI_SUCCESS;
    MPI_OK(MPI_Error_class(rc, &cls));
    CHECK(cls == MPIX_ERR_PROC_FAILED, "fence with a dead member: class %d", cls);
    printf("rank %d: locked rank 0 after the holder died\n", g_rank);
    fflush(stdout);
    exit(0);
}

/* A put with no epoch under MPI_ERRORS_ARE_FATAL: the job ends. */
static void fatal(void) {
    int *base, value = 1;
    MPI_Win win;
    MPI_OK(MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win));
    MPI_Put(&value, 1, MPI_INT, 0, 0, 1, MPI_INT, win);
    FAIL("MPI_Put outside an epoch returned under MPI_ERRORS_ARE_FATAL");
}

/* Large puts and gets over the network whose bytes go without a staging
 * copy in resmpi (lent from the origin's buffer or the window, read from
 * the socket straight into the window or the origin's buffer): sizes
 * just under, at and over the 16 KiB threshold and over several 1 MiB
 * frames, at an odd displacement between sentinels (a byte off shows),
 * in fence and lock epochs, an accumulate after a flushed put, origins
 * and targets strided in blocks above the threshold, gets into a strided
 * buffer, a dynamic window (and a put past its region: a clear error,
 * nothing written), and the origin buffer overwritten right after each
 * synchronisation (a view the library still held would show). */
static int zc_value(int rank, int i, int round) { return i * 7 + (rank << 24) + round; }

static void zero_copy(void) {
    const int sizes[] = {4095, 4096, 4097, 65536, (1 << 18) + 3, (3 << 18) + 1};
    const int window_ints = (3 << 18) + 64, block = 4096 + 1, stride = 4096 + 9;
    int *base = calloc((size_t)window_ints, sizeof(int));
    int *mine = malloc((size_t)window_ints * sizeof(int)), *back = malloc(2 * (size_t)window_ints * sizeof(int));
    int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
    MPI_Win win;
    MPI_OK(MPI_Win_create(base, (MPI_Aint)window_ints * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    for (int round = 0; round < (int)(sizeof sizes / sizeof sizes[0]); round++) {
        int n = sizes[round];
        for (int i = 0; i < window_ints; i++) base[i] = -1;
        for (int i = 0; i < n; i++) mine[i] = zc_value(g_rank, i, round);
        /* fence: a put at displacement 3, the buffer reused at once after */
        MPI_OK(MPI_Win_fence(0, win));
        MPI_OK(MPI_Put(mine, n, MPI_INT, right, 3, n, MPI_INT, win));
        MPI_OK(MPI_Win_fence(0, win));
        for (int i = 0; i < n; i++) mine[i] = -2;
        CHECK(base[2] == -1 && base[3 + n] == -1, "size %d: put wrote a sentinel (%d, %d)", n, base[2], base[3 + n]);
        for (int i = 0; i < n; i++)
            CHECK(base[3 + i] == zc_value(left, i, round), "size %d: put [%d]=%d", n, i, base[3 + i]);
        MPI_OK(MPI_Win_fence(0, win));
        /* lock: a put, flushed, then an accumulate onto it; a get back */
        for (int i = 0; i < n; i++) mine[i] = zc_value(g_rank, i, round + 1);
        MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win));
        MPI_OK(MPI_Put(mine, n, MPI_INT, right, 5, n, MPI_INT, win));
        MPI_OK(MPI_Win_flush_local(right, win));
        for (int i = 0; i < n; i++) mine[i] = -3;
        MPI_OK(MPI_Win_flush(right, win));
        for (int i = 0; i < n; i++) mine[i] = zc_value(g_rank, i, round + 1);
        MPI_OK(MPI_Accumulate(mine, n, MPI_INT, right, 5, n, MPI_INT, MPI_SUM, win));
        MPI_OK(MPI_Win_flush(right, win));
        for (int i = 0; i < n + 2; i++) back[i] = -4;
        MPI_OK(MPI_Get(back + 1, n, MPI_INT, right, 5, n, MPI_INT, win));
        MPI_OK(MPI_Win_unlock(right, win));
        CHECK(back[0] == -4 && back[n + 1] == -4, "size %d: get wrote a sentinel", n);
        for (int i = 0; i < n; i++)
            CHECK(back[1 + i] == 2 * zc_value(g_rank, i, round + 1), "size %d: get [%d]=%d", n, i, back[1 + i]);
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        /* MPI_Rput: its buffer overwritten and freed as soon as its request
         * completes, before the epoch ends */
        int *scratch = malloc((size_t)n * sizeof(int));
        for (int i = 0; i < n; i++) scratch[i] = zc_value(g_rank, i, round + 2);
        MPI_Request rput;
        MPI_OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win));
        MPI_OK(MPI_Rput(scratch, n, MPI_INT, right, 7, n, MPI_INT, win, &rput));
        MPI_OK(MPI_Wait(&rput, MPI_STATUS_IGNORE));
        for (int i = 0; i < n; i++) scratch[i] = -6;
        free(scratch);
        MPI_OK(MPI_Win_unlock(right, win));
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        for (int i = 0; i < n; i++)
            CHECK(base[7 + i] == zc_value(left, i, round + 2), "size %d: rput [%d]=%d", n, i, base[7 + i]);
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    }
    /* strided origin and target in blocks above the threshold */
    const int blocks = 40;
    MPI_Datatype spaced;
    MPI_OK(MPI_Type_vector(blocks, block, stride, MPI_INT, &spaced));
    MPI_OK(MPI_Type_commit(&spaced));
    for (int i = 0; i < window_ints; i++) base[i] = -1;
    for (int i = 0; i < blocks * stride; i++) mine[i] = zc_value(g_rank, i, 99);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win));
    MPI_OK(MPI_Put(mine, 1, spaced, right, 1, blocks * block, MPI_INT, win));
    MPI_OK(MPI_Put(mine, blocks * block, MPI_INT, right, 1 + blocks * stride, 1, spaced, win));
    MPI_OK(MPI_Win_unlock(right, win));
    for (int i = 0; i < blocks * stride; i++) mine[i] = -5;
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    for (int b = 0; b < blocks; b++)
        for (int j = 0; j < block; j++) {
            int packed = b * block + j, spread = b * stride + j;
            CHECK(base[1 + packed] == zc_value(left, spread, 99), "strided origin [%d]=%d", packed, base[1 + packed]);
            CHECK(base[1 + blocks * stride + spread] == zc_value(left, packed, 99), "strided target [%d]=%d", spread,
                  base[1 + blocks * stride + spread]);
        }
    CHECK(base[0] == -1 && base[1 + blocks * stride + stride - 1] == -1, "strided put wrote a gap");
    /* gets into a strided buffer, the window's bytes in packed order */
    for (int i = 0; i < blocks * stride; i++) back[i] = -6;
    MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win));
    MPI_OK(MPI_Get(back, 1, spaced, right, 1, blocks * block, MPI_INT, win));
    MPI_OK(MPI_Win_unlock(right, win));
    for (int b = 0; b < blocks; b++) {
        for (int j = 0; j < block; j++)
            CHECK(back[b * stride + j] == zc_value(g_rank, b * stride + j, 99), "strided get [%d]=%d",
                  b * stride + j, back[b * stride + j]);
        if (b + 1 < blocks) CHECK(back[b * stride + block] == -6, "strided get wrote a gap after block %d", b);
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Type_free(&spaced));
    MPI_OK(MPI_Win_free(&win));
    /* a dynamic window: addresses travel by allgather */
    const int n = (1 << 18) + 5;
    MPI_OK(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    for (int i = 0; i < n + 2; i++) base[i] = -1;
    MPI_OK(MPI_Win_attach(win, base, (MPI_Aint)(n + 2) * sizeof(int)));
    MPI_Aint address, *addresses = malloc((size_t)g_size * sizeof(MPI_Aint));
    MPI_OK(MPI_Get_address(base + 1, &address));
    MPI_OK(MPI_Allgather(&address, 1, MPI_AINT, addresses, 1, MPI_AINT, MPI_COMM_WORLD));
    for (int i = 0; i < n; i++) mine[i] = zc_value(g_rank, i, 7);
    MPI_OK(MPI_Win_lock_all(0, win));
    MPI_OK(MPI_Put(mine, n, MPI_INT, right, addresses[right], n, MPI_INT, win));
    MPI_OK(MPI_Win_flush_all(win));
    MPI_OK(MPI_Get(back, n, MPI_INT, right, addresses[right], n, MPI_INT, win));
    MPI_OK(MPI_Win_unlock_all(win));
    for (int i = 0; i < n; i++) CHECK(back[i] == zc_value(g_rank, i, 7), "dynamic get [%d]=%d", i, back[i]);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    CHECK(base[0] == -1 && base[n + 1] == -1, "dynamic put wrote a sentinel");
    for (int i = 0; i < n; i++) CHECK(base[1 + i] == zc_value(left, i, 7), "dynamic put [%d]=%d", i, base[1 + i]);
#ifdef RESMPI_VERSION /* MPI leaves such a put erroneous; resmpi promises the error */
    /* a large put that runs past the attached region: MPI_ERR_RMA_RANGE,
     * and nothing written, inside the region or past it */
    for (int i = n + 2; i < n + 64; i++) base[i] = -9;
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Win_lock_all(0, win));
    int rc = MPI_Put(mine, n, MPI_INT, right, addresses[right] + 40 * (MPI_Aint)sizeof(int), n, MPI_INT, win);
    if (rc == MPI_SUCCESS) rc = MPI_Win_flush(right, win);
    int error_class = MPI_SUCCESS;
    MPI_OK(MPI_Error_class(rc, &error_class));
    CHECK(error_class == MPI_ERR_RMA_RANGE, "put past a dynamic region: class %d, expected MPI_ERR_RMA_RANGE", error_class);
    MPI_OK(MPI_Win_unlock_all(win));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    for (int i = 0; i < n; i++)
        CHECK(base[1 + i] == zc_value(left, i, 7), "refused put wrote the region [%d]=%d", i, base[1 + i]);
    for (int i = n + 2; i < n + 64; i++) CHECK(base[i] == -9, "refused put wrote past the region [%d]=%d", i, base[i]);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
#endif
    MPI_OK(MPI_Win_detach(win, base));
    MPI_OK(MPI_Win_free(&win));
    free(addresses);
    free(base);
    free(mine);
    free(back);
}

/* MPI_Rput alone, large: each request waited for, its buffer overwritten
 * and freed at once (over TCP its data goes lent; the report counts the
 * frames placed at the target) */
static void rput_reuse(void) {
    const int n = 3 << 18, rounds = 4;
    int *base = calloc((size_t)n, sizeof(int));
    int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
    MPI_Win win;
    MPI_OK(MPI_Win_create(base, (MPI_Aint)n * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    for (int round = 0; round < rounds; round++) {
        int *scratch = malloc((size_t)n * sizeof(int));
        for (int i = 0; i < n; i++) scratch[i] = zc_value(g_rank, i, 50 + round);
        MPI_Request rput;
        MPI_OK(MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win));
        MPI_OK(MPI_Rput(scratch, n, MPI_INT, right, 0, n, MPI_INT, win, &rput));
        MPI_OK(MPI_Wait(&rput, MPI_STATUS_IGNORE));
        for (int i = 0; i < n; i++) scratch[i] = -7;
        free(scratch);
        MPI_OK(MPI_Win_unlock(right, win));
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        for (int i = 0; i < n; i++)
            CHECK(base[i] == zc_value(left, i, 50 + round), "round %d: rput [%d]=%d", round, i, base[i]);
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    }
    MPI_OK(MPI_Win_free(&win));
    free(base);
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    const char *subtest = argc > 1 ? argv[1] : "";
    if (!strcmp(subtest, "flavors")) flavors();
    else if (!strcmp(subtest, "operations")) operations();
    else if (!strcmp(subtest, "derived")) derived();
    else if (!strcmp(subtest, "pscw")) pscw();
    else if (!strcmp(subtest, "contention")) contention();
    else if (!strcmp(subtest, "passive")) passive();
    else if (!strcmp(subtest, "large")) large();
    else if (!strcmp(subtest, "errors")) errors();
    else if (!strcmp(subtest, "fatal")) fatal();
    else if (!strcmp(subtest, "edges")) edges();
    else if (!strcmp(subtest, "failure")) failure();
    else if (!strcmp(subtest, "failure_holder")) failure_holder();
    else if (!strcmp(subtest, "large_count")) large_count();
    else if (!strcmp(subtest, "self_order")) self_order();
    else if (!strcmp(subtest, "single_copy")) single_copy();
    else if (!strcmp(subtest, "zero_copy")) zero_copy();
    else if (!strcmp(subtest, "rput_reuse")) rput_reuse();
    else if (!strcmp(subtest, "rails")) rails(argc > 2 ? atoi(argv[2]) : 100);
    else FAIL("unknown subtest '%s'", subtest);
    return test_finish();
}
