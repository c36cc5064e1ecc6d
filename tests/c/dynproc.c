/* Dynamic processes (issue 15 item 4): MPI_UNIVERSE_SIZE, ports,
 * accept/connect (also through a published name), MPI_Comm_join,
 * MPI_Comm_disconnect, and the errors of what is not built (spawn) or
 * misused (bad ports, unknown names), none of which may hang.
 *
 *   dynproc universe           print "universe=N flag=F" (rank 0)
 *   dynproc accept             name service + accept/connect, both ways
 *   dynproc halves             lower half of WORLD accepts, upper connects
 *   dynproc join               MPI_Comm_join over a TCP socket (ranks 0, 1)
 *   dynproc spawn              spawn/spawn_multiple refused with MPI_ERR_SPAWN and
 *                              the reason (bad command/wdir/host, universe, launcher);
 *                              spawns that start processes are tests/c/spawn.c
 *   dynproc errors             bad ports, unknown names, an unanswered connect
 *   dynproc disconnect         disconnect waits for pending sends
 */
#include "common.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>

static int error_class(int code) {
    int class_;
    MPI_Error_class(code, &class_);
    return class_;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Over a fresh inter-communicator: the accepting side's rank 0 broadcasts
 * a seed, every connecting process answers seed + its rank, summed at the
 * acceptor's rank 0 by a reduce across the two groups. */
static void exchange(MPI_Comm inter, int accepting) {
    int local_size, remote_size, local_rank;
    MPI_OK(MPI_Comm_size(inter, &local_size));
    MPI_OK(MPI_Comm_remote_size(inter, &remote_size));
    MPI_OK(MPI_Comm_rank(inter, &local_rank));
    int seed = 1000;
    if (accepting) {
        MPI_OK(MPI_Bcast(&seed, 1, MPI_INT, local_rank == 0 ? MPI_ROOT : MPI_PROC_NULL, inter));
        int sum = 0, mine = 0;
        MPI_OK(MPI_Reduce(&mine, &sum, 1, MPI_INT, MPI_SUM,
                          local_rank == 0 ? MPI_ROOT : MPI_PROC_NULL, inter));
        if (local_rank == 0) {
            int expected = 0;
            for (int r = 0; r < remote_size; r++) expected += 1000 + r;
            CHECK(sum == expected, "sum %d, expected %d", sum, expected);
        }
    } else {
        seed = -1;
        MPI_OK(MPI_Bcast(&seed, 1, MPI_INT, 0, inter));
        CHECK(seed == 1000, "seed %d", seed);
        int mine = seed + local_rank, unused = 0;
        MPI_OK(MPI_Reduce(&mine, &unused, 1, MPI_INT, MPI_SUM, 0, inter));
    }
    /* point to point across: local rank r and remote rank r, both ways */
    if (local_rank < remote_size) {
        int out = 7 * local_rank + accepting, in = -1;
        MPI_OK(MPI_Sendrecv(&out, 1, MPI_INT, local_rank, 5, &in, 1, MPI_INT, local_rank, 5,
                            inter, MPI_STATUS_IGNORE));
        CHECK(in == 7 * local_rank + !accepting, "got %d from remote rank %d", in, local_rank);
    }
}

static void universe(void) {
    int *value = NULL, flag = 0;
    MPI_OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_UNIVERSE_SIZE, &value, &flag));
    if (g_rank == 0) {
        printf("universe=%d flag=%d\n", flag ? *value : -1, flag);
        fflush(stdout);
    }
}

/* mpi4py's testAcceptConnect and testConnectAccept, through the name
 * service: rank 0 alone on one side, the others on the other. */
