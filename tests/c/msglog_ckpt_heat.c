/* A heatdis-style program whose every iteration makes determinants: the
 * 1-D heat equation of veloc_heat.c, but each rank takes its halo with
 * MPI_ANY_SOURCE receives (which neighbour each one matches is logged)
 * and completes its four requests one MPI_Waitany at a time (which one
 * completed is logged). The result does not depend on either: a halo
 * value goes where its status's source says. VeloC checkpoints of the
 * iteration and both arrays every CKPT_EVERY iterations (0: never), and
 * the restart of heatdis_mem (VELOC_Restart_test("heat", 0), then
 * VELOC_Restart). Under --msglog each checkpoint lets the event logger
 * trim the rank's determinants before it (tests/test_msglog_trim.py).
 *
 *   msglog_ckpt_heat ITERATIONS CKPT_EVERY CFG
 *
 * Each iteration sleeps 1 ms so a kill at a time lands inside the loop.
 * Rank 0 prints the error every 50 iterations; every rank prints a
 * checksum of its cells at the end. */
#include <mpi.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <veloc.h>

#define CELLS 24
#define WORKTAG 5

static double g[CELLS + 2], h[CELLS + 2];

static double step(int rank, int size) {
    MPI_Request requests[4];
    double halo[2];
    int count = 0, receives = 0;
    for (int j = 0; j < CELLS + 2; j++) h[j] = g[j];
    if (rank > 0) {
        MPI_Isend(&g[1], 1, MPI_DOUBLE, rank - 1, WORKTAG, MPI_COMM_WORLD, &requests[count++]);
        receives++;
    }
    if (rank < size - 1) {
        MPI_Isend(&g[CELLS], 1, MPI_DOUBLE, rank + 1, WORKTAG, MPI_COMM_WORLD, &requests[count++]);
        receives++;
    }
    for (int r = 0; r < receives; r++)
        MPI_Irecv(&halo[r], 1, MPI_DOUBLE, MPI_ANY_SOURCE, WORKTAG, MPI_COMM_WORLD,
                  &requests[count++]);
    int sends = count - receives;
    for (int done = 0; done < count; done++) {
        int index;
        MPI_Status status;
        MPI_Waitany(count, requests, &index, &status);
        if (index >= sends) {
            double value = halo[index - sends];
            if (status.MPI_SOURCE == rank - 1)
                h[0] = value;
            else
                h[CELLS + 1] = value;
        }
    }
    double error = 0;
    for (int j = 1; j <= CELLS; j++) {
        g[j] = 0.25 * (h[j - 1] + 2 * h[j] + h[j + 1]);
        if (fabs(g[j] - h[j]) > error) error = fabs(g[j] - h[j]);
    }
    return error;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s ITERATIONS CKPT_EVERY CFG\n", argv[0]);
        return 2;
    }
    int iterations = atoi(argv[1]), every = atoi(argv[2]);
    int rank, size, i;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (VELOC_Init(MPI_COMM_WORLD, argv[3]) != VELOC_SUCCESS) {
        printf("Error initializing VELOC\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int j = 0; j < CELLS + 2; j++) g[j] = 0;
    if (rank == 0)
        for (int j = 1; j <= CELLS / 2; j++) g[j] = 100;
    VELOC_Mem_protect(0, &i, 1, sizeof(int));
    VELOC_Mem_protect(1, h, CELLS + 2, sizeof(double));
    VELOC_Mem_protect(2, g, CELLS + 2, sizeof(double));
    int version = VELOC_Restart_test("heat", 0);
    if (version > 0) {
        printf("restarting from version %d\n", version);
        if (VELOC_Restart("heat", version) != VELOC_SUCCESS) {
            printf("Error restarting\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    } else
        i = 0;
    double global_error = 0;
    struct timespec pause = {0, 1000000};
    while (i < iterations) {
        double local_error = step(rank, size);
        MPI_Allreduce(&local_error, &global_error, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (i % 50 == 0 && rank == 0) printf("step %d error %.9f\n", i, global_error);
        nanosleep(&pause, NULL);
        i++;
        if (every > 0 && i % every == 0 && VELOC_Checkpoint("heat", i) != VELOC_SUCCESS) {
            printf("Error checkpointing\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    double checksum = 0;
    for (int j = 1; j <= CELLS; j++) checksum += g[j] * (j + rank * CELLS);
    printf("done %d checksum %.9e\n", i, checksum);
    VELOC_Finalize(1);
    MPI_Finalize();
    return 0;
}
