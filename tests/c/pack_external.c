/* MPI_Pack_external / MPI_Unpack_external / MPI_Pack_external_size with
 * "external32": big-endian basic elements, no gaps, round trips through
 * derived types, and errors for a bad representation or a short buffer. */
#include "expect.h"
#include <string.h>

static void predefined_values_are_big_endian(void) {
    int ints[2] = {0x01020304, -2};
    double one = 1.0;
    unsigned char out[32];
    MPI_Aint position = 0, size = 0;
    MPI_OK(MPI_Pack_external_size("external32", 2, MPI_INT, &size));
    CHECK(size == 8, "2 ints are %ld external32 bytes", (long)size);
    MPI_OK(MPI_Pack_external("external32", ints, 2, MPI_INT, out, sizeof out, &position));
    CHECK(position == 8, "position %ld after 2 ints", (long)position);
    const unsigned char want_ints[8] = {1, 2, 3, 4, 0xff, 0xff, 0xff, 0xfe};
    CHECK(!memcmp(out, want_ints, 8), "ints not big-endian: %02x %02x %02x %02x", out[0], out[1], out[2], out[3]);
    MPI_OK(MPI_Pack_external("external32", &one, 1, MPI_DOUBLE, out, sizeof out, &position));
    const unsigned char want_one[8] = {0x3f, 0xf0, 0, 0, 0, 0, 0, 0};
    CHECK(!memcmp(out + 8, want_one, 8), "1.0 not big-endian: %02x %02x", out[8], out[9]);
    int back[2] = {0, 0};
    double one_back = 0;
    position = 0;
    MPI_OK(MPI_Unpack_external("external32", out, 16, &position, back, 2, MPI_INT));
    MPI_OK(MPI_Unpack_external("external32", out, 16, &position, &one_back, 1, MPI_DOUBLE));
    CHECK(back[0] == ints[0] && back[1] == ints[1] && one_back == 1.0 && position == 16,
          "round trip gave %x %d %g at %ld", back[0], back[1], one_back, (long)position);
}

static void derived_types_pack_without_gaps(void) {
    /* Every other short of 8, then a (double, int) pair type. */
    short shorts[8] = {0x0102, 9, 0x0304, 9, 0x0506, 9, 0x0708, 9};
    MPI_Datatype every_other;
    MPI_OK(MPI_Type_vector(4, 1, 2, MPI_SHORT, &every_other));
    MPI_OK(MPI_Type_commit(&every_other));
    MPI_Aint size = 0, position = 0;
    MPI_OK(MPI_Pack_external_size("external32", 1, every_other, &size));
    CHECK(size == 8, "vector of 4 shorts is %ld bytes", (long)size);
    unsigned char out[64];
    MPI_OK(MPI_Pack_external("external32", shorts, 1, every_other, out, sizeof out, &position));
    const unsigned char want[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    CHECK(!memcmp(out, want, 8), "vector packed as %02x %02x %02x", out[0], out[1], out[2]);
    short back[8];
    for (int i = 0; i < 8; i++) back[i] = -1;
    position = 0;
    MPI_OK(MPI_Unpack_external("external32", out, 8, &position, back, 1, every_other));
    for (int i = 0; i < 8; i++)
        CHECK(back[i] == (i % 2 ? -1 : shorts[i]), "back[%d] = %d", i, back[i]);
    MPI_OK(MPI_Type_free(&every_other));
}

/* A (double, int) pair type: 12 bytes, each member big-endian. */
static void pair_types_pack_without_padding(void) {
    unsigned char out[64];
    MPI_Aint size = 0, position = 0;
    struct { double value; int index; } pair = {2.0, 0x0a0b0c0d};
    MPI_OK(MPI_Pack_external_size("external32", 1, MPI_DOUBLE_INT, &size));
    CHECK(size == 12, "MPI_DOUBLE_INT is %ld external32 bytes", (long)size);
    position = 0;
    MPI_OK(MPI_Pack_external("external32", &pair, 1, MPI_DOUBLE_INT, out, sizeof out, &position));
    const unsigned char want_pair[12] = {0x40, 0, 0, 0, 0, 0, 0, 0, 0x0a, 0x0b, 0x0c, 0x0d};
    CHECK(position == 12 && !memcmp(out, want_pair, 12), "pair packed wrongly (%ld bytes)", (long)position);
}

static void errors(void) {
    int value = 7;
    unsigned char out[4];
    MPI_Aint position = 0, size = 0;
    EXPECT_CLASS(MPI_Pack_external_size("native", 1, MPI_INT, &size), MPI_ERR_ARG);
    EXPECT_CLASS(MPI_Pack_external("external", &value, 1, MPI_INT, out, sizeof out, &position), MPI_ERR_ARG);
    position = 2;
    int rc = MPI_Pack_external("external32", &value, 1, MPI_INT, out, sizeof out, &position);
    CHECK(rc != MPI_SUCCESS, "packing 4 bytes at position 2 of 4 succeeded");
    position = 0;
    EXPECT_CLASS(MPI_Pack_external("external32", &value, -1, MPI_INT, out, sizeof out, &position), MPI_ERR_COUNT);
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    errors_return();
    if (selected(argc, argv, "predefined")) predefined_values_are_big_endian();
    if (selected(argc, argv, "derived")) derived_types_pack_without_gaps();
    if (selected(argc, argv, "pairs")) pair_types_pack_without_padding();
    if (selected(argc, argv, "errors")) errors();
    return test_finish();
}
