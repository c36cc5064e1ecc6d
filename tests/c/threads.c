/* MPI_THREAD_MULTIPLE under concurrent calls: NTHREADS threads per rank,
 * each running ITERATIONS rounds of
 *   - a ring exchange on MPI_COMM_WORLD (Irecv + Isend, completed by
 *     MPI_Waitany over the thread's own two requests), tags per thread;
 *   - a blocking MPI_Send (or MPI_Ssend) / MPI_Recv along the ring;
 *   - a message of a length only the sender knows, found with MPI_Probe
 *     (or an MPI_Iprobe loop) and received after MPI_Get_count;
 *   - a blocking collective (Allreduce, Bcast or Barrier) on the thread's
 *     own duplicate of MPI_COMM_WORLD, and sometimes a communicator made
 *     from it (MPI_Comm_dup or MPI_Comm_split) while the other threads make
 *     theirs, checked with an allreduce on it;
 *   - between thread pairs (t, t+1) of one rank: a send to self that the
 *     other thread of the pair receives (the receiver usually blocks in
 *     MPI_Recv first), and a generalized request the even thread waits on
 *     (MPI_Wait) while the odd one completes it with MPI_Grequest_complete.
 * Lengths and contents derive from the seed, the iteration, the thread and
 * the sender, and every result is checked exactly.
 *
 *   threads SEED [ITERATIONS (40)] [NTHREADS (4)]
 *   threads level    (rank 0 prints "provided LEVEL" for MPI_THREAD_MULTIPLE
 *                     asked, and nothing else runs)
 *
 * A library that keeps its lock while a thread waits deadlocks here (the
 * self receive, the generalized request, the collectives of one thread
 * against another's on the peer rank); the harness's timeout catches it. */
#include "common.h"
#include <pthread.h>
#include <time.h>

#define MAX_THREADS 16
#define MAX_INTS 4096 /* ring and probe messages: up to 16 KiB */
enum { TAG_RING, TAG_BLOCKING, TAG_PROBE, TAG_SELF, TAG_KINDS };

static unsigned g_seed;
static int g_iterations = 40, g_nthreads = 4;
static MPI_Comm g_comms[MAX_THREADS];

/* What the even thread of a pair hands the odd one: a generalized request
 * to complete. */
struct pair {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    MPI_Request request; /* MPI_REQUEST_NULL until handed over */
    int round;           /* the iteration it belongs to */
    int queried;         /* calls of its query function */
};
static struct pair g_pairs[MAX_THREADS / 2];

static int tag_of(int thread, int kind) { return thread * TAG_KINDS + kind; }

/* A deterministic pseudo-random number of (seed, iteration, thread, what). */
static unsigned mix(unsigned iteration, unsigned thread, unsigned what) {
    uint64_t x = (uint64_t)g_seed * 0x9E3779B97F4A7C15ull ^ ((uint64_t)iteration << 32) ^
                 ((uint64_t)thread << 16) ^ what;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return (unsigned)x;
}

/* Message lengths (ints): 0 .. MAX_INTS, mostly small, some rendezvous-sized. */
static int length_of(int iteration, int thread, int sender, int kind) {
    unsigned r = mix(iteration, thread, (unsigned)(sender * 8 + kind));
    return (r % 4 == 0) ? (int)(r % MAX_INTS) : (int)(r % 64);
}

static int value_of(int iteration, int thread, int sender, int kind, int i) {
    return (int)(mix(iteration, thread, (unsigned)(sender * 8 + kind + 1000)) + (unsigned)i * 7u);
}

static void fill(int *data, int count, int iteration, int thread, int sender, int kind) {
    for (int i = 0; i < count; i++) data[i] = value_of(iteration, thread, sender, kind, i);
}

static void verify(const int *data, int count, int iteration, int thread, int sender, int kind) {
    for (int i = 0; i < count; i++) {
        int want = value_of(iteration, thread, sender, kind, i);
        CHECK(data[i] == want, "thread %d iteration %d kind %d from %d: [%d] = %d, want %d",
              thread, iteration, kind, sender, i, data[i], want);
    }
}

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

static int query_fn(void *extra, MPI_Status *status) {
    struct pair *pair = extra;
    __atomic_add_fetch(&pair->queried, 1, __ATOMIC_SEQ_CST);
    MPI_Status_set_elements(status, MPI_BYTE, 42);
    MPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_UNDEFINED;
    status->MPI_TAG = MPI_UNDEFINED;
    return MPI_SUCCESS;
}
static int free_fn(void *extra) { (void)extra; return MPI_SUCCESS; }
static int cancel_fn(void *extra, int complete) { (void)extra; (void)complete; return MPI_SUCCESS; }

