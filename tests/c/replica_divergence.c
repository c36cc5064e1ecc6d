/* Replicas that diverge (issue 12 item 6): a ring exchange whose payload
 * one replica may corrupt, as a bit flipped in its memory would.
 *
 *   replica_divergence ROUNDS COUNT FLIP_ROUND
 *
 * Every round each rank sends COUNT ints to the next rank (a small COUNT
 * goes eager, a large one by rendezvous) and receives from the previous
 * one into every other int of a buffer (MPI_Type_vector: a non-contiguous
 * receive), then prints the sum of what it received. In round FLIP_ROUND
 * (-1: never) replica 1 of rank 0 (RESMPI_REPLICA=1) flips one bit of its
 * send buffer first: its replica of rank 1 receives other bytes than
 * replica 0's does. The output shown is replica 0's, which nothing
 * corrupted, so it equals a fault-free run's. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 4) {
        if (rank == 0) fprintf(stderr, "usage: replica_divergence ROUNDS COUNT FLIP_ROUND\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int rounds = atoi(argv[1]), count = atoi(argv[2]), flip_round = atoi(argv[3]);
    const char *replica = getenv("RESMPI_REPLICA");
    int corrupt = replica && atoi(replica) == 1 && rank == 0;
    int *out = malloc(sizeof(int) * (size_t)count);
    int *in = malloc(sizeof(int) * 2 * (size_t)count);
    MPI_Datatype every_other;
    MPI_Type_vector(count, 1, 2, MPI_INT, &every_other);
    MPI_Type_commit(&every_other);
    for (int round = 0; round < rounds; round++) {
        for (int i = 0; i < count; i++) out[i] = rank * 1000 + round * 7 + i;
        if (corrupt && round == flip_round) out[count / 2] ^= 1 << 4;
        MPI_Sendrecv(out, count, MPI_INT, (rank + 1) % size, round, in, 1, every_other,
                     (rank + size - 1) % size, round, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        long sum = 0;
        for (int i = 0; i < count; i++) sum += in[2 * i];
        printf("rank %d round %d sum %ld\n", rank, round, sum);
    }
    MPI_Type_free(&every_other);
    free(out);
    free(in);
    MPI_Finalize();
    return 0;
}
