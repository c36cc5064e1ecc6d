/* MPI_Comm_spawn and MPI_Comm_spawn_multiple under resmpi's mpiexec
 * (issue 15 item 4): the parents start copies of this program, and both
 * sides check the inter-communicator (p2p both ways, bcast, allreduce,
 * barrier, MPI_Intercomm_merge), the children's own MPI_COMM_WORLD, and
 * MPI_Comm_disconnect; MPI_Comm_get_parent is MPI_COMM_NULL elsewhere.
 *
 *   spawn one N          the parents spawn N children of one command
 *   spawn multiple       two commands: 1 child "a" and 2 children "b"
 *   spawn dies           N=2 children, child 1 exits with code 3 at once
 *   spawn twice          N=2 children, then 2 more while they run (refused
 *                        by mpiexec's count against the universe)
 *   spawn nodisconnect   N=2 children; both sides barrier on the
 *                        inter-communicator and finalize without disconnect
 *   (children run as "spawn child N LABEL")
 */
#include "common.h"

/* Both sides of the exchange over `inter`; `parents` says which side. */
static void exchange(MPI_Comm inter, int parents) {
    int rank, size, remote;
    MPI_OK(MPI_Comm_rank(inter, &rank));
    MPI_OK(MPI_Comm_size(inter, &size));
    MPI_OK(MPI_Comm_remote_size(inter, &remote));
    /* p2p: parent 0 sends 100 + r to child r, child r answers 200 + r */
    if (parents && rank == 0) {
        for (int child = 0; child < remote; child++) {
            int value = 100 + child, answer = -1;
            MPI_OK(MPI_Send(&value, 1, MPI_INT, child, 7, inter));
            MPI_OK(MPI_Recv(&answer, 1, MPI_INT, child, 8, inter, MPI_STATUS_IGNORE));
            CHECK(answer == 200 + child, "child %d answered %d", child, answer);
        }
    } else if (!parents) {
        int value = -1;
        MPI_Status status;
        MPI_OK(MPI_Recv(&value, 1, MPI_INT, 0, 7, inter, &status));
        CHECK(value == 100 + rank && status.MPI_SOURCE == 0, "child %d got %d", rank, value);
        int answer = 200 + rank;
        MPI_OK(MPI_Send(&answer, 1, MPI_INT, 0, 8, inter));
    }
    /* bcast from parent 0 to every child */
    int seed = parents ? 4242 : -1;
    if (parents)
        MPI_OK(MPI_Bcast(&seed, 1, MPI_INT, rank == 0 ? MPI_ROOT : MPI_PROC_NULL, inter));
    else
        MPI_OK(MPI_Bcast(&seed, 1, MPI_INT, 0, inter));
    CHECK(seed == 4242, "bcast gave %d", seed);
    /* allreduce: each side gets the other side's sum */
    int mine = parents ? 1 : 10, sum = 0;
    MPI_OK(MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, inter));
    CHECK(sum == (parents ? 10 : 1) * remote, "allreduce gave %d (remote %d)", sum, remote);
    MPI_OK(MPI_Barrier(inter));
    /* merge: parents first */
    MPI_Comm merged;
    MPI_OK(MPI_Intercomm_merge(inter, parents ? 0 : 1, &merged));
    int merged_rank, merged_size;
    MPI_OK(MPI_Comm_rank(merged, &merged_rank));
    MPI_OK(MPI_Comm_size(merged, &merged_size));
    CHECK(merged_size == size + remote, "merged size %d", merged_size);
    CHECK(merged_rank == (parents ? rank : remote + rank), "merged rank %d", merged_rank);
    int ranks_sum = 0;
    MPI_OK(MPI_Allreduce(&merged_rank, &ranks_sum, 1, MPI_INT, MPI_SUM, merged));
    CHECK(ranks_sum == merged_size * (merged_size - 1) / 2, "merged sum %d", ranks_sum);
    MPI_OK(MPI_Comm_free(&merged));
}

