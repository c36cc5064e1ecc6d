/* Small local MPI functions mpi4py needs: MPI_Status_set_elements(_x) and
 * MPI_Status_set_cancelled read back by Get_count/Get_elements/
 * Test_cancelled; MPI_Add_error_class/code/string with Error_class,
 * Error_string and the MPI_LASTUSEDCODE attribute; MPI_Type_match_size;
 * MPI_Comm_get_parent; MPI_Comm_idup_with_info; MPI_Status_c2f/f2c,
 * MPI_Info_create_env and MPIX_C_FLOAT16. Errors included. */
#include "expect.h"

static void status_setters(void) {
    MPI_Status status;
    memset(&status, 0, sizeof status);
    int count = -1, elements = -1, flag = -1;
    MPI_OK(MPI_Status_set_elements(&status, MPI_INT, 5));
    MPI_OK(MPI_Get_count(&status, MPI_INT, &count));
    MPI_OK(MPI_Get_elements(&status, MPI_INT, &elements));
    CHECK(count == 5 && elements == 5, "count %d elements %d", count, elements);
    MPI_OK(MPI_Get_count(&status, MPI_SHORT, &count));
    CHECK(count == 10, "as shorts %d", count);

    /* Above an int count: Get_elements_x sees it, Get_count says UNDEFINED. */
    MPI_Count big = (MPI_Count)3 << 31, big_back = -1;
    MPI_OK(MPI_Status_set_elements_x(&status, MPI_INT, big));
    MPI_OK(MPI_Get_elements_x(&status, MPI_INT, &big_back));
    CHECK(big_back == big, "elements_x %lld", (long long)big_back);
    MPI_OK(MPI_Get_count(&status, MPI_INT, &count));
    CHECK(count == MPI_UNDEFINED, "count %d", count);
    /* A status holds 63 bits of count (MPICH's big_count_status). */
    MPI_Count huge = 0x7654321ff1234567LL, huge_back = -1;
    MPI_OK(MPI_Status_set_elements_x(&status, MPI_BYTE, huge));
    MPI_OK(MPI_Get_elements_x(&status, MPI_BYTE, &huge_back));
    CHECK(huge_back == huge, "63-bit count came back as %llx", (long long)huge_back);

    /* The cancelled flag and the count are independent. */
    MPI_OK(MPI_Status_set_elements(&status, MPI_INT, 2));
    MPI_OK(MPI_Status_set_cancelled(&status, 1));
    MPI_OK(MPI_Test_cancelled(&status, &flag));
    CHECK(flag == 1, "cancelled %d", flag);
    MPI_OK(MPI_Status_set_elements(&status, MPI_INT, 4));
    MPI_OK(MPI_Test_cancelled(&status, &flag));
    MPI_OK(MPI_Get_count(&status, MPI_INT, &count));
    CHECK(flag == 1 && count == 4, "flag %d count %d", flag, count);
    MPI_OK(MPI_Status_set_cancelled(&status, 0));
    MPI_OK(MPI_Test_cancelled(&status, &flag));
    MPI_OK(MPI_Get_count(&status, MPI_INT, &count));
    CHECK(flag == 0 && count == 4, "flag %d count %d", flag, count);

    errors_return();
    EXPECT_CLASS(MPI_Status_set_elements(&status, MPI_DATATYPE_NULL, 1), MPI_ERR_TYPE);
}

/* Derived types count basic elements; MPICH 4.0.2 counts whole datatype
 * elements instead (subtest of its own). */
static void status_derived(void) {
    MPI_Status status;
    memset(&status, 0, sizeof status);
    int count = -1, elements = -1;
    /* Derived: 7 ints of a 3-int type are 2 whole elements and 1 more. */
    MPI_Datatype three;
    MPI_OK(MPI_Type_contiguous(3, MPI_INT, &three));
    MPI_OK(MPI_Type_commit(&three));
    MPI_OK(MPI_Status_set_elements(&status, three, 7));
    MPI_OK(MPI_Get_elements(&status, three, &elements));
    MPI_OK(MPI_Get_count(&status, three, &count));
    CHECK(elements == 7 && count == MPI_UNDEFINED, "elements %d count %d", elements, count);
    MPI_OK(MPI_Get_count(&status, MPI_INT, &count));
    CHECK(count == 7, "ints %d", count);
    MPI_OK(MPI_Status_set_elements(&status, three, 6));
    MPI_OK(MPI_Get_count(&status, three, &count));
    CHECK(count == 2, "whole elements %d", count);
    MPI_OK(MPI_Type_free(&three));

    /* A struct of an int and a double: 3 elements are int, double, int. */
    int lengths[2] = {1, 1};
    MPI_Aint displacements[2] = {0, 8};
    MPI_Datatype types[2] = {MPI_INT, MPI_DOUBLE}, pair;
    MPI_OK(MPI_Type_create_struct(2, lengths, displacements, types, &pair));
    MPI_OK(MPI_Type_commit(&pair));
    MPI_OK(MPI_Status_set_elements(&status, pair, 3));
    MPI_OK(MPI_Get_elements(&status, pair, &elements));
    CHECK(elements == 3, "struct elements %d", elements);
    MPI_OK(MPI_Get_count(&status, MPI_BYTE, &count));
    CHECK(count == 16, "struct bytes %d", count);
    MPI_OK(MPI_Type_free(&pair));

}

