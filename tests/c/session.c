/* MPI-4 sessions (MPI_Session_*): process sets, groups and communicators
 * made from them, session error handlers, sessions beside the world model.
 *
 * usage: session MODE
 *   world:    a session opened before MPI_Init, used, MPI_Init and the
 *             world model beside it, MPI_Finalize, then the session ends
 *             (the runtime outlives MPI_Finalize while a session is open)
 *   sessions: no MPI_Init at all: two sessions at once, a communicator
 *             from mpi://WORLD in each, both finalized; then a third
 *             MPI_Session_init is refused with an error (resmpi does not
 *             start MPI twice in one process), returned, not fatal
 * Rank 0 prints "OK". Errors other than those provoked end the job.
 * SESSION_SKIP_ERRORS=1 leaves out the provoked errors (MPICH 4.0 sends
 * them to a fatal handler whatever the session's is). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_rank = -1;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "FAIL rank %d %s:%d: check `%s` failed: ", g_rank, \
                    __FILE__, __LINE__, #cond);                                \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                             \
            exit(3);                                                           \
        }                                                                      \
    } while (0)

#define OK(call)                                                               \
    do {                                                                       \
        int rc_ = (call);                                                      \
        CHECK(rc_ == MPI_SUCCESS, "%s returned %d", #call, rc_);               \
    } while (0)

static int g_handler_calls = 0, g_handler_code = 0;
static MPI_Session g_handler_session = MPI_SESSION_NULL;

static void session_handler(MPI_Session *session, int *code, ...)
{
    g_handler_calls++;
    g_handler_code = *code;
    g_handler_session = *session;
}

/* A communicator over process set `pset` of `session`, checked with an
 * allreduce of the ranks. */
static void use_pset(MPI_Session session, const char *pset, int expected_size, const char *tag)
{
    MPI_Group group;
    OK(MPI_Group_from_session_pset(session, pset, &group));
    int size = -1, rank = -1;
    OK(MPI_Group_size(group, &size));
    OK(MPI_Group_rank(group, &rank));
    CHECK(size == expected_size, "%s has %d members, expected %d", pset, size, expected_size);
    MPI_Comm comm;
    OK(MPI_Comm_create_from_group(group, tag, MPI_INFO_NULL, MPI_ERRORS_RETURN, &comm));
    int comm_size = -1, comm_rank = -1;
    OK(MPI_Comm_size(comm, &comm_size));
    OK(MPI_Comm_rank(comm, &comm_rank));
    CHECK(comm_size == size && comm_rank == rank, "comm %d/%d, group %d/%d", comm_rank,
          comm_size, rank, size);
    int sum = -1;
    OK(MPI_Allreduce(&comm_rank, &sum, 1, MPI_INT, MPI_SUM, comm));
    CHECK(sum == size * (size - 1) / 2, "allreduce over %s gave %d", pset, sum);
    OK(MPI_Comm_free(&comm));
    OK(MPI_Group_free(&group));
}

static int world_size_of(MPI_Session session)
{
    MPI_Info info;
    OK(MPI_Session_get_pset_info(session, "mpi://WORLD", &info));
    char value[64];
    int flag = 0;
    OK(MPI_Info_get(info, "mpi_size", sizeof value - 1, value, &flag));
    CHECK(flag, "mpi://WORLD has no mpi_size");
    OK(MPI_Info_free(&info));
    return atoi(value);
}

static void check_session(MPI_Session session)
{
    int count = -1;
    OK(MPI_Session_get_num_psets(session, MPI_INFO_NULL, &count));
    CHECK(count >= 2, "%d process sets", count);
    int found_world = 0, found_self = 0;
    for (int n = 0; n < count; n++) {
        int length = 0;
        OK(MPI_Session_get_nth_pset(session, MPI_INFO_NULL, n, &length, NULL));
        CHECK(length > 1, "pset %d: length %d", n, length);
        char *name = malloc(length);
        OK(MPI_Session_get_nth_pset(session, MPI_INFO_NULL, n, &length, name));
        CHECK(strlen(name) == (size_t)length - 1, "pset %d: %s, length %d", n, name, length);
        found_world |= strcmp(name, "mpi://WORLD") == 0;
        found_self |= strcmp(name, "mpi://SELF") == 0;
        /* A short buffer gets a truncated, terminated name. */
        char short_name[5];
        int short_length = (int)sizeof short_name;
        OK(MPI_Session_get_nth_pset(session, MPI_INFO_NULL, n, &short_length, short_name));
        CHECK(strncmp(short_name, name, 4) == 0 && short_name[4] == '\0', "short %s", short_name);
        free(name);
    }
    CHECK(found_world && found_self, "world %d self %d", found_world, found_self);

    MPI_Info info;
    OK(MPI_Session_get_info(session, &info));
    char level[64];
    int flag = 0;
    OK(MPI_Info_get(info, "thread_level", sizeof level - 1, level, &flag));
    CHECK(flag && strncmp(level, "MPI_THREAD_", 11) == 0, "thread_level %s", flag ? level : "-");
    OK(MPI_Info_free(&info));

    int size = world_size_of(session);
    use_pset(session, "mpi://WORLD", size, "resmpi.test.world");
    use_pset(session, "mpi://SELF", 1, "resmpi.test.self");

    if (getenv("SESSION_SKIP_ERRORS") != NULL)
        return;
    /* A bad process set name: an error, returned (the session's handler
     * is MPI_ERRORS_RETURN here). */
    MPI_Group group = MPI_GROUP_NULL;
    int rc = MPI_Group_from_session_pset(session, "mpi://NOWHERE", &group);
    int class = -1;
    MPI_Error_class(rc, &class);
    CHECK(rc != MPI_SUCCESS && class == MPI_ERR_ARG, "bad pset: rc %d class %d", rc, class);
    rc = MPI_Session_get_nth_pset(session, MPI_INFO_NULL, count, &count, NULL);
    CHECK(rc != MPI_SUCCESS, "pset number %d past the end accepted", count);
}

