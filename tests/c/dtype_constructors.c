/* Every derived-datatype constructor: size, bounds, true bounds, envelope,
 * contents, and the exact bytes MPI_Pack takes (and MPI_Unpack writes,
 * leaving gaps alone) for the expected type map.  One process is enough;
 * every rank runs the same checks.
 * usage: dtype_constructors */
#include "common.h"
#include <stddef.h>

typedef struct { long off; int len; } seg_t;

#define ARENA 8192
#define ORIGIN 2048 /* buffer address inside the arena: room for negative offsets */
static unsigned char src_arena[ARENA], dst_arena[ARENA], expect[ARENA], packed[ARENA];

/* Pack `count` elements of dt and compare with the concatenation of `segs`
 * shifted by k * extent; unpack into a poisoned arena and check that exactly
 * those bytes were written. */
static void check_bytes(MPI_Datatype dt, const char *name, int count, const seg_t *segs, int nseg, long extent) {
    fill_pat(src_arena, ARENA, 7);
    size_t n = 0;
    for (int k = 0; k < count; k++)
        for (int s = 0; s < nseg; s++)
            for (int b = 0; b < segs[s].len; b++) expect[n++] = src_arena[ORIGIN + segs[s].off + k * extent + b];
    int psize = -1, pos = 0;
    MPI_OK(MPI_Pack_size(count, dt, MPI_COMM_WORLD, &psize));
    CHECK(psize >= (int)n, "%s: Pack_size %d < %zu", name, psize, n);
    MPI_OK(MPI_Pack(src_arena + ORIGIN, count, dt, packed, sizeof packed, &pos, MPI_COMM_WORLD));
    CHECK(pos == (int)n, "%s: Pack advanced position to %d, expected %zu", name, pos, n);
    for (size_t i = 0; i < n; i++) CHECK(packed[i] == expect[i], "%s: packed byte %zu", name, i);
    memset(dst_arena, 0xee, ARENA);
    pos = 0;
    MPI_OK(MPI_Unpack(packed, (int)n, &pos, dst_arena + ORIGIN, count, dt, MPI_COMM_WORLD));
    CHECK(pos == (int)n, "%s: Unpack advanced position to %d", name, pos);
    static unsigned char covered[ARENA];
    memset(covered, 0, ARENA);
    for (int k = 0; k < count; k++)
        for (int s = 0; s < nseg; s++)
            for (int b = 0; b < segs[s].len; b++) covered[ORIGIN + segs[s].off + k * extent + b] = 1;
    for (int i = 0; i < ARENA; i++) {
        if (covered[i])
            CHECK(dst_arena[i] == src_arena[i], "%s: unpacked byte at offset %d", name, i - ORIGIN);
        else
            CHECK(dst_arena[i] == 0xee, "%s: gap byte at offset %d was written", name, i - ORIGIN);
    }
}

static void check_bounds(MPI_Datatype dt, const char *name, int size, long lb, long extent, long true_lb, long true_extent) {
    int sz = -1;
    MPI_Aint l, e, tl, te;
    MPI_Count szx, lx, ex, tlx, tex;
    MPI_OK(MPI_Type_size(dt, &sz));
    MPI_OK(MPI_Type_get_extent(dt, &l, &e));
    MPI_OK(MPI_Type_get_true_extent(dt, &tl, &te));
    CHECK(sz == size, "%s: size %d, expected %d", name, sz, size);
    CHECK(l == lb && e == extent, "%s: lb/extent %ld/%ld, expected %ld/%ld", name, (long)l, (long)e, lb, extent);
    CHECK(tl == true_lb && te == true_extent, "%s: true lb/extent %ld/%ld, expected %ld/%ld", name, (long)tl,
          (long)te, true_lb, true_extent);
    MPI_OK(MPI_Type_size_x(dt, &szx));
    MPI_OK(MPI_Type_get_extent_x(dt, &lx, &ex));
    MPI_OK(MPI_Type_get_true_extent_x(dt, &tlx, &tex));
    CHECK(szx == size && lx == lb && ex == extent && tlx == true_lb && tex == true_extent, "%s: _x queries", name);
}

static void check_envelope(MPI_Datatype dt, const char *name, int ni, int na, int nd, int combiner) {
    int i = -1, a = -1, d = -1, c = -1;
    MPI_OK(MPI_Type_get_envelope(dt, &i, &a, &d, &c));
    CHECK(i == ni && a == na && d == nd && c == combiner, "%s: envelope (%d,%d,%d,%d), expected (%d,%d,%d,%d)", name,
          i, a, d, c, ni, na, nd, combiner);
}

