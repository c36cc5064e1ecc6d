/* Message logging, probe determinants: every round rank 0 takes messages
 * from each worker in an order, and with poll counts, that depend on
 * timing only, and what it does next depends on what it observed:
 *  - phase 1: a polling loop of MPI_Iprobe(MPI_ANY_SOURCE) (even rounds;
 *    then MPI_Recv from the source found) or MPI_Improbe(MPI_ANY_SOURCE)
 *    (odd rounds; then MPI_Mrecv of the very message), until one message
 *    from each worker is in; each worker's message has a worker- and
 *    round-dependent count of elements. For each find: the failed polls
 *    before it, the source and the count found are folded into a hash,
 *    and each worker's answer is derived from it;
 *  - phase 2: MPI_Probe(MPI_ANY_SOURCE) (even rounds; then MPI_Recv) or
 *    MPI_Mprobe(MPI_ANY_SOURCE) (odd rounds; then MPI_Mrecv), once per
 *    worker: the sources in the order found are folded in;
 *  - phase 3: irecvs from every worker, then on odd rounds a polling loop
 *    of MPI_Request_get_status on the last one, then a polling loop of
 *    MPI_Testall over all: the failed polls of each are folded in.
 * Workers sleep rank- and round-dependent times so that orders and poll
 * counts differ between runs. Rank 0 prints what it folded in ("round R
 * iprobe ...", "round R probe ...", "round R testall ..."); each worker
 * prints its value, which depends on every answer. A restarted rank 0
 * must report exactly the earlier incarnation's probe and completion
 * outcomes (flags, envelopes, failed polls), or its answers and its final
 * hash no longer follow from the lines its earlier incarnation printed.
 * Usage: msglog_probes ROUNDS */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static unsigned long long hash = 1469598103934665603ULL;
static char line[1 << 16];
static int at;

static void feed(long x) {
    hash = (hash ^ (unsigned long long)x) * 1099511628211ULL;
    if (at < (int)sizeof line - 32)
        at += snprintf(line + at, sizeof line - at, " %ld", x);
}

static void check(int ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "msglog_probes: %s\n", what);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rounds = argc > 1 ? atoi(argv[1]) : 6;
    int workers = size - 1;
    unsigned long long value = (unsigned long long)rank;
    long *got = malloc(sizeof(long) * size);
    MPI_Request *requests = malloc(sizeof(MPI_Request) * size);
    for (int round = 0; round < rounds; round++) {
        int odd = round % 2;
        if (rank == 0) {
            at = 0;
            long polls = 0;
            for (int remaining = workers; remaining > 0;) {
                int flag;
                MPI_Status status;
                MPI_Message message = MPI_MESSAGE_NULL;
                if (odd)
                    MPI_Improbe(MPI_ANY_SOURCE, 4 * round, MPI_COMM_WORLD, &flag, &message, &status);
                else
                    MPI_Iprobe(MPI_ANY_SOURCE, 4 * round, MPI_COMM_WORLD, &flag, &status);
                if (!flag) {
                    polls++;
                    continue;
                }
                int count;
                MPI_Get_count(&status, MPI_LONG, &count);
                check(count >= 1 && count <= 3 && status.MPI_TAG == 4 * round, "bad envelope");
                long data[3];
                MPI_Status received;
                if (odd)
                    MPI_Mrecv(data, 3, MPI_LONG, &message, &received);
                else
                    MPI_Recv(data, 3, MPI_LONG, status.MPI_SOURCE, 4 * round, MPI_COMM_WORLD,
                             &received);
                int received_count;
                MPI_Get_count(&received, MPI_LONG, &received_count);
                check(received.MPI_SOURCE == status.MPI_SOURCE && received_count == count,
                      "the receive took another message than the probe found");
                feed(polls);
                feed(status.MPI_SOURCE);
                feed(count);
                polls = 0;
                remaining--;
            }
            printf("round %d iprobe%s\n", round, line);
            for (int w = 1; w < size; w++) {
                long answer = (long)(hash % 100000) + w;
                MPI_Send(&answer, 1, MPI_LONG, w, 4 * round + 1, MPI_COMM_WORLD);
            }
            at = 0;
            for (int k = 0; k < workers; k++) {
                MPI_Status status;
                long data;
                if (odd) {
                    MPI_Message message;
                    MPI_Mprobe(MPI_ANY_SOURCE, 4 * round + 2, MPI_COMM_WORLD, &message, &status);
                    MPI_Mrecv(&data, 1, MPI_LONG, &message, MPI_STATUS_IGNORE);
                } else {
                    MPI_Probe(MPI_ANY_SOURCE, 4 * round + 2, MPI_COMM_WORLD, &status);
                    MPI_Recv(&data, 1, MPI_LONG, status.MPI_SOURCE, 4 * round + 2, MPI_COMM_WORLD,
                             MPI_STATUS_IGNORE);
                }
                feed(status.MPI_SOURCE);
            }
            printf("round %d probe%s\n", round, line);
            for (int w = 1; w < size; w++)
                MPI_Irecv(&got[w], 1, MPI_LONG, w, 4 * round + 3, MPI_COMM_WORLD, &requests[w - 1]);
            at = 0;
            int flag = 0;
            if (odd) {
                polls = 0;
                while (!flag) {
                    MPI_Request_get_status(requests[workers - 1], &flag, MPI_STATUS_IGNORE);
                    if (!flag)
                        polls++;
                }
                feed(polls);
                flag = 0;
            }
            polls = 0;
            while (!flag) {
                MPI_Testall(workers, requests, &flag, MPI_STATUSES_IGNORE);
                if (!flag)
                    polls++;
            }
            feed(polls);
            printf("round %d testall%s\n", round, line);
        } else {
            usleep(((rank * 37 + round * 11) % 7) * 300);
            int count = 1 + (rank + round) % 3;
            long data[3];
            for (int i = 0; i < count; i++)
                data[i] = (long)(value % 1000) + i;
            MPI_Send(data, count, MPI_LONG, 0, 4 * round, MPI_COMM_WORLD);
            long answer;
            MPI_Recv(&answer, 1, MPI_LONG, 0, 4 * round + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            value = value * 3 + (unsigned long long)answer;
            usleep(((rank * 53 + round * 17) % 5) * 300);
            long mine = (long)(value % 1000);
            MPI_Send(&mine, 1, MPI_LONG, 0, 4 * round + 2, MPI_COMM_WORLD);
            usleep(((rank * 29 + round * 13) % 4) * 400);
            MPI_Send(&mine, 1, MPI_LONG, 0, 4 * round + 3, MPI_COMM_WORLD);
        }
    }
    if (rank == 0)
        printf("rank 0 hash %llu\n", hash);
    else
        printf("rank %d value %llu\n", rank, value);
    free(got);
    free(requests);
    MPI_Finalize();
    return 0;
}
