/* MPI-4: the Info functions work before MPI_Init and after MPI_Finalize
 * (MPI_Info_create/set/get/get_nkeys/get_nthkey/dup/delete/free and
 * MPI_Info_create_env). Prints OK itself: common.h's helpers need MPI. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static int failures;
#define EXPECT(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "FAIL rank ? %s:%d: ", __FILE__, __LINE__);        \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                             \
            failures++;                                                        \
        }                                                                      \
    } while (0)

static void exercise(const char *when) {
    MPI_Info info, copy;
    char value[64], key[MPI_MAX_INFO_KEY + 1];
    int flag = 0, nkeys = -1;
    EXPECT(MPI_Info_create(&info) == MPI_SUCCESS, "%s: Info_create", when);
    EXPECT(MPI_Info_set(info, "color", "blue") == MPI_SUCCESS, "%s: Info_set", when);
    EXPECT(MPI_Info_set(info, "shape", "round") == MPI_SUCCESS, "%s: Info_set", when);
    EXPECT(MPI_Info_get(info, "color", sizeof value - 1, value, &flag) == MPI_SUCCESS && flag &&
               !strcmp(value, "blue"),
           "%s: color is '%s'", when, flag ? value : "");
    EXPECT(MPI_Info_dup(info, &copy) == MPI_SUCCESS, "%s: Info_dup", when);
    EXPECT(MPI_Info_delete(info, "color") == MPI_SUCCESS, "%s: Info_delete", when);
    EXPECT(MPI_Info_get_nkeys(info, &nkeys) == MPI_SUCCESS && nkeys == 1, "%s: %d keys", when, nkeys);
    EXPECT(MPI_Info_get_nthkey(copy, 1, key) == MPI_SUCCESS && !strcmp(key, "shape"), "%s: key '%s'",
           when, key);
    EXPECT(MPI_Info_free(&info) == MPI_SUCCESS && info == MPI_INFO_NULL, "%s: Info_free", when);
    EXPECT(MPI_Info_free(&copy) == MPI_SUCCESS, "%s: Info_free of the copy", when);
}

int main(int argc, char **argv) {
    exercise("before MPI_Init");
    MPI_Info env;
    EXPECT(MPI_Info_create_env(argc, argv, &env) == MPI_SUCCESS, "Info_create_env before MPI_Init");
    EXPECT(MPI_Info_free(&env) == MPI_SUCCESS, "freeing the env info");
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    exercise("between MPI_Init and MPI_Finalize");
    MPI_Finalize();
    exercise("after MPI_Finalize");
    if (rank == 0 && failures == 0) printf("OK\n");
    return failures ? 1 : 0;
}
