/* MPI-IO under process replication (mpiexec --replicas R): collective
 * writes of a known pattern over many rounds, with a pause after each so
 * that a kill lands mid-run, then every rank reads the whole file back.
 * Used by tests/test_io_ft.py, which kills one replica of a rank and
 * compares the files with a fault-free run's.
 *
 *   io_ft ROUNDS PAUSE_MS TARGETS [truncate]
 *
 * TARGETS "plain": an unreplicated file; otherwise a comma-separated list of
 * target directories: replication_factor = 1 + their number, 4 KiB blocks.
 *
 * Round r: rank k writes CHUNK bytes of pattern (r, k) at (r*size + k)*CHUNK
 * of ft.dat with MPI_File_write_at_all (pieces not block-aligned, so ranks
 * share blocks), then the same bytes to ordered.dat with
 * MPI_File_write_ordered (the shared file pointer), then reads back the
 * piece its left neighbour wrote in the round before with
 * MPI_File_read_at_all.  Rank 0 prints one line per round and "OK".
 * With IO_FT_COUNTS set, each process also records how many bytes it
 * wrote and how many it left to another replica of its rank (below).
 *
 * "truncate": after 10 rounds of MPI_Barrier and PAUSE_MS with no file
 * call, as HDF5 (H5F_ACC_TRUNC) and IOR do, every round opens
 * trunc.dat, truncates it (MPI_File_set_size 0), writes that round's
 * pattern at rank*CHUNK collectively, waits PAUSE_MS, reads its left
 * neighbour's piece back and checks it, and closes.  Under mpiexec
 * --replicas, replica 1 of every rank pauses 4*PAUSE_MS more per round:
 * a late replica's truncation must not destroy what the early one wrote
 * and is about to read. */
#include "expect.h"
#include <unistd.h>

#define CHUNK 3000 /* not a multiple of the 4 KiB block */

static unsigned seed_of(int round, int rank) {
    return 1000u * (unsigned)round + (unsigned)rank + 7u;
}

static void check_piece(const unsigned char *buf, int round, int rank, const char *what) {
    size_t bad = check_pat(buf, CHUNK, seed_of(round, rank));
    CHECK(bad == (size_t)-1, "%s: round %d rank %d byte %zu is %d, expected %d", what, round, rank,
          bad, bad == (size_t)-1 ? 0 : buf[bad], bad == (size_t)-1 ? 0 : pat(seed_of(round, rank), bad));
}

static void check_file(const char *name, int rounds) {
    MPI_File fh;
    MPI_Status status;
    MPI_Offset size;
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_RDONLY, MPI_INFO_NULL, &fh));
    MPI_OK(MPI_File_get_size(fh, &size));
    CHECK(size == (MPI_Offset)rounds * g_size * CHUNK, "%s: size %lld, expected %lld", name,
          (long long)size, (long long)rounds * g_size * CHUNK);
    unsigned char *buf = malloc(CHUNK);
    for (int round = 0; round < rounds; round++)
        for (int rank = 0; rank < g_size; rank++) {
            MPI_Offset at = ((MPI_Offset)round * g_size + rank) * CHUNK;
            MPI_OK(MPI_File_read_at_all(fh, at, buf, CHUNK, MPI_BYTE, &status));
            check_piece(buf, round, rank, name);
        }
    free(buf);
    MPI_OK(MPI_File_close(&fh));
}

/* resmpi's count of bytes this process wrote through fh, and of bytes it
 * left to another replica of its rank that wrote them (0 elsewhere). */
static void add_write_counts(MPI_File fh, long long counts[2]) {
    static const char *keys[2] = {"resmpi_bytes_written", "resmpi_bytes_left_to_replica"};
    MPI_Info used;
    MPI_OK(MPI_File_get_info(fh, &used));
    for (int k = 0; k < 2; k++) {
        char value[64];
        int flag = 0;
        MPI_OK(MPI_Info_get(used, keys[k], (int)sizeof value - 1, value, &flag));
        if (flag) counts[k] += atoll(value);
    }
    MPI_OK(MPI_Info_free(&used));
}

/* IO_FT_COUNTS set: each process (each replica) writes
 * counts.RANK.REPLICA = "WRITTEN LEFT" in the working directory, with
 * plain POSIX calls (the application's own file, one per replica). */
static void save_write_counts(MPI_File a, MPI_File b) {
    if (getenv("IO_FT_COUNTS") == NULL) return;
    long long counts[2] = {0, 0};
    add_write_counts(a, counts);
    add_write_counts(b, counts);
    const char *replica = getenv("RESMPI_REPLICA");
    char name[64];
    snprintf(name, sizeof name, "counts.%d.%s", g_rank, replica ? replica : "0");
    FILE *out = fopen(name, "w");
    CHECK(out != NULL, "cannot write %s", name);
    fprintf(out, "%lld %lld\n", counts[0], counts[1]);
    fclose(out);
}

