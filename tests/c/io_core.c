/* MPI-IO core: open/close/delete and their error classes, sizes, views with
 * vector filetypes, individual/shared/ordered pointers, collective, split
 * and nonblocking access, file error handlers.  Runs in the current
 * directory (the test gives each run its own); subtests by argv. */
#include "expect.h"
#include <mpio.h>

#define N 64

static void remove_file(const char *name) {
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (g_rank == 0) MPI_File_delete(name, MPI_INFO_NULL);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
}

static int count_of(MPI_Status *status, MPI_Datatype type) {
    int count = -1;
    MPI_OK(MPI_Get_count(status, type, &count));
    return count;
}

/* Each rank writes its block with write_at; everyone reads every block. */
static void test_basic(void) {
    MPI_File fh;
    MPI_Status status;
    int buf[N], amode;
    remove_file("basic.dat");
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, "basic.dat", MPI_MODE_CREATE | MPI_MODE_RDWR,
                         MPI_INFO_NULL, &fh));
    CHECK(fh != MPI_FILE_NULL, "no handle");
    for (int i = 0; i < N; i++) buf[i] = g_rank * 1000 + i;
    MPI_OK(MPI_File_write_at(fh, (MPI_Offset)g_rank * N * sizeof(int), buf, N, MPI_INT, &status));
    CHECK(count_of(&status, MPI_INT) == N, "write count %d", count_of(&status, MPI_INT));
    MPI_OK(MPI_File_sync(fh));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_Offset size;
    MPI_OK(MPI_File_get_size(fh, &size));
    CHECK(size == (MPI_Offset)g_size * N * sizeof(int), "size %lld", (long long)size);
    for (int r = 0; r < g_size; r++) {
        memset(buf, 0xff, sizeof buf);
        MPI_OK(MPI_File_read_at(fh, (MPI_Offset)r * N * sizeof(int), buf, N, MPI_INT, &status));
        CHECK(count_of(&status, MPI_INT) == N, "read count");
        for (int i = 0; i < N; i++) CHECK(buf[i] == r * 1000 + i, "block %d [%d] = %d", r, i, buf[i]);
    }
    /* Reading past the end: a short count, not an error. */
    MPI_OK(MPI_File_read_at(fh, size - 2 * sizeof(int), buf, N, MPI_INT, &status));
    CHECK(count_of(&status, MPI_INT) == 2, "short read count %d", count_of(&status, MPI_INT));
    MPI_OK(MPI_File_get_amode(fh, &amode));
    CHECK(amode == (MPI_MODE_CREATE | MPI_MODE_RDWR), "amode %d", amode);
    MPI_Group group, world_group;
    int same;
    MPI_OK(MPI_File_get_group(fh, &group));
    MPI_OK(MPI_Comm_group(MPI_COMM_WORLD, &world_group));
    MPI_OK(MPI_Group_compare(group, world_group, &same));
    CHECK(same == MPI_IDENT, "group differs: %d", same);
    MPI_OK(MPI_Group_free(&group));
    MPI_OK(MPI_Group_free(&world_group));
    /* set_size truncates, preallocate grows, get_size sees both. */
    MPI_OK(MPI_File_set_size(fh, 10));
    MPI_OK(MPI_File_get_size(fh, &size));
    CHECK(size == 10, "after set_size %lld", (long long)size);
    MPI_OK(MPI_File_preallocate(fh, 100));
    MPI_OK(MPI_File_get_size(fh, &size));
    CHECK(size == 100, "after preallocate %lld", (long long)size);
    MPI_OK(MPI_File_preallocate(fh, 50));
    MPI_OK(MPI_File_get_size(fh, &size));
    CHECK(size == 100, "preallocate shrank: %lld", (long long)size);
    int flag;
    MPI_OK(MPI_File_set_atomicity(fh, 1));
    MPI_OK(MPI_File_get_atomicity(fh, &flag));
    CHECK(flag == 1, "atomicity %d", flag);
    MPI_Info info;
    char value[MPI_MAX_INFO_VAL + 1];
    MPI_OK(MPI_File_get_info(fh, &info));
#ifdef RESMPI_VERSION /* resmpi's hint */
    MPI_OK(MPI_Info_get(info, "replication_factor", MPI_MAX_INFO_VAL, value, &flag));
    CHECK(flag && !strcmp(value, "1"), "replication_factor %s", flag ? value : "(none)");
