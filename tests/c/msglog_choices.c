/* Message logging, completion choices: every round rank 0 receives one
 * message from each worker, with specific sources (so no ANY_SOURCE
 * determinant is involved), and what it does depends only on the order in
 * which its completion calls report them:
 *  - phase 1: MPI_Waitany over the workers' irecvs; the order chosen is
 *    folded into a hash, and each worker's answer is derived from it;
 *  - phase 2: a polling loop, MPI_Testsome on even rounds and MPI_Test
 *    over each request in turn on odd rounds; how many polls failed
 *    before each success, and what each success reported (Testsome: its
 *    count, then its positions), is folded in.
 * Workers sleep a rank- and round-dependent time so that orders and poll
 * counts differ between runs. Rank 0 prints what it folded in ("round R
 * waitany ..." and "round R poll ..."); each worker prints its value,
 * which depends on every answer. A restarted rank 0 must report exactly
 * the earlier incarnation's choices (and failed polls), or its answers
 * and final hash no longer follow from the lines its earlier incarnation
 * printed.  Usage: msglog_choices ROUNDS [probe] ("probe": rank 0 also
 * makes one MPI_Iprobe, an outcome that is not logged yet). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static unsigned long long hash = 1469598103934665603ULL;
static char line[1 << 16];
static int at;

static void feed(long x) {
    hash = (hash ^ (unsigned long long)x) * 1099511628211ULL;
    if (at < (int)sizeof line - 32)
        at += snprintf(line + at, sizeof line - at, " %ld", x);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rounds = argc > 1 ? atoi(argv[1]) : 8;
    int probe = argc > 2 && strcmp(argv[2], "probe") == 0;
    int workers = size - 1;
    unsigned long long value = (unsigned long long)rank;
    long *got = malloc(sizeof(long) * size);
    MPI_Request *requests = malloc(sizeof(MPI_Request) * size);
    int *indices = malloc(sizeof(int) * size);
    if (rank == 0 && probe) {
        int flag;
        MPI_Iprobe(MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    }
    for (int round = 0; round < rounds; round++) {
        if (rank == 0) {
            for (int w = 1; w < size; w++)
                MPI_Irecv(&got[w], 1, MPI_LONG, w, 3 * round, MPI_COMM_WORLD, &requests[w - 1]);
            at = 0;
            for (int k = 0; k < workers; k++) {
                int index;
                MPI_Waitany(workers, requests, &index, MPI_STATUS_IGNORE);
                feed(index + 1);
            }
            printf("round %d waitany%s\n", round, line);
            for (int w = 1; w < size; w++) {
                long answer = (long)(hash % 100000) + w;
                MPI_Send(&answer, 1, MPI_LONG, w, 3 * round + 1, MPI_COMM_WORLD);
            }
            for (int w = 1; w < size; w++)
                MPI_Irecv(&got[w], 1, MPI_LONG, w, 3 * round + 2, MPI_COMM_WORLD, &requests[w - 1]);
            at = 0;
            long polls = 0;
            int remaining = workers;
            while (remaining > 0) {
                if (round % 2 == 0) {
                    int outcount;
                    MPI_Testsome(workers, requests, &outcount, indices, MPI_STATUSES_IGNORE);
                    if (outcount == 0) {
                        polls++;
                        continue;
                    }
                    feed(polls);
                    feed(outcount);
                    for (int i = 0; i < outcount; i++)
                        feed(indices[i] + 1);
                    polls = 0;
                    remaining -= outcount;
                } else {
                    for (int i = 0; i < workers; i++) {
                        if (requests[i] == MPI_REQUEST_NULL)
                            continue;
                        int flag;
                        MPI_Test(&requests[i], &flag, MPI_STATUS_IGNORE);
                        if (!flag) {
                            polls++;
                            continue;
                        }
                        feed(polls);
                        feed(i + 1);
                        polls = 0;
                        remaining--;
                    }
                }
            }
            printf("round %d poll%s\n", round, line);
        } else {
            usleep(((rank * 37 + round * 11) % 7) * 300);
            long mine = (long)(value % 1000);
            MPI_Send(&mine, 1, MPI_LONG, 0, 3 * round, MPI_COMM_WORLD);
            long answer;
            MPI_Recv(&answer, 1, MPI_LONG, 0, 3 * round + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            value = value * 3 + (unsigned long long)answer;
            usleep(((rank * 53 + round * 17) % 5) * 400);
            MPI_Send(&mine, 1, MPI_LONG, 0, 3 * round + 2, MPI_COMM_WORLD);
        }
    }
    if (rank == 0)
        printf("rank 0 hash %llu\n", hash);
    else
        printf("rank %d value %llu\n", rank, value);
    free(got);
    free(requests);
    free(indices);
    MPI_Finalize();
    return 0;
}
