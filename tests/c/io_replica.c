/* Block replication: write a replicated file, or read one back and report
 * what read-repair did.  Used by tests/test_io.py, which damages copies
 * between the runs.
 *
 *   io_replica write R TARGETS   write rep.dat with replication_factor=R,
 *                                striping_unit=4096 and the targets
 *                                (TARGETS "env": no hints, the environment's
 *                                defaults), and plain.dat unreplicated with
 *                                the same calls
 *   io_replica read              read rep.dat back (no hints) and check it;
 *                                rank 0 prints "repaired N unrepaired M"
 *   io_replica concurrent TARGETS  interleaved small independent writes */
#include "expect.h"

#define PER_RANK 20000 /* not a multiple of the block size */
#define BLOCK 4096

static void write_file(const char *name, MPI_Info info) {
    MPI_File fh;
    MPI_Status status;
    unsigned char *buf = malloc(PER_RANK);
    fill_pat(buf, PER_RANK, 11 + g_rank);
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh));
    /* collective, whole regions */
    MPI_OK(MPI_File_write_at_all(fh, (MPI_Offset)g_rank * PER_RANK, buf, PER_RANK, MPI_BYTE, &status));
    /* independent, a partial block in the middle of each region */
    memset(buf, 0xA0 + g_rank, 100);
    MPI_OK(MPI_File_write_at(fh, (MPI_Offset)g_rank * PER_RANK + 5000, buf, 100, MPI_BYTE, &status));
    MPI_OK(MPI_File_close(&fh));
    free(buf);
}

static int expected_byte(size_t offset) {
    size_t rank = offset / PER_RANK, within = offset % PER_RANK;
    if (within >= 5000 && within < 5100) return 0xA0 + (int)rank;
    return pat(11 + (unsigned)rank, within);
}

static void read_file(void) {
    MPI_File fh;
    MPI_Status status;
    MPI_Offset size;
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, "rep.dat", MPI_MODE_RDONLY, MPI_INFO_NULL, &fh));
    MPI_OK(MPI_File_get_size(fh, &size));
    CHECK(size == (MPI_Offset)g_size * PER_RANK, "size %lld", (long long)size);
    /* Each rank reads its own region, in two unaligned pieces. */
    unsigned char *buf = malloc(PER_RANK);
    MPI_Offset start = (MPI_Offset)g_rank * PER_RANK;
    MPI_OK(MPI_File_read_at(fh, start, buf, 7777, MPI_BYTE, &status));
    MPI_OK(MPI_File_read_at_all(fh, start + 7777, buf + 7777, PER_RANK - 7777, MPI_BYTE, &status));
    for (size_t i = 0; i < PER_RANK; i++)
        CHECK(buf[i] == expected_byte((size_t)start + i), "byte %lld is %d, expected %d",
              (long long)(start + (MPI_Offset)i), buf[i], expected_byte((size_t)start + i));
    MPI_Info info;
    char value[MPI_MAX_INFO_VAL + 1];
    int flag;
    long long counts[2] = {0, 0}, totals[2];
    const char *keys[2] = {"resmpi_repaired_blocks", "resmpi_unrepaired_blocks"};
    MPI_OK(MPI_File_get_info(fh, &info));
    for (int k = 0; k < 2; k++) {
        MPI_OK(MPI_Info_get(info, keys[k], MPI_MAX_INFO_VAL, value, &flag));
        CHECK(flag, "no %s", keys[k]);
        counts[k] = atoll(value);
    }
    MPI_OK(MPI_Info_get(info, "replication_factor", MPI_MAX_INFO_VAL, value, &flag));
    CHECK(flag && atoi(value) >= 2, "metadata lost: replication_factor %s", flag ? value : "(none)");
    MPI_OK(MPI_Info_free(&info));
    MPI_OK(MPI_Reduce(counts, totals, 2, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD));
    if (g_rank == 0) printf("repaired %lld unrepaired %lld\n", totals[0], totals[1]);
    MPI_OK(MPI_File_close(&fh));
    free(buf);
}

/* Every rank writes many small unaligned pieces, interleaved with the
 * other ranks' inside shared 512-byte blocks, with independent nonblocking
 * writes (no collective in between): block updates must not lose each
 * other's bytes, and a copy another rank has not extended yet is no lost
 * block. MPIO_Request and MPIO_Wait come from mpi.h alone. */