static void ring(int it, int t) {
    int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
    int in_count = length_of(it, t, prev, TAG_RING), out_count = length_of(it, t, g_rank, TAG_RING);
    int *in = malloc(sizeof(int) * (MAX_INTS + 1)), *out = malloc(sizeof(int) * (MAX_INTS + 1));
    fill(out, out_count, it, t, g_rank, TAG_RING);
    MPI_Request requests[2];
    MPI_OK(MPI_Irecv(in, MAX_INTS, MPI_INT, prev, tag_of(t, TAG_RING), MPI_COMM_WORLD, &requests[0]));
    MPI_OK(MPI_Isend(out, out_count, MPI_INT, next, tag_of(t, TAG_RING), MPI_COMM_WORLD, &requests[1]));
    int seen[2] = {0, 0};
    for (int done = 0; done < 2; done++) {
        int index = -1;
        MPI_Status status;
        MPI_OK(MPI_Waitany(2, requests, &index, &status));
        CHECK(index == 0 || index == 1, "Waitany index %d", index);
        CHECK(!seen[index], "Waitany returned request %d twice", index);
        CHECK(requests[index] == MPI_REQUEST_NULL, "completed request not freed");
        seen[index] = 1;
        if (index == 0) {
            int count = -1;
            MPI_Get_count(&status, MPI_INT, &count);
            CHECK(count == in_count && status.MPI_SOURCE == prev && status.MPI_TAG == tag_of(t, TAG_RING),
                  "ring: count %d source %d tag %d, want %d %d %d", count, status.MPI_SOURCE,
                  status.MPI_TAG, in_count, prev, tag_of(t, TAG_RING));
        }
    }
    verify(in, in_count, it, t, prev, TAG_RING);
    free(in);
    free(out);
}

static void blocking(int it, int t) {
    int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
    int in_count = length_of(it, t, prev, TAG_BLOCKING), out_count = length_of(it, t, g_rank, TAG_BLOCKING);
    int *in = malloc(sizeof(int) * (MAX_INTS + 1)), *out = malloc(sizeof(int) * (MAX_INTS + 1));
    fill(out, out_count, it, t, g_rank, TAG_BLOCKING);
    int synchronous = mix(it, t, 77) % 3 == 0;
    MPI_Status status;
    for (int step = 0; step < 2; step++) {
        /* Even ranks send first, odd ones receive first (sizes are even). */
        if ((step == 0) == (g_rank % 2 == 0)) {
            if (synchronous)
                MPI_OK(MPI_Ssend(out, out_count, MPI_INT, next, tag_of(t, TAG_BLOCKING), MPI_COMM_WORLD));
            else
                MPI_OK(MPI_Send(out, out_count, MPI_INT, next, tag_of(t, TAG_BLOCKING), MPI_COMM_WORLD));
        } else {
            MPI_OK(MPI_Recv(in, MAX_INTS, MPI_INT, prev, tag_of(t, TAG_BLOCKING), MPI_COMM_WORLD, &status));
            int count = -1;
            MPI_Get_count(&status, MPI_INT, &count);
            CHECK(count == in_count, "blocking: count %d, want %d", count, in_count);
        }
    }
    verify(in, in_count, it, t, prev, TAG_BLOCKING);
    free(in);
    free(out);
}