/* get_contents and compare the integer and address arguments; returns the
 * first constituent datatype (the caller frees derived ones). */
static MPI_Datatype check_contents(MPI_Datatype dt, const char *name, int ni, const int *ints, int na,
                                   const MPI_Aint *addrs, int nd, MPI_Datatype *types) {
    int gi[64];
    MPI_Aint ga[64];
    MPI_Datatype gd[64];
    MPI_OK(MPI_Type_get_contents(dt, 64, 64, 64, gi, ga, gd));
    for (int k = 0; k < ni; k++) CHECK(gi[k] == ints[k], "%s: contents integer %d is %d, expected %d", name, k, gi[k], ints[k]);
    for (int k = 0; k < na; k++)
        CHECK(ga[k] == addrs[k], "%s: contents address %d is %ld, expected %ld", name, k, (long)ga[k], (long)addrs[k]);
    for (int k = 0; k < nd; k++) types[k] = gd[k];
    return nd > 0 ? gd[0] : MPI_DATATYPE_NULL;
}

static void commit(MPI_Datatype *dt) { MPI_OK(MPI_Type_commit(dt)); }

static void t_contiguous(void) {
    MPI_Datatype t, d[1];
    MPI_OK(MPI_Type_contiguous(3, MPI_INT, &t));
    commit(&t);
    check_bounds(t, "contiguous", 12, 0, 12, 0, 12);
    check_envelope(t, "contiguous", 1, 0, 1, MPI_COMBINER_CONTIGUOUS);
    int ints[] = {3};
    check_contents(t, "contiguous", 1, ints, 0, NULL, 1, d);
    CHECK(d[0] == MPI_INT, "contiguous: constituent is MPI_INT");
    seg_t s[] = {{0, 12}};
    check_bytes(t, "contiguous", 2, s, 1, 12);
    MPI_OK(MPI_Type_free(&t));
    CHECK(t == MPI_DATATYPE_NULL, "Type_free sets the handle to MPI_DATATYPE_NULL");
    MPI_OK(MPI_Type_contiguous(0, MPI_INT, &t));
    commit(&t);
    check_bounds(t, "contiguous(0)", 0, 0, 0, 0, 0);
    MPI_OK(MPI_Type_free(&t));
}

static void t_vector(void) {
    MPI_Datatype t, d[1];
    MPI_OK(MPI_Type_vector(3, 2, 4, MPI_INT, &t));
    commit(&t);
    check_bounds(t, "vector", 24, 0, 40, 0, 40);
    check_envelope(t, "vector", 3, 0, 1, MPI_COMBINER_VECTOR);
    int ints[] = {3, 2, 4};
    check_contents(t, "vector", 3, ints, 0, NULL, 1, d);
    seg_t s[] = {{0, 8}, {16, 8}, {32, 8}};
    check_bytes(t, "vector", 3, s, 3, 40);
    MPI_OK(MPI_Type_free(&t));
    /* negative stride */
    MPI_OK(MPI_Type_vector(3, 1, -2, MPI_INT, &t));
    commit(&t);
    check_bounds(t, "vector(stride -2)", 12, -16, 20, -16, 20);
    seg_t n[] = {{0, 4}, {-8, 4}, {-16, 4}};
    check_bytes(t, "vector(stride -2)", 2, n, 3, 20);
    MPI_OK(MPI_Type_free(&t));
}

static void t_hvector(void) {
    MPI_Datatype t, d[1];
    MPI_OK(MPI_Type_create_hvector(2, 3, 20, MPI_SHORT, &t));
    commit(&t);
    check_bounds(t, "hvector", 12, 0, 26, 0, 26);
    check_envelope(t, "hvector", 2, 1, 1, MPI_COMBINER_HVECTOR);
    int ints[] = {2, 3};
    MPI_Aint addrs[] = {20};
    check_contents(t, "hvector", 2, ints, 1, addrs, 1, d);
    CHECK(d[0] == MPI_SHORT, "hvector: constituent");
    seg_t s[] = {{0, 6}, {20, 6}};
    check_bytes(t, "hvector", 2, s, 2, 26);
    MPI_OK(MPI_Type_free(&t));
}

