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
 * substitute takes over, unless the replicas agreed on every match). The
 * master prints OK at the end. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define TAG_ARRIVAL 7
#define TAG_ORDER 8
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
            history = fold(history, order, workers);
            printf("round %d order", round);
            for (int i = 0; i < workers; i++) printf(" %d", order[i]);
            printf("\n");
            fflush(stdout);
            unsigned long long message[WORKERS_MAX + 1];
            for (int i = 0; i < workers; i++) message[i] = (unsigned long long)order[i];
            message[workers] = history;
            for (int worker = 1; worker < size; worker++)
                MPI_Send(message, workers + 1, MPI_UNSIGNED_LONG_LONG, worker, TAG_ORDER, MPI_COMM_WORLD);
        } else {
            usleep((useconds_t)(((rank + replica + round) % workers) * delay_us));
            MPI_Send(&history, 1, MPI_UNSIGNED_LONG_LONG, 0, TAG_ARRIVAL, MPI_COMM_WORLD);
            unsigned long long message[WORKERS_MAX + 1];
            MPI_Recv(message, workers + 1, MPI_UNSIGNED_LONG_LONG, 0, TAG_ORDER, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
            for (int i = 0; i < workers; i++) order[i] = (int)message[i];
            history = fold(history, order, workers);
            if (history != message[workers]) {
                printf("FAIL round %d: rank %d folded history %llx, the master sent %llx\n", round, rank,
                       history, message[workers]);
                fflush(stdout);
                failed = 1;
                history = message[workers];
            }
        }
    }
    MPI_Finalize();
    if (rank == 0 && !failed) printf("OK\n");
    return 0;
}