#endif
    MPI_OK(MPI_Info_free(&info));
    MPI_Fint fortran = MPI_File_c2f(fh);
    CHECK(MPI_File_f2c(fortran) == fh, "c2f/f2c");
    MPI_OK(MPI_File_close(&fh));
    CHECK(fh == MPI_FILE_NULL, "close did not reset the handle");
    remove_file("basic.dat");
    /* DELETE_ON_CLOSE removes it; APPEND starts at the end. */
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, "append.dat", MPI_MODE_CREATE | MPI_MODE_WRONLY,
                         MPI_INFO_NULL, &fh));
    if (g_rank == 0) MPI_OK(MPI_File_write(fh, buf, 5, MPI_INT, &status));
    MPI_OK(MPI_File_close(&fh));
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, "append.dat",
                         MPI_MODE_WRONLY | MPI_MODE_APPEND | MPI_MODE_DELETE_ON_CLOSE,
                         MPI_INFO_NULL, &fh));
    MPI_Offset position;
    MPI_OK(MPI_File_get_position(fh, &position));
    CHECK(position == 5 * (MPI_Offset)sizeof(int), "append position %lld", (long long)position);
    MPI_OK(MPI_File_close(&fh));
    CHECK(access("append.dat", F_OK) != 0, "DELETE_ON_CLOSE left the file");
}

/* Error classes for bad input; the default file handler returns. */
static void test_errors(void) {
    MPI_File fh = MPI_FILE_NULL;
    MPI_Status status;
    int buf[4] = {0};
    remove_file("errors.dat");
    EXPECT_CLASS(MPI_File_open(MPI_COMM_WORLD, "errors.dat", MPI_MODE_RDONLY, MPI_INFO_NULL, &fh),
                 MPI_ERR_NO_SUCH_FILE);
    EXPECT_CLASS(MPI_File_open(MPI_COMM_WORLD, "errors.dat", MPI_MODE_RDONLY | MPI_MODE_CREATE,
                               MPI_INFO_NULL, &fh), MPI_ERR_AMODE);
    EXPECT_CLASS(MPI_File_open(MPI_COMM_WORLD, "errors.dat", MPI_MODE_RDWR | MPI_MODE_WRONLY,
                               MPI_INFO_NULL, &fh), MPI_ERR_AMODE);
    EXPECT_CLASS(MPI_File_open(MPI_COMM_WORLD, "errors.dat", MPI_MODE_CREATE, MPI_INFO_NULL, &fh),
                 MPI_ERR_AMODE);
    EXPECT_CLASS(MPI_File_open(MPI_COMM_WORLD, "no/such/dir/x.dat", MPI_MODE_CREATE | MPI_MODE_RDWR,
                               MPI_INFO_NULL, &fh), MPI_ERR_NO_SUCH_FILE);
#ifdef RESMPI_VERSION /* resmpi's hints: a bad value is an error, not ignored */
    MPI_Info info;
    MPI_OK(MPI_Info_create(&info));
    MPI_OK(MPI_Info_set(info, "replication_factor", "many"));
    EXPECT_CLASS(MPI_File_open(MPI_COMM_WORLD, "errors.dat", MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh),
                 MPI_ERR_INFO_VALUE);
    MPI_OK(MPI_Info_set(info, "replication_factor", "3"));
    EXPECT_CLASS(MPI_File_open(MPI_COMM_WORLD, "errors.dat", MPI_MODE_CREATE | MPI_MODE_RDWR, info, &fh),
                 MPI_ERR_INFO_VALUE);
    MPI_OK(MPI_Info_free(&info));
#endif
    CHECK(fh == MPI_FILE_NULL, "a failed open gave a handle");
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, "errors.dat", MPI_MODE_CREATE | MPI_MODE_EXCL | MPI_MODE_RDWR,
                         MPI_INFO_NULL, &fh));
    MPI_OK(MPI_File_close(&fh));
    EXPECT_CLASS(MPI_File_open(MPI_COMM_WORLD, "errors.dat", MPI_MODE_CREATE | MPI_MODE_EXCL | MPI_MODE_RDWR,
                               MPI_INFO_NULL, &fh), MPI_ERR_FILE_EXISTS);
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, "errors.dat", MPI_MODE_RDONLY, MPI_INFO_NULL, &fh));
    EXPECT_CLASS(MPI_File_write_at(fh, 0, buf, 4, MPI_INT, &status), MPI_ERR_READ_ONLY);
    EXPECT_CLASS(MPI_File_set_size(fh, 0), MPI_ERR_READ_ONLY);
    EXPECT_CLASS(MPI_File_read_at(fh, -1, buf, 4, MPI_INT, &status), MPI_ERR_ARG);
    EXPECT_CLASS(MPI_File_read_at(fh, 0, buf, -1, MPI_INT, &status), MPI_ERR_COUNT);
    EXPECT_CLASS(MPI_File_seek(fh, -5, MPI_SEEK_SET), MPI_ERR_ARG);
    EXPECT_CLASS(MPI_File_seek(fh, 0, 12345), MPI_ERR_ARG);
    EXPECT_CLASS(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "external99", MPI_INFO_NULL),
                 MPI_ERR_UNSUPPORTED_DATAREP);
    EXPECT_CLASS(MPI_File_set_view(fh, -3, MPI_INT, MPI_INT, "native", MPI_INFO_NULL), MPI_ERR_ARG);
    MPI_OK(MPI_File_close(&fh));
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, "errors.dat", MPI_MODE_WRONLY, MPI_INFO_NULL, &fh));
    EXPECT_CLASS(MPI_File_read_at(fh, 0, buf, 4, MPI_INT, &status), MPI_ERR_ACCESS);
    MPI_OK(MPI_File_close(&fh));
    EXPECT_CLASS(MPI_File_read(MPI_FILE_NULL, buf, 1, MPI_INT, &status), MPI_ERR_FILE);
    EXPECT_CLASS(MPI_File_close(&fh), MPI_ERR_FILE);
    remove_file("errors.dat");
    if (g_rank == 0) EXPECT_CLASS(MPI_File_delete("errors.dat", MPI_INFO_NULL), MPI_ERR_NO_SUCH_FILE);
}

