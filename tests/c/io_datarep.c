/* MPI_Register_datarep: a user data representation for file views.
 * "swapped" stores every int byte-reversed: written through it, the file's
 * raw bytes are reversed; read through it, the program gets its values
 * back; its name comes back from MPI_File_get_view. Also: the same with the
 * large-count registration, NULL conversion functions (native bytes),
 * errors (a taken name, a NULL extent function, a conversion function that
 * fails, a representation that changes an element's size), and a
 * collective write through the representation.  Runs in the current
 * directory; subtests by argv. */
#include "expect.h"
#include <stdint.h>
#include <string.h>

static int extent_calls;
static int fail_writes;

static void remove_file(const char *name) {
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    if (g_rank == 0) MPI_File_delete(name, MPI_INFO_NULL);
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
}

/* Reverse the bytes of `count` ints between `from` and `to`. */
static void swap_ints(const void *from, void *to, MPI_Count count) {
    const unsigned char *in = from;
    unsigned char *out = to;
    for (MPI_Count i = 0; i < count; i++)
        for (int b = 0; b < 4; b++) out[4 * i + b] = in[4 * i + 3 - b];
}

static int swapped_read(void *userbuf, MPI_Datatype datatype, int count, void *filebuf, MPI_Offset position,
                        void *extra_state) {
    CHECK(datatype == MPI_INT && extra_state == &extent_calls, "read conversion got datatype %#x", (unsigned)datatype);
    swap_ints(filebuf, (int *)userbuf + position, count);
    return MPI_SUCCESS;
}

static int swapped_write(void *userbuf, MPI_Datatype datatype, int count, void *filebuf, MPI_Offset position,
                         void *extra_state) {
    (void)datatype;
    (void)extra_state;
    if (fail_writes) return MPI_ERR_OTHER;
    swap_ints((int *)userbuf + position, filebuf, count);
    return MPI_SUCCESS;
}

static int swapped_read_c(void *userbuf, MPI_Datatype datatype, MPI_Count count, void *filebuf, MPI_Offset position,
                          void *extra_state) {
    (void)datatype;
    (void)extra_state;
    swap_ints(filebuf, (int *)userbuf + position, count);
    return MPI_SUCCESS;
}

static int swapped_write_c(void *userbuf, MPI_Datatype datatype, MPI_Count count, void *filebuf, MPI_Offset position,
                           void *extra_state) {
    (void)datatype;
    (void)extra_state;
    swap_ints((int *)userbuf + position, filebuf, count);
    return MPI_SUCCESS;
}

static int native_extent(MPI_Datatype datatype, MPI_Aint *extent, void *extra_state) {
    int *calls = extra_state;
    ++*calls;
    MPI_Aint lb;
    return MPI_Type_get_extent(datatype, &lb, extent);
}

static int doubled_extent(MPI_Datatype datatype, MPI_Aint *extent, void *extra_state) {
    (void)extra_state;
    MPI_Aint lb;
    int rc = MPI_Type_get_extent(datatype, &lb, extent);
    *extent *= 2;
    return rc;
}

/* Write `N_INTS` ints per rank through `datarep`; check the raw bytes and
 * the values read back through it. */
#define N_INTS 16
static void round_trip(const char *datarep, int swapped) {
    MPI_File fh;
    MPI_Status status;
    int mine[N_INTS], back[N_INTS];
    for (int i = 0; i < N_INTS; i++) mine[i] = 0x01020304 + 0x100 * g_rank + i;
    remove_file("datarep.dat");
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, "datarep.dat", MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
    MPI_OK(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, datarep, MPI_INFO_NULL));
    char name[MPI_MAX_DATAREP_STRING];
    MPI_Offset disp;
    MPI_Datatype etype, filetype;
    MPI_OK(MPI_File_get_view(fh, &disp, &etype, &filetype, name));
    CHECK(!strcmp(name, datarep), "MPI_File_get_view says %s, not %s", name, datarep);
    MPI_Aint extent = 0;
    MPI_OK(MPI_File_get_type_extent(fh, MPI_INT, &extent));
    CHECK(extent == 4, "MPI_INT's file extent is %ld", (long)extent);
    MPI_OK(MPI_File_write_at(fh, N_INTS * g_rank, mine, N_INTS, MPI_INT, &status));
    MPI_OK(MPI_File_sync(fh));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    memset(back, 0, sizeof back);
    MPI_OK(MPI_File_read_at(fh, N_INTS * g_rank, back, N_INTS, MPI_INT, &status));
    for (int i = 0; i < N_INTS; i++)
        CHECK(back[i] == mine[i], "%s: int %d came back as %#x, not %#x", datarep, i, back[i], mine[i]);
    /* The raw bytes. */
    MPI_OK(MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL));
    unsigned char raw[4];
    MPI_OK(MPI_File_read_at(fh, 4 * N_INTS * g_rank, raw, 4, MPI_BYTE, &status));
    const unsigned char *first = (const unsigned char *)&mine[0];
    for (int b = 0; b < 4; b++)
        CHECK(raw[b] == first[swapped ? 3 - b : b], "%s: file byte %d is %02x", datarep, b, raw[b]);
    MPI_OK(MPI_File_close(&fh));
    remove_file("datarep.dat");
}