static void t_indexed(void) {
    MPI_Datatype t, d[1];
    int bl[] = {2, 1, 3}, dis[] = {5, 0, 8};
    MPI_OK(MPI_Type_indexed(3, bl, dis, MPI_INT, &t));
    commit(&t);
    check_bounds(t, "indexed", 24, 0, 44, 0, 44);
    check_envelope(t, "indexed", 7, 0, 1, MPI_COMBINER_INDEXED);
    int ints[] = {3, 2, 1, 3, 5, 0, 8};
    check_contents(t, "indexed", 7, ints, 0, NULL, 1, d);
    seg_t s[] = {{20, 8}, {0, 4}, {32, 12}}; /* type-map order, not address order */
    check_bytes(t, "indexed", 2, s, 3, 44);
    MPI_OK(MPI_Type_free(&t));
}

static void t_hindexed(void) {
    MPI_Datatype t, d[1];
    int bl[] = {1, 2};
    MPI_Aint dis[] = {12, -8};
    MPI_OK(MPI_Type_create_hindexed(2, bl, dis, MPI_DOUBLE, &t));
    commit(&t);
    check_bounds(t, "hindexed", 24, -8, 28, -8, 28);
    check_envelope(t, "hindexed", 3, 2, 1, MPI_COMBINER_HINDEXED);
    int ints[] = {2, 1, 2};
    check_contents(t, "hindexed", 3, ints, 2, dis, 1, d);
    seg_t s[] = {{12, 8}, {-8, 16}};
    check_bytes(t, "hindexed", 2, s, 2, 28);
    MPI_OK(MPI_Type_free(&t));
}

static void t_indexed_block(void) {
    MPI_Datatype t, d[1];
    int dis[] = {4, 0, 9};
    MPI_OK(MPI_Type_create_indexed_block(3, 2, dis, MPI_SHORT, &t));
    commit(&t);
    check_bounds(t, "indexed_block", 12, 0, 22, 0, 22);
    check_envelope(t, "indexed_block", 5, 0, 1, MPI_COMBINER_INDEXED_BLOCK);
    int ints[] = {3, 2, 4, 0, 9};
    check_contents(t, "indexed_block", 5, ints, 0, NULL, 1, d);
    seg_t s[] = {{8, 4}, {0, 4}, {18, 4}};
    check_bytes(t, "indexed_block", 2, s, 3, 22);
    MPI_OK(MPI_Type_free(&t));
}

static void t_hindexed_block(void) {
    MPI_Datatype t, d[1];
    MPI_Aint dis[] = {0, 24};
    MPI_OK(MPI_Type_create_hindexed_block(2, 3, dis, MPI_CHAR, &t));
    commit(&t);
    check_bounds(t, "hindexed_block", 6, 0, 27, 0, 27);
    check_envelope(t, "hindexed_block", 2, 2, 1, MPI_COMBINER_HINDEXED_BLOCK);
    int ints[] = {2, 3};
    check_contents(t, "hindexed_block", 2, ints, 2, dis, 1, d);
    seg_t s[] = {{0, 3}, {24, 3}};
    check_bytes(t, "hindexed_block", 3, s, 2, 27);
    MPI_OK(MPI_Type_free(&t));
}

struct rec { int a; double b; char c[3]; };

static void t_struct(void) {
    MPI_Datatype t, d[3];
    int bl[] = {1, 1, 3};
    MPI_Aint dis[] = {offsetof(struct rec, a), offsetof(struct rec, b), offsetof(struct rec, c)};
    MPI_Datatype types[] = {MPI_INT, MPI_DOUBLE, MPI_CHAR};
    MPI_OK(MPI_Type_create_struct(3, bl, dis, types, &t));
    commit(&t);
    /* extent padded to the alignment of double: sizeof(struct rec) */
    check_bounds(t, "struct", 15, 0, (long)sizeof(struct rec), 0, 19);
    check_envelope(t, "struct", 4, 3, 3, MPI_COMBINER_STRUCT);
    int ints[] = {3, 1, 1, 3};
    check_contents(t, "struct", 4, ints, 3, dis, 3, d);
    CHECK(d[0] == MPI_INT && d[1] == MPI_DOUBLE && d[2] == MPI_CHAR, "struct: constituents");
    seg_t s[] = {{0, 4}, {8, 11}};
    check_bytes(t, "struct", 3, s, 2, sizeof(struct rec));
    MPI_OK(MPI_Type_free(&t));
}