/* Interleaved views: rank r owns ints [2r, 2r+2) of every 2*size ints
 * (a vector filetype, resized); write_all through the view, check the
 * file through the default view and read back through the view. */
static void test_view(void) {
    MPI_File fh;
    MPI_Status status;
    MPI_Datatype pair, filetype;
    const int records = 10;
    int buf[2 * 10], file[2 * 10 * 16];
    remove_file("view.dat");
    MPI_OK(MPI_Type_vector(2, 1, 1, MPI_INT, &pair));
    MPI_OK(MPI_Type_create_resized(pair, 0, 2 * g_size * (MPI_Aint)sizeof(int), &filetype));
    MPI_OK(MPI_Type_commit(&filetype));
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, "view.dat", MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
    MPI_OK(MPI_File_set_view(fh, 2 * g_rank * (MPI_Offset)sizeof(int), MPI_INT, filetype, "native",
                             MPI_INFO_NULL));
    for (int i = 0; i < 2 * records; i++) buf[i] = g_rank * 100 + i;
    MPI_OK(MPI_File_write_all(fh, buf, 2 * records, MPI_INT, &status));
    CHECK(count_of(&status, MPI_INT) == 2 * records, "write_all count");
    MPI_Offset position, byte;
    MPI_OK(MPI_File_get_position(fh, &position));
    CHECK(position == 2 * records, "position %lld", (long long)position);
    MPI_OK(MPI_File_get_byte_offset(fh, 3, &byte));
    CHECK(byte == (MPI_Offset)sizeof(int) * (2 * g_rank + 2 * g_size + 1), "byte offset %lld", (long long)byte);
    MPI_Offset disp;
    MPI_Datatype etype, got_filetype;
    char datarep[MPI_MAX_DATAREP_STRING];
    MPI_OK(MPI_File_get_view(fh, &disp, &etype, &got_filetype, datarep));
    CHECK(disp == 2 * g_rank * (MPI_Offset)sizeof(int) && etype == MPI_INT && !strcmp(datarep, "native"),
          "get_view");
    MPI_Aint lb, extent;
    MPI_OK(MPI_Type_get_extent(got_filetype, &lb, &extent));
    CHECK(extent == 2 * g_size * (MPI_Aint)sizeof(int), "filetype extent %ld", (long)extent);
    MPI_OK(MPI_Type_free(&got_filetype));
    /* Seek back and read through the view. */
    MPI_OK(MPI_File_seek(fh, 0, MPI_SEEK_SET));
    memset(buf, 0, sizeof buf);
    MPI_OK(MPI_File_read_all(fh, buf, 2 * records, MPI_INT, &status));
    for (int i = 0; i < 2 * records; i++) CHECK(buf[i] == g_rank * 100 + i, "view read [%d] = %d", i, buf[i]);
    /* Independently through the view, with data sieving and without. */
    for (int sieve = 0; sieve < 2; sieve++) {
        MPI_Info hints;
        MPI_OK(MPI_Info_create(&hints));
        MPI_OK(MPI_Info_set(hints, "romio_ds_read", sieve ? "enable" : "disable"));
        MPI_OK(MPI_Info_set(hints, "ind_rd_buffer_size", "100"));
        MPI_OK(MPI_File_set_info(fh, hints));
        MPI_OK(MPI_Info_free(&hints));
        memset(buf, 0, sizeof buf);
        MPI_OK(MPI_File_read_at(fh, 1, buf, 2 * records + 5, MPI_INT, &status));
#ifdef RESMPI_VERSION /* ROMIO counts a non-contiguous read past the end as whole */
        CHECK(count_of(&status, MPI_INT) == 2 * records - 1, "sieve %d: count %d", sieve,
              count_of(&status, MPI_INT));
#endif
        for (int i = 0; i < 2 * records - 1; i++)
            CHECK(buf[i] == g_rank * 100 + i + 1, "sieve %d: [%d] = %d", sieve, i, buf[i]);
    }
    MPI_OK(MPI_File_seek(fh, -4, MPI_SEEK_END));
    MPI_OK(MPI_File_get_position(fh, &position));
    CHECK(position == 2 * records - 4, "SEEK_END position %lld", (long long)position);
    MPI_OK(MPI_File_seek(fh, 1, MPI_SEEK_CUR));
    MPI_OK(MPI_File_read(fh, buf, 1, MPI_INT, &status));
    CHECK(buf[0] == g_rank * 100 + 2 * records - 3, "SEEK_CUR read %d", buf[0]);
    /* The whole file through the default view. */
    MPI_OK(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    int total = 2 * records * g_size;
    MPI_OK(MPI_File_read_at(fh, 0, file, total, MPI_INT, &status));
    CHECK(count_of(&status, MPI_INT) == total, "file count %d", count_of(&status, MPI_INT));
    for (int k = 0; k < total; k++) {
        int record = k / (2 * g_size), owner = (k / 2) % g_size, i = 2 * record + k % 2;
        CHECK(file[k] == owner * 100 + i, "file[%d] = %d, expected %d", k, file[k], owner * 100 + i);
    }
    /* A strided memory type into a contiguous view: every other int. */
    MPI_Datatype strided;
    MPI_OK(MPI_Type_vector(4, 1, 2, MPI_INT, &strided));
    MPI_OK(MPI_Type_commit(&strided));
    int sparse[8];
    memset(sparse, 0, sizeof sparse);
    MPI_OK(MPI_File_read_at(fh, 0, sparse, 1, strided, &status));
    CHECK(count_of(&status, strided) == 1, "strided count");
    for (int i = 0; i < 4; i++) CHECK(sparse[2 * i] == file[i] && sparse[2 * i + 1] == 0, "strided [%d]", i);
    MPI_OK(MPI_Type_free(&strided));
    /* external32: big-endian ints in the file, native ones in memory. */
    MPI_OK(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "external32", MPI_INFO_NULL));
    MPI_OK(MPI_File_get_view(fh, &disp, &etype, &got_filetype, datarep));
    CHECK(!strcmp(datarep, "external32"), "datarep %s", datarep);
    int word = 0x01020304 + g_rank, back = 0;
    MPI_OK(MPI_File_write_at(fh, 1000 + g_rank, &word, 1, MPI_INT, &status));
    MPI_OK(MPI_File_read_at(fh, 1000 + g_rank, &back, 1, MPI_INT, &status));
    CHECK(back == word, "external32 round trip %#x", back);
    MPI_OK(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    unsigned char raw[4];
    MPI_OK(MPI_File_read_at(fh, 4 * (1000 + g_rank), raw, 4, MPI_BYTE, &status));
    CHECK(raw[0] == 1 && raw[1] == 2 && raw[2] == 3 && raw[3] == 4 + g_rank, "not big-endian: %d %d %d %d",
          raw[0], raw[1], raw[2], raw[3]);
    MPI_OK(MPI_File_close(&fh));
    MPI_OK(MPI_Type_free(&pair));
    MPI_OK(MPI_Type_free(&filetype));
    remove_file("view.dat");
}

/* external32 stores C long in 4 bytes: a view or an access that would
 * need that conversion is MPI_ERR_UNSUPPORTED_DATAREP, never a file of
 * 8-byte longs that only claims to be external32; fixed-size types work. */
static void test_external32_longs(void) {
    MPI_File fh;
    MPI_Status status;
    remove_file("x32.dat");
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, "x32.dat", MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
    EXPECT_CLASS(MPI_File_set_view(fh, 0, MPI_LONG, MPI_LONG, "external32", MPI_INFO_NULL),
                 MPI_ERR_UNSUPPORTED_DATAREP);
    EXPECT_CLASS(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_WCHAR, "external32", MPI_INFO_NULL),
                 MPI_ERR_UNSUPPORTED_DATAREP);
    MPI_OK(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "external32", MPI_INFO_NULL));
    long value = 5;
    EXPECT_CLASS(MPI_File_write_at(fh, 8 * g_rank, &value, 1, MPI_LONG, &status), MPI_ERR_UNSUPPORTED_DATAREP);
    MPI_Aint extent = 0;
    EXPECT_CLASS(MPI_File_get_type_extent(fh, MPI_UNSIGNED_LONG, &extent), MPI_ERR_UNSUPPORTED_DATAREP);
    MPI_OK(MPI_File_get_type_extent(fh, MPI_INT64_T, &extent));
    CHECK(extent == 8, "MPI_INT64_T extent %ld", (long)extent);
    int64_t fixed = 0x0102030405060708LL + g_rank, back = 0;
    MPI_OK(MPI_File_write_at(fh, 8 * g_rank, &fixed, 1, MPI_INT64_T, &status));
    MPI_OK(MPI_File_read_at(fh, 8 * g_rank, &back, 1, MPI_INT64_T, &status));
    CHECK(back == fixed, "int64 external32 round trip %llx", (unsigned long long)back);
    /* The same long through a native view is fine. */
    MPI_OK(MPI_File_set_view(fh, 0, MPI_LONG, MPI_LONG, "native", MPI_INFO_NULL));
    MPI_OK(MPI_File_write_at(fh, g_rank, &value, 1, MPI_LONG, &status));
    MPI_OK(MPI_File_close(&fh));
    MPI_Barrier(MPI_COMM_WORLD);
    remove_file("x32.dat");
}