static void registered_representations(void) {
    MPI_OK(MPI_Register_datarep("swapped", swapped_read, swapped_write, native_extent, &extent_calls));
    round_trip("swapped", 1);
    CHECK(extent_calls > 0, "the extent function was never called");
    MPI_OK(MPI_Register_datarep_c("swapped-c", swapped_read_c, swapped_write_c, native_extent, &extent_calls));
    round_trip("swapped-c", 1);
    MPI_OK(MPI_Register_datarep("unconverted", MPI_CONVERSION_FN_NULL, MPI_CONVERSION_FN_NULL, native_extent,
                                &extent_calls));
    round_trip("unconverted", 0);
}

/* A collective write and read through the representation, each rank's
 * ints interleaved with the others' by a vector filetype. */
static void collective_access(void) {
    MPI_OK(MPI_Register_datarep("swapped", swapped_read, swapped_write, native_extent, &extent_calls));
    MPI_File fh;
    MPI_Status status;
    MPI_Datatype interleaved;
    MPI_OK(MPI_Type_vector(N_INTS, 1, g_size, MPI_INT, &interleaved));
    MPI_OK(MPI_Type_commit(&interleaved));
    int mine[N_INTS], back[N_INTS];
    for (int i = 0; i < N_INTS; i++) mine[i] = 0x0a0b0c00 + 0x10 * g_rank + i;
    remove_file("collective.dat");
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, "collective.dat", MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
    MPI_OK(MPI_File_set_view(fh, 4 * g_rank, MPI_INT, interleaved, "swapped", MPI_INFO_NULL));
    MPI_OK(MPI_File_write_all(fh, mine, N_INTS, MPI_INT, &status));
    MPI_OK(MPI_File_sync(fh));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    memset(back, 0, sizeof back);
    MPI_OK(MPI_File_read_at_all(fh, 0, back, N_INTS, MPI_INT, &status));
    for (int i = 0; i < N_INTS; i++) CHECK(back[i] == mine[i], "collective: int %d came back as %#x", i, back[i]);
    MPI_OK(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL));
    int raw = 0;
    MPI_OK(MPI_File_read_at(fh, g_rank, &raw, 1, MPI_INT, &status));
    int want = 0;
    swap_ints(&mine[0], &want, 1);
    CHECK(raw == want, "collective: the file holds %#x at rank %d's first int, not %#x", raw, g_rank, want);
    MPI_OK(MPI_File_close(&fh));
    MPI_OK(MPI_Type_free(&interleaved));
    remove_file("collective.dat");
}

static void errors(void) {
    MPI_OK(MPI_Register_datarep("swapped", swapped_read, swapped_write, native_extent, &extent_calls));
    EXPECT_CLASS(MPI_Register_datarep("swapped", swapped_read, swapped_write, native_extent, NULL),
                 MPI_ERR_DUP_DATAREP);
    EXPECT_CLASS(MPI_Register_datarep("external32", swapped_read, swapped_write, native_extent, NULL),
                 MPI_ERR_DUP_DATAREP);
    EXPECT_CLASS(MPI_Register_datarep("no-extent", swapped_read, swapped_write, NULL, NULL), MPI_ERR_ARG);
    MPI_OK(MPI_Register_datarep("doubled", swapped_read, swapped_write, doubled_extent, NULL));
    MPI_File fh;
    MPI_Status status;
    remove_file("errors.dat");
    MPI_OK(MPI_File_open(MPI_COMM_WORLD, "errors.dat", MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh));
    EXPECT_CLASS(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "doubled", MPI_INFO_NULL), MPI_ERR_UNSUPPORTED_DATAREP);
    EXPECT_CLASS(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "never-registered", MPI_INFO_NULL),
                 MPI_ERR_UNSUPPORTED_DATAREP);
    MPI_OK(MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "swapped", MPI_INFO_NULL));
    int values[4] = {1, 2, 3, 4};
    fail_writes = 1;
    EXPECT_CLASS(MPI_File_write_at(fh, 4 * g_rank, values, 4, MPI_INT, &status), MPI_ERR_CONVERSION);
    EXPECT_CLASS(MPI_File_write_at_all(fh, 4 * g_rank, values, 4, MPI_INT, &status), MPI_ERR_CONVERSION);
    fail_writes = 0;
    MPI_OK(MPI_File_write_at_all(fh, 4 * g_rank, values, 4, MPI_INT, &status));
    MPI_OK(MPI_File_close(&fh));
    remove_file("errors.dat");
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    errors_return();
    if (selected(argc, argv, "registered")) registered_representations();
    else if (selected(argc, argv, "collective")) collective_access();
    else if (selected(argc, argv, "errors")) errors();
    return test_finish();
}
