/* Attributes on datatypes (MPI_Type_create_keyval and friends): copy
 * callbacks on MPI_Type_dup (NULL_COPY, DUP_FN, a counting copier that
 * changes the value, one that declines), delete callbacks on Type_free /
 * delete_attr / replacement, attributes on a predefined type, a failing
 * delete callback failing Type_free, and the errors.
 * usage: type_attr [strict]  (strict: also what MPICH does differently) */
#include <string.h>

#include "common.h"
#include "expect.h"

static int copies, deletes, last_deleted = -1;

static int copy_plus_one(MPI_Datatype t, int key, void *extra, void *in, void *out, int *flag) {
    (void)t; (void)key;
    copies++;
    CHECK(*(int *)extra == 77, "extra state %d", *(int *)extra);
    *(void **)out = (void *)((intptr_t)in + 1);
    *flag = 1;
    return MPI_SUCCESS;
}
static int copy_declines(MPI_Datatype t, int key, void *extra, void *in, void *out, int *flag) {
    (void)t; (void)key; (void)extra; (void)in; (void)out;
    copies++;
    *flag = 0;
    return MPI_SUCCESS;
}
static int count_delete(MPI_Datatype t, int key, void *value, void *extra) {
    (void)key; (void)extra;
    int size = -1;
    /* A callback may call MPI on the type it is deleting from. */
    MPI_OK(MPI_Type_size(t, &size));
    CHECK(size > 0, "size %d in the delete callback", size);
    deletes++;
    last_deleted = (int)(intptr_t)value;
    return MPI_SUCCESS;
}
static int delete_fails(MPI_Datatype t, int key, void *value, void *extra) {
    (void)t; (void)key; (void)value; (void)extra;
    return MPI_ERR_OTHER;
}

