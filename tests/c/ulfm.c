/* ulfm: the ULFM interface (revoke, shrink, agree, failure_ack) on real
 * processes, run under mpiexec --with-ft ulfm. One mode per run:
 *
 *   revoke        rank 0 revokes a duplicate of MPI_COMM_WORLD while every
 *                 other rank is blocked in a receive from a live rank that
 *                 never sends: each must wake with MPIX_ERR_REVOKED; later
 *                 operations fail the same way, MPIX_Comm_is_revoked says 1,
 *                 agree still works, shrink gives a working communicator.
 *   revoke-die    the same, but rank 0 dies right after it revoked (a send
 *                 on MPI_COMM_WORLD to rank 1 follows the revoke, so at
 *                 least rank 1 got it): the others learn it by the flood.
 *   inter-agree   agree, revoke and shrink on an inter-communicator, with
 *                 a death (see inter_agree() below).
 *   nonblocking   MPIX_Comm_iagree overlaps (rank 0 sends what rank 1 needs
 *                 before it joins), reports a death at its Wait, and
 *                 MPIX_Comm_ishrink gives a working communicator.
 *   initial-errhandler  under mpiexec --initial-errhandler mpi_errors_return
 *                 MPI_INFO_ENV names it and an error on MPI_COMM_WORLD
 *                 returns.
 *   finalize-revoked  MPI_COMM_WORLD is revoked (a blocked probe and a
 *                 blocked receive wake) after a rank died: MPI_Finalize
 *                 returns at every survivor.
 *   pending       the last rank dies; a blocking wildcard receive then
 *                 fails with MPIX_ERR_PROC_FAILED, and waiting for (or
 *                 testing) a nonblocking one returns
 *                 MPIX_ERR_PROC_FAILED_PENDING and leaves it active until
 *                 MPIX_Comm_failure_ack, after which it receives; get_acked and get_failed name
 *                 the dead rank; agree succeeds once every rank acked.
 *   pending-at-death  wildcard receives posted *before* the last rank
 *                 dies: a blocking one waiting at the death fails with
 *                 MPIX_ERR_PROC_FAILED; nonblocking ones stay active, and
 *                 Wait, Test, Waitany, Testany, Waitall, Testall, Waitsome
 *                 and Testsome all return MPIX_ERR_PROC_FAILED_PENDING
 *                 until MPIX_Comm_failure_ack; then they receive.
 *   agree         every rank runs ROUNDS agreements (flag = a value of the
 *                 round and the rank) while mpiexec kills processes at
 *                 seeded moments (--inject kill:...); after an agree that
 *                 reports a failure each rank acknowledges. Each survivor
 *                 prints a digest of every (flag, error class) it got, which
 *                 must be the same on all survivors (uniform agreement),
 *                 then shrinks and checks the new communicator.
 *   jacobi [ref]  a resilient 1-D Jacobi solver (see jacobi() below);
 *                 "ref" runs it fault-free for the expected answer.
 *
 * Every survivor prints "rank R: ..." lines the test compares; MPI_Finalize
 * must return everywhere.
 */
#include <mpi.h>
#include <mpi-ext.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int world_rank, world_size;

static int class_of(int code) {
    int class_code = code;
    if (code != MPI_SUCCESS) MPI_Error_class(code, &class_code);
    return class_code;
}

#define EXPECT(cond, ...)                                                  \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "FAIL rank %d line %d: %s: ", world_rank,      \
                    __LINE__, #cond);                                      \
            fprintf(stderr, __VA_ARGS__);                                  \
            fprintf(stderr, "\n");                                         \
            fflush(stderr);                                                \
            exit(3);                                                       \
        }                                                                  \
    } while (0)

static int group_size(MPI_Group group) {
    int size;
    MPI_Group_size(group, &size);
    return size;
}