static void check_errhandlers(MPI_Session session)
{
    MPI_Errhandler handler, got;
    OK(MPI_Session_create_errhandler(session_handler, &handler));
    OK(MPI_Session_set_errhandler(session, handler));
    OK(MPI_Session_get_errhandler(session, &got));
    CHECK(got == handler, "get_errhandler %#x, set %#x", (unsigned)got, (unsigned)handler);
    OK(MPI_Session_call_errhandler(session, MPI_ERR_OTHER));
    CHECK(g_handler_calls == 1 && g_handler_code == MPI_ERR_OTHER && g_handler_session == session,
          "handler: %d calls, code %d", g_handler_calls, g_handler_code);
    /* An error in a session call goes to its handler too. */
    if (getenv("SESSION_SKIP_ERRORS") != NULL) {
        OK(MPI_Session_set_errhandler(session, MPI_ERRORS_RETURN));
        OK(MPI_Errhandler_free(&handler));
        return;
    }
    MPI_Group group;
    int rc = MPI_Group_from_session_pset(session, "no such set", &group);
    CHECK(rc != MPI_SUCCESS && g_handler_calls == 2, "rc %d, %d calls", rc, g_handler_calls);
    int class = -1;
    MPI_Error_class(g_handler_code, &class);
    CHECK(class == MPI_ERR_ARG, "handler got class %d", class);
    OK(MPI_Session_set_errhandler(session, MPI_ERRORS_RETURN));
    OK(MPI_Errhandler_free(&handler));
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "world";
    int initialized = -1;
    if (strcmp(mode, "world") == 0) {
        MPI_Session session;
        OK(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &session));
        CHECK(session != MPI_SESSION_NULL, "session is MPI_SESSION_NULL");
        OK(MPI_Initialized(&initialized));
        CHECK(!initialized, "MPI_Initialized says 1 with only a session open");
        check_session(session);
        check_errhandlers(session);
        MPI_Init(&argc, &argv);
        MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
        int size = 0;
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        CHECK(size == world_size_of(session), "world %d", size);
        int sum = -1;
        OK(MPI_Allreduce(&g_rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        CHECK(sum == size * (size - 1) / 2, "world allreduce %d", sum);
        MPI_Finalize();
        /* The session still works after the world model ended. */
        use_pset(session, "mpi://WORLD", size, "resmpi.test.after");
        OK(MPI_Session_finalize(&session));
        CHECK(session == MPI_SESSION_NULL, "finalize did not null the handle");
        int finalized = 0;
        OK(MPI_Finalized(&finalized));
        CHECK(finalized, "MPI_Finalized says 0");
    } else {
        MPI_Session first, second;
        OK(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &first));
        MPI_Info info;
        OK(MPI_Info_create(&info));
        OK(MPI_Info_set(info, "thread_level", "MPI_THREAD_SERIALIZED"));
        OK(MPI_Session_init(info, MPI_ERRORS_RETURN, &second));
        OK(MPI_Info_free(&info));
        CHECK(first != second, "two sessions share a handle");
        MPI_Group group;
        OK(MPI_Group_from_session_pset(first, "mpi://SELF", &group));
        OK(MPI_Group_rank(group, &g_rank));
        OK(MPI_Group_free(&group));
        OK(MPI_Group_from_session_pset(first, "mpi://WORLD", &group));
        OK(MPI_Group_rank(group, &g_rank));
        OK(MPI_Group_free(&group));
        check_session(first);
        check_session(second);
        OK(MPI_Session_finalize(&first));
        /* The other session goes on. */
        use_pset(second, "mpi://WORLD", world_size_of(second), "resmpi.test.second");
        OK(MPI_Session_finalize(&second));
        OK(MPI_Initialized(&initialized));
        CHECK(!initialized, "MPI_Initialized says 1 without MPI_Init");
        if (getenv("SESSION_SKIP_ERRORS") != NULL)
            goto done;
        MPI_Session third = MPI_SESSION_NULL;
        int rc = MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &third);
        CHECK(rc != MPI_SUCCESS, "MPI started again after its runtime ended");
        char text[MPI_MAX_ERROR_STRING];
        int length = 0;
        MPI_Error_string(rc, text, &length);
        CHECK(strstr(text, "does not start it again") != NULL, "error text: %s", text);
    }
done:
    if (g_rank == 0)
        printf("OK\n");
    return 0;
}