/* Shared pointer: every rank's record lands exactly once; ordered access
 * lays records out in rank order. */
static void test_shared(void) {
    MPI_File fh;
    MPI_Status status;
    int record[4], all[4 * 64];
    remove_file("shared.dat");
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, "shared.dat", MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
    MPI_OK(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
    for (int i = 0; i < 4; i++) record[i] = g_rank;
    MPI_OK(MPI_File_write_shared(fh, record, 4, MPI_INT, &status));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_Offset shared;
    MPI_OK(MPI_File_get_position_shared(fh, &shared));
#ifdef RESMPI_VERSION /* MPICH 4.0.2 returns 0 on ranks > 0 here */
    CHECK(shared == 4 * g_size, "shared position %lld", (long long)shared);
#endif
    MPI_OK(MPI_File_read_at(fh, 0, all, 4 * g_size, MPI_INT, &status));
    int seen[64] = {0};
    for (int r = 0; r < g_size; r++) {
        for (int i = 1; i < 4; i++) CHECK(all[4 * r + i] == all[4 * r], "torn record %d", r);
        CHECK(all[4 * r] >= 0 && all[4 * r] < g_size, "record %d holds %d", r, all[4 * r]);
        seen[all[4 * r]]++;
    }
    for (int r = 0; r < g_size; r++) CHECK(seen[r] == 1, "rank %d's record appears %d times", r, seen[r]);
    /* Ordered: rank r writes r+1 copies of r, in rank order. */
    MPI_OK(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET));
    int mine[64];
    for (int i = 0; i <= g_rank; i++) mine[i] = g_rank;
    MPI_OK(MPI_File_write_ordered(fh, mine, g_rank + 1, MPI_INT, &status));
    CHECK(count_of(&status, MPI_INT) == g_rank + 1, "ordered count");
    /* MPI's sync-barrier-sync: every rank's part is visible to all */
    MPI_OK(MPI_File_sync(fh));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_File_sync(fh));
    int expected_total = g_size * (g_size + 1) / 2;
    MPI_OK(MPI_File_get_position_shared(fh, &shared));