static int child(int argc, char **argv) {
    MPI_Comm parent;
    MPI_OK(MPI_Comm_get_parent(&parent));
    CHECK(parent != MPI_COMM_NULL, "a spawned process has a parent");
    int expected = argc > 2 ? atoi(argv[2]) : -1;
    const char *label = argc > 3 ? argv[3] : "?";
    CHECK(g_size == expected, "children's world has %d processes, expected %d", g_size, expected);
    if (!strcmp(label, "dies") && g_rank == 1) exit(3);
    if (!strcmp(label, "dies")) {
        /* the sibling's death ends the children's job */
        MPI_Barrier(MPI_COMM_WORLD);
        sleep(30);
    }
    int remote;
    MPI_OK(MPI_Comm_remote_size(parent, &remote));
    if (!strcmp(label, "nodisconnect")) {
        /* MPI_Finalize without MPI_Comm_disconnect (mpi4py's tests do it) */
        MPI_OK(MPI_Barrier(parent));
        printf("child %d of %d (%s) remote=%d done\n", g_rank, g_size, label, remote);
        fflush(stdout);
        MPI_OK(MPI_Finalize());
        return 0;
    }
    /* the children's own world works */
    int one = 1, count = 0;
    MPI_OK(MPI_Allreduce(&one, &count, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(count == g_size, "children's allreduce %d", count);
    exchange(parent, 0);
    MPI_OK(MPI_Comm_disconnect(&parent));
    CHECK(parent == MPI_COMM_NULL, "disconnect clears the handle");
    MPI_OK(MPI_Comm_get_parent(&parent));
    CHECK(parent == MPI_COMM_NULL, "no parent after disconnect");
    printf("child %d of %d (%s) remote=%d done\n", g_rank, g_size, label, remote);
    fflush(stdout);
    MPI_OK(MPI_Finalize());
    return 0;
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    const char *mode = argc > 1 ? argv[1] : "one";
    if (!strcmp(mode, "child")) return child(argc, argv);
    MPI_Comm parent;
    MPI_OK(MPI_Comm_get_parent(&parent));
    CHECK(parent == MPI_COMM_NULL, "a process started by mpiexec has no parent");
    MPI_Comm inter = MPI_COMM_NULL;
    int codes[8];
    for (int i = 0; i < 8; i++) codes[i] = -1;
    int children = 0;
    if (!strcmp(mode, "one") || !strcmp(mode, "dies") || !strcmp(mode, "nodisconnect") ||
        !strcmp(mode, "twice")) {
        children = strcmp(mode, "one") ? 2 : (argc > 2 ? atoi(argv[2]) : 2);
        char count_text[16];
        snprintf(count_text, sizeof count_text, "%d", children);
        char *args[] = {"child", count_text, strcmp(mode, "twice") ? (char *)mode : "one", NULL};
        MPI_Info info;
        MPI_OK(MPI_Info_create(&info));
        MPI_OK(MPI_Info_set(info, "wdir", "/"));
        MPI_OK(MPI_Info_set(info, "x-unknown-key", "ignored"));
        /* the last parent is the root: its arguments are the ones that count */
        MPI_OK(MPI_Comm_spawn(g_rank == g_size - 1 ? argv[0] : NULL, args, children, info, g_size - 1,
                              MPI_COMM_WORLD, &inter, codes));
        MPI_OK(MPI_Info_free(&info));
    } else if (!strcmp(mode, "multiple")) {
        children = 3;
        char *args_a[] = {"child", "3", "a", NULL}, *args_b[] = {"child", "3", "b", NULL};
        char *commands[2] = {argv[0], argv[0]};
        char **argvs[2] = {args_a, args_b};
        int counts[2] = {1, 2};
        MPI_Info infos[2] = {MPI_INFO_NULL, MPI_INFO_NULL};
        MPI_OK(MPI_Comm_spawn_multiple(2, commands, argvs, counts, infos, 0, MPI_COMM_WORLD,
                                       &inter, codes));
    } else {
        FAIL("unknown mode %s", mode);
    }
    CHECK(inter != MPI_COMM_NULL, "an inter-communicator to the children");
    for (int i = 0; i < children; i++) CHECK(codes[i] == MPI_SUCCESS, "errcodes[%d] = %d", i, codes[i]);
    int remote, flag;
    MPI_OK(MPI_Comm_remote_size(inter, &remote));
    MPI_OK(MPI_Comm_test_inter(inter, &flag));
    CHECK(flag && remote == children, "remote size %d", remote);
    if (!strcmp(mode, "twice")) {
        /* the first children still run: mpiexec counts them against the
         * universe, which the library's own check (universe minus the
         * world) cannot know */
        MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
        MPI_Comm again = MPI_COMM_WORLD;
        int again_codes[2] = {0, 0};
        char *args[] = {"child", "2", "one", NULL};
        int rc = MPI_Comm_spawn(argv[0], args, 2, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &again,
                                again_codes);
        int class_ = -1;
        MPI_Error_class(rc, &class_);
        CHECK(class_ == MPI_ERR_SPAWN && again == MPI_COMM_NULL, "second spawn: class %d", class_);
        CHECK(again_codes[0] == MPI_ERR_SPAWN && again_codes[1] == MPI_ERR_SPAWN, "codes %d %d",
              again_codes[0], again_codes[1]);
        char text[MPI_MAX_ERROR_STRING];
        int length;
        MPI_Error_string(rc, text, &length);
        if (g_rank == 0) printf("second spawn: %s\n", text);
    }
    if (!strcmp(mode, "nodisconnect")) {
        MPI_OK(MPI_Barrier(inter));
        if (g_rank == 0) printf("parents spawned %d\n", children);
        return test_finish();
    }
    if (strcmp(mode, "dies")) exchange(inter, 1);
    MPI_OK(MPI_Comm_disconnect(&inter));
    CHECK(inter == MPI_COMM_NULL, "disconnect clears the handle");
    /* the parents' world still works */
    int one = 1, count = 0;
    MPI_OK(MPI_Allreduce(&one, &count, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(count == g_size, "parents' allreduce %d", count);
    if (g_rank == 0) printf("parents spawned %d\n", children);
    return test_finish();
}