/* ---------------------------------------------------------------- revoke */
static int revoke_mode(int revoker_dies) {
    /* MPI_Wait reports through MPI_COMM_WORLD's handler. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    long value = 0;
    if (world_rank == 0) {
        usleep(100 * 1000); /* let the others block */
        EXPECT(MPIX_Comm_revoke(comm) == MPI_SUCCESS, "revoke failed");
        if (revoker_dies) {
            /* After the revoke on the same path: rank 1 holds the revoke
             * once this send completes. */
            MPI_Send(&value, 1, MPI_LONG, 1, 7, MPI_COMM_WORLD);
            raise(SIGKILL);
        }
    } else {
        /* From a live rank that never sends on comm: only the revoke ends it. */
        int source = world_rank == world_size - 1 ? 1 : world_rank + 1;
        int rc = MPI_Recv(&value, 1, MPI_LONG, source, 1, comm, MPI_STATUS_IGNORE);
        EXPECT(class_of(rc) == MPIX_ERR_REVOKED, "blocked receive ended with class %d", class_of(rc));
        if (revoker_dies && world_rank == 1) {
            rc = MPI_Recv(&value, 1, MPI_LONG, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            EXPECT(rc == MPI_SUCCESS || class_of(rc) == MPIX_ERR_PROC_FAILED, "class %d", class_of(rc));
        }
    }
    if (revoker_dies) {
        /* Know of the revoker's death before the send below, which goes to
         * it from the last rank: revoked comes first even then. */
        int dead = MPI_Recv(&value, 1, MPI_LONG, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        EXPECT(class_of(dead) == MPIX_ERR_PROC_FAILED, "receive from the dead revoker: class %d", class_of(dead));
    }
    int flag = 0;
    MPIX_Comm_is_revoked(comm, &flag);
    EXPECT(flag == 1, "MPIX_Comm_is_revoked says %d", flag);
    int rc = MPI_Send(&value, 1, MPI_LONG, (world_rank + 1) % world_size, 2, comm);
    EXPECT(class_of(rc) == MPIX_ERR_REVOKED, "send on a revoked comm: class %d", class_of(rc));
    rc = MPI_Barrier(comm);
    EXPECT(class_of(rc) == MPIX_ERR_REVOKED, "barrier on a revoked comm: class %d", class_of(rc));
    MPI_Request request;
    rc = MPI_Irecv(&value, 1, MPI_LONG, MPI_ANY_SOURCE, 2, comm, &request);
    if (rc == MPI_SUCCESS) rc = MPI_Wait(&request, MPI_STATUS_IGNORE);
    EXPECT(class_of(rc) == MPIX_ERR_REVOKED || class_of(rc) == MPIX_ERR_PROC_FAILED_PENDING,
           "wildcard receive on a revoked comm: class %d", class_of(rc));
    /* agree and shrink work on a revoked communicator */
    if (revoker_dies) MPIX_Comm_failure_ack(comm);
    int agreed = 0x7 ^ (world_rank == 1 ? 0x2 : 0);
    rc = MPIX_Comm_agree(comm, &agreed);
    MPI_Comm shrunk;
    EXPECT(MPIX_Comm_shrink(comm, &shrunk) == MPI_SUCCESS, "shrink failed");
    int size, rank;
    MPI_Comm_size(shrunk, &size);
    MPI_Comm_rank(shrunk, &rank);
    MPIX_Comm_is_revoked(shrunk, &flag);
    EXPECT(flag == 0, "the shrunk communicator is revoked");
    long sum = 0, mine = world_rank;
    MPI_Comm_set_errhandler(shrunk, MPI_ERRORS_RETURN);
    EXPECT(MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, shrunk) == MPI_SUCCESS, "allreduce on shrunk");
    printf("rank %d: revoked, agree class %d flag %d, shrunk size %d rank %d sum %ld\n", world_rank,
           class_of(rc), agreed, size, rank, sum);
    MPI_Comm_free(&shrunk);
    MPI_Comm_free(&comm);
    return 0;
}

/* ----------------------------------------------------------- inter-agree */
/* MPI_COMM_WORLD split in halves joined by an inter-communicator: agree
 * gives each group the AND of the *other* group's flags; when a rank of
 * the second half dies, agree reports MPIX_ERR_PROC_FAILED in both groups
 * until everyone acknowledged; a revoke of the inter-communicator reaches
 * both groups; shrink gives an inter-communicator of each group's
 * survivors on which an allreduce works. */