static void accept_connect(void) {
    CHECK(g_size >= 2, "needs two ranks");
    MPI_Group world_group, rest_group;
    MPI_Comm rest, inter;
    int zero = 0;
    MPI_OK(MPI_Comm_group(MPI_COMM_WORLD, &world_group));
    MPI_OK(MPI_Group_excl(world_group, 1, &zero, &rest_group));
    MPI_OK(MPI_Comm_create(MPI_COMM_WORLD, rest_group, &rest));
    char port[MPI_MAX_PORT_NAME] = "";
    /* round 1: rank 0 accepts, published under a service name */
    if (g_rank == 0) {
        MPI_OK(MPI_Open_port(MPI_INFO_NULL, port));
        MPI_OK(MPI_Publish_name("resmpi test service", MPI_INFO_NULL, port));
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (g_rank == 0) {
        MPI_OK(MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter));
        exchange(inter, 1);
        int remote;
        MPI_OK(MPI_Comm_remote_size(inter, &remote));
        CHECK(remote == g_size - 1, "remote size %d", remote);
        MPI_OK(MPI_Comm_disconnect(&inter));
        CHECK(inter == MPI_COMM_NULL, "disconnect leaves the handle");
        MPI_OK(MPI_Unpublish_name("resmpi test service", MPI_INFO_NULL, port));
        MPI_OK(MPI_Close_port(port));
    } else {
        char found[MPI_MAX_PORT_NAME] = "";
        if (g_rank == 1) MPI_OK(MPI_Lookup_name("resmpi test service", MPI_INFO_NULL, found));
        MPI_OK(MPI_Comm_connect(found, MPI_INFO_NULL, 0, rest, &inter));
        exchange(inter, 0);
        int remote, size, rank;
        MPI_OK(MPI_Comm_remote_size(inter, &remote));
        MPI_OK(MPI_Comm_size(inter, &size));
        MPI_OK(MPI_Comm_rank(inter, &rank));
        CHECK(remote == 1 && size == g_size - 1 && rank == g_rank - 1,
              "remote %d size %d rank %d", remote, size, rank);
        MPI_OK(MPI_Comm_disconnect(&inter));
    }
    /* round 2: rank 1 opens the port, the group of ranks 1.. accepts,
     * rank 0 connects (mpi4py's testConnectAccept) */
    if (g_rank == 1) {
        MPI_OK(MPI_Open_port(MPI_INFO_NULL, port));
        MPI_OK(MPI_Send(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, 9, MPI_COMM_WORLD));
    }
    if (g_rank == 0) {
        MPI_OK(MPI_Recv(port, MPI_MAX_PORT_NAME, MPI_CHAR, 1, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        MPI_OK(MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter));
        exchange(inter, 0);
        MPI_Comm merged;
        MPI_OK(MPI_Intercomm_merge(inter, 0, &merged));
        int merged_rank;
        MPI_OK(MPI_Comm_rank(merged, &merged_rank));
        CHECK(merged_rank == 0, "the low group comes first: rank %d", merged_rank);
        MPI_OK(MPI_Comm_free(&merged));
        MPI_OK(MPI_Comm_free(&inter));
    } else {
        MPI_OK(MPI_Comm_accept(port, MPI_INFO_NULL, 0, rest, &inter));
        if (g_rank == 1) MPI_OK(MPI_Close_port(port));
        exchange(inter, 1);
        /* merge and use the result like any intra-communicator */
        MPI_Comm merged;
        MPI_OK(MPI_Intercomm_merge(inter, 1, &merged));
        int merged_size;
        MPI_OK(MPI_Comm_size(merged, &merged_size));
        CHECK(merged_size == g_size, "merged size %d", merged_size);
        MPI_OK(MPI_Comm_free(&merged));
        MPI_OK(MPI_Comm_free(&inter));
        MPI_OK(MPI_Comm_free(&rest));
    }
    MPI_OK(MPI_Group_free(&rest_group));
    MPI_OK(MPI_Group_free(&world_group));
}

/* Two multi-process groups: the lower half accepts, the upper connects;
 * the port travels by MPI_Bcast over WORLD from rank 0. */
static void halves(void) {
    CHECK(g_size >= 2, "needs two ranks");
    int upper = g_rank >= g_size / 2;
    MPI_Comm half, inter;
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, upper, g_rank, &half));
    char port[MPI_MAX_PORT_NAME] = "";
    if (g_rank == 0) MPI_OK(MPI_Open_port(MPI_INFO_NULL, port));
    MPI_OK(MPI_Bcast(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, MPI_COMM_WORLD));
    if (upper) {
        /* only the root's port name counts: the others pass garbage */
        int half_rank;
        MPI_OK(MPI_Comm_rank(half, &half_rank));
        MPI_OK(MPI_Comm_connect(half_rank == 0 ? port : "not a port", MPI_INFO_NULL, 0, half, &inter));
    } else {
        MPI_OK(MPI_Comm_accept(port, MPI_INFO_NULL, 0, half, &inter));
    }
    exchange(inter, !upper);
    int remote;
    MPI_OK(MPI_Comm_remote_size(inter, &remote));
    CHECK(remote == (upper ? g_size / 2 : g_size - g_size / 2), "remote size %d", remote);
    MPI_OK(MPI_Comm_disconnect(&inter));
    if (g_rank == 0) MPI_OK(MPI_Close_port(port));
    MPI_OK(MPI_Comm_free(&half));
}

