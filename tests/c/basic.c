/* Environment management: Init_thread/Initialized/Finalized/Query_thread,
 * versions, processor name, Wtime/Wtick, rank/size.
 * usage: basic [single|funneled|serialized] */
#include "common.h"
#include <sys/time.h>

int main(int argc, char **argv) {
    int flag = -1, provided = -1, required = MPI_THREAD_SERIALIZED;
    int version = 0, subversion = 0, len = -1;

    /* callable before MPI_Init */
    MPI_OK(MPI_Initialized(&flag));
    CHECK(flag == 0, "Initialized before Init = %d", flag);
    MPI_OK(MPI_Finalized(&flag));
    CHECK(flag == 0, "Finalized before Init = %d", flag);
    MPI_OK(MPI_Get_version(&version, &subversion));
    /* a binary built against another implementation's mpi.h (ABI test:
     * FOREIGN_ABI=1) may legitimately report a different version */
    if (!getenv("FOREIGN_ABI"))
        CHECK(version == MPI_VERSION && subversion == MPI_SUBVERSION,
              "Get_version before Init %d.%d vs mpi.h %d.%d", version, subversion,
              MPI_VERSION, MPI_SUBVERSION);
    int version0 = version, subversion0 = subversion;

    if (argc > 1 && !strcmp(argv[1], "single")) required = MPI_THREAD_SINGLE;
    if (argc > 1 && !strcmp(argv[1], "funneled")) required = MPI_THREAD_FUNNELED;
    CHECK(MPI_THREAD_SINGLE < MPI_THREAD_FUNNELED &&
              MPI_THREAD_FUNNELED < MPI_THREAD_SERIALIZED &&
              MPI_THREAD_SERIALIZED < MPI_THREAD_MULTIPLE,
          "thread level constants not ordered");

    MPI_OK(MPI_Init_thread(&argc, &argv, required, &provided));
    MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &g_rank));
    MPI_OK(MPI_Comm_size(MPI_COMM_WORLD, &g_size));
    CHECK(provided >= required && provided <= MPI_THREAD_MULTIPLE,
          "provided %d < required %d", provided, required);
#if defined(MPIX_GPU_SUPPORT_CUDA)
    /* Host memory only: the GPU queries answer "no", not an error code. */
    CHECK(MPIX_Query_cuda_support() == 0 && MPIX_Query_hip_support() == 0 && MPIX_Query_ze_support() == 0,
          "a GPU query says the library supports device memory");
    int gpu = -1;
    MPI_OK(MPIX_GPU_query_support(MPIX_GPU_SUPPORT_CUDA, &gpu));
    CHECK(gpu == 0, "MPIX_GPU_query_support(CUDA) = %d", gpu);
#endif
    int q = -1;
    MPI_OK(MPI_Query_thread(&q));
    CHECK(q == provided, "Query_thread %d != provided %d", q, provided);
    MPI_OK(MPI_Is_thread_main(&flag));
    CHECK(flag, "Is_thread_main false on main thread");

    MPI_OK(MPI_Initialized(&flag));
    CHECK(flag == 1, "Initialized after Init = %d", flag);
    MPI_OK(MPI_Finalized(&flag));
    CHECK(flag == 0, "Finalized after Init = %d", flag);

    CHECK(g_size >= 1, "size %d", g_size);
    CHECK(g_rank >= 0 && g_rank < g_size, "rank %d size %d", g_rank, g_size);
    const char *want = getenv("EXPECT_SIZE");
    if (want) CHECK(g_size == atoi(want), "size %d, expected %s", g_size, want);
    int r = -1, s = -1;
    MPI_OK(MPI_Comm_rank(MPI_COMM_SELF, &r));
    MPI_OK(MPI_Comm_size(MPI_COMM_SELF, &s));
    CHECK(r == 0 && s == 1, "COMM_SELF rank %d size %d", r, s);

    /* every rank distinct: each reports its rank to 0 (point-to-point only) */
    if (g_rank == 0) {
        char *seen = calloc(g_size, 1);
        for (int i = 1; i < g_size; i++) {
            int v = -1;
            MPI_Status st;
            MPI_OK(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 1, MPI_COMM_WORLD, &st));
            CHECK(v == st.MPI_SOURCE && v > 0 && v < g_size && !seen[v], "rank %d reported %d", st.MPI_SOURCE, v);
            seen[v] = 1;
        }
        free(seen);
    } else {
        MPI_OK(MPI_Send(&g_rank, 1, MPI_INT, 0, 1, MPI_COMM_WORLD));
    }

    MPI_OK(MPI_Get_version(&version, &subversion));
    CHECK(version >= 3, "MPI version %d.%d", version, subversion);
    CHECK(version == version0 && subversion == subversion0, "Get_version changed across Init");

    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    memset(lib, 'x', sizeof lib);
    MPI_OK(MPI_Get_library_version(lib, &len));
    CHECK(len > 0 && len < MPI_MAX_LIBRARY_VERSION_STRING, "library version len %d", len);
    CHECK((int)strlen(lib) == len, "library version strlen %zu != len %d", strlen(lib), len);

    char name[MPI_MAX_PROCESSOR_NAME];
    memset(name, 'x', sizeof name);
    MPI_OK(MPI_Get_processor_name(name, &len));
    CHECK(len > 0 && len < MPI_MAX_PROCESSOR_NAME, "processor name len %d", len);
    CHECK((int)strlen(name) == len, "processor name strlen %zu != len %d", strlen(name), len);

    double tick = MPI_Wtick();
    CHECK(tick > 0.0 && tick <= 1e-3, "Wtick %g", tick);
    double t0 = MPI_Wtime();
    struct timeval a, b;
    gettimeofday(&a, NULL);
    sleep_ms(100);
    double t1 = MPI_Wtime();
    gettimeofday(&b, NULL);
    double real = (b.tv_sec - a.tv_sec) + (b.tv_usec - a.tv_usec) * 1e-6;
    CHECK(t1 >= t0, "Wtime went backwards %f -> %f", t0, t1);
    CHECK(t1 - t0 >= 0.09 && t1 - t0 < real + 0.5,
          "Wtime measured %f s for a %f s sleep", t1 - t0, real);
    double prev = MPI_Wtime();
    for (int i = 0; i < 100000; i++) {
        double t = MPI_Wtime();
        CHECK(t >= prev, "Wtime not monotonic");
        prev = t;
    }

    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Finalize());
    MPI_OK(MPI_Finalized(&flag));
    CHECK(flag == 1, "Finalized after Finalize = %d", flag);
    MPI_OK(MPI_Initialized(&flag));
    CHECK(flag == 1, "Initialized after Finalize = %d", flag);
    MPI_OK(MPI_Get_version(&version, &subversion));
    if (g_rank == 0) printf("OK\n");
    return 0;
}