static int recorded_code = -1;
static void record_code(MPI_Comm *comm, int *code, ...) {
    (void)comm;
    recorded_code = *code;
}

static void error_classes(void) {
    int *attribute = NULL, flag = 0, last = 0;
    MPI_OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &attribute, &flag));
    CHECK(flag && *attribute >= MPI_ERR_LASTCODE, "LASTUSEDCODE flag %d", flag);

    int new_class = -1;
    MPI_OK(MPI_Add_error_class(&new_class));
    CHECK(new_class > MPI_ERR_LASTCODE - 1, "class %d", new_class);
    MPI_OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &attribute, &flag));
    last = *attribute;
    CHECK(flag && last == new_class, "LASTUSEDCODE %d after class %d", last, new_class);
    char text[MPI_MAX_ERROR_STRING];
    int length = -1, class_of = -1;
    MPI_OK(MPI_Error_string(new_class, text, &length));
    CHECK(length == 0 && text[0] == 0, "string of a new class: '%s'", text);
    MPI_OK(MPI_Add_error_string(new_class, "an application class"));
    MPI_OK(MPI_Error_string(new_class, text, &length));
    CHECK(!strcmp(text, "an application class") && length == (int)strlen(text), "'%s'", text);
    MPI_OK(MPI_Error_class(new_class, &class_of));
    CHECK(class_of == new_class, "class of the class %d", class_of);

    int code = -1;
    MPI_OK(MPI_Add_error_code(new_class, &code));
    CHECK(code != new_class, "code %d", code);
    MPI_OK(MPI_Error_class(code, &class_of));
    CHECK(class_of == new_class, "class of the code %d", class_of);
    MPI_OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &attribute, &flag));
    /* MPI_LASTUSEDCODE is the largest class: a code does not move it. */
    CHECK(flag && *attribute == new_class, "LASTUSEDCODE %d after code %d", *attribute, code);
    MPI_OK(MPI_Add_error_string(code, "an application code"));
    MPI_OK(MPI_Error_string(code, text, &length));
    CHECK(!strcmp(text, "an application code"), "'%s'", text);
    MPI_OK(MPI_Add_error_string(code, "replaced"));
    MPI_OK(MPI_Error_string(code, text, &length));
    CHECK(!strcmp(text, "replaced"), "'%s'", text);

    /* MPI_Comm_call_errhandler hands a user handler the code it was
     * given, the application's own included. */
    MPI_Errhandler handler;
    MPI_OK(MPI_Comm_create_errhandler(record_code, &handler));
    MPI_Comm dup;
    MPI_OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    MPI_OK(MPI_Comm_set_errhandler(dup, handler));
    recorded_code = -1;
    MPI_OK(MPI_Comm_call_errhandler(dup, code));
    CHECK(recorded_code == code, "handler got %d, called with %d", recorded_code, code);
    MPI_OK(MPI_Comm_call_errhandler(dup, MPI_ERR_TAG));
    CHECK(recorded_code == MPI_ERR_TAG, "handler got %d for MPI_ERR_TAG", recorded_code);
    MPI_OK(MPI_Comm_free(&dup));
    MPI_OK(MPI_Errhandler_free(&handler));

    /* A code of a predefined class. */
    int other_code = -1;
    MPI_OK(MPI_Add_error_code(MPI_ERR_OTHER, &other_code));
    MPI_OK(MPI_Error_class(other_code, &class_of));
    CHECK(class_of == MPI_ERR_OTHER, "class %d", class_of);

    errors_return();
    /* Adding a string to a predefined code, or a code to a code, is
     * erroneous; MPICH accepts both, resmpi returns MPI_ERR_ARG. */
    EXPECT_CLASS(MPI_Add_error_class(NULL), MPI_ERR_ARG);
    EXPECT_CLASS(MPI_Add_error_code(new_class, NULL), MPI_ERR_ARG);
}

static void match_size(void) {
    struct {
        int typeclass, size;
    } cases[] = {{MPI_TYPECLASS_INTEGER, 1}, {MPI_TYPECLASS_INTEGER, 2},
                 {MPI_TYPECLASS_INTEGER, 4}, {MPI_TYPECLASS_INTEGER, 8},
                 {MPI_TYPECLASS_REAL, 4},    {MPI_TYPECLASS_REAL, 8},
                 {MPI_TYPECLASS_COMPLEX, 8}, {MPI_TYPECLASS_COMPLEX, 16}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        MPI_Datatype type = MPI_DATATYPE_NULL;
        int size = -1;
        MPI_OK(MPI_Type_match_size(cases[i].typeclass, cases[i].size, &type));
        MPI_OK(MPI_Type_size(type, &size));
        CHECK(size == cases[i].size, "class %d size %d gave size %d", cases[i].typeclass,
              cases[i].size, size);
    }
    MPI_Datatype type;
    errors_return();
    EXPECT_CLASS(MPI_Type_match_size(MPI_TYPECLASS_INTEGER, 3, &type), MPI_ERR_ARG);
    EXPECT_CLASS(MPI_Type_match_size(MPI_TYPECLASS_REAL, 5, &type), MPI_ERR_ARG);
    EXPECT_CLASS(MPI_Type_match_size(99, 4, &type), MPI_ERR_ARG);
}