static void concurrent(const char *targets) {
    MPI_Info info;
    MPI_File fh;
    MPI_Status status;
    MPI_OK(MPI_Info_create(&info));
    MPI_OK(MPI_Info_set(info, "replication_factor", "3"));
    MPI_OK(MPI_Info_set(info, "striping_unit", "512"));
    MPI_OK(MPI_Info_set(info, "resmpi_replica_targets", targets));
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, "race.dat", MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh));
    const int pieces = 400, piece = 13; /* piece i of rank r at (i * size + r) * piece */
    unsigned char bytes[13];
    for (int i = 0; i < pieces; i++) {
        memset(bytes, (unsigned char)(g_rank * 50 + i % 50), piece);
        MPIO_Request request;
        MPI_OK(MPI_File_iwrite_at(fh, ((MPI_Offset)i * g_size + g_rank) * piece, bytes, piece, MPI_BYTE,
                                  &request));
        MPI_OK(MPIO_Wait(&request, &status));
    }
    MPI_OK(MPI_File_sync(fh));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_File_sync(fh));
    size_t total = (size_t)pieces * g_size * piece;
    unsigned char *all = malloc(total);
    MPI_OK(MPI_File_read_at(fh, 0, all, (int)total, MPI_BYTE, &status));
    for (size_t k = 0; k < total; k++) {
        size_t index = k / piece;
        int rank = (int)(index % g_size), i = (int)(index / g_size);
        CHECK(all[k] == (unsigned char)(rank * 50 + i % 50), "byte %zu (rank %d piece %d) is %d", k, rank, i,
              all[k]);
    }
    free(all);
    MPI_OK(MPI_File_close(&fh));
    MPI_OK(MPI_Info_free(&info));
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    errors_return();
    if (argc >= 4 && !strcmp(argv[1], "write")) {
        MPI_Info info = MPI_INFO_NULL;
        if (strcmp(argv[3], "env") != 0) {
            MPI_OK(MPI_Info_create(&info));
            MPI_OK(MPI_Info_set(info, "replication_factor", argv[2]));
            MPI_OK(MPI_Info_set(info, "striping_unit", "4096"));
            MPI_OK(MPI_Info_set(info, "resmpi_replica_targets", argv[3]));
            MPI_OK(MPI_Info_set(info, "cb_buffer_size", "1048576")); /* unknown to resmpi: ignored */
        }
        write_file("rep.dat", info);
        if (info != MPI_INFO_NULL) MPI_OK(MPI_Info_free(&info));
        /* the same calls, unreplicated, for the byte comparison */
        MPI_OK(MPI_Info_create(&info));
        MPI_OK(MPI_Info_set(info, "replication_factor", "1"));
        write_file("plain.dat", info);
        MPI_OK(MPI_Info_free(&info));
        /* the hints in use come back from MPI_File_get_info */
        MPI_File fh;
        char value[MPI_MAX_INFO_VAL + 1];
        int flag;
        MPI_OK(MPI_File_open(MPI_COMM_WORLD, "rep.dat", MPI_MODE_RDONLY, MPI_INFO_NULL, &fh));
        MPI_OK(MPI_File_get_info(fh, &info));
        MPI_OK(MPI_Info_get(info, "replication_factor", MPI_MAX_INFO_VAL, value, &flag));
        CHECK(flag && atoi(value) == atoi(argv[2]), "replication_factor %s", flag ? value : "(none)");
        MPI_OK(MPI_Info_get(info, "striping_unit", MPI_MAX_INFO_VAL, value, &flag));
        CHECK(flag && atoi(value) == BLOCK, "striping_unit %s", flag ? value : "(none)");
        MPI_OK(MPI_Info_get(info, "resmpi_replica_targets", MPI_MAX_INFO_VAL, value, &flag));
        CHECK(flag && strlen(value) > 0, "no targets");
        MPI_OK(MPI_Info_free(&info));
        MPI_OK(MPI_File_close(&fh));
    } else if (argc >= 3 && !strcmp(argv[1], "concurrent")) {
        concurrent(argv[2]);
    } else if (argc >= 2 && !strcmp(argv[1], "read")) {
        read_file();
    } else {
        FAIL("usage: io_replica write R TARGETS | read");
    }
    return test_finish();
}
