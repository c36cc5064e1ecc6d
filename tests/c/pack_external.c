/* MPI_Pack_external / MPI_Unpack_external / MPI_Pack_external_size with
 * "external32": big-endian basic elements, no gaps, round trips through
 * derived types, and errors for a bad representation or a short buffer. */
#include "expect.h"
#include <stddef.h>
#include <string.h>
#include <wchar.h>

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
    /* MPI_LONG_INT: a 4-byte long then an int. */
    struct { long value; int index; } long_pair = {-5, 3}, long_pair_back = {0, 0};
    MPI_OK(MPI_Pack_external_size("external32", 1, MPI_LONG_INT, &size));
    CHECK(size == 8, "MPI_LONG_INT is %ld external32 bytes", (long)size);
    position = 0;
    MPI_OK(MPI_Pack_external("external32", &long_pair, 1, MPI_LONG_INT, out, sizeof out, &position));
    const unsigned char want_long_pair[8] = {0xff, 0xff, 0xff, 0xfb, 0, 0, 0, 3};
    CHECK(position == 8 && !memcmp(out, want_long_pair, 8), "MPI_LONG_INT packed wrongly (%ld bytes)", (long)position);
    position = 0;
    MPI_OK(MPI_Unpack_external("external32", out, 8, &position, &long_pair_back, 1, MPI_LONG_INT));
    CHECK(long_pair_back.value == -5 && long_pair_back.index == 3, "MPI_LONG_INT came back as %ld %d",
          long_pair_back.value, long_pair_back.index);
}

/* C long and unsigned long are 8 bytes here but 4 in external32 (MPI-4.0
 * 19.5, and MPICH packs them so), alone and inside a derived type. */
static void longs_take_four_bytes(void) {
    long longs[3] = {-2, 0x12345678, -0x80000000L};
    unsigned long ulongs[2] = {0xfffffffeUL, 1};
    unsigned char out[64];
    MPI_Aint size = 0, position = 0;
    MPI_OK(MPI_Pack_external_size("external32", 3, MPI_LONG, &size));
    CHECK(size == 12, "3 longs are %ld external32 bytes", (long)size);
    MPI_OK(MPI_Pack_external_size("external32", 2, MPI_UNSIGNED_LONG, &size));
    CHECK(size == 8, "2 unsigned longs are %ld external32 bytes", (long)size);
    MPI_OK(MPI_Pack_external_size("external32", 1, MPI_LONG_LONG, &size));
    CHECK(size == 8, "a long long is %ld external32 bytes", (long)size);
    MPI_OK(MPI_Pack_external("external32", longs, 3, MPI_LONG, out, sizeof out, &position));
    const unsigned char want_longs[12] = {0xff, 0xff, 0xff, 0xfe, 0x12, 0x34, 0x56, 0x78, 0x80, 0, 0, 0};
    CHECK(position == 12 && !memcmp(out, want_longs, 12), "longs packed as %02x %02x %02x %02x (%ld bytes)",
          out[0], out[1], out[2], out[3], (long)position);
    MPI_OK(MPI_Pack_external("external32", ulongs, 2, MPI_UNSIGNED_LONG, out, sizeof out, &position));
    const unsigned char want_ulongs[8] = {0xff, 0xff, 0xff, 0xfe, 0, 0, 0, 1};
    CHECK(position == 20 && !memcmp(out + 12, want_ulongs, 8), "unsigned longs packed as %02x %02x",
          out[12], out[15]);
    long longs_back[3] = {0, 0, 0};
    unsigned long ulongs_back[2] = {0, 0};
    position = 0;
    MPI_OK(MPI_Unpack_external("external32", out, 20, &position, longs_back, 3, MPI_LONG));
    MPI_OK(MPI_Unpack_external("external32", out, 20, &position, ulongs_back, 2, MPI_UNSIGNED_LONG));
    for (int i = 0; i < 3; i++)
        CHECK(longs_back[i] == longs[i], "long %d came back as %ld (sign not extended?)", i, longs_back[i]);
    CHECK(ulongs_back[0] == 0xfffffffeUL && ulongs_back[1] == 1,
          "unsigned longs came back as %lx %lx (sign extended?)", ulongs_back[0], ulongs_back[1]);
    CHECK(position == 20, "position %ld after unpacking 20 bytes", (long)position);
}