static void t_resized(void) {
    MPI_Datatype t, two, d[1];
    MPI_OK(MPI_Type_create_resized(MPI_INT, -4, 12, &t));
    commit(&t);
    check_bounds(t, "resized", 4, -4, 12, 0, 4);
    check_envelope(t, "resized", 0, 2, 1, MPI_COMBINER_RESIZED);
    MPI_Aint addrs[] = {-4, 12};
    check_contents(t, "resized", 0, NULL, 2, addrs, 1, d);
    MPI_OK(MPI_Type_contiguous(2, t, &two));
    commit(&two);
    check_bounds(two, "contiguous(resized)", 8, -4, 24, 0, 16);
    seg_t s[] = {{0, 4}, {12, 4}};
    check_bytes(two, "contiguous(resized)", 2, s, 2, 24);
    seg_t r[] = {{0, 4}};
    check_bytes(t, "resized", 3, r, 1, 12);
    MPI_OK(MPI_Type_free(&two));
    MPI_OK(MPI_Type_free(&t));
}

static void t_subarray(void) {
    MPI_Datatype t, d[1];
    int sizes[] = {4, 5}, subsizes[] = {2, 3}, starts[] = {1, 2};
    MPI_OK(MPI_Type_create_subarray(2, sizes, subsizes, starts, MPI_ORDER_C, MPI_INT, &t));
    commit(&t);
    check_bounds(t, "subarray C", 24, 0, 80, 28, 32);
    check_envelope(t, "subarray C", 8, 0, 1, MPI_COMBINER_SUBARRAY);
    int ints[] = {2, 4, 5, 2, 3, 1, 2, MPI_ORDER_C};
    check_contents(t, "subarray C", 8, ints, 0, NULL, 1, d);
    seg_t s[] = {{28, 12}, {48, 12}};
    check_bytes(t, "subarray C", 2, s, 2, 80);
    MPI_OK(MPI_Type_free(&t));
    /* Fortran order: element (i, j) at i + 4 j */
    MPI_OK(MPI_Type_create_subarray(2, sizes, subsizes, starts, MPI_ORDER_FORTRAN, MPI_INT, &t));
    commit(&t);
    check_bounds(t, "subarray Fortran", 24, 0, 80, 36, 40);
    seg_t f[] = {{36, 8}, {52, 8}, {68, 8}};
    check_bytes(t, "subarray Fortran", 2, f, 3, 80);
    MPI_OK(MPI_Type_free(&t));
}

static void t_darray(void) {
    /* 4x8 ints over a 2x2 process grid: rows BLOCK, columns CYCLIC(2). */
    int gsizes[] = {4, 8}, distribs[] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC};
    int dargs[] = {MPI_DISTRIBUTE_DFLT_DARG, 2}, psizes[] = {2, 2};
    int owner[32];
    for (int i = 0; i < 32; i++) owner[i] = -1;
    for (int r = 0; r < 4; r++) {
        MPI_Datatype t;
        MPI_OK(MPI_Type_create_darray(4, r, 2, gsizes, distribs, dargs, psizes, MPI_ORDER_C, MPI_INT, &t));
        commit(&t);
        int sz;
        MPI_Aint lb, ext;
        MPI_OK(MPI_Type_size(t, &sz));
        MPI_OK(MPI_Type_get_extent(t, &lb, &ext));
        CHECK(sz == 32 && lb == 0 && ext == 128, "darray rank %d: size %d lb %ld extent %ld", r, sz, (long)lb, (long)ext);
        /* unpack element numbers to see which elements this rank owns, in order */
        int vals[8], arr[32], pos = 0;
        for (int i = 0; i < 8; i++) vals[i] = 100 + i;
        for (int i = 0; i < 32; i++) arr[i] = -1;
        MPI_OK(MPI_Unpack(vals, sizeof vals, &pos, arr, 1, t, MPI_COMM_WORLD));
        int next = 100;
        for (int i = 0; i < 32; i++) {
            if (arr[i] < 0) continue;
            CHECK(arr[i] == next, "darray rank %d: element %d holds %d, expected %d (array order)", r, i, arr[i], next);
            next++;
            CHECK(owner[i] < 0, "darray: element %d owned twice", i);
            owner[i] = r;
            int row = i / 8, col = i % 8;
            int expected = (row / 2) * 2 + (col / 2) % 2;
            CHECK(r == expected, "darray: element (%d,%d) on rank %d, expected %d", row, col, r, expected);
        }
        CHECK(next == 108, "darray rank %d owns %d elements", r, next - 100);
        if (r == 1) {
            check_envelope(t, "darray", 4 * 2 + 4, 0, 1, MPI_COMBINER_DARRAY);
            int ints[] = {4, 1, 2, 4, 8, MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_DFLT_DARG, 2, 2, 2, MPI_ORDER_C};
            MPI_Datatype d[1];
            check_contents(t, "darray", 12, ints, 0, NULL, 1, d);
            seg_t s[] = {{8, 8}, {24, 8}, {40, 8}, {56, 8}};
            check_bytes(t, "darray C rank 1", 1, s, 4, 128);
        }
        MPI_OK(MPI_Type_free(&t));
    }
    for (int i = 0; i < 32; i++) CHECK(owner[i] >= 0, "darray: element %d owned by nobody", i);
    /* Fortran order, rank 1 = grid (0, 1): rows 0..1, columns 2, 3, 6, 7; i fastest */
    MPI_Datatype f;
    MPI_OK(MPI_Type_create_darray(4, 1, 2, gsizes, distribs, dargs, psizes, MPI_ORDER_FORTRAN, MPI_INT, &f));
    commit(&f);
    seg_t fs[] = {{32, 8}, {48, 8}, {96, 8}, {112, 8}};
    check_bytes(f, "darray Fortran rank 1", 1, fs, 4, 128);
    MPI_OK(MPI_Type_free(&f));
}

