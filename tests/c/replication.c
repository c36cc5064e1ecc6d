/* A send-deterministic program for the replication tests: ring
 * point-to-point (blocking and nonblocking), collectives, and a loop of
 * MPI_ANY_SOURCE receives whose order of arrival may differ between
 * replicas but whose outcome does not (the sum of what arrives).
 *
 * Also persistent requests and MPI_Probe with ANY_SOURCE on the ring.
 * Rank 0 prints one line per round, so the job's output is the same with
 * or without replication, and the same in every replica.
 * It also checks the replication environment: MPI_COMM_WORLD has the ranks
 * of -n (not -n * --replicas), and RESMPI_REPLICA, when set, is a replica
 * index below RESMPI_REPLICAS.
 *
 * usage: replication [rounds] [pause_ms] [mark_dir] [exit_code] [RANK.REPLICA@ROUND[:exit]]
 * (rank 0 returns exit_code after MPI_Finalize; the process of rank RANK
 * whose RESMPI_REPLICA is REPLICA (every replica of it for '*') kills itself with SIGKILL at the start of
 * round ROUND, or with ':exit' calls _exit(1) there, a death at a known
 * point under any process manager; pause between
 * rounds, so a timed kill can land mid-run; each process creates the file
 * mark_dir/RANK.REPLICA, holding its network namespace (/proc/self/ns/net),
 * so a test can count the processes started and see where they ran) */
#include "common.h"

#include <signal.h>
#include <time.h>
#include <unistd.h>