#ifdef RESMPI_VERSION /* MPICH 4.0.2 returns 0 on ranks > 0 here too */
    CHECK(shared == expected_total, "after ordered %lld", (long long)shared);
#endif
    MPI_OK(MPI_File_read_at(fh, 0, all, expected_total, MPI_INT, &status));
    for (int r = 0, k = 0; r < g_size; r++)
        for (int i = 0; i <= r; i++, k++) CHECK(all[k] == r, "ordered file[%d] = %d, expected %d", k, all[k], r);
    /* Read it back in order, split collective. */
    MPI_OK(MPI_File_seek_shared(fh, 0, MPI_SEEK_SET));
    memset(mine, 0xff, sizeof mine);
    MPI_OK(MPI_File_read_ordered_begin(fh, mine, g_rank + 1, MPI_INT));
    MPI_OK(MPI_File_read_ordered_end(fh, mine, &status));
    CHECK(count_of(&status, MPI_INT) == g_rank + 1, "read_ordered count");
    for (int i = 0; i <= g_rank; i++) CHECK(mine[i] == g_rank, "read_ordered [%d] = %d", i, mine[i]);
    MPI_OK(MPI_File_close(&fh));
    remove_file("shared.dat");
}

/* Collective and split collective explicit-offset access, nonblocking
 * access completed by MPI_Wait, MPI_Test and MPIO_Wait. */
