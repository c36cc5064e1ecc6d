/* Attributes: predefined attributes on MPI_COMM_WORLD, user keyvals with
 * copy callbacks on Comm_dup (NULL_COPY, DUP_FN, a counting copier that
 * changes the value, one that declines) and delete callbacks on
 * Comm_free / delete_attr / replacement / Finalize (COMM_SELF), the legacy
 * Attr_* names, and the errors.  usage: attr  (any number of ranks) */
#include "common.h"
#include "expect.h"

static int copies, deletes, self_deletes;
static int last_deleted_value = -1;

static int copy_plus_one(MPI_Comm c, int key, void *extra, void *in, void *out, int *flag) {
    (void)c; (void)key;
    copies++;
    CHECK(*(int *)extra == 77, "extra state %d", *(int *)extra);
    *(void **)out = (void *)((intptr_t)in + 1);
    *flag = 1;
    return MPI_SUCCESS;
}
static int copy_declines(MPI_Comm c, int key, void *extra, void *in, void *out, int *flag) {
    (void)c; (void)key; (void)extra; (void)in; (void)out;
    copies++;
    *flag = 0;
    return MPI_SUCCESS;
}
static int copy_fails(MPI_Comm c, int key, void *extra, void *in, void *out, int *flag) {
    (void)c; (void)key; (void)extra; (void)in; (void)out; (void)flag;
    return MPI_ERR_OTHER;
}
static int count_delete(MPI_Comm c, int key, void *value, void *extra) {
    (void)c; (void)key; (void)extra;
    deletes++;
    last_deleted_value = (int)(intptr_t)value;
    return MPI_SUCCESS;
}
/* runs during MPI_Finalize and may still call MPI */
static int self_delete(MPI_Comm c, int key, void *value, void *extra) {
    (void)key; (void)extra; (void)value;
    int s = -1;
    MPI_OK(MPI_Comm_size(c, &s));
    self_deletes += (s == 1);
    return MPI_SUCCESS;
}

/* Order in which MPI_Finalize deletes COMM_SELF attributes 0, 1, 2. */
static int exit_order[3], exit_calls;
static int record_exit(MPI_Comm c, int key, void *value, void *extra) {
    (void)c; (void)key; (void)extra;
    if (exit_calls < 3) exit_order[exit_calls] = (int)(intptr_t)value;
    exit_calls++;
    return MPI_SUCCESS;
}