static int inter_agree(void) {
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int half = world_size / 2, low = world_rank < half;
    MPI_Comm local, inter;
    MPI_Comm_split(MPI_COMM_WORLD, low, world_rank, &local);
    MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, low ? half : 0, 5, &inter);
    MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
    /* low group contributes 0x0f minus one bit per rank, high group 0xf0 minus one */
    int flag = low ? (0xff & ~(1 << world_rank)) : (0xff & ~(1 << (4 + (world_rank - half) % 4)));
    int rc = MPIX_Comm_agree(inter, &flag);
    int expected_from_high = 0xff, expected_from_low = 0xff;
    for (int r = 0; r < half; r++) expected_from_low &= 0xff & ~(1 << r);
    for (int r = half; r < world_size; r++) expected_from_high &= 0xff & ~(1 << (4 + (r - half) % 4));
    EXPECT(rc == MPI_SUCCESS && flag == (low ? expected_from_high : expected_from_low),
           "agree: class %d flag %#x", class_of(rc), flag);
    /* the last rank dies (it contributes all ones, so it changes no flag) */
    if (world_rank == world_size - 1) raise(SIGKILL);
    long value;
    if (world_rank == half) {
        rc = MPI_Recv(&value, 1, MPI_LONG, world_size - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        EXPECT(rc == MPIX_ERR_PROC_FAILED, "receive from the dead: %d", rc);
    }
    flag = 0xff;
    rc = MPIX_Comm_agree(inter, &flag);
    EXPECT(rc == MPIX_ERR_PROC_FAILED, "agree after a death: class %d", class_of(rc));
    MPIX_Comm_failure_ack(inter);
    flag = low ? 0x3 : 0xc;
    rc = MPIX_Comm_agree(inter, &flag);
    EXPECT(rc == MPI_SUCCESS && flag == (low ? 0xc : 0x3), "agree after ack: class %d flag %#x", class_of(rc),
           flag);
    /* a revoke by the first rank reaches both groups */
    if (world_rank == 0) {
        MPIX_Comm_revoke(inter);
    } else {
        rc = MPI_Recv(&value, 1, MPI_LONG, 0, 9, inter, MPI_STATUS_IGNORE);
        EXPECT(class_of(rc) == MPIX_ERR_REVOKED, "receive on the revoked inter-communicator: %d", rc);
    }
    int revoked = 0;
    MPIX_Comm_is_revoked(inter, &revoked);
    EXPECT(revoked, "not revoked");
    /* shrink: an inter-communicator of each group's survivors */
    MPI_Comm shrunk;
    rc = MPIX_Comm_shrink(inter, &shrunk);
    EXPECT(rc == MPI_SUCCESS, "shrink of an inter-communicator: class %d", class_of(rc));
    MPI_Comm_set_errhandler(shrunk, MPI_ERRORS_RETURN);
    int is_inter = 0, local_size = 0, remote_size = 0;
    MPI_Comm_test_inter(shrunk, &is_inter);
    MPI_Comm_size(shrunk, &local_size);
    MPI_Comm_remote_size(shrunk, &remote_size);
    int high_survivors = world_size - half - 1;
    EXPECT(is_inter && local_size == (low ? half : high_survivors) &&
               remote_size == (low ? high_survivors : half),
           "shrunk: inter %d, sizes %d / %d", is_inter, local_size, remote_size);
    long mine = world_rank, remote_sum = 0, expected = 0;
    for (int r = 0; r < world_size - 1; r++)
        if ((r < half) != low) expected += r;
    rc = MPI_Allreduce(&mine, &remote_sum, 1, MPI_LONG, MPI_SUM, shrunk);
    EXPECT(rc == MPI_SUCCESS && remote_sum == expected, "allreduce on the shrunk inter: class %d, %ld != %ld",
           class_of(rc), remote_sum, expected);
    printf("rank %d: inter-communicator agree, revoke and shrink ok\n", world_rank);
    MPI_Comm_free(&shrunk);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&local);
    return 0;
}

/* ----------------------------------------------------------- nonblocking */
/* MPIX_Comm_iagree and MPIX_Comm_ishrink (mpi-ext.h) do not block: rank 0
 * starts an iagree and only then sends rank 1 the message rank 1 waits for
 * before it starts its own (an iagree that ran to its decision inside the
 * call would wait for rank 1's contribution for ever). Then, after the
 * last rank died, a Wait on an iagree returns MPIX_ERR_PROC_FAILED, and an
 * ishrink gives a working communicator of the survivors. */