static void join(void) {
    CHECK(g_size >= 2, "needs two ranks");
    int fd = -1;
    if (g_rank == 0) {
        int listener = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in address = {.sin_family = AF_INET};
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        CHECK(bind(listener, (struct sockaddr *)&address, sizeof address) == 0, "bind");
        CHECK(listen(listener, 1) == 0, "listen");
        socklen_t length = sizeof address;
        getsockname(listener, (struct sockaddr *)&address, &length);
        int port = ntohs(address.sin_port);
        MPI_OK(MPI_Send(&port, 1, MPI_INT, 1, 3, MPI_COMM_WORLD));
        fd = accept(listener, NULL, NULL);
        CHECK(fd >= 0, "accept");
        close(listener);
    } else if (g_rank == 1) {
        int port;
        MPI_OK(MPI_Recv(&port, 1, MPI_INT, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons(port)};
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        CHECK(connect(fd, (struct sockaddr *)&address, sizeof address) == 0, "connect");
    }
    if (g_rank <= 1) {
        MPI_Comm inter;
        MPI_OK(MPI_Comm_join(fd, &inter));
        close(fd);
        int remote, size;
        MPI_OK(MPI_Comm_remote_size(inter, &remote));
        MPI_OK(MPI_Comm_size(inter, &size));
        CHECK(remote == 1 && size == 1, "remote %d size %d", remote, size);
        exchange(inter, g_rank == 0);
        MPI_OK(MPI_Comm_disconnect(&inter));
    }
}

static const char *g_self; /* this program's path, an existing command */

/* One refused spawn: every member gets MPI_ERR_SPAWN, no inter-communicator
 * and every error code set; rank 0 prints "spawn LABEL: MESSAGE" so the
 * test can check the reason, which must be the same at every member. */
static void refused(const char *label, int rc, MPI_Comm children, const int *codes, int count) {
    CHECK(error_class(rc) == MPI_ERR_SPAWN, "%s: spawn returned class %d", label, error_class(rc));
    CHECK(children == MPI_COMM_NULL, "%s: no inter-communicator on failure", label);
    for (int i = 0; codes && i < count; i++)
        CHECK(codes[i] == MPI_ERR_SPAWN, "%s: errcodes[%d] = %d", label, i, codes[i]);
    char text[MPI_MAX_ERROR_STRING], root_text[MPI_MAX_ERROR_STRING];
    int length = 0;
    memset(text, 0, sizeof text);
    MPI_Error_string(rc, text, &length);
    memcpy(root_text, text, sizeof text);
    MPI_OK(MPI_Bcast(root_text, MPI_MAX_ERROR_STRING, MPI_CHAR, 0, MPI_COMM_WORLD));
    CHECK(!strcmp(text, root_text), "%s: rank %d got '%s', rank 0 '%s'", label, g_rank, text, root_text);
    if (g_rank == 0) printf("spawn %s: %s\n", label, text);
}

static void spawn(void) {
    MPI_Comm parent, children = MPI_COMM_WORLD;
    MPI_OK(MPI_Comm_get_parent(&parent));
    CHECK(parent == MPI_COMM_NULL, "a process started by mpiexec has no parent");
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int *universe, flag;
    MPI_OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_UNIVERSE_SIZE, &universe, &flag));
    CHECK(flag, "MPI_UNIVERSE_SIZE is set");
    int room = *universe - g_size;
    int codes[16];
    char *args[] = {"x", NULL};
    double start = now();

    memset(codes, 0, sizeof codes);
    int rc = MPI_Comm_spawn("./no-such-program", args, 3, MPI_INFO_NULL, 0, MPI_COMM_WORLD,
                            &children, codes);
    refused("bad command", rc, children, codes, 3);

    memset(codes, 0, sizeof codes);
    children = MPI_COMM_WORLD;
    rc = MPI_Comm_spawn(g_self, args, room + 1, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &children, codes);
    refused("over universe", rc, children, codes, room + 1);

    /* known keys with bad values (an unknown key is ignored) */
    char host[MPI_MAX_PROCESSOR_NAME];
    int host_length;
    MPI_OK(MPI_Get_processor_name(host, &host_length));
    MPI_Info info;
    MPI_OK(MPI_Info_create(&info));
    MPI_OK(MPI_Info_set(info, "host", host));
    MPI_OK(MPI_Info_set(info, "x-no-such-key", "ignored"));
    MPI_OK(MPI_Info_set(info, "wdir", "/no/such/directory"));
    children = MPI_COMM_WORLD;
    rc = MPI_Comm_spawn(g_self, MPI_ARGV_NULL, 1, info, 0, MPI_COMM_WORLD, &children,
                        MPI_ERRCODES_IGNORE);
    refused("bad wdir", rc, children, NULL, 0);

    MPI_OK(MPI_Info_set(info, "wdir", "."));
    MPI_OK(MPI_Info_set(info, "host", "no-such-host.invalid"));
    children = MPI_COMM_WORLD;
    rc = MPI_Comm_spawn(g_self, MPI_ARGV_NULL, 1, info, 0, MPI_COMM_WORLD, &children,
                        MPI_ERRCODES_IGNORE);
    refused("bad host", rc, children, NULL, 0);
    MPI_OK(MPI_Info_free(&info));

    /* spawn_multiple: two commands that together overflow the universe */
    char *commands[2] = {(char *)g_self, (char *)g_self};
    int counts[2] = {room + 1, 1};
    MPI_Info infos[2] = {MPI_INFO_NULL, MPI_INFO_NULL};
    memset(codes, 0, sizeof codes);
    children = MPI_COMM_WORLD;
    if (room + 2 <= 16) {
        rc = MPI_Comm_spawn_multiple(2, commands, MPI_ARGVS_NULL, counts, infos, 0, MPI_COMM_WORLD,
                                     &children, codes);
        refused("multiple over universe", rc, children, codes, room + 2);
    }
    CHECK(now() - start < 10, "spawn errors took %.1f s", now() - start);
    /* the parents keep working */
    int sum = 0, one = 1;
    MPI_OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(sum == g_size, "allreduce after the refusals: %d", sum);
    if (g_rank == 0) printf("spawn refused\n");
}