static void communicators(void) {
    MPI_Comm parent = MPI_COMM_WORLD;
    MPI_OK(MPI_Comm_get_parent(&parent));
    CHECK(parent == MPI_COMM_NULL, "a parent without spawn");

    MPI_Info info;
    MPI_OK(MPI_Info_create(&info));
    MPI_OK(MPI_Info_set(info, "mpi_assert_no_any_tag", "false"));
    MPI_Comm duplicate;
    MPI_Request request;
    MPI_OK(MPI_Comm_idup_with_info(MPI_COMM_WORLD, info, &duplicate, &request));
    MPI_OK(MPI_Info_free(&info));
    MPI_OK(MPI_Wait(&request, MPI_STATUS_IGNORE));
    int result = -1, sum = 0;
    MPI_OK(MPI_Comm_compare(MPI_COMM_WORLD, duplicate, &result));
    CHECK(result == MPI_CONGRUENT, "compare %d", result);
    int one = 1;
    MPI_OK(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, duplicate));
    CHECK(sum == g_size, "sum %d", sum);
    MPI_Info got;
    MPI_OK(MPI_Comm_get_info(duplicate, &got));
    MPI_OK(MPI_Info_free(&got));
    MPI_OK(MPI_Comm_free(&duplicate));

    errors_return();
    EXPECT_CLASS(MPI_Comm_idup_with_info(MPI_COMM_NULL, MPI_INFO_NULL, &duplicate, &request),
                 MPI_ERR_COMM);
}

static void conversions(int argc, char **argv) {
    MPI_Status status, back;
    memset(&status, 0, sizeof status);
    memset(&back, 0xff, sizeof back);
    status.MPI_SOURCE = 3;
    status.MPI_TAG = 42;
    status.MPI_ERROR = MPI_ERR_TRUNCATE;
    MPI_OK(MPI_Status_set_elements(&status, MPI_INT, 7));
    MPI_OK(MPI_Status_set_cancelled(&status, 1));
    MPI_Fint fortran[MPI_F_STATUS_SIZE];
    MPI_OK(MPI_Status_c2f(&status, fortran));
    MPI_OK(MPI_Status_f2c(fortran, &back));
    int count = -1, cancelled = -1;
    MPI_OK(MPI_Get_count(&back, MPI_INT, &count));
    MPI_OK(MPI_Test_cancelled(&back, &cancelled));
    CHECK(back.MPI_SOURCE == 3 && back.MPI_TAG == 42 && back.MPI_ERROR == MPI_ERR_TRUNCATE &&
              count == 7 && cancelled == 1,
          "round trip gave source %d tag %d error %d count %d cancelled %d", back.MPI_SOURCE,
          back.MPI_TAG, back.MPI_ERROR, count, cancelled);

    /* A single-completion call leaves MPI_ERROR alone (MPI 3.2.5). */
    int ping = 5, pong = 0;
    back.MPI_ERROR = -777;
    MPI_OK(MPI_Sendrecv(&ping, 1, MPI_INT, g_rank, 1, &pong, 1, MPI_INT, g_rank, 1, MPI_COMM_WORLD, &back));
    CHECK(pong == 5 && back.MPI_ERROR == -777, "Sendrecv wrote MPI_ERROR %d", back.MPI_ERROR);

    int size = -1;
    MPI_OK(MPI_Type_size(MPIX_C_FLOAT16, &size));
    CHECK(size == 2, "MPIX_C_FLOAT16 has size %d", size);

    MPI_Info env;
    char value[MPI_MAX_INFO_VAL + 1];
    int flag = 0;
    MPI_OK(MPI_Info_create_env(argc, argv, &env));
    /* Which keys it has is the implementation's choice (MPICH's is empty);
     * a "command" it has is the program's. */
    MPI_OK(MPI_Info_get(env, "command", MPI_MAX_INFO_VAL, value, &flag));
    CHECK(!flag || !strcmp(value, argv[0]), "command '%s', expected '%s'", value, argv[0]);
    MPI_OK(MPI_Info_free(&env));
}

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    if (selected(argc, argv, "status")) status_setters();
    if (selected(argc, argv, "status_derived")) status_derived();
    if (selected(argc, argv, "errorclass")) error_classes();
    if (selected(argc, argv, "matchsize")) match_size();
    if (selected(argc, argv, "conversions")) conversions(argc, argv);
    if (selected(argc, argv, "comm")) communicators();
    return test_finish();
}