static void pause_ms(int ms)
{
    if (ms <= 0)
        return;
    struct timespec pause = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&pause, NULL);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    int rounds = argc > 1 ? atoi(argv[1]) : 10;
    int pause = argc > 2 ? atoi(argv[2]) : 0;
    const char *replica_text = getenv("RESMPI_REPLICA");
    const char *replicas_text = getenv("RESMPI_REPLICAS");
    if (replica_text != NULL) {
        CHECK(replicas_text != NULL, "RESMPI_REPLICA without RESMPI_REPLICAS");
        int replica = atoi(replica_text), replicas = atoi(replicas_text);
        CHECK(replica >= 0 && replica < replicas, "replica %d of %d", replica, replicas);
    }
    if (argc > 3 && strcmp(argv[3], "-") != 0) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%d.%s", argv[3], g_rank,
                 replica_text != NULL ? replica_text : "0");
        FILE *mark = fopen(path, "w");
        CHECK(mark != NULL, "cannot create %s", path);
        /* The network namespace it runs in: the multi-host tests' hosts. */
        char netns[256];
        ssize_t length = readlink("/proc/self/ns/net", netns, sizeof netns - 1);
        if (length > 0) {
            netns[length] = '\0';
            fprintf(mark, "%s\n", netns);
        }
        fclose(mark);
    }
    int doomed_rank = -1, doomed_replica = -1, doomed_round = -1, doomed_exits = 0;
    if (argc > 5) {
        /* RANK.*@ROUND: every replica of the rank. */
        int every = sscanf(argv[5], "%d.*@%d", &doomed_rank, &doomed_round) == 2;
        CHECK(every || sscanf(argv[5], "%d.%d@%d", &doomed_rank, &doomed_replica,
                              &doomed_round) == 3,
              "bad RANK.REPLICA@ROUND '%s'", argv[5]);
        doomed_exits = strstr(argv[5], ":exit") != NULL;
    }
    int replica = replica_text != NULL ? atoi(replica_text) : 0;
    if (g_rank == 0)
        printf("size %d\n", g_size);

    int right = (g_rank + 1) % g_size, left = (g_rank + g_size - 1) % g_size;
    long checksum = 0;
    for (int round = 0; round < rounds; round++) {
        if (g_rank == doomed_rank && (replica == doomed_replica || doomed_replica == -1) &&
            round == doomed_round) {
            if (doomed_exits)
                _exit(1);
            raise(SIGKILL);
        }
        /* Ring: blocking Sendrecv and nonblocking Isend/Irecv, eager and
         * rendezvous sizes. */
        int token = g_rank * 1000 + round, from_left = -1;
        MPI_OK(MPI_Sendrecv(&token, 1, MPI_INT, right, 1, &from_left, 1, MPI_INT, left, 1,
                            MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(from_left == left * 1000 + round, "ring got %d", from_left);
        enum { LARGE = 40000 };
        static int out[LARGE], in[LARGE];
        for (int i = 0; i < LARGE; i++)
            out[i] = g_rank + round + i;
        MPI_Request requests[2];
        MPI_OK(MPI_Irecv(in, LARGE, MPI_INT, left, 2, MPI_COMM_WORLD, &requests[0]));
        MPI_OK(MPI_Isend(out, LARGE, MPI_INT, right, 2, MPI_COMM_WORLD, &requests[1]));
        MPI_OK(MPI_Waitall(2, requests, MPI_STATUSES_IGNORE));
        for (int i = 0; i < LARGE; i++)
            CHECK(in[i] == left + round + i, "large[%d] = %d", i, in[i]);

        /* Persistent requests and a blocking probe on the ring. */
        int persistent_out = token + 7, persistent_in = -1;
        MPI_Request persistent[2];
        MPI_OK(MPI_Recv_init(&persistent_in, 1, MPI_INT, left, 4, MPI_COMM_WORLD, &persistent[0]));
        MPI_OK(MPI_Send_init(&persistent_out, 1, MPI_INT, right, 4, MPI_COMM_WORLD, &persistent[1]));
        MPI_OK(MPI_Startall(2, persistent));
        MPI_OK(MPI_Waitall(2, persistent, MPI_STATUSES_IGNORE));
        MPI_OK(MPI_Request_free(&persistent[0]));
        MPI_OK(MPI_Request_free(&persistent[1]));
        CHECK(persistent_in == left * 1000 + round + 7, "persistent got %d", persistent_in);
        MPI_Status probed;
        MPI_OK(MPI_Send(&token, 1, MPI_INT, right, 5, MPI_COMM_WORLD));
        MPI_OK(MPI_Probe(MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, &probed));
        CHECK(probed.MPI_SOURCE == left, "probe found %d", probed.MPI_SOURCE);
        MPI_OK(MPI_Recv(&from_left, 1, MPI_INT, probed.MPI_SOURCE, 5, MPI_COMM_WORLD,
                        MPI_STATUS_IGNORE));
        CHECK(from_left == left * 1000 + round, "probed message %d", from_left);

        /* Collectives. */
        long value = (long)(g_rank + 1) * (round + 1), sum = 0;
        MPI_OK(MPI_Allreduce(&value, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
        long broadcast = g_rank == 0 ? sum * 7 : 0;
        MPI_OK(MPI_Bcast(&broadcast, 1, MPI_LONG, 0, MPI_COMM_WORLD));
        CHECK(broadcast == sum * 7, "bcast %ld", broadcast);
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));

        /* ANY_SOURCE: rank 0 takes one message from every other rank in
         * whatever order they arrive; the sum does not depend on it. */
        long gathered = 0;
        if (g_rank == 0) {
            for (int other = 1; other < g_size; other++) {
                long got = 0;
                MPI_Status status;
                MPI_OK(MPI_Recv(&got, 1, MPI_LONG, MPI_ANY_SOURCE, 3, MPI_COMM_WORLD, &status));
                CHECK(got == (long)status.MPI_SOURCE * 100 + round, "any-source got %ld from %d",
                      got, status.MPI_SOURCE);
                gathered += got;
            }
        } else {
            long mine = (long)g_rank * 100 + round;
            MPI_OK(MPI_Send(&mine, 1, MPI_LONG, 0, 3, MPI_COMM_WORLD));
        }
        checksum += sum + gathered;
        if (g_rank == 0) {
            printf("round %d sum %ld gathered %ld\n", round, sum, gathered);
            fflush(stdout);
        }
        pause_ms(pause);
    }
    long total = 0;
    MPI_OK(MPI_Reduce(&checksum, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD));
    if (g_rank == 0)
        printf("total %ld\nOK\n", total);
    MPI_Finalize();
    return g_rank == 0 && argc > 4 ? atoi(argv[4]) : 0;
}
