/* Collective I/O through aggregators (two-phase) and without: irregular
 * interleaved views (rank r owns r+1 ints of every tile), several exchange
 * rounds (a small cb_buffer_size), two aggregators, plain and replicated
 * files.  argv[1]: romio_cb_write/read value (enable, disable, automatic);
 * argv[2]: "plain" or a replica target directory (R = 2, 512-byte blocks). */
#include "expect.h"

#define TILES 300

static int value_of(int rank, int tile, int i) { return rank * 1000000 + tile * 100 + i; }

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    errors_return();
    CHECK(argc == 3, "usage: io_collective enable|disable|automatic plain|TARGET");
    const char *mode = argv[1];
    int replicated = strcmp(argv[2], "plain") != 0;
    MPI_Info info;
    MPI_OK(MPI_Info_create(&info));
    MPI_OK(MPI_Info_set(info, "romio_cb_write", mode));
    MPI_OK(MPI_Info_set(info, "romio_cb_read", mode));
    MPI_OK(MPI_Info_set(info, "cb_buffer_size", "1000"));
    MPI_OK(MPI_Info_set(info, "cb_nodes", "2"));
    if (replicated) {
        MPI_OK(MPI_Info_set(info, "replication_factor", "2"));
        MPI_OK(MPI_Info_set(info, "striping_unit", "512"));
        MPI_OK(MPI_Info_set(info, "resmpi_replica_targets", argv[2]));
    }
    /* tile = size*(size+1)/2 ints; rank r owns r+1 ints at offset r*(r+1)/2 */
    int tile = g_size * (g_size + 1) / 2, mine = g_rank + 1;
    MPI_Datatype block, filetype;
    MPI_OK(MPI_Type_contiguous(mine, MPI_INT, &block));
    MPI_Aint displacement = (MPI_Aint)(g_rank * (g_rank + 1) / 2) * (MPI_Aint)sizeof(int);
    MPI_Datatype placed;
    int one = 1;
    MPI_OK(MPI_Type_create_hindexed(1, &one, &displacement, block, &placed));
    MPI_OK(MPI_Type_create_resized(placed, 0, (MPI_Aint)tile * (MPI_Aint)sizeof(int), &filetype));
    MPI_OK(MPI_Type_commit(&filetype));
    MPI_File fh;
    MPI_Status status;
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, "coll.dat", MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh));
    MPI_OK(MPI_File_set_view(fh, 0, MPI_INT, filetype, "native", MPI_INFO_NULL));
    int count = TILES * mine;
    int *buf = malloc(sizeof(int) * (size_t)count * 2);
    for (int t = 0; t < TILES; t++)
        for (int i = 0; i < mine; i++) buf[t * mine + i] = value_of(g_rank, t, i);
    MPI_OK(MPI_File_write_all(fh, buf, count, MPI_INT, &status));
    int got;
    MPI_OK(MPI_Get_count(&status, MPI_INT, &got));
    CHECK(got == count, "write_all count %d", got);
    /* Read back through the view, asking for more than there is. */
    memset(buf, 0, sizeof(int) * (size_t)count * 2);
    MPI_OK(MPI_File_read_at_all(fh, 0, buf, 2 * count, MPI_INT, &status));
    MPI_OK(MPI_Get_count(&status, MPI_INT, &got));
#ifdef RESMPI_VERSION /* ROMIO counts a non-contiguous read past the end as whole */
    CHECK(got == count, "read_at_all count %d, expected %d", got, count);
#endif
    for (int t = 0; t < TILES; t++)
        for (int i = 0; i < mine; i++)
            CHECK(buf[t * mine + i] == value_of(g_rank, t, i), "view read tile %d [%d] = %d", t, i,
                  buf[t * mine + i]);
    /* Into a strided memory type: every other int of a buffer. */
    MPI_Datatype strided;
    MPI_OK(MPI_Type_vector(count, 1, 2, MPI_INT, &strided));
    MPI_OK(MPI_Type_commit(&strided));
    memset(buf, 0, sizeof(int) * (size_t)count * 2);
    MPI_OK(MPI_File_read_at_all(fh, 0, buf, 1, strided, &status));
    for (int k = 0; k < count; k++)
        CHECK(buf[2 * k] == value_of(g_rank, k / mine, k % mine) && buf[2 * k + 1] == 0, "strided [%d]", k);
    /* The whole file through the byte view. */
    MPI_OK(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    int total = TILES * tile;
    int *file = malloc(sizeof(int) * (size_t)total);
    MPI_OK(MPI_File_read_at(fh, 0, file, total, MPI_INT, &status));
    for (int t = 0, k = 0; t < TILES; t++)
        for (int r = 0; r < g_size; r++)
            for (int i = 0; i <= r; i++, k++)
                CHECK(file[k] == value_of(r, t, i), "file[%d] = %d, expected %d", k, file[k], value_of(r, t, i));
    MPI_Info used;
    char value[MPI_MAX_INFO_VAL + 1];
    int flag;
    MPI_OK(MPI_File_get_info(fh, &used));
    MPI_OK(MPI_Info_get(used, "romio_cb_write", MPI_MAX_INFO_VAL, value, &flag));
    CHECK(flag && !strcmp(value, mode), "romio_cb_write %s", flag ? value : "(none)");
#ifdef RESMPI_VERSION
    MPI_OK(MPI_Info_get(used, "resmpi_unrepaired_blocks", MPI_MAX_INFO_VAL, value, &flag));
    CHECK(flag && !strcmp(value, "0"), "unrepaired %s", value);
#endif
    MPI_OK(MPI_Info_free(&used));
    MPI_OK(MPI_File_close(&fh));
    if (g_rank == 0 && replicated) {
        /* every copy intact: a scrub-like check through verify-all reads */
        MPI_Info verify;
        MPI_OK(MPI_Info_create(&verify));
        MPI_OK(MPI_Info_set(verify, "resmpi_verify_reads", "all"));
        MPI_OK(MPI_File_open(MPI_COMM_SELF, "coll.dat", MPI_MODE_RDONLY, verify, &fh));
        MPI_OK(MPI_File_read_at(fh, 0, file, total, MPI_INT, &status));
        MPI_OK(MPI_File_get_info(fh, &used));
        MPI_OK(MPI_Info_get(used, "resmpi_repaired_blocks", MPI_MAX_INFO_VAL, value, &flag));
        CHECK(flag && !strcmp(value, "0"), "replicas disagreed: repaired %s", value);
        MPI_OK(MPI_Info_free(&used));
        MPI_OK(MPI_File_close(&fh));
        MPI_OK(MPI_Info_free(&verify));
    }
    MPI_OK(MPI_Type_free(&strided));
    MPI_OK(MPI_Type_free(&filetype));
    MPI_OK(MPI_Type_free(&placed));
    MPI_OK(MPI_Type_free(&block));
    MPI_OK(MPI_Info_free(&info));
    free(buf);
    free(file);
    return test_finish();
}