static int get(MPI_Datatype t, int key, int *flag) {
    void *v = NULL;
    MPI_OK(MPI_Type_get_attr(t, key, &v, flag));
    return *flag ? (int)(intptr_t)v : -1;
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    errors_return();
    int flag = -1, extra = 77;
    int k_plus, k_decline, k_null, k_dup, k_fail;
    MPI_OK(MPI_Type_create_keyval(copy_plus_one, count_delete, &k_plus, &extra));
    MPI_OK(MPI_Type_create_keyval(copy_declines, count_delete, &k_decline, NULL));
    MPI_OK(MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN, &k_null, NULL));
    MPI_OK(MPI_Type_create_keyval(MPI_TYPE_DUP_FN, MPI_TYPE_NULL_DELETE_FN, &k_dup, NULL));
    MPI_OK(MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, delete_fails, &k_fail, NULL));

    MPI_Datatype vec, copy;
    MPI_OK(MPI_Type_vector(3, 2, 4, MPI_INT, &vec));
    get(vec, k_plus, &flag);
    CHECK(flag == 0, "an attribute never set is found");
    MPI_OK(MPI_Type_set_attr(vec, k_plus, (void *)(intptr_t)10));
    MPI_OK(MPI_Type_set_attr(vec, k_decline, (void *)(intptr_t)20));
    MPI_OK(MPI_Type_set_attr(vec, k_null, (void *)(intptr_t)30));
    MPI_OK(MPI_Type_set_attr(vec, k_dup, (void *)(intptr_t)40));
    CHECK(get(vec, k_plus, &flag) == 10 && flag, "k_plus reads %d", get(vec, k_plus, &flag));

    /* replacement runs the delete callback on the old value */
    MPI_OK(MPI_Type_set_attr(vec, k_plus, (void *)(intptr_t)11));
    CHECK(deletes == 1 && last_deleted == 10, "replacement: %d deletes, last %d", deletes, last_deleted);

    /* dup: copy callbacks decide what the duplicate gets */
    MPI_OK(MPI_Type_dup(vec, &copy));
    CHECK(copies == 2, "%d copy callbacks ran (want 2: plus-one and decline)", copies);
    CHECK(get(copy, k_plus, &flag) == 12, "the duplicate's k_plus is %d (want 12)", get(copy, k_plus, &flag));
    get(copy, k_decline, &flag);
    CHECK(flag == 0, "a declined attribute was copied");
    get(copy, k_null, &flag);
    CHECK(flag == 0, "MPI_TYPE_NULL_COPY_FN copied");
    CHECK(get(copy, k_dup, &flag) == 40, "MPI_TYPE_DUP_FN gave %d", get(copy, k_dup, &flag));
    CHECK(get(vec, k_plus, &flag) == 11, "the original changed");

    /* delete_attr runs the callback; deleting what is not set does
       nothing (as in MPICH) */
    MPI_OK(MPI_Type_delete_attr(copy, k_plus));
    CHECK(deletes == 2 && last_deleted == 12, "delete_attr: %d deletes, last %d", deletes, last_deleted);
    MPI_OK(MPI_Type_delete_attr(copy, k_plus));
    CHECK(deletes == 2, "deleting an unset attribute ran a callback");

    /* free runs the delete callbacks of what is left (MPICH runs them
       only once the duplicate, which refers to the original, is freed
       too) */
    MPI_OK(MPI_Type_free(&vec));
    MPI_OK(MPI_Type_free(&copy));
    CHECK(deletes == 4, "Type_free ran %d delete callbacks in all (want 4)", deletes);

    /* a predefined type takes attributes too */
    MPI_OK(MPI_Type_set_attr(MPI_INT, k_plus, (void *)(intptr_t)5));
    CHECK(get(MPI_INT, k_plus, &flag) == 5, "MPI_INT's attribute");
    MPI_OK(MPI_Type_delete_attr(MPI_INT, k_plus));
    CHECK(deletes == 5 && last_deleted == 5, "predefined delete: %d deletes", deletes);

    /* with "strict" (resmpi): a failing delete callback fails Type_free,
       which frees nothing (MPICH defers the callbacks and ignores it) */
    int size = -1;
    if (argc > 1 && strcmp(argv[1], "strict") == 0) {
        MPI_Datatype doomed;
        MPI_OK(MPI_Type_contiguous(2, MPI_DOUBLE, &doomed));
        MPI_OK(MPI_Type_set_attr(doomed, k_fail, (void *)(intptr_t)1));
        MPI_Datatype handle = doomed;
        EXPECT_CLASS(MPI_Type_free(&handle), MPI_ERR_OTHER);
        MPI_OK(MPI_Type_size(doomed, &size));
        CHECK(size == 16, "the type survived its failed free: size %d", size);
    }

    /* errors */
    EXPECT_CLASS(MPI_Type_set_attr(MPI_INT, MPI_KEYVAL_INVALID, NULL), MPI_ERR_KEYVAL);
    EXPECT_CLASS(MPI_Type_get_attr(MPI_INT, MPI_KEYVAL_INVALID, &size, &flag), MPI_ERR_KEYVAL);
    EXPECT_CLASS(MPI_Type_set_attr(MPI_DATATYPE_NULL, k_plus, NULL), MPI_ERR_TYPE);

    /* a freed keyval still serves the attributes set with it */
    MPI_Datatype keep;
    MPI_OK(MPI_Type_contiguous(3, MPI_INT, &keep));
    MPI_OK(MPI_Type_set_attr(keep, k_decline, (void *)(intptr_t)9));
    MPI_OK(MPI_Type_free_keyval(&k_decline));
    CHECK(k_decline == MPI_KEYVAL_INVALID, "free_keyval did not reset the handle");
    MPI_OK(MPI_Type_free(&keep));
    CHECK(deletes == 6 && last_deleted == 9, "a freed keyval's delete callback: %d deletes", deletes);

    MPI_OK(MPI_Type_free_keyval(&k_plus));
    MPI_OK(MPI_Type_free_keyval(&k_null));
    MPI_OK(MPI_Type_free_keyval(&k_dup));
    MPI_OK(MPI_Barrier(MPI_COMM_WORLD));
    return test_finish();
}