/* A struct {double; long; int} of 2 elements: 8 + 4 + 4 bytes each. */
static void records_with_longs_shrink(void) {
    unsigned char out[64];
    MPI_Aint size = 0, position = 0;
    struct record { double value; long count; int tag; } records[2] = {{1.0, -3, 7}, {2.0, 5, 9}};
    int lengths[3] = {1, 1, 1};
    MPI_Aint displacements[3] = {offsetof(struct record, value), offsetof(struct record, count),
                                 offsetof(struct record, tag)};
    MPI_Datatype types[3] = {MPI_DOUBLE, MPI_LONG, MPI_INT}, record_type;
    MPI_OK(MPI_Type_create_struct(3, lengths, displacements, types, &record_type));
    MPI_OK(MPI_Type_commit(&record_type));
    MPI_OK(MPI_Pack_external_size("external32", 2, record_type, &size));
    CHECK(size == 32, "2 {double, long, int} are %ld external32 bytes", (long)size);
    position = 0;
    MPI_OK(MPI_Pack_external("external32", records, 2, record_type, out, sizeof out, &position));
    const unsigned char want_record[16] = {0x3f, 0xf0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xfd, 0, 0, 0, 7};
    CHECK(position == 32 && !memcmp(out, want_record, 16), "record packed wrongly: %02x %02x %02x %02x",
          out[8], out[9], out[10], out[11]);
    struct record back[2];
    memset(back, 0, sizeof back);
    position = 0;
    MPI_OK(MPI_Unpack_external("external32", out, 32, &position, back, 2, record_type));
    for (int i = 0; i < 2; i++)
        CHECK(back[i].value == records[i].value && back[i].count == records[i].count && back[i].tag == records[i].tag,
              "record %d came back as %g %ld %d", i, back[i].value, back[i].count, back[i].tag);
    MPI_OK(MPI_Type_free(&record_type));
}

/* wchar_t is 4 bytes here, 2 in external32, and not sign-extended (MPICH
 * 4.0 asserts on MPI_WCHAR in Pack_external). */
static void wchars_take_two_bytes(void) {
    wchar_t text[3] = {L'A', 0xAC00, 0x20AC};
    unsigned char out[16];
    MPI_Aint size = 0, position = 0;
    MPI_OK(MPI_Pack_external_size("external32", 3, MPI_WCHAR, &size));
    CHECK(size == 6, "3 wchars are %ld external32 bytes", (long)size);
    MPI_OK(MPI_Pack_external("external32", text, 3, MPI_WCHAR, out, sizeof out, &position));
    const unsigned char want[6] = {0, 0x41, 0xac, 0, 0x20, 0xac};
    CHECK(position == 6 && !memcmp(out, want, 6), "wchars packed as %02x %02x %02x %02x", out[0], out[1], out[2], out[3]);
    wchar_t back[3] = {0, 0, 0};
    position = 0;
    MPI_OK(MPI_Unpack_external("external32", out, 6, &position, back, 3, MPI_WCHAR));
    for (int i = 0; i < 3; i++)
        CHECK(back[i] == text[i], "wchar %d came back as %x", i, (unsigned)back[i]);
}

/* A long that needs more than 4 bytes cannot be written in external32:
 * MPI_ERR_CONVERSION, and the position does not move (MPICH truncates). */
static void longs_that_do_not_fit(void) {
    long big[2] = {1, 0x123456789aL};
    unsigned long too_big = 0x100000000UL;
    unsigned char out[16];
    MPI_Aint position = 0;
    EXPECT_CLASS(MPI_Pack_external("external32", big, 2, MPI_LONG, out, sizeof out, &position), MPI_ERR_CONVERSION);
    CHECK(position == 0, "position moved to %ld on a failed pack", (long)position);
    EXPECT_CLASS(MPI_Pack_external("external32", &too_big, 1, MPI_UNSIGNED_LONG, out, sizeof out, &position),
                 MPI_ERR_CONVERSION);
    long smallest = -0x80000000L, beyond = -0x80000001L;
    MPI_OK(MPI_Pack_external("external32", &smallest, 1, MPI_LONG, out, sizeof out, &position));
    EXPECT_CLASS(MPI_Pack_external("external32", &beyond, 1, MPI_LONG, out, sizeof out, &position), MPI_ERR_CONVERSION);
    CHECK(position == 4, "position %ld after one packed long", (long)position);
    /* A window of 8 bytes holds 2 external32 longs even though they are 16 native bytes. */
    long two[2] = {3, -4};
    position = 0;
    MPI_OK(MPI_Pack_external("external32", two, 2, MPI_LONG, out, 8, &position));
    CHECK(position == 8, "position %ld after 2 longs in an 8-byte window", (long)position);
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
    if (selected(argc, argv, "longs")) longs_take_four_bytes();
    if (selected(argc, argv, "long_records")) records_with_longs_shrink();
    if (selected(argc, argv, "wchars")) wchars_take_two_bytes();
    if (selected(argc, argv, "longs_that_do_not_fit")) longs_that_do_not_fit();
    if (selected(argc, argv, "errors")) errors();
    return test_finish();
}