static void t_dup_and_nesting(void) {
    MPI_Datatype v, dup, nested, d[1];
    MPI_OK(MPI_Type_vector(2, 1, 3, MPI_DOUBLE, &v));
    MPI_OK(MPI_Type_dup(v, &dup));
    check_envelope(dup, "dup", 0, 0, 1, MPI_COMBINER_DUP);
    commit(&dup);
    check_bounds(dup, "dup", 16, 0, 32, 0, 32);
    /* a vector of vectors; get_contents gives a new handle for the inner type */
    MPI_OK(MPI_Type_create_hvector(2, 1, 40, v, &nested));
    MPI_OK(MPI_Type_free(&v)); /* the nested type keeps its constituent alive */
    commit(&nested);
    check_bounds(nested, "hvector(vector)", 32, 0, 72, 0, 72);
    seg_t s[] = {{0, 8}, {24, 8}, {40, 8}, {64, 8}};
    check_bytes(nested, "hvector(vector)", 2, s, 4, 72);
    int ints[] = {2, 1};
    MPI_Aint addrs[] = {40};
    MPI_Datatype inner = check_contents(nested, "hvector(vector)", 2, ints, 1, addrs, 1, d);
    check_envelope(inner, "get_contents constituent", 3, 0, 1, MPI_COMBINER_VECTOR);
    MPI_OK(MPI_Type_free(&inner));
    int ni, na, nd, c;
    MPI_OK(MPI_Type_get_envelope(MPI_INT, &ni, &na, &nd, &c));
    CHECK(c == MPI_COMBINER_NAMED && ni == 0 && na == 0 && nd == 0, "MPI_INT envelope is NAMED");
    MPI_OK(MPI_Type_free(&nested));
    MPI_OK(MPI_Type_free(&dup));
}

static void t_pair_and_struct_of_pairs(void) {
    /* MPI_DOUBLE_INT has a hole: 12 bytes of data, extent 16 */
    struct { double d; int i; } di[2];
    check_bounds(MPI_DOUBLE_INT, "MPI_DOUBLE_INT", 12, 0, sizeof di[0], 0, 12);
    seg_t s[] = {{0, 12}};
    check_bytes(MPI_DOUBLE_INT, "MPI_DOUBLE_INT", 3, s, 1, sizeof di[0]);
    MPI_Datatype t;
    MPI_OK(MPI_Type_contiguous(2, MPI_DOUBLE_INT, &t));
    commit(&t);
    check_bounds(t, "contiguous(DOUBLE_INT)", 24, 0, 32, 0, 28);
    MPI_OK(MPI_Type_free(&t));
}

static void t_address(void) {
    struct rec r;
    MPI_Aint a0, a1;
    MPI_OK(MPI_Get_address(&r.a, &a0));
    MPI_OK(MPI_Get_address(&r.c[1], &a1));
    CHECK(MPI_Aint_diff(a1, a0) == (MPI_Aint)(offsetof(struct rec, c) + 1), "Aint_diff");
    CHECK(MPI_Aint_add(a0, 5) == a0 + 5, "Aint_add");
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    t_contiguous();
    t_vector();
    t_hvector();
    t_indexed();
    t_hindexed();
    t_indexed_block();
    t_hindexed_block();
    t_struct();
    t_resized();
    t_subarray();
    t_darray();
    t_dup_and_nesting();
    t_pair_and_struct_of_pairs();
    t_address();
    return test_finish();
}