static int nonblocking(void) {
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Request request;
    int flag = 0x70 | world_rank, rc;
    long token = 42;
    if (world_rank == 0) {
        EXPECT(MPIX_Comm_iagree(comm, &flag, &request) == MPI_SUCCESS, "iagree");
        MPI_Send(&token, 1, MPI_LONG, 1, 1, MPI_COMM_WORLD);
    } else {
        if (world_rank == 1) MPI_Recv(&token, 1, MPI_LONG, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        EXPECT(MPIX_Comm_iagree(comm, &flag, &request) == MPI_SUCCESS, "iagree");
    }
    rc = MPI_Wait(&request, MPI_STATUS_IGNORE);
    EXPECT(rc == MPI_SUCCESS && flag == 0x70 && request == MPI_REQUEST_NULL, "iagree: class %d flag %#x",
           class_of(rc), flag);
    /* the last rank dies */
    MPI_Barrier(comm);
    if (world_rank == world_size - 1) raise(SIGKILL);
    long value;
    rc = MPI_Recv(&value, 1, MPI_LONG, world_size - 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    EXPECT(rc == MPIX_ERR_PROC_FAILED, "receive from the dead: %d", rc);
    flag = 1;
    MPIX_Comm_iagree(comm, &flag, &request);
    int done = 0;
    while (!done) {
        rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) break;
    }
    EXPECT(class_of(rc) == MPIX_ERR_PROC_FAILED, "iagree after a death: class %d", class_of(rc));
    MPI_Comm shrunk = MPI_COMM_NULL;
    EXPECT(MPIX_Comm_ishrink(comm, &shrunk, &request) == MPI_SUCCESS, "ishrink");
    rc = MPI_Wait(&request, MPI_STATUS_IGNORE);
    EXPECT(rc == MPI_SUCCESS && shrunk != MPI_COMM_NULL, "ishrink wait: class %d", class_of(rc));
    int size;
    MPI_Comm_size(shrunk, &size);
    long one = 1, count = 0;
    rc = MPI_Allreduce(&one, &count, 1, MPI_LONG, MPI_SUM, shrunk);
    EXPECT(rc == MPI_SUCCESS && size == world_size - 1 && count == world_size - 1,
           "shrunk: size %d, allreduce %ld (class %d)", size, count, class_of(rc));
    printf("rank %d: iagree and ishrink ok\n", world_rank);
    MPI_Comm_free(&shrunk);
    MPI_Comm_free(&comm);
    return 0;
}

/* ---------------------------------------------------- initial-errhandler */
/* Under mpiexec --initial-errhandler mpi_errors_return: MPI_INFO_ENV says
 * so, and an error on MPI_COMM_WORLD returns instead of ending the job. */
static int initial_errhandler(void) {
    char value[MPI_MAX_INFO_VAL] = "";
    int flag = 0;
    MPI_Info_get(MPI_INFO_ENV, "mpi_initial_errhandler", MPI_MAX_INFO_VAL - 1, value, &flag);
    EXPECT(flag && strcmp(value, "mpi_errors_return") == 0, "MPI_INFO_ENV has '%s' (flag %d)", value, flag);
    long one = 1;
    int rc = MPI_Send(&one, 1, MPI_LONG, world_size, 0, MPI_COMM_WORLD);
    EXPECT(class_of(rc) == MPI_ERR_RANK, "send to rank %d: class %d", world_size, class_of(rc));
    printf("rank %d: initial errhandler returns\n", world_rank);
    return 0;
}

/* ------------------------------------------------------ finalize-revoked */
/* MPI_COMM_WORLD itself is revoked (a blocked probe and receive end with
 * MPIX_ERR_REVOKED), one rank has died, and MPI_Finalize still returns at
 * every survivor. */
static int finalize_revoked(void) {
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int victim = world_size - 1;
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank == victim) raise(SIGKILL);
    long value = 0;
    if (world_rank == 0) {
        usleep(100 * 1000);
        EXPECT(MPIX_Comm_revoke(MPI_COMM_WORLD) == MPI_SUCCESS, "revoke");
    } else if (world_rank == 1) {
        MPI_Status status;
        int rc = MPI_Probe(0, 9, MPI_COMM_WORLD, &status);
        EXPECT(class_of(rc) == MPIX_ERR_REVOKED, "probe ended with class %d", class_of(rc));
    } else {
        int rc = MPI_Recv(&value, 1, MPI_LONG, 1, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        EXPECT(class_of(rc) == MPIX_ERR_REVOKED, "receive ended with class %d", class_of(rc));
    }
    int rc = MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    EXPECT(class_of(rc) == MPIX_ERR_REVOKED, "allreduce on revoked world: class %d", class_of(rc));
    printf("rank %d: world revoked, finalizing\n", world_rank);
    return 0;
}

/* --------------------------------------------------------------- pending */
static int pending(void) {
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int victim = world_size - 1;
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank == victim) raise(SIGKILL);
    long value = 0;
    /* Wait until this rank knows of the death. */
    int rc = MPI_Recv(&value, 1, MPI_LONG, victim, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    /* The bare class, as Open MPI returns it: ULFM programs compare codes. */
    EXPECT(rc == MPIX_ERR_PROC_FAILED, "receive from the dead: code %d", rc);
    /* Before the ack: a blocking wildcard receive fails, a nonblocking one
     * starts but its wait reports PROC_FAILED_PENDING and leaves it active. */
    rc = MPI_Recv(&value, 1, MPI_LONG, MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    EXPECT(class_of(rc) == MPIX_ERR_PROC_FAILED, "blocking wildcard before ack: class %d", class_of(rc));
    MPI_Request request;
    rc = MPI_Irecv(&value, 1, MPI_LONG, MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, &request);
    EXPECT(rc == MPI_SUCCESS && request != MPI_REQUEST_NULL, "wildcard irecv: class %d", class_of(rc));
    rc = MPI_Wait(&request, MPI_STATUS_IGNORE);
    EXPECT(class_of(rc) == MPIX_ERR_PROC_FAILED_PENDING, "wildcard wait before ack: class %d", class_of(rc));
    EXPECT(request != MPI_REQUEST_NULL, "the pending request was freed");
    int done = 1;
    rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    EXPECT(class_of(rc) == MPIX_ERR_PROC_FAILED_PENDING && !done, "test before ack: class %d", class_of(rc));
    /* A synchronisation point (nobody has acknowledged: every survivor gets
     * PROC_FAILED): no survivor sends the ring's message below before
     * every survivor has checked its pending receive. */
    int flag = 1;
    rc = MPIX_Comm_agree(MPI_COMM_WORLD, &flag);
    EXPECT(class_of(rc) == MPIX_ERR_PROC_FAILED, "agree before ack: class %d", class_of(rc));
    char text[MPI_MAX_ERROR_STRING];
    int length;
    MPI_Error_string(rc, text, &length);
    EXPECT(strstr(text, "acknowledged") != NULL, "error string: %s", text);
    MPI_Group acked, failed;
    MPIX_Comm_failure_get_acked(MPI_COMM_WORLD, &acked);
    EXPECT(group_size(acked) == 0, "acked before ack: %d", group_size(acked));
    MPI_Group_free(&acked);
    EXPECT(MPIX_Comm_failure_ack(MPI_COMM_WORLD) == MPI_SUCCESS, "ack");
    MPIX_Comm_failure_get_acked(MPI_COMM_WORLD, &acked);
    MPIX_Comm_get_failed(MPI_COMM_WORLD, &failed);
    EXPECT(group_size(acked) == 1 && group_size(failed) == 1, "acked %d failed %d", group_size(acked),
           group_size(failed));
    MPI_Group world_group;
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    int zero = 0, translated;
    MPI_Group_translate_ranks(failed, 1, &zero, world_group, &translated);
    EXPECT(translated == victim, "get_failed names %d", translated);
    MPI_Group_free(&acked);
    MPI_Group_free(&failed);
    MPI_Group_free(&world_group);
    /* After the ack the same wildcard receive completes. */
    int next = (world_rank + 1) % victim, previous = (world_rank + victim - 1) % victim;
    long token = world_rank;
    EXPECT(MPI_Send(&token, 1, MPI_LONG, next, 3, MPI_COMM_WORLD) == MPI_SUCCESS, "send");
    MPI_Status status;
    rc = MPI_Wait(&request, &status);
    EXPECT(rc == MPI_SUCCESS && value == previous && status.MPI_SOURCE == previous,
           "wildcard got %ld from %d (class %d)", value, status.MPI_SOURCE, class_of(rc));
    /* Everyone acknowledged: agree succeeds with the AND. */
    flag = world_rank == 0 ? 0x3 : 0x7;
    rc = MPIX_Comm_agree(MPI_COMM_WORLD, &flag);
    EXPECT(rc == MPI_SUCCESS && flag == 0x3, "agree after ack: class %d flag %d", class_of(rc), flag);
    int ft = 0, found = 0;
    int *ft_value;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPIX_FT, &ft_value, &found);
    if (found) ft = *ft_value;
    printf("rank %d: pending then acknowledged, MPIX_FT %d\n", world_rank, ft);
    return 0;
}

static int pending_at_death(void) {
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int victim = world_size - 1;
    long first = -1, second = -1, value = 0;
    MPI_Request requests[2];
    EXPECT(MPI_Irecv(&first, 1, MPI_LONG, MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, &requests[0]) == MPI_SUCCESS,
           "irecv 5");
    EXPECT(MPI_Irecv(&second, 1, MPI_LONG, MPI_ANY_SOURCE, 6, MPI_COMM_WORLD, &requests[1]) == MPI_SUCCESS,
           "irecv 6");
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank == victim) raise(SIGKILL);
    /* Nobody sends tag 7: this receive waits until the death is noticed. */
    int rc = MPI_Recv(&value, 1, MPI_LONG, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    EXPECT(class_of(rc) == MPIX_ERR_PROC_FAILED, "blocking wildcard at the death: class %d", class_of(rc));
    rc = MPI_Wait(&requests[0], MPI_STATUS_IGNORE);
    EXPECT(class_of(rc) == MPIX_ERR_PROC_FAILED_PENDING && requests[0] != MPI_REQUEST_NULL,
           "wait on a wildcard posted before the death: class %d", class_of(rc));
    int flag = 1, index = -2, outcount = -2, indices[2];
    rc = MPI_Test(&requests[0], &flag, MPI_STATUS_IGNORE);
    EXPECT(class_of(rc) == MPIX_ERR_PROC_FAILED_PENDING && !flag, "test: class %d", class_of(rc));
    rc = MPI_Waitany(2, requests, &index, MPI_STATUS_IGNORE);
    EXPECT(class_of(rc) == MPIX_ERR_PROC_FAILED_PENDING, "waitany: class %d", class_of(rc));
    flag = 1;
    rc = MPI_Testany(2, requests, &index, &flag, MPI_STATUS_IGNORE);
    EXPECT(class_of(rc) == MPIX_ERR_PROC_FAILED_PENDING && !flag, "testany: class %d", class_of(rc));
    rc = MPI_Waitall(2, requests, MPI_STATUSES_IGNORE);
    EXPECT(class_of(rc) == MPIX_ERR_PROC_FAILED_PENDING, "waitall: class %d", class_of(rc));
    flag = 1;
    rc = MPI_Testall(2, requests, &flag, MPI_STATUSES_IGNORE);
    EXPECT(class_of(rc) == MPIX_ERR_PROC_FAILED_PENDING && !flag, "testall: class %d", class_of(rc));
    rc = MPI_Waitsome(2, requests, &outcount, indices, MPI_STATUSES_IGNORE);
    EXPECT(class_of(rc) == MPIX_ERR_PROC_FAILED_PENDING, "waitsome: class %d", class_of(rc));
    rc = MPI_Testsome(2, requests, &outcount, indices, MPI_STATUSES_IGNORE);
    EXPECT(class_of(rc) == MPIX_ERR_PROC_FAILED_PENDING, "testsome: class %d", class_of(rc));
    EXPECT(requests[0] != MPI_REQUEST_NULL && requests[1] != MPI_REQUEST_NULL, "a pending request was freed");
    /* Every survivor has checked (agree is a synchronisation point), then acks. */
    flag = 1;
    rc = MPIX_Comm_agree(MPI_COMM_WORLD, &flag);
    EXPECT(class_of(rc) == MPIX_ERR_PROC_FAILED, "agree before ack: class %d", class_of(rc));
    EXPECT(MPIX_Comm_failure_ack(MPI_COMM_WORLD) == MPI_SUCCESS, "ack");
    int next = (world_rank + 1) % victim, previous = (world_rank + victim - 1) % victim;
    long tokens[2] = {100 + world_rank, world_rank};
    EXPECT(MPI_Send(&tokens[1], 1, MPI_LONG, next, 6, MPI_COMM_WORLD) == MPI_SUCCESS, "send 6");
    EXPECT(MPI_Send(&tokens[0], 1, MPI_LONG, next, 5, MPI_COMM_WORLD) == MPI_SUCCESS, "send 5");
    MPI_Status statuses[2];
    rc = MPI_Waitall(2, requests, statuses);
    EXPECT(rc == MPI_SUCCESS && first == 100 + previous && second == previous &&
               statuses[0].MPI_SOURCE == previous && statuses[1].MPI_SOURCE == previous,
           "waitall after ack: class %d got %ld and %ld", class_of(rc), first, second);
    printf("rank %d: pending at the death, then acknowledged\n", world_rank);
    return 0;
}

/* ----------------------------------------------------------------- agree */
#define ROUNDS 400

static int agree(void) {
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    uint64_t digest = 1469598103934665603ull;
    int failures_seen = 0;
    for (int round = 0; round < ROUNDS; round++) {
        int flag = ~(1 << ((round + world_rank) % 31));
        int rc = MPIX_Comm_agree(MPI_COMM_WORLD, &flag);
        int class_code = class_of(rc);
        EXPECT(class_code == MPI_SUCCESS || class_code == MPIX_ERR_PROC_FAILED, "agree class %d", class_code);
        digest = (digest ^ (uint32_t)flag) * 1099511628211ull;
        digest = (digest ^ (uint32_t)class_code) * 1099511628211ull;
        if (class_code == MPIX_ERR_PROC_FAILED) {
            failures_seen++;
            MPIX_Comm_failure_ack(MPI_COMM_WORLD);
        }
        usleep(1000);
    }
    MPI_Comm shrunk;
    int rc = MPIX_Comm_shrink(MPI_COMM_WORLD, &shrunk);
    EXPECT(rc == MPI_SUCCESS, "shrink class %d", class_of(rc));
    MPI_Comm_set_errhandler(shrunk, MPI_ERRORS_RETURN);
    int size;
    MPI_Comm_size(shrunk, &size);
    long one = 1, count = 0;
    rc = MPI_Allreduce(&one, &count, 1, MPI_LONG, MPI_SUM, shrunk);
    printf("rank %d: digest %016llx, failures reported %d, shrunk size %d allreduce %s %ld\n", world_rank,
           (unsigned long long)digest, failures_seen > 0, size, rc == MPI_SUCCESS ? "ok" : "failed", count);
    MPI_Comm_free(&shrunk);
    return 0;
}

/* ---------------------------------------------------------------- jacobi */
/* u[0] = 1 and u[N-1] = 0 are fixed; each iteration every interior point
 * becomes the mean of its neighbours. The points are split over the live
 * ranks of `work` in blocks. Every iteration ends with an agreement on
 * "every operation of this iteration succeeded"; when it fails (a rank
 * died), every survivor revokes, shrinks, takes the last committed
 * checkpoint (a full copy of u every CHECKPOINT_EVERY iterations, made
 * with an allgather and committed only when the agreement after it
 * succeeded) and splits it over the new communicator. The result does not
 * depend on how many ranks computed it, so it must equal the fault-free
 * run's bit for bit. */
#define POINTS 1200
#define ITERATIONS 400
#define CHECKPOINT_EVERY 25

static void block_of(int rank, int size, int *first, int *count) {
    int base = POINTS / size, extra = POINTS % size;
    *first = rank * base + (rank < extra ? rank : extra);
    *count = base + (rank < extra);
}

static int jacobi(void) {
    /* A process may die as soon as MPI_Init has returned, even inside this
       first dup: the ranks agree on whether it worked everywhere, and
       otherwise start on the survivors of MPI_COMM_WORLD. */
    MPI_Comm work = MPI_COMM_NULL;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int duplicated = MPI_Comm_dup(MPI_COMM_WORLD, &work) == MPI_SUCCESS;
    int everywhere = duplicated;
    if (MPIX_Comm_agree(MPI_COMM_WORLD, &everywhere) != MPI_SUCCESS || !everywhere) {
        if (duplicated) MPI_Comm_free(&work);
        MPIX_Comm_failure_ack(MPI_COMM_WORLD);
        int rc = MPIX_Comm_shrink(MPI_COMM_WORLD, &work);
        EXPECT(rc == MPI_SUCCESS, "shrink of MPI_COMM_WORLD: class %d", class_of(rc));
    }
    MPI_Comm_set_errhandler(work, MPI_ERRORS_RETURN);
    double *checkpoint = calloc(POINTS, sizeof(double));
    double *staging = calloc(POINTS, sizeof(double));
    checkpoint[0] = 1.0;
    int checkpoint_iteration = 0, recoveries = 0;
    int *counts = NULL, *displacements = NULL;
    double *u = NULL, *next = NULL;
    int iteration = 0, rank = 0, size = 0, first = 0, count = 0;
    int restart = 1;
    while (iteration < ITERATIONS) {
        if (restart) {
            restart = 0;
            MPI_Comm_rank(work, &rank);
            MPI_Comm_size(work, &size);
            block_of(rank, size, &first, &count);
            free(u);
            free(next);
            free(counts);
            free(displacements);
            u = calloc(count + 2, sizeof(double));
            next = calloc(count + 2, sizeof(double));
            counts = calloc(size, sizeof(int));
            displacements = calloc(size, sizeof(int));
            for (int r = 0; r < size; r++) block_of(r, size, &displacements[r], &counts[r]);
            memcpy(u + 1, checkpoint + first, count * sizeof(double));
            iteration = checkpoint_iteration;
        }
        int ok = 1;
        int left = rank > 0 ? rank - 1 : MPI_PROC_NULL;
        int right = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
        if (MPI_Sendrecv(&u[1], 1, MPI_DOUBLE, left, 1, &u[count + 1], 1, MPI_DOUBLE, right, 1, work,
                         MPI_STATUS_IGNORE) != MPI_SUCCESS)
            ok = 0;
        if (ok && MPI_Sendrecv(&u[count], 1, MPI_DOUBLE, right, 2, &u[0], 1, MPI_DOUBLE, left, 2, work,
                               MPI_STATUS_IGNORE) != MPI_SUCCESS)
            ok = 0;
        double change = 0.0, total_change = 0.0;
        for (int i = 1; i <= count; i++) {
            int global = first + i - 1;
            next[i] = (global == 0 || global == POINTS - 1) ? u[i] : 0.5 * (u[i - 1] + u[i + 1]);
            change += (next[i] - u[i]) * (next[i] - u[i]);
        }
        if (ok && MPI_Allreduce(&change, &total_change, 1, MPI_DOUBLE, MPI_SUM, work) != MPI_SUCCESS) ok = 0;
        int checkpoint_now = (iteration + 1) % CHECKPOINT_EVERY == 0;
        if (ok && checkpoint_now &&
            MPI_Allgatherv(&next[1], count, MPI_DOUBLE, staging, counts, displacements, MPI_DOUBLE,
                           work) != MPI_SUCCESS)
            ok = 0;
        if (!ok) MPIX_Comm_revoke(work); /* wake whoever still waits on this iteration */
        int flag = ok;
        int rc = MPIX_Comm_agree(work, &flag);
        if (rc != MPI_SUCCESS || !flag) {
            MPI_Comm shrunk;
            MPIX_Comm_failure_ack(work);
            rc = MPIX_Comm_shrink(work, &shrunk);
            EXPECT(rc == MPI_SUCCESS, "shrink class %d", class_of(rc));
            MPI_Comm_free(&work);
            work = shrunk;
            MPI_Comm_set_errhandler(work, MPI_ERRORS_RETURN);
            recoveries++;
            restart = 1;
            continue;
        }
        double *swap = u;
        u = next;
        next = swap;
        iteration++;
        if (checkpoint_now) {
            memcpy(checkpoint, staging, POINTS * sizeof(double));
            checkpoint_iteration = iteration;
        }
    }
    /* Gather the answer everywhere and print a digest of its bits. */
    int rc = MPI_Allgatherv(&u[1], count, MPI_DOUBLE, staging, counts, displacements, MPI_DOUBLE, work);
    uint64_t digest = 1469598103934665603ull;
    for (int i = 0; i < POINTS; i++) {
        uint64_t bits;
        memcpy(&bits, &staging[i], sizeof bits);
        digest = (digest ^ bits) * 1099511628211ull;
    }
    printf("rank %d: jacobi %016llx u[1] %.12f, gather %s\n", world_rank, (unsigned long long)digest,
           staging[1], rc == MPI_SUCCESS ? "ok" : "failed");
    fprintf(stderr, "rank %d: %d recoveries, %d ranks at the end\n", world_rank, recoveries, size);
    MPI_Comm_free(&work);
    free(u);
    free(next);
    free(counts);
    free(displacements);
    free(checkpoint);
    free(staging);
    return 0;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    const char *mode = argc > 1 ? argv[1] : "";
    int result;
    if (strcmp(mode, "revoke") == 0) result = revoke_mode(0);
    else if (strcmp(mode, "revoke-die") == 0) result = revoke_mode(1);
    else if (strcmp(mode, "pending") == 0) result = pending();
    else if (strcmp(mode, "pending-at-death") == 0) result = pending_at_death();
    else if (strcmp(mode, "finalize-revoked") == 0) result = finalize_revoked();
    else if (strcmp(mode, "initial-errhandler") == 0) result = initial_errhandler();
    else if (strcmp(mode, "inter-agree") == 0) result = inter_agree();
    else if (strcmp(mode, "nonblocking") == 0) result = nonblocking();
    else if (strcmp(mode, "agree") == 0) result = agree();
    else if (strcmp(mode, "jacobi") == 0) result = jacobi();
    else {
        fprintf(stderr, "usage: ulfm revoke|revoke-die|pending|agree|jacobi\n");
        result = 2;
    }
    fflush(stdout);
    int rc = MPI_Finalize();
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "rank %d: MPI_Finalize returned %d\n", world_rank, rc);
        return 4;
    }
    return result;
}