static int get_int_attr(MPI_Comm c, int key, int *flag) {
    void *v = NULL;
    MPI_OK(MPI_Comm_get_attr(c, key, &v, flag));
    return *flag ? (int)(intptr_t)v : -1;
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    errors_return();
    int flag = -1, *p = NULL;

    /* predefined attributes */
    MPI_OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &p, &flag));
    CHECK(flag && *p >= 32767, "MPI_TAG_UB %d", flag ? *p : -1);
    MPI_OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_HOST, &p, &flag));
    CHECK(flag && (*p == MPI_PROC_NULL || (*p >= 0 && *p < g_size)), "MPI_HOST");
    MPI_OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_IO, &p, &flag));
    CHECK(flag && (*p == MPI_ANY_SOURCE || *p == MPI_PROC_NULL || (*p >= 0 && *p < g_size)), "MPI_IO");
    MPI_OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_WTIME_IS_GLOBAL, &p, &flag));
    CHECK(flag && (*p == 0 || *p == 1), "MPI_WTIME_IS_GLOBAL");
    MPI_OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_UNIVERSE_SIZE, &p, &flag));
    CHECK(!flag || *p >= g_size, "MPI_UNIVERSE_SIZE %d", flag ? *p : -1);
    MPI_OK(MPI_Attr_get(MPI_COMM_WORLD, MPI_TAG_UB, &p, &flag));
    CHECK(flag && *p >= 32767, "Attr_get(MPI_TAG_UB)");
    EXPECT_CLASS(MPI_Comm_set_attr(MPI_COMM_WORLD, MPI_TAG_UB, NULL), MPI_ERR_KEYVAL);

    /* keyvals */
    int extra = 77;
    int k_plus, k_null, k_dup, k_decline, k_fail, k_legacy;
    MPI_OK(MPI_Comm_create_keyval(copy_plus_one, count_delete, &k_plus, &extra));
    MPI_OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, count_delete, &k_null, NULL));
    MPI_OK(MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &k_dup, NULL));
    MPI_OK(MPI_Comm_create_keyval(copy_declines, count_delete, &k_decline, NULL));
    MPI_OK(MPI_Comm_create_keyval(copy_fails, MPI_COMM_NULL_DELETE_FN, &k_fail, NULL));
    MPI_OK(MPI_Keyval_create(MPI_DUP_FN, MPI_NULL_DELETE_FN, &k_legacy, NULL));

    MPI_Comm base, copy;
    MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &base));
    get_int_attr(base, k_plus, &flag);
    CHECK(flag == 0, "unset attribute found");
    MPI_OK(MPI_Comm_set_attr(base, k_plus, (void *)(intptr_t)(100 + g_rank)));
    MPI_OK(MPI_Comm_set_attr(base, k_null, (void *)(intptr_t)5));
    MPI_OK(MPI_Comm_set_attr(base, k_dup, (void *)(intptr_t)6));
    MPI_OK(MPI_Comm_set_attr(base, k_decline, (void *)(intptr_t)7));
    MPI_OK(MPI_Attr_put(base, k_legacy, (void *)(intptr_t)8));
    CHECK(get_int_attr(base, k_plus, &flag) == 100 + g_rank && flag, "k_plus value");
    /* replacing runs the delete callback on the old value */
    MPI_OK(MPI_Comm_set_attr(base, k_null, (void *)(intptr_t)9));
    CHECK(deletes == 1 && last_deleted_value == 5, "replace: deletes %d last %d", deletes, last_deleted_value);

    MPI_OK(MPI_Comm_dup(base, &copy));
    CHECK(copies == 2, "copy callbacks run: %d", copies);
    CHECK(get_int_attr(copy, k_plus, &flag) == 101 + g_rank && flag, "copied k_plus");
    get_int_attr(copy, k_null, &flag);
    CHECK(flag == 0, "NULL_COPY_FN attribute copied");
    CHECK(get_int_attr(copy, k_dup, &flag) == 6 && flag, "DUP_FN attribute");
    get_int_attr(copy, k_decline, &flag);
    CHECK(flag == 0, "declined attribute copied");
    void *lv = NULL;
    MPI_OK(MPI_Attr_get(copy, k_legacy, &lv, &flag));
    CHECK(flag && (intptr_t)lv == 8, "legacy DUP_FN attribute");

    /* delete_attr runs the callback; the attribute is gone */
    deletes = 0;
    MPI_OK(MPI_Comm_delete_attr(copy, k_plus));
    CHECK(deletes == 1 && last_deleted_value == 101 + g_rank, "delete_attr callback %d", last_deleted_value);
    get_int_attr(copy, k_plus, &flag);
    CHECK(flag == 0, "deleted attribute still there");

    /* freeing a keyval keeps its attributes alive until the communicator goes */
    int k_saved = k_decline;
    MPI_OK(MPI_Comm_free_keyval(&k_decline));
    CHECK(k_decline == MPI_KEYVAL_INVALID, "free_keyval sets KEYVAL_INVALID");
    MPI_OK(MPI_Comm_get_attr(base, k_saved, &lv, &flag));   /* still attached */
    CHECK(flag && (intptr_t)lv == 7, "attribute of a freed keyval: flag %d", flag);
    deletes = 0;
    MPI_OK(MPI_Comm_free(&base));   /* k_plus, k_null(9), k_decline: 3 delete callbacks */
    CHECK(deletes == 3, "Comm_free ran %d delete callbacks, expected 3", deletes);
    deletes = 0;
    MPI_OK(MPI_Comm_free(&copy));   /* only k_dup and legacy remain: no counting callbacks */
    CHECK(deletes == 0, "Comm_free of copy ran %d", deletes);

    /* a failing copy callback fails the dup */
    MPI_Comm c2, c3 = MPI_COMM_NULL;
    MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &c2));
    MPI_OK(MPI_Comm_set_attr(c2, k_fail, NULL));
    int rc = MPI_Comm_dup(c2, &c3);
    CHECK(rc != MPI_SUCCESS, "dup with a failing copy callback succeeded");
    MPI_OK(MPI_Comm_delete_attr(c2, k_fail));
    MPI_OK(MPI_Comm_free(&c2));

    /* COMM_SELF attributes are deleted at the start of MPI_Finalize */
    int k_self;
    MPI_OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, self_delete, &k_self, NULL));
    MPI_OK(MPI_Comm_set_attr(MPI_COMM_SELF, k_self, NULL));
    /* ... last set first (MPI-2.2: LIFO, like exit handlers). */
    int k_exit[3];
    for (int i = 0; i < 3; i++) {
        MPI_OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, record_exit, &k_exit[i], NULL));
        MPI_OK(MPI_Comm_set_attr(MPI_COMM_SELF, k_exit[i], (void *)(intptr_t)i));
        MPI_OK(MPI_Comm_free_keyval(&k_exit[i]));
    }

    /* errors */
    EXPECT_CLASS(MPI_Comm_set_attr(MPI_COMM_WORLD, MPI_KEYVAL_INVALID, NULL), MPI_ERR_KEYVAL);
    EXPECT_CLASS(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_KEYVAL_INVALID, &lv, &flag), MPI_ERR_KEYVAL);
    EXPECT_CLASS(MPI_Comm_set_attr(MPI_COMM_NULL, k_plus, NULL), MPI_ERR_COMM);
    EXPECT_CLASS(MPI_Comm_free_keyval(&k_decline), MPI_ERR_KEYVAL);
    MPI_OK(MPI_Comm_free_keyval(&k_plus));
    MPI_OK(MPI_Comm_free_keyval(&k_null));
    MPI_OK(MPI_Comm_free_keyval(&k_dup));
    MPI_OK(MPI_Comm_free_keyval(&k_fail));
    MPI_OK(MPI_Keyval_free(&k_legacy));

    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    MPI_OK(MPI_Finalize());
    CHECK(self_deletes == 1, "COMM_SELF delete callback ran %d times in Finalize", self_deletes);
    CHECK(exit_calls == 3 && exit_order[0] == 2 && exit_order[1] == 1 && exit_order[2] == 0,
          "COMM_SELF attributes deleted %d times, in order %d %d %d (want 2 1 0)", exit_calls,
          exit_order[0], exit_order[1], exit_order[2]);
    if (g_rank == 0) printf("OK\n");
    return 0;
}
