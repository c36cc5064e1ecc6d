/* A program that is NOT send-deterministic (issue 12 item 6,
 * --replica-anysource agree): what the master sends depends on the order
 * in which its MPI_ANY_SOURCE receives matched.
 *
 *   replica_anysource ROUNDS DELAY_US
 *
 * Every round each worker (rank > 0) sleeps a time that depends on its
 * rank, the round and its replica index (RESMPI_REPLICA), so the replicas
 * of the master see the workers' messages in different orders, then sends
 * the master the history it holds (a hash of every arrival order so far).
 * The master receives them with MPI_ANY_SOURCE, prints the arrival order,
 * folds it into its history and sends every worker the order and the new
 * history. A worker folds the order into its own history and checks it
 * equals the master's; the master checks every worker's history against
 * its own. Any mismatch prints FAIL: it happens when a replica of a rank
 * receives from a process whose history differs from its own (after a
 * substitute takes over, unless the replicas agreed on every match).
 *
 * Then a pair phase: the master posts MPI_Irecv(ANY_SOURCE) and, behind
 * it, MPI_Irecv from rank 1 with the same tag, both pending; rank 1 sends
 * two messages and rank 2 one, with delays that depend on the replica.
 * Which message the wildcard gets decides what the named receive gets: a
 * follower that posted the named receive before its deferred wildcard
 * would hand it the wildcard's message. The master prints what each got
 * ("round R pair A B C") and folds it into the history too. The master
 * prints OK at the end. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define TAG_ARRIVAL 7
#define TAG_ORDER 8
#define TAG_PAIR 9
#define WORKERS_MAX 64

static unsigned long long fold(unsigned long long history, const int *order, int count) {
    for (int i = 0; i < count; i++) history = history * 1000003ULL + (unsigned long long)order[i] + 1;
    return history;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 3 || size < 2 || size - 1 > WORKERS_MAX) {
        if (rank == 0) fprintf(stderr, "usage: replica_anysource ROUNDS DELAY_US (2 to 65 ranks)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int rounds = atoi(argv[1]), delay_us = atoi(argv[2]);
    const char *replica_text = getenv("RESMPI_REPLICA");
    int replica = replica_text ? atoi(replica_text) : 0;
    int workers = size - 1, failed = 0;
    unsigned long long history = 0;
    int order[WORKERS_MAX];
    for (int round = 0; round < rounds; round++) {
        if (rank == 0) {
            for (int i = 0; i < workers; i++) {
                unsigned long long theirs;
                MPI_Status status;
                MPI_Recv(&theirs, 1, MPI_UNSIGNED_LONG_LONG, MPI_ANY_SOURCE, TAG_ARRIVAL, MPI_COMM_WORLD,
                         &status);
                order[i] = status.MPI_SOURCE;
                if (theirs != history) {
                    printf("FAIL round %d: rank %d holds history %llx, the master %llx\n", round,
                           status.MPI_SOURCE, theirs, history);
                    failed = 1;
                }
            }
            int pair[3] = {0, 0, 0};
            if (workers >= 2) {
                MPI_Request requests[2];
                MPI_Irecv(&pair[0], 1, MPI_INT, MPI_ANY_SOURCE, TAG_PAIR, MPI_COMM_WORLD, &requests[0]);
                MPI_Irecv(&pair[1], 1, MPI_INT, 1, TAG_PAIR, MPI_COMM_WORLD, &requests[1]);
                MPI_Waitall(2, requests, MPI_STATUSES_IGNORE);
                MPI_Recv(&pair[2], 1, MPI_INT, MPI_ANY_SOURCE, TAG_PAIR, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
            history = fold(fold(history, order, workers), pair, 3);
            printf("round %d order", round);
            for (int i = 0; i < workers; i++) printf(" %d", order[i]);
            printf("\n");
            if (workers >= 2) printf("round %d pair %d %d %d\n", round, pair[0], pair[1], pair[2]);
            fflush(stdout);
            unsigned long long message[WORKERS_MAX + 4];
            for (int i = 0; i < workers; i++) message[i] = (unsigned long long)order[i];
            for (int i = 0; i < 3; i++) message[workers + i] = (unsigned long long)pair[i];
            message[workers + 3] = history;
            for (int worker = 1; worker < size; worker++)
                MPI_Send(message, workers + 4, MPI_UNSIGNED_LONG_LONG, worker, TAG_ORDER, MPI_COMM_WORLD);
        } else {
            usleep((useconds_t)(((rank + replica + round) % workers) * delay_us));
            MPI_Send(&history, 1, MPI_UNSIGNED_LONG_LONG, 0, TAG_ARRIVAL, MPI_COMM_WORLD);
            if (workers >= 2 && rank <= 2) {
                /* Rank 1 sends two, rank 2 one; which comes first depends
                 * on the replica. */
                usleep((useconds_t)(((round + replica + rank) % 2) * delay_us));
                int value = round * 10 + rank;
                MPI_Send(&value, 1, MPI_INT, 0, TAG_PAIR, MPI_COMM_WORLD);
                if (rank == 1) {
                    value += 5;
                    MPI_Send(&value, 1, MPI_INT, 0, TAG_PAIR, MPI_COMM_WORLD);
                }
            }
            unsigned long long message[WORKERS_MAX + 4];
            MPI_Recv(message, workers + 4, MPI_UNSIGNED_LONG_LONG, 0, TAG_ORDER, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
            int pair[3];
            for (int i = 0; i < workers; i++) order[i] = (int)message[i];
            for (int i = 0; i < 3; i++) pair[i] = (int)message[workers + i];
            history = fold(fold(history, order, workers), pair, 3);
            if (history != message[workers + 3]) {
                printf("FAIL round %d: rank %d folded history %llx, the master sent %llx\n", round, rank,
                       history, message[workers + 3]);
                fflush(stdout);
                failed = 1;
                history = message[workers + 3];
            }
        }
    }
    MPI_Finalize();
    if (rank == 0 && !failed) printf("OK\n");
    return 0;
}