static void probe(int it, int t) {
    int next = (g_rank + 1) % g_size, prev = (g_rank + g_size - 1) % g_size;
    int out_count = length_of(it, t, g_rank, TAG_PROBE);
    int *out = malloc(sizeof(int) * (MAX_INTS + 1));
    fill(out, out_count, it, t, g_rank, TAG_PROBE);
    MPI_Request request;
    MPI_OK(MPI_Isend(out, out_count, MPI_INT, next, tag_of(t, TAG_PROBE), MPI_COMM_WORLD, &request));
    MPI_Status status;
    if (mix(it, t, 99) % 2) {
        MPI_OK(MPI_Probe(prev, tag_of(t, TAG_PROBE), MPI_COMM_WORLD, &status));
    } else {
        int flag = 0;
        while (!flag) MPI_OK(MPI_Iprobe(prev, tag_of(t, TAG_PROBE), MPI_COMM_WORLD, &flag, &status));
    }
    int count = -1;
    MPI_Get_count(&status, MPI_INT, &count);
    int want = length_of(it, t, prev, TAG_PROBE);
    CHECK(count == want && status.MPI_SOURCE == prev, "probe: count %d source %d, want %d %d", count,
          status.MPI_SOURCE, want, prev);
    int *in = malloc(sizeof(int) * (count + 1));
    MPI_OK(MPI_Recv(in, count, MPI_INT, prev, tag_of(t, TAG_PROBE), MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    verify(in, count, it, t, prev, TAG_PROBE);
    MPI_OK(MPI_Wait(&request, MPI_STATUS_IGNORE));
    free(in);
    free(out);
}

static void collective(int it, int t) {
    MPI_Comm comm = g_comms[t];
    switch (mix(it, t, 5) % 3) {
    case 0: {
        long long mine[3] = {g_rank, (long long)mix(it, t, g_rank) % 1000, 1}, sum[3];
        MPI_OK(MPI_Allreduce(mine, sum, 3, MPI_LONG_LONG, MPI_SUM, comm));
        long long want = 0;
        for (int r = 0; r < g_size; r++) want += (long long)mix(it, t, r) % 1000;
        CHECK(sum[0] == (long long)g_size * (g_size - 1) / 2 && sum[1] == want && sum[2] == g_size,
              "allreduce on thread %d's comm: %lld %lld %lld", t, sum[0], sum[1], sum[2]);
        break;
    }
    case 1: {
        int root = (int)(mix(it, t, 6) % (unsigned)g_size);
        int count = length_of(it, t, root, 9);
        int *data = malloc(sizeof(int) * (count + 1));
        if (g_rank == root) fill(data, count, it, t, root, 9);
        MPI_OK(MPI_Bcast(data, count, MPI_INT, root, comm));
        verify(data, count, it, t, root, 9);
        free(data);
        break;
    }
    default:
        MPI_OK(MPI_Barrier(comm));
    }
    if (mix(it, t, 8) % 4 == 0) {
        /* A communicator created while other threads create theirs: each
         * must get a context of its own, or the threads' allreduces mix. */
        MPI_Comm created;
        if (mix(it, t, 9) % 2)
            MPI_OK(MPI_Comm_dup(comm, &created));
        else
            MPI_OK(MPI_Comm_split(comm, 0, g_size - g_rank, &created));
        int rank = -1;
        MPI_OK(MPI_Comm_rank(created, &rank));
        long long mine = t * 1000 + rank, sum = 0;
        MPI_OK(MPI_Allreduce(&mine, &sum, 1, MPI_LONG_LONG, MPI_SUM, created));
        long long want = (long long)t * 1000 * g_size + (long long)g_size * (g_size - 1) / 2;
        CHECK(sum == want, "allreduce on thread %d's new communicator: %lld, want %lld", t, sum, want);
        MPI_OK(MPI_Comm_free(&created));
    }
}

/* Thread t and t ^ 1 of this rank: a message to self and a generalized
 * request, each waited for by one while the other acts. */
static void pair_work(int it, int t) {
    if (t + 1 >= g_nthreads && t % 2 == 0) return; /* no partner */
    struct pair *pair = &g_pairs[t / 2];
    int receiver = t | 1;
    int value = value_of(it, receiver, g_rank, TAG_SELF, 0);
    if (t == receiver) {
        /* Blocks before the partner sends (it sleeps first, most rounds). */
        int got = 0;
        MPI_Status status;
        MPI_OK(MPI_Recv(&got, 1, MPI_INT, g_rank, tag_of(t, TAG_SELF), MPI_COMM_WORLD, &status));
        CHECK(got == value && status.MPI_SOURCE == g_rank, "self receive: %d from %d, want %d", got,
              status.MPI_SOURCE, value);
        /* Complete the request the partner waits on. */
        pthread_mutex_lock(&pair->lock);
        while (pair->request == MPI_REQUEST_NULL || pair->round != it)
            pthread_cond_wait(&pair->changed, &pair->lock);
        MPI_Request request = pair->request;
        pair->request = MPI_REQUEST_NULL;
        pthread_mutex_unlock(&pair->lock);
        sleep_us(200 + mix(it, t, 11) % 800);
        MPI_OK(MPI_Grequest_complete(request));
    } else {
        sleep_us(mix(it, t, 12) % 500);
        MPI_OK(MPI_Send(&value, 1, MPI_INT, g_rank, tag_of(receiver, TAG_SELF), MPI_COMM_WORLD));
        MPI_Request request;
        int queried_before = __atomic_load_n(&pair->queried, __ATOMIC_SEQ_CST);
        MPI_OK(MPI_Grequest_start(query_fn, free_fn, cancel_fn, pair, &request));
        pthread_mutex_lock(&pair->lock);
        pair->request = request;
        pair->round = it;
        pthread_cond_broadcast(&pair->changed);
        pthread_mutex_unlock(&pair->lock);
        MPI_Status status;
        MPI_OK(MPI_Wait(&request, &status));
        CHECK(request == MPI_REQUEST_NULL, "generalized request not freed by MPI_Wait");
        int count = -1;
        MPI_Get_count(&status, MPI_BYTE, &count);
        CHECK(count == 42, "generalized request status count %d, want 42", count);
        CHECK(__atomic_load_n(&pair->queried, __ATOMIC_SEQ_CST) > queried_before,
              "query function not called");
    }
}

static void *work(void *arg) {
    int t = (int)(intptr_t)arg;
    int flag = -1;
    MPI_OK(MPI_Is_thread_main(&flag));
    CHECK(flag == 0, "MPI_Is_thread_main on thread %d: %d", t, flag);
    for (int it = 0; it < g_iterations; it++) {
        /* The order of the steps varies, so threads meet each other in
         * every combination of calls. */
        int first = (int)(mix(it, t, 3) % 4);
        for (int step = 0; step < 4; step++) {
            switch ((first + step) % 4) {
            case 0: ring(it, t); break;
            case 1: blocking(it, t); break;
            case 2: probe(it, t); break;
            default: collective(it, t);
            }
        }
        pair_work(it, t);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int provided = -1, queried = -1, flag = -1;
    MPI_OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &g_rank));
    MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &g_size));
    MPI_OK(MPI_Query_thread(&queried));
    CHECK(queried == provided, "MPI_Query_thread %d, MPI_Init_thread gave %d", queried, provided);
    if (argc >= 2 && !strcmp(argv[1], "level")) {
        if (g_rank == 0)
            printf("provided %s\n", provided == MPI_THREAD_MULTIPLE     ? "MPI_THREAD_MULTIPLE"
                                    : provided == MPI_THREAD_SERIALIZED ? "MPI_THREAD_SERIALIZED"
                                                                        : "lower");
        return test_finish();
    }
    CHECK(provided == MPI_THREAD_MULTIPLE, "provided %d, want MPI_THREAD_MULTIPLE (%d)", provided,
          MPI_THREAD_MULTIPLE);
    MPI_OK(MPI_Is_thread_main(&flag));
    CHECK(flag == 1, "MPI_Is_thread_main on the main thread: %d", flag);
    CHECK(argc >= 2, "usage: threads SEED [ITERATIONS] [NTHREADS]");
    g_seed = (unsigned)strtoul(argv[1], NULL, 10);
    if (argc >= 3) g_iterations = atoi(argv[2]);
    if (argc >= 4) g_nthreads = atoi(argv[3]);
    CHECK(g_nthreads >= 1 && g_nthreads <= MAX_THREADS, "NTHREADS %d", g_nthreads);
    CHECK(g_size % 2 == 0, "an even number of ranks, not %d", g_size);
    for (int t = 0; t < g_nthreads; t++) MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &g_comms[t]));
    for (int p = 0; p < MAX_THREADS / 2; p++) {
        pthread_mutex_init(&g_pairs[p].lock, NULL);
        pthread_cond_init(&g_pairs[p].changed, NULL);
        g_pairs[p].request = MPI_REQUEST_NULL;
        g_pairs[p].round = -1;
    }
    pthread_t threads[MAX_THREADS];
    for (int t = 0; t < g_nthreads; t++)
        CHECK(pthread_create(&threads[t], NULL, work, (void *)(intptr_t)t) == 0, "pthread_create");
    for (int t = 0; t < g_nthreads; t++) pthread_join(threads[t], NULL);
    for (int t = 0; t < g_nthreads; t++) MPI_OK(MPI_Comm_free(&g_comms[t]));
    /* Every rank ran the same rounds: the sum of the iterations is known. */
    long long rounds = g_iterations, total = 0;
    MPI_OK(MPI_Allreduce(&rounds, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD));
    CHECK(total == (long long)g_iterations * g_size, "total %lld", total);
    return test_finish();
}
