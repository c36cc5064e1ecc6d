/* veloc.h on its own (tests/test_veloc.py):
 *   veloc_basic write CFG   two checkpoints of "basic": version 1, then 2
 *                           with other values
 *   veloc_basic read CFG    Restart_test("basic", 0), Restart from it,
 *                           print what came back; then Restart_test with a
 *                           bound of 1
 *   veloc_basic errors CFG  bad arguments: each call prints its return code
 *                           (every one must be VELOC_FAILURE, none aborts)
 *   veloc_basic cycles CFG  two VELOC_Init/VELOC_Finalize cycles: the first
 *                           tests, then checkpoints version 7; the second
 *                           tests again (must answer 7) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <veloc.h>

#define COUNT 1000

static int values[COUNT];
static double scalar;

static void fill(int rank, int version) {
    for (int i = 0; i < COUNT; i++) values[i] = rank * 100000 + version * 1000 + i;
    scalar = rank + version / 8.0;
}

static long long sum(void) {
    long long total = 0;
    for (int i = 0; i < COUNT; i++) total += values[i];
    return total;
}

static void report(const char *call, int rc) { printf("%s %d\n", call, rc); }

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s write|read|errors CFG\n", argv[0]);
        return 2;
    }
    const char *mode = argv[1], *cfg = argv[2];
    if (!strcmp(mode, "errors")) /* before MPI_Init and VELOC_Init */
        report("protect_before_init", VELOC_Mem_protect(0, values, COUNT, sizeof(int)));
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (!strcmp(mode, "errors")) {
        report("init_comm_null", VELOC_Init(MPI_COMM_NULL, cfg));
        report("init_missing_cfg", VELOC_Init(MPI_COMM_WORLD, "/nonexistent/veloc.cfg"));
    }
    if (VELOC_Init(MPI_COMM_WORLD, cfg) != VELOC_SUCCESS) {
        printf("VELOC_Init failed\n");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    if (VELOC_Mem_protect(0, values, COUNT, sizeof(int)) != VELOC_SUCCESS ||
        VELOC_Mem_protect(1, &scalar, 1, sizeof(double)) != VELOC_SUCCESS) {
        printf("VELOC_Mem_protect failed\n");
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    if (!strcmp(mode, "cycles")) {
        fill(rank, 7);
        printf("first_cycle %d\n", VELOC_Restart_test("basic", 0));
        printf("checkpoint_7 %d\n", VELOC_Checkpoint("basic", 7));
        VELOC_Finalize(1);
        if (VELOC_Init(MPI_COMM_WORLD, cfg) != VELOC_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 3);
        VELOC_Mem_protect(0, values, COUNT, sizeof(int));
        VELOC_Mem_protect(1, &scalar, 1, sizeof(double));
        printf("second_cycle %d\n", VELOC_Restart_test("basic", 0));
    } else if (!strcmp(mode, "write")) {
        for (int version = 1; version <= 2; version++) {
            fill(rank, version);
            int rc = VELOC_Checkpoint("basic", version);
            printf("checkpoint %d rc %d sum %lld\n", version, rc, sum());
        }
        fill(rank, 9); /* what a restart must not see */
    } else if (!strcmp(mode, "read")) {
        memset(values, 0, sizeof values);
        scalar = 0;
        int version = VELOC_Restart_test("basic", 0);
        printf("restart_test %d\n", version);
        if (version >= 0) {
            int rc = VELOC_Restart("basic", version);
            long long expected;
            int saved[COUNT];
            memcpy(saved, values, sizeof saved);
            fill(rank, version);
            expected = sum();
            int same = !memcmp(saved, values, sizeof saved);
            printf("restart rc %d values %s scalar %s\n", rc, same ? "match" : "DIFFER",
                   scalar == rank + version / 8.0 ? "match" : "DIFFER");
            (void)expected;
        }
        printf("restart_test_bound_1 %d\n", VELOC_Restart_test("basic", 1));
    } else if (!strcmp(mode, "errors")) {
        char routed[VELOC_MAX_NAME];
        int small;
        report("init_twice", VELOC_Init(MPI_COMM_WORLD, cfg));
        report("protect_null", VELOC_Mem_protect(5, NULL, 4, sizeof(int)));
        report("protect_overflow", VELOC_Mem_protect(5, values, (size_t)-1, 16));
        report("unprotect_unknown", VELOC_Mem_unprotect(77));
        report("checkpoint_bad_name", VELOC_Checkpoint("a-b", 1));
        report("checkpoint_null_name", VELOC_Checkpoint(NULL, 1));
        report("checkpoint_negative_version", VELOC_Checkpoint("basic", -1));
        report("restart_test_bad_name", VELOC_Restart_test("a/b", 0));
        report("restart_missing_version", VELOC_Restart("basic", 12345));
        report("route_outside_phase", VELOC_Route_file("out.dat", routed));
        report("checkpoint_end_outside_phase", VELOC_Checkpoint_end(1));
        report("recover_outside_phase", VELOC_Recover_mem());
        report("region_protect", VELOC_Region_protect(3, values, 1, 4, "named"));
        report("selective_bad_mode", (VELOC_Checkpoint_begin("basic", 3),
                                      VELOC_Checkpoint_selective(7, NULL, 0)));
        report("begin_twice", VELOC_Checkpoint_begin("basic", 4));
        VELOC_Checkpoint_end(0);
        /* version 5 saved with region 0 of COUNT ints; restart into a
           smaller region must refuse, not overflow */
        if (VELOC_Checkpoint("basic", 5) != VELOC_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 4);
        VELOC_Mem_protect(0, &small, 1, sizeof(int));
        report("restart_size_mismatch", VELOC_Restart("basic", 5));
        VELOC_Mem_protect(0, values, COUNT, sizeof(int));
        report("restart_test_after_errors", VELOC_Restart_test("basic", 0) == 5 ? 0 : -99);
        report("finalize", VELOC_Finalize(1));
        report("finalize_twice", VELOC_Finalize(1));
    }
    if (strcmp(mode, "errors")) VELOC_Finalize(1);
    MPI_Finalize();
    return 0;
}