static void truncating_rounds(int rounds, int pause_ms, MPI_Info info) {
    const char *replica = getenv("RESMPI_REPLICA");
    int late = replica != NULL && atoi(replica) == 1;
    unsigned char *mine = malloc(CHUNK), *theirs = malloc(CHUNK);
    int left = (g_rank + g_size - 1) % g_size;
    /* Computing before any file call: a replica killed here has never
     * announced a file call to its siblings. */
    for (int step = 0; step < 10; step++) {
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        if (pause_ms > 0) usleep((useconds_t)pause_ms * 1000);
    }
    for (int round = 0; round < rounds; round++) {
        MPI_File fh;
        MPI_Status status;
        MPI_OK(MPI_File_open(MPI_COMM_WORLD, "trunc.dat", MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh));
        MPI_OK(MPI_File_set_size(fh, 0));
        fill_pat(mine, CHUNK, seed_of(round, g_rank));
        MPI_OK(MPI_File_write_at_all(fh, (MPI_Offset)g_rank * CHUNK, mine, CHUNK, MPI_BYTE, &status));
        if (pause_ms > 0) usleep((useconds_t)pause_ms * 1000);
        MPI_OK(MPI_File_read_at_all(fh, (MPI_Offset)left * CHUNK, theirs, CHUNK, MPI_BYTE, &status));
        check_piece(theirs, round, left, "trunc.dat just written");
        MPI_OK(MPI_File_close(&fh));
        if (g_rank == 0) {
            printf("round %d truncated, written, read\n", round);
            fflush(stdout);
        }
        if (late && pause_ms > 0) usleep((useconds_t)pause_ms * 4000);
    }
    free(mine);
    free(theirs);
    /* What is left is the last round's pieces, nothing else. */
    MPI_File fh;
    MPI_Offset size;
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, "trunc.dat", MPI_MODE_RDONLY, MPI_INFO_NULL, &fh));
    MPI_OK(MPI_File_get_size(fh, &size));
    CHECK(size == (MPI_Offset)g_size * CHUNK, "trunc.dat: size %lld", (long long)size);
    MPI_OK(MPI_File_close(&fh));
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    errors_return();
    CHECK(argc == 4 || argc == 5, "usage: io_ft ROUNDS PAUSE_MS TARGETS|plain [truncate]");
    int rounds = atoi(argv[1]), pause_ms = atoi(argv[2]);
    const char *targets = argv[3];

    MPI_Info info = MPI_INFO_NULL;
    if (strcmp(targets, "plain") != 0) {
        int factor = 2;
        for (const char *c = targets; *c; c++) factor += *c == ',';
        char text[16];
        snprintf(text, sizeof text, "%d", factor);
        MPI_OK(MPI_Info_create(&info));
        MPI_OK(MPI_Info_set(info, "replication_factor", text));
        MPI_OK(MPI_Info_set(info, "resmpi_replica_targets", targets));
        MPI_OK(MPI_Info_set(info, "striping_unit", "4096"));
    }
    if (argc == 5) {
        CHECK(strcmp(argv[4], "truncate") == 0, "unknown mode %s", argv[4]);
        truncating_rounds(rounds, pause_ms, info);
        if (info != MPI_INFO_NULL) MPI_OK(MPI_Info_free(&info));
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        if (g_rank == 0) printf("OK\n");
        MPI_Finalize();
        return 0;
    }
    MPI_File fh, ordered;
    MPI_Status status;
    /* An exclusive create (which every replica makes under --replicas)
     * succeeds once per job; a second one fails. */
    int amode = 0;
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, "excl.dat", MPI_MODE_CREATE | MPI_MODE_EXCL | MPI_MODE_WRONLY,
                         MPI_INFO_NULL, &fh));
    MPI_OK(MPI_File_get_amode(fh, &amode));
    CHECK(amode & MPI_MODE_EXCL, "MPI_File_get_amode lost MPI_MODE_EXCL: %#x", amode);
    MPI_OK(MPI_File_close(&fh));
    int excl_again = MPI_File_open(MPI_COMM_WORLD, "excl.dat", MPI_MODE_CREATE | MPI_MODE_EXCL | MPI_MODE_WRONLY,
                                   MPI_INFO_NULL, &fh);
    CHECK(excl_again != MPI_SUCCESS, "a second exclusive create of excl.dat succeeded");
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, "ft.dat", MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh));
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, "ordered.dat", MPI_MODE_CREATE | MPI_MODE_RDWR, info, &ordered));
    unsigned char *mine = malloc(CHUNK), *theirs = malloc(CHUNK);
    for (int round = 0; round < rounds; round++) {
        fill_pat(mine, CHUNK, seed_of(round, g_rank));
        MPI_Offset at = ((MPI_Offset)round * g_size + g_rank) * CHUNK;
        MPI_OK(MPI_File_write_at_all(fh, at, mine, CHUNK, MPI_BYTE, &status));
        MPI_OK(MPI_File_write_ordered(ordered, mine, CHUNK, MPI_BYTE, &status));
        if (round > 0) {
            int left = (g_rank + g_size - 1) % g_size;
            MPI_Offset there = ((MPI_Offset)(round - 1) * g_size + left) * CHUNK;
            MPI_OK(MPI_File_read_at_all(fh, there, theirs, CHUNK, MPI_BYTE, &status));
            check_piece(theirs, round - 1, left, "ft.dat during the run");
        }
        MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
        if (g_rank == 0) {
            printf("round %d written\n", round);
            fflush(stdout);
        }
        if (pause_ms > 0) usleep((useconds_t)pause_ms * 1000);
    }
    free(mine);
    free(theirs);
    save_write_counts(fh, ordered);
    MPI_OK(MPI_File_close(&fh));
    MPI_OK(MPI_File_close(&ordered));
    if (info != MPI_INFO_NULL) MPI_OK(MPI_Info_free(&info));
    check_file("ft.dat", rounds);
    check_file("ordered.dat", rounds);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (g_rank == 0) printf("OK\n");
    MPI_Finalize();
    return 0;
}