static void test_collective_nonblocking(void) {
    MPI_File fh;
    MPI_Status status;
    MPI_Request request;
    int buf[N], back[N];
    remove_file("coll.dat");
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, "coll.dat", MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
    MPI_Offset mine = (MPI_Offset)g_rank * N * sizeof(int);
    for (int i = 0; i < N; i++) buf[i] = g_rank * 7 + i;
    MPI_OK(MPI_File_write_at_all(fh, mine, buf, N, MPI_INT, &status));
    int next = (g_rank + 1) % g_size;
    MPI_OK(MPI_File_read_at_all(fh, (MPI_Offset)next * N * sizeof(int), back, N, MPI_INT, &status));
    for (int i = 0; i < N; i++) CHECK(back[i] == next * 7 + i, "read_at_all [%d] = %d", i, back[i]);
    /* split: write 1s, read them back */
    for (int i = 0; i < N; i++) buf[i] = -g_rank - 1;
    MPI_OK(MPI_File_write_at_all_begin(fh, mine, buf, N, MPI_INT));
    EXPECT_CLASS(MPI_File_write_at_all_begin(fh, mine, buf, N, MPI_INT), MPI_ERR_IO); /* ROMIO's class */
    MPI_OK(MPI_File_write_at_all_end(fh, buf, &status));
    CHECK(count_of(&status, MPI_INT) == N, "split count");
    EXPECT_CLASS(MPI_File_write_at_all_end(fh, buf, &status), MPI_ERR_IO);
    MPI_OK(MPI_File_read_at_all_begin(fh, (MPI_Offset)next * N * sizeof(int), back, N, MPI_INT));
    MPI_OK(MPI_File_read_at_all_end(fh, back, &status));
    for (int i = 0; i < N; i++) CHECK(back[i] == -next - 1, "split read [%d] = %d", i, back[i]);
    /* nonblocking */
    for (int i = 0; i < N; i++) buf[i] = g_rank * 3 + i;
    MPI_OK(MPI_File_iwrite_at(fh, mine, buf, N, MPI_INT, &request));
    MPI_OK(MPI_Wait(&request, &status));
    CHECK(request == MPI_REQUEST_NULL, "request not freed");
    CHECK(count_of(&status, MPI_INT) == N, "iwrite count %d", count_of(&status, MPI_INT));
    memset(back, 0, sizeof back);
    MPIO_Request io_request;
    MPI_OK(MPI_File_iread_at(fh, mine, back, N, MPI_INT, &io_request));
    int done = 0;
    while (!done) MPI_OK(MPIO_Test(&io_request, &done, &status));
    CHECK(count_of(&status, MPI_INT) == N, "iread count");
    for (int i = 0; i < N; i++) CHECK(back[i] == g_rank * 3 + i, "iread [%d] = %d", i, back[i]);
    MPI_OK(MPI_File_seek(fh, mine, MPI_SEEK_SET));
    MPI_OK(MPI_File_iread_all(fh, back, N, MPI_INT, &io_request));
    MPI_OK(MPIO_Wait(&io_request, &status));
    for (int i = 0; i < N; i++) CHECK(back[i] == g_rank * 3 + i, "iread_all [%d] = %d", i, back[i]);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD)); /* nobody still reads what the shared writes overwrite */
    MPI_OK(MPI_File_iwrite_shared(fh, buf, 1, MPI_INT, &request));
    MPI_OK(MPI_Wait(&request, &status));
    MPI_OK(MPI_File_close(&fh));
    remove_file("coll.dat");
}

