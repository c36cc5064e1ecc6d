/* Deterministic output for ABI comparison: the same source compiled with
 * MPICH's mpicc and with resmpi's mpicc must print the same lines under any
 * conforming launcher.  Every rank prints lines "R<rank> key=value".
 * usage: abi_output */
#include "common.h"
#include <stddef.h>

int main(int argc, char **argv) {
    test_init(&argc, &argv);
    int to = (g_rank + 1) % g_size, from = (g_rank - 1 + g_size) % g_size;
    printf("R%d size=%d sizeof_status=%zu source_off=%zu tag_off=%zu error_off=%zu\n", g_rank, g_size,
           sizeof(MPI_Status), offsetof(MPI_Status, MPI_SOURCE), offsetof(MPI_Status, MPI_TAG),
           offsetof(MPI_Status, MPI_ERROR));
    MPI_Datatype types[] = {MPI_CHAR, MPI_INT, MPI_LONG, MPI_DOUBLE, MPI_LONG_DOUBLE, MPI_DOUBLE_INT,
                            MPI_2INT, MPI_C_DOUBLE_COMPLEX, MPI_INT64_T, MPI_AINT, MPI_COUNT};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        int sz;
        MPI_Aint lb, ext;
        MPI_OK(MPI_Type_size(types[i], &sz));
        MPI_OK(MPI_Type_get_extent(types[i], &lb, &ext));
        printf("R%d type%zu size=%d lb=%ld extent=%ld\n", g_rank, i, sz, (long)lb, (long)ext);
    }
    /* p2p with status */
    int sb[100], rb[100];
    for (int i = 0; i < 100; i++) sb[i] = g_rank * 100 + i;
    MPI_Status st;
    MPI_OK(MPI_Sendrecv(sb, 37, MPI_INT, to, 9, rb, 100, MPI_INT, from, 9, MPI_COMM_WORLD, &st));
    int c;
    MPI_OK(MPI_Get_count(&st, MPI_INT, &c));
    unsigned long cs = 0;
    for (int i = 0; i < c; i++) cs = cs * 31 + (unsigned long)rb[i];
    printf("R%d recv source=%d tag=%d count=%d checksum=%lu\n", g_rank, st.MPI_SOURCE, st.MPI_TAG, c, cs);
    /* PROC_NULL, ANY_SOURCE */
    MPI_OK(MPI_Recv(rb, 1, MPI_INT, MPI_PROC_NULL, 3, MPI_COMM_WORLD, &st));
    MPI_OK(MPI_Get_count(&st, MPI_INT, &c));
    printf("R%d procnull source=%d tag=%d count=%d\n", g_rank, st.MPI_SOURCE, st.MPI_TAG, c);
    /* collectives */
    double dv = g_rank + 0.25, ds = 0;
    MPI_OK(MPI_Allreduce(&dv, &ds, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    struct { double v; int i; } loc = {(double)((g_rank * 3) % 4), g_rank}, lo;
    MPI_OK(MPI_Allreduce(&loc, &lo, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD));
    long lv = 1L << (g_rank % 40), lr = 0;
    MPI_OK(MPI_Allreduce(&lv, &lr, 1, MPI_LONG, MPI_BOR, MPI_COMM_WORLD));
    int bv = g_rank == 0 ? 4242 : 0;
    MPI_OK(MPI_Bcast(&bv, 1, MPI_INT, 0, MPI_COMM_WORLD));
    printf("R%d allreduce sum=%.2f maxloc=(%.1f,%d) bor=%ld bcast=%d\n", g_rank, ds, lo.v, lo.i, lr, bv);
    /* communicators */
    MPI_Comm sp;
    int sr, ss, cmp;
    MPI_OK(MPI_Comm_split(MPI_COMM_WORLD, g_rank % 2, -g_rank, &sp));
    MPI_OK(MPI_Comm_rank(sp, &sr));
    MPI_OK(MPI_Comm_size(sp, &ss));
    MPI_OK(MPI_Comm_compare(MPI_COMM_WORLD, sp, &cmp));
    printf("R%d split rank=%d size=%d compare=%d\n", g_rank, sr, ss, cmp);
    MPI_OK(MPI_Comm_free(&sp));
    /* error class through ERRORS_RETURN */
    MPI_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int rc = MPI_Send(sb, 1, MPI_INT, g_size, 0, MPI_COMM_WORLD), cls = -1;
    MPI_Error_class(rc, &cls);
    printf("R%d bad-rank class=%d\n", g_rank, cls);
    fflush(stdout);
    return test_finish();
}