static void errors(void) {
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    MPI_Comm inter = MPI_COMM_NULL;
    char port[MPI_MAX_PORT_NAME];
    double start = now();
    int rc = MPI_Comm_connect("not a port", MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter);
    CHECK(error_class(rc) == MPI_ERR_PORT, "garbage port: %d", rc);
    rc = MPI_Comm_connect("resmpi-port:kvs_other_job:0:0", MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter);
    CHECK(error_class(rc) == MPI_ERR_PORT, "another job's port: %d", rc);
    rc = MPI_Close_port("resmpi-port:kvs_other_job:0:0");
    CHECK(error_class(rc) == MPI_ERR_PORT, "closing a port never opened: %d", rc);
    rc = MPI_Lookup_name("no such service", MPI_INFO_NULL, port);
    CHECK(error_class(rc) == MPI_ERR_NAME, "lookup of an unknown name: %d", rc);
    rc = MPI_Unpublish_name("no such service", MPI_INFO_NULL, "x");
    CHECK(error_class(rc) == MPI_ERR_SERVICE, "unpublish of an unknown name: %d", rc);
    MPI_OK(MPI_Open_port(MPI_INFO_NULL, port));
    rc = MPI_Comm_accept("not a port", MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter);
    CHECK(error_class(rc) == MPI_ERR_PORT, "accept on a garbage port: %d", rc);
    /* an error at the root reaches every member of the connecting group */
    rc = MPI_Comm_connect(g_rank == 0 ? "not a port" : port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter);
    CHECK(rc != MPI_SUCCESS, "a failed root must fail every member");
    MPI_OK(MPI_Close_port(port));
    /* (MPICH lets this pass; the standard calls it erroneous) */
    MPI_Comm world = MPI_COMM_WORLD;
    rc = MPI_Comm_disconnect(&world);
    CHECK(error_class(rc) == MPI_ERR_COMM, "disconnecting WORLD: %d", rc);
    CHECK(now() - start < 5, "errors took %.1f s", now() - start);
    /* nobody accepts: the connect gives up (RESMPI_CONNECT_TIMEOUT=1) */
    if (g_size >= 2) {
        if (g_rank == 0) {
            MPI_OK(MPI_Open_port(MPI_INFO_NULL, port));
            MPI_OK(MPI_Send(port, MPI_MAX_PORT_NAME, MPI_CHAR, 1, 4, MPI_COMM_WORLD));
        } else if (g_rank == 1) {
            MPI_OK(MPI_Recv(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            start = now();
            rc = MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter);
            CHECK(error_class(rc) == MPI_ERR_PORT, "unanswered connect: %d", rc);
            CHECK(now() - start < 20, "unanswered connect took %.1f s", now() - start);
        }
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        if (g_rank == 0) MPI_OK(MPI_Close_port(port));
    }
    if (g_rank == 0) printf("errors reported\n");
}

static void disconnect(void) {
    MPI_Comm dup;
    MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    enum { N = 1 << 16 };
    int *data = malloc(N * sizeof(int));
    int peer = (g_rank + 1) % g_size, from = (g_rank + g_size - 1) % g_size;
    for (int i = 0; i < N; i++) data[i] = g_rank * N + i;
    MPI_Request request;
    MPI_OK(MPI_Isend(data, N, MPI_INT, peer, 1, dup, &request));
    int *in = malloc(N * sizeof(int));
    MPI_OK(MPI_Recv(in, N, MPI_INT, from, 1, dup, MPI_STATUS_IGNORE));
    for (int i = 0; i < N; i++) CHECK(in[i] == from * N + i, "in[%d] = %d", i, in[i]);
    /* the Isend is not waited for: disconnect must complete it */
    MPI_OK(MPI_Request_free(&request));
    MPI_OK(MPI_Comm_disconnect(&dup));
    CHECK(dup == MPI_COMM_NULL, "disconnect leaves the handle");
    free(data);
    free(in);
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    const char *mode = argc > 1 ? argv[1] : "accept";
    g_self = argv[0];
    if (!strcmp(mode, "universe")) universe();
    else if (!strcmp(mode, "accept")) accept_connect();
    else if (!strcmp(mode, "halves")) halves();
    else if (!strcmp(mode, "join")) join();
    else if (!strcmp(mode, "spawn")) spawn();
    else if (!strcmp(mode, "errors")) errors();
    else if (!strcmp(mode, "disconnect")) disconnect();
    else FAIL("unknown mode %s", mode);
    return test_finish();
}