/* MPI_MODE_SEQUENTIAL: a header, then records in rank order; reopened
 * sequential, the view starts at MPI_DISPLACEMENT_CURRENT (after the
 * header, where the shared pointer is) and read_ordered gets each rank its
 * own record back. (MPICH's setviewcur.) */
static void test_sequential(void) {
    MPI_File fh;
    MPI_Status status;
    int value;
    remove_file("sequential.dat");
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, "sequential.dat", MPI_MODE_CREATE | MPI_MODE_WRONLY,
                         MPI_INFO_NULL, &fh));
    value = 1000 + g_size;
    MPI_OK(MPI_File_write_all(fh, &value, 1, MPI_INT, &status));
    MPI_Offset offset;
    MPI_OK(MPI_File_get_position(fh, &offset));
    MPI_OK(MPI_File_seek_shared(fh, offset, MPI_SEEK_SET));
    value = g_rank;
    MPI_OK(MPI_File_write_ordered(fh, &value, 1, MPI_INT, &status));
    MPI_OK(MPI_File_close(&fh));
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, "sequential.dat",
                         MPI_MODE_RDONLY | MPI_MODE_SEQUENTIAL | MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL,
                         &fh));
    EXPECT_CLASS(MPI_File_read_at(fh, 0, &value, 1, MPI_INT, &status), MPI_ERR_UNSUPPORTED_OPERATION);
    if (g_rank == 0) {
        MPI_OK(MPI_File_read_shared(fh, &value, 1, MPI_INT, &status));
        CHECK(value == 1000 + g_size, "header %d", value);
    }
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_File_set_view(fh, MPI_DISPLACEMENT_CURRENT, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
    value = -1;
    MPI_OK(MPI_File_read_ordered(fh, &value, 1, MPI_INT, &status));
    CHECK(value == g_rank, "record %d, expected %d", value, g_rank);
    MPI_OK(MPI_File_close(&fh));
}

/* Type maps MPI-IO cannot use: MPI_ERR_IO as in ROMIO; overlapping runs
 * are fine for a read-only file. (MPICH's tst_fileview.) */
static void test_bad_type_maps(void) {
    MPI_File fh;
    MPI_Datatype type;
    int lengths[2] = {1, 1}, decreasing[2] = {3, 0}, overlapping_lengths[2] = {3, 1}, overlapping[2] = {0, 1};
    remove_file("maps.dat");
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, "maps.dat", MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
    MPI_OK(MPI_Type_indexed(2, lengths, decreasing, MPI_INT, &type));
    MPI_OK(MPI_Type_commit(&type));
    EXPECT_CLASS(MPI_File_set_view(fh, 0, MPI_INT, type, "native", MPI_INFO_NULL), MPI_ERR_IO);
    MPI_OK(MPI_Type_free(&type));
    MPI_OK(MPI_Type_indexed(2, overlapping_lengths, overlapping, MPI_INT, &type));
    MPI_OK(MPI_Type_commit(&type));
    EXPECT_CLASS(MPI_File_set_view(fh, 0, MPI_INT, type, "native", MPI_INFO_NULL), MPI_ERR_IO);
    MPI_OK(MPI_File_close(&fh));
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, "maps.dat", MPI_MODE_RDONLY | MPI_MODE_DELETE_ON_CLOSE,
                         MPI_INFO_NULL, &fh));
    MPI_OK(MPI_File_set_view(fh, 0, MPI_INT, type, "native", MPI_INFO_NULL));
    MPI_OK(MPI_File_close(&fh));
    MPI_OK(MPI_Type_free(&type));
}

/* Atomic mode: rank 0 rewrites every other int of a region (a vector
 * filetype) while the others read it through the same view; each read
 * sees one write whole, never a mix. (ROMIO's atomicity test.) */
static void test_atomicity(void) {
    enum { INTS = 20000, ROUNDS = 10 };
    MPI_File fh;
    MPI_Status status;
    MPI_Datatype every_other;
    int *buf = malloc(INTS * sizeof(int));
    remove_file("atomic.dat");
    MPI_OK(MPI_Type_vector(INTS, 1, 2, MPI_INT, &every_other));
    MPI_OK(MPI_Type_commit(&every_other));
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, "atomic.dat", MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
    MPI_OK(MPI_File_set_view(fh, 0, MPI_INT, every_other, "native", MPI_INFO_NULL));
    if (g_rank == 0) {
        memset(buf, 0, INTS * sizeof(int));
        MPI_OK(MPI_File_write_at(fh, 0, buf, INTS, MPI_INT, &status));
    }
    MPI_OK(MPI_File_set_atomicity(fh, 1));
    for (int round = 1; round <= ROUNDS; round++) {
        if (g_rank == 0) {
            for (int i = 0; i < INTS; i++) buf[i] = round;
            MPI_OK(MPI_File_write_at(fh, 0, buf, INTS, MPI_INT, &status));
        } else {
            MPI_OK(MPI_File_read_at(fh, 0, buf, INTS, MPI_INT, &status));
            for (int i = 1; i < INTS; i++)
                CHECK(buf[i] == buf[0], "round %d: a torn read: [0] = %d, [%d] = %d", round, buf[0], i, buf[i]);
        }
    }
    MPI_OK(MPI_File_close(&fh));
    MPI_OK(MPI_Type_free(&every_other));
    free(buf);
    remove_file("atomic.dat");
}

static int handler_calls = 0;
static MPI_File handler_file = MPI_FILE_NULL;
static int handler_class = -1, handler_code = -1;

static void file_handler(MPI_File *file, int *code, ...) {
    handler_calls++;
    handler_file = *file;
    handler_code = *code;
    MPI_Error_class(*code, &handler_class);
}

/* User file error handlers: on a file, and on MPI_FILE_NULL for open. */
static void test_errhandler(void) {
    MPI_Errhandler handler, got;
    MPI_File fh;
    MPI_Status status;
    int buf[2];
    remove_file("handler.dat");
    MPI_OK(MPI_File_get_errhandler(MPI_FILE_NULL, &got));
    CHECK(got == MPI_ERRORS_RETURN, "default file handler is not MPI_ERRORS_RETURN");
    MPI_OK(MPI_File_create_errhandler(file_handler, &handler));
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, "handler.dat", MPI_MODE_CREATE | MPI_MODE_RDWR,
                         MPI_INFO_NULL, &fh));
    MPI_OK(MPI_File_set_errhandler(fh, handler));
    MPI_OK(MPI_File_get_errhandler(fh, &got));
    CHECK(got == handler, "get_errhandler");
    int rc = MPI_File_read_at(fh, -1, buf, 1, MPI_INT, &status);
    CHECK(rc != MPI_SUCCESS && handler_calls == 1 && handler_file == fh && handler_class == MPI_ERR_ARG,
          "handler: rc %d calls %d class %d", rc, handler_calls, handler_class);
    MPI_OK(MPI_File_call_errhandler(fh, MPI_ERR_IO));
    CHECK(handler_calls == 2 && handler_code == MPI_ERR_IO, "call_errhandler: code %d", handler_code);
    MPI_OK(MPI_File_close(&fh));
    MPI_OK(MPI_File_set_errhandler(MPI_FILE_NULL, handler));
    rc = MPI_File_open(MPI_COMM_WORLD, "no-such.dat", MPI_MODE_RDONLY, MPI_INFO_NULL, &fh);
    CHECK(rc != MPI_SUCCESS && handler_calls == 3 && handler_file == MPI_FILE_NULL &&
          handler_class == MPI_ERR_NO_SUCH_FILE, "open handler: calls %d class %d", handler_calls, handler_class);
    MPI_OK(MPI_File_set_errhandler(MPI_FILE_NULL, MPI_ERRORS_RETURN));
    MPI_OK(MPI_Errhandler_free(&handler));
    remove_file("handler.dat");
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    errors_return();
    if (selected(argc, argv, "basic")) test_basic();
    if (selected(argc, argv, "errors")) test_errors();
    if (selected(argc, argv, "view")) test_view();
    if (selected(argc, argv, "shared")) test_shared();
    if (selected(argc, argv, "collective")) test_collective_nonblocking();
    if (selected(argc, argv, "errhandler")) test_errhandler();
    if (selected(argc, argv, "sequential")) test_sequential();
    if (selected(argc, argv, "atomicity")) test_atomicity();
    if (selected(argc, argv, "external32_longs")) test_external32_longs();
    if (selected(argc, argv, "errors")) test_bad_type_maps();
    return test_finish();
}
